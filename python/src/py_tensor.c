/*
 * slabfeed._slabfeed.Tensor: one tensor of a batch, exported with DLPack
 * (the array API's __dlpack__ / __dlpack_device__), zero copy. The export
 * refuses stale batches; on CUDA it orders the consumer's stream after the
 * batch's ready event without any host wait.
 */
#include "py_tensor.h"

#include "dlpack.h"
#include "py_args.h"
#include "py_cuda.h"
#include "py_errors.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  PyObject_HEAD sfpy_loader *loader; /* strong */
  uint64_t generation;
  slabfeed_tensor t;
  int device;        /* -1: host */
  void *stream;      /* the stream given to next (device) */
  void *ready_event; /* the batch's cudaEvent_t (device) */
} sfpy_tensor;

PyObject *sfpy_tensor_new(sfpy_state *st, sfpy_loader *L, uint64_t generation,
                          const slabfeed_tensor *t, int device, void *stream,
                          void *ready_event)
{
  if (st->tensor_type == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "slabfeed: the module is gone");
    return NULL;
  }
  allocfunc alloc = (allocfunc)PyType_GetSlot(st->tensor_type, Py_tp_alloc);
  sfpy_tensor *T = (sfpy_tensor *)alloc(st->tensor_type, 0);
  if (T == NULL)
    return NULL;
  Py_INCREF(L);
  T->loader = L;
  T->generation = generation;
  T->t = *t;
  T->device = device;
  T->stream = stream;
  T->ready_event = ready_event;
  return (PyObject *)T;
}

void *sfpy_tensor_stream(sfpy_state *st, PyObject *o)
{
  if (st->tensor_type == NULL || !PyObject_TypeCheck(o, st->tensor_type))
    return NULL;
  const sfpy_tensor *T = (const sfpy_tensor *)o;
  return T->device >= 0 ? T->stream : NULL;
}

static void tensor_dealloc(sfpy_tensor *self)
{
  PyTypeObject *tp = Py_TYPE(self);
  Py_XDECREF(self->loader);
  freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  f(self);
  Py_DECREF(tp);
}

/* ---- DLPack export --------------------------------------------------------
 * One allocation per export holds the managed tensor (legacy or versioned),
 * its shape and strides, and a reference to the loader (so that the loader
 * object outlives every consumer array; its memory still ends at close()).
 * The deleter may run on any thread, with or without the GIL. */

typedef struct {
  union {
    DLManagedTensor legacy;
    DLManagedTensorVersioned versioned;
  } m;
  int64_t shape[5];
  int64_t strides[5];
  PyObject *owner;
} export_ctx;

static void release_ctx(export_ctx *x)
{
  /* At interpreter exit the reference is left alone (nothing to keep). */
  if (x->owner != NULL && Py_IsInitialized()) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(x->owner);
    PyGILState_Release(g);
  }
  free(x);
}

static void legacy_deleter(DLManagedTensor *m)
{
  release_ctx((export_ctx *)m->manager_ctx);
}

static void versioned_deleter(DLManagedTensorVersioned *m)
{
  release_ctx((export_ctx *)m->manager_ctx);
}

/* Capsule destructor: a capsule that was never consumed (still named
 * "dltensor" or "dltensor_versioned") calls the deleter itself. */
static void capsule_destructor(PyObject *cap)
{
  if (PyCapsule_IsValid(cap, "used_dltensor") ||
      PyCapsule_IsValid(cap, "used_dltensor_versioned"))
    return;
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m != NULL && m->deleter != NULL)
      m->deleter(m);
  } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    DLManagedTensorVersioned *m =
        PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (m != NULL && m->deleter != NULL)
      m->deleter(m);
  }
  if (PyErr_Occurred())
    PyErr_WriteUnraisable(cap);
  PyErr_Restore(et, ev, tb);
}

static DLDataType dl_dtype(slabfeed_dtype d)
{
  DLDataType t = {.code = kDLFloat, .bits = 32, .lanes = 1};
  if (d == SLABFEED_DTYPE_F16)
    t.bits = 16;
  else if (d == SLABFEED_DTYPE_BF16) {
    t.code = kDLBfloat;
    t.bits = 16;
  }
  return t;
}

static DLDevice dl_device_of(const sfpy_tensor *self)
{
  DLDevice d = {kDLCPU, 0};
  if (self->device >= 0) {
    d.device_type = kDLCUDA;
    d.device_id = self->device;
  }
  return d;
}

/* An (a, b) pair of ints from a 2-tuple; -1 with TypeError otherwise. */
static int int_pair(PyObject *o, const char *arg, long long *a, long long *b)
{
  if (!PyTuple_Check(o) || PyTuple_Size(o) != 2) {
    PyErr_Format(PyExc_TypeError, "slabfeed: %s must be a 2-tuple, not %R", arg,
                 o);
    return -1;
  }
  if (sfpy_int(PyTuple_GetItem(o, 0), arg, INT32_MIN, INT32_MAX, a) < 0 ||
      sfpy_int(PyTuple_GetItem(o, 1), arg, INT32_MIN, INT32_MAX, b) < 0)
    return -1;
  return 0;
}

/* order_stream - the DLPack stream rule for a device tensor: `v` is 1 (the
 * legacy default stream; also for None), -1 (the consumer synchronises
 * itself), 2 (per-thread default: refused in cuda.c) or a cudaStream_t; 0 is
 * refused. The stream is made to wait on the batch's ready event and is
 * joined at the loader's next next/seek/close. No Python code runs here:
 * the caller checked the loader is live just before. */
static int order_stream(sfpy_state *st, sfpy_tensor *self, long long v)
{
  if (v == -1)
    return 0;
  if (v == 0) {
    PyErr_SetString(PyExc_ValueError,
                    "slabfeed: __dlpack__(stream=0) is ambiguous (DLPack): "
                    "pass 1 for the legacy default stream or a cudaStream_t");
    return -1;
  }
  char err[256];
  if (sfpy_cuda_export(self->loader->cuda, (void *)(intptr_t)v, self->stream,
                       self->ready_event, err, sizeof err) < 0) {
    sfpy_raise(st, SLABFEED_ERR_CUDA, err);
    return -1;
  }
  return 0;
}

/* __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) */
static PyObject *tensor_dlpack(sfpy_tensor *self, PyObject *args, PyObject *kw)
{
  static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  PyObject *so = Py_None, *mv = Py_None, *dev = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO:__dlpack__", kwlist, &so,
                                   &mv, &dev, &copy))
    return NULL;
  /* Every argument to C values first: __index__ / __bool__ may run Python
   * code that calls next() or close() on the loader. Its liveness is
   * checked after the last of them, and nothing in between the check and
   * the capsule runs Python code. */
  long long major = 0, minor = 0;
  if (mv != Py_None && int_pair(mv, "max_version", &major, &minor) < 0)
    return NULL;
  long long dtype_ = 0, did = 0;
  if (dev != Py_None && int_pair(dev, "dl_device", &dtype_, &did) < 0)
    return NULL;
  int want_copy = 0;
  if (copy != Py_None && (want_copy = PyObject_IsTrue(copy)) < 0)
    return NULL;
  long long sv = self->device < 0 ? -1 : 1; /* None */
  if (so != Py_None && sfpy_int(so, "stream", -1, INTPTR_MAX, &sv) < 0)
    return NULL;

  if (sfpy_loader_check_live(self->loader, self->generation) < 0)
    return NULL;
  const int versioned = major >= 1;
  const DLDevice here = dl_device_of(self);
  if (dev != Py_None && (dtype_ != here.device_type || did != here.device_id)) {
    PyErr_Format(PyExc_BufferError,
                 "slabfeed: the tensor lives on DLPack device (%d, %d) and "
                 "is exported there only (no copies; Tensor.tobytes() "
                 "copies to the host)",
                 (int)here.device_type, (int)here.device_id);
    return NULL;
  }
  if (want_copy) {
    PyErr_SetString(PyExc_BufferError,
                    "slabfeed: __dlpack__(copy=True) is not supported: "
                    "batches are exported without copies (Tensor.tobytes() "
                    "copies to the host)");
    return NULL;
  }
  if (self->device < 0) {
    if (sv != -1) {
      PyErr_SetString(PyExc_ValueError,
                      "slabfeed: stream must be None for a host tensor "
                      "(DLPack)");
      return NULL;
    }
  } else if (order_stream(st, self, sv) < 0) {
    return NULL;
  }

  export_ctx *x = calloc(1, sizeof *x);
  if (x == NULL)
    return PyErr_NoMemory();
  for (int a = 0; a < 5; a++) {
    x->shape[a] = self->t.shape[a];
    x->strides[a] = self->t.strides[a];
  }
  const DLTensor dl = {
      .data = self->t.data,
      .device = here,
      .ndim = self->t.ndim,
      .dtype = dl_dtype(self->t.dtype),
      .shape = x->shape,
      .strides = x->strides,
      .byte_offset = 0,
  };
  void *ptr;
  const char *name;
  if (versioned) {
    x->m.versioned.version.major = SFPY_DLPACK_MAJOR;
    x->m.versioned.version.minor = SFPY_DLPACK_MINOR;
    x->m.versioned.manager_ctx = x;
    x->m.versioned.deleter = versioned_deleter;
    x->m.versioned.flags = 0;
    x->m.versioned.dl_tensor = dl;
    ptr = &x->m.versioned;
    name = "dltensor_versioned";
  } else {
    x->m.legacy.dl_tensor = dl;
    x->m.legacy.manager_ctx = x;
    x->m.legacy.deleter = legacy_deleter;
    ptr = &x->m.legacy;
    name = "dltensor";
  }
  PyObject *cap = PyCapsule_New(ptr, name, capsule_destructor);
  if (cap == NULL) {
    free(x);
    return NULL;
  }
  /* Only now the capsule owns x: its destructor releases the reference. */
  x->owner = Py_NewRef((PyObject *)self->loader);
  return cap;
}

/* __dlpack_device__() -> (device_type, device_id) */
static PyObject *tensor_dlpack_device(sfpy_tensor *self, PyObject *noargs)
{
  (void)noargs;
  const DLDevice d = dl_device_of(self);
  return Py_BuildValue("(ii)", (int)d.device_type, (int)d.device_id);
}

static size_t tensor_nbytes(const sfpy_tensor *self)
{
  size_t n = slabfeed_dtype_size(self->t.dtype);
  for (int a = 0; a < self->t.ndim && a < 5; a++)
    n *= (size_t)self->t.shape[a];
  return n;
}

/* tobytes() -> bytes: a host copy in C order (slabfeed_copy_to_host; for
 * device tensors on the loader's private stream, which it waits for). */
static PyObject *tensor_tobytes(sfpy_tensor *self, PyObject *noargs)
{
  (void)noargs;
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  if (sfpy_loader_check_live(self->loader, self->generation) < 0)
    return NULL;
  const size_t n = tensor_nbytes(self);
  PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
  if (out == NULL)
    return NULL;
  char *dst = PyBytes_AsString(out);
  if (dst == NULL) {
    Py_DECREF(out);
    return NULL;
  }
  slabfeed_loader *l = self->loader->l;
  self->loader->busy = 1;
  PyThreadState *ts = PyEval_SaveThread();
  const slabfeed_status s = slabfeed_copy_to_host(l, &self->t, dst);
  PyEval_RestoreThread(ts);
  self->loader->busy = 0;
  if (s != SLABFEED_OK) {
    Py_DECREF(out);
    return sfpy_raise(st, s, slabfeed_last_error(l));
  }
  return out;
}

static PyObject *shape_tuple(const int64_t *v, int n)
{
  PyObject *t = PyTuple_New(n);
  if (t == NULL)
    return NULL;
  for (int i = 0; i < n; i++) {
    PyObject *x = PyLong_FromLongLong(v[i]);
    if (x == NULL || PyTuple_SetItem(t, i, x) < 0) {
      Py_DECREF(t);
      return NULL;
    }
  }
  return t;
}

static PyObject *tensor_get_shape(sfpy_tensor *self, void *c)
{
  (void)c;
  return shape_tuple(self->t.shape, self->t.ndim);
}

static PyObject *tensor_get_strides(sfpy_tensor *self, void *c)
{
  (void)c;
  return shape_tuple(self->t.strides, self->t.ndim);
}

/* The dtype's name, bound-checked (a newer library may add dtypes). */
static const char *dtype_alias(slabfeed_dtype d)
{
  return ((unsigned)d < 3u) ? sfpy_dtype_aliases[d] : "unknown";
}

static PyObject *tensor_get_dtype(sfpy_tensor *self, void *c)
{
  (void)c;
  return PyUnicode_FromString(dtype_alias(self->t.dtype));
}

static PyObject *tensor_get_ndim(sfpy_tensor *self, void *c)
{
  (void)c;
  return PyLong_FromLong(self->t.ndim);
}

static PyObject *tensor_get_nbytes(sfpy_tensor *self, void *c)
{
  (void)c;
  return PyLong_FromSize_t(tensor_nbytes(self));
}

static PyObject *tensor_get_device(sfpy_tensor *self, void *c)
{
  (void)c;
  return PyLong_FromLong(self->device);
}

static PyObject *tensor_get_valid(sfpy_tensor *self, void *c)
{
  (void)c;
  const sfpy_loader *L = self->loader;
  return PyBool_FromLong(L->l != NULL && L->generation == self->generation);
}

static PyObject *tensor_repr(sfpy_tensor *self)
{
  PyObject *shape = shape_tuple(self->t.shape, self->t.ndim);
  if (shape == NULL)
    return NULL;
  PyObject *r = PyUnicode_FromFormat(
      "<slabfeed.Tensor shape=%R dtype=%s device=%d%s>", shape,
      dtype_alias(self->t.dtype), self->device,
      (self->loader->l != NULL && self->loader->generation == self->generation)
          ? ""
          : " stale");
  Py_DECREF(shape);
  return r;
}

static PyMethodDef tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))tensor_dlpack,
     METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, "
     "copy=None)\n\nA DLPack capsule over the batch memory (no copy): the "
     "versioned one (DLPack 1.0) when max_version >= (1, 0), else the "
     "legacy one. bfloat16 is kDLBfloat. Device tensors: `stream` (None = "
     "legacy default stream 1 of the current device, which must be the "
     "tensor's, a cudaStream_t, or -1 = no ordering; 2, the per-thread "
     "default stream, is refused) is made to wait on the batch (no host wait). "
     "Raises "
     "StaleBatchError once the batch is stale, ForkedError in a forked "
     "child, BufferError for copy=True or another dl_device."},
    {"__dlpack_device__", (PyCFunction)tensor_dlpack_device, METH_NOARGS,
     "__dlpack_device__() -> (device_type, device_id): (1, 0) for host "
     "memory, (2, N) for CUDA device N."},
    {"tobytes", (PyCFunction)tensor_tobytes, METH_NOARGS,
     "tobytes() -> bytes\n\nA host copy of the tensor in C order (also of "
     "device tensors; for tools and tests, not the training loop)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)tensor_get_shape, NULL,
     "(B,C,D,H,W) for NCDHW, (B,D,H,W,C) for NDHWC.", NULL},
    {"strides", (getter)tensor_get_strides, NULL,
     "Strides in elements (as DLPack; numpy's are in bytes).", NULL},
    {"dtype", (getter)tensor_get_dtype, NULL,
     "'float32', 'float16' or 'bfloat16'.", NULL},
    {"ndim", (getter)tensor_get_ndim, NULL, "5.", NULL},
    {"nbytes", (getter)tensor_get_nbytes, NULL, "Size in bytes.", NULL},
    {"device", (getter)tensor_get_device, NULL,
     "-1 for host memory, else the CUDA device ordinal.", NULL},
    {"valid", (getter)tensor_get_valid, NULL, "False once the batch is stale.",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot tensor_slots[] = {
    {Py_tp_doc,
     "Tensor: input or target of a Batch, over the loader's memory.\n\n"
     "Export it without a copy with torch.from_dlpack(t) or "
     "numpy.from_dlpack(t) (numpy has no bfloat16: use torch, or "
     "tobytes()). Using the Tensor after the loader's next(), seek() or "
     "close() raises StaleBatchError. An array made from it keeps the "
     "pointer: a device batch may be used by work on its stream until the "
     "next next(); a host batch stays valid until the prefetch-th following "
     "next(); both end at seek() and close()."},
    {Py_tp_dealloc, tensor_dealloc},
    {Py_tp_repr, tensor_repr},
    {Py_tp_methods, tensor_methods},
    {Py_tp_getset, tensor_getset},
    {0, NULL},
};

PyType_Spec sfpy_tensor_spec = {
    .name = "slabfeed.Tensor",
    .basicsize = sizeof(sfpy_tensor),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = tensor_slots,
};
