/*
 * slabfeed._slabfeed.Writer (py_writer.c): the type spec, for
 * py_module.c.
 */
#ifndef SFPY_WRITER_H
#define SFPY_WRITER_H

#include "py_state.h"

extern PyType_Spec sfpy_writer_spec;

#endif /* SFPY_WRITER_H */
