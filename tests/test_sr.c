/* mpi.sr: grids of different resolution (scale_factor: super-resolution
 * pairs), random crops, on 1-3 ranks and rank-per-node (remote pieces
 * sent, and over MPI_Get); files written here with plain HDF5.
 *  - A low-resolution input (4 channels, velocity a vector group) and a
 *    target on a grid f = 2 and 3 times finer (4 channels, a vector group),
 *    in a file of its own: every voxel of every sample against the
 *    datasets read here, the input crop of edge c at the origin, the target
 *    crop of edge f c at f x the origin, each under the sample's symmetry;
 *    with a pad P the input crop is c + 2P and the target the core, f c at
 *    f (origin + P).
 *  - The bytes copied are exactly the crops' (remote pieces land whole):
 *    the target's fine crop, not f^3 x the input's.
 *  - The memory per rank: the slab store holds input + target bytes / P.
 *  - A tiled pass (tile T, pad P on the input's grid, a pass symmetry)
 *    written by the writer like the target, the "model" returning the
 *    batch's fine target tile: the file is the fine target, bit for bit.
 *  - Refused on every rank alike: a target of another shape than f x the
 *    input's, naming both; scale_factor without a target; a pair opened
 *    without scale_factor, with the factor to set.
 *  - slabfeed_generate's pairs (scale_factor f): the index content of both
 *    grids is slabfeed_index_value at each grid's own coordinates, every
 *    voxel; the field content's fine target at f x p is bit for bit the
 *    target of a file of scale factor 1 (same seed) at p, the input
 *    unchanged; the loader crops the generated pair like the others. */
#include "testutil.h"

static int rank, size;
static const int vg[1][3] = {{1, 2, 3}};

static void config(slabfeed_config *c, const char *lr, const char *target,
                   int f, int crop, int pad)
{
  pair_config(c, lr, "lr", target, f, 1, crop, pad, 2, 17);
}

static void run(const char *lr, const char *target, const whole w[2],
                const int64_t N[3], int f, int crop, int pad, int steps,
                int remote)
{
  slabfeed_config c;
  config(&c, lr, target, f, crop, pad);
  slabfeed_loader *l = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open (f %d, pad %d): %s", f, pad, err);
  if (l == NULL)
    return;
  const int64_t NF[3] = {f * N[0], f * N[1], f * N[2]};
  const int64_t ein[3] = {crop + 2 * pad, crop + 2 * pad, crop + 2 * pad};
  const int64_t etg[3] = {f * crop, f * crop, f * crop};
  int64_t bad = 0, checked = 0;
  uint64_t want_bytes = 0;
  for (int s = 0; s < steps; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK) {
      CHECK(0, "next: %s", slabfeed_last_error(l));
      break;
    }
    for (int d = 0; d < 2; d++) {
      const slabfeed_tensor *t = d == 0 ? &b.input : &b.target;
      const int64_t *ed = d == 0 ? ein : etg;
      CHECK(t->shape[2] == ed[0] && t->shape[3] == ed[1] &&
                t->shape[4] == ed[2],
            "f %d d%d: crop %lldx%lldx%lld, want %lld", f, d,
            (long long)t->shape[2], (long long)t->shape[3],
            (long long)t->shape[4], (long long)ed[0]);
      for (int i = 0; i < c.batch; i++) {
        const int g = b.symmetry[i];
        int64_t o[3];
        for (int a = 0; a < 3; a++)
          o[a] = d == 0 ? b.origin[3 * i + a] : f * (b.origin[3 * i + a] + pad);
        char why[256];
        const int64_t n =
            crop_mismatches(t, i, 4, &w[d], d == 0 ? N : NF, ed, vg, 1, o, g,
                            &checked, why, sizeof why);
        CHECK(n == 0, "f %d pad %d step %d d%d: %lld voxels differ, first %s",
              f, pad, s, d, (long long)n, why);
        bad += n;
        want_bytes += 4 * (uint64_t)(ed[0] * ed[1] * ed[2]) * 4;
      }
    }
  }
  slabfeed_stats st = SLABFEED_STATS_INIT;
  slabfeed_stats_get(l, &st);
  const uint64_t moved = st.bytes_own + st.bytes_node + st.bytes_remote;
  if (!remote)
    CHECK(moved == want_bytes, "f %d pad %d: %llu bytes copied, crops %llu", f,
          pad, (unsigned long long)moved, (unsigned long long)want_bytes);
  else
    CHECK(moved >= want_bytes, "f %d pad %d: %llu bytes copied, crops %llu", f,
          pad, (unsigned long long)moved, (unsigned long long)want_bytes);
  /* Memory: input + target over the ranks (plus halos, none here). */
  uint64_t slab = st.slab_bytes;
  MPI_Allreduce(MPI_IN_PLACE, &slab, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  const uint64_t vol = (uint64_t)(N[0] * N[1] * N[2]) * 4 * 4;
  int groups = 1;
  if (remote)
    groups = 1; /* one group of all nodes (SLABFEED_GROUP_NODES=-1) */
  CHECK(slab == (uint64_t)groups * vol * (1 + (uint64_t)(f * f * f)),
        "f %d: the stores hold %llu bytes, input + target %llu", f,
        (unsigned long long)slab,
        (unsigned long long)(vol * (1 + (uint64_t)(f * f * f))));
  CHECK(bad == 0, "f %d pad %d: %lld of %lld voxels differ", f, pad,
        (long long)bad, (long long)checked);
  if (rank == 0)
    printf("  f %d crop %d pad %d: %lld voxels checked on rank 0, %llu "
           "bytes copied (crops %llu), stores %llu bytes\n",
           f, crop, pad, (long long)checked, (unsigned long long)moved,
           (unsigned long long)want_bytes, (unsigned long long)slab);
  slabfeed_close(l);
}

/* A tiled pass of the pair (tile T, pad P on the input's grid, pass
 * symmetry 5) whose "model" returns the batch's own target (the fine tile
 * f T under the symmetry), written by the writer like the target: the
 * file holds the fine target dataset, bit for bit. */
static void check_pass(const char *lr, const char *target, const whole *hr,
                       const int64_t N[3], int f, int T, const char *out)
{
  slabfeed_config c;
  config(&c, lr, target, f, 3, 0);
  c.tile = T;
  c.pad = 1;
  c.pass_symmetry = 5;
  slabfeed_loader *l = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open pass (f %d): %s", f, err);
  if (l == NULL)
    return;
  slabfeed_writer_config wc;
  slabfeed_writer_config_init(&wc);
  wc.path = out;
  wc.overwrite = 1;
  slabfeed_writer *w = NULL;
  CHECK(slabfeed_writer_open(l, &wc, &w, err, sizeof err) == SLABFEED_OK,
        "writer open: %s", err);
  const uint64_t steps = slabfeed_steps_per_epoch(l);
  for (uint64_t k = 0; w != NULL && k < steps; k++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(l, &b, NULL) == SLABFEED_OK, "pass next");
    CHECK(b.target.shape[2] == T * f, "pass target edge %lld, want %d",
          (long long)b.target.shape[2], T * f);
    CHECK(slabfeed_writer_put(w, &b, &b.target, SLABFEED_OUT_NCDHW, -1, NULL) ==
              SLABFEED_OK,
          "put: %s", slabfeed_writer_last_error(w));
  }
  if (w != NULL)
    CHECK(slabfeed_writer_close(w, err, sizeof err) == SLABFEED_OK,
          "writer close: %s", err);
  slabfeed_close(l);
  whole got;
  CHECK(whole_read(out, "prediction", 0, &got) == 0, "read %s", out);
  int64_t bad = 0;
  const int64_t n = 4 * f * N[0] * f * N[1] * f * N[2];
  for (int a = 0; a < 4; a++)
    CHECK(got.dims[a] == hr->dims[a], "output dims[%d] %lld, want %lld", a,
          (long long)got.dims[a], (long long)hr->dims[a]);
  for (int64_t i = 0; got.v != NULL && i < n; i++)
    bad += f32_bits(got.v[i]) != f32_bits(hr->v[i]);
  CHECK(bad == 0,
        "f %d pass: %lld of %lld written voxels differ from the "
        "fine target",
        f, (long long)bad, (long long)n);
  if (rank == 0)
    printf("  f %d pass (tile %d, pad 1, symmetry 5): %lld fine voxels "
           "written, %lld differ\n",
           f, T, (long long)n, (long long)bad);
  whole_free(&got);
}

/* The generator's pairs, read back with plain HDF5, then cropped. */
static void check_generated(const char *tag, int remote)
{
  const int64_t N[3] = {6, 5, 4};
  const int f = 2;
  char idx[256], fld[256], one[256];
  snprintf(idx, sizeof idx, "sr_%s_%d_gen_index.h5", tag, size);
  snprintf(fld, sizeof fld, "sr_%s_%d_gen_field.h5", tag, size);
  snprintf(one, sizeof one, "sr_%s_%d_gen_field1.h5", tag, size);
  generate_pair(idx, N, "lr", "hr", f, 1, 0);
  generate_pair(fld, N, "lr", "hr", f, 1, 1);
  generate_pair(one, N, "lr", "hr", 1, 1, 1);
  whole w[2], fw[2], ow[2];
  CHECK(whole_read(idx, "lr", 0, &w[0]) == 0 &&
            whole_read(idx, "hr", 0, &w[1]) == 0 &&
            whole_read(fld, "lr", 0, &fw[0]) == 0 &&
            whole_read(fld, "hr", 0, &fw[1]) == 0 &&
            whole_read(one, "lr", 0, &ow[0]) == 0 &&
            whole_read(one, "hr", 0, &ow[1]) == 0,
        "read the generated pairs");
  int64_t bad = 0;
  for (int d = 0; d < 2; d++) {
    const int64_t s = d == 0 ? 1 : f;
    CHECK(w[d].dims[0] == 4 && w[d].dims[1] == s * N[0] &&
              w[d].dims[2] == s * N[1] && w[d].dims[3] == s * N[2] &&
              fw[d].dims[1] == s * N[0],
          "generated d%d: shape %lldx%lldx%lldx%lld, want 4x%lldx%lldx%lld", d,
          (long long)w[d].dims[0], (long long)w[d].dims[1],
          (long long)w[d].dims[2], (long long)w[d].dims[3],
          (long long)(s * N[0]), (long long)(s * N[1]), (long long)(s * N[2]));
    for (int64_t c = 0; c < 4 && bad == 0; c++)
      for (int64_t z = 0; z < s * N[0]; z++)
        for (int64_t y = 0; y < s * N[1]; y++)
          for (int64_t x = 0; x < s * N[2]; x++) {
            bad += f32_bits(whole_at(&w[d], c, z, y, x)) !=
                   f32_bits(slabfeed_index_value(d, (int)c, z, y, x));
            /* The fine field at f p is the field of the plain file at p. */
            if (z % s == 0 && y % s == 0 && x % s == 0)
              bad += f32_bits(whole_at(&fw[d], c, z, y, x)) !=
                     f32_bits(whole_at(&ow[d], c, z / s, y / s, x / s));
          }
  }
  CHECK(bad == 0,
        "generated pairs: %lld values differ from the index "
        "function or the plain file's field",
        (long long)bad);
  run(idx, "hr", w, N, f, 3, 0, 10, remote);
  run(fld, "hr", fw, N, f, 2, 1, 10, remote);
  for (int d = 0; d < 2; d++) {
    whole_free(&w[d]);
    whole_free(&fw[d]);
    whole_free(&ow[d]);
  }
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int remote = getenv("SLABFEED_RANK_PER_NODE") != NULL && size > 1;
  const char *tag = argc > 1 ? argv[1] : "t";
  const int64_t N[2][3] = {{9, 6, 7}, {6, 5, 4}};
  const int fs[2] = {2, 3};
  char lr[2][256], hr[2][256], tgt[2][300];
  for (int k = 0; k < 2; k++) {
    snprintf(lr[k], sizeof lr[k], "sr_%s_%d_lr%d.h5", tag, size, fs[k]);
    snprintf(hr[k], sizeof hr[k], "sr_%s_%d_hr%d.h5", tag, size, fs[k]);
    snprintf(tgt[k], sizeof tgt[k], "hr@%s", hr[k]);
    if (rank == 0) {
      const int64_t F[3] = {fs[k] * N[k][0], fs[k] * N[k][1], fs[k] * N[k][2]};
      hid_t f = H5Fcreate(lr[k], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
      put_f32x4(f, "lr", N[k], 1 + k, 0.5f);
      H5Fclose(f);
      f = H5Fcreate(hr[k], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
      put_f32x4(f, "hr", F, 3 + k, 0.5f);
      H5Fclose(f);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int k = 0; k < 2; k++) {
    whole w[2];
    CHECK(whole_read(lr[k], "lr", 0, &w[0]) == 0 &&
              whole_read(hr[k], "hr", 0, &w[1]) == 0,
          "read %s %s", lr[k], hr[k]);
    run(lr[k], tgt[k], w, N[k], fs[k], 3, 0, 20, remote);
    run(lr[k], tgt[k], w, N[k], fs[k], 2, 1, 20, remote);
    char out[300];
    snprintf(out, sizeof out, "sr_%s_%d_out%d.h5", tag, size, fs[k]);
    check_pass(lr[k], tgt[k], &w[1], N[k], fs[k], k == 0 ? 3 : 2, out);
    whole_free(&w[0]);
    whole_free(&w[1]);
  }
  check_generated(tag, remote);
  /* Refusals. */
  slabfeed_config c;
  config(&c, lr[0], tgt[1], 2, 3, 0);
  expect_refused(&c, "input 'lr' has box 9x6x7 but target 'hr@",
                 "scale_factor 2 needs a target of 18x12x14", "wrong target");
  /* The fine target's slab read failing on the last rank alone: every
   * rank gets that rank's error, nobody hangs in the collective reads. */
  config(&c, lr[0], tgt[0], 2, 3, 0);
  char fail[64], want[96];
  snprintf(fail, sizeof fail, "read.target@%d", size - 1);
  snprintf(want, sizeof want,
           "rank %d: injected failure at stage "
           "'read.target'",
           size - 1);
  setenv("SLABFEED_TEST_FAIL", fail, 1);
  expect_refused(&c, want, NULL, "fine read on one rank");
  unsetenv("SLABFEED_TEST_FAIL");
  config(&c, lr[0], tgt[0], 1, 3, 0);
  expect_refused(&c,
                 "the target is 2 x the input's on every axis: for a "
                 "super-resolution pair set scale_factor 2",
                 NULL, "pair without scale_factor");
  config(&c, lr[0], NULL, 2, 3, 0);
  c.n_target_vectors = 0;
  expect_refused(&c, "scale_factor 2 without a target dataset", NULL,
                 "no target");
  return check_finish("mpi.sr");
}
