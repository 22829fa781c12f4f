/* mpi.holdout: regions kept out of training.
 *  - The sampler's allowed origins are exactly those whose crop, wrapped
 *    periodically, contains no held-out voxel (brute force over every
 *    origin of a small box, regions that wrap included), and its draws are
 *    uniform over them (chi-square against the uniform law, and a negative
 *    control that a biased law fails).
 *  - A loader with a hold-out on 1-3 ranks: every crop is clear of the
 *    regions, voxel by voxel; every crop equals an independent serial read
 *    of the file at its origin and symmetry; global sample k's origin and
 *    symmetry are those of the serial sampler (rank-count independence);
 *    seek resumes exactly.
 *  - A hold-out that leaves no origin, a region outside the box and a
 *    hold-out in locality mode are refused on every rank, saying why. */
#include <math.h>

#include "plan/sampler.h"
#include "testutil.h"

static int rank, size;

/* 1 when voxel p (periodic) lies in box b {z,y,x,dz,dy,dx} (resolved). */
static int voxel_in(const int64_t shape[3], const int64_t p[3],
                    const int64_t b[6])
{
  for (int a = 0; a < 3; a++)
    if (((p[a] - b[a]) % shape[a] + shape[a]) % shape[a] >= b[3 + a])
      return 0;
  return 1;
}

/* Whether the crop at o contains a voxel of any box: voxel by voxel. */
static int crop_hits(const int64_t shape[3], const int64_t crop[3],
                     const int64_t o[3], int n, const int64_t (*b)[6])
{
  for (int64_t i = 0; i < crop[0]; i++)
    for (int64_t j = 0; j < crop[1]; j++)
      for (int64_t k = 0; k < crop[2]; k++) {
        const int64_t p[3] = {(o[0] + i) % shape[0], (o[1] + j) % shape[1],
                              (o[2] + k) % shape[2]};
        for (int r = 0; r < n; r++)
          if (voxel_in(shape, p, b[r]))
            return 1;
      }
  return 0;
}

/* The sampler against brute force and the uniform law (rank 0). */
static void sampler_case(void)
{
  const int64_t shape[3] = {12, 10, 9}, crop[3] = {3, 3, 3};
  /* A z-band, a box that wraps on y and x, a thin slab on x. */
  const int64_t b[3][6] = {
      {9, 0, 0, 2, 10, 9}, {1, 8, 7, 2, 4, 4}, {4, 0, 4, 3, 10, 1}};
  sf__sampler s;
  sf__sampler_init(&s, shape, 77, SLABFEED_SYM_ALL);
  sf__err e;
  sf__err_clear(&e);
  CHECK(sf__sampler_holdout(&s, crop, 3, b, &e) == SLABFEED_OK, "holdout: %s",
        e.msg);
  if (s.hold == NULL)
    return;
  /* Brute force: the allowed origins and their index. */
  const int64_t n = shape[0] * shape[1] * shape[2];
  int *index = malloc((size_t)n * sizeof *index);
  int allowed = 0;
  for (int64_t z = 0; z < shape[0]; z++)
    for (int64_t y = 0; y < shape[1]; y++)
      for (int64_t x = 0; x < shape[2]; x++) {
        const int64_t o[3] = {z, y, x};
        const int64_t at = (z * shape[1] + y) * shape[2] + x;
        index[at] = crop_hits(shape, crop, o, 3, b) ? -1 : allowed++;
      }
  CHECK_EQ(s.hold->allowed, (uint64_t)allowed,
           "allowed origins: the sampler's count against brute force");
  /* Draws: every one allowed, uniform over the allowed ones. */
  const uint64_t draws = 400000;
  uint64_t *count = calloc((size_t)allowed, sizeof *count);
  uint64_t bad = 0, low = 0;
  for (uint64_t k = 0; k < draws; k++) {
    int64_t o[3];
    int32_t g;
    sf__sampler_draw(&s, k / 1000, k, o, &g);
    const int64_t at = (o[0] * shape[1] + o[1]) * shape[2] + o[2];
    if (o[0] < 0 || o[0] >= shape[0] || o[1] < 0 || o[1] >= shape[1] ||
        o[2] < 0 || o[2] >= shape[2] || index[at] < 0) {
      bad++;
      continue;
    }
    count[index[at]]++;
    low += index[at] < allowed / 2;
  }
  CHECK_EQ(bad, (uint64_t)0, "draws whose crop holds a held-out voxel");
  /* chi-square with allowed - 1 degrees of freedom: mean df, sd
   * sqrt(2 df); 5 sd is far out for a correct sampler. */
  const double x2 = chi2(count, allowed, draws), df = allowed - 1;
  CHECK(fabs(x2 - df) < 5 * sqrt(2 * df),
        "uniformity over %d allowed origins: chi2 %.1f, df %.0f", allowed, x2,
        df);
  /* Negative control: the same test rejects a law that favours the first
   * half of the allowed origins by 10 %. */
  for (int i = 0; i < allowed; i++)
    count[i] =
        (uint64_t)((double)draws / allowed * (i < allowed / 2 ? 1.1 : 0.9));
  const double biased = chi2(count, allowed, draws);
  CHECK(fabs(biased - df) > 5 * sqrt(2 * df),
        "negative control: a 10 %% bias must fail (chi2 %.1f, df %.0f)", biased,
        df);
  printf("  sampler: %d of %lld origins allowed (brute force agrees), chi2 "
         "%.1f for df %.0f over %llu draws, biased control %.1f\n",
         allowed, (long long)n, x2, df, (unsigned long long)draws, biased);
  (void)low;
  free(count);
  free(index);
  sf__sampler_free(&s);

  /* Nothing left: the message says so. */
  /* Rows 0..7 of 10: every 3-row window (periodic) meets them. */
  const int64_t all[1][6] = {{0, 0, 0, 12, 8, 9}};
  sf__sampler t;
  sf__sampler_init(&t, shape, 1, SLABFEED_SYM_ALL);
  sf__err_clear(&e);
  CHECK(sf__sampler_holdout(&t, crop, 1, all, &e) == SLABFEED_ERR_ARG &&
            strstr(e.msg, "no crop origin") != NULL,
        "a hold-out that leaves nothing: %s", e.msg);
  sf__sampler_free(&t);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == 0)
    sampler_case();

  char path[64];
  snprintf(path, sizeof path, "holdout_np%d.h5", size);
  const int64_t shape[3] = {16, 12, 12};
  make_file(path, shape[0], shape[1], shape[2], SLABFEED_LAYOUT_CF, 0, 0, 1);
  slabfeed_config c;
  slabfeed_config_init(&c);
  char err[1024];
  /* The common case: the last eighth of z held out (extent 0: whole
   * axis), and a small box that wraps in x. Set by text, as users do. */
  CHECK(slabfeed_config_set(&c, "path", path, err, sizeof err) == 0 &&
            slabfeed_config_set(&c, "input", "Nbody", err, sizeof err) == 0 &&
            slabfeed_config_set(&c, "target", "Hydro", err, sizeof err) == 0 &&
            slabfeed_config_set(&c, "crop", "4", err, sizeof err) == 0 &&
            slabfeed_config_set(&c, "batch", "3", err, sizeof err) == 0 &&
            slabfeed_config_set(&c, "seed", "5", err, sizeof err) == 0 &&
            slabfeed_config_set(&c, "steps_per_epoch", "6", err, sizeof err) ==
                0 &&
            slabfeed_config_set(&c, "holdout", "14,0,0,2,0,0;3,5,10,2,2,4", err,
                                sizeof err) == 0,
        "options: %s", err);
  const int64_t boxes[2][6] = {{14, 0, 0, 2, 12, 12}, {3, 5, 10, 2, 2, 4}};
  slabfeed_loader *l = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open: %s", err);
  if (l == NULL)
    return check_finish("mpi.holdout");
  sf__sampler ref;
  sf__sampler_init(&ref, shape, c.seed, c.symmetries);
  sf__err e;
  sf__err_clear(&e);
  sf__sampler_holdout(&ref, c.crop, 2, boxes, &e);
  slabfeed_reader *rd = NULL;
  CHECK(slabfeed_reader_open(path, &rd, err, sizeof err) == SLABFEED_OK,
        "reader: %s", err);
  const size_t per = 4 * 64, per_t = 5 * 64;
  float *in = malloc((size_t)c.batch * per * sizeof *in);
  float *tg = malloc((size_t)c.batch * per_t * sizeof *tg);
  float want[5 * 64];
  int hits = 0, wrong = 0, stream = 0, checked = 0;
  uint64_t e3 = 0, s3 = 0;
  int64_t first_at_3[3 * 8];
  for (int s = 0; s < 9; s++) { /* crosses an epoch end */
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK) {
      CHECK(0, "next: %s", slabfeed_last_error(l));
      break;
    }
    if (s == 3) {
      e3 = b.epoch, s3 = b.step;
      memcpy(first_at_3, b.origin, 3 * sizeof(int64_t) * (size_t)c.batch);
    }
    slabfeed_copy_to_host(l, &b.input, in);
    slabfeed_copy_to_host(l, &b.target, tg);
    for (int i = 0; i < c.batch; i++) {
      const int64_t *o = &b.origin[3 * i];
      hits += crop_hits(shape, c.crop, o, 2, boxes);
      int64_t ro[3];
      int32_t g;
      sf__sampler_draw(&ref, b.epoch, (uint64_t)b.sample[i], ro, &g);
      stream += memcmp(ro, o, sizeof ro) != 0 || g != b.symmetry[i];
      for (int d = 0; d < 2 && rd != NULL; d++) {
        const int ch = d == 0 ? 4 : 5;
        slabfeed_reader_crop(rd, d == 0 ? "Nbody" : "Hydro",
                             SLABFEED_LAYOUT_AUTO, o, c.crop, b.symmetry[i], 0,
                             NULL, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW,
                             want);
        const float *got =
            d == 0 ? in + (size_t)i * per : tg + (size_t)i * per_t;
        wrong += memcmp(got, want, (size_t)ch * 64 * sizeof(float)) != 0;
      }
      checked++;
    }
  }
  CHECK_EQ(hits, 0, "crops holding a held-out voxel (of %d)", checked);
  CHECK_EQ(wrong, 0, "crops that differ from the reference read");
  CHECK_EQ(stream, 0,
           "samples off the serial stream (rank-count independence)");
  /* Exact resume. */
  CHECK(slabfeed_seek(l, e3, s3) == SLABFEED_OK, "seek");
  slabfeed_batch b = SLABFEED_BATCH_INIT;
  CHECK(slabfeed_next(l, &b, NULL) == SLABFEED_OK &&
            memcmp(b.origin, first_at_3,
                   3 * sizeof(int64_t) * (size_t)c.batch) == 0,
        "seek resumes the hold-out stream exactly");
  slabfeed_close(l);
  slabfeed_reader_close(rd);
  sf__sampler_free(&ref);
  free(in);
  free(tg);
  if (rank == 0)
    printf("  loader: %d crops on %d rank%s clear of the hold-out, equal to "
           "the reference, on the serial stream\n",
           checked * size, size, size == 1 ? "" : "s");

  /* Refusals, agreed on every rank. */
  slabfeed_config bad = c;
  slabfeed_config_set(&bad, "holdout", "", err, sizeof err);
  /* Rows 0..8 of 12: every 4-row window meets them. */
  slabfeed_config_set(&bad, "holdout", "0,0,0,0,9,0", err, sizeof err);
  expect_open_refused(&bad, "no crop origin", "nothing left");
  bad = c;
  slabfeed_config_set(&bad, "holdout", "", err, sizeof err);
  slabfeed_config_set(&bad, "holdout", "16,0,0,1,0,0", err, sizeof err);
  expect_open_refused(&bad, "outside the", "region outside the box");
  bad = c;
  slabfeed_config_set(&bad, "holdout", "0,0,0,1,13,0", err, sizeof err);
  expect_open_refused(&bad, "outside the", "extent past the box");
  bad = c;
  bad.locality = 1;
  expect_open_refused(&bad, "not supported", "with locality");
  return check_finish("mpi.holdout");
}
