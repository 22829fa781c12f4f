/* Decomposition, overflow checks and the periodic split. */
#include <stdint.h>

#include "check.h"
#include "common/geometry.h"
#include "slabfeed_tools.h"

static void test_plan(void)
{
  for (int64_t Z = 1; Z <= 40; Z++)
    for (int P = 1; P <= Z; P++) {
      int64_t next = 0, lo = Z, hi = 0;
      for (int r = 0; r < P; r++) {
        int64_t z0, z1;
        CHECK(slabfeed_slab_plan(Z, P, r, &z0, &z1) == SLABFEED_OK,
              "Z=%lld P=%d", (long long)Z, P);
        CHECK_EQ(z0, next, "slabs must be contiguous: Z=%lld P=%d r=%d",
                 (long long)Z, P, r);
        for (int64_t z = z0; z < z1; z++)
          CHECK_EQ(sf__split_owner(Z, P, z), r, "owner of z=%lld (Z=%lld P=%d)",
                   (long long)z, (long long)Z, P);
        lo = z1 - z0 < lo ? z1 - z0 : lo;
        hi = z1 - z0 > hi ? z1 - z0 : hi;
        /* the first Z % P ranks hold one plane more */
        CHECK_EQ(z1 - z0, Z / P + (r < Z % P), "size of rank %d", r);
        next = z1;
      }
      CHECK_EQ(next, Z, "slabs must cover the box");
      CHECK(hi - lo <= 1 && lo >= 1, "balanced split");
    }
  int64_t a, b;
  CHECK(slabfeed_slab_plan(3, 4, 0, &a, &b) == SLABFEED_ERR_ARG,
        "P > Z must be refused");
  CHECK(slabfeed_slab_plan(8, 0, 0, &a, &b) == SLABFEED_ERR_ARG,
        "P = 0 must be refused");
  CHECK(slabfeed_slab_plan(8, 2, 2, &a, &b) == SLABFEED_ERR_ARG,
        "r >= P must be refused");
}

static void test_overflow(void)
{
  int64_t out;
  CHECK(sf__mul64(INT64_MAX / 2, 2, &out) && out == INT64_MAX - 1, "fits");
  CHECK(!sf__mul64(INT64_MAX / 2 + 1, 2, &out), "overflow must be seen");
  CHECK(!sf__add64(INT64_MAX, 1, &out), "overflow must be seen");
  CHECK(sf__prod4(65535, 65535, 65535, 64, &out), "64 x 65535^3 fits");
  CHECK(!sf__prod4(65535, 65535, 65535, 65535, &out), "65535^4 overflows");
  CHECK(!sf__prod4(INT64_MAX, 1, 1, 2, &out), "overflow in the last factor");
}

static void test_split(void)
{
  for (int64_t n = 1; n <= 12; n++)
    for (int64_t o = 0; o < n; o++)
      for (int64_t len = 1; len <= n; len++) {
        sf__run r[2];
        const int k = sf__periodic_split(o, len, n, r);
        CHECK_EQ(k, (o + len > n ? 2 : 1), "run count");
        int64_t covered = 0;
        for (int i = 0; i < k; i++) {
          CHECK(r[i].begin >= 0 && r[i].begin + r[i].len <= n,
                "inside the box");
          CHECK_EQ(r[i].crop_off, covered, "runs in crop order");
          for (int64_t t = 0; t < r[i].len; t++)
            CHECK_EQ(r[i].begin + t, (o + r[i].crop_off + t) % n,
                     "periodic position");
          covered += r[i].len;
        }
        CHECK_EQ(covered, len, "runs cover the crop");
      }
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  test_plan();
  test_overflow();
  test_split();
  return check_finish("unit.geometry");
}
