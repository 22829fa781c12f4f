/* The sampler: uniform origins on every axis (last position included),
 * uniform symmetry ids over the chosen set, chi-square at p = 1e-6; the
 * volume draw restricted to some volumes (locality over a suite). */
#include <math.h>
#include <string.h>

#include "testutil.h" /* chi2 */
#include "plan/sampler.h"
#include "common/symmetry.h"

/* Upper critical value of chi-square with df degrees of freedom at
 * p = 1e-6 (Wilson-Hilferty; z = 4.7534 is the standard normal quantile). */
static double chi2_crit(int df)
{
  const double z = 4.7534, k = (double)df;
  const double t = 1.0 - 2.0 / (9.0 * k) + z * sqrt(2.0 / (9.0 * k));
  return k * t * t * t;
}

static void test_origins(void)
{
  const int64_t shape[3] = {13, 7, 31};
  sf__sampler s;
  sf__sampler_init(&s, shape, 42, SLABFEED_SYM_ALL);
  uint64_t count[3][31];
  memset(count, 0, sizeof count);
  uint64_t sym[48] = {0};
  const uint64_t n = 400000;
  for (uint64_t k = 0; k < n; k++) {
    int64_t o[3];
    int32_t g;
    sf__sampler_draw(&s, 3, k, o, &g);
    for (int a = 0; a < 3; a++) {
      CHECK(o[a] >= 0 && o[a] < shape[a], "origin inside [0,N)");
      if (o[a] >= 0 && o[a] < shape[a])
        count[a][o[a]]++;
    }
    sym[g]++;
  }
  for (int a = 0; a < 3; a++) {
    const double x = chi2(count[a], (int)shape[a], n);
    CHECK(x < chi2_crit((int)shape[a] - 1), "axis %d: chi2 %.1f >= %.1f", a, x,
          chi2_crit((int)shape[a] - 1));
    CHECK(count[a][shape[a] - 1] > 0, "last position must be drawn");
  }
  const double xs = chi2(sym, 48, n);
  CHECK(xs < chi2_crit(47), "symmetry: chi2 %.1f", xs);
}

static void test_rotations(void)
{
  const int64_t shape[3] = {8, 8, 8};
  sf__sampler s;
  sf__sampler_init(&s, shape, 7, SLABFEED_SYM_ROTATIONS);
  CHECK_EQ(s.nsym, 24, "24 rotations");
  uint64_t count[48] = {0};
  const uint64_t n = 240000;
  for (uint64_t k = 0; k < n; k++) {
    int64_t o[3];
    int32_t g;
    sf__sampler_draw(&s, 0, k, o, &g);
    CHECK_EQ(sf__sym_det(g), 1, "only proper rotations, got %d", g);
    count[g]++;
  }
  uint64_t rot[24];
  int r = 0;
  for (int g = 0; g < 48; g++)
    if (sf__sym_det(g) == 1)
      rot[r++] = count[g];
  CHECK(chi2(rot, 24, n) < chi2_crit(23), "rotations uniform");
  sf__sampler_init(&s, shape, 7, SLABFEED_SYM_NONE);
  for (uint64_t k = 0; k < 1000; k++) {
    int64_t o[3];
    int32_t g;
    sf__sampler_draw(&s, 0, k, o, &g);
    CHECK_EQ(g, 0, "none: identity only");
  }
}

/* Pairs of consecutive samples: origin z of k against k+1, 13x13 cells. */
static void test_independence(void)
{
  const int64_t shape[3] = {13, 13, 13};
  sf__sampler s;
  sf__sampler_init(&s, shape, 1, SLABFEED_SYM_ALL);
  uint64_t cells[169] = {0};
  const uint64_t n = 338000;
  int64_t prev[3];
  int32_t g;
  sf__sampler_draw(&s, 0, 0, prev, &g);
  for (uint64_t k = 1; k <= n; k++) {
    int64_t o[3];
    sf__sampler_draw(&s, 0, k, o, &g);
    cells[prev[0] * 13 + o[0]]++;
    memcpy(prev, o, sizeof o);
  }
  CHECK(chi2(cells, 169, n) < chi2_crit(168),
        "consecutive samples independent");
  /* Streams of different epochs and seeds differ. */
  sf__sampler t;
  sf__sampler_init(&t, shape, 2, SLABFEED_SYM_ALL);
  int same_epoch = 0, same_seed = 0;
  for (uint64_t k = 0; k < 1000; k++) {
    int64_t a[3], b[3], c[3];
    int32_t ga, gb, gc;
    sf__sampler_draw(&s, 0, k, a, &ga);
    sf__sampler_draw(&s, 1, k, b, &gb);
    sf__sampler_draw(&t, 0, k, c, &gc);
    same_epoch += !memcmp(a, b, sizeof a) && ga == gb;
    same_seed += !memcmp(a, c, sizeof a) && ga == gc;
  }
  CHECK(same_epoch < 5 && same_seed < 5,
        "epochs/seeds give other streams (%d,%d)", same_epoch, same_seed);
}

/* A dataset of 4 volumes of weights 1, 2, 3, 4: draws among volumes
 * [1, 3) (locality's node of volumes 1 and 2) give only those, in the
 * ratio 2 : 3 (chi-square), each origin inside its volume; draws among
 * all volumes are sf__sampler_draw's, bit for bit. */
static void test_among(void)
{
  const int64_t vs[4][3] = {{5, 6, 7}, {4, 6, 7}, {6, 5, 7}, {3, 6, 6}};
  const int64_t z0[5] = {0, 5, 9, 15, 18};
  const uint64_t w[4] = {1, 2, 3, 4};
  const int64_t shape[3] = {18, 6, 7};
  sf__sampler s;
  sf__sampler_init(&s, shape, 99, SLABFEED_SYM_ALL);
  sf__err e;
  sf__err_clear(&e);
  CHECK(sf__sampler_volumes(&s, 4, z0, vs, w, &e) == SLABFEED_OK, "volumes");
  const int n = 30000;
  uint64_t count[2] = {0, 0};
  int outside = 0, differ = 0;
  for (int k = 0; k < n; k++) {
    int64_t o[3], p[3];
    int32_t g, h;
    sf__sampler_draw_among(&s, 2, (uint64_t)k, 1, 3, o, &g);
    const int v = o[0] >= z0[2] ? 2 : o[0] >= z0[1] ? 1 : 0;
    if (v == 1 || v == 2)
      count[v - 1]++;
    outside += v == 0 || o[0] >= z0[3] || o[1] >= vs[v][1] || o[2] >= vs[v][2];
    sf__sampler_draw_among(&s, 2, (uint64_t)k, 0, 4, o, &g);
    sf__sampler_draw(&s, 2, (uint64_t)k, p, &h);
    differ += memcmp(o, p, sizeof o) != 0 || g != h;
  }
  CHECK_EQ(outside, 0, "draws among volumes 1-2 outside them");
  CHECK_EQ(differ, 0, "draws among all volumes differ from sf__sampler_draw");
  const double p[2] = {0.4, 0.6};
  double x = 0;
  for (int i = 0; i < 2; i++) {
    const double ex = p[i] * (double)(count[0] + count[1]);
    x += ((double)count[i] - ex) * ((double)count[i] - ex) / ex;
  }
  CHECK(x < chi2_crit(1), "volumes 1 and 2 drawn %llu : %llu (chi2 %.2f)",
        (unsigned long long)count[0], (unsigned long long)count[1], x);
  sf__sampler_free(&s);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  test_origins();
  test_rotations();
  test_independence();
  test_among();
  return check_finish("unit.sampler");
}
