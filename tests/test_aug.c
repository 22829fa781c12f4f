/* mpi.aug: amplitude augmentation (aug_add, aug_mul, target_aug_*,
 * aug_share) through the loader, on 1-3 ranks and rank-per-node.
 *  - The factors and offsets each batch reports (slabfeed_batch.input_aug,
 *    target_aug) are those of the documented stream, recomputed here from
 *    sf__hash with Box-Muller written out (so the same for any rank count
 *    and after a seek); a deviation of 0 gives the identities 1 and -0.
 *  - Every voxel of every crop (input and target, all symmetries, vector
 *    groups, an input normalisation) against an independent serial read of
 *    the file: fmaf(normalised value, m, a) of its source channel, bit for
 *    bit; the channels of a vector group share one factor; with aug_share
 *    the target's channels take the input's draws (equal factors where the
 *    deviations are equal), with aug_share 0 draws of their own.
 *  - Statistics: over every sample of every rank, a / sigma_add and
 *    log(m) / sigma_mul follow the standard normal (Kolmogorov-Smirnov at
 *    the 0.1 % level) and are uncorrelated; negative controls: the same
 *    values are rejected as N(0, 2^2) and as N(0.3, 1).
 *  - Without augmentation (or with deviations of 0) no factors are
 *    reported and the crops are those of a loader without the options.
 *  - Refused on every rank alike: augmentation in a tiled pass, an offset
 *    on a vector channel, factors of different deviations in a vector
 *    group, a list of the wrong length, a negative or non-numeric
 *    deviation, target augmentation without a target. */
#include <math.h>

#include "plan/sampler.h"
#include "testutil.h"

static int rank, size;

static const int vin[1][3] = {{1, 2, 3}}, vtg[1][3] = {{1, 2, 3}};
static const float sig_add_in = 0.5f, sig_mul = 0.2f, sig_add_t4 = 0.25f;

static uint32_t bits(float v)
{
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

/* The documented normal: Box-Muller over draws j, j + 1 of sample k. */
static double normal_of(uint64_t seed, uint64_t epoch, uint64_t k, uint32_t j)
{
  const double u1 =
      (double)((sf__hash(seed, epoch, k, j) >> 11) + 1) * ldexp(1.0, -53);
  const double u2 =
      (double)(sf__hash(seed, epoch, k, j + 1) >> 11) * ldexp(1.0, -53);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2); /* 2 pi */
}

/* Draw slot of channel ch of dataset d: the key channel (first of its
 * vector group) for the input and, shared, for the target below the
 * input's 4 channels; else 64 d + key. */
static int slot_of(int d, int ch, int share)
{
  const int key = ch >= 1 && ch <= 3 ? 1 : ch;
  return d == 1 && share && key < 4 ? key : 64 * d + key;
}

static void want_factors(int d, int C, const float *add, const float *mul,
                         int share, uint64_t seed, uint64_t epoch, uint64_t k,
                         float *f)
{
  for (int ch = 0; ch < C; ch++) {
    const int s = slot_of(d, ch, share);
    f[ch] = mul[ch] > 0
                ? (float)exp((double)mul[ch] *
                             normal_of(seed, epoch, k, (uint32_t)(272 + 2 * s)))
                : 1.0f;
    f[C + ch] = add[ch] > 0
                    ? (float)((double)add[ch] *
                              normal_of(seed, epoch, k, (uint32_t)(16 + 2 * s)))
                    : -0.0f;
  }
}

static void config(slabfeed_config *c, const char *path, int share)
{
  base_config(c, path, 6);
  c->batch = 4;
  c->seed = 11;
  c->n_input_vectors = c->n_target_vectors = 1;
  memcpy(c->input_vectors, vin, sizeof vin);
  memcpy(c->target_vectors, vtg, sizeof vtg);
  c->aug_add = "0.5,0,0,0";
  c->aug_mul = "0.2";
  c->target_aug_add = "0.5,0,0,0,0.25";
  c->target_aug_mul = "0.2";
  c->aug_share = share;
  char err[256];
  CHECK(slabfeed_config_set(c, "input_norm", "1000,100;0,50;0,50;0,50", err,
                            sizeof err) == SLABFEED_OK,
        "input_norm: %s", err);
}

static float normalised(int k, float x)
{
  return k == 0 ? (x - 1000.0f) / 100.0f : x / 50.0f;
}

/* One loader: factors and every voxel of `steps` batches; the samples'
 * (a / sigma, log m / sigma) of input channel 0 into z_add, z_mul (n). */
static void run(const char *path, const whole w[2], const int64_t N[3],
                int share, int steps, double *z_add, double *z_mul, int *n)
{
  slabfeed_config c;
  config(&c, path, share);
  slabfeed_loader *l = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open (share %d): %s", share, err);
  if (l == NULL)
    return;
  const float add[2][5] = {{sig_add_in, 0, 0, 0, 0},
                           {sig_add_in, 0, 0, 0, sig_add_t4}};
  const float mul[2][5] = {{sig_mul, sig_mul, sig_mul, sig_mul, 0},
                           {sig_mul, sig_mul, sig_mul, sig_mul, sig_mul}};
  int64_t bad_f = 0, bad_v = 0, checked = 0;
  for (int s = 0; s < steps; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK) {
      CHECK(0, "next: %s", slabfeed_last_error(l));
      break;
    }
    CHECK(b.input_aug != NULL && b.target_aug != NULL, "factors reported");
    if (b.input_aug == NULL || b.target_aug == NULL)
      break;
    for (int i = 0; i < c.batch; i++) {
      float f[2][10];
      const float *got[2] = {b.input_aug + i * 8, b.target_aug + i * 10};
      for (int d = 0; d < 2; d++) {
        const int C = d == 0 ? 4 : 5;
        want_factors(d, C, add[d], mul[d], share, c.seed, b.epoch,
                     (uint64_t)b.sample[i], f[d]);
        for (int q = 0; q < 2 * C; q++)
          if (bits(f[d][q]) != bits(got[d][q]) && bad_f++ < 5)
            CHECK(0, "sample %lld dataset %d factor %d: %.9g, want %.9g",
                  (long long)b.sample[i], d, q, got[d][q], f[d][q]);
      }
      /* Vector channels: one factor, no offset. */
      for (int d = 0; d < 2; d++)
        CHECK(got[d][1] == got[d][2] && got[d][2] == got[d][3] &&
                  bits(got[d][(d == 0 ? 4 : 5) + 2]) == bits(-0.0f),
              "vector group factors %g %g %g", got[d][1], got[d][2], got[d][3]);
      /* Shared draws: equal deviations give equal factors. */
      if (share)
        CHECK(bits(got[0][0]) == bits(got[1][0]) &&
                  bits(got[0][1]) == bits(got[1][1]) &&
                  bits(got[0][4]) == bits(got[1][5]),
              "shared factors differ: %g/%g %g/%g %g/%g", got[0][0], got[1][0],
              got[0][1], got[1][1], got[0][4], got[1][5]);
      else
        CHECK(got[0][0] != got[1][0] && got[0][4] != got[1][5],
              "unshared target draws equal the input's");
      if (*n < 4096) {
        z_add[*n] = (double)got[0][4] / sig_add_in;
        z_mul[*n] = log((double)got[0][0]) / sig_mul;
        (*n)++;
      }
      /* Every voxel, both datasets. */
      const int g = b.symmetry[i];
      const int64_t *o = &b.origin[3 * i];
      for (int d = 0; d < 2; d++) {
        const slabfeed_tensor *t = d == 0 ? &b.input : &b.target;
        const int C = d == 0 ? 4 : 5;
        for (int k = 0; k < C; k++)
          for (int64_t i0 = 0; i0 < 6; i0++)
            for (int64_t i1 = 0; i1 < 6; i1++)
              for (int64_t i2 = 0; i2 < 6; i2++) {
                const int64_t ii[3] = {i0, i1, i2};
                int src;
                const float x = sym_value(&w[d], N, c.crop, d == 0 ? vin : vtg,
                                          1, k, ii, o, g, &src);
                const float y = d == 0 ? normalised(src, x) : x;
                const float want = fmaf(y, got[d][src], got[d][C + src]);
                const float have =
                    ((const float *)
                         t->data)[i * t->strides[0] + k * t->strides[1] +
                                  i0 * t->strides[2] + i1 * t->strides[3] + i2];
                checked++;
                if (bits(want) != bits(have) && bad_v++ < 5)
                  CHECK(0,
                        "sample %lld d%d ch %d (%lld,%lld,%lld) g %d: %.9g, "
                        "want %.9g",
                        (long long)b.sample[i], d, k, (long long)i0,
                        (long long)i1, (long long)i2, g, have, want);
              }
      }
    }
  }
  CHECK(bad_f == 0 && bad_v == 0,
        "share %d: %lld factor and %lld voxel mismatches of %lld", share,
        (long long)bad_f, (long long)bad_v, (long long)checked);
  if (rank == 0)
    printf("  share %d: %lld voxels checked on rank 0, %d samples\n", share,
           (long long)checked, *n);
  slabfeed_close(l);
}

static int cmp_double(const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Kolmogorov-Smirnov distance of the sorted x[n] from N(mu, sd^2). */
static double ks(const double *x, int n, double mu, double sd)
{
  double d = 0;
  for (int i = 0; i < n; i++) {
    const double F = 0.5 * erfc(-(x[i] - mu) / (sd * sqrt(2.0)));
    const double lo = F - (double)i / n, hi = (double)(i + 1) / n - F;
    d = fmax(d, fmax(lo, hi));
  }
  return d;
}

/* The variates of all ranks on rank 0: tested there, the verdict shared. */
static void statistics(double *za, double *zm, int n)
{
  int *counts = malloc((size_t)size * sizeof *counts);
  int *at = malloc((size_t)size * sizeof *at);
  MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; rank == 0 && r < size; r++) {
    at[r] = total;
    total += counts[r];
  }
  double *all[2] = {NULL, NULL};
  if (rank == 0) {
    all[0] = malloc((size_t)total * sizeof(double));
    all[1] = malloc((size_t)total * sizeof(double));
  }
  MPI_Gatherv(za, n, MPI_DOUBLE, all[0], counts, at, MPI_DOUBLE, 0,
              MPI_COMM_WORLD);
  MPI_Gatherv(zm, n, MPI_DOUBLE, all[1], counts, at, MPI_DOUBLE, 0,
              MPI_COMM_WORLD);
  int ok = 1;
  if (rank == 0) {
    double sxy = 0;
    for (int i = 0; i < total; i++)
      sxy += all[0][i] * all[1][i];
    const double corr = sxy / total; /* both standard: E[xy] = 0 */
    const double crit = 1.95 / sqrt((double)total); /* KS, alpha 0.001 */
    for (int v = 0; v < 2; v++) {
      qsort(all[v], (size_t)total, sizeof(double), cmp_double);
      const double d0 = ks(all[v], total, 0, 1);
      const double d_wide = ks(all[v], total, 0, 2);
      const double d_shift = ks(all[v], total, 0.3, 1);
      printf("  %s: n %d, KS %.4f (critical %.4f), against N(0,4) %.4f, "
             "N(0.3,1) %.4f\n",
             v == 0 ? "offset / sigma" : "log factor / sigma", total, d0, crit,
             d_wide, d_shift);
      CHECK(d0 < crit, "%s is not standard normal: KS %.4f >= %.4f",
            v == 0 ? "a/sigma" : "log(m)/sigma", d0, crit);
      CHECK(d_wide > crit && d_shift > crit,
            "negative control not rejected: %.4f %.4f (critical %.4f)", d_wide,
            d_shift, crit);
      ok &= d0 < crit;
    }
    printf("  correlation of offset and log factor: %.4f (bound %.4f)\n", corr,
           4.0 / sqrt((double)total));
    CHECK(fabs(corr) < 4.0 / sqrt((double)total), "correlated draws: %.4f",
          corr);
    CHECK(total >= 400, "too few samples: %d", total);
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  free(all[0]);
  free(all[1]);
  free(counts);
  free(at);
}

/* Deviations of 0 (or none): no factors, the crops of a loader without. */
static void check_identity(const char *path)
{
  slabfeed_config a, b;
  config(&a, path, 1);
  a.aug_add = "0";
  a.aug_mul = "0,0,0,0";
  a.target_aug_add = NULL;
  a.target_aug_mul = "";
  config(&b, path, 1);
  b.aug_add = b.aug_mul = b.target_aug_add = b.target_aug_mul = NULL;
  slabfeed_loader *la = NULL, *lb = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &a, &la, err, sizeof err) ==
                SLABFEED_OK &&
            slabfeed_open(MPI_COMM_WORLD, &b, &lb, err, sizeof err) ==
                SLABFEED_OK,
        "open: %s", err);
  for (int s = 0; la != NULL && lb != NULL && s < 5; s++) {
    slabfeed_batch x = SLABFEED_BATCH_INIT, y = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(la, &x, NULL) == SLABFEED_OK &&
              slabfeed_next(lb, &y, NULL) == SLABFEED_OK,
          "next");
    CHECK(x.input_aug == NULL && x.target_aug == NULL, "zero deviations "
                                                       "report factors");
    const size_t in = 4 * 6 * 6 * 6 * sizeof(float) * 4,
                 tg = 4 * 5 * 6 * 6 * 6 * sizeof(float);
    CHECK(memcmp(x.input.data, y.input.data, in) == 0 &&
              memcmp(x.target.data, y.target.data, tg) == 0 &&
              memcmp(x.origin, y.origin, 4 * 3 * sizeof(int64_t)) == 0,
          "deviations of 0 changed the batch at step %d", s);
  }
  slabfeed_close(la);
  slabfeed_close(lb);
}

static void refused(const slabfeed_config *c, const char *needle,
                    const char *what)
{
  expect_open_refused(c, needle, what);
}

static void check_refusals(const char *path)
{
  slabfeed_config c;
  config(&c, path, 1);
  c.tile = 4;
  refused(&c, "a tiled pass (tile 4) takes none", "in a pass");
  config(&c, path, 1);
  c.aug_add = "0.5,0.1,0,0";
  refused(&c, "channel 1 of input vector group 0 (1,2,3) has an offset",
          "offset on a vector");
  config(&c, path, 1);
  c.target_aug_mul = "0.2,0.2,0.3,0.2,0";
  refused(&c,
          "channel 2 of target vector group 0 (1,2,3) has another "
          "factor's deviation",
          "factors in a group");
  config(&c, path, 1);
  c.aug_mul = "0.2,0.2";
  refused(&c, "aug_mul has 2 entries but input dataset 'Nbody' has 4",
          "list length");
  config(&c, path, 1);
  c.aug_add = "-0.1";
  refused(&c, "aug_add '-0.1': entry 0 is not a finite standard deviation",
          "negative");
  c.aug_add = "0.1,x";
  refused(&c, "aug_add '0.1,x': entry 1 is not", "not a number");
  config(&c, path, 1);
  c.target = NULL;
  c.n_target_vectors = 0;
  refused(&c, "target_aug_add/target_aug_mul without a target dataset",
          "no target");
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char path[256];
  snprintf(path, sizeof path, "aug_%s_%d.h5", argc > 1 ? argv[1] : "t", size);
  const int64_t N[3] = {14, 12, 10};
  whole w[2];
  generate_and_read(path, N, w);
  double *za = malloc(4096 * sizeof *za), *zm = malloc(4096 * sizeof *zm);
  int n = 0;
  const int steps = (1200 + 4 * size - 1) / (4 * size);
  run(path, w, N, 1, steps, za, zm, &n);
  statistics(za, zm, n);
  n = 0;
  run(path, w, N, 0, 10, za, zm, &n);
  check_identity(path);
  check_refusals(path);
  free(za);
  free(zm);
  whole_free(&w[0]);
  whole_free(&w[1]);
  return check_finish("mpi.aug");
}
