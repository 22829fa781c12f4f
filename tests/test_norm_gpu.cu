// gpu.normf: the functions of common/normf.h give the same bits on the
// device as on the host: sf__logf, sf__expf, sf__norm_apply and
// sf__norm_invert (identity and log entries) on every 61st float bit
// pattern (70 million of them, NaN, inf and subnormals included) and on
// every float in [0.5, 2) and in exp's subnormal range. The host side is
// compiled without FMA contraction (tests/CMakeLists.txt), as the library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "check.h"
#include "common/normf.h"
#include "gpu.h"

namespace {

constexpr int kOut = 6; // results per input value

__constant__ slabfeed_norm d_norms[2];

// What the device computes for input bits `first + i * stride`.
__global__ void compute(uint32_t first, uint32_t stride, int n, float *out)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const float x = sf__norm_float(first + (uint32_t)i * stride);
  float *o = out + (size_t)i * kOut;
  o[0] = sf__logf(x);
  o[1] = sf__expf(x);
  o[2] = sf__norm_apply(&d_norms[0], x);
  o[3] = sf__norm_apply(&d_norms[1], x);
  o[4] = sf__norm_invert(&d_norms[0], x);
  o[5] = sf__norm_invert(&d_norms[1], x);
}

void host(const slabfeed_norm *nm, uint32_t first, uint32_t stride, int n,
          float *out)
{
  for (int i = 0; i < n; i++) {
    const float x = sf__norm_float(first + (uint32_t)i * stride);
    float *o = out + (size_t)i * kOut;
    o[0] = sf__logf(x);
    o[1] = sf__expf(x);
    o[2] = sf__norm_apply(&nm[0], x);
    o[3] = sf__norm_apply(&nm[1], x);
    o[4] = sf__norm_invert(&nm[0], x);
    o[5] = sf__norm_invert(&nm[1], x);
  }
}

// n values from `first` with `stride`, in chunks; returns the mismatches.
long long compare(const slabfeed_norm *nm, uint32_t first, uint32_t stride,
                  long long count, float *dev, float *want, float *got,
                  int chunk)
{
  long long bad = 0;
  for (long long done = 0; done < count; done += chunk) {
    const int n = (int)(count - done < chunk ? count - done : chunk);
    const uint32_t f = first + (uint32_t)(done * stride);
    compute<<<(n + 255) / 256, 256>>>(f, stride, n, dev);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(got, dev, (size_t)n * kOut * sizeof(float),
                          cudaMemcpyDeviceToHost));
    host(nm, f, stride, n, want);
    for (size_t k = 0; k < (size_t)n * kOut; k++)
      if (sf__norm_bits(want[k]) != sf__norm_bits(got[k])) {
        if (bad++ < 5)
          fprintf(stderr, "x %08x result %zu: host %08x device %08x\n",
                  f + (uint32_t)(k / kOut) * stride, k % kOut,
                  sf__norm_bits(want[k]), sf__norm_bits(got[k]));
      }
  }
  return bad;
}

} // namespace

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  if (gpu_count() == 0)
    return check_skip("gpu.normf", "no CUDA device");
  const slabfeed_norm nm[2] = {{0, 0.0f, 1.5f, -0.375f},
                               {1, 3.25f, -0.5f, 1.75f}};
  CUDA_CHECK(cudaMemcpyToSymbol(d_norms, nm, sizeof nm));
  const int chunk = 1 << 22;
  float *dev = nullptr;
  CUDA_CHECK(cudaMalloc((void **)&dev, (size_t)chunk * kOut * sizeof(float)));
  float *want = (float *)malloc((size_t)chunk * kOut * sizeof(float));
  float *got = (float *)malloc((size_t)chunk * kOut * sizeof(float));
  long long n = 0, bad = 0;
  const long long all = 0x100000000ll / 61;
  bad += compare(nm, 0u, 61u, all, dev, want, got, chunk);
  n += all;
  const uint32_t half = sf__norm_bits(0.5f), two = sf__norm_bits(2.0f);
  bad += compare(nm, half, 1u, two - half, dev, want, got, chunk);
  n += two - half;
  const uint32_t lo = sf__norm_bits(-87.0f), hi = sf__norm_bits(-104.0f);
  bad += compare(nm, lo, 1u, hi - lo, dev, want, got, chunk);
  n += hi - lo;
  CHECK(bad == 0, "%lld of %lld x %d results differ between host and device",
        bad, n, kOut);
  printf("gpu.normf: %lld values x %d functions: host and device bits %s\n", n,
         kOut, bad == 0 ? "equal" : "DIFFER");
  cudaFree(dev);
  free(want);
  free(got);
  return check_finish("gpu.normf");
}
