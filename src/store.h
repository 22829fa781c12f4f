/* The slab store: every rank's z-slab (plus halo) of every dataset, in the
 * node's MPI-3 shared-memory window, also exposed through one window over
 * all ranks for MPI_Get between nodes. */
#ifndef SF_STORE_H
#define SF_STORE_H

#include "errors.h"

typedef struct sf__store {
  int open;      /* set by sf__store_open, cleared by sf__store_close */
  MPI_Comm comm; /* not owned */
  MPI_Comm node; /* owned: ranks sharing memory with this one */
  int rank, size, node_rank, node_size;
  int nodes;        /* number of nodes (shared-memory domains) */
  int64_t shape[3]; /* Z,Y,X */
  int64_t halo;
  int ndsets;
  int64_t channels[SF_MAX_DSETS];
  int64_t z0, z1;    /* this rank's core planes */
  MPI_Win shm_win;   /* node shared memory */
  MPI_Win world_win; /* same memory, all ranks: MPI_Get; MPI_WIN_NULL
                        when there is only one node */
  int shm_locked, world_locked;
  char *base;    /* this rank's segment */
  int64_t bytes; /* size of this rank's segment */
  char **peer;   /* [size]: segment of each rank on this node, else NULL */
  int64_t *peer_bytes; /* [size]: segment sizes of those ranks */
} sf__store;

/* Planes held by rank r: its core slab plus 2*halo. */
int64_t sf__store_planes(const sf__store *s, int r);
/* Byte offset of dataset d inside rank r's segment. */
int64_t sf__store_offset(const sf__store *s, int r, int d);
/* Bytes of one plane of one channel. */
int64_t sf__store_plane_bytes(const sf__store *s);

/* Collective over comm. Sets up the decomposition and allocates this
 * rank's segment in the node's shared window (and the world window).
 * rank_per_node != 0 makes every rank its own node. On failure everything
 * is released; the outcome is agreed on by all ranks. */
slabfeed_status sf__store_open(sf__store *s, MPI_Comm comm, int ndsets,
                               const int64_t channels[], const int64_t shape[3],
                               int64_t halo, int rank_per_node, sf__err *e);

/* Dataset d of rank r's segment when this process can address it (rank
 * r is on this node), else NULL (reach it with MPI_Get on world_win). */
const float *sf__store_segment(const sf__store *s, int r, int d);

/* Collective. Makes every rank's segment visible to all (memory sync and a
 * barrier) and opens the passive-target epoch of the world window for the
 * store's life. */
slabfeed_status sf__store_publish(sf__store *s, sf__err *e);

/* Collective. Ends the epochs and frees the windows. Safe on a zeroed, partly
 * opened or closed store. */
void sf__store_close(sf__store *s);

#endif
