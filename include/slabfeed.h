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
#define SF_API
#elif defined(__GNUC__)
#define SF_API __attribute__((visibility("default")))
#else
#define SF_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. Values are pinned and never renumbered. */
#define SF_STATUS_MAP(X)                                                       \
  X(SF_OK, 0, "success")                                                       \
  X(SF_ERR_ARG, 1, "invalid argument")                                         \
  X(SF_ERR_IO, 2, "I/O error")                                                 \
  X(SF_ERR_FORMAT, 3, "unsupported or inconsistent file content")              \
  X(SF_ERR_MPI, 4, "MPI error")                                                \
  X(SF_ERR_CUDA, 5, "CUDA error")                                              \
  X(SF_ERR_NCCL, 6, "NCCL error")                                              \
  X(SF_ERR_NOMEM, 7, "out of memory")                                          \
  X(SF_ERR_STATE, 8, "call not valid in the current state")                    \
  X(SF_ERR_FORKED, 9, "loader used in a forked child process")                 \
  X(SF_ERR_UNSUPPORTED, 10, "not supported by this build")

typedef enum {
#define SF_STATUS_ENUM(name, value, text) name = value,
  SF_STATUS_MAP(SF_STATUS_ENUM)
#undef SF_STATUS_ENUM
} sf_status;

/* Not collective, thread safe. Returns a static, human-readable description
 * of a status code; never NULL ("unknown status" for values not listed). */
SF_API const char *sf_strerror(sf_status s);

/* Not collective, thread safe. Returns SLABFEED_VERSION_NUMBER of the
 * library actually linked (major*10000 + minor*100 + patch). */
SF_API unsigned sf_version(void);

/* Not collective, thread safe. Returns the version string, e.g. "0.1.0". */
SF_API const char *sf_version_string(void);

/* Layout of a dataset in the file. */
typedef enum {
  SF_LAYOUT_AUTO = 0, /* decide from the shape; refused when ambiguous */
  SF_LAYOUT_CF = 1,   /* channels-first (C,Z,Y,X) */
  SF_LAYOUT_CL = 2    /* channels-last (Z,Y,X,C) */
} sf_file_layout;

/* Which cube symmetries the sampler draws from (uniformly). */
typedef enum {
  SF_SYM_ALL = 0,       /* all 48 elements */
  SF_SYM_ROTATIONS = 1, /* the 24 proper rotations */
  SF_SYM_NONE = 2       /* identity only */
} sf_symmetries;

/* Element type of the delivered batch. f16 and bf16 round to nearest even. */
typedef enum { SF_DTYPE_F32 = 0, SF_DTYPE_F16 = 1, SF_DTYPE_BF16 = 2 } sf_dtype;

/* Memory layout of the delivered batch. */
typedef enum { SF_OUT_NCDHW = 0, SF_OUT_NDHWC = 1 } sf_out_layout;

/* Environment variable that, set to 1, makes every rank its own "node": all
 * remote pieces then travel with MPI_Get (used to test that path on one
 * machine). Overridden by sf_config.rank_per_node when that is 0 or 1. */
#define SF_ENV_RANK_PER_NODE "SLABFEED_RANK_PER_NODE"

#define SF_MAX_VECTORS 4 /* vector groups per dataset */

/* Loader options. Fill with sf_config_init, then set fields. Strings are
 * copied by sf_open; the struct may be freed afterwards. All ranks must pass
 * equal values (checked at open). */
typedef struct sf_config {
  const char *path;         /* HDF5 file (required) */
  const char *input;        /* input dataset name (required) */
  const char *target;       /* target dataset name, or NULL for none */
  sf_file_layout layout;    /* file layout of both datasets; default AUTO */
  int64_t crop[3];          /* crop edge (z,y,x); default 64^3 */
  int batch;                /* local batch B per rank; default 1 */
  uint64_t seed;            /* sampler seed; default 0 */
  sf_symmetries symmetries; /* default SF_SYM_ALL */
  int n_input_vectors;      /* vector groups of the input */
  int input_vectors[SF_MAX_VECTORS][3];
  int n_target_vectors; /* vector groups of the target */
  int target_vectors[SF_MAX_VECTORS][3];
  sf_dtype dtype;           /* default SF_DTYPE_F32 */
  sf_out_layout out_layout; /* default SF_OUT_NCDHW */
  int device;               /* CUDA device ordinal, or -1 for host batches */
  int prefetch;             /* depth of the batch ring, >= 1; default 2 */
  int halo;                 /* z-planes copied on each side; default 0 */
  int rank_per_node;        /* -1: from SF_ENV_RANK_PER_NODE; 0 off; 1 on */
  uint64_t steps_per_epoch; /* 0: enough crops to cover the box once */
} sf_config;

/* Not collective. Fills *cfg with the defaults listed above. */
SF_API void sf_config_init(sf_config *cfg);

/* One dense tensor, shaped like a DLPack tensor: strides in elements. */
typedef struct sf_tensor {
  void *data;         /* host or device pointer (see sf_batch.device) */
  int ndim;           /* 5 */
  int64_t shape[5];   /* (B,C,D,H,W) for NCDHW, (B,D,H,W,C) for NDHWC */
  int64_t strides[5]; /* in elements */
  sf_dtype dtype;
} sf_tensor;

/* One batch handed out by sf_next, owned by the loader. Host batches stay
 * valid until the prefetch-th following sf_next call; device batches may be
 * used by work enqueued on the stream given to sf_next until the next
 * sf_next call (the slot is reused only after that stream has passed it).
 * Both end at sf_close. */
typedef struct sf_batch {
  sf_tensor input;
  sf_tensor target;        /* data == NULL when there is no target */
  int device;              /* -1: host memory; else the CUDA device ordinal */
  uint64_t epoch, step;    /* position of this batch in the sample stream */
  const int64_t *origin;   /* [B][3] crop origins (z,y,x), host memory */
  const int32_t *symmetry; /* [B] symmetry ids, host memory */
  const int64_t *sample;   /* [B] global sample index within the epoch */
  void *ready_event;       /* cudaEvent_t recorded after the batch is written,
                              or NULL for host batches */
} sf_batch;

/* Counters and times (seconds) of one rank since sf_open. */
typedef struct sf_stats {
  uint64_t batches, samples;
  uint64_t bytes_own;    /* bytes copied from the rank's own slab + halo */
  uint64_t bytes_node;   /* bytes copied from other ranks of the node */
  uint64_t bytes_remote; /* bytes moved with MPI_Get */
  uint64_t bytes_out;    /* bytes delivered (input + target, output dtype) */
  double t_read;         /* open: parallel HDF5 slab read */
  double t_plan, t_gather, t_h2d, t_transform;
  double t_wait;          /* exposed wait inside sf_next */
  uint64_t slab_bytes;    /* host bytes of the slab store of this rank */
  uint64_t staging_bytes; /* host + device staging and batch memory */
  int loader_thread;      /* 1: a loader thread produces ahead (device
                            batches, MPI_THREAD_MULTIPLE or one node);
                            0: the work runs inside sf_next */
} sf_stats;

typedef struct sf_loader sf_loader;

/* Collective over comm. Opens cfg->path with parallel HDF5, validates the
 * datasets and the options, reads this rank's z-slab (plus halo) into the
 * node's shared-memory window, and takes all memory the loader will need.
 * On success *out is a new loader. On failure every rank returns the same
 * status, *out is NULL and, when errbuf is not NULL, errbuf holds a message
 * naming the problem and the rank that found it (truncated to errlen).
 * Works on a duplicate of comm. */
SF_API sf_status sf_open(MPI_Comm comm, const sf_config *cfg, sf_loader **out,
                         char *errbuf, size_t errlen);

/* Not collective. Hands out the next batch of this rank in *out.
 * Host batches (device -1): the crops are gathered and transformed on the
 * calling thread; `stream` is ignored.
 * Device batches: `stream` (a cudaStream_t of the loader's device; pass
 * the training stream, not the legacy default stream) is made to wait on
 * the batch's ready event; the call blocks on the host only while the
 * batch is not yet enqueued. With MPI_THREAD_MULTIPLE (or one node) a
 * loader thread produces ahead; otherwise the work, MPI_Get included, runs
 * inside this call. Pieces fetched with MPI_Get need the owning ranks to
 * make progress in MPI (they do while they call sf_next).
 * Not thread safe on one loader. On failure the message is in
 * sf_last_error. */
SF_API sf_status sf_next(sf_loader *l, sf_batch *out, void *stream);

/* Local. Positions the loader so that the next sf_next returns the batch of
 * (epoch, step). Call it at the same point on every rank. */
SF_API sf_status sf_seek(sf_loader *l, uint64_t epoch, uint64_t step);

/* Local. Copies this rank's counters into *out. */
SF_API sf_status sf_stats_get(const sf_loader *l, sf_stats *out);

/* Local. The message of the last failure on this loader ("" when none).
 * The string stays valid until the next call on l. NULL l gives "". */
SF_API const char *sf_last_error(const sf_loader *l);

/* Local. Steps per epoch in effect (from the config, or the default). */
SF_API uint64_t sf_steps_per_epoch(const sf_loader *l);

/* Collective. Stops the loader thread, waits for the loader's own streams,
 * and releases everything the loader holds (windows, device and pinned
 * memory, registrations). NULL is a no-op (then every rank must pass
 * NULL). In a forked child it does nothing: the parent owns the resources. */
SF_API void sf_close(sf_loader *l);

/* Not collective. Copies the contents of tensor t of a batch of l (host
 * or device memory) into host memory dst (t's element count times the
 * element size). For device batches it copies on the loader's private
 * stream and waits for that stream only (no device synchronisation); meant
 * for tools and tests, not for the training hot path. */
SF_API sf_status sf_copy_to_host(sf_loader *l, const sf_tensor *t, void *dst);

/* Bytes of one element of dtype d (4 or 2). */
SF_API size_t sf_dtype_size(sf_dtype d);

/* Not collective, thread safe. The reference transform on the host: in is
 * one staged crop [channels][ext0][ext1][ext2] float32 (C order), out one
 * sample in out_layout and dtype after symmetry id `symmetry` (cubic crops
 * only unless symmetry is 0) and the vector groups. The GPU kernel matches
 * it bit for bit. Returns SF_ERR_ARG for bad arguments. */
SF_API sf_status sf_transform_host(const float *in, const int64_t ext[3],
                                   int channels, int symmetry, int ngroups,
                                   const int (*groups)[3], sf_dtype dtype,
                                   sf_out_layout out_layout, void *out);

/* ---- Independent serial reference ----------------------------------------
 * A plain serial HDF5 reader that forms one crop straight from the file and
 * applies the reference transform: what slabfeed-check compares batches
 * against. Not collective; one reader per thread. */

typedef struct sf_reader sf_reader;

/* Opens path read-only (serial HDF5). On failure *out is NULL and errbuf
 * names the problem. */
SF_API sf_status sf_reader_open(const char *path, sf_reader **out, char *errbuf,
                                size_t errlen);

/* Forms the crop of `dataset` at origin (periodic) with extents crop,
 * applies symmetry id `symmetry` and the vector groups, converts to dtype
 * and writes one sample in out_layout to out (channels * crop volume
 * elements). On failure see sf_reader_error. */
SF_API sf_status sf_reader_crop(sf_reader *r, const char *dataset,
                                sf_file_layout layout, const int64_t origin[3],
                                const int64_t crop[3], int symmetry,
                                int ngroups, const int (*groups)[3],
                                sf_dtype dtype, sf_out_layout out_layout,
                                void *out);

/* The message of the reader's last failure ("" when none). */
SF_API const char *sf_reader_error(const sf_reader *r);

/* Closes the reader; NULL is a no-op. */
SF_API void sf_reader_close(sf_reader *r);

/* ---- Description of datasets ------------------------------------------- */

typedef struct sf_dataset_info {
  int64_t dims[4];       /* as stored */
  int64_t channels;      /* C */
  int64_t shape[3];      /* Z,Y,X */
  sf_file_layout layout; /* CF or CL, after AUTO was resolved */
  int type_bits;         /* 16, 32 or 64 */
  int chunked;           /* 1: chunked storage, chunk dims in chunk[] */
  int64_t chunk[4];
} sf_dataset_info;

/* Not collective (each rank may call it alone; serial HDF5). Opens path,
 * checks that `dataset` is a rank-4 floating-point dataset and resolves its
 * layout. On failure returns a status and writes a message into errbuf. */
SF_API sf_status sf_describe(const char *path, const char *dataset,
                             sf_file_layout layout, sf_dataset_info *out,
                             char *errbuf, size_t errlen);

/* Not collective. The z-slab [*z0, *z1) of rank r among P ranks for a box of
 * Z planes: the first Z % P ranks get one plane more. Returns SF_ERR_ARG
 * when P > Z, P < 1 or r is out of range. */
SF_API sf_status sf_slab_plan(int64_t Z, int P, int r, int64_t *z0,
                              int64_t *z1);

/* ---- Synthetic volumes -----------------------------------------------------
 */

typedef enum {
  SF_CONTENT_INDEX = 0, /* sf_index_value: exact, recomputable by tests */
  SF_CONTENT_FIELD = 1  /* smooth periodic random field (density, velocity) */
} sf_content;

typedef struct sf_gen_config {
  const char *path;
  const char *input;     /* default "Nbody" */
  const char *target;    /* default "Hydro"; NULL: no target */
  int64_t shape[3];      /* Z,Y,X; default 64^3 */
  int input_channels;    /* default 4 */
  int target_channels;   /* default 5 */
  sf_file_layout layout; /* CF (default) or CL */
  int chunked;           /* 0: contiguous (default); 1: chunked */
  int64_t chunk[3];      /* spatial chunk edge; 0: min(64, shape) */
  int float16;           /* 1: store IEEE half instead of float32 */
  sf_content content;    /* default SF_CONTENT_INDEX */
  uint64_t seed;         /* for SF_CONTENT_FIELD */
  int progress;          /* 1: rank 0 prints progress for > 1 GB */
} sf_gen_config;

/* Not collective. Fills *cfg with the defaults listed above. */
SF_API void sf_gen_config_init(sf_gen_config *cfg);

/* Collective over comm. Creates (truncates) cfg->path and writes the
 * datasets in parallel, each rank writing its z-slab collectively. On
 * failure all ranks return the same status and errbuf names the problem. */
SF_API sf_status sf_generate(MPI_Comm comm, const sf_gen_config *cfg,
                             char *errbuf, size_t errlen);

/* Not collective, thread safe. The value of SF_CONTENT_INDEX at dataset
 * `dataset` (0 input, 1 target), channel c, position (z,y,x):
 *   h = fmix64(((dataset*64 + c) << 48) ^ (z << 32) ^ (y << 16) ^ x)
 *   value = (double)(int64_t)(h % 2048) - 1024
 * (fmix64: the MurmurHash3 64-bit finaliser). An integer in [-1024, 1023],
 * exact in float16 and float32; coordinates must be < 65536. */
SF_API float sf_index_value(int dataset, int c, int64_t z, int64_t y,
                            int64_t x);

#ifdef __cplusplus
}
#endif
#endif /* SLABFEED_H */
