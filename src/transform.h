/* The crop transform: symmetry on the spatial axes, vector groups, dtype,
 * output layout. transform.c is the reference on the host; transform.cu the
 * fused CUDA kernel that must match it bit for bit. */
#ifndef SF_TRANSFORM_H
#define SF_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "slabfeed.h"

typedef struct sf_xform {
  int64_t ext[3]; /* crop extents of the staged input (z,y,x) */
  int channels;
  int ngroups;
  int groups[SF_MAX_VECTORS][3];
  sf_dtype dtype;
  sf_out_layout layout;
} sf_xform;

/* Elements of one transformed sample (channels * crop volume). */
int64_t sf_xform_elems(const sf_xform *x);

/* Host reference. in: staged crop [channels][ext0][ext1][ext2] floats;
 * out: one sample of the batch in x->layout and x->dtype, for symmetry g. */
void sf_transform_ref(const sf_xform *x, int g, const float *in, void *out);

#ifdef SF_HAVE_CUDA
struct sf_kparams;
/* Launch parameters of the CUDA kernel for symmetry g (transform_gpu.h). */
void sf_kparams_make(const sf_xform *x, int g, struct sf_kparams *k);
#endif

#endif
