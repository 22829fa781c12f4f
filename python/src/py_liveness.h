/*
 * The Loader object as its batches and tensors (and the Writer) see it:
 * the struct, and the generation rule that makes a stale batch raise
 * (py_liveness.c). py_loader.c implements the type; py_tensor.c and
 * py_writer.c need only this file, so nothing of the extension depends on
 * py_loader.c but the module definition.
 */
#ifndef SFPY_LIVENESS_H
#define SFPY_LIVENESS_H

#include "py_cuda.h"
#include "py_state.h"

/* A loader. Batches and tensors hold a reference to it and the generation
 * they were handed out in; next, seek and close start a new generation. */
typedef struct {
  PyObject_HEAD slabfeed_loader *l; /* NULL once closed */
  uint64_t generation;
  int device;   /* -1: host batches */
  int prefetch; /* ring depth K */
  int batch;    /* local batch B */
  int has_target;
  int ndhwc;         /* batches are laid out (B,D,H,W,C) */
  int busy;          /* a call runs with the GIL released (not thread safe) */
  int opened;        /* __init__ ran once: never re-initialised (a batch of
                        the old loader would pass check_live) */
  sfpy_cuda *cuda;   /* device loaders only */
  void *last_stream; /* the stream of the last next (device) */
  PyObject *options; /* dict: every option's value at open (strong) */
} sfpy_loader;

#define SFPY_BUSY_MESSAGE                                                      \
  "slabfeed: the loader is in use by another thread (a loader is not "         \
  "thread safe: use one per thread, or a lock)"

/* sfpy_loader_check_live - 0 when tensors of `generation` of L may still
 * be used; otherwise -1 with StaleBatchError (next/seek/close since, or
 * closed), ForkedError (in a forked child) or StateError (another thread
 * is inside a call). Runs no Python code. */
int sfpy_loader_check_live(sfpy_loader *L, uint64_t generation);

#endif /* SFPY_LIVENESS_H */
