/*
 * MPI as the extension sees it: whether MPI is active, the communicator of
 * an mpi4py handle, and what the module says about its MPI library (the
 * one it was built with, the one its calls reach).
 */
#include "py_mpi.h"

#include "py_args.h"
#include "py_errors.h"

#include <string.h>
#if defined(__unix__) || defined(__APPLE__)
#include <dlfcn.h>
#endif

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
PyObject *sfpy_mpi_build(void)
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
PyObject *sfpy_mpi_library_version(PyObject *m, PyObject *noargs)
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
PyObject *sfpy_mpi_runtime_library(PyObject *m, PyObject *noargs)
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
PyObject *sfpy_mpi_is_active(PyObject *m, PyObject *noargs)
{
  (void)m;
  (void)noargs;
  return PyBool_FromLong(sfpy_mpi_active());
}
