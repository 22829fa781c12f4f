/* A piece of a crop and how it moves: the box one rank holds, the view it
 * is read through (source.h says which view), the host copy out of a
 * view, and the MPI datatype of a piece inside its holder's segment (for
 * the transfers of fetch.c). */
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

/* Where the memory of a view lives: what a copy out of it must be. */
typedef enum {
  SF__MEM_HOST = 0,  /* host memory (the node window, pinned landing slots) */
  SF__MEM_DEVICE = 1 /* memory of the loader's CUDA device (not used yet:
                        slabs held on the GPU) */
} sf__mem;

/* An addressable float array [C][dims0][dims1][dims2] in memory of kind
 * `mem`, and the first voxel of a piece in it. */
typedef struct sf__view {
  const float *base;
  sf__mem mem;
  int64_t dims[3];
  int64_t at[3];
} sf__view;

/* Floats of dataset d of piece p: C * n0 * n1 * n2. */
int64_t sf__gather_elems(const sf__store *s, int d, const sf__piece *p);

/* Host copy of a piece of C channels from view v (host memory) into its
 * place in dst ([C][crop..] floats), one memcpy per row. */
void sf__gather_copy(const sf__view *v, int64_t C, const sf__piece *p,
                     const int64_t crop[3], float *dst);

/* The MPI datatype of dataset d of piece p inside its holder's segment
 * (a subarray of [C][planes][Y][X] floats), committed; the caller frees
 * it. With displacement 0 at the segment's start of dataset d
 * (sf__store_offset). */
slabfeed_status sf__gather_type(const sf__store *s, int d, const sf__piece *p,
                                MPI_Datatype *t, sf__err *e);

#endif
