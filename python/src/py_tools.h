/*
 * The tools of slabfeed_tools.h for Python (py_tools.c): the Reader type's
 * spec and the module-level functions, for py_module.c.
 */
#ifndef SFPY_TOOLS_H
#define SFPY_TOOLS_H

#include "py_state.h"

extern PyType_Spec sfpy_reader_spec;

/* generate(comm_f2c, path, **options): slabfeed_generate (collective). */
PyObject *sfpy_generate(PyObject *module, PyObject *args, PyObject *kw);

/* describe(path, dataset, layout='auto') -> dict: slabfeed_describe. */
PyObject *sfpy_describe(PyObject *module, PyObject *args, PyObject *kw);

/* field_stats(comm_f2c, path, dataset, layout='auto', log_a=None) -> list:
 * slabfeed_field_stats (collective). */
PyObject *sfpy_field_stats(PyObject *module, PyObject *args, PyObject *kw);

#endif /* SFPY_TOOLS_H */
