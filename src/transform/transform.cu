// The fused transform kernel: one pass from a staged crop to one sample of
// the batch — symmetry on the spatial axes, vector-group channel map with
// sign flips, conversion to f32/f16/bf16 (round to nearest even, the same
// bits as the host reference) and NCDHW or NDHWC layout.
//
// A block owns a 32x32 tile of the output plane spanned by axes t1 and 2,
// for several positions of the remaining axis r: it loads the tile with
// threads running along q (the output axis on which the input is
// contiguous) and stores it with threads running along the output's
// contiguous direction, so that both sides stay coalesced under any axis
// permutation.
//   NCDHW (tiled_cf): one channel per block, a float tile transposed in
//     shared memory, converted as it is stored.
//   NDHWC (tiled_cl): all channels of the voxels in one block (or a chunk
//     of 8 when there are more than 9), converted as they are loaded into
//     a tile kept in output order, so that a tile row — 32 voxels x C
//     channels — leaves as one contiguous run of 32-bit stores.
// Offsets inside one sample are 32-bit (slabfeed_open bounds a sample to 2^31
// elements).
//
// Normalisation (0.5) is a template parameter NORM of both kernels: the
// instantiations without it are the kernels as they were (the same code
// and launch bounds; their parameters are the channel map and signs, not
// the normalisation sf__kparams now carries); with it each value is
// normalised after its sign flip (common/normf.h, the same bits as the
// host reference). On the H200, 128^3 crops of 4 channels, f32: 21.4 us
// per crop before and after the change, 31.6 us normalised (a log channel
// and a vector group; the log and the IEEE division make it compute bound).
// Amplitude augmentation (0.7) takes the same instantiations: after its
// normalisation a value becomes fma(v, m, a) with the sample's factor and
// offset of its channel (identities 1 and -0 where there are none, which
// change no bit), so a loader with either takes the NORM kernels.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/normf.h" /* first: it keeps MPI's C++ bindings out */
#include "common/convert.h"
#include "transform/transform_gpu.h"

namespace {

constexpr int kTile = 32;
constexpr int kRows = 8;
constexpr int kPlanes = 4; // positions of axis r per block
constexpr int kPer = kTile / kRows;
// Blocks per SM the register budget must allow (launch bounds). Left to
// itself the compiler hoists the tile's addresses out of the plane loop
// and takes 40 registers for tiled_cf and 64 for tiled_cl, which caps an
// SM at 6 and 4 blocks; on the H200 that cost tiled_cf 10% and tiled_cl
// 2-10% of their throughput (transform_bench, docs/PERFORMANCE.md).
// 8 blocks (32 registers) fill an SM with tiled_cf; tiled_cl is held to
// 5 (48 registers), where it spills at most 16 bytes (7 channels).
constexpr int kMinBlocksCf = 8;
constexpr int kMinBlocksCl = 5;
// With normalisation (log, division) a thread needs more registers:
// tiled_cf is held to 6 blocks (40 registers, no spill), tiled_cl stays at
// 5 (48 registers; it spills at 7 channels only, as without).
constexpr int kMinBlocksCfNorm = 6;

// The launch geometry reduced to scalars (no dynamic indexing of params).
struct Geo {
  int e1, e2, er; // output extents of axes t1, 2, r
  int s1, s2, sr; // input steps along output axes t1, 2, r
  int o1, orr;    // output strides of axes t1 and r (axis 2: 1)
  // vol: voxels of one input channel (its base is 64-bit: c * vol may pass
  // 2^31 in a slab, as for 1024^3 x 4), ovol: of one output channel.
  int start, vol, ovol, channels;
  bool along_t1; // input contiguous along t1 (else along 2)
};

// What the kernels read of the channels: the channel map and the signs
// of the vector groups, and with NORM the normalisation of each output
// channel (a kernel without it gets no more parameters than it needs).
template <bool NORM> struct Chans {
  int src[64];
  float sign[64];
};
template <> struct Chans<true> {
  int src[64];
  float sign[64];
  slabfeed_norm norm[64];
  float mul[64], add[64]; // amplitude augmentation (identities when none)
};

template <bool NORM> Chans<NORM> chans_of(const sf__kparams *k)
{
  Chans<NORM> c;
  memcpy(c.src, k->src, sizeof c.src);
  memcpy(c.sign, k->sign, sizeof c.sign);
  if constexpr (NORM) {
    memcpy(c.norm, k->norm, sizeof c.norm);
    memcpy(c.mul, k->mul, sizeof c.mul);
    memcpy(c.add, k->add, sizeof c.add);
  }
  return c;
}

template <int DTYPE> struct Elem {
  using T = uint16_t;
};
template <> struct Elem<0> {
  using T = float;
};

// The conversion. The hardware's cvt.rn is round to nearest even with
// subnormals kept, as the reference is, for every value but NaN, where it
// returns a canonical NaN: NaN takes the reference's rule instead. (For
// f16 this replaces a branchy integer routine: +7% on the NCDHW kernel;
// for bf16 the reference's integer rounding was measured 1% slower.)
template <int DTYPE>
__device__ __forceinline__ typename Elem<DTYPE>::T convert(float v)
{
  if constexpr (DTYPE == 0) {
    return v;
  } else {
    const uint32_t x = __float_as_uint(v);
    if constexpr (DTYPE == 1)
      return sf__f32_is_nan(x) ? sf__f16_of_nan(x)
                               : __half_as_ushort(__float2half_rn(v));
    else
      return sf__f32_is_nan(x) ? sf__bf16_of_nan(x)
                               : __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
}

// Tile coordinates of a thread's j-th load: a along t1, b along axis 2;
// threads run along whichever of the two the input is contiguous on.
__device__ __forceinline__ int load_a(const Geo &g, int j)
{
  return g.along_t1 ? threadIdx.x : threadIdx.y + j * kRows;
}
__device__ __forceinline__ int load_b(const Geo &g, int j)
{
  return g.along_t1 ? threadIdx.y + j * kRows : threadIdx.x;
}

// The thread's kPer values of one channel of the tile at (i1base, i2base),
// sign applied (0 outside the crop); base is the offset of the channel's
// plane ir in `in` (32-bit offsets keep the hoisted addresses small).
__device__ __forceinline__ void load_tile(const Geo &g, const float *in,
                                          int base, int i1base, int i2base,
                                          uint32_t sign, float v[kPer])
{
#pragma unroll
  for (int j = 0; j < kPer; j++) {
    const int i1 = i1base + load_a(g, j), i2 = i2base + load_b(g, j);
    const float x = i1 < g.e1 && i2 < g.e2
                        ? __ldg(in + (base + i1 * g.s1 + i2 * g.s2))
                        : 0.0f;
    v[j] = __uint_as_float(__float_as_uint(x) ^ sign);
  }
}

template <bool NORM>
__device__ __forceinline__ uint32_t sign_mask(const Chans<NORM> &k, int ch)
{
  return k.sign[ch] < 0.0f ? 0x80000000u : 0u;
}

// The normalisation and amplitude augmentation of the kPer values of a
// thread (NORM only).
__device__ __forceinline__ void normalise(const Chans<true> &k, int ch,
                                          float v[kPer])
{
  const slabfeed_norm n = k.norm[ch];
  const float m = k.mul[ch], a = k.add[ch];
#pragma unroll
  for (int j = 0; j < kPer; j++)
    v[j] = sf__aug_apply(sf__norm_apply(&n, v[j]), m, a);
}

template <int DTYPE, bool NORM>
__global__ void __launch_bounds__(kTile *kRows,
                                  NORM ? kMinBlocksCfNorm : kMinBlocksCf)
    tiled_cf(const Geo g, const Chans<NORM> k, const float *__restrict__ in,
             void *__restrict__ out)
{
  using T = typename Elem<DTYPE>::T;
  __shared__ float tile[kTile][kTile + 1]; // [b][a]
  const int nt2 = (g.e2 + kTile - 1) / kTile;
  const int i1base = (blockIdx.x / nt2) * kTile;
  const int i2base = (blockIdx.x % nt2) * kTile;
  const int ch = blockIdx.z;
  const uint32_t sign = sign_mask(k, ch);
  const int rend = min(g.er, (int)(blockIdx.y + 1) * kPlanes);
  const int obase = ch * g.ovol;

  for (int ir = blockIdx.y * kPlanes; ir < rend; ir++) {
    float v[kPer];
    load_tile(g, in + (int64_t)k.src[ch] * g.vol, g.start + ir * g.sr, i1base,
              i2base, sign, v);
    if constexpr (NORM)
      normalise(k, ch, v);
#pragma unroll
    for (int j = 0; j < kPer; j++)
      tile[load_b(g, j)][load_a(g, j)] = v[j];
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kPer; j++) {
      const int a = threadIdx.y + j * kRows, b = threadIdx.x;
      if (i1base + a < g.e1 && i2base + b < g.e2)
        static_cast<T *>(
            out)[obase + ir * g.orr + (i1base + a) * g.o1 + i2base + b] =
            convert<DTYPE>(tile[b][a]);
    }
    __syncthreads();
  }
}

// KC: channels per block, all of them when the launch has KC == channels.
template <int DTYPE, int KC, bool NORM>
__global__ void __launch_bounds__(kTile *kRows, kMinBlocksCl)
    tiled_cl(const Geo g, const Chans<NORM> k, const float *__restrict__ in,
             void *__restrict__ out)
{
  using T = typename Elem<DTYPE>::T;
  // Rows a of 32 voxels x KC channels, converted, padded to an odd number
  // of words so that threads writing down a column hit distinct banks.
  constexpr int kWords = kTile * KC * (int)sizeof(T) / 4 + 1;
  constexpr int kPitch = kWords * 4 / (int)sizeof(T);
  extern __shared__ uint32_t words[]; // [kTile][kWords]
  T *tile = reinterpret_cast<T *>(words);
  const int nt2 = (g.e2 + kTile - 1) / kTile;
  const int i1base = (blockIdx.x / nt2) * kTile;
  const int i2base = (blockIdx.x % nt2) * kTile;
  const int nb = min(kTile, g.e2 - i2base); // voxels in this tile's rows
  const int k0 = blockIdx.z * KC;
  const int kn = min(KC, g.channels - k0);
  const int rend = min(g.er, (int)(blockIdx.y + 1) * kPlanes);

  for (int ir = blockIdx.y * kPlanes; ir < rend; ir++) {
#pragma unroll
    for (int kk = 0; kk < KC; kk++) {
      if (kk < kn) {
        const int ch = k0 + kk;
        float v[kPer];
        load_tile(g, in + (int64_t)k.src[ch] * g.vol, g.start + ir * g.sr,
                  i1base, i2base, sign_mask(k, ch), v);
        if constexpr (NORM)
          normalise(k, ch, v);
#pragma unroll
        for (int j = 0; j < kPer; j++)
          tile[load_a(g, j) * kPitch + load_b(g, j) * KC + kk] =
              convert<DTYPE>(v[j]);
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kPer; j++) {
      const int a = threadIdx.y + j * kRows;
      if (i1base + a >= g.e1)
        continue;
      const int row = ir * g.orr + (i1base + a) * g.o1 + i2base;
      const T *src = tile + a * kPitch;
      const int n = nb * KC;
      T *dst = static_cast<T *>(out) + (int64_t)row * g.channels + k0;
      if (KC != g.channels) { // a chunk: runs of KC elements
        for (int l = threadIdx.x; l < n; l += kTile)
          if (l % KC < kn)
            dst[(l / KC) * g.channels + l % KC] = src[l];
      } else if ((reinterpret_cast<uintptr_t>(dst) & 3) == 0) {
        const int nw = n * (int)sizeof(T) / 4;
        for (int p = threadIdx.x; p < nw; p += kTile)
          reinterpret_cast<uint32_t *>(dst)[p] = words[a * kWords + p];
        if (sizeof(T) == 2 && (n & 1) && threadIdx.x == 0)
          dst[n - 1] = src[n - 1];
      } else { // 16-bit run starting mid-word
        for (int l = threadIdx.x; l < n; l += kTile)
          dst[l] = src[l];
      }
    }
    __syncthreads();
  }
}

Geo make_geo(const sf__kparams *k)
{
  const int64_t os[3] = {k->os[0] ? k->os[0] : k->e[1] * k->e[2],
                         k->os[0] ? k->os[1] : k->e[2], 1};
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
  g.ovol = (int)k->ovol;
  g.channels = k->channels;
  g.along_t1 = k->q != 2;
  return g;
}

dim3 grid_for(const Geo &g, int chunks)
{
  const int nt1 = (g.e1 + kTile - 1) / kTile, nt2 = (g.e2 + kTile - 1) / kTile;
  return dim3((unsigned)(nt1 * nt2), (unsigned)((g.er + kPlanes - 1) / kPlanes),
              (unsigned)chunks);
}

template <int DTYPE, int KC, bool NORM>
cudaError_t launch_cl(const Geo &g, const sf__kparams *k, const float *in,
                      void *out, cudaStream_t s)
{
  using T = typename Elem<DTYPE>::T;
  const size_t smem =
      (size_t)kTile * (kTile * KC * sizeof(T) / 4 + 1) * sizeof(uint32_t);
  tiled_cl<DTYPE, KC, NORM>
      <<<grid_for(g, (k->channels + KC - 1) / KC), dim3(kTile, kRows), smem,
         s>>>(g, chans_of<NORM>(k), in, out);
  return cudaGetLastError();
}

template <int DTYPE, bool NORM>
cudaError_t launch(const sf__kparams *k, const float *in, void *out,
                   cudaStream_t s)
{
  const Geo g = make_geo(k);
  if (k->layout != 1) {
    tiled_cf<DTYPE, NORM>
        <<<grid_for(g, k->channels), dim3(kTile, kRows), 0, s>>>(
            g, chans_of<NORM>(k), in, out);
    return cudaGetLastError();
  }
  // NDHWC: all channels of a voxel in one block; 8, or more channels in
  // chunks of 8, share the KC = 8 kernel.
  using Launch = cudaError_t (*)(const Geo &, const sf__kparams *,
                                 const float *, void *, cudaStream_t);
  static constexpr Launch by_channels[10] = {nullptr,
                                             launch_cl<DTYPE, 1, NORM>,
                                             launch_cl<DTYPE, 2, NORM>,
                                             launch_cl<DTYPE, 3, NORM>,
                                             launch_cl<DTYPE, 4, NORM>,
                                             launch_cl<DTYPE, 5, NORM>,
                                             launch_cl<DTYPE, 6, NORM>,
                                             launch_cl<DTYPE, 7, NORM>,
                                             launch_cl<DTYPE, 8, NORM>,
                                             launch_cl<DTYPE, 9, NORM>};
  if (k->channels < 1)
    return cudaErrorInvalidValue;
  return by_channels[k->channels <= 9 ? k->channels : 8](g, k, in, out, s);
}

} // namespace

extern "C" cudaError_t sf__transform_launch(const sf__kparams *k,
                                            const float *in, void *out,
                                            cudaStream_t s)
{
  if (k->nnorm > 0 || k->naug > 0)
    switch (k->dtype) {
    case 0:
      return launch<0, true>(k, in, out, s);
    case 1:
      return launch<1, true>(k, in, out, s);
    default:
      return launch<2, true>(k, in, out, s);
    }
  switch (k->dtype) {
  case 0:
    return launch<0, false>(k, in, out, s);
  case 1:
    return launch<1, false>(k, in, out, s);
  default:
    return launch<2, false>(k, in, out, s);
  }
}
