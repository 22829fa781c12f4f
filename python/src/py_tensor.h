/*
 * The constructor of slabfeed.Tensor (py_tensor.c), for the batches of
 * py_loader.c.
 */
#ifndef SFPY_TENSOR_H
#define SFPY_TENSOR_H

#include "py_loader.h"

/* A new Tensor over t (one of the batch's), or NULL with an exception. */
PyObject *sfpy_tensor_new(sfpy_state *st, sfpy_loader *L, uint64_t generation,
                          const slabfeed_tensor *t, int device, void *stream,
                          void *ready_event);

#endif /* SFPY_TENSOR_H */
