/*
 * slabfeed._slabfeed: the module definition (multi-phase init, state in
 * the module): its functions, types, exception classes and constants.
 *
 * The extension is written over the public C API only (slabfeed.h,
 * slabfeed_tools.h). Its files, each with its header, from the bottom:
 *   py_state.h    the Python headers, the module state (header only)
 *   dlpack.h      the DLPack structs (header only)
 *   py_errors     the exception classes, raising a status, classifying an
 *                 exception for the ranks' agreement
 *   py_args       argument conversion (choices, ints, triples, streams)
 *   py_cuda       consumer streams of device batches (the only file that
 *                 calls the CUDA runtime)
 *   py_mpi        MPI state, communicators, the MPI library's identity
 *   py_options    the loader options, made from the library's table
 *   py_liveness   the Loader object as its batches and tensors see it, and
 *                 the rule that makes a stale batch raise
 *   py_tensor     Tensor and its DLPack export
 *   py_loader     Loader and Batch
 *   py_tools      generate, describe, field_stats, Reader
 *   py_writer     Writer
 *   py_module.c   this file (no header: nothing includes it)
 * A file includes the headers of the files below it only (lint.includes
 * proves the include graph has no circle).
 */
#include "py_cuda.h"
#include "py_errors.h"
#include "py_loader.h"
#include "py_mpi.h"
#include "py_options.h"
#include "py_tensor.h"
#include "py_tools.h"
#include "py_writer.h"

/* ---- Module ----------------------------------------------------------------
 */

static PyMethodDef module_methods[] = {
    {"mpi_library_version", sfpy_mpi_library_version, METH_NOARGS,
     "mpi_library_version() -> str\n\nMPI_Get_library_version of the MPI "
     "library that slabfeed's MPI calls reach (the one it is linked with, "
     "unless another MPI library was loaded globally before it)."},
    {"mpi_runtime_library", sfpy_mpi_runtime_library, METH_NOARGS,
     "mpi_runtime_library() -> str | None\n\nThe file of the shared "
     "library that slabfeed's MPI calls resolve to (dladdr), None where "
     "unknown."},
    {"mpi_is_active", sfpy_mpi_is_active, METH_NOARGS,
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
  if (sfpy_errors_init(m, st) < 0 ||
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
  PyObject *build = sfpy_mpi_build();
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
