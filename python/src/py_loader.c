/*
 * slabfeed._slabfeed.Loader and Batch: the options agreed on by all ranks,
 * slabfeed_open/next/seek/tell/close with the GIL released around every
 * call that may block, and the generations that make stale batches raise
 * (the rule itself is in py_liveness.c).
 */
#include "py_loader.h"

#include "py_args.h"
#include "py_cuda.h"
#include "py_errors.h"
#include "py_liveness.h"
#include "py_mpi.h"
#include "py_options.h"
#include "py_tensor.h"

#include <string.h>
#include <time.h>

/* ---- Batch ----------------------------------------------------------------
 */

typedef struct {
  PyObject_HEAD sfpy_loader *loader; /* strong */
  uint64_t generation;
  slabfeed_batch b; /* pointers into the loader's memory */
  void *stream;     /* the stream given to next (device batches) */
  int nb;           /* batch size B of meta (the loader's when handed out) */
  int64_t *meta;    /* copies: [B][3] origins, [B] samples, [B] symmetries */
  int np;           /* parameters per sample */
  float *params;    /* copy: [B][np], NULL at np 0 */
  int naug[2];      /* channels of input, target with augmentation, or 0 */
  float *aug[2];    /* copies: [B][2][C] factors and offsets */
  PyObject *input;  /* Tensor, made on first access */
  PyObject *target; /* Tensor or None, made on first access */
} sfpy_batch;

/* batch_new - a Batch for *b, handed out by the last next of L (whose
 * generation it takes); the metadata is copied. NULL with an exception. */
static PyObject *batch_new(sfpy_state *st, sfpy_loader *L,
                           const slabfeed_batch *b, void *stream)
{
  if (st->batch_type == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "slabfeed: the module is gone");
    return NULL;
  }
  allocfunc alloc = (allocfunc)PyType_GetSlot(st->batch_type, Py_tp_alloc);
  sfpy_batch *B = (sfpy_batch *)alloc(st->batch_type, 0);
  if (B == NULL)
    return NULL;
  const int nb = L->batch;
  /* origin [3], sample, symmetry, tile [9], volume per slot */
  B->meta = PyMem_Malloc(sizeof(int64_t) * 15 * (size_t)nb);
  if (B->meta == NULL) {
    Py_DECREF(B);
    return PyErr_NoMemory();
  }
  memcpy(B->meta, b->origin, sizeof(int64_t) * 3 * (size_t)nb);
  memcpy(B->meta + 3 * nb, b->sample, sizeof(int64_t) * (size_t)nb);
  for (int i = 0; i < nb; i++)
    B->meta[4 * nb + i] = b->symmetry[i];
  if (b->tile != NULL)
    memcpy(B->meta + 5 * nb, b->tile, sizeof(int64_t) * 9 * (size_t)nb);
  for (int i = 0; i < nb; i++)
    B->meta[14 * nb + i] = b->volume != NULL ? b->volume[i] : 0;
  const float *aug[2] = {b->input_aug, b->target_aug};
  const slabfeed_tensor *ts[2] = {&b->input, &b->target};
  for (int d = 0; d < 2; d++) {
    const slabfeed_tensor *t = ts[d];
    B->naug[d] = aug[d] == NULL ? 0 : (int)t->shape[L->ndhwc ? 4 : 1];
    if (B->naug[d] == 0)
      continue;
    const size_t n = (size_t)nb * 2 * (size_t)B->naug[d];
    if ((B->aug[d] = PyMem_Malloc(sizeof(float) * n)) == NULL) {
      Py_DECREF(B);
      return PyErr_NoMemory();
    }
    memcpy(B->aug[d], aug[d], sizeof(float) * n);
  }
  B->np = b->params != NULL ? b->n_params : 0;
  if (B->np > 0) {
    B->params = PyMem_Malloc(sizeof(float) * (size_t)B->np * (size_t)nb);
    if (B->params == NULL) {
      Py_DECREF(B);
      return PyErr_NoMemory();
    }
    memcpy(B->params, b->params, sizeof(float) * (size_t)B->np * (size_t)nb);
  }
  Py_INCREF(L);
  B->loader = L;
  B->generation = L->generation;
  B->b = *b;
  B->stream = stream;
  B->nb = nb;
  return (PyObject *)B;
}

static void batch_dealloc(sfpy_batch *self)
{
  PyTypeObject *tp = Py_TYPE(self);
  Py_XDECREF(self->input);
  Py_XDECREF(self->target);
  Py_XDECREF(self->loader);
  PyMem_Free(self->meta);
  PyMem_Free(self->params);
  PyMem_Free(self->aug[0]);
  PyMem_Free(self->aug[1]);
  freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  f(self);
  Py_DECREF(tp);
}

/* The cached Tensor of slot *slot over t (made on first access). */
static PyObject *batch_tensor(sfpy_batch *self, PyObject **slot,
                              const slabfeed_tensor *t)
{
  if (*slot == NULL) {
    if (t->data == NULL) {
      *slot = Py_NewRef(Py_None);
    } else {
      *slot = sfpy_tensor_new(sfpy_state_of(Py_TYPE(self)), self->loader,
                              self->generation, t, self->b.device, self->stream,
                              self->b.ready_event);
      if (*slot == NULL)
        return NULL;
    }
  }
  return Py_NewRef(*slot);
}

static PyObject *batch_get_input(sfpy_batch *self, void *c)
{
  (void)c;
  return batch_tensor(self, &self->input, &self->b.input);
}

static PyObject *batch_get_target(sfpy_batch *self, void *c)
{
  (void)c;
  return batch_tensor(self, &self->target, &self->b.target);
}

static PyObject *batch_get_epoch(sfpy_batch *self, void *c)
{
  (void)c;
  return PyLong_FromUnsignedLongLong(self->b.epoch);
}

static PyObject *batch_get_step(sfpy_batch *self, void *c)
{
  (void)c;
  return PyLong_FromUnsignedLongLong(self->b.step);
}

/* A tuple of n int64 values from v with stride `stride`. */
static PyObject *int_tuple(const int64_t *v, int n, int stride)
{
  PyObject *t = PyTuple_New(n);
  if (t == NULL)
    return NULL;
  for (int i = 0; i < n; i++) {
    PyObject *x = PyLong_FromLongLong(v[(size_t)i * (size_t)stride]);
    if (x == NULL || PyTuple_SetItem(t, i, x) < 0) {
      Py_DECREF(t);
      return NULL;
    }
  }
  return t;
}

/* nb rows of `width` ints from v (row i at v + width * i) as a tuple of
 * tuples. */
static PyObject *int_rows(const int64_t *v, int nb, int width)
{
  PyObject *t = PyTuple_New(nb);
  if (t == NULL)
    return NULL;
  for (int i = 0; i < nb; i++) {
    PyObject *o = int_tuple(v + (size_t)width * (size_t)i, width, 1);
    if (o == NULL || PyTuple_SetItem(t, i, o) < 0) {
      Py_DECREF(t);
      return NULL;
    }
  }
  return t;
}

static PyObject *batch_get_origin(sfpy_batch *self, void *c)
{
  (void)c;
  return int_rows(self->meta, self->nb, 3);
}

static PyObject *batch_get_sample(sfpy_batch *self, void *c)
{
  (void)c;
  const int nb = self->nb;
  return int_tuple(self->meta + 3 * nb, nb, 1);
}

static PyObject *batch_get_symmetry(sfpy_batch *self, void *c)
{
  (void)c;
  const int nb = self->nb;
  return int_tuple(self->meta + 4 * nb, nb, 1);
}

static PyObject *batch_get_volume(sfpy_batch *self, void *c)
{
  (void)c;
  const int nb = self->nb;
  return int_tuple(self->meta + 14 * nb, nb, 1);
}

/* n rows of k floats from v as a tuple of tuples. */
static PyObject *float_rows(const float *v, int n, int k)
{
  PyObject *t = PyTuple_New(n);
  for (int i = 0; t != NULL && i < n; i++) {
    PyObject *row = PyTuple_New(k);
    for (int j = 0; row != NULL && j < k; j++) {
      PyObject *x = PyFloat_FromDouble(v[(size_t)i * (size_t)k + (size_t)j]);
      if (x == NULL || PyTuple_SetItem(row, j, x) < 0)
        Py_CLEAR(row);
    }
    if (row == NULL || PyTuple_SetItem(t, i, row) < 0)
      Py_CLEAR(t);
  }
  return t;
}

static PyObject *batch_get_params(sfpy_batch *self, void *c)
{
  (void)c;
  if (self->np == 0)
    Py_RETURN_NONE;
  return float_rows(self->params, self->nb, self->np);
}

/* ((factors), (offsets)) per sample of dataset d, or None. */
static PyObject *batch_aug(sfpy_batch *self, int d)
{
  const int C = self->naug[d];
  if (C == 0)
    Py_RETURN_NONE;
  PyObject *t = PyTuple_New(self->nb);
  for (int i = 0; t != NULL && i < self->nb; i++) {
    PyObject *pair = float_rows(self->aug[d] + (size_t)i * 2 * (size_t)C, 2, C);
    if (pair == NULL || PyTuple_SetItem(t, i, pair) < 0)
      Py_CLEAR(t);
  }
  return t;
}

static PyObject *batch_get_input_aug(sfpy_batch *self, void *c)
{
  (void)c;
  return batch_aug(self, 0);
}

static PyObject *batch_get_target_aug(sfpy_batch *self, void *c)
{
  (void)c;
  return batch_aug(self, 1);
}

static PyObject *batch_get_count(sfpy_batch *self, void *c)
{
  (void)c;
  return PyLong_FromLong(self->b.valid);
}

static PyObject *batch_get_tile(sfpy_batch *self, void *c)
{
  (void)c;
  if (self->b.tile == NULL)
    Py_RETURN_NONE;
  return int_rows(self->meta + 5 * self->nb, self->nb, 9);
}

static PyObject *batch_get_device(sfpy_batch *self, void *c)
{
  (void)c;
  return PyLong_FromLong(self->b.device);
}

static PyObject *batch_get_stream(sfpy_batch *self, void *c)
{
  (void)c;
  if (self->b.device < 0)
    Py_RETURN_NONE;
  return PyLong_FromVoidPtr(self->stream);
}

static PyObject *batch_get_valid(sfpy_batch *self, void *c)
{
  (void)c;
  const sfpy_loader *L = self->loader;
  return PyBool_FromLong(L->l != NULL && L->generation == self->generation);
}

static PyObject *batch_repr(sfpy_batch *self)
{
  return PyUnicode_FromFormat(
      "<slabfeed.Batch epoch=%llu step=%llu batch=%d device=%d%s>",
      (unsigned long long)self->b.epoch, (unsigned long long)self->b.step,
      self->nb, self->b.device,
      (self->loader->l != NULL && self->loader->generation == self->generation)
          ? ""
          : " stale");
}

static PyGetSetDef batch_getset[] = {
    {"input", (getter)batch_get_input, NULL,
     "The input tensor (B,C,D,H,W) or (B,D,H,W,C): a slabfeed.Tensor that "
     "speaks DLPack (torch.from_dlpack, numpy.from_dlpack: zero copy).",
     NULL},
    {"target", (getter)batch_get_target, NULL,
     "The target tensor, or None when the loader has no target.", NULL},
    {"epoch", (getter)batch_get_epoch, NULL, "Epoch of this batch.", NULL},
    {"step", (getter)batch_get_step, NULL, "Step of this batch in its epoch.",
     NULL},
    {"origin", (getter)batch_get_origin, NULL,
     "Crop origins ((z, y, x), ...) of the B samples (a copy: stays "
     "readable after the batch is stale).",
     NULL},
    {"sample", (getter)batch_get_sample, NULL,
     "Global sample indices within the epoch of the B samples (a copy).", NULL},
    {"symmetry", (getter)batch_get_symmetry, NULL,
     "Symmetry ids in [0, 48) of the B samples (a copy).", NULL},
    {"volume", (getter)batch_get_volume, NULL,
     "The volume of each of the B samples: its index in Loader.volumes(); "
     "origin is in that volume's coordinates (a copy).",
     NULL},
    {"params", (getter)batch_get_params, NULL,
     "The per-volume parameters (option params) of each of the B samples' "
     "volumes: ((p0, p1, ...), ...) as float32 values after params_norm (a "
     "copy); None when no parameters were asked for.",
     NULL},
    {"input_aug", (getter)batch_get_input_aug, NULL,
     "Amplitude augmentation of the input per sample: ((m_0, ..., m_C-1), "
     "(a_0, ..., a_C-1)), the factor and offset of each file channel (a "
     "copy); None without augmentation.",
     NULL},
    {"target_aug", (getter)batch_get_target_aug, NULL,
     "The same for the target.", NULL},
    {"count", (getter)batch_get_count, NULL,
     "Slots holding real samples: the batch size, or fewer in the last "
     "batch of a tiled pass (the others have sample -1).",
     NULL},
    {"tile", (getter)batch_get_tile, NULL,
     "Tiled passes: per slot (z, y, x, oz, oy, ox, nz, ny, nx): the tile's "
     "origin in the box, the origin of the part it owns relative to the "
     "tile, that part's extent (a copy); None for random crops.",
     NULL},
    {"device", (getter)batch_get_device, NULL,
     "-1 for host memory, else the CUDA device ordinal.", NULL},
    {"stream", (getter)batch_get_stream, NULL,
     "The cudaStream_t (int) the batch was handed to by next(), whose work "
     "may use it without further waits; None for host batches.",
     NULL},
    {"valid", (getter)batch_get_valid, NULL,
     "False once next(), seek() or close() was called on the loader since "
     "this batch was handed out (its tensors then raise StaleBatchError).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot batch_slots[] = {
    {Py_tp_doc,
     "Batch: one batch of a Loader, from Loader.next().\n\n"
     "`input` and `target` are slabfeed.Tensor objects over the loader's "
     "memory (DLPack, zero copy); epoch, step, origin, sample and symmetry "
     "are copies of the batch's metadata.\n\n"
     "Validity: the batch and its tensors may be used until the next call "
     "of next(), seek() or close() on the loader; after that they raise "
     "slabfeed.StaleBatchError instead of reading reused memory. Arrays "
     "made from the tensors with from_dlpack (which keep the pointer) follow "
     "the C rule: a device batch may be used by work on the stream it was "
     "handed to (or exported to) until the next next(); a host batch stays "
     "valid until the prefetch-th following next(); both end at seek() and "
     "close()."},
    {Py_tp_dealloc, batch_dealloc},
    {Py_tp_repr, batch_repr},
    {Py_tp_getset, batch_getset},
    {0, NULL},
};

PyType_Spec sfpy_batch_spec = {
    .name = "slabfeed.Batch",
    .basicsize = sizeof(sfpy_batch),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = batch_slots,
};

/* ---- Loader -----------------------------------------------------------------
 */

/* The loader must be open; else StateError. */
static int require_open(sfpy_state *st, const sfpy_loader *L)
{
  if (L->l != NULL)
    return 0;
  sfpy_raise(st, SLABFEED_ERR_STATE, "slabfeed: the loader is closed");
  return -1;
}

/* The loader must be open and not inside a call of another Python thread
 * (the GIL is released while next, seek and close run, and the C loader is
 * not thread safe); else StateError. */
static int require_idle(sfpy_state *st, const sfpy_loader *L)
{
  if (require_open(st, L) < 0)
    return -1;
  if (L->busy) {
    sfpy_raise(st, SLABFEED_ERR_STATE, SFPY_BUSY_MESSAGE);
    return -1;
  }
  /* A forked child is refused here, before any CUDA call (join_streams)
   * or library call that would touch the parent's state. */
  uint64_t e, s;
  if (slabfeed_tell(L->l, &e, &s) == SLABFEED_ERR_FORKED) {
    sfpy_raise(st, SLABFEED_ERR_FORKED,
               "slabfeed: loader used in a forked child process");
    return -1;
  }
  return 0;
}

/* Joins the consumer streams registered for the current batch into the
 * stream of the last next (device loaders; nothing for host ones). */
static int join_streams(sfpy_state *st, sfpy_loader *L)
{
  char err[256];
  if (L->cuda == NULL || L->last_stream == NULL)
    return 0;
  if (sfpy_cuda_join(L->cuda, L->last_stream, err, sizeof err) < 0) {
    sfpy_raise(st, SLABFEED_ERR_CUDA, err);
    return -1;
  }
  return 0;
}

/* release - closes L's loader if it is still open: joins consumer streams,
 * slabfeed_close (collective, GIL released), then the extension's CUDA
 * objects. In a forked child nothing is touched (the parent owns it all);
 * when MPI is no longer active nothing is released (returns 1). Returns 0
 * when closed (or nothing was open). Never raises. */
static int release(sfpy_loader *L)
{
  slabfeed_loader *l = L->l;
  if (l == NULL)
    return 0;
  L->l = NULL;
  L->generation++;
  uint64_t e, s;
  if (slabfeed_tell(l, &e, &s) == SLABFEED_ERR_FORKED) {
    L->cuda = NULL;
    return 0;
  }
  if (!sfpy_mpi_active()) {
    L->cuda = NULL;
    return 1;
  }
  char err[256];
  if (L->cuda != NULL && L->last_stream != NULL)
    (void)sfpy_cuda_join(L->cuda, L->last_stream, err, sizeof err);
  L->busy = 1;
  PyThreadState *ts = PyEval_SaveThread();
  slabfeed_close(l);
  PyEval_RestoreThread(ts);
  L->busy = 0;
  sfpy_cuda_destroy(L->cuda);
  L->cuda = NULL;
  L->last_stream = NULL;
  return 0;
}

/* Local CUDA setup of a device loader, agreed on by all ranks of comm: on
 * failure anywhere, every rank closes the loader (collectively) and raises
 * the message of the highest failing rank. Returns 0 or -1 with an
 * exception. */
static int setup_cuda(sfpy_state *st, sfpy_loader *L, MPI_Comm comm)
{
  char err[512] = "";
  int rank = 0, bad = 0, failed = 0;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS)
    rank = 0;
  if (sfpy_cuda_create(L->device, &L->cuda, err, sizeof err) < 0)
    bad = rank + 1;
  /* Collectives with the GIL released (other threads run meanwhile; busy
   * keeps them off this loader). */
  L->busy = 1;
  PyThreadState *ts = PyEval_SaveThread();
  const int arc = MPI_Allreduce(&bad, &failed, 1, MPI_INT, MPI_MAX, comm);
  PyEval_RestoreThread(ts);
  L->busy = 0;
  if (arc != MPI_SUCCESS) {
    /* No agreement: the other ranks may have succeeded, so no collective
     * close on this rank alone; the loader is left to the process exit. */
    L->l = NULL;
    L->generation++;
    L->cuda = NULL;
    if (PyErr_WarnEx(PyExc_ResourceWarning,
                     "slabfeed: the ranks could not agree on the CUDA setup "
                     "(MPI_Allreduce failed); the loader is left open to "
                     "the process exit",
                     1) < 0)
      return -1;
    sfpy_raise(st, SLABFEED_ERR_MPI,
               "slabfeed: MPI_Allreduce failed after the CUDA setup; the "
               "loader was not closed (a collective close on one rank "
               "would hang)");
    return -1;
  }
  if (failed == 0)
    return 0;
  L->busy = 1;
  ts = PyEval_SaveThread();
  const int brc = MPI_Bcast(err, (int)sizeof err, MPI_CHAR, failed - 1, comm);
  PyEval_RestoreThread(ts);
  L->busy = 0;
  if (brc != MPI_SUCCESS)
    snprintf(err, sizeof err, "slabfeed: a rank failed its CUDA setup");
  err[sizeof err - 1] = '\0';
  release(L); /* every rank gets here: the close is collective */
  char msg[600];
  snprintf(msg, sizeof msg, "%s (rank %d)", err, failed - 1);
  sfpy_raise(st, SLABFEED_ERR_CUDA, msg);
  return -1;
}

/* ---- The agreement on the options ------------------------------------------
 * The options are converted on each rank before the collective open; a
 * rank whose conversion failed (a bad value, a wrong type, an unknown or
 * missing keyword) must not leave the others waiting in slabfeed_open. So
 * every rank takes part in one agreement first: a MIN-reduction finds the
 * lowest failing rank, which broadcasts the kind and message of its
 * exception; every rank then raises that exception, its message prefixed
 * "rank R: " (as the library's agreed errors are). */

/* The pending exception (taken) as a packet; *exc holds it. */
static void pack_exception(sfpy_state *st, agree_pkt *p, PyObject **exc)
{
  PyObject *et = NULL, *ev = NULL, *tb = NULL;
  PyErr_Fetch(&et, &ev, &tb);
  PyErr_NormalizeException(&et, &ev, &tb);
  if (ev != NULL && tb != NULL)
    PyException_SetTraceback(ev, tb);
  sfpy_agree_classify(st, et, p);
  /* The message: str(exception), with its class name where the class is
   * not kept. */
  const char *text = NULL;
  PyObject *str = ev != NULL ? PyObject_Str(ev) : NULL;
  if (str != NULL)
    text = PyUnicode_AsUTF8AndSize(str, NULL);
  if (text == NULL)
    PyErr_Clear();
  PyObject *tn = et != NULL ? PyObject_GetAttrString(et, "__name__") : NULL;
  const char *tname = tn != NULL ? PyUnicode_AsUTF8AndSize(tn, NULL) : NULL;
  if (tname == NULL)
    PyErr_Clear();
  if (p->kind == AGREE_OTHER)
    snprintf(p->msg, sizeof p->msg, "%s: %s",
             tname != NULL ? tname : "exception", text != NULL ? text : "");
  else
    snprintf(p->msg, sizeof p->msg, "%s", text != NULL ? text : "");
  Py_XDECREF(str);
  Py_XDECREF(tn);
  Py_XDECREF(et);
  Py_XDECREF(tb);
  *exc = ev;
}

/* agree_options - collective over comm (GIL released while it waits):
 * `failed` says whether this rank's conversion failed, with the exception
 * pending. Returns 0 when no rank failed; else -1 with the same exception
 * on every rank (on the failing rank chained to the original one where
 * its class is not kept). */
static int agree_options(sfpy_state *st, sfpy_loader *L, MPI_Comm comm,
                         int failed)
{
  agree_pkt p;
  memset(&p, 0, sizeof p);
  PyObject *exc = NULL;
  if (failed)
    pack_exception(st, &p, &exc);
  int rank = 0, size = 1;
  int first = 0, mine = 0, arc = MPI_SUCCESS, brc = MPI_SUCCESS;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
      MPI_Comm_size(comm, &size) != MPI_SUCCESS) {
    arc = MPI_ERR_OTHER;
  } else {
    mine = failed ? rank : size;
    first = size;
    L->busy = 1;
    PyThreadState *ts = PyEval_SaveThread();
    arc = MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
    if (arc == MPI_SUCCESS && first < size)
      brc = MPI_Bcast(&p, (int)sizeof p, MPI_BYTE, first, comm);
    PyEval_RestoreThread(ts);
    L->busy = 0;
  }
  if (arc != MPI_SUCCESS) {
    /* No agreement: this rank's own outcome (the others may be in open). */
    Py_XDECREF(exc);
    sfpy_raise(st, SLABFEED_ERR_MPI,
               "slabfeed: the ranks could not agree on the options "
               "(MPI_Allreduce failed)");
    return -1;
  }
  if (first >= size) {
    Py_XDECREF(exc);
    return 0;
  }
  if (brc != MPI_SUCCESS) {
    p.kind = AGREE_STATUS;
    p.status = SLABFEED_ERR_MPI;
    snprintf(p.msg, sizeof p.msg,
             "slabfeed: its options were refused (MPI_Bcast of the message "
             "failed)");
  }
  p.msg[sizeof p.msg - 1] = '\0';
  char msg[sizeof p.msg + 32];
  snprintf(msg, sizeof msg, "rank %d: %s", first, p.msg);
  if (p.kind == AGREE_TYPE)
    PyErr_SetString(PyExc_TypeError, msg);
  else
    sfpy_raise(st,
               p.kind == AGREE_STATUS ? (slabfeed_status)p.status
                                      : SLABFEED_OK, /* slabfeed.Error */
               msg);
  if (exc != NULL && rank == first && p.kind == AGREE_OTHER) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    if (ev != NULL)
      PyException_SetCause(ev, exc); /* steals */
    else
      Py_DECREF(exc);
    exc = NULL;
    PyErr_Restore(et, ev, tb);
  }
  Py_XDECREF(exc);
  return -1;
}

/* Loader(comm, **options): the options are the rows of the library's
 * option table (py_options.c); each keyword given is set from its text
 * (None keeps the library default). After an agreement of all ranks on the
 * conversion, opens the loader (collective over comm, GIL released). */
static int loader_init(sfpy_loader *self, PyObject *args, PyObject *kw)
{
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  PyObject *comm_o = NULL;
  if (!PyArg_ParseTuple(args, "O:Loader", &comm_o))
    return -1;
  /* A loader is opened once: re-opening would let batches of the old one
   * pass the generation check (and read past their metadata). */
  if (self->busy) {
    sfpy_raise(st, SLABFEED_ERR_STATE, SFPY_BUSY_MESSAGE);
    return -1;
  }
  if (self->opened) {
    sfpy_raise(st, SLABFEED_ERR_STATE,
               self->l != NULL
                   ? "slabfeed: the loader is already open"
                   : "slabfeed: a Loader is initialised once (this one was "
                     "opened before): make a new Loader");
    return -1;
  }
  MPI_Comm comm;
  if (sfpy_comm_from_fint(st, comm_o, &comm) < 0)
    return -1;
  PyObject *keep = PyList_New(0); /* owns the strings c points to */
  if (keep == NULL)
    return -1;
  int rc = -1;
  slabfeed_config c;
  slabfeed_config_init(&c);
  PyObject *options = NULL;
  int failed = sfpy_options_apply(st, kw, &c, keep, "Loader", 1) < 0;
  if (!failed)
    failed = (options = sfpy_options_values(&c)) == NULL;
  /* Converting the values may have run Python code (__index__,
   * __fspath__) that used this object. */
  if (!failed && (self->busy || self->opened)) {
    sfpy_raise(st, SLABFEED_ERR_STATE,
               "slabfeed: the loader was opened while its options were "
               "converted");
    failed = 1;
  }
  if (agree_options(st, self, comm, failed) < 0)
    goto out;

  char err[2048] = "";
  slabfeed_loader *l = NULL;
  slabfeed_status s;
  self->opened = 1;
  self->busy = 1;
  PyThreadState *ts = PyEval_SaveThread();
  s = slabfeed_open(comm, &c, &l, err, sizeof err);
  PyEval_RestoreThread(ts);
  self->busy = 0;
  if (s != SLABFEED_OK) {
    sfpy_raise(st, s, err);
    goto out;
  }
  self->l = l; /* generation: kept (never reset) */
  self->device = c.device;
  self->prefetch = c.prefetch;
  self->batch = c.batch;
  self->has_target = c.target != NULL;
  self->ndhwc = c.out_layout == SLABFEED_OUT_NDHWC;
  self->last_stream = NULL;
  self->options = options;
  options = NULL;
  if (c.device >= 0 && setup_cuda(st, self, comm) < 0)
    goto out;
  rc = 0;
out:
  Py_XDECREF(options);
  Py_DECREF(keep); /* after slabfeed_open, which copied the strings */
  return rc;
}

/* Never closes: slabfeed_close is collective, and the last reference may
 * go on one rank only (at any point of a garbage collection, or in a DLPack
 * deleter on a foreign thread). An open loader is left to the process exit
 * with a ResourceWarning; closing is explicit (close(), `with`, and the
 * atexit hook of slabfeed.Loader). */
static void loader_dealloc(sfpy_loader *self)
{
  PyTypeObject *tp = Py_TYPE(self);
  uint64_t e, s;
  if (self->l != NULL &&
      slabfeed_tell(self->l, &e, &s) != SLABFEED_ERR_FORKED) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (PyErr_WarnEx(PyExc_ResourceWarning,
                     "slabfeed: a Loader was garbage-collected while open; "
                     "its resources are left to the process exit (close() "
                     "is collective: call it on every rank, or use `with`)",
                     1) < 0)
      PyErr_WriteUnraisable((PyObject *)self);
    PyErr_Restore(et, ev, tb);
  }
  Py_CLEAR(self->options);
  freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  f(self);
  Py_DECREF(tp);
}

/* next(stream=None) -> Batch */
static PyObject *loader_next(sfpy_loader *self, PyObject *args, PyObject *kw)
{
  static char *kwlist[] = {"stream", NULL};
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  PyObject *so = Py_None;
  void *stream = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:next", kwlist, &so) ||
      (self->device >= 0 && sfpy_parse_stream(so, &stream) < 0))
    return NULL;
  /* Only now (the stream's conversion may run Python code that calls
   * next or close): the loader must be open, idle and not forked. */
  if (require_idle(st, self) < 0)
    return NULL;
  if (self->device >= 0 && stream == NULL)
    stream = sfpy_cuda_handoff(self->cuda);
  if (join_streams(st, self) < 0)
    return NULL;
  self->generation++;
  slabfeed_batch b = SLABFEED_BATCH_INIT;
  slabfeed_status s;
  self->busy = 1;
  PyThreadState *ts = PyEval_SaveThread();
  s = slabfeed_next(self->l, &b, stream);
  PyEval_RestoreThread(ts);
  self->busy = 0;
  if (s != SLABFEED_OK)
    return sfpy_raise(st, s, slabfeed_last_error(self->l));
  if (self->device >= 0)
    self->last_stream = stream;
  return batch_new(st, self, &b, stream);
}

/* _time_next(n, stream=None) -> float: n calls of slabfeed_next in one C
 * loop (GIL released), wall seconds; for bench/python_overhead.py, which
 * subtracts it from the time of n Loader.next() calls. Batches are not kept. */
static PyObject *loader_time_next(sfpy_loader *self, PyObject *args,
                                  PyObject *kw)
{
  static char *kwlist[] = {"n", "stream", NULL};
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  long long n = 0;
  PyObject *so = Py_None;
  void *stream = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "L|O:_time_next", kwlist, &n,
                                   &so) ||
      (self->device >= 0 && sfpy_parse_stream(so, &stream) < 0))
    return NULL;
  /* Only now (the stream's conversion may run Python code that calls
   * next or close): the loader must be open, idle and not forked. */
  if (require_idle(st, self) < 0)
    return NULL;
  if (self->device >= 0 && stream == NULL)
    stream = sfpy_cuda_handoff(self->cuda);
  if (join_streams(st, self) < 0)
    return NULL;
  self->generation++;
  slabfeed_status s = SLABFEED_OK;
  struct timespec t0, t1;
  self->busy = 1;
  PyThreadState *ts = PyEval_SaveThread();
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long long i = 0; i < n && s == SLABFEED_OK; i++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    s = slabfeed_next(self->l, &b, stream);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  PyEval_RestoreThread(ts);
  self->busy = 0;
  if (s != SLABFEED_OK)
    return sfpy_raise(st, s, slabfeed_last_error(self->l));
  if (self->device >= 0)
    self->last_stream = stream;
  return PyFloat_FromDouble((double)(t1.tv_sec - t0.tv_sec) +
                            1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
}

/* seek(epoch, step) */
static PyObject *loader_seek(sfpy_loader *self, PyObject *args, PyObject *kw)
{
  static char *kwlist[] = {"epoch", "step", NULL};
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  PyObject *eo, *so;
  uint64_t epoch = 0, step = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO:seek", kwlist, &eo, &so) ||
      sfpy_u64(eo, "epoch", &epoch) < 0 || sfpy_u64(so, "step", &step) < 0 ||
      require_idle(st, self) < 0 || join_streams(st, self) < 0)
    return NULL;
  self->generation++;
  self->last_stream = NULL;
  slabfeed_status s;
  self->busy = 1;
  PyThreadState *ts = PyEval_SaveThread();
  s = slabfeed_seek(self->l, epoch, step);
  PyEval_RestoreThread(ts);
  self->busy = 0;
  if (s != SLABFEED_OK)
    return sfpy_raise(st, s, slabfeed_last_error(self->l));
  Py_RETURN_NONE;
}

/* tell() -> (epoch, step) */
static PyObject *loader_tell(sfpy_loader *self, PyObject *noargs)
{
  (void)noargs;
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  uint64_t e = 0, s = 0;
  if (require_idle(st, self) < 0)
    return NULL;
  const slabfeed_status rc = slabfeed_tell(self->l, &e, &s);
  if (rc != SLABFEED_OK)
    return sfpy_raise(st, rc,
                      rc == SLABFEED_ERR_FORKED
                          ? "slabfeed: loader used in a forked child process"
                          : slabfeed_last_error(self->l));
  return Py_BuildValue("(KK)", (unsigned long long)e, (unsigned long long)s);
}

/* close(): collective; a no-op when closed or in a forked child. */
static PyObject *loader_close(sfpy_loader *self, PyObject *noargs)
{
  (void)noargs;
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  if (self->l != NULL && self->busy)
    return sfpy_raise(st, SLABFEED_ERR_STATE, SFPY_BUSY_MESSAGE);
  if (release(self) == 1)
    return sfpy_raise(st, SLABFEED_ERR_STATE,
                      "slabfeed: MPI was finalised before the loader was "
                      "closed; its resources are left to the process exit");
  Py_RETURN_NONE;
}

/* stats() -> dict of slabfeed_stats */
static PyObject *loader_stats(sfpy_loader *self, PyObject *noargs)
{
  (void)noargs;
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  if (require_open(st, self) < 0)
    return NULL;
  slabfeed_stats s = SLABFEED_STATS_INIT;
  const slabfeed_status rc = slabfeed_stats_get(self->l, &s);
  if (rc != SLABFEED_OK)
    return sfpy_raise(st, rc, slabfeed_last_error(self->l));
  PyObject *d = Py_BuildValue(
      "{s:K,s:K,s:K,s:K,s:K,s:K,s:d,s:d,s:d,s:d,s:d,s:d,s:K,s:K,s:O}",
      "batches", (unsigned long long)s.batches, "samples",
      (unsigned long long)s.samples, "bytes_own",
      (unsigned long long)s.bytes_own, "bytes_node",
      (unsigned long long)s.bytes_node, "bytes_remote",
      (unsigned long long)s.bytes_remote, "bytes_out",
      (unsigned long long)s.bytes_out, "t_read", s.t_read, "t_plan", s.t_plan,
      "t_gather", s.t_gather, "t_h2d", s.t_h2d, "t_transform", s.t_transform,
      "t_wait", s.t_wait, "slab_bytes", (unsigned long long)s.slab_bytes,
      "staging_bytes", (unsigned long long)s.staging_bytes, "loader_thread",
      s.loader_thread ? Py_True : Py_False);
  if (d == NULL)
    return NULL;
  PyObject *more = Py_BuildValue(
      "{s:K,s:K,s:i,s:i,s:i,s:i,s:K,s:K,s:K,s:K,s:K,s:d,s:d,s:d,s:d}",
      "remote_gets", (unsigned long long)s.remote_gets, "remote_runs",
      (unsigned long long)s.remote_runs, "nodes", s.nodes, "group_nodes",
      s.group_nodes, "groups", s.groups, "group", s.group, "node_budget",
      (unsigned long long)s.node_budget, "node_store_bytes",
      (unsigned long long)s.node_store_bytes, "replica_bytes",
      (unsigned long long)s.replica_bytes, "device_slab_bytes",
      (unsigned long long)s.device_slab_bytes, "slab_released_bytes",
      (unsigned long long)s.slab_released_bytes, "t_open", s.t_open,
      "t_open_context", s.t_open_context, "t_open_backend", s.t_open_backend,
      "t_open_register", s.t_open_register);
  if (more == NULL || PyDict_Update(d, more) < 0) {
    Py_XDECREF(more);
    Py_DECREF(d);
    return NULL;
  }
  Py_DECREF(more);
  return d;
}

/* placement() -> str: how the volume was placed at open */
static PyObject *loader_placement(sfpy_loader *self, PyObject *noargs)
{
  (void)noargs;
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  if (require_open(st, self) < 0)
    return NULL;
  char line[1024];
  const slabfeed_status rc = slabfeed_placement(self->l, line, sizeof line);
  if (rc != SLABFEED_OK)
    return sfpy_raise(st, rc, slabfeed_last_error(self->l));
  return PyUnicode_FromString(line);
}

/* volumes() -> list of (path, (z, y, x)): the dataset's volumes */
static PyObject *loader_volumes(sfpy_loader *self, PyObject *noargs)
{
  (void)noargs;
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  if (require_open(st, self) < 0)
    return NULL;
  const int n = slabfeed_volume_count(self->l);
  PyObject *out = PyList_New(n);
  for (int i = 0; out != NULL && i < n; i++) {
    char path[4200];
    int64_t shape[3];
    slabfeed_volume_info(self->l, i, path, sizeof path, shape);
    PyObject *item = Py_BuildValue("(N(LLL))", PyUnicode_DecodeFSDefault(path),
                                   (long long)shape[0], (long long)shape[1],
                                   (long long)shape[2]);
    if (item == NULL) {
      Py_CLEAR(out);
      break;
    }
    if (PyList_SetItem(out, i, item) < 0) {
      Py_CLEAR(out);
      break;
    }
  }
  return out;
}

/* volume_params() -> list of tuples: each volume's parameters */
static PyObject *loader_volume_params(sfpy_loader *self, PyObject *noargs)
{
  (void)noargs;
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  if (require_open(st, self) < 0)
    return NULL;
  const int n = slabfeed_volume_count(self->l);
  PyObject *out = PyList_New(n);
  float row[SLABFEED_MAX_PARAMS];
  for (int i = 0; out != NULL && i < n; i++) {
    const int k = slabfeed_volume_params(self->l, i, row, SLABFEED_MAX_PARAMS);
    PyObject *t = float_rows(row, 1, k < 0 ? 0 : k);
    PyObject *item = t != NULL ? Py_NewRef(PyTuple_GetItem(t, 0)) : NULL;
    Py_XDECREF(t);
    if (item == NULL || PyList_SetItem(out, i, item) < 0)
      Py_CLEAR(out);
  }
  return out;
}

static PyObject *loader_get_steps(sfpy_loader *self, void *c)
{
  (void)c;
  if (require_open(sfpy_state_of(Py_TYPE(self)), self) < 0)
    return NULL;
  return PyLong_FromUnsignedLongLong(slabfeed_steps_per_epoch(self->l));
}

static PyObject *loader_get_closed(sfpy_loader *self, void *c)
{
  (void)c;
  return PyBool_FromLong(self->l == NULL);
}

static PyObject *loader_get_int(sfpy_loader *self, void *which)
{
  const char *w = which;
  return PyLong_FromLong(w[0] == 'd'   ? self->device
                         : w[0] == 'p' ? self->prefetch
                                       : self->batch);
}

/* options -> dict: a copy of every option's value at open */
static PyObject *loader_get_options(sfpy_loader *self, void *c)
{
  (void)c;
  if (self->options == NULL)
    return sfpy_raise(sfpy_state_of(Py_TYPE(self)), SLABFEED_ERR_STATE,
                      "slabfeed: the loader was never opened");
  return PyDict_Copy(self->options);
}

static PyMethodDef loader_methods[] = {
    {"next", (PyCFunction)(void (*)(void))loader_next,
     METH_VARARGS | METH_KEYWORDS,
     "next(stream=None) -> Batch\n\nThe next batch of this rank "
     "(slabfeed_next; the GIL is released while it waits). Device loaders: "
     "`stream` (int cudaStream_t, torch.cuda.Stream, or an object with "
     "__cuda_stream__) is made to wait on the batch; None uses the loader's "
     "own stream and __dlpack__(stream=...) then orders the consumer's "
     "stream. The previous batch becomes stale."},
    {"_time_next", (PyCFunction)(void (*)(void))loader_time_next,
     METH_VARARGS | METH_KEYWORDS,
     "_time_next(n, stream=None) -> float\n\nSeconds for n slabfeed_next "
     "calls in one C loop (for bench/python_overhead.py)."},
    {"seek", (PyCFunction)(void (*)(void))loader_seek,
     METH_VARARGS | METH_KEYWORDS,
     "seek(epoch, step)\n\nThe next next() returns the batch of (epoch, "
     "step): exact resume. Call it at the same point on every rank. Batches "
     "handed out before become stale."},
    {"tell", (PyCFunction)loader_tell, METH_NOARGS,
     "tell() -> (epoch, step)\n\nThe position of the batch the next next() "
     "returns (what a checkpoint stores)."},
    {"close", (PyCFunction)loader_close, METH_NOARGS,
     "close()\n\nCollective: releases everything (slabfeed_close). Batches "
     "become stale. Idempotent; a no-op in a forked child."},
    {"stats", (PyCFunction)loader_stats, METH_NOARGS,
     "stats() -> dict\n\nThis rank's counters and times (slabfeed_stats)."},
    {"volume_params", (PyCFunction)loader_volume_params, METH_NOARGS,
     "volume_params() -> list of tuples of float\n\nThe parameters (option "
     "params, after params_norm) of each volume, in the order of "
     "Batch.volume (slabfeed_volume_params)."},
    {"volumes", (PyCFunction)loader_volumes, METH_NOARGS,
     "volumes() -> list of (path, (z, y, x))\n\nThe volumes of the dataset, "
     "in the order of Batch.volume (slabfeed_volume_info)."},
    {"placement", (PyCFunction)loader_placement, METH_NOARGS,
     "placement() -> str\n\nHow the volume was placed at open "
     "(slabfeed_placement)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef loader_getset[] = {
    {"steps_per_epoch", (getter)loader_get_steps, NULL,
     "Steps per epoch in effect.", NULL},
    {"closed", (getter)loader_get_closed, NULL, "True after close().", NULL},
    {"device", (getter)loader_get_int, NULL,
     "-1 (host batches) or the CUDA device ordinal.", "d"},
    {"prefetch", (getter)loader_get_int, NULL, "Depth of the batch ring.", "p"},
    {"batch", (getter)loader_get_int, NULL, "Local batch size B.", "b"},
    {"options", (getter)loader_get_options, NULL,
     "Every option's value at open, by name (a new dict): the defaults of "
     "the option table with the keywords given applied.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot loader_slots[] = {
    {Py_tp_doc, "Loader(comm_f2c, **options)\n\n"
                "The C loader; use slabfeed.Loader, which takes an mpi4py "
                "communicator and documents the options (the rows of "
                "options())."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, loader_init},
    {Py_tp_dealloc, loader_dealloc},
    {Py_tp_methods, loader_methods},
    {Py_tp_getset, loader_getset},
    {0, NULL},
};

PyType_Spec sfpy_loader_spec = {
    .name = "slabfeed._slabfeed.Loader",
    .basicsize = sizeof(sfpy_loader),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = loader_slots,
};
