/*
 * slabfeed._slabfeed.Writer: the predictions of a tiled pass written back
 * with slabfeed_writer_* (include/slabfeed.h, "The writer").
 *
 * - Open: every argument is converted on each rank first; a rank whose
 *   conversion failed must not leave the others in the collective
 *   slabfeed_writer_open, so all ranks agree on the lowest failing rank's
 *   exception before it (as the Loader does for its options).
 * - put: the output is taken through DLPack (__dlpack_device__, then
 *   __dlpack__(stream=S) on CUDA so that the producer orders its work
 *   before S, the stream handed to slabfeed_writer_put). A slabfeed.Tensor
 *   of a device batch given without a stream is put on the stream its
 *   batch was handed to by next (where it is ready). The capsule is
 *   renamed "used_dltensor" ("used_dltensor_versioned") when consumed and
 *   its deleter called once the put has returned (the writer has copied
 *   the data by then). The tile, symmetry and slot metadata come from the
 *   Batch's copies (its getters), never from the loader's memory, and a
 *   stale batch is refused.
 * - A refused put stores nothing and may be retried (the library keeps
 *   only failures of a put that began storing, and then every rank's
 *   close fails).
 * - close and abort are collective (GIL released); the object never
 *   closes itself when it is garbage-collected (one rank only, maybe).
 */
#include "py_writer.h"

#include "dlpack.h"
#include "py_args.h"
#include "py_errors.h"
#include "py_liveness.h"
#include "py_mpi.h"
#include "py_tensor.h"

#include <string.h>
#include <unistd.h>

typedef struct {
  PyObject_HEAD slabfeed_writer *w; /* NULL once closed or aborted */
  int opened;       /* __init__ ran once (never re-initialised) */
  int busy;         /* a call runs with the GIL released */
  int finished;     /* 0 open, 1 closed (written), 2 aborted, 3 close failed */
  int device;       /* the loader's device (-1: host batches) */
  int batch;        /* the loader's local batch B */
  pid_t pid;        /* the process that opened it */
  int64_t shape[4]; /* of the dataset, as in the file */
  int64_t z0, z1;   /* this rank's z-range of the output */
  PyObject *path;   /* str */
} sfpy_writer;

#define WRITER_BUSY_MESSAGE                                                    \
  "slabfeed: the writer is in use by another thread (a writer is not "         \
  "thread safe: use it from one thread, or with a lock)"

static const char *const writer_layouts[] = {"cf", "cl", NULL};
static const char *const writer_dtypes[] = {"f32", "f16", NULL};
static const char *const writer_dtype_aliases[] = {"float32", "float16", NULL};
static const char *const writer_likes[] = {"target", "input", "none", NULL};

/* ---- The agreement before the collective open --------------------------
 * A MIN-reduction finds the lowest failing rank, which broadcasts the kind
 * and message of its exception; every rank raises it, prefixed "rank R: ".
 */

/* The pending exception (cleared) as a packet. */
static void pack_exception(sfpy_state *st, agree_pkt *p)
{
  PyObject *et = NULL, *ev = NULL, *tb = NULL;
  PyErr_Fetch(&et, &ev, &tb);
  PyErr_NormalizeException(&et, &ev, &tb);
  sfpy_agree_classify(st, et, p);
  PyObject *str = ev != NULL ? PyObject_Str(ev) : NULL;
  const char *text = str != NULL ? PyUnicode_AsUTF8AndSize(str, NULL) : NULL;
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
  Py_XDECREF(ev);
  Py_XDECREF(tb);
}

/* agree - collective over comm (GIL released while it waits): `failed`
 * says whether this rank failed, with the exception pending. Returns 0
 * when no rank failed; else -1 with the same exception on every rank. */
static int agree(sfpy_state *st, sfpy_writer *W, MPI_Comm comm, int failed)
{
  agree_pkt p;
  memset(&p, 0, sizeof p);
  if (failed)
    pack_exception(st, &p);
  int rank = 0, size = 1, first = 0, mine = 0;
  int arc = MPI_SUCCESS, brc = MPI_SUCCESS;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
      MPI_Comm_size(comm, &size) != MPI_SUCCESS) {
    arc = MPI_ERR_OTHER;
  } else {
    mine = failed ? rank : size;
    first = size;
    W->busy = 1;
    PyThreadState *ts = PyEval_SaveThread();
    arc = MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
    if (arc == MPI_SUCCESS && first < size)
      brc = MPI_Bcast(&p, (int)sizeof p, MPI_BYTE, first, comm);
    PyEval_RestoreThread(ts);
    W->busy = 0;
  }
  if (arc != MPI_SUCCESS) {
    sfpy_raise(st, SLABFEED_ERR_MPI,
               "slabfeed: the ranks could not agree on the writer's "
               "arguments (MPI_Allreduce failed)");
    return -1;
  }
  if (first >= size)
    return 0;
  if (brc != MPI_SUCCESS) {
    p.kind = AGREE_STATUS;
    p.status = SLABFEED_ERR_MPI;
    snprintf(p.msg, sizeof p.msg,
             "slabfeed: its writer arguments were refused (MPI_Bcast of the "
             "message failed)");
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
  return -1;
}

/* ---- Open ---------------------------------------------------------------- */

static int forked(const sfpy_writer *W)
{
  return W->pid != getpid();
}

/* A string argument (str, or None for the default) as UTF-8 without NULs;
 * *out stays untouched for None. */
static int utf8_arg(PyObject *o, const char *arg, const char **out)
{
  if (o == NULL || o == Py_None)
    return 0;
  if (!PyUnicode_Check(o)) {
    PyErr_Format(PyExc_TypeError, "slabfeed: %s must be a str, not %R", arg, o);
    return -1;
  }
  Py_ssize_t len = 0;
  const char *s = PyUnicode_AsUTF8AndSize(o, &len);
  if (s == NULL)
    return -1;
  if ((size_t)len != strlen(s)) {
    PyErr_Format(PyExc_ValueError, "slabfeed: %s: embedded null character",
                 arg);
    return -1;
  }
  *out = s;
  return 0;
}

/* The local checks and conversions of Writer(...) into *cfg; the objects
 * that own the strings cfg points to go to *path_b (bytes). Returns the
 * loader, or NULL with an exception. */
static sfpy_loader *convert(sfpy_state *st, sfpy_writer *self, PyObject *args,
                            PyObject *kw, slabfeed_writer_config *cfg,
                            PyObject **path_b, PyObject **path_s)
{
  static char *kwlist[] = {"loader", "path",  "dataset",   "channels", "layout",
                           "dtype",  "chunk", "overwrite", "like",     NULL};
  PyObject *loader_o = NULL, *path_o = NULL, *ds_o = NULL, *ch_o = NULL;
  PyObject *lay_o = NULL, *dt_o = NULL, *chunk_o = NULL, *like_o = NULL;
  int overwrite = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OO$OOOpO:Writer", kwlist,
                                   &loader_o, &path_o, &ds_o, &ch_o, &lay_o,
                                   &dt_o, &chunk_o, &overwrite, &like_o))
    return NULL;
  if (!PyObject_TypeCheck(loader_o, st->loader_type)) {
    PyErr_Format(PyExc_TypeError,
                 "slabfeed: Writer needs the loader of a tiled pass (a "
                 "slabfeed.Loader opened with tile > 0), not %R",
                 loader_o);
    return NULL;
  }
  if (!PyUnicode_FSConverter(path_o, path_b))
    return NULL;
  *path_s = PyUnicode_DecodeFSDefaultAndSize(PyBytes_AsString(*path_b),
                                             PyBytes_Size(*path_b));
  if (*path_s == NULL)
    return NULL;
  cfg->path = PyBytes_AsString(*path_b);
  long long channels = 0;
  int layout = 0, dtype = 0, like = 0;
  int64_t chunk[3] = {0, 0, 0};
  if (utf8_arg(ds_o, "dataset", &cfg->dataset) < 0 ||
      sfpy_int(ch_o, "channels", 0, SLABFEED_MAX_CHANNELS, &channels) < 0 ||
      sfpy_choice(lay_o, "layout", writer_layouts, NULL, &layout) < 0 ||
      sfpy_choice(dt_o, "dtype", writer_dtypes, writer_dtype_aliases, &dtype) <
          0 ||
      sfpy_triple(chunk_o, "chunk", chunk) < 0 ||
      sfpy_choice(like_o, "like", writer_likes, NULL, &like) < 0)
    return NULL;
  cfg->channels = (int)channels;
  cfg->layout = layout == 1 ? SLABFEED_LAYOUT_CL : SLABFEED_LAYOUT_CF;
  cfg->dtype = dtype == 1 ? SLABFEED_DTYPE_F16 : SLABFEED_DTYPE_F32;
  for (int a = 0; a < 3; a++)
    cfg->chunk[a] = chunk[a];
  cfg->overwrite = overwrite;
  cfg->like = (slabfeed_like)like;
  /* Last (the conversions may run Python code that closes the loader). */
  sfpy_loader *L = (sfpy_loader *)loader_o;
  uint64_t e, s;
  if (L->l == NULL) {
    sfpy_raise(st, SLABFEED_ERR_STATE,
               "slabfeed: Writer: the loader is closed");
    return NULL;
  }
  if (L->busy) {
    sfpy_raise(st, SLABFEED_ERR_STATE, SFPY_BUSY_MESSAGE);
    return NULL;
  }
  if (slabfeed_tell(L->l, &e, &s) == SLABFEED_ERR_FORKED) {
    sfpy_raise(st, SLABFEED_ERR_FORKED,
               "slabfeed: Writer: the loader belongs to the parent process "
               "(forked since)");
    return NULL;
  }
  if (self->opened || self->busy) {
    sfpy_raise(st, SLABFEED_ERR_STATE,
               "slabfeed: a Writer is initialised once: make a new Writer");
    return NULL;
  }
  return L;
}

/* Writer(comm_f2c, loader, path, dataset=None, channels=0, *, layout='cf',
 * dtype='f32', chunk=None, overwrite=False, like='target') */
static int writer_init(sfpy_writer *self, PyObject *args, PyObject *kw)
{
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  if (self->opened || self->busy) {
    sfpy_raise(st, SLABFEED_ERR_STATE,
               "slabfeed: a Writer is initialised once: make a new Writer");
    return -1;
  }
  if (!PyTuple_Check(args) || PyTuple_Size(args) < 1) {
    PyErr_SetString(PyExc_TypeError,
                    "slabfeed: Writer(comm_f2c, loader, path, ...): the "
                    "communicator handle comes first (use slabfeed.Writer)");
    return -1;
  }
  MPI_Comm comm;
  if (sfpy_comm_from_fint(st, PyTuple_GetItem(args, 0), &comm) < 0)
    return -1;
  PyObject *rest = PyTuple_GetSlice(args, 1, PyTuple_Size(args));
  if (rest == NULL)
    return -1;
  PyObject *path_b = NULL, *path_s = NULL;
  slabfeed_writer_config cfg;
  slabfeed_writer_config_init(&cfg);
  sfpy_loader *L = convert(st, self, rest, kw, &cfg, &path_b, &path_s);
  Py_DECREF(rest);
  int rc = -1;
  if (agree(st, self, comm, L == NULL) < 0)
    goto out;
  /* From here every rank goes the same way. */
  self->opened = 1;
  self->pid = getpid();
  char err[2048] = "";
  slabfeed_writer *w = NULL;
  self->busy = 1;
  L->busy = 1;
  PyThreadState *ts = PyEval_SaveThread();
  slabfeed_status s = slabfeed_writer_open(L->l, &cfg, &w, err, sizeof err);
  PyEval_RestoreThread(ts);
  L->busy = 0;
  self->busy = 0;
  if (s != SLABFEED_OK) {
    self->finished = 2;
    sfpy_raise(st, s, err);
    goto out;
  }
  self->w = w;
  self->device = L->device;
  self->batch = L->batch;
  self->path = path_s;
  path_s = NULL;
  s = slabfeed_writer_shape(w, self->shape, &self->z0, &self->z1);
  if (s != SLABFEED_OK) { /* cannot happen for a live writer */
    memset(self->shape, 0, sizeof self->shape);
    self->z0 = self->z1 = 0;
  }
  rc = 0;
out:
  Py_XDECREF(path_b); /* after slabfeed_writer_open, which copied it */
  Py_XDECREF(path_s);
  return rc;
}

/* ---- put ----------------------------------------------------------------- */

/* The writer must be open, idle and of this process; else StateError
 * (ForkedError in a forked child). */
static int require_open(sfpy_state *st, const sfpy_writer *W, const char *op)
{
  char msg[256];
  if (W->w == NULL) {
    snprintf(msg, sizeof msg, "slabfeed: Writer.%s: the writer is %s", op,
             !W->opened         ? "not open"
             : W->finished == 1 ? "closed (the file is written)"
             : W->finished == 3 ? "closed (its close failed: nothing was "
                                  "written)"
                                : "aborted (nothing was written)");
    sfpy_raise(st, SLABFEED_ERR_STATE, msg);
    return -1;
  }
  if (W->busy) {
    sfpy_raise(st, SLABFEED_ERR_STATE, WRITER_BUSY_MESSAGE);
    return -1;
  }
  if (forked(W)) {
    snprintf(msg, sizeof msg,
             "slabfeed: Writer.%s: the writer belongs to the parent process "
             "(forked since): MPI windows and files do not survive fork()",
             op);
    sfpy_raise(st, SLABFEED_ERR_FORKED, msg);
    return -1;
  }
  return 0;
}

/* A stream argument as a cudaStream_t handle (sfpy_parse_stream); None
 * gives 0 (none given). */
static int stream_handle(PyObject *o, intptr_t *out)
{
  void *p = NULL;
  *out = 0;
  if (o == NULL)
    return 0;
  if (sfpy_parse_stream(o, &p) < 0)
    return -1;
  *out = (intptr_t)p;
  return 0;
}

/* The DLPack device of `output`: *type (kDLCPU, kDLCUDA...) and *id. */
static int dlpack_device(PyObject *output, long long *type, long long *id)
{
  PyObject *r = PyObject_CallMethod(output, "__dlpack_device__", NULL);
  if (r == NULL) {
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "slabfeed: Writer.put: the output must speak DLPack "
                   "(__dlpack__ and __dlpack_device__: a torch tensor, a "
                   "numpy array...), not %R",
                   Py_TYPE(output));
    }
    return -1;
  }
  int ok = PyTuple_Check(r) && PyTuple_Size(r) == 2;
  if (ok)
    ok = sfpy_int(PyTuple_GetItem(r, 0), "__dlpack_device__()[0]", INT32_MIN,
                  INT32_MAX, type) == 0 &&
         sfpy_int(PyTuple_GetItem(r, 1), "__dlpack_device__()[1]", INT32_MIN,
                  INT32_MAX, id) == 0;
  else
    PyErr_Format(PyExc_TypeError,
                 "slabfeed: __dlpack_device__() must return (device_type, "
                 "device_id), not %R",
                 r);
  Py_DECREF(r);
  return ok ? 0 : -1;
}

/* A consumed DLPack tensor: its DLTensor and how to release it. */
typedef struct {
  DLTensor *dl;
  DLManagedTensor *legacy;
  DLManagedTensorVersioned *versioned;
} consumed;

static void release_consumed(consumed *c)
{
  if (c->legacy != NULL && c->legacy->deleter != NULL)
    c->legacy->deleter(c->legacy);
  if (c->versioned != NULL && c->versioned->deleter != NULL)
    c->versioned->deleter(c->versioned);
  c->legacy = NULL;
  c->versioned = NULL;
  c->dl = NULL;
}

/* take_dlpack - output.__dlpack__(...) (versioned first, max_version
 * (1, 0); the legacy call where the producer does not know it), the
 * capsule renamed as consumed. `stream` is passed on for CUDA outputs (0:
 * not passed). On success *c owns the tensor (release_consumed). */
static int take_dlpack(PyObject *output, intptr_t stream, consumed *c)
{
  memset(c, 0, sizeof *c);
  PyObject *meth = PyObject_GetAttrString(output, "__dlpack__");
  if (meth == NULL)
    return -1;
  PyObject *empty = PyTuple_New(0);
  PyObject *kw = PyDict_New();
  PyObject *cap = NULL;
  if (empty == NULL || kw == NULL)
    goto out;
  if (stream != 0) {
    PyObject *s = PyLong_FromLongLong((long long)stream);
    if (s == NULL || PyDict_SetItemString(kw, "stream", s) < 0) {
      Py_XDECREF(s);
      goto out;
    }
    Py_DECREF(s);
  }
  PyObject *mv = Py_BuildValue("(ii)", SFPY_DLPACK_MAJOR, SFPY_DLPACK_MINOR);
  if (mv == NULL || PyDict_SetItemString(kw, "max_version", mv) < 0) {
    Py_XDECREF(mv);
    goto out;
  }
  Py_DECREF(mv);
  cap = PyObject_Call(meth, empty, kw);
  if (cap == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
    /* A producer before DLPack 1.0 (numpy < 2, torch < 2.3). */
    PyErr_Clear();
    if (PyDict_DelItemString(kw, "max_version") < 0)
      goto out;
    cap = PyObject_Call(meth, empty, kw);
  }
  if (cap == NULL)
    goto out;
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    DLManagedTensorVersioned *m =
        PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (m == NULL)
      goto fail;
    if (m->version.major != SFPY_DLPACK_MAJOR) {
      PyErr_Format(PyExc_BufferError,
                   "slabfeed: Writer.put: the output's DLPack capsule is of "
                   "version %u.%u; this build reads DLPack %d",
                   (unsigned)m->version.major, (unsigned)m->version.minor,
                   SFPY_DLPACK_MAJOR);
      goto fail; /* the capsule's destructor deletes it */
    }
    if (PyCapsule_SetName(cap, "used_dltensor_versioned") < 0)
      goto fail;
    c->versioned = m;
    c->dl = &m->dl_tensor;
  } else if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m == NULL || PyCapsule_SetName(cap, "used_dltensor") < 0)
      goto fail;
    c->legacy = m;
    c->dl = &m->dl_tensor;
  } else {
    PyErr_Format(PyExc_TypeError,
                 "slabfeed: Writer.put: __dlpack__() returned %R, not an "
                 "unconsumed DLPack capsule",
                 cap);
    goto fail;
  }
  Py_DECREF(cap);
  Py_DECREF(meth);
  Py_DECREF(empty);
  Py_DECREF(kw);
  return 0;
fail:
  Py_CLEAR(cap);
out:
  Py_XDECREF(cap);
  Py_DECREF(meth);
  Py_XDECREF(empty);
  Py_XDECREF(kw);
  return -1;
}

/* The DLTensor as a slabfeed_tensor; ArgumentError for what the writer
 * cannot take (its dimension, element type, lanes). */
static int to_tensor(sfpy_state *st, const DLTensor *dl, slabfeed_tensor *t)
{
  char msg[256];
  if (dl->ndim != 5) {
    snprintf(msg, sizeof msg,
             "slabfeed: Writer.put: the output must be 5-D, (B,C,D,H,W) (or "
             "(B,D,H,W,C) with layout='ndhwc'), not %d-D",
             (int)dl->ndim);
    sfpy_raise(st, SLABFEED_ERR_ARG, msg);
    return -1;
  }
  const DLDataType d = dl->dtype;
  if (d.lanes == 1 && d.code == kDLFloat && d.bits == 32)
    t->dtype = SLABFEED_DTYPE_F32;
  else if (d.lanes == 1 && d.code == kDLFloat && d.bits == 16)
    t->dtype = SLABFEED_DTYPE_F16;
  else if (d.lanes == 1 && d.code == kDLBfloat && d.bits == 16)
    t->dtype = SLABFEED_DTYPE_BF16;
  else {
    snprintf(msg, sizeof msg,
             "slabfeed: Writer.put: the output's dtype must be float32, "
             "float16 or bfloat16, not DLPack type code %u with %u bits and "
             "%u lanes",
             (unsigned)d.code, (unsigned)d.bits, (unsigned)d.lanes);
    sfpy_raise(st, SLABFEED_ERR_ARG, msg);
    return -1;
  }
  t->ndim = 5;
  int64_t stride = 1;
  for (int a = 4; a >= 0; a--) {
    t->shape[a] = dl->shape[a];
    t->strides[a] = dl->strides != NULL ? dl->strides[a] : stride;
    stride *= dl->shape[a];
  }
  t->data = (char *)dl->data + dl->byte_offset;
  return 0;
}

/* The batch's metadata from its getters (copies, valid after the batch is
 * stale), checked last for staleness. *buf (PyMem) holds the arrays b
 * points to. */
static int batch_meta(sfpy_state *st, PyObject *batch, slabfeed_batch *b,
                      void **buf)
{
  *buf = NULL;
  PyObject *sym = NULL, *tile = NULL, *origin = NULL, *sample = NULL;
  PyObject *count = NULL, *epoch = NULL, *step = NULL, *device = NULL;
  PyObject *valid = NULL;
  int rc = -1;
  if ((sym = PyObject_GetAttrString(batch, "symmetry")) == NULL ||
      (tile = PyObject_GetAttrString(batch, "tile")) == NULL ||
      (origin = PyObject_GetAttrString(batch, "origin")) == NULL ||
      (sample = PyObject_GetAttrString(batch, "sample")) == NULL ||
      (count = PyObject_GetAttrString(batch, "count")) == NULL ||
      (epoch = PyObject_GetAttrString(batch, "epoch")) == NULL ||
      (step = PyObject_GetAttrString(batch, "step")) == NULL ||
      (device = PyObject_GetAttrString(batch, "device")) == NULL)
    goto out;
  if (tile == Py_None) {
    sfpy_raise(st, SLABFEED_ERR_ARG,
               "slabfeed: Writer.put: the batch is not of a tiled pass (its "
               "loader hands out random crops: open it with tile > 0)");
    goto out;
  }
  const Py_ssize_t nb = PyTuple_Size(sym);
  if (nb < 1 || PyTuple_Size(tile) != nb || PyTuple_Size(origin) != nb ||
      PyTuple_Size(sample) != nb) {
    sfpy_raise(st, SLABFEED_ERR_ARG,
               "slabfeed: Writer.put: the batch's metadata are "
               "inconsistent");
    goto out;
  }
  /* origin [3], sample, tile [9] per slot (int64), then symmetry (int32) */
  int64_t *v =
      PyMem_Malloc((size_t)nb * (13 * sizeof(int64_t) + sizeof(int32_t)));
  if (v == NULL) {
    PyErr_NoMemory();
    goto out;
  }
  *buf = v;
  int64_t *o = v, *sm = v + 3 * nb, *tl = v + 4 * nb;
  int32_t *sy = (int32_t *)(v + 13 * nb);
  for (Py_ssize_t i = 0; i < nb; i++) {
    PyObject *orow = PyTuple_GetItem(origin, i),
             *trow = PyTuple_GetItem(tile, i);
    if (!PyTuple_Check(orow) || PyTuple_Size(orow) != 3 ||
        !PyTuple_Check(trow) || PyTuple_Size(trow) != 9) {
      sfpy_raise(st, SLABFEED_ERR_ARG,
                 "slabfeed: Writer.put: the batch's metadata are "
                 "inconsistent");
      goto out;
    }
    for (int k = 0; k < 3; k++)
      o[3 * i + k] = PyLong_AsLongLong(PyTuple_GetItem(orow, k));
    for (int k = 0; k < 9; k++)
      tl[9 * i + k] = PyLong_AsLongLong(PyTuple_GetItem(trow, k));
    sm[i] = PyLong_AsLongLong(PyTuple_GetItem(sample, i));
    sy[i] = (int32_t)PyLong_AsLong(PyTuple_GetItem(sym, i));
  }
  b->valid = (int)PyLong_AsLong(count);
  b->epoch = PyLong_AsUnsignedLongLong(epoch);
  b->step = PyLong_AsUnsignedLongLong(step);
  b->device = (int)PyLong_AsLong(device);
  if (PyErr_Occurred())
    goto out;
  b->origin = o;
  b->sample = sm;
  b->tile = tl;
  b->symmetry = sy;
  /* Last: nothing after this runs Python code before the put. */
  if ((valid = PyObject_GetAttrString(batch, "valid")) == NULL)
    goto out;
  if (valid != Py_True) {
    sfpy_raise_stale(st, "slabfeed: Writer.put: the batch is stale: next(), "
                         "seek() or close() was called on its loader since it "
                         "was handed out; put the outputs of each batch before "
                         "the loader's next next()");
    goto out;
  }
  rc = 0;
out:
  Py_XDECREF(sym);
  Py_XDECREF(tile);
  Py_XDECREF(origin);
  Py_XDECREF(sample);
  Py_XDECREF(count);
  Py_XDECREF(epoch);
  Py_XDECREF(step);
  Py_XDECREF(device);
  Py_XDECREF(valid);
  if (rc < 0) {
    PyMem_Free(*buf);
    *buf = NULL;
  }
  return rc;
}

/* put(batch, output, stream=None, layout='ncdhw') */
static PyObject *writer_put(sfpy_writer *self, PyObject *args, PyObject *kw)
{
  static char *kwlist[] = {"batch", "output", "stream", "layout", NULL};
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  PyObject *batch = NULL, *output = NULL, *so = Py_None, *lay_o = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OO:put", kwlist, &batch,
                                   &output, &so, &lay_o))
    return NULL;
  if (require_open(st, self, "put") < 0)
    return NULL;
  int layout = 0;
  long long dtype = 0, did = 0;
  intptr_t stream = 0;
  void *buf = NULL;
  consumed c = {NULL, NULL, NULL};
  if (!PyObject_TypeCheck(batch, st->batch_type)) {
    PyErr_Format(PyExc_TypeError,
                 "slabfeed: Writer.put: batch must be the slabfeed.Batch "
                 "the outputs were computed from (Loader.next()), not %R",
                 Py_TYPE(batch));
    goto fail;
  }
  if (sfpy_choice(lay_o, "layout", sfpy_out_layouts, NULL, &layout) < 0 ||
      dlpack_device(output, &dtype, &did) < 0)
    goto fail;
  int device = -1;
  if (dtype == kDLCUDA) {
    if (stream_handle(so, &stream) < 0)
      goto fail;
    /* slabfeed's own Tensor (batch.input, batch.target) is ready on the
     * stream its batch was handed to: that stream orders the put. */
    if (stream == 0)
      stream = (intptr_t)sfpy_tensor_stream(st, output);
    if (stream == 0) {
      sfpy_raise(st, SLABFEED_ERR_ARG,
                 "slabfeed: Writer.put: a CUDA output needs the stream it "
                 "was written on (stream=...; slabfeed.Writer.put takes "
                 "torch's current stream when none is given, and the "
                 "stream of its batch for a slabfeed.Tensor)");
      goto fail;
    }
    device = (int)did;
  } else if (dtype != kDLCPU && dtype != 3 /* kDLCUDAHost: pinned */) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "slabfeed: Writer.put: the output lives on DLPack device type "
             "%lld; host memory or a CUDA device is needed",
             dtype);
    sfpy_raise(st, SLABFEED_ERR_ARG, msg);
    goto fail;
  }
  if (device >= 0 && self->device < 0) {
    sfpy_raise(st, SLABFEED_ERR_ARG,
               "slabfeed: Writer.put: the output is on a CUDA device but the "
               "loader hands out host batches: pass host memory (e.g. "
               "output.cpu())");
    goto fail;
  }
  if (take_dlpack(output, device >= 0 ? stream : 0, &c) < 0)
    goto fail;
  slabfeed_tensor t;
  memset(&t, 0, sizeof t);
  if (to_tensor(st, c.dl, &t) < 0)
    goto fail;
  if ((c.dl->device.device_type == kDLCUDA) != (device >= 0)) {
    sfpy_raise(st, SLABFEED_ERR_ARG,
               "slabfeed: Writer.put: the output's DLPack tensor is not on "
               "the device its __dlpack_device__() names");
    goto fail;
  }
  slabfeed_batch b = SLABFEED_BATCH_INIT;
  if (batch_meta(st, batch, &b, &buf) < 0)
    goto fail;
  /* The writer may have been closed by Python code run above. */
  if (require_open(st, self, "put") < 0)
    goto fail;
  self->busy = 1;
  PyThreadState *ts = PyEval_SaveThread();
  const slabfeed_status s = slabfeed_writer_put(
      self->w, &b, &t, (slabfeed_out_layout)layout, device, (void *)stream);
  PyEval_RestoreThread(ts);
  self->busy = 0;
  release_consumed(&c); /* the writer has its copy */
  PyMem_Free(buf);
  if (s != SLABFEED_OK)
    return sfpy_raise(st, s, slabfeed_writer_last_error(self->w));
  Py_RETURN_NONE;
fail:
  release_consumed(&c);
  PyMem_Free(buf);
  return NULL;
}

/* ---- close, abort -------------------------------------------------------- */

/* A finished writer: close() is a no-op after a close that wrote the
 * file, StateError after an abort or a failed close; abort() a no-op.
 * Returns 0 when the writer is to be settled, 1 for a no-op, -1 with an
 * exception. */
static int check_finishable(sfpy_state *st, sfpy_writer *W, int close)
{
  if (W->w == NULL) {
    if (!close || W->finished == 1)
      return 1;
    return require_open(st, W, "close");
  }
  if (W->busy) {
    sfpy_raise(st, SLABFEED_ERR_STATE, WRITER_BUSY_MESSAGE);
    return -1;
  }
  if (forked(W)) {
    if (!close)
      return 1; /* the parent owns it */
    return require_open(st, W, "close");
  }
  if (!sfpy_mpi_active()) {
    sfpy_raise(st, SLABFEED_ERR_STATE,
               "slabfeed: MPI was finalised before the writer was closed; "
               "nothing was written");
    return -1;
  }
  return 0;
}

/* settle - slabfeed_writer_close (close == 1) or _abort, collective, GIL
 * released. The library's close and abort meet each other: ranks that
 * close while another aborts (an exception on one rank ending its `with`
 * block) get its agreed error, and nothing is written. Returns 0, or -1
 * with the close's agreed error. */
static int settle(sfpy_state *st, sfpy_writer *W, int close)
{
  slabfeed_writer *w = W->w;
  W->w = NULL;
  char err[2048] = "";
  slabfeed_status s = SLABFEED_OK;
  W->busy = 1;
  PyThreadState *ts = PyEval_SaveThread();
  if (close)
    s = slabfeed_writer_close(w, err, sizeof err);
  else
    slabfeed_writer_abort(w);
  PyEval_RestoreThread(ts);
  W->busy = 0;
  W->finished = !close ? 2 : s == SLABFEED_OK ? 1 : 3;
  if (s != SLABFEED_OK) {
    sfpy_raise(st, s, err);
    return -1;
  }
  return 0;
}

/* close(): collective (settle). */
static PyObject *writer_close(sfpy_writer *self, PyObject *noargs)
{
  (void)noargs;
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  const int rc = check_finishable(st, self, 1);
  if (rc < 0 || (rc == 0 && settle(st, self, 1) < 0))
    return NULL;
  Py_RETURN_NONE;
}

/* abort(): collective (settle); discards the output. */
static PyObject *writer_abort(sfpy_writer *self, PyObject *noargs)
{
  (void)noargs;
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  const int rc = check_finishable(st, self, 0);
  if (rc < 0 || (rc == 0 && settle(st, self, 0) < 0))
    return NULL;
  Py_RETURN_NONE;
}

/* Never closes or aborts (both collective; the last reference may go on
 * one rank only): an open writer is left to the process exit with a
 * ResourceWarning (slabfeed.Writer aborts the open ones at a normal exit).
 */
static void writer_dealloc(sfpy_writer *self)
{
  PyTypeObject *tp = Py_TYPE(self);
  if (self->w != NULL && !forked(self)) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (PyErr_WarnEx(PyExc_ResourceWarning,
                     "slabfeed: a Writer was garbage-collected while open; "
                     "nothing is written, and its resources are left to the "
                     "process exit (close() is collective: call it on every "
                     "rank, or use `with`)",
                     1) < 0)
      PyErr_WriteUnraisable((PyObject *)self);
    PyErr_Restore(et, ev, tb);
  }
  Py_CLEAR(self->path);
  freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  f(self);
  Py_DECREF(tp);
}

/* ---- Properties ---------------------------------------------------------- */

static PyObject *writer_get_shape(sfpy_writer *self, void *c)
{
  (void)c;
  return Py_BuildValue("(LLLL)", (long long)self->shape[0],
                       (long long)self->shape[1], (long long)self->shape[2],
                       (long long)self->shape[3]);
}

static PyObject *writer_get_z_range(sfpy_writer *self, void *c)
{
  (void)c;
  return Py_BuildValue("(LL)", (long long)self->z0, (long long)self->z1);
}

static PyObject *writer_get_closed(sfpy_writer *self, void *c)
{
  (void)c;
  return PyBool_FromLong(self->w == NULL);
}

static PyObject *writer_get_state(sfpy_writer *self, void *c)
{
  (void)c;
  static const char *const names[] = {"open", "closed", "aborted", "failed"};
  return PyUnicode_FromString(!self->opened ? "new" : names[self->finished]);
}

static PyObject *writer_get_path(sfpy_writer *self, void *c)
{
  (void)c;
  if (self->path == NULL)
    Py_RETURN_NONE;
  return Py_NewRef(self->path);
}

static PyObject *writer_get_device(sfpy_writer *self, void *c)
{
  (void)c;
  return PyLong_FromLong(self->device);
}

static PyObject *writer_repr(sfpy_writer *self)
{
  PyObject *state = writer_get_state(self, NULL);
  if (state == NULL)
    return NULL;
  PyObject *r = PyUnicode_FromFormat(
      "<slabfeed._slabfeed.Writer %R shape=(%lld, %lld, %lld, %lld) %U>",
      self->path != NULL ? self->path : Py_None, (long long)self->shape[0],
      (long long)self->shape[1], (long long)self->shape[2],
      (long long)self->shape[3], state);
  Py_DECREF(state);
  return r;
}

static PyMethodDef writer_methods[] = {
    {"put", (PyCFunction)(void (*)(void))writer_put,
     METH_VARARGS | METH_KEYWORDS,
     "put(batch, output, stream=None, layout='ncdhw')\n\nStores the "
     "outputs of one batch of the pass (slabfeed_writer_put, GIL released). "
     "`output` speaks DLPack; for a CUDA output `stream` (an int "
     "cudaStream_t, 1 the legacy default stream, or a stream object) is the "
     "stream it was written on and is required here (slabfeed.Writer.put "
     "takes torch's current stream), except for a slabfeed.Tensor of a "
     "device batch, put on the stream of its batch when none is given. A "
     "stale batch raises StaleBatchError. A refused put stores nothing; a "
     "put that failed while storing makes close() fail on every rank."},
    {"close", (PyCFunction)writer_close, METH_NOARGS,
     "close()\n\nCollective: checks that every voxel was put once, writes "
     "the file and renames it over its name (slabfeed_writer_close); raises "
     "the agreed error otherwise (no file is left under the name), also when "
     "a rank called abort() instead. A no-op after a close that "
     "succeeded."},
    {"abort", (PyCFunction)writer_abort, METH_NOARGS,
     "abort()\n\nCollective (it meets close() on the ranks that close "
     "instead, whose close then raises): discards the output "
     "(slabfeed_writer_abort). A no-op once closed or aborted."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef writer_getset[] = {
    {"shape", (getter)writer_get_shape, NULL,
     "The output dataset's shape as in the file: (C, Z, Y, X) for layout "
     "'cf', (Z, Y, X, C) for 'cl'.",
     NULL},
    {"z_range", (getter)writer_get_z_range, NULL,
     "(z0, z1): the planes of the output this rank holds and writes.", NULL},
    {"closed", (getter)writer_get_closed, NULL, "True once closed or aborted.",
     NULL},
    {"state", (getter)writer_get_state, NULL,
     "'open', 'closed' (the file is written), 'aborted' or 'failed' (close "
     "raised: nothing was written).",
     NULL},
    {"path", (getter)writer_get_path, NULL, "The output file's name.", NULL},
    {"device", (getter)writer_get_device, NULL,
     "The loader's device: -1 for host batches, else the CUDA ordinal.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot writer_slots[] = {
    {Py_tp_doc,
     "Writer(comm_f2c, loader, path, dataset=None, channels=0, *, "
     "layout='cf', dtype='f32', chunk=None, overwrite=False, "
     "like='target')\n\nThe C writer of a tiled pass (slabfeed_writer_*); "
     "use slabfeed.Writer, which takes the loader itself and finds the "
     "stream of CUDA outputs."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, writer_init},
    {Py_tp_dealloc, writer_dealloc},
    {Py_tp_repr, writer_repr},
    {Py_tp_methods, writer_methods},
    {Py_tp_getset, writer_getset},
    {0, NULL},
};

PyType_Spec sfpy_writer_spec = {
    .name = "slabfeed._slabfeed.Writer",
    .basicsize = sizeof(sfpy_writer),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = writer_slots,
};
