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
  int channels;
  int ngroups;
  int groups[SLABFEED_MAX_VECTORS][3];
  slabfeed_dtype dtype;
  slabfeed_out_layout layout;
} sf__xform;

/* Elements of one transformed sample (channels * crop volume). */
int64_t sf__xform_elems(const sf__xform *x);

/* Host reference. in: staged crop [channels][ext0][ext1][ext2] floats;
 * out: one sample of the batch in x->layout and x->dtype, for symmetry g. */
void sf__transform_ref(const sf__xform *x, int g, const float *in, void *out);

#ifdef SF_HAVE_CUDA
struct sf__kparams;
/* Launch parameters of the CUDA kernel for symmetry g (transform_gpu.h). */
void sf__kparams_make(const sf__xform *x, int g, struct sf__kparams *k);
#endif

#endif
