/* slabfeed-bench: throughput of the loader on P ranks next to the ceilings
 * measured in the same run (pinned and pageable H2D, device copy, host
 * memcpy on one thread and on all, MPI_Get between two ranks), each figure
 * also as a ratio to its ceiling; stage times, exposed wait per step with
 * and without a simulated training step, peak host RSS and device memory.
 * --baseline fullcopy runs the original approach instead: every rank reads
 * the whole volume and crops it locally with the same transform.
 * Output: a table for people, and JSON lines (prefix "JSON ") for plots. */
#include <hdf5.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#ifdef SF_BENCH_CUDA
#include "bench_gpu.h"
#endif

static const char *prog = "slabfeed-bench";
static int rank, size;

/* ---- Ceilings --------------------------------------------------------------
 */

typedef struct ceilings {
  double pinned, pageable, d2d, memcpy1, memcpyN, mpi_get;
  /* one crop-channel pitched copy (crop rows out of volume rows), GB/s,
   * and the host time to enqueue one, us */
  double pitched, pitched_enqueue_us;
} ceilings;

typedef struct mc_arg {
  char *dst;
  const char *src;
  size_t bytes;
  int reps;
} mc_arg;

static void *memcpy_worker(void *p)
{
  mc_arg *a = p;
  for (int r = 0; r < a->reps; r++)
    memcpy(a->dst, a->src, a->bytes);
  return NULL;
}

/* Host memcpy GB/s on `threads` threads, each copying its share. */
static double host_memcpy(size_t bytes, int threads, int reps)
{
  char *src = malloc(bytes), *dst = malloc(bytes);
  if (src == NULL || dst == NULL)
    return -1;
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
static double mpi_get_rate(size_t bytes, int reps)
{
  if (size < 2)
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

static void measure_ceilings(ceilings *c, const slabfeed_config *cfg)
{
  const int device = cfg->device;
  memset(c, 0, sizeof *c);
  const size_t big = (size_t)256 << 20;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (rank == 0) {
    c->memcpy1 = host_memcpy(big, 1, 4);
    c->memcpyN = host_memcpy(big, (int)(cores > 0 ? cores : 1), 4);
#ifdef SF_BENCH_CUDA
    if (device >= 0 && bench_stream_create(device) != NULL) {
      c->pinned = bench_h2d_pinned(big, 8);
      c->pageable = bench_h2d_pageable(big, 4);
      c->d2d = bench_d2d(big, 16);
      slabfeed_dataset_info info;
      char err[256];
      if (slabfeed_describe(cfg->path, cfg->input, cfg->layout, &info, err,
                            sizeof err) == SLABFEED_OK)
        c->pitched = bench_h2d_pitched(
            (size_t)cfg->crop[2] * sizeof(float), (size_t)cfg->crop[1],
            (size_t)cfg->crop[0], (size_t)info.shape[2] * sizeof(float),
            &c->pitched_enqueue_us);
    }
#else
    (void)device;
#endif
  }
  MPI_Bcast(c, sizeof *c / sizeof(double), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  c->mpi_get = mpi_get_rate((size_t)64 << 20, 8);
}

/* ---- Runs -------------------------------------------------------------------
 */

typedef struct result {
  double crops_s, gbs, wall_step_ms, exposed_ms, wait_ms;
  double t_plan, t_gather, t_h2d, t_transform; /* ms per step */
  double rss, device_mem;
  double gather_gbs; /* bytes gathered (own + node + MPI_Get) / gather s */
  double link_gbs;   /* float32 bytes gathered per second of the run: on the
                        GPU path, what crosses the host link */
  double anon, shmem, slab; /* private RSS, shared RSS, own slab (bytes) */
  double busy_ms;           /* measured length of the simulated step */
  double steady_ms;         /* GPU time per step after the pipeline filled */
} result;

static double ratio(double x, double ceiling)
{
  return ceiling > 0 ? x / ceiling : 0;
}

#ifdef SF_BENCH_CUDA
/* The simulated step alone, S times, so that the exposed wait is measured
 * against what the busy kernel really takes here (the GPU's global timer
 * may tick coarsely), not against its nominal length. */
static double busy_alone_ms(void *stream, int S, double step_ms)
{
  void *e0 = bench_event_create(), *e1 = bench_event_create();
  bench_event_record(e0, stream);
  for (int i = 0; i < S; i++)
    bench_busy(stream, step_ms);
  bench_event_record(e1, stream);
  return bench_event_ms(e0, e1) / S;
}
#endif

/* S timed steps after W warm-up steps; with step_ms > 0 a busy kernel of
 * that length runs on the consumer stream after every slabfeed_next. */
static void run_loader(slabfeed_loader *l, int device, void *stream, int W,
                       int S, double step_ms, result *r)
{
  slabfeed_batch b;
  slabfeed_status st;
  for (int i = 0; i < W; i++)
    if ((st = slabfeed_next(l, &b, stream)) != SLABFEED_OK)
      cli_fail(prog, st, slabfeed_last_error(l));
#ifdef SF_BENCH_CUDA
  if (device >= 0)
    bench_stream_sync(stream);
#endif
  MPI_Barrier(MPI_COMM_WORLD);
  slabfeed_stats s0, s1;
  slabfeed_stats_get(l, &s0);
  /* With a simulated step, the steady state is timed on the consumer
   * stream from step j0 on (the first steps include the pipeline fill). */
#ifdef SF_BENCH_CUDA
  const int j0 = S >= 8 ? S / 4 : 0;
  void *e0 = NULL, *e1 = NULL;
  if (device >= 0 && step_ms > 0) {
    e0 = bench_event_create();
    e1 = bench_event_create();
  }
#endif
  const double t0 = MPI_Wtime();
  for (int i = 0; i < S; i++) {
    if ((st = slabfeed_next(l, &b, stream)) != SLABFEED_OK)
      cli_fail(prog, st, slabfeed_last_error(l));
#ifdef SF_BENCH_CUDA
    if (e0 != NULL && i == j0)
      bench_event_record(e0, stream);
    if (device >= 0 && step_ms > 0)
      bench_busy(stream, step_ms);
#endif
  }
#ifdef SF_BENCH_CUDA
  if (e1 != NULL)
    bench_event_record(e1, stream);
  if (device >= 0)
    bench_stream_sync(stream);
  r->steady_ms = e1 != NULL ? bench_event_ms(e0, e1) / (S - j0) : 0;
#endif
  const double dt = MPI_Wtime() - t0;
  slabfeed_stats_get(l, &s1);
  (void)device;
  r->crops_s = (double)(s1.samples - s0.samples) / dt;
  r->gbs = (double)(s1.bytes_out - s0.bytes_out) / dt / 1e9;
  r->wall_step_ms = dt / S * 1e3;
  r->busy_ms = step_ms;
#ifdef SF_BENCH_CUDA
  if (device >= 0 && step_ms > 0)
    r->busy_ms = busy_alone_ms(stream, S, step_ms);
#endif
  r->exposed_ms = r->steady_ms > 0 ? r->steady_ms - r->busy_ms
                                   : r->wall_step_ms - r->busy_ms;
  r->wait_ms = (s1.t_wait - s0.t_wait) / S * 1e3;
  r->t_plan = (s1.t_plan - s0.t_plan) / S * 1e3;
  r->t_gather = (s1.t_gather - s0.t_gather) / S * 1e3;
  r->t_h2d = (s1.t_h2d - s0.t_h2d) / S * 1e3;
  r->t_transform = (s1.t_transform - s0.t_transform) / S * 1e3;
  r->rss = (double)cli_peak_rss();
  const double gathered =
      (double)(s1.bytes_own + s1.bytes_node + s1.bytes_remote - s0.bytes_own -
               s0.bytes_node - s0.bytes_remote);
  r->gather_gbs = s1.t_gather > s0.t_gather
                      ? gathered / (s1.t_gather - s0.t_gather) / 1e9
                      : 0;
  r->link_gbs = gathered / dt / 1e9;
  uint64_t anon, shmem;
  cli_rss_parts(&anon, &shmem);
  r->anon = (double)anon;
  r->shmem = (double)shmem;
  r->slab = (double)s1.slab_bytes;
}

/* The original approach: the whole volume in every process, crop and
 * transform on the host, pinned copy to the GPU. */
typedef struct volume {
  float *v;
  int64_t dims[4];
  slabfeed_dataset_info info;
} volume;

static void read_volume(const char *path, const char *name,
                        slabfeed_file_layout lay, volume *vol)
{
  char err[1024];
  slabfeed_status st =
      slabfeed_describe(path, name, lay, &vol->info, err, sizeof err);
  if (st != SLABFEED_OK)
    cli_fail(prog, st, err);
  const hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  size_t n = 1;
  for (int a = 0; a < 4; a++)
    n *= (size_t)(vol->dims[a] = vol->info.dims[a]);
  vol->v = malloc(n * sizeof(float));
  if (vol->v == NULL ||
      H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, vol->v) < 0)
    cli_fail(prog, SLABFEED_ERR_IO, "full copy: cannot read the whole dataset");
  H5Dclose(d);
  H5Fclose(f);
}

static void crop_volume(const volume *vol, const int64_t o[3],
                        const int64_t c[3], float *dst)
{
  const slabfeed_dataset_info *in = &vol->info;
  const int64_t C = in->channels, *N = in->shape;
  for (int64_t ch = 0; ch < C; ch++)
    for (int64_t z = 0; z < c[0]; z++)
      for (int64_t y = 0; y < c[1]; y++) {
        const int64_t gz = (o[0] + z) % N[0], gy = (o[1] + y) % N[1];
        float *row = dst + ((ch * c[0] + z) * c[1] + y) * c[2];
        for (int64_t x = 0; x < c[2]; x++) {
          const int64_t gx = (o[2] + x) % N[2];
          row[x] = in->layout == SLABFEED_LAYOUT_CF
                       ? vol->v[((ch * N[0] + gz) * N[1] + gy) * N[2] + gx]
                       : vol->v[((gz * N[1] + gy) * N[2] + gx) * C + ch];
        }
      }
}

static void run_fullcopy(const slabfeed_config *cfg, void *stream, int W, int S,
                         result *r)
{
  const int nd = cfg->target ? 2 : 1;
  volume vol[2];
  const char *names[2] = {cfg->input, cfg->target};
  const double t_read = MPI_Wtime();
  for (int d = 0; d < nd; d++)
    read_volume(cfg->path, names[d], cfg->layout, &vol[d]);
  if (rank == 0)
    printf("full copy: whole volume read by every rank in %.2f s\n",
           MPI_Wtime() - t_read);
  const int64_t vox = cfg->crop[0] * cfg->crop[1] * cfg->crop[2];
  const size_t es = slabfeed_dtype_size(cfg->dtype);
  size_t sample[2], total = 0;
  float *stage = malloc((size_t)(64 * vox) * sizeof(float));
  void *host[2];
#ifdef SF_BENCH_CUDA
  void *dev[2] = {NULL, NULL};
#endif
  for (int d = 0; d < nd; d++) {
    sample[d] = (size_t)(vol[d].info.channels * vox) * es;
    total += sample[d] * (size_t)cfg->batch;
#ifdef SF_BENCH_CUDA
    host[d] = cfg->device >= 0
                  ? bench_host_pinned(sample[d] * (size_t)cfg->batch)
                  : malloc(sample[d] * (size_t)cfg->batch);
    if (cfg->device >= 0)
      dev[d] = bench_device_alloc(sample[d] * (size_t)cfg->batch);
#else
    host[d] = malloc(sample[d] * (size_t)cfg->batch);
#endif
  }
  uint64_t x = 0x9e3779b97f4a7c15ULL ^ (uint64_t)rank;
  double t0 = 0;
  for (int i = 0; i < W + S; i++) {
    if (i == W) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
    }
    for (int b = 0; b < cfg->batch; b++) {
      int64_t o[3];
      for (int a = 0; a < 3; a++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        o[a] = (int64_t)(x % (uint64_t)vol[0].info.shape[a]);
      }
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const int g = cfg->symmetries == SLABFEED_SYM_NONE ? 0 : (int)(x % 48);
      for (int d = 0; d < nd; d++) {
        crop_volume(&vol[d], o, cfg->crop, stage);
        slabfeed_transform_host(
            stage, cfg->crop, (int)vol[d].info.channels, g,
            d ? cfg->n_target_vectors : cfg->n_input_vectors,
            (const int(*)[3])(d ? cfg->target_vectors : cfg->input_vectors),
            cfg->dtype, cfg->out_layout,
            (char *)host[d] + (size_t)b * sample[d]);
      }
    }
#ifdef SF_BENCH_CUDA
    if (cfg->device >= 0) {
      for (int d = 0; d < nd; d++)
        bench_copy_h2d(dev[d], host[d], sample[d] * (size_t)cfg->batch, stream);
      bench_stream_sync(stream);
    }
#else
    (void)stream;
#endif
  }
  const double dt = MPI_Wtime() - t0;
  memset(r, 0, sizeof *r);
  r->crops_s = (double)S * cfg->batch / dt;
  r->gbs = (double)total * S / dt / 1e9;
  r->wall_step_ms = dt / S * 1e3;
  r->rss = (double)cli_peak_rss();
  uint64_t anon, shmem;
  cli_rss_parts(&anon, &shmem);
  r->anon = (double)anon;
  r->shmem = (double)shmem;
  free(stage);
}

/* ---- Report -----------------------------------------------------------------
 */

static void report(const char *mode, const slabfeed_config *cfg,
                   const ceilings *c, double step_ms, const result *r,
                   const char *label)
{
  result *all = rank == 0 ? malloc(sizeof *r * (size_t)size) : NULL;
  MPI_Gather(r, sizeof *r / sizeof(double), MPI_DOUBLE, all,
             sizeof *r / sizeof(double), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank != 0)
    return;
  double crops = 0, gbs = 0, rss = 0, exposed = 0, link = 0, anon = 0, slab = 0;
  printf(
      "\n%s  %s  ranks %d  crop %lld  batch %d  %s  device %d  step %.0f ms\n",
      mode, label, size, (long long)cfg->crop[0], cfg->batch,
      cli_dtype_name(cfg->dtype), cfg->device, step_ms);
  printf("%4s %9s %8s %8s %9s %9s %7s %7s %7s %7s %9s\n", "rank", "crops/s",
         "GB/s", "step ms", "exposed", "wait ms", "plan", "gather", "h2d",
         "xform", "RSS MB");
  for (int i = 0; i < size; i++) {
    const result *x = &all[i];
    printf("%4d %9.2f %8.2f %8.2f %9.3f %9.3f %7.3f %7.3f %7.3f %7.3f %9.0f\n",
           i, x->crops_s, x->gbs, x->wall_step_ms, x->exposed_ms, x->wait_ms,
           x->t_plan, x->t_gather, x->t_h2d, x->t_transform, x->rss / 1e6);
    crops += x->crops_s;
    gbs += x->gbs;
    rss = x->rss > rss ? x->rss : rss;
    exposed = x->exposed_ms > exposed ? x->exposed_ms : exposed;
    link += x->link_gbs;
    anon = x->anon > anon ? x->anon : anon;
    slab = x->slab > slab ? x->slab : slab;
  }
  printf("total %8.2f crops/s %8.2f GB/s =", crops, gbs);
  if (c->pinned > 0) /* GPU runs: the link is the ceiling */
    printf(" %.3f x pinned H2D (%.1f GB/s),", ratio(gbs, c->pinned), c->pinned);
  printf(" %.3f x 1-thread memcpy (%.1f GB/s)", ratio(gbs, c->memcpy1),
         c->memcpy1);
  if (link > 0 && c->pinned > 0)
    printf("; float32 gathered %.2f GB/s = %.3f x pinned H2D = %.3f x the "
           "crop's copy shape",
           link, ratio(link, c->pinned), ratio(link, c->pitched));
  if (step_ms > 0)
    printf(
        "; exposed %.3f ms per step of %.2f ms measured (%.2f%%) in steady "
        "state (%.2f ms per step over the whole run, pipeline fill included)",
        exposed, all[0].busy_ms, 100.0 * exposed / all[0].busy_ms,
        all[0].wall_step_ms - all[0].busy_ms);
  printf("; per rank: own slab %.0f MB + private RSS %.0f MB (peak RSS %.0f MB "
         "counts the "
         "node window's shared pages)",
         slab / 1e6, anon / 1e6, rss / 1e6);
  if (all[0].gather_gbs > 0)
    printf("; host gather %.2f GB/s per rank = %.3f x 1-thread memcpy",
           all[0].gather_gbs, ratio(all[0].gather_gbs, c->memcpy1));
  printf("\n");
  printf("JSON "
         "{\"bench\":\"%s\",\"label\":\"%s\",\"ranks\":%d,\"crop\":%lld,"
         "\"batch\":%d,"
         "\"dtype\":\"%s\",\"device\":%d,\"step_ms\":%.1f,\"crops_s\":%.3f,"
         "\"gbs\":%.3f,"
         "\"exposed_ms\":%.4f,\"wait_ms\":%.4f,\"plan_ms\":%.4f,\"gather_ms\":%"
         ".4f,"
         "\"h2d_ms\":%.4f,\"transform_ms\":%.4f,\"peak_rss\":%.0f,\"device_"
         "mem\":%.0f,"
         "\"ceil_pinned\":%.2f,\"ceil_pageable\":%.2f,\"ceil_d2d\":%.1f,\"ceil_"
         "memcpy1\":%.2f,"
         "\"ceil_memcpyN\":%.2f,\"ceil_mpi_get\":%.2f,\"ceil_pitched\":%.2f,"
         "\"pitched_enqueue_us\":%.2f,\"ratio_pinned\":%.4f,"
         "\"ratio_memcpy1\":%.4f,\"gather_gbs\":%.3f,\"link_gbs\":%.3f,\"busy_"
         "ms\":%.3f,"
         "\"private_rss\":%.0f,\"slab\":%.0f,\"wall_exposed_ms\":%.4f}\n",
         mode, label, size, (long long)cfg->crop[0], cfg->batch,
         cli_dtype_name(cfg->dtype), cfg->device, step_ms, crops, gbs, exposed,
         all[0].wait_ms, all[0].t_plan, all[0].t_gather, all[0].t_h2d,
         all[0].t_transform, rss, all[0].device_mem, c->pinned, c->pageable,
         c->d2d, c->memcpy1, c->memcpyN, c->mpi_get, c->pitched,
         c->pitched_enqueue_us, ratio(gbs, c->pinned), ratio(gbs, c->memcpy1),
         all[0].gather_gbs, link, all[0].busy_ms, anon, slab,
         all[0].wall_step_ms - all[0].busy_ms);
  fflush(stdout);
  free(all);
}

int main(int argc, char **argv)
{
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char usage[2048];
  snprintf(usage, sizeof usage,
           "%s [--warmup W] [--steps S] [--step-ms T] [--baseline fullcopy] "
           "[--label L]",
           cli_loader_usage);
  slabfeed_config cfg;
  slabfeed_config_init(&cfg);
  int64_t W = 5, S = 40;
  double step_ms = 50;
  int fullcopy = 0;
  const char *label = "";
  int device_local = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--device") == 0 && i + 1 < argc &&
        strcmp(argv[i + 1], "local") == 0) {
      device_local = 1; /* one GPU per rank: node-local rank % GPUs */
      i++;
      continue;
    }
    if (cli_loader_option(prog, usage, argc, argv, &i, &cfg))
      continue;
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = v == NULL;
    if (!bad && strcmp(o, "--warmup") == 0)
      bad = cli_int64(v, &W) || W < 0;
    else if (!bad && strcmp(o, "--steps") == 0)
      bad = cli_int64(v, &S) || S < 1;
    else if (!bad && strcmp(o, "--step-ms") == 0)
      step_ms = atof(v), bad = step_ms < 0;
    else if (!bad && strcmp(o, "--baseline") == 0)
      bad = strcmp(v, "fullcopy") != 0, fullcopy = 1;
    else if (!bad && strcmp(o, "--label") == 0)
      label = v;
    else
      cli_usage_fail(prog, usage, "unknown option %s", o);
    if (bad)
      cli_usage_fail(prog, usage, "bad value for %s", o);
    i++;
  }
#ifdef SF_BENCH_CUDA
  if (device_local) {
    MPI_Comm node;
    int local = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                        MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    const int n = bench_device_count();
    if (n == 0)
      cli_usage_fail(prog, usage, "--device local: no CUDA device");
    cfg.device = local % n;
  }
#else
  if (device_local)
    cli_usage_fail(prog, usage, "built without CUDA: use --device -1");
#endif
#ifndef SF_BENCH_CUDA
  if (cfg.device >= 0)
    cli_usage_fail(prog, usage, "built without CUDA: use --device -1");
#endif
  void *stream = NULL;
#ifdef SF_BENCH_CUDA
  if (cfg.device >= 0 && (stream = bench_stream_create(cfg.device)) == NULL)
    cli_fail(prog, SLABFEED_ERR_CUDA, "cannot create the consumer stream");
  const double dev0 = cfg.device >= 0 ? bench_device_used() : 0;
#endif
  /* The runs first, the ceilings after them: the ceilings' buffers must
   * not count in the runs' peak RSS. */
  result r, rs;
  int have_step = 0;
  if (fullcopy) {
    run_fullcopy(&cfg, stream, (int)W, (int)S, &r);
  } else {
    char err[1024];
    slabfeed_loader *l = NULL;
    slabfeed_status st =
        slabfeed_open(MPI_COMM_WORLD, &cfg, &l, err, sizeof err);
    if (st != SLABFEED_OK)
      cli_fail(prog, st, err);
    slabfeed_stats s;
    slabfeed_stats_get(l, &s);
    if (rank == 0)
      printf("open: slab %.1f MB per rank read in %.2f s; staging %.1f MB; "
             "loader thread %d\n",
             s.slab_bytes / 1e6, s.t_read, s.staging_bytes / 1e6,
             s.loader_thread);
    memset(&r, 0, sizeof r);
#ifdef SF_BENCH_CUDA
    r.device_mem = cfg.device >= 0 ? bench_device_used() - dev0 : 0;
#endif
    const double dmem = r.device_mem;
    run_loader(l, cfg.device, stream, (int)W, (int)S, 0, &r);
    r.device_mem = dmem;
    if (cfg.device >= 0 && step_ms > 0) {
      run_loader(l, cfg.device, stream, (int)W, (int)(S < 20 ? S : 20), step_ms,
                 &rs);
      rs.device_mem = dmem;
      have_step = 1;
    }
    slabfeed_close(l);
  }
  ceilings c;
  measure_ceilings(&c, &cfg);
  if (rank == 0)
    printf(
        "ceilings (GB/s, same run): pinned H2D %.1f, pageable H2D %.1f, device "
        "copy %.1f, "
        "memcpy 1 thread %.1f, memcpy %ld threads %.1f, MPI_Get 2 ranks %.1f\n",
        c.pinned, c.pageable, c.d2d, c.memcpy1, sysconf(_SC_NPROCESSORS_ONLN),
        c.memcpyN, c.mpi_get);
  if (rank == 0 && c.pitched > 0)
    printf("ceiling of the crop's copy shape (%lld-byte rows, one "
           "cudaMemcpy3DAsync per channel): %.1f GB/s, %.1f us to enqueue\n",
           (long long)cfg.crop[2] * 4, c.pitched, c.pitched_enqueue_us);
  report(fullcopy ? "fullcopy" : "loader", &cfg, &c, 0, &r, label);
  if (have_step)
    report("loader", &cfg, &c, step_ms, &rs, label);
#ifdef SF_BENCH_CUDA
  if (stream != NULL)
    bench_stream_destroy(stream);
#endif
  MPI_Finalize();
  return 0;
}
