/* The C boundary of the writer's inverse-transform kernel (inverse.cu). */
#ifndef SF_INVERSE_GPU_H
#define SF_INVERSE_GPU_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __CUDACC__
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#endif
#include "slabfeed.h" /* slabfeed_norm */

#ifdef __cplusplus
extern "C" {
#endif

/* One launch of the inverse transform: the part of one model output (a
 * sample of the batch, in the tile's symmetry frame) that the tile owns,
 * brought back to the volume's frame as float32 in the output slab's
 * layout, [channels][n0][n1][n2] (cl 0) or [n0][n1][n2][channels] (cl 1).
 * Output voxel i (of the owned box) of channel c is the element at
 *   cst + sum_b coef[b] * (j0[b] + i[b]) + kofs[c]
 * of the sample (dtype f32/f16/bf16), its normalisation inverted
 * (nnorm > 0: norm[c]) and then its sign flipped where neg[c]: the same
 * arithmetic, in the same order, as the writer's host path. */
typedef struct sf__ikparams {
  int64_t n[3];
  int64_t j0[3];
  int64_t cst, coef[3];
  int64_t kofs[64];
  int neg[64];
  int channels;
  int dtype; /* slabfeed_dtype of the sample */
  int cl;
  int nnorm;
  slabfeed_norm norm[64];
} sf__ikparams;

/* Enqueues the inverse transform of the sample at `in` (device) into
 * `out` (device, channels * n0 * n1 * n2 floats) on stream s. Returns the
 * launch error (cudaGetLastError); never synchronises. */
cudaError_t sf__inverse_launch(const sf__ikparams *k, const void *in,
                               float *out, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
