/* slabfeed-bench: the ceilings every figure is compared with, measured in
 * the same run: host memcpy on one thread and on all, pinned and pageable
 * H2D, device copy, the crop's pitched copy shape, MPI_Get between two
 * ranks. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "slabfeed_tools.h"
#ifdef SF_BENCH_CUDA
#include "bench_gpu.h"
#endif

/* One thread's share of a host memcpy measurement. */
typedef struct mc_arg {
  char *dst;
  const char *src;
  size_t bytes;
  int reps;
} mc_arg;

/* Thread body: copies its share reps times. */
static void *memcpy_worker(void *p)
{
  mc_arg *a = p;
  for (int r = 0; r < a->reps; r++)
    memcpy(a->dst, a->src, a->bytes);
  return NULL;
}

/* Host memcpy GB/s on `threads` threads, each copying its share; -1 when
 * the buffers cannot be allocated. */
static double host_memcpy(size_t bytes, int threads, int reps)
{
  char *src = malloc(bytes), *dst = malloc(bytes);
  if (src == NULL || dst == NULL) {
    free(src);
    free(dst);
    return -1;
  }
  memset(src, 1, bytes);
  memset(dst, 0, bytes);
  pthread_t t[256];
  mc_arg a[256];
  threads = threads > 256 ? 256 : threads;
  const size_t share = bytes / (size_t)threads;
  for (int i = 0; i < threads; i++)
    a[i] = (mc_arg){dst + (size_t)i * share, src + (size_t)i * share, share, 1};
  for (int i = 0; i < threads; i++) /* warm */
    memcpy_worker(&a[i]);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < threads; i++) {
    a[i].reps = reps;
    pthread_create(&t[i], NULL, memcpy_worker, &a[i]);
  }
  for (int i = 0; i < threads; i++)
    pthread_join(t[i], NULL);
  const double dt = MPI_Wtime() - t0;
  free(src);
  free(dst);
  return (double)share * threads * reps / dt / 1e9;
}

/* Rank 0 reads `bytes` from rank 1 with MPI_Get (window by MPI_Win_allocate
 * on all ranks); collective; -1 when P < 2 or the window fails. */
static double mpi_get_rate(const bench_ctx *b, size_t bytes, int reps)
{
  const int rank = b->rank;
  if (b->size < 2)
    return -1;
  MPI_Win win;
  char *base;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const size_t mine = rank <= 1 ? bytes : 1;
  int ok = MPI_Win_allocate((MPI_Aint)mine, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
                            &base, &win) == MPI_SUCCESS;
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    if (ok)
      MPI_Win_free(&win);
    return -1;
  }
  memset(base, 2, mine);
  char *dst = rank == 0 ? malloc(bytes) : NULL;
  double rate = -1;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0 && dst != NULL) {
    MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
    MPI_Get(dst, (int)bytes, MPI_BYTE, 1, 0, (int)bytes, MPI_BYTE, win);
    MPI_Win_flush(1, win); /* warm */
    const double t0 = MPI_Wtime();
    for (int r = 0; r < reps; r++) {
      MPI_Get(dst, (int)bytes, MPI_BYTE, 1, 0, (int)bytes, MPI_BYTE, win);
      MPI_Win_flush(1, win);
    }
    rate = (double)bytes * reps / (MPI_Wtime() - t0) / 1e9;
    MPI_Win_unlock(1, win);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_free(&win);
  free(dst);
  MPI_Bcast(&rate, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return rate;
}

/* Host copies on rank 0, device copies when a device is usable, then
 * MPI_Get between ranks 0 and 1 (collective; see bench.h). */
void bench_ceilings_measure(const bench_ctx *b, bench_ceilings *c)
{
  const slabfeed_config *cfg = &b->cfg;
  memset(c, 0, sizeof *c);
  const size_t big = (size_t)256 << 20;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (b->rank == 0) {
    c->memcpy1 = host_memcpy(big, 1, 4);
    c->memcpyN = host_memcpy(big, (int)(cores > 0 ? cores : 1), 4);
#ifdef SF_BENCH_CUDA
    /* a stream on the device: the device is usable (and current) */
    void *probe = cfg->device >= 0 ? bench_stream_create(cfg->device) : NULL;
    if (probe != NULL) {
      bench_stream_destroy(probe);
      c->pinned = bench_h2d_pinned(big, 8);
      c->pageable = bench_h2d_pageable(big, 4);
      c->d2d = bench_d2d(big, 16);
      slabfeed_dataset_info info = SLABFEED_DATASET_INFO_INIT;
      char err[256];
      if (slabfeed_describe(cfg->path, cfg->input, cfg->layout, &info, err,
                            sizeof err) == SLABFEED_OK)
        c->pitched = bench_h2d_pitched(
            (size_t)cfg->crop[2] * sizeof(float), (size_t)cfg->crop[1],
            (size_t)cfg->crop[0], (size_t)info.shape[2] * sizeof(float),
            &c->pitched_enqueue_us);
    }
#else
    (void)cfg;
#endif
  }
  MPI_Bcast(c, sizeof *c / sizeof(double), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  c->mpi_get = mpi_get_rate(b, (size_t)64 << 20, 8);
}

/* One ceiling as text: "%.1f", or "n/a" where it was not measured. */
static const char *gbs_text(double v, char *buf, size_t len)
{
  if (v > 0)
    snprintf(buf, len, "%.1f", v);
  else
    snprintf(buf, len, "n/a");
  return buf;
}

/* Rank 0 prints the ceilings in GB/s (n/a: not measured: no usable GPU,
 * or one rank), and the pitched copy when measured. */
void bench_ceilings_print(const bench_ctx *b, const bench_ceilings *c)
{
  if (b->rank != 0)
    return;
  char t[6][32];
  printf("ceilings (GB/s, same run): pinned H2D %s, pageable H2D %s, "
         "device copy %s, memcpy 1 thread %s, memcpy %ld threads %s, "
         "MPI_Get 2 ranks %s%s\n",
         gbs_text(c->pinned, t[0], sizeof t[0]),
         gbs_text(c->pageable, t[1], sizeof t[1]),
         gbs_text(c->d2d, t[2], sizeof t[2]),
         gbs_text(c->memcpy1, t[3], sizeof t[3]), sysconf(_SC_NPROCESSORS_ONLN),
         gbs_text(c->memcpyN, t[4], sizeof t[4]),
         gbs_text(c->mpi_get, t[5], sizeof t[5]),
         c->pinned > 0 ? "" : " (no GPU in this run: no device ceilings)");
  if (c->pitched > 0)
    printf("ceiling of the crop's copy shape (%lld-byte rows, one "
           "cudaMemcpy3DAsync per channel): %.1f GB/s, %.1f us to enqueue\n",
           (long long)b->cfg.crop[2] * 4, c->pitched, c->pitched_enqueue_us);
}
