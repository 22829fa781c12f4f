// The writer's inverse transform on the device: one model output (a sample
// in the tile's symmetry frame, f32/f16/bf16, any dense strides) to the
// float32 part of the output slab the tile owns, with the symmetry undone
// (vector channels as vectors) and the normalisation inverted. One thread
// per output element, in the output's order, so that the stores are
// coalesced; the loads follow the symmetry (a transpose for most of the
// 48) and are served by L2, the sample being a few MB. The arithmetic is
// the host path's (common/normf.h, common/convert.h), element for element,
// so device and host puts give the same bits.
#include "common/normf.h" /* first: it keeps MPI's C++ bindings out */
#include "common/convert.h"
#include "transform/inverse_gpu.h"

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 8192;

template <int DTYPE>
__device__ __forceinline__ float load(const void *in, int64_t at)
{
  if constexpr (DTYPE == 0) {
    return __ldg(static_cast<const float *>(in) + at);
  } else {
    const uint16_t h = __ldg(static_cast<const unsigned short *>(in) + at);
    if constexpr (DTYPE == 1)
      return sf__f16_to_f32(h);
    else
      return __uint_as_float((uint32_t)h << 16);
  }
}

template <int DTYPE, bool NORM, bool CL>
__global__ void __launch_bounds__(kThreads)
    inverse(const sf__ikparams k, const void *__restrict__ in,
            float *__restrict__ out)
{
  const uint32_t n1 = (uint32_t)k.n[1], n2 = (uint32_t)k.n[2];
  const uint32_t n0 = (uint32_t)k.n[0], C = (uint32_t)k.channels;
  const uint32_t total = C * n0 * n1 * n2;
  for (uint32_t idx = blockIdx.x * kThreads + threadIdx.x; idx < total;
       idx += gridDim.x * kThreads) {
    uint32_t r = idx, c;
    if constexpr (CL) {
      c = r % C;
      r /= C;
    }
    const uint32_t x = r % n2;
    r /= n2;
    const uint32_t y = r % n1;
    r /= n1;
    uint32_t z = r;
    if constexpr (!CL) {
      z = r % n0;
      c = r / n0;
    }
    const int64_t at = k.cst + k.coef[0] * (k.j0[0] + z) +
                       k.coef[1] * (k.j0[1] + y) + k.coef[2] * (k.j0[2] + x) +
                       k.kofs[c];
    float v = load<DTYPE>(in, at);
    if constexpr (NORM)
      v = sf__norm_invert(&k.norm[c], v);
    out[idx] = sf__flip_sign(v, k.neg[c]);
  }
}

template <int DTYPE, bool NORM>
cudaError_t launch(const sf__ikparams *k, const void *in, float *out,
                   cudaStream_t s)
{
  const int64_t total = k->channels * k->n[0] * k->n[1] * k->n[2];
  if (total <= 0)
    return cudaSuccess;
  if (total > (int64_t)UINT32_MAX)
    return cudaErrorInvalidValue;
  int64_t blocks = (total + kThreads - 1) / kThreads;
  blocks = blocks < kMaxBlocks ? blocks : kMaxBlocks;
  if (k->cl)
    inverse<DTYPE, NORM, true>
        <<<(unsigned)blocks, kThreads, 0, s>>>(*k, in, out);
  else
    inverse<DTYPE, NORM, false>
        <<<(unsigned)blocks, kThreads, 0, s>>>(*k, in, out);
  return cudaGetLastError();
}

template <int DTYPE>
cudaError_t launch_dtype(const sf__ikparams *k, const void *in, float *out,
                         cudaStream_t s)
{
  return k->nnorm > 0 ? launch<DTYPE, true>(k, in, out, s)
                      : launch<DTYPE, false>(k, in, out, s);
}

} // namespace

extern "C" cudaError_t sf__inverse_launch(const sf__ikparams *k, const void *in,
                                          float *out, cudaStream_t s)
{
  switch (k->dtype) {
  case 0:
    return launch_dtype<0>(k, in, out, s);
  case 1:
    return launch_dtype<1>(k, in, out, s);
  default:
    return launch_dtype<2>(k, in, out, s);
  }
}
