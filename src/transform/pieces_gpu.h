/* The C boundary of the device gather of a crop's pieces (pieces.cu):
 * with the slabs resident in GPU memory (residency device, 0.8) the
 * pieces of a crop, every dataset's, are copied into device staging by one
 * kernel launch instead of a pitched copy per channel and piece (each of
 * those costs microseconds of the producer's time: 64^3 crops of 9
 * channels were bound by it). Sources may be another GPU's memory mapped
 * over CUDA IPC (peer access). */
#ifndef SF_PIECES_GPU_H
#define SF_PIECES_GPU_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Pieces one launch takes at most (the table goes by value, within the
 * 4 KiB of a launch's parameters); a crop of more falls back to copies. */
#define SF_PIECES_MAX 48

/* One piece of one dataset: C channels of n0 planes of n1 rows of n2
 * floats from src (strides in floats: channel, plane, row) to dst (the
 * piece's place in the staged crop, strides likewise). */
typedef struct sf__dpiece {
  const float *src;
  float *dst;
  int64_t src_c, src_z, src_y;
  int32_t dst_c, dst_z, dst_y;
  int32_t C, n0, n1, n2;
} sf__dpiece;

typedef struct sf__dpieces {
  int n;            /* pieces in p */
  int64_t rows_max; /* C * n0 * n1 of the largest piece */
  sf__dpiece p[SF_PIECES_MAX];
} sf__dpieces;

/* Enqueues the copy of every piece of t on stream s (one launch; nothing
 * for n 0). Returns the launch error (cudaGetLastError), never
 * synchronises. */
cudaError_t sf__pieces_launch(const sf__dpieces *t, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
