/* The back-end interface: how the loader facade (loader/loader.c) produces
 * batches without knowing where they live. A back end is chosen once at
 * open (host batches or device batches) and sees only a narrow context:
 * the options, the store, the batch plan and the statistics. Back ends
 * call down (batch plan, gather, store, transform), never up. */
#ifndef SF_BACKEND_H
#define SF_BACKEND_H

#include "plan/batch.h"
#include "common/stats.h"
#include "io/sink.h"
#include "source/source.h"

/* The part of piece pc that dataset d takes (all of it, or a target
 * core's box: sf__batch_piece_of) into *part and its view into *v (src's
 * view of the whole piece, its start moved to the part), accounted in
 * delta: the bytes copied, or for a fetched piece what came over MPI (the
 * whole piece). Returns 0 when d takes nothing of pc (*v then unset). */
static inline int sf__backend_part(const sf__batch_plan *p, const sf__store *s,
                                   const sf__source *src, int d,
                                   const sf__piece *pc, const float *landed,
                                   sf__piece *part, sf__view *v,
                                   slabfeed_stats *delta)
{
  int64_t skip[3];
  const int takes = sf__batch_piece_of(p, d, pc, part, skip);
  if (takes) {
    src->view(s, d, pc, landed, v);
    for (int a = 0; a < 3; a++)
      v->at[a] += skip[a];
  }
  if (src->fetched)
    sf__source_account(src, s, d, pc, delta);
  else if (takes)
    sf__source_count(
        src,
        (uint64_t)(s->channels[d] * part->n[0] * part->n[1] * part->n[2]) *
            sizeof(float),
        delta);
  return takes;
}

#define SF_MAX_SLOTS 64 /* deepest ring: the prefetch limit of the config */

typedef struct sf__backend sf__backend; /* defined by each back end */

/* What a back end may use; all of it outlives the back end. */
typedef struct sf__context {
  const sf__config *cfg;
  sf__store *store;
  sf__batch_plan *plan;
  sf__stats *stats;
  int thread_level; /* MPI_Query_thread of the process */
  void *early;      /* what prepare made (open takes it), or NULL */
} sf__context;

typedef struct sf__backend_ops {
  const char *name;
  /* Bytes of pageable host memory open will take (checked against the
   * node's available memory before open, so that an impossible request
   * fails there instead of meeting the OOM killer later). */
  uint64_t (*host_bytes)(const sf__context *ctx);
  /* Takes all memory and every resource the back end will need; nothing
   * after it allocates. Called on every rank at open; the facade agrees on
   * the outcome. On failure *out may be set and is then closed. */
  slabfeed_status (*open)(const sf__context *ctx, sf__backend **out,
                          sf__err *e);
  /* (Re)starts production at batch (epoch, step); batches handed out
   * before are void once their consumers pass. Called once after open and
   * at every seek. */
  slabfeed_status (*start)(sf__backend *b, uint64_t epoch, uint64_t step,
                           sf__err *e);
  /* Hands out the next batch in *out (a full struct of this library). */
  slabfeed_status (*next)(sf__backend *b, void *stream, slabfeed_batch *out,
                          sf__err *e);
  /* Copies tensor t of a live batch into host memory dst of `bytes`. */
  slabfeed_status (*copy_to_host)(sf__backend *b, const slabfeed_tensor *t,
                                  size_t bytes, void *dst, sf__err *e);
  /* Stops, waits for its own work, releases everything. NULL is a no-op. */
  void (*close)(sf__backend *b);
  /* Collective over the store's communicator, on every rank once open
   * succeeded everywhere and before the first start: where the slabs are
   * read from (0.8: residency), said in how (len bytes). NULL for a back
   * end that reads them where the store holds them. The facade agrees on
   * the outcome. */
  slabfeed_status (*reside)(sf__backend *b, char *how, size_t len, sf__err *e);
  /* Start-up work that can run beside the open's read (0.9: the CUDA
   * context of the rank's device), begun on a thread of its own at the
   * start of open: cfg the options, node_rank the rank's place among its
   * node's ranks (device local). Returns a handle for warm_join, or NULL
   * (nothing begun). Local; no MPI; failures are left to open to meet and
   * report. NULL: no such work. */
  void *(*warm)(const sf__config *cfg, int node_rank);
  /* Waits for the work warm began and releases the handle (NULL: no-op).
   * Called on every path out of open that follows warm. */
  void (*warm_join)(void *handle);
  /* 0.9: the read into the back end's own memory. Collective over the
   * store's communicator, on every rank once the store is open and before
   * its slabs are read (ctx->plan is NULL then). A back end that will
   * hold the slabs itself (residency device) may take the read over:
   * *sink is then what the read writes through (io/sink.h), the same on
   * every rank, else NULL (the read fills the host segments). What it made
   * is returned in *early (also on failure), which the facade hands to
   * open (ctx->early) and finally to drop. The facade agrees on the
   * outcome. NULL: no such step. */
  slabfeed_status (*prepare)(const sf__context *ctx, void **early,
                             sf__sink **sink, sf__err *e);
  /* Local, after the read on every rank whose prepare returned a sink,
   * whatever the read's outcome: the sink's writes are complete and what
   * only the read needed is released. */
  slabfeed_status (*prepare_end)(void *early, sf__err *e);
  /* Releases what open did not take of early (NULL: no-op); called by
   * every rank right after close, collective as close is. */
  void (*drop)(void *early, sf__store *s);
} sf__backend_ops;

/* Host batches: gathered and transformed on the calling thread (host.c). */
extern const sf__backend_ops sf__host_backend;

/* Device batches (gpu.c; gpu_none.c in builds without CUDA, whose open
 * fails with SLABFEED_ERR_UNSUPPORTED). */
extern const sf__backend_ops sf__gpu_backend;

#endif
