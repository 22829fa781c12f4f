/* The 48 cube symmetries: group laws, determinants, index maps and vector
 * groups, against the DESIGN formula written out here independently. */
#include <string.h>

#include "check.h"
#include "plan/sampler.h"
#include "common/symmetry.h"
#include "transform/transform.h"

static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

static int perm_sign(const int p[3])
{
  int inv = 0;
  for (int a = 0; a < 3; a++)
    for (int b = a + 1; b < 3; b++)
      inv += p[a] > p[b];
  return inv % 2 ? -1 : 1;
}

static void test_group(void)
{
  int proper = 0;
  for (int g = 0; g < 48; g++) {
    CHECK(sf__sym_compose(g, 0) == g && sf__sym_compose(0, g) == g,
          "identity g=%d", g);
    CHECK_EQ(sf__sym_compose(sf__sym_inverse(g), g), 0, "inverse g=%d", g);
    CHECK_EQ(sf__sym_compose(g, sf__sym_inverse(g)), 0, "inverse g=%d", g);
    const int f = g / 6;
    const int pc = (f & 1) + (f >> 1 & 1) + (f >> 2 & 1);
    const int expect = perm_sign(perms[g % 6]) * (pc % 2 ? -1 : 1);
    CHECK_EQ(sf__sym_det(g), expect, "det of g=%d", g);
    proper += sf__sym_det(g) == 1;
    for (int h = 0; h < 48; h++) {
      const int gh = sf__sym_compose(h, g);
      CHECK(gh >= 0 && gh < 48, "closure");
      for (int k = 0; k < 48; k++)
        CHECK_EQ(sf__sym_compose(k, sf__sym_compose(h, g)),
                 sf__sym_compose(sf__sym_compose(k, h), g),
                 "associativity (%d,%d,%d)", k, h, g);
    }
  }
  CHECK_EQ(proper, 24, "24 proper rotations");
}

/* DESIGN: out[i] = in[j], j[perm[a]] = (f >> a & 1) ? c-1-i[a] : i[a]. */
static void test_index_map(void)
{
  const int64_t c = 5, ext[3] = {c, c, c};
  for (int g = 0; g < 48; g++) {
    int64_t e[3], start, step[3];
    sf__sym_index_map(g, ext, e, &start, step);
    char seen[125] = {0};
    for (int64_t i0 = 0; i0 < c; i0++)
      for (int64_t i1 = 0; i1 < c; i1++)
        for (int64_t i2 = 0; i2 < c; i2++) {
          const int64_t i[3] = {i0, i1, i2};
          int64_t j[3];
          for (int a = 0; a < 3; a++)
            j[perms[g % 6][a]] = (g / 6 >> a & 1) ? c - 1 - i[a] : i[a];
          const int64_t src =
              start + i0 * step[0] + i1 * step[1] + i2 * step[2];
          CHECK_EQ(src, (j[0] * c + j[1]) * c + j[2], "index map g=%d", g);
          if (src >= 0 && src < 125)
            seen[src]++;
        }
    for (int k = 0; k < 125; k++)
      CHECK_EQ(seen[k], 1, "bijection g=%d k=%d", g, k);
  }
}

/* The radial field v(j) = j (centred) is invariant under every element when
 * velocity is transformed as a vector: out(i) = M^-1 v(M i) = i. */
static void test_vectors(void)
{
  const int c = 4;
  sf__xform x = {.trim = 0};
  memset(&x, 0, sizeof x);
  x.ext[0] = x.ext[1] = x.ext[2] = c;
  x.channels = 4;
  x.ngroups = 1;
  x.groups[0][0] = 1, x.groups[0][1] = 2, x.groups[0][2] = 3;
  x.dtype = SLABFEED_DTYPE_F32;
  x.layout = SLABFEED_OUT_NCDHW;
  const int vol = c * c * c;
  float in[4 * 64], out[4 * 64];
  for (int j0 = 0; j0 < c; j0++)
    for (int j1 = 0; j1 < c; j1++)
      for (int j2 = 0; j2 < c; j2++) {
        const int v = (j0 * c + j1) * c + j2;
        in[v] = (float)v; /* a scalar to follow */
        in[vol + v] = (float)(2 * j0 - (c - 1));
        in[2 * vol + v] = (float)(2 * j1 - (c - 1));
        in[3 * vol + v] = (float)(2 * j2 - (c - 1));
      }
  for (int g = 0; g < 48; g++) {
    sf__transform_ref(&x, g, in, out);
    for (int i0 = 0; i0 < c; i0++)
      for (int i1 = 0; i1 < c; i1++)
        for (int i2 = 0; i2 < c; i2++) {
          const int v = (i0 * c + i1) * c + i2;
          CHECK(out[vol + v] == (float)(2 * i0 - (c - 1)) &&
                    out[2 * vol + v] == (float)(2 * i1 - (c - 1)) &&
                    out[3 * vol + v] == (float)(2 * i2 - (c - 1)),
                "radial field must be invariant under g=%d", g);
        }
  }
  /* Applying g, then h, equals applying "h after g", vectors included. */
  float rnd[4 * 64], a[4 * 64], b[4 * 64];
  for (int k = 0; k < 4 * 64; k++)
    rnd[k] = (float)(int)(sf__fmix64((uint64_t)k + 1) % 1000) - 500.0f;
  for (int g = 0; g < 48; g++)
    for (int h = 0; h < 48; h++) {
      sf__transform_ref(&x, g, rnd, a);
      sf__transform_ref(&x, h, a, b);
      sf__transform_ref(&x, sf__sym_compose(h, g), rnd, a);
      CHECK(memcmp(a, b, sizeof a) == 0, "compose(%d,%d) on data", h, g);
    }
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  test_group();
  test_index_map();
  test_vectors();
  return check_finish("unit.symmetry");
}
