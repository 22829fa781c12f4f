/*
 * slabfeed: random, augmented crops of one huge periodic 3D volume stored in
 * HDF5, delivered to every rank of an MPI job (one rank per GPU).
 *
 * This header is the loader API: open, next, seek, close, statistics,
 * errors and the version. Tools (generator, serial reference reader, host
 * transform, slab plan) are in slabfeed_tools.h.
 *
 * Conventions (public and tested; docs/CONVENTIONS.md has the details):
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
 * Every declaration carries the same contract block:
 *   Collective  whether all ranks of the loader's communicator must call it
 *               (in the same order), or "no" (one rank may call it alone);
 *   Threads     what may run concurrently;
 *   Device      what it does to CUDA devices and streams;
 *   Failure     what is returned and what state is left;
 *   Lifetime    who owns what it returns, and for how long.
 *
 * Structs that may grow carry their size in bytes as the first member,
 * filled by their init function or SLABFEED_*_INIT initialiser. The library
 * reads and writes only the bytes a caller's struct has, so a program built
 * against an older header keeps working with a newer library.
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

/* Initialiser of a sized struct of type T: its size set, all else zero.
 * Designated in C (no missing-initializer warnings); positional in C++
 * before C++20. */
#if defined(__cplusplus) && __cplusplus < 202002L
#define SLABFEED_SIZED_INIT(T)                                                 \
  {                                                                            \
    sizeof(T)                                                                  \
  }
#else
#define SLABFEED_SIZED_INIT(T)                                                 \
  {                                                                            \
    .size = sizeof(T)                                                          \
  }
#endif

/* ---- Status codes --------------------------------------------------------
 * Values are pinned and never renumbered. One list expands to the enum,
 * slabfeed_strerror and slabfeed_status_name. */
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
#define SLABFEED_STATUS_ENUM_(name, value, text) name = value,
  SLABFEED_STATUS_MAP(SLABFEED_STATUS_ENUM_)
#undef SLABFEED_STATUS_ENUM_
} slabfeed_status;

/* slabfeed_strerror - a human-readable description of status s.
 * Collective no. Threads safe. Device none.
 * Failure: values outside the list give "unknown status".
 * Lifetime: a static string, never NULL. */
SLABFEED_API const char *slabfeed_strerror(slabfeed_status s);

/* slabfeed_status_name - the enum name of status s, e.g.
 * "SLABFEED_ERR_ARG" (for logs and language bindings).
 * Collective no. Threads safe. Device none.
 * Failure: values outside the list give "SLABFEED_UNKNOWN".
 * Lifetime: a static string, never NULL. */
SLABFEED_API const char *slabfeed_status_name(slabfeed_status s);

/* slabfeed_version - SLABFEED_VERSION_NUMBER of the library actually linked
 * (major*10000 + minor*100 + patch); compare with the header's macro.
 * Collective no. Threads safe. Device none. Failure: cannot fail.
 * Lifetime: a value. */
SLABFEED_API unsigned slabfeed_version(void);

/* slabfeed_version_string - the linked library's version, e.g. "0.2.0".
 * Collective no. Threads safe. Device none. Failure: cannot fail.
 * Lifetime: a static string. */
SLABFEED_API const char *slabfeed_version_string(void);

/* ---- Options --------------------------------------------------------------
 */

/* Layout of a dataset in the file. */
typedef enum {
  SLABFEED_LAYOUT_AUTO = 0, /* decide from the shape; refused when ambiguous */
  SLABFEED_LAYOUT_CF = 1,   /* channels-first (C,Z,Y,X) */
  SLABFEED_LAYOUT_CL = 2    /* channels-last (Z,Y,X,C) */
} slabfeed_file_layout;

/* Progress of long steps, printed by rank 0 alone on stderr. AUTO: steps
 * of 1 GB or more (all ranks' bytes), a line updated in place when stderr
 * is a terminal, else one line at the end; ON: every step, the same way;
 * OFF: nothing. The functions without an option (slabfeed_field_stats)
 * take the environment's SLABFEED_PROGRESS=auto|on|off. */
typedef enum {
  SLABFEED_PROGRESS_AUTO = 0,
  SLABFEED_PROGRESS_ON = 1,
  SLABFEED_PROGRESS_OFF = 2
} slabfeed_progress;

/* How the open's slab reads go to the file. AUTO: where the file is on a
 * node-local or memory filesystem (tmpfs, ext4, xfs, btrfs, overlay, zfs,
 * f2fs), DIRECT, falling back to independent reads on more than one rank
 * and collective on one; collective reads (MPI-IO's two-phase
 * aggregation, what parallel filesystems want) elsewhere; the choice is
 * rank 0's, for all. INDEPENDENT: each rank reads its own planes through
 * MPI-IO, no aggregation. DIRECT (0.9): each rank reads its planes with
 * plain pread on several threads (the node's cores shared by its ranks)
 * at the dataset's offset in the file, HDF5 giving only the metadata;
 * for datasets stored contiguously in the file, channels first or of
 * one channel, as IEEE float32 or binary16 little endian; any other
 * dataset is read independently. The writer writes as with INDEPENDENT
 * where DIRECT is asked. */
typedef enum {
  SLABFEED_READ_AUTO = 0,
  SLABFEED_READ_COLLECTIVE = 1,
  SLABFEED_READ_INDEPENDENT = 2,
  SLABFEED_READ_DIRECT = 3 /* added in 0.9 */
} slabfeed_read_mode;

/* The node's shared memory that holds the slabs. PER_RANK: one MPI-3
 * shared window per rank of the node, each rank's segment its own
 * shared-memory file (the ranks fault their pages in parallel: one file's
 * page faults serialise); ONE: one window for the node (0.6's). AUTO
 * (0.13): FILE where the open's read is direct (read_mode direct, or
 * auto on a local or memory filesystem), the node has 2 to 64 ranks and
 * the machine's /dev/shm the room for their slabs; else per rank up to
 * 64 ranks on a node, else one (0.12's AUTO: never FILE). */
typedef enum {
  SLABFEED_WINDOW_AUTO = 0,
  SLABFEED_WINDOW_ONE = 1,
  SLABFEED_WINDOW_PER_RANK = 2,
  /* Added in 0.12: each rank's segment /dev/shm files of the library's
   * own (not an MPI window; since 0.13 several where several threads
   * write it, so that they do not take turns), mapped one after the
   * other by the node's ranks and unlinked once they have them; the
   * open's direct read writes them as files, without a page fault per
   * page (other writes, and other read modes, fault as a window's do);
   * the machine's free space in /dev/shm is checked at open. Other nodes
   * still reach the segment through an MPI window. */
  SLABFEED_WINDOW_FILE = 3
} slabfeed_shared_window;

/* Transparent huge pages for the slab memory (0.11): the open's segment
 * and the writer's output slab. AUTO asks the kernel for them (madvise)
 * before the pages are first touched: a 2 MiB page faults once where 512
 * pages of 4 KiB fault 512 times, and the first touch of the open's and
 * the writer's memory is bound by page faults. The kernel's policy decides
 * (transparent_hugepage/enabled for private memory, shmem_enabled for
 * the node's shared memory); slabfeed_placement and slabfeed_writer_io
 * say how many bytes it gave and, where none, why. OFF asks for 4 KiB
 * pages (madvise MADV_NOHUGEPAGE). */
typedef enum {
  SLABFEED_HUGE_AUTO = 0,
  SLABFEED_HUGE_OFF = 1
} slabfeed_huge_pages;

/* How the writer holds its output (0.11). AUTO: where the output lies on
 * a memory filesystem (tmpfs) and close would write directly (read_mode
 * auto or direct), on one node, for a contiguous float32 output whose
 * planes are whole pages of the file and whose space the filesystem
 * reserved, the output slab is the file's own pages, mapped (mmap,
 * shared): puts land in the file and close writes nothing; elsewhere,
 * and with OFF, the slab is memory of its own that close writes.
 * slabfeed_writer_io says which, and where it was planned but not done,
 * why. */
typedef enum {
  SLABFEED_WRITE_MAP_AUTO = 0,
  SLABFEED_WRITE_MAP_OFF = 1
} slabfeed_write_map;

/* Which output slabs a writer of device batches registers with CUDA at
 * open (0.12). NODE: every slab of the rank's node, so the device copies
 * each put's parts straight into any of them; each rank then pins the
 * node's whole output (the node's ranks x its bytes in all). OWN: the
 * rank's own slab alone; the parts for the node's other ranks come back
 * through the writer's pinned staging and are copied into their slabs on
 * the CPU. AUTO: OWN where more than four ranks share the node, else NODE
 * (measured at 2, 4, 8 and 16 ranks: docs/DECISIONS.md).
 * slabfeed_writer_io says which ran. Host batches register nothing. */
typedef enum {
  SLABFEED_WRITE_REGISTER_AUTO = 0,
  SLABFEED_WRITE_REGISTER_OWN = 1,
  SLABFEED_WRITE_REGISTER_NODE = 2
} slabfeed_write_register;

/* Where the slabs live for device batches (0.8). HOST: in the node's
 * shared window, crops cross the host-to-device link (0.7's way). DEVICE:
 * each rank's slab (core + halo) is also held in its GPU's memory, filled
 * at open, and crops are gathered on the device; the pieces held by other
 * ranks of the node are read from their GPUs' memory through CUDA IPC
 * (peer access), pieces from other nodes keep the MPI path. AUTO: device
 * when every rank's slab fits its share of device_memory and every pair
 * of the node's GPUs has peer access, else host (and host for a tiled
 * pass of one rank per node, which reads each voxel about once; 0.12: a
 * pass of several ranks on one node takes device, its slabs going from
 * the file straight to the GPUs); slabfeed_placement says which and why.
 * Host batches (device -1) always keep HOST. */
typedef enum {
  SLABFEED_RESIDENCY_AUTO = 0,
  SLABFEED_RESIDENCY_HOST = 1,
  SLABFEED_RESIDENCY_DEVICE = 2
} slabfeed_residency;

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

/* Environment variable that, set to 1, makes every rank its own "node", to
 * test the transfers between nodes on one machine: with the volume sharded
 * over all of them (SLABFEED_GROUP_NODES=-1), the pieces other ranks hold
 * move over MPI (SLABFEED_REMOTE: send or get). Overridden by
 * slabfeed_config.rank_per_node when that is 0 or 1. */
#define SLABFEED_ENV_RANK_PER_NODE "SLABFEED_RANK_PER_NODE"

/* Environment variable giving slabfeed_config.group_nodes when that is 0
 * (a node count, or -1 for all nodes): a batch script can place the volume
 * without changing the program. */
#define SLABFEED_ENV_GROUP_NODES "SLABFEED_GROUP_NODES"

#define SLABFEED_MAX_VECTORS 4 /* vector groups per dataset */
/* slabfeed_config.device: the node-local rank (MPI_COMM_TYPE_SHARED) modulo
 * the visible CUDA devices, one GPU per rank ("local" as text). */
#define SLABFEED_DEVICE_LOCAL (-2)
#define SLABFEED_MAX_REGIONS 8   /* held-out regions per loader */
#define SLABFEED_MAX_CHANNELS 64 /* channels per dataset */
#define SLABFEED_MAX_PARAMS 32   /* per-volume parameters (params) */

/* The normalisation of one channel: y = (f(x) - shift) / scale, f(x) = x
 * (log 0) or log(x + a) (log 1). The identity is {0, 0, 0, 1}. */
typedef struct slabfeed_norm {
  int log;     /* 0: f is the identity; 1: f(x) = log(x + a) */
  float a;     /* offset inside the log (used when log is 1) */
  float shift; /* subtracted after f */
  float scale; /* divided by last; finite and not 0 */
} slabfeed_norm;

/* Loader options. Fill with slabfeed_config_init, then set fields. Strings
 * are copied by slabfeed_open. All ranks must pass equal values (checked at
 * open; `device` may differ). Fields a library does not know (a caller
 * newer than the library) are ignored; fields a caller does not have (a
 * caller older than the library) take their defaults. */
typedef struct slabfeed_config {
  size_t size;                    /* sizeof(slabfeed_config) of the caller */
  const char *path;               /* HDF5 file (required) */
  const char *input;              /* input dataset name (required) */
  const char *target;             /* target dataset name, or NULL for none */
  slabfeed_file_layout layout;    /* file layout of both datasets; AUTO */
  int64_t crop[3];                /* crop edge (z,y,x); default 64^3 */
  int batch;                      /* local batch B per rank; default 1 */
  uint64_t seed;                  /* sampler seed; default 0 */
  slabfeed_symmetries symmetries; /* default SLABFEED_SYM_ALL */
  int n_input_vectors;            /* vector groups of the input */
  int input_vectors[SLABFEED_MAX_VECTORS][3];
  int n_target_vectors; /* vector groups of the target */
  int target_vectors[SLABFEED_MAX_VECTORS][3];
  slabfeed_dtype dtype;           /* default SLABFEED_DTYPE_F32 */
  slabfeed_out_layout out_layout; /* default SLABFEED_OUT_NCDHW */
  int device;               /* CUDA device ordinal, -1 for host batches, or
                               SLABFEED_DEVICE_LOCAL */
  int prefetch;             /* depth of the batch ring, 1..64; default 2 */
  int halo;                 /* z-planes copied on each side; default 0 */
  int rank_per_node;        /* -1: from SLABFEED_ENV_RANK_PER_NODE; 0; 1 */
  uint64_t steps_per_epoch; /* 0: enough crops to cover the box once */
  /* Added in 0.3 (older callers' structs end above): where the volume
   * lives across nodes. The N nodes form replication groups of G nodes;
   * each group holds the whole volume, sharded over its ranks, so crops
   * move between nodes only inside a group (none at G = 1). */
  int group_nodes;      /* G: 0 (default) the smallest group whose share
                           fits node_memory; -1 all nodes (one group);
                           k > 0 forces k (at most the node count) */
  uint64_t node_memory; /* bytes of slab store one node may hold; 0
                           (default): half the node's physical memory less
                           2 GiB per rank on it (at least 1/8 of it); the
                           smallest over the nodes is used */
  int locality;         /* 1: every rank draws its z origins inside its
                           node's z-range of its group and the node keeps
                           crop - 1 planes above it: no crop byte crosses
                           nodes at any G, each global batch is stratified
                           in z (docs/CONVENTIONS.md); default 0 */
  /* Added in 0.4: regions kept out of training. Each is an axis-aligned
   * box {z, y, x, dz, dy, dx} in voxels of the periodic volume (it may
   * wrap; an extent of 0 is the whole axis): no crop contains one of its
   * voxels, wrap-around included, and origins are uniform over the ones
   * that remain (docs/CONVENTIONS.md). */
  int n_holdout;
  int64_t holdout[SLABFEED_MAX_REGIONS][6];
  /* Added in 0.4: a tiled pass instead of random crops (validation and
   * inference). With tile T > 0 the loader hands out the tiles of edge T
   * of `region` (the whole box when n_region is 0) in one global order,
   * each as an input crop of edge T + 2 pad starting pad voxels before the
   * tile (periodic), with the symmetry pass_symmetry; `crop`,
   * `symmetries` and `steps_per_epoch` are then not used (an epoch is one
   * pass). docs/CONVENTIONS.md has the tile grid. */
  int tile;     /* T: 0 (default) random training crops */
  int pad;      /* P: context voxels on every side; default 0. From 0.7
                   also for random crops: the input crop is crop + 2P at
                   slabfeed_batch.origin, the target the crop itself at
                   origin + P (concentric; target_pad 1: padded too) */
  int n_region; /* 0 or 1 */
  int64_t region[1][6];
  int pass_symmetry; /* symmetry id of every tile, 0..47; default 0 */
  /* Added in 0.5: per-channel normalisation in the transform, host and
   * GPU alike: channel c of a crop becomes (f(x) - shift) / scale, with f
   * the identity or log(x + a) (docs/CONVENTIONS.md). n_*_norm is 0 (no
   * normalisation, the default) or the dataset's channel count. The
   * channels of a vector group share one scale and have no shift and no
   * log (rotation must commute with normalisation). The writer inverts
   * the target's normalisation. */
  int n_input_norm;
  slabfeed_norm input_norm[SLABFEED_MAX_CHANNELS];
  int n_target_norm;
  slabfeed_norm target_norm[SLABFEED_MAX_CHANNELS];
  /* Added in 0.5: the target crop of a tiled pass is the tile itself, edge
   * T (0, the default), or padded like the input, edge T + 2 pad (1); from
   * 0.7 likewise for random crops with a pad (crop, or crop + 2 pad). */
  int target_pad;
  /* Added in 0.6: datasets of several volumes. `path` may then name many
   * files: entries separated by newlines, each a path, a glob pattern or
   * @MANIFEST (a text file of paths, one per line, relative to its
   * folder unless absolute); the volumes
   * must agree in channels, element type, layout, y and x extents
   * (docs/CONVENTIONS.md, "Datasets of several volumes"). */
  const char *volume_weights;  /* how a sample picks its volume: "voxels"
                                  (default: by voxel count, every origin of
                                  the dataset equally likely), "equal", or
                                  W0,W1,... one non-negative weight per
                                  volume */
  const char *holdout_volumes; /* volumes kept out of training, by index:
                                  "3,7,10-12"; "" none (the default) */
  /* Added in 0.7: per-volume parameters (a simulation's cosmology,
   * redshift, astrophysical parameters). `params` names K of them,
   * separated by commas (at most SLABFEED_MAX_PARAMS); each volume's
   * value of a name is its manifest column NAME=VALUE when its manifest
   * line has one, else the numeric scalar attribute NAME of its file:
   * "Omega_m" on the root group, "Header/Redshift" on the group or
   * dataset named before the last '/'. A volume without one is refused at
   * open, naming file and parameter. Every batch carries the K values of
   * each sample's volume (slabfeed_batch.params), after params_norm:
   * n_params_norm is 0 (none) or K, one entry per parameter, applied as a
   * channel's normalisation (docs/CONVENTIONS.md). */
  const char *params;
  int n_params_norm;
  slabfeed_norm params_norm[SLABFEED_MAX_PARAMS];
  /* Added in 0.7: amplitude augmentation of random crops (training only;
   * refused in a tiled pass). Each is "" (none), one number (every channel)
   * or one per channel of the dataset, separated by commas, each finite
   * and >= 0: *_aug_add the standard deviation of a normal offset a,
   * *_aug_mul that of the log of a log-normal factor m, drawn per sample
   * and channel from the counter-based stream; a channel's value v after
   * its normalisation becomes fmaf(v, m, a) (docs/CONVENTIONS.md). The
   * channels of a vector group share one factor and take no offset.
   * aug_share 1 (the default): target channel c draws the same standard
   * normals as input channel c (equal deviations: equal factors); 0: its
   * own. */
  const char *aug_add;
  const char *aug_mul;
  const char *target_aug_add;
  const char *target_aug_mul;
  int aug_share;
  /* Added in 0.7: grids of different resolution (super-resolution pairs).
   * The target's grid is scale_factor times the input's on every axis
   * (1, the default: one grid): the target of the input crop at origin o
   * of edge c is the crop at scale_factor * o of edge scale_factor * c of
   * the target's grid, under the same symmetry; with a pad, the target is
   * the core scaled; a tiled pass's target is the fine tile and its writer
   * writes on the fine grid (docs/CONVENTIONS.md). */
  int scale_factor;
  /* Added in 0.7: vector groups by field. Names of fields of the input
   * (the target) that are vectors, "velocity,displacement": each must
   * have 3 channels (components along z,y,x) and becomes the vector group
   * of its channels in the concatenated input, after the groups of
   * input_vectors. NULL or "": none. (Normalisation by field needs no
   * option: input_norm may give one entry per field instead of one per
   * channel, each applied to every channel of its field.) */
  const char *input_vector_fields;
  const char *target_vector_fields;
  /* Added in 0.7: progress of the open's slab read and of the writer's
   * close, printed by rank 0 alone on stderr (docs/CONVENTIONS.md,
   * "Progress"). */
  slabfeed_progress progress; /* default SLABFEED_PROGRESS_AUTO */
  /* Added in 0.7: the open's slab reads (slabfeed_read_mode above);
   * slabfeed_placement says which ran and why. */
  slabfeed_read_mode read_mode; /* default SLABFEED_READ_AUTO */
  /* Added in 0.7: slabfeed_shared_window above. */
  slabfeed_shared_window shared_window; /* default SLABFEED_WINDOW_AUTO */
  /* Added in 0.7: threads of each rank that fault in the pages of its
   * node memory before they are first written (the open's slab segment,
   * the writer's output slab): 0 auto (the node's cores over its ranks,
   * at most 8), 1 none apart (the pages fault as the read writes them,
   * 0.6's way), N (at most 64). */
  int touch_threads; /* default 0 */
  /* Added in 0.8: slabfeed_residency above. */
  slabfeed_residency residency; /* default SLABFEED_RESIDENCY_AUTO */
  /* Added in 0.8: GPU memory the slabs of the ranks using one GPU may
   * take there, bytes (residency auto and device); 0: half of that GPU's
   * free memory at open, leaving the rest to training. */
  uint64_t device_memory; /* default 0 */
  /* Added in 0.9: a target on a coarser grid (emulation of a smoothed
   * field): the input's grid is coarsen_factor g times the target's on
   * every axis (1, the default: one grid; not with scale_factor above 1).
   * Crops, pads, tiles and regions stay in input voxels, with the crop
   * (without its pad), the tile and the region multiples of g; the
   * target of the input crop at origin o of edge c + 2 pad is the crop of
   * edge c / g at (o + pad) / g of the target's grid, and every origin o
   * has o + pad a multiple of g (docs/CONVENTIONS.md). */
  int coarsen_factor; /* default 1 */
  /* Added in 0.11: slabfeed_huge_pages above. */
  slabfeed_huge_pages huge_pages; /* default SLABFEED_HUGE_AUTO */
  /* Added in 0.11: slabfeed_write_map above. */
  slabfeed_write_map write_map; /* default SLABFEED_WRITE_MAP_AUTO */
  /* Added in 0.12: slabfeed_write_register above. */
  slabfeed_write_register write_register; /* default ..._AUTO */
} slabfeed_config;

/* slabfeed_config_init_sized - fills the first `size` bytes of *cfg with the
 * defaults listed above and sets cfg->size = size. Call it through
 * slabfeed_config_init, which passes the caller's sizeof.
 * Collective no. Threads safe on distinct structs. Device none.
 * Failure: does nothing when cfg is NULL or size < sizeof(size_t).
 * Lifetime: the caller owns *cfg. */
SLABFEED_API void slabfeed_config_init_sized(slabfeed_config *cfg, size_t size);

static inline void slabfeed_config_init(slabfeed_config *cfg)
{
  slabfeed_config_init_sized(cfg, sizeof *cfg);
}

/* ---- The option table
 * -------------------------------------------------------- Every field of
 * slabfeed_config is described once, by a row of a table the library owns: its
 * name (the field, the Python keyword), its command-line flag, kind, range,
 * default and one line of help. slabfeed_config_init takes its defaults from
 * the table, slabfeed_open checks ranges against it, and the command-line
 * tools, the Python module and the option list of the documentation are made
 * from it: a program can set any option by name from text (slabfeed_config_set)
 * without knowing the struct. */

/* How an option's value is written as text and where it is stored. */
typedef enum {
  SLABFEED_OPTION_STRING = 0,  /* const char *, not copied by _set: it must
                                  live until slabfeed_open; "" is NULL */
  SLABFEED_OPTION_INT = 1,     /* int, decimal, in [min, max]; `choices`
                                  may name values ("local=-2") */
  SLABFEED_OPTION_UINT64 = 2,  /* uint64_t, decimal digits, in [min, max]
                                  (max 0: no upper bound) */
  SLABFEED_OPTION_SIZE = 3,    /* uint64_t bytes: digits, optionally with a
                                  binary suffix K, M, G or T ("200G") */
  SLABFEED_OPTION_SWITCH = 4,  /* int 0 or 1: "1", "0", "true", "false",
                                  "yes", "no", "on", "off"; where min is -1
                                  also "auto" (-1). A command-line flag
                                  without a value sets 1 */
  SLABFEED_OPTION_CHOICE = 5,  /* an enum by name: the i-th name of
                                  `choices` (or of `aliases`) is value i */
  SLABFEED_OPTION_EDGE = 6,    /* int64_t[3] crop edge: "C" (all three), or
                                  "Z,Y,X" or "ZxYxX", each in [min, max] */
  SLABFEED_OPTION_VECTORS = 7, /* vector groups, int count + int[max][3]:
                                  "K0,K1,K2" appends one group of channels
                                  in [0, 63], ";" separates several; ""
                                  clears. At most `max` groups */
  SLABFEED_OPTION_REGIONS = 8, /* boxes, int count + int64_t[max][6]:
                                  "Z,Y,X,DZ,DY,DX" appends one (origin and
                                  extent in voxels, each in [0, 2^31); an
                                  extent of 0 is the whole axis), ";"
                                  separates several, "" clears. At most
                                  `max` boxes */
  SLABFEED_OPTION_NORMS = 9    /* per-channel normalisation, int count +
                                  slabfeed_norm[max], one entry per channel
                                  separated by ";": "SHIFT,SCALE" (f the
                                  identity) or "log(A),SHIFT,SCALE" (f(x) =
                                  log(x + A)); numbers as strtod reads them,
                                  rounded to float; SCALE finite and not 0,
                                  SHIFT and A finite. A value replaces the
                                  list, "" clears it. At most `max` entries.
                                  _get writes %.9g, which reads back to the
                                  same floats (added in 0.5) */
} slabfeed_option_kind;

/* slabfeed_option.flags */
#define SLABFEED_OPTION_REQUIRED 1u /* slabfeed_open refuses it unset */

/* One row of the table. Rows are owned by the library and never change. */
typedef struct slabfeed_option {
  const char *name; /* field and Python keyword: "node_memory" */
  const char *flag; /* command line without "--": "node-memory" */
  slabfeed_option_kind kind;
  int64_t min, max;          /* range of numbers and of each edge; for
                                VECTORS max is the number of groups */
  const char *choices;       /* CHOICE: names separated by '|', else NULL */
  const char *aliases;       /* CHOICE: other names, same order, or NULL */
  const char *default_value; /* the default as text _set accepts ("" for
                                none: a NULL string, no vector groups) */
  const char *metavar;       /* the value in a usage line: "Z,Y,X" */
  const char *help;          /* one line, without the default */
  unsigned flags;            /* SLABFEED_OPTION_REQUIRED */
} slabfeed_option;

/* slabfeed_option_at - row i of the option table, in the order of
 * slabfeed_config; NULL once i is past the last row (or negative).
 * Collective no. Threads safe. Device none. Failure: NULL.
 * Lifetime: static. */
SLABFEED_API const slabfeed_option *slabfeed_option_at(int i);

/* slabfeed_option_find - the row whose name or flag is `name` ("crop",
 * "node_memory" or "node-memory"); NULL when there is none.
 * Collective no. Threads safe. Device none. Failure: NULL.
 * Lifetime: static. */
SLABFEED_API const slabfeed_option *slabfeed_option_find(const char *name);

/* slabfeed_config_set - parses `value` as the text form of option `name`
 * (a name or flag, see slabfeed_option_kind) and stores it in *cfg, after
 * the same range check slabfeed_open makes. Strings are not copied.
 * Collective no. Threads safe on distinct structs. Device none.
 * Failure: SLABFEED_ERR_ARG for an unknown option or a bad value, and
 *   SLABFEED_ERR_UNSUPPORTED when the field lies past cfg->size (a caller
 *   built against an older header); *cfg is then unchanged and, when
 *   errbuf is not NULL, errbuf holds a message naming the option and the
 *   value ("crop: '0' is below the minimum 1").
 * Lifetime: cfg and value belong to the caller. */
SLABFEED_API slabfeed_status slabfeed_config_set(slabfeed_config *cfg,
                                                 const char *name,
                                                 const char *value,
                                                 char *errbuf, size_t errlen);

/* slabfeed_config_get - the value of option `name` in *cfg as text that
 * slabfeed_config_set accepts (a NULL string gives "").
 * Collective no. Threads safe. Device none.
 * Failure: SLABFEED_ERR_ARG for an unknown option or NULL arguments,
 *   SLABFEED_ERR_UNSUPPORTED for a field past cfg->size, SLABFEED_ERR_NOMEM
 *   when len is too small (buf then holds a truncated value).
 * Lifetime: buf belongs to the caller. */
SLABFEED_API slabfeed_status slabfeed_config_get(const slabfeed_config *cfg,
                                                 const char *name, char *buf,
                                                 size_t len);

/* ---- Batches and statistics ------------------------------------------------
 */

/* One dense tensor, shaped like a DLPack tensor: strides in elements. Its
 * layout is frozen (it is embedded in slabfeed_batch, which is versioned). */
typedef struct slabfeed_tensor {
  void *data;         /* host or device pointer (see slabfeed_batch.device) */
  int ndim;           /* 5 */
  int64_t shape[5];   /* (B,C,D,H,W) for NCDHW, (B,D,H,W,C) for NDHWC */
  int64_t strides[5]; /* in elements */
  slabfeed_dtype dtype;
} slabfeed_tensor;

/* One batch handed out by slabfeed_next. Declare it with
 * SLABFEED_BATCH_INIT (or set .size = sizeof the struct). The memory it
 * points to belongs to the loader; see slabfeed_next for how long it is
 * valid. */
typedef struct slabfeed_batch {
  size_t size; /* sizeof(slabfeed_batch) of the caller */
  slabfeed_tensor input;
  slabfeed_tensor target;  /* data == NULL when there is no target */
  int device;              /* -1: host memory; else the CUDA device ordinal */
  uint64_t epoch, step;    /* position of this batch in the sample stream */
  const int64_t *origin;   /* [B][3] crop origins (z,y,x), host memory */
  const int32_t *symmetry; /* [B] symmetry ids, host memory */
  const int64_t *sample;   /* [B] global sample index within the epoch */
  void *ready_event;       /* cudaEvent_t recorded after the batch is written,
                              or NULL for host batches */
  /* Added in 0.4: */
  int valid;           /* slots holding real samples: B, or fewer in the
                          last batch of a tiled pass (the rest repeat the
                          last tile and have sample -1) */
  const int64_t *tile; /* [B][9] in a tiled pass: the tile's origin
                          (z,y,x) in the box, the origin of the part it
                          owns relative to the tile, that part's extent;
                          NULL for random crops. Host memory */
  /* Added in 0.6: */
  const int32_t *volume; /* [B] the volume of each sample (index in the
                            dataset's list, slabfeed_volume_path; 0 for a
                            one-volume dataset); `origin` is in that
                            volume's own coordinates. Host memory */
  /* Added in 0.7: */
  int n_params;            /* K: parameters per sample (config params); 0
                              when none are asked for */
  const float *params;     /* [B][K] the parameters of each sample's volume,
                              normalised by params_norm; NULL when K is 0.
                              Host memory */
  const float *input_aug;  /* [B][2][C] amplitude augmentation of each
                              sample: [i][0][c] the factor m and [i][1][c]
                              the offset a of the file's channel c; NULL
                              without augmentation. Host memory */
  const float *target_aug; /* the same for the target */
} slabfeed_batch;

#define SLABFEED_BATCH_INIT SLABFEED_SIZED_INIT(slabfeed_batch)

/* Counters and times (seconds) of one rank since slabfeed_open. Declare it
 * with SLABFEED_STATS_INIT (or set .size). */
typedef struct slabfeed_stats {
  size_t size; /* sizeof(slabfeed_stats) of the caller */
  uint64_t batches, samples;
  uint64_t bytes_own;    /* bytes copied from the rank's own slab + halo */
  uint64_t bytes_node;   /* bytes copied from other ranks of the node */
  uint64_t bytes_remote; /* bytes of pieces from other nodes (moved over
                            MPI: SLABFEED_REMOTE send or get) */
  uint64_t bytes_out;    /* bytes delivered (input + target, output dtype) */
  double t_read;         /* open: parallel HDF5 slab read */
  double t_plan, t_gather, t_h2d, t_transform;
  double t_wait;          /* exposed wait inside slabfeed_next */
  uint64_t slab_bytes;    /* host bytes of the slab store of this rank */
  uint64_t staging_bytes; /* host + device staging and batch memory */
  int loader_thread;      /* 1: a loader thread produces ahead (device
                             batches; it never calls MPI); 0: the work
                             runs inside slabfeed_next (host batches) */
  /* Added in 0.2 (older callers' structs end above): */
  uint64_t remote_gets; /* transfers posted for pieces held on other
                           nodes: messages received (one per holder and
                           batch) or, with SLABFEED_REMOTE=get, MPI_Rget
                           operations (one per piece and dataset) */
  uint64_t remote_runs; /* what they are on the wire: messages, or the
                           contiguous crop rows each get is cut into by
                           Open MPI's osc components; bytes_remote /
                           remote_runs is the mean transfer size */
  /* Added in 0.3: the placement chosen at open (the same on every rank
   * but group). */
  int nodes;                 /* nodes of the job (shared-memory domains) */
  int group_nodes;           /* G: nodes per replication group (smallest) */
  int groups;                /* replication groups */
  int group;                 /* this rank's group */
  uint64_t node_budget;      /* per-node budget in effect, bytes */
  uint64_t node_store_bytes; /* largest slab store of one node, bytes */
  uint64_t replica_bytes;    /* bytes this rank fetched over MPI at open
                                (replicas and halos of other nodes) */
  /* Added in 0.8: */
  uint64_t device_slab_bytes; /* bytes of this rank's slab held in GPU
                                 memory (residency device), else 0 */
  /* Added in 0.9: */
  uint64_t slab_released_bytes; /* of slab_bytes, the host bytes not
                                   held after open with residency device:
                                   all of them where the slab went from
                                   the file to the GPU through pinned
                                   staging (one node), those given back
                                   after the fill where no crop piece
                                   crosses nodes, else 0 */
  /* Added in 0.12: where slabfeed_open's time went on this rank. */
  double t_open;          /* the whole of slabfeed_open */
  double t_open_context;  /* of it: the wait for the device's context,
                             made on a thread of its own beside the file's
                             open and read; after the read, or before it
                             where residency may take GPU memory (its
                             verdict and a read into GPU memory need the
                             context); 0 without a device */
  double t_open_backend;  /* of it: the back end's open, residency and
                             start (streams, device and pinned memory,
                             registrations) */
  double t_open_register; /* of t_open_backend: the node's slab window
                             registered with CUDA for the copy engine */
} slabfeed_stats;

#define SLABFEED_STATS_INIT SLABFEED_SIZED_INIT(slabfeed_stats)

/* ---- The loader
 * --------------------------------------------------------------- */

typedef struct slabfeed_loader slabfeed_loader;

/* slabfeed_warm_device - starts making the CUDA context of a device on a
 * thread of its own and returns at once, so that the context (tenths of a
 * second; more where several ranks share a GPU) is made while MPI_Init
 * and the file's open run instead of after them. Call it first in main,
 * before MPI_Init (0.12). slabfeed_open then finds the context made, or
 * waits for the same one. device: a device number, or
 * SLABFEED_DEVICE_LOCAL: the launcher's local rank (Open MPI's
 * OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, or Slurm's
 * SLURM_LOCALID inside an srun step) modulo the visible devices, which is
 * the GPU slabfeed_open picks when its communicator is the launch's
 * (ranks numbered by node, as these launchers do); device 0 where
 * SLABFEED_RANK_PER_NODE=1; nothing where no launcher says (a context on
 * a GPU the open would not use holds its memory for nothing). -1:
 * nothing.
 * Collective no; it never calls MPI. Threads: any. Device: the calling
 *   thread's current device is unchanged. The thread reads the
 *   environment (the CUDA runtime does): do not change it (setenv,
 *   putenv, unsetenv) on other threads until slabfeed_open returns.
 * Failure: none reported (slabfeed_open meets and reports a device that
 *   cannot be used). Returns 1 where a thread was started, else 0 (no
 *   CUDA in this build, no local rank known, no thread).
 * Lifetime: nothing to release: slabfeed_open (after its read) and the
 *   process's exit (at most 30 s) wait for the thread. */
SLABFEED_API int slabfeed_warm_device(int device);

/* slabfeed_open - opens cfg->path with parallel HDF5, validates the datasets
 * and the options, reads this rank's z-slab (plus halo) into the node's
 * shared-memory window and takes all memory the loader will need (host,
 * pinned and device); works on a duplicate of comm.
 * Collective over comm.
 * Threads: MPI must be initialised; any thread level works (see
 *   slabfeed_next for what MPI_THREAD_MULTIPLE changes). Not thread safe
 *   with other slabfeed calls on the same communicator.
 * Device: with cfg->device >= 0 it allocates on that device and creates
 *   the loader's own streams there; the calling thread's current device is
 *   restored before it returns.
 * Failure: every rank returns the same status, *out is NULL and, when errbuf
 *   is not NULL, errbuf holds a message naming the problem and the rank
 *   that found it (truncated to errlen). Nothing is left allocated.
 * Lifetime: *out is owned by the caller until slabfeed_close. */
SLABFEED_API slabfeed_status slabfeed_open(MPI_Comm comm,
                                           const slabfeed_config *cfg,
                                           slabfeed_loader **out, char *errbuf,
                                           size_t errlen);

/* slabfeed_next - hands out the next batch of this rank in *out (whose
 * .size the caller has set).
 * Collective no, but when crop pieces come from other nodes (a
 *   replication group of more than one node, no locality) every rank of
 *   the group must keep calling it: the transfers for the next prefetch
 *   batches are posted and moved inside this call, on the calling thread,
 *   and the ranks serve each other's pieces while they are in it.
 * Threads: not thread safe on one loader. Device batches are produced
 *   ahead by a loader thread that never calls MPI, at any thread level;
 *   host batches are gathered inside this call.
 * Device: host batches (device -1) are gathered and transformed on the
 *   calling thread and `stream` is ignored. Device batches: `stream` (a
 *   cudaStream_t of the loader's device; the training stream, not the legacy
 *   default stream) is made to wait on the batch's ready event; the call
 *   blocks on the host only while the batch is not yet enqueued. No
 *   allocation, device synchronisation or default-stream work happens here.
 * Failure: a status; the message is in slabfeed_last_error. *out is not
 *   written.
 * Lifetime: host batches stay valid until the prefetch-th following next
 *   call; device batches may be used by work enqueued on `stream` until the
 *   next call of next (the slot is reused only after that stream has passed
 *   it). Both end at slabfeed_seek and slabfeed_close. */
SLABFEED_API slabfeed_status slabfeed_next(slabfeed_loader *l,
                                           slabfeed_batch *out, void *stream);

/* slabfeed_seek - positions the loader so that the next slabfeed_next
 * returns the batch of (epoch, step): exact resume.
 * Collective when crop pieces come from other nodes (the transfers in
 *   flight are settled on every rank first); otherwise not, but call it at
 *   the same point on every rank anyway (the ranks' batches form global
 *   batches).
 * Threads: not thread safe on one loader.
 * Device: waits for the loader's own streams only.
 * Failure: SLABFEED_ERR_ARG when step >= slabfeed_steps_per_epoch; the
 *   position is then unchanged.
 * Lifetime: batches handed out before it are no longer valid. */
SLABFEED_API slabfeed_status slabfeed_seek(slabfeed_loader *l, uint64_t epoch,
                                           uint64_t step);

/* slabfeed_tell - the position (epoch, step) of the batch the next
 * slabfeed_next will return (what a checkpoint stores).
 * Collective no. Threads: not with other calls on l. Device none.
 * Failure: SLABFEED_ERR_ARG for NULL arguments. Lifetime: values. */
SLABFEED_API slabfeed_status slabfeed_tell(const slabfeed_loader *l,
                                           uint64_t *epoch, uint64_t *step);

/* slabfeed_loader_config - the options the loader runs with: the caller's,
 * with what open resolved from the files (options given by field made
 * options by channel: the vector groups of input_vector_fields appended to
 * input_vectors, a normalisation of one entry per field expanded to one
 * per channel; docs/CONVENTIONS.md, "Fields"). Copies the first out->size
 * bytes (set by slabfeed_config_init; an older caller's struct gets the
 * fields it has).
 * Collective no. Threads safe. Device none.
 * Failure: SLABFEED_ERR_ARG for NULL arguments or out->size too small.
 * Lifetime: out's strings point into the loader: valid until
 *   slabfeed_close. */
SLABFEED_API slabfeed_status slabfeed_loader_config(const slabfeed_loader *l,
                                                    slabfeed_config *out);

/* slabfeed_volume_count - the number of volumes of the loader's dataset
 * (1 for one file; several when `path` named a list, patterns or a
 * manifest).
 * Collective no. Threads safe. Device none.
 * Failure: returns 0 for NULL l. Lifetime: a value. */
SLABFEED_API int slabfeed_volume_count(const slabfeed_loader *l);

/* slabfeed_volume_info - volume i of the dataset: its file's path (NUL
 * terminated, truncated to len - 1 bytes) and its box (z,y,x) into
 * shape, either may be NULL. The order is the one of slabfeed_batch.volume:
 * the path spec's entries in order, patterns expanded and sorted.
 * Collective no. Threads safe. Device none.
 * Failure: SLABFEED_ERR_ARG for NULL l or i out of range.
 * Lifetime: path and shape are the caller's. */
SLABFEED_API slabfeed_status slabfeed_volume_info(const slabfeed_loader *l,
                                                  int i, char *path, size_t len,
                                                  int64_t shape[3]);

/* slabfeed_volume_params - the K parameters of volume i (config params,
 * normalised by params_norm: the values batches carry) into values[0..n),
 * at most n of them; returns K (0 when no parameters were asked for), or
 * -1 for NULL l, i out of range, or n > 0 with NULL values.
 * Collective no. Threads safe. Device none.
 * Lifetime: values is the caller's. */
SLABFEED_API int slabfeed_volume_params(const slabfeed_loader *l, int i,
                                        float *values, int n);

/* slabfeed_placement - one line saying how the volume was placed at
 * open: nodes, replication groups, the slab store of the fullest node
 * against the budget, what this rank replicated, and how crop pieces from
 * other nodes travel. Print it from one rank at open.
 * Collective no. Threads safe. Device none.
 * Failure: SLABFEED_ERR_ARG for NULL l or buf or len 0.
 * Lifetime: buf is the caller's; the line is truncated to len - 1. */
SLABFEED_API slabfeed_status slabfeed_placement(const slabfeed_loader *l,
                                                char *buf, size_t len);

/* slabfeed_steps_per_epoch - steps per epoch in effect (from the config,
 * or the default that covers the box once).
 * Collective no. Threads safe. Device none. Failure: 0 for NULL l.
 * Lifetime: a value. */
SLABFEED_API uint64_t slabfeed_steps_per_epoch(const slabfeed_loader *l);

/* slabfeed_stats_get - this rank's counters into *out (whose .size the
 * caller has set); the fields are read consistently (under the lock the
 * producer writes them with).
 * Collective no. Threads: may be called while another thread is in
 *   slabfeed_next. Device none.
 * Failure: SLABFEED_ERR_ARG for NULL or a size too small. Lifetime: values. */
SLABFEED_API slabfeed_status slabfeed_stats_get(const slabfeed_loader *l,
                                                slabfeed_stats *out);

/* slabfeed_last_error - the message of the last failure on l ("" when none).
 * Collective no. Threads: not with other calls on l. Device none.
 * Failure: NULL l gives "".
 * Lifetime: valid until the next call on l. */
SLABFEED_API const char *slabfeed_last_error(const slabfeed_loader *l);

/* slabfeed_copy_to_host - copies tensor t of a batch of l (host or device
 * memory) into host memory dst (element count times element size). For
 * tools and tests, not for the training hot path.
 * Collective no. Threads: not with other calls on l.
 * Device: device batches are copied on the loader's private stream, which
 *   it then waits for (no device synchronisation).
 * Failure: SLABFEED_ERR_ARG when t is not a live batch tensor of l.
 * Lifetime: dst belongs to the caller. */
SLABFEED_API slabfeed_status slabfeed_copy_to_host(slabfeed_loader *l,
                                                   const slabfeed_tensor *t,
                                                   void *dst);

/* slabfeed_close - stops the loader thread, waits for the loader's own
 * streams, completes the transfers of remote pieces still in flight (on
 * every rank: the ranks may have called next different numbers of times)
 * and releases everything the loader holds (windows, device and pinned
 * memory, registrations, the communicator duplicate).
 * Collective over the communicator of slabfeed_open (NULL on every rank is
 *   a no-op).
 * Threads: not with other calls on l. Device: waits for the loader's own
 *   streams only.
 * Failure: cannot fail. In a forked child it does nothing (the parent owns
 *   the resources).
 * Lifetime: l and every batch of it are invalid afterwards. */
SLABFEED_API void slabfeed_close(slabfeed_loader *l);

/* slabfeed_dtype_size - bytes of one element of d (4 or 2; 0 if unknown).
 * Collective no. Threads safe. Device none. Failure: 0.
 * Lifetime: a value. */
SLABFEED_API size_t slabfeed_dtype_size(slabfeed_dtype d);

/* ---- The writer -------------------------------------------------------------
 * Predictions of a tiled pass written back as one HDF5 dataset, with
 * parallel HDF5. The output covers the pass's region (the box when it has
 * none): output voxel (z, y, x) is box voxel region origin + (z, y, x),
 * periodic. Each rank holds one z-slab of the output (the region's planes
 * split over the ranks like slabfeed_slab_plan) in a node shared-memory
 * window; slabfeed_writer_put undoes each tile's symmetry (vector channels
 * as vectors) and the normalisation, and stores the part the tile owns
 * into the slabs of the ranks that hold it: straight into shared memory
 * on the node, MPI_Put into the owner's window across nodes. Close checks
 * that every output voxel was put exactly once and writes every rank's
 * slab with parallel HDF5 (MPI-IO), into a file written aside and renamed
 * over its name only when complete (an existing file is replaced only
 * with `overwrite`; the loader's input file never). */

typedef struct slabfeed_writer slabfeed_writer;

/* Which dataset of the pass the outputs are like: its vector groups and
 * normalisation are undone by put. */
typedef enum {
  SLABFEED_LIKE_TARGET = 0, /* the target (the input when there is none) */
  SLABFEED_LIKE_INPUT = 1,
  SLABFEED_LIKE_NONE = 2 /* plain channels: no vector groups, no
                            normalisation */
} slabfeed_like;

/* Writer options. Declare with SLABFEED_WRITER_CONFIG_INIT or fill with
 * slabfeed_writer_config_init; strings are copied by slabfeed_writer_open;
 * all ranks must pass equal values (checked). */
typedef struct slabfeed_writer_config {
  size_t size;         /* sizeof(slabfeed_writer_config) of the caller */
  const char *path;    /* the new HDF5 file (required) */
  const char *dataset; /* dataset name; NULL: "prediction" */
  int channels;        /* output channels; 0: those of `like` */
  slabfeed_file_layout layout; /* AUTO or CF: (C,Z,Y,X); CL: (Z,Y,X,C) */
  slabfeed_dtype dtype;        /* element type in the file: F32 or F16 */
  int64_t chunk[3];            /* chunk edge (z,y,x); 0,0,0: contiguous */
  int overwrite;               /* 1: an existing file may be replaced */
  slabfeed_like like;          /* default SLABFEED_LIKE_TARGET */
} slabfeed_writer_config;

#define SLABFEED_WRITER_CONFIG_INIT SLABFEED_SIZED_INIT(slabfeed_writer_config)

/* slabfeed_writer_config_init - the defaults above into *cfg, with
 * cfg->size = sizeof *cfg.
 * Collective no. Threads safe on distinct structs. Device none.
 * Failure: does nothing for NULL. Lifetime: the caller owns *cfg. */
SLABFEED_API void slabfeed_writer_config_init_sized(slabfeed_writer_config *cfg,
                                                    size_t size);

static inline void slabfeed_writer_config_init(slabfeed_writer_config *cfg)
{
  slabfeed_writer_config_init_sized(cfg, sizeof *cfg);
}

/* slabfeed_writer_open - the writer of loader l's tiled pass: checks the
 * options against the pass (l opened with tile > 0), creates the file
 * aside (<path>.slabfeed-partial.<pid>), creates the dataset, reserves its
 * space on the file system and takes the memory put will need: this
 * rank's output slab in the node's shared window (or, with write_map, the
 * file's own pages mapped: slabfeed_writer_io), host staging of one
 * batch and, for a device loader, pinned staging and a stream of its own.
 * The writer keeps no reference to l: either may be closed first.
 * Collective over l's communicator.
 * Threads: not with other calls on l. Device: for a device loader, a
 *   stream and pinned memory on its device; the current device is
 *   restored.
 * Failure: every rank returns the same status, *out is NULL, errbuf names
 *   the problem and the rank that found it, and no file is left (an
 *   existing file of the name is untouched).
 * Lifetime: *out is the caller's until slabfeed_writer_close or _abort. */
SLABFEED_API slabfeed_status
slabfeed_writer_open(slabfeed_loader *l, const slabfeed_writer_config *cfg,
                     slabfeed_writer **out, char *errbuf, size_t errlen);

/* slabfeed_writer_put - stores the model outputs of one batch of the pass:
 * `out` holds, per slot, the output of the tile b->tile describes (its
 * first b->valid slots are used), with edge T (the tile) or T + 2 pad (the
 * input crop: its centre is taken), in the frame of the tile's symmetry
 * b->symmetry. `layout` says which axes out->shape lists ((B,C,D,H,W) or
 * (B,D,H,W,C)); the strides may be any dense order (a channels-last tensor
 * of shape (B,C,D,H,W) too). dtype f32, f16 or bf16. `device` is -1 for
 * host memory, else the CUDA device of the memory (the loader's).
 * Collective no: puts are one-sided, ranks need not put the same number
 *   of batches, and a rank may put batches it did not get from the loader.
 * Threads: not thread safe on one writer.
 * Device: for device memory, the writer's stream waits for `stream` (the
 *   stream the outputs were written on, not the legacy default stream),
 *   copies them into pinned staging and waits for that copy; no device
 *   synchronisation, no allocation.
 * Failure: SLABFEED_ERR_ARG for a tensor of the wrong shape, dtype or
 *   device, or a batch that is not of this pass (the message says which):
 *   nothing of the batch is stored and the put may be retried. A failure
 *   while storing (MPI, CUDA) is kept: later puts fail with
 *   SLABFEED_ERR_STATE, and close fails on every rank with it. The
 *   message is in slabfeed_writer_last_error.
 * Lifetime: `out` may be reused when put returns. */
SLABFEED_API slabfeed_status slabfeed_writer_put(slabfeed_writer *w,
                                                 const slabfeed_batch *b,
                                                 const slabfeed_tensor *out,
                                                 slabfeed_out_layout layout,
                                                 int device, void *stream);

/* slabfeed_writer_close - completes the puts, checks that every voxel of
 * the output was put exactly once (else the error says how many were
 * missing or put twice, and on which ranks' slabs), writes every rank's
 * slab (collective MPI-IO writes, or direct or independent ones where the
 * loader's read_mode says so: slabfeed_writer_io), syncs and verifies
 * the file (read back through HDF5) and
 * renames it over its name; then releases everything.
 * Collective over the writer's communicator.
 * Threads: not with other calls on w. Device: waits for its own stream.
 * Failure: every rank returns the same status and errbuf the message; a
 *   failure on any rank (also a failed put) leaves no file under the name
 *   and an earlier file of the name untouched.
 * Lifetime: w is invalid afterwards (also on failure). */
SLABFEED_API slabfeed_status slabfeed_writer_close(slabfeed_writer *w,
                                                   char *errbuf, size_t errlen);

/* slabfeed_writer_abort - discards the output: removes the partial file
 * and releases everything, writing nothing.
 * Collective over the writer's communicator. NULL is a no-op.
 * Threads, Device: as slabfeed_writer_close. Failure: cannot fail.
 * Lifetime: w is invalid afterwards. */
SLABFEED_API void slabfeed_writer_abort(slabfeed_writer *w);

/* slabfeed_writer_last_error - the message of the last failure on w ("" if
 * none). Collective no. Lifetime: until the next call on w. */
SLABFEED_API const char *slabfeed_writer_last_error(const slabfeed_writer *w);

/* slabfeed_writer_io - how close writes the file, and why, on rank 0
 * ("direct pwrite on 16 threads (read_mode auto: tmpfs)"): the loader's
 * read_mode rules applied to the output's filesystem (0.9: auto and
 * direct write each rank's planes with pwrite on its share of the node's
 * cores where the file is on a node-local or memory filesystem, 0.10:
 * also into a chunked output's chunks; independent: independent MPI-IO,
 * collective for a chunked output); collective on other filesystems.
 * 0.11: where auto or direct would write a contiguous float32 output on
 * a tmpfs from one node whose planes are whole pages, the output slab is
 * the file's own pages, mapped (config write_map): "the file's own pages,
 * mapped (write_map auto): puts land in the file, close writes nothing". After
 * the choice, where the open's time went: the slab's memory and its page
 * faults (and the huge pages the kernel gave it), the file's creation and
 * reservation, the CUDA registration (0.12: "registration of its own
 * slab" or "of the node's slabs", config write_register).
 * Other ranks get the choice without the reason.
 * Collective no. Lifetime: w's. NULL w: "". */
SLABFEED_API const char *slabfeed_writer_io(const slabfeed_writer *w);

/* slabfeed_writer_shape - the output dataset: shape (C,Z,Y,X) or (Z,Y,X,C)
 * as in the file, and the z-range [z0, z1) of the output this rank holds.
 * Collective no. Failure: SLABFEED_ERR_ARG for NULL. Lifetime: values. */
SLABFEED_API slabfeed_status slabfeed_writer_shape(const slabfeed_writer *w,
                                                   int64_t shape[4],
                                                   int64_t *z0, int64_t *z1);

#ifdef __cplusplus
}
#endif
#endif /* SLABFEED_H */
