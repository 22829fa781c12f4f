/* Soak: many steps of one loader, with the process's memory printed every
 * `every` steps, so that a leak shows as growth per step.
 *   mpirun -n P soak FILE [steps] [crop] [batch] [device]
 * defaults: 100000 steps, crop 16, batch 2, device -1 (host batches).
 * Prints per report: step, the private (RssAnon) and shared (RssShmem)
 * resident memory, the device memory in use (cudaMemGetInfo, GPU builds),
 * and at the end the growth per step between the first report and the
 * last (the first 10^4 steps warm allocator caches and are not counted).
 * With a device, the batches go to a stream of the soak's own; the soak
 * synchronises that stream at each report only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "slabfeed.h"

#ifdef SF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* Device memory in use on the current device, bytes (0 without CUDA). */
static uint64_t device_used(void)
{
#ifdef SF_HAVE_CUDA
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
    return (uint64_t)(total_b - free_b);
#endif
  return 0;
}

int main(int argc, char **argv)
{
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 2) {
    if (rank == 0)
      fprintf(stderr, "usage: soak FILE [steps] [crop] [batch] [device]\n");
    MPI_Finalize();
    return 2;
  }
  const long steps = argc > 2 ? atol(argv[2]) : 100000;
  const long every = steps >= 100000 ? 10000 : (steps >= 10 ? steps / 10 : 1);
  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = argv[1];
  c.input = "Nbody";
  c.target = "Hydro";
  c.crop[0] = c.crop[1] = c.crop[2] = argc > 3 ? atoll(argv[3]) : 16;
  c.batch = argc > 4 ? atoi(argv[4]) : 2;
  c.device = argc > 5 ? atoi(argv[5]) : -1;
  c.n_input_vectors = 1;
  c.input_vectors[0][0] = 1, c.input_vectors[0][1] = 2;
  c.input_vectors[0][2] = 3;
  c.dtype = SLABFEED_DTYPE_BF16;
  void *stream = NULL;
#ifdef SF_HAVE_CUDA
  if (c.device >= 0 &&
      (cudaSetDevice(c.device) != cudaSuccess ||
       cudaStreamCreateWithFlags((cudaStream_t *)&stream,
                                 cudaStreamNonBlocking) != cudaSuccess)) {
    fprintf(stderr, "soak: rank %d: no CUDA device %d\n", rank, c.device);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
#endif
  slabfeed_loader *l = NULL;
  char err[1024];
  if (slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) != SLABFEED_OK) {
    if (rank == 0)
      fprintf(stderr, "soak: %s\n", err);
    MPI_Finalize();
    return 1;
  }
  if (rank == 0)
    printf("soak: %ld steps, %d rank(s), crop %lld, batch %d, %s\n"
           "%10s %12s %12s %12s\n",
           steps, size, (long long)c.crop[0], c.batch,
           c.device >= 0 ? "device batches" : "host batches", "step",
           "private MB", "shared MB", "device MB");
  uint64_t first_anon = 0, first_dev = 0, last_anon = 0, last_dev = 0;
  long first_step = -1, last_step = 0;
  for (long s = 1; s <= steps; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, stream) != SLABFEED_OK) {
      fprintf(stderr, "soak: rank %d step %ld: %s\n", rank, s,
              slabfeed_last_error(l));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (s % every != 0)
      continue;
#ifdef SF_HAVE_CUDA
    if (stream != NULL)
      cudaStreamSynchronize((cudaStream_t)stream);
#endif
    uint64_t a, sh;
    cli_rss_parts(&a, &sh);
    const uint64_t dev = device_used();
    /* The first 10^4 steps warm allocator caches (short runs: none). */
    if (first_step < 0 && (steps < 20000 || s >= 10000)) {
      first_step = s;
      first_anon = a;
      first_dev = dev;
    }
    last_step = s;
    last_anon = a;
    last_dev = dev;
    if (rank == 0)
      printf("%10ld %12.1f %12.1f %12.1f\n", s, (double)a / 1e6,
             (double)sh / 1e6, (double)dev / 1e6);
  }
  const long span = last_step - first_step;
  const double host_growth =
      span > 0 ? ((double)last_anon - (double)first_anon) / (double)span : 0;
  const double dev_growth =
      span > 0 ? ((double)last_dev - (double)first_dev) / (double)span : 0;
  double worst[2] = {host_growth, dev_growth};
  MPI_Allreduce(MPI_IN_PLACE, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0)
    printf("soak: growth per step over steps %ld..%ld (worst rank): private "
           "host %.3f B/step, device %.3f B/step\n",
           first_step, last_step, worst[0], worst[1]);
  slabfeed_close(l);
#ifdef SF_HAVE_CUDA
  if (stream != NULL)
    cudaStreamDestroy((cudaStream_t)stream);
#endif
  MPI_Finalize();
  return 0;
}
