/* The GPU back end: crops go from the node's registered shared window (or,
 * from other nodes, the pinned landing slot fetch.c filled ahead) to device
 * staging with cudaMemcpy3DAsync on the copy stream, through the fused
 * kernel on the compute stream into a ring of K batch slots. A loader
 * thread produces ahead and never calls MPI; next (the caller's thread)
 * drives the remote transfers, hands out a slot and makes the caller's
 * stream wait on its ready event. All memory, streams and events are taken
 * at open; nothing after it allocates, registers or synchronises the
 * device. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sched.h>

#include "backend/backend.h"
#include "backend/resident.h"
#include "cuda/cudart.h"
#include "source/fetch.h"
#include "source/source.h"
#include "common/inject.h"
#include "common/nvtx.h"
#include "transform/pieces_gpu.h"
#include "transform/transform_gpu.h"
#include "common/sys.h"

#ifndef SF_STAGES
#define SF_STAGES 2 /* crop staging buffers per dataset */
#endif

struct sf__backend {
  sf__context ctx;
  int device;
  int K;
  cudaStream_t copy, compute, aux;
  float *dstage[SF_STAGES][SF_MAX_DSETS]; /* device crop staging */
  /* A crop's source box per stage, before its pieces are put in crop
   * order (stage_box); NULL when no crop can be as large as its volume on
   * an axis. Written on the copy stream, read on the compute stream, and
   * guarded with dstage[] of the same stage by staged[] and consumed[]. */
  float *draw[SF_STAGES][SF_MAX_DSETS];
  cudaEvent_t staged[SF_STAGES], consumed[SF_STAGES];
  int stage;
  /* Remote pieces: K pinned landing slots (batch n lands in n % K), and
   * the event after the copies that read each. Driven by the caller's
   * thread (fetch); the producer reads a slot once `landed` passes it. */
  float *landing[SF_MAX_SLOTS];
  cudaEvent_t copied[SF_MAX_SLOTS];
  sf__fetch fetch;
  sf__fetch_map map; /* the producer's */
  void *slot[SF_MAX_SLOTS][SF_MAX_DSETS];
  cudaEvent_t ready[SF_MAX_SLOTS], released[SF_MAX_SLOTS];
  int release_pending[SF_MAX_SLOTS]; /* released[k] was recorded and not
                                        yet waited for by the producer */
  void *reg[SF_MAX_SLOTS];           /* registered host ranges */
  int nreg;

  /* ring state, under mu */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int running, stop, failed;
  pthread_t thread;
  uint64_t produced, released_upto, next;
  uint64_t landed; /* batches whose remote pieces are in their slot */
  uint64_t start_epoch, start_step; /* position of batch 0 */
  sf__err err;
  cudaStream_t last_stream; /* the stream that received batch next - 1 */
  int have_last;
  sf__resident res; /* slabs in device memory (residency, 0.8) */
  int direct;       /* large crops transformed in place (decided at reside) */
};

static int slot_free(void *arg, int slot, int block);

/* Records the first failure of either thread for the other and for next
 * (with g->mu held; fail_ring takes it). */
static void fail_locked(sf__backend *g, const sf__err *e)
{
  if (!g->failed) {
    g->err = *e;
    g->failed = 1;
  }
  pthread_cond_broadcast(&g->cv);
}

static void fail_ring(sf__backend *g, const sf__err *e)
{
  pthread_mutex_lock(&g->mu);
  fail_locked(g, e);
  pthread_mutex_unlock(&g->mu);
}

/* ---- Open / close ----------------------------------------------------------
 */

/* 1 when the crop equals some volume's extent on some axis (the only
 * case where stage_box can apply, so the only one that needs draw[]). */
static int crop_fills_a_volume(const sf__batch_plan *p)
{
  const sf__suite *su = p->suite;
  const int many = su != NULL && su->n > 1;
  for (int v = 0; v < (many ? su->n : 1); v++)
    for (int a = 0; a < 3; a++)
      if (p->crop[a] == (many ? su->shape[v][a] : p->store->shape[a]))
        return 1;
  return 0;
}

/* Registers the segments of every rank of the node (the crop sources) so
 * the copy engine reads them directly. One range when the window maps them
 * contiguously, else one per segment. */
static slabfeed_status register_window(sf__backend *g, sf__err *e)
{
  const sf__store *s = g->ctx.store;
  char *lo = NULL, *hi = NULL;
  int64_t total = 0;
  for (int r = 0; r < s->size; r++)
    if (s->peer[r] != NULL && s->peer_bytes[r] > 0) {
      char *b = s->peer[r], *t = b + s->peer_bytes[r];
      lo = lo == NULL || b < lo ? b : lo;
      hi = hi == NULL || t > hi ? t : hi;
      total += s->peer_bytes[r];
    }
  sf__err probe;
  sf__err_clear(&probe);
  if (lo != NULL && hi - lo <= total + (int64_t)s->node_size * (1 << 22) &&
      sf__cudart_host_register(lo, (size_t)(hi - lo), &probe) == SLABFEED_OK) {
    g->reg[g->nreg++] = lo;
    return SLABFEED_OK;
  }
  for (int r = 0; r < s->size && e->status == SLABFEED_OK; r++)
    if (s->peer[r] != NULL && s->peer_bytes[r] > 0 && g->nreg < SF_MAX_SLOTS &&
        sf__cudart_host_register(s->peer[r], (size_t)s->peer_bytes[r], e) ==
            SLABFEED_OK)
      g->reg[g->nreg++] = s->peer[r];
  return e->status;
}

static slabfeed_status create_objects(sf__backend *g, sf__err *e)
{
  const sf__batch_plan *p = g->ctx.plan;
  slabfeed_stats mem = {.staging_bytes = 0};
  if (sf__cudart_stream_create(&g->copy, e) ||
      sf__cudart_stream_create(&g->compute, e) ||
      sf__cudart_stream_create(&g->aux, e))
    return e->status;
  for (int i = 0; i < SF_STAGES; i++)
    if (sf__cudart_event_create(&g->staged[i], e) ||
        sf__cudart_event_create(&g->consumed[i], e))
      return e->status;
  for (int k = 0; k < g->K; k++)
    if (sf__cudart_event_create(&g->ready[k], e) ||
        sf__cudart_event_create(&g->released[k], e) ||
        sf__cudart_event_create(&g->copied[k], e))
      return e->status;
  for (int i = 0; i < SF_STAGES; i++)
    for (int d = 0; d < p->ndsets; d++) {
      const size_t bytes = (size_t)sf__batch_stage_elems(p, d) * sizeof(float);
      if (sf__cudart_malloc((void **)&g->dstage[i][d], bytes, e))
        return e->status;
      mem.staging_bytes += bytes;
    }
  const int boxes = crop_fills_a_volume(p);
  for (int i = 0; i < SF_STAGES && boxes; i++)
    for (int d = 0; d < p->ndsets; d++) {
      const size_t bytes = (size_t)sf__batch_stage_elems(p, d) * sizeof(float);
      if (sf__cudart_malloc((void **)&g->draw[i][d], bytes, e))
        return e->status;
      mem.staging_bytes += bytes;
    }
  if (sf__fetch_needed(p))
    for (int k = 0; k < g->K; k++) {
      if (sf__cudart_host_alloc((void **)&g->landing[k],
                                sf__fetch_slot_bytes(p), e))
        return e->status;
      mem.staging_bytes += sf__fetch_slot_bytes(p);
    }
  for (int k = 0; k < g->K; k++)
    for (int d = 0; d < p->ndsets; d++) {
      const size_t bytes = (size_t)p->B * (size_t)sf__batch_sample_bytes(p, d);
      if (sf__cudart_malloc(&g->slot[k][d], bytes, e))
        return e->status;
      mem.staging_bytes += bytes;
    }
  sf__stats_add(g->ctx.stats, &mem);
  return SLABFEED_OK;
}

/* The rank's device: cfg device, or for device local the rank's place
 * among its node's ranks modulo the visible devices. */
static slabfeed_status pick_device(const sf__context *ctx, int *device,
                                   sf__err *e)
{
  int count = 0;
  sf__cudart_device_count(&count);
  *device = ctx->cfg->pub.device;
  if (*device == SLABFEED_DEVICE_LOCAL) {
    int local = 0;
    const int rc = MPI_Comm_rank(ctx->store->node, &local);
    if (rc != MPI_SUCCESS)
      return sf__fail_mpi(e, rc, "MPI_Comm_rank (device local)");
    if (count == 0)
      return sf__fail(e, SLABFEED_ERR_CUDA,
                      "device local: no CUDA device is visible");
    *device = local % count;
  }
  if (*device >= count)
    return sf__fail(e, SLABFEED_ERR_CUDA,
                    "device %d requested but %d CUDA device(s) are visible",
                    *device, count);
  return SLABFEED_OK;
}

static slabfeed_status gpu_open(const sf__context *ctx, sf__backend **out,
                                sf__err *e)
{
  const sf__batch_plan *p = ctx->plan;
  for (int d = 0; d < p->ndsets; d++)
    if (sf__batch_stage_elems(p, d) >= ((int64_t)1 << 31))
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: one sample of '%s' has %lld elements; device "
                      "batches need fewer than 2^31 per sample (smaller "
                      "crop)",
                      sf__config_dataset(ctx->cfg, d),
                      (long long)sf__batch_stage_elems(p, d));
  sf__backend *g = calloc(1, sizeof *g);
  *out = g;
  if (g == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the GPU state");
  g->ctx = *ctx;
  /* The datasets' normalisations go with their transforms (the kernel's
   * parameters are made from them per launch). */
  for (int d = 0; d < p->ndsets; d++) {
    int n;
    const slabfeed_norm *norm = sf__config_norm(ctx->cfg, d, &n);
    sf__xform_set_norm(&ctx->plan->xf[d], n, norm);
  }
  g->K = p->K;
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  sf__err_clear(&g->err);
  if (pick_device(ctx, &g->device, e) != SLABFEED_OK)
    return e->status;
  ctx->plan->device = g->device; /* what the batches report */
  /* What prepare made before the read: the residency chosen, maybe the
   * staged copy of the segment. The handle stays the facade's (drop). */
  if (ctx->early != NULL) {
    g->res = *(sf__resident *)ctx->early;
    memset(ctx->early, 0, sizeof g->res);
  }
  /* The caller's current device is put back: open must not change it. */
  int caller = 0;
  if (sf__cudart_get_device(&caller, e) || sf__cudart_set_device(g->device, e))
    return e->status;
  create_objects(g, e);
  sf__err restore;
  sf__err_clear(&restore);
  sf__cudart_set_device(caller, e->status == SLABFEED_OK ? e : &restore);
  if (e->status == SLABFEED_OK &&
      sf__fetch_map_init(&g->map, p, e) == SLABFEED_OK)
    sf__fetch_open(&g->fetch, p, ctx->store, g->K, g->landing, slot_free, g, e);
  /* The loader thread never calls MPI: remote pieces move in next. */
  const slabfeed_stats mode = {.loader_thread = 1};
  sf__stats_add(ctx->stats, &mode);
  return e->status;
}

static void stop_thread(sf__backend *g)
{
  if (!g->running)
    return;
  pthread_mutex_lock(&g->mu);
  g->stop = 1;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  pthread_join(g->thread, NULL);
  g->running = 0;
  g->stop = 0;
}

static void gpu_close(sf__backend *g)
{
  if (g == NULL)
    return;
  stop_thread(g);
  sf__err e;
  sf__err_clear(&e);
  /* Closing may wait: our streams drain before their memory goes, and
   * the transfers in flight are settled (collective, as close is). */
  if (g->copy)
    sf__cudart_stream_sync(g->copy, &e);
  if (g->compute)
    sf__cudart_stream_sync(g->compute, &e);
  /* After a failed settle transfers may still write into the landing
   * slots and use the requests: those are left allocated. */
  sf__err settle;
  sf__err_clear(&settle);
  const int settled = sf__fetch_settle(&g->fetch, &settle) == SLABFEED_OK;
  if (settled)
    sf__fetch_close(&g->fetch);
  /* Collective over the node where the slabs were held on the device. */
  sf__resident_close(&g->res, g->ctx.store);
  sf__fetch_map_free(&g->map);
  for (int k = 0; k < g->K; k++) {
    for (int d = 0; d < SF_MAX_DSETS; d++)
      sf__cudart_free(g->slot[k][d]);
    if (settled)
      sf__cudart_free_host(g->landing[k]);
    sf__cudart_event_destroy(g->ready[k]);
    sf__cudart_event_destroy(g->released[k]);
    sf__cudart_event_destroy(g->copied[k]);
  }
  for (int i = 0; i < SF_STAGES; i++) {
    for (int d = 0; d < SF_MAX_DSETS; d++) {
      sf__cudart_free(g->dstage[i][d]);
      sf__cudart_free(g->draw[i][d]);
    }
    sf__cudart_event_destroy(g->staged[i]);
    sf__cudart_event_destroy(g->consumed[i]);
  }
  for (int i = 0; i < g->nreg; i++)
    sf__cudart_host_unregister(g->reg[i]);
  sf__cudart_stream_destroy(g->copy);
  sf__cudart_stream_destroy(g->compute);
  sf__cudart_stream_destroy(g->aux);
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g);
}

/* ---- Producing a batch -----------------------------------------------------
 */

/* One cudaMemcpy3DAsync of `depth` planes of channel c of piece p, from
 * plane k0 of the piece on: from view v (host or device memory, as the
 * view says) into its place in the device crop dst. The start positions are
 * folded into the base pointers: the same bytes move either way. */
static slabfeed_status copy_planes(const sf__view *v, int64_t c,
                                   const sf__piece *p, int64_t k0,
                                   int64_t depth, const int64_t crop[3],
                                   float *dst, cudaStream_t s, sf__err *e)
{
  const float *from = sf__view_row(v, c, k0, 0);
  float *to = dst +
              ((c * crop[0] + p->d[0] + k0) * crop[1] + p->d[1]) * crop[2] +
              p->d[2];
  struct cudaMemcpy3DParms m;
  memset(&m, 0, sizeof m);
  m.srcPtr.ptr = (void *)from;
  m.srcPtr.pitch = (size_t)v->cols * sizeof(float);
  m.srcPtr.xsize = (size_t)v->cols;
  m.srcPtr.ysize = (size_t)v->rows;
  m.dstPtr.ptr = to;
  m.dstPtr.pitch = (size_t)crop[2] * sizeof(float);
  m.dstPtr.xsize = (size_t)crop[2];
  m.dstPtr.ysize = (size_t)crop[1];
  m.extent.width = (size_t)p->n[2] * sizeof(float);
  m.extent.height = (size_t)p->n[1];
  m.extent.depth = (size_t)depth;
  m.kind = v->mem == SF__MEM_DEVICE ? cudaMemcpyDeviceToDevice
                                    : cudaMemcpyHostToDevice;
  return sf__cudart_copy3d(&m, s, e);
}

/* Channel c of piece p: one copy. Built with SF_PLANE_COPIES (CMake
 * SLABFEED_PLANE_COPIES, for compute-sanitizer initcheck runs only), a
 * piece that covers part of the crop's rows is copied plane by plane:
 * initcheck takes a 3D copy's destination for depth * height contiguous
 * rows and then reports reads of staged data as uninitialised
 * (bench/initcheck_probe.cu shows it on a plain buffer). */
static slabfeed_status copy_piece(const sf__view *v, int64_t c,
                                  const sf__piece *p, const int64_t crop[3],
                                  float *dst, cudaStream_t s, sf__err *e)
{
#ifdef SF_PLANE_COPIES
  if (p->n[1] != crop[1]) {
    for (int64_t k = 0; k < p->n[0] && e->status == SLABFEED_OK; k++)
      copy_planes(v, c, p, k, 1, crop, dst, s, e);
    return e->status;
  }
#endif
  return copy_planes(v, c, p, 0, p->n[0], crop, dst, s, e);
}

/* ---- A crop as large as its volume ----------------------------------------
 * A crop whose edge equals its volume's on an axis where it wraps (a 128^3
 * crop of a 128^3 box of a suite) is two pieces along that axis, eight when
 * on all three, with every row cut in two: the pitched copy moves such
 * pieces at 0.71 of the crop's copy shape, against 0.87 for a crop that
 * does not wrap (docs/PERFORMANCE.md). Together its pieces fill one box of
 * the source, the whole volume on those axes, in another order. When all
 * of them are read in place from one segment, that box crosses the link as
 * one copy into draw[] and the pieces are put in crop order by device
 * copies (about 40 x the link's rate) on the compute stream, beside the
 * next crop's copy over the link. The bytes are the same; the result is
 * the same bit for bit. */

/* The source box of the n pieces of a crop in its first corner lo[] when
 * they come from one in-place segment and fill a box of the crop's
 * extents (disjoint pieces whose volumes sum to the crop's, all inside
 * that box: they are the box); 0 otherwise. */
static int one_box(const sf__store *s, const sf__batch_plan *p, int n,
                   int64_t lo[3])
{
  const sf__piece *pc = p->pieces;
  /* The box is staged for every dataset as the pieces themselves: not
   * for a dataset that takes part of them (a core, a coarser target's
   * input) or scales them (a grid finer than the planes'). */
  if (n < 2 || sf__source_of(s, &pc[0])->fetched)
    return 0;
  for (int d = 0; d < p->ndsets; d++)
    if (p->sub[d] || p->scale[d] > 1)
      return 0;
  int64_t hi[3];
  for (int k = 0; k < n; k++) {
    if (pc[k].src != pc[0].src)
      return 0;
    const int64_t at[3] = {pc[k].q, pc[k].y, pc[k].x};
    for (int a = 0; a < 3; a++) {
      if (k == 0 || at[a] < lo[a])
        lo[a] = at[a];
      if (k == 0 || at[a] + pc[k].n[a] > hi[a])
        hi[a] = at[a] + pc[k].n[a];
    }
  }
  for (int a = 0; a < 3; a++)
    if (hi[a] - lo[a] != p->crop[a])
      return 0;
  return 1;
}

/* Stages the n pieces of a crop that form one source box at lo[] into
 * device staging st: the box crosses the link into draw[st] on the copy
 * stream; the compute stream waits for it and puts each piece in its
 * place, so those device copies overlap the next crop's copy over the
 * link instead of queueing in front of it. */
static slabfeed_status stage_box(sf__backend *g, int n, const int64_t lo[3],
                                 int st, slabfeed_stats *delta, sf__err *e)
{
  sf__batch_plan *p = g->ctx.plan;
  sf__store *s = g->ctx.store;
  const sf__source *src = sf__source_of(s, &p->pieces[0]);
  const sf__piece box = {p->pieces[0].src,
                         lo[0],
                         lo[1],
                         lo[2],
                         {p->crop[0], p->crop[1], p->crop[2]},
                         {0, 0, 0}};
  for (int d = 0; d < p->ndsets && e->status == SLABFEED_OK; d++) {
    sf__view v;
    src->view(s, d, &box, NULL, &v);
    for (int64_t c = 0; c < s->channels[d] && e->status == SLABFEED_OK; c++)
      copy_piece(&v, c, &box, p->crop, g->draw[st][d], g->copy, e);
  }
  if (e->status != SLABFEED_OK ||
      sf__cudart_record(g->staged[st], g->copy, e) ||
      sf__cudart_wait(g->compute, g->staged[st], e))
    return e->status;
  for (int d = 0; d < p->ndsets && e->status == SLABFEED_OK; d++)
    for (int k = 0; k < n && e->status == SLABFEED_OK; k++) {
      const sf__piece *pc = &p->pieces[k];
      const sf__view raw = {g->draw[st][d],
                            SF__MEM_DEVICE,
                            p->crop[0] * p->crop[1] * p->crop[2],
                            p->crop[1],
                            p->crop[2],
                            {pc->q - lo[0], pc->y - lo[1], pc->x - lo[2]}};
      for (int64_t c = 0; c < s->channels[d] && e->status == SLABFEED_OK; c++)
        copy_piece(&raw, c, pc, p->crop, g->dstage[st][d], g->compute, e);
      sf__source_account(src, s, d, pc, delta);
    }
  return e->status;
}

/* ---- Slabs in device memory -----------------------------------------------
 * With residency device every piece of a crop is in GPU memory (this
 * rank's copy, or a node rank's over CUDA IPC): one gather launch copies
 * the pieces of every dataset into staging (pieces_gpu.h) where the
 * pitched copies would take one call per channel and piece. */

/* 1 when every piece of the crop (n of them) is read in place from device
 * memory and the table holds them all. */
static int all_on_device(const sf__store *s, const sf__batch_plan *p, int n)
{
  for (int k = 0; k < n; k++) {
    const sf__source *src = sf__source_of(s, &p->pieces[k]);
    if (src != &sf__source_dev_own && src != &sf__source_dev_node)
      return 0;
  }
  return 1;
}

static int device_gatherable(const sf__store *s, const sf__batch_plan *p, int n)
{
  return n * p->ndsets <= SF_PIECES_MAX && all_on_device(s, p, n);
}

/* The n pieces of the crop into staging st with one launch on the copy
 * stream (device_gatherable said yes). */
static slabfeed_status gather_device(sf__backend *g, int n, int st,
                                     slabfeed_stats *delta, sf__err *e)
{
  sf__batch_plan *p = g->ctx.plan;
  sf__store *s = g->ctx.store;
  sf__dpieces t;
  t.n = 0;
  t.rows_max = 0;
  for (int k = 0; k < n; k++) {
    const sf__piece *pc = &p->pieces[k];
    const sf__source *src = sf__source_of(s, pc);
    for (int d = 0; d < p->ndsets; d++) {
      sf__piece part;
      sf__view v;
      if (!sf__backend_part(p, s, src, d, pc, NULL, &part, &v, delta))
        continue;
      const int64_t *x = p->xf[d].ext;
      sf__dpiece *q = &t.p[t.n++];
      q->src = sf__view_row(&v, 0, 0, 0);
      q->src_c = v.cstride;
      q->src_z = v.rows * v.cols;
      q->src_y = v.cols;
      q->dst =
          g->dstage[st][d] + (part.d[0] * x[1] + part.d[1]) * x[2] + part.d[2];
      q->dst_c = (int32_t)(x[0] * x[1] * x[2]);
      q->dst_z = (int32_t)(x[1] * x[2]);
      q->dst_y = (int32_t)x[2];
      q->C = (int32_t)s->channels[d];
      q->n0 = (int32_t)part.n[0];
      q->n1 = (int32_t)part.n[1];
      q->n2 = (int32_t)part.n[2];
      const int64_t rows = s->channels[d] * part.n[0] * part.n[1];
      t.rows_max = rows > t.rows_max ? rows : t.rows_max;
    }
  }
  const cudaError_t rc = sf__pieces_launch(&t, g->copy);
  if (rc != cudaSuccess)
    return sf__cudart_fail(e, rc, "piece gather kernel launch");
  return t.n > 0 ? sf__cudart_launched("piece gather kernel", e) : SLABFEED_OK;
}

/* ---- Large crops in one pass ---------------------------------------------
 * A crop of at least SF_DIRECT_VOXELS voxels whose pieces are all in
 * device memory skips staging: the fused transform runs once per piece
 * and dataset, reading the piece in place and writing its part of the
 * sample (sf__kparams_part). A crop is gathered once instead of twice
 * (gather, then transform: two passes over HBM); the launches per crop
 * (up to 8 pieces per dataset on one rank) cost little beside a large
 * crop's bytes. Small crops keep the one-launch gather, whose staging
 * stays in L2. SLABFEED_TEST_DIRECT=1 takes this path for every crop
 * (tests; read once, at open). */
#define SF_DIRECT_VOXELS ((int64_t)96 * 96 * 96)

static int direct_wanted(const sf__batch_plan *p)
{
  const char *v = getenv("SLABFEED_TEST_DIRECT");
  if (v != NULL && v[0] == '1')
    return 1;
  return p->crop[0] * p->crop[1] * p->crop[2] >= SF_DIRECT_VOXELS;
}

/* Sample i of slot `slot` (its n pieces planned) transformed piece by
 * piece on the compute stream straight from device memory: 1 when done
 * (or failed, with e set), 0 when a piece is not in device memory or an
 * offset would not fit the kernel (then nothing was launched). */
static int transform_direct(sf__backend *g, int slot, int i, int n,
                            slabfeed_stats *delta, sf__err *e)
{
  sf__batch_plan *p = g->ctx.plan;
  sf__store *s = g->ctx.store;
  if (!all_on_device(s, p, n))
    return 0;
  /* Every launch's parameters first: all or none of them. */
  const int32_t sym = sf__batch_symmetry(p, slot, i);
  for (int d = 0; d < p->ndsets; d++)
    for (int k = 0; k < n; k++) {
      const sf__piece *pc = &p->pieces[k];
      sf__piece part;
      sf__view v;
      slabfeed_stats none = {.batches = 0};
      if (!sf__backend_part(p, s, sf__source_of(s, pc), d, pc, NULL, &part, &v,
                            &none))
        continue;
      sf__kparams kp;
      int64_t at;
      if (sf__kparams_part(&p->xf[d], sym, part.d, part.n, v.cstride,
                           v.rows * v.cols, v.cols, &kp, &at) < 0)
        return 0;
    }
  const double t = sf__now();
  for (int d = 0; d < p->ndsets && e->status == SLABFEED_OK; d++) {
    const float *aug = sf__batch_aug(p, slot, i, d);
    const size_t es = slabfeed_dtype_size(p->xf[d].dtype);
    const int64_t per_voxel =
        p->xf[d].layout == SLABFEED_OUT_NDHWC ? (int64_t)p->xf[d].channels : 1;
    char *out = (char *)g->slot[slot][d] +
                (size_t)i * (size_t)sf__batch_sample_bytes(p, d);
    for (int k = 0; k < n && e->status == SLABFEED_OK; k++) {
      const sf__piece *pc = &p->pieces[k];
      sf__piece part;
      sf__view v;
      if (!sf__backend_part(p, s, sf__source_of(s, pc), d, pc, NULL, &part, &v,
                            delta))
        continue;
      sf__kparams kp;
      int64_t at;
      if (sf__kparams_part(&p->xf[d], sym, part.d, part.n, v.cstride,
                           v.rows * v.cols, v.cols, &kp, &at) != 1)
        continue; /* trimmed away */
      sf__kparams_set_aug(&kp, &p->xf[d], aug);
      const cudaError_t rc =
          sf__transform_launch(&kp, sf__view_row(&v, 0, 0, 0),
                               out + (size_t)(at * per_voxel) * es, g->compute);
      if (rc != cudaSuccess)
        sf__cudart_fail(e, rc, "transform kernel launch (in place)");
      else
        sf__cudart_launched("transform kernel", e);
    }
  }
  delta->t_transform += sf__now() - t;
  return 1;
}

/* Stages the crop whose n pieces the plan holds (sf__batch_pieces) into
 * device staging st, ready for the compute stream (which waits for
 * staged[st]) when this returns; remote pieces come from landing slot
 * `land` (batch b lands in b % K). */
static slabfeed_status stage_crop(sf__backend *g, int n, int st,
                                  const float *land, slabfeed_stats *delta,
                                  sf__err *e)
{
  sf__batch_plan *p = g->ctx.plan;
  sf__store *s = g->ctx.store;
  SF_RANGE_PUSH("h2d");
  const double t0 = sf__now();
  int64_t lo[3];
  if (g->res.on && device_gatherable(s, p, n)) {
    if (gather_device(g, n, st, delta, e) == SLABFEED_OK &&
        sf__cudart_record(g->staged[st], g->copy, e) == SLABFEED_OK)
      sf__cudart_wait(g->compute, g->staged[st], e);
    delta->t_h2d += sf__now() - t0;
    SF_RANGE_POP();
    return e->status;
  }
  if (g->draw[st][0] != NULL && one_box(s, p, n, lo)) {
    stage_box(g, n, lo, st, delta, e);
    delta->t_h2d += sf__now() - t0;
    SF_RANGE_POP();
    return e->status;
  }
  for (int k = 0; k < n && e->status == SLABFEED_OK; k++) {
    const sf__piece *pc = &p->pieces[k];
    const sf__source *src = sf__source_of(s, pc);
    for (int d = 0; d < p->ndsets && e->status == SLABFEED_OK; d++) {
      const float *landed =
          src->fetched ? land + sf__fetch_map_at(&g->map, s, d, pc) : NULL;
      /* The part of the piece this dataset takes (a target core: its box
       * inside the crop), read through the whole piece's view: only its
       * bytes cross the link. */
      sf__piece part;
      sf__view v;
      if (sf__backend_part(p, s, src, d, pc, landed, &part, &v, delta))
        for (int64_t c = 0; c < s->channels[d] && e->status == SLABFEED_OK; c++)
          copy_piece(&v, c, &part, p->xf[d].ext, g->dstage[st][d], g->copy, e);
    }
  }
  if (e->status == SLABFEED_OK &&
      sf__cudart_record(g->staged[st], g->copy, e) == SLABFEED_OK)
    sf__cudart_wait(g->compute, g->staged[st], e);
  delta->t_h2d += sf__now() - t0;
  SF_RANGE_POP();
  return e->status;
}

/* Waits (loader thread) until the remote pieces of batch n have landed;
 * 0 when told to stop first. */
static int wait_landed(sf__backend *g, uint64_t n)
{
  if (!g->fetch.active)
    return 1;
  pthread_mutex_lock(&g->mu);
  while (!g->stop && !g->failed && g->landed <= n)
    pthread_cond_wait(&g->cv, &g->mu);
  const int go = !g->stop && !g->failed;
  pthread_mutex_unlock(&g->mu);
  return go;
}

/* Produces batch n of the current generation into its slot. */
static slabfeed_status produce(sf__backend *g, uint64_t n, sf__err *e)
{
  sf__batch_plan *p = g->ctx.plan;
  const int slot = (int)(n % (uint64_t)g->K);
  slabfeed_stats delta = {.batches = 0};
  uint64_t epoch, step;
  sf__batch_position(p, g->start_epoch, g->start_step, n, &epoch, &step);
  double t = sf__now();
  sf__batch_plan_slot(p, slot, epoch, step);
  const int land = (int)(n % (uint64_t)g->K);
  if (g->fetch.active)
    sf__fetch_map_batch(&g->map, p, p->rank,
                        &p->origin[3 * (size_t)slot * (size_t)p->B]);
  delta.t_plan = sf__now() - t;
  /* The slot's last batch must be released by the consumer's stream. */
  if (g->release_pending[slot]) {
    if (sf__cudart_wait(g->compute, g->released[slot], e))
      return e->status;
    g->release_pending[slot] = 0;
  }
  for (int i = 0; i < p->B && e->status == SLABFEED_OK; i++) {
    /* The crop's pieces, planned once for either path. */
    SF_RANGE_PUSH("plan");
    const int pieces = sf__batch_pieces(p, slot, i);
    SF_RANGE_POP();
    if (g->direct && transform_direct(g, slot, i, pieces, &delta, e))
      continue;
    const int st = g->stage;
    g->stage = (g->stage + 1) % SF_STAGES;
    /* Staging st (and its box) is free once the transform that last read
     * it is done. */
    if (sf__cudart_wait(g->copy, g->consumed[st], e) ||
        stage_crop(g, pieces, st, g->landing[land], &delta, e))
      break;
    SF_RANGE_PUSH("transform");
    t = sf__now();
    const int32_t sym = sf__batch_symmetry(p, slot, i);
    for (int d = 0; d < p->ndsets && e->status == SLABFEED_OK; d++) {
      sf__kparams k;
      sf__kparams_make(&p->xf[d], sym, &k);
      sf__kparams_set_aug(&k, &p->xf[d], sf__batch_aug(p, slot, i, d));
      char *out = (char *)g->slot[slot][d] +
                  (size_t)i * (size_t)sf__batch_sample_bytes(p, d);
      const cudaError_t rc =
          sf__transform_launch(&k, g->dstage[st][d], out, g->compute);
      if (rc != cudaSuccess)
        sf__cudart_fail(e, rc, "transform kernel launch");
      else
        sf__cudart_launched("transform kernel", e);
    }
    delta.t_transform += sf__now() - t;
    SF_RANGE_POP();
    if (e->status == SLABFEED_OK)
      sf__cudart_record(g->consumed[st], g->compute, e);
  }
  /* The landing slot is free again once these copies have read it. */
  if (e->status == SLABFEED_OK && g->fetch.active)
    sf__cudart_record(g->copied[land], g->copy, e);
  if (e->status == SLABFEED_OK)
    sf__cudart_record(g->ready[slot], g->compute, e);
  sf__stats_add(g->ctx.stats, &delta);
  return e->status;
}

static void *loader_thread(void *arg)
{
  sf__backend *g = arg;
  sf__err e;
  sf__err_clear(&e);
  if (sf__cudart_set_device(g->device, &e) != SLABFEED_OK) {
    fail_ring(g, &e);
    return NULL;
  }
  for (;;) {
    pthread_mutex_lock(&g->mu);
    while (!g->stop && g->produced >= g->released_upto + (uint64_t)g->K)
      pthread_cond_wait(&g->cv, &g->mu);
    const uint64_t n = g->produced;
    const int stop = g->stop;
    pthread_mutex_unlock(&g->mu);
    if (stop || !wait_landed(g, n))
      break;
    produce(g, n, &e);
    pthread_mutex_lock(&g->mu);
    if (e.status != SLABFEED_OK)
      fail_locked(g, &e);
    else
      g->produced = n + 1;
    pthread_cond_broadcast(&g->cv);
    const int failed = g->failed;
    pthread_mutex_unlock(&g->mu);
    if (failed)
      break;
  }
  return NULL;
}

/* ---- Handing out ------------------------------------------------------------
 */

/* The caller's stream must live on the loader's device: events cannot be
 * recorded across devices. */
static slabfeed_status check_stream(const sf__backend *g, cudaStream_t s,
                                    sf__err *e)
{
  int dev = -1;
  if (s == NULL || sf__cudart_stream_device(s, &dev, e) != SLABFEED_OK)
    return e->status;
  if (dev != g->device)
    sf__fail(e, SLABFEED_ERR_ARG,
             "slabfeed_next: the stream belongs to device %d but the "
             "loader's batches live on device %d",
             dev, g->device);
  return e->status;
}

/* Caller's thread (inside fetch): the landing slot of the batch j being
 * posted held batch j - K, which may be overwritten once the producer has
 * staged it and those copies are done; always when the producer is
 * stopped (its copies were waited for). */
static int slot_free(void *arg, int slot, int block)
{
  sf__backend *g = arg;
  const uint64_t j = g->fetch.recv_posted, K = (uint64_t)g->K;
  if (j < K || !g->running)
    return 1;
  pthread_mutex_lock(&g->mu);
  while (block && !g->failed && g->produced <= j - K)
    pthread_cond_wait(&g->cv, &g->mu);
  const int staged = g->produced > j - K, failed = g->failed;
  pthread_mutex_unlock(&g->mu);
  if (failed) /* the stream is void: nothing will read the slot */
    return 1;
  if (!staged)
    return 0;
  /* A failed check voids the stream (next reports it): the slot is
   * then as good as free. */
  sf__err e;
  sf__err_clear(&e);
  if (block) {
    if (sf__cudart_event_sync(g->copied[slot], &e) != SLABFEED_OK)
      fail_ring(g, &e);
    return 1;
  }
  const int done = sf__cudart_event_done(g->copied[slot], &e);
  if (done < 0 || e.status != SLABFEED_OK) {
    fail_ring(g, &e);
    return 1;
  }
  return done;
}

/* Caller's thread: waits until batch n is produced. With remote pieces it
 * drives their transfers meanwhile (gpu_next has requested them up to K
 * batches ahead): blocks
 * in MPI only for the batch the producer waits on, and otherwise polls so
 * that the transfers other ranks wait on keep moving. */
static slabfeed_status wait_batch(sf__backend *g, uint64_t n, sf__err *e)
{
  sf__fetch *f = &g->fetch;
  sf__err fe;
  sf__err_clear(&fe);
  pthread_mutex_lock(&g->mu);
  for (;;) {
    if (fe.status != SLABFEED_OK)
      fail_locked(g, &fe);
    if (g->failed) {
      *e = g->err;
      break;
    }
    if (f->active && g->landed != f->landed) {
      g->landed = f->landed;
      pthread_cond_broadcast(&g->cv);
    }
    if (g->produced > n)
      break;
    if (!f->active) {
      pthread_cond_wait(&g->cv, &g->mu);
      continue;
    }
    const uint64_t need = g->produced; /* the producer's batch */
    pthread_mutex_unlock(&g->mu);
    if (f->landed <= need) {
      sf__fetch_wait(f, need, &fe);
      pthread_mutex_lock(&g->mu);
    } else {
      /* The producer is staging: keep the transfers moving (other ranks
       * wait on them; below MPI_THREAD_MULTIPLE they progress only while
       * this thread is inside MPI), and see it done at once. */
      sf__fetch_pump(f, n + (uint64_t)g->K - 1, &fe);
      sched_yield();
      pthread_mutex_lock(&g->mu);
    }
  }
  pthread_mutex_unlock(&g->mu);
  return e->status;
}

static slabfeed_status gpu_next(sf__backend *g, void *stream,
                                slabfeed_batch *out, sf__err *e)
{
  sf__batch_plan *p = g->ctx.plan;
  cudaStream_t s = (cudaStream_t)stream;
  const uint64_t n = g->next;
  /* The transfers other ranks wait on are posted first, so that a call
   * failing below still serves them (peers learn of the failure at the
   * application's next agreement instead of waiting for a message). */
  if (g->fetch.active &&
      sf__fetch_pump(&g->fetch, n + (uint64_t)g->K - 1, e) != SLABFEED_OK)
    return e->status;
  if ((!g->have_last || s != g->last_stream) && check_stream(g, s, e))
    return e->status;
  /* Batch n - 1 is released once the stream that received it gets past
   * this point; the producer waits for that before it writes the slot
   * again. */
  if (g->have_last) {
    const uint64_t prev = (n - 1) % (uint64_t)g->K;
    if (sf__cudart_record(g->released[prev], g->last_stream, e))
      return e->status;
    g->release_pending[prev] = 1;
  }
  SF_RANGE_PUSH("wait");
  const double t0 = sf__now();
  pthread_mutex_lock(&g->mu);
  g->released_upto = n;
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
  const int failed = wait_batch(g, n, e) != SLABFEED_OK;
  slabfeed_stats delta = {.t_wait = sf__now() - t0};
  sf__fetch_take(&g->fetch, &delta);
  SF_RANGE_POP();
  if (failed)
    return e->status;
  const int slot = (int)(n % (uint64_t)g->K);
  if (sf__cudart_wait(s, g->ready[slot], e))
    return e->status;
  g->last_stream = s;
  g->have_last = 1;
  uint64_t epoch, step;
  sf__batch_position(p, g->start_epoch, g->start_step, n, &epoch, &step);
  /* This rank's messages of batch n are delivered before it is returned
   * (sf__fetch_serve says why). */
  if (sf__fetch_serve(&g->fetch, n, e) != SLABFEED_OK)
    return e->status;
  sf__batch_describe(p, slot, g->slot[slot], epoch, step, out);
  out->ready_event = g->ready[slot];
  g->next = n + 1;
  delta.batches = 1;
  delta.samples = (uint64_t)p->B;
  for (int d = 0; d < p->ndsets; d++)
    delta.bytes_out += (uint64_t)p->B * (uint64_t)sf__batch_sample_bytes(p, d);
  sf__stats_add(g->ctx.stats, &delta);
  return SLABFEED_OK;
}

static slabfeed_status gpu_start(sf__backend *g, uint64_t epoch, uint64_t step,
                                 sf__err *e)
{
  stop_thread(g);
  /* A local failure is held until the collective settle below is done
   * (ranks waiting in it would hang otherwise), then kept: next reports
   * it instead of waiting for a thread that is not there. */
  sf__err local;
  sf__err_clear(&local);
  if (g->failed)
    local = g->err;
  /* Every slot produced so far is released once the consumer's stream
   * passes this point; the next generation waits on that. */
  if (g->have_last)
    for (int k = 0; k < g->K && local.status == SLABFEED_OK; k++)
      if (sf__cudart_record(g->released[k], g->last_stream, &local) ==
          SLABFEED_OK)
        g->release_pending[k] = 1;
  /* Transfers in flight end with the generation (collective: every rank
   * seeks at the same point); their landing slots are read by copies that
   * must be done first. */
  if (g->fetch.active) {
    if (local.status == SLABFEED_OK)
      sf__cudart_stream_sync(g->copy, &local);
    sf__err settle;
    sf__err_clear(&settle);
    if (sf__fetch_settle(&g->fetch, &settle) != SLABFEED_OK &&
        local.status == SLABFEED_OK)
      local = settle;
  }
  sf__fetch_begin(&g->fetch, epoch, step);
  g->start_epoch = epoch;
  g->start_step = step;
  g->produced = g->released_upto = g->next = g->landed = 0;
  /* Batch numbers restart at 0; there is no previous batch to release. */
  g->have_last = 0;
  if (local.status == SLABFEED_OK &&
      pthread_create(&g->thread, NULL, loader_thread, g) != 0)
    sf__fail(&local, SLABFEED_ERR_NOMEM, "cannot start the loader thread");
  if (local.status != SLABFEED_OK) {
    g->err = local;
    g->failed = 1;
    *e = local;
    return e->status;
  }
  g->running = 1;
  return SLABFEED_OK;
}

static slabfeed_status gpu_copy_to_host(sf__backend *g,
                                        const slabfeed_tensor *t, size_t bytes,
                                        void *dst, sf__err *e)
{
  const sf__batch_plan *p = g->ctx.plan;
  const char *q = t->data;
  for (int k = 0; k < g->K; k++)
    for (int d = 0; d < p->ndsets; d++) {
      const char *base = g->slot[k][d];
      const size_t size = (size_t)p->B * (size_t)sf__batch_sample_bytes(p, d);
      if (q < base || q + bytes > base + size)
        continue;
      if (sf__cudart_wait(g->aux, g->ready[k], e) ||
          sf__cudart_copy(dst, q, bytes, cudaMemcpyDeviceToHost, g->aux, e) ||
          sf__cudart_stream_sync(g->aux, e))
        return e->status;
      return SLABFEED_OK;
    }
  return sf__fail(e, SLABFEED_ERR_ARG,
                  "slabfeed_copy_to_host: the tensor is not a batch of this "
                  "loader");
}

/* Where crops are read from (resident.h), then the window registered
 * for the copy engine where it stays in host memory. Collective. */
static slabfeed_status gpu_reside(sf__backend *g, char *how, size_t len,
                                  sf__err *e)
{
  int caller = 0;
  const int set = sf__cudart_get_device(&caller, e) == SLABFEED_OK &&
                  sf__cudart_set_device(g->device, e) == SLABFEED_OK;
  sf__err local;
  sf__err_clear(&local);
  /* Without remote pieces no rank reads another node's host segment:
   * with the slabs on the GPU, the host copies can go. Reached by every
   * rank (it agrees a failure of the lines above too). */
  const int host_unread = !sf__fetch_needed(g->ctx.plan);
  double t_register = 0;
  if (sf__resident_open(&g->res, g->ctx.store, g->device, g->copy, host_unread,
                        e) == SLABFEED_OK &&
      !g->res.on) {
    const double t0 = sf__now();
    if (register_window(g, e) == SLABFEED_OK &&
        sf__inject("register", g->ctx.store->rank))
      sf__fail(e, SLABFEED_ERR_CUDA, "injected failure at stage 'register'");
    t_register = sf__now() - t0;
  }
  if (set)
    sf__cudart_set_device(caller, e->status == SLABFEED_OK ? e : &local);
  /* Decided once, here: the producer reads no environment. */
  g->direct = g->res.on && direct_wanted(g->ctx.plan);
  snprintf(how, len, "%s", g->res.how);
  const slabfeed_stats held = {.device_slab_bytes =
                                   g->res.on ? g->res.bytes : 0,
                               .slab_released_bytes = g->res.released,
                               .t_open_register = t_register};
  sf__stats_add(g->ctx.stats, &held);
  return e->status;
}

/* Device batches take pinned and device memory only (whose allocations
 * fail cleanly), no pageable host memory. */
static uint64_t gpu_host_bytes(const sf__context *ctx)
{
  (void)ctx;
  return 0;
}

/* ---- Before the read: the residency, and the read into GPU memory --------
 * The residency is chosen before the slabs are read, so that where every
 * plane of a rank's slab is read on its node and no crop piece crosses
 * nodes, the read goes from the file straight into the device copy
 * through pinned staging (resident.h): host memory during the fill is the
 * staging, not the slab (docs/DECISIONS.md). */
static void wait_warm(int limit);

static slabfeed_status gpu_prepare(const sf__context *ctx, void **early,
                                   sf__sink **sink, sf__err *e)
{
  sf__store *s = ctx->store;
  *sink = NULL;
  sf__resident spare, *r = calloc(1, sizeof *r);
  memset(&spare, 0, sizeof spare);
  *early = r;
  if (r == NULL)
    sf__fail(e, SLABFEED_ERR_NOMEM, "residency: the device copy's state");
  sf__resident *use = r != NULL ? r : &spare; /* for the collectives */
  int device = 0, caller = 0;
  sf__err local;
  sf__err_clear(&local);
  /* Only a verdict needs the device (its free memory): otherwise its
   * context goes on being made on the warm thread beside the read. */
  if (!sf__resident_may_choose_device(ctx->cfg, s))
    return sf__resident_choose(use, ctx->cfg, s, device, e);
  /* The verdict and a read into GPU memory need the context: its wait is
   * here, before the read, and counted as such. */
  const double t0 = sf__now();
  wait_warm(0);
  const slabfeed_stats waited = {.t_open_context = sf__now() - t0};
  sf__stats_add(ctx->stats, &waited);
  if (e->status == SLABFEED_OK && pick_device(ctx, &device, e) == SLABFEED_OK &&
      sf__cudart_get_device(&caller, e) == SLABFEED_OK)
    sf__cudart_set_device(device, e);
  const int set = e->status == SLABFEED_OK;
  /* Staged where no rank reads another's host segment, during the open
   * (every plane read on the node) or after it (no crop piece crosses
   * nodes); agreed, so that every rank makes the read's calls alike. */
  if (sf__resident_choose(use, ctx->cfg, s, device, e) == SLABFEED_OK &&
      use->chosen) {
    int here = !sf__store_crops_cross(s, ctx->cfg->pub.locality) &&
               sf__store_node_read(s);
    int all = 0;
    const int rc = MPI_Allreduce(&here, &all, 1, MPI_INT, MPI_MIN, s->comm);
    if (rc != MPI_SUCCESS)
      sf__fail_mpi(e, rc, "MPI_Allreduce (residency: the staged fill)");
    else if (all)
      sf__resident_stage(use, s, device, sink, e);
  }
  if (set)
    sf__cudart_set_device(caller, e->status == SLABFEED_OK ? e : &local);
  return e->status;
}

static slabfeed_status gpu_prepare_end(void *early, sf__err *e)
{
  return early != NULL ? sf__resident_stage_end(early, e) : e->status;
}

static void gpu_drop(void *early, sf__store *s)
{
  if (early == NULL)
    return;
  sf__resident_close(early, s);
  free(early);
}

/* ---- Start-up beside the read ----------------------------------------------
 * The CUDA context of the rank's device is made on a thread of its own
 * while the open reads the slabs (cudaSetDevice creates the primary
 * context, CUDA 12 on); gpu_open then finds it made. Where residency may
 * take device memory, its verdict (gpu_prepare, before the read) asks
 * the device's free memory: its cudaSetDevice on the open's thread waits
 * for the same primary context, which the warm thread began when the
 * open began, so the context overlaps the file's open and the store's
 * sizing instead. slabfeed_warm_device starts the same thread earlier,
 * from the program's main.
 *
 * The threads are detached and counted while they run: the open waits
 * for them after its read, and so does the process's exit. At exit the
 * CUDA runtime's own teardown must not run while a thread is still inside
 * it: the handler is registered after the runtime's load-time ones, so it
 * runs before them, and waits at most SF_WARM_EXIT_WAIT seconds (a driver
 * that never answers must not make the exit hang). A forked child has
 * none of the threads. */
#define SF_WARM_EXIT_WAIT 30
static pthread_mutex_t g_warm_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_warm_cv = PTHREAD_COND_INITIALIZER;
static int g_warm_running;
static int g_warm_ready; /* the exit handler and fork handlers are in */
static pthread_once_t g_warm_once = PTHREAD_ONCE_INIT;

typedef struct gpu_warm_t {
  int device;    /* or SLABFEED_DEVICE_LOCAL */
  int node_rank; /* for device local */
} gpu_warm_t;

static void *warm_main(void *arg)
{
  gpu_warm_t *w = arg;
  int count = 0;
  sf__cudart_device_count(&count);
  const int device = w->device == SLABFEED_DEVICE_LOCAL && count > 0
                         ? w->node_rank % count
                         : w->device;
  free(w);
  sf__err ignored; /* open meets and reports any failure itself */
  sf__err_clear(&ignored);
  if (device >= 0 && device < count)
    sf__cudart_set_device(device, &ignored);
  pthread_mutex_lock(&g_warm_mu);
  g_warm_running--;
  pthread_cond_broadcast(&g_warm_cv);
  pthread_mutex_unlock(&g_warm_mu);
  return NULL;
}

/* Waits for the running threads; at most `limit` seconds when > 0. */
static void wait_warm(int limit)
{
  struct timespec until = {0, 0};
  const int bounded = limit > 0 && clock_gettime(CLOCK_REALTIME, &until) == 0;
  if (bounded)
    until.tv_sec += limit;
  pthread_mutex_lock(&g_warm_mu);
  while (g_warm_running > 0)
    if (bounded ? pthread_cond_timedwait(&g_warm_cv, &g_warm_mu, &until) != 0
                : pthread_cond_wait(&g_warm_cv, &g_warm_mu) != 0)
      break;
  pthread_mutex_unlock(&g_warm_mu);
}

static void wait_warm_at_exit(void)
{
  wait_warm(SF_WARM_EXIT_WAIT);
}

static void warm_prefork(void)
{
  pthread_mutex_lock(&g_warm_mu);
}

static void warm_parent(void)
{
  pthread_mutex_unlock(&g_warm_mu);
}

static void warm_child(void)
{
  g_warm_running = 0;
  pthread_mutex_unlock(&g_warm_mu);
}

static void warm_setup(void)
{
  g_warm_ready = atexit(wait_warm_at_exit) == 0 &&
                 pthread_atfork(warm_prefork, warm_parent, warm_child) == 0;
}

/* Starts a counted thread making `device`'s context (node_rank picks the
 * device for SLABFEED_DEVICE_LOCAL); 1 where one runs. */
static int start_warm(int device, int node_rank)
{
  pthread_once(&g_warm_once, warm_setup);
  if (!g_warm_ready) /* no thread that the exit would not wait for */
    return 0;
  gpu_warm_t *w = calloc(1, sizeof *w);
  pthread_attr_t attr;
  if (w == NULL || pthread_attr_init(&attr) != 0) {
    free(w);
    return 0;
  }
  w->device = device;
  w->node_rank = node_rank;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t th;
  pthread_mutex_lock(&g_warm_mu);
  const int started = pthread_create(&th, &attr, warm_main, w) == 0;
  g_warm_running += started;
  pthread_mutex_unlock(&g_warm_mu);
  pthread_attr_destroy(&attr);
  if (!started)
    free(w);
  return started;
}

/* The backend's warm: a token, not a handle (the join waits for every
 * warm thread, slabfeed_warm_device's too). */
static void *gpu_warm(const sf__config *cfg, int node_rank)
{
  static int token;
  if (cfg->pub.device < 0 && cfg->pub.device != SLABFEED_DEVICE_LOCAL)
    return NULL;
  return start_warm(cfg->pub.device, node_rank) ? &token : NULL;
}

static void gpu_warm_join(void *handle)
{
  (void)handle;
  wait_warm(0);
}

/* The launcher's local rank (slabfeed_warm_device), or -1: Open MPI's,
 * MPICH's (hydra), or Slurm's inside a step (a batch script's own
 * SLURM_LOCALID is 0 for every rank another launcher starts from it);
 * 0 where every rank is its own node (SLABFEED_RANK_PER_NODE=1: the
 * open then uses device 0 on every rank). */
static int launcher_local_rank(void)
{
  const char *rpn = getenv(SLABFEED_ENV_RANK_PER_NODE);
  if (rpn != NULL && rpn[0] == '1')
    return 0;
  static const char *const names[] = {"OMPI_COMM_WORLD_LOCAL_RANK",
                                      "MPI_LOCALRANKID", "SLURM_LOCALID"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *v = getenv(names[i]);
    if (i == 2 && getenv("SLURM_STEP_ID") == NULL)
      break;
    char *end;
    const long r = v != NULL ? strtol(v, &end, 10) : -1;
    if (v != NULL && end != v && *end == '\0' && r >= 0 && r < INT_MAX)
      return (int)r;
  }
  return -1;
}

int slabfeed_warm_device(int device)
{
  const int local = device == SLABFEED_DEVICE_LOCAL ? launcher_local_rank() : 0;
  if ((device < 0 && device != SLABFEED_DEVICE_LOCAL) || local < 0)
    return 0;
  return start_warm(device, local);
}

const sf__backend_ops sf__gpu_backend = {.name = "gpu",
                                         .host_bytes = gpu_host_bytes,
                                         .open = gpu_open,
                                         .start = gpu_start,
                                         .next = gpu_next,
                                         .copy_to_host = gpu_copy_to_host,
                                         .close = gpu_close,
                                         .reside = gpu_reside,
                                         .warm = gpu_warm,
                                         .warm_join = gpu_warm_join,
                                         .prepare = gpu_prepare,
                                         .prepare_end = gpu_prepare_end,
                                         .drop = gpu_drop};
