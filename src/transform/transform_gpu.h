/* The C boundary of the CUDA transform kernel (transform.cu). */
#ifndef SF_TRANSFORM_GPU_H
#define SF_TRANSFORM_GPU_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __CUDACC__
/* slabfeed.h includes mpi.h; the MPI C++ bindings are not wanted in a .cu */
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

/* Everything one launch needs, by value: the index map of the symmetry on
 * the crop (output extents, start, steps into the staged input), the
 * channel map of the vector groups, dtype and layout, and the tiling: t1
 * and 2 are the output axes of a 32x32 shared-memory tile, q the output
 * axis along which the input is contiguous (so both the load and the store
 * are coalesced), r the remaining axis. */
typedef struct sf__kparams {
  int64_t e[3];
  int64_t start, step[3];
  int64_t vol;  /* voxels of one channel of the staged crop */
  int64_t ovol; /* voxels of one channel of the output (e[0]*e[1]*e[2]) */
  int channels;
  int dtype;  /* slabfeed_dtype */
  int layout; /* slabfeed_out_layout */
  int t1, r, q;
  int src[64];
  float sign[64];
  /* Normalisation (0.5): nnorm 0 for none (the kernels of the transform
   * without it), else `channels`: norm[c] is the entry of output channel
   * c (that of its source channel src[c]), applied after the sign. */
  int nnorm;
  slabfeed_norm norm[64];
  /* Amplitude augmentation (0.7): naug 0 for none, else `channels`: output
   * channel c becomes fma(v, mul[c], add[c]) after its normalisation (those
   * of its source channel). The kernels with normalisation apply both;
   * norm holds identities where nnorm is 0, mul 1 and add -0 where naug
   * is 0, so either alone takes the same path. */
  int naug;
  float mul[64], add[64];
  /* Output strides in voxels of axes 0-2 (0.8): 0 for those of e (the
   * launch writes a whole sample), else the sample's while e is the part
   * a launch writes (sf__kparams_part). */
  int64_t os[3];
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
