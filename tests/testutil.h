/* Helpers shared by the MPI tests: file generation, an independent serial
 * reader of whole datasets (plain HDF5, no slabfeed code), the usual loader
 * config of a generated file and Pearson's chi-square statistic. */
#ifndef SF_TESTS_TESTUTIL_H
#define SF_TESTS_TESTUTIL_H

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "slabfeed_tools.h"

/* A whole dataset read serially, in the file's own layout. */
typedef struct whole {
  float *v;
  int64_t dims[4];
  int cl; /* channels-last */
} whole;

static inline int whole_read(const char *path, const char *name, int cl,
                             whole *w)
{
  memset(w, 0, sizeof *w);
  w->cl = cl;
  const hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = f < 0 ? -1 : H5Dopen2(f, name, H5P_DEFAULT);
  const hid_t s = d < 0 ? -1 : H5Dget_space(d);
  hsize_t dims[4];
  int ok = s >= 0 && H5Sget_simple_extent_dims(s, dims, NULL) == 4;
  if (ok) {
    size_t n = 1;
    for (int a = 0; a < 4; a++)
      n *= (size_t)(w->dims[a] = (int64_t)dims[a]);
    w->v = malloc(n * sizeof(float));
    ok = w->v != NULL &&
         H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, w->v) >= 0;
  }
  if (s >= 0)
    H5Sclose(s);
  if (d >= 0)
    H5Dclose(d);
  if (f >= 0)
    H5Fclose(f);
  return ok ? 0 : -1;
}

/* Value of channel c at (z,y,x) (inside the box). */
static inline float whole_at(const whole *w, int64_t c, int64_t z, int64_t y,
                             int64_t x)
{
  const int64_t *d = w->dims;
  if (w->cl)
    return w->v[((z * d[1] + y) * d[2] + x) * d[3] + c];
  return w->v[((c * d[1] + z) * d[2] + y) * d[3] + x];
}

/* The permutations of (0,1,2) in lexicographic order (symmetry id g:
 * sym_perms[g % 6], axis flips g / 6). */
static const int sym_perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

/* The value of output channel k at output position i of the crop of edge
 * crop at origin o (periodic in the box N) under symmetry g, the
 * conventions written out: j[perm[a]] = flip_a ? c - 1 - i[a] : i[a]; a
 * vector component k_a takes the component k_perm[a] of its group, its
 * sign flipped with axis a. The channel read goes to *src. */
static inline float sym_value(const whole *w, const int64_t N[3],
                              const int64_t crop[3], const int (*groups)[3],
                              int ngroups, int k, const int64_t i[3],
                              const int64_t o[3], int g, int *src)
{
  const int *perm = sym_perms[g % 6];
  const int f = g / 6;
  int64_t j[3];
  for (int a = 0; a < 3; a++)
    j[perm[a]] = (f >> a & 1) ? crop[perm[a]] - 1 - i[a] : i[a];
  *src = k;
  float s = 1.0f;
  for (int v = 0; v < ngroups; v++)
    for (int a = 0; a < 3; a++)
      if (groups[v][a] == k) {
        *src = groups[v][perm[a]];
        s = (f >> a & 1) ? -1.0f : 1.0f;
      }
  return s * whole_at(w, *src, (o[0] + j[0]) % N[0], (o[1] + j[1]) % N[1],
                      (o[2] + j[2]) % N[2]);
}

/* Voxels of sample i of the float32 NCDHW tensor t (its C channels) that
 * differ, bit for bit, from the crop of edge `edge` at origin o of w (box
 * N) under symmetry g (sym_value); adds the voxels compared to *checked
 * and describes the first mismatch in why[len] (left as it was when
 * none). */
static inline int64_t crop_mismatches(const slabfeed_tensor *t, int i, int C,
                                      const whole *w, const int64_t N[3],
                                      const int64_t edge[3],
                                      const int (*groups)[3], int ngroups,
                                      const int64_t o[3], int g,
                                      int64_t *checked, char *why, size_t len)
{
  int64_t e[3], bad = 0;
  for (int a = 0; a < 3; a++)
    e[a] = edge[sym_perms[g % 6][a]];
  const float *x = (const float *)t->data;
  for (int k = 0; k < C; k++)
    for (int64_t i0 = 0; i0 < e[0]; i0++)
      for (int64_t i1 = 0; i1 < e[1]; i1++)
        for (int64_t i2 = 0; i2 < e[2]; i2++) {
          const int64_t ii[3] = {i0, i1, i2};
          int src;
          const float want =
              sym_value(w, N, edge, groups, ngroups, k, ii, o, g, &src);
          const float have = x[i * t->strides[0] + k * t->strides[1] +
                               i0 * t->strides[2] + i1 * t->strides[3] + i2];
          (*checked)++;
          if (memcmp(&want, &have, sizeof want) != 0 && bad++ == 0)
            snprintf(why, len,
                     "sample %d ch %d (%lld,%lld,%lld) g %d origin "
                     "(%lld,%lld,%lld): %g, want %g",
                     i, k, (long long)i0, (long long)i1, (long long)i2, g,
                     (long long)o[0], (long long)o[1], (long long)o[2], have,
                     want);
        }
  return bad;
}

/* The bits of a float (bit-for-bit comparisons that tell -0 from 0 and
 * compare NaNs). */
static inline uint32_t f32_bits(float v)
{
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

/* Writes `name` into the open file f with the plain HDF5 API: (4, n0, n1,
 * n2) float32, value i (in C order) (k * 1000000 + i) * scale: distinct
 * values per seed k, exact in float32 for the tests' boxes. */
static inline void put_f32x4(hid_t f, const char *name, const int64_t n[3],
                             int k, float scale)
{
  const hsize_t dims[4] = {4, (hsize_t)n[0], (hsize_t)n[1], (hsize_t)n[2]};
  const size_t count = 4 * (size_t)(n[0] * n[1] * n[2]);
  float *b = malloc(count * sizeof *b);
  CHECK(b != NULL, "allocate %zu floats for %s", count, name);
  if (b == NULL)
    return;
  for (size_t i = 0; i < count; i++)
    b[i] = (float)(k * 1000000 + (int64_t)i) * scale;
  const hid_t s = H5Screate_simple(4, dims, NULL);
  const hid_t d = H5Dcreate2(f, name, H5T_IEEE_F32LE, s, H5P_DEFAULT,
                             H5P_DEFAULT, H5P_DEFAULT);
  CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                           b) >= 0,
        "write %s", name);
  H5Dclose(d);
  H5Sclose(s);
  free(b);
}

/* Options of a pair of grids as the pair tests use them: `input` of
 * `path` and `target`, channels-first, a cubic crop with a pad, channels
 * 1-3 a vector group of both, batch and seed given; scale_factor and
 * coarsen_factor as given (1: one grid). */
static inline void pair_config(slabfeed_config *c, const char *path,
                               const char *input, const char *target, int scale,
                               int coarsen, int crop, int pad, int batch,
                               uint64_t seed)
{
  static const int vg[1][3] = {{1, 2, 3}};
  slabfeed_config_init(c);
  c->path = path;
  c->input = input;
  c->target = target;
  c->layout = SLABFEED_LAYOUT_CF;
  c->crop[0] = c->crop[1] = c->crop[2] = crop;
  c->pad = pad;
  c->scale_factor = scale;
  c->coarsen_factor = coarsen;
  c->batch = batch;
  c->seed = seed;
  c->n_input_vectors = c->n_target_vectors = 1;
  memcpy(c->input_vectors, vg, sizeof vg);
  memcpy(c->target_vectors, vg, sizeof vg);
}

/* Generates a pair of grids (collectively, replacing an earlier file):
 * input `in` (4 channels on box n) and target `tg` (4 channels on n x
 * scale / coarsen), content index or field, seed 5. */
static inline void generate_pair(const char *path, const int64_t n[3],
                                 const char *in, const char *tg, int scale,
                                 int coarsen, int field)
{
  slabfeed_gen_config g;
  slabfeed_gen_config_init(&g);
  g.path = path;
  g.input = in;
  g.target = tg;
  memcpy(g.shape, n, sizeof g.shape);
  g.input_channels = g.target_channels = 4;
  g.content = field ? SLABFEED_CONTENT_FIELD : SLABFEED_CONTENT_INDEX;
  g.seed = 5;
  g.scale_factor = scale;
  g.coarsen_factor = coarsen;
  g.overwrite = 1;
  char err[1024];
  CHECK(slabfeed_generate(MPI_COMM_WORLD, &g, err, sizeof err) == SLABFEED_OK,
        "generate %s (scale %d, coarsen %d): %s", path, scale, coarsen, err);
}

static inline void whole_free(whole *w)
{
  free(w->v);
}

/* Generates a test file collectively; fails the test on error. chunked:
 * 0 contiguous, 1 chunks of 4 x 5 x 3 voxels, 2 chunks of 3 planes. */
static inline int make_file(const char *path, int64_t Z, int64_t Y, int64_t X,
                            slabfeed_file_layout layout, int chunked, int f16,
                            int with_target)
{
  slabfeed_gen_config g;
  slabfeed_gen_config_init(&g);
  g.overwrite = 1; /* a rerun regenerates */
  g.path = path;
  g.shape[0] = Z, g.shape[1] = Y, g.shape[2] = X;
  g.layout = layout;
  /* chunked 1: chunks of 4 x 5 x 3 (cut at the edges); 2: of 3 whole
   * planes. */
  g.chunked = chunked != 0;
  g.chunk[0] = chunked == 2 ? 3 : 4;
  g.chunk[1] = chunked == 2 ? Y : 5;
  g.chunk[2] = chunked == 2 ? X : 3;
  g.float16 = f16;
  if (!with_target)
    g.target = NULL;
  char err[1024];
  const slabfeed_status st =
      slabfeed_generate(MPI_COMM_WORLD, &g, err, sizeof err);
  CHECK(st == SLABFEED_OK, "generate %s: %s", path, err);
  return st == SLABFEED_OK ? 0 : -1;
}

/* The config of a generated file's input + target (Nbody, Hydro): cubic
 * crop of edge `crop`, batch 2, the rest the defaults. */
static inline void base_config(slabfeed_config *c, const char *path,
                               int64_t crop)
{
  slabfeed_config_init(c);
  c->path = path;
  c->input = "Nbody";
  c->target = "Hydro";
  c->crop[0] = c->crop[1] = c->crop[2] = crop;
  c->batch = 2;
}

/* Pearson's statistic of `bins` counts of `total` draws against a uniform
 * expectation. */
static inline double chi2(const uint64_t *count, int bins, uint64_t total)
{
  const double e = (double)total / bins;
  double x = 0;
  for (int b = 0; b < bins; b++)
    x += ((double)count[b] - e) * ((double)count[b] - e) / e;
  return x;
}

/* An open that must fail on every rank alike (any status), its message
 * containing n1 and (unless NULL) n2; collective. Prints the message on
 * rank 0. */
static inline slabfeed_status expect_refused(const slabfeed_config *c,
                                             const char *n1, const char *n2,
                                             const char *what)
{
  char err[1024] = "";
  slabfeed_loader *l = NULL;
  const slabfeed_status st =
      slabfeed_open(MPI_COMM_WORLD, c, &l, err, sizeof err);
  int lo = st, hi = st, rank = 0;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  CHECK(st != SLABFEED_OK && lo == hi && strstr(err, n1) != NULL &&
            (n2 == NULL || strstr(err, n2) != NULL),
        "%s: status %s, message '%s' (want '%s' and '%s' on every rank)", what,
        slabfeed_status_name(st), err, n1, n2 != NULL ? n2 : "");
  if (rank == 0)
    printf("  %-26s -> %s\n", what, err);
  slabfeed_close(l);
  return st;
}

/* An open that must fail with SLABFEED_ERR_ARG on every rank alike, its
 * message containing `needle`; collective. Prints the message on rank 0. */
static inline void expect_open_refused(const slabfeed_config *c,
                                       const char *needle, const char *what)
{
  const int before = check_failures;
  const slabfeed_status st = expect_refused(c, needle, NULL, what);
  CHECK(st == SLABFEED_ERR_ARG || check_failures > before,
        "%s: status %s, want SLABFEED_ERR_ARG", what, slabfeed_status_name(st));
}

/* Generates the index-content file `path` of box N (4 + 5 channels,
 * collectively, replacing an earlier one) and reads its two datasets
 * whole into w[2] with plain HDF5. */
static inline void generate_and_read(const char *path, const int64_t N[3],
                                     whole w[2])
{
  slabfeed_gen_config g;
  slabfeed_gen_config_init(&g);
  g.overwrite = 1; /* a rerun regenerates */
  g.path = path;
  g.shape[0] = N[0], g.shape[1] = N[1], g.shape[2] = N[2];
  char err[1024];
  CHECK(slabfeed_generate(MPI_COMM_WORLD, &g, err, sizeof err) == SLABFEED_OK,
        "generate: %s", err);
  CHECK(whole_read(path, "Nbody", 0, &w[0]) == 0 &&
            whole_read(path, "Hydro", 0, &w[1]) == 0,
        "read %s", path);
}

/* Rank 0 writes `text` to path; every rank returns after it is there. */
static inline void write_text(const char *path, const char *text)
{
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "write %s", path);
    if (f != NULL) {
      fputs(text, f);
      fclose(f);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Dump files (slabfeed-dump), read back by the tests. */
/* Reads a whole dataset; mtype < 0 reads the stored bits as they are. */
static inline int read_all(hid_t f, const char *name, hid_t mtype, void *buf)
{
  const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  const hid_t ft = d < 0 ? -1 : H5Dget_type(d);
  const int rc = d < 0 || H5Dread(d, mtype < 0 ? ft : mtype, H5S_ALL, H5S_ALL,
                                  H5P_DEFAULT, buf) < 0;
  if (ft >= 0)
    H5Tclose(ft);
  if (d >= 0)
    H5Dclose(d);
  return rc;
}

/* A string attribute of the file into buf ("" when missing). */
static inline void read_str(hid_t f, const char *name, char *buf, size_t len)
{
  buf[0] = 0;
  const hid_t a = H5Aopen(f, name, H5P_DEFAULT);
  if (a < 0)
    return;
  const hid_t t = H5Aget_type(a);
  if (H5Tget_class(t) == H5T_STRING && H5Tget_size(t) <= len)
    H5Aread(a, t, buf);
  H5Tclose(t);
  H5Aclose(a);
  buf[len - 1] = 0;
}

#endif
