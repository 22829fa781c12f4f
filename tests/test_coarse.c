/* mpi.coarse: a target on a coarser grid (coarsen_factor g: emulation of a
 * smoothed field), random crops and tiled passes, on 1-3 ranks and
 * rank-per-node (remote pieces sent, and over MPI_Get); files written
 * here with plain HDF5.
 *  - An input (4 channels, velocity a vector group) and a target on a grid
 *    g = 2 and 3 times coarser (4 channels, a vector group), in a file of
 *    its own: every voxel of every sample against the datasets read here.
 *    The input crop of edge c + 2P at the sample's origin o, the target
 *    crop of edge c / g at (o + P) / g (with target_pad: (c + 2P) / g at
 *    o / g), each under the sample's symmetry; o + P is a multiple of g
 *    for every sample, and the origins reach every such position over the
 *    samples (none is left out by the planes' grid).
 *  - Pads that are not multiples of g (the input crop cut out of the
 *    coarse planes' crop) and pads that are.
 *  - The bytes copied are exactly the crops' (remote pieces land whole).
 *  - The memory per rank: the slab store holds input + target bytes / P.
 *  - A tiled pass (tile T, pad P on the input's grid, pass symmetry 5):
 *    written like the target with the batch's coarse tile as the model's
 *    output, the file is the coarse target bit for bit; written like the
 *    input with the batch's padded input crop as the output (its centre
 *    kept), the file is the input bit for bit.
 *  - Refused on every rank alike: a target of another shape than the
 *    input's / g, naming both; the input box not a multiple of g; a crop,
 *    a tile, a pass region or a padded target's pad not in whole target
 *    voxels; coarsen_factor with scale_factor; without a target; a pair
 *    opened without coarsen_factor, with the factor to set; the coarse
 *    slab read failing on one rank alone.
 *  - slabfeed_generate's coarse pairs: the index content is
 *    slabfeed_index_value at each grid's own coordinates; the field
 *    content's coarse target at p is bit for bit the target of a file of
 *    one grid (same seed) at g p, the input unchanged; the loader crops
 *    the generated pair like the others. */
#include "testutil.h"

static int rank, size;
static const int vg[1][3] = {{1, 2, 3}};

static void config(slabfeed_config *c, const char *in, const char *target,
                   int g, int crop, int pad)
{
  pair_config(c, in, "fine", target, 1, g, crop, pad, 3, 23);
}

/* Random crops of the pair (input box N, target N / g) for `steps` steps,
 * every voxel against w[2]; the bytes copied and held. */
static void run(const char *in, const char *target, const whole w[2],
                const int64_t N[3], int g, int crop, int pad, int target_pad,
                int steps, int remote)
{
  slabfeed_config c;
  config(&c, in, target, g, crop, pad);
  c.target_pad = target_pad;
  slabfeed_loader *l = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open (g %d, crop %d, pad %d): %s", g, crop, pad, err);
  if (l == NULL)
    return;
  const int64_t NC[3] = {N[0] / g, N[1] / g, N[2] / g};
  const int64_t e_in = crop + 2 * pad;
  const int64_t e_tg = target_pad ? e_in / g : crop / g;
  const int64_t ein[3] = {e_in, e_in, e_in}, etg[3] = {e_tg, e_tg, e_tg};
  /* Which positions (o + P) / g on axis 0 the origins reached. */
  int reached[64] = {0};
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
            "g %d d%d: crop %lldx%lldx%lld, want %lld", g, d,
            (long long)t->shape[2], (long long)t->shape[3],
            (long long)t->shape[4], (long long)ed[0]);
      for (int i = 0; i < c.batch; i++) {
        const int64_t *bo = &b.origin[3 * i];
        int64_t o[3];
        for (int a = 0; a < 3; a++) {
          CHECK(bo[a] >= 0 && bo[a] < N[a] && (bo[a] + pad) % g == 0,
                "g %d pad %d: origin %lld on axis %d: want o + pad a "
                "multiple of g inside the box",
                g, pad, (long long)bo[a], a);
          const int64_t at = target_pad ? bo[a] : bo[a] + pad;
          o[a] = d == 0 ? bo[a] : (at % N[a]) / g;
        }
        if (d == 0)
          reached[((bo[0] + pad) % N[0]) / g] = 1;
        char why[256];
        const int64_t n =
            crop_mismatches(t, i, 4, &w[d], d == 0 ? N : NC, ed, vg, 1, o,
                            b.symmetry[i], &checked, why, sizeof why);
        CHECK(n == 0, "g %d pad %d step %d d%d: %lld voxels differ, first %s",
              g, pad, s, d, (long long)n, why);
        bad += n;
        want_bytes += 4 * (uint64_t)(ed[0] * ed[1] * ed[2]) * 4;
      }
    }
  }
  /* Over all ranks' samples, every coarse z position is an origin. */
  MPI_Allreduce(MPI_IN_PLACE, reached, 64, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  int missing = 0;
  for (int64_t z = 0; z < NC[0]; z++)
    missing += !reached[z];
  CHECK(missing == 0,
        "g %d pad %d: %d of %lld coarse z positions never drawn in %d steps", g,
        pad, missing, (long long)NC[0], steps);
  slabfeed_stats st = SLABFEED_STATS_INIT;
  slabfeed_stats_get(l, &st);
  const uint64_t moved = st.bytes_own + st.bytes_node + st.bytes_remote;
  if (!remote)
    CHECK(moved == want_bytes, "g %d pad %d: %llu bytes copied, crops %llu", g,
          pad, (unsigned long long)moved, (unsigned long long)want_bytes);
  else
    CHECK(moved >= want_bytes, "g %d pad %d: %llu bytes copied, crops %llu", g,
          pad, (unsigned long long)moved, (unsigned long long)want_bytes);
  /* Memory: input + target over the ranks (no halos). */
  uint64_t slab = st.slab_bytes;
  MPI_Allreduce(MPI_IN_PLACE, &slab, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  const uint64_t tvol = (uint64_t)(NC[0] * NC[1] * NC[2]) * 4 * 4;
  const uint64_t want_slab = tvol * (1 + (uint64_t)(g * g * g));
  CHECK(slab == want_slab,
        "g %d: the stores hold %llu bytes, input + target %llu", g,
        (unsigned long long)slab, (unsigned long long)want_slab);
  CHECK(bad == 0, "g %d pad %d: %lld of %lld voxels differ", g, pad,
        (long long)bad, (long long)checked);
  if (rank == 0)
    printf("  g %d crop %d pad %d%s: %lld voxels checked on rank 0, %llu "
           "bytes copied (crops %llu), stores %llu bytes\n",
           g, crop, pad, target_pad ? " (target padded)" : "",
           (long long)checked, (unsigned long long)moved,
           (unsigned long long)want_bytes, (unsigned long long)slab);
  slabfeed_close(l);
}

/* The loader of a tiled pass of the pair (tile T, pad P on the input's
 * grid, pass symmetry 5, batch 2), or NULL after a failed check. */
static slabfeed_loader *open_pass(const char *in, const char *target, int g,
                                  int T, int P)
{
  slabfeed_config c;
  config(&c, in, target, g, g, 0);
  c.tile = T;
  c.pad = P;
  c.pass_symmetry = 5;
  c.batch = 2;
  slabfeed_loader *l = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open pass (g %d, tile %d, pad %d): %s", g, T, P, err);
  return l;
}

/* A tiled pass of the pair (tile T, pad P on the input's grid, pass
 * symmetry 5) written by the writer like dataset `like` (0 the input, 1
 * the target), the "model" returning the batch's own tensor of it (the
 * padded input crop, or the coarse target tile, under the symmetry): the
 * file holds that dataset, bit for bit. */
static void check_pass(const char *in, const char *target, const whole *want,
                       const int64_t N[3], int g, int T, int P, int like,
                       const char *out)
{
  slabfeed_loader *l = open_pass(in, target, g, T, P);
  char err[1024];
  if (l == NULL)
    return;
  slabfeed_writer_config wc;
  slabfeed_writer_config_init(&wc);
  wc.path = out;
  wc.overwrite = 1;
  wc.like = like == 0 ? SLABFEED_LIKE_INPUT : SLABFEED_LIKE_TARGET;
  slabfeed_writer *w = NULL;
  CHECK(slabfeed_writer_open(l, &wc, &w, err, sizeof err) == SLABFEED_OK,
        "writer open (g %d, like %d): %s", g, like, err);
  const uint64_t steps = slabfeed_steps_per_epoch(l);
  const int64_t edge = like == 0 ? T + 2 * P : T / g;
  for (uint64_t k = 0; w != NULL && k < steps; k++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(l, &b, NULL) == SLABFEED_OK, "pass next");
    const slabfeed_tensor *t = like == 0 ? &b.input : &b.target;
    CHECK(t->shape[2] == edge, "pass %s edge %lld, want %lld",
          like == 0 ? "input" : "target", (long long)t->shape[2],
          (long long)edge);
    for (int i = 0; i < b.valid; i++)
      for (int a = 0; a < 9; a++)
        CHECK(b.tile[9 * i + a] % g == 0,
              "pass tile entry %d is %lld: want whole target voxels", a,
              (long long)b.tile[9 * i + a]);
    CHECK(slabfeed_writer_put(w, &b, t, SLABFEED_OUT_NCDHW, -1, NULL) ==
              SLABFEED_OK,
          "put: %s", slabfeed_writer_last_error(w));
  }
  if (w != NULL)
    CHECK(slabfeed_writer_close(w, err, sizeof err) == SLABFEED_OK,
          "writer close: %s", err);
  slabfeed_close(l);
  whole got;
  CHECK(whole_read(out, "prediction", 0, &got) == 0, "read %s", out);
  const int64_t s = like == 0 ? 1 : g;
  const int64_t n = 4 * (N[0] / s) * (N[1] / s) * (N[2] / s);
  int64_t bad = 0;
  for (int a = 0; a < 4; a++)
    CHECK(got.dims[a] == want->dims[a], "output dims[%d] %lld, want %lld", a,
          (long long)got.dims[a], (long long)want->dims[a]);
  for (int64_t i = 0; got.v != NULL && i < n; i++)
    bad += f32_bits(got.v[i]) != f32_bits(want->v[i]);
  CHECK(bad == 0, "g %d pass like %s: %lld of %lld written voxels differ", g,
        like == 0 ? "input" : "target", (long long)bad, (long long)n);
  if (rank == 0)
    printf("  g %d pass (tile %d, pad %d, symmetry 5) like the %s: %lld "
           "voxels written, %lld differ\n",
           g, T, P, like == 0 ? "input" : "target", (long long)n,
           (long long)bad);
  whole_free(&got);
}

/* A writer like the coarse target checks its chunk against the coarse
 * output (region / g), not the input's region: an edge of the input's
 * box but past the coarse box is refused naming the output, one within it
 * is taken. */
static void check_writer_chunk(const char *in, const char *target, int g,
                               const int64_t N[3], const char *out)
{
  slabfeed_loader *l = open_pass(in, target, g, 2 * g, 1);
  char err[1024];
  if (l == NULL)
    return;
  for (int k = 0; k < 2; k++) {
    slabfeed_writer_config wc;
    slabfeed_writer_config_init(&wc);
    wc.path = out;
    wc.overwrite = 1;
    wc.like = SLABFEED_LIKE_TARGET;
    /* k 0: the coarse box's y extent + 1 (within the input's); k 1: the
     * coarse box itself. */
    for (int a = 0; a < 3; a++)
      wc.chunk[a] = k == 0 ? N[1] / g + 1 : N[a] / g;
    slabfeed_writer *w = NULL;
    const slabfeed_status st =
        slabfeed_writer_open(l, &wc, &w, err, sizeof err);
    char want[160];
    snprintf(want, sizeof want, "within the output %lldx%lldx%lld",
             (long long)(N[0] / g), (long long)(N[1] / g),
             (long long)(N[2] / g));
    if (k == 0)
      CHECK(st == SLABFEED_ERR_ARG && strstr(err, want) != NULL,
            "writer chunk past the coarse box: status %d, '%s' (want '%s')",
            (int)st, err, want);
    else
      CHECK(st == SLABFEED_OK, "writer chunk of the coarse box: %s", err);
    if (w != NULL)
      slabfeed_writer_abort(w);
  }
  slabfeed_close(l);
}

/* The generator's coarse pairs, read back with plain HDF5, then cropped. */
static void check_generated(const char *tag, int remote)
{
  const int64_t N[3] = {12, 8, 10};
  const int g = 2;
  char idx[256], fld[256], one[256];
  snprintf(idx, sizeof idx, "coarse_%s_%d_gen_index.h5", tag, size);
  snprintf(fld, sizeof fld, "coarse_%s_%d_gen_field.h5", tag, size);
  snprintf(one, sizeof one, "coarse_%s_%d_gen_field1.h5", tag, size);
  generate_pair(idx, N, "fine", "coarse", 1, g, 0);
  generate_pair(fld, N, "fine", "coarse", 1, g, 1);
  generate_pair(one, N, "fine", "coarse", 1, 1, 1);
  whole w[2], fw[2], ow[2];
  CHECK(whole_read(idx, "fine", 0, &w[0]) == 0 &&
            whole_read(idx, "coarse", 0, &w[1]) == 0 &&
            whole_read(fld, "fine", 0, &fw[0]) == 0 &&
            whole_read(fld, "coarse", 0, &fw[1]) == 0 &&
            whole_read(one, "fine", 0, &ow[0]) == 0 &&
            whole_read(one, "coarse", 0, &ow[1]) == 0,
        "read the generated pairs");
  int64_t bad = 0;
  for (int d = 0; d < 2; d++) {
    const int64_t s = d == 0 ? 1 : g;
    CHECK(w[d].dims[0] == 4 && w[d].dims[1] == N[0] / s &&
              w[d].dims[2] == N[1] / s && w[d].dims[3] == N[2] / s &&
              fw[d].dims[1] == N[0] / s,
          "generated d%d: shape %lldx%lldx%lldx%lld, want 4x%lldx%lldx%lld", d,
          (long long)w[d].dims[0], (long long)w[d].dims[1],
          (long long)w[d].dims[2], (long long)w[d].dims[3],
          (long long)(N[0] / s), (long long)(N[1] / s), (long long)(N[2] / s));
    for (int64_t c = 0; c < 4 && bad == 0 && w[d].v != NULL; c++)
      for (int64_t z = 0; z < N[0] / s; z++)
        for (int64_t y = 0; y < N[1] / s; y++)
          for (int64_t x = 0; x < N[2] / s; x++) {
            bad += f32_bits(whole_at(&w[d], c, z, y, x)) !=
                   f32_bits(slabfeed_index_value(d, (int)c, z, y, x));
            /* The coarse field at p is the field of the plain file at
             * g p; the input is the plain file's. */
            bad += f32_bits(whole_at(&fw[d], c, z, y, x)) !=
                   f32_bits(whole_at(&ow[d], c, s * z, s * y, s * x));
          }
  }
  CHECK(bad == 0,
        "generated coarse pairs: %lld values differ from the index "
        "function or the plain file's field",
        (long long)bad);
  run(idx, "coarse", w, N, g, 4, 1, 0, 10, remote);
  run(fld, "coarse", fw, N, g, 2, 2, 1, 10, remote);
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
  /* Input boxes (multiples of g) and their factors. */
  const int64_t N[2][3] = {{12, 10, 8}, {18, 12, 15}};
  const int gs[2] = {2, 3};
  char in[2][256], co[2][256], tgt[2][300];
  for (int k = 0; k < 2; k++) {
    snprintf(in[k], sizeof in[k], "coarse_%s_%d_in%d.h5", tag, size, gs[k]);
    snprintf(co[k], sizeof co[k], "coarse_%s_%d_co%d.h5", tag, size, gs[k]);
    snprintf(tgt[k], sizeof tgt[k], "coarse@%s", co[k]);
    if (rank == 0) {
      const int64_t C[3] = {N[k][0] / gs[k], N[k][1] / gs[k], N[k][2] / gs[k]};
      hid_t f = H5Fcreate(in[k], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
      put_f32x4(f, "fine", N[k], 1 + k, 0.25f);
      H5Fclose(f);
      f = H5Fcreate(co[k], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
      put_f32x4(f, "coarse", C, 3 + k, 0.25f);
      H5Fclose(f);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int k = 0; k < 2; k++) {
    const int g = gs[k];
    whole w[2];
    CHECK(whole_read(in[k], "fine", 0, &w[0]) == 0 &&
              whole_read(co[k], "coarse", 0, &w[1]) == 0,
          "read %s %s", in[k], co[k]);
    /* Pads of no voxel, not a multiple of g, a multiple of g (padded
     * target too). */
    run(in[k], tgt[k], w, N[k], g, g, 0, 0, 20, remote);
    run(in[k], tgt[k], w, N[k], g, g, 1, 0, 20, remote);
    run(in[k], tgt[k], w, N[k], g, 2 * g, g - 1, 0, 20, remote);
    run(in[k], tgt[k], w, N[k], g, g, g, 1, 20, remote);
    char out[300];
    snprintf(out, sizeof out, "coarse_%s_%d_out%d.h5", tag, size, g);
    check_pass(in[k], tgt[k], &w[1], N[k], g, 2 * g, 1, 1, out);
    check_pass(in[k], tgt[k], &w[0], N[k], g, g, g - 1, 0, out);
    check_writer_chunk(in[k], tgt[k], g, N[k], out);
    whole_free(&w[0]);
    whole_free(&w[1]);
  }
  check_generated(tag, remote);
  /* Refusals. */
  slabfeed_config c;
  config(&c, in[0], tgt[1], 2, 2, 0);
  expect_refused(&c, "input 'fine' has box 12x10x8 but target 'coarse@",
                 "coarsen_factor 2 needs a target of 6x5x4", "wrong target");
  config(&c, in[1], tgt[1], 2, 2, 0);
  expect_refused(&c,
                 "coarsen_factor 2 needs an input box that is a multiple "
                 "of 2 on every axis",
                 NULL, "input box not a multiple");
  config(&c, in[0], tgt[0], 2, 3, 0);
  expect_refused(&c, "crop 3x3x3 is not a multiple of coarsen_factor 2", NULL,
                 "crop");
  config(&c, in[0], tgt[0], 2, 2, 0);
  c.tile = 3;
  expect_refused(&c, "tile 3 is not a multiple of coarsen_factor 2", NULL,
                 "tile");
  config(&c, in[0], tgt[0], 2, 2, 1);
  c.target_pad = 1;
  expect_refused(&c,
                 "target_pad with pad 1, not a multiple of "
                 "coarsen_factor 2",
                 NULL, "padded target");
  config(&c, in[0], tgt[0], 2, 2, 0);
  c.tile = 2;
  c.n_region = 1;
  const int64_t R[6] = {1, 0, 0, 4, 4, 4};
  memcpy(c.region[0], R, sizeof R);
  expect_refused(&c,
                 "pass region 1,0,0+4x4x4 is not in whole voxels of the "
                 "target's grid",
                 NULL, "region");
  config(&c, in[0], tgt[0], 2, 2, 3);
  expect_refused(&c,
                 "crop 2 + 2 x pad 3 on axis x needs 5 voxels of the "
                 "target's grid",
                 NULL, "planes' crop past the box");
  config(&c, in[0], tgt[0], 2, 2, 0);
  c.scale_factor = 2;
  expect_refused(&c, "scale_factor 2 (a finer target) and coarsen_factor 2",
                 NULL, "both factors");
  config(&c, in[0], NULL, 2, 2, 0);
  c.n_target_vectors = 0;
  expect_refused(&c, "coarsen_factor 2 without a target dataset", NULL,
                 "no target");
  config(&c, in[0], tgt[0], 1, 2, 0);
  expect_refused(&c,
                 "the input is 2 x the target's on every axis: for a "
                 "coarser target set coarsen_factor 2",
                 NULL, "pair without coarsen_factor");
  /* The coarse target's slab read failing on the last rank alone: every
   * rank gets that rank's error, nobody hangs in the collective reads. */
  config(&c, in[0], tgt[0], 2, 2, 0);
  char fail[64], want[96];
  snprintf(fail, sizeof fail, "read.target@%d", size - 1);
  snprintf(want, sizeof want,
           "rank %d: injected failure at stage 'read.target'", size - 1);
  setenv("SLABFEED_TEST_FAIL", fail, 1);
  expect_refused(&c, want, NULL, "coarse read on one rank");
  unsetenv("SLABFEED_TEST_FAIL");
  return check_finish("mpi.coarse");
}
