/*
 * slabfeed.Tensor (py_tensor.c): one tensor of a batch over the loader's
 * memory, exported with DLPack. Used by the batches of py_loader.c and by
 * the Writer (which recognises its own tensors).
 */
#ifndef SFPY_TENSOR_H
#define SFPY_TENSOR_H

#include "py_liveness.h"

/* The Tensor type's spec, for py_module.c. */
extern PyType_Spec sfpy_tensor_spec;

/* sfpy_tensor_new - a new Tensor over t (one of the batch's, handed out in
 * `generation` of L): `device` -1 for host memory, else its CUDA device,
 * with the stream given to next and the batch's ready event. NULL with an
 * exception. */
PyObject *sfpy_tensor_new(sfpy_state *st, sfpy_loader *L, uint64_t generation,
                          const slabfeed_tensor *t, int device, void *stream,
                          void *ready_event);

/* sfpy_tensor_stream - when o is a slabfeed.Tensor of device memory, the
 * stream its batch was handed to by next (the batch is ready there, and
 * work on it may use it without further waits); NULL for any other object
 * and for host tensors. Does not check that the batch is live (exporting
 * it does) and runs no Python code. */
void *sfpy_tensor_stream(sfpy_state *st, PyObject *o);

#endif /* SFPY_TENSOR_H */
