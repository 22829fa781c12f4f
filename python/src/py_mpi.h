/*
 * MPI as the extension sees it (py_mpi.c): whether MPI is active, the
 * communicator of an mpi4py handle, and the module's functions and
 * constant that describe the MPI library.
 */
#ifndef SFPY_MPI_H
#define SFPY_MPI_H

#include "py_state.h"

/* sfpy_mpi_active - 1 when MPI is initialised and not finalised (MPI as
 * this library sees it). */
int sfpy_mpi_active(void);

/* sfpy_comm_from_fint - MPI_Comm from the Fortran handle of an mpi4py
 * communicator (comm.py2f()). Returns 0, or -1 with an exception set
 * (StateError when MPI is not active, ValueError for MPI_COMM_NULL). */
int sfpy_comm_from_fint(sfpy_state *st, PyObject *fint, MPI_Comm *out);

/* sfpy_mpi_build - the mpi_build dict of the MPI the extension was
 * compiled against: vendor, version, family (None when unknown), standard
 * ("3.1"), mpicc and libraries ("" when unknown). NULL with an exception. */
PyObject *sfpy_mpi_build(void);

/* Module-level functions: mpi_library_version() -> str (of the library
 * the extension's MPI calls reach), mpi_runtime_library() -> str | None
 * (its file, by dladdr), mpi_is_active() -> bool. */
PyObject *sfpy_mpi_library_version(PyObject *m, PyObject *noargs);
PyObject *sfpy_mpi_runtime_library(PyObject *m, PyObject *noargs);
PyObject *sfpy_mpi_is_active(PyObject *m, PyObject *noargs);

#endif /* SFPY_MPI_H */
