/*
 * The Loader object as its batches and tensors see it: the struct, and the
 * generation rule that makes a stale batch raise. py_loader.c implements
 * the type; py_tensor.c needs only this header (the rule is inline here),
 * so py_tensor.c does not depend on py_loader.c.
 */
#ifndef SFPY_LOADER_H
#define SFPY_LOADER_H

#include "sfpy.h"

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

/* The cudaStream_t meant by a Python stream argument: None gives NULL (none
 * given), an int is a handle (1 and 2: CUDA's legacy and per-thread
 * default streams; 0 is ambiguous and refused, as in DLPack), a stream
 * object is read through __cuda_stream__() or .cuda_stream, whose handle 0
 * (torch's default stream) is the legacy default stream. Returns 0, or -1
 * with a Python exception set. */
int sfpy_parse_stream(PyObject *o, void **out);

/* An exception as the ranks agree on it before a collective call (Loader
 * and Writer): a slabfeed status, a TypeError, or anything else, and its
 * message. */
enum { AGREE_STATUS = 1, AGREE_TYPE = 2, AGREE_OTHER = 3 };
typedef struct {
  int kind;   /* AGREE_*: a slabfeed status, a TypeError, anything else */
  int status; /* AGREE_STATUS: the slabfeed_status */
  char msg[1024];
} agree_pkt;

/* Sets p->kind and p->status from the exception type et (NULL: other). */
void sfpy_agree_classify(sfpy_state *st, PyObject *et, agree_pkt *p);

#define SFPY_BUSY_MESSAGE                                                      \
  "slabfeed: the loader is in use by another thread (a loader is not "         \
  "thread safe: use one per thread, or a lock)"

/* Returns 0 when tensors of `generation` may still be used; otherwise -1
 * with StaleBatchError (next/seek/close since, or closed), ForkedError (in
 * a forked child) or StateError (another thread is inside a call). */
static inline int sfpy_loader_check_live(sfpy_loader *L, uint64_t generation)
{
  sfpy_state *st = sfpy_state_of(Py_TYPE(L));
  uint64_t e, s;
  if (L->l == NULL) {
    sfpy_raise_stale(st, "slabfeed: this batch belongs to a closed loader");
    return -1;
  }
  /* Forked first: a call of next in the child has moved the generation. */
  if (!L->busy && slabfeed_tell(L->l, &e, &s) == SLABFEED_ERR_FORKED) {
    sfpy_raise(st, SLABFEED_ERR_FORKED,
               "slabfeed: this batch belongs to a loader of the parent "
               "process (forked since): MPI windows, CUDA state and the "
               "loader thread do not survive fork(); open a new loader in "
               "the child (or do not fork: use threads)");
    return -1;
  }
  if (L->generation != generation) {
    sfpy_raise_stale(st, "slabfeed: this batch is stale: next(), seek() or "
                         "close() was called on its loader since it was handed "
                         "out, and its memory may hold another batch by now");
    return -1;
  }
  if (L->busy) {
    sfpy_raise(st, SLABFEED_ERR_STATE, SFPY_BUSY_MESSAGE);
    return -1;
  }
  return 0;
}

#endif /* SFPY_LOADER_H */
