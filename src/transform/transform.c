#include "transform/transform.h"

#include "common/convert.h"
#include "common/normf.h"
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
  const int64_t t = 2 * x->trim;
  return (int64_t)x->channels * (x->ext[0] - t) * (x->ext[1] - t) *
         (x->ext[2] - t);
}

void sf__xform_set_norm(sf__xform *x, int n, const slabfeed_norm *norm)
{
  int identity = 1;
  for (int c = 0; c < n && c < SLABFEED_MAX_CHANNELS; c++) {
    x->norm[c] = norm[c];
    identity &= sf__norm_is_identity(&norm[c]);
  }
  x->nnorm = identity ? 0 : n;
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

/* put_row with the normalisation nm applied after the sign flip (a
 * separate loop, so that the rows without one are not slowed down). */
static void put_row_norm(const float *src, int64_t step, int neg, int64_t n,
                         slabfeed_dtype d, void *out, int64_t at,
                         int64_t ostride, const slabfeed_norm *nm, float m,
                         float a)
{
  const slabfeed_norm v = *nm;
#define SF_VALUE_(i)                                                           \
  sf__aug_apply(sf__norm_apply(&v, sf__flip_sign(src[(i)*step], neg)), m, a)
  if (d == SLABFEED_DTYPE_F32) {
    float *o = (float *)out + at;
    for (int64_t i = 0; i < n; i++)
      o[i * ostride] = SF_VALUE_(i);
  } else if (d == SLABFEED_DTYPE_F16) {
    uint16_t *o = (uint16_t *)out + at;
    for (int64_t i = 0; i < n; i++)
      o[i * ostride] = sf__f32_to_f16(SF_VALUE_(i));
  } else {
    uint16_t *o = (uint16_t *)out + at;
    for (int64_t i = 0; i < n; i++)
      o[i * ostride] = sf__f32_to_bf16(SF_VALUE_(i));
  }
#undef SF_VALUE_
}

static const slabfeed_norm identity_norm = {0, 0.0f, 0.0f, 1.0f};

/* out[k][i] = flip(in[src[k]][j(i)]) per the index and channel maps of g,
 * normalised by the entry of channel src[k] when x has normalisations;
 * NCDHW rows are contiguous, NDHWC rows have stride C. */
/* The index map of g on x's staged crop, shrunk to the centre when x
 * trims: output i' is output i' + trim of the whole map. */
static void index_map(const sf__xform *x, int g, int64_t e[3], int64_t *start,
                      int64_t step[3])
{
  sf__sym_index_map(g, x->ext, e, start, step);
  for (int a = 0; a < 3; a++) {
    e[a] -= 2 * x->trim;
    *start += x->trim * step[a];
  }
}

void sf__transform_ref(const sf__xform *x, int g, const float *in, void *out)
{
  sf__transform_aug(x, g, NULL, in, out);
}

void sf__transform_aug(const sf__xform *x, int g, const float *aug,
                       const float *in, void *out)
{
  int64_t e[3], start, step[3];
  index_map(x, g, e, &start, step);
  int src[64];
  float sign[64];
  sf__sym_channels(g, x->channels, x->ngroups, (const int(*)[3])x->groups, src,
                   sign);
  const int64_t vol = e[0] * e[1] * e[2];
  const int64_t ivol = x->ext[0] * x->ext[1] * x->ext[2];
  const int64_t C = x->channels;
  const int ncdhw = x->layout == SLABFEED_OUT_NCDHW;
  for (int64_t k = 0; k < C; k++) {
    const float *chan = in + src[k] * ivol;
    for (int64_t i0 = 0; i0 < e[0]; i0++)
      for (int64_t i1 = 0; i1 < e[1]; i1++) {
        const int64_t row = start + i0 * step[0] + i1 * step[1];
        const int64_t o = (i0 * e[1] + i1) * e[2];
        if (x->nnorm > 0 || aug != NULL)
          put_row_norm(chan + row, step[2], sign[k] < 0, e[2], x->dtype, out,
                       ncdhw ? k * vol + o : o * C + k, ncdhw ? 1 : C,
                       x->nnorm > 0 ? &x->norm[src[k]] : &identity_norm,
                       aug != NULL ? aug[src[k]] : 1.0f,
                       aug != NULL ? aug[C + src[k]] : -0.0f);
        else
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
  sf__xform x = {.trim = 0};
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
  x.nnorm = 0;
  sf__transform_ref(&x, symmetry, in, out);
  return SLABFEED_OK;
}

#ifdef SF_HAVE_CUDA
#include "transform/transform_gpu.h"

void sf__kparams_make(const sf__xform *x, int g, sf__kparams *k)
{
  index_map(x, g, k->e, &k->start, k->step);
  k->vol = x->ext[0] * x->ext[1] * x->ext[2];
  k->ovol = k->e[0] * k->e[1] * k->e[2];
  k->channels = x->channels;
  k->dtype = (int)x->dtype;
  k->layout = (int)x->layout;
  sf__sym_channels(g, x->channels, x->ngroups, (const int(*)[3])x->groups,
                   k->src, k->sign);
  const int *perm = sf__sym_perm(g);
  k->q = perm[0] == 2 ? 0 : perm[1] == 2 ? 1 : 2;
  k->t1 = k->q != 2 ? k->q : 1;
  k->r = 3 - k->t1 - 2;
  /* Output channel c is normalised as its source channel. */
  k->nnorm = x->nnorm > 0 ? x->channels : 0;
  for (int c = 0; c < 64; c++)
    k->norm[c] = c < k->nnorm ? x->norm[k->src[c]] : identity_norm;
  sf__kparams_set_aug(k, x, NULL);
  k->os[0] = k->os[1] = k->os[2] = 0;
}

int sf__kparams_part(const sf__xform *x, int g, const int64_t d[3],
                     const int64_t n[3], int64_t cs, int64_t zs, int64_t ys,
                     sf__kparams *k, int64_t *out_at)
{
  sf__kparams_make(x, g, k);
  const int64_t E[3] = {k->e[0], k->e[1], k->e[2]}; /* the sample's */
  const int *perm = sf__sym_perm(g);
  const int f = sf__sym_flips(g);
  const int64_t s_in[3] = {zs, ys, 1};
  int64_t lo[3], start = 0, reach = 0;
  for (int a = 0; a < 3; a++) {
    /* Output axis a reads input axis ia, reversed where flipped; output
     * index i is the untrimmed index i + trim. */
    const int ia = perm[a];
    const int flip = f >> a & 1;
    const int64_t X = x->ext[ia], t = x->trim;
    const int64_t j0 = flip ? X - d[ia] - n[ia] : d[ia];
    int64_t i0 = j0 - t, i1 = j0 + n[ia] - t;
    i0 = i0 < 0 ? 0 : i0;
    i1 = i1 > E[a] ? E[a] : i1;
    if (i1 <= i0)
      return 0;
    lo[a] = i0;
    k->e[a] = i1 - i0;
    const int64_t u = flip ? X - 1 - (i0 + t) : i0 + t; /* staged index */
    start += (u - d[ia]) * s_in[ia];
    k->step[a] = flip ? -s_in[ia] : s_in[ia];
    reach += (n[ia] + 1) * s_in[ia];
  }
  k->start = start;
  k->vol = cs;
  k->os[0] = E[1] * E[2];
  k->os[1] = E[2];
  k->os[2] = 1;
  *out_at = (lo[0] * E[1] + lo[1]) * E[2] + lo[2];
  /* The kernel's offsets inside a channel are 32-bit (a channel's base is
   * 64-bit): the farthest voxel of one channel, and its stride. */
  if (reach >= ((int64_t)1 << 31) || zs >= ((int64_t)1 << 31) ||
      cs >= ((int64_t)1 << 31))
    return -1;
  return 1;
}

void sf__kparams_set_aug(sf__kparams *k, const sf__xform *x, const float *aug)
{
  k->naug = aug != NULL ? x->channels : 0;
  for (int c = 0; c < 64; c++) {
    k->mul[c] = c < k->naug ? aug[k->src[c]] : 1.0f;
    k->add[c] = c < k->naug ? aug[x->channels + k->src[c]] : -0.0f;
  }
}
#endif
