/* slabfeed-bench: the ceilings every figure is compared with, measured in
 * the same run: host memcpy on one thread and on every core, pinned and
 * pageable H2D of one GPU and of all ranks' GPUs at once, device copy, GPU
 * to GPU, the crop's pitched copy shape, MPI_Get between two ranks. */
#define _GNU_SOURCE /* pthread_setaffinity_np, CPU_SET */
#include <pthread.h>
#include <sched.h>
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
  char *dst, *src;
  size_t bytes;
  int reps;
  int cpu;                    /* pin to this CPU first, or -1 */
  pthread_barrier_t *touched; /* every thread has its pages */
} mc_arg;

/* Thread body: pinned to its CPU where asked (a rank bound to one core
 * would otherwise run every thread there), it touches its own share first
 * (its pages then lie on its NUMA node, as a rank's slab does), copies it
 * once, waits for the others, then copies it reps times. */
static void *memcpy_worker(void *p)
{
  mc_arg *a = p;
  if (a->cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(a->cpu, &set);
    /* a CPU outside this process's cpuset (cgroup) refuses: the thread
     * then keeps the affinity it inherited */
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  memset(a->src, 1, a->bytes);
  memset(a->dst, 0, a->bytes);
  memcpy(a->dst, a->src, a->bytes);
  pthread_barrier_wait(a->touched);
  for (int r = 0; r < a->reps; r++)
    memcpy(a->dst, a->src, a->bytes);
  return NULL;
}

/* Host memcpy GB/s (bytes copied per second) on `threads` threads, each
 * copying its share; with `spread`, thread i runs on CPU i (every core of
 * the node, whatever this rank is bound to). -1 when the buffers or the
 * threads cannot be had. */
static double host_memcpy(size_t bytes, int threads, int reps, int spread)
{
  threads = threads > 256 ? 256 : threads < 1 ? 1 : threads;
  char *src = malloc(bytes), *dst = malloc(bytes);
  pthread_t t[256];
  mc_arg a[256];
  pthread_barrier_t touched;
  const int barrier =
      src != NULL && dst != NULL &&
      pthread_barrier_init(&touched, NULL, (unsigned)threads + 1) == 0;
  int started = 0, ok = barrier;
  const size_t share = bytes / (size_t)threads;
  for (int i = 0; ok && i < threads; i++) {
    a[i] = (mc_arg){dst + (size_t)i * share,
                    src + (size_t)i * share,
                    share,
                    reps,
                    spread ? i : -1,
                    &touched};
    ok = pthread_create(&t[i], NULL, memcpy_worker, &a[i]) == 0;
    started += ok;
  }
  double rate = -1;
  if (ok) {
    pthread_barrier_wait(&touched);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < threads; i++)
      pthread_join(t[i], NULL);
    rate = (double)share * threads * reps / (MPI_Wtime() - t0) / 1e9;
  } else if (started > 0) {
    /* a thread could not start: the barrier never opens for the others */
    fprintf(stderr, "slabfeed-bench: cannot start the memcpy threads\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (barrier)
    pthread_barrier_destroy(&touched);
  free(src);
  free(dst);
  return rate;
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

#ifdef SF_BENCH_CUDA
/* Every rank's pinned H2D at the same time (collective): the ranks start
 * together after a barrier; the total is all bytes over the slowest
 * rank's time, so ranks sharing a GPU, a PCIe switch or a socket's memory
 * show it. 0 where a rank has no usable device (all agree). */
static void h2d_all_ranks(const bench_ctx *b, size_t bytes, int reps,
                          bench_ceilings *c)
{
  void *h = b->cfg.device >= 0 ? bench_h2d_setup(b->cfg.device, bytes) : NULL;
  int ok = h != NULL, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    const int rc = bench_h2d_run(h, reps);
    const double dt = MPI_Wtime() - t0;
    double mine[2] = {rc == 0 ? dt : -1,
                      rc == 0 ? bytes * (double)reps / dt : -1},
           lo[2], hi[2];
    MPI_Allreduce(mine, lo, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(mine, hi, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (lo[0] > 0) { /* every rank's copies succeeded */
      c->h2d_all = bytes * (double)reps * b->size / hi[0] / 1e9;
      c->h2d_all_min = lo[1] / 1e9;
    }
  }
  bench_h2d_free(h);
}
#endif

/* Host copies on rank 0, device copies when a device is usable, every
 * rank's pinned H2D at once, then MPI_Get between ranks 0 and 1
 * (collective; see bench.h). */
void bench_ceilings_measure(const bench_ctx *b, bench_ceilings *c)
{
  const slabfeed_config *cfg = &b->cfg;
  memset(c, 0, sizeof *c);
  const size_t big = (size_t)256 << 20;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (b->rank == 0) {
    c->memcpy1 = host_memcpy(big, 1, 4, 0);
    /* every core of the node, pages first touched by the thread that
     * copies them: what the node's memory gives when all its GPUs read */
    c->memcpyN =
        host_memcpy((size_t)1 << 30, (int)(cores > 0 ? cores : 1), 4, 1);
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
      if (b->path[0] != '\0' &&
          slabfeed_describe(b->path, cfg->input, cfg->layout, &info, err,
                            sizeof err) == SLABFEED_OK)
        c->pitched = bench_h2d_pitched(
            (size_t)cfg->crop[2] * sizeof(float), (size_t)cfg->crop[1],
            (size_t)cfg->crop[0], (size_t)info.shape[2] * sizeof(float),
            &c->pitched_enqueue_us);
      int peer = 0;
      c->p2p = bench_p2p(big, 8, &peer);
      c->p2p_peer = peer;
    }
#else
    (void)cfg;
#endif
  }
  MPI_Bcast(c, sizeof *c / sizeof(double), MPI_DOUBLE, 0, MPI_COMM_WORLD);
#ifdef SF_BENCH_CUDA
  h2d_all_ranks(b, big, 8, c);
#endif
  c->mpi_get = mpi_get_rate(b, (size_t)64 << 20, 8);
  /* The open's read ceiling, after a loader ran (not the baseline). */
  read_ceiling rc;
  if (b->t_read_max > 0 &&
      read_ceiling_measure(b->path, cfg->input, cfg->target, cfg->layout,
                           &rc)) {
    c->read_bytes = rc.bytes;
    c->read_pread = rc.pread_gbs;
    c->read_pread_threads = rc.pread_threads_gbs;
    c->read_threads = rc.threads;
    c->read_open = rc.bytes / b->t_read_max / 1e9;
  }
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
         "device copy %s, memcpy 1 thread %s, memcpy %ld threads (one per CPU) "
         "%s, "
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
  if (c->h2d_all > 0)
    printf("ceiling of all %d rank(s) at once: pinned H2D %.1f GB/s in "
           "total, the slowest rank %.1f GB/s\n",
           b->size, c->h2d_all, c->h2d_all_min);
  if (c->p2p > 0)
    printf("ceiling GPU to GPU (device 0 -> 1, peer access %s): %.1f GB/s\n",
           c->p2p_peer > 0 ? "on" : "off: staged through the host", c->p2p);
  if (c->read_pread > 0)
    printf("open: read %.2f GB of '%s' at %.2f GB/s = %.3f x the read "
           "ceiling (the same bytes by the same %d ranks with pread into "
           "fresh private memory, one thread per rank, page cache as the "
           "open left it: %.2f GB/s) = %.3f x the same on %.0f thread%s per "
           "rank (%.2f GB/s)\n",
           c->read_bytes / 1e9, b->path, c->read_open,
           c->read_open / c->read_pread, b->size, c->read_pread,
           c->read_open / c->read_pread_threads, c->read_threads,
           c->read_threads == 1 ? "" : "s", c->read_pread_threads);
  else if (b->t_read_max > 0)
    printf("open: read ceiling n/a (filters, several volumes or fields: "
           "their bytes are not at known offsets)\n");
}
