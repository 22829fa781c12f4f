/*
 * slabfeed._slabfeed: the C extension of the Python package, over the
 * public C API only (slabfeed.h, slabfeed_tools.h). Internal header shared
 * by its files: py_module.c (module, errors, MPI helpers, argument
 * conversion), py_options.c (the loader options, made from the library's
 * option table), py_loader.c (Loader, Batch), py_tensor.c (Tensor and
 * DLPack), py_tools.c (generate, describe, Reader), py_cuda.c (the
 * consumer-stream bookkeeping, the only file that calls the CUDA runtime).
 * py_loader.h has the loader object as batches and tensors see it,
 * py_tensor.h the constructor of a Tensor: py_loader.c uses py_tensor.c,
 * never the other way round.
 *
 * Built against the CPython limited API 3.10 (one abi3 binary for 3.10+):
 * heap types from specs, module state reached through the type, no
 * buffer protocol (not in the 3.10 limited API).
 */
#ifndef SFPY_H
#define SFPY_H

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

/* ---- py_cuda.c: consumer streams of device batches ------------------------
 * A device batch is handed to one stream by slabfeed_next (the library then
 * reuses its slot only after that stream has passed the next call of next).
 * __dlpack__(stream=s) on another stream s makes s wait on the batch's ready
 * event and registers s; before the loader's next/seek/close, every
 * registered stream records an event that the stream of the last next waits
 * on, so the library's release point also covers the work queued on s. */

#define SFPY_MAX_STREAMS 8 /* other consumer streams per batch */

typedef struct sfpy_cuda sfpy_cuda;

/* sfpy_cuda_create - the handoff stream (for next(stream=None)) and the
 * join events, on `device`; the current device is restored.
 * Returns 0, or -1 with a message in err. */
int sfpy_cuda_create(int device, sfpy_cuda **out, char *err, size_t errlen);

/* sfpy_cuda_destroy - releases what create took; NULL is a no-op. Not in a
 * forked child (the caller checks). */
void sfpy_cuda_destroy(sfpy_cuda *c);

/* sfpy_cuda_handoff - the stream next(stream=None) uses. */
void *sfpy_cuda_handoff(const sfpy_cuda *c);

/* sfpy_cuda_export - makes `stream` wait on `event` (no host wait) and,
 * unless `stream` is `given` (the stream of next), registers it for the
 * join. Returns 0, or -1 with a message in err (too many streams, CUDA). */
int sfpy_cuda_export(sfpy_cuda *c, void *stream, void *given, void *event,
                     char *err, size_t errlen);

/* sfpy_cuda_join - every registered stream records an event that `into`
 * waits on; the registry is emptied. No host wait. Returns 0, or -1 with a
 * message in err (the registry is emptied all the same). */
int sfpy_cuda_join(sfpy_cuda *c, void *into, char *err, size_t errlen);

/* sfpy_cuda_available - 1 when the extension was built with CUDA. */
int sfpy_cuda_available(void);

/* ---- py_module.c -------------------------------------------------------- */

/* The state of the module that defined `type` (one of ours). */
sfpy_state *sfpy_state_of(PyTypeObject *type);

/* Sets the exception of status s (the slabfeed.Error subclass, which also
 * derives from the matching built-in) with `message`; returns NULL. */
PyObject *sfpy_raise(sfpy_state *st, slabfeed_status s, const char *message);

/* Sets slabfeed.StaleBatchError with `message`; returns NULL. */
PyObject *sfpy_raise_stale(sfpy_state *st, const char *message);

/* MPI_Comm from the Fortran handle of an mpi4py communicator
 * (comm.py2f()). Returns 0, or -1 with an exception set. */
int sfpy_comm_from_fint(sfpy_state *st, PyObject *fint, MPI_Comm *out);

/* 1 when MPI is initialised and not finalised (MPI as this library sees
 * it). */
int sfpy_mpi_active(void);

/* ---- Argument conversion (py_module.c) ------------------------------------
 * Each returns 0, or -1 with an exception set naming the argument. A NULL
 * or None object leaves *out untouched (the library default). */

/* A string choice: `names` is a NULL-terminated list whose index is the
 * value; `aliases` (may be NULL) a parallel list of second spellings. */
int sfpy_choice(PyObject *o, const char *arg, const char *const *names,
                const char *const *aliases, int *out);
int sfpy_int(PyObject *o, const char *arg, long long lo, long long hi,
             long long *out);
int sfpy_u64(PyObject *o, const char *arg, uint64_t *out);
/* An int (all three axes) or a sequence of 3 ints, each >= 1. */
int sfpy_triple(PyObject *o, const char *arg, int64_t out[3]);
/* A sequence of up to SLABFEED_MAX_VECTORS triples of channel indices. */
int sfpy_vectors(PyObject *o, const char *arg, int (*out)[3], int *n);

extern const char *const sfpy_dtype_names[];   /* "f32", "f16", "bf16" */
extern const char *const sfpy_dtype_aliases[]; /* "float32", ... */
extern const char *const sfpy_file_layouts[];  /* "auto", "cf", "cl" */
extern const char *const sfpy_out_layouts[];   /* "ncdhw", "ndhwc" */

/* ---- py_options.c: the loader options ------------------------------------
 * Made from the library's option table (slabfeed_option_at): every row is
 * a keyword of Loader. A value goes to the library as the text that
 * slabfeed_config_set parses, and comes back from slabfeed_config_get. */

/* sfpy_options_init - makes slabfeed.Option and the tuple of the table's
 * rows (with their defaults as Python values) into st, and adds Option to
 * module m. Returns 0, or -1 with an exception. */
int sfpy_options_init(PyObject *m, sfpy_state *st);

/* sfpy_options_apply - sets the options given as keywords in `kw` (a dict
 * or NULL) on *cfg (initialised by the caller): each keyword is looked up
 * in the table (unknown: TypeError naming it, as Python does), converted
 * by its kind to text and stored with slabfeed_config_set; None leaves the
 * option at the library default. The objects that own the texts are
 * appended to the list `keep`: the strings *cfg points to live as long as
 * they do. With `require`, an option flagged SLABFEED_OPTION_REQUIRED that
 * was not given is a TypeError; `caller` names the call in messages.
 * Returns 0, or -1 with an exception naming the option (TypeError for a
 * value of the wrong type, ArgumentError with the library's message for a
 * bad value). */
int sfpy_options_apply(sfpy_state *st, PyObject *kw, slabfeed_config *cfg,
                       PyObject *keep, const char *caller, int require);

/* sfpy_options_values - every option's value in *cfg as a dict of Python
 * values, by name (what options() gives as defaults). NULL with an
 * exception. */
PyObject *sfpy_options_values(const slabfeed_config *cfg);

/* Module-level functions: options(), config_defaults(), resolve_options(). */
PyObject *sfpy_options_list(PyObject *module, PyObject *noargs);
PyObject *sfpy_config_defaults(PyObject *module, PyObject *noargs);
PyObject *sfpy_resolve_options(PyObject *module, PyObject *args, PyObject *kw);

/* Type specs, for py_module.c. */
extern PyType_Spec sfpy_loader_spec;
extern PyType_Spec sfpy_batch_spec;
extern PyType_Spec sfpy_tensor_spec;
extern PyType_Spec sfpy_reader_spec;

/* Module-level functions of py_tools.c. */
PyObject *sfpy_generate(PyObject *module, PyObject *args, PyObject *kw);
PyObject *sfpy_describe(PyObject *module, PyObject *args, PyObject *kw);
PyObject *sfpy_field_stats(PyObject *module, PyObject *args, PyObject *kw);

#endif /* SFPY_H */
