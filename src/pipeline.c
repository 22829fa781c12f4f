/* The GPU pipeline: crops go from the node's registered shared window (or,
 * from other nodes, MPI_Get into pinned staging) to device staging with
 * cudaMemcpy3DAsync on the copy stream, through the fused kernel on the
 * compute stream into a ring of K batch slots. A loader thread produces
 * ahead; slabfeed_next hands out a slot and makes the caller's stream wait on
 * its ready event. All memory, streams and events are taken in sf__gpu_open;
 * nothing after it allocates, registers or synchronises the device. */
#include "pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cudart.h"
#include "loader.h"
#include "nvtx.h"
#include "transform_gpu.h"

#ifndef SF_STAGES
#define SF_STAGES 2 /* crop staging buffers per dataset */
#endif

struct sf__gpu {
  int device;
  cudaStream_t copy, compute, aux;
  float *dstage[SF_STAGES][SF_MAX_DSETS]; /* device crop staging */
  float *hstage[SF_STAGES][SF_MAX_DSETS]; /* pinned, for MPI_Get */
  cudaEvent_t staged[SF_STAGES], consumed[SF_STAGES], h2d_done[SF_STAGES];
  int h2d_pending[SF_STAGES];
  int stage;
  int K;
  void *slot[64][SF_MAX_DSETS];
  cudaEvent_t ready[64], released[64];
  int release_pending[64]; /* released[k] was recorded and not yet waited
                              for by the producer */
  void *reg[64];           /* registered host ranges */
  int nreg;

  /* ring state, under mu */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int threaded, running, stop, failed;
  pthread_t thread;
  uint64_t produced, released_upto, next;
  uint64_t start_epoch, start_step; /* position of batch 0 */
  sf__err err;
  cudaStream_t last_stream;
  int have_last;
};

/* ---- Open / close ----------------------------------------------------------
 */

/* Registers the segments of every rank of the node (the crop sources) so
 * the copy engine reads them directly. One range when the window maps them
 * contiguously, else one per segment. */
static slabfeed_status register_window(slabfeed_loader *l, sf__gpu *g,
                                       sf__err *e)
{
  const sf__store *s = &l->store;
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
      sf__cu_host_register(lo, (size_t)(hi - lo), &probe) == SLABFEED_OK) {
    g->reg[g->nreg++] = lo;
    return SLABFEED_OK;
  }
  for (int r = 0; r < s->size && e->status == SLABFEED_OK; r++)
    if (s->peer[r] != NULL && s->peer_bytes[r] > 0 && g->nreg < 64 &&
        sf__cu_host_register(s->peer[r], (size_t)s->peer_bytes[r], e) ==
            SLABFEED_OK)
      g->reg[g->nreg++] = s->peer[r];
  return e->status;
}

static slabfeed_status create_objects(slabfeed_loader *l, sf__gpu *g,
                                      sf__err *e)
{
  if (sf__cu_stream_create(&g->copy, e) ||
      sf__cu_stream_create(&g->compute, e) || sf__cu_stream_create(&g->aux, e))
    return e->status;
  for (int i = 0; i < SF_STAGES; i++)
    if (sf__cu_event_create(&g->staged[i], e) ||
        sf__cu_event_create(&g->consumed[i], e) ||
        sf__cu_event_create(&g->h2d_done[i], e))
      return e->status;
  for (int k = 0; k < g->K; k++)
    if (sf__cu_event_create(&g->ready[k], e) ||
        sf__cu_event_create(&g->released[k], e))
      return e->status;
  for (int i = 0; i < SF_STAGES; i++)
    for (int d = 0; d < l->ndsets; d++) {
      const size_t bytes = (size_t)sf__sample_elems(l, d) * sizeof(float);
      if (sf__cu_malloc((void **)&g->dstage[i][d], bytes, e))
        return e->status;
      l->stats.staging_bytes += bytes;
      if (l->store.nodes > 1) {
        if (sf__cu_host_alloc((void **)&g->hstage[i][d], bytes, e))
          return e->status;
        l->stats.staging_bytes += bytes;
      }
    }
  for (int k = 0; k < g->K; k++)
    for (int d = 0; d < l->ndsets; d++) {
      const size_t bytes =
          (size_t)l->cfg.batch * (size_t)sf__sample_bytes(l, d);
      if (sf__cu_malloc(&g->slot[k][d], bytes, e))
        return e->status;
      l->stats.staging_bytes += bytes;
    }
  return SLABFEED_OK;
}

static void *loader_thread(void *arg);

slabfeed_status sf__gpu_open(slabfeed_loader *l, sf__err *e)
{
  sf__gpu *g = calloc(1, sizeof *g);
  if (g == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the GPU state");
  l->gpu = g;
  g->device = l->cfg.device;
  g->K = l->cfg.prefetch;
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  sf__err_clear(&g->err);
  int count = 0;
  sf__cu_device_count(&count);
  if (l->cfg.device >= count)
    return sf__fail(e, SLABFEED_ERR_CUDA,
                    "device %d requested but %d CUDA device(s) are visible",
                    l->cfg.device, count);
  if (sf__cu_set_device(g->device, e) || register_window(l, g, e) ||
      create_objects(l, g, e))
    return e->status;
  g->start_epoch = l->epoch;
  g->start_step = l->step;
  /* The thread makes MPI calls only when pieces come from other nodes. */
  g->threaded = l->thread_level == MPI_THREAD_MULTIPLE || l->store.nodes == 1;
  l->stats.loader_thread = g->threaded;
  if (g->threaded) {
    if (pthread_create(&g->thread, NULL, loader_thread, l) != 0)
      return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot start the loader thread");
    g->running = 1;
  }
  return SLABFEED_OK;
}

static void stop_thread(sf__gpu *g)
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

void sf__gpu_close(slabfeed_loader *l)
{
  sf__gpu *g = l->gpu;
  if (g == NULL)
    return;
  stop_thread(g);
  sf__err e;
  sf__err_clear(&e);
  /* Closing may wait: our streams drain before their memory goes. */
  if (g->copy)
    sf__cu_stream_sync(g->copy, &e);
  if (g->compute)
    sf__cu_stream_sync(g->compute, &e);
  for (int k = 0; k < g->K; k++) {
    for (int d = 0; d < SF_MAX_DSETS; d++)
      sf__cu_free(g->slot[k][d]);
    sf__cu_event_destroy(g->ready[k]);
    sf__cu_event_destroy(g->released[k]);
  }
  for (int i = 0; i < SF_STAGES; i++) {
    for (int d = 0; d < SF_MAX_DSETS; d++) {
      sf__cu_free(g->dstage[i][d]);
      sf__cu_free_host(g->hstage[i][d]);
    }
    sf__cu_event_destroy(g->staged[i]);
    sf__cu_event_destroy(g->consumed[i]);
    sf__cu_event_destroy(g->h2d_done[i]);
  }
  for (int i = 0; i < g->nreg; i++)
    sf__cu_host_unregister(g->reg[i]);
  sf__cu_stream_destroy(g->copy);
  sf__cu_stream_destroy(g->compute);
  sf__cu_stream_destroy(g->aux);
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g);
  l->gpu = NULL;
}

/* ---- Producing a batch -----------------------------------------------------
 */

/* cudaMemcpy3DAsync of channel c of piece p from a host array laid out
 * [C][depth][rows][row] (floats) at (z, y, x) into the device crop. */
static slabfeed_status copy_piece(const slabfeed_loader *l, const float *src,
                                  int64_t depth, int64_t rows, int64_t row,
                                  int64_t z, int64_t y, int64_t x, int64_t c,
                                  const sf__piece *p, float *dst,
                                  cudaStream_t s, sf__err *e)
{
  const int64_t *cr = l->cfg.crop;
  struct cudaMemcpy3DParms m;
  memset(&m, 0, sizeof m);
  m.srcPtr.ptr = (void *)src;
  m.srcPtr.pitch = (size_t)row * sizeof(float);
  m.srcPtr.xsize = (size_t)row;
  m.srcPtr.ysize = (size_t)rows;
  m.srcPos.x = (size_t)x * sizeof(float);
  m.srcPos.y = (size_t)y;
  m.srcPos.z = (size_t)(c * depth + z);
  m.dstPtr.ptr = dst;
  m.dstPtr.pitch = (size_t)cr[2] * sizeof(float);
  m.dstPtr.xsize = (size_t)cr[2];
  m.dstPtr.ysize = (size_t)cr[1];
  m.dstPos.x = (size_t)p->d[2] * sizeof(float);
  m.dstPos.y = (size_t)p->d[1];
  m.dstPos.z = (size_t)(c * cr[0] + p->d[0]);
  m.extent.width = (size_t)p->n[2] * sizeof(float);
  m.extent.height = (size_t)p->n[1];
  m.extent.depth = (size_t)p->n[0];
  m.kind = cudaMemcpyHostToDevice;
  return sf__cu_copy3d(&m, s, e);
}

/* Pieces from other nodes: MPI_Get into the pinned stage (once the DMA
 * that last read it is done), completed before the copies are enqueued. */
static slabfeed_status get_remote(slabfeed_loader *l, sf__gpu *g, int st, int n,
                                  sf__err *e)
{
  sf__store *s = &l->store;
  int any = 0;
  for (int i = 0; i < n; i++)
    any |= s->peer[l->pieces[i].src] == NULL;
  if (!any)
    return SLABFEED_OK;
  SF_RANGE_PUSH("get");
  if (g->h2d_pending[st])
    sf__cu_event_sync(g->h2d_done[st], e);
  for (int i = 0; i < n && e->status == SLABFEED_OK; i++)
    if (s->peer[l->pieces[i].src] == NULL)
      for (int d = 0; d < l->ndsets && e->status == SLABFEED_OK; d++)
        sf__gather_get(s, d, &l->pieces[i], l->cfg.crop, g->hstage[st][d], e);
  if (e->status == SLABFEED_OK)
    sf__gather_complete(s, e);
  SF_RANGE_POP();
  return e->status;
}

static slabfeed_status stage_crop(slabfeed_loader *l, sf__gpu *g, int slot,
                                  int b, int st, sf__err *e)
{
  sf__store *s = &l->store;
  const size_t i = (size_t)slot * (size_t)l->cfg.batch + (size_t)b;
  SF_RANGE_PUSH("plan");
  const int n =
      sf__crop_pieces(s, &l->origin[3 * i], l->cfg.crop, l->pieces, l->zruns);
  SF_RANGE_POP();
  if (get_remote(l, g, st, n, e) != SLABFEED_OK)
    return e->status;
  SF_RANGE_PUSH("h2d");
  const double t0 = MPI_Wtime();
  sf__gather_bytes gb = {0, 0, 0};
  for (int k = 0; k < n && e->status == SLABFEED_OK; k++) {
    const sf__piece *p = &l->pieces[k];
    for (int d = 0; d < l->ndsets && e->status == SLABFEED_OK; d++) {
      const int64_t C = s->channels[d];
      for (int64_t c = 0; c < C && e->status == SLABFEED_OK; c++) {
        if (s->peer[p->src] != NULL) {
          const float *seg =
              (const float *)(s->peer[p->src] + sf__store_offset(s, p->src, d));
          copy_piece(l, seg, sf__store_planes(s, p->src), s->shape[1],
                     s->shape[2], p->q, p->y, p->x, c, p, g->dstage[st][d],
                     g->copy, e);
        } else {
          copy_piece(l, g->hstage[st][d], l->cfg.crop[0], l->cfg.crop[1],
                     l->cfg.crop[2], p->d[0], p->d[1], p->d[2], c, p,
                     g->dstage[st][d], g->copy, e);
        }
      }
      sf__piece_account(s, d, p, &gb);
    }
  }
  sf__loader_count(l, &gb);
  if (e->status == SLABFEED_OK && gb.remote > 0 &&
      sf__cu_record(g->h2d_done[st], g->copy, e) == SLABFEED_OK)
    g->h2d_pending[st] = 1;
  l->stats.t_h2d += MPI_Wtime() - t0;
  SF_RANGE_POP();
  return e->status;
}

/* Position (epoch, step) of batch n of the current generation. */
static void position(const slabfeed_loader *l, const sf__gpu *g, uint64_t n,
                     uint64_t *epoch, uint64_t *step)
{
  const uint64_t s = g->start_step + n;
  *epoch = g->start_epoch + s / l->steps_per_epoch;
  *step = s % l->steps_per_epoch;
}

static slabfeed_status produce(slabfeed_loader *l, uint64_t n, sf__err *e)
{
  sf__gpu *g = l->gpu;
  const int slot = (int)(n % (uint64_t)g->K);
  uint64_t epoch, step;
  position(l, g, n, &epoch, &step);
  double t = MPI_Wtime();
  sf__loader_plan(l, epoch, step, slot);
  l->stats.t_plan += MPI_Wtime() - t;
  /* The slot's last batch must be released by the consumer's stream. */
  if (g->release_pending[slot]) {
    if (sf__cu_wait(g->compute, g->released[slot], e))
      return e->status;
    g->release_pending[slot] = 0;
  }
  for (int b = 0; b < l->cfg.batch && e->status == SLABFEED_OK; b++) {
    const int st = g->stage;
    g->stage = (g->stage + 1) % SF_STAGES;
    /* Staging st is free once the transform that last read it is done. */
    if (sf__cu_wait(g->copy, g->consumed[st], e) ||
        stage_crop(l, g, slot, b, st, e) ||
        sf__cu_record(g->staged[st], g->copy, e) ||
        sf__cu_wait(g->compute, g->staged[st], e))
      break;
    SF_RANGE_PUSH("transform");
    t = MPI_Wtime();
    const int32_t sym = l->sym[(size_t)slot * (size_t)l->cfg.batch + (size_t)b];
    for (int d = 0; d < l->ndsets && e->status == SLABFEED_OK; d++) {
      sf__kparams k;
      sf__kparams_make(&l->xf[d], sym, &k);
      char *out =
          (char *)g->slot[slot][d] + (size_t)b * (size_t)sf__sample_bytes(l, d);
      const cudaError_t rc =
          sf__transform_launch(&k, g->dstage[st][d], out, g->compute);
      if (rc != cudaSuccess)
        sf__cuda_fail(e, rc, "transform kernel launch");
      else
        sf__cu_launched("transform kernel", e);
    }
    l->stats.t_transform += MPI_Wtime() - t;
    SF_RANGE_POP();
    if (e->status == SLABFEED_OK)
      sf__cu_record(g->consumed[st], g->compute, e);
  }
  if (e->status == SLABFEED_OK)
    sf__cu_record(g->ready[slot], g->compute, e);
  return e->status;
}

static void *loader_thread(void *arg)
{
  slabfeed_loader *l = arg;
  sf__gpu *g = l->gpu;
  sf__err e;
  sf__err_clear(&e);
  if (sf__cu_set_device(g->device, &e) != SLABFEED_OK) {
    pthread_mutex_lock(&g->mu);
    g->err = e;
    g->failed = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return NULL;
  }
  for (;;) {
    pthread_mutex_lock(&g->mu);
    while (!g->stop && g->produced >= g->released_upto + (uint64_t)g->K)
      pthread_cond_wait(&g->cv, &g->mu);
    const uint64_t n = g->produced;
    const int stop = g->stop;
    pthread_mutex_unlock(&g->mu);
    if (stop)
      break;
    produce(l, n, &e);
    pthread_mutex_lock(&g->mu);
    if (e.status != SLABFEED_OK) {
      g->err = e;
      g->failed = 1;
    } else {
      g->produced = n + 1;
    }
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

slabfeed_status sf__gpu_next(slabfeed_loader *l, slabfeed_batch *out,
                             void *stream)
{
  sf__gpu *g = l->gpu;
  sf__err e;
  sf__err_clear(&e);
  cudaStream_t s = (cudaStream_t)stream;
  const uint64_t n = g->next;
  /* The caller's stream must live on the loader's device: events cannot
   * be recorded across devices. Checked once per new stream. */
  if (!g->have_last || s != g->last_stream) {
    int dev = -1;
    if (s != NULL && sf__cu_stream_device(s, &dev, &e) != SLABFEED_OK)
      return sf__loader_error(l, &e);
    if (s != NULL && dev != g->device) {
      sf__fail(
          &e, SLABFEED_ERR_ARG,
          "slabfeed_next: the stream belongs to device %d but the loader's "
          "batches live on device %d",
          dev, g->device);
      return sf__loader_error(l, &e);
    }
  }
  /* The previous batch is released once `s` gets past this point; the
   * producer waits for that before it writes the slot again. */
  if (g->have_last) {
    const uint64_t prev = (n - 1) % (uint64_t)g->K;
    if (sf__cu_record(g->released[prev], s, &e))
      return sf__loader_error(l, &e);
    g->release_pending[prev] = 1;
  }
  g->last_stream = s;
  g->have_last = 1;
  SF_RANGE_PUSH("wait");
  const double t0 = MPI_Wtime();
  pthread_mutex_lock(&g->mu);
  g->released_upto = n;
  pthread_cond_broadcast(&g->cv);
  if (g->threaded) {
    while (!g->failed && g->produced <= n)
      pthread_cond_wait(&g->cv, &g->mu);
  } else {
    while (!g->failed && g->produced < g->released_upto + (uint64_t)g->K) {
      if (produce(l, g->produced, &g->err) != SLABFEED_OK)
        g->failed = 1;
      else
        g->produced++;
    }
  }
  const int failed = g->failed;
  if (failed)
    e = g->err;
  pthread_mutex_unlock(&g->mu);
  l->stats.t_wait += MPI_Wtime() - t0;
  SF_RANGE_POP();
  if (failed)
    return sf__loader_error(l, &e);
  const int slot = (int)(n % (uint64_t)g->K);
  if (sf__cu_wait(s, g->ready[slot], &e))
    return sf__loader_error(l, &e);
  uint64_t epoch, step;
  position(l, g, n, &epoch, &step);
  sf__loader_describe(l, slot, g->slot[slot], epoch, step, out);
  out->ready_event = g->ready[slot];
  g->next = n + 1;
  for (int d = 0; d < l->ndsets; d++)
    l->stats.bytes_out += (uint64_t)(l->cfg.batch * sf__sample_bytes(l, d));
  l->stats.batches++;
  l->stats.samples += (uint64_t)l->cfg.batch;
  /* Keep the host-side position in step for slabfeed_seek/slabfeed_next
   * callers. */
  position(l, g, n + 1, &l->epoch, &l->step);
  return SLABFEED_OK;
}

slabfeed_status sf__gpu_seek(slabfeed_loader *l, uint64_t epoch, uint64_t step)
{
  sf__gpu *g = l->gpu;
  sf__err e;
  sf__err_clear(&e);
  stop_thread(g);
  if (g->failed) {
    snprintf(l->last_error, sizeof l->last_error, "%s", g->err.msg);
    return g->err.status;
  }
  /* Every slot produced so far is released once the consumer's stream
   * passes this point; the next generation waits on that. */
  if (g->have_last)
    for (int k = 0; k < g->K; k++) {
      if (sf__cu_record(g->released[k], g->last_stream, &e))
        return sf__loader_error(l, &e);
      g->release_pending[k] = 1;
    }
  g->start_epoch = epoch;
  g->start_step = step;
  g->produced = g->released_upto = g->next = 0;
  /* Batch numbers restart at 0; there is no previous batch to release. */
  g->have_last = 0;
  l->epoch = epoch;
  l->step = step;
  if (g->threaded) {
    if (pthread_create(&g->thread, NULL, loader_thread, l) != 0) {
      snprintf(l->last_error, sizeof l->last_error,
               "cannot restart the loader thread");
      return SLABFEED_ERR_NOMEM;
    }
    g->running = 1;
  }
  return SLABFEED_OK;
}

slabfeed_status sf__gpu_copy_to_host(slabfeed_loader *l, const void *src,
                                     size_t bytes, void *dst)
{
  sf__gpu *g = l->gpu;
  const char *p = src;
  for (int k = 0; k < g->K; k++)
    for (int d = 0; d < l->ndsets; d++) {
      const char *base = g->slot[k][d];
      const size_t size = (size_t)l->cfg.batch * (size_t)sf__sample_bytes(l, d);
      if (p < base || p + bytes > base + size)
        continue;
      sf__err e;
      sf__err_clear(&e);
      if (sf__cu_wait(g->aux, g->ready[k], &e) ||
          sf__cu_copy(dst, src, bytes, cudaMemcpyDeviceToHost, g->aux, &e) ||
          sf__cu_stream_sync(g->aux, &e))
        return sf__loader_error(l, &e);
      return SLABFEED_OK;
    }
  snprintf(l->last_error, sizeof l->last_error,
           "slabfeed_copy_to_host: the tensor is not a batch of this loader");
  return SLABFEED_ERR_ARG;
}
