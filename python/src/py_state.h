/*
 * The base of every file of slabfeed._slabfeed: the Python headers (the
 * limited API), the public C API (slabfeed.h, slabfeed_tools.h) and the
 * per-module state (the exception classes and the types), reached from an
 * object through its type. Header only; py_module.c lists the files of the
 * extension and their layers.
 *
 * Built against the CPython limited API 3.10 (one abi3 binary for 3.10+):
 * heap types from specs, module state reached through the type, no
 * buffer protocol (not in the 3.10 limited API).
 */
#ifndef SFPY_STATE_H
#define SFPY_STATE_H

#ifndef Py_LIMITED_API
#error "build with -DPy_LIMITED_API=0x030A0000 (python/CMakeLists.txt does)"
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include <slabfeed.h>
#include <slabfeed_tools.h>

#define SFPY_NSTATUS 11 /* SLABFEED_OK .. SLABFEED_ERR_UNSUPPORTED */

/* Per-module state: the exception classes and the types. */
typedef struct {
  PyObject *error;                /* slabfeed.Error */
  PyObject *errors[SFPY_NSTATUS]; /* by status; [0] = NULL */
  PyObject *stale;                /* slabfeed.StaleBatchError */
  PyTypeObject *loader_type;
  PyTypeObject *batch_type;
  PyTypeObject *tensor_type;
  PyTypeObject *reader_type;
  PyTypeObject *option_type; /* slabfeed.Option (a struct sequence) */
  PyObject *options;         /* tuple of Option: the option table */
} sfpy_state;

/* sfpy_state_of - the state of the module that defined `type` (one of the
 * extension's heap types). */
static inline sfpy_state *sfpy_state_of(PyTypeObject *type)
{
  return (sfpy_state *)PyType_GetModuleState(type);
}

#endif /* SFPY_STATE_H */
