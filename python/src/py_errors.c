/*
 * The exception classes of slabfeed (one per status, and StaleBatchError),
 * the raising of a status with its message, and the classification of an
 * exception as the ranks agree on it.
 */
#include "py_errors.h"

#include <string.h>

/* ---- Exceptions -----------------------------------------------------------
 * slabfeed.Error(Exception) carries `status` (the enum name, e.g.
 * "SLABFEED_ERR_IO") and `code` (its pinned value) as class attributes;
 * one subclass per status, which also derives from the built-in a Python
 * user would catch. str(exception) is the library's message (agreed on by
 * all ranks for collective calls). */

static const char *const error_names[SFPY_NSTATUS] = {
    NULL,         "ArgumentError", "FileIOError",      "FormatError",
    "MPIError",   "CUDAError",     "NCCLError",        "OutOfMemoryError",
    "StateError", "ForkedError",   "UnsupportedError",
};

static const char *const error_docs[SFPY_NSTATUS] = {
    NULL,
    "SLABFEED_ERR_ARG: an invalid option or argument (also a ValueError).",
    "SLABFEED_ERR_IO: a file could not be opened, read or written (also an "
    "OSError).",
    "SLABFEED_ERR_FORMAT: unsupported or inconsistent file content (also a "
    "ValueError).",
    "SLABFEED_ERR_MPI: an MPI call failed, or mpi4py and slabfeed use "
    "different MPI libraries (also a RuntimeError).",
    "SLABFEED_ERR_CUDA: a CUDA call failed (also a RuntimeError).",
    "SLABFEED_ERR_NCCL: an NCCL call failed (also a RuntimeError).",
    "SLABFEED_ERR_NOMEM: host, pinned or device memory could not be taken "
    "(also a MemoryError).",
    "SLABFEED_ERR_STATE: a call that is not valid now, e.g. on a closed "
    "loader (also a RuntimeError).",
    "SLABFEED_ERR_FORKED: a loader used in a forked child process; open a "
    "new loader there, or use threads (also a RuntimeError).",
    "SLABFEED_ERR_UNSUPPORTED: not supported by this build, e.g. device "
    "batches without CUDA (also a NotImplementedError).",
};

/* The built-in each status also derives from. */
static PyObject *builtin_base(slabfeed_status s)
{
  switch (s) {
  case SLABFEED_ERR_ARG:
  case SLABFEED_ERR_FORMAT:
    return PyExc_ValueError;
  case SLABFEED_ERR_IO:
    return PyExc_OSError;
  case SLABFEED_ERR_NOMEM:
    return PyExc_MemoryError;
  case SLABFEED_ERR_UNSUPPORTED:
    return PyExc_NotImplementedError;
  default:
    return PyExc_RuntimeError;
  }
}

/* A new exception class named slabfeed.<name> with bases and class
 * attributes status/code; NULL with an exception on failure. */
static PyObject *new_error_class(const char *name, const char *doc,
                                 PyObject *bases, const char *status, int code)
{
  char qualified[64];
  snprintf(qualified, sizeof qualified, "slabfeed.%s", name);
  PyObject *dict =
      status ? Py_BuildValue("{s:s,s:i}", "status", status, "code", code)
             : Py_BuildValue("{s:O,s:O}", "status", Py_None, "code", Py_None);
  if (dict == NULL)
    return NULL;
  PyObject *cls = PyErr_NewExceptionWithDoc(qualified, doc, bases, dict);
  Py_DECREF(dict);
  return cls;
}

int sfpy_errors_init(PyObject *m, sfpy_state *st)
{
  st->error = new_error_class(
      "Error",
      "Base of every slabfeed error. `status` is the C status name "
      "(e.g. 'SLABFEED_ERR_IO'), `code` its value; str() is the message.",
      NULL, NULL, 0);
  if (st->error == NULL || PyModule_AddObjectRef(m, "Error", st->error) < 0)
    return -1;
  for (int s = 1; s < SFPY_NSTATUS; s++) {
    PyObject *bases = PyTuple_Pack(2, st->error, builtin_base(s));
    if (bases == NULL)
      return -1;
    st->errors[s] = new_error_class(error_names[s], error_docs[s], bases,
                                    slabfeed_status_name(s), s);
    Py_DECREF(bases);
    if (st->errors[s] == NULL ||
        PyModule_AddObjectRef(m, error_names[s], st->errors[s]) < 0)
      return -1;
  }
  st->stale = new_error_class(
      "StaleBatchError",
      "A batch (or one of its tensors) used after next(), seek() or close() "
      "of its loader: its memory may already hold another batch (a "
      "StateError).",
      st->errors[SLABFEED_ERR_STATE], slabfeed_status_name(SLABFEED_ERR_STATE),
      SLABFEED_ERR_STATE);
  if (st->stale == NULL ||
      PyModule_AddObjectRef(m, "StaleBatchError", st->stale) < 0)
    return -1;
  return 0;
}

PyObject *sfpy_raise(sfpy_state *st, slabfeed_status s, const char *message)
{
  PyObject *cls = (s > 0 && s < SFPY_NSTATUS) ? st->errors[s] : st->error;
  if (cls == NULL) /* module teardown */
    cls = PyExc_RuntimeError;
  if (message == NULL || message[0] == '\0')
    message = slabfeed_strerror(s);
  PyObject *msg = PyUnicode_DecodeUTF8(message, (Py_ssize_t)strlen(message),
                                       "backslashreplace");
  if (msg == NULL)
    return NULL;
  PyErr_SetObject(cls, msg);
  Py_DECREF(msg);
  return NULL;
}

PyObject *sfpy_raise_stale(sfpy_state *st, const char *message)
{
  PyErr_SetString(st->stale != NULL ? st->stale : PyExc_RuntimeError, message);
  return NULL;
}

/* ---- Exceptions as the ranks agree on them ------------------------------ */

void sfpy_agree_classify(sfpy_state *st, PyObject *et, agree_pkt *p)
{
  p->kind = AGREE_OTHER;
  p->status = SLABFEED_OK;
  if (et != NULL && PyErr_GivenExceptionMatches(et, st->error)) {
    for (int s = 1; s < SFPY_NSTATUS; s++)
      if (st->errors[s] != NULL &&
          PyErr_GivenExceptionMatches(et, st->errors[s])) {
        p->kind = AGREE_STATUS;
        p->status = s;
        break;
      }
  } else if (et != NULL && PyErr_GivenExceptionMatches(et, PyExc_TypeError)) {
    p->kind = AGREE_TYPE;
  } else if (et != NULL && PyErr_GivenExceptionMatches(et, PyExc_ValueError)) {
    p->kind = AGREE_STATUS;
    p->status = SLABFEED_ERR_ARG;
  } else if (et != NULL && PyErr_GivenExceptionMatches(et, PyExc_MemoryError)) {
    p->kind = AGREE_STATUS;
    p->status = SLABFEED_ERR_NOMEM;
  }
}
