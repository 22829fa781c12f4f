/* Crop assembly: split a periodic crop into boxes by owner, and gather the
 * boxes on the host (own slab and halo, node peers by load/store, other
 * nodes by MPI_Get). */
#ifndef SF_ASSEMBLE_H
#define SF_ASSEMBLE_H

#include "window.h"

/* One box of a crop held by one rank. */
typedef struct sf__piece {
  int src;      /* rank holding it */
  int64_t q;    /* first plane in src's store (plane 0 = z0_src - halo) */
  int64_t y, x; /* first row and column in the box */
  int64_t n[3]; /* extents (z,y,x) */
  int64_t d[3]; /* offset inside the crop */
} sf__piece;

/* A run of z-planes of a crop held by one rank (scratch of the split). */
typedef struct sf__zrun {
  int src;
  int64_t q, len, off;
} sf__zrun;

/* Upper bounds of pieces and of z-runs of one crop for this store. */
int sf__crop_max_pieces(const sf__store *s);
int sf__crop_max_zruns(const sf__store *s);

/* Splits the crop at origin (periodic) into pieces; the rank's own store
 * (core and halo) is preferred, then the owner's core. zruns is scratch of
 * sf__crop_max_zruns entries. Returns the count (<= sf__crop_max_pieces). */
int sf__crop_pieces(const sf__store *s, const int64_t origin[3],
                    const int64_t crop[3], sf__piece *out, sf__zrun *zruns);

typedef struct sf__gather_bytes {
  uint64_t own, node, remote;
} sf__gather_bytes;

/* Adds the bytes of dataset d of piece p to the source it comes from:
 * this rank's store, another rank of the node, or another node. */
void sf__piece_account(const sf__store *s, int d, const sf__piece *p,
                       sf__gather_bytes *bytes);

/* Gathers dataset d of the pieces into dst ([C][crop0][crop1][crop2]).
 * Pieces from other nodes are started with MPI_Get; they are complete only
 * after sf__gather_complete. */
slabfeed_status sf__gather_host(sf__store *s, int d, const sf__piece *pieces,
                                int n, const int64_t crop[3], float *dst,
                                sf__gather_bytes *bytes, sf__err *e);

/* Starts an MPI_Get of piece p of dataset d (held on another node) into
 * its place in dst ([C][crop..]), with subarray datatypes on both sides. */
slabfeed_status sf__gather_get(sf__store *s, int d, const sf__piece *p,
                               const int64_t crop[3], float *dst, sf__err *e);

/* Completes the MPI_Get transfers started by sf__gather_host (local
 * completion: the destination buffers are ready). */
slabfeed_status sf__gather_complete(sf__store *s, sf__err *e);

#endif
