/* float32 -> float16 / bfloat16 round-to-nearest-even against references
 * written here by search over the target grid (no bit tricks shared). */
#include <math.h>
#include <string.h>

#include "check.h"
#include "common/convert.h"
#include "plan/sampler.h"

static double half_value(uint16_t h)
{
  const int e = h >> 10 & 0x1f, m = h & 0x3ff;
  const double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return h & 0x8000 ? -v : v;
}

static double bf16_value(uint16_t b)
{
  const uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* Nearest of the finite non-negative grid values (bits 0..top, increasing
 * in value), ties to the even bit pattern; past the top by half an ulp or
 * more: infinity (inf_bits). */
static uint16_t nearest(double ax, uint16_t top, uint16_t inf_bits,
                        double (*value)(uint16_t))
{
  const double ulp_top = value(top) - value((uint16_t)(top - 1));
  if (ax >= value(top) + ulp_top / 2)
    return inf_bits;
  uint16_t lo = 0, hi = top;
  while (hi - lo > 1) {
    const uint16_t mid = (uint16_t)((lo + hi) / 2);
    if (value(mid) <= ax)
      lo = mid;
    else
      hi = mid;
  }
  if (value(hi) <= ax)
    return hi;
  const double dl = ax - value(lo), dh = value(hi) - ax;
  if (dl < dh)
    return lo;
  if (dh < dl)
    return hi;
  return (lo & 1) ? hi : lo;
}

static void check_value(float f)
{
  if (isnan(f)) {
    CHECK(isnan(half_value(sf__f32_to_f16(f))) ||
              (sf__f32_to_f16(f) & 0x7c00) == 0x7c00,
          "NaN stays NaN in f16");
    CHECK((sf__f32_to_f16(f) & 0x3ff) != 0, "f16 NaN keeps a payload");
    CHECK((sf__f32_to_bf16(f) & 0x7f80) == 0x7f80 &&
              (sf__f32_to_bf16(f) & 0x7f),
          "NaN stays NaN in bf16");
    return;
  }
  const double ax = fabs((double)f);
  const uint16_t sign = signbit(f) ? 0x8000 : 0;
  const uint16_t h =
      isinf(f) ? (uint16_t)0x7c00 : nearest(ax, 0x7bff, 0x7c00, half_value);
  CHECK(sf__f32_to_f16(f) == (uint16_t)(sign | h),
        "f16 of %a: got 0x%04x want 0x%04x", (double)f, sf__f32_to_f16(f),
        sign | h);
  const uint16_t b =
      isinf(f) ? (uint16_t)0x7f80 : nearest(ax, 0x7f7f, 0x7f80, bf16_value);
  CHECK(sf__f32_to_bf16(f) == (uint16_t)(sign | b),
        "bf16 of %a: got 0x%04x want 0x%04x", (double)f, sf__f32_to_bf16(f),
        sign | b);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  /* Every f16 value, the midpoints between neighbours (ties), and a hair on
   * either side of each midpoint. */
  for (uint32_t h = 0; h < 0x7c00; h++) {
    const float v = (float)half_value((uint16_t)h);
    check_value(v);
    check_value(-v);
    const float mid =
        (float)((half_value((uint16_t)h) + half_value((uint16_t)(h + 1))) / 2);
    check_value(mid);
    check_value(-mid);
    check_value(nextafterf(mid, 0.0f));
    check_value(nextafterf(mid, INFINITY));
  }
  /* bf16 ties and neighbours over a sweep of exponents. */
  for (uint32_t b = 0; b < 0x7f80; b += 7) {
    const uint32_t tie = (b << 16) | 0x8000u;
    float f;
    memcpy(&f, &tie, sizeof f);
    check_value(f);
    check_value(nextafterf(f, 0.0f));
    check_value(nextafterf(f, INFINITY));
  }
  /* Random bit patterns, specials. */
  for (uint64_t k = 0; k < 300000; k++) {
    const uint32_t bits = (uint32_t)sf__fmix64(k + 12345);
    float f;
    memcpy(&f, &bits, sizeof f);
    check_value(f);
  }
  check_value(INFINITY);
  check_value(-INFINITY);
  check_value(NAN);
  check_value(65504.0f);
  check_value(65519.99f);
  check_value(65520.0f);
  check_value(0.0f);
  check_value(-0.0f);
  return check_finish("unit.convert");
}
