/* The writer of a tiled pass (slabfeed_writer_*): the mirror of the crop
 * gather. Each rank owns one z-slab of the output (the region's planes
 * split like slabfeed_slab_plan) in its node's shared-memory window. A put
 * undoes a tile's symmetry and normalisation on the host (device outputs
 * come through pinned staging on the writer's own stream) into a staging
 * part per owner, then copies the part into the owner's slab: memcpy when
 * the owner is on the node, MPI_Put + flush into the owner's window
 * across nodes. Close checks coverage (voxel counts and a hash of the
 * tiles per owner), then writes the slabs with collective parallel-HDF5
 * writes into a file written aside (io/aside.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <hdf5.h>

#include "common/convert.h"
#include "common/geometry.h"
#include "common/inject.h"
#include "common/mpilib.h"
#include "common/normf.h"
#include "common/symmetry.h"
#include "io/aside.h"
#include "io/h5.h"
#include "loader.h"
#include "plan/sampler.h"
#include "plan/tiles.h"
#ifdef SF_HAVE_CUDA
#include "cuda/cudart.h"
#endif

#define SF_RUN_BYTES ((int64_t)64 << 20) /* one collective write, at most */

struct slabfeed_writer {
  MPI_Comm comm, node;
  int rank, size, node_rank, nodes;
  char last_error[SF_ERRLEN];
  sf__err failed; /* the first failed put: close fails with it */
  /* The pass. */
  int64_t shape[3], region[6];
  int64_t T, P, B;
  sf__tiles grid;
  /* The output. */
  int64_t C;   /* channels */
  int cl;      /* file (and slab) layout channels-last */
  int f16;     /* file element type float16 (else float32) */
  int64_t *z0; /* [size + 1]: rank q holds output planes [z0[q], z0[q+1]) */
  int ngroups;
  int groups[SLABFEED_MAX_VECTORS][3];
  int norm_on;
  slabfeed_norm norm[SLABFEED_MAX_CHANNELS];
  /* Memory. */
  MPI_Win shm, world;
  int shm_locked, world_locked;
  float *slab;  /* this rank's planes, [C][planes][Y][X] or [planes][Y][X][C] */
  float **peer; /* [size]: slab of each rank of this node, else NULL */
  float *part;  /* staging of one owner's part of one tile */
  uint64_t *sent_vox, *sent_hash; /* [size]: what this rank put per owner */
  /* Device outputs. */
  int device; /* the loader's device, or -1 */
  void *pinned;
  size_t pinned_bytes;
#ifdef SF_HAVE_CUDA
  cudaStream_t stream;
  cudaEvent_t ready;
#endif
  /* The file. */
  sf__aside as;
  int aside_live;
  hid_t file, dset, ftype;
  uint64_t sum; /* of what this rank wrote, as stored (read-back check) */
  char path[SF_ASIDE_PATH], name[256], input_path[SF_ASIDE_PATH];
};

/* ---- Options -------------------------------------------------------------
 */

void slabfeed_writer_config_init_sized(slabfeed_writer_config *cfg, size_t size)
{
  slabfeed_writer_config d;
  memset(&d, 0, sizeof d);
  d.size = size;
  d.dataset = "prediction";
  d.layout = SLABFEED_LAYOUT_CF;
  d.dtype = SLABFEED_DTYPE_F32;
  d.like = SLABFEED_LIKE_TARGET;
  sf__sized_init(cfg, size, &d, sizeof d);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

/* The options alone, and what they become against the pass. */
static slabfeed_status import_options(slabfeed_writer *w,
                                      const slabfeed_writer_config *user,
                                      slabfeed_writer_config *c,
                                      const slabfeed_loader *l, sf__err *e)
{
  slabfeed_writer_config_init(c);
  if (user == NULL || user->size < offsetof(slabfeed_writer_config, dataset))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer: the config is NULL or its size is too small "
                    "(initialise it with slabfeed_writer_config_init)");
  memcpy(c, user, user->size < sizeof *c ? user->size : sizeof *c);
  c->size = sizeof *c;
  if (c->dataset == NULL)
    c->dataset = "prediction";
  if (c->path == NULL || c->path[0] == '\0')
    return sf__fail(e, SLABFEED_ERR_ARG, "writer: no output path given");
  if (strlen(c->path) >= SF_ASIDE_PATH - 64 ||
      strlen(c->dataset) >= sizeof w->name || c->dataset[0] == '\0')
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer: output path or dataset name empty or too long");
  if ((unsigned)c->layout > SLABFEED_LAYOUT_CL)
    return sf__fail(e, SLABFEED_ERR_ARG, "writer: unknown file layout %d",
                    (int)c->layout);
  if (c->dtype == SLABFEED_DTYPE_BF16)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer: HDF5 has no bfloat16 type; write f32 or f16 "
                    "(bf16 model outputs are accepted by put)");
  if (c->dtype != SLABFEED_DTYPE_F32 && c->dtype != SLABFEED_DTYPE_F16)
    return sf__fail(e, SLABFEED_ERR_ARG, "writer: unknown file dtype %d",
                    (int)c->dtype);
  if ((unsigned)c->like > SLABFEED_LIKE_NONE)
    return sf__fail(e, SLABFEED_ERR_ARG, "writer: unknown 'like' value %d",
                    (int)c->like);
  if (c->overwrite != 0 && c->overwrite != 1)
    return sf__fail(e, SLABFEED_ERR_ARG, "writer: overwrite must be 0 or 1");
  const sf__config *lc = &l->cfg;
  const slabfeed_config *p = &lc->pub;
  /* The dataset the outputs are like: its channels, vector groups and
   * normalisation. */
  const int d = c->like == SLABFEED_LIKE_INPUT ? 0 : lc->ndsets - 1;
  const int64_t like_ch = l->store.channels[d];
  w->C = c->channels > 0 ? c->channels : like_ch;
  if (c->channels < 0 || w->C > SLABFEED_MAX_CHANNELS)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer: channels %d outside [0, %d] (0: those of the "
                    "dataset the outputs are like)",
                    c->channels, SLABFEED_MAX_CHANNELS);
  if (c->like != SLABFEED_LIKE_NONE && w->C != like_ch)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer: %lld output channels, but the %s '%s' has %lld: "
                    "its vector groups and normalisation cannot be undone on "
                    "other channels (pass like=none for plain channels)",
                    (long long)w->C, d == 0 ? "input" : "target",
                    sf__config_dataset(lc, d), (long long)like_ch);
  if (c->like != SLABFEED_LIKE_NONE) {
    w->ngroups = d == 0 ? p->n_input_vectors : p->n_target_vectors;
    memcpy(w->groups, d == 0 ? p->input_vectors : p->target_vectors,
           sizeof w->groups);
    const int nn = d == 0 ? p->n_input_norm : p->n_target_norm;
    w->norm_on = nn > 0;
    if (nn > 0)
      memcpy(w->norm, d == 0 ? p->input_norm : p->target_norm, sizeof w->norm);
  }
  w->cl = c->layout == SLABFEED_LAYOUT_CL;
  w->f16 = c->dtype == SLABFEED_DTYPE_F16;
  for (int a = 0; a < 3; a++)
    if (c->chunk[a] < 0 || c->chunk[a] > w->region[3 + a] ||
        (c->chunk[a] == 0) != (c->chunk[0] == 0))
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "writer: chunk %lld,%lld,%lld must be 0,0,0 "
                      "(contiguous) or three edges within the output "
                      "%lldx%lldx%lld",
                      (long long)c->chunk[0], (long long)c->chunk[1],
                      (long long)c->chunk[2], (long long)w->region[3],
                      (long long)w->region[4], (long long)w->region[5]);
  int64_t part;
  if (!sf__prod4(w->C, w->T, w->T, w->T, &part) || part > INT_MAX)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer: one tile of %lld channels of edge %lld exceeds "
                    "2^31 elements",
                    (long long)w->C, (long long)w->T);
  snprintf(w->path, sizeof w->path, "%s", c->path);
  snprintf(w->name, sizeof w->name, "%s", c->dataset);
  snprintf(w->input_path, sizeof w->input_path, "%s", lc->path);
  return SLABFEED_OK;
}

/* Collective: every rank holds the same options. */
static slabfeed_status
agree_options(slabfeed_writer *w, const slabfeed_writer_config *c, sf__err *e)
{
  uint64_t h = 0xcbf29ce484222325ull;
  h = fnv(h, w->path, strlen(w->path) + 1);
  h = fnv(h, w->name, strlen(w->name) + 1);
  const int64_t v[] = {w->C,        w->cl,       w->f16,       c->chunk[0],
                       c->chunk[1], c->chunk[2], c->overwrite, c->like};
  h = fnv(h, v, sizeof v);
  uint64_t lo = h, hi = h;
  int rc = MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, w->comm);
  if (rc == MPI_SUCCESS)
    rc = MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, w->comm);
  if (rc != MPI_SUCCESS)
    return sf__fail_mpi(e, rc, "MPI_Allreduce (writer options)");
  if (lo != hi)
    sf__fail(e, SLABFEED_ERR_ARG,
             "writer: the ranks passed different options (path, dataset, "
             "channels, layout, dtype, chunk, overwrite or like)");
  return e->status;
}

/* The output is new, or may be replaced, and is not the input. Local. */
static slabfeed_status check_path(const slabfeed_writer *w, int overwrite,
                                  sf__err *e)
{
  struct stat so, si;
  if (stat(w->path, &so) != 0)
    return SLABFEED_OK; /* absent: aside_begin checks the directory */
  if (stat(w->input_path, &si) == 0 && so.st_dev == si.st_dev &&
      so.st_ino == si.st_ino)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer: the output '%s' is the loader's input file '%s': "
                    "it is never written",
                    w->path, w->input_path);
  if (!overwrite)
    return sf__fail(e, SLABFEED_ERR_IO,
                    "writer: '%s' exists; pass overwrite to replace it",
                    w->path);
  return SLABFEED_OK;
}

/* ---- Memory and windows ---------------------------------------------------
 */

static int64_t planes_of(const slabfeed_writer *w, int q)
{
  return w->z0[q + 1] - w->z0[q];
}

static int64_t plane_elems(const slabfeed_writer *w)
{
  return w->C * w->region[4] * w->region[5];
}

/* The node communicator (each rank alone when the loader treats every
 * rank as a node) and the number of nodes. */
static slabfeed_status make_node(slabfeed_writer *w, int rank_per_node,
                                 sf__err *e)
{
  if (rank_per_node)
    SF_MPI_GOTO(MPI_Comm_split(w->comm, w->rank, 0, &w->node), e, out);
  else
    SF_MPI_GOTO(MPI_Comm_split_type(w->comm, MPI_COMM_TYPE_SHARED, w->rank,
                                    MPI_INFO_NULL, &w->node),
                e, out);
  SF_MPI_GOTO(MPI_Comm_rank(w->node, &w->node_rank), e, out);
  int leader = w->node_rank == 0;
  SF_MPI_GOTO(MPI_Allreduce(&leader, &w->nodes, 1, MPI_INT, MPI_SUM, w->comm),
              e, out);
out:
  return e->status;
}

/* The slab window on the node, the peers' slabs, and the window over all
 * ranks for MPI_Put when there is more than one node. Collective. */
static slabfeed_status make_windows(slabfeed_writer *w, sf__err *e)
{
  const int64_t elems = planes_of(w, w->rank) * plane_elems(w);
  MPI_Info info = MPI_INFO_NULL;
  MPI_Group node = MPI_GROUP_NULL, all = MPI_GROUP_NULL;
  int nsize = 0, *nr = NULL, *wr = NULL;
  SF_MPI_GOTO(MPI_Info_create(&info), e, out);
  SF_MPI_GOTO(MPI_Info_set(info, "alloc_shared_noncontig", "true"), e, out);
  SF_MPI_GOTO(MPI_Win_allocate_shared((MPI_Aint)elems * (MPI_Aint)sizeof(float),
                                      sizeof(float), info, w->node, &w->slab,
                                      &w->shm),
              e, out);
  SF_MPI_GOTO(MPI_Win_set_errhandler(w->shm, MPI_ERRORS_RETURN), e, out);
  if ((elems > 0 && w->slab == NULL) || sf__inject("writer.alloc", w->rank)) {
    sf__fail(e, SLABFEED_ERR_NOMEM,
             "writer: cannot map %lld bytes of the node's shared window for "
             "the output slab (/dev/shm full, or memory limits)",
             (long long)(elems * (int64_t)sizeof(float)));
    w->slab = NULL;
  }
  SF_MPI_GOTO(MPI_Comm_size(w->node, &nsize), e, out);
  w->peer = calloc((size_t)w->size, sizeof *w->peer);
  nr = malloc((size_t)nsize * sizeof *nr);
  wr = malloc((size_t)nsize * sizeof *wr);
  if (w->peer == NULL || nr == NULL || wr == NULL) {
    sf__fail(e, SLABFEED_ERR_NOMEM, "writer: cannot allocate the peer table");
    goto out;
  }
  for (int i = 0; i < nsize; i++)
    nr[i] = i;
  SF_MPI_GOTO(MPI_Comm_group(w->node, &node), e, out);
  SF_MPI_GOTO(MPI_Comm_group(w->comm, &all), e, out);
  SF_MPI_GOTO(MPI_Group_translate_ranks(node, nsize, nr, all, wr), e, out);
  for (int i = 0; i < nsize; i++) {
    MPI_Aint size;
    int unit;
    void *ptr;
    SF_MPI_GOTO(MPI_Win_shared_query(w->shm, i, &size, &unit, &ptr), e, out);
    w->peer[wr[i]] = ptr;
  }
  if (w->nodes > 1) {
    const MPI_Aint bytes =
        w->slab != NULL ? (MPI_Aint)elems * (MPI_Aint)sizeof(float) : 0;
    SF_MPI_GOTO(MPI_Win_create(w->slab, bytes, sizeof(float), MPI_INFO_NULL,
                               w->comm, &w->world),
                e, out);
    SF_MPI_GOTO(MPI_Win_set_errhandler(w->world, MPI_ERRORS_RETURN), e, out);
    SF_MPI_GOTO(MPI_Win_lock_all(MPI_MODE_NOCHECK, w->world), e, out);
    w->world_locked = 1;
  }
  SF_MPI_GOTO(MPI_Win_lock_all(MPI_MODE_NOCHECK, w->shm), e, out);
  w->shm_locked = 1;
out:
  if (node != MPI_GROUP_NULL)
    MPI_Group_free(&node);
  if (all != MPI_GROUP_NULL)
    MPI_Group_free(&all);
  if (info != MPI_INFO_NULL)
    MPI_Info_free(&info);
  free(nr);
  free(wr);
  return e->status;
}

/* Makes the node's stores into the shared window visible to its ranks. */
static slabfeed_status node_sync(slabfeed_writer *w, sf__err *e)
{
  SF_MPI_GOTO(MPI_Win_sync(w->shm), e, out);
  SF_MPI_GOTO(MPI_Barrier(w->comm), e, out);
  SF_MPI_GOTO(MPI_Win_sync(w->shm), e, out);
out:
  return e->status;
}

/* ---- Parts: one owner's share of one tile --------------------------------
 */

/* A part: output planes [z, z + nz) of owner q, rows [y, y + ny), columns
 * [x, x + nx) of the output, all channels, staged in w->part in the slab
 * layout. */
typedef struct part {
  int q;
  int64_t z, nz, y, ny, x, nx;
} part;

/* The MPI datatype of a part inside owner q's slab. */
static int part_type(const slabfeed_writer *w, const part *p, MPI_Datatype *t)
{
  const int64_t zq = planes_of(w, p->q);
  int sizes[4], sub[4], start[4];
  const int ax = w->cl ? 0 : 1; /* first spatial axis */
  sizes[ax] = (int)zq, sub[ax] = (int)p->nz,
  start[ax] = (int)(p->z - w->z0[p->q]);
  sizes[ax + 1] = (int)w->region[4], sub[ax + 1] = (int)p->ny,
             start[ax + 1] = (int)p->y;
  sizes[ax + 2] = (int)w->region[5], sub[ax + 2] = (int)p->nx,
             start[ax + 2] = (int)p->x;
  const int ch = w->cl ? 3 : 0;
  sizes[ch] = sub[ch] = (int)w->C, start[ch] = 0;
  int rc =
      MPI_Type_create_subarray(4, sizes, sub, start, MPI_ORDER_C, MPI_FLOAT, t);
  if (rc == MPI_SUCCESS)
    rc = MPI_Type_commit(t);
  return rc;
}

/* Copies the staged part into its owner's slab: stores into the node's
 * shared memory, or MPI_Put completed by a flush (the staging is reused
 * when this returns). */
static slabfeed_status deliver(slabfeed_writer *w, const part *p, sf__err *e)
{
  const int64_t Y = w->region[4], X = w->region[5], C = w->C;
  const int64_t zq = planes_of(w, p->q), dz = p->z - w->z0[p->q];
  float *dst = w->peer[p->q];
  if (dst != NULL) {
    if (!w->cl) {
      const float *src = w->part;
      for (int64_t c = 0; c < C; c++)
        for (int64_t z = 0; z < p->nz; z++)
          for (int64_t y = 0; y < p->ny; y++, src += p->nx)
            memcpy(dst + ((c * zq + dz + z) * Y + p->y + y) * X + p->x, src,
                   (size_t)p->nx * sizeof *src);
    } else {
      const float *src = w->part;
      for (int64_t z = 0; z < p->nz; z++)
        for (int64_t y = 0; y < p->ny; y++, src += p->nx * C)
          memcpy(dst + (((dz + z) * Y + p->y + y) * X + p->x) * C, src,
                 (size_t)(p->nx * C) * sizeof *src);
    }
    return SLABFEED_OK;
  }
  MPI_Datatype t = MPI_DATATYPE_NULL;
  SF_MPI_GOTO(part_type(w, p, &t), e, out);
  SF_MPI_GOTO(MPI_Put(w->part, (int)(C * p->nz * p->ny * p->nx), MPI_FLOAT,
                      p->q, 0, 1, t, w->world),
              e, out);
  SF_MPI_GOTO(MPI_Win_flush(p->q, w->world), e, out);
out:
  if (t != MPI_DATATYPE_NULL)
    MPI_Type_free(&t);
  return e->status;
}

/* One model output as put reads it: slot base, element strides of the
 * channel and the three spatial axes (of the tile's symmetry frame), edge
 * and dtype. */
typedef struct view {
  const char *base;
  int64_t sc, s[3], E;
  slabfeed_dtype dtype;
} view;

/* n elements of v from element `at`, `step` apart, as floats into o
 * (every os-th float). The dtype branch sits outside the element loop. */
static void load_row(const view *v, int64_t at, int64_t step, int64_t n,
                     float *o, int64_t os)
{
  if (v->dtype == SLABFEED_DTYPE_F32) {
    const float *src = (const float *)(const void *)v->base + at;
    if (step == 1 && os == 1)
      memcpy(o, src, (size_t)n * sizeof *o);
    else
      for (int64_t i = 0; i < n; i++)
        o[i * os] = src[i * step];
    return;
  }
  const uint16_t *src = (const uint16_t *)(const void *)v->base + at;
  if (v->dtype == SLABFEED_DTYPE_BF16)
    for (int64_t i = 0; i < n; i++) {
      const uint32_t x = (uint32_t)src[i * step] << 16;
      memcpy(&o[i * os], &x, sizeof x);
    }
  else
    for (int64_t i = 0; i < n; i++)
      o[i * os] = sf__f16_to_f32(src[i * step]);
}

/* The inverse normalisation (norm NULL: none) and the vector sign of one
 * staged row, in place. */
static void finish_row(const slabfeed_norm *norm, int neg, int64_t n, float *o,
                       int64_t os)
{
  if (norm != NULL)
    for (int64_t i = 0; i < n; i++)
      o[i * os] = sf__norm_invert(norm, o[i * os]);
  if (neg)
    for (int64_t i = 0; i < n; i++)
      o[i * os] = sf__flip_sign(o[i * os], 1);
}

/* The hash a tile's voxels carry in the coverage check. */
static uint64_t tile_hash(uint64_t g)
{
  return sf__fmix64(g * 0x9e3779b97f4a7c15ull + 0xd1b54a32d192ed03ull);
}

/* Undoes symmetry g of tile `t` (slabfeed_batch.tile layout) read through
 * v and stores the part it owns into the slabs of its owners. */
static slabfeed_status put_tile(slabfeed_writer *w, const view *v, int g,
                                const int64_t t[9], uint64_t tile, sf__err *e)
{
  /* Output i of the symmetry frame is input j with
   * j[perm[a]] = flip_a ? E-1-i[a] : i[a]: for an unrotated position j the
   * element offset is cst + sum_b coef[b] * j[b]. */
  const int *perm = sf__sym_perm(g);
  const int flips = sf__sym_flips(g);
  int64_t coef[3], cst = 0;
  for (int a = 0; a < 3; a++) {
    const int flip = flips >> a & 1;
    coef[perm[a]] = flip ? -v->s[a] : v->s[a];
    cst += flip ? v->s[a] * (v->E - 1) : 0;
  }
  int src[SLABFEED_MAX_CHANNELS];
  float sign[SLABFEED_MAX_CHANNELS];
  sf__sym_channels(g, (int)w->C, w->ngroups, (const int(*)[3])w->groups, src,
                   sign);
  int64_t kofs[SLABFEED_MAX_CHANNELS];
  int neg[SLABFEED_MAX_CHANNELS];
  for (int k = 0; k < w->C; k++) {
    kofs[src[k]] = k * v->sc;
    neg[src[k]] = sign[k] < 0;
  }
  /* The owned part in the tile's frame (the output's centre when the
   * model kept the pad) and in output coordinates. */
  const int64_t off = (v->E - w->T) / 2;
  int64_t j0[3], r0[3];
  for (int a = 0; a < 3; a++) {
    j0[a] = off + t[3 + a];
    r0[a] = sf__pmod(t[a] + t[3 + a] - w->region[a], w->shape[a]);
  }
  const int64_t ny = t[7], nx = t[8];
  const uint64_t h = tile_hash(tile);
  for (int64_t zr = r0[0]; zr < r0[0] + t[6] && e->status == SLABFEED_OK;) {
    const int q = sf__split_owner(w->region[3], w->size, zr);
    const int64_t zend =
        w->z0[q + 1] < r0[0] + t[6] ? w->z0[q + 1] : r0[0] + t[6];
    const part p = {q, zr, zend - zr, r0[1], ny, r0[2], nx};
    /* Staged in the slab's layout: (C, nz, ny, nx) or (nz, ny, nx, C). */
    const int64_t cs = w->cl ? 1 : p.nz * ny * nx, xs = w->cl ? w->C : 1;
    for (int64_t c = 0; c < w->C; c++)
      for (int64_t z = 0; z < p.nz; z++)
        for (int64_t y = 0; y < ny; y++) {
          const int64_t jz = j0[0] + zr - r0[0] + z, jy = j0[1] + y;
          const int64_t at =
              cst + coef[0] * jz + coef[1] * jy + coef[2] * j0[2] + kofs[c];
          float *o = w->part + c * cs + (z * ny + y) * nx * xs;
          load_row(v, at, coef[2], nx, o, xs);
          finish_row(w->norm_on ? &w->norm[c] : NULL, neg[c], nx, o, xs);
        }
    deliver(w, &p, e);
    const uint64_t vox = (uint64_t)(p.nz * ny * nx);
    w->sent_vox[q] += vox;
    w->sent_hash[q] += h * vox;
    zr = zend;
  }
  return e->status;
}

/* ---- Open -----------------------------------------------------------------
 */

static slabfeed_status writer_error(slabfeed_writer *w, const sf__err *e)
{
  snprintf(w->last_error, sizeof w->last_error, "%s", e->msg);
  return e->status;
}

/* The dataset's dimensions in the file. */
static void file_dims(const slabfeed_writer *w, hsize_t dims[4])
{
  for (int a = 0; a < 3; a++)
    dims[w->cl ? a : a + 1] = (hsize_t)w->region[3 + a];
  dims[w->cl ? 3 : 0] = (hsize_t)w->C;
}

static uint64_t data_bytes(const slabfeed_writer *w)
{
  return (uint64_t)w->region[3] * (uint64_t)plane_elems(w) * (w->f16 ? 2 : 4);
}

/* Creates the dataset (space allocated at once, never filled) and writes
 * all metadata by closing and reopening the file (see generate.c: the
 * final close then has nothing left to write). Collective. */
static slabfeed_status create_dataset(slabfeed_writer *w, hid_t fapl,
                                      const int64_t chunk[3], sf__err *e)
{
  hsize_t dims[4], ch[4];
  file_dims(w, dims);
  for (int a = 0; a < 3; a++)
    ch[w->cl ? a : a + 1] = (hsize_t)chunk[a];
  ch[w->cl ? 3 : 0] = w->cl ? (hsize_t)w->C : 1;
  const hid_t space = H5Screate_simple(4, dims, NULL);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (space >= 0 && dcpl >= 0 &&
      H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0 &&
      H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0 &&
      (chunk[0] == 0 || H5Pset_chunk(dcpl, 4, ch) >= 0))
    w->dset = H5Dcreate2(w->file, w->name, w->ftype, space, H5P_DEFAULT, dcpl,
                         H5P_DEFAULT);
  if (w->dset >= 0) {
    if (sf__h5_write_layout(w->dset, !w->cl) < 0)
      sf__fail(e, SLABFEED_ERR_IO, "writer: cannot write the layout attribute");
  } else {
    sf__fail(e, SLABFEED_ERR_IO, "writer: cannot create dataset '%s' in '%s'",
             w->name, w->as.tmp);
    sf__h5_detail(e);
  }
  if (dcpl >= 0)
    H5Pclose(dcpl);
  if (space >= 0)
    H5Sclose(space);
  if (w->dset >= 0)
    H5Dclose(w->dset);
  w->dset = H5I_INVALID_HID;
  if (H5Fclose(w->file) < 0 && e->status == SLABFEED_OK) {
    sf__fail(e, SLABFEED_ERR_IO, "writer: writing the metadata of '%s' failed",
             w->as.tmp);
    sf__h5_detail(e);
  }
  w->file = H5I_INVALID_HID;
  if (e->status != SLABFEED_OK)
    return e->status;
  w->file = H5Fopen(w->as.tmp, H5F_ACC_RDWR, fapl);
  if (w->file >= 0)
    w->dset = H5Dopen2(w->file, w->name, H5P_DEFAULT);
  if (w->dset < 0) {
    sf__fail(e, SLABFEED_ERR_IO, "writer: cannot reopen '%s' to write it",
             w->as.tmp);
    sf__h5_detail(e);
  }
  return e->status;
}

/* The file aside: created, its dataset created, its space reserved; each
 * stage agreed. On failure the caller's close path removes it. */
static slabfeed_status create_file(slabfeed_writer *w, const int64_t chunk[3],
                                   sf__err *e)
{
  if (sf__aside_begin(&w->as, w->comm, w->path, 1, e) != SLABFEED_OK)
    return e->status;
  w->aside_live = 1;
  sf__h5_preflight(w->as.tmp, 1, e);
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#ifdef H5_HAVE_PARALLEL
  if (fapl < 0 || H5Pset_fapl_mpio(fapl, w->comm, MPI_INFO_NULL) < 0 ||
      H5Pset_coll_metadata_write(fapl, 1) < 0)
    sf__fail(e, SLABFEED_ERR_IO, "writer: cannot set the MPI-IO driver");
#endif
  w->ftype = sf__h5_file_type(w->f16);
  if (w->ftype < 0)
    sf__fail(e, SLABFEED_ERR_IO, "writer: cannot make the file type");
  if (sf__agree(w->comm, e) == SLABFEED_OK) {
    w->file = H5Fcreate(w->as.tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (w->file < 0) {
      sf__fail(e, SLABFEED_ERR_IO, "writer: cannot create '%s'", w->as.tmp);
      sf__h5_detail(e);
    }
  }
  if (sf__inject("writer.create", w->rank))
    sf__fail(e, SLABFEED_ERR_IO, "injected failure at stage 'writer.create'");
  int64_t chunks = 1;
  for (int a = 0; a < 3 && chunk[0] > 0; a++)
    chunks *= (w->region[3 + a] + chunk[a] - 1) / chunk[a];
  if (sf__agree(w->comm, e) == SLABFEED_OK)
    sf__aside_reserve(&w->as,
                      data_bytes(w) + ((uint64_t)256 << 10) +
                          (chunk[0] > 0 ? 256 * (uint64_t)chunks *
                                              (w->cl ? 1 : (uint64_t)w->C)
                                        : 0),
                      e);
  if (sf__agree(w->comm, e) == SLABFEED_OK)
    create_dataset(w, fapl, chunk, e);
  if (fapl >= 0)
    H5Pclose(fapl);
  return sf__agree(w->comm, e);
}

#ifdef SF_HAVE_CUDA
/* Pinned staging of one batch of outputs and the writer's stream. */
static slabfeed_status open_device(slabfeed_writer *w, sf__err *e)
{
  const int64_t E = w->T + 2 * w->P;
  w->pinned_bytes = (size_t)(w->B * w->C * E * E * E) * sizeof(float);
  int caller = 0;
  if (sf__cudart_get_device(&caller, e) || sf__cudart_set_device(w->device, e))
    return e->status;
  if (sf__cudart_host_alloc(&w->pinned, w->pinned_bytes, e) == SLABFEED_OK &&
      sf__cudart_stream_create(&w->stream, e) == SLABFEED_OK)
    sf__cudart_event_create(&w->ready, e);
  sf__err restore;
  sf__err_clear(&restore);
  sf__cudart_set_device(caller, e->status == SLABFEED_OK ? e : &restore);
  return e->status;
}
#endif

/* A put of known parts to another node's rank, read back by the owner:
 * the MPI_Put path of this MPI, checked once (see fetch.c's self-check of
 * the crop transfers). Collective; only with more than one node. */
static slabfeed_status put_selfcheck(slabfeed_writer *w, sf__err *e)
{
  if (w->nodes < 2)
    return SLABFEED_OK;
  /* Rank r puts a 1-plane part (at most 4 x 16 columns) into the next
   * rank with planes that is not on its node. */
  int to = -1;
  for (int i = 1; i < w->size && to < 0; i++) {
    const int q = (w->rank + i) % w->size;
    if (w->peer[q] == NULL && planes_of(w, q) > 0)
      to = q;
  }
  const int64_t ny = w->region[4] < 4 ? w->region[4] : 4;
  const int64_t nx = w->region[5] < 16 ? w->region[5] : 16;
  const int64_t n = w->C * ny * nx;
  /* The pattern is the same from every source (several may target one
   * rank); the target's plane starts as all-ones bits (NaN), equal to no
   * pattern value. */
  const int64_t Y = w->region[4], X = w->region[5], zq = planes_of(w, w->rank);
  if (w->slab != NULL && zq > 0)
    for (int64_t c = 0; c < (w->cl ? 1 : w->C); c++)
      memset(w->slab + c * zq * Y * X, 0xff,
             (size_t)(Y * X * (w->cl ? w->C : 1)) * sizeof(float));
  int rc = MPI_Win_sync(w->shm);
  if (rc == MPI_SUCCESS)
    rc = MPI_Barrier(w->comm);
  if (rc != MPI_SUCCESS)
    sf__fail_mpi(e, rc, "writer self-check");
  if (to >= 0 && e->status == SLABFEED_OK) {
    for (int64_t i = 0; i < n; i++)
      w->part[i] = (float)(i * 7 + 1);
    const part p = {to, w->z0[to], 1, 0, ny, 0, nx};
    deliver(w, &p, e);
  }
  int *got = calloc((size_t)w->size, sizeof *got);
  rc = got != NULL ? MPI_Allgather(&to, 1, MPI_INT, got, 1, MPI_INT, w->comm)
                   : MPI_ERR_NO_MEM;
  if (rc == MPI_SUCCESS)
    rc = MPI_Win_sync(w->shm);
  if (rc != MPI_SUCCESS)
    sf__fail_mpi(e, rc, "writer self-check");
  int src = -1;
  for (int r = 0; got != NULL && r < w->size; r++)
    if (got[r] == w->rank)
      src = r;
  int wrong = 0;
  if (src >= 0 && w->slab != NULL && e->status == SLABFEED_OK) {
    int64_t i = 0;
    for (int64_t c = 0; c < (w->cl ? 1 : w->C); c++)
      for (int64_t y = 0; y < ny; y++)
        for (int64_t x = 0; x < nx; x++)
          for (int64_t k = 0; k < (w->cl ? w->C : 1); k++, i++) {
            const float v = w->cl ? w->slab[(y * X + x) * w->C + k]
                                  : w->slab[c * zq * Y * X + y * X + x];
            wrong += v != (float)(i * 7 + 1);
          }
    if (sf__inject("writer.selfcheck", w->rank))
      wrong++; /* a test's stand-in for a broken MPI */
  }
  if (wrong > 0) {
    char lib[128];
    sf__mpilib_name(lib, sizeof lib);
    sf__fail(e, SLABFEED_ERR_MPI,
             "writer: self-check of MPI_Put between nodes failed: %d of %lld "
             "floats put by rank %d arrived wrong under %s; slabfeed refuses "
             "to write a file that may be wrong",
             wrong, (long long)n, src, lib);
  }
  free(got);
  return e->status;
}

static void release(slabfeed_writer *w);

slabfeed_status slabfeed_writer_open(slabfeed_loader *l,
                                     const slabfeed_writer_config *cfg,
                                     slabfeed_writer **out, char *errbuf,
                                     size_t errlen)
{
  sf__err e;
  sf__err_clear(&e);
  if (out != NULL)
    *out = NULL;
  if (l == NULL || out == NULL) {
    sf__fail(&e, SLABFEED_ERR_ARG, "writer: NULL loader or output handle");
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  slabfeed_writer *w = calloc(1, sizeof *w);
  if (w == NULL) {
    /* Still collective: the others must learn of it. */
    sf__fail(&e, SLABFEED_ERR_NOMEM, "writer: cannot allocate the writer");
    sf__agree(l->comm, &e);
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  w->comm = w->node = MPI_COMM_NULL;
  w->shm = w->world = MPI_WIN_NULL;
  w->file = w->dset = w->ftype = H5I_INVALID_HID;
  w->device = -1;
  sf__err_clear(&w->failed);
  int rc = MPI_Comm_dup(l->comm, &w->comm);
  if (rc != MPI_SUCCESS) {
    sf__fail_mpi(&e, rc, "MPI_Comm_dup (writer)");
    sf__agree(l->comm, &e);
    free(w);
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  MPI_Comm_rank(w->comm, &w->rank);
  MPI_Comm_size(w->comm, &w->size);
  slabfeed_writer_config c;
  if (l->forked)
    sf__fail(&e, SLABFEED_ERR_FORKED,
             "writer: the loader was opened before this process forked");
  else if (!l->plan.pass)
    sf__fail(&e, SLABFEED_ERR_ARG,
             "writer: the loader makes random crops; a writer needs the "
             "loader of a tiled pass (tile > 0)");
  if (e.status == SLABFEED_OK) {
    memcpy(w->shape, l->store.shape, sizeof w->shape);
    sf__config_region(&l->cfg, w->shape, w->region);
    w->grid = l->plan.tiles;
    w->T = w->grid.T;
    w->P = w->grid.P;
    w->B = l->cfg.pub.batch;
    w->device = l->plan.device;
    import_options(w, cfg, &c, l, &e);
  }
  if (sf__agree(w->comm, &e) == SLABFEED_OK &&
      agree_options(w, &c, &e) == SLABFEED_OK)
    check_path(w, c.overwrite, &e);
  if (e.status == SLABFEED_OK && !sf__h5_is_parallel() && w->size > 1)
    sf__fail(&e, SLABFEED_ERR_UNSUPPORTED,
             "writer: this build's HDF5 is serial; writing from %d ranks "
             "needs parallel HDF5",
             w->size);
  if (sf__agree(w->comm, &e) == SLABFEED_OK)
    make_node(w, l->cfg.rank_per_node, &e);
  if (sf__agree(w->comm, &e) == SLABFEED_OK) {
    w->z0 = malloc((size_t)(w->size + 1) * sizeof *w->z0);
    w->sent_vox = calloc((size_t)w->size, sizeof *w->sent_vox);
    w->sent_hash = calloc((size_t)w->size, sizeof *w->sent_hash);
    w->part = malloc((size_t)(w->C * w->T * w->T * w->T) * sizeof *w->part);
    if (w->z0 == NULL || w->sent_vox == NULL || w->sent_hash == NULL ||
        w->part == NULL)
      sf__fail(&e, SLABFEED_ERR_NOMEM,
               "writer: cannot allocate %lld bytes of staging",
               (long long)(w->C * w->T * w->T * w->T * 4));
    for (int q = 0; w->z0 != NULL && q <= w->size; q++)
      w->z0[q] = sf__split_begin(w->region[3], w->size, q);
  }
#ifdef SF_HAVE_CUDA
  if (e.status == SLABFEED_OK && w->device >= 0)
    open_device(w, &e);
#endif
  if (sf__agree(w->comm, &e) == SLABFEED_OK)
    make_windows(w, &e);
  if (sf__agree(w->comm, &e) == SLABFEED_OK)
    put_selfcheck(w, &e);
  if (sf__agree(w->comm, &e) == SLABFEED_OK) {
    sf__h5_quiet q; /* failures are reported in errbuf, not on stderr */
    sf__h5_quiet_begin(&q);
    create_file(w, c.chunk, &e);
    sf__h5_quiet_end(&q);
  }
  if (e.status != SLABFEED_OK) {
    release(w);
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  /* The self-check's pattern is overwritten by the pass (and any voxel
   * it leaves is caught by the coverage check at close). */
  *out = w;
  return SLABFEED_OK;
}

/* ---- Put ------------------------------------------------------------------
 */

/* Whether shape/strides describe a dense tensor (every element once, no
 * gaps, in some axis order): its span is then numel elements. */
static int dense(const slabfeed_tensor *t)
{
  int order[5] = {0, 1, 2, 3, 4};
  for (int i = 1; i < 5; i++)
    for (int j = i; j > 0 && t->strides[order[j]] < t->strides[order[j - 1]];
         j--) {
      const int k = order[j];
      order[j] = order[j - 1];
      order[j - 1] = k;
    }
  int64_t expect = 1;
  for (int i = 0; i < 5; i++) {
    const int a = order[i];
    if (t->shape[a] != 1 && t->strides[a] != expect)
      return 0;
    expect *= t->shape[a];
  }
  return 1;
}

static slabfeed_status check_tensor(const slabfeed_writer *w,
                                    const slabfeed_batch *b,
                                    const slabfeed_tensor *t,
                                    slabfeed_out_layout layout, int device,
                                    sf__err *e)
{
  if (t == NULL || t->data == NULL || t->ndim != 5)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer put: the output must be a 5-D tensor with data");
  if ((unsigned)t->dtype > SLABFEED_DTYPE_BF16)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer put: unknown dtype %d (f32, f16 or bf16)",
                    (int)t->dtype);
  if ((unsigned)layout > SLABFEED_OUT_NDHWC)
    return sf__fail(e, SLABFEED_ERR_ARG, "writer put: unknown layout %d",
                    (int)layout);
  const int cax = layout == SLABFEED_OUT_NCDHW ? 1 : 4;
  const int sax = layout == SLABFEED_OUT_NCDHW ? 2 : 1;
  const int64_t E = t->shape[sax];
  const int64_t *s = t->shape;
  if (s[0] < b->valid || s[0] > w->B || s[cax] != w->C ||
      t->shape[sax + 1] != E || t->shape[sax + 2] != E ||
      (E != w->T && E != w->T + 2 * w->P))
    return sf__fail(
        e, SLABFEED_ERR_ARG,
        "writer put: output of shape (%lld,%lld,%lld,%lld,%lld) (%s); "
        "expected (%d..%lld, %lld channels, edge %lld or %lld) for this "
        "pass of tile %lld, pad %lld",
        (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3],
        (long long)s[4], layout == SLABFEED_OUT_NCDHW ? "NCDHW" : "NDHWC",
        b->valid, (long long)w->B, (long long)w->C, (long long)w->T,
        (long long)(w->T + 2 * w->P), (long long)w->T, (long long)w->P);
  for (int a = 0; a < 5; a++)
    if (t->strides[a] < 0 || (t->shape[a] > 1 && t->strides[a] == 0))
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "writer put: negative or zero strides are not "
                      "supported");
  if (device >= 0 && device != w->device)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer put: the output is on CUDA device %d, but this "
                    "writer's loader %s",
                    device,
                    w->device < 0 ? "makes host batches (pass host memory)"
                                  : "uses another device");
  if (device >= 0 && !dense(t))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer put: a device output must be dense (any axis "
                    "order; make it contiguous first)");
  return SLABFEED_OK;
}

/* The batch is one of this pass: each real slot's sample is a tile index
 * whose description matches b->tile. */
static slabfeed_status check_batch(const slabfeed_writer *w,
                                   const slabfeed_batch *b, sf__err *e)
{
  if (b == NULL || b->size < offsetof(slabfeed_batch, tile) + sizeof b->tile)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer put: NULL batch or one of a library older than "
                    "0.4 (no tile field)");
  if (b->tile == NULL || b->sample == NULL || b->symmetry == NULL)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer put: the batch is not one of a tiled pass (no "
                    "tile description)");
  if (b->valid < 0 || b->valid > w->B)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "writer put: batch with %d real slots; this pass has "
                    "batch %lld",
                    b->valid, (long long)w->B);
  for (int s = 0; s < b->valid; s++) {
    int64_t at[9];
    const int64_t g = b->sample[s];
    if (g >= 0 && (uint64_t)g < w->grid.count)
      sf__tiles_at(&w->grid, (uint64_t)g, at);
    if (g < 0 || (uint64_t)g >= w->grid.count ||
        memcmp(at, b->tile + 9 * s, sizeof at) != 0 || b->symmetry[s] < 0 ||
        b->symmetry[s] >= SF_NSYM)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "writer put: slot %d (tile %lld) is not a tile of this "
                      "writer's pass (%llu tiles of edge %lld)",
                      s, (long long)g, (unsigned long long)w->grid.count,
                      (long long)w->T);
  }
  return SLABFEED_OK;
}

slabfeed_status slabfeed_writer_put(slabfeed_writer *w, const slabfeed_batch *b,
                                    const slabfeed_tensor *out,
                                    slabfeed_out_layout layout, int device,
                                    void *stream)
{
  if (w == NULL)
    return SLABFEED_ERR_ARG;
  sf__err e;
  sf__err_clear(&e);
  if (w->failed.status != SLABFEED_OK) {
    sf__fail(&e, SLABFEED_ERR_STATE,
             "writer put: an earlier put failed (%s); close or abort",
             w->failed.msg);
    return writer_error(w, &e);
  }
  if (check_batch(w, b, &e) != SLABFEED_OK ||
      check_tensor(w, b, out, layout, device, &e) != SLABFEED_OK)
    return writer_error(w, &e); /* refused: nothing stored, not sticky */
  if (sf__inject("writer.put", w->rank))
    sf__fail(&e, SLABFEED_ERR_IO, "injected failure at stage 'writer.put'");
  const char *base = out->data;
  if (device >= 0 && e.status == SLABFEED_OK) {
#ifdef SF_HAVE_CUDA
    size_t span = slabfeed_dtype_size(out->dtype);
    for (int a = 0; a < 5; a++)
      span *= (size_t)out->shape[a];
    if (sf__cudart_record(w->ready, stream, &e) == SLABFEED_OK &&
        sf__cudart_wait(w->stream, w->ready, &e) == SLABFEED_OK &&
        sf__cudart_copy(w->pinned, out->data, span, cudaMemcpyDeviceToHost,
                        w->stream, &e) == SLABFEED_OK)
      sf__cudart_stream_sync(w->stream, &e);
    base = w->pinned;
#else
    (void)stream;
    sf__fail(&e, SLABFEED_ERR_UNSUPPORTED,
             "writer put: device memory in a build without CUDA");
#endif
  }
  const int nc = layout == SLABFEED_OUT_NCDHW;
  const size_t es = slabfeed_dtype_size(out->dtype);
  for (int s = 0; s < b->valid && e.status == SLABFEED_OK; s++) {
    const view v = {.base = base + (size_t)(s * out->strides[0]) * es,
                    .sc = out->strides[nc ? 1 : 4],
                    .s = {out->strides[nc ? 2 : 1], out->strides[nc ? 3 : 2],
                          out->strides[nc ? 4 : 3]},
                    .E = out->shape[nc ? 2 : 1],
                    .dtype = out->dtype};
    put_tile(w, &v, b->symmetry[s], b->tile + 9 * s, (uint64_t)b->sample[s],
             &e);
  }
  if (e.status != SLABFEED_OK) {
    w->failed = e;
    return writer_error(w, &e);
  }
  return SLABFEED_OK;
}

/* ---- Close ----------------------------------------------------------------
 */

/* Every output voxel was put once: each owner compares the voxel count and
 * the tile hash it received with those of the tiles that own its planes. */
static slabfeed_status check_coverage(slabfeed_writer *w, sf__err *e)
{
  uint64_t got[2] = {0, 0};
  uint64_t *both = malloc((size_t)w->size * 2 * sizeof *both);
  if (both == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "writer: coverage table");
  for (int q = 0; q < w->size; q++)
    both[2 * q] = w->sent_vox[q], both[2 * q + 1] = w->sent_hash[q];
  const int rc =
      MPI_Reduce_scatter_block(both, got, 2, MPI_UINT64_T, MPI_SUM, w->comm);
  free(both);
  if (rc != MPI_SUCCESS)
    return sf__fail_mpi(e, rc, "MPI_Reduce_scatter_block (writer coverage)");
  const int64_t z0 = w->z0[w->rank], z1 = w->z0[w->rank + 1];
  uint64_t want = 0, hash = 0;
  for (uint64_t g = 0; g < w->grid.count && z1 > z0; g++) {
    int64_t t[9];
    sf__tiles_at(&w->grid, g, t);
    const int64_t r = sf__pmod(t[0] + t[3] - w->region[0], w->shape[0]);
    const int64_t lo = r > z0 ? r : z0, hi = r + t[6] < z1 ? r + t[6] : z1;
    if (hi > lo) {
      const uint64_t vox = (uint64_t)((hi - lo) * t[7] * t[8]);
      want += vox;
      hash += tile_hash(g) * vox;
    }
  }
  if (got[0] != want || got[1] != hash)
    sf__fail(
        e, SLABFEED_ERR_STATE,
        "writer: output planes [%lld,%lld) received %llu of %llu voxels%s: "
        "every batch of the pass must be put exactly once (did a rank "
        "stop putting, or put a batch twice?)",
        (long long)z0, (long long)z1, (unsigned long long)got[0],
        (unsigned long long)want,
        got[0] == want ? " with tiles missing and others twice" : "");
  return e->status;
}

static hid_t collective_dxpl(void)
{
  const hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
#ifdef H5_HAVE_PARALLEL
  if (dxpl >= 0 && H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE) < 0) {
    H5Pclose(dxpl);
    return H5I_INVALID_HID;
  }
#endif
  return dxpl;
}

/* Planes per collective write, and the number of writes every rank makes
 * (those of the rank with the most planes). */
static int64_t run_planes(const slabfeed_writer *w)
{
  int64_t cap = SF_RUN_BYTES / (plane_elems(w) * 4);
  return cap < 1 ? 1 : cap;
}

/* One run of planes [q, q + n) of this rank's slab: staged contiguous in
 * the file's type (into buf), then written (or read back into buf). */
static herr_t transfer(slabfeed_writer *w, hid_t dset, hid_t dxpl, int64_t q,
                       int64_t n, float *buf, int write)
{
  const int64_t zq = planes_of(w, w->rank), pe = plane_elems(w);
  if (write && n > 0) {
    const int64_t pc = pe / w->C; /* one channel's plane */
    if (w->cl)
      memcpy(buf, w->slab + q * pe, (size_t)(n * pe) * sizeof *buf);
    else
      for (int64_t c = 0; c < w->C; c++)
        memcpy(buf + c * n * pc, w->slab + (c * zq + q) * pc,
               (size_t)(n * pc) * sizeof *buf);
    if (w->f16 && H5Tconvert(H5T_NATIVE_FLOAT, w->ftype, (size_t)(n * pe), buf,
                             NULL, H5P_DEFAULT) < 0) {
      /* Still in the collective write, with nothing. */
      sf__h5_transfer_planes(dset, !w->cl, 0, 0, dxpl, w->ftype, 1, buf);
      return -1;
    }
  }
  return sf__h5_transfer_planes(dset, !w->cl, w->z0[w->rank] + q, n, dxpl,
                                w->ftype, write, buf);
}

/* Every rank's slab, in collective writes of at most SF_RUN_BYTES (a
 * rank with nothing left, or after a local failure, makes empty ones).
 * With `readback` the runs are read back instead and their sum compared
 * with that of the writes. */
static slabfeed_status write_slabs(slabfeed_writer *w, hid_t dset, int readback,
                                   sf__err *e)
{
  const int64_t cap = run_planes(w), zq = planes_of(w, w->rank);
  const int64_t most = planes_of(w, 0), runs = (most + cap - 1) / cap;
  const size_t es = w->f16 ? 2 : 4;
  const int64_t pe = plane_elems(w);
  float *buf = malloc((size_t)((zq < cap ? zq : cap) * pe + 1) * sizeof *buf);
  const hid_t dxpl = collective_dxpl();
  if (buf == NULL || dxpl < 0)
    sf__fail(e, SLABFEED_ERR_NOMEM, "writer: write buffer");
  if (!readback && sf__inject("writer.write", w->rank))
    sf__fail(e, SLABFEED_ERR_IO, "injected failure at stage 'writer.write'");
  uint64_t sum = 0;
  for (int64_t i = 0; i < runs && dxpl >= 0; i++) {
    const int64_t q = i * cap;
    int64_t n = q >= zq ? 0 : (zq - q < cap ? zq - q : cap);
    n = e->status == SLABFEED_OK && buf != NULL ? n : 0;
    if (transfer(w, dset, dxpl, q, n, buf, !readback) < 0 &&
        e->status == SLABFEED_OK) {
      sf__fail(e, SLABFEED_ERR_IO,
               "writer: %s output planes [%lld,%lld) of '%s' in '%s' "
               "(written aside as '%s') failed",
               readback ? "reading back" : "writing",
               (long long)(w->z0[w->rank] + q),
               (long long)(w->z0[w->rank] + q + n), w->name, w->path,
               w->as.tmp);
      sf__h5_detail(e);
    } else if (n > 0) {
      sum += sf__aside_sum(buf, (size_t)(n * pe) * es, (uint64_t)(q * pe) * es);
    }
  }
  if (!readback)
    w->sum = sum;
  else if (e->status == SLABFEED_OK && sum != w->sum)
    sf__fail(e, SLABFEED_ERR_IO,
             "writer: output planes [%lld,%lld) of '%s' read back from '%s' "
             "differ from what was written: a write that MPI-IO reported as "
             "done did not land (a full disk?)",
             (long long)w->z0[w->rank], (long long)w->z0[w->rank + 1], w->path,
             w->as.tmp);
  if (dxpl >= 0)
    H5Pclose(dxpl);
  free(buf);
  return e->status;
}

static slabfeed_status verify_file(void *ctx, const char *tmp, sf__err *e)
{
  slabfeed_writer *w = ctx;
  hid_t file = H5I_INVALID_HID, dset = H5I_INVALID_HID;
  if (sf__h5_open(w->comm, tmp, &file, e) == SLABFEED_OK) {
    dset = H5Dopen2(file, w->name, H5P_DEFAULT);
    if (dset < 0)
      sf__fail(e, SLABFEED_ERR_IO,
               "writer: cannot open '%s' in '%s' to read it back", w->name,
               tmp);
  }
  /* Every rank makes the same collective reads, empty after a failure. */
  if (file >= 0 && (dset >= 0 || e->status != SLABFEED_OK)) {
    if (dset >= 0)
      write_slabs(w, dset, 1, e);
  }
  if (dset >= 0)
    H5Dclose(dset);
  if (file >= 0)
    H5Fclose(file);
  return e->status;
}

/* Frees everything but the communicator's collective objects first: the
 * windows and the communicators are freed collectively (every rank calls
 * release at the same point). */
static void release(slabfeed_writer *w)
{
  if (w->dset >= 0)
    H5Dclose(w->dset);
  if (w->file >= 0)
    H5Fclose(w->file);
  if (w->ftype >= 0)
    H5Tclose(w->ftype);
  w->dset = w->file = w->ftype = H5I_INVALID_HID;
  if (w->aside_live)
    sf__aside_abort(&w->as);
  w->aside_live = 0;
  if (w->world_locked)
    MPI_Win_unlock_all(w->world);
  if (w->shm_locked)
    MPI_Win_unlock_all(w->shm);
  if (w->world != MPI_WIN_NULL)
    MPI_Win_free(&w->world);
  if (w->shm != MPI_WIN_NULL)
    MPI_Win_free(&w->shm);
  if (w->node != MPI_COMM_NULL)
    MPI_Comm_free(&w->node);
  if (w->comm != MPI_COMM_NULL)
    MPI_Comm_free(&w->comm);
#ifdef SF_HAVE_CUDA
  if (w->pinned != NULL) {
    sf__err ignore;
    sf__err_clear(&ignore);
    if (w->stream != NULL)
      sf__cudart_stream_sync(w->stream, &ignore);
    sf__cudart_free_host(w->pinned);
  }
  if (w->stream != NULL)
    sf__cudart_stream_destroy(w->stream);
  if (w->ready != NULL)
    sf__cudart_event_destroy(w->ready);
#endif
  free(w->z0);
  free(w->peer);
  free(w->part);
  free(w->sent_vox);
  free(w->sent_hash);
  free(w);
}

/* Close (abort 0) or abort (abort 1): completes the puts, agrees, writes
 * (unless aborting or failed), commits or removes the file, releases. */
static slabfeed_status finish(slabfeed_writer *w, int abort, char *errbuf,
                              size_t errlen)
{
  sf__err e = w->failed;
  if (abort && e.status == SLABFEED_OK)
    sf__fail(&e, SLABFEED_ERR_STATE, "writer: aborted by the caller");
  sf__err sync;
  sf__err_clear(&sync);
  sf__err *into = e.status == SLABFEED_OK ? &e : &sync;
  if (w->world != MPI_WIN_NULL) {
    const int rc = MPI_Win_flush_all(w->world);
    if (rc != MPI_SUCCESS)
      sf__fail_mpi(into, rc, "MPI_Win_flush_all (writer)");
  }
  node_sync(w, into);
  if (sf__agree(w->comm, &e) == SLABFEED_OK)
    check_coverage(w, &e);
  sf__h5_quiet q; /* failures are reported in errbuf, not on stderr */
  sf__h5_quiet_begin(&q);
  if (sf__agree(w->comm, &e) == SLABFEED_OK)
    write_slabs(w, w->dset, 0, &e);
  /* Every rank closes the file (collective), whatever happened. */
  if (w->dset >= 0 && H5Dclose(w->dset) < 0)
    sf__fail(&e, SLABFEED_ERR_IO, "writer: closing dataset '%s' failed",
             w->name);
  w->dset = H5I_INVALID_HID;
  if (w->file >= 0 && H5Fclose(w->file) < 0) {
    sf__fail(&e, SLABFEED_ERR_IO, "writer: closing '%s' failed", w->as.tmp);
    sf__h5_detail(&e);
  }
  w->file = H5I_INVALID_HID;
  sf__aside_commit(&w->as, e.status == SLABFEED_OK ? verify_file : NULL, w, &e);
  sf__h5_quiet_end(&q);
  w->aside_live = 0;
  const slabfeed_status st = e.status;
  sf__err_copy(&e, errbuf, errlen);
  release(w);
  return st;
}

slabfeed_status slabfeed_writer_close(slabfeed_writer *w, char *errbuf,
                                      size_t errlen)
{
  if (w == NULL)
    return SLABFEED_ERR_ARG;
  return finish(w, 0, errbuf, errlen);
}

void slabfeed_writer_abort(slabfeed_writer *w)
{
  if (w != NULL)
    finish(w, 1, NULL, 0);
}

const char *slabfeed_writer_last_error(const slabfeed_writer *w)
{
  return w == NULL ? "" : w->last_error;
}

slabfeed_status slabfeed_writer_shape(const slabfeed_writer *w,
                                      int64_t shape[4], int64_t *z0,
                                      int64_t *z1)
{
  if (w == NULL || shape == NULL)
    return SLABFEED_ERR_ARG;
  hsize_t d[4];
  file_dims(w, d);
  for (int a = 0; a < 4; a++)
    shape[a] = (int64_t)d[a];
  if (z0 != NULL)
    *z0 = w->z0[w->rank];
  if (z1 != NULL)
    *z1 = w->z0[w->rank + 1];
  return SLABFEED_OK;
}
