/* The crop transform: symmetry on the spatial axes, vector groups, dtype,
 * output layout. transform.c is the reference on the host; transform.cu the
 * fused CUDA kernel that must match it bit for bit. */
#ifndef SF_TRANSFORM_H
#define SF_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "slabfeed_tools.h"

typedef struct sf__xform {
  int64_t ext[3]; /* crop extents of the staged input (z,y,x) */
  int64_t trim;   /* voxels of the output cut on both sides of every axis:
                     the output is the centre, edge ext - 2 trim (the
                     target of a tiled pass: the tile inside its padded
                     crop; a rotation maps the centre onto itself) */
  int channels;
  int ngroups;
  int groups[SLABFEED_MAX_VECTORS][3];
  slabfeed_dtype dtype;
  slabfeed_out_layout layout;
  /* Normalisation (0.5): nnorm 0 for none, else `channels` entries, one per
   * input channel; output channel k takes the entry of the channel it is
   * read from (src[k] of the vector groups), applied after the sign flip
   * and before the conversion to dtype. Set it with sf__xform_set_norm. */
  int nnorm;
  slabfeed_norm norm[SLABFEED_MAX_CHANNELS];
} sf__xform;

/* Elements of one transformed sample (channels * output volume). */
int64_t sf__xform_elems(const sf__xform *x);

/* Sets the normalisation of x: n entries (0 or x->channels) of norm. When
 * every entry is the identity {0, *, +0, 1}, which changes no bit, none is
 * set (nnorm 0: the transform without normalisation). */
void sf__xform_set_norm(sf__xform *x, int n, const slabfeed_norm *norm);

/* Host reference. in: staged crop [channels][ext0][ext1][ext2] floats;
 * out: one sample of the batch in x->layout and x->dtype, for symmetry g:
 * out[k][i] = dtype(norm_src[k](sign[k] * in[src[k]][j(i)])), the norm
 * only when x->nnorm > 0. */
void sf__transform_ref(const sf__xform *x, int g, const float *in, void *out);

/* sf__transform_ref with the amplitude augmentation of one sample (0.7):
 * aug NULL (none) or [2][x->channels], aug[c] the factor m and
 * aug[channels + c] the offset a of the staged crop's channel c; output
 * channel k becomes sf__aug_apply(v, m, a) of its source channel src[k],
 * after the normalisation (common/normf.h). */
void sf__transform_aug(const sf__xform *x, int g, const float *aug,
                       const float *in, void *out);

#ifdef SF_HAVE_CUDA
struct sf__kparams;
/* Launch parameters of the CUDA kernel for symmetry g (transform_gpu.h),
 * without augmentation. */
void sf__kparams_make(const sf__xform *x, int g, struct sf__kparams *k);
/* Sets the augmentation of k (made by sf__kparams_make for x) to aug (as
 * sf__transform_aug; NULL: none). */
void sf__kparams_set_aug(struct sf__kparams *k, const sf__xform *x,
                         const float *aug);
/* The launch parameters for the part of x's crop that the box [d, d + n)
 * of the staged crop covers, read in place from a source whose strides in
 * floats are cs (channel), zs (plane) and ys (row), 1 along x, with the
 * part's first voxel at the launch's input pointer (0.8: slabs resident
 * in GPU memory, one pass without staging): *k as sf__kparams_make's for
 * symmetry g narrowed to the part's output box, whose first voxel's offset
 * in the sample (voxels) goes to *out_at; the output strides stay the
 * sample's. Returns 1, 0 when the part has no output voxel (trimmed
 * away), -1 when an offset inside one channel would not fit the kernel's
 * 32-bit offsets (a channel's base is 64-bit; the caller stages the crop
 * instead). */
int sf__kparams_part(const sf__xform *x, int g, const int64_t d[3],
                     const int64_t n[3], int64_t cs, int64_t zs, int64_t ys,
                     struct sf__kparams *k, int64_t *out_at);
#endif

#endif
