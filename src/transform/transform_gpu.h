/* The C boundary of the CUDA transform kernel (transform.cu). */
#ifndef SF_TRANSFORM_GPU_H
#define SF_TRANSFORM_GPU_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Everything one launch needs, by value: the index map of the symmetry on
 * the crop (output extents, start, steps into the staged input), the
 * channel map of the vector groups, dtype and layout, and the tiling: t1
 * and 2 are the output axes of a 32x32 shared-memory tile, q the output
 * axis along which the input is contiguous (so both the load and the store
 * are coalesced), r the remaining axis. */
typedef struct sf__kparams {
  int64_t e[3];
  int64_t start, step[3];
  int64_t vol;
  int channels;
  int dtype;  /* slabfeed_dtype */
  int layout; /* slabfeed_out_layout */
  int t1, r, q;
  int src[64];
  float sign[64];
} sf__kparams;

/* Enqueues the transform of one staged crop `in` (device, [C][e..] floats
 * in input order) into one output sample `out` (device) on stream s.
 * Returns the launch error (cudaGetLastError), never synchronises. */
cudaError_t sf__transform_launch(const sf__kparams *k, const float *in,
                                 void *out, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
