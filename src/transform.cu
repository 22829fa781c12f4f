// The fused transform kernel: one pass from a staged crop to one sample of
// the batch — symmetry on the spatial axes, vector-group channel map with
// sign flips, conversion to f32/f16/bf16 (round to nearest even, the same
// integer code as the host reference) and NCDHW or NDHWC layout.
//
// A block owns a 32x32 tile of the
// output plane spanned by axes t1 and 2, for several positions of the
// remaining axis r and a chunk of channels: it loads the tile with threads
// running along q (the output axis on which the input is contiguous) and
// stores it with threads running along the output's contiguous direction,
// so that both sides stay coalesced under any axis permutation.
// Offsets inside one sample are 32-bit (sf_open bounds a sample to 2^31
// elements).
#include "convert.h"
#include "transform_gpu.h"

namespace {

constexpr int kTile = 32;
constexpr int kRows = 8;
constexpr int kPlanes = 4; // positions of axis r per block (tiled kernel)

// The launch geometry reduced to scalars (no dynamic indexing of params).
struct Geo {
  int e1, e2, er; // output extents of axes t1, 2, r
  int s1, s2, sr; // input steps along output axes t1, 2, r
  int o1, orr;    // output strides of axes t1 and r (axis 2: 1)
  int start, vol, channels;
  bool along_t1; // input contiguous along t1 (else along 2)
};

template <int DTYPE> __device__ __forceinline__ uint32_t half_bits(float v)
{
  return DTYPE == 1 ? sf_f32_to_f16(v) : sf_f32_to_bf16(v);
}

template <int DTYPE>
__device__ __forceinline__ void put(void *out, int i, float v)
{
  if (DTYPE == 0)
    static_cast<float *>(out)[i] = v;
  else if (DTYPE == 1)
    static_cast<uint16_t *>(out)[i] = sf_f32_to_f16(v);
  else
    static_cast<uint16_t *>(out)[i] = sf_f32_to_bf16(v);
}

// KC: channels per block (1 for NCDHW). NDHWC stores run over (voxel,
// channel) pairs; a compile-time KC keeps that index arithmetic cheap.
template <int DTYPE, int KC, bool NDHWC>
__global__ void __launch_bounds__(kTile *kRows)
    tiled(const Geo g, const sf_kparams k, const float *__restrict__ in,
          void *__restrict__ out)
{
  constexpr int kc = KC;
  extern __shared__ float tile[]; // [kc][kTile][kTile + 1]
  const int nt2 = (g.e2 + kTile - 1) / kTile;
  const int i1base = (blockIdx.x / nt2) * kTile;
  const int i2base = (blockIdx.x % nt2) * kTile;
  const int k0 = blockIdx.z * kc;
  const int kn = min(kc, g.channels - k0);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int rend = min(g.er, (int)(blockIdx.y + 1) * kPlanes);

  for (int ir = blockIdx.y * kPlanes; ir < rend; ir++) {
    for (int kk = 0; kk < kn; kk++) {
      const int ch = k0 + kk;
      const int neg = k.sign[ch] < 0.0f;
      const float *src = in + k.src[ch] * g.vol + g.start + ir * g.sr;
      float *t = tile + kk * kTile * (kTile + 1);
      float v[kTile / kRows];
#pragma unroll
      for (int j = 0; j < kTile / kRows; j++) {
        const int a = g.along_t1 ? tx : ty + j * kRows; // along t1
        const int b = g.along_t1 ? ty + j * kRows : tx; // along 2
        const int i1 = i1base + a, i2 = i2base + b;
        v[j] =
            i1 < g.e1 && i2 < g.e2 ? __ldg(src + i1 * g.s1 + i2 * g.s2) : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < kTile / kRows; j++) {
        const int a = g.along_t1 ? tx : ty + j * kRows;
        const int b = g.along_t1 ? ty + j * kRows : tx;
        t[b * (kTile + 1) + a] = sf_flip_sign(v[j], neg);
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile / kRows; j++) {
      const int a = ty + j * kRows;
      const int i1 = i1base + a;
      if (i1 < g.e1) {
        const int row = ir * g.orr + i1 * g.o1 + i2base;
        if (!NDHWC) {
          if (i2base + tx < g.e2)
            put<DTYPE>(out, k0 * g.vol + row + tx, tile[tx * (kTile + 1) + a]);
        } else if (DTYPE != 0 && KC == g.channels &&
                   (reinterpret_cast<uintptr_t>(static_cast<uint16_t *>(out) +
                                                (int64_t)row * KC) &
                    3) == 0) {
          // 16-bit NDHWC with all channels in the block: the row's run of
          // voxels x channels is contiguous and 4-byte aligned, so stores
          // go out two elements at a time (full 32-byte sectors).
          const int n = min(kTile, g.e2 - i2base) * KC;
          uint32_t *o32 = reinterpret_cast<uint32_t *>(
              static_cast<uint16_t *>(out) + (int64_t)row * KC);
          for (int p = tx; p < n / 2; p += kTile) {
            const int l = 2 * p;
            const uint32_t lo = half_bits<DTYPE>(
                tile[((l % KC) * kTile + l / KC) * (kTile + 1) + a]);
            const uint32_t hi = half_bits<DTYPE>(
                tile[(((l + 1) % KC) * kTile + (l + 1) / KC) * (kTile + 1) +
                     a]);
            o32[p] = lo | hi << 16;
          }
          if ((n & 1) && tx == 0)
            put<DTYPE>(
                out, row * KC + n - 1,
                tile[(((n - 1) % KC) * kTile + (n - 1) / KC) * (kTile + 1) +
                     a]);
        } else {
#pragma unroll
          for (int l = tx; l < kTile * KC; l += kTile) {
            const int b = l / KC, kk = l % KC;
            if (kk < kn && i2base + b < g.e2)
              put<DTYPE>(out, (row + b) * g.channels + k0 + kk,
                         tile[(kk * kTile + b) * (kTile + 1) + a]);
          }
        }
      }
    }
    __syncthreads();
  }
}

Geo make_geo(const sf_kparams *k)
{
  const int64_t os[3] = {k->e[1] * k->e[2], k->e[2], 1};
  Geo g;
  g.e1 = (int)k->e[k->t1];
  g.e2 = (int)k->e[2];
  g.er = (int)k->e[k->r];
  g.s1 = (int)k->step[k->t1];
  g.s2 = (int)k->step[2];
  g.sr = (int)k->step[k->r];
  g.o1 = (int)os[k->t1];
  g.orr = (int)os[k->r];
  g.start = (int)k->start;
  g.vol = (int)k->vol;
  g.channels = k->channels;
  g.along_t1 = k->q != 2;
  return g;
}

template <int DTYPE, int KC, bool NDHWC>
cudaError_t launch_tiled(const Geo &g, const sf_kparams *k, const float *in,
                         void *out, cudaStream_t s)
{
  const int nt1 = (g.e1 + kTile - 1) / kTile, nt2 = (g.e2 + kTile - 1) / kTile;
  const dim3 grid((unsigned)(nt1 * nt2),
                  (unsigned)((g.er + kPlanes - 1) / kPlanes),
                  (unsigned)((k->channels + KC - 1) / KC));
  const dim3 block(kTile, kRows);
  const size_t smem = (size_t)KC * kTile * (kTile + 1) * sizeof(float);
  tiled<DTYPE, KC, NDHWC><<<grid, block, smem, s>>>(g, *k, in, out);
  return cudaGetLastError();
}

template <int DTYPE>
cudaError_t launch(const sf_kparams *k, const float *in, void *out,
                   cudaStream_t s)
{
  const Geo g = make_geo(k);
  if (k->layout != 1)
    return launch_tiled<DTYPE, 1, false>(g, k, in, out, s);
  switch (k->channels) { // NDHWC: all channels of a voxel in one block
  case 1:
    return launch_tiled<DTYPE, 1, true>(g, k, in, out, s);
  case 2:
    return launch_tiled<DTYPE, 2, true>(g, k, in, out, s);
  case 3:
    return launch_tiled<DTYPE, 3, true>(g, k, in, out, s);
  case 4:
    return launch_tiled<DTYPE, 4, true>(g, k, in, out, s);
  case 5:
    return launch_tiled<DTYPE, 5, true>(g, k, in, out, s);
  case 6:
    return launch_tiled<DTYPE, 6, true>(g, k, in, out, s);
  case 7:
    return launch_tiled<DTYPE, 7, true>(g, k, in, out, s);
  case 9:
    return launch_tiled<DTYPE, 9, true>(g, k, in, out, s);
  default: // 8, or more channels in chunks of 8
    return launch_tiled<DTYPE, 8, true>(g, k, in, out, s);
  }
}

} // namespace

extern "C" cudaError_t sf_transform_launch(const sf_kparams *k, const float *in,
                                           void *out, cudaStream_t s)
{
  switch (k->dtype) {
  case 0:
    return launch<0>(k, in, out, s);
  case 1:
    return launch<1>(k, in, out, s);
  default:
    return launch<2>(k, in, out, s);
  }
}
