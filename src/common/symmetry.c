#include "common/symmetry.h"

#include <assert.h>

const int sf__perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                             {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

void sf__sym_matrix(int g, int m[3][3])
{
  const int *perm = sf__sym_perm(g);
  const int f = sf__sym_flips(g);
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++)
      m[r][c] = 0;
  for (int a = 0; a < 3; a++)
    m[perm[a]][a] = (f >> a & 1) ? -1 : 1;
}

int sf__sym_from_matrix(const int m[3][3])
{
  int perm[3] = {-1, -1, -1}, f = 0;
  for (int a = 0; a < 3; a++)
    for (int r = 0; r < 3; r++)
      if (m[r][a] != 0) {
        perm[a] = r;
        f |= (m[r][a] < 0) << a;
      }
  for (int p = 0; p < 6; p++)
    if (sf__perms[p][0] == perm[0] && sf__perms[p][1] == perm[1] &&
        sf__perms[p][2] == perm[2])
      return f * 6 + p;
  assert(!"not a signed permutation matrix");
  return -1;
}

int sf__sym_det(int g)
{
  int m[3][3];
  sf__sym_matrix(g, m);
  return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
         m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
         m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
}

/* out2(i) = out1(M_h i) = in(M_g M_h i): the matrix of "h after g" is
 * M_g M_h. */
int sf__sym_compose(int h, int g)
{
  int a[3][3], b[3][3], m[3][3];
  sf__sym_matrix(g, a);
  sf__sym_matrix(h, b);
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++) {
      m[r][c] = 0;
      for (int k = 0; k < 3; k++)
        m[r][c] += a[r][k] * b[k][c];
    }
  return sf__sym_from_matrix(m);
}

int sf__sym_inverse(int g)
{
  int a[3][3], t[3][3];
  sf__sym_matrix(g, a);
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++)
      t[r][c] = a[c][r];
  return sf__sym_from_matrix(t);
}

void sf__sym_index_map(int g, const int64_t ext[3], int64_t out_ext[3],
                       int64_t *start, int64_t step[3])
{
  const int *perm = sf__sym_perm(g);
  const int f = sf__sym_flips(g);
  const int64_t stride[3] = {ext[1] * ext[2], ext[2], 1};
  *start = 0;
  for (int a = 0; a < 3; a++) {
    const int in_axis = perm[a];
    out_ext[a] = ext[in_axis];
    if (f >> a & 1) {
      *start += (out_ext[a] - 1) * stride[in_axis];
      step[a] = -stride[in_axis];
    } else {
      step[a] = stride[in_axis];
    }
  }
}

void sf__sym_channels(int g, int channels, int ngroups, const int (*groups)[3],
                      int *src, float *sign)
{
  const int *perm = sf__sym_perm(g);
  const int f = sf__sym_flips(g);
  for (int k = 0; k < channels; k++) {
    src[k] = k;
    sign[k] = 1.0f;
  }
  for (int v = 0; v < ngroups; v++)
    for (int a = 0; a < 3; a++) {
      src[groups[v][a]] = groups[v][perm[a]];
      sign[groups[v][a]] = (f >> a & 1) ? -1.0f : 1.0f;
    }
}
