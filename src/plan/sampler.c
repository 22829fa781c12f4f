#include "plan/sampler.h"

#include "common/symmetry.h"

#define SF_GOLDEN 0x9e3779b97f4a7c15ULL
#define SF_MULT 0xd1b54a32d192ed03ULL

uint64_t sf__hash(uint64_t seed, uint64_t epoch, uint64_t k, uint32_t draw)
{
  uint64_t h = sf__fmix64(seed ^ SF_GOLDEN);
  h = sf__fmix64(h + SF_GOLDEN * (epoch + 1));
  return sf__fmix64(h ^ (SF_MULT * k + draw));
}

void sf__sampler_init(sf__sampler *s, const int64_t shape[3], uint64_t seed,
                      slabfeed_symmetries set)
{
  for (int a = 0; a < 3; a++)
    s->shape[a] = shape[a];
  s->seed = seed;
  s->nsym = 0;
  for (int g = 0; g < SF_NSYM; g++) {
    const int keep = set == SLABFEED_SYM_ALL ||
                     (set == SLABFEED_SYM_ROTATIONS && sf__sym_det(g) > 0) ||
                     (set == SLABFEED_SYM_NONE && g == 0);
    if (keep)
      s->sym[s->nsym++] = g;
  }
}

void sf__sampler_draw(const sf__sampler *s, uint64_t epoch, uint64_t k,
                      int64_t origin[3], int32_t *sym)
{
  sf__sampler_draw_in(s, epoch, k, 0, s->shape[0], origin, sym);
}

void sf__sampler_draw_in(const sf__sampler *s, uint64_t epoch, uint64_t k,
                         int64_t z0, int64_t nz, int64_t origin[3],
                         int32_t *sym)
{
  origin[0] = (z0 + (int64_t)sf__uniform(sf__hash(s->seed, epoch, k, 0),
                                         (uint64_t)nz)) %
              s->shape[0];
  for (int a = 1; a < 3; a++)
    origin[a] = (int64_t)sf__uniform(sf__hash(s->seed, epoch, k, (uint32_t)a),
                                     (uint64_t)s->shape[a]);
  *sym = s->sym[sf__uniform(sf__hash(s->seed, epoch, k, 3), (uint64_t)s->nsym)];
}
