// The fused transform kernel: one pass from a staged crop to one sample of
// the batch — symmetry on the spatial axes, vector-group channel map with
// signs, conversion to f32/f16/bf16 (round to nearest even, the same
// integer code as the host reference) and NCDHW or NDHWC layout.
//
// A block owns a 32x32 tile of the output plane spanned by axes t1 and 2
// at one position of the remaining axis r, for a chunk of channels. It
// loads the tile with threads running along q, the output axis on which
// the input is contiguous, and stores it with threads running along the
// output's contiguous direction, so that permutations that move the
// input's fastest axis stay coalesced on both sides.
#include "convert.h"
#include "transform_gpu.h"

namespace {

constexpr int kTile = 32;
constexpr int kRows = 8;

template <int DTYPE>
__device__ __forceinline__ void put(void *out, int64_t i, float v)
{
  if (DTYPE == 0)
    static_cast<float *>(out)[i] = v;
  else if (DTYPE == 1)
    static_cast<uint16_t *>(out)[i] = sf_f32_to_f16(v);
  else
    static_cast<uint16_t *>(out)[i] = sf_f32_to_bf16(v);
}

template <int DTYPE, bool NDHWC>
__global__ void __launch_bounds__(kTile *kRows)
    xform(const sf_kparams k, const float *__restrict__ in,
          void *__restrict__ out, int kc)
{
  extern __shared__ float tile[]; // [kc][kTile][kTile + 1]
  const int t1 = k.t1, r = k.r;
  const int64_t nt2 = (k.e[2] + kTile - 1) / kTile;
  const int64_t i1base = (int64_t)(blockIdx.x / nt2) * kTile;
  const int64_t i2base = (int64_t)(blockIdx.x % nt2) * kTile;
  const int64_t ir = blockIdx.y;
  const int k0 = blockIdx.z * kc;
  const int kn = min(kc, k.channels - k0);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const bool along_t1 = k.q != 2; // load threads run along t1

  for (int kk = 0; kk < kn; kk++) {
    const int ch = k0 + kk;
    const float sign = k.sign[ch];
    const float *src = in + (int64_t)k.src[ch] * k.vol + k.start + ir * k.step[r];
    float *t = tile + kk * kTile * (kTile + 1);
    for (int j = ty; j < kTile; j += kRows) {
      const int a = along_t1 ? tx : j; // offset along t1
      const int b = along_t1 ? j : tx; // offset along 2
      const int64_t i1 = i1base + a, i2 = i2base + b;
      if (i1 < k.e[t1] && i2 < k.e[2])
        t[b * (kTile + 1) + a] = sign * src[i1 * k.step[t1] + i2 * k.step[2]];
    }
  }
  __syncthreads();

  const int64_t os[3] = {k.e[1] * k.e[2], k.e[2], 1};
  for (int a = ty; a < kTile; a += kRows) {
    const int64_t i1 = i1base + a;
    if (i1 >= k.e[t1])
      break;
    const int64_t row = ir * os[r] + i1 * os[t1] + i2base;
    if (!NDHWC) {
      const int64_t i2 = i2base + tx;
      if (i2 < k.e[2])
        put<DTYPE>(out, (int64_t)k0 * k.vol + row + tx,
                   tile[tx * (kTile + 1) + a]);
    } else {
      for (int l = tx; l < kTile * kn; l += kTile) {
        const int b = l / kn, kk = l % kn;
        if (i2base + b < k.e[2])
          put<DTYPE>(out, (row + b) * k.channels + k0 + kk,
                     tile[(kk * kTile + b) * (kTile + 1) + a]);
      }
    }
  }
}

template <int DTYPE>
cudaError_t launch(const sf_kparams *k, const float *in, void *out,
                   cudaStream_t s)
{
  const bool ndhwc = k->layout == 1;
  const int kc = ndhwc ? (k->channels < 8 ? k->channels : 8) : 1;
  const int64_t nt1 = (k->e[k->t1] + kTile - 1) / kTile;
  const int64_t nt2 = (k->e[2] + kTile - 1) / kTile;
  const dim3 grid((unsigned)(nt1 * nt2), (unsigned)k->e[k->r],
                  (unsigned)((k->channels + kc - 1) / kc));
  const dim3 block(kTile, kRows);
  const size_t smem = (size_t)kc * kTile * (kTile + 1) * sizeof(float);
  if (ndhwc)
    xform<DTYPE, true><<<grid, block, smem, s>>>(*k, in, out, kc);
  else
    xform<DTYPE, false><<<grid, block, smem, s>>>(*k, in, out, kc);
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t sf_transform_launch(const sf_kparams *k,
                                           const float *in, void *out,
                                           cudaStream_t s)
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
