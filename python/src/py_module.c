/*
 * slabfeed._slabfeed: module definition (multi-phase init, state in the
 * module), the exception classes, MPI helpers and argument conversion.
 */
#include "sfpy.h"

#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#endif

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

/* Creates the classes into st and adds them to module m. */
static int add_errors(PyObject *m, sfpy_state *st)
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

sfpy_state *sfpy_state_of(PyTypeObject *type)
{
  return (sfpy_state *)PyType_GetModuleState(type);
}

/* ---- MPI ------------------------------------------------------------------
 */

int sfpy_mpi_active(void)
{
  int init = 0, fin = 0;
  if (MPI_Initialized(&init) != MPI_SUCCESS ||
      MPI_Finalized(&fin) != MPI_SUCCESS)
    return 0;
  return init && !fin;
}

int sfpy_comm_from_fint(sfpy_state *st, PyObject *fint, MPI_Comm *out)
{
  long long v = 0;
  if (sfpy_int(fint, "comm handle", INT32_MIN, INT32_MAX, &v) < 0)
    return -1;
  if (!sfpy_mpi_active()) {
    sfpy_raise(st, SLABFEED_ERR_STATE,
               "slabfeed: MPI is not initialised (or already finalised) in "
               "the MPI library slabfeed uses: import mpi4py.MPI first (it "
               "initialises MPI), with the same MPI library");
    return -1;
  }
  const MPI_Comm c = MPI_Comm_f2c((MPI_Fint)v);
  if (c == MPI_COMM_NULL) {
    PyErr_SetString(PyExc_ValueError,
                    "slabfeed: the communicator is MPI_COMM_NULL");
    return -1;
  }
  *out = c;
  return 0;
}

/* The MPI the extension was compiled against, from the macros of its mpi.h
 * (fixed at build time, whatever library the process loads later):
 * vendor, version and ABI family ("openmpi", "mpich" for MPICH and the
 * MPICH-ABI derivatives Intel MPI, MVAPICH, Cray MPICH; "msmpi"). */
#if defined(OPEN_MPI)
#define SFPY_MPI_VENDOR "Open MPI"
#define SFPY_MPI_FAMILY "openmpi"
#elif defined(I_MPI_VERSION)
#define SFPY_MPI_VENDOR "Intel MPI"
#define SFPY_MPI_FAMILY "mpich"
#define SFPY_MPI_VSTRING I_MPI_VERSION
#elif defined(MVAPICH2_VERSION)
#define SFPY_MPI_VENDOR "MVAPICH2"
#define SFPY_MPI_FAMILY "mpich"
#define SFPY_MPI_VSTRING MVAPICH2_VERSION
#elif defined(MVAPICH_VERSION)
#define SFPY_MPI_VENDOR "MVAPICH"
#define SFPY_MPI_FAMILY "mpich"
#define SFPY_MPI_VSTRING MVAPICH_VERSION
#elif defined(MSMPI_VER)
#define SFPY_MPI_VENDOR "Microsoft MPI"
#define SFPY_MPI_FAMILY "msmpi"
#elif defined(MPICH_VERSION)
#define SFPY_MPI_VENDOR "MPICH"
#define SFPY_MPI_FAMILY "mpich"
#define SFPY_MPI_VSTRING MPICH_VERSION
#else
#define SFPY_MPI_VENDOR "unknown"
#endif
#ifndef SFPY_MPI_COMPILER /* set by python/CMakeLists.txt */
#define SFPY_MPI_COMPILER ""
#endif
#ifndef SFPY_MPI_LIBRARIES
#define SFPY_MPI_LIBRARIES ""
#endif

/* The mpi_build dict: vendor, version, family (None when unknown),
 * standard ("3.1"), mpicc and libraries (what CMake built with; "" when
 * unknown). */
static PyObject *mpi_build_dict(void)
{
  char version[64];
#if defined(OPEN_MPI)
  snprintf(version, sizeof version, "%d.%d.%d", OMPI_MAJOR_VERSION,
           OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
#elif defined(SFPY_MPI_VSTRING)
  snprintf(version, sizeof version, "%s", SFPY_MPI_VSTRING);
#elif defined(MSMPI_VER)
  snprintf(version, sizeof version, "%d.%d", MSMPI_VER >> 8, MSMPI_VER & 0xff);
#else
  version[0] = '\0';
#endif
  char standard[16];
  snprintf(standard, sizeof standard, "%d.%d", MPI_VERSION, MPI_SUBVERSION);
#ifdef SFPY_MPI_FAMILY
  const char *family = SFPY_MPI_FAMILY;
#else
  const char *family = NULL;
#endif
  return Py_BuildValue("{s:s,s:s,s:z,s:s,s:s,s:s}", "vendor", SFPY_MPI_VENDOR,
                       "version", version, "family", family, "standard",
                       standard, "mpicc", SFPY_MPI_COMPILER, "libraries",
                       SFPY_MPI_LIBRARIES);
}

/* mpi_library_version() -> str: MPI_Get_library_version of the MPI library
 * that the extension's MPI calls reach (callable before MPI_Init). That is
 * the library it is linked with unless another MPI library was loaded
 * globally before it (mpi4py does so with Open MPI): its calls then bind
 * to that one. The buffer is larger than any library's
 * MPI_MAX_LIBRARY_VERSION_STRING (Open MPI's 256 is far shorter than
 * MPICH's text when the call reaches MPICH). */
static PyObject *mod_mpi_library_version(PyObject *m, PyObject *noargs)
{
  (void)m;
  (void)noargs;
  const size_t size = 16384 > MPI_MAX_LIBRARY_VERSION_STRING
                          ? 16384
                          : MPI_MAX_LIBRARY_VERSION_STRING;
  char *v = PyMem_Calloc(size, 1);
  if (v == NULL)
    return PyErr_NoMemory();
  int len = 0;
  if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) {
    PyMem_Free(v);
    PyErr_SetString(PyExc_RuntimeError, "MPI_Get_library_version failed");
    return NULL;
  }
  if (len < 0 || (size_t)len >= size)
    len = (int)strnlen(v, size - 1);
  PyObject *r = PyUnicode_DecodeUTF8(v, len, "replace");
  PyMem_Free(v);
  return r;
}

/* mpi_runtime_library() -> str | None: the file of the shared library that
 * the extension's MPI_Comm_rank resolves to (dladdr), None where unknown. */
static PyObject *mod_mpi_runtime_library(PyObject *m, PyObject *noargs)
{
  (void)m;
  (void)noargs;
#if defined(__unix__) || defined(__APPLE__)
  Dl_info info;
  void *sym = (void *)(uintptr_t)&MPI_Comm_rank;
  if (dladdr(sym, &info) != 0 && info.dli_fname != NULL &&
      info.dli_fname[0] != '\0')
    return PyUnicode_DecodeFSDefault(info.dli_fname);
#endif
  Py_RETURN_NONE;
}

/* mpi_is_active() -> bool: MPI initialised and not finalised, as the MPI
 * library slabfeed is linked with sees it. */
static PyObject *mod_mpi_is_active(PyObject *m, PyObject *noargs)
{
  (void)m;
  (void)noargs;
  return PyBool_FromLong(sfpy_mpi_active());
}

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

/* ---- Module ----------------------------------------------------------------
 */

static PyMethodDef module_methods[] = {
    {"mpi_library_version", mod_mpi_library_version, METH_NOARGS,
     "mpi_library_version() -> str\n\nMPI_Get_library_version of the MPI "
     "library that slabfeed's MPI calls reach (the one it is linked with, "
     "unless another MPI library was loaded globally before it)."},
    {"mpi_runtime_library", mod_mpi_runtime_library, METH_NOARGS,
     "mpi_runtime_library() -> str | None\n\nThe file of the shared "
     "library that slabfeed's MPI calls resolve to (dladdr), None where "
     "unknown."},
    {"mpi_is_active", mod_mpi_is_active, METH_NOARGS,
     "mpi_is_active() -> bool\n\nWhether MPI is initialised and not "
     "finalised, as the MPI library slabfeed is linked with sees it."},
    {"options", sfpy_options_list, METH_NOARGS,
     "options() -> tuple of Option\n\nThe library's option table "
     "(slabfeed_option_at), in the order of slabfeed_config: every row is a "
     "keyword of Loader; `default` is the Python value of the default."},
    {"config_defaults", sfpy_config_defaults, METH_NOARGS,
     "config_defaults() -> dict\n\nThe default of every option "
     "(slabfeed_config_init), by Loader keyword: {o.name: o.default for o in "
     "options()}."},
    {"resolve_options", (PyCFunction)(void (*)(void))sfpy_resolve_options,
     METH_VARARGS | METH_KEYWORDS,
     "resolve_options(**options) -> dict\n\nThe value of every option once "
     "the keywords are applied to the defaults, as Loader converts and "
     "checks them (slabfeed_config_set; the checks that need the file or "
     "several options come at open). Raises what Loader raises for a bad "
     "keyword or value; local (not collective)."},
    {"generate", (PyCFunction)(void (*)(void))sfpy_generate,
     METH_VARARGS | METH_KEYWORDS,
     "generate(comm_f2c, path, **options)\n\nslabfeed_generate (collective); "
     "use slabfeed.tools.generate."},
    {"describe", (PyCFunction)(void (*)(void))sfpy_describe,
     METH_VARARGS | METH_KEYWORDS,
     "describe(path, dataset, layout='auto') -> dict\n\nslabfeed_describe; "
     "use slabfeed.tools.describe."},
    {"field_stats", (PyCFunction)(void (*)(void))sfpy_field_stats,
     METH_VARARGS | METH_KEYWORDS,
     "field_stats(comm_f2c, path, dataset, layout='auto', log_a=None) -> "
     "list\n\nslabfeed_field_stats (collective); use "
     "slabfeed.tools.field_stats."},
    {NULL, NULL, 0, NULL},
};

/* The Writer type (py_writer.c). */
extern PyType_Spec sfpy_writer_spec;

static int add_type(PyObject *m, PyType_Spec *spec, PyTypeObject **out)
{
  PyObject *t = PyType_FromModuleAndSpec(m, spec, NULL);
  if (t == NULL)
    return -1;
  *out = (PyTypeObject *)t;
  return PyModule_AddType(m, *out);
}

static int module_exec(PyObject *m)
{
  sfpy_state *st = PyModule_GetState(m);
  PyTypeObject *writer_type = NULL; /* the module's attribute keeps it */
  if (add_errors(m, st) < 0 ||
      add_type(m, &sfpy_loader_spec, &st->loader_type) < 0 ||
      add_type(m, &sfpy_batch_spec, &st->batch_type) < 0 ||
      add_type(m, &sfpy_tensor_spec, &st->tensor_type) < 0 ||
      add_type(m, &sfpy_reader_spec, &st->reader_type) < 0 ||
      add_type(m, &sfpy_writer_spec, &writer_type) < 0 ||
      sfpy_options_init(m, st) < 0) {
    Py_XDECREF(writer_type);
    return -1;
  }
  Py_DECREF(writer_type);
  if (PyModule_AddStringConstant(m, "__version__", slabfeed_version_string()) <
          0 ||
      PyModule_AddIntConstant(m, "version_number", (long)slabfeed_version()) <
          0 ||
      PyModule_AddObjectRef(m, "cuda_built",
                            sfpy_cuda_available() ? Py_True : Py_False) < 0 ||
      PyModule_AddIntConstant(m, "max_streams", SFPY_MAX_STREAMS) < 0)
    return -1;
  PyObject *build = mpi_build_dict();
  if (build == NULL)
    return -1;
  const int rc = PyModule_AddObjectRef(m, "mpi_build", build);
  Py_DECREF(build);
  return rc;
}

static int module_traverse(PyObject *m, visitproc visit, void *arg)
{
  sfpy_state *st = PyModule_GetState(m);
  if (st == NULL)
    return 0;
  Py_VISIT(st->error);
  for (int s = 0; s < SFPY_NSTATUS; s++)
    Py_VISIT(st->errors[s]);
  Py_VISIT(st->stale);
  Py_VISIT(st->loader_type);
  Py_VISIT(st->batch_type);
  Py_VISIT(st->tensor_type);
  Py_VISIT(st->reader_type);
  Py_VISIT(st->option_type);
  Py_VISIT(st->options);
  return 0;
}

static int module_clear(PyObject *m)
{
  sfpy_state *st = PyModule_GetState(m);
  if (st == NULL)
    return 0;
  Py_CLEAR(st->error);
  for (int s = 0; s < SFPY_NSTATUS; s++)
    Py_CLEAR(st->errors[s]);
  Py_CLEAR(st->stale);
  Py_CLEAR(st->loader_type);
  Py_CLEAR(st->batch_type);
  Py_CLEAR(st->tensor_type);
  Py_CLEAR(st->reader_type);
  Py_CLEAR(st->option_type);
  Py_CLEAR(st->options);
  return 0;
}

static void module_free(void *m)
{
  module_clear((PyObject *)m);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, (void *)module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "slabfeed._slabfeed",
    .m_doc = "The C extension of slabfeed: Loader, Batch, Tensor (DLPack), "
             "the tools and the error classes. Use the package `slabfeed`.",
    .m_size = sizeof(sfpy_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit__slabfeed(void)
{
  return PyModuleDef_Init(&module_def);
}
