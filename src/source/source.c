#include "source/source.h"

/* Asked in this order; the last serves every piece. */
static const sf__source *const sources[] = {
    &sf__source_dev_own, &sf__source_dev_node, &sf__source_own,
    &sf__source_node, &sf__source_landed};

const sf__source *sf__source_of(const sf__store *s, const sf__piece *p)
{
  const int n = (int)(sizeof sources / sizeof sources[0]);
  for (int i = 0; i < n - 1; i++)
    if (sources[i]->serves(s, p))
      return sources[i];
  return sources[n - 1];
}

void sf__source_account(const sf__source *src, const sf__store *s, int d,
                        const sf__piece *p, slabfeed_stats *delta)
{
  uint64_t *c = (uint64_t *)((char *)delta + src->counter);
  *c += (uint64_t)sf__gather_elems(s, d, p) * sizeof(float);
}

void sf__source_count(const sf__source *src, uint64_t bytes,
                      slabfeed_stats *delta)
{
  uint64_t *c = (uint64_t *)((char *)delta + src->counter);
  *c += bytes;
}
