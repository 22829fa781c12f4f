/*
 * slabfeed._slabfeed.Loader and slabfeed.Batch (py_loader.c): the type
 * specs, for py_module.c. The object's struct is in py_liveness.h.
 */
#ifndef SFPY_LOADER_H
#define SFPY_LOADER_H

#include "py_state.h"

extern PyType_Spec sfpy_loader_spec;
extern PyType_Spec sfpy_batch_spec;

#endif /* SFPY_LOADER_H */
