/* Where a piece of a crop lives and how it moves: the one answer to "which
 * rank holds this box, and at which address can it be read" used by both
 * back ends (host memcpy, GPU cudaMemcpy3DAsync), the MPI_Get of pieces
 * held on other nodes, and the byte accounting by source. */
#ifndef SF_GATHER_H
#define SF_GATHER_H

#include "store.h"

/* One box of a crop held by one rank. */
typedef struct sf__piece {
  int src;      /* rank holding it */
  int64_t q;    /* first plane in src's store (plane 0 = z0_src - halo) */
  int64_t y, x; /* first row and column in the box */
  int64_t n[3]; /* extents (z,y,x) */
  int64_t d[3]; /* offset inside the crop */
} sf__piece;

/* Where a piece comes from. */
typedef enum {
  SF__FROM_OWN = 0,   /* this rank's own segment (core or halo) */
  SF__FROM_NODE = 1,  /* another rank's segment of this node's window */
  SF__FROM_REMOTE = 2 /* another node: MPI_Get into a landing buffer */
} sf__from;

/* An addressable float array [C][dims0][dims1][dims2] and the first voxel
 * of a piece in it. */
typedef struct sf__view {
  const float *base;
  int64_t dims[3];
  int64_t at[3];
} sf__view;

/* 1 when piece p is held on another node (it moves with MPI_Get), else 0:
 * the same for every dataset of the piece. */
int sf__gather_remote(const sf__store *s, const sf__piece *p);

/* Where dataset d of piece p is read from. For own and node pieces *v is
 * the segment in the node window; for remote pieces it is the piece's place
 * in `landing`, a crop-shaped buffer [C][crop..] that sf__gather_get fills
 * (may be NULL when the caller only needs the answer). */
sf__from sf__gather_source(const sf__store *s, int d, const sf__piece *p,
                           const float *landing, const int64_t crop[3],
                           sf__view *v);

/* Host copy of a piece of C channels from view v into its place in dst
 * ([C][crop..] floats), one memcpy per row. */
void sf__gather_copy(const sf__view *v, int64_t C, const sf__piece *p,
                     const int64_t crop[3], float *dst);

/* Starts an MPI_Get of dataset d of remote piece p into its place in dst
 * ([C][crop..]) with subarray datatypes; complete after
 * sf__gather_complete. Only the caller's MPI thread may call it. */
slabfeed_status sf__gather_get(sf__store *s, int d, const sf__piece *p,
                               const int64_t crop[3], float *dst, sf__err *e);

/* Completes the MPI_Get transfers started so far (local completion: the
 * landing buffers are ready). */
slabfeed_status sf__gather_complete(sf__store *s, sf__err *e);

/* Adds the bytes of dataset d of piece p to the counter of its source in
 * *delta (bytes_own, bytes_node or bytes_remote). */
void sf__gather_account(const sf__store *s, int d, const sf__piece *p,
                        sf__from from, slabfeed_stats *delta);

#endif
