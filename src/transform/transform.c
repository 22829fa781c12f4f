#include "transform/transform.h"

#include "common/convert.h"
#include "common/symmetry.h"

size_t slabfeed_dtype_size(slabfeed_dtype d)
{
  switch (d) {
  case SLABFEED_DTYPE_F32:
    return 4;
  case SLABFEED_DTYPE_F16:
  case SLABFEED_DTYPE_BF16:
    return 2;
  }
  return 0;
}

int64_t sf__xform_elems(const sf__xform *x)
{
  return (int64_t)x->channels * x->ext[0] * x->ext[1] * x->ext[2];
}

/* One output row: n elements taken from src with stride `step`, sign bit
 * flipped when neg, converted to dtype and stored every `ostride`
 * elements from element `at` of out. The dtype branch sits outside the
 * element loop. */
static void put_row(const float *src, int64_t step, int neg, int64_t n,
                    slabfeed_dtype d, void *out, int64_t at, int64_t ostride)
{
  if (d == SLABFEED_DTYPE_F32) {
    float *o = (float *)out + at;
    for (int64_t i = 0; i < n; i++)
      o[i * ostride] = sf__flip_sign(src[i * step], neg);
  } else if (d == SLABFEED_DTYPE_F16) {
    uint16_t *o = (uint16_t *)out + at;
    for (int64_t i = 0; i < n; i++)
      o[i * ostride] = sf__f32_to_f16(sf__flip_sign(src[i * step], neg));
  } else {
    uint16_t *o = (uint16_t *)out + at;
    for (int64_t i = 0; i < n; i++)
      o[i * ostride] = sf__f32_to_bf16(sf__flip_sign(src[i * step], neg));
  }
}

/* out[k][i] = flip(in[src[k]][j(i)]) per the index and channel maps of g;
 * NCDHW rows are contiguous, NDHWC rows have stride C. */
void sf__transform_ref(const sf__xform *x, int g, const float *in, void *out)
{
  int64_t e[3], start, step[3];
  sf__sym_index_map(g, x->ext, e, &start, step);
  int src[64];
  float sign[64];
  sf__sym_channels(g, x->channels, x->ngroups, (const int(*)[3])x->groups, src,
                   sign);
  const int64_t vol = e[0] * e[1] * e[2];
  const int64_t C = x->channels;
  const int ncdhw = x->layout == SLABFEED_OUT_NCDHW;
  for (int64_t k = 0; k < C; k++) {
    const float *chan = in + src[k] * vol;
    for (int64_t i0 = 0; i0 < e[0]; i0++)
      for (int64_t i1 = 0; i1 < e[1]; i1++) {
        const int64_t row = start + i0 * step[0] + i1 * step[1];
        const int64_t o = (i0 * e[1] + i1) * e[2];
        put_row(chan + row, step[2], sign[k] < 0, e[2], x->dtype, out,
                ncdhw ? k * vol + o : o * C + k, ncdhw ? 1 : C);
      }
  }
}

slabfeed_status slabfeed_transform_host(const float *in, const int64_t ext[3],
                                        int channels, int symmetry, int ngroups,
                                        const int (*groups)[3],
                                        slabfeed_dtype dtype,
                                        slabfeed_out_layout out_layout,
                                        void *out)
{
  if (in == NULL || out == NULL || channels < 1 || channels > 64 ||
      symmetry < 0 || symmetry >= 48 || ngroups < 0 ||
      ngroups > SLABFEED_MAX_VECTORS || (unsigned)dtype > SLABFEED_DTYPE_BF16 ||
      (unsigned)out_layout > SLABFEED_OUT_NDHWC)
    return SLABFEED_ERR_ARG;
  if (symmetry != 0 && (ext[0] != ext[1] || ext[0] != ext[2]))
    return SLABFEED_ERR_ARG;
  sf__xform x;
  for (int a = 0; a < 3; a++) {
    if (ext[a] < 1)
      return SLABFEED_ERR_ARG;
    x.ext[a] = ext[a];
  }
  x.channels = channels;
  x.ngroups = ngroups;
  for (int v = 0; v < ngroups; v++)
    for (int a = 0; a < 3; a++) {
      if (groups[v][a] < 0 || groups[v][a] >= channels)
        return SLABFEED_ERR_ARG;
      x.groups[v][a] = groups[v][a];
    }
  x.dtype = dtype;
  x.layout = out_layout;
  sf__transform_ref(&x, symmetry, in, out);
  return SLABFEED_OK;
}

#ifdef SF_HAVE_CUDA
#include "transform/transform_gpu.h"

void sf__kparams_make(const sf__xform *x, int g, sf__kparams *k)
{
  sf__sym_index_map(g, x->ext, k->e, &k->start, k->step);
  k->vol = x->ext[0] * x->ext[1] * x->ext[2];
  k->channels = x->channels;
  k->dtype = (int)x->dtype;
  k->layout = (int)x->layout;
  sf__sym_channels(g, x->channels, x->ngroups, (const int(*)[3])x->groups,
                   k->src, k->sign);
  const int *perm = sf__sym_perm(g);
  k->q = perm[0] == 2 ? 0 : perm[1] == 2 ? 1 : 2;
  k->t1 = k->q != 2 ? k->q : 1;
  k->r = 3 - k->t1 - 2;
}
#endif
