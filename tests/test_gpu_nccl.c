/* The loader next to NCCL: every step, slabfeed_next on the training stream and
 * an ncclAllReduce of the batch on the same stream, 200 steps. No hang, the
 * sums equal the sums of the host path's batches over all ranks. One GPU
 * per rank (device = rank % GPUs). */
#include <nccl.h>

#include "gpu.h"
#include "testutil.h"

int main(int argc, char **argv)
{
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int ngpu = gpu_count();
  if (ngpu == 0)
    return check_skip("gpu.nccl", "no CUDA device");
  if (ngpu < size)
    return check_skip("gpu.nccl",
                      "fewer GPUs than ranks (NCCL needs one GPU per rank)");
  const int dev = rank % ngpu;
  CUDA_CHECK(cudaSetDevice(dev));
  char path[64];
  snprintf(path, sizeof path, "nccl_np%d.h5", size);
  make_file(path, 32, 32, 32, SLABFEED_LAYOUT_CF, 0, 0, 0);

  ncclUniqueId id;
  if (rank == 0)
    ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t nc;
  CHECK(ncclCommInitRank(&nc, size, id, rank) == ncclSuccess,
        "ncclCommInitRank");

  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = path;
  c.input = "Nbody";
  c.crop[0] = c.crop[1] = c.crop[2] = 16;
  c.batch = 2;
  c.seed = 3;
  char err[1024];
  slabfeed_loader *cpu = NULL, *gpu = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &cpu, err, sizeof err) == SLABFEED_OK,
        "%s", err);
  c.device = dev;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &gpu, err, sizeof err) == SLABFEED_OK,
        "%s", err);
  const size_t n = 2 * 4 * 16 * 16 * 16;
  float *sum, *host = malloc(n * sizeof *host),
              *want = malloc(n * sizeof *want);
  CUDA_CHECK(cudaMalloc((void **)&sum, n * sizeof *sum));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int bad = 0;
  for (int step = 0; step < 200 && cpu && gpu; step++) {
    slabfeed_batch a = SLABFEED_BATCH_INIT, b = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(gpu, &b, s) == SLABFEED_OK, "gpu next: %s",
          slabfeed_last_error(gpu));
    CHECK(ncclAllReduce(b.input.data, sum, n, ncclFloat, ncclSum, nc, s) ==
              ncclSuccess,
          "ncclAllReduce");
    CHECK(slabfeed_next(cpu, &a, NULL) == SLABFEED_OK, "cpu next");
    if (step % 20 == 19) {
      CUDA_CHECK(cudaMemcpyAsync(host, sum, n * sizeof *host,
                                 cudaMemcpyDeviceToHost, s));
      CUDA_CHECK(cudaStreamSynchronize(s));
      MPI_Allreduce(a.input.data, want, (int)n, MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      /* Sums of integers below 2^24: exact in any order. */
      bad += memcmp(host, want, n * sizeof *host) != 0;
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(bad == 0, "%d of 10 checked all-reduce sums differ", bad);
  if (rank == 0)
    printf("gpu.nccl: 200 steps of slabfeed_next + ncclAllReduce on %d "
           "rank(s), sums "
           "checked\n",
           size);
  slabfeed_close(gpu);
  slabfeed_close(cpu);
  ncclCommDestroy(nc);
  cudaFree(sum);
  cudaStreamDestroy(s);
  free(host);
  free(want);
  return check_finish("gpu.nccl");
}
