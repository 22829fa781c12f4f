#include "common/geometry.h"

#include <assert.h>

#include "slabfeed_tools.h"

bool sf__mul64(int64_t a, int64_t b, int64_t *out)
{
  assert(a >= 0 && b >= 0);
  return !__builtin_mul_overflow(a, b, out);
}

bool sf__add64(int64_t a, int64_t b, int64_t *out)
{
  return !__builtin_add_overflow(a, b, out);
}

bool sf__prod4(int64_t a, int64_t b, int64_t c, int64_t d, int64_t *out)
{
  int64_t ab, abc;
  return sf__mul64(a, b, &ab) && sf__mul64(ab, c, &abc) &&
         sf__mul64(abc, d, out);
}

int64_t sf__split_begin(int64_t Z, int P, int r)
{
  assert(P >= 1 && r >= 0 && r <= P);
  const int64_t base = Z / P, rem = Z % P;
  return (int64_t)r * base + (r < rem ? r : rem);
}

int sf__split_owner(int64_t Z, int P, int64_t z)
{
  assert(z >= 0 && z < Z);
  const int64_t base = Z / P, rem = Z % P;
  const int64_t big = rem * (base + 1); /* planes held by the larger slabs */
  if (z < big)
    return (int)(z / (base + 1));
  return (int)(rem + (z - big) / base);
}

int sf__last_at_or_below(const int64_t *a, int n, int64_t x)
{
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (a[mid] <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

slabfeed_status slabfeed_slab_plan(int64_t Z, int P, int r, int64_t *z0,
                                   int64_t *z1)
{
  if (P < 1 || Z < 1 || (int64_t)P > Z || r < 0 || r >= P)
    return SLABFEED_ERR_ARG;
  *z0 = sf__split_begin(Z, P, r);
  *z1 = sf__split_begin(Z, P, r + 1);
  return SLABFEED_OK;
}

int sf__periodic_split(int64_t origin, int64_t len, int64_t n, sf__run runs[2])
{
  assert(origin >= 0 && origin < n && len >= 1 && len <= n);
  const int64_t first = origin + len <= n ? len : n - origin;
  runs[0] = (sf__run){origin, first, 0};
  if (first == len)
    return 1;
  runs[1] = (sf__run){0, len - first, first};
  return 2;
}
