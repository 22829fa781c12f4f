/* Crop assembly: split a periodic crop into boxes by owner, and gather the
 * boxes on the host (own slab and halo, node peers by load/store, other
 * nodes by MPI_Get). */
#ifndef SF_ASSEMBLE_H
#define SF_ASSEMBLE_H

#include "window.h"

/* One box of a crop held by one rank. */
typedef struct sf_piece {
  int src;      /* rank holding it */
  int64_t q;    /* first plane in src's store (plane 0 = z0_src - halo) */
  int64_t y, x; /* first row and column in the box */
  int64_t n[3]; /* extents (z,y,x) */
  int64_t d[3]; /* offset inside the crop */
} sf_piece;

/* A run of z-planes of a crop held by one rank (scratch of the split). */
typedef struct sf_zrun {
  int src;
  int64_t q, len, off;
} sf_zrun;

/* Upper bounds of pieces and of z-runs of one crop for this store. */
int sf_crop_max_pieces(const sf_store *s);
int sf_crop_max_zruns(const sf_store *s);

/* Splits the crop at origin (periodic) into pieces; the rank's own store
 * (core and halo) is preferred, then the owner's core. zruns is scratch of
 * sf_crop_max_zruns entries. Returns the count (<= sf_crop_max_pieces). */
int sf_crop_pieces(const sf_store *s, const int64_t origin[3],
                   const int64_t crop[3], sf_piece *out, sf_zrun *zruns);

typedef struct sf_gather_bytes {
  uint64_t own, node, remote;
} sf_gather_bytes;

/* Adds the bytes of dataset d of piece p to the source it comes from:
 * this rank's store, another rank of the node, or another node. */
void sf_piece_account(const sf_store *s, int d, const sf_piece *p,
                      sf_gather_bytes *bytes);

/* Gathers dataset d of the pieces into dst ([C][crop0][crop1][crop2]).
 * Pieces from other nodes are started with MPI_Get; they are complete only
 * after sf_gather_complete. */
sf_status sf_gather_host(sf_store *s, int d, const sf_piece *pieces, int n,
                         const int64_t crop[3], float *dst,
                         sf_gather_bytes *bytes, sf_err *e);

/* Starts an MPI_Get of piece p of dataset d (held on another node) into
 * its place in dst ([C][crop..]), with subarray datatypes on both sides. */
sf_status sf_gather_get(sf_store *s, int d, const sf_piece *p,
                        const int64_t crop[3], float *dst, sf_err *e);

/* Completes the MPI_Get transfers started by sf_gather_host (local
 * completion: the destination buffers are ready). */
sf_status sf_gather_complete(sf_store *s, sf_err *e);

#endif
