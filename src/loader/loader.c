/* The loader facade: slabfeed_open / next / seek / tell / close, the fork
 * registry, and the agreement of every collective stage of open. Where
 * batches are made is the back end's business (backend.h). */
#include "loader/loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "source/fetch.h"
#include "common/inject.h"
#include "common/nvtx.h"
#include "io/volume.h"
#include "common/sys.h"

/* Smallest caller structs the library accepts: through the fields every
 * version has had. */
#define SF_BATCH_MIN (offsetof(slabfeed_batch, input) + sizeof(slabfeed_tensor))
#define SF_STATS_MIN (offsetof(slabfeed_stats, samples) + sizeof(uint64_t))

/* ---- Fork safety ---------------------------------------------------------
 * Every live loader is on a list; the pthread_atfork child handler marks
 * them all forked, so that any call in the child fails cleanly instead of
 * touching MPI, CUDA or a dead loader thread. */

static pthread_mutex_t g_live_lock = PTHREAD_MUTEX_INITIALIZER;
static slabfeed_loader *g_live;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
  /* Single-threaded child: walk the list without the (possibly held) lock. */
  for (slabfeed_loader *l = g_live; l != NULL; l = l->next_live)
    l->forked = 1;
  pthread_mutex_init(&g_live_lock, NULL);
}

static void install_atfork(void)
{
  pthread_atfork(NULL, NULL, on_fork_child);
}

static void register_live(slabfeed_loader *l)
{
  pthread_once(&g_atfork_once, install_atfork);
  pthread_mutex_lock(&g_live_lock);
  l->next_live = g_live;
  g_live = l;
  pthread_mutex_unlock(&g_live_lock);
}

static void unregister_live(slabfeed_loader *l)
{
  pthread_mutex_lock(&g_live_lock);
  for (slabfeed_loader **p = &g_live; *p != NULL; p = &(*p)->next_live)
    if (*p == l) {
      *p = l->next_live;
      break;
    }
  pthread_mutex_unlock(&g_live_lock);
}

/* Records e as the loader's last error; returns its status. */
static slabfeed_status loader_error(slabfeed_loader *l, const sf__err *e)
{
  snprintf(l->last_error, sizeof l->last_error, "%s", e->msg);
  return e->status;
}

/* The status and message of a call in a forked child. */
static slabfeed_status forked_error(slabfeed_loader *l)
{
  snprintf(l->last_error, sizeof l->last_error,
           "this loader was opened in the parent process and the process has "
           "forked since: MPI windows, CUDA state and the loader thread do "
           "not survive fork(); open a new loader in the child (or do not "
           "fork: use threads)");
  return SLABFEED_ERR_FORKED;
}

/* ---- Open ------------------------------------------------------------------
 */

/* A local failure injected for tests at `stage` (inject.h). */
static void injected(const slabfeed_loader *l, const char *stage, sf__err *e)
{
  if (sf__inject(stage, l->rank))
    sf__fail(e, SLABFEED_ERR_IO, "injected failure at stage '%s' (test)",
             stage);
}

/* The back end's say before the read (backend.h, prepare): into *sink
 * where it takes the read over. Its start-up work goes on meanwhile (a
 * GPU's context is made once, whichever thread asks first). Agreed. */
static slabfeed_status prepare_read(slabfeed_loader *l, sf__sink **sink,
                                    sf__err *e)
{
  *sink = NULL;
  if (l->ops->prepare == NULL)
    return SLABFEED_OK;
  const sf__context ctx = {&l->cfg,   &l->store,       NULL,
                           &l->stats, l->thread_level, NULL};
  l->ops->prepare(&ctx, &l->early, sink, e);
  return sf__agree(l->comm, e);
}

/* Reads every dataset's slab into the store (or through the back end's
 * sink), then publishes the store (replicas and halos from their readers)
 * and records the placement. */
static slabfeed_status read_slabs(slabfeed_loader *l, sf__volume *v,
                                  sf__sink *sink, sf__err *e)
{
  const double t0 = sf__now();
  /* The segment's pages first, on several threads (touch_threads): a
   * read into unfaulted shared memory takes one fault per page on the
   * reading thread, at a fraction of the read's own rate
   * (docs/PERFORMANCE.md). Counted in the read's time. Not where the
   * slab goes through a sink: those pages are never touched. */
  const sf__store *ss = &l->store;
  const int touch = sf__touch_threads(l->cfg.pub.touch_threads, ss->node_size);
  /* Huge pages asked for (or refused) before the first touch. */
  const int huge = l->cfg.pub.huge_pages == SLABFEED_HUGE_AUTO;
  if (sink == NULL && e->status == SLABFEED_OK)
    sf__huge_advise(ss->base, (size_t)ss->bytes, huge);
  /* Not segment files of the library's own (shared_window file, or
   * auto's) that the direct read will write as files, unfaulted: the
   * word agreed before the store was made (open_store). */
  l->as_file = sink == NULL && ss->fileback >= 0 && ss->file_read;
  const int populated = touch > 1 && sink == NULL && !l->as_file;
  if (populated && e->status == SLABFEED_OK)
    sf__populate(ss->base, (size_t)ss->bytes, touch);
  /* Left unfaulted: a field pread cannot take is populated before MPI-IO
   * writes it (sf__volume_read). */
  v->populate_mpiio = l->as_file ? touch : 0;
  /* The read's outcome is agreed; the sink's end is local, so publish
   * (collective) runs after an agreed read whatever it says, carrying a
   * failure of the sink's last copies to the agreement below. */
  const slabfeed_status got = sf__volume_read(v, &l->store, sink, e);
  /* What the read did (fields pread cannot read went through MPI-IO,
   * into pages populated first where the rank has several threads): the
   * placement line says it. */
  l->file_mpiio = l->as_file ? v->read_mpiio : 0;
  l->mpiio_populated =
      l->file_mpiio > 0 ? v->read_populated == v->read_mpiio : populated;
  l->as_file = l->as_file && v->read_direct > 0 && v->read_mpiio == 0;
  if (sink != NULL)
    l->ops->prepare_end(l->early, e);
  if (got == SLABFEED_OK)
    sf__store_publish(&l->store, sink == NULL, e);
  snprintf(l->read_how, sizeof l->read_how, "%s%s", v->read_how,
           sink != NULL ? ", straight to GPU memory" : "");
  if (sink == NULL && ss->base != NULL && ss->bytes > 0)
    sf__huge_report(ss->base, (size_t)ss->bytes, huge, l->huge_how,
                    sizeof l->huge_how);
  const sf__store *st = &l->store;
  const slabfeed_stats read = {.t_read = sf__now() - t0,
                               .slab_bytes = (uint64_t)st->bytes,
                               .nodes = st->nodes,
                               .group_nodes = st->L.G,
                               .groups = st->L.ng,
                               .group = st->L.groupof[st->rank],
                               .node_budget = st->budget,
                               .node_store_bytes = (uint64_t)st->node_bytes,
                               .replica_bytes = st->fill_remote};
  sf__stats_add(&l->stats, &read);
  return sf__agree(l->comm, e);
}

/* The back ends of all ranks of this node together must fit in the
 * node's available memory: malloc succeeds lazily (overcommit), so an
 * impossible request would otherwise end in the OOM killer at the first
 * batches instead of an error here. */
static slabfeed_status check_host_memory(slabfeed_loader *l,
                                         const sf__context *ctx, sf__err *e)
{
  uint64_t mine = l->ops->host_bytes != NULL ? l->ops->host_bytes(ctx) : 0;
  uint64_t node = 0;
  SF_MPI_GOTO(
      MPI_Allreduce(&mine, &node, 1, MPI_UINT64_T, MPI_SUM, l->store.node), e,
      out);
  const uint64_t avail = sf__meminfo("MemAvailable");
  if (avail > 0 && node > avail - avail / 10)
    sf__fail(e, SLABFEED_ERR_NOMEM,
             "the loaders of this node need %.2f GB of host memory for "
             "batches and staging (this rank %.2f GB) but the node has "
             "%.2f GB available: use a smaller batch, crop or prefetch "
             "depth",
             (double)node / 1e9, (double)mine / 1e9, (double)avail / 1e9);
out:
  return e->status;
}

/* A training dataset of several volumes stacked without the volumes of
 * weight 0 (held out): they take no memory and are never read. Local,
 * the same on every rank (the options and the list are). */
static slabfeed_status stack_training(const slabfeed_loader *l, sf__volume *v,
                                      sf__err *e)
{
  if (v->suite.n < 2 || l->cfg.pub.tile > 0)
    return SLABFEED_OK;
  uint64_t *w = malloc((size_t)v->suite.n * sizeof *w);
  if (w == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "volume weights");
  if (sf__batch_volume_weights(&l->cfg, &v->suite, w, e) == SLABFEED_OK)
    sf__volume_stack(v, w);
  injected(l, "weights", e);
  free(w);
  return e->status;
}

/* The planes where the stacked volumes that hold planes begin (the node
 * cuts of locality over several volumes): *n of them in *cuts, which the
 * caller frees. Local. */
static slabfeed_status volume_starts(const sf__suite *s, int64_t **cuts, int *n,
                                     sf__err *e)
{
  *n = 0;
  *cuts = malloc((size_t)s->n * sizeof **cuts);
  if (*cuts == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "volume starts");
  for (int i = 0; i < s->n; i++)
    if (s->z0[i + 1] > s->z0[i])
      (*cuts)[(*n)++] = s->z0[i];
  return SLABFEED_OK;
}

/* The store over the stacked planes of v, then its slabs from the file. */
static void open_store(slabfeed_loader *l, sf__volume *v,
                       const slabfeed_dataset_info info[2], sf__err *e)
{
  const int64_t ch[2] = {info[0].channels, info[1].channels};
  const slabfeed_config *p = &l->cfg.pub;
  /* The store's planes are on the coarsest grid (sf__config_planes_crop):
   * a coarser target's makes the input's scale g. */
  const int64_t g = sf__config_coarsen(&l->cfg);
  int64_t pcrop[3];
  sf__config_planes_crop(&l->cfg, pcrop);
  sf__store_opts o = {l->cfg.rank_per_node,
                      l->cfg.group_nodes,
                      p->node_memory,
                      p->locality,
                      (p->halo + g - 1) / g, /* on the planes' grid */
                      pcrop[0],
                      0,
                      NULL,
                      v->suite.n,
                      v->suite.z0,
                      (const int64_t(*)[3])v->suite.shape,
                      {g, p->scale_factor}, /* each dataset's grid */
                      (int)p->shared_window,
                      0};
  /* Locality over several volumes keeps each volume on one node. */
  int64_t *cuts = NULL;
  if (p->locality && v->suite.n > 1 && p->tile == 0) {
    volume_starts(&v->suite, &cuts, &o.ncuts, e);
    injected(l, "cuts", e);
  }
  o.cuts = cuts;
  /* Whether the open's read will be direct: rank 0's word, as the read
   * mode's (sf__volume_read), so that auto's files are agreed; not where
   * a dataset's type rules pread out (float64: HDF5 converts it). */
  char fs[64];
  int types = 1;
  for (int k = 0; k < l->cfg.ndsets && k < 2; k++)
    types = types && (info[k].type_bits == 16 || info[k].type_bits == 32);
  o.file_read = l->rank == 0 && v->suite.n > 0 && types &&
                sf__volume_direct_wanted(v, v->suite.path[0], fs, sizeof fs);
  const int rc = MPI_Bcast(&o.file_read, 1, MPI_INT, 0, l->comm);
  if (rc != MPI_SUCCESS && e->status == SLABFEED_OK)
    sf__fail_mpi(e, rc, "MPI_Bcast (the read's way)");
  if (sf__agree(l->comm, e) == SLABFEED_OK &&
      sf__store_open(&l->store, l->comm, l->cfg.ndsets, ch, info[0].shape, &o,
                     e) != SLABFEED_OK &&
      e->status == SLABFEED_ERR_ARG && g > 1) {
    /* The placement counts planes of the coarse grid: say so. */
    char why[SF_ERRLEN];
    snprintf(why, sizeof why, "%s", e->msg);
    sf__err_clear(e);
    sf__fail(e, SLABFEED_ERR_ARG,
             "%.640s (planes of the target's grid: coarsen_factor %lld; the "
             "input has %lld x as many)",
             why, (long long)g, (long long)g);
  }
  if (e->status == SLABFEED_OK) {
    sf__fetch_selfcheck(&l->store,
                        l->cfg.remote_get ? SF__FETCH_GET : SF__FETCH_SEND,
                        p->locality, e);
    sf__sink *sink = NULL;
    if (sf__agree(l->comm, e) == SLABFEED_OK &&
        prepare_read(l, &sink, e) == SLABFEED_OK)
      read_slabs(l, v, sink, e);
  }
  free(cuts);
}

/* The rank's place among the ranks of its node in l->comm (device local);
 * collective over l->comm, called by every rank whatever its device. */
static int node_rank_of(const slabfeed_loader *l)
{
  MPI_Comm node = MPI_COMM_NULL;
  int r = 0;
  if (MPI_Comm_split_type(l->comm, MPI_COMM_TYPE_SHARED, l->rank, MPI_INFO_NULL,
                          &node) == MPI_SUCCESS &&
      node != MPI_COMM_NULL) {
    MPI_Comm_rank(node, &r);
    MPI_Comm_free(&node);
  }
  /* Every rank its own node (rank_per_node): the store's node is the
   * rank alone, so device local is device 0 there (gpu_open). */
  return l->cfg.rank_per_node ? 0 : r;
}

/* The volume's open, its store and slabs, and the plan, each agreed on by
 * all ranks (the outcome is every rank's). */
static slabfeed_status read_stages(slabfeed_loader *l, sf__err *e)
{
  sf__volume v;
  slabfeed_dataset_info info[2];
  memset(info, 0, sizeof info);
  if (sf__volume_open(&v, l->comm, l->rank, &l->cfg, e) == SLABFEED_OK &&
      sf__config_resolve_fields(&l->cfg,
                                (const int64_t(*)[SF_MAX_FIELDS])v.fchannels,
                                NULL, e) == SLABFEED_OK &&
      (stack_training(l, &v, e), sf__suite_copy(&l->suite, &v.suite, e),
       sf__agree(l->comm, e)) == SLABFEED_OK) {
    memcpy(info, v.info, sizeof info);
    open_store(l, &v, info, e);
  }
  sf__volume_close(&v);
  if (e->status != SLABFEED_OK)
    return e->status; /* agreed by the stage that failed */
  sf__batch_init(&l->plan, &l->cfg, info, &l->suite, &l->store, e);
  injected(l, "plan", e);
  return sf__agree(l->comm, e);
}

/* The back end over the plan: its open, where crops are read from, and
 * its start, each agreed on by all ranks. */
static slabfeed_status back_end_stages(slabfeed_loader *l, sf__err *e)
{
  const sf__context ctx = {&l->cfg,   &l->store,       &l->plan,
                           &l->stats, l->thread_level, l->early};
  if (check_host_memory(l, &ctx, e) == SLABFEED_OK)
    l->ops->open(&ctx, &l->backend, e);
  injected(l, "backend", e);
  if (sf__agree(l->comm, e) == SLABFEED_OK && l->ops->reside != NULL) {
    l->ops->reside(l->backend, l->reside_how, sizeof l->reside_how, e);
    sf__agree(l->comm, e);
  }
  if (e->status == SLABFEED_OK)
    l->ops->start(l->backend, 0, 0, e);
  return sf__agree(l->comm, e);
}

/* Store, slabs, plan and back end. The back end's start-up work (warm)
 * runs beside the reads and is joined before the back end opens. */
static slabfeed_status open_stages(slabfeed_loader *l, sf__err *e)
{
  l->ops = l->cfg.pub.device != -1 ? &sf__gpu_backend : &sf__host_backend;
  const int node_rank = node_rank_of(l);
  void *warm = l->ops->warm != NULL ? l->ops->warm(&l->cfg, node_rank) : NULL;
  const slabfeed_status read = read_stages(l, e);
  const double t_read = sf__now();
  if (l->ops->warm_join != NULL)
    l->ops->warm_join(warm);
  const double t_warm = sf__now();
  if (read == SLABFEED_OK)
    back_end_stages(l, e);
  const slabfeed_stats spent = {
      .t_open_context = l->ops->warm_join != NULL ? t_warm - t_read : 0,
      .t_open_backend = sf__now() - t_warm};
  sf__stats_add(&l->stats, &spent);
  return e->status;
}

/* Releases what open took; safe on a partly opened loader. */
static void free_loader(slabfeed_loader *l)
{
  if (l->ops != NULL && l->backend != NULL)
    l->ops->close(l->backend);
  if (l->ops != NULL && l->ops->drop != NULL)
    l->ops->drop(l->early, &l->store);
  l->early = NULL;
  sf__batch_free(&l->plan);
  sf__suite_free(&l->suite);
  sf__store_close(&l->store);
  sf__stats_destroy(&l->stats);
  if (l->comm != MPI_COMM_NULL)
    MPI_Comm_free(&l->comm);
  free(l);
}

slabfeed_status slabfeed_open(MPI_Comm comm, const slabfeed_config *cfg,
                              slabfeed_loader **out, char *errbuf,
                              size_t errlen)
{
  const double t0 = sf__now();
  sf__err e;
  sf__err_clear(&e);
  if (out != NULL)
    *out = NULL;
  slabfeed_loader *l = calloc(1, sizeof *l);
  if (l == NULL)
    sf__fail(&e, SLABFEED_ERR_NOMEM, "cannot allocate the loader");
  else if (out == NULL || cfg == NULL)
    sf__fail(&e, SLABFEED_ERR_ARG, "slabfeed_open: cfg and out are required");
  else
    sf__config_import(&l->cfg, cfg, &e);
  /* The caller's communicator is used only for this agreement and the dup. */
  if (sf__agree(comm, &e) != SLABFEED_OK) {
    free(l);
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  sf__stats_init(&l->stats);
  const int rc = MPI_Comm_dup(comm, &l->comm);
  if (rc != MPI_SUCCESS) {
    l->comm = MPI_COMM_NULL;
    sf__fail_mpi(&e, rc, "MPI_Comm_dup");
  } else {
    MPI_Comm_set_errhandler(l->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(l->comm, &l->rank);
    MPI_Query_thread(&l->thread_level);
  }
  MPI_Comm agree_on = l->comm != MPI_COMM_NULL ? l->comm : comm;
  if (sf__config_agree(agree_on, &l->cfg, &e) == SLABFEED_OK)
    open_stages(l, &e);
  if (e.status != SLABFEED_OK) {
    free_loader(l);
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  const slabfeed_stats spent = {.t_open = sf__now() - t0};
  sf__stats_add(&l->stats, &spent);
  register_live(l);
  *out = l;
  sf__err_copy(&e, errbuf, errlen);
  return SLABFEED_OK;
}

/* ---- Batches ----------------------------------------------------------------
 */

slabfeed_status slabfeed_next(slabfeed_loader *l, slabfeed_batch *out,
                              void *stream)
{
  if (l == NULL || out == NULL)
    return SLABFEED_ERR_ARG;
  if (l->forked)
    return forked_error(l);
  l->last_error[0] = '\0';
  sf__err e;
  sf__err_clear(&e);
  if (out->size < SF_BATCH_MIN) {
    sf__fail(&e, SLABFEED_ERR_ARG,
             "slabfeed_next: batch size %zu is too small (at least %zu): "
             "declare it with SLABFEED_BATCH_INIT",
             out->size, (size_t)SF_BATCH_MIN);
    return loader_error(l, &e);
  }
  slabfeed_batch b;
  if (l->ops->next(l->backend, stream, &b, &e) != SLABFEED_OK)
    return loader_error(l, &e);
  sf__sized_write(out, &b, sizeof b, SF_BATCH_MIN);
  sf__batch_position(&l->plan, b.epoch, b.step, 1, &l->epoch, &l->step);
  return SLABFEED_OK;
}

slabfeed_status slabfeed_seek(slabfeed_loader *l, uint64_t epoch, uint64_t step)
{
  if (l == NULL)
    return SLABFEED_ERR_ARG;
  if (l->forked)
    return forked_error(l);
  sf__err e;
  sf__err_clear(&e);
  if (step >= l->plan.steps_per_epoch) {
    sf__fail(&e, SLABFEED_ERR_ARG,
             "slabfeed_seek: step %llu is past the end of the epoch (%llu "
             "steps)",
             (unsigned long long)step,
             (unsigned long long)l->plan.steps_per_epoch);
    return loader_error(l, &e);
  }
  if (l->ops->start(l->backend, epoch, step, &e) != SLABFEED_OK)
    return loader_error(l, &e);
  l->epoch = epoch;
  l->step = step;
  return SLABFEED_OK;
}

slabfeed_status slabfeed_tell(const slabfeed_loader *l, uint64_t *epoch,
                              uint64_t *step)
{
  if (l == NULL || epoch == NULL || step == NULL)
    return SLABFEED_ERR_ARG;
  if (l->forked)
    return SLABFEED_ERR_FORKED;
  *epoch = l->epoch;
  *step = l->step;
  return SLABFEED_OK;
}

slabfeed_status slabfeed_stats_get(const slabfeed_loader *l,
                                   slabfeed_stats *out)
{
  if (l == NULL || out == NULL || out->size < SF_STATS_MIN)
    return SLABFEED_ERR_ARG;
  if (l->forked)
    return SLABFEED_ERR_FORKED;
  slabfeed_stats s;
  sf__stats_read((sf__stats *)&l->stats, &s);
  sf__sized_write(out, &s, sizeof s, SF_STATS_MIN);
  return SLABFEED_OK;
}

slabfeed_status slabfeed_loader_config(const slabfeed_loader *l,
                                       slabfeed_config *out)
{
  if (l == NULL || out == NULL || out->size < sizeof(size_t) + sizeof(char *))
    return SLABFEED_ERR_ARG;
  const size_t size = out->size;
  memcpy(out, &l->cfg.pub, size < sizeof l->cfg.pub ? size : sizeof l->cfg.pub);
  out->size = size;
  return SLABFEED_OK;
}

int slabfeed_volume_count(const slabfeed_loader *l)
{
  return l != NULL ? l->suite.n : 0;
}

slabfeed_status slabfeed_volume_info(const slabfeed_loader *l, int i,
                                     char *path, size_t len, int64_t shape[3])
{
  if (l == NULL || i < 0 || i >= l->suite.n)
    return SLABFEED_ERR_ARG;
  if (path != NULL && len > 0)
    snprintf(path, len, "%s", l->suite.path[i]);
  /* The suite's boxes are on the planes' grid; the input's is g x. */
  for (int a = 0; shape != NULL && a < 3; a++)
    shape[a] = sf__config_coarsen(&l->cfg) * l->suite.shape[i][a];
  return SLABFEED_OK;
}

int slabfeed_volume_params(const slabfeed_loader *l, int i, float *values,
                           int n)
{
  if (l == NULL || i < 0 || i >= l->suite.n || (n > 0 && values == NULL))
    return -1;
  const int K = l->suite.nparam;
  for (int k = 0; k < K && k < n; k++)
    values[k] = l->suite.param[(size_t)i * (size_t)K + (size_t)k];
  return K;
}

slabfeed_status slabfeed_placement(const slabfeed_loader *l, char *buf,
                                   size_t len)
{
  if (l == NULL || buf == NULL || len == 0)
    return SLABFEED_ERR_ARG;
  if (l->forked)
    return SLABFEED_ERR_FORKED;
  const sf__store *s = &l->store;
  const sf__placement *L = &s->L;
  char groups[64];
  if (L->N % L->ng != 0)
    snprintf(groups, sizeof groups, "%d or %d nodes", L->G, L->G + 1);
  else
    snprintf(groups, sizeof groups, "%d node%s", L->G, L->G == 1 ? "" : "s");
  const char *how = l->plan.locality ? "none cross nodes (locality mode)"
                    : !sf__fetch_needed(&l->plan) ? "none cross nodes"
                    : !l->plan.remote_get
                        ? "fetched ahead, one message per holder and batch"
                    : sf__fetch_get_flushes()
                        ? "fetched ahead, one MPI_Get per piece (completed by "
                          "a flush)"
                        : "fetched ahead, one MPI_Rget per piece";
  snprintf(buf, len,
           "placement: %d node%s of %d rank%s in %d group%s of %s, "
           "each group holding the whole volume sharded over its ranks; "
           "slab store %.2f GB on the fullest node (budget %.2f GB per "
           "node%s); %.2f GB replicated over MPI at open by this rank; "
           "crop pieces from other nodes: %s",
           L->N, L->N == 1 ? "" : "s", s->size, s->size == 1 ? "" : "s", L->ng,
           L->ng == 1 ? "" : "s", groups, (double)s->node_bytes / 1e9,
           s->budget == UINT64_MAX ? 0.0 : (double)s->budget / 1e9,
           (uint64_t)s->node_bytes > s->budget ? ", exceeded: no smaller "
                                                 "group fits"
                                               : "",
           (double)s->fill_remote / 1e9, how);
  size_t used = strlen(buf);
  if (l->read_how[0] != '\0' && used + 1 < len) {
    const char *which = sf__store_files_option(s);
    const char *win =
        s->n_shm > 1 ? "a window per rank" : "one window for the node";
    char mem[224];
    if (l->as_file)
      snprintf(mem, sizeof mem,
               "files of each rank's own (%d on this rank), written as files "
               "by the direct read (%s)",
               s->n_parts, which);
    else if (s->files) {
      /* Read through MPI-IO, whole or some fields: into pages populated
       * first (the whole segment, or those fields' channels) where the
       * rank has several threads, else faulted one by one as it wrote. */
      char fields[48] = "";
      if (l->file_mpiio > 0)
        snprintf(fields, sizeof fields, " (%d field%s)", l->file_mpiio,
                 l->file_mpiio == 1 ? "" : "s");
      snprintf(mem, sizeof mem,
               "files of each rank's own (%d on this rank, %s; read through "
               "MPI-IO%s, %s)",
               s->n_parts, which, fields,
               l->mpiio_populated ? "into pages populated first"
                                  : "their pages faulted as it wrote them");
    } else if (s->files_auto && s->files_need > 0)
      snprintf(mem, sizeof mem,
               "%s (not files: the slabs need %.2f GB of /dev/shm, which has "
               "%.2f GB free)",
               win, s->files_need, s->files_have);
    else
      snprintf(mem, sizeof mem, "%s", win);
    snprintf(buf + used, len - used, "; slab reads: %s; shared memory: %s",
             l->read_how, mem);
    used = strlen(buf);
  }
  if (l->huge_how[0] != '\0' && used + 1 < len) {
    snprintf(buf + used, len - used, ", %s", l->huge_how);
    used = strlen(buf);
  }
  if (l->reside_how[0] != '\0' && used + 1 < len) {
    snprintf(buf + used, len - used, "; crops read from %s", l->reside_how);
    used = strlen(buf);
  }
  if (l->plan.locality && l->suite.n > 1 && used + 1 < len) {
    const int64_t a = L->reach0[s->rank], n = L->reach[s->rank];
    snprintf(buf + used, len - used,
             "; whole volumes per node, this rank's node holds volumes "
             "%d..%d of %d",
             sf__suite_of(&l->suite, a), sf__suite_of(&l->suite, a + n - 1),
             l->suite.n);
  }
  return SLABFEED_OK;
}

const char *slabfeed_last_error(const slabfeed_loader *l)
{
  return l == NULL ? "" : l->last_error;
}

uint64_t slabfeed_steps_per_epoch(const slabfeed_loader *l)
{
  return l == NULL ? 0 : l->plan.steps_per_epoch;
}

slabfeed_status slabfeed_copy_to_host(slabfeed_loader *l,
                                      const slabfeed_tensor *t, void *dst)
{
  if (l == NULL || t == NULL || dst == NULL || t->data == NULL)
    return SLABFEED_ERR_ARG;
  if (l->forked)
    return forked_error(l);
  size_t bytes = slabfeed_dtype_size(t->dtype);
  for (int a = 0; a < t->ndim && a < 5; a++)
    bytes *= (size_t)t->shape[a];
  sf__err e;
  sf__err_clear(&e);
  if (l->ops->copy_to_host(l->backend, t, bytes, dst, &e) != SLABFEED_OK)
    return loader_error(l, &e);
  return SLABFEED_OK;
}

void slabfeed_close(slabfeed_loader *l)
{
  if (l == NULL || l->forked)
    return;
  unregister_live(l);
  free_loader(l);
}
