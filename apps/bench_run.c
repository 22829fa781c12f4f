/* slabfeed-bench: the runs. The loader for S steps after W warm-up steps,
 * with or without a simulated training step on the consumer stream, and
 * the original approach for comparison (--baseline fullcopy): every rank
 * reads the whole volume and crops it locally with the same transform. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "slabfeed_tools.h"
#ifdef SF_BENCH_CUDA
#include "bench_gpu.h"
#endif

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

/* Times S steps of l after W warm-up steps (see bench.h); the stage times
 * are differences of two slabfeed_stats snapshots. */
void bench_run_loader(const bench_ctx *b, slabfeed_loader *l, int W, int S,
                      double step_ms, bench_result *r)
{
  const int device = b->cfg.device;
  void *stream = b->stream;
  slabfeed_batch batch = SLABFEED_BATCH_INIT;
  slabfeed_status st;
  for (int i = 0; i < W; i++)
    if ((st = slabfeed_next(l, &batch, stream)) != SLABFEED_OK)
      cli_fail(b->prog, st, slabfeed_last_error(l));
#ifdef SF_BENCH_CUDA
  if (device >= 0)
    bench_stream_sync(stream);
#endif
  MPI_Barrier(MPI_COMM_WORLD);
  slabfeed_stats s0 = SLABFEED_STATS_INIT, s1 = SLABFEED_STATS_INIT;
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
    if ((st = slabfeed_next(l, &batch, stream)) != SLABFEED_OK)
      cli_fail(b->prog, st, slabfeed_last_error(l));
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

/* ---- The full-copy baseline ---------------------------------------------- */

/* One whole dataset in memory, as float32 in its file layout. */
typedef struct volume {
  float *v;
  slabfeed_dataset_info info;
} volume;

/* Reads dataset `name` of path whole into vol (every rank: the original
 * approach's memory cost). */
static void read_volume(const char *prog, const char *path, const char *name,
                        slabfeed_file_layout lay, volume *vol)
{
  char err[1024];
  vol->info = (slabfeed_dataset_info)SLABFEED_DATASET_INFO_INIT;
  slabfeed_status st =
      slabfeed_describe(path, name, lay, &vol->info, err, sizeof err);
  if (st != SLABFEED_OK)
    cli_fail(prog, st, err);
  const hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  size_t n = 1;
  for (int a = 0; a < 4; a++)
    n *= (size_t)vol->info.dims[a];
  vol->v = malloc(n * sizeof(float));
  if (vol->v == NULL ||
      H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, vol->v) < 0)
    cli_fail(prog, SLABFEED_ERR_IO, "full copy: cannot read the whole dataset");
  H5Dclose(d);
  H5Fclose(f);
}

/* Copies the periodic crop at origin o with extents c out of vol into dst
 * as [channels][c0][c1][c2] float32 (what the transform takes). */
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

/* One xorshift64 step: the baseline's own crop origins and symmetries. */
static uint64_t xorshift(uint64_t *x)
{
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

/* The original approach (see bench.h): whole volumes in every rank, host
 * crops and transform, a pinned copy to the GPU per batch. */
void bench_run_fullcopy(const bench_ctx *b, int W, int S, bench_result *r)
{
  const slabfeed_config *cfg = &b->cfg;
  const int nd = cfg->target ? 2 : 1;
  volume vol[2];
  const char *names[2] = {cfg->input, cfg->target};
  const double t_read = MPI_Wtime();
  for (int d = 0; d < nd; d++)
    read_volume(b->prog, cfg->path, names[d], cfg->layout, &vol[d]);
  if (b->rank == 0)
    printf("full copy: whole volume read by every rank in %.2f s\n",
           MPI_Wtime() - t_read);
  const int64_t vox = cfg->crop[0] * cfg->crop[1] * cfg->crop[2];
  const size_t es = slabfeed_dtype_size(cfg->dtype);
  size_t sample[2], total = 0;
  int64_t channels = vol[0].info.channels;
  if (nd == 2 && vol[1].info.channels > channels)
    channels = vol[1].info.channels;
  float *stage = malloc((size_t)(channels * vox) * sizeof(float));
  void *host[2] = {NULL, NULL};
#ifdef SF_BENCH_CUDA
  void *dev[2] = {NULL, NULL};
#endif
  int ok = stage != NULL;
  for (int d = 0; d < nd; d++) {
    sample[d] = (size_t)(vol[d].info.channels * vox) * es;
    const size_t bytes = sample[d] * (size_t)cfg->batch;
    total += bytes;
#ifdef SF_BENCH_CUDA
    host[d] = cfg->device >= 0 ? bench_host_pinned(bytes) : malloc(bytes);
    if (cfg->device >= 0)
      ok &= (dev[d] = bench_device_alloc(bytes)) != NULL;
#else
    host[d] = malloc(bytes);
#endif
    ok &= host[d] != NULL;
  }
  if (!ok)
    cli_fail(b->prog, SLABFEED_ERR_NOMEM,
             "full copy: cannot allocate the crop buffers");
  uint64_t x = 0x9e3779b97f4a7c15ULL ^ (uint64_t)b->rank;
  double t0 = 0;
  for (int i = 0; i < W + S; i++) {
    if (i == W) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
    }
    for (int k = 0; k < cfg->batch; k++) {
      int64_t o[3];
      for (int a = 0; a < 3; a++)
        o[a] = (int64_t)(xorshift(&x) % (uint64_t)vol[0].info.shape[a]);
      xorshift(&x);
      const int g = cfg->symmetries == SLABFEED_SYM_NONE ? 0 : (int)(x % 48);
      for (int d = 0; d < nd; d++) {
        crop_volume(&vol[d], o, cfg->crop, stage);
        slabfeed_transform_host(
            stage, cfg->crop, (int)vol[d].info.channels, g,
            d ? cfg->n_target_vectors : cfg->n_input_vectors,
            (const int(*)[3])(d ? cfg->target_vectors : cfg->input_vectors),
            cfg->dtype, cfg->out_layout,
            (char *)host[d] + (size_t)k * sample[d]);
      }
    }
#ifdef SF_BENCH_CUDA
    if (cfg->device >= 0) {
      for (int d = 0; d < nd; d++)
        bench_copy_h2d(dev[d], host[d], sample[d] * (size_t)cfg->batch,
                       b->stream);
      bench_stream_sync(b->stream);
    }
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
  for (int d = 0; d < nd; d++) {
    free(vol[d].v);
#ifdef SF_BENCH_CUDA
    if (cfg->device >= 0) {
      bench_host_free(host[d]);
      bench_device_free(dev[d]);
      continue;
    }
#endif
    free(host[d]);
  }
}
