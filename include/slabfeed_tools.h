/*
 * slabfeed tools: what tests, apps and users' checks need beside the loader
 * (slabfeed.h): a parallel generator of synthetic volumes, an independent
 * serial reference reader, the host reference of the crop transform, the
 * exact values of generated "index" volumes, dataset description and the
 * slab plan. Same contract blocks and sized-struct rule as slabfeed.h.
 */
#ifndef SLABFEED_TOOLS_H
#define SLABFEED_TOOLS_H

#include "slabfeed.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Host reference transform ------------------------------------------ */

/* slabfeed_transform_host - the reference transform on the host: `in` is one
 * staged crop [channels][ext0][ext1][ext2] float32 (C order), `out` receives
 * one sample in out_layout and dtype after symmetry id `symmetry` (cubic
 * crops only unless symmetry is 0) and the vector groups. The GPU kernel
 * matches it bit for bit.
 * Collective no. Threads safe. Device none.
 * Failure: SLABFEED_ERR_ARG for bad arguments; out is then not written.
 * Lifetime: in and out belong to the caller. */
SLABFEED_API slabfeed_status slabfeed_transform_host(
    const float *in, const int64_t ext[3], int channels, int symmetry,
    int ngroups, const int (*groups)[3], slabfeed_dtype dtype,
    slabfeed_out_layout out_layout, void *out);

/* ---- Description of datasets --------------------------------------------- */

/* What slabfeed_describe finds. Declare it with SLABFEED_DATASET_INFO_INIT
 * (or set .size). */
typedef struct slabfeed_dataset_info {
  size_t size;                 /* sizeof(slabfeed_dataset_info) of the caller */
  int64_t dims[4];             /* as stored */
  int64_t channels;            /* C */
  int64_t shape[3];            /* Z,Y,X */
  slabfeed_file_layout layout; /* CF or CL, after AUTO was resolved */
  int type_bits;               /* 16, 32 or 64 */
  int chunked;                 /* 1: chunked storage, chunk dims in chunk[] */
  int64_t chunk[4];
  /* Added in 0.7: */
  int ndim; /* 4, or 3 for a scalar field (Z,Y,X): then dims is
               (Z,Y,X,1), chunk likewise, channels 1, layout CL */
} slabfeed_dataset_info;

#define SLABFEED_DATASET_INFO_INIT SLABFEED_SIZED_INIT(slabfeed_dataset_info)

/* slabfeed_describe - opens path (serial HDF5), checks that `dataset` is a
 * floating-point dataset of rank 4 (C,Z,Y,X or Z,Y,X,C) or 3 (Z,Y,X: one
 * channel) and resolves its layout into *out (whose .size the caller has
 * set).
 * Collective no: any rank may call it alone. Threads: HDF5 is not thread
 *   safe unless built so; call from one thread. Device none.
 * Failure: a status, errbuf (when not NULL) names the problem; *out is
 *   unspecified.
 * Lifetime: values. */
SLABFEED_API slabfeed_status slabfeed_describe(const char *path,
                                               const char *dataset,
                                               slabfeed_file_layout layout,
                                               slabfeed_dataset_info *out,
                                               char *errbuf, size_t errlen);

/* A range of bytes of a file: [offset, offset + bytes). Added in 0.10. */
typedef struct slabfeed_byte_range {
  int64_t offset, bytes;
} slabfeed_byte_range;

/* slabfeed_stored_ranges - the ranges of bytes of the file at path that
 * hold planes [z0, z1) of every channel of the one dataset `dataset`
 * (layout resolved as slabfeed_describe does), channel by channel where
 * channels are first, chunk by chunk in the order of the chunks' grid,
 * neighbours in the file merged: what read_mode direct reads of a
 * float32 or float16 dataset (and what the apps' read ceiling reads
 * again; other element types of a fixed size get their ranges too).
 * Contiguous storage: each channel's
 * planes (channels first), or the planes with all their channels
 * (channels last). Chunked storage without filters: in every chunk that
 * holds any of those planes, the rows of those planes (of each channel
 * where channels are first, of all the chunk's channels where last); the
 * chunks past the dataset's upper edges are whole in the file, so their
 * ranges hold values beyond the edge too. Writes the first cap ranges
 * into out (out may be NULL with cap 0) and their count into *n: call
 * again with cap >= *n where *n > cap. Added in 0.10.
 * Collective no: any rank may call it alone (serial HDF5). Threads: call
 *   from one thread. Device none.
 * Failure: SLABFEED_ERR_FORMAT where the values are not at offsets known
 *   without reading them through HDF5 (a virtual dataset, external files,
 *   filters, storage not all allocated, elements of variable size);
 *   SLABFEED_ERR_ARG for planes outside [0, Z) or z1 < z0; errbuf names
 *   the problem. *n is 0 on failure.
 * Lifetime: values. */
SLABFEED_API slabfeed_status slabfeed_stored_ranges(
    const char *path, const char *dataset, slabfeed_file_layout layout,
    int64_t z0, int64_t z1, slabfeed_byte_range *out, int64_t cap, int64_t *n,
    char *errbuf, size_t errlen);

/* slabfeed_slab_plan - the z-slab [*z0, *z1) of rank r among P ranks for a
 * box of Z planes: the first Z % P ranks get one plane more.
 * Collective no. Threads safe. Device none.
 * Failure: SLABFEED_ERR_ARG when P > Z, P < 1 or r is out of range.
 * Lifetime: values. */
SLABFEED_API slabfeed_status slabfeed_slab_plan(int64_t Z, int P, int r,
                                                int64_t *z0, int64_t *z1);

/* The placement slabfeed_open would choose (docs/SCALING.md): set .size
 * (SLABFEED_PLACEMENT_PLAN_INIT). */
typedef struct slabfeed_placement_plan {
  size_t size;
  int nodes, group_nodes, groups; /* G: nodes per group (the smallest) */
  uint64_t node_store_bytes;      /* slab store of the fullest node */
  uint64_t budget;                /* the per-node budget it was held to */
  int fits;                       /* node_store_bytes <= budget */
  double remote_fraction; /* expected share of a crop's bytes held on other
                             nodes, uniform origins, no locality */
} slabfeed_placement_plan;

#define SLABFEED_PLACEMENT_PLAN_INIT                                           \
  SLABFEED_SIZED_INIT(slabfeed_placement_plan)

/* slabfeed_plan_placement - the replication groups slabfeed_open would
 * choose for a box of Z planes whose planes (all channels of all datasets,
 * float32) take plane_bytes, on `nodes` nodes of ranks/nodes ranks each
 * (ranks in blocks by node), with group_nodes and node_memory as in
 * slabfeed_config (node_memory 0: the default for this machine's memory),
 * without locality mode (which keeps crop - 1 more planes per node and
 * may then need a larger group).
 * Collective no. Threads safe. Device none.
 * Failure: SLABFEED_ERR_ARG for impossible arguments (including a forced G
 *   above `nodes` or a group with more ranks than planes), NOMEM.
 * Lifetime: values. */
SLABFEED_API slabfeed_status slabfeed_plan_placement(
    int64_t Z, uint64_t plane_bytes, int ranks, int nodes, int group_nodes,
    uint64_t node_memory, int64_t halo, slabfeed_placement_plan *out);

/* ---- Independent serial reference reader ----------------------------------
 * A plain serial HDF5 reader that forms one crop straight from the file and
 * applies the reference transform: what slabfeed-check compares batches
 * against. */

typedef struct slabfeed_reader slabfeed_reader;

/* slabfeed_volumes_expand - the files a path spec names (a loader's
 * `path`: newline-separated entries, each a path, a glob pattern or
 * @MANIFEST; docs/CONVENTIONS.md, "Datasets of several volumes"), in the
 * order the loader numbers its volumes, into *paths (n of them, each and
 * the array malloc'd; free with slabfeed_volumes_free).
 * Collective no (it reads the filesystem: a loader expands on rank 0 and
 * shares the list, so call it on one rank and share it too where the
 * ranks' views could differ). Threads safe. Device none.
 * Failure: *paths NULL, *n 0, and errbuf names the entry, the manifest
 * line or the pattern (an empty pattern, a blank or relative manifest
 * line, a file listed twice). Missing files are not checked here.
 * Lifetime: the caller owns *paths. */
SLABFEED_API slabfeed_status slabfeed_volumes_expand(const char *spec,
                                                     char ***paths, int *n,
                                                     char *errbuf,
                                                     size_t errlen);

/* slabfeed_volumes_free - frees what slabfeed_volumes_expand returned.
 * Collective no. Threads safe. Device none. Failure: none (NULL is
 * fine). Lifetime: paths is invalid afterwards. */
SLABFEED_API void slabfeed_volumes_free(char **paths, int n);

/* slabfeed_reader_open - opens path read-only with serial HDF5.
 * Collective no. Threads: one reader per thread, HDF5 permitting.
 * Device none.
 * Failure: *out is NULL and errbuf (when not NULL) names the problem.
 * Lifetime: *out until slabfeed_reader_close. */
SLABFEED_API slabfeed_status slabfeed_reader_open(const char *path,
                                                  slabfeed_reader **out,
                                                  char *errbuf, size_t errlen);

/* slabfeed_reader_crop - forms the crop of `dataset` at origin (periodic)
 * with extents crop, applies symmetry id `symmetry` and the vector groups,
 * converts to dtype and writes one sample in out_layout to out (channels *
 * crop volume elements).
 * Collective no. Threads: not with other calls on r. Device none.
 * Failure: a status; the message is in slabfeed_reader_error.
 * Lifetime: out belongs to the caller. */
SLABFEED_API slabfeed_status slabfeed_reader_crop(
    slabfeed_reader *r, const char *dataset, slabfeed_file_layout layout,
    const int64_t origin[3], const int64_t crop[3], int symmetry, int ngroups,
    const int (*groups)[3], slabfeed_dtype dtype,
    slabfeed_out_layout out_layout, void *out);

/* slabfeed_reader_crop_values - slabfeed_reader_crop with the loader's value
 * steps after the symmetry, in its order: the normalisation (nnorm 0 for
 * none, else one entry per channel of `dataset`, as slabfeed_config's
 * input_norm) and the amplitude augmentation of one sample (aug NULL for
 * none, else [2][channels]: the factors m, then the offsets a, of the
 * file's channels, as slabfeed_batch.input_aug reports them for a sample),
 * then dtype. The result is bit for bit what the loader delivers for a
 * sample of that origin, symmetry, normalisation and augmentation.
 * Collective no. Threads: not with other calls on r. Device none.
 * Failure: a status (also for a normalisation count other than 0 or the
 *   channel count); the message is in slabfeed_reader_error.
 * Lifetime: out belongs to the caller. */
SLABFEED_API slabfeed_status slabfeed_reader_crop_values(
    slabfeed_reader *r, const char *dataset, slabfeed_file_layout layout,
    const int64_t origin[3], const int64_t crop[3], int symmetry, int ngroups,
    const int (*groups)[3], int nnorm, const slabfeed_norm *norm,
    const float *aug, slabfeed_dtype dtype, slabfeed_out_layout out_layout,
    void *out);

/* slabfeed_reader_error - the message of r's last failure ("" when none).
 * Collective no. Threads: not with other calls on r. Device none.
 * Failure: NULL r gives "". Lifetime: until the next call on r. */
SLABFEED_API const char *slabfeed_reader_error(const slabfeed_reader *r);

/* slabfeed_reader_close - closes the reader.
 * Collective no. Threads: not with other calls on r. Device none.
 * Failure: cannot fail; NULL is a no-op. Lifetime: r is invalid after. */
SLABFEED_API void slabfeed_reader_close(slabfeed_reader *r);

/* ---- Synthetic volumes ------------------------------------------------------
 */

typedef enum {
  SLABFEED_CONTENT_INDEX = 0, /* slabfeed_index_value: exact, recomputable */
  SLABFEED_CONTENT_FIELD = 1  /* smooth periodic random field */
} slabfeed_content;

/* Generator options. Fill with slabfeed_gen_config_init, then set fields. */
typedef struct slabfeed_gen_config {
  size_t size; /* sizeof(slabfeed_gen_config) of the caller */
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
  int progress; /* 1: rank 0 reports the progress of 1 GB or more on stderr
                   (updated in place on a terminal, else a final line);
                   2: of any size; 0 (the default): none */
  /* Added in 0.7: numeric attributes of the file's root group (a
   * simulation's parameters, which the loader's `params` option reads):
   * "NAME=VALUE,NAME=VALUE", each VALUE a number stored as float64; NULL
   * or "" for none. */
  const char *attrs;
  /* Added in 0.7: 0 (the default): an existing file at path is refused,
   * never replaced; 1: it is replaced, once the new file is complete (the
   * rules of "Files written aside"). */
  int overwrite;
  /* Added in 0.7: the input (and the target) written as fields, datasets
   * of their own, instead of one dataset: "NAME:C,NAME:C,..." whose C sum
   * to input_channels (target_channels), in channel order; a field of one
   * channel is a 3-D (Z,Y,X) dataset. The values are those of the one
   * dataset they replace (the loader's `input = "NAME,NAME"` reads them
   * back as it). NULL or "": one dataset named `input` (`target`). */
  const char *input_fields;
  const char *target_fields;
  /* Added in 0.7: a super-resolution pair. 1 (the default): the target on
   * the input's grid. F in 2..16: the target is stored on a grid F times
   * finer on every axis (F x shape), its value at fine cell (Z,Y,X) that
   * of the target's function at the input's position (Z/F, Y/F, X/F): the
   * same smooth field sampled F times finer (SLABFEED_CONTENT_FIELD), or
   * slabfeed_index_value at the fine coordinates (SLABFEED_CONTENT_INDEX;
   * F x shape must then stay below 65536). Read with the loader's
   * `scale_factor = F`. */
  int scale_factor;
  /* Added in 0.9: a target on a coarser grid. 1 (the default): the
   * target on the input's grid. G in 2..16 (not with scale_factor above
   * 1; every extent of shape a multiple of G): the target is stored on a
   * grid G times coarser on every axis (shape / G), its value at coarse
   * cell (Z,Y,X) that of the target's function at the input's position
   * (G Z, G Y, G X): the same smooth field sampled G times coarser
   * (SLABFEED_CONTENT_FIELD), or slabfeed_index_value at the coarse
   * coordinates (SLABFEED_CONTENT_INDEX). Read with the loader's
   * `coarsen_factor = G`. */
  int coarsen_factor;
} slabfeed_gen_config;

/* slabfeed_gen_config_init_sized - fills the first `size` bytes of *cfg with
 * the defaults above and sets cfg->size; call it through
 * slabfeed_gen_config_init.
 * Collective no. Threads safe on distinct structs. Device none.
 * Failure: does nothing for NULL or size < sizeof(size_t).
 * Lifetime: the caller owns *cfg. */
SLABFEED_API void slabfeed_gen_config_init_sized(slabfeed_gen_config *cfg,
                                                 size_t size);

static inline void slabfeed_gen_config_init(slabfeed_gen_config *cfg)
{
  slabfeed_gen_config_init_sized(cfg, sizeof *cfg);
}

/* slabfeed_generate - writes the datasets in parallel, each rank writing
 * its z-slab collectively, aside (see "Files written aside" below): the
 * space is reserved first, what each rank wrote is read back after the
 * sync, and the file replaces cfg->path only then.
 * Collective over comm. Threads: MPI initialised; not concurrent with other
 *   HDF5 use. Device none.
 * Failure: every rank returns the same status and errbuf (when not NULL)
 *   names the problem; an earlier file at cfg->path is left as it was and
 *   no partial file remains. An existing file at cfg->path without
 *   cfg->overwrite is SLABFEED_ERR_IO, before anything is written.
 * Lifetime: the file is the caller's. */
SLABFEED_API slabfeed_status slabfeed_generate(MPI_Comm comm,
                                               const slabfeed_gen_config *cfg,
                                               char *errbuf, size_t errlen);

/* slabfeed_index_value - the value of SLABFEED_CONTENT_INDEX at dataset
 * `dataset` (0 input, 1 target), channel c, position (z,y,x):
 *   h = fmix64(((dataset*64 + c) << 48) ^ (z << 32) ^ (y << 16) ^ x)
 *   value = (double)(int64_t)(h % 2048) - 1024
 * (fmix64: the MurmurHash3 64-bit finaliser). An integer in [-1024, 1023],
 * exact in float16 and float32; coordinates must be < 65536.
 * Collective no. Threads safe. Device none. Failure: cannot fail.
 * Lifetime: a value. */
SLABFEED_API float slabfeed_index_value(int dataset, int c, int64_t z,
                                        int64_t y, int64_t x);

/* ---- Files written aside ----------------------------------------------------
 * How slabfeed replaces a file (slabfeed_generate and slabfeed-dump use
 * it; so can any writer of one file over a communicator): the file is
 * written under a temporary name in its directory
 * (<path>.slabfeed-partial.<pid of rank 0>[.k]), its space is reserved
 * before the bulk write, it is synced and renamed over path only when every
 * rank succeeded. On any failure the temporary file is removed and an
 * earlier file at path stays as it was. While rank 0 holds the temporary
 * file, SIGINT, SIGTERM and SIGHUP left at their default action remove it
 * before they end the process.
 *
 *   slabfeed_aside_begin    collective: checks, an empty temporary file
 *   slabfeed_aside_name     the name to create (H5F_ACC_TRUNC) and write
 *   slabfeed_aside_reserve  once the file exists and its size is known
 *   ... write, close the file on every rank ...
 *   slabfeed_aside_commit   collective: sync, rename (or remove); frees
 *   slabfeed_aside_abort    local, after a failure every rank knows of */

typedef struct slabfeed_aside slabfeed_aside;

/* slabfeed_aside_begin - checks that path can be replaced (absent or a
 * regular file, in a writable directory) and has rank 0 create the empty
 * temporary file. `writes`: whether this rank will write to the file.
 * Collective over comm. Threads: one thread per rank. Device none.
 * Failure: every rank returns the same status, errbuf names path; *out is
 *   NULL and nothing is created.
 * Lifetime: *out until slabfeed_aside_commit or slabfeed_aside_abort. */
SLABFEED_API slabfeed_status slabfeed_aside_begin(MPI_Comm comm,
                                                  const char *path, int writes,
                                                  slabfeed_aside **out,
                                                  char *errbuf, size_t errlen);

/* slabfeed_aside_name - the temporary name to write to.
 * Collective no. Threads safe. Device none. Failure: NULL for NULL.
 * Lifetime: that of a. */
SLABFEED_API const char *slabfeed_aside_name(const slabfeed_aside *a);

/* slabfeed_aside_reserve - space for a file of `bytes` bytes (data and
 * metadata), before the bulk write: a writing rank's file size limit
 * (ulimit -f); on rank 0 the free space of the filesystem (1% margin) and
 * the blocks themselves (fallocate, keeping the size; where the filesystem
 * cannot reserve, the free-space check stands). Call it after the file is
 * created under slabfeed_aside_name (a truncating create releases blocks).
 * Collective no: the ranks that write call it; agree on the status.
 *   Threads: one thread per rank. Device none.
 * Failure: SLABFEED_ERR_IO, errbuf says what is missing.
 * Lifetime: values. */
SLABFEED_API slabfeed_status slabfeed_aside_reserve(slabfeed_aside *a,
                                                    uint64_t bytes,
                                                    char *errbuf,
                                                    size_t errlen);

/* slabfeed_aside_commit - st and msg: this rank's outcome of the writes
 * and of closing the file (closed on every rank before the call). When
 * every rank succeeded, the writing ranks sync the file and rank 0 renames
 * it over path; otherwise, or when the sync or the rename fails, the
 * temporary file is removed. Frees a.
 * Collective over the communicator of begin. Threads: one thread per rank.
 *   Device none.
 * Failure: every rank returns the same status and message (that of the
 *   lowest failing rank, "rank R: ..."); an earlier file at path is intact.
 * Lifetime: a is invalid after the call. */
SLABFEED_API slabfeed_status slabfeed_aside_commit(slabfeed_aside *a,
                                                   slabfeed_status st,
                                                   const char *msg,
                                                   char *errbuf, size_t errlen);

/* slabfeed_aside_abort - rank 0 removes the temporary file; frees a. For a
 * failure every rank already knows of (use commit otherwise).
 * Collective no. Threads: one thread per rank. Device none.
 * Failure: cannot fail (NULL is ignored).
 * Lifetime: a is invalid after the call. */
SLABFEED_API void slabfeed_aside_abort(slabfeed_aside *a);

/* ---- Field statistics (added in 0.5) ----------------------------------------
 * What a normalisation (slabfeed_config.input_norm, target_norm) is made
 * from: per channel of a dataset, the count, mean, standard deviation,
 * minimum and maximum of the values x over the whole box, and the same of
 * log(x + a) as the normalisation computes it (float32 x + a, the
 * library's float32 log), read in parallel. slabfeed-info --stats prints
 * them with a ready --input-norm value. */

/* The statistics of one channel. Values that are NaN or infinite are left
 * out (counted in nonfinite); the log statistics take the values whose
 * log(x + a) is finite (x + a > 0 and not inf). std is the population
 * standard deviation (divided by the count). Fields with no value to
 * describe (a count of 0, or no log asked for) are NaN. Its layout is
 * frozen (it is an array element): a later version adds a new function. */
typedef struct slabfeed_field_stat {
  uint64_t count;     /* finite values */
  uint64_t nonfinite; /* NaN and +-inf values, left out */
  double mean, std, min, max;
  uint64_t log_count; /* values whose log(x + a) is finite */
  double log_mean, log_std, log_min, log_max;
} slabfeed_field_stat;

/* slabfeed_field_stats - the statistics of every channel of `dataset` in
 * `path` (layout as slabfeed_describe resolves it) into out[0..C), C the
 * channel count (also in *channels). Every rank reads its z-slab (the
 * planes split over the ranks of comm as slabfeed_slab_plan; ranks past
 * the box's Z planes read none) with parallel HDF5, in runs of at most 64
 * MiB, and accumulates in double: each plane of a channel in two pairwise
 * passes (mean, then squared deviations), the planes and then the ranks
 * merged with the pairwise update of Chan et al. (no sum of squares, so
 * no cancellation). log_a is the a of log(x + a); NaN skips the log
 * statistics (log_count 0, log fields NaN).
 * Collective over comm.
 * Threads: MPI initialised; no other HDF5 use meanwhile (HDF5 is not
 *   thread safe unless built so). Device none.
 * Failure: every rank returns the same status and errbuf (when not NULL)
 *   names the problem and the rank that found it: a missing or unreadable
 *   file or dataset by name, SLABFEED_ERR_ARG for NULL arguments, an
 *   infinite log_a, or max_channels below the dataset's channel count
 *   (*channels is then set); out is then unspecified.
 * Lifetime: out (the same numbers on every rank) and *channels belong to
 *   the caller. */
SLABFEED_API slabfeed_status slabfeed_field_stats(
    MPI_Comm comm, const char *path, const char *dataset,
    slabfeed_file_layout layout, float log_a, slabfeed_field_stat *out,
    int max_channels, int *channels, char *errbuf, size_t errlen);

/* ---- Topology: ranks, GPUs and NUMA nodes (added in 0.5) -------------------
 * Where each rank runs against where its GPU sits: a rank whose CPUs lie
 * on another NUMA node than its GPU has the GPU's copy engine read pages
 * across the inter-socket link (docs/SCALING.md, "One node"). Read from
 * sysfs and the kernel (no libnuma); a machine without NUMA nodes, or a
 * rank without a GPU, is reported as such, not as a failure. */

/* slabfeed_topology - a table of where every rank of comm runs: rank 0's
 * buf receives one line per host (its NUMA nodes and their CPUs), one
 * line per rank (rank, host, GPU: device ordinal, PCI bus id and its NUMA
 * node, or "none" and why; the CPUs the calling thread may run on as a
 * range list and their NUMA nodes), then one "WARNING: rank R ..." line
 * per rank some of whose CPUs lie on another NUMA node than its GPU. The
 * count of those ranks goes to *warnings on every rank (when warnings is
 * not NULL). device: this rank's CUDA device ordinal, -1 (no GPU), or
 * SLABFEED_DEVICE_LOCAL (the node-local rank, MPI_COMM_TYPE_SHARED,
 * modulo the visible devices); ranks may pass different values. A device
 * that is not visible, a build without CUDA, a GPU whose NUMA node the
 * kernel does not report, or a machine without NUMA is said so in the
 * table.
 * Collective over comm. Threads: MPI initialised; reports the calling
 *   thread's CPUs. Device: reads the device's PCI bus id (initialises the
 *   CUDA runtime); no allocation, no context change.
 * Failure: every rank returns the same status (SLABFEED_ERR_ARG for a
 *   device below -2, or a NULL buf or len 0 on rank 0; MPI, NOMEM); buf
 *   (where not NULL) then receives the message.
 * Lifetime: buf (rank 0's table, truncated to len - 1; other ranks' get
 *   "") and *warnings belong to the caller. */
SLABFEED_API slabfeed_status slabfeed_topology(MPI_Comm comm, int device,
                                               char *buf, size_t len,
                                               int *warnings);

/* slabfeed_loader_numa - one line saying where this rank's pages of l lie:
 * its slab segment and the node window's segments (the pages a device
 * loader registers and its GPU's copy engine reads: the pinned staging of
 * the node's crops) by NUMA node, from sampled pages; the NUMA nodes of
 * the calling thread's CPUs; for a device loader, its GPU's PCI bus id and
 * NUMA node and the share of the sampled window pages on that node. Pages
 * this process never touched are counted as not mapped here.
 * Collective no. Threads: not with other calls on l. Device: reads the
 *   GPU's PCI bus id; nothing else.
 * Failure: SLABFEED_ERR_ARG for NULL l or buf or len 0,
 *   SLABFEED_ERR_FORKED after fork().
 * Lifetime: buf is the caller's; the line is truncated to len - 1. */
SLABFEED_API slabfeed_status slabfeed_loader_numa(const slabfeed_loader *l,
                                                  char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* SLABFEED_TOOLS_H */
