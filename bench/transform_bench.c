/* Throughput of the fused transform kernel next to the device-to-device
 * copy ceiling measured in the same run (cudaMemcpyAsync of the same input
 * bytes). A copy of N bytes counts N; the kernel reads the staged crop
 * (float32) and writes the sample in the output dtype, and counts
 * (read + written) / 2, so that an f32 kernel at copy speed has ratio 1.
 *   transform_bench [crop] [channels] [reps] [plain|norm|aug|both]
 * (the last: without normalisation, with a per-channel one (a log on
 * channel 0), with amplitude augmentation factors, or both).
 * Prints a table per dtype and layout: identity, a transposing element
 * (g = 5: output axes (2,1,0)), and the mean over all 48. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "transform/transform.h"
#include "transform/transform_gpu.h"

#define CK(call)                                                               \
  do {                                                                         \
    cudaError_t rc_ = (call);                                                  \
    if (rc_ != cudaSuccess) {                                                  \
      fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(rc_));             \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static float time_ms(cudaStream_t s, cudaEvent_t a, cudaEvent_t b)
{
  float ms;
  CK(cudaEventSynchronize(b));
  CK(cudaEventElapsedTime(&ms, a, b));
  (void)s;
  return ms;
}

int main(int argc, char **argv)
{
  const int64_t c = argc > 1 ? atoll(argv[1]) : 256;
  const int C = argc > 2 ? atoi(argv[2]) : 4;
  const int reps = argc > 3 ? atoi(argv[3]) : 20;
  const char *mode = argc > 4 ? argv[4] : "plain";
  const int norm = strcmp(mode, "norm") == 0 || strcmp(mode, "both") == 0;
  const int aug = strcmp(mode, "aug") == 0 || strcmp(mode, "both") == 0;
  if (!norm && !aug && strcmp(mode, "plain") != 0) {
    fprintf(stderr, "transform_bench: mode '%s': plain, norm, aug or both\n",
            mode);
    return 2;
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("SKIP: no CUDA device\n");
    return 0;
  }
  const size_t elems = (size_t)C * (size_t)(c * c * c);
  const size_t in_bytes = elems * sizeof(float);
  float *in;
  void *out, *copy;
  CK(cudaMalloc((void **)&in, in_bytes));
  CK(cudaMalloc(&out, in_bytes));
  CK(cudaMalloc(&copy, in_bytes));
  CK(cudaMemset(in, 0x3f, in_bytes));
  cudaStream_t s;
  cudaEvent_t a, b;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));

  /* Ceiling: device copy of the staged crop. */
  CK(cudaMemcpyAsync(copy, in, in_bytes, cudaMemcpyDeviceToDevice, s));
  CK(cudaEventRecord(a, s));
  for (int r = 0; r < reps; r++)
    CK(cudaMemcpyAsync(copy, in, in_bytes, cudaMemcpyDeviceToDevice, s));
  CK(cudaEventRecord(b, s));
  const double copy_gbs =
      (double)in_bytes * reps / (time_ms(s, a, b) * 1e-3) / 1e9;
  printf(
      "transform_bench: crop %lld^3 x %d channels (%.1f MB staged), %d reps, "
      "%s\n",
      (long long)c, C, in_bytes / 1e6, reps, mode);
  printf("ceiling: device copy %.1f GB/s\n", copy_gbs);
  printf("%-5s %-6s %10s %10s %10s %8s\n", "dtype", "layout", "g=0 GB/s",
         "g=5 GB/s", "all48 GB/s", "min/copy");

  static const char *dn[] = {"f32", "f16", "bf16"}, *ln[] = {"ncdhw", "ndhwc"};
  for (int dt = 0; dt < 3; dt++)
    for (int lay = 0; lay < 2; lay++) {
      sf__xform x;
      memset(&x, 0, sizeof x);
      x.ext[0] = x.ext[1] = x.ext[2] = c;
      x.channels = C;
      x.ngroups = C >= 4 ? 1 : 0;
      x.groups[0][0] = 1, x.groups[0][1] = 2, x.groups[0][2] = 3;
      x.dtype = (slabfeed_dtype)dt;
      x.layout = (slabfeed_out_layout)lay;
      slabfeed_norm nm[64];
      float factors[128];
      for (int ch = 0; ch < C && ch < 64; ch++) {
        nm[ch] = ch == 0 ? (slabfeed_norm){1, 1.0f, 0.5f, 1.5f}
                         : (slabfeed_norm){0, 0.0f, 0.0f, 2.0f};
        factors[ch] = 1.0f + 0.01f * (float)ch;
        factors[C + ch] = ch == 0 ? 0.25f : -0.0f;
      }
      if (norm)
        sf__xform_set_norm(&x, C, nm);
      const double moved = (double)in_bytes + (double)elems * (dt == 0 ? 4 : 2);
      double gbs[48], worst = 1e30, sum = 0;
      for (int g = 0; g < 48; g++) {
        sf__kparams k;
        sf__kparams_make(&x, g, &k);
        if (aug)
          sf__kparams_set_aug(&k, &x, factors);
        CK(sf__transform_launch(&k, in, out, s)); /* warm */
        CK(cudaEventRecord(a, s));
        for (int r = 0; r < reps; r++)
          CK(sf__transform_launch(&k, in, out, s));
        CK(cudaEventRecord(b, s));
        gbs[g] = moved / 2 * reps / (time_ms(s, a, b) * 1e-3) / 1e9;
        worst = gbs[g] < worst ? gbs[g] : worst;
        sum += gbs[g];
      }
      printf("%-5s %-6s %10.1f %10.1f %10.1f %8.2f\n", dn[dt], ln[lay], gbs[0],
             gbs[5], sum / 48, worst / copy_gbs);
      printf(
          "{\"bench\":\"transform\",\"mode\":\"%s\",\"crop\":%lld,"
          "\"channels\":%d,\"dtype\":\"%s\","
          "\"layout\":\"%s\",\"copy_gbs\":%.1f,\"g0_gbs\":%.1f,\"g5_gbs\":%.1f,"
          "\"mean_gbs\":%.1f,\"min_gbs\":%.1f,\"min_ratio\":%.3f}\n",
          mode, (long long)c, C, dn[dt], ln[lay], copy_gbs, gbs[0], gbs[5],
          sum / 48, worst, worst / copy_gbs);
    }
  cudaFree(in);
  cudaFree(out);
  cudaFree(copy);
  return 0;
}
