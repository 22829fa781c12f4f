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

/* An addressable float array in memory of kind `mem`, and the first
 * voxel of a piece in it: channel c's plane k, row j, column i of the
 * array is base[c * cstride + (k * rows + j) * cols + i], and the piece
 * starts at plane at[0], row at[1], column at[2]. */
typedef struct sf__view {
  const float *base;
  sf__mem mem;
  int64_t cstride;    /* floats from one channel to the next */
  int64_t rows, cols; /* of a plane (the row pitch is cols floats) */
  int64_t at[3];
} sf__view;

/* The float of channel c, plane k, row j of piece p's first column in v. */
static inline const float *sf__view_row(const sf__view *v, int64_t c, int64_t k,
                                        int64_t j)
{
  return v->base + c * v->cstride +
         ((v->at[0] + k) * v->rows + v->at[1] + j) * v->cols + v->at[2];
}

/* Piece p of the planes' grid on the grid of scale f (a dataset of finer
 * resolution, store.h): its extents and its offset in the crop f times.
 * Its source position (q, y, x) stays in the planes' grid: views and
 * datatypes scale it themselves. */
static inline sf__piece sf__piece_scale(const sf__piece *p, int64_t f)
{
  sf__piece s = *p;
  for (int a = 0; a < 3; a++) {
    s.n[a] *= f;
    s.d[a] *= f;
  }
  return s;
}

/* The part of piece p inside the box [lo, lo + ext) of the crop, in the
 * coordinates of that box (0.7: a target crop inside the input's): *out
 * with its offset d relative to lo and its extents cut, and into skip[]
 * the planes, rows and columns of p before it (add them to a view's at[]
 * to read it). Returns 0 when nothing of p lies in the box. */
static inline int sf__piece_clip(const sf__piece *p, const int64_t lo[3],
                                 const int64_t ext[3], sf__piece *out,
                                 int64_t skip[3])
{
  *out = *p;
  for (int a = 0; a < 3; a++) {
    const int64_t b = p->d[a] > lo[a] ? p->d[a] : lo[a];
    const int64_t e =
        p->d[a] + p->n[a] < lo[a] + ext[a] ? p->d[a] + p->n[a] : lo[a] + ext[a];
    if (e <= b)
      return 0;
    skip[a] = b - p->d[a];
    out->n[a] = e - b;
    out->d[a] = b - lo[a];
  }
  out->q += skip[0];
  out->y += skip[1];
  out->x += skip[2];
  return 1;
}

/* Floats of dataset d of piece p: C * n0 * n1 * n2 (times f^3 for a
 * dataset of scale f). */
int64_t sf__gather_elems(const sf__store *s, int d, const sf__piece *p);

/* Host copy of a piece of C channels from view v (host memory) into its
 * place in dst ([C][crop..] floats), one memcpy per row. */
void sf__gather_copy(const sf__view *v, int64_t C, const sf__piece *p,
                     const int64_t crop[3], float *dst);

/* The MPI datatype of dataset d of piece p inside its holder's segment
 * (its C channels, cstride apart, each a subarray of the planes of the
 * piece's volume), committed; the caller frees it. With displacement 0 at
 * the segment's start of dataset d (sf__store_offset). */
slabfeed_status sf__gather_type(const sf__store *s, int d, const sf__piece *p,
                                MPI_Datatype *t, sf__err *e);

#endif
