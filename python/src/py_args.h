/*
 * Argument conversion (py_args.c). Each function returns 0, or -1 with an
 * exception set naming the argument. A NULL or None object leaves *out
 * untouched (the library default) unless said otherwise.
 */
#ifndef SFPY_ARGS_H
#define SFPY_ARGS_H

#include "py_state.h"

/* sfpy_choice - a string choice: `names` is a NULL-terminated list whose
 * index is the value; `aliases` (may be NULL) a parallel list of second
 * spellings. ValueError listing the names otherwise. */
int sfpy_choice(PyObject *o, const char *arg, const char *const *names,
                const char *const *aliases, int *out);

/* sfpy_int - an integer (operator.index) in [lo, hi]; TypeError for a
 * non-integer, ValueError out of range. */
int sfpy_int(PyObject *o, const char *arg, long long lo, long long hi,
             long long *out);

/* sfpy_u64 - an integer in [0, 2**64). */
int sfpy_u64(PyObject *o, const char *arg, uint64_t *out);

/* sfpy_triple - an int (all three axes) or a sequence of 3 ints, each
 * >= 1. */
int sfpy_triple(PyObject *o, const char *arg, int64_t out[3]);

/* sfpy_vectors - a sequence of up to SLABFEED_MAX_VECTORS triples of
 * channel indices (or one flat triple); *n is their number. */
int sfpy_vectors(PyObject *o, const char *arg, int (*out)[3], int *n);

/* sfpy_parse_stream - the cudaStream_t meant by a Python stream argument:
 * None gives NULL (none given; *out is set), an int is a handle (1 and 2:
 * CUDA's legacy and per-thread default streams; 0 is ambiguous and
 * refused, as in DLPack), a stream object is read through
 * __cuda_stream__() or .cuda_stream, whose handle 0 (torch's default
 * stream) is the legacy default stream. */
int sfpy_parse_stream(PyObject *o, void **out);

extern const char *const sfpy_dtype_names[];   /* "f32", "f16", "bf16" */
extern const char *const sfpy_dtype_aliases[]; /* "float32", ... */
extern const char *const sfpy_file_layouts[];  /* "auto", "cf", "cl" */
extern const char *const sfpy_out_layouts[];   /* "ncdhw", "ndhwc" */

#endif /* SFPY_ARGS_H */
