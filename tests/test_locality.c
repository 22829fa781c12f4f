/* Locality mode: every origin a rank draws lies in the z-range its node
 * holds in its group (worked out here from the documented placement), no
 * byte crosses nodes, and over an epoch the union of all ranks' origins is
 * uniform on each axis (Pearson chi-square, 8 bins, 7 degrees of freedom,
 * p = 0.001). Without locality the same stream must still pass, and the
 * check must fail for a stream confined to one node's range (the test's
 * own negative control). Placement from SLABFEED_RANK_PER_NODE and
 * SLABFEED_GROUP_NODES. */
#include "testutil.h"

#define BINS 8
#define CHI2_7_P001 24.32 /* upper 0.1% point of chi-square, 7 dof */

static int rank, size;

/* The z-range [lo, hi) this rank's node holds in its group. */
static void node_range(int64_t Z, int rpn, int64_t *lo, int64_t *hi)
{
  if (!rpn) { /* one node: its group holds the box */
    *lo = 0;
    *hi = Z;
    return;
  }
  const char *g = getenv(SLABFEED_ENV_GROUP_NODES);
  const int want = g != NULL ? atoi(g) : 0;
  const int G = want <= 0 ? (want == -1 ? size : 1) : want;
  const int ng = size / G > 1 ? size / G : 1;
  for (int k = 0; k < ng; k++) {
    int64_t a, b;
    slabfeed_slab_plan(size, ng, k, &a, &b);
    if (rank >= a && rank < b) /* one rank per node: its own slab */
      slabfeed_slab_plan(Z, (int)(b - a), rank - (int)a, lo, hi);
  }
}

static void run(const char *path, const int64_t N[3], int locality, int rpn)
{
  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = path;
  c.input = "Nbody";
  c.crop[0] = c.crop[1] = c.crop[2] = 4;
  c.batch = 4;
  c.seed = 2026;
  c.locality = locality;
  c.steps_per_epoch = 400;
  char err[1024];
  slabfeed_loader *l = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open: %s", err);
  if (l == NULL)
    return;
  int64_t lo, hi;
  node_range(N[0], rpn, &lo, &hi);
  uint64_t count[3][BINS] = {{0}}, outside = 0, mine[BINS] = {0}, n = 0;
  for (uint64_t s = 0; s < c.steps_per_epoch; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK) {
      CHECK(0, "next: %s", slabfeed_last_error(l));
      break;
    }
    for (int i = 0; i < c.batch; i++) {
      const int64_t *o = &b.origin[3 * i];
      for (int a = 0; a < 3; a++)
        count[a][o[a] * BINS / N[a]]++;
      outside += o[0] < lo || o[0] >= hi;
      mine[o[0] * BINS / N[0]]++;
      n++;
    }
  }
  slabfeed_stats st = SLABFEED_STATS_INIT;
  slabfeed_stats_get(l, &st);
  uint64_t remote = st.bytes_remote;
  MPI_Allreduce(MPI_IN_PLACE, count, 3 * BINS, MPI_UINT64_T, MPI_SUM,
                MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &remote, 1, MPI_UINT64_T, MPI_SUM,
                MPI_COMM_WORLD);
  if (locality) {
    CHECK(outside == 0,
          "locality: %llu origins of rank %d outside its node's range "
          "[%lld, %lld)",
          (unsigned long long)outside, rank, (long long)lo, (long long)hi);
    CHECK(remote == 0, "locality: %llu bytes crossed nodes",
          (unsigned long long)remote);
  }
  const uint64_t total = c.steps_per_epoch * (uint64_t)c.batch * size;
  for (int a = 0; a < 3; a++) {
    const double x = chi2(count[a], BINS, total);
    CHECK(x < CHI2_7_P001,
          "locality %d: origins on axis %d not uniform: chi-square %.2f >= "
          "%.2f",
          locality, a, x, CHI2_7_P001);
    if (rank == 0)
      printf("locality %d axis %d: chi-square %.2f (%llu origins, %d bins)\n",
             locality, a, x, (unsigned long long)total, BINS);
  }
  /* The statistic has power: one rank's own z origins, confined to its
   * node's range when that is less than the box, fail it. */
  if (locality && hi - lo < N[0])
    CHECK(chi2(mine, BINS, n) > CHI2_7_P001,
          "negative control: rank %d's confined origins passed (chi-square "
          "%.2f)",
          rank, chi2(mine, BINS, n));
  slabfeed_close(l);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *env = getenv(SLABFEED_ENV_RANK_PER_NODE);
  const int rpn = env != NULL && env[0] == '1';
  const int64_t N[3] = {64, 24, 16}; /* Z a multiple of ranks and bins */
  char path[64];
  snprintf(path, sizeof path, "locality_np%d_%d.h5", size, rpn);
  if (make_file(path, N[0], N[1], N[2], SLABFEED_LAYOUT_CF, 0, 0, 0) != 0)
    return check_finish("mpi.locality");
  run(path, N, 1, rpn);
  run(path, N, 0, rpn);
  return check_finish("mpi.locality");
}
