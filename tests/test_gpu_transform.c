/* The CUDA kernel equals the host reference bit for bit: every symmetry
 * id, every dtype, both layouts, vector groups, odd extents (partial
 * tiles), non-cubic identity crops, and values that stress the rounding
 * (ties, subnormals, overflow, NaN, signed zero); all of it again with
 * per-channel normalisation (log channels with negative arguments, shifts,
 * negative and tiny scales, vector groups of one scale), whose float log,
 * division and NaN rules must give the host's bits (gpu.normf compares
 * the functions of common/normf.h alone). And a crop read in place from
 * channels more than 2^31 floats from the slab's start (run_far_channels). */
#include <string.h>

#include "gpu.h"
#include "plan/sampler.h"
#include "transform/transform.h"
#include "transform/transform_gpu.h"

static float pattern(uint64_t i)
{
  const uint64_t h = sf__fmix64(i + 77);
  switch (h % 8) {
  case 0: { /* raw bits: NaN, inf, subnormals included */
    const uint32_t b = (uint32_t)(h >> 32);
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
  }
  case 1: /* f16 ties */
    return (float)((h >> 20) % 2048) + 0.5f;
  case 2:
    return 65520.0f;
  case 3:
    return -0.0f;
  default:
    return (float)((int64_t)(h >> 40) % 100000) / 1024.0f;
  }
}

/* The normalisation of channel k of `channels` with the groups run()
 * sets: one scale per vector group (the second negative), and around them
 * logs (a = 50 + k: arguments below 0 give NaN), shifts with tiny and
 * negative scales. */
static slabfeed_norm norm_of(int k, int channels)
{
  const int ng = channels >= 7 ? 2 : channels >= 4 ? 1 : 0;
  if (ng >= 1 && k >= 1 && k <= 3)
    return (slabfeed_norm){0, 0.0f, 0.0f, 0.5f};
  if (ng >= 2 && k >= 4 && k <= 6)
    return (slabfeed_norm){0, 0.0f, 0.0f, -3.0f};
  switch (k % 3) {
  case 0:
    return (slabfeed_norm){1, 50.0f + (float)k, 1.0f, 0.7f};
  case 1:
    return (slabfeed_norm){0, 0.0f, -2.5f, 1e-3f};
  default:
    return (slabfeed_norm){1, 0.25f, -0.5f, -1.5f};
  }
}

static void run_norm(int64_t e0, int64_t e1, int64_t e2, int channels, int g,
                     slabfeed_dtype dt, slabfeed_out_layout lay, int norm,
                     float *din, void *dout, const float *in, void *want,
                     void *got);

static void run(int64_t e0, int64_t e1, int64_t e2, int channels, int g,
                slabfeed_dtype dt, slabfeed_out_layout lay, float *din,
                void *dout, const float *in, void *want, void *got)
{
  /* norm: bit 0 the normalisation, bit 1 the amplitude augmentation */
  for (int norm = 0; norm < 4; norm++)
    run_norm(e0, e1, e2, channels, g, dt, lay, norm, din, dout, in, want, got);
}

static void run_norm(int64_t e0, int64_t e1, int64_t e2, int channels, int g,
                     slabfeed_dtype dt, slabfeed_out_layout lay, int norm,
                     float *din, void *dout, const float *in, void *want,
                     void *got)
{
  sf__xform x = {.trim = 0};
  memset(&x, 0, sizeof x);
  x.ext[0] = e0, x.ext[1] = e1, x.ext[2] = e2;
  x.channels = channels;
  x.ngroups = channels >= 7 ? 2 : channels >= 4 ? 1 : 0;
  const int gr[2][3] = {{1, 2, 3}, {6, 4, 5}};
  memcpy(x.groups, gr, sizeof gr);
  x.dtype = dt;
  x.layout = lay;
  if (norm & 1) {
    slabfeed_norm nm[64];
    for (int k = 0; k < channels; k++)
      nm[k] = norm_of(k, channels);
    sf__xform_set_norm(&x, channels, nm);
    CHECK_EQ(x.nnorm, channels, "normalisation set");
  }
  const size_t n = (size_t)sf__xform_elems(&x);
  const size_t out_bytes = n * (dt == SLABFEED_DTYPE_F32 ? 4 : 2);
  /* Factors and offsets of every kind per source channel: irrational
   * ones, 1 with -0 (the identity), negative, tiny and huge. */
  float aug[128];
  for (int c = 0; c < channels; c++) {
    static const float m[5] = {1.3571f, 1.0f, -0.71f, 3e-30f, 7e20f};
    static const float a[5] = {0.37f, -0.0f, -12.5f, 1e-38f, 0.0f};
    aug[c] = m[c % 5];
    aug[channels + c] = a[(c + 1) % 5];
  }
  sf__transform_aug(&x, g, norm & 2 ? aug : NULL, in, want);
  sf__kparams k;
  sf__kparams_make(&x, g, &k);
  if (norm & 2)
    sf__kparams_set_aug(&k, &x, aug);
  CUDA_CHECK(cudaMemcpy(din, in, n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(dout, 0xff, out_bytes));
  CUDA_CHECK(sf__transform_launch(&k, din, dout, NULL));
  CUDA_CHECK(cudaMemcpy(got, dout, out_bytes, cudaMemcpyDeviceToHost));
  CHECK(memcmp(want, got, out_bytes) == 0,
        "kernel != reference: ext %lldx%lldx%lld C=%d g=%d dtype=%d layout=%d "
        "norm=%d",
        (long long)e0, (long long)e1, (long long)e2, channels, g, dt, lay,
        norm);
}

/* A crop read in place from slabs whose channels lie 2^30 + 4096 floats
 * apart (a 1024^3 slab per channel, resident on the GPU): channel 2 and 3
 * start past 2^31 floats, which the kernel's 32-bit offsets once refused
 * (sf__kparams_part said -1 and the crop went through staging). One
 * launch of sf__kparams_part's parameters over the whole crop equals the
 * host reference bit for bit. The source is managed memory: only the
 * crop's planes of each channel are touched, so 16 GB of address space
 * costs a few MB. */
static int run_far_channels(const float *in, void *want, void *got, void *dout)
{
  const int64_t E = 29, C = 4, ys = 64, zs = 64 * 64;
  const int64_t cs = ((int64_t)1 << 30) + 4096;
  /* Refused still: a channel stride (the kernel's 32-bit vol) or an
   * offset inside one channel of 2^31 floats. */
  {
    sf__xform x;
    memset(&x, 0, sizeof x);
    x.ext[0] = x.ext[1] = x.ext[2] = E;
    x.channels = 2;
    sf__kparams k;
    int64_t at;
    const int64_t d[3] = {0, 0, 0}, n[3] = {E, E, E};
    CHECK_EQ(sf__kparams_part(&x, 0, d, n, (int64_t)1 << 31, zs, ys, &k, &at),
             -1, "a channel stride of 2^31 floats is refused");
    CHECK_EQ(sf__kparams_part(&x, 0, d, n, ((int64_t)1 << 31) - 1,
                              ((int64_t)1 << 31) / E, ys, &k, &at),
             -1, "offsets of 2^31 floats inside one channel are refused");
  }
  /* Managed memory backed on first touch: where the device cannot take
   * its pages on demand (no concurrent managed access), a launch would
   * migrate all 17 GB: skipped. */
  int dev = 0, on_demand = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&on_demand,
                                    cudaDevAttrConcurrentManagedAccess, dev));
  if (!on_demand) {
    printf("gpu.transform: far channels skipped: no concurrent managed "
           "access on device %d\n",
           dev);
    return 0;
  }
  float *src = NULL;
  const cudaError_t rc = cudaMallocManaged(
      (void **)&src, (size_t)(C * cs) * sizeof(float), cudaMemAttachGlobal);
  if (rc != cudaSuccess) {
    printf("gpu.transform: far channels skipped: cudaMallocManaged of %.1f "
           "GB: %s\n",
           (double)(C * cs) * 4 / 1e9, cudaGetErrorString(rc));
    (void)cudaGetLastError();
    return 0;
  }
  for (int64_t c = 0; c < C; c++)
    for (int64_t z = 0; z < E; z++)
      for (int64_t y = 0; y < E; y++)
        CUDA_CHECK(cudaMemcpy(
            src + c * cs + z * zs + y * ys, in + ((c * E + z) * E + y) * E,
            (size_t)E * sizeof(float), cudaMemcpyHostToDevice));
  int cases = 0;
  for (int g = 0; g < 48; g += 5)
    for (int dt = 0; dt < 3; dt++)
      for (int lay = 0; lay < 2; lay++) {
        sf__xform x;
        memset(&x, 0, sizeof x);
        x.ext[0] = x.ext[1] = x.ext[2] = E;
        x.channels = (int)C;
        x.ngroups = 1;
        const int gr[2][3] = {{1, 2, 3}, {0, 0, 0}};
        memcpy(x.groups, gr, sizeof gr);
        x.dtype = (slabfeed_dtype)dt;
        x.layout = (slabfeed_out_layout)lay;
        const size_t out_bytes = (size_t)sf__xform_elems(&x) * (dt ? 2 : 4);
        sf__transform_aug(&x, g, NULL, in, want);
        const int64_t d[3] = {0, 0, 0}, n[3] = {E, E, E};
        sf__kparams k;
        int64_t at = -1;
        CHECK_EQ(sf__kparams_part(&x, g, d, n, cs, zs, ys, &k, &at), 1,
                 "channels 2^30 + 4096 floats apart run in place (g %d)", g);
        CHECK_EQ(at, 0, "the whole crop starts at the sample's voxel 0");
        CUDA_CHECK(cudaMemset(dout, 0xff, out_bytes));
        CUDA_CHECK(sf__transform_launch(&k, src, dout, NULL));
        CUDA_CHECK(cudaMemcpy(got, dout, out_bytes, cudaMemcpyDeviceToHost));
        CHECK(memcmp(want, got, out_bytes) == 0,
              "far channels: kernel != reference: g=%d dtype=%d layout=%d", g,
              dt, lay);
        cases++;
      }
  CUDA_CHECK(cudaFree(src));
  return cases;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  if (gpu_count() == 0)
    return check_skip("gpu.transform", "no CUDA device");
  const int64_t maxc = 40;
  const size_t cap = (size_t)(9 * maxc * maxc * maxc);
  float *in = malloc(cap * sizeof *in);
  void *want = malloc(cap * 4), *got = malloc(cap * 4);
  float *din;
  void *dout;
  CUDA_CHECK(cudaMalloc((void **)&din, cap * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&dout, cap * 4));
  for (size_t i = 0; i < cap; i++)
    in[i] = pattern(i);
  int cases = 0;
  for (int g = 0; g < 48; g++)
    for (int dt = 0; dt < 3; dt++)
      for (int lay = 0; lay < 2; lay++) {
        run(37, 37, 37, 4, g, (slabfeed_dtype)dt, (slabfeed_out_layout)lay, din,
            dout, in, want, got);
        run(5, 5, 5, 9, g, (slabfeed_dtype)dt, (slabfeed_out_layout)lay, din,
            dout, in, want, got);
        cases += 2;
      }
  /* Non-cubic crops (identity only), wide and thin. */
  for (int dt = 0; dt < 3; dt++)
    for (int lay = 0; lay < 2; lay++) {
      run(3, 40, 33, 5, 0, (slabfeed_dtype)dt, (slabfeed_out_layout)lay, din,
          dout, in, want, got);
      run(40, 1, 65 > maxc ? 17 : 65, 9, 0, (slabfeed_dtype)dt,
          (slabfeed_out_layout)lay, din, dout, in, want, got);
      cases += 2;
    }
  /* Every channel-count branch of the NDHWC kernel, and channels in
   * chunks (12 = 8 + 4), under every id. */
  const int nch[] = {1, 2, 3, 5, 6, 7, 8, 12};
  for (size_t c = 0; c < sizeof nch / sizeof *nch; c++)
    for (int g = 0; g < 48; g++)
      for (int dt = 0; dt < 3; dt++)
        for (int lay = 0; lay < 2; lay++) {
          run(21, 21, 21, nch[c], g, (slabfeed_dtype)dt,
              (slabfeed_out_layout)lay, din, dout, in, want, got);
          cases++;
        }
  printf("gpu.transform: %d kernel launches compared bit for bit (half of "
         "them with normalisation)\n",
         2 * cases);
  printf("gpu.transform: %d launches over channels 2^30 + 4096 floats apart "
         "compared bit for bit\n",
         run_far_channels(in, want, got, dout));
  cudaFree(din);
  cudaFree(dout);
  free(in);
  free(want);
  free(got);
  return check_finish("gpu.transform");
}
