/* mpi.suite: datasets of several volumes (one file per simulation).
 *  - Volumes of different shapes (z, y and x), given as a path, a glob
 *    pattern and a manifest: every crop of every sample (host batches,
 *    all symmetries, vector groups) equals the crop read directly from
 *    the file of the sample's volume at the sample's origin in that
 *    volume, bit for bit, wrap-around inside the volume on every axis
 *    included (the store pads volumes of smaller y, x);
 *    loader.volume_info lists the files in the spec's order.
 *  - Volume choice: by voxel count (the default) the share of each volume
 *    follows its voxels (chi-square); "equal" and given weights likewise;
 *    held-out volumes (by index or by path) are never drawn, and take no
 *    memory (the store of the rest alone). A seek gives the same batches.
 *  - An HDF5 virtual dataset stacking the two volumes of one y, x is one
 *    volume: its crops equal the direct read of the virtual dataset.
 *  - Locality: on one node it is the stream without locality; with every
 *    rank its own node (the rpn run) each node holds whole volumes (one
 *    each here, by the documented cut rule, worked out again in
 *    node_volumes), every sample's volume is one of its rank's node, no
 *    byte comes from another node, and the crops are checked as above.
 *  - Refusals, the same on every rank and naming the file: an empty
 *    pattern, a missing file (on every rank, and on one rank only), a file
 *    listed twice (by name and through a
 *    symlink), a volume with other channels, another element type, a
 *    volume smaller than the crop in z and in y, a manifest with a blank
 *    line (relative lines are relative to the manifest's folder), bad
 *    weights or held-out indices, locality with
 *    fewer training volumes than nodes (rpn), and a tiled pass over
 *    several volumes. */
#include "testutil.h"

#include <sys/stat.h>
#include <unistd.h>

static int rank, size;
static char dir[200];

#define NV 3
/* Volume shapes: the stacked store's planes are 12 x 12 (the largest y
 * and x), every volume pads one of the axes. vol0 and vol2 share y, x. */
static const int64_t vshape[NV][3] = {{20, 12, 10}, {13, 10, 12}, {16, 12, 10}};
static const int64_t Y = 12, X = 10; /* of vol0, vol2 and the odd files */

static void gen(const char *path, int64_t Z, int64_t y, int64_t x, int chans,
                int f16, uint64_t seed)
{
  slabfeed_gen_config g;
  slabfeed_gen_config_init(&g);
  g.overwrite = 1; /* a rerun regenerates */
  g.path = path;
  g.shape[0] = Z, g.shape[1] = y, g.shape[2] = x;
  g.input_channels = chans;
  g.float16 = f16;
  g.content = SLABFEED_CONTENT_FIELD;
  g.seed = seed;
  char err[1024];
  CHECK(slabfeed_generate(MPI_COMM_WORLD, &g, err, sizeof err) == SLABFEED_OK,
        "generate %s: %s", path, err);
}

static void config(slabfeed_config *c, const char *spec, int64_t crop)
{
  base_config(c, spec, crop);
  c->n_input_vectors = 1;
  c->input_vectors[0][0] = 1, c->input_vectors[0][1] = 2,
  c->input_vectors[0][2] = 3;
  c->n_target_vectors = 1;
  c->target_vectors[0][0] = 1, c->target_vectors[0][1] = 2,
  c->target_vectors[0][2] = 3;
}

/* Every sample of `steps` batches against a direct read of its volume's
 * file; returns the samples per volume (summed over ranks) in count[]. */
static int rpn; /* every rank its own node (SLABFEED_RANK_PER_NODE) */

/* The volumes [lo, hi) of this rank's node under locality: on one node all
 * of them; with every rank its own node and one group, node r's range
 * begins at the volume start nearest r * Z / size (docs/CONVENTIONS.md,
 * the rule written out again here from the volume shapes). */
static void node_volumes(int *lo, int *hi)
{
  *lo = 0;
  *hi = NV;
  if (!rpn)
    return;
  int64_t z0[NV + 1] = {0};
  for (int v = 0; v < NV; v++)
    z0[v + 1] = z0[v] + vshape[v][0];
  int cut[NV + 1];
  cut[0] = 0;
  for (int r = 1; r <= size; r++) {
    int best = r == size ? NV : cut[r - 1] + 1;
    for (int v = cut[r - 1] + 1; r < size && v <= NV - (size - r); v++) {
      const int64_t d = z0[v] * size - z0[NV] * r,
                    b = z0[best] * size - z0[NV] * r;
      if ((d < 0 ? -d : d) < (b < 0 ? -b : b))
        best = v;
    }
    cut[r] = best;
  }
  *lo = cut[rank];
  *hi = cut[rank + 1];
}

/* Every sample of `steps` batches against a direct read of its volume's
 * file; returns the samples per volume (summed over ranks) in count[] and
 * a hash of the batches. With locality, every sample's volume must be one
 * of this rank's node and no byte may come from another node. */
static uint64_t crops_match(const char *spec, int64_t crop, int steps,
                            const char *weights, const char *held, int locality,
                            uint64_t count[NV])
{
  slabfeed_config c;
  config(&c, spec, crop);
  c.volume_weights = weights;
  c.holdout_volumes = held;
  c.locality = locality;
  c.seed = 7;
  int vlo = 0, vhi = NV;
  if (locality)
    node_volumes(&vlo, &vhi);
  char err[1024] = "";
  slabfeed_loader *l = NULL;
  slabfeed_status st = slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err);
  CHECK(st == SLABFEED_OK, "open %s: %s", weights ? weights : "", err);
  if (st != SLABFEED_OK)
    return 0;
  CHECK_EQ(slabfeed_volume_count(l), NV, "volumes");
  slabfeed_reader *ref[NV] = {NULL};
  for (int v = 0; v < NV; v++) {
    char path[512];
    int64_t shape[3];
    CHECK(slabfeed_volume_info(l, v, path, sizeof path, shape) == SLABFEED_OK,
          "volume_info %d", v);
    char want[512];
    snprintf(want, sizeof want, "%s/vol%d.h5", dir, v);
    CHECK(strcmp(path, want) == 0, "volume %d is '%s', want '%s'", v, path,
          want);
    CHECK(memcmp(shape, vshape[v], sizeof shape) == 0,
          "volume %d shape %lldx%lldx%lld", v, (long long)shape[0],
          (long long)shape[1], (long long)shape[2]);
    CHECK(slabfeed_reader_open(want, &ref[v], err, sizeof err) == SLABFEED_OK,
          "reader %s: %s", want, err);
  }
  const char *names[2] = {"Nbody", "Hydro"};
  const int64_t ch[2] = {4, 5};
  const int64_t vol = crop * crop * crop;
  float *want = malloc((size_t)(5 * vol) * sizeof *want);
  int64_t bad = 0, wrapped = 0;
  memset(count, 0, NV * sizeof *count);
  uint64_t h1 = 0, h2 = 0; /* the batches, then again after a seek */
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1)
      CHECK(slabfeed_seek(l, 0, 0) == SLABFEED_OK, "seek");
    for (int s = 0; s < steps; s++) {
      slabfeed_batch b = SLABFEED_BATCH_INIT;
      st = slabfeed_next(l, &b, NULL);
      CHECK(st == SLABFEED_OK, "next: %s", slabfeed_last_error(l));
      if (st != SLABFEED_OK)
        break;
      for (int i = 0; i < 2; i++) {
        const int v = b.volume[i];
        uint64_t *h = pass == 0 ? &h1 : &h2;
        *h = *h * 1000003u + (uint64_t)v * 7919u +
             (uint64_t)b.origin[3 * i] * 31u + (uint64_t)b.origin[3 * i + 1] +
             (uint64_t)b.symmetry[i] * 131u;
        if (pass == 1)
          continue;
        CHECK(v >= vlo && v < vhi, "volume %d (this rank's: [%d, %d))", v, vlo,
              vhi);
        if (v < 0 || v >= NV)
          continue;
        count[v]++;
        for (int a = 0; a < 3; a++) {
          wrapped += b.origin[3 * i + a] + crop > vshape[v][a];
          CHECK(b.origin[3 * i + a] >= 0 && b.origin[3 * i + a] < vshape[v][a],
                "origin %lld on axis %d outside volume %d",
                (long long)b.origin[3 * i + a], a, v);
        }
        for (int d = 0; d < 2; d++) {
          const slabfeed_tensor *t = d == 0 ? &b.input : &b.target;
          slabfeed_reader_crop(ref[v], names[d], SLABFEED_LAYOUT_AUTO,
                               &b.origin[3 * i], c.crop, b.symmetry[i], 1,
                               (const int(*)[3])c.input_vectors,
                               SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW, want);
          bad += memcmp(want, (const float *)t->data + i * ch[d] * vol,
                        (size_t)(ch[d] * vol) * sizeof(float)) != 0;
        }
      }
    }
  }
  CHECK_EQ(h1, h2, "batches after seek(0, 0) differ");
  slabfeed_stats stats = SLABFEED_STATS_INIT;
  CHECK(slabfeed_stats_get(l, &stats) == SLABFEED_OK, "stats");
  if (locality)
    CHECK_EQ(stats.bytes_remote, (uint64_t)0,
             "locality: bytes from other nodes");
  CHECK_EQ(bad, (int64_t)0, "crops differing from the direct read");
  MPI_Allreduce(MPI_IN_PLACE, count, NV, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &wrapped, 1, MPI_INT64_T, MPI_SUM,
                MPI_COMM_WORLD);
  if (rank == 0)
    printf("  %-22s samples per volume %llu %llu %llu (%lld axis wraps), "
           "%s\n",
           locality          ? "locality"
           : weights != NULL ? weights
                             : "voxels",
           (unsigned long long)count[0], (unsigned long long)count[1],
           (unsigned long long)count[2], (long long)wrapped,
           bad == 0 ? "bit for bit" : "DIFFER");
  CHECK(wrapped > 0, "no crop wrapped inside its volume: the test saw none");
  free(want);
  for (int v = 0; v < NV; v++)
    slabfeed_reader_close(ref[v]);
  slabfeed_close(l);
  return h1;
}

/* This rank's store bytes of a training loader over spec with `held`
 * held out (0 when the open fails: checked). */
static uint64_t store_bytes(const char *spec, const char *held)
{
  slabfeed_config c;
  config(&c, spec, 6);
  c.holdout_volumes = held;
  char err[1024] = "";
  slabfeed_loader *l = NULL;
  slabfeed_stats st = SLABFEED_STATS_INIT;
  const int ok =
      slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK &&
      slabfeed_stats_get(l, &st) == SLABFEED_OK;
  CHECK(ok, "open %s: %s", held != NULL ? held : "", err);
  slabfeed_close(l);
  return ok ? st.slab_bytes : 0;
}

/* A held-out volume takes no memory: holding volume 0 out stores exactly
 * what the dataset of volumes 1 and 2 stores, on every rank. Every volume
 * is stored at its own plane size: on one node (one copy of the box) the
 * ranks' stores add up to the volumes' floats, 4 + 5 channels each, not
 * to planes of the largest y and x. */
static void held_out_memory(const char *spec)
{
  char rest[600];
  snprintf(rest, sizeof rest, "%s/vol1.h5\n%s/vol2.h5", dir, dir);
  const uint64_t all = store_bytes(spec, NULL), held = store_bytes(spec, "0"),
                 two = store_bytes(rest, NULL);
  uint64_t sum = 0, want = 0;
  MPI_Allreduce(&all, &sum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  for (int v = 0; v < NV; v++)
    want += (uint64_t)(vshape[v][0] * vshape[v][1] * vshape[v][2]) * 9 * 4;
  if (!rpn)
    CHECK(sum == want,
          "store of the 3 volumes: %llu bytes over the ranks, their floats "
          "take %llu (padded to 12 x 12 planes: %llu)",
          (unsigned long long)sum, (unsigned long long)want,
          (unsigned long long)(49 * 12 * 12 * 9 * 4));
  CHECK(held == two && held < all,
        "store with volume 0 held out %llu bytes, of volumes 1 and 2 %llu, "
        "of all %llu",
        (unsigned long long)held, (unsigned long long)two,
        (unsigned long long)all);
  if (rank == 0)
    printf("  held out volume 0: store %llu bytes on rank 0 (all volumes "
           "%llu, volumes 1 and 2 alone %llu)\n",
           (unsigned long long)held, (unsigned long long)all,
           (unsigned long long)two);
}

/* The ranks split a suite of mixed y, x evenly in bytes: vol0 (20 planes
 * of 12 x 10) and wide (8 of 24 x 20, four times the plane) on one node,
 * where every rank's store is within one wide plane of 1/size of the
 * dataset (split by planes, 2 ranks would hold 1680 and 4560 floats per
 * channel, against 3360 and 2880). */
static void byte_split(void)
{
  char spec[600];
  snprintf(spec, sizeof spec, "%s/vol0.h5\n%s/wide.h5", dir, dir);
  const uint64_t mine = store_bytes(spec, NULL);
  uint64_t most = 0;
  MPI_Allreduce(&mine, &most, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  const uint64_t all = (20 * 120 + 8 * 480) * 9 * 4, plane = 480 * 9 * 4;
  if (!rpn)
    CHECK(most <= all / (uint64_t)size + plane,
          "largest store of the mixed suite %llu bytes on %d ranks; 1/%d of "
          "it is %llu, a wide plane %llu",
          (unsigned long long)most, size, size,
          (unsigned long long)(all / (uint64_t)size),
          (unsigned long long)plane);
}

/* Pearson's statistic of counts against expected shares p[]. */
static double chi2_of(const uint64_t count[NV], const double p[NV])
{
  uint64_t total = 0;
  for (int v = 0; v < NV; v++)
    total += count[v];
  double x = 0;
  for (int v = 0; v < NV; v++)
    if (p[v] > 0) {
      const double e = p[v] * (double)total;
      x += ((double)count[v] - e) * ((double)count[v] - e) / e;
    }
  return x;
}

/* An open that must fail on every rank alike with `needle` in it. */
static void refusals(const char *spec)
{
  char s[4096], p[512], q[512];
  slabfeed_config c;
  snprintf(s, sizeof s, "%s/nothing*.h5", dir);
  config(&c, s, 6);
  expect_refused(&c, "matches no file", NULL, "empty pattern");
  snprintf(s, sizeof s, "%s/vol0.h5\n%s/missing.h5", dir, dir);
  config(&c, s, 6);
  expect_refused(&c, "missing.h5", NULL, "missing file");
  snprintf(s, sizeof s, "%s/vol0.h5\n%s/vol1.h5\n%s/vol0.h5", dir, dir, dir);
  config(&c, s, 6);
  expect_refused(&c, "same file as volume 0", NULL, "listed twice");
  snprintf(p, sizeof p, "%s/link.h5", dir);
  snprintf(q, sizeof q, "%s/vol1.h5", dir);
  if (rank == 0) {
    unlink(p);
    CHECK(symlink(q, p) == 0, "symlink");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  snprintf(s, sizeof s, "%s/vol1.h5\n%s", dir, p);
  config(&c, s, 6);
  expect_refused(&c, "same file as volume 0", NULL, "twice through a link");
  snprintf(s, sizeof s, "%s\n%s/odd_chan.h5", spec, dir);
  config(&c, s, 6);
  c.n_input_vectors = 0;
  c.n_target_vectors = 0;
  expect_refused(&c, "odd_chan.h5' differs from volume 0", NULL,
                 "other channels");
  snprintf(s, sizeof s, "%s\n%s/odd_f16.h5", spec, dir);
  config(&c, s, 6);
  expect_refused(&c, "16-bit floats, not 32-bit", NULL, "other element type");
  config(&c, spec, 6);
  c.symmetries = SLABFEED_SYM_NONE;
  c.crop[0] = 14; /* vol1 has 13 planes */
  expect_refused(&c, "vol1.h5", NULL, "volume below the crop");
  config(&c, spec, 6);
  c.symmetries = SLABFEED_SYM_NONE;
  c.crop[1] = 11; /* vol1 has 10 rows, the store's planes 12 */
  expect_refused(&c, "vol1.h5", NULL, "volume's y below the crop");
  snprintf(p, sizeof p, "%s/blank.txt", dir);
  snprintf(s, sizeof s, "%s/vol0.h5\n\n%s/vol1.h5\n", dir, dir);
  write_text(p, s);
  snprintf(s, sizeof s, "@%s", p);
  config(&c, s, 6);
  expect_refused(&c, "line 2 is blank", NULL, "manifest blank line");
  /* Relative lines are relative to the manifest's folder: this one names
   * vol0 and vol2 (and is refused only for what vol0 + an odd file are). */
  snprintf(p, sizeof p, "%s/relative.txt", dir);
  write_text(p, "# a comment\nvol0.h5\nodd_chan.h5\n");
  snprintf(s, sizeof s, "@%s", p);
  config(&c, s, 6);
  c.n_input_vectors = 0;
  c.n_target_vectors = 0;
  char want_rel[600];
  snprintf(want_rel, sizeof want_rel,
           "'%s/odd_chan.h5' differs from volume 0 "
           "'%s/vol0.h5'",
           dir, dir);
  expect_refused(&c, want_rel, NULL, "manifest relative");
  /* vol1 missing on the last rank only: every rank gets the error. */
  config(&c, spec, 6);
  char fail[64];
  snprintf(fail, sizeof fail, "volume.missing@%d", size - 1);
  setenv("SLABFEED_TEST_FAIL", fail, 1);
  expect_refused(&c, "vol0.h5': No such file", NULL, "missing on one rank");
  /* The stacking by weight (before the store) failing on one rank. */
  snprintf(fail, sizeof fail, "weights@%d", size - 1);
  setenv("SLABFEED_TEST_FAIL", fail, 1);
  expect_refused(&c, "injected failure at stage 'weights'", NULL,
                 "weights on one rank");
  /* The store's plane table (before its collective calls) failing on the
   * last rank alone. */
  snprintf(fail, sizeof fail, "planes@%d", size - 1);
  setenv("SLABFEED_TEST_FAIL", fail, 1);
  char want[96];
  snprintf(want, sizeof want, "rank %d: injected failure at stage 'planes'",
           size - 1);
  expect_refused(&c, want, NULL, "plane table on one rank");
  unsetenv("SLABFEED_TEST_FAIL");
  config(&c, spec, 6);
  c.holdout_volumes = "/no/such.h5";
  expect_refused(&c, "is not the path of a volume", NULL,
                 "held out: unknown path");
  c.holdout_volumes = NULL;
  c.volume_weights = "1,2";
  expect_refused(&c, "2 entries for 3 volumes", NULL, "weights: too few");
  c.volume_weights = "1,-2,3";
  expect_refused(&c, "not a non-negative number", NULL, "weights: negative");
  c.volume_weights = NULL;
  c.holdout_volumes = "0,5";
  expect_refused(&c, "not a volume index", NULL, "held out: out of range");
  c.holdout_volumes = "0-2";
  expect_refused(&c, "every volume of the dataset is held out", NULL,
                 "held out: all");
  if (rpn) { /* 3 nodes in one group, 2 training volumes */
    config(&c, spec, 6);
    c.locality = 1;
    c.holdout_volumes = "0";
    expect_refused(&c, "has 3 nodes and the dataset only 2 volumes", NULL,
                   "locality: too few volumes");
    /* The volume starts (before the store) failing on the last rank. */
    c.holdout_volumes = NULL;
    snprintf(fail, sizeof fail, "cuts@%d", size - 1);
    setenv("SLABFEED_TEST_FAIL", fail, 1);
    expect_refused(&c, "injected failure at stage 'cuts'", NULL,
                   "cuts on one rank");
    unsetenv("SLABFEED_TEST_FAIL");
  }
  config(&c, spec, 6);
  c.tile = 4;
  c.pad = 1;
  expect_refused(&c, "a tiled pass runs over one volume", NULL, "tiled pass");
}

/* A virtual dataset stacking Nbody of vol0 and vol2 (of one y, x) along z
 * (channels-first) in one file: a single volume to the loader. Its crops must
 * equal the direct read of the VDS (HDF5 resolving the mapping) and, where they
 * do not cross a volume boundary, the crops of the source files. */
static void virtual_dataset(void)
{
  char vds[300];
  snprintf(vds, sizeof vds, "%s/stacked_vds.h5", dir);
  const int from[2] = {0, 2};
  const int64_t Z = vshape[0][0] + vshape[2][0];
  if (rank == 0) {
    const hsize_t dims[4] = {4, (hsize_t)Z, (hsize_t)Y, (hsize_t)X};
    const hid_t space = H5Screate_simple(4, dims, NULL);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t z0 = 0;
    for (int i = 0; i < 2; i++) {
      const int v = from[i];
      const hsize_t sdims[4] = {4, (hsize_t)vshape[v][0], (hsize_t)Y,
                                (hsize_t)X};
      const hsize_t start[4] = {0, z0, 0, 0};
      const hid_t src = H5Screate_simple(4, sdims, NULL);
      H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, sdims, NULL);
      char path[300];
      snprintf(path, sizeof path, "%s/vol%d.h5", dir, v);
      CHECK(H5Pset_virtual(dcpl, space, path, "Nbody", src) >= 0,
            "H5Pset_virtual %d", v);
      H5Sclose(src);
      z0 += (hsize_t)vshape[v][0];
    }
    H5Sselect_all(space);
    const hid_t f = H5Fcreate(vds, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t d = H5Dcreate2(f, "Nbody", H5T_NATIVE_FLOAT, space, H5P_DEFAULT,
                               dcpl, H5P_DEFAULT);
    CHECK(f >= 0 && d >= 0, "create the virtual dataset");
    H5Dclose(d);
    H5Fclose(f);
    H5Pclose(dcpl);
    H5Sclose(space);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  slabfeed_config c;
  base_config(&c, vds, 6);
  c.target = NULL;
  c.layout = SLABFEED_LAYOUT_CF; /* 4 x 36 x 12 x 10: auto cannot tell */
  c.seed = 11;
  char err[1024] = "";
  slabfeed_loader *l = NULL;
  slabfeed_status st = slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err);
  CHECK(st == SLABFEED_OK, "open the virtual dataset: %s", err);
  if (st != SLABFEED_OK)
    return;
  CHECK_EQ(slabfeed_volume_count(l), 1, "a virtual dataset is one volume");
  slabfeed_reader *ref = NULL;
  CHECK(slabfeed_reader_open(vds, &ref, err, sizeof err) == SLABFEED_OK,
        "reader: %s", err);
  float *want = malloc(4 * 216 * sizeof *want);
  int64_t bad = 0, n = 0;
  for (int s = 0; s < 40 && ref != NULL; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK)
      break;
    for (int i = 0; i < 2; i++, n++) {
      slabfeed_reader_crop(ref, "Nbody", SLABFEED_LAYOUT_CF, &b.origin[3 * i],
                           c.crop, b.symmetry[i], 0, NULL, SLABFEED_DTYPE_F32,
                           SLABFEED_OUT_NCDHW, want);
      bad += memcmp(want, (const float *)b.input.data + i * 4 * 216,
                    4 * 216 * sizeof(float)) != 0;
    }
  }
  CHECK_EQ(bad, (int64_t)0, "crops of the virtual dataset differ");
  if (rank == 0)
    printf("  virtual dataset of 2 volumes (%lld planes): %lld crops, %s\n",
           (long long)Z, (long long)n, bad == 0 ? "bit for bit" : "DIFFER");
  free(want);
  slabfeed_reader_close(ref);
  slabfeed_close(l);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  rpn = getenv("SLABFEED_RANK_PER_NODE") != NULL;
  /* Absolute: manifests hold absolute paths only. */
  char cwd[160] = ".";
  CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
  snprintf(dir, sizeof dir, "%.160s/suite_%.16s.%d", cwd,
           argc > 1 ? argv[1] : "t", size);
  if (rank == 0)
    mkdir(dir, 0755);
  MPI_Barrier(MPI_COMM_WORLD);
  char path[512];
  for (int v = 0; v < NV; v++) {
    snprintf(path, sizeof path, "%s/vol%d.h5", dir, v);
    gen(path, vshape[v][0], vshape[v][1], vshape[v][2], 4, 0,
        100 + (uint64_t)v);
  }
  snprintf(path, sizeof path, "%s/odd_chan.h5", dir);
  gen(path, 16, Y, X, 3, 0, 9);
  snprintf(path, sizeof path, "%s/odd_f16.h5", dir);
  gen(path, 16, Y, X, 4, 1, 9);
  snprintf(path, sizeof path, "%s/wide.h5", dir);
  gen(path, 8, 24, 20, 4, 0, 11);
  /* The spec: a path, a pattern (vol1, vol2) in a manifest's company. */
  char man[512], spec[2048];
  snprintf(man, sizeof man, "%s/rest.txt", dir);
  snprintf(spec, sizeof spec, "# the third volume\n%s/vol2.h5\n", dir);
  write_text(man, spec);
  snprintf(spec, sizeof spec, "%s/vol0.h5\n%s/vol[1]*.h5\n@%s", dir, dir, man);

  uint64_t count[NV];
  /* 2400, 1560 and 1920 voxels */
  const double voxels[NV] = {2400.0 / 5880, 1560.0 / 5880, 1920.0 / 5880};
  const double equal[NV] = {1.0 / 3, 1.0 / 3, 1.0 / 3};
  const double given[NV] = {0.5, 0, 0.5};
  const int steps = 600 / size; /* 1200 samples in all */
  crops_match(spec, 6, steps, NULL, NULL, 0, count);
  /* 2 degrees of freedom: P(chi2 > 13.8) = 0.001. */
  double x = chi2_of(count, voxels);
  CHECK(x < 13.8, "by voxels: chi2 %.2f", x);
  crops_match(spec, 6, steps, "equal", NULL, 0, count);
  x = chi2_of(count, equal);
  CHECK(x < 13.8, "equal: chi2 %.2f", x);
  crops_match(spec, 6, steps, "3,0,3", NULL, 0, count);
  CHECK_EQ(count[1], (uint64_t)0, "weight 0 drawn");
  x = chi2_of(count, given);
  CHECK(x < 10.8, "given: chi2 %.2f", x);
  crops_match(spec, 6, steps, NULL, "0", 0, count);
  CHECK_EQ(count[0], (uint64_t)0, "held-out volume 0 drawn");
  char byname[300];
  snprintf(byname, sizeof byname, "%s/vol2.h5", dir);
  crops_match(spec, 6, steps, NULL, byname, 0, count);
  CHECK_EQ(count[2], (uint64_t)0, "volume 2 held out by path drawn");
  /* Locality: on one node the stream of before; every rank its own node,
   * one volume each (see node_volumes), so each volume has the samples of
   * one rank's batches whatever its voxels. */
  const int rpn_steps = rpn ? steps : steps / 4;
  const uint64_t local = crops_match(spec, 6, rpn_steps, NULL, NULL, 1, count);
  if (!rpn)
    CHECK(local == crops_match(spec, 6, rpn_steps, NULL, NULL, 0, count),
          "locality on one node changed the stream");
  for (int v = 0; rpn && size == NV && v < NV; v++)
    CHECK_EQ(count[v], (uint64_t)(2 * rpn_steps),
             "locality: samples of volume %d", v);
  held_out_memory(spec);
  byte_split();
  virtual_dataset();
  refusals(spec);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "clean up");
  }
  return check_finish("mpi.suite");
}
