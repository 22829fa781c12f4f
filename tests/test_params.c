/* mpi.params: per-volume parameters (config params, params_norm).
 *  - Three volumes written here with plain serial HDF5 (not slabfeed's
 *    generator), the parameters as attributes of several kinds: a double
 *    and a float on the root group, an integer on a group (Header/...), an
 *    int64 on the dataset itself (field/box); the third volume listed in a
 *    manifest whose columns give one parameter the file lacks and replace
 *    one it has. Every sample of every batch carries the values of its own
 *    volume (slabfeed_batch.volume), normalised as (x - shift) / scale in
 *    float, bit for bit against the values the test wrote;
 *    slabfeed_volume_params agrees; a loader without params has none; a
 *    tiled pass over one volume carries that volume's row.
 *  - Refusals, on every rank alike and naming file and parameter: a
 *    missing parameter (root and group form), a string attribute, an
 *    array attribute, a missing group; bad names (empty, repeated), a
 *    params_norm of the wrong count; a manifest column that is not
 *    NAME=NUMBER or is given twice; a failure on one rank only. */
#include "testutil.h"

#include <sys/stat.h>
#include <unistd.h>

static int rank, size;
static char dir[200];

#define NV 3
#define NP 4
static const int64_t vshape[NV][3] = {{12, 10, 8}, {10, 10, 8}, {14, 10, 8}};
/* The parameters of each volume as written (vol2: Omega_m and sigma_8
 * from the manifest, 0.5 replacing the file's 9 and 0.7 the file lacks). */
static const double omega[NV] = {0.3, 0.25, 0.5};
static const float sigma8[NV] = {0.8f, 0.9f, 0.7f};
static const int redshift[NV] = {2, 0, 5};
static const int64_t box[NV] = {100, 250, 1000};
static const char *names = "Omega_m, sigma_8,Header/Redshift,field/box";
static const float shift[NP] = {0.3f, 0.0f, 1.0f, 100.0f};
static const float scale[NP] = {0.1f, 1.0f, 2.0f, 50.0f};

static void h5ok(herr_t rc, const char *what)
{
  CHECK(rc >= 0, "HDF5: %s", what);
}

static void attr(hid_t obj, const char *name, hid_t type, const void *v)
{
  const hid_t sp = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(obj, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
  h5ok(a, name);
  h5ok(H5Awrite(a, type, v), name);
  H5Aclose(a);
  H5Sclose(sp);
}

/* Volume v: dataset "field" (2, Z, Y, X) float32 and its attributes;
 * `odd` 1 adds a string attribute "label" and an array "abc" on the
 * root. Rank 0 alone, serial HDF5. */
static void write_volume(const char *path, int v, int odd)
{
  const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  h5ok(f, path);
  const int64_t *n = vshape[v];
  const hsize_t dims[4] = {2, (hsize_t)n[0], (hsize_t)n[1], (hsize_t)n[2]};
  const size_t count = 2 * (size_t)(n[0] * n[1] * n[2]);
  float *x = malloc(count * sizeof *x);
  for (size_t i = 0; i < count; i++)
    x[i] = (float)(v * 1000 + (int)(i % 997));
  const hid_t sp = H5Screate_simple(4, dims, NULL);
  const hid_t d = H5Dcreate2(f, "field", H5T_IEEE_F32LE, sp, H5P_DEFAULT,
                             H5P_DEFAULT, H5P_DEFAULT);
  h5ok(d, "field");
  h5ok(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x), "w");
  attr(d, "box", H5T_STD_I64LE, &box[v]);
  H5Dclose(d);
  H5Sclose(sp);
  free(x);
  const double om = v == 2 ? 9.0 : omega[v];
  attr(f, "Omega_m", H5T_IEEE_F64LE, &om);
  if (v != 2)
    attr(f, "sigma_8", H5T_IEEE_F32LE, &sigma8[v]);
  const hid_t g =
      H5Gcreate2(f, "Header", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  attr(g, "Redshift", H5T_STD_I32LE, &redshift[v]);
  H5Gclose(g);
  if (odd) {
    const hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 4);
    attr(f, "label", t, "abc");
    H5Tclose(t);
    const hsize_t three = 3;
    const double a3[3] = {1, 2, 3};
    const hid_t s3 = H5Screate_simple(1, &three, NULL);
    const hid_t a =
        H5Acreate2(f, "abc", H5T_IEEE_F64LE, s3, H5P_DEFAULT, H5P_DEFAULT);
    h5ok(H5Awrite(a, H5T_NATIVE_DOUBLE, a3), "abc");
    H5Aclose(a);
    H5Sclose(s3);
  }
  H5Fclose(f);
}

static void config(slabfeed_config *c, const char *spec)
{
  slabfeed_config_init(c);
  c->path = spec;
  c->input = "field";
  c->layout = SLABFEED_LAYOUT_CF;
  c->crop[0] = c->crop[1] = c->crop[2] = 4;
  c->batch = 3;
  c->seed = 5;
  c->params = names;
  c->n_params_norm = NP;
  for (int k = 0; k < NP; k++)
    c->params_norm[k] = (slabfeed_norm){0, 0, shift[k], scale[k]};
}

/* What a sample of volume v must carry: the written value, rounded to
 * float, minus shift over scale, in float. */
static float expected(int v, int k)
{
  const float x[NP] = {(float)omega[v], sigma8[v], (float)redshift[v],
                       (float)box[v]};
  return (x[k] - shift[k]) / scale[k];
}

static int same_bits(float a, float b)
{
  return memcmp(&a, &b, sizeof a) == 0;
}

/* Random crops over the three volumes: every sample's parameters. */
static void check_stream(const char *spec, const char *paths[NV])
{
  slabfeed_config c;
  config(&c, spec);
  slabfeed_loader *l = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open: %s", err);
  if (l == NULL)
    return;
  /* The loader's volume order is the spec's; its rows the values. */
  for (int v = 0; v < NV; v++) {
    char path[512];
    float row[NP + 1];
    slabfeed_volume_info(l, v, path, sizeof path, NULL);
    CHECK(strcmp(path, paths[v]) == 0, "volume %d is '%s'", v, path);
    CHECK_EQ(slabfeed_volume_params(l, v, row, NP + 1), NP, "K");
    for (int k = 0; k < NP; k++)
      CHECK(same_bits(row[k], expected(v, k)),
            "slabfeed_volume_params(%d)[%d] = %.9g, want %.9g", v, k, row[k],
            expected(v, k));
  }
  CHECK_EQ(slabfeed_volume_params(l, NV, NULL, 0), -1, "out of range");
  uint64_t seen[NV] = {0, 0, 0};
  for (int s = 0; s < 40; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(l, &b, NULL) == SLABFEED_OK, "next: %s",
          slabfeed_last_error(l));
    CHECK_EQ(b.n_params, NP, "batch.n_params");
    CHECK(b.params != NULL, "batch.params");
    if (b.params == NULL)
      break;
    for (int i = 0; i < c.batch; i++) {
      const int v = b.volume[i];
      seen[v]++;
      for (int k = 0; k < NP; k++)
        CHECK(same_bits(b.params[i * NP + k], expected(v, k)),
              "step %d sample %d (volume %d) params[%d] = %.9g, want %.9g", s,
              i, v, k, b.params[i * NP + k], expected(v, k));
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, seen, NV, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  for (int v = 0; v < NV; v++)
    CHECK(seen[v] > 0, "volume %d never drawn (%llu)", v,
          (unsigned long long)seen[v]);
  slabfeed_close(l);
}

/* Without params: no parameters; a pass over vol1: its row everywhere. */
static void check_plain_and_pass(const char *spec, const char *vol1)
{
  slabfeed_config c;
  config(&c, spec);
  c.params = NULL;
  c.n_params_norm = 0;
  slabfeed_loader *l = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open without params: %s", err);
  if (l != NULL) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(l, &b, NULL) == SLABFEED_OK, "next");
    CHECK(b.n_params == 0 && b.params == NULL, "no params: %d %p", b.n_params,
          (const void *)b.params);
    CHECK_EQ(slabfeed_volume_params(l, 0, NULL, 0), 0, "K without params");
    slabfeed_close(l);
  }
  config(&c, vol1);
  c.tile = 4;
  c.pad = 1;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open pass: %s", err);
  if (l == NULL)
    return;
  uint64_t tiles = 0;
  for (int step = 0; step < 2; step++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(l, &b, NULL) == SLABFEED_OK, "pass next");
    CHECK_EQ(b.n_params, NP, "pass n_params");
    for (int i = 0; i < b.valid && b.params != NULL; i++)
      for (int k = 0; k < NP; k++)
        CHECK(same_bits(b.params[i * NP + k], expected(1, k)),
              "pass tile %lld params[%d] = %.9g", (long long)b.sample[i], k,
              b.params[i * NP + k]);
    tiles += (uint64_t)b.valid;
  }
  CHECK(tiles > 0, "pass handed out no tile");
  slabfeed_close(l);
}

static void check_refusals(const char *spec, const char *odd)
{
  slabfeed_config c;
  char p[512], s[2048];
  config(&c, spec);
  c.params = "Omega_m,Omega_b";
  c.n_params_norm = 0;
  expect_refused(&c, "has no parameter 'Omega_b'", "vol0.h5",
                 "missing parameter");
  c.params = "Header/Omega_b";
  expect_refused(&c, "has no parameter 'Header/Omega_b'", "vol0.h5",
                 "missing in a group");
  c.params = "Nowhere/Redshift";
  expect_refused(&c, "has no parameter 'Nowhere/Redshift'", "vol0.h5",
                 "missing group");
  config(&c, odd);
  c.params = "label";
  c.n_params_norm = 0;
  expect_refused(&c, "parameter 'label'", "is a string, not one number",
                 "string attribute");
  c.params = "abc";
  expect_refused(&c, "parameter 'abc'", "an array of several values",
                 "array attribute");
  config(&c, spec);
  c.params = "Omega_m,,sigma_8";
  expect_refused(&c, "name 1 is empty", NULL, "empty name");
  c.params = "Omega_m,sigma_8,Omega_m";
  expect_refused(&c, "names 'Omega_m' twice", NULL, "repeated name");
  c.params = "Omega_m,sigma_8";
  expect_refused(&c, "params_norm has 4 entries for the 2 parameters", NULL,
                 "norm count");
  c.params = NULL;
  expect_refused(&c, "params_norm (4 entries) without params", NULL,
                 "norm without params");
  /* Manifest columns. */
  config(&c, s);
  snprintf(p, sizeof p, "%s/badcol.txt", dir);
  snprintf(s, sizeof s, "%s/vol2.h5 sigma_8=abc\n", dir);
  write_text(p, s);
  snprintf(s, sizeof s, "@%s", p);
  expect_refused(&c, "manifest column 'sigma_8' (params) is not a number", NULL,
                 "bad manifest column");
  snprintf(p, sizeof p, "%s/twice.txt", dir);
  snprintf(s, sizeof s, "%s/vol2.h5\tsigma_8=1 sigma_8=2\n", dir);
  write_text(p, s);
  snprintf(s, sizeof s, "@%s", p);
  expect_refused(&c, "column 'sigma_8' is given twice", NULL, "column twice");
  /* vol2 without its manifest lacks sigma_8. */
  snprintf(s, sizeof s, "%s/vol2.h5", dir);
  expect_refused(&c, "has no parameter 'sigma_8'", "vol2.h5",
                 "only in manifest");
  /* One rank alone fails while reading the parameters. */
  config(&c, spec);
  char fail[64];
  snprintf(fail, sizeof fail, "params@%d", size - 1);
  setenv("SLABFEED_TEST_FAIL", fail, 1);
  char want[96];
  snprintf(want, sizeof want, "rank %d: injected failure at stage 'params'",
           size - 1);
  expect_refused(&c, want, NULL, "params on one rank");
  unsetenv("SLABFEED_TEST_FAIL");
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char cwd[160] = ".";
  CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
  snprintf(dir, sizeof dir, "%.160s/params_%.16s.%d", cwd,
           argc > 1 ? argv[1] : "t", size);
  if (rank == 0)
    mkdir(dir, 0755);
  char paths[NV][512], odd[512];
  const char *pv[NV];
  for (int v = 0; v < NV; v++) {
    snprintf(paths[v], sizeof paths[v], "%s/vol%d.h5", dir, v);
    pv[v] = paths[v];
    if (rank == 0)
      write_volume(paths[v], v, 0);
  }
  snprintf(odd, sizeof odd, "%s/odd.h5", dir);
  if (rank == 0)
    write_volume(odd, 0, 1);
  /* vol2 through a manifest: its columns after blanks and a tab. */
  char man[512], spec[2048];
  snprintf(man, sizeof man, "%s/rest.txt", dir);
  snprintf(spec, sizeof spec,
           "# the third volume, with columns\n%s/vol2.h5  Omega_m=0.5\t"
           "sigma_8=0.7 \n",
           dir);
  write_text(man, spec);
  snprintf(spec, sizeof spec, "%s\n%s\n@%s", paths[0], paths[1], man);

  check_stream(spec, pv);
  check_plain_and_pass(spec, paths[1]);
  check_refusals(spec, odd);
  return check_finish("mpi.params");
}
