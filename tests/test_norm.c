/* unit.norm: the per-channel normalisation of common/normf.h and of the
 * host reference transform.
 *  - sf__logf and sf__expf against libm's double log and exp: within 2 ulp
 *    on every 251st float bit pattern (17 million of each), densely near 1
 *    and at the ends of exp's range (subnormal results, overflow), and
 *    exact special values (0, -0, negatives, inf, NaN, subnormals).
 *  - sf__norm_apply against the formula written out here, (x - shift) /
 *    scale and (sf__logf(x + a) - shift) / scale, bit for bit; NaN rules;
 *    sf__norm_invert undoes it to a few ulp.
 *  - The host transform with normalisation: every output value is the
 *    normalisation of its source channel applied to the value the
 *    transform without normalisation gives there (the index and channel
 *    maps are checked by unit.symmetry and mpi.crops), converted to the
 *    dtype, for all 48 ids, every dtype and both layouts, with vector
 *    groups and log channels; a vector group's normalisation commutes with
 *    the rotation; identity normalisations fall back to the plain path.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "common/convert.h"
#include "common/normf.h"
#include "common/symmetry.h"
#include "plan/sampler.h"
#include "transform/transform.h"

static float from_bits(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t to_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* |r - v| in ulp of the float nearest v (subnormal ulp at the bottom), or
 * 0 for agreeing special values and 1e9 for a disagreement. */
static double ulp_error(float r, double v)
{
  if (isnan(v))
    return isnan(r) ? 0.0 : 1e9;
  if (fabs(v) > 3.4028235677973366e38) /* beyond FLT_MAX + half an ulp */
    return isinf(r) && (r > 0) == (v > 0) ? 0.0 : 1e9;
  if (isinf(r))
    return 1e9;
  int e;
  frexp(fabs(v), &e);
  const int ue = e - 24 < -149 ? -149 : e - 24;
  return fabs((double)r - v) / ldexp(1.0, ue);
}

static double ref_log(float x)
{
  return x == 0.0f ? -INFINITY : x < 0.0f ? NAN : log((double)x);
}

typedef struct worst {
  double ulp;
  float at;
  uint64_t n;
} worst;

static void track(worst *w, float x, double err)
{
  w->n++;
  if (err > w->ulp) {
    w->ulp = err;
    w->at = x;
  }
}

static void test_log_exp(void)
{
  worst wl = {0, 0, 0}, we = {0, 0, 0};
  for (uint64_t i = 0; i < 0x100000000ull; i += 251) {
    const float x = from_bits((uint32_t)i);
    track(&wl, x, ulp_error(sf__logf(x), ref_log(x)));
    track(&we, x, ulp_error(sf__expf(x), exp((double)x)));
  }
  /* Near 1 (log's cancellation) and at exp's ends, every float. */
  for (uint32_t u = to_bits(0.99f); u <= to_bits(1.01f); u++)
    track(&wl, from_bits(u),
          ulp_error(sf__logf(from_bits(u)), ref_log(from_bits(u))));
  for (uint32_t u = to_bits(-104.0f); u > to_bits(-86.0f); u -= 7)
    track(&we, from_bits(u),
          ulp_error(sf__expf(from_bits(u)), exp((double)from_bits(u))));
  for (uint32_t u = to_bits(88.0f); u <= to_bits(89.0f); u++)
    track(&we, from_bits(u),
          ulp_error(sf__expf(from_bits(u)), exp((double)from_bits(u))));
  for (uint32_t u = 0; u < 0x00800000u; u += 3) /* subnormal x */
    track(&wl, from_bits(u),
          ulp_error(sf__logf(from_bits(u)), ref_log(from_bits(u))));
  CHECK(wl.ulp <= 2.0, "sf__logf: %.3f ulp at %a", wl.ulp, (double)wl.at);
  CHECK(we.ulp <= 2.0, "sf__expf: %.3f ulp at %a", we.ulp, (double)we.at);
  /* libm's float functions as a second opinion (both within 2 ulp of the
   * exact value: within 4 of each other). */
  double dl = 0, de = 0;
  for (uint64_t i = 0; i < 0x100000000ull; i += 4099) {
    const float x = from_bits((uint32_t)i);
    if (x > 0.0f && isfinite(x))
      dl = fmax(dl, ulp_error(sf__logf(x), (double)logf(x)));
    if (isfinite(x) && x > -87.0f && x < 88.0f)
      de = fmax(de, ulp_error(sf__expf(x), (double)expf(x)));
  }
  CHECK(dl <= 4.0 && de <= 4.0, "against logf/expf: %.3f, %.3f ulp", dl, de);
  printf("unit.norm: sf__logf within %.3f ulp (worst at %a), sf__expf "
         "within %.3f ulp (worst at %a) of libm's double log/exp over "
         "%llu + %llu floats; %.2f and %.2f ulp from logf/expf\n",
         wl.ulp, (double)wl.at, we.ulp, (double)we.at, (unsigned long long)wl.n,
         (unsigned long long)we.n, dl, de);

  /* Special values, bit for bit. */
  const uint32_t ninf = 0xff800000u, pinf = 0x7f800000u, qnan = 0x7fc00000u;
  CHECK_EQ(to_bits(sf__logf(0.0f)), ninf, "log(+0)");
  CHECK_EQ(to_bits(sf__logf(-0.0f)), ninf, "log(-0)");
  CHECK_EQ(to_bits(sf__logf(-1.0f)), qnan, "log(-1)");
  CHECK_EQ(to_bits(sf__logf(-INFINITY)), qnan, "log(-inf)");
  CHECK_EQ(to_bits(sf__logf(from_bits(0x80000001u))), qnan, "log(-tiny)");
  CHECK_EQ(to_bits(sf__logf(INFINITY)), pinf, "log(inf)");
  CHECK_EQ(to_bits(sf__logf(1.0f)), 0u, "log(1) = +0");
  CHECK_EQ(to_bits(sf__logf(from_bits(0x7f800001u))), 0x7fc00001u,
           "log(sNaN): the input quieted");
  CHECK_EQ(to_bits(sf__logf(from_bits(0xffc12345u))), 0xffc12345u,
           "log(NaN): the input");
  CHECK(ulp_error(sf__logf(from_bits(1)), log(ldexp(1.0, -149))) <= 2.0,
        "log(min subnormal) = %.9g", (double)sf__logf(from_bits(1)));
  CHECK(ulp_error(sf__logf(3.40282347e38f), log(3.40282347e38)) <= 2.0,
        "log(FLT_MAX)");
  CHECK_EQ(to_bits(sf__expf(0.0f)), 0x3f800000u, "exp(0) = 1");
  CHECK_EQ(to_bits(sf__expf(-0.0f)), 0x3f800000u, "exp(-0) = 1");
  CHECK_EQ(to_bits(sf__expf(INFINITY)), pinf, "exp(inf)");
  CHECK_EQ(to_bits(sf__expf(-INFINITY)), 0u, "exp(-inf) = +0");
  CHECK_EQ(to_bits(sf__expf(88.7228394f)), pinf, "exp overflows");
  CHECK(isfinite(sf__expf(88.7228317f)), "exp(88.7228317) is finite");
  CHECK_EQ(to_bits(sf__expf(-104.0f)), 0u, "exp(-104) underflows to 0");
  CHECK(ulp_error(sf__expf(-103.9f), exp(-103.9)) <= 2.0 &&
            sf__expf(-103.9f) > 0.0f,
        "exp(-103.9) is a subnormal: %a", (double)sf__expf(-103.9f));
  CHECK_EQ(to_bits(sf__expf(from_bits(0x7fa00000u))), 0x7fe00000u,
           "exp(sNaN): the input quieted");
  CHECK_EQ(to_bits(sf__expf(from_bits(1))), 0x3f800000u, "exp(tiny) = 1");
}

/* The formula, written out: (f(x) - shift) / scale. */
static float formula(const slabfeed_norm *n, float x)
{
  const float fx = n->log ? sf__logf(x + n->a) : x;
  return (fx - n->shift) / n->scale;
}

static void test_apply(void)
{
  const slabfeed_norm ns[] = {
      {0, 0.0f, 0.0f, 1.0f},      {0, 0.0f, 1.5f, 0.25f},
      {0, 0.0f, -1024.0f, -3.0f}, {0, 0.0f, 0.1f, 7.0f},
      {1, 1.0f, 0.0f, 1.0f},      {1, 1025.0f, 6.5f, 0.5f},
      {1, 1e-3f, -2.0f, 3.0f},    {1, -5.0f, 1.0f, 2.0f}};
  uint64_t h = 12345, bad = 0, checked = 0, nan_ok = 0;
  double inv_worst = 0;
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
    for (int i = 0; i < 200000; i++) {
      h = sf__fmix64(h + 1);
      float x;
      if (i % 4 == 0)
        x = from_bits((uint32_t)h); /* any bits */
      else
        x = (float)((int64_t)(h % 4096) - 2048) / (i % 4 == 1 ? 1.0f : 64.0f);
      const slabfeed_norm *n = &ns[k];
      const float y = sf__norm_apply(n, x);
      checked++;
      if (isnan(x)) {
        bad += to_bits(y) != to_bits(x); /* passed through */
        continue;
      }
      const float want = formula(n, x);
      if (isnan(want)) { /* log of a negative: the one NaN */
        nan_ok += to_bits(y) == 0x7fc00000u;
        bad += to_bits(y) != 0x7fc00000u;
        continue;
      }
      bad += to_bits(y) != to_bits(want);
      /* invert undoes it to a few ulp of the numbers involved: |x| and
       * |shift| (identity); |a| and |x + a| times log's condition (log) */
      if (isfinite(y) && fabsf(x) < 1e30f && (!n->log || x + n->a > 1e-3f)) {
        const float back = sf__norm_invert(n, y);
        const double u = ldexp(1.0, -21);
        const double tol = n->log
                               ? u * (fabs((double)n->a) +
                                      fabs((double)x + n->a) *
                                          (1.0 + fabs(log((double)x + n->a))))
                               : u * (fabs((double)x) + fabs((double)n->shift));
        inv_worst = fmax(inv_worst, fabs((double)back - x) / tol);
      }
    }
  CHECK_EQ(bad, 0ull, "sf__norm_apply differs from the formula");
  CHECK(nan_ok > 0, "no log of a negative number was tried");
  CHECK(inv_worst <= 1.0, "invert(apply(x)) is %.3g times the tolerance off",
        inv_worst);
  /* NaN: a NaN input with its payload; NaN parameters give 0x7fc00000. */
  const slabfeed_norm nanscale = {0, 0.0f, 0.0f, NAN};
  CHECK_EQ(to_bits(sf__norm_apply(&nanscale, 2.0f)), 0x7fc00000u,
           "NaN scale: the one NaN");
  CHECK_EQ(to_bits(sf__norm_apply(&ns[1], from_bits(0xff812345u))), 0xff812345u,
           "a signalling NaN input passes unchanged");
  CHECK_EQ(to_bits(sf__norm_invert(&ns[5], from_bits(0x7fc0beefu))),
           0x7fc0beefu, "invert passes NaN");
  CHECK_EQ(to_bits(sf__norm_apply(&ns[0], -0.0f)), 0x80000000u,
           "the identity keeps -0");
  CHECK(sf__norm_is_identity(&ns[0]) && !sf__norm_is_identity(&ns[1]) &&
            !sf__norm_is_identity(&ns[4]),
        "identity test");
  printf("unit.norm: %llu normalisations equal the formula bit for bit; "
         "invert within %.2g of its tolerance\n",
         (unsigned long long)checked, inv_worst);
}

static uint32_t conv(float v, slabfeed_dtype d)
{
  return d == SLABFEED_DTYPE_F32   ? to_bits(v)
         : d == SLABFEED_DTYPE_F16 ? sf__f32_to_f16(v)
                                   : sf__f32_to_bf16(v);
}

static uint32_t at(const void *p, int64_t i, slabfeed_dtype d)
{
  return d == SLABFEED_DTYPE_F32 ? ((const uint32_t *)p)[i]
                                 : ((const uint16_t *)p)[i];
}

static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

/* The source channel of output channel k under g (DESIGN: out[k_a] = s_a *
 * in[k_perm[a]]), written out here. */
static int source_of(int g, int k, int ngroups, const int (*groups)[3])
{
  for (int v = 0; v < ngroups; v++)
    for (int a = 0; a < 3; a++)
      if (groups[v][a] == k)
        return groups[v][perms[g % 6][a]];
  return k;
}

static void test_transform(void)
{
  enum { C = 7, E = 6 };
  const int64_t vol = E * E * E;
  static float in[C * E * E * E];
  uint64_t h = 99;
  for (int64_t i = 0; i < C * vol; i++) {
    h = sf__fmix64(h + 7);
    in[i] = i % 11 == 0 ? from_bits((uint32_t)(h >> 32)) /* any bits */
                        : (float)((int64_t)(h % 2048) - 1024) / 4.0f;
  }
  const int groups[2][3] = {{1, 2, 3}, {6, 4, 5}};
  /* Channel 0: a log; 1-3: one scale; 4-6 (a group in another order):
   * one scale; and a variant where the groups' entries differ (allowed
   * internally: each output channel takes its source's). */
  slabfeed_norm norm[2][C] = {{{1, 300.0f, 5.0f, 0.75f},
                               {0, 0.0f, 0.0f, 2.5f},
                               {0, 0.0f, 0.0f, 2.5f},
                               {0, 0.0f, 0.0f, 2.5f},
                               {0, 0.0f, 0.0f, -0.125f},
                               {0, 0.0f, 0.0f, -0.125f},
                               {0, 0.0f, 0.0f, -0.125f}},
                              {{0, 0.0f, 3.0f, 0.1f},
                               {0, 0.0f, 1.0f, 2.0f},
                               {1, 257.0f, 0.5f, 3.0f},
                               {0, 0.0f, -2.0f, 0.3f},
                               {0, 0.0f, 0.0f, 7.0f},
                               {1, 1.0f, 0.0f, 1.0f},
                               {0, 0.0f, 0.25f, 1.0f}}};
  static uint32_t plain[C * E * E * E], got[C * E * E * E];
  static float plainf[C * E * E * E];
  int64_t bad = 0, checked = 0, commute_bad = 0;
  for (int variant = 0; variant < 2; variant++)
    for (int g = 0; g < 48; g++)
      for (int dt = 0; dt < 3; dt++)
        for (int lay = 0; lay < 2; lay++) {
          sf__xform x = {.trim = 0};
          memset(&x, 0, sizeof x);
          x.ext[0] = x.ext[1] = x.ext[2] = E;
          x.channels = C;
          x.ngroups = 2;
          memcpy(x.groups, groups, sizeof groups);
          x.dtype = SLABFEED_DTYPE_F32;
          x.layout = (slabfeed_out_layout)lay;
          sf__transform_ref(&x, g, in, plainf); /* no normalisation */
          x.dtype = (slabfeed_dtype)dt;
          sf__transform_ref(&x, g, in, plain);
          sf__xform_set_norm(&x, C, norm[variant]);
          CHECK_EQ(x.nnorm, C, "normalisations set");
          sf__transform_ref(&x, g, in, got);
          for (int64_t i = 0; i < C * vol; i++) {
            const int k = (int)(lay == SLABFEED_OUT_NCDHW ? i / vol : i % C);
            const int src = source_of(g, k, 2, groups);
            const float y = sf__norm_apply(&norm[variant][src], plainf[i]);
            const int ok = at(got, i, x.dtype) == conv(y, x.dtype);
            if (!ok && bad < 3)
              fprintf(stderr,
                      "variant %d g %d dtype %d layout %d element %lld "
                      "(channel %d from %d): %08x, want %08x\n",
                      variant, g, dt, lay, (long long)i, k, src,
                      at(got, i, x.dtype), conv(y, x.dtype));
            bad += !ok;
            checked++;
          }
          /* The groups of variant 0 share a scale and have no shift and
           * no log: normalising the crop first, then transforming it,
           * gives the same bits (rotation commutes with normalisation). */
          if (variant == 0 && dt == SLABFEED_DTYPE_F32) {
            static float pre[C * E * E * E], post[C * E * E * E];
            for (int64_t i = 0; i < C * vol; i++)
              pre[i] = sf__norm_apply(&norm[0][i / vol], in[i]);
            sf__xform p = x;
            p.nnorm = 0;
            sf__transform_ref(&p, g, pre, post);
            commute_bad += memcmp(post, got, sizeof post) != 0;
          }
          /* The identity falls back to the transform without it. */
          slabfeed_norm id[C];
          for (int c = 0; c < C; c++)
            id[c] = (slabfeed_norm){0, 0.0f, 0.0f, 1.0f};
          sf__xform_set_norm(&x, C, id);
          CHECK_EQ(x.nnorm, 0, "identity normalisations are none");
          sf__transform_ref(&x, g, in, got);
          CHECK(memcmp(got, plain,
                       (size_t)(C * vol) * slabfeed_dtype_size(x.dtype)) == 0,
                "identity: g %d dtype %d layout %d", g, dt, lay);
        }
  CHECK(bad == 0, "%lld of %lld normalised values differ", (long long)bad,
        (long long)checked);
  CHECK_EQ(commute_bad, 0ll,
           "vector groups: normalisation does not commute with rotation");
  printf("unit.norm: host transform with normalisation: %lld values (48 ids, "
         "3 dtypes, 2 layouts, 2 vector groups, log channels) equal the "
         "formula\n",
         (long long)checked);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  test_log_exp();
  test_apply();
  test_transform();
  return check_finish("unit.norm");
}
