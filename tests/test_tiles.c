/* mpi.tiles: tiled passes (validation and inference over a region).
 *  - The tile grid: for several regions (the whole box, a band that wraps,
 *    extents that are not multiples of T) every voxel of the region is
 *    owned by exactly one tile, and no tile owns a voxel outside it.
 *  - A pass loader on 1-3 ranks: the ranks' real tiles together are every
 *    tile once (sample = the global tile index, split over ranks as the
 *    random stream's global batches), the last batch says how many slots
 *    are real, every input crop equals an independent serial read at the
 *    tile's origin minus the pad with the pass symmetry, every target is
 *    the tile itself (edge T at the tile's origin; target_pad gives the
 *    padded box instead), and stitching the
 *    owned parts of the identity pass's crops gives back the region bit for
 *    bit. seek(0, 0) repeats the pass.
 *  - tile + 2 pad larger than the box, a tile larger than the region and a
 *    region outside the box are refused on every rank, saying why. */
#include "plan/tiles.h"
#include "testutil.h"

static int rank, size;

static int64_t pmod(int64_t a, int64_t n)
{
  return (a % n + n) % n;
}

/* Owned voxels of every tile, counted over the box. */
static void grid_case(const int64_t shape[3], const int64_t R[6], int64_t T,
                      int64_t P)
{
  sf__tiles t;
  sf__tiles_init(&t, shape, R, T, P);
  const int64_t n = shape[0] * shape[1] * shape[2];
  int *owned = calloc((size_t)n, sizeof *owned);
  for (uint64_t g = 0; g < t.count; g++) {
    int64_t at[9];
    sf__tiles_at(&t, g, at);
    for (int64_t i = 0; i < at[6]; i++)
      for (int64_t j = 0; j < at[7]; j++)
        for (int64_t k = 0; k < at[8]; k++) {
          const int64_t z = pmod(at[0] + at[3] + i, shape[0]);
          const int64_t y = pmod(at[1] + at[4] + j, shape[1]);
          const int64_t x = pmod(at[2] + at[5] + k, shape[2]);
          owned[(z * shape[1] + y) * shape[2] + x]++;
        }
    /* The owned part lies inside the tile. */
    for (int a = 0; a < 3; a++)
      CHECK(at[3 + a] >= 0 && at[6 + a] >= 1 && at[3 + a] + at[6 + a] <= T,
            "tile %llu owns [%lld, +%lld) on axis %d of a tile of %lld",
            (unsigned long long)g, (long long)at[3 + a], (long long)at[6 + a],
            a, (long long)T);
  }
  int bad = 0;
  for (int64_t z = 0; z < shape[0]; z++)
    for (int64_t y = 0; y < shape[1]; y++)
      for (int64_t x = 0; x < shape[2]; x++) {
        const int in = pmod(z - R[0], shape[0]) < R[3] &&
                       pmod(y - R[1], shape[1]) < R[4] &&
                       pmod(x - R[2], shape[2]) < R[5];
        bad += owned[(z * shape[1] + y) * shape[2] + x] != in;
      }
  CHECK_EQ(bad, 0,
           "voxels owned other than once inside (never outside) "
           "region %lld,%lld,%lld +%lld,%lld,%lld with T %lld",
           (long long)R[0], (long long)R[1], (long long)R[2], (long long)R[3],
           (long long)R[4], (long long)R[5], (long long)T);
  free(owned);
}

/* One pass with tile T, pad P, symmetry g over region R (text form). */
static void pass_case(const char *path, const int64_t shape[3],
                      const char *region, const int64_t R[6], int T, int P,
                      int g, int batch)
{
  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = path;
  c.input = "Nbody";
  c.target = "Hydro";
  c.batch = batch;
  c.tile = T;
  c.pad = P;
  c.pass_symmetry = g;
  char err[1024];
  if (region[0] != '\0')
    CHECK(slabfeed_config_set(&c, "region", region, err, sizeof err) == 0,
          "region: %s", err);
  slabfeed_loader *l = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open T %d P %d: %s", T, P, err);
  if (l == NULL)
    return;
  sf__tiles t;
  sf__tiles_init(&t, shape, R, T, P);
  const uint64_t steps = slabfeed_steps_per_epoch(l);
  const uint64_t per = (uint64_t)size * (uint64_t)batch;
  CHECK_EQ(steps, (t.count + per - 1) / per, "steps of a pass of %llu tiles",
           (unsigned long long)t.count);
  const int64_t E = T + 2 * P;
  const size_t in_elems = (size_t)(4 * E * E * E);
  float *in = malloc((size_t)batch * in_elems * sizeof *in);
  float *want = malloc(in_elems * sizeof *want);
  /* The target: the tile itself (edge T at the tile's origin). */
  const size_t tg_elems = (size_t)(5 * T * T * T);
  float *tg = malloc((size_t)batch * tg_elems * sizeof *tg);
  float *tg_want = malloc(tg_elems * sizeof *tg_want);
  int tg_wrong = 0;
  slabfeed_reader *rd = NULL;
  slabfeed_reader_open(path, &rd, err, sizeof err);
  /* The region stitched from the owned parts (identity passes). */
  const int64_t nreg = R[3] * R[4] * R[5];
  float *stitched = calloc((size_t)nreg * 4, sizeof *stitched);
  unsigned char *seen = calloc((size_t)t.count, 1);
  int wrong = 0, marks = 0, shape_bad = 0;
  for (uint64_t s = 0; s < steps; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK) {
      CHECK(0, "next: %s", slabfeed_last_error(l));
      break;
    }
    shape_bad += b.input.shape[2] != E || b.tile == NULL ||
                 b.target.shape[2] != T || b.target.shape[1] != 5;
    slabfeed_copy_to_host(l, &b.input, in);
    slabfeed_copy_to_host(l, &b.target, tg);
    int real = 0;
    for (int i = 0; i < batch; i++) {
      const uint64_t k =
          s * per + (uint64_t)rank * (uint64_t)batch + (uint64_t)i;
      if (k >= t.count) {
        marks += b.sample[i] != -1;
        continue;
      }
      real++;
      marks += b.sample[i] != (int64_t)k;
      seen[k] = 1;
      const int64_t *at = &b.tile[9 * i];
      int64_t ref[9];
      sf__tiles_at(&t, k, ref);
      marks += memcmp(at, ref, sizeof ref) != 0;
      const int64_t o[3] = {pmod(at[0] - P, shape[0]),
                            pmod(at[1] - P, shape[1]),
                            pmod(at[2] - P, shape[2])};
      const int64_t e3[3] = {E, E, E};
      marks += memcmp(o, &b.origin[3 * i], sizeof o) != 0 || b.symmetry[i] != g;
      slabfeed_reader_crop(rd, "Nbody", SLABFEED_LAYOUT_AUTO, o, e3, g, 0, NULL,
                           SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW, want);
      const float *got = in + (size_t)i * in_elems;
      wrong += memcmp(got, want, in_elems * sizeof *got) != 0;
      const int64_t t3[3] = {T, T, T};
      slabfeed_reader_crop(rd, "Hydro", SLABFEED_LAYOUT_AUTO, at, t3, g, 0,
                           NULL, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW,
                           tg_want);
      tg_wrong += memcmp(tg + (size_t)i * tg_elems, tg_want,
                         tg_elems * sizeof *tg) != 0;
      if (g != 0)
        continue;
      /* The owned part of the crop, at offset P + owned origin. */
      for (int64_t ch = 0; ch < 4; ch++)
        for (int64_t z = 0; z < at[6]; z++)
          for (int64_t y = 0; y < at[7]; y++)
            for (int64_t x = 0; x < at[8]; x++) {
              const int64_t cz = P + at[3] + z, cy = P + at[4] + y,
                            cx = P + at[5] + x;
              const int64_t rz = pmod(at[0] + at[3] + z - R[0], shape[0]),
                            ry = pmod(at[1] + at[4] + y - R[1], shape[1]),
                            rx = pmod(at[2] + at[5] + x - R[2], shape[2]);
              stitched[((ch * R[3] + rz) * R[4] + ry) * R[5] + rx] =
                  got[((ch * E + cz) * E + cy) * E + cx];
            }
    }
    marks += b.valid != real;
  }
  CHECK_EQ(shape_bad, 0, "batches of edge T + 2P with tile descriptions");
  CHECK_EQ(marks, 0, "tile indices, descriptions, origins, valid counts");
  CHECK_EQ(wrong, 0, "input crops that differ from the reference read");
  CHECK_EQ(tg_wrong, 0,
           "target tiles (edge T at the tile) that differ from the reference");
  /* Every tile once over all ranks. */
  MPI_Allreduce(MPI_IN_PLACE, seen, (int)t.count, MPI_UNSIGNED_CHAR, MPI_SUM,
                MPI_COMM_WORLD);
  int twice = 0, never = 0;
  for (uint64_t k = 0; k < t.count; k++)
    twice += seen[k] > 1, never += seen[k] == 0;
  CHECK(twice == 0 && never == 0, "tiles seen twice %d, never %d", twice,
        never);
  if (g == 0) {
    /* Identity round trip: the stitched region is the region. */
    MPI_Allreduce(MPI_IN_PLACE, stitched, (int)(nreg * 4), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    whole w;
    int diff = 0;
    if (whole_read(path, "Nbody", 0, &w) == 0) {
      for (int64_t ch = 0; ch < 4; ch++)
        for (int64_t z = 0; z < R[3]; z++)
          for (int64_t y = 0; y < R[4]; y++)
            for (int64_t x = 0; x < R[5]; x++)
              diff +=
                  stitched[((ch * R[3] + z) * R[4] + y) * R[5] + x] !=
                  whole_at(&w, ch, pmod(R[0] + z, shape[0]),
                           pmod(R[1] + y, shape[1]), pmod(R[2] + x, shape[2]));
      whole_free(&w);
    } else {
      diff = -1;
    }
    CHECK_EQ(diff, 0, "stitched owned parts against the region, bit for bit");
  }
  /* seek(0, 0) repeats the pass. */
  slabfeed_batch b = SLABFEED_BATCH_INIT;
  CHECK(slabfeed_seek(l, 0, 0) == SLABFEED_OK &&
            slabfeed_next(l, &b, NULL) == SLABFEED_OK &&
            b.sample[0] == (int64_t)rank * batch,
        "seek(0, 0) repeats the pass");
  if (rank == 0)
    printf("  pass T %d P %d symmetry %2d region '%s': %llu tiles in %llu "
           "steps of %d x %d\n",
           T, P, g, region, (unsigned long long)t.count,
           (unsigned long long)steps, size, batch);
  slabfeed_close(l);
  slabfeed_reader_close(rd);
  free(in);
  free(want);
  free(tg);
  free(tg_want);
  free(stitched);
  free(seen);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int64_t shape[3] = {16, 12, 10};
  if (rank == 0) {
    const int64_t all[6] = {0, 0, 0, 16, 12, 10};
    const int64_t band[6] = {13, 0, 0, 6, 12, 10}; /* wraps in z */
    const int64_t odd[6] = {3, 7, 8, 7, 5, 9};     /* wraps in y and x */
    for (int64_t T = 1; T <= 5; T++) {
      grid_case(shape, all, T, 1);
      grid_case(shape, band, T, 2);
      grid_case(shape, odd, T, 0);
    }
  }
  char path[64];
  snprintf(path, sizeof path, "tiles_np%d.h5", size);
  make_file(path, shape[0], shape[1], shape[2], SLABFEED_LAYOUT_CF, 0, 0, 1);
  const int64_t all[6] = {0, 0, 0, 16, 12, 10};
  const int64_t band[6] = {13, 0, 0, 6, 12, 10};
  pass_case(path, shape, "", all, 4, 2, 0, 2); /* 4 x 3 x 3 tiles */
  pass_case(path, shape, "13,0,0,6,0,0", band, 4, 1, 0, 3);
  pass_case(path, shape, "13,0,0,6,0,0", band, 4, 1, 17, 2); /* augmented */

  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = path;
  c.input = "Nbody";
  c.tile = 6;
  c.pad = 3; /* 12 > 10 voxels in x */
  expect_open_refused(&c, "larger than the box", "tile + 2 pad > box");
  c.pad = 0;
  char err[256];
  slabfeed_config_set(&c, "region", "0,0,0,4,0,0", err, sizeof err);
  expect_open_refused(&c, "larger than the pass region", "tile > region");
  slabfeed_config_set(&c, "region", "", err, sizeof err);
  slabfeed_config_set(&c, "region", "0,12,0,4,0,0", err, sizeof err);
  expect_open_refused(&c, "outside the", "region outside the box");
  slabfeed_config_set(&c, "region", "", err, sizeof err);
  c.locality = 1;
  expect_open_refused(&c, "not supported", "pass with locality");
  c.locality = 0;
  /* The training loader's hold-out may come along: a pass ignores it. */
  c.tile = 4;
  slabfeed_config_set(&c, "holdout", "0,0,0,0,9,0", err, sizeof err);
  slabfeed_loader *l = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "a pass with a hold-out that leaves no random origin: %s", err);
  slabfeed_close(l);
  /* target_pad: the target padded like the input. */
  c.n_holdout = 0;
  c.target = "Hydro";
  c.target_pad = 1;
  l = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "a pass with target_pad: %s", err);
  slabfeed_batch pb = SLABFEED_BATCH_INIT;
  if (l != NULL && slabfeed_next(l, &pb, NULL) == SLABFEED_OK)
    CHECK(pb.target.shape[2] == pb.input.shape[2] &&
              pb.target.shape[2] == c.tile + 2 * c.pad,
          "target_pad: target edge %lld, input edge %lld",
          (long long)pb.target.shape[2], (long long)pb.input.shape[2]);
  slabfeed_close(l);
  return check_finish("mpi.tiles");
}
