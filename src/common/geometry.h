/* Boxes, the z-slab decomposition, and the periodic split of a crop. */
#ifndef SF_GEOMETRY_H
#define SF_GEOMETRY_H

#include <stdbool.h>
#include <stdint.h>

/* Overflow-checked arithmetic on non-negative sizes: returns false (and
 * leaves *out unspecified) when the result does not fit in int64_t. */
bool sf__mul64(int64_t a, int64_t b, int64_t *out);
bool sf__add64(int64_t a, int64_t b, int64_t *out);
/* *out = a*b*c*d, all >= 0; false on overflow. */
bool sf__prod4(int64_t a, int64_t b, int64_t c, int64_t d, int64_t *out);

/* Non-negative remainder of a modulo n (n > 0). */
static inline int64_t sf__pmod(int64_t a, int64_t n)
{
  int64_t r = a % n;
  return r < 0 ? r + n : r;
}

/* First plane of rank r in the split of Z planes over P ranks (r in [0,P]:
 * r == P gives Z). The first Z % P ranks hold one plane more. */
int64_t sf__split_begin(int64_t Z, int P, int r);

/* Rank whose slab holds plane z (0 <= z < Z) in the split over P ranks. */
int sf__split_owner(int64_t Z, int P, int64_t z);

/* The last index i in [0, n) with a[i] <= x, for a[] increasing and
 * a[0] <= x (n >= 1): the run holding x of runs beginning at a[]. */
int sf__last_at_or_below(const int64_t *a, int n, int64_t x);

/* A contiguous run [begin, begin+len) of one axis of the box, and the
 * offset of the run inside the crop. */
typedef struct sf__run {
  int64_t begin, len, crop_off;
} sf__run;

/* Splits the periodic interval [origin, origin+len) of an axis of n points
 * (0 <= origin < n, 1 <= len <= n) into one or two runs inside [0, n).
 * Returns the number of runs written to runs[0..1]. */
int sf__periodic_split(int64_t origin, int64_t len, int64_t n, sf__run runs[2]);

#endif
