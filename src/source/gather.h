/* Where a piece of a crop lives and how it moves: the one answer to "which
 * rank holds this box, and at which address can it be read" used by both
 * back ends (host memcpy, GPU cudaMemcpy3DAsync), the MPI datatype of a
 * piece inside its holder's segment (for the transfers of fetch.c), and
 * the byte accounting by source. */
#ifndef SF_GATHER_H
#define SF_GATHER_H

#include "store/store.h"

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
  SF__FROM_REMOTE = 2 /* another node: fetched ahead into a landing buffer */
} sf__from;

/* An addressable float array [C][dims0][dims1][dims2] and the first voxel
 * of a piece in it. */
typedef struct sf__view {
  const float *base;
  int64_t dims[3];
  int64_t at[3];
} sf__view;

/* 1 when piece p is held on another node (it moves over MPI), else 0:
 * the same for every dataset of the piece. */
int sf__gather_remote(const sf__store *s, const sf__piece *p);

/* Floats of dataset d of piece p: C * n0 * n1 * n2. */
int64_t sf__gather_elems(const sf__store *s, int d, const sf__piece *p);

/* Where dataset d of piece p is read from. For own and node pieces *v is
 * the segment in the node window; for remote pieces it is `landed`, the
 * piece as it arrived: a dense [C][n0][n1][n2] array (may be NULL when the
 * caller only needs the answer). */
sf__from sf__gather_source(const sf__store *s, int d, const sf__piece *p,
                           const float *landed, sf__view *v);

/* Host copy of a piece of C channels from view v into its place in dst
 * ([C][crop..] floats), one memcpy per row. */
void sf__gather_copy(const sf__view *v, int64_t C, const sf__piece *p,
                     const int64_t crop[3], float *dst);

/* The MPI datatype of dataset d of piece p inside its holder's segment
 * (a subarray of [C][planes][Y][X] floats), committed; the caller frees
 * it. With displacement 0 at the segment's start of dataset d
 * (sf__store_offset). */
slabfeed_status sf__gather_type(const sf__store *s, int d, const sf__piece *p,
                                MPI_Datatype *t, sf__err *e);

/* Adds the bytes of dataset d of piece p to the counter of its source in
 * *delta (bytes_own, bytes_node or bytes_remote). */
void sf__gather_account(const sf__store *s, int d, const sf__piece *p,
                        sf__from from, slabfeed_stats *delta);

#endif
