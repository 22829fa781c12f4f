/* slabfeed-bench: the runs. The loader for S steps after W warm-up steps,
 * with or without a simulated training step on the consumer stream, and
 * the original approach for comparison (--baseline fullcopy): every rank
 * reads the whole volume and crops it locally with the same transform. */
#include <hdf5.h>
#include <stdint.h>
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

/* Leaves after an agreed failure of a loader run: every rank closes the
 * loader (collective: every rank is here) and all exit 1. */
__attribute__((noreturn)) static void loader_failed(const bench_ctx *b,
                                                    slabfeed_loader *l,
                                                    slabfeed_status st,
                                                    const char *msg)
{
  slabfeed_close(l);
  cli_fail_agreed(b->prog, st, msg);
}

/* Times S steps of l after W warm-up steps (see bench.h); the stage times
 * are differences of two slabfeed_stats snapshots.
 *
 * Failures: the timed loop makes no collective call. A rank whose
 * slabfeed_next fails notes it and keeps calling next to the end of the
 * loop (when crop pieces cross nodes the other ranks wait on transfers
 * that only its calls post), then every rank learns the failure at the
 * agreement point right after the timed region (taken after the clock
 * stops); the warm-up has its own point in place of the barrier before
 * the clock starts. */
void bench_run_loader(const bench_ctx *b, slabfeed_loader *l, int W, int S,
                      double step_ms, bench_result *r)
{
  const int device = b->cfg.device;
  void *stream = b->stream;
  slabfeed_batch batch = SLABFEED_BATCH_INIT;
  slabfeed_status st = SLABFEED_OK, s;
  char msg[CLI_ERRLEN] = "";
  for (int i = 0; i < W; i++) { /* on after a failure: see above */
    if ((s = slabfeed_next(l, &batch, stream)) != SLABFEED_OK)
      cli_note(&st, msg, sizeof msg, s, "%s", slabfeed_last_error(l));
    if (i == 0 && r->first_batch_s == 0)
      r->first_batch_s = cli_process_age();
  }
#ifdef SF_BENCH_CUDA
  if (device >= 0 && bench_stream_sync(stream) != 0)
    cli_note(&st, msg, sizeof msg, SLABFEED_ERR_CUDA,
             "the consumer stream failed in the warm-up");
#endif
  /* Also the barrier before the clock starts. */
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    loader_failed(b, l, st, msg);
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
    if ((s = slabfeed_next(l, &batch, stream)) != SLABFEED_OK) {
      /* the first failure is kept; the rest of the loop only serves the
       * other ranks' transfers */
      cli_note(&st, msg, sizeof msg, s, "%s", slabfeed_last_error(l));
      continue;
    }
    if (st != SLABFEED_OK)
      continue;
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
  if (device >= 0 && bench_stream_sync(stream) != 0)
    cli_note(&st, msg, sizeof msg, SLABFEED_ERR_CUDA,
             "the consumer stream failed in the timed steps");
  r->steady_ms =
      e1 != NULL && st == SLABFEED_OK ? bench_event_ms(e0, e1) / (S - j0) : 0;
#endif
  const double dt = MPI_Wtime() - t0;
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    loader_failed(b, l, st, msg);
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
  const double remote = (double)(s1.bytes_remote - s0.bytes_remote);
  const double runs = (double)(s1.remote_runs - s0.remote_runs);
  r->remote_mb_step = remote / S / 1e6;
  r->remote_gets_step = (double)(s1.remote_gets - s0.remote_gets) / S;
  r->remote_run_kb = runs > 0 ? remote / runs / 1e3 : 0;
  r->remote_gbs = remote / dt / 1e9;
  r->group_nodes = s1.group_nodes;
  uint64_t anon, shmem;
  cli_rss_parts(&anon, &shmem);
  r->anon = (double)anon;
  r->shmem = (double)shmem;
  /* The host bytes the slab still holds (device residency gives them
   * back when nothing reads them). */
  r->slab = (double)(s1.slab_bytes - s1.slab_released_bytes);
}

/* ---- The full-copy baseline ----------------------------------------------
 *
 * A throughput baseline: every rank reads the whole volume and forms its
 * own random crops (not the loader's sample stream). So that it never
 * measures garbage, the first sample of up to SPOT_STEPS timed steps of
 * every rank is compared, after the clock stops, with the serial reference
 * reader (slabfeed_reader_crop): the last step's as delivered, the others
 * formed again the same way. Failures on one rank (a read, an allocation,
 * the transform, a copy) are agreed at the points before and after the
 * timed steps; the timed loop itself makes no collective call. */

enum { SPOT_STEPS = 4 };

/* One whole dataset in memory, as float32 in its file layout. */
typedef struct volume {
  float *v;
  slabfeed_dataset_info info;
} volume;

/* What the baseline holds on this rank. */
typedef struct fullcopy {
  const slabfeed_config *cfg;
  const char *path; /* the one volume read whole (bench_ctx.path) */
  int nd;
  const char *names[2];
  volume vol[2];
  int64_t vox;                 /* voxels of a crop */
  size_t sample[2];            /* bytes of one output sample */
  float *stage;                /* one staged crop, all channels */
  void *host[2];               /* one batch, output dtype and layout */
  void *dev[2];                /* its device copy (GPU runs) */
  uint64_t x;                  /* xorshift state */
  int64_t spot[SPOT_STEPS][4]; /* origin and symmetry of checked samples */
  int spot_step[SPOT_STEPS], nspot;
} fullcopy;

/* *n = a * b; -1 when it does not fit in a size_t. */
static int mul_size(size_t a, size_t b, size_t *n)
{
  if (a != 0 && b > SIZE_MAX / a)
    return -1;
  *n = a * b;
  return 0;
}

/* Describes both datasets and checks the options against them as
 * slabfeed_open does for the loader (the baseline opens none): batch,
 * crop extents within the box, a cubic crop unless --symmetries none, and
 * buffer sizes that fit in memory's address space. */
static void fullcopy_check(fullcopy *f, slabfeed_status *st, char *msg,
                           size_t len)
{
  const slabfeed_config *cfg = f->cfg;
  char err[CLI_ERRLEN];
  for (int d = 0; d < f->nd; d++) {
    f->vol[d].info = (slabfeed_dataset_info)SLABFEED_DATASET_INFO_INIT;
    const slabfeed_status s = slabfeed_describe(
        f->path, f->names[d], cfg->layout, &f->vol[d].info, err, sizeof err);
    if (s != SLABFEED_OK) {
      cli_note(st, msg, len, s, "full copy: %s", err);
      return;
    }
  }
  const int64_t *N = f->vol[0].info.shape, *c = cfg->crop;
  if (cfg->batch < 1) {
    cli_note(st, msg, len, SLABFEED_ERR_ARG,
             "full copy: batch is %d; it must be >= 1", cfg->batch);
    return;
  }
  for (int a = 0; a < 3; a++)
    if (c[a] < 1 || c[a] > N[a]) {
      cli_note(st, msg, len, SLABFEED_ERR_ARG,
               "full copy: crop %lldx%lldx%lld does not fit the box "
               "%lldx%lldx%lld",
               (long long)c[0], (long long)c[1], (long long)c[2],
               (long long)N[0], (long long)N[1], (long long)N[2]);
      return;
    }
  if (cfg->symmetries != SLABFEED_SYM_NONE && (c[0] != c[1] || c[0] != c[2])) {
    cli_note(st, msg, len, SLABFEED_ERR_ARG,
             "full copy: crop %lldx%lldx%lld is not cubic; symmetries other "
             "than 'none' need a cubic crop",
             (long long)c[0], (long long)c[1], (long long)c[2]);
    return;
  }
  f->vox = c[0] * c[1] * c[2]; /* each extent <= the box's: no overflow */
  const size_t es = slabfeed_dtype_size(cfg->dtype);
  size_t stage = 0;
  for (int d = 0; d < f->nd; d++) {
    size_t vol = sizeof(float), elems = 0, batch = 0, staged = 0;
    int bad = 0;
    for (int a = 0; a < 4; a++)
      bad |= mul_size(vol, (size_t)f->vol[d].info.dims[a], &vol);
    bad |= mul_size((size_t)f->vox, (size_t)f->vol[d].info.channels, &elems);
    bad |= mul_size(elems, es, &f->sample[d]);
    bad |= mul_size(f->sample[d], (size_t)cfg->batch, &batch);
    bad |= mul_size(elems, sizeof(float), &staged);
    if (bad) {
      cli_note(st, msg, len, SLABFEED_ERR_NOMEM,
               "full copy: the buffers of '%s' do not fit in memory",
               f->names[d]);
      return;
    }
    stage = staged > stage ? staged : stage;
  }
  if ((f->stage = malloc(stage)) == NULL)
    cli_note(st, msg, len, SLABFEED_ERR_NOMEM,
             "full copy: cannot allocate %zu bytes for a crop", stage);
}

/* Reads dataset d whole (every rank: the original approach's memory
 * cost) and allocates its batch buffers. */
static void fullcopy_load(const bench_ctx *b, fullcopy *f, int d,
                          slabfeed_status *st, char *msg, size_t len)
{
  volume *vol = &f->vol[d];
  size_t n = sizeof(float);
  for (int a = 0; a < 4; a++)
    n *= (size_t)vol->info.dims[a]; /* checked in fullcopy_check */
  if ((vol->v = malloc(n)) == NULL) {
    cli_note(st, msg, len, SLABFEED_ERR_NOMEM,
             "full copy: cannot allocate %zu bytes for '%s'", n, f->names[d]);
    return;
  }
  const hid_t h = H5Fopen(f->path, H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t ds = h < 0 ? -1 : H5Dopen2(h, f->names[d], H5P_DEFAULT);
  if (ds < 0 ||
      H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, vol->v) < 0)
    cli_note(st, msg, len, SLABFEED_ERR_IO,
             "full copy: cannot read dataset '%s' of '%s' whole", f->names[d],
             f->path);
  if (ds >= 0)
    H5Dclose(ds);
  if (h >= 0)
    H5Fclose(h);
  const size_t bytes = f->sample[d] * (size_t)f->cfg->batch;
#ifdef SF_BENCH_CUDA
  if (b->cfg.device >= 0) {
    f->host[d] = bench_host_pinned(bytes);
    f->dev[d] = bench_device_alloc(bytes);
  } else
    f->host[d] = malloc(bytes);
  if (b->cfg.device >= 0 && f->dev[d] == NULL)
    cli_note(st, msg, len, SLABFEED_ERR_CUDA,
             "full copy: cannot allocate %zu bytes on the device", bytes);
#else
  (void)b;
  f->host[d] = malloc(bytes);
#endif
  if (f->host[d] == NULL)
    cli_note(st, msg, len, SLABFEED_ERR_NOMEM,
             "full copy: cannot allocate %zu bytes for a batch", bytes);
}

/* Frees what the baseline holds (pointers may be NULL). */
static void fullcopy_free(const bench_ctx *b, fullcopy *f)
{
  free(f->stage);
  for (int d = 0; d < 2; d++) {
    free(f->vol[d].v);
#ifdef SF_BENCH_CUDA
    if (b->cfg.device >= 0) {
      bench_host_free(f->host[d]);
      bench_device_free(f->dev[d]);
      continue;
    }
#else
    (void)b;
#endif
    free(f->host[d]);
  }
  memset(f, 0, sizeof *f);
}

/* Leaves after an agreed failure of the baseline: frees, exits 1. */
__attribute__((noreturn)) static void fullcopy_failed(const bench_ctx *b,
                                                      fullcopy *f,
                                                      slabfeed_status st,
                                                      const char *msg)
{
  fullcopy_free(b, f);
  cli_fail_agreed(b->prog, st, msg);
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

/* Crop o with symmetry g of dataset d, transformed into out (one sample). */
static slabfeed_status fullcopy_sample(const fullcopy *f, int d,
                                       const int64_t o[3], int g, void *out)
{
  const slabfeed_config *cfg = f->cfg;
  crop_volume(&f->vol[d], o, cfg->crop, f->stage);
  return slabfeed_transform_host(
      f->stage, cfg->crop, (int)f->vol[d].info.channels, g,
      d ? cfg->n_target_vectors : cfg->n_input_vectors,
      (const int(*)[3])(d ? cfg->target_vectors : cfg->input_vectors),
      cfg->dtype, cfg->out_layout, out);
}

/* One step of the baseline: B random crops of every dataset into the host
 * batch, copied to the device on GPU runs. `spot` >= 0 records the first
 * sample's origin and symmetry in that spot-check slot. */
static void fullcopy_step(const bench_ctx *b, fullcopy *f, int spot,
                          slabfeed_status *st, char *msg, size_t len)
{
  const slabfeed_config *cfg = f->cfg;
  for (int k = 0; k < cfg->batch; k++) {
    int64_t o[3];
    for (int a = 0; a < 3; a++)
      o[a] = (int64_t)(xorshift(&f->x) % (uint64_t)f->vol[0].info.shape[a]);
    xorshift(&f->x);
    const int g = cfg->symmetries == SLABFEED_SYM_NONE ? 0 : (int)(f->x % 48);
    if (k == 0 && spot >= 0) {
      memcpy(f->spot[spot], o, sizeof o);
      f->spot[spot][3] = g;
    }
    for (int d = 0; d < f->nd; d++) {
      const slabfeed_status s = fullcopy_sample(
          f, d, o, g, (char *)f->host[d] + (size_t)k * f->sample[d]);
      if (s != SLABFEED_OK) {
        cli_note(st, msg, len, s, "full copy: the host transform failed");
        return;
      }
    }
  }
#ifdef SF_BENCH_CUDA
  if (cfg->device >= 0) {
    int rc = 0;
    for (int d = 0; d < f->nd; d++)
      rc |= bench_copy_h2d(f->dev[d], f->host[d],
                           f->sample[d] * (size_t)cfg->batch, b->stream);
    if (rc != 0 || bench_stream_sync(b->stream) != 0)
      cli_note(st, msg, len, SLABFEED_ERR_CUDA,
               "full copy: the copy to the device failed");
  }
#else
  (void)b;
#endif
}

/* The spot check on this rank (see above): compares the recorded samples
 * (input and target) with the serial reference; counts samples in checked
 * and those where either dataset differs in bad. */
static void fullcopy_spot_check(fullcopy *f, int S, uint64_t *checked,
                                uint64_t *bad, slabfeed_status *st, char *msg,
                                size_t len)
{
  const slabfeed_config *cfg = f->cfg;
  char err[CLI_ERRLEN];
  slabfeed_reader *ref = NULL;
  const size_t most = f->sample[0] > f->sample[1] ? f->sample[0] : f->sample[1];
  void *want = malloc(most), *mine = malloc(most);
  slabfeed_status s = SLABFEED_OK;
  if (want == NULL || mine == NULL)
    cli_note(st, msg, len, SLABFEED_ERR_NOMEM,
             "full copy: cannot allocate the spot check's %zu bytes", 2 * most);
  else if ((s = slabfeed_reader_open(f->path, &ref, err, sizeof err)) !=
           SLABFEED_OK)
    cli_note(st, msg, len, s, "full copy: reference reader: %s", err);
  for (int k = 0; k < f->nspot && *st == SLABFEED_OK; k++) {
    int differ = 0;
    for (int d = 0; d < f->nd && *st == SLABFEED_OK; d++) {
      const int64_t *o = f->spot[k];
      const int g = (int)o[3];
      const void *got = f->host[d]; /* the last step: as delivered */
      if (f->spot_step[k] != S - 1) {
        if ((s = fullcopy_sample(f, d, o, g, mine)) != SLABFEED_OK) {
          cli_note(st, msg, len, s, "full copy: the host transform failed");
          break;
        }
        got = mine;
      }
      s = slabfeed_reader_crop(
          ref, f->names[d], cfg->layout, o, cfg->crop, g,
          d ? cfg->n_target_vectors : cfg->n_input_vectors,
          (const int(*)[3])(d ? cfg->target_vectors : cfg->input_vectors),
          cfg->dtype, cfg->out_layout, want);
      if (s != SLABFEED_OK) {
        cli_note(st, msg, len, s, "full copy: reference read: %s",
                 slabfeed_reader_error(ref));
        break;
      }
      differ |= memcmp(got, want, f->sample[d]) != 0;
    }
    ++*checked;
    *bad += (uint64_t)differ;
  }
  slabfeed_reader_close(ref);
  free(want);
  free(mine);
}

/* The original approach (see bench.h): whole volumes in every rank, host
 * crops and transform, a pinned copy to the GPU per batch; then the spot
 * check. Returns the number of spot-checked samples (all ranks) that
 * differ from the serial reference. */
uint64_t bench_run_fullcopy(const bench_ctx *b, int W, int S, bench_result *r)
{
  fullcopy f;
  memset(&f, 0, sizeof f);
  f.cfg = &b->cfg;
  f.path = b->path;
  f.nd = b->cfg.target ? 2 : 1;
  f.names[0] = b->cfg.input;
  f.names[1] = b->cfg.target;
  f.x = 0x9e3779b97f4a7c15ULL ^ (uint64_t)b->rank;
  slabfeed_status st = SLABFEED_OK;
  char msg[CLI_ERRLEN] = "";
  fullcopy_check(&f, &st, msg, sizeof msg);
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    fullcopy_failed(b, &f, st, msg);
  const double t_read = MPI_Wtime();
  for (int d = 0; d < f.nd && st == SLABFEED_OK; d++)
    fullcopy_load(b, &f, d, &st, msg, sizeof msg);
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    fullcopy_failed(b, &f, st, msg);
  if (b->rank == 0)
    printf("full copy: a throughput baseline with its own random crops (not "
           "the loader's sample stream); whole volume read by every rank in "
           "%.2f s\n",
           MPI_Wtime() - t_read);
  for (int i = 0; i < W && st == SLABFEED_OK; i++)
    fullcopy_step(b, &f, -1, &st, msg, sizeof msg);
  /* Also the barrier before the clock starts. */
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    fullcopy_failed(b, &f, st, msg);
  f.nspot = S < SPOT_STEPS ? S : SPOT_STEPS;
  for (int k = 0; k < f.nspot; k++) /* spread over the run, the last last */
    f.spot_step[k] = f.nspot == 1 ? S - 1 : k * (S - 1) / (f.nspot - 1);
  const double t0 = MPI_Wtime();
  for (int i = 0, k = 0; i < S && st == SLABFEED_OK; i++) {
    const int spot = k < f.nspot && f.spot_step[k] == i ? k++ : -1;
    fullcopy_step(b, &f, spot, &st, msg, sizeof msg);
  }
  const double dt = MPI_Wtime() - t0;
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    fullcopy_failed(b, &f, st, msg);
  memset(r, 0, sizeof *r);
  r->crops_s = (double)S * b->cfg.batch / dt;
  r->gbs = (double)(f.sample[0] + (f.nd == 2 ? f.sample[1] : 0)) *
           b->cfg.batch * S / dt / 1e9;
  r->wall_step_ms = dt / S * 1e3;
  r->rss = (double)cli_peak_rss();
  uint64_t anon, shmem;
  cli_rss_parts(&anon, &shmem);
  r->anon = (double)anon;
  r->shmem = (double)shmem;

  uint64_t counts[2] = {0, 0}, all[2] = {0, 0}; /* checked, differing */
  fullcopy_spot_check(&f, S, &counts[0], &counts[1], &st, msg, sizeof msg);
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    fullcopy_failed(b, &f, st, msg);
  MPI_Allreduce(counts, all, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (b->rank == 0 && all[1] == 0)
    printf("full copy: spot check: %llu samples (the first of %d timed "
           "steps on each rank) equal the serial reference reader\n",
           (unsigned long long)all[0], f.nspot);
  else if (b->rank == 0)
    printf("full copy: spot check FAILED: %llu of %llu samples (the first of "
           "%d timed steps on each rank) differ from the serial reference "
           "reader\n",
           (unsigned long long)all[1], (unsigned long long)all[0], f.nspot);
  fullcopy_free(b, &f);
  return all[1];
}
