/* Counter-based random numbers and the global sample stream.
 *
 * Every random number is a pure function of (seed, epoch, sample index,
 * draw index): rank count, thread count and call order do not matter.
 *   sf__hash(s, e, k, j) = fmix64(fmix64(fmix64(s ^ G) + G*(e+1)) ^ (M*k + j))
 * with G = 0x9e3779b97f4a7c15, M = 0xd1b54a32d192ed03 and fmix64 the
 * MurmurHash3 finaliser (a bijection of 64-bit words). A uniform integer in
 * [0, n) is the high word of the 128-bit product hash * n (bias below
 * n / 2^64, far below any test's resolution).
 * Draws of sample k: j = 0,1,2 the origin on axes z,y,x; j = 3 the symmetry.
 */
#ifndef SF_SAMPLER_H
#define SF_SAMPLER_H

#include <stdint.h>

#include "slabfeed_tools.h"

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

/* Uniform integer in [0, n) from a 64-bit hash (n >= 1). */
static inline uint64_t sf__uniform(uint64_t h, uint64_t n)
{
  return (uint64_t)(((unsigned __int128)h * n) >> 64);
}

/* The sampler: box shape, symmetry set, seed. */
typedef struct sf__sampler {
  int64_t shape[3];
  uint64_t seed;
  int nsym;        /* 48, 24 or 1 */
  int32_t sym[48]; /* the ids drawn from, increasing */
} sf__sampler;

void sf__sampler_init(sf__sampler *s, const int64_t shape[3], uint64_t seed,
                      slabfeed_symmetries set);

/* Origin (z,y,x) and symmetry id of global sample k of epoch e. */
void sf__sampler_draw(const sf__sampler *s, uint64_t epoch, uint64_t k,
                      int64_t origin[3], int32_t *sym);

/* The same with the z origin drawn from [z0, z0 + nz) (mod Z) instead of
 * [0, Z): locality mode. nz == Z, z0 == 0 is sf__sampler_draw. */
void sf__sampler_draw_in(const sf__sampler *s, uint64_t epoch, uint64_t k,
                         int64_t z0, int64_t nz, int64_t origin[3],
                         int32_t *sym);

#endif
