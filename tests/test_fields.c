/* mpi.fields: the input and the target as lists of fields (datasets of
 * the volume's file, or of files of their own), 3-D scalar datasets, on
 * 1-3 ranks and rank-per-node; files written here with plain HDF5.
 *  - A suite of two volumes: each volume file holds a scalar `density`
 *    (Z,Y,X), a channels-first `velocity` (3,Z,Y,X) and a channels-last
 *    `extra` (Z,Y,X,2); the target's first field `dm` lives in files of
 *    its own (a glob pattern, matched to the volumes in sorted order).
 *    input = "density,velocity" (4 channels, velocity a vector group 1,2,3),
 *    target = "dm@<pattern>,extra" (3 channels). Every voxel of every
 *    sample, input and target, all symmetries, against the datasets read
 *    here and concatenated here, bit for bit; the same crops as one 4-D
 *    dataset of those channels written here (the same stream, the same
 *    bits) and the same bytes held.
 *  - Options by field (input_vector_fields, one normalisation entry per
 *    field) give the bits of the same options by channel; refusals name
 *    the field (not a vector of 3 channels, not a field of the list).
 *  - A field's files named on manifest lines (dm@{dmf}, relative to the
 *    manifest): the pattern's batches bit for bit, parameters from the
 *    same lines; a line without the column refused naming it.
 *  - The reference reader takes a list of its file's datasets.
 *  - Refusals, on every rank alike and naming field, file and shapes:
 *    fields of different grids, a field pattern with the wrong number of
 *    files, a missing dataset in a field's own file, an empty field, a
 *    field file missing on one rank only. */
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static int rank, size;
static char dir[256];
#define NV 2
static const int64_t vshape[NV][3] = {{12, 10, 16}, {10, 10, 16}};

static float value(int field, int c, int v, int64_t z, int64_t y, int64_t x)
{
  return (float)(field * 100000 + c * 10000 + v * 5000 + z * 300 + y * 20 + x) *
         0.25f;
}

/* A dataset of `rank4` 3 (Z,Y,X), 4 CF (C,Z,Y,X) or -4 CL (Z,Y,X,C). */
static void put(hid_t f, const char *name, int kind, int C, int field, int v,
                const int64_t n[3])
{
  hsize_t dims[4];
  const int nd = kind == 3 ? 3 : 4;
  if (kind == 3) {
    dims[0] = (hsize_t)n[0], dims[1] = (hsize_t)n[1], dims[2] = (hsize_t)n[2];
  } else if (kind == 4) {
    dims[0] = (hsize_t)C;
    for (int a = 0; a < 3; a++)
      dims[a + 1] = (hsize_t)n[a];
  } else {
    for (int a = 0; a < 3; a++)
      dims[a] = (hsize_t)n[a];
    dims[3] = (hsize_t)C;
  }
  const size_t count = (size_t)C * (size_t)(n[0] * n[1] * n[2]);
  float *buf = malloc(count * sizeof *buf);
  for (int c = 0; c < C; c++)
    for (int64_t z = 0; z < n[0]; z++)
      for (int64_t y = 0; y < n[1]; y++)
        for (int64_t x = 0; x < n[2]; x++) {
          const size_t at =
              kind == -4 ? (size_t)(((z * n[1] + y) * n[2] + x) * C + c)
                         : (size_t)(((c * n[0] + z) * n[1] + y) * n[2] + x);
          buf[at] = value(field, c, v, z, y, x);
        }
  const hid_t s = H5Screate_simple(nd, dims, NULL);
  const hid_t d = H5Dcreate2(f, name, H5T_IEEE_F32LE, s, H5P_DEFAULT,
                             H5P_DEFAULT, H5P_DEFAULT);
  CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                           buf) >= 0,
        "write %s", name);
  H5Dclose(d);
  H5Sclose(s);
  free(buf);
}

/* The files of volume v: vol_v.h5 (density, velocity, extra, and the
 * concatenations `in4` (4,Z,Y,X) and `tg3` (3,Z,Y,X) for the comparison),
 * dm/dm_v.h5 (dm). */
static void write_volume(int v)
{
  char p[512];
  const int64_t *n = vshape[v];
  snprintf(p, sizeof p, "%s/vol_%d.h5", dir, v);
  hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  put(f, "density", 3, 1, 0, v, n);
  put(f, "velocity", 4, 3, 1, v, n);
  put(f, "extra", -4, 2, 2, v, n);
  put(f, "bad_grid", 3, 1, 5, v, (const int64_t[3]){n[0], n[1], n[2] - 1});
  /* in4 = density ++ velocity; tg3 = dm ++ extra: channel c of field F
   * has value(F, c', ...) with c' its channel in F. */
  const size_t vox = (size_t)(n[0] * n[1] * n[2]);
  float *b4 = malloc(4 * vox * sizeof *b4), *b3 = malloc(3 * vox * sizeof *b3);
  for (size_t i = 0; i < vox; i++) {
    const int64_t z = (int64_t)(i / (size_t)(n[1] * n[2])),
                  y = (int64_t)(i / (size_t)n[2] % (size_t)n[1]),
                  x = (int64_t)(i % (size_t)n[2]);
    b4[i] = value(0, 0, v, z, y, x);
    for (int c = 0; c < 3; c++)
      b4[(1 + (size_t)c) * vox + i] = value(1, c, v, z, y, x);
    b3[i] = value(3, 0, v, z, y, x);
    for (int c = 0; c < 2; c++)
      b3[(1 + (size_t)c) * vox + i] = value(2, c, v, z, y, x);
  }
  const hsize_t d4[4] = {4, (hsize_t)n[0], (hsize_t)n[1], (hsize_t)n[2]};
  const hsize_t d3[4] = {3, (hsize_t)n[0], (hsize_t)n[1], (hsize_t)n[2]};
  const float *bufs[2] = {b4, b3};
  const hsize_t *dims[2] = {d4, d3};
  const char *names[2] = {"in4", "tg3"};
  for (int k = 0; k < 2; k++) {
    const hid_t s = H5Screate_simple(4, dims[k], NULL);
    const hid_t d = H5Dcreate2(f, names[k], H5T_IEEE_F32LE, s, H5P_DEFAULT,
                               H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, bufs[k]);
    H5Dclose(d);
    H5Sclose(s);
  }
  free(b4);
  free(b3);
  H5Fclose(f);
  snprintf(p, sizeof p, "%s/dm/dm_%d.h5", dir, v);
  f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  put(f, "dm", 3, 1, 3, v, n);
  H5Fclose(f);
}

static const int vin[1][3] = {{1, 2, 3}};

static void config(slabfeed_config *c, const char *spec, const char *input,
                   const char *target)
{
  slabfeed_config_init(c);
  c->path = spec;
  c->input = input;
  c->target = target;
  c->crop[0] = c->crop[1] = c->crop[2] = 5; /* layout auto: per field */
  c->batch = 3;
  c->seed = 21;
  c->n_input_vectors = 1;
  memcpy(c->input_vectors, vin, sizeof vin);
}

/* The fields against the values written, and against the concatenation
 * stored as one dataset: the same bits, batch by batch. */
static void check_stream(const char *spec, const char *target)
{
  slabfeed_config a, b;
  config(&a, spec, "density, velocity", target);
  config(&b, spec, "in4", "tg3");
  slabfeed_loader *la = NULL, *lb = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &a, &la, err, sizeof err) == SLABFEED_OK,
        "open fields: %s", err);
  CHECK(slabfeed_open(MPI_COMM_WORLD, &b, &lb, err, sizeof err) == SLABFEED_OK,
        "open 4-D: %s", err);
  if (la == NULL || lb == NULL) {
    slabfeed_close(la);
    slabfeed_close(lb);
    return;
  }
  int64_t bad = 0, checked = 0;
  for (int s = 0; s < 40; s++) {
    slabfeed_batch x = SLABFEED_BATCH_INIT, y = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(la, &x, NULL) == SLABFEED_OK &&
              slabfeed_next(lb, &y, NULL) == SLABFEED_OK,
          "next: %s", slabfeed_last_error(la));
    CHECK(x.input.shape[1] == 4 && x.target.shape[1] == 3,
          "channels %lld + %lld", (long long)x.input.shape[1],
          (long long)x.target.shape[1]);
    CHECK(
        memcmp(x.input.data, y.input.data, 3 * 4 * 125 * sizeof(float)) == 0 &&
            memcmp(x.target.data, y.target.data, 3 * 3 * 125 * sizeof(float)) ==
                0 &&
            memcmp(x.origin, y.origin, 3 * 3 * sizeof(int64_t)) == 0,
        "step %d: fields differ from one dataset of their channels", s);
    for (int i = 0; i < 3; i++) {
      const int v = x.volume[i], g = x.symmetry[i];
      const int64_t *o = &x.origin[3 * i];
      for (int d = 0; d < 2; d++) {
        const slabfeed_tensor *t = d == 0 ? &x.input : &x.target;
        const int C = d == 0 ? 4 : 3;
        for (int k = 0; k < C; k++)
          for (int64_t i0 = 0; i0 < 5; i0++)
            for (int64_t i1 = 0; i1 < 5; i1++)
              for (int64_t i2 = 0; i2 < 5; i2++) {
                /* The symmetry written out (as sym_value), on values. */
                const int *perm = sym_perms[g % 6];
                const int f = g / 6;
                const int64_t ii[3] = {i0, i1, i2};
                int64_t j[3];
                for (int q = 0; q < 3; q++)
                  j[perm[q]] = (f >> q & 1) ? 4 - ii[q] : ii[q];
                int src = k;
                float sign = 1.0f;
                if (d == 0 && k >= 1)
                  for (int q = 0; q < 3; q++)
                    if (1 + q == k) {
                      src = 1 + perm[q];
                      sign = (f >> q & 1) ? -1.0f : 1.0f;
                    }
                int64_t pz = (o[0] + j[0]) % vshape[v][0],
                        py = (o[1] + j[1]) % vshape[v][1],
                        px = (o[2] + j[2]) % vshape[v][2];
                const float want =
                    d == 0
                        ? sign * (src == 0 ? value(0, 0, v, pz, py, px)
                                           : value(1, src - 1, v, pz, py, px))
                        : (src == 0 ? value(3, 0, v, pz, py, px)
                                    : value(2, src - 1, v, pz, py, px));
                const float have =
                    ((const float *)
                         t->data)[i * t->strides[0] + k * t->strides[1] +
                                  i0 * t->strides[2] + i1 * t->strides[3] + i2];
                checked++;
                if (want != have && bad++ < 5)
                  CHECK(0, "step %d sample %d v%d d%d ch %d g %d: %g want %g",
                        s, i, v, d, k, g, have, want);
              }
      }
    }
  }
  slabfeed_stats sa = SLABFEED_STATS_INIT, sb = SLABFEED_STATS_INIT;
  slabfeed_stats_get(la, &sa);
  slabfeed_stats_get(lb, &sb);
  CHECK(sa.slab_bytes == sb.slab_bytes,
        "fields hold %llu bytes, one dataset of their channels %llu",
        (unsigned long long)sa.slab_bytes, (unsigned long long)sb.slab_bytes);
  CHECK(bad == 0, "%lld of %lld voxels differ", (long long)bad,
        (long long)checked);
  if (rank == 0)
    printf("  fields: %lld voxels checked on rank 0, %llu slab bytes (one "
           "4-D dataset: %llu)\n",
           (long long)checked, (unsigned long long)sa.slab_bytes,
           (unsigned long long)sb.slab_bytes);
  slabfeed_close(la);
  slabfeed_close(lb);
}

/* Options given by field: input_vector_fields "velocity" and one
 * normalisation entry per field give the same bits, batch by batch, as
 * the vector group 1,2,3 and one entry per channel; refusals name the
 * field. */
static void check_by_field(const char *spec, const char *target)
{
  slabfeed_config a, b;
  config(&a, spec, "density,velocity", target);
  config(&b, spec, "density,velocity", target);
  a.n_input_vectors = 0;
  a.input_vector_fields = "velocity";
  const slabfeed_norm dens = {.log = 1, .a = 1.0f, .shift = 0.5f, .scale = 2},
                      vel = {.scale = 3}, dm = {.shift = 1, .scale = 2},
                      extra = {.scale = 5};
  a.n_input_norm = 2;
  a.input_norm[0] = dens;
  a.input_norm[1] = vel;
  a.n_target_norm = 2;
  a.target_norm[0] = dm;
  a.target_norm[1] = extra;
  b.n_input_norm = 4;
  b.input_norm[0] = dens;
  b.input_norm[1] = b.input_norm[2] = b.input_norm[3] = vel;
  b.n_target_norm = 3;
  b.target_norm[0] = dm;
  b.target_norm[1] = b.target_norm[2] = extra;
  slabfeed_loader *la = NULL, *lb = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &a, &la, err, sizeof err) == SLABFEED_OK,
        "open by field: %s", err);
  CHECK(slabfeed_open(MPI_COMM_WORLD, &b, &lb, err, sizeof err) == SLABFEED_OK,
        "open by channel: %s", err);
  slabfeed_config r;
  slabfeed_config_init(&r);
  CHECK(la != NULL && slabfeed_loader_config(la, &r) == SLABFEED_OK &&
            r.n_input_vectors == 1 && r.input_vectors[0][0] == 1 &&
            r.input_vectors[0][1] == 2 && r.input_vectors[0][2] == 3 &&
            r.n_input_norm == 4 && r.n_target_norm == 3 &&
            r.input_norm[3].scale == 3 && r.target_norm[2].scale == 5 &&
            r.input_vector_fields != NULL && r.input_vector_fields[0] == '\0',
        "the loader's options by channel: %d groups, %d + %d norms",
        r.n_input_vectors, r.n_input_norm, r.n_target_norm);
  int differ = 0;
  for (int s = 0; s < 20 && la != NULL && lb != NULL; s++) {
    slabfeed_batch x = SLABFEED_BATCH_INIT, y = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(la, &x, NULL) == SLABFEED_OK &&
              slabfeed_next(lb, &y, NULL) == SLABFEED_OK,
          "next: %s", slabfeed_last_error(la));
    differ += memcmp(x.input.data, y.input.data, 3 * 4 * 125 * 4) != 0 ||
              memcmp(x.target.data, y.target.data, 3 * 3 * 125 * 4) != 0;
  }
  CHECK(differ == 0,
        "options by field: %d of 20 batches differ from the "
        "same options by channel",
        differ);
  slabfeed_close(la);
  slabfeed_close(lb);
  config(&a, spec, "density,velocity", target);
  a.n_input_vectors = 0;
  a.input_vector_fields = "density";
  expect_refused(&a, "input_vector_fields: field 'density' of '",
                 "has 1 channels; a vector field has 3", "scalar vector field");
  a.input_vector_fields = "velocity,speed";
  expect_refused(&a,
                 "input_vector_fields names 'speed', which is not a "
                 "field of the input 'density,velocity'",
                 NULL, "unknown vector field");
  a.input_vector_fields = "velocity";
  a.input_vectors[0][0] = 1; /* velocity given twice: by channel, by field */
  a.n_input_vectors = 1;
  expect_refused(&a, "channel 1", NULL, "vector channel twice");
  config(&a, spec, "density,velocity", target);
  a.n_input_norm = 3;
  a.input_norm[0] = a.input_norm[1] = a.input_norm[2] = vel;
  expect_refused(&a,
                 "input_norm has 3 entries but input dataset "
                 "'density,velocity' has 4 channels: give one entry per "
                 "channel (or one per field",
                 NULL, "norm count");
  /* One entry for a single field of 3 channels is not "per field": it
   * stays refused (a slip, not a normalisation of every channel). */
  config(&a, spec, "velocity", target);
  a.n_input_vectors = 0;
  a.n_input_norm = 1;
  a.input_norm[0] = vel;
  expect_refused(&a,
                 "input_norm has 1 entries but input dataset 'velocity' "
                 "has 3 channels",
                 NULL, "one entry, one field");
  /* Vector fields differing between ranks: refused as options that differ
   * (a rank rotating velocity as scalars would deliver other crops). */
  if (size > 1) {
    config(&a, spec, "density,velocity", target);
    a.n_input_vectors = 0;
    a.input_vector_fields = rank == 0 ? "velocity" : "";
    expect_refused(&a, "the options differ between ranks", NULL,
                   "vector fields differ");
  }
  if (rank == 0)
    printf("  by field: vectors and normalisations by field equal those by "
           "channel; refusals name the field\n");
}

/* A field's files named on the manifest lines (DATASET@{COLUMN}, paths
 * relative to the manifest's folder): the same batches, bit for bit, as
 * the glob pattern naming them; a line without the column, and a text
 * column taken for a parameter, refused naming volume and column. */
static void check_manifest_fields(const char *spec, const char *target)
{
  char man[400], bad[400], mspec[420], bspec[420];
  snprintf(man, sizeof man, "%s/fields.txt", dir);
  snprintf(bad, sizeof bad, "%s/fields_bad.txt", dir);
  if (rank == 0) {
    FILE *f = fopen(man, "w"), *g = fopen(bad, "w");
    for (int v = 0; f != NULL && g != NULL && v < NV; v++) {
      fprintf(f, "vol_%d.h5 dmf=dm/dm_%d.h5 Omega_m=0.%d\n", v, v, 3 + v);
      fprintf(g, v == 1 ? "vol_%d.h5\n" : "vol_%d.h5 dmf=dm/dm_%d.h5\n", v, v);
    }
    if (f != NULL)
      fclose(f);
    if (g != NULL)
      fclose(g);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  snprintf(mspec, sizeof mspec, "@%s", man);
  snprintf(bspec, sizeof bspec, "@%s", bad);
  slabfeed_config a, b;
  config(&a, spec, "density,velocity", target);
  config(&b, mspec, "density,velocity", "dm@{dmf}, extra");
  b.params = "Omega_m";
  slabfeed_loader *la = NULL, *lb = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &a, &la, err, sizeof err) == SLABFEED_OK,
        "open pattern: %s", err);
  CHECK(slabfeed_open(MPI_COMM_WORLD, &b, &lb, err, sizeof err) == SLABFEED_OK,
        "open manifest fields: %s", err);
  int differ = 0;
  for (int s = 0; s < 20 && la != NULL && lb != NULL; s++) {
    slabfeed_batch x = SLABFEED_BATCH_INIT, y = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(la, &x, NULL) == SLABFEED_OK &&
              slabfeed_next(lb, &y, NULL) == SLABFEED_OK,
          "next: %s", slabfeed_last_error(lb));
    differ += memcmp(x.input.data, y.input.data, 3 * 4 * 125 * 4) != 0 ||
              memcmp(x.target.data, y.target.data, 3 * 3 * 125 * 4) != 0;
    for (int i = 0; i < 3; i++)
      differ +=
          y.params == NULL || y.params[i] != (y.volume[i] == 0 ? 0.3f : 0.4f);
  }
  CHECK(differ == 0,
        "manifest-named field files: %d of 20 batches differ "
        "from the pattern's (or their parameters)",
        differ);
  slabfeed_close(la);
  slabfeed_close(lb);
  config(&b, bspec, "density,velocity", "dm@{dmf},extra");
  expect_refused(&b, "target field 'dm': volume 1 '",
                 "has no manifest column dmf=FILE", "manifest without column");
  config(&b, mspec, "density,velocity", "dm@{dmf},extra");
  b.params = "dmf";
  expect_refused(&b, "manifest column 'dmf' (params) is not a number", NULL,
                 "text column as a parameter");
  if (rank == 0)
    printf("  manifest fields: the files named on the lines give the "
           "pattern's batches\n");
}

/* The reference reader: a list of its file's datasets. */
static void check_reader(void)
{
  char p[512], err[512];
  snprintf(p, sizeof p, "%s/vol_0.h5", dir);
  slabfeed_reader *r = NULL;
  CHECK(slabfeed_reader_open(p, &r, err, sizeof err) == SLABFEED_OK, "reader");
  float a[4 * 125], b[4 * 125];
  const int64_t o[3] = {9, 7, 6}, e[3] = {5, 5, 5};
  CHECK(slabfeed_reader_crop(r, "density,velocity", SLABFEED_LAYOUT_CF, o, e,
                             13, 1, vin, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW,
                             a) == SLABFEED_OK &&
            slabfeed_reader_crop(r, "in4", SLABFEED_LAYOUT_CF, o, e, 13, 1, vin,
                                 SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW,
                                 b) == SLABFEED_OK,
        "reader crops: %s", slabfeed_reader_error(r));
  CHECK(memcmp(a, b, sizeof a) == 0, "reader: fields differ from in4");
  CHECK(slabfeed_reader_crop(r, "density,dm@x.h5", SLABFEED_LAYOUT_CF, o, e, 0,
                             0, NULL, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW,
                             a) == SLABFEED_ERR_ARG,
        "reader takes a field of another file");
  slabfeed_reader_close(r);
  /* slabfeed_describe of lists: the channels concatenated. */
  slabfeed_dataset_info in = SLABFEED_DATASET_INFO_INIT,
                        tg = SLABFEED_DATASET_INFO_INIT,
                        one = SLABFEED_DATASET_INFO_INIT;
  char t[600];
  snprintf(t, sizeof t, "dm@%s/dm/dm_*.h5,extra", dir);
  CHECK(slabfeed_describe(p, "density, velocity", SLABFEED_LAYOUT_AUTO, &in,
                          err, sizeof err) == SLABFEED_OK &&
            slabfeed_describe(p, t, SLABFEED_LAYOUT_AUTO, &tg, err,
                              sizeof err) == SLABFEED_OK &&
            slabfeed_describe(p, "density", SLABFEED_LAYOUT_AUTO, &one, err,
                              sizeof err) == SLABFEED_OK,
        "describe: %s", err);
  CHECK(in.channels == 4 && tg.channels == 3 && in.shape[2] == 16 &&
            one.ndim == 3 && one.channels == 1 &&
            one.layout == SLABFEED_LAYOUT_CL && one.dims[3] == 1,
        "describe: %lld + %lld channels, scalar ndim %d channels %lld",
        (long long)in.channels, (long long)tg.channels, one.ndim,
        (long long)one.channels);
}

static void expect_open_refused_gen(const slabfeed_gen_config *g,
                                    const char *needle)
{
  char err[1024] = "";
  const slabfeed_status st =
      slabfeed_generate(MPI_COMM_WORLD, g, err, sizeof err);
  CHECK(st == SLABFEED_ERR_ARG && strstr(err, needle) != NULL,
        "generate: %s '%s' (want '%s')", slabfeed_status_name(st), err, needle);
  if (rank == 0)
    printf("  %-24s -> %s\n", "bad generator fields", err);
}

static void check_refusals(const char *spec, const char *target)
{
  slabfeed_config c;
  char t[1024];
  config(&c, spec, "density,bad_grid", target);
  expect_refused(&c, "input field 'bad_grid' in '",
                 "is 12x10x15 but field 'density'", "fields of two grids");
  snprintf(t, sizeof t, "dm@%s/dm/dm_0.h5,extra", dir);
  config(&c, spec, "density", t);
  expect_refused(&c, "target field 'dm' names 1 file",
                 "for the 2 volumes of path", "too few field files");
  snprintf(t, sizeof t, "velocity@%s/dm/dm_*.h5", dir);
  config(&c, spec, "density", t);
  expect_refused(&c, "no dataset 'velocity' in '",
                 "dm_0.h5' (its datasets: 'dm')",
                 "dataset missing in a field file");
  config(&c, spec, "density,,velocity", NULL);
  c.n_input_vectors = 0;
  expect_refused(&c, "field 1 is empty", NULL, "empty field");
  /* The volume's file missing on the last rank only: agreed. */
  char fail[64];
  snprintf(fail, sizeof fail, "volume.missing@%d", size - 1);
  config(&c, spec, "density,velocity", target);
  setenv("SLABFEED_TEST_FAIL", fail, 1);
  expect_refused(&c, "injected: the volume missing on this rank only", NULL,
                 "missing on one rank");
  /* A field's own file missing on the last rank only: agreed, named. */
  snprintf(fail, sizeof fail, "field.missing@%d", size - 1);
  setenv("SLABFEED_TEST_FAIL", fail, 1);
  char want[96];
  snprintf(want, sizeof want, "rank %d: cannot open HDF5 file '", size - 1);
  expect_refused(&c, want, "dm_0.h5': No such file or directory (injected",
                 "field file on one rank");
  unsetenv("SLABFEED_TEST_FAIL");
}

/* slabfeed_generate's fields: the same loader batches as the one dataset
 * they split (index content, one seed), and 3-D where one channel. */
static void check_gen_fields(void)
{
  char one[512], split[512], err[1024];
  snprintf(one, sizeof one, "%s/gen_one.h5", dir);
  snprintf(split, sizeof split, "%s/gen_split.h5", dir);
  for (int k = 0; k < 2; k++) {
    slabfeed_gen_config g;
    slabfeed_gen_config_init(&g);
    g.overwrite = 1; /* a rerun regenerates */
    g.path = k == 0 ? one : split;
    g.shape[0] = 12, g.shape[1] = 10, g.shape[2] = 16;
    g.layout = SLABFEED_LAYOUT_CL;
    g.chunked = k;
    if (k == 1) {
      g.input_fields = "density:1,velocity:3";
      g.target_fields = "gas:2,temperature:1,metals:2";
    }
    CHECK(slabfeed_generate(MPI_COMM_WORLD, &g, err, sizeof err) == SLABFEED_OK,
          "generate %s: %s", g.path, err);
  }
  slabfeed_dataset_info d = SLABFEED_DATASET_INFO_INIT;
  CHECK(slabfeed_describe(split, "density", SLABFEED_LAYOUT_AUTO, &d, err,
                          sizeof err) == SLABFEED_OK &&
            d.ndim == 3 && d.channels == 1,
        "generated density: %s ndim %d", err, d.ndim);
  slabfeed_config a, b;
  config(&a, one, "Nbody", "Hydro");
  config(&b, split, "density,velocity", "gas,temperature,metals");
  a.layout = b.layout = SLABFEED_LAYOUT_CL;
  slabfeed_loader *la = NULL, *lb = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &a, &la, err, sizeof err) ==
                SLABFEED_OK &&
            slabfeed_open(MPI_COMM_WORLD, &b, &lb, err, sizeof err) ==
                SLABFEED_OK,
        "open generated: %s", err);
  for (int s = 0; la != NULL && lb != NULL && s < 10; s++) {
    slabfeed_batch x = SLABFEED_BATCH_INIT, y = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(la, &x, NULL) == SLABFEED_OK &&
              slabfeed_next(lb, &y, NULL) == SLABFEED_OK,
          "next");
    CHECK(
        memcmp(x.input.data, y.input.data, 3 * 4 * 125 * sizeof(float)) == 0 &&
            memcmp(x.target.data, y.target.data, 3 * 5 * 125 * sizeof(float)) ==
                0,
        "generated fields differ from the one dataset at step %d", s);
  }
  slabfeed_close(la);
  slabfeed_close(lb);
  slabfeed_gen_config g;
  slabfeed_gen_config_init(&g);
  g.overwrite = 1;
  g.path = split;
  g.input_fields = "density:1,velocity:2";
  expect_open_refused_gen(&g, "input_fields 'density:1,velocity:2' holds 3 "
                              "channels of the 4");
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char cwd[160] = ".";
  CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
  snprintf(dir, sizeof dir, "%.160s/fields_%.16s.%d", cwd,
           argc > 1 ? argv[1] : "t", size);
  if (rank == 0) {
    char p[300];
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/dm", dir);
    mkdir(p, 0755);
    for (int v = 0; v < NV; v++)
      write_volume(v);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  char spec[600], target[600];
  snprintf(spec, sizeof spec, "%s/vol_*.h5", dir);
  snprintf(target, sizeof target, "dm@%s/dm/dm_*.h5 , extra", dir);
  check_stream(spec, target);
  check_by_field(spec, target);
  check_manifest_fields(spec, target);
  check_reader();
  check_refusals(spec, target);
  check_gen_fields();
  return check_finish("mpi.fields");
}
