/* The host back end: the caller's thread plans, gathers (memcpy from the
 * node window; pieces from other nodes requested ahead by fetch.c, up to
 * K batches in flight) and transforms each batch with the reference
 * transform into a ring of host batches. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "source/fetch.h"
#include "source/source.h"
#include "common/nvtx.h"
#include "common/sys.h"

struct sf__backend {
  sf__context ctx;
  float *staging[SF_MAX_DSETS]; /* one staged crop per dataset */
  void *ring[SF_MAX_DSETS];     /* K host batches per dataset */
  float *landing[SF_MAX_SLOTS]; /* K landing slots for remote pieces */
  sf__fetch fetch;
  sf__fetch_map map;    /* where the pieces of the batch in hand landed */
  int slot;             /* next ring slot */
  uint64_t n;           /* batch number of the next batch in the generation */
  uint64_t epoch, step; /* position of the next batch */
};

/* Landing slots are free once their batch is gathered: always, here. */
static int host_slot_free(void *arg, int slot, int block)
{
  (void)arg;
  (void)slot;
  (void)block;
  return 1;
}

static void host_close(sf__backend *h)
{
  if (h == NULL)
    return;
  /* After a failed settle transfers may still write into the landing
   * slots and use the requests: those are left allocated. */
  sf__err e;
  sf__err_clear(&e);
  const int settled = sf__fetch_settle(&h->fetch, &e) == SLABFEED_OK;
  if (settled)
    sf__fetch_close(&h->fetch);
  sf__fetch_map_free(&h->map);
  for (int d = 0; d < SF_MAX_DSETS; d++) {
    free(h->staging[d]);
    free(h->ring[d]);
  }
  for (int k = 0; k < SF_MAX_SLOTS && settled; k++)
    free(h->landing[k]);
  free(h);
}

/* Bytes of one staged crop and of the ring of dataset d. */
static void host_sizes(const sf__batch_plan *p, int d, size_t *stage,
                       size_t *ring)
{
  *stage = (size_t)sf__batch_stage_elems(p, d) * sizeof(float);
  *ring = (size_t)p->K * (size_t)p->B * (size_t)sf__batch_sample_bytes(p, d);
}

static uint64_t host_bytes(const sf__context *ctx)
{
  uint64_t total = 0;
  if (sf__fetch_needed(ctx->plan))
    total += (uint64_t)ctx->plan->K * sf__fetch_slot_bytes(ctx->plan);
  for (int d = 0; d < ctx->plan->ndsets; d++) {
    size_t stage, ring;
    host_sizes(ctx->plan, d, &stage, &ring);
    total += stage + ring;
  }
  return total;
}

static slabfeed_status host_open(const sf__context *ctx, sf__backend **out,
                                 sf__err *e)
{
  sf__backend *h = calloc(1, sizeof *h);
  *out = h;
  if (h == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the host loader");
  h->ctx = *ctx;
  /* The datasets' normalisations go with their transforms. */
  for (int d = 0; d < ctx->plan->ndsets; d++) {
    int n;
    const slabfeed_norm *norm = sf__config_norm(ctx->cfg, d, &n);
    sf__xform_set_norm(&ctx->plan->xf[d], n, norm);
  }
  const sf__batch_plan *p = ctx->plan;
  slabfeed_stats mem = {.staging_bytes = 0};
  for (int d = 0; d < p->ndsets; d++) {
    const size_t stage = (size_t)sf__batch_stage_elems(p, d) * sizeof(float);
    const size_t ring =
        (size_t)p->K * (size_t)p->B * (size_t)sf__batch_sample_bytes(p, d);
    h->staging[d] = malloc(stage);
    h->ring[d] = malloc(ring);
    if (h->staging[d] == NULL || h->ring[d] == NULL)
      return sf__fail(e, SLABFEED_ERR_NOMEM,
                      "cannot allocate %zu bytes of staging and host batches",
                      stage + ring);
    mem.staging_bytes += stage + ring;
  }
  if (sf__fetch_needed(p))
    for (int k = 0; k < p->K; k++) {
      h->landing[k] = malloc(sf__fetch_slot_bytes(p));
      if (h->landing[k] == NULL)
        return sf__fail(e, SLABFEED_ERR_NOMEM,
                        "cannot allocate %zu bytes of landing slots",
                        sf__fetch_slot_bytes(p));
      mem.staging_bytes += sf__fetch_slot_bytes(p);
    }
  sf__stats_add(ctx->stats, &mem);
  /* Collective (every rank is here): the engine's communicator. */
  if (sf__fetch_map_init(&h->map, p, e) != SLABFEED_OK)
    return e->status;
  return sf__fetch_open(&h->fetch, p, ctx->store, p->K, h->landing,
                        host_slot_free, h, e);
}

/* Collective when remote pieces move (every rank seeks and opens at the
 * same point): what is in flight is settled before the stream restarts. */
static slabfeed_status host_start(sf__backend *h, uint64_t epoch, uint64_t step,
                                  sf__err *e)
{
  if (sf__fetch_settle(&h->fetch, e) != SLABFEED_OK)
    return e->status;
  sf__fetch_begin(&h->fetch, epoch, step);
  h->n = 0;
  h->epoch = epoch;
  h->step = step;
  return SLABFEED_OK;
}

/* Gathers sample i of ring slot `slot` into the staged crops: node pieces
 * by memcpy, remote pieces from where they landed (landing slot n % K). */
static void gather(sf__backend *h, int slot, int i, slabfeed_stats *delta)
{
  sf__batch_plan *p = h->ctx.plan;
  sf__store *s = h->ctx.store;
  const int n = sf__batch_pieces(p, slot, i);
  for (int k = 0; k < n; k++) {
    const sf__piece *pc = &p->pieces[k];
    const sf__source *src = sf__source_of(s, pc);
    for (int d = 0; d < p->ndsets; d++) {
      const float *landed = src->fetched
                                ? h->landing[h->n % (uint64_t)p->K] +
                                      sf__fetch_map_at(&h->map, s, d, pc)
                                : NULL;
      /* The part of the piece this dataset takes (a target core: its
       * box inside the crop), read through the whole piece's view. */
      sf__piece part;
      sf__view v;
      if (sf__backend_part(p, s, src, d, pc, landed, &part, &v, delta))
        sf__gather_copy(&v, s->channels[d], &part, p->xf[d].ext, h->staging[d]);
    }
  }
}

static slabfeed_status host_next(sf__backend *h, void *stream,
                                 slabfeed_batch *out, sf__err *e)
{
  (void)stream;
  sf__batch_plan *p = h->ctx.plan;
  const int slot = h->slot;
  slabfeed_stats delta = {.batches = 1, .samples = (uint64_t)p->B};
  double t = sf__now();
  /* Remote pieces: up to K batches requested, this one complete, and
   * this rank's messages of it delivered (sf__fetch_serve says why).
   * Batch n uses landing slot n % K, as the ring. */
  if (sf__fetch_pump(&h->fetch, h->n + (uint64_t)p->K - 1, e) != SLABFEED_OK ||
      sf__fetch_wait(&h->fetch, h->n, e) != SLABFEED_OK ||
      sf__fetch_serve(&h->fetch, h->n, e) != SLABFEED_OK)
    return e->status;
  sf__fetch_take(&h->fetch, &delta);
  double now = sf__now();
  delta.t_wait = now - t;
  t = now;
  SF_RANGE_PUSH("plan");
  sf__batch_plan_slot(p, slot, h->epoch, h->step);
  if (h->fetch.active)
    sf__fetch_map_batch(&h->map, p, p->rank,
                        &p->origin[3 * (size_t)slot * (size_t)p->B]);
  SF_RANGE_POP();
  now = sf__now();
  delta.t_plan = now - t;
  void *data[SF_MAX_DSETS];
  for (int d = 0; d < p->ndsets; d++)
    data[d] = (char *)h->ring[d] + (size_t)slot * (size_t)p->B *
                                       (size_t)sf__batch_sample_bytes(p, d);
  for (int i = 0; i < p->B; i++) {
    t = now;
    gather(h, slot, i, &delta);
    now = sf__now();
    delta.t_gather += now - t;
    t = now;
    const int32_t g = sf__batch_symmetry(p, slot, i);
    for (int d = 0; d < p->ndsets; d++)
      sf__transform_aug(
          &p->xf[d], g, sf__batch_aug(p, slot, i, d), h->staging[d],
          (char *)data[d] + (size_t)i * (size_t)sf__batch_sample_bytes(p, d));
    now = sf__now();
    delta.t_transform += now - t;
  }
  for (int d = 0; d < p->ndsets; d++)
    delta.bytes_out += (uint64_t)p->B * (uint64_t)sf__batch_sample_bytes(p, d);
  sf__batch_describe(p, slot, data, h->epoch, h->step, out);
  sf__stats_add(h->ctx.stats, &delta);
  h->slot = (slot + 1) % p->K;
  h->n++;
  sf__batch_position(p, h->epoch, h->step, 1, &h->epoch, &h->step);
  return SLABFEED_OK;
}

static slabfeed_status host_copy_to_host(sf__backend *h,
                                         const slabfeed_tensor *t, size_t bytes,
                                         void *dst, sf__err *e)
{
  const sf__batch_plan *p = h->ctx.plan;
  for (int d = 0; d < p->ndsets; d++) {
    const char *base = h->ring[d], *q = t->data;
    const size_t size =
        (size_t)p->K * (size_t)p->B * (size_t)sf__batch_sample_bytes(p, d);
    if (q >= base && q + bytes <= base + size) {
      memcpy(dst, t->data, bytes);
      return SLABFEED_OK;
    }
  }
  return sf__fail(e, SLABFEED_ERR_ARG,
                  "slabfeed_copy_to_host: the tensor is not a batch of this "
                  "loader");
}

const sf__backend_ops sf__host_backend = {.name = "host",
                                          .host_bytes = host_bytes,
                                          .open = host_open,
                                          .start = host_start,
                                          .next = host_next,
                                          .copy_to_host = host_copy_to_host,
                                          .close = host_close};
