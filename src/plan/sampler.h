/* Counter-based random numbers and the global sample stream.
 *
 * Every random number is a pure function of (seed, epoch, sample index,
 * draw index): rank count, thread count and call order do not matter.
 *   sf__hash(s, e, k, j) = fmix64(fmix64(fmix64(s ^ G) + G*(e+1)) ^ (M*k + j))
 * with G = 0x9e3779b97f4a7c15, M = 0xd1b54a32d192ed03 and fmix64 the
 * MurmurHash3 finaliser (a bijection of 64-bit words). A uniform integer in
 * [0, n) is the high word of the 128-bit product hash * n (bias below
 * n / 2^64, far below any test's resolution).
 * Draws of sample k: j = 0,1,2 the origin on axes z,y,x; j = 3 the symmetry;
 * j = 4 the volume of a dataset of several (drawn first; a dataset of one
 * volume makes no draw 4, so its stream is the one of before).
 */
#ifndef SF_SAMPLER_H
#define SF_SAMPLER_H

#include <stdint.h>

#include "common/errors.h"

static inline uint64_t sf__fmix64(uint64_t h)
{
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

uint64_t sf__hash(uint64_t seed, uint64_t epoch, uint64_t k, uint32_t draw);

/* A standard normal variate of sample k of epoch `epoch` from draws j and
 * j + 1 (Box-Muller in double): sqrt(-2 ln u1) cos(2 pi u2), with
 * u1 = (hash(j) >> 11 + 1) 2^-53 in (0, 1] and u2 = (hash(j + 1) >> 11)
 * 2^-53. */
double sf__normal(uint64_t seed, uint64_t epoch, uint64_t k, uint32_t j);

/* Uniform integer in [0, n) from a 64-bit hash (n >= 1). */
static inline uint64_t sf__uniform(uint64_t h, uint64_t n)
{
  return (uint64_t)(((unsigned __int128)h * n) >> 64);
}

/* Origins allowed by held-out regions, as disjoint cells: the breakpoints
 * of every region's forbidden interval on each axis cut the box into
 * cells that are wholly allowed or wholly forbidden; the allowed ones, in
 * z-major order, with the running count of their origins. */
typedef struct sf__holdout {
  int64_t bp[3][2 * SLABFEED_MAX_REGIONS + 2]; /* cell starts per axis, then
                                                  the axis length */
  int nb[3];                                   /* cells per axis */
  int ncells;                                  /* allowed cells */
  int32_t (*cell)[3];                          /* [ncells] axis cell indices */
  uint64_t *cum;    /* [ncells] origins in cells 0..i */
  uint64_t allowed; /* origins in all of them */
} sf__holdout;

/* The sampler: box shape, symmetry set, seed, held-out regions. */
typedef struct sf__sampler {
  int64_t shape[3];
  uint64_t seed;
  int nsym;          /* 48, 24 or 1 */
  int32_t sym[48];   /* the ids drawn from, increasing */
  sf__holdout *hold; /* NULL: origins uniform over the whole box */
  /* A dataset of several volumes stacked along z (nvol > 1): volume v
   * holds planes [z0[v], z0[v+1]) and is drawn with probability
   * w[v] / total (cum[v] the running sum); the origin is then drawn in
   * the volume (its own y, x extents yx[v], at most shape[1], shape[2])
   * and wraps inside it. */
  int nvol;
  int64_t *z0;      /* [nvol + 1] */
  int64_t (*yx)[2]; /* [nvol] */
  uint64_t *cum;    /* [nvol] */
} sf__sampler;

void sf__sampler_init(sf__sampler *s, const int64_t shape[3], uint64_t seed,
                      slabfeed_symmetries set);

/* Keeps crops of edge crop[] clear of the n regions boxes[i] = {z, y, x,
 * dz, dy, dx} (extents already resolved: 1..N, origins in [0, N)): from
 * then on origins are uniform over the origins whose crop, wrapped
 * periodically, contains no held-out voxel. Draw 0 of sample k picks the
 * origin among them (z-major order of the allowed cells), draw 3 the
 * symmetry. Fails when no origin is left. */
slabfeed_status sf__sampler_holdout(sf__sampler *s, const int64_t crop[3],
                                    int n, const int64_t (*boxes)[6],
                                    sf__err *e);

/* Makes the sampler's box a stack of n volumes (shape[0] must be z0[n]),
 * volume v of shape vshape[v] (its z extent z0[v+1] - z0[v]): weights w[]
 * (0: never drawn; their sum at most 2^62) pick the volume of each
 * sample, draw 4, and the origin is drawn in its own extents. With
 * held-out regions (sf__sampler_holdout, called after this one with the
 * volumes' common shape) they apply inside every volume. Some weight must
 * be positive (sf__batch_volume_weights refuses all 0). Fails only for
 * memory. */
slabfeed_status sf__sampler_volumes(sf__sampler *s, int n, const int64_t *z0,
                                    const int64_t (*vshape)[3],
                                    const uint64_t *w, sf__err *e);

/* Releases what sf__sampler_holdout and sf__sampler_volumes took. */
void sf__sampler_free(sf__sampler *s);

/* 1 when the crop of edge crop[] at origin o (periodic) contains a voxel
 * of box b {z, y, x, dz, dy, dx} (resolved). */
int sf__box_hits(const int64_t shape[3], const int64_t crop[3],
                 const int64_t o[3], const int64_t b[6]);

/* Origin (z,y,x) and symmetry id of global sample k of epoch e. */
void sf__sampler_draw(const sf__sampler *s, uint64_t epoch, uint64_t k,
                      int64_t origin[3], int32_t *sym);

/* The same for a dataset of several volumes (sf__sampler_volumes) with
 * the volume drawn among volumes [vlo, vhi) only (their weights scaled to
 * sum 1; some must be positive): locality mode, where a node holds whole
 * volumes. vlo 0, vhi n is sf__sampler_draw. */
void sf__sampler_draw_among(const sf__sampler *s, uint64_t epoch, uint64_t k,
                            int vlo, int vhi, int64_t origin[3], int32_t *sym);

/* The same with the z origin drawn from [z0, z0 + nz) (mod Z) instead of
 * [0, Z): locality mode. nz == Z, z0 == 0 is sf__sampler_draw. */
void sf__sampler_draw_in(const sf__sampler *s, uint64_t epoch, uint64_t k,
                         int64_t z0, int64_t nz, int64_t origin[3],
                         int32_t *sym);

#endif
