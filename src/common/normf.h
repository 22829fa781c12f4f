/* Per-channel normalisation: y = (f(x) - shift) / scale with f the identity
 * or log(x + a) (slabfeed_norm), its inverse, and the float32 log and exp
 * they use, written so that the host reference, the CUDA kernel and the
 * writer compute the same bits.
 *
 * Every operation is one IEEE single-precision operation rounded to
 * nearest: on the device the __fadd_rn/__fsub_rn/__fmul_rn/__fdiv_rn
 * intrinsics (never contracted into an FMA) and fmaf, on the host the
 * plain operators and fmaf, in objects compiled with -ffp-contract=off (the
 * library's CMake options; a host file that includes this header must be
 * compiled so). sf__logf and sf__expf are this header's own (range
 * reduction on the bits, then a polynomial evaluated with explicit fmaf),
 * not libm's or CUDA's, whose results differ between them; both are within
 * 2 ulp of the exact function (unit.norm checks every float against libm's
 * double log and exp).
 *
 * NaN: an input NaN comes out as it went in (payload kept, as the
 * transform passes NaN through without normalisation); a NaN made by the
 * arithmetic (log of a negative number, parameters that are not finite) is
 * the quiet NaN 0x7fc00000 on both sides, where hardware NaNs differ. */
#ifndef SF_NORMF_H
#define SF_NORMF_H

#ifdef __CUDACC__
/* slabfeed.h includes mpi.h; the MPI C++ bindings are not wanted in a .cu */
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "slabfeed.h"

/* IEEE arithmetic is the contract: no flush of subnormals, no reassociation
 * or approximate division. */
#if defined(__FAST_MATH__) || defined(__USE_FAST_MATH__)
#error                                                                         \
    "common/normf.h needs IEEE float arithmetic: no -ffast-math / --use_fast_math"
#endif

/* As in common/convert.h (the same definition, so both may be included). */
#ifdef __CUDACC__
#define SF_HD __host__ __device__ __forceinline__
#else
#define SF_HD static inline
#endif

/* One rounded operation each, the same on host and device. */
#ifdef __CUDA_ARCH__
#define SF__ADD(a, b) __fadd_rn((a), (b))
#define SF__SUB(a, b) __fsub_rn((a), (b))
#define SF__MUL(a, b) __fmul_rn((a), (b))
#define SF__DIV(a, b) __fdiv_rn((a), (b))
#else
#define SF__ADD(a, b) ((a) + (b))
#define SF__SUB(a, b) ((a) - (b))
#define SF__MUL(a, b) ((a) * (b))
#define SF__DIV(a, b) ((a) / (b))
#endif
#define SF__FMA(a, b, c) fmaf((a), (b), (c))

#define SF__NORM_QNAN 0x7fc00000u /* the NaN the arithmetic gives */

SF_HD uint32_t sf__norm_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

SF_HD float sf__norm_float(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

SF_HD int sf__norm_isnan(float f)
{
  return (sf__norm_bits(f) & 0x7fffffffu) > 0x7f800000u;
}

/* sf__logf - the natural logarithm of x, within 2 ulp: x = m 2^k with m in
 * [2/3, 4/3), log x = k log 2 + log1p(m - 1), log1p(f) = f + f^2 Q(f) with
 * Q a degree-9 polynomial (a weighted minimax fit of (log1p(f) - f) / f^2
 * on [-1/3, 1/3]). Subnormals are scaled by 2^23 first. log(+-0) = -inf,
 * log(+inf) = +inf, log(x < 0) = NaN (0x7fc00000), log(NaN) = NaN (the
 * input's, quieted). */
SF_HD float sf__logf(float x)
{
  uint32_t ix = sf__norm_bits(x);
  if ((ix & 0x7fffffffu) > 0x7f800000u)
    return sf__norm_float(ix | 0x00400000u);
  if ((ix & 0x7fffffffu) == 0)
    return sf__norm_float(0xff800000u);
  if (ix & 0x80000000u)
    return sf__norm_float(SF__NORM_QNAN);
  if (ix == 0x7f800000u)
    return x;
  int k = 0;
  if (ix < 0x00800000u) { /* subnormal: exact scaling by 2^23 */
    ix = sf__norm_bits(SF__MUL(x, 8388608.0f));
    k = -23;
  }
  /* m in [2/3, 4/3): e = floor((ix - bits(2/3)) / 2^23), in unsigned
   * arithmetic with a bias of 128 (0x3f2aaaab is the first float above
   * 2/3); then m has the bits of x less e in the exponent. */
  const int32_t e = (int32_t)(((ix - 0x3f2aaaabu) + (128u << 23)) >> 23) - 128;
  k += e;
  const float m = sf__norm_float(ix - ((uint32_t)e << 23));
  const float f = SF__SUB(m, 1.0f); /* exact (Sterbenz) */
  const float s = SF__MUL(f, f);
  float q = 1.200728938e-01f;
  q = SF__FMA(q, f, -1.284520179e-01f);
  q = SF__FMA(q, f, 1.075420454e-01f);
  q = SF__FMA(q, f, -1.219574884e-01f);
  q = SF__FMA(q, f, 1.430445910e-01f);
  q = SF__FMA(q, f, -1.667958051e-01f);
  q = SF__FMA(q, f, 1.999959797e-01f);
  q = SF__FMA(q, f, -2.499981970e-01f);
  q = SF__FMA(q, f, 3.333333433e-01f);
  q = SF__FMA(q, f, -5.000000000e-01f);
  float r = SF__FMA(s, q, f);
  /* + k log 2, log 2 split into its float and the rest */
  const float kf = (float)k;
  r = SF__FMA(kf, -1.904654299e-09f, r);
  return SF__FMA(kf, 6.931471825e-01f, r);
}

/* sf__expf - e^x, within 2 ulp: x = j log 2 + r with j = round(x / log 2)
 * (log 2 in two parts, so that r is exact to a few bits below its ulp),
 * e^r = 1 + r q(r) with q a degree-5 polynomial (a weighted minimax fit of
 * (e^r - 1) / r on [-log 2 / 2, log 2 / 2]), times 2^j on the bits (in two
 * steps where the result is subnormal or near the top, so that it is
 * rounded once). e^x is +inf above 88.8 (overflow from 88.7228394), 0
 * below -104, e^-inf = 0, e^NaN = NaN (the input's, quieted). */
SF_HD float sf__expf(float x)
{
  const uint32_t ix = sf__norm_bits(x);
  if ((ix & 0x7fffffffu) > 0x7f800000u)
    return sf__norm_float(ix | 0x00400000u);
  if (x > 88.8f)
    return sf__norm_float(0x7f800000u);
  if (x < -104.0f)
    return 0.0f;
  /* j = round-to-nearest-even of x / log 2, by the 1.5 * 2^23 shifter */
  const float shifter = 12582912.0f;
  const float js = SF__FMA(x, 1.442695022e+00f, shifter);
  const float j = SF__SUB(js, shifter);
  const int32_t k = (int32_t)(sf__norm_bits(js) - sf__norm_bits(shifter));
  float r = SF__FMA(j, -6.931471825e-01f, x);
  r = SF__FMA(j, 1.904654299e-09f, r);
  float q = 1.381460228e-03f;
  q = SF__FMA(q, r, 8.368715644e-03f);
  q = SF__FMA(q, r, 4.166838899e-02f);
  q = SF__FMA(q, r, 1.666652113e-01f);
  q = SF__FMA(q, r, 4.999999404e-01f);
  q = SF__FMA(q, r, 1.0f);
  const float p = SF__FMA(q, r, 1.0f); /* in [0.7, 1.42] */
  if (k > 127) /* 2^127 * 2: may overflow to inf, as it should */
    return SF__MUL(SF__MUL(p, sf__norm_float(0x7f000000u)), 2.0f);
  if (k < -125) /* subnormal or nearly: exact to 2^(k + 64), then once */
    return SF__MUL(SF__MUL(p, sf__norm_float((uint32_t)(k + 64 + 127) << 23)),
                   5.421010862e-20f /* 2^-64 */);
  return SF__MUL(p, sf__norm_float((uint32_t)(k + 127) << 23));
}

/* f(x) of n: x, or log(x + a). */
SF_HD float sf__norm_f(const slabfeed_norm *n, float x)
{
  return n->log ? sf__logf(SF__ADD(x, n->a)) : x;
}

/* sf__norm_apply - (f(x) - shift) / scale, f(x) = x or log(x + a). A NaN x
 * is returned as it is; any other NaN result is 0x7fc00000. */
SF_HD float sf__norm_apply(const slabfeed_norm *n, float x)
{
  if (sf__norm_isnan(x))
    return x;
  const float y = SF__DIV(SF__SUB(sf__norm_f(n, x), n->shift), n->scale);
  return sf__norm_isnan(y) ? sf__norm_float(SF__NORM_QNAN) : y;
}

/* sf__norm_invert - the inverse of sf__norm_apply: v = fma(y, scale,
 * shift), then v or exp(v) - a. NaN as in sf__norm_apply. Not an exact
 * inverse: apply(invert(y)) is within a few ulp of y (division and fma
 * round differently). */
SF_HD float sf__norm_invert(const slabfeed_norm *n, float y)
{
  if (sf__norm_isnan(y))
    return y;
  /* No shift: a product, not fma(y, scale, +0), which turns -0 into +0
   * (vector channels hold -0 after a sign flip). */
  const float v = sf__norm_bits(n->shift) == 0u
                      ? SF__MUL(y, n->scale)
                      : SF__FMA(y, n->scale, n->shift);
  const float x = n->log ? SF__SUB(sf__expf(v), n->a) : v;
  return sf__norm_isnan(x) ? sf__norm_float(SF__NORM_QNAN) : x;
}

/* sf__aug_apply - the amplitude augmentation of a normalised value:
 * fma(v, m, a), one rounding; NaN as it is. The identity is m = 1 with
 * a = -0 (v * 1 + -0 is v for every v, -0 and +0 included). */
SF_HD float sf__aug_apply(float v, float m, float a)
{
  return sf__norm_isnan(v) ? v : SF__FMA(v, m, a);
}

/* 1 when n is the identity {0, *, 0, 1}: normalising changes no bit. */
SF_HD int sf__norm_is_identity(const slabfeed_norm *n)
{
  return !n->log && sf__norm_bits(n->shift) == 0u &&
         sf__norm_bits(n->scale) == 0x3f800000u;
}

#endif
