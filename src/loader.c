/* slabfeed_open / slabfeed_next / slabfeed_seek / slabfeed_close and the host
 * (CPU) path. */
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

static slabfeed_status forked_error(slabfeed_loader *l)
{
  snprintf(l->last_error, sizeof l->last_error,
           "this loader was opened in the parent process and the process has "
           "forked since: MPI windows, CUDA state and the loader thread do "
           "not survive fork(); open a new loader in the child (or do not "
           "fork: use threads)");
  return SLABFEED_ERR_FORKED;
}

/* ---- Configuration --------------------------------------------------------
 */

void slabfeed_config_init(slabfeed_config *cfg)
{
  memset(cfg, 0, sizeof *cfg);
  cfg->layout = SLABFEED_LAYOUT_AUTO;
  cfg->crop[0] = cfg->crop[1] = cfg->crop[2] = 64;
  cfg->batch = 1;
  cfg->symmetries = SLABFEED_SYM_ALL;
  cfg->dtype = SLABFEED_DTYPE_F32;
  cfg->out_layout = SLABFEED_OUT_NCDHW;
  cfg->device = -1;
  cfg->prefetch = 2;
  cfg->rank_per_node = -1;
}

/* Checks of the options alone (no file needed). */
static slabfeed_status check_config(const slabfeed_config *c, sf__err *e)
{
  if (c->path == NULL || c->path[0] == '\0')
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: path (the HDF5 file) is required");
  if (strlen(c->path) >= 4096)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: path is longer than 4095 bytes");
  if (c->input == NULL || c->input[0] == '\0')
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: input (the dataset name) is required");
  if (strlen(c->input) >= SF_NAME_MAX ||
      (c->target != NULL && strlen(c->target) >= SF_NAME_MAX))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: dataset names are limited to %d bytes",
                    SF_NAME_MAX - 1);
  if ((unsigned)c->layout > SLABFEED_LAYOUT_CL)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: layout %d is not auto, cf or cl", (int)c->layout);
  if (c->batch < 1)
    return sf__fail(e, SLABFEED_ERR_ARG, "config: batch is %d; it must be >= 1",
                    c->batch);
  if (c->prefetch < 1)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: prefetch depth is %d; it must be >= 1",
                    c->prefetch);
  if (c->prefetch > 64)
    return sf__fail(e, SLABFEED_ERR_ARG, "config: prefetch depth %d exceeds 64",
                    c->prefetch);
  for (int a = 0; a < 3; a++)
    if (c->crop[a] < 1)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: crop extent %lld on axis %d must be >= 1",
                      (long long)c->crop[a], a);
  if ((unsigned)c->symmetries > SLABFEED_SYM_NONE)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: symmetries %d is not all, rotations or none",
                    (int)c->symmetries);
  if (c->symmetries != SLABFEED_SYM_NONE &&
      (c->crop[0] != c->crop[1] || c->crop[0] != c->crop[2]))
    return sf__fail(
        e, SLABFEED_ERR_ARG,
        "config: crop %lldx%lldx%lld is not cubic; symmetries other "
        "than 'none' need a cubic crop",
        (long long)c->crop[0], (long long)c->crop[1], (long long)c->crop[2]);
  if ((unsigned)c->dtype > SLABFEED_DTYPE_BF16 ||
      (unsigned)c->out_layout > SLABFEED_OUT_NDHWC)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: unknown dtype or output layout");
  if (c->halo < 0)
    return sf__fail(e, SLABFEED_ERR_ARG, "config: halo %d must be >= 0",
                    c->halo);
  if (c->n_input_vectors < 0 || c->n_input_vectors > SLABFEED_MAX_VECTORS ||
      c->n_target_vectors < 0 || c->n_target_vectors > SLABFEED_MAX_VECTORS)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: at most %d vector groups per dataset",
                    SLABFEED_MAX_VECTORS);
  if (c->n_target_vectors > 0 && c->target == NULL)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: target vector groups without a target dataset");
  if (c->device < -1)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: device %d (use -1 for host batches)", c->device);
  return SLABFEED_OK;
}

/* Vector groups of a dataset must name distinct channels in [0, C). */
static slabfeed_status check_vectors(const char *what, int n, const int (*g)[3],
                                     int64_t C, sf__err *e)
{
  int used[64] = {0};
  for (int v = 0; v < n; v++)
    for (int a = 0; a < 3; a++) {
      const int k = g[v][a];
      if (k < 0 || k >= C)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: %s vector group %d names channel %d, but the "
                        "dataset has channels 0..%lld",
                        what, v, k, (long long)C - 1);
      if (used[k]++)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: %s vector channel %d is used twice", what, k);
    }
  return SLABFEED_OK;
}

/* FNV-1a over the options, so that ranks can compare them. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

static uint64_t config_hash(const slabfeed_config *c)
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

static slabfeed_status
same_config_everywhere(MPI_Comm comm, const slabfeed_config *c, sf__err *e)
{
  const uint64_t h = config_hash(c);
  uint64_t lo = 0, hi = 0;
  SF_MPI_GOTO(MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, comm), e, out);
  SF_MPI_GOTO(MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, comm), e, out);
  if (lo != hi)
    sf__fail(e, SLABFEED_ERR_ARG,
             "config: the options differ between ranks (all ranks must pass "
             "the same slabfeed_config, device aside)");
out:
  return e->status;
}

static int resolve_rank_per_node(const slabfeed_config *c)
{
  if (c->rank_per_node == 0 || c->rank_per_node == 1)
    return c->rank_per_node;
  const char *env = getenv(SLABFEED_ENV_RANK_PER_NODE);
  return env != NULL && env[0] == '1';
}

/* ---- Open ------------------------------------------------------------------
 */

static void copy_config(slabfeed_loader *l, const slabfeed_config *cfg)
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
static slabfeed_status open_datasets(slabfeed_loader *l, hid_t *file,
                                     hid_t dsets[],
                                     slabfeed_dataset_info info[], sf__err *e)
{
  const char *names[2] = {l->cfg.input, l->cfg.target};
  if (sf__h5_open(l->comm, l->path, file, e) == SLABFEED_OK)
    for (int d = 0; d < l->ndsets && e->status == SLABFEED_OK; d++)
      sf__h5_dataset(*file, l->path, names[d], l->cfg.layout, &dsets[d],
                     &info[d], e);
  if (e->status == SLABFEED_OK && l->ndsets == 2)
    for (int a = 0; a < 3; a++)
      if (info[0].shape[a] != info[1].shape[a]) {
        sf__fail(
            e, SLABFEED_ERR_FORMAT,
            "input '%s' has box %lldx%lldx%lld but target '%s' has "
            "%lldx%lldx%lld in '%s': both must cover the same box",
            names[0], (long long)info[0].shape[0], (long long)info[0].shape[1],
            (long long)info[0].shape[2], names[1], (long long)info[1].shape[0],
            (long long)info[1].shape[1], (long long)info[1].shape[2], l->path);
        break;
      }
  for (int d = 0; d < l->ndsets && e->status == SLABFEED_OK; d++)
    if (info[d].channels > 64)
      sf__fail(e, SLABFEED_ERR_FORMAT,
               "dataset '%s' has %lld channels; at most 64", names[d],
               (long long)info[d].channels);
  for (int a = 0; a < 3 && e->status == SLABFEED_OK; a++)
    if (l->cfg.crop[a] > info[0].shape[a])
      sf__fail(e, SLABFEED_ERR_ARG,
               "config: crop %lldx%lldx%lld is larger than the box "
               "%lldx%lldx%lld of '%s' in '%s'",
               (long long)l->cfg.crop[0], (long long)l->cfg.crop[1],
               (long long)l->cfg.crop[2], (long long)info[0].shape[0],
               (long long)info[0].shape[1], (long long)info[0].shape[2],
               names[0], l->path);
  if (e->status == SLABFEED_OK)
    check_vectors("input", l->cfg.n_input_vectors,
                  (const int(*)[3])l->cfg.input_vectors, info[0].channels, e);
  if (e->status == SLABFEED_OK && l->ndsets == 2)
    check_vectors("target", l->cfg.n_target_vectors,
                  (const int(*)[3])l->cfg.target_vectors, info[1].channels, e);
  return sf__agree(l->comm, e);
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
static void setup_stream(slabfeed_loader *l, const slabfeed_dataset_info info[])
{
  for (int d = 0; d < l->ndsets; d++) {
    sf__xform *x = &l->xf[d];
    memcpy(x->ext, l->cfg.crop, sizeof x->ext);
    x->channels = (int)info[d].channels;
    x->ngroups = d == 0 ? l->cfg.n_input_vectors : l->cfg.n_target_vectors;
    memcpy(x->groups, d == 0 ? l->cfg.input_vectors : l->cfg.target_vectors,
           sizeof x->groups);
    x->dtype = l->cfg.dtype;
    x->layout = l->cfg.out_layout;
  }
  sf__sampler_init(&l->sampler, info[0].shape, l->cfg.seed, l->cfg.symmetries);
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

int64_t sf__sample_elems(const slabfeed_loader *l, int d)
{
  return sf__xform_elems(&l->xf[d]);
}

int64_t sf__sample_bytes(const slabfeed_loader *l, int d)
{
  return sf__sample_elems(l, d) * (int64_t)slabfeed_dtype_size(l->cfg.dtype);
}

/* Host memory of the host path and the per-slot metadata. */
static slabfeed_status alloc_host(slabfeed_loader *l, sf__err *e)
{
  const size_t K = (size_t)l->cfg.prefetch, B = (size_t)l->cfg.batch;
  l->max_pieces = sf__crop_max_pieces(&l->store);
  l->pieces = malloc((size_t)l->max_pieces * sizeof *l->pieces);
  l->zruns = malloc((size_t)sf__crop_max_zruns(&l->store) * sizeof *l->zruns);
  l->origin = malloc(K * B * 3 * sizeof *l->origin);
  l->sym = malloc(K * B * sizeof *l->sym);
  l->sample = malloc(K * B * sizeof *l->sample);
  if (!l->pieces || !l->zruns || !l->origin || !l->sym || !l->sample)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate loader tables");
  /* Host batches only: one staged crop and the ring. Device batches stage
   * on the GPU (pipeline.c). */
  for (int d = 0; d < l->ndsets && l->cfg.device < 0; d++) {
    const size_t stage = (size_t)sf__sample_elems(l, d) * sizeof(float);
    const size_t out = K * B * (size_t)sf__sample_bytes(l, d);
    l->staging[d] = malloc(stage);
    l->out[d] = malloc(out);
    if (l->staging[d] == NULL || l->out[d] == NULL)
      return sf__fail(e, SLABFEED_ERR_NOMEM,
                      "cannot allocate %zu bytes of staging and host batches",
                      stage + out);
    l->stats.staging_bytes += stage + out;
  }
  return SLABFEED_OK;
}

static void free_loader(slabfeed_loader *l)
{
#ifdef SF_HAVE_CUDA
  sf__gpu_close(l);
#endif
  sf__store_close(&l->store);
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
static slabfeed_status read_slabs(slabfeed_loader *l, hid_t dsets[],
                                  const slabfeed_dataset_info info[],
                                  sf__err *e)
{
  const char *names[2] = {l->cfg.input, l->cfg.target};
  SF_RANGE_PUSH("read");
  const double t0 = MPI_Wtime();
  for (int d = 0; d < l->ndsets && e->status == SLABFEED_OK; d++)
    sf__store_read(&l->store, d, dsets[d], l->path, names[d], &info[d], e);
  SF_RANGE_POP();
  if (sf__agree(l->comm, e) == SLABFEED_OK)
    sf__store_publish(&l->store, e);
  l->stats.t_read = MPI_Wtime() - t0;
  l->stats.slab_bytes = (uint64_t)l->store.bytes;
  return sf__agree(l->comm, e);
}

slabfeed_status slabfeed_open(MPI_Comm comm, const slabfeed_config *cfg,
                              slabfeed_loader **out, char *errbuf,
                              size_t errlen)
{
  sf__err e;
  sf__err_clear(&e);
  if (out != NULL)
    *out = NULL;
  slabfeed_loader *l = calloc(1, sizeof *l);
  if (l == NULL)
    sf__fail(&e, SLABFEED_ERR_NOMEM, "cannot allocate the loader");
  else if (out == NULL || cfg == NULL)
    sf__fail(&e, SLABFEED_ERR_ARG, "slabfeed_open: cfg and out are required");
  else if (check_config(cfg, &e) == SLABFEED_OK)
    copy_config(l, cfg);
  if (l != NULL)
    l->comm = MPI_COMM_NULL;
  /* The caller's communicator is used only for this agreement and the dup. */
  if (sf__agree(comm, &e) != SLABFEED_OK) {
    free(l);
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  if (MPI_Comm_dup(comm, &l->comm) != MPI_SUCCESS) {
    l->comm = MPI_COMM_NULL;
    sf__fail(&e, SLABFEED_ERR_MPI, "MPI_Comm_dup failed");
  } else {
    MPI_Comm_set_errhandler(l->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(l->comm, &l->rank);
    MPI_Comm_size(l->comm, &l->size);
    MPI_Query_thread(&l->thread_level);
    same_config_everywhere(l->comm, &l->cfg, &e);
  }
  if (sf__agree(l->comm != MPI_COMM_NULL ? l->comm : comm, &e) != SLABFEED_OK) {
    free_loader(l);
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }

  sf__h5_quiet q;
  sf__h5_quiet_begin(&q);
  hid_t file = H5I_INVALID_HID, dsets[2] = {H5I_INVALID_HID, H5I_INVALID_HID};
  slabfeed_dataset_info info[2];
  memset(info, 0, sizeof info);
  if (open_datasets(l, &file, dsets, info, &e) == SLABFEED_OK) {
    const int64_t ch[2] = {info[0].channels, info[1].channels};
    if (sf__store_open(&l->store, l->comm, l->ndsets, ch, info[0].shape,
                       l->cfg.halo, resolve_rank_per_node(&l->cfg),
                       &e) == SLABFEED_OK)
      read_slabs(l, dsets, info, &e);
  }
  close_datasets(file, dsets, l->ndsets);
  sf__h5_quiet_end(&q);

  if (e.status == SLABFEED_OK) {
    setup_stream(l, info);
    alloc_host(l, &e);
  }
  if (e.status == SLABFEED_OK && l->cfg.device >= 0) {
    for (int d = 0; d < l->ndsets; d++)
      if (sf__sample_elems(l, d) >= ((int64_t)1 << 31))
        sf__fail(&e, SLABFEED_ERR_ARG,
                 "config: one sample of '%s' has %lld elements; device "
                 "batches need fewer than 2^31 per sample (smaller crop)",
                 d == 0 ? l->cfg.input : l->cfg.target,
                 (long long)sf__sample_elems(l, d));
  }
  if (e.status == SLABFEED_OK && l->cfg.device >= 0) {
#ifdef SF_HAVE_CUDA
    sf__gpu_open(l, &e);
#else
    sf__fail(&e, SLABFEED_ERR_UNSUPPORTED,
             "device %d requested, but slabfeed was built without CUDA "
             "(SLABFEED_CUDA=OFF or no nvcc); use device -1",
             l->cfg.device);
#endif
  }
  if (sf__agree(l->comm, &e) != SLABFEED_OK) {
    free_loader(l);
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  register_live(l);
  *out = l;
  sf__err_copy(&e, errbuf, errlen);
  return SLABFEED_OK;
}

/* ---- Batches ----------------------------------------------------------------
 */

slabfeed_status sf__loader_error(slabfeed_loader *l, const sf__err *e)
{
  snprintf(l->last_error, sizeof l->last_error, "%s", e->msg);
  return e->status;
}

void sf__loader_plan(slabfeed_loader *l, uint64_t epoch, uint64_t step,
                     int slot)
{
  const int B = l->cfg.batch;
  const uint64_t first =
      step * (uint64_t)l->size * (uint64_t)B + (uint64_t)l->rank * (uint64_t)B;
  for (int b = 0; b < B; b++) {
    const size_t i = (size_t)slot * (size_t)B + (size_t)b;
    l->sample[i] = (int64_t)(first + (uint64_t)b);
    sf__sampler_draw(&l->sampler, epoch, first + (uint64_t)b, &l->origin[3 * i],
                     &l->sym[i]);
  }
}

slabfeed_status sf__loader_gather(slabfeed_loader *l, int slot, int b,
                                  sf__err *e)
{
  const size_t i = (size_t)slot * (size_t)l->cfg.batch + (size_t)b;
  const int n = sf__crop_pieces(&l->store, &l->origin[3 * i], l->cfg.crop,
                                l->pieces, l->zruns);
  sf__gather_bytes gb = {0, 0, 0};
  for (int d = 0; d < l->ndsets && e->status == SLABFEED_OK; d++)
    sf__gather_host(&l->store, d, l->pieces, n, l->cfg.crop, l->staging[d], &gb,
                    e);
  if (e->status == SLABFEED_OK && gb.remote > 0)
    sf__gather_complete(&l->store, e);
  sf__loader_count(l, &gb);
  return e->status;
}

void sf__loader_count(slabfeed_loader *l, const sf__gather_bytes *b)
{
  l->stats.bytes_own += b->own;
  l->stats.bytes_node += b->node;
  l->stats.bytes_remote += b->remote;
}

void sf__loader_advance(slabfeed_loader *l)
{
  if (++l->step == l->steps_per_epoch) {
    l->step = 0;
    l->epoch++;
  }
}

void sf__loader_describe(const slabfeed_loader *l, int slot, void *const data[],
                         uint64_t epoch, uint64_t step, slabfeed_batch *out)
{
  memset(out, 0, sizeof *out);
  for (int d = 0; d < l->ndsets; d++) {
    slabfeed_tensor *t = d == 0 ? &out->input : &out->target;
    const sf__xform *x = &l->xf[d];
    const int64_t C = x->channels, D = x->ext[0], H = x->ext[1], W = x->ext[2];
    t->data = data[d];
    t->ndim = 5;
    t->dtype = l->cfg.dtype;
    const int64_t sample = C * D * H * W;
    if (l->cfg.out_layout == SLABFEED_OUT_NCDHW) {
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
static slabfeed_status next_host(slabfeed_loader *l, slabfeed_batch *out)
{
  sf__err e;
  sf__err_clear(&e);
  const int slot = l->slot;
  l->slot = (l->slot + 1) % l->cfg.prefetch;
  double t = MPI_Wtime();
  sf__loader_plan(l, l->epoch, l->step, slot);
  double now = MPI_Wtime();
  l->stats.t_plan += now - t;
  void *data[SF_MAX_DSETS];
  for (int d = 0; d < l->ndsets; d++)
    data[d] = (char *)l->out[d] + (size_t)slot * (size_t)l->cfg.batch *
                                      (size_t)sf__sample_bytes(l, d);
  for (int b = 0; b < l->cfg.batch && e.status == SLABFEED_OK; b++) {
    t = now;
    if (sf__loader_gather(l, slot, b, &e) != SLABFEED_OK)
      break;
    now = MPI_Wtime();
    l->stats.t_gather += now - t;
    t = now;
    const int32_t g = l->sym[(size_t)slot * (size_t)l->cfg.batch + (size_t)b];
    for (int d = 0; d < l->ndsets; d++)
      sf__transform_ref(&l->xf[d], g, l->staging[d],
                        (char *)data[d] +
                            (size_t)b * (size_t)sf__sample_bytes(l, d));
    now = MPI_Wtime();
    l->stats.t_transform += now - t;
  }
  if (e.status != SLABFEED_OK)
    return sf__loader_error(l, &e);
  sf__loader_describe(l, slot, data, l->epoch, l->step, out);
  for (int d = 0; d < l->ndsets; d++)
    l->stats.bytes_out += (uint64_t)(l->cfg.batch * sf__sample_bytes(l, d));
  l->stats.batches++;
  l->stats.samples += (uint64_t)l->cfg.batch;
  sf__loader_advance(l);
  return SLABFEED_OK;
}

slabfeed_status slabfeed_next(slabfeed_loader *l, slabfeed_batch *out,
                              void *stream)
{
  if (l == NULL || out == NULL)
    return SLABFEED_ERR_ARG;
  if (l->forked)
    return forked_error(l);
  l->last_error[0] = '\0';
#ifdef SF_HAVE_CUDA
  if (l->gpu != NULL)
    return sf__gpu_next(l, out, stream);
#endif
  (void)stream;
  return next_host(l, out);
}

slabfeed_status slabfeed_seek(slabfeed_loader *l, uint64_t epoch, uint64_t step)
{
  if (l == NULL)
    return SLABFEED_ERR_ARG;
  if (l->forked)
    return forked_error(l);
  if (step >= l->steps_per_epoch) {
    snprintf(
        l->last_error, sizeof l->last_error,
        "slabfeed_seek: step %llu is past the end of the epoch (%llu steps)",
        (unsigned long long)step, (unsigned long long)l->steps_per_epoch);
    return SLABFEED_ERR_ARG;
  }
#ifdef SF_HAVE_CUDA
  if (l->gpu != NULL)
    return sf__gpu_seek(l, epoch, step);
#endif
  l->epoch = epoch;
  l->step = step;
  return SLABFEED_OK;
}

slabfeed_status slabfeed_stats_get(const slabfeed_loader *l,
                                   slabfeed_stats *out)
{
  if (l == NULL || out == NULL)
    return SLABFEED_ERR_ARG;
  if (l->forked)
    return SLABFEED_ERR_FORKED;
  *out = l->stats;
  return SLABFEED_OK;
}

const char *slabfeed_last_error(const slabfeed_loader *l)
{
  return l == NULL ? "" : l->last_error;
}

uint64_t slabfeed_steps_per_epoch(const slabfeed_loader *l)
{
  return l == NULL ? 0 : l->steps_per_epoch;
}

slabfeed_status slabfeed_copy_to_host(slabfeed_loader *l,
                                      const slabfeed_tensor *t, void *dst)
{
  if (l == NULL || t == NULL || dst == NULL || t->data == NULL)
    return SLABFEED_ERR_ARG;
  if (l->forked)
    return forked_error(l);
  size_t bytes = slabfeed_dtype_size(t->dtype);
  for (int a = 0; a < t->ndim; a++)
    bytes *= (size_t)t->shape[a];
#ifdef SF_HAVE_CUDA
  if (l->gpu != NULL)
    return sf__gpu_copy_to_host(l, t->data, bytes, dst);
#endif
  memcpy(dst, t->data, bytes);
  return SLABFEED_OK;
}

void slabfeed_close(slabfeed_loader *l)
{
  if (l == NULL || l->forked)
    return;
  unregister_live(l);
  free_loader(l);
}
