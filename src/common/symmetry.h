/* The 48 symmetries of the cube (the DESIGN convention, see slabfeed.h).
 *
 * Element g acts on a crop as out(i) = in(j), j = M_g i in coordinates
 * centred on the crop, where M_g[perm[a]][a] = s_a (s_a = -1 when bit a of
 * f = g / 6 is set, perm = permutation g % 6). */
#ifndef SF_SYMMETRY_H
#define SF_SYMMETRY_H

#include <stdint.h>

#define SF_NSYM 48

/* Permutation p (0..5) of (0,1,2), lexicographic order. */
extern const int sf__perms[6][3];

/* perm and the flip bits of element g. */
static inline const int *sf__sym_perm(int g)
{
  return sf__perms[g % 6];
}
static inline int sf__sym_flips(int g)
{
  return g / 6;
}

/* The signed permutation matrix M_g (entries -1, 0, 1). */
void sf__sym_matrix(int g, int m[3][3]);
/* The element whose matrix is m (a signed permutation matrix). */
int sf__sym_from_matrix(const int m[3][3]);
/* Determinant of M_g: +1 for the 24 proper rotations, -1 otherwise. */
int sf__sym_det(int g);
/* The element "h after g": applying the result equals applying g to the
 * crop, then h to the output. */
int sf__sym_compose(int h, int g);
/* The inverse element. */
int sf__sym_inverse(int g);

/* Index map of g on a crop of extents ext (output extents are
 * ext[perm[a]] on axis a): source linear index of output (i0,i1,i2) is
 * start + i0*step[0] + i1*step[1] + i2*step[2], input in C order. */
void sf__sym_index_map(int g, const int64_t ext[3], int64_t out_ext[3],
                       int64_t *start, int64_t step[3]);

/* Channel map of g for vector groups: the output channel k takes input
 * channel src[k] times sign[k]. Channels outside groups map to themselves. */
void sf__sym_channels(int g, int channels, int ngroups, const int (*groups)[3],
                      int *src, float *sign);

#endif
