#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE, fallocate */
/* The writer of a tiled pass (slabfeed_writer_*): the mirror of the crop
 * gather. Each rank owns one z-slab of the output (the region's planes
 * split like slabfeed_slab_plan) in its node's shared-memory window. A put
 * undoes a tile's symmetry and normalisation into a staging of the part
 * the tile owns, in the slab layout: on the host for host outputs, with a
 * kernel on the writer's own stream for device outputs (only the owned
 * part then crosses into pinned staging). It then copies each owner's
 * share of that part into the owner's slab: memcpy when the owner is on
 * the node, MPI_Put + flush into the owner's window across nodes. Close checks
 * coverage (voxel counts and a hash of the tiles per owner), then writes the
 * slabs with collective parallel-HDF5 writes into a file written aside
 * (io/aside.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "common/convert.h"
#include "common/geometry.h"
#include "common/inject.h"
#include "common/mpilib.h"
#include "common/normf.h"
#include "common/progress.h"
#include "common/symmetry.h"
#include "common/sys.h"
#include "io/aside.h"
#include "io/h5.h"
#include "loader/loader.h"
#include "plan/sampler.h"
#include "plan/tiles.h"
#ifdef SF_HAVE_CUDA
#include "cuda/cudart.h"
#include "transform/inverse_gpu.h"
#endif

#define SF_RUN_BYTES ((int64_t)64 << 20) /* one collective write, at most */

struct slabfeed_writer {
  MPI_Comm comm, node;
  int rank, size, node_rank, nodes;
  char last_error[SF_ERRLEN];
  sf__err failed; /* the first failed put: close fails with it */
  /* The pass. */
  int64_t shape[3], region[6]; /* on the output's grid */
  int64_t T, P, B;             /* on the output's grid */
  int64_t fn, fd;              /* the output's grid over the pass's is
                                  fn / fd (tiles of the input grid; a
                                  super-resolution target: scale_factor / 1;
                                  a coarser one: 1 / coarsen_factor) */
  sf__tiles grid;              /* the pass's tiles, on the input's grid */
  /* The output. */
  int64_t C;    /* channels */
  int progress; /* the loader's option (slabfeed_progress) */
  int cl;       /* file (and slab) layout channels-last */
  int f16;      /* file element type float16 (else float32) */
  int64_t *z0;  /* [size + 1]: rank q holds output planes [z0[q], z0[q+1]) */
  int ngroups;
  int groups[SLABFEED_MAX_VECTORS][3];
  int norm_on;
  slabfeed_norm norm[SLABFEED_MAX_CHANNELS];
  /* Memory. */
  MPI_Win *shm; /* [n_shm]: a window per node rank (per_rank), or one */
  MPI_Win world;
  int n_shm, per_rank, shm_locked, world_locked;
  int touch;         /* threads that fault in this rank's slab at open */
  int independent;   /* close writes with independent MPI-IO (read_mode) */
  int direct;        /* close writes with pwrite at the dataset's offset
                        (independent too: no collective write) */
  int io_threads;    /* direct: the node's cores over its ranks */
  int64_t chunk[3];  /* the output's chunk (z, y, x); 0: contiguous */
  char io_how[1024]; /* which, and why (slabfeed_writer_io), and where
                       the open's time went */
  float *slab; /* this rank's planes, [C][planes][Y][X] or [planes][Y][X][C] */
  /* write_map (0.11): the slabs are the file's pages. map_base[q] is this
   * process's mapping of rank q's planes (map_len[q] bytes, one shared
   * mapping of the file per channel, placed one after the other), NULL
   * where rank q has none; map_fd the file aside, opened to map it. */
  int mapped, map_fd;
  int map_fallocated; /* this rank's pages reserved with fallocate */
  uint64_t map_off;   /* the data's offset in the file */
  uint64_t map_size;  /* rank 0: the file's size when mapped */
  char **map_base;
  size_t *map_len;
  float **peer;       /* [size]: slab of each rank of this node, else NULL */
  float *part;        /* staging of one tile's owned part, in the slab layout */
  struct view *views; /* [B]: the slots of the put in progress */
  struct inv_map *maps;           /* [B] */
  uint64_t *sent_vox, *sent_hash; /* [size]: what this rank put per owner */
  /* Device outputs. */
  int device;   /* the loader's device, or -1 */
  void *pinned; /* [B][C * T^3] floats: owned parts back from the device */
  void *dpart;  /* the same on the device, written by the inverse kernel */
  size_t pinned_bytes;
#ifdef SF_HAVE_CUDA
  cudaStream_t stream;
  cudaEvent_t ready;
  cudaEvent_t *landed; /* [B]: slot s of the put in pinned staging */
#endif
  int *away;         /* [B]: slot s has shares for owners whose slabs are not
                        registered here (other nodes', or with write_register
                        own the node's other ranks') */
  int registered;    /* the slabs planned are registered with CUDA */
  char reg_why[160]; /* why not, where they are not (CUDA's words) */
  int reg_node;      /* write_register: the node's slabs (1) or its own (0) */
  int *reg;          /* [size]: rank q's slab is registered */
  /* The file. */
  sf__aside as;
  int aside_live;
  hid_t file, dset, ftype;
  char path[SF_ASIDE_PATH], name[256], input_path[SF_ASIDE_PATH];
};

/* ---- Options -------------------------------------------------------------
 */

/* write_register auto: the node's slabs registered by each rank up to this
 * many ranks a node, its own slab alone above (runs 32-33: node faster at
 * 2 and 4 ranks, own at 8 and 16; docs/DECISIONS.md). */
#define SF_REGISTER_NODE_MAX 4

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
  snprintf(w->path, sizeof w->path, "%s", c->path);
  snprintf(w->name, sizeof w->name, "%s", c->dataset);
  /* A pass loader has one volume (a dataset of several is refused). */
  snprintf(w->input_path, sizeof w->input_path, "%s",
           l->suite.n > 0 ? l->suite.path[0] : "");
  return SLABFEED_OK;
}

/* The options that depend on the output's grid (the region and the tile
 * on it, once scaled by fn / fd): the chunk within the output, one tile
 * below 2^31 elements. */
static slabfeed_status check_output(const slabfeed_writer *w,
                                    const slabfeed_writer_config *c, sf__err *e)
{
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
                    "writer: '%s' exists; pass overwrite (slabfeed-predict "
                    "--overwrite, slabfeed.Writer(overwrite=True)) to "
                    "replace it",
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

/* The slab windows on the node, the peers' slabs, and the window over all
 * ranks for MPI_Put when there is more than one node. With per_rank every
 * node rank's slab is a shared window of its own (its own shared-memory
 * file, whose pages it faults in without the others' faults: the
 * loader's shared_window), else one window holds the node's slabs.
 * Collective; every rank makes every allocation, also after a failure. */
static slabfeed_status make_windows(slabfeed_writer *w, sf__err *e)
{
  const int64_t elems = planes_of(w, w->rank) * plane_elems(w);
  const MPI_Aint bytes = (MPI_Aint)elems * (MPI_Aint)sizeof(float);
  MPI_Info info = MPI_INFO_NULL;
  MPI_Group node = MPI_GROUP_NULL, all = MPI_GROUP_NULL;
  int nsize = 0, *nr = NULL, *wr = NULL;
  SF_MPI_GOTO(MPI_Comm_size(w->node, &nsize), e, out);
  SF_MPI_GOTO(MPI_Info_create(&info), e, out);
  SF_MPI_GOTO(MPI_Info_set(info, "alloc_shared_noncontig", "true"), e, out);
  const int n = w->per_rank ? nsize : 1;
  w->shm = malloc((size_t)n * sizeof *w->shm);
  if (w->shm == NULL) {
    sf__fail(e, SLABFEED_ERR_NOMEM, "writer: cannot allocate the window table");
    goto out;
  }
  w->n_shm = n;
  for (int k = 0; k < n; k++)
    w->shm[k] = MPI_WIN_NULL;
  for (int k = 0; k < n; k++) {
    const int mine = n == 1 || k == w->node_rank;
    float *b = NULL;
    const int rc = MPI_Win_allocate_shared(mine ? bytes : 0, sizeof(float),
                                           info, w->node, &b, &w->shm[k]);
    if (rc != MPI_SUCCESS) {
      if (e->status == SLABFEED_OK)
        sf__fail_mpi(e, rc, "MPI_Win_allocate_shared (writer)");
      w->shm[k] = MPI_WIN_NULL;
      continue;
    }
    if (mine)
      w->slab = b;
    const int rc2 = MPI_Win_set_errhandler(w->shm[k], MPI_ERRORS_RETURN);
    if (rc2 != MPI_SUCCESS && e->status == SLABFEED_OK)
      sf__fail_mpi(e, rc2, "MPI_Win_set_errhandler (writer)");
  }
  if (e->status != SLABFEED_OK)
    goto out;
  if ((elems > 0 && w->slab == NULL) || sf__inject("writer.alloc", w->rank)) {
    sf__fail(e, SLABFEED_ERR_NOMEM,
             "writer: cannot map %lld bytes of the node's shared window for "
             "the output slab (/dev/shm full, or memory limits)",
             (long long)(elems * (int64_t)sizeof(float)));
    w->slab = NULL;
  }
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
    SF_MPI_GOTO(
        MPI_Win_shared_query(w->shm[n == 1 ? 0 : i], i, &size, &unit, &ptr), e,
        out);
    w->peer[wr[i]] = ptr;
  }
  if (w->nodes > 1) {
    SF_MPI_GOTO(MPI_Win_create(w->slab, w->slab != NULL ? bytes : 0,
                               sizeof(float), MPI_INFO_NULL, w->comm,
                               &w->world),
                e, out);
    SF_MPI_GOTO(MPI_Win_set_errhandler(w->world, MPI_ERRORS_RETURN), e, out);
    SF_MPI_GOTO(MPI_Win_lock_all(MPI_MODE_NOCHECK, w->world), e, out);
    w->world_locked = 1;
  }
  for (int k = 0; k < n; k++) {
    SF_MPI_GOTO(MPI_Win_lock_all(MPI_MODE_NOCHECK, w->shm[k]), e, out);
    w->shm_locked = k + 1;
  }
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

/* MPI_Win_sync of every slab window: this rank's stores into the node's
 * slabs become visible to the node's ranks (and theirs to it). */
static int shm_sync(const slabfeed_writer *w)
{
  /* The mapped slabs (write_map) have no window: a full fence orders this
   * rank's stores (the barrier that follows makes them the others'). */
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  int rc = MPI_SUCCESS;
  for (int k = 0; k < w->n_shm && rc == MPI_SUCCESS; k++)
    rc = MPI_Win_sync(w->shm[k]);
  return rc;
}

/* Makes the node's stores into the shared window visible to its ranks. */
static slabfeed_status node_sync(slabfeed_writer *w, sf__err *e)
{
  SF_MPI_GOTO(shm_sync(w), e, out);
  SF_MPI_GOTO(MPI_Barrier(w->comm), e, out);
  SF_MPI_GOTO(shm_sync(w), e, out);
out:
  return e->status;
}

/* ---- The output slab as the file's pages (write_map, 0.11) ---------------
 */

/* Bytes of one plane of the output as stored: of one channel (channels
 * first) or of all (channels last). */
static int64_t plane_run_bytes(const slabfeed_writer *w)
{
  return (w->cl ? plane_elems(w) : plane_elems(w) / w->C) *
         (int64_t)sizeof(float);
}

static uint64_t data_bytes(const slabfeed_writer *w);

/* Whether the writer may map the file, as far as the options and the
 * output's shape tell before the file exists: write_map auto, one node, a
 * contiguous float32 output whose planes are whole pages, a close that
 * writes directly (read_mode auto or direct) and the output's directory
 * on a memory filesystem (tmpfs; rank 0 looks). Not on disk filesystems:
 * a page pinned for CUDA's copies can be written back and cleaned while
 * the device still stores into it (its later stores then miss the disk),
 * and the zeros of the populate would be written back before the data.
 * Collective: rank 0's answer for all. */
static slabfeed_status plan_map(slabfeed_writer *w, const slabfeed_config *lc,
                                const int64_t chunk[3], sf__err *e)
{
  const long page = sysconf(_SC_PAGESIZE);
  int may = lc->write_map == SLABFEED_WRITE_MAP_AUTO && w->nodes == 1 &&
            !w->f16 && chunk[0] == 0 && page > 0 &&
            plane_run_bytes(w) % page == 0 &&
            (lc->read_mode == SLABFEED_READ_DIRECT ||
             lc->read_mode == SLABFEED_READ_AUTO);
  if (may && w->rank == 0) {
    char dir[SF_ASIDE_PATH], fs[64];
    sf__dir_of(w->path, dir, sizeof dir);
    sf__h5_local_fs(dir, fs, sizeof fs);
    may = strcmp(fs, "tmpfs") == 0;
  }
  const int rc = MPI_Bcast(&may, 1, MPI_INT, 0, w->comm);
  if (rc != MPI_SUCCESS)
    return sf__fail_mpi(e, rc, "MPI_Bcast (writer: write_map)");
  w->mapped = may;
  return SLABFEED_OK;
}

/* Whether the file made by create_file can be mapped: its dataset's data
 * starts on a page, lies inside the file's size and inside the blocks
 * rank 0 reserved (a store into a mapped page the filesystem cannot back
 * is a SIGBUS, not an error), and close writes directly. Rank 0's answer
 * for all, its reason (where not) into why[len]; *off the data's offset.
 * Collective. */
static int map_fits(slabfeed_writer *w, uint64_t *off, char *why, size_t len,
                    sf__err *e)
{
  uint64_t at[2] = {0, 0}; /* fits, offset */
  if (w->rank == 0 && e->status == SLABFEED_OK) {
    const haddr_t a = H5Dget_offset(w->dset);
    const uint64_t end = (uint64_t)a + data_bytes(w);
    const long page = sysconf(_SC_PAGESIZE);
    struct stat st;
    const char *no = !w->direct ? "close does not write directly"
                     : a == HADDR_UNDEF || page <= 0 || a % (haddr_t)page != 0
                         ? "the data does not start on a page"
                     : stat(w->as.tmp, &st) != 0 || (uint64_t)st.st_size < end
                         ? "the file's size does not cover the data"
                     : !w->as.checked ? "its space is not reserved"
                                      : NULL;
    at[0] = no == NULL;
    at[1] = (uint64_t)a;
    w->map_size = no == NULL ? (uint64_t)st.st_size : 0;
    snprintf(why, len, "%s", no != NULL ? no : "");
  }
  const int rc = MPI_Bcast(at, 2, MPI_UINT64_T, 0, w->comm);
  if (rc != MPI_SUCCESS) {
    sf__fail_mpi(e, rc, "MPI_Bcast (writer: write_map)");
    return 0;
  }
  *off = at[1];
  return at[0] != 0;
}

/* The file offset of run k of rank q's planes in the mapped file: channel
 * k's planes [z0, z0 + zq) (channels first), or the planes of every
 * channel (channels last, k 0). */
static off_t run_offset(const slabfeed_writer *w, int q, int64_t k)
{
  return (off_t)(w->map_off + (uint64_t)((k * w->region[3] + w->z0[q]) *
                                         plane_run_bytes(w)));
}

/* Maps every rank's planes of the file (one node: every rank's slab is
 * this process's to reach) at the data's offset w->map_off: for rank q, an
 * address range of its slab's size, each channel's planes a shared
 * mapping of the file placed one after the other, so that the slab keeps
 * its layout ([C][planes][Y][X] or [planes][Y][X][C]). Local. */
static slabfeed_status map_slabs(slabfeed_writer *w, sf__err *e)
{
  w->peer = calloc((size_t)w->size, sizeof *w->peer);
  w->map_base = calloc((size_t)w->size, sizeof *w->map_base);
  w->map_len = calloc((size_t)w->size, sizeof *w->map_len);
  if (w->peer == NULL || w->map_base == NULL || w->map_len == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM,
                    "writer: cannot allocate the peer table");
  w->map_fd = open(w->as.tmp, O_RDWR | O_CLOEXEC);
  if (w->map_fd < 0)
    return sf__fail(e, SLABFEED_ERR_IO,
                    "writer: cannot open '%s' (written aside for '%s') to map "
                    "its data: %s",
                    w->as.tmp, w->path, strerror(errno));
  if (sf__inject("writer.map", w->rank)) /* a failure of this rank alone */
    return sf__fail(e, SLABFEED_ERR_IO,
                    "injected failure at stage 'writer.map' of '%s' (written "
                    "aside as '%s')",
                    w->path, w->as.tmp);
  const int64_t runs = w->cl ? 1 : w->C, pb = plane_run_bytes(w);
  for (int q = 0; q < w->size && e->status == SLABFEED_OK; q++) {
    const int64_t zq = planes_of(w, q);
    if (zq == 0)
      continue;
    const size_t run = (size_t)(zq * pb), len = run * (size_t)runs;
    char *base = mmap(NULL, len, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
      return sf__fail(e, SLABFEED_ERR_NOMEM,
                      "writer: cannot reserve %zu bytes of addresses to map "
                      "rank %d's planes of '%s': %s",
                      len, q, w->as.tmp, strerror(errno));
    w->map_base[q] = base;
    w->map_len[q] = len;
    for (int64_t k = 0; k < runs && e->status == SLABFEED_OK; k++) {
      const off_t at = run_offset(w, q, k);
      if (mmap(base + (size_t)k * run, run, PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_FIXED, w->map_fd, at) == MAP_FAILED)
        sf__fail(e, SLABFEED_ERR_IO,
                 "writer: cannot map %zu bytes at offset %lld of '%s': %s", run,
                 (long long)at, w->as.tmp, strerror(errno));
    }
    w->peer[q] = (float *)(void *)base;
  }
  w->slab = w->peer[w->rank];
  return e->status;
}

/* This rank's planes of the mapped file allocated before any put stores
 * into them: populated on the rank's threads (tmpfs allocates the pages,
 * in parallel over the node's ranks, where rank 0's fallocate of the
 * whole file would allocate them on one thread), or, where the kernel
 * has no MADV_POPULATE_WRITE, reserved with fallocate. A refusal (a full
 * tmpfs, a memory limit) is an error here, never a SIGBUS later. */
static slabfeed_status reserve_pages(slabfeed_writer *w, sf__err *e)
{
  const int64_t zq = planes_of(w, w->rank);
  if (zq == 0 || w->slab == NULL)
    return e->status;
  const size_t bytes = (size_t)(zq * plane_elems(w)) * sizeof(float);
  int err = sf__inject("writer.reserve", w->rank)
                ? ENOSPC
                : sf__populate_strict(w->slab, bytes, w->touch);
  if (err == EINVAL) { /* no MADV_POPULATE_WRITE: each channel's planes */
    err = 0;
    w->map_fallocated = 1;
    const int64_t runs = w->cl ? 1 : w->C, pb = plane_run_bytes(w);
    for (int64_t k = 0; k < runs && err == 0; k++)
      if (fallocate(w->map_fd, FALLOC_FL_KEEP_SIZE, run_offset(w, w->rank, k),
                    (off_t)(zq * pb)) != 0)
        err = errno;
  }
  /* A page the filesystem cannot back: EFAULT from madvise (the fault's
   * SIGBUS, refused), ENOSPC from fallocate. */
  if (err != 0)
    sf__fail(e, SLABFEED_ERR_IO,
             "writer: cannot reserve %.2f MB for output planes [%lld,%lld) of "
             "'%s' (written aside as '%s'): %s",
             (double)bytes / 1e6, (long long)w->z0[w->rank],
             (long long)(w->z0[w->rank] + zq), w->path, w->as.tmp,
             err == EFAULT || err == ENOSPC
                 ? "the filesystem has no room for them"
                 : strerror(err));
  return e->status;
}

static void unmap_slabs(slabfeed_writer *w)
{
  sf__unmap_table(&w->map_base, &w->map_len, w->size);
  if (w->map_fd >= 0)
    close(w->map_fd);
  w->map_fd = -1;
  if (w->mapped)
    w->slab = NULL;
}

/* ---- Parts: one owner's share of one tile --------------------------------
 */

/* A part: output planes [z, z + nz) of owner q, rows [y, y + ny), columns
 * [x, x + nx) of the output, all channels. It is read from a staged tile
 * `src` in the slab layout, [C][tz][ny][nx] or [tz][ny][nx][C], of which
 * it is the planes [dz, dz + nz). */
typedef struct part {
  int q;
  int64_t z, nz, y, ny, x, nx;
  const float *src;
  int64_t tz, dz;
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

/* The part inside its staged tile, as the origin of an MPI_Put: a count of
 * floats from *at when it is contiguous there (channels-last, or all the
 * tile's planes), else one subarray of the tile (*t committed). */
static int part_origin(const slabfeed_writer *w, const part *p,
                       const float **at, int *count, MPI_Datatype *t)
{
  const int64_t n = w->C * p->nz * p->ny * p->nx;
  if (w->cl || p->nz == p->tz) {
    *at = p->src + p->dz * p->ny * p->nx * (w->cl ? w->C : 1);
    *count = (int)n;
    *t = MPI_FLOAT;
    return MPI_SUCCESS;
  }
  const int sizes[4] = {(int)w->C, (int)p->tz, (int)p->ny, (int)p->nx};
  const int sub[4] = {(int)w->C, (int)p->nz, (int)p->ny, (int)p->nx};
  const int start[4] = {0, (int)p->dz, 0, 0};
  *at = p->src;
  *count = 1;
  int rc =
      MPI_Type_create_subarray(4, sizes, sub, start, MPI_ORDER_C, MPI_FLOAT, t);
  if (rc == MPI_SUCCESS)
    rc = MPI_Type_commit(t);
  return rc;
}

/* Copies a part from its staged tile into its owner's slab: stores into
 * the node's shared memory, or MPI_Put completed by a flush (the staging
 * is reused when this returns). */
static slabfeed_status deliver(slabfeed_writer *w, const part *p, sf__err *e)
{
  const int64_t Y = w->region[4], X = w->region[5], C = w->C;
  const int64_t zq = planes_of(w, p->q), dz = p->z - w->z0[p->q];
  float *dst = w->peer[p->q];
  if (dst != NULL) {
    if (!w->cl) {
      for (int64_t c = 0; c < C; c++)
        for (int64_t z = 0; z < p->nz; z++)
          for (int64_t y = 0; y < p->ny; y++)
            memcpy(dst + ((c * zq + dz + z) * Y + p->y + y) * X + p->x,
                   p->src + ((c * p->tz + p->dz + z) * p->ny + y) * p->nx,
                   (size_t)p->nx * sizeof *dst);
    } else {
      for (int64_t z = 0; z < p->nz; z++)
        for (int64_t y = 0; y < p->ny; y++)
          memcpy(dst + (((dz + z) * Y + p->y + y) * X + p->x) * C,
                 p->src + ((p->dz + z) * p->ny + y) * p->nx * C,
                 (size_t)(p->nx * C) * sizeof *dst);
    }
    return SLABFEED_OK;
  }
  MPI_Datatype t = MPI_DATATYPE_NULL, o = MPI_DATATYPE_NULL;
  const float *at = NULL;
  int count = 0;
  SF_MPI_GOTO(part_type(w, p, &t), e, out);
  SF_MPI_GOTO(part_origin(w, p, &at, &count, &o), e, out);
  SF_MPI_GOTO(MPI_Put(at, count, o, p->q, 0, 1, t, w->world), e, out);
  SF_MPI_GOTO(MPI_Win_flush(p->q, w->world), e, out);
out:
  if (t != MPI_DATATYPE_NULL)
    MPI_Type_free(&t);
  if (o != MPI_DATATYPE_NULL && o != MPI_FLOAT)
    MPI_Type_free(&o);
  return e->status;
}

/* One model output as put reads it: slot base, element strides of the
 * channel and the three spatial axes (of the tile's symmetry frame), edge
 * and dtype. */
struct view {
  const char *base;
  int64_t sc, s[3], E;
  slabfeed_dtype dtype;
};
typedef struct view view;

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

/* Where the owned part of a tile comes from in its model output: the
 * element of unrotated position j (of the output's frame, edge E) and
 * output channel c is at cst + sum_b coef[b] * j[b] + kofs[c], its sign
 * flipped where neg[c]; the owned box starts at j0 and has extents n, and
 * at r0 in the region's coordinates. */
struct inv_map {
  int64_t cst, coef[3], kofs[SLABFEED_MAX_CHANNELS];
  int neg[SLABFEED_MAX_CHANNELS];
  int64_t j0[3], r0[3], n[3];
};
typedef struct inv_map inv_map;

/* Tile t (slabfeed_batch.tile layout, on the pass's grid) on the output's
 * grid into out[9]. */
static void tile_on_output(const slabfeed_writer *w, const int64_t t[9],
                           int64_t out[9])
{
  for (int i = 0; i < 9; i++)
    out[i] = t[i] * w->fn / w->fd;
}

/* The map of tile tc (slabfeed_batch.tile layout) under symmetry g. */
static void inv_map_make(const slabfeed_writer *w, const view *v, int g,
                         const int64_t tc[9], inv_map *m)
{
  int64_t t[9];
  tile_on_output(w, tc, t);
  /* Output i of the symmetry frame is input j with
   * j[perm[a]] = flip_a ? E-1-i[a] : i[a]. */
  const int *perm = sf__sym_perm(g);
  const int flips = sf__sym_flips(g);
  m->cst = 0;
  for (int a = 0; a < 3; a++) {
    const int flip = flips >> a & 1;
    m->coef[perm[a]] = flip ? -v->s[a] : v->s[a];
    m->cst += flip ? v->s[a] * (v->E - 1) : 0;
  }
  int src[SLABFEED_MAX_CHANNELS];
  float sign[SLABFEED_MAX_CHANNELS];
  sf__sym_channels(g, (int)w->C, w->ngroups, (const int(*)[3])w->groups, src,
                   sign);
  for (int k = 0; k < w->C; k++) {
    m->kofs[src[k]] = k * v->sc;
    m->neg[src[k]] = sign[k] < 0;
  }
  /* The owned part in the tile's frame (the output's centre when the
   * model kept the pad) and in output coordinates. */
  const int64_t off = (v->E - w->T) / 2;
  for (int a = 0; a < 3; a++) {
    m->j0[a] = off + t[3 + a];
    m->r0[a] = sf__pmod(t[a] + t[3 + a] - w->region[a], w->shape[a]);
    m->n[a] = t[6 + a];
  }
}

/* The host path: the owned part of v under m into dst, float32 in the
 * slab layout ([C][n0][n1][n2] or [n0][n1][n2][C]). */
static void stage_host(const slabfeed_writer *w, const view *v,
                       const inv_map *m, float *dst)
{
  const int64_t n0 = m->n[0], n1 = m->n[1], n2 = m->n[2];
  const int64_t cs = w->cl ? 1 : n0 * n1 * n2, xs = w->cl ? w->C : 1;
  for (int64_t c = 0; c < w->C; c++)
    for (int64_t z = 0; z < n0; z++)
      for (int64_t y = 0; y < n1; y++) {
        const int64_t at = m->cst + m->coef[0] * (m->j0[0] + z) +
                           m->coef[1] * (m->j0[1] + y) + m->coef[2] * m->j0[2] +
                           m->kofs[c];
        float *o = dst + c * cs + (z * n1 + y) * n2 * xs;
        load_row(v, at, m->coef[2], n2, o, xs);
        finish_row(w->norm_on ? &w->norm[c] : NULL, m->neg[c], n2, o, xs);
      }
}

/* The hash a tile's voxels carry in the coverage check. */
static uint64_t tile_hash(uint64_t g)
{
  return sf__fmix64(g * 0x9e3779b97f4a7c15ull + 0xd1b54a32d192ed03ull);
}

/* The part of the owned box of m that begins at output plane *zr (its
 * owner's share), read from src; advances *zr past it. */
static part next_part(const slabfeed_writer *w, const inv_map *m,
                      const float *src, int64_t *zr)
{
  const int64_t zlast = m->r0[0] + m->n[0];
  const int q = sf__split_owner(w->region[3], w->size, *zr);
  const int64_t zend = w->z0[q + 1] < zlast ? w->z0[q + 1] : zlast;
  const part p = {q,        *zr,     zend - *zr, m->r0[1], m->n[1],
                  m->r0[2], m->n[2], src,        m->n[0],  *zr - m->r0[0]};
  *zr = zend;
  return p;
}

/* Stores the staged owned part of tile `tile` (box of m, staged at src)
 * into the slabs of its owners, one part per owner, and counts it for the
 * coverage check. copied: the parts whose owner's slab is registered
 * were stored already (by the device's copies) and are counted only. */
static slabfeed_status deliver_tile(slabfeed_writer *w, const inv_map *m,
                                    const float *src, uint64_t tile, int copied,
                                    sf__err *e)
{
  const uint64_t h = tile_hash(tile);
  for (int64_t zr = m->r0[0];
       zr < m->r0[0] + m->n[0] && e->status == SLABFEED_OK;) {
    const part p = next_part(w, m, src, &zr);
    if (!(copied && w->peer[p.q] != NULL && w->reg[p.q]))
      deliver(w, &p, e);
    const uint64_t vox = (uint64_t)(p.nz * p.ny * p.nx);
    w->sent_vox[p.q] += vox;
    w->sent_hash[p.q] += h * vox;
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

/* The bytes to reserve for the file: its data and room for its metadata
 * (256 KiB, and 256 bytes per chunk of a chunked output). */
static uint64_t reserve_bytes(const slabfeed_writer *w, const int64_t chunk[3])
{
  int64_t chunks = 1;
  for (int a = 0; a < 3 && chunk[0] > 0; a++)
    chunks *= (w->region[3 + a] + chunk[a] - 1) / chunk[a];
  return data_bytes(w) + ((uint64_t)256 << 10) +
         (chunk[0] > 0 ? 256 * (uint64_t)chunks * (w->cl ? 1 : (uint64_t)w->C)
                       : 0);
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
  if (fapl < 0 || sf__h5_set_mpio(fapl, w->comm) < 0 ||
      H5Pset_coll_metadata_write(fapl, 1) < 0)
    sf__fail(e, SLABFEED_ERR_IO, "writer: cannot set the MPI-IO driver");
#endif
  /* A mapped slab's data starts on a page (the only allocation as large
   * as the data: the others keep their packing). */
  const long page = sysconf(_SC_PAGESIZE);
  if (w->mapped && fapl >= 0 && page > 0 &&
      H5Pset_alignment(fapl, (hsize_t)data_bytes(w), (hsize_t)page) < 0)
    sf__fail(e, SLABFEED_ERR_IO, "writer: cannot set the file's alignment");
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
  /* A slab to be mapped: the space checked here, the pages reserved by
   * every rank once mapped (reserve_pages). */
  w->as.check_only = w->mapped;
  if (sf__agree(w->comm, e) == SLABFEED_OK)
    sf__aside_reserve(&w->as, reserve_bytes(w, chunk), e);
  if (sf__agree(w->comm, e) == SLABFEED_OK)
    create_dataset(w, fapl, chunk, e);
  if (fapl >= 0)
    H5Pclose(fapl);
  return sf__agree(w->comm, e);
}

/* How close writes (the loader's read_mode rules, for the output's
 * filesystem): where rank 0 finds the file aside on a node-local or
 * memory filesystem, direct (0.9: each rank pwrites its planes at the
 * dataset's offset on its share of the node's cores; no aggregation, no
 * collective write; 0.10: a chunked output's planes at its chunks'
 * offsets, each plane's rows of a chunk its own bytes); collective on
 * others; independent or direct where read_mode names them, except that
 * a chunked output is never written with independent MPI-IO (chunks may
 * straddle two ranks' planes) nor directly before HDF5 1.10.5 (no chunk
 * lookup). Collective. */
static slabfeed_status choose_io(slabfeed_writer *w, slabfeed_read_mode mode,
                                 const int64_t chunk[3], sf__err *e)
{
  enum { IND = 1, DIRECT = 2 };
  char fs[64] = "";
  const char *why = fs;
  const int chunked = chunk[0] > 0;
  for (int a = 0; a < 3; a++)
    w->chunk[a] = chunked ? chunk[a] : 0;
  int how = mode == SLABFEED_READ_INDEPENDENT ? IND
            : mode == SLABFEED_READ_DIRECT    ? IND | DIRECT
                                              : 0;
  if (mode == SLABFEED_READ_AUTO && w->rank == 0)
    how = sf__h5_local_fs(w->as.tmp, fs, sizeof fs) ? IND | DIRECT : 0;
#if H5_VERSION_GE(1, 10, 5)
  if (chunked && how == IND)
    how = 0, why = "a chunked output: ranks share chunks";
#else
  if (chunked)
    how = 0, why = "a chunked output: no chunk lookup before HDF5 1.10.5";
#endif
  int rc = MPI_Bcast(&how, 1, MPI_INT, 0, w->comm);
  int node_ranks = 1;
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_size(w->node, &node_ranks);
  if (rc != MPI_SUCCESS)
    return sf__fail_mpi(e, rc, "MPI_Bcast (writer: write mode)");
  w->independent = (how & IND) != 0;
  w->direct = (how & DIRECT) != 0;
  w->io_threads = sf__core_share(node_ranks);
  /* write_map as planned (plan_map) where the file allows it. */
  const int planned = w->mapped;
  char no_map[64] = "";
  if (planned)
    w->mapped = map_fits(w, &w->map_off, no_map, sizeof no_map, e);
  static const char *const modes[] = {"auto", "collective", "independent",
                                      "direct"};
  char what[160];
  if (w->mapped)
    snprintf(what, sizeof what,
             "the file's own pages, mapped (write_map auto): puts land in "
             "the file, close writes nothing");
  else if (w->direct && planned)
    snprintf(what, sizeof what, "direct pwrite on %d thread%s, not mapped%s%s",
             w->io_threads, w->io_threads == 1 ? "" : "s",
             w->rank == 0 ? ": " : "", w->rank == 0 ? no_map : "");
  else if (w->direct)
    snprintf(what, sizeof what, "direct pwrite on %d thread%s", w->io_threads,
             w->io_threads == 1 ? "" : "s");
  else
    snprintf(what, sizeof what, "%s MPI-IO writes",
             w->independent ? "independent" : "collective");
  char bound[160] = ""; /* its writes or its page faults' threads */
  sf__core_note(node_ranks, bound, sizeof bound);
  snprintf(w->io_how, sizeof w->io_how, "%s (read_mode %s%s%s)%s", what,
           modes[(int)mode % 4], why[0] != '\0' && w->rank == 0 ? ": " : "",
           w->rank == 0 ? why : "", bound);
  return SLABFEED_OK;
}

#ifdef SF_HAVE_CUDA
/* The staging of device outputs (device and pinned: one owned part per
 * slot), the writer's stream and its events. */
static slabfeed_status open_device(slabfeed_writer *w, sf__err *e)
{
  w->pinned_bytes = (size_t)(w->B * w->C * w->T * w->T * w->T) * sizeof(float);
  w->landed = calloc((size_t)w->B, sizeof *w->landed);
  if (w->landed == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "writer: event table");
  int caller = 0;
  if (sf__cudart_get_device(&caller, e) || sf__cudart_set_device(w->device, e))
    return e->status;
  if (sf__cudart_host_alloc(&w->pinned, w->pinned_bytes, e) == SLABFEED_OK &&
      sf__cudart_malloc(&w->dpart, w->pinned_bytes, e) == SLABFEED_OK &&
      sf__cudart_stream_create(&w->stream, e) == SLABFEED_OK)
    sf__cudart_event_create(&w->ready, e);
  for (int64_t s = 0; s < w->B && e->status == SLABFEED_OK; s++)
    sf__cudart_event_create(&w->landed[s], e);
  sf__err restore;
  sf__err_clear(&restore);
  sf__cudart_set_device(caller, e->status == SLABFEED_OK ? e : &restore);
  return e->status;
}

/* Keeps the first words of why registration was refused, for the report. */
static void keep_refusal(slabfeed_writer *w, const sf__err *probe)
{
  snprintf(w->reg_why, sizeof w->reg_why, "%.*s", (int)sizeof w->reg_why - 1,
           probe->msg);
}

/* Registers the rank's own slab with CUDA, and with write_register node
 * those of the node's other ranks, so that device puts copy into them
 * directly; parts for a slab not registered come back through pinned
 * staging and are stored by the CPU. Where registration is refused every
 * put goes that way (slower, not an error). */
static void register_slabs(slabfeed_writer *w)
{
  sf__err probe;
  sf__err_clear(&probe);
  int caller = 0;
  if (sf__cudart_get_device(&caller, &probe) ||
      sf__cudart_set_device(w->device, &probe)) {
    keep_refusal(w, &probe);
    return;
  }
  /* A refusal on this rank alone (test): every put through staging. */
  int ok = !sf__inject("writer.register", w->rank);
  if (!ok)
    sf__fail(&probe, SLABFEED_ERR_CUDA, "injected for a test");
  /* Its own slab first, then the next ranks': the node's ranks pin
   * different pages at a time. */
  for (int i = 0; i < w->size && ok; i++) {
    const int q = (w->rank + i) % w->size;
    const size_t bytes =
        (size_t)(planes_of(w, q) * plane_elems(w)) * sizeof(float);
    if (w->peer[q] != NULL && bytes > 0 && (q == w->rank || w->reg_node)) {
      ok = sf__cudart_host_register(w->peer[q], bytes, &probe) == SLABFEED_OK;
      w->reg[q] = ok;
    }
  }
  w->registered = ok;
  if (!ok)
    keep_refusal(w, &probe);
  for (int q = 0; q < w->size && !ok; q++)
    if (w->reg[q]) {
      sf__cudart_host_unregister(w->peer[q]);
      w->reg[q] = 0;
    }
  sf__cudart_set_device(caller, &probe);
}

/* register_slabs on a thread of its own, timed: it makes no MPI or HDF5
 * call, so it runs beside the creation of the file (issue 34: the
 * writer's open was the largest fixed cost of a prediction pass). */
typedef struct register_job {
  slabfeed_writer *w;
  double seconds;
} register_job;

static void *register_thread(void *arg)
{
  register_job *j = arg;
  const double t0 = sf__now();
  register_slabs(j->w);
  j->seconds = sf__now() - t0;
  return NULL;
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
  int rc = shm_sync(w);
  if (rc == MPI_SUCCESS)
    rc = MPI_Barrier(w->comm);
  if (rc != MPI_SUCCESS)
    sf__fail_mpi(e, rc, "writer self-check");
  if (to >= 0 && e->status == SLABFEED_OK) {
    /* Staged as the second plane of a 2-plane tile (the other plane is
     * -1): the origin of a put is a subarray of its tile, as in a pass. */
    const int64_t pl = n / w->C; /* one channel of one plane */
    for (int64_t i = 0; i < 2 * n; i++)
      w->part[i] = -1.0f;
    for (int64_t i = 0; i < n; i++)
      w->part[w->cl ? n + i : (i / pl * 2 + 1) * pl + i % pl] =
          (float)(i * 7 + 1);
    const part p = {to, w->z0[to], 1, 0, ny, 0, nx, w->part, 2, 1};
    deliver(w, &p, e);
  }
  int *got = calloc((size_t)w->size, sizeof *got);
  rc = got != NULL ? MPI_Allgather(&to, 1, MPI_INT, got, 1, MPI_INT, w->comm)
                   : MPI_ERR_NO_MEM;
  if (rc == MPI_SUCCESS)
    rc = shm_sync(w);
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

/* This rank's slab faulted in on several threads (registration with CUDA
 * would fault it on one), with huge pages asked for or refused first
 * (memory of its own; the file's pages keep the filesystem's). Returns
 * its bytes (0: none, or after a failure). The caller's agreement orders
 * every rank's faults before any registers the node's slabs. */
static size_t fault_slab(slabfeed_writer *w, int huge, const sf__err *e)
{
  const size_t bytes =
      e->status == SLABFEED_OK && w->slab != NULL
          ? (size_t)(planes_of(w, w->rank) * plane_elems(w)) * sizeof(float)
          : 0;
  if (bytes > 0 && !w->mapped)
    sf__huge_advise(w->slab, bytes, huge);
  if (bytes > 0 && w->touch > 1 && !w->mapped) /* mapped: reserve_pages */
    sf__populate(w->slab, bytes, w->touch);
  return bytes;
}

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
  w->world = MPI_WIN_NULL;
  w->file = w->dset = w->ftype = H5I_INVALID_HID;
  w->device = -1;
  w->map_fd = -1;
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
    /* The pass's tiles on the input's grid (the plan's planes are a
     * coarser target's grid, g times coarser, when there is one). */
    const int64_t g = l->plan.scale[0];
    for (int a = 0; a < 3; a++)
      w->shape[a] = g * l->store.shape[a];
    sf__config_region(&l->cfg, w->shape, w->region);
    w->grid = l->plan.tiles;
    if (g > 1)
      sf__tiles_init(&w->grid, w->shape, w->region, l->cfg.pub.tile,
                     l->cfg.pub.pad);
    w->T = w->grid.T;
    w->P = w->grid.P;
    w->B = l->cfg.pub.batch;
    w->progress = (int)l->cfg.pub.progress;
    w->device = l->plan.device;
    import_options(w, cfg, &c, l, &e);
    /* Outputs like a target of another grid are on that grid: the box,
     * the region, the tiles and their parts f / g times (whole voxels:
     * a coarser target's tiles and region are multiples of g, config). */
    const int like_t = c.like != SLABFEED_LIKE_INPUT && l->cfg.ndsets > 1;
    w->fn = like_t ? l->plan.scale[1] : 1;
    w->fd = like_t ? g : 1;
    for (int a = 0; a < 3; a++)
      w->shape[a] = w->shape[a] * w->fn / w->fd;
    for (int a = 0; a < 6; a++)
      w->region[a] = w->region[a] * w->fn / w->fd;
    w->T = w->T * w->fn / w->fd;
    w->P = (w->P * w->fn + w->fd - 1) / w->fd;
    if (e.status == SLABFEED_OK)
      check_output(w, &c, &e);
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
    /* The self-check stages a part of 2 planes of up to 4 x 16. */
    const int64_t tile = w->C * w->T * w->T * w->T, check = w->C * 2 * 4 * 16;
    w->part = malloc((size_t)(tile > check ? tile : check) * sizeof *w->part);
    w->views = calloc((size_t)w->B, sizeof *w->views);
    w->maps = calloc((size_t)w->B, sizeof *w->maps);
    w->away = calloc((size_t)w->B, sizeof *w->away);
    w->reg = calloc((size_t)w->size, sizeof *w->reg);
    if (w->z0 == NULL || w->sent_vox == NULL || w->sent_hash == NULL ||
        w->part == NULL || w->views == NULL || w->maps == NULL ||
        w->away == NULL || w->reg == NULL)
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
  const double t_mem = sf__now();
  if (sf__agree(w->comm, &e) == SLABFEED_OK) {
    int nsize = 1;
    MPI_Comm_size(w->node, &nsize);
    /* Each rank pinning the node's whole output costs the node's ranks
     * x its bytes (docs/DECISIONS.md); the same choice on every rank of
     * a node. Local work only: nothing collective depends on it. */
    const slabfeed_write_register wr = l->cfg.pub.write_register;
    w->reg_node =
        wr == SLABFEED_WRITE_REGISTER_NODE ||
        (wr == SLABFEED_WRITE_REGISTER_AUTO && nsize <= SF_REGISTER_NODE_MAX);
    w->per_rank = l->store.per_rank;
    w->touch = sf__touch_threads(l->cfg.pub.touch_threads, nsize);
    /* The slab as the file's pages (write_map) once the file exists; else
     * memory of its own now. */
    if (plan_map(w, &l->cfg.pub, c.chunk, &e) == SLABFEED_OK && !w->mapped)
      make_windows(w, &e);
  }
  const int huge = l->cfg.pub.huge_pages == SLABFEED_HUGE_AUTO;
  size_t slab_bytes = fault_slab(w, huge, &e);
  if (sf__agree(w->comm, &e) == SLABFEED_OK)
    put_selfcheck(w, &e);
  const double t_file = sf__now();
  double t_register = 0, t_pages = 0;
#ifdef SF_HAVE_CUDA
  /* The slabs (write_register) registered with CUDA beside the file's
   * creation. */
  register_job job = {w, 0};
  pthread_t reg;
  int reg_thread = 0;
  if (e.status == SLABFEED_OK && w->device >= 0 && !w->mapped) {
    reg_thread = pthread_create(&reg, NULL, register_thread, &job) == 0;
    if (!reg_thread)
      register_thread(&job);
  }
#endif
  if (sf__agree(w->comm, &e) == SLABFEED_OK) {
    sf__h5_quiet q; /* failures are reported in errbuf, not on stderr */
    sf__h5_quiet_begin(&q);
    create_file(w, c.chunk, &e);
    sf__h5_quiet_end(&q);
  }
  const int planned = w->mapped;
  if (e.status == SLABFEED_OK)
    choose_io(w, l->cfg.pub.read_mode, c.chunk, &e);
  /* Planned to map: the file's pages mapped (their faults taken now, on
   * several threads: they exist, reserved), or, where the file does not
   * allow it, memory of its own after all; registered after either. */
  if (sf__agree(w->comm, &e) == SLABFEED_OK && planned) {
    if (w->mapped)
      map_slabs(w, &e);
    else
      make_windows(w, &e);
    /* Not mapped after all: rank 0 reserves the file as for any other. */
    w->as.check_only = 0;
    if (sf__agree(w->comm, &e) == SLABFEED_OK && !w->mapped)
      sf__aside_reserve(&w->as, reserve_bytes(w, c.chunk), &e);
    if (sf__agree(w->comm, &e) == SLABFEED_OK && w->mapped) {
      const double t0 = sf__now();
      reserve_pages(w, &e);
      t_pages = sf__now() - t0;
    }
    if (sf__agree(w->comm, &e) == SLABFEED_OK)
      slab_bytes = fault_slab(w, huge, &e);
    /* Every rank's pages allocated: the file is covered (no read-back). */
    if (e.status == SLABFEED_OK && w->mapped && w->rank == 0)
      w->as.reserved = w->map_size;
#ifdef SF_HAVE_CUDA
    /* After the populate, not beside it: the pinning then faults pages
     * too, and the two contend for the file's page cache (run 27). */
    if (sf__agree(w->comm, &e) == SLABFEED_OK && w->device >= 0)
      register_thread(&job);
#endif
  }
  const double t_done = sf__now();
#ifdef SF_HAVE_CUDA
  if (reg_thread)
    pthread_join(reg, NULL);
  t_register = job.seconds;
#endif
  if (e.status == SLABFEED_OK) {
    /* Which slabs were registered, and why (write_register). */
    char why[64];
    if (l->cfg.pub.write_register != SLABFEED_WRITE_REGISTER_AUTO)
      snprintf(why, sizeof why, "%s", w->reg_node ? "node" : "own");
    else
      snprintf(why, sizeof why, "auto: %s %d ranks on the node",
               w->reg_node ? "at most" : "more than", SF_REGISTER_NODE_MAX);
    char refused[224] = "";
    if (!w->registered)
      snprintf(refused, sizeof refused,
               " (refused (%s): its puts go through pinned staging)",
               w->reg_why);
    char reg_how[448] = "";
    if (w->device >= 0)
      snprintf(reg_how, sizeof reg_how,
               " beside the CUDA registration of %s %.2f s (write_register "
               "%s)%s",
               w->reg_node ? "the node's slabs" : "its own slab", t_register,
               why, refused);
    char huge_how[160] = "";
    if (slab_bytes > 0 && !w->mapped) {
      huge_how[0] = ' ';
      huge_how[1] = '(';
      sf__huge_report(w->slab, slab_bytes, huge, huge_how + 2,
                      sizeof huge_how - 3);
      strcat(huge_how, ")");
    }
    const size_t used = strlen(w->io_how);
    const int threads = w->map_fallocated ? 1 : w->touch;
    if (w->mapped)
      snprintf(w->io_how + used, sizeof w->io_how - used,
               "; open: file created, mapped and its pages reserved %.2f s "
               "(this rank's %.2f GB %s in %.2f s on %d thread%s)%s",
               t_done - t_mem,
               (double)(planes_of(w, w->rank) * plane_elems(w)) *
                   sizeof(float) / 1e9,
               w->map_fallocated ? "by fallocate" : "populated", t_pages,
               threads, threads == 1 ? "" : "s", reg_how);
    else
      snprintf(w->io_how + used, sizeof w->io_how - used,
               "; open: slab windows and page faults %.2f s%s, file created "
               "and reserved %.2f s%s",
               t_file - t_mem, huge_how, t_done - t_file, reg_how);
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

#ifdef SF_HAVE_CUDA
/* Enqueues the copy of part p from the device staging d (the slot's
 * owned part, in the slab layout) straight into its owner's slab, which is
 * registered with CUDA: one 3-D copy per channel (channels-first) or one
 * in all (channels-last). */
static slabfeed_status copy_part(const slabfeed_writer *w, const part *p,
                                 const float *d, sf__err *e)
{
  const int64_t Y = w->region[4], X = w->region[5], C = w->C;
  const int64_t zq = planes_of(w, p->q), dz = p->z - w->z0[p->q];
  const int64_t row = w->cl ? C : 1; /* floats per voxel in a row */
  for (int64_t c = 0; c < (w->cl ? 1 : C) && e->status == SLABFEED_OK; c++) {
    struct cudaMemcpy3DParms k;
    memset(&k, 0, sizeof k);
    k.srcPtr.ptr = (void *)(d + c * p->tz * p->ny * p->nx);
    k.srcPtr.pitch = (size_t)(p->nx * row) * sizeof(float);
    k.srcPtr.xsize = (size_t)(p->nx * row) * sizeof(float);
    k.srcPtr.ysize = (size_t)p->ny;
    k.srcPos.z = (size_t)p->dz;
    k.dstPtr.ptr = w->peer[p->q] + c * zq * Y * X;
    k.dstPtr.pitch = (size_t)(X * row) * sizeof(float);
    k.dstPtr.xsize = (size_t)(X * row) * sizeof(float);
    k.dstPtr.ysize = (size_t)Y;
    k.dstPos.x = (size_t)(p->x * row) * sizeof(float);
    k.dstPos.y = (size_t)p->y;
    k.dstPos.z = (size_t)dz;
    k.extent.width = (size_t)(p->nx * row) * sizeof(float);
    k.extent.height = (size_t)p->ny;
    k.extent.depth = (size_t)p->nz;
    k.kind = cudaMemcpyDeviceToHost;
    sf__cudart_copy3d(&k, w->stream, e);
  }
  return e->status;
}

/* The device path of put. Each slot's owned part is brought back to the
 * volume's frame by the inverse kernel into device staging; the shares
 * whose owner's slab is registered here (write_register) are copied from
 * there straight into it, the others through pinned staging: stored by
 * the CPU for this node's owners, by MPI_Put for other nodes', delivered
 * while later slots are still copying.
 * Everything is ordered after the caller's stream by an event, and put
 * returns once the copies are done; nothing is allocated and the default
 * stream is not used. */
static slabfeed_status put_device(slabfeed_writer *w, const slabfeed_batch *b,
                                  const view *v, const inv_map *m, void *stream,
                                  sf__err *e)
{
  int caller = 0;
  if (sf__cudart_get_device(&caller, e) || sf__cudart_set_device(w->device, e))
    return e->status;
  const int64_t slot = w->C * w->T * w->T * w->T; /* floats */
  int s = 0;
  if (sf__cudart_record(w->ready, stream, e) == SLABFEED_OK)
    sf__cudart_wait(w->stream, w->ready, e);
  for (; s < b->valid && e->status == SLABFEED_OK; s++) {
    sf__ikparams k = {.channels = (int)w->C,
                      .dtype = (int)v[s].dtype,
                      .cl = w->cl,
                      .nnorm = w->norm_on ? (int)w->C : 0,
                      .cst = m[s].cst};
    for (int a = 0; a < 3; a++)
      k.n[a] = m[s].n[a], k.j0[a] = m[s].j0[a], k.coef[a] = m[s].coef[a];
    for (int c = 0; c < w->C; c++) {
      k.kofs[c] = m[s].kofs[c];
      k.neg[c] = m[s].neg[c];
      if (w->norm_on)
        k.norm[c] = w->norm[c];
    }
    float *d = (float *)w->dpart + s * slot;
    const cudaError_t rc =
        sf__inverse_launch(&k, v[s].base, d, (cudaStream_t)w->stream);
    if (rc != cudaSuccess) {
      sf__cudart_fail(e, rc, "writer put: inverse-transform launch");
      break;
    }
    if (sf__cudart_launched("writer put: inverse transform", e) != SLABFEED_OK)
      break;
    /* A share whose owner's slab is not registered here: another node's,
     * another rank's of this node (write_register own), or any where the
     * registration was refused (reg[] all 0). */
    int away = 0;
    for (int64_t zr = m[s].r0[0];
         zr < m[s].r0[0] + m[s].n[0] && e->status == SLABFEED_OK;) {
      const part p = next_part(w, &m[s], d, &zr);
      if (w->peer[p.q] != NULL && w->reg[p.q])
        copy_part(w, &p, d, e);
      else
        away = 1;
    }
    if (away && e->status == SLABFEED_OK &&
        sf__cudart_copy((float *)w->pinned + s * slot, d,
                        (size_t)(w->C * m[s].n[0] * m[s].n[1] * m[s].n[2]) *
                            sizeof(float),
                        cudaMemcpyDeviceToHost, w->stream, e) == SLABFEED_OK)
      sf__cudart_record(w->landed[s], w->stream, e);
    w->away[s] = away;
  }
  /* The shares the device did not copy, of each slot as it lands, from
   * pinned staging: other nodes' owners', the node's other ranks' with
   * write_register own, all where registration was refused. */
  for (int i = 0; i < s && e->status == SLABFEED_OK; i++)
    if (!w->away[i])
      deliver_tile(w, &m[i], NULL, (uint64_t)b->sample[i], 1, e);
    else if (sf__cudart_event_sync(w->landed[i], e) == SLABFEED_OK)
      deliver_tile(w, &m[i], (float *)w->pinned + i * slot,
                   (uint64_t)b->sample[i], 1, e);
  /* The copies into the slabs are done when put returns (and after a
   * failure, whatever was enqueued: the staging is reused). */
  sf__err mine;
  sf__err_clear(&mine);
  sf__cudart_stream_sync(w->stream, e->status == SLABFEED_OK ? e : &mine);
  sf__err restore;
  sf__err_clear(&restore);
  sf__cudart_set_device(caller, e->status == SLABFEED_OK ? e : &restore);
  return e->status;
}

#endif

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
  const int nc = layout == SLABFEED_OUT_NCDHW;
  const size_t es = slabfeed_dtype_size(out->dtype);
  view *v = w->views;
  inv_map *m = w->maps;
  for (int s = 0; s < b->valid; s++) {
    v[s] = (view){.base = (const char *)out->data +
                          (size_t)(s * out->strides[0]) * es,
                  .sc = out->strides[nc ? 1 : 4],
                  .s = {out->strides[nc ? 2 : 1], out->strides[nc ? 3 : 2],
                        out->strides[nc ? 4 : 3]},
                  .E = out->shape[nc ? 2 : 1],
                  .dtype = out->dtype};
    inv_map_make(w, &v[s], b->symmetry[s], b->tile + 9 * s, &m[s]);
  }
  if (device >= 0 && e.status == SLABFEED_OK) {
#ifdef SF_HAVE_CUDA
    put_device(w, b, v, m, stream, &e);
#else
    (void)stream;
    sf__fail(&e, SLABFEED_ERR_UNSUPPORTED,
             "writer put: device memory in a build without CUDA");
#endif
  }
  for (int s = 0; device < 0 && s < b->valid && e.status == SLABFEED_OK; s++) {
    stage_host(w, &v[s], &m[s], w->part);
    deliver_tile(w, &m[s], w->part, (uint64_t)b->sample[s], 0, &e);
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
    int64_t tc[9], t[9];
    sf__tiles_at(&w->grid, g, tc);
    tile_on_output(w, tc, t);
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

/* The transfer of close's writes and read-backs: collective, or
 * independent (each rank its own planes, no aggregation). */
static hid_t write_dxpl(const slabfeed_writer *w)
{
  const hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
#ifdef H5_HAVE_PARALLEL
  if (dxpl >= 0 && !w->independent &&
      H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE) < 0) {
    H5Pclose(dxpl);
    return H5I_INVALID_HID;
  }
#else
  (void)w;
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

/* Planes [q, q + n) of this rank's slab into buf, contiguous as in the
 * file and in its element type (float16 converted in place). */
static herr_t stage_run(const slabfeed_writer *w, int64_t q, int64_t n,
                        float *buf)
{
  const int64_t zq = planes_of(w, w->rank), pe = plane_elems(w);
  const int64_t pc = pe / w->C; /* one channel's plane */
  if (w->cl)
    memcpy(buf, w->slab + q * pe, (size_t)(n * pe) * sizeof *buf);
  else
    for (int64_t c = 0; c < w->C; c++)
      memcpy(buf + c * n * pc, w->slab + (c * zq + q) * pc,
             (size_t)(n * pc) * sizeof *buf);
  if (w->f16)
    sf__f32_to_f16_n(buf, (size_t)(n * pe));
  return 0;
}

/* Writes planes [q, q + n) of this rank's slab: float32 straight from the
 * slab (the file's layout is the slab's), float16 staged and converted
 * into buf. n == 0 (or a failed conversion) takes part with nothing. */
static herr_t write_run(slabfeed_writer *w, hid_t dset, hid_t dxpl, int64_t q,
                        int64_t n, float *buf)
{
  const int64_t z = w->z0[w->rank] + q, zq = planes_of(w, w->rank);
  if (n > 0 && !w->f16)
    return sf__h5_transfer_planes_in(dset, !w->cl, z, n, zq, q, dxpl, w->ftype,
                                     1, w->slab);
  if (n > 0 && stage_run(w, q, n, buf) < 0) {
    sf__h5_transfer_planes(dset, !w->cl, 0, 0, dxpl, w->ftype, 1, buf);
    return -1;
  }
  return sf__h5_transfer_planes(dset, !w->cl, z, n, dxpl, w->ftype, 1, buf);
}

/* Whether the run [q, q + n) read back into got (file type, contiguous)
 * holds what the slab holds (staged again into ref for float16). */
static int run_matches(const slabfeed_writer *w, int64_t q, int64_t n,
                       const float *got, float *ref)
{
  const int64_t zq = planes_of(w, w->rank), pe = plane_elems(w);
  const int64_t pc = pe / w->C;
  if (w->f16)
    return stage_run(w, q, n, ref) >= 0 &&
           memcmp(got, ref, (size_t)(n * pe) * 2) == 0;
  if (w->cl)
    return memcmp(got, w->slab + q * pe, (size_t)(n * pe) * sizeof *got) == 0;
  for (int64_t c = 0; c < w->C; c++)
    if (memcmp(got + c * n * pc, w->slab + (c * zq + q) * pc,
               (size_t)(n * pc) * sizeof *got) != 0)
      return 0;
  return 1;
}

/* Direct writes (choose_io): nothing where the slab is the file's pages
 * (write_map: the sync at commit makes them durable); else this rank's
 * planes with pwrite on its share
 * of the node's cores where the output's values lie in the file aside
 * (sf__h5_write_direct): contiguous storage at the dataset's offset
 * (allocated at creation and never filled by HDF5, which writes no raw
 * data of it afterwards), chunked storage at its chunks' offsets (0.10,
 * looked up on the writer's handle, whose metadata reads are each rank's
 * own); float16 converted on the way. Local: no collective call. */
static slabfeed_status write_direct(slabfeed_writer *w, hid_t dset,
                                    sf__progress *pg, sf__err *e)
{
  hsize_t dims[4];
  file_dims(w, dims);
  slabfeed_dataset_info info = SLABFEED_DATASET_INFO_INIT;
  info.ndim = 4;
  info.channels = w->C;
  info.layout = w->cl ? SLABFEED_LAYOUT_CL : SLABFEED_LAYOUT_CF;
  info.type_bits = w->f16 ? 16 : 32;
  info.chunked = w->chunk[0] > 0;
  for (int a = 0; a < 4; a++)
    info.dims[a] = (int64_t)dims[a];
  for (int a = 0; a < 3 && info.chunked; a++)
    info.chunk[w->cl ? a : a + 1] = w->chunk[a];
  info.chunk[w->cl ? 3 : 0] = info.chunked ? (w->cl ? w->C : 1) : 0;
  for (int a = 0; a < 3; a++)
    info.shape[a] = w->region[3 + a];
  const int64_t zq = planes_of(w, w->rank);
  if (sf__inject("writer.direct", w->rank)) /* a failure of this rank alone */
    return sf__fail(e, SLABFEED_ERR_IO,
                    "injected failure at stage 'writer.direct' of '%s' "
                    "(written aside as '%s')",
                    w->path, w->as.tmp);
  if (w->mapped) { /* the puts wrote the file's pages: nothing left */
    sf__progress_add(pg, (double)(zq * plane_elems(w)) * sizeof(float));
    return e->status;
  }
  if (sf__h5_write_direct(dset, w->as.tmp, w->name, &info, w->z0[w->rank], zq,
                          w->slab, zq * (plane_elems(w) / w->C), w->io_threads,
                          pg, e) != SLABFEED_OK) {
    /* Named by the output the user asked for, as the other writes are. */
    char what[SF_ERRLEN];
    const slabfeed_status st = e->status;
    memcpy(what, e->msg, sizeof what);
    sf__err_clear(e);
    sf__fail(e, st, "writer: output '%s': %s", w->path, what);
  }
  return e->status;
}

/* Every rank's slab, in collective writes of at most SF_RUN_BYTES (a
 * rank with nothing left, or after a local failure, makes empty ones).
 * With `readback` the runs are read back instead and compared with the
 * slab, which close still holds. */
static slabfeed_status write_slabs(slabfeed_writer *w, hid_t dset, int readback,
                                   sf__err *e)
{
  const int64_t cap = run_planes(w), zq = planes_of(w, w->rank);
  const int64_t most = planes_of(w, 0), runs = (most + cap - 1) / cap;
  const int64_t pe = plane_elems(w);
  const size_t bytes = (size_t)((zq < cap ? zq : cap) * pe + 1) * sizeof(float);
  const int direct = w->direct && !readback;
  const int need = readback || (w->f16 && !direct); /* a staging buffer */
  float *buf = need ? malloc(bytes) : NULL;
  float *ref = readback && w->f16 ? malloc(bytes) : NULL;
  const hid_t dxpl = write_dxpl(w);
  if ((need && buf == NULL) || (readback && w->f16 && ref == NULL) || dxpl < 0)
    sf__fail(e, SLABFEED_ERR_NOMEM, "writer: write buffer");
  if (!readback && sf__inject("writer.write", w->rank))
    sf__fail(e, SLABFEED_ERR_IO, "injected failure at stage 'writer.write'");
  float none = 0.0f; /* the buffer of empty transfers */
  const double es = w->f16 ? 2 : 4, mine = (double)(zq * pe) * es;
  sf__progress pg;
  sf__progress_begin(&pg, w->progress, w->rank,
                     readback ? "reading the output back"
                              : "writing the output",
                     mine, mine > 0 ? (double)data_bytes(w) / mine : 1);
  if (direct && dxpl >= 0 && e->status == SLABFEED_OK)
    write_direct(w, dset, &pg, e);
  for (int64_t i = 0; i < runs && dxpl >= 0 && !direct; i++) {
    const int64_t q = i * cap;
    int64_t n = q >= zq ? 0 : (zq - q < cap ? zq - q : cap);
    n = e->status == SLABFEED_OK ? n : 0;
    float *b = buf != NULL ? buf : &none;
    const herr_t rc =
        readback ? sf__h5_transfer_planes(dset, !w->cl, w->z0[w->rank] + q, n,
                                          dxpl, w->ftype, 0, b)
                 : write_run(w, dset, dxpl, q, n, b);
    if (rc < 0 && e->status == SLABFEED_OK) {
      sf__fail(e, SLABFEED_ERR_IO,
               "writer: %s output planes [%lld,%lld) of '%s' in '%s' "
               "(written aside as '%s') failed",
               readback ? "reading back" : "writing",
               (long long)(w->z0[w->rank] + q),
               (long long)(w->z0[w->rank] + q + n), w->name, w->path,
               w->as.tmp);
      sf__h5_detail(e);
    } else if (readback && n > 0 && e->status == SLABFEED_OK &&
               !run_matches(w, q, n, buf, ref)) {
      sf__fail(e, SLABFEED_ERR_IO,
               "writer: output planes [%lld,%lld) of '%s' read back from '%s' "
               "differ from what was written: a write that MPI-IO reported "
               "as done did not land (a full disk?)",
               (long long)(w->z0[w->rank] + q),
               (long long)(w->z0[w->rank] + q + n), w->path, w->as.tmp);
    }
    if (rc >= 0 && n > 0)
      sf__progress_add(&pg, (double)(n * pe) * es);
  }
  sf__progress_end(&pg, e->status == SLABFEED_OK);
  if (dxpl >= 0)
    H5Pclose(dxpl);
  free(buf);
  free(ref);
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
#ifdef SF_HAVE_CUDA
  for (int q = 0; w->reg != NULL && q < w->size; q++)
    if (w->reg[q])
      sf__cudart_host_unregister(w->peer[q]);
#endif
  unmap_slabs(w);
  if (w->world_locked)
    MPI_Win_unlock_all(w->world);
  for (int k = 0; k < w->shm_locked; k++)
    MPI_Win_unlock_all(w->shm[k]);
  if (w->world != MPI_WIN_NULL)
    MPI_Win_free(&w->world);
  for (int k = 0; k < w->n_shm; k++)
    if (w->shm[k] != MPI_WIN_NULL)
      MPI_Win_free(&w->shm[k]);
  free(w->shm);
  w->shm = NULL;
  w->n_shm = w->shm_locked = 0;
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
  for (int64_t s = 0; w->landed != NULL && s < w->B; s++)
    if (w->landed[s] != NULL)
      sf__cudart_event_destroy(w->landed[s]);
  free(w->landed);
  if (w->dpart != NULL)
    sf__cudart_free(w->dpart);
#endif
  free(w->z0);
  free(w->peer);
  free(w->part);
  free(w->views);
  free(w->maps);
  free(w->away);
  free(w->reg);
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

const char *slabfeed_writer_io(const slabfeed_writer *w)
{
  return w != NULL ? w->io_how : "";
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
