/* The slab store: every rank's z-slab (plus halo) of every dataset, in the
 * node's MPI-3 shared-memory window, also exposed through one window over
 * all ranks for MPI_Get between nodes. Where each slab lies (replication
 * groups, cores, halos) is the placement (placement.h). */
#ifndef SF_STORE_H
#define SF_STORE_H

#include "common/errors.h"
#include "plan/placement.h"

/* The options that shape the placement. */
/* Windows per node at most for shared_window auto's one per rank. */
#define SF_STORE_MAX_WINDOWS 64

typedef struct sf__store_opts {
  int rank_per_node; /* every rank its own node */
  int group_nodes;   /* G: 0 from the budget, -1 all nodes, else forced */
  uint64_t budget;   /* store bytes per node; 0: the default */
  int locality;      /* keep crop_z - 1 planes above each node's range */
  int64_t halo;      /* planes below and above every core */
  int64_t crop_z;
  int ncuts;           /* locality over several volumes: node ranges begin */
  const int64_t *cuts; /* only at these planes (sf__placement_req) */
  /* The plane sizes of a dataset of several volumes (sf__planes_make):
   * volume i's planes [run_z0[i], run_z0[i + 1]) are run_shape[i][1] x
   * run_shape[i][2]. runs 0: every plane is shape[1] x shape[2]. */
  int runs;
  const int64_t *run_z0;
  const int64_t (*run_shape)[3];
  /* Grids of different resolution (0.7): dataset d is stored at scale[d]
   * (0 or 1: the planes' grid) times the grid on every axis: each plane
   * of the placement holds scale planes of scale x the rows and columns. */
  int64_t scale[SF_MAX_DSETS];
  /* The node's shared memory (0.7): slabfeed_config.shared_window,
   * SLABFEED_WINDOW_AUTO (a window per rank up to SF_STORE_MAX_WINDOWS
   * ranks on the node, else one), _ONE, _PER_RANK or _FILE (0.12). */
  int shared_window;
  /* The open's read is to be direct (pread where the values lie), the
   * same on every rank: auto then takes files (0.13; sf__store.files). */
  int file_read;
} sf__store_opts;

typedef struct sf__store {
  int open;      /* set by sf__store_open, cleared by sf__store_close */
  MPI_Comm comm; /* not owned */
  MPI_Comm node; /* owned: ranks sharing memory with this one */
  int rank, size, node_rank, node_size;
  int nodes;            /* number of nodes (shared-memory domains) */
  sf__placement L;      /* the placement of every rank */
  uint64_t budget;      /* per-node budget in effect (minimum over nodes) */
  int64_t node_bytes;   /* largest store of one node */
  uint64_t fill_remote; /* bytes this rank fetched over MPI at open */
  int64_t shape[3];     /* Z, and the largest Y and X of any plane */
  sf__planes g;         /* the size of every plane (owned) */
  int ndsets;
  int64_t channels[SF_MAX_DSETS];
  int64_t scale[SF_MAX_DSETS]; /* f: dataset d's grid is f x the planes' */
  int64_t cube[SF_MAX_DSETS];  /* f^3: its floats per float of the grid */
  MPI_Win *shm_wins; /* node shared memory: [n_shm] windows, one for the
                        node (n_shm 1) or one per node rank (window k holds
                        node rank k's segment alone) */
  int n_shm;
  int per_rank; /* one window per node rank (sf__store_opts) */
  /* shared_window file (0.12), or auto's choice where the read is direct
   * (files_auto, 0.13): each rank's segment /dev/shm files of its own
   * (n_parts files of `part` bytes, the last the rest: several where
   * several threads write it), mapped one after the other by the node's
   * ranks (n_shm 0; per_rank then steers only the writer's windows, by
   * auto's rule). The rank's own files stay open (seg_fds, n_fds of them)
   * so that the open's direct reads write them as files
   * (sf__fileback_add: handle fileback). files_need and files_have: the
   * machine's GB asked of /dev/shm and free there (0 where not asked). */
  int files, files_auto;
  int file_read; /* sf__store_opts.file_read, as agreed */
  int64_t part;
  int n_parts, n_fds, fileback;
  int *seg_fds;
  double files_need, files_have;
  char **map_base; /* [node_size]: each node rank's file mapped here */
  size_t *map_len;
  MPI_Win world_win; /* same memory, all ranks: MPI_Get; MPI_WIN_NULL
                        when there is only one node */
  int shm_locked, world_locked;
  char *base;    /* this rank's segment */
  int64_t bytes; /* size of this rank's segment */
  char **peer;   /* [size]: segment of each rank on this node, else NULL */
  int64_t *peer_bytes; /* [size]: segment sizes of those ranks */
  /* Residency device (0.8): [size], the device address in this process
   * of the copy of each node rank's segment (its own from cudaMalloc, the
   * others' mapped over CUDA IPC), laid out as the host segment; NULL
   * (the array, or an entry) where there is none. Owned and set by the
   * GPU back end, which clears it before it frees the copies. */
  char **dpeer;
} sf__store;

/* The option that chose files for the segments (sf__store.files_auto):
 * "shared_window auto" or "shared_window file", for messages. Local. */
const char *sf__store_files_option(const sf__store *s);

/* MPI_Win_sync of every window of the node's shared memory: this rank's
 * writes become visible to the node's ranks (before a barrier). Returns
 * the first MPI error code, MPI_SUCCESS when all succeed. */
int sf__store_win_sync(const sf__store *s);

/* A segment holds, for each dataset d and channel c in turn, the planes
 * of the rank one after the other, each at its own size (the size of its
 * volume: sf__planes), as [planes][rows][columns] floats; a dataset of
 * scale f holds f planes of f x rows and f x columns for each (the
 * functions below are in units of the planes' grid: multiply offsets and
 * strides by s->cube[d] for such a dataset). */

/* Planes held by rank r: its core slab plus its halo planes. */
int64_t sf__store_planes(const sf__store *s, int r);
/* Floats of one channel in rank r's segment: its planes at their sizes. */
int64_t sf__store_chan(const sf__store *s, int r);
/* Float offset of rank r's plane q (0 <= q <= planes) inside each of its
 * channels. */
int64_t sf__store_at(const sf__store *s, int r, int64_t q);
/* The rows and columns of rank r's plane q into yx[]; returns how many of
 * r's planes from q on have that size (at least 1). */
int64_t sf__store_pitch(const sf__store *s, int r, int64_t q, int64_t yx[2]);
/* Byte offset of dataset d inside rank r's segment. */
int64_t sf__store_offset(const sf__store *s, int r, int d);
/* Channel c of dataset d in this rank's segment: its cube[d] x
 * sf__store_chan floats start here. */
float *sf__store_channel(const sf__store *s, int d, int64_t c);

/* Collective over comm. Finds the nodes, agrees on the per-node budget,
 * chooses the placement and allocates this rank's segment in the node's
 * shared window (and the world window). On failure everything is
 * released; the outcome is agreed on by all ranks. */
slabfeed_status sf__store_open(sf__store *s, MPI_Comm comm, int ndsets,
                               const int64_t channels[], const int64_t shape[3],
                               const sf__store_opts *o, sf__err *e);

/* Dataset d of rank r's segment when this process can address it (rank
 * r is on this node), else NULL (reach it with MPI_Get on world_win). */
const float *sf__store_segment(const sf__store *s, int r, int d);

/* Collective, after every rank has read its planes of the file
 * (sf__slab_read). Opens the passive-target epoch of the world window for
 * the store's life, fills the rest of every segment (the planes other
 * ranks read: replicas and halos) from the ranks that read them, memcpy
 * within the node and MPI_Get in large contiguous blocks across nodes,
 * and makes every segment visible to all. A rank that failed before takes
 * part with nothing to fetch. fill_host 0 (the same on every rank): the
 * slabs were read elsewhere than the host segments (a sink: io/sink.h),
 * which stay unwritten; the rest is then the sink owner's to fill
 * (sf__store_each_copy). */
slabfeed_status sf__store_publish(sf__store *s, int fill_host, sf__err *e);

/* One copy of the rest of this rank's segment: `bytes` from byte `from`
 * of rank r's segment to byte `to` of this rank's (segment offsets). */
typedef slabfeed_status (*sf__store_copy_fn)(sf__store *s, int r, int64_t from,
                                             int64_t to, int64_t bytes,
                                             void *arg, sf__err *e);

/* Local. Calls fn for every copy that fills the planes of this rank's
 * segment it did not read itself (replicas and halos, one per plane run,
 * dataset and channel, in the order of the segment), stopping at the
 * first failure. sf__store_publish fills the host segments so; a copy of
 * the segments elsewhere (GPU memory) is filled the same way. */
slabfeed_status sf__store_each_copy(sf__store *s, sf__store_copy_fn fn,
                                    void *arg, sf__err *e);

/* Local. 1 when a crop piece may lie on another node than the rank that
 * gathers it (the same on every rank): some replication group spans
 * nodes and crops are not kept on their node (locality). */
int sf__store_crops_cross(const sf__store *s, int locality);

/* Local. 1 when every plane this rank keeps is read from the file by a
 * rank of its node (every copy of sf__store_each_copy is within the
 * node), else 0. */
int sf__store_node_read(sf__store *s);

/* Collective. Ends the epochs and frees the windows. Safe on a zeroed, partly
 * opened or closed store. */
void sf__store_close(sf__store *s);

#endif
