/*
 * The conversion of Python arguments to C values: choices, integers,
 * triples, vector groups and CUDA stream arguments; each error names the
 * argument.
 */
#include "py_args.h"

#include <string.h>

/* ---- Argument conversion
 * -----------------------------------------------------
 */

const char *const sfpy_dtype_names[] = {"f32", "f16", "bf16", NULL};
const char *const sfpy_dtype_aliases[] = {"float32", "float16", "bfloat16",
                                          NULL};
const char *const sfpy_file_layouts[] = {"auto", "cf", "cl", NULL};
const char *const sfpy_out_layouts[] = {"ncdhw", "ndhwc", NULL};

int sfpy_choice(PyObject *o, const char *arg, const char *const *names,
                const char *const *aliases, int *out)
{
  if (o == NULL || o == Py_None)
    return 0;
  if (PyUnicode_Check(o))
    for (int i = 0; names[i] != NULL; i++)
      if (PyUnicode_CompareWithASCIIString(o, names[i]) == 0 ||
          (aliases && PyUnicode_CompareWithASCIIString(o, aliases[i]) == 0)) {
        *out = i;
        return 0;
      }
  char list[160] = "";
  for (int i = 0; names[i] != NULL; i++) {
    strncat(list, i ? ", '" : "'", sizeof list - strlen(list) - 1);
    strncat(list, names[i], sizeof list - strlen(list) - 1);
    strncat(list, "'", sizeof list - strlen(list) - 1);
  }
  PyErr_Format(PyExc_ValueError, "slabfeed: %s must be one of %s, not %R", arg,
               list, o);
  return -1;
}

int sfpy_int(PyObject *o, const char *arg, long long lo, long long hi,
             long long *out)
{
  if (o == NULL || o == Py_None)
    return 0;
  PyObject *i = PyNumber_Index(o);
  if (i == NULL) {
    PyErr_Format(PyExc_TypeError, "slabfeed: %s must be an integer, not %R",
                 arg, o);
    return -1;
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
  Py_DECREF(i);
  if (v == -1 && PyErr_Occurred())
    return -1;
  if (overflow || v < lo || v > hi) {
    PyErr_Format(PyExc_ValueError,
                 "slabfeed: %s = %R is out of range [%lld, %lld]", arg, o, lo,
                 hi);
    return -1;
  }
  *out = v;
  return 0;
}

int sfpy_u64(PyObject *o, const char *arg, uint64_t *out)
{
  if (o == NULL || o == Py_None)
    return 0;
  PyObject *i = PyNumber_Index(o);
  if (i == NULL) {
    PyErr_Format(PyExc_TypeError, "slabfeed: %s must be an integer, not %R",
                 arg, o);
    return -1;
  }
  const unsigned long long v = PyLong_AsUnsignedLongLong(i);
  Py_DECREF(i);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError,
                 "slabfeed: %s = %R is out of range [0, 2**64)", arg, o);
    return -1;
  }
  *out = (uint64_t)v;
  return 0;
}

/* The items of sequence o (not a str) as a new tuple, or NULL (TypeError). */
static PyObject *as_tuple(PyObject *o, const char *arg)
{
  if (PyUnicode_Check(o) || PyBytes_Check(o) || !PySequence_Check(o)) {
    PyErr_Format(PyExc_TypeError, "slabfeed: %s must be a sequence, not %R",
                 arg, o);
    return NULL;
  }
  return PySequence_Tuple(o);
}

int sfpy_triple(PyObject *o, const char *arg, int64_t out[3])
{
  if (o == NULL || o == Py_None)
    return 0;
  long long v[3];
  if (!PyUnicode_Check(o) && !PySequence_Check(o)) {
    if (sfpy_int(o, arg, 1, INT64_MAX, &v[0]) < 0)
      return -1;
    v[1] = v[2] = v[0];
  } else {
    PyObject *t = as_tuple(o, arg);
    if (t == NULL)
      return -1;
    if (PyTuple_Size(t) != 3) {
      PyErr_Format(PyExc_ValueError,
                   "slabfeed: %s must be an int or 3 ints (z, y, x), not %R",
                   arg, o);
      Py_DECREF(t);
      return -1;
    }
    for (int a = 0; a < 3; a++)
      if (sfpy_int(PyTuple_GetItem(t, a), arg, 1, INT64_MAX, &v[a]) < 0) {
        Py_DECREF(t);
        return -1;
      }
    Py_DECREF(t);
  }
  for (int a = 0; a < 3; a++)
    out[a] = (int64_t)v[a];
  return 0;
}

int sfpy_vectors(PyObject *o, const char *arg, int (*out)[3], int *n)
{
  if (o == NULL || o == Py_None)
    return 0;
  PyObject *t = as_tuple(o, arg);
  if (t == NULL)
    return -1;
  Py_ssize_t len = PyTuple_Size(t);
  /* One flat triple (1, 2, 3) is one group. */
  if (len > 0 && PyIndex_Check(PyTuple_GetItem(t, 0))) {
    PyObject *one = PyTuple_Pack(1, t);
    Py_DECREF(t);
    if (one == NULL)
      return -1;
    t = one;
    len = 1;
  }
  if (len > SLABFEED_MAX_VECTORS) {
    PyErr_Format(PyExc_ValueError,
                 "slabfeed: %s: at most %d vector groups, not %zd", arg,
                 SLABFEED_MAX_VECTORS, len);
    Py_DECREF(t);
    return -1;
  }
  for (Py_ssize_t g = 0; g < len; g++) {
    PyObject *grp = as_tuple(PyTuple_GetItem(t, g), arg);
    if (grp == NULL || PyTuple_Size(grp) != 3) {
      if (grp != NULL)
        PyErr_Format(PyExc_ValueError,
                     "slabfeed: %s: a vector group is 3 channel indices "
                     "(components along z, y, x), not %R",
                     arg, grp);
      Py_XDECREF(grp);
      Py_DECREF(t);
      return -1;
    }
    for (int k = 0; k < 3; k++) {
      long long v = 0;
      if (sfpy_int(PyTuple_GetItem(grp, k), arg, 0, INT32_MAX, &v) < 0) {
        Py_DECREF(grp);
        Py_DECREF(t);
        return -1;
      }
      out[g][k] = (int)v;
    }
    Py_DECREF(grp);
  }
  *n = (int)len;
  Py_DECREF(t);
  return 0;
}

/* ---- Streams ---------------------------------------------------------- */

/* parse_stream - the cudaStream_t meant by `o` for next() of a device
 * loader: None (the loader's own handoff stream), an int (a cudaStream_t;
 * 1 and 2 are CUDA's legacy and per-thread default streams, 0 is refused
 * as ambiguous, as in DLPack), or a stream object: one with __cuda_stream__()
 * (the CUDA stream protocol: (version, handle)) or .cuda_stream
 * (torch.cuda.Stream), whose handle 0 (the NULL stream, torch's default
 * stream) means the legacy default stream, 1. */
int sfpy_parse_stream(PyObject *o, void **out)
{
  /* None gives NULL: the caller takes the handoff stream once the loader is
   * known to be live (the conversion may run Python code). */
  *out = NULL;
  if (o == Py_None)
    return 0;
  PyObject *h = NULL, *attr = NULL;
  int torch_style = 0;
  if (PyIndex_Check(o)) {
    h = Py_NewRef(o);
  } else if ((attr = PyObject_GetAttrString(o, "__cuda_stream__")) != NULL) {
    PyObject *t = PyObject_CallNoArgs(attr);
    Py_DECREF(attr);
    torch_style = 1;
    if (t == NULL)
      return -1;
    if (PyTuple_Check(t) && PyTuple_Size(t) == 2)
      h = Py_NewRef(PyTuple_GetItem(t, 1));
    Py_DECREF(t);
    if (h == NULL) {
      PyErr_SetString(PyExc_TypeError,
                      "slabfeed: __cuda_stream__() must return (version, "
                      "handle)");
      return -1;
    }
  } else if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
    return -1;
  } else {
    PyErr_Clear();
    h = PyObject_GetAttrString(o, "cuda_stream");
    torch_style = 1;
    if (h == NULL) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "slabfeed: stream must be None, an int (cudaStream_t) or a "
                   "stream object (torch.cuda.Stream, __cuda_stream__), not %R",
                   o);
      return -1;
    }
  }
  long long v = 0;
  const int rc = sfpy_int(h, "stream", 0, INTPTR_MAX, &v);
  Py_DECREF(h);
  if (rc < 0)
    return -1;
  if (v == 0 && torch_style)
    v = 1;
  if (v == 0) {
    PyErr_SetString(PyExc_ValueError,
                    "slabfeed: stream 0 is ambiguous: pass 1 for the legacy "
                    "default stream, 2 for the per-thread default stream, or "
                    "a cudaStream_t");
    return -1;
  }
  *out = (void *)(intptr_t)v;
  return 0;
}
