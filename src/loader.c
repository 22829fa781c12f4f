/* sf_open / sf_next / sf_seek / sf_close and the host (CPU) path. */
#include "loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "geometry.h"
#include "h5slab.h"
#include "nvtx.h"
#include "pipeline.h"
#include "symmetry.h"

/* ---- Fork safety ---------------------------------------------------------
 * Every live loader is on a list; the pthread_atfork child handler marks
 * them all forked, so that any call in the child fails cleanly instead of
 * touching MPI, CUDA or a dead loader thread. */

static pthread_mutex_t g_live_lock = PTHREAD_MUTEX_INITIALIZER;
static sf_loader *g_live;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
  /* Single-threaded child: walk the list without the (possibly held) lock. */
  for (sf_loader *l = g_live; l != NULL; l = l->next_live)
    l->forked = 1;
  pthread_mutex_init(&g_live_lock, NULL);
}

static void install_atfork(void)
{
  pthread_atfork(NULL, NULL, on_fork_child);
}

static void register_live(sf_loader *l)
{
  pthread_once(&g_atfork_once, install_atfork);
  pthread_mutex_lock(&g_live_lock);
  l->next_live = g_live;
  g_live = l;
  pthread_mutex_unlock(&g_live_lock);
}

static void unregister_live(sf_loader *l)
{
  pthread_mutex_lock(&g_live_lock);
  for (sf_loader **p = &g_live; *p != NULL; p = &(*p)->next_live)
    if (*p == l) {
      *p = l->next_live;
      break;
    }
  pthread_mutex_unlock(&g_live_lock);
}

static sf_status forked_error(sf_loader *l)
{
  snprintf(l->last_error, sizeof l->last_error,
           "this loader was opened in the parent process and the process has "
           "forked since: MPI windows, CUDA state and the loader thread do "
           "not survive fork(); open a new loader in the child (or do not "
           "fork: use threads)");
  return SF_ERR_FORKED;
}

/* ---- Configuration --------------------------------------------------------
 */

void sf_config_init(sf_config *cfg)
{
  memset(cfg, 0, sizeof *cfg);
  cfg->layout = SF_LAYOUT_AUTO;
  cfg->crop[0] = cfg->crop[1] = cfg->crop[2] = 64;
  cfg->batch = 1;
  cfg->symmetries = SF_SYM_ALL;
  cfg->dtype = SF_DTYPE_F32;
  cfg->out_layout = SF_OUT_NCDHW;
  cfg->device = -1;
  cfg->prefetch = 2;
  cfg->rank_per_node = -1;
}

/* Checks of the options alone (no file needed). */
static sf_status check_config(const sf_config *c, sf_err *e)
{
  if (c->path == NULL || c->path[0] == '\0')
    return sf_fail(e, SF_ERR_ARG, "config: path (the HDF5 file) is required");
  if (strlen(c->path) >= 4096)
    return sf_fail(e, SF_ERR_ARG, "config: path is longer than 4095 bytes");
  if (c->input == NULL || c->input[0] == '\0')
    return sf_fail(e, SF_ERR_ARG,
                   "config: input (the dataset name) is required");
  if (strlen(c->input) >= SF_NAME_MAX ||
      (c->target != NULL && strlen(c->target) >= SF_NAME_MAX))
    return sf_fail(e, SF_ERR_ARG,
                   "config: dataset names are limited to %d bytes",
                   SF_NAME_MAX - 1);
  if ((unsigned)c->layout > SF_LAYOUT_CL)
    return sf_fail(e, SF_ERR_ARG, "config: layout %d is not auto, cf or cl",
                   (int)c->layout);
  if (c->batch < 1)
    return sf_fail(e, SF_ERR_ARG, "config: batch is %d; it must be >= 1",
                   c->batch);
  if (c->prefetch < 1)
    return sf_fail(e, SF_ERR_ARG,
                   "config: prefetch depth is %d; it must be >= 1",
                   c->prefetch);
  if (c->prefetch > 64)
    return sf_fail(e, SF_ERR_ARG, "config: prefetch depth %d exceeds 64",
                   c->prefetch);
  for (int a = 0; a < 3; a++)
    if (c->crop[a] < 1)
      return sf_fail(e, SF_ERR_ARG,
                     "config: crop extent %lld on axis %d must be >= 1",
                     (long long)c->crop[a], a);
  if ((unsigned)c->symmetries > SF_SYM_NONE)
    return sf_fail(e, SF_ERR_ARG,
                   "config: symmetries %d is not all, rotations or none",
                   (int)c->symmetries);
  if (c->symmetries != SF_SYM_NONE &&
      (c->crop[0] != c->crop[1] || c->crop[0] != c->crop[2]))
    return sf_fail(e, SF_ERR_ARG,
                   "config: crop %lldx%lldx%lld is not cubic; symmetries other "
                   "than 'none' need a cubic crop",
                   (long long)c->crop[0], (long long)c->crop[1],
                   (long long)c->crop[2]);
  if ((unsigned)c->dtype > SF_DTYPE_BF16 ||
      (unsigned)c->out_layout > SF_OUT_NDHWC)
    return sf_fail(e, SF_ERR_ARG, "config: unknown dtype or output layout");
  if (c->halo < 0)
    return sf_fail(e, SF_ERR_ARG, "config: halo %d must be >= 0", c->halo);
  if (c->n_input_vectors < 0 || c->n_input_vectors > SF_MAX_VECTORS ||
      c->n_target_vectors < 0 || c->n_target_vectors > SF_MAX_VECTORS)
    return sf_fail(e, SF_ERR_ARG,
                   "config: at most %d vector groups per dataset",
                   SF_MAX_VECTORS);
  if (c->n_target_vectors > 0 && c->target == NULL)
    return sf_fail(e, SF_ERR_ARG,
                   "config: target vector groups without a target dataset");
  if (c->device < -1)
    return sf_fail(e, SF_ERR_ARG, "config: device %d (use -1 for host batches)",
                   c->device);
  return SF_OK;
}

/* Vector groups of a dataset must name distinct channels in [0, C). */
static sf_status check_vectors(const char *what, int n, const int (*g)[3],
                               int64_t C, sf_err *e)
{
  int used[64] = {0};
  for (int v = 0; v < n; v++)
    for (int a = 0; a < 3; a++) {
      const int k = g[v][a];
      if (k < 0 || k >= C)
        return sf_fail(e, SF_ERR_ARG,
                       "config: %s vector group %d names channel %d, but the "
                       "dataset has channels 0..%lld",
                       what, v, k, (long long)C - 1);
      if (used[k]++)
        return sf_fail(e, SF_ERR_ARG,
                       "config: %s vector channel %d is used twice", what, k);
    }
  return SF_OK;
}

/* FNV-1a over the options, so that ranks can compare them. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

static uint64_t config_hash(const sf_config *c)
{
  uint64_t h = 0xcbf29ce484222325ULL;
  h = fnv(h, c->path, strlen(c->path) + 1);
  h = fnv(h, c->input, strlen(c->input) + 1);
  h = c->target ? fnv(h, c->target, strlen(c->target) + 1) : fnv(h, "", 1);
  const int64_t nums[] = {c->layout,
                          c->crop[0],
                          c->crop[1],
                          c->crop[2],
                          c->batch,
                          (int64_t)c->seed,
                          c->symmetries,
                          c->dtype,
                          c->out_layout,
                          c->prefetch,
                          c->halo,
                          c->n_input_vectors,
                          c->n_target_vectors,
                          (int64_t)c->steps_per_epoch,
                          c->device < 0 ? -1 : 0};
  h = fnv(h, nums, sizeof nums);
  h = fnv(h, c->input_vectors, sizeof(int) * 3 * (size_t)c->n_input_vectors);
  return fnv(h, c->target_vectors,
             sizeof(int) * 3 * (size_t)c->n_target_vectors);
}

static sf_status same_config_everywhere(MPI_Comm comm, const sf_config *c,
                                        sf_err *e)
{
  const uint64_t h = config_hash(c);
  uint64_t lo = 0, hi = 0;
  SF_MPI_GOTO(MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, comm), e, out);
  SF_MPI_GOTO(MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, comm), e, out);
  if (lo != hi)
    sf_fail(e, SF_ERR_ARG,
            "config: the options differ between ranks (all ranks must pass "
            "the same sf_config, device aside)");
out:
  return e->status;
}

static int resolve_rank_per_node(const sf_config *c)
{
  if (c->rank_per_node == 0 || c->rank_per_node == 1)
    return c->rank_per_node;
  const char *env = getenv(SF_ENV_RANK_PER_NODE);
  return env != NULL && env[0] == '1';
}

/* ---- Open ------------------------------------------------------------------
 */

static void copy_config(sf_loader *l, const sf_config *cfg)
{
  l->cfg = *cfg;
  snprintf(l->path, sizeof l->path, "%s", cfg->path);
  snprintf(l->input, sizeof l->input, "%s", cfg->input);
  l->cfg.path = l->path;
  l->cfg.input = l->input;
  if (cfg->target != NULL) {
    snprintf(l->target, sizeof l->target, "%s", cfg->target);
    l->cfg.target = l->target;
  }
  l->ndsets = cfg->target != NULL ? 2 : 1;
}

/* Opens the file and datasets, checks them against the options and each
 * other. All ranks agree on the outcome. */
static sf_status open_datasets(sf_loader *l, hid_t *file, hid_t dsets[],
                               sf_dataset_info info[], sf_err *e)
{
  const char *names[2] = {l->cfg.input, l->cfg.target};
  if (sf_h5_open(l->comm, l->path, file, e) == SF_OK)
    for (int d = 0; d < l->ndsets && e->status == SF_OK; d++)
      sf_h5_dataset(*file, l->path, names[d], l->cfg.layout, &dsets[d],
                    &info[d], e);
  if (e->status == SF_OK && l->ndsets == 2)
    for (int a = 0; a < 3; a++)
      if (info[0].shape[a] != info[1].shape[a]) {
        sf_fail(
            e, SF_ERR_FORMAT,
            "input '%s' has box %lldx%lldx%lld but target '%s' has "
            "%lldx%lldx%lld in '%s': both must cover the same box",
            names[0], (long long)info[0].shape[0], (long long)info[0].shape[1],
            (long long)info[0].shape[2], names[1], (long long)info[1].shape[0],
            (long long)info[1].shape[1], (long long)info[1].shape[2], l->path);
        break;
      }
  for (int d = 0; d < l->ndsets && e->status == SF_OK; d++)
    if (info[d].channels > 64)
      sf_fail(e, SF_ERR_FORMAT, "dataset '%s' has %lld channels; at most 64",
              names[d], (long long)info[d].channels);
  for (int a = 0; a < 3 && e->status == SF_OK; a++)
    if (l->cfg.crop[a] > info[0].shape[a])
      sf_fail(e, SF_ERR_ARG,
              "config: crop %lldx%lldx%lld is larger than the box "
              "%lldx%lldx%lld of '%s' in '%s'",
              (long long)l->cfg.crop[0], (long long)l->cfg.crop[1],
              (long long)l->cfg.crop[2], (long long)info[0].shape[0],
              (long long)info[0].shape[1], (long long)info[0].shape[2],
              names[0], l->path);
  if (e->status == SF_OK)
    check_vectors("input", l->cfg.n_input_vectors,
                  (const int(*)[3])l->cfg.input_vectors, info[0].channels, e);
  if (e->status == SF_OK && l->ndsets == 2)
    check_vectors("target", l->cfg.n_target_vectors,
                  (const int(*)[3])l->cfg.target_vectors, info[1].channels, e);
  return sf_agree(l->comm, e);
}

static void close_datasets(hid_t file, hid_t dsets[], int n)
{
  for (int d = 0; d < n; d++)
    if (dsets[d] >= 0)
      H5Dclose(dsets[d]);
  if (file >= 0)
    H5Fclose(file);
}

/* Transform descriptors, sampler and epoch length. */
static void setup_stream(sf_loader *l, const sf_dataset_info info[])
{
  for (int d = 0; d < l->ndsets; d++) {
    sf_xform *x = &l->xf[d];
    memcpy(x->ext, l->cfg.crop, sizeof x->ext);
    x->channels = (int)info[d].channels;
    x->ngroups = d == 0 ? l->cfg.n_input_vectors : l->cfg.n_target_vectors;
    memcpy(x->groups, d == 0 ? l->cfg.input_vectors : l->cfg.target_vectors,
           sizeof x->groups);
    x->dtype = l->cfg.dtype;
    x->layout = l->cfg.out_layout;
  }
  sf_sampler_init(&l->sampler, info[0].shape, l->cfg.seed, l->cfg.symmetries);
  l->steps_per_epoch = l->cfg.steps_per_epoch;
  if (l->steps_per_epoch == 0) {
    const double box = (double)info[0].shape[0] * (double)info[0].shape[1] *
                       (double)info[0].shape[2];
    const double per_step = (double)l->cfg.crop[0] * (double)l->cfg.crop[1] *
                            (double)l->cfg.crop[2] * l->size * l->cfg.batch;
    const double s = box / per_step;
    l->steps_per_epoch = s < 1.0 ? 1 : (uint64_t)(s + 0.999999);
  }
}

int64_t sf_sample_elems(const sf_loader *l, int d)
{
  return sf_xform_elems(&l->xf[d]);
}

int64_t sf_sample_bytes(const sf_loader *l, int d)
{
  return sf_sample_elems(l, d) * (int64_t)sf_dtype_size(l->cfg.dtype);
}

/* Host memory of the host path and the per-slot metadata. */
static sf_status alloc_host(sf_loader *l, sf_err *e)
{
  const size_t K = (size_t)l->cfg.prefetch, B = (size_t)l->cfg.batch;
  l->max_pieces = sf_crop_max_pieces(&l->store);
  l->pieces = malloc((size_t)l->max_pieces * sizeof *l->pieces);
  l->zruns = malloc((size_t)sf_crop_max_zruns(&l->store) * sizeof *l->zruns);
  l->origin = malloc(K * B * 3 * sizeof *l->origin);
  l->sym = malloc(K * B * sizeof *l->sym);
  l->sample = malloc(K * B * sizeof *l->sample);
  if (!l->pieces || !l->zruns || !l->origin || !l->sym || !l->sample)
    return sf_fail(e, SF_ERR_NOMEM, "cannot allocate loader tables");
  /* Host batches only: one staged crop and the ring. Device batches stage
   * on the GPU (pipeline.c). */
  for (int d = 0; d < l->ndsets && l->cfg.device < 0; d++) {
    const size_t stage = (size_t)sf_sample_elems(l, d) * sizeof(float);
    const size_t out = K * B * (size_t)sf_sample_bytes(l, d);
    l->staging[d] = malloc(stage);
    l->out[d] = malloc(out);
    if (l->staging[d] == NULL || l->out[d] == NULL)
      return sf_fail(e, SF_ERR_NOMEM,
                     "cannot allocate %zu bytes of staging and host batches",
                     stage + out);
    l->stats.staging_bytes += stage + out;
  }
  return SF_OK;
}

static void free_loader(sf_loader *l)
{
#ifdef SF_HAVE_CUDA
  sf_gpu_close(l);
#endif
  sf_store_close(&l->store);
  for (int d = 0; d < SF_MAX_DSETS; d++) {
    free(l->staging[d]);
    free(l->out[d]);
  }
  free(l->pieces);
  free(l->zruns);
  free(l->origin);
  free(l->sym);
  free(l->sample);
  if (l->comm != MPI_COMM_NULL)
    MPI_Comm_free(&l->comm);
  free(l);
}

/* Reads every dataset's slab into the store, then publishes it. */
static sf_status read_slabs(sf_loader *l, hid_t dsets[],
                            const sf_dataset_info info[], sf_err *e)
{
  const char *names[2] = {l->cfg.input, l->cfg.target};
  SF_RANGE_PUSH("read");
  const double t0 = MPI_Wtime();
  for (int d = 0; d < l->ndsets && e->status == SF_OK; d++)
    sf_store_read(&l->store, d, dsets[d], l->path, names[d], &info[d], e);
  SF_RANGE_POP();
  if (sf_agree(l->comm, e) == SF_OK)
    sf_store_publish(&l->store, e);
  l->stats.t_read = MPI_Wtime() - t0;
  l->stats.slab_bytes = (uint64_t)l->store.bytes;
  return sf_agree(l->comm, e);
}

sf_status sf_open(MPI_Comm comm, const sf_config *cfg, sf_loader **out,
                  char *errbuf, size_t errlen)
{
  sf_err e;
  sf_err_clear(&e);
  if (out != NULL)
    *out = NULL;
  sf_loader *l = calloc(1, sizeof *l);
  if (l == NULL)
    sf_fail(&e, SF_ERR_NOMEM, "cannot allocate the loader");
  else if (out == NULL || cfg == NULL)
    sf_fail(&e, SF_ERR_ARG, "sf_open: cfg and out are required");
  else if (check_config(cfg, &e) == SF_OK)
    copy_config(l, cfg);
  if (l != NULL)
    l->comm = MPI_COMM_NULL;
  /* The caller's communicator is used only for this agreement and the dup. */
  if (sf_agree(comm, &e) != SF_OK) {
    free(l);
    sf_err_copy(&e, errbuf, errlen);
    return e.status;
  }
  if (MPI_Comm_dup(comm, &l->comm) != MPI_SUCCESS) {
    l->comm = MPI_COMM_NULL;
    sf_fail(&e, SF_ERR_MPI, "MPI_Comm_dup failed");
  } else {
    MPI_Comm_set_errhandler(l->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(l->comm, &l->rank);
    MPI_Comm_size(l->comm, &l->size);
    MPI_Query_thread(&l->thread_level);
    same_config_everywhere(l->comm, &l->cfg, &e);
  }
  if (sf_agree(l->comm != MPI_COMM_NULL ? l->comm : comm, &e) != SF_OK) {
    free_loader(l);
    sf_err_copy(&e, errbuf, errlen);
    return e.status;
  }

  sf_h5_quiet q;
  sf_h5_quiet_begin(&q);
  hid_t file = H5I_INVALID_HID, dsets[2] = {H5I_INVALID_HID, H5I_INVALID_HID};
  sf_dataset_info info[2];
  memset(info, 0, sizeof info);
  if (open_datasets(l, &file, dsets, info, &e) == SF_OK) {
    const int64_t ch[2] = {info[0].channels, info[1].channels};
    if (sf_store_open(&l->store, l->comm, l->ndsets, ch, info[0].shape,
                      l->cfg.halo, resolve_rank_per_node(&l->cfg), &e) == SF_OK)
      read_slabs(l, dsets, info, &e);
  }
  close_datasets(file, dsets, l->ndsets);
  sf_h5_quiet_end(&q);

  if (e.status == SF_OK) {
    setup_stream(l, info);
    alloc_host(l, &e);
  }
  if (e.status == SF_OK && l->cfg.device >= 0) {
    for (int d = 0; d < l->ndsets; d++)
      if (sf_sample_elems(l, d) >= ((int64_t)1 << 31))
        sf_fail(&e, SF_ERR_ARG,
                "config: one sample of '%s' has %lld elements; device "
                "batches need fewer than 2^31 per sample (smaller crop)",
                d == 0 ? l->cfg.input : l->cfg.target,
                (long long)sf_sample_elems(l, d));
  }
  if (e.status == SF_OK && l->cfg.device >= 0) {
#ifdef SF_HAVE_CUDA
    sf_gpu_open(l, &e);
#else
    sf_fail(&e, SF_ERR_UNSUPPORTED,
            "device %d requested, but slabfeed was built without CUDA "
            "(SLABFEED_CUDA=OFF or no nvcc); use device -1",
            l->cfg.device);
#endif
  }
  if (sf_agree(l->comm, &e) != SF_OK) {
    free_loader(l);
    sf_err_copy(&e, errbuf, errlen);
    return e.status;
  }
  register_live(l);
  *out = l;
  sf_err_copy(&e, errbuf, errlen);
  return SF_OK;
}

/* ---- Batches ----------------------------------------------------------------
 */

sf_status sf_loader_error(sf_loader *l, const sf_err *e)
{
  snprintf(l->last_error, sizeof l->last_error, "%s", e->msg);
  return e->status;
}

void sf_loader_plan(sf_loader *l, uint64_t epoch, uint64_t step, int slot)
{
  const int B = l->cfg.batch;
  const uint64_t first =
      step * (uint64_t)l->size * (uint64_t)B + (uint64_t)l->rank * (uint64_t)B;
  for (int b = 0; b < B; b++) {
    const size_t i = (size_t)slot * (size_t)B + (size_t)b;
    l->sample[i] = (int64_t)(first + (uint64_t)b);
    sf_sampler_draw(&l->sampler, epoch, first + (uint64_t)b, &l->origin[3 * i],
                    &l->sym[i]);
  }
}

sf_status sf_loader_gather(sf_loader *l, int slot, int b, sf_err *e)
{
  const size_t i = (size_t)slot * (size_t)l->cfg.batch + (size_t)b;
  const int n = sf_crop_pieces(&l->store, &l->origin[3 * i], l->cfg.crop,
                               l->pieces, l->zruns);
  sf_gather_bytes gb = {0, 0, 0};
  for (int d = 0; d < l->ndsets && e->status == SF_OK; d++)
    sf_gather_host(&l->store, d, l->pieces, n, l->cfg.crop, l->staging[d], &gb,
                   e);
  if (e->status == SF_OK && gb.remote > 0)
    sf_gather_complete(&l->store, e);
  sf_loader_count(l, &gb);
  return e->status;
}

void sf_loader_count(sf_loader *l, const sf_gather_bytes *b)
{
  l->stats.bytes_own += b->own;
  l->stats.bytes_node += b->node;
  l->stats.bytes_remote += b->remote;
}

void sf_loader_advance(sf_loader *l)
{
  if (++l->step == l->steps_per_epoch) {
    l->step = 0;
    l->epoch++;
  }
}

void sf_loader_describe(const sf_loader *l, int slot, void *const data[],
                        uint64_t epoch, uint64_t step, sf_batch *out)
{
  memset(out, 0, sizeof *out);
  for (int d = 0; d < l->ndsets; d++) {
    sf_tensor *t = d == 0 ? &out->input : &out->target;
    const sf_xform *x = &l->xf[d];
    const int64_t C = x->channels, D = x->ext[0], H = x->ext[1], W = x->ext[2];
    t->data = data[d];
    t->ndim = 5;
    t->dtype = l->cfg.dtype;
    const int64_t sample = C * D * H * W;
    if (l->cfg.out_layout == SF_OUT_NCDHW) {
      const int64_t shape[5] = {l->cfg.batch, C, D, H, W};
      const int64_t strides[5] = {sample, D * H * W, H * W, W, 1};
      memcpy(t->shape, shape, sizeof shape);
      memcpy(t->strides, strides, sizeof strides);
    } else {
      const int64_t shape[5] = {l->cfg.batch, D, H, W, C};
      const int64_t strides[5] = {sample, H * W * C, W * C, C, 1};
      memcpy(t->shape, shape, sizeof shape);
      memcpy(t->strides, strides, sizeof strides);
    }
  }
  const size_t i = (size_t)slot * (size_t)l->cfg.batch;
  out->device = l->cfg.device;
  out->epoch = epoch;
  out->step = step;
  out->origin = &l->origin[3 * i];
  out->symmetry = &l->sym[i];
  out->sample = &l->sample[i];
}

/* Host path: plan, gather and transform the batch on the caller's thread,
 * into the next slot of the host ring. */
static sf_status next_host(sf_loader *l, sf_batch *out)
{
  sf_err e;
  sf_err_clear(&e);
  const int slot = l->slot;
  l->slot = (l->slot + 1) % l->cfg.prefetch;
  double t = MPI_Wtime();
  sf_loader_plan(l, l->epoch, l->step, slot);
  double now = MPI_Wtime();
  l->stats.t_plan += now - t;
  void *data[SF_MAX_DSETS];
  for (int d = 0; d < l->ndsets; d++)
    data[d] = (char *)l->out[d] + (size_t)slot * (size_t)l->cfg.batch *
                                      (size_t)sf_sample_bytes(l, d);
  for (int b = 0; b < l->cfg.batch && e.status == SF_OK; b++) {
    t = now;
    if (sf_loader_gather(l, slot, b, &e) != SF_OK)
      break;
    now = MPI_Wtime();
    l->stats.t_gather += now - t;
    t = now;
    const int32_t g = l->sym[(size_t)slot * (size_t)l->cfg.batch + (size_t)b];
    for (int d = 0; d < l->ndsets; d++)
      sf_transform_ref(&l->xf[d], g, l->staging[d],
                       (char *)data[d] +
                           (size_t)b * (size_t)sf_sample_bytes(l, d));
    now = MPI_Wtime();
    l->stats.t_transform += now - t;
  }
  if (e.status != SF_OK)
    return sf_loader_error(l, &e);
  sf_loader_describe(l, slot, data, l->epoch, l->step, out);
  for (int d = 0; d < l->ndsets; d++)
    l->stats.bytes_out += (uint64_t)(l->cfg.batch * sf_sample_bytes(l, d));
  l->stats.batches++;
  l->stats.samples += (uint64_t)l->cfg.batch;
  sf_loader_advance(l);
  return SF_OK;
}

sf_status sf_next(sf_loader *l, sf_batch *out, void *stream)
{
  if (l == NULL || out == NULL)
    return SF_ERR_ARG;
  if (l->forked)
    return forked_error(l);
  l->last_error[0] = '\0';
#ifdef SF_HAVE_CUDA
  if (l->gpu != NULL)
    return sf_gpu_next(l, out, stream);
#endif
  (void)stream;
  return next_host(l, out);
}

sf_status sf_seek(sf_loader *l, uint64_t epoch, uint64_t step)
{
  if (l == NULL)
    return SF_ERR_ARG;
  if (l->forked)
    return forked_error(l);
  if (step >= l->steps_per_epoch) {
    snprintf(l->last_error, sizeof l->last_error,
             "sf_seek: step %llu is past the end of the epoch (%llu steps)",
             (unsigned long long)step, (unsigned long long)l->steps_per_epoch);
    return SF_ERR_ARG;
  }
#ifdef SF_HAVE_CUDA
  if (l->gpu != NULL)
    return sf_gpu_seek(l, epoch, step);
#endif
  l->epoch = epoch;
  l->step = step;
  return SF_OK;
}

sf_status sf_stats_get(const sf_loader *l, sf_stats *out)
{
  if (l == NULL || out == NULL)
    return SF_ERR_ARG;
  if (l->forked)
    return SF_ERR_FORKED;
  *out = l->stats;
  return SF_OK;
}

const char *sf_last_error(const sf_loader *l)
{
  return l == NULL ? "" : l->last_error;
}

uint64_t sf_steps_per_epoch(const sf_loader *l)
{
  return l == NULL ? 0 : l->steps_per_epoch;
}

sf_status sf_copy_to_host(sf_loader *l, const sf_tensor *t, void *dst)
{
  if (l == NULL || t == NULL || dst == NULL || t->data == NULL)
    return SF_ERR_ARG;
  if (l->forked)
    return forked_error(l);
  size_t bytes = sf_dtype_size(t->dtype);
  for (int a = 0; a < t->ndim; a++)
    bytes *= (size_t)t->shape[a];
#ifdef SF_HAVE_CUDA
  if (l->gpu != NULL)
    return sf_gpu_copy_to_host(l, t->data, bytes, dst);
#endif
  memcpy(dst, t->data, bytes);
  return SF_OK;
}

void sf_close(sf_loader *l)
{
  if (l == NULL || l->forked)
    return;
  unregister_live(l);
  free_loader(l);
}
