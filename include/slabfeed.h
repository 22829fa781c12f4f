/*
 * slabfeed: random, augmented crops of one huge periodic 3D volume stored in
 * HDF5, delivered to every rank of an MPI job (one rank per GPU).
 *
 * Conventions (public; see README.md and docs/CONVENTIONS.md):
 *  - Arrays are C order. Spatial axes: 0 = z (slowest), 1 = y, 2 = x.
 *    A file dataset is channels-first (C,Z,Y,X) or channels-last (Z,Y,X,C).
 *  - Crop origins are uniform over [0, N) on every axis; crops wrap around
 *    the periodic box.
 *  - Symmetry id g in [0,48): p = g % 6 indexes the permutations of (0,1,2)
 *    in lexicographic order, f = g / 6, bit a of f reverses output axis a:
 *    out[ch][i0][i1][i2] = in[ch][j0][j1][j2],
 *    j[perm[a]] = (f >> a & 1) ? c-1-i[a] : i[a].
 *  - A vector group (k0,k1,k2) holds the components along axes 0,1,2; under
 *    g: out[k_a] = s_a * in[k_perm[a]], s_a = -1 where bit a of f is set.
 *  - Global batch at step s with P ranks of local batch B: samples
 *    [s*P*B, (s+1)*P*B); rank r takes [s*P*B + r*B, s*P*B + (r+1)*B).
 *
 * Every function says whether it is collective over the communicator given
 * to it. Collective functions must be called by all ranks in the same order.
 */
#ifndef SLABFEED_H
#define SLABFEED_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "slabfeed_version.h"

#if defined(_WIN32)
#define SLABFEED_API
#elif defined(__GNUC__)
#define SLABFEED_API __attribute__((visibility("default")))
#else
#define SLABFEED_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. Values are pinned and never renumbered. */
#define SLABFEED_STATUS_MAP(X)                                                 \
  X(SLABFEED_OK, 0, "success")                                                 \
  X(SLABFEED_ERR_ARG, 1, "invalid argument")                                   \
  X(SLABFEED_ERR_IO, 2, "I/O error")                                           \
  X(SLABFEED_ERR_FORMAT, 3, "unsupported or inconsistent file content")        \
  X(SLABFEED_ERR_MPI, 4, "MPI error")                                          \
  X(SLABFEED_ERR_CUDA, 5, "CUDA error")                                        \
  X(SLABFEED_ERR_NCCL, 6, "NCCL error")                                        \
  X(SLABFEED_ERR_NOMEM, 7, "out of memory")                                    \
  X(SLABFEED_ERR_STATE, 8, "call not valid in the current state")              \
  X(SLABFEED_ERR_FORKED, 9, "loader used in a forked child process")           \
  X(SLABFEED_ERR_UNSUPPORTED, 10, "not supported by this build")

typedef enum {
#define SLABFEED_STATUS_ENUM(name, value, text) name = value,
  SLABFEED_STATUS_MAP(SLABFEED_STATUS_ENUM)
#undef SLABFEED_STATUS_ENUM
} slabfeed_status;

/* Not collective, thread safe. Returns a static, human-readable description
 * of a status code; never NULL ("unknown status" for values not listed). */
SLABFEED_API const char *slabfeed_strerror(slabfeed_status s);

/* Not collective, thread safe. Returns SLABFEED_VERSION_NUMBER of the
 * library actually linked (major*10000 + minor*100 + patch). */
SLABFEED_API unsigned slabfeed_version(void);

/* Not collective, thread safe. Returns the version string, e.g. "0.1.0". */
SLABFEED_API const char *slabfeed_version_string(void);

/* Layout of a dataset in the file. */
typedef enum {
  SLABFEED_LAYOUT_AUTO = 0, /* decide from the shape; refused when ambiguous */
  SLABFEED_LAYOUT_CF = 1,   /* channels-first (C,Z,Y,X) */
  SLABFEED_LAYOUT_CL = 2    /* channels-last (Z,Y,X,C) */
} slabfeed_file_layout;

/* Which cube symmetries the sampler draws from (uniformly). */
typedef enum {
  SLABFEED_SYM_ALL = 0,       /* all 48 elements */
  SLABFEED_SYM_ROTATIONS = 1, /* the 24 proper rotations */
  SLABFEED_SYM_NONE = 2       /* identity only */
} slabfeed_symmetries;

/* Element type of the delivered batch. f16 and bf16 round to nearest even. */
typedef enum {
  SLABFEED_DTYPE_F32 = 0,
  SLABFEED_DTYPE_F16 = 1,
  SLABFEED_DTYPE_BF16 = 2
} slabfeed_dtype;

/* Memory layout of the delivered batch. */
typedef enum {
  SLABFEED_OUT_NCDHW = 0,
  SLABFEED_OUT_NDHWC = 1
} slabfeed_out_layout;

/* Environment variable that, set to 1, makes every rank its own "node": all
 * remote pieces then travel with MPI_Get (used to test that path on one
 * machine). Overridden by slabfeed_config.rank_per_node when that is 0 or 1. */
#define SLABFEED_ENV_RANK_PER_NODE "SLABFEED_RANK_PER_NODE"

#define SLABFEED_MAX_VECTORS 4 /* vector groups per dataset */

/* Loader options. Fill with slabfeed_config_init, then set fields. Strings are
 * copied by slabfeed_open; the struct may be freed afterwards. All ranks must
 * pass equal values (checked at open). */
typedef struct slabfeed_config {
  const char *path;            /* HDF5 file (required) */
  const char *input;           /* input dataset name (required) */
  const char *target;          /* target dataset name, or NULL for none */
  slabfeed_file_layout layout; /* file layout of both datasets; default AUTO */
  int64_t crop[3];             /* crop edge (z,y,x); default 64^3 */
  int batch;                   /* local batch B per rank; default 1 */
  uint64_t seed;               /* sampler seed; default 0 */
  slabfeed_symmetries symmetries; /* default SLABFEED_SYM_ALL */
  int n_input_vectors;            /* vector groups of the input */
  int input_vectors[SLABFEED_MAX_VECTORS][3];
  int n_target_vectors; /* vector groups of the target */
  int target_vectors[SLABFEED_MAX_VECTORS][3];
  slabfeed_dtype dtype;           /* default SLABFEED_DTYPE_F32 */
  slabfeed_out_layout out_layout; /* default SLABFEED_OUT_NCDHW */
  int device;        /* CUDA device ordinal, or -1 for host batches */
  int prefetch;      /* depth of the batch ring, >= 1; default 2 */
  int halo;          /* z-planes copied on each side; default 0 */
  int rank_per_node; /* -1: from SLABFEED_ENV_RANK_PER_NODE; 0 off; 1 on */
  uint64_t steps_per_epoch; /* 0: enough crops to cover the box once */
} slabfeed_config;

/* Not collective. Fills *cfg with the defaults listed above. */
SLABFEED_API void slabfeed_config_init(slabfeed_config *cfg);

/* One dense tensor, shaped like a DLPack tensor: strides in elements. */
typedef struct slabfeed_tensor {
  void *data;         /* host or device pointer (see slabfeed_batch.device) */
  int ndim;           /* 5 */
  int64_t shape[5];   /* (B,C,D,H,W) for NCDHW, (B,D,H,W,C) for NDHWC */
  int64_t strides[5]; /* in elements */
  slabfeed_dtype dtype;
} slabfeed_tensor;

/* One batch handed out by slabfeed_next, owned by the loader. Host batches stay
 * valid until the prefetch-th following slabfeed_next call; device batches may
 * be used by work enqueued on the stream given to slabfeed_next until the next
 * slabfeed_next call (the slot is reused only after that stream has passed it).
 * Both end at slabfeed_close. */
typedef struct slabfeed_batch {
  slabfeed_tensor input;
  slabfeed_tensor target;  /* data == NULL when there is no target */
  int device;              /* -1: host memory; else the CUDA device ordinal */
  uint64_t epoch, step;    /* position of this batch in the sample stream */
  const int64_t *origin;   /* [B][3] crop origins (z,y,x), host memory */
  const int32_t *symmetry; /* [B] symmetry ids, host memory */
  const int64_t *sample;   /* [B] global sample index within the epoch */
  void *ready_event;       /* cudaEvent_t recorded after the batch is written,
                              or NULL for host batches */
} slabfeed_batch;

/* Counters and times (seconds) of one rank since slabfeed_open. */
typedef struct slabfeed_stats {
  uint64_t batches, samples;
  uint64_t bytes_own;    /* bytes copied from the rank's own slab + halo */
  uint64_t bytes_node;   /* bytes copied from other ranks of the node */
  uint64_t bytes_remote; /* bytes moved with MPI_Get */
  uint64_t bytes_out;    /* bytes delivered (input + target, output dtype) */
  double t_read;         /* open: parallel HDF5 slab read */
  double t_plan, t_gather, t_h2d, t_transform;
  double t_wait;          /* exposed wait inside slabfeed_next */
  uint64_t slab_bytes;    /* host bytes of the slab store of this rank */
  uint64_t staging_bytes; /* host + device staging and batch memory */
  int loader_thread;      /* 1: a loader thread produces ahead (device
                            batches, MPI_THREAD_MULTIPLE or one node);
                            0: the work runs inside slabfeed_next */
} slabfeed_stats;

typedef struct slabfeed_loader slabfeed_loader;

/* Collective over comm. Opens cfg->path with parallel HDF5, validates the
 * datasets and the options, reads this rank's z-slab (plus halo) into the
 * node's shared-memory window, and takes all memory the loader will need.
 * On success *out is a new loader. On failure every rank returns the same
 * status, *out is NULL and, when errbuf is not NULL, errbuf holds a message
 * naming the problem and the rank that found it (truncated to errlen).
 * Works on a duplicate of comm. */
SLABFEED_API slabfeed_status slabfeed_open(MPI_Comm comm,
                                           const slabfeed_config *cfg,
                                           slabfeed_loader **out, char *errbuf,
                                           size_t errlen);

/* Not collective. Hands out the next batch of this rank in *out.
 * Host batches (device -1): the crops are gathered and transformed on the
 * calling thread; `stream` is ignored.
 * Device batches: `stream` (a cudaStream_t of the loader's device; pass
 * the training stream, not the legacy default stream) is made to wait on
 * the batch's ready event; the call blocks on the host only while the
 * batch is not yet enqueued. With MPI_THREAD_MULTIPLE (or one node) a
 * loader thread produces ahead; otherwise the work, MPI_Get included, runs
 * inside this call. Pieces fetched with MPI_Get need the owning ranks to
 * make progress in MPI (they do while they call slabfeed_next).
 * Not thread safe on one loader. On failure the message is in
 * slabfeed_last_error. */
SLABFEED_API slabfeed_status slabfeed_next(slabfeed_loader *l,
                                           slabfeed_batch *out, void *stream);

/* Local. Positions the loader so that the next slabfeed_next returns the batch
 * of (epoch, step). Call it at the same point on every rank. */
SLABFEED_API slabfeed_status slabfeed_seek(slabfeed_loader *l, uint64_t epoch,
                                           uint64_t step);

/* Local. Copies this rank's counters into *out. */
SLABFEED_API slabfeed_status slabfeed_stats_get(const slabfeed_loader *l,
                                                slabfeed_stats *out);

/* Local. The message of the last failure on this loader ("" when none).
 * The string stays valid until the next call on l. NULL l gives "". */
SLABFEED_API const char *slabfeed_last_error(const slabfeed_loader *l);

/* Local. Steps per epoch in effect (from the config, or the default). */
SLABFEED_API uint64_t slabfeed_steps_per_epoch(const slabfeed_loader *l);

/* Collective. Stops the loader thread, waits for the loader's own streams,
 * and releases everything the loader holds (windows, device and pinned
 * memory, registrations). NULL is a no-op (then every rank must pass
 * NULL). In a forked child it does nothing: the parent owns the resources. */
SLABFEED_API void slabfeed_close(slabfeed_loader *l);

/* Not collective. Copies the contents of tensor t of a batch of l (host
 * or device memory) into host memory dst (t's element count times the
 * element size). For device batches it copies on the loader's private
 * stream and waits for that stream only (no device synchronisation); meant
 * for tools and tests, not for the training hot path. */
SLABFEED_API slabfeed_status slabfeed_copy_to_host(slabfeed_loader *l,
                                                   const slabfeed_tensor *t,
                                                   void *dst);

/* Bytes of one element of dtype d (4 or 2). */
SLABFEED_API size_t slabfeed_dtype_size(slabfeed_dtype d);

/* Not collective, thread safe. The reference transform on the host: in is
 * one staged crop [channels][ext0][ext1][ext2] float32 (C order), out one
 * sample in out_layout and dtype after symmetry id `symmetry` (cubic crops
 * only unless symmetry is 0) and the vector groups. The GPU kernel matches
 * it bit for bit. Returns SLABFEED_ERR_ARG for bad arguments. */
SLABFEED_API slabfeed_status slabfeed_transform_host(
    const float *in, const int64_t ext[3], int channels, int symmetry,
    int ngroups, const int (*groups)[3], slabfeed_dtype dtype,
    slabfeed_out_layout out_layout, void *out);

/* ---- Independent serial reference ----------------------------------------
 * A plain serial HDF5 reader that forms one crop straight from the file and
 * applies the reference transform: what slabfeed-check compares batches
 * against. Not collective; one reader per thread. */

typedef struct slabfeed_reader slabfeed_reader;

/* Opens path read-only (serial HDF5). On failure *out is NULL and errbuf
 * names the problem. */
SLABFEED_API slabfeed_status slabfeed_reader_open(const char *path,
                                                  slabfeed_reader **out,
                                                  char *errbuf, size_t errlen);

/* Forms the crop of `dataset` at origin (periodic) with extents crop,
 * applies symmetry id `symmetry` and the vector groups, converts to dtype
 * and writes one sample in out_layout to out (channels * crop volume
 * elements). On failure see slabfeed_reader_error. */
SLABFEED_API slabfeed_status slabfeed_reader_crop(
    slabfeed_reader *r, const char *dataset, slabfeed_file_layout layout,
    const int64_t origin[3], const int64_t crop[3], int symmetry, int ngroups,
    const int (*groups)[3], slabfeed_dtype dtype,
    slabfeed_out_layout out_layout, void *out);

/* The message of the reader's last failure ("" when none). */
SLABFEED_API const char *slabfeed_reader_error(const slabfeed_reader *r);

/* Closes the reader; NULL is a no-op. */
SLABFEED_API void slabfeed_reader_close(slabfeed_reader *r);

/* ---- Description of datasets ------------------------------------------- */

typedef struct slabfeed_dataset_info {
  int64_t dims[4];             /* as stored */
  int64_t channels;            /* C */
  int64_t shape[3];            /* Z,Y,X */
  slabfeed_file_layout layout; /* CF or CL, after AUTO was resolved */
  int type_bits;               /* 16, 32 or 64 */
  int chunked;                 /* 1: chunked storage, chunk dims in chunk[] */
  int64_t chunk[4];
} slabfeed_dataset_info;

/* Not collective (each rank may call it alone; serial HDF5). Opens path,
 * checks that `dataset` is a rank-4 floating-point dataset and resolves its
 * layout. On failure returns a status and writes a message into errbuf. */
SLABFEED_API slabfeed_status slabfeed_describe(const char *path,
                                               const char *dataset,
                                               slabfeed_file_layout layout,
                                               slabfeed_dataset_info *out,
                                               char *errbuf, size_t errlen);

/* Not collective. The z-slab [*z0, *z1) of rank r among P ranks for a box of
 * Z planes: the first Z % P ranks get one plane more. Returns SLABFEED_ERR_ARG
 * when P > Z, P < 1 or r is out of range. */
SLABFEED_API slabfeed_status slabfeed_slab_plan(int64_t Z, int P, int r,
                                                int64_t *z0, int64_t *z1);

/* ---- Synthetic volumes -----------------------------------------------------
 */

typedef enum {
  SLABFEED_CONTENT_INDEX =
      0, /* slabfeed_index_value: exact, recomputable by tests */
  SLABFEED_CONTENT_FIELD =
      1 /* smooth periodic random field (density, velocity) */
} slabfeed_content;

typedef struct slabfeed_gen_config {
  const char *path;
  const char *input;           /* default "Nbody" */
  const char *target;          /* default "Hydro"; NULL: no target */
  int64_t shape[3];            /* Z,Y,X; default 64^3 */
  int input_channels;          /* default 4 */
  int target_channels;         /* default 5 */
  slabfeed_file_layout layout; /* CF (default) or CL */
  int chunked;                 /* 0: contiguous (default); 1: chunked */
  int64_t chunk[3];            /* spatial chunk edge; 0: min(64, shape) */
  int float16;                 /* 1: store IEEE half instead of float32 */
  slabfeed_content content;    /* default SLABFEED_CONTENT_INDEX */
  uint64_t seed;               /* for SLABFEED_CONTENT_FIELD */
  int progress;                /* 1: rank 0 prints progress for > 1 GB */
} slabfeed_gen_config;

/* Not collective. Fills *cfg with the defaults listed above. */
SLABFEED_API void slabfeed_gen_config_init(slabfeed_gen_config *cfg);

/* Collective over comm. Creates (truncates) cfg->path and writes the
 * datasets in parallel, each rank writing its z-slab collectively. On
 * failure all ranks return the same status and errbuf names the problem. */
SLABFEED_API slabfeed_status slabfeed_generate(MPI_Comm comm,
                                               const slabfeed_gen_config *cfg,
                                               char *errbuf, size_t errlen);

/* Not collective, thread safe. The value of SLABFEED_CONTENT_INDEX at dataset
 * `dataset` (0 input, 1 target), channel c, position (z,y,x):
 *   h = fmix64(((dataset*64 + c) << 48) ^ (z << 32) ^ (y << 16) ^ x)
 *   value = (double)(int64_t)(h % 2048) - 1024
 * (fmix64: the MurmurHash3 64-bit finaliser). An integer in [-1024, 1023],
 * exact in float16 and float32; coordinates must be < 65536. */
SLABFEED_API float slabfeed_index_value(int dataset, int c, int64_t z,
                                        int64_t y, int64_t x);

#ifdef __cplusplus
}
#endif
#endif /* SLABFEED_H */
