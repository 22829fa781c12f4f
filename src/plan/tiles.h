/* The geometry of a tiled pass over a region R of the periodic box:
 * output tiles of edge T in a grid of ceil(dz/T) x ceil(dy/T) x ceil(dx/T)
 * tiles, global index g in z-major order. On each axis tile t starts at
 * R's origin + t*T, except the last, which is moved back to end at R's
 * end and owns only the voxels no earlier tile owns. Every voxel of R is
 * owned by exactly one tile. The input crop of a tile starts P voxels
 * before it (periodic) and has edge T + 2P. Pure arithmetic. */
#ifndef SF_TILES_H
#define SF_TILES_H

#include <stdint.h>

typedef struct sf__tiles {
  int64_t shape[3];  /* the box */
  int64_t region[6]; /* z, y, x, dz, dy, dx (resolved: extents 1..N) */
  int64_t T, P;      /* tile edge, context pad */
  int64_t n[3];      /* tiles per axis */
  uint64_t count;    /* tiles in all */
} sf__tiles;

/* Lays out the tiles; T <= each extent of the region (the caller checks). */
void sf__tiles_init(sf__tiles *t, const int64_t shape[3],
                    const int64_t region[6], int64_t T, int64_t P);

/* Tile g (< count): out[0..2] the tile's origin in the box (mod N),
 * out[3..5] the origin of the part it owns relative to the tile, out[6..8]
 * that part's extent (the slabfeed_batch.tile layout). */
void sf__tiles_at(const sf__tiles *t, uint64_t g, int64_t out[9]);

/* The origin of tile g's input crop: its origin minus P on every axis,
 * periodic. */
void sf__tiles_input_origin(const sf__tiles *t, uint64_t g, int64_t o[3]);

#endif
