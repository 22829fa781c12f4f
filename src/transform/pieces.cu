// The device gather of a crop's pieces (pieces_gpu.h): one launch copies
// every piece of every dataset of a crop from the slabs in GPU memory into
// the crop's staging. Block y takes piece y; its rows (C x n0 x n1 of
// them, n2 floats each) are spread over the blocks of x, a warp per row,
// with 16-byte loads and stores where the row, both bases and every stride
// allow them. Bit for bit a copy: the transform that follows sees what the
// pitched copies would have staged.
#include "transform/pieces_gpu.h"

namespace {

constexpr int kWarps = 8;             // rows in flight per block
constexpr int kBlocksPerPiece = 2048; // at most, along x

__device__ __forceinline__ bool aligned16(const void *p)
{
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// The table goes by value: the piece of a block is read from the launch's
// parameters (ld.param at a computed offset), not copied per thread. A
// template of the rows a block keeps in flight, so that nvcc's host stub
// of the kernel stays local to this file (lint.symbols).
template <int WARPS>
__global__ void __launch_bounds__(32 * WARPS) gather_pieces(const sf__dpieces t)
{
  const sf__dpiece &p = t.p[blockIdx.y];
  const int64_t rows = (int64_t)p.C * p.n0 * p.n1;
  const bool vec = (p.n2 & 3) == 0 && (p.src_c & 3) == 0 &&
                   (p.src_z & 3) == 0 && (p.src_y & 3) == 0 &&
                   (p.dst_c & 3) == 0 && (p.dst_z & 3) == 0 &&
                   (p.dst_y & 3) == 0 && aligned16(p.src) && aligned16(p.dst);
  for (int64_t r = (int64_t)blockIdx.x * WARPS + threadIdx.y; r < rows;
       r += (int64_t)gridDim.x * WARPS) {
    const int y = (int)(r % p.n1);
    const int64_t cz = r / p.n1;
    const int z = (int)(cz % p.n0), c = (int)(cz / p.n0);
    const float *s = p.src + c * p.src_c + z * p.src_z + y * p.src_y;
    float *d = p.dst + (int64_t)c * p.dst_c + (int64_t)z * p.dst_z +
               (int64_t)y * p.dst_y;
    if (vec) {
      const float4 *s4 = reinterpret_cast<const float4 *>(s);
      float4 *d4 = reinterpret_cast<float4 *>(d);
      for (int x = threadIdx.x; x < p.n2 / 4; x += 32)
        d4[x] = __ldg(s4 + x);
    } else {
      for (int x = threadIdx.x; x < p.n2; x += 32)
        d[x] = __ldg(s + x);
    }
  }
}

} // namespace

extern "C" cudaError_t sf__pieces_launch(const sf__dpieces *t, cudaStream_t s)
{
  if (t->n <= 0)
    return cudaSuccess;
  const int64_t want = (t->rows_max + kWarps - 1) / kWarps;
  const dim3 grid((unsigned)(want < kBlocksPerPiece ? (want > 0 ? want : 1)
                                                    : kBlocksPerPiece),
                  (unsigned)t->n);
  gather_pieces<kWarps><<<grid, dim3(32, kWarps), 0, s>>>(*t);
  return cudaGetLastError();
}
