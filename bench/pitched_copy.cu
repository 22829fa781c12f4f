/* pitched_copy: the host-to-device rate of crop-shaped pitched copies out
 * of a registered host box, by the number of copy streams a crop is split
 * over, next to one contiguous copy of the same bytes (the link).
 *
 *   pitched_copy W C E [reps [Z [huge]]]
 *
 * The box is C channels of Z planes (default 128) of W x W float32 in
 * host memory registered with cudaHostRegister (as the loader's window
 * is): 4 KiB pages, or with `huge` transparent huge pages asked for
 * (madvise MADV_HUGEPAGE; the kernel's policy decides, AnonHugePages of
 * /proc/meminfo says what it gave);
 * each crop is C channels of E^3 at a random place, moved by
 * cudaMemcpy3DAsync per channel, the crop's planes split in S parts over S
 * streams (S = 1, 2, 4), all streams of one crop joined before the next.
 * Prints GB/s for each S and for contiguous copies of E^3 x C floats out
 * of a pinned buffer (the ceiling), and the ratios. Not part of the
 * library: a probe for docs/PERFORMANCE.md. */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t rc_ = (x);                                                     \
    if (rc_ != cudaSuccess) {                                                  \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,                \
              cudaGetErrorString(rc_));                                        \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

static double now_s(cudaEvent_t a, cudaEvent_t b)
{
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms / 1e3;
}

int main(int argc, char **argv)
{
  if (argc < 4) {
    fprintf(stderr, "usage: pitched_copy W C E [reps]\n");
    return 2;
  }
  const size_t W = (size_t)atol(argv[1]), C = (size_t)atol(argv[2]),
               E = (size_t)atol(argv[3]);
  const int reps = argc > 4 ? atoi(argv[4]) : 40;
  const size_t Zarg = argc > 5 ? (size_t)atol(argv[5]) : 128;
  const size_t Z = Zarg > E ? Zarg : E;
  const int huge = argc > 6 && strcmp(argv[6], "huge") == 0;
  const size_t box = C * Z * W * W * sizeof(float);
  float *host = (float *)mmap(NULL, box, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (host == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  if (huge && madvise(host, box, MADV_HUGEPAGE) != 0)
    perror("madvise(MADV_HUGEPAGE)");
  memset(host, 1, box); /* fault every page in */
  FILE *mi = fopen("/proc/meminfo", "r");
  char line[256];
  while (mi != NULL && fgets(line, sizeof line, mi) != NULL)
    if (strncmp(line, "AnonHugePages", 13) == 0)
      printf("pitched_copy: %s", line);
  if (mi != NULL)
    fclose(mi);
  CK(cudaHostRegister(host, box, cudaHostRegisterDefault));
  const size_t crop = C * E * E * E * sizeof(float);
  float *dev = NULL, *pinned = NULL;
  CK(cudaMalloc(&dev, crop));
  CK(cudaMallocHost(&pinned, crop));
  memset(pinned, 1, crop);
  cudaStream_t st[4];
  cudaEvent_t done[4], t0, t1;
  for (int s = 0; s < 4; s++) {
    CK(cudaStreamCreateWithFlags(&st[s], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&done[s], cudaEventDisableTiming));
  }
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  /* The ceiling: contiguous copies of the crop's bytes. */
  CK(cudaEventRecord(t0, st[0]));
  for (int r = 0; r < reps; r++)
    CK(cudaMemcpyAsync(dev, pinned, crop, cudaMemcpyHostToDevice, st[0]));
  CK(cudaEventRecord(t1, st[0]));
  CK(cudaEventSynchronize(t1));
  const double link = (double)crop * reps / now_s(t0, t1) / 1e9;
  printf("pitched_copy: box %zux%zux%zu x %zu ch (%.2f GB registered, %s), "
         "crop %zu^3 x %zu (%.1f MB); contiguous %.2f GB/s\n",
         Z, W, W, C, box / 1e9, huge ? "huge pages asked" : "4 KiB pages", E, C,
         crop / 1e6, link);
  srand(7);
  for (int S = 1; S <= 4; S *= 2) {
    /* Warm-up crop, then reps timed on stream 0's clock: every crop's
     * streams join on stream 0 before the next crop starts. */
    for (int r = -1; r < reps; r++) {
      if (r == 0)
        CK(cudaEventRecord(t0, st[0]));
      const size_t z = (size_t)rand() % (Z - E + 1),
                   y = (size_t)rand() % (W - E + 1),
                   x = (size_t)rand() % (W - E + 1);
      /* The other streams start after stream 0's previous work. */
      CK(cudaEventRecord(done[0], st[0]));
      for (int s = 1; s < S; s++)
        CK(cudaStreamWaitEvent(st[s], done[0], 0));
      for (int s = 0; s < S; s++) {
        const size_t k0 = E * s / S, k1 = E * (s + 1) / S;
        for (size_t c = 0; c < C; c++) {
          cudaMemcpy3DParms p;
          memset(&p, 0, sizeof p);
          p.srcPtr = make_cudaPitchedPtr(host + c * Z * W * W,
                                         W * sizeof(float), W, W);
          p.srcPos = make_cudaPos(x * sizeof(float), y, z + k0);
          p.dstPtr =
              make_cudaPitchedPtr(dev + c * E * E * E, E * sizeof(float), E, E);
          p.dstPos = make_cudaPos(0, 0, k0);
          p.extent = make_cudaExtent(E * sizeof(float), E, k1 - k0);
          p.kind = cudaMemcpyHostToDevice;
          CK(cudaMemcpy3DAsync(&p, st[s]));
        }
      }
      for (int s = 1; s < S; s++) {
        CK(cudaEventRecord(done[s], st[s]));
        CK(cudaStreamWaitEvent(st[0], done[s], 0));
      }
    }
    CK(cudaEventRecord(t1, st[0]));
    CK(cudaEventSynchronize(t1));
    const double gbs = (double)crop * reps / now_s(t0, t1) / 1e9;
    printf("pitched_copy: W %zu crop %zu^3 x %zu, %d stream%s: %.2f GB/s = "
           "%.3f x contiguous\n",
           W, E, C, S, S > 1 ? "s" : "", gbs, gbs / link);
  }
  CK(cudaHostUnregister(host));
  munmap(host, box);
  return 0;
}
