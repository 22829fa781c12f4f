/* mpi.huge: the open's segment with huge_pages auto and off (0.11). Every
 * crop of both datasets, every symmetry drawn, is compared bit for bit
 * with an independent serial read of the file either way; the placement
 * line says what the kernel gave ("huge pages: off", "X of Y MB", or
 * "none (...)" with the reason), and where the segment is private memory
 * that the kernel's policy allows huge pages of 2 MiB for, auto got some
 * (the segment is several MiB). Run on 1 rank (Open MPI's window of one
 * process is private memory), 2 ranks (shared memory) and rank per node. */
#include "common/sys.h"
#include "testutil.h"

static int rank, size;

static void run(slabfeed_huge_pages huge, const char *path, const whole w[2],
                const int64_t N[3])
{
  const char *tag = huge == SLABFEED_HUGE_OFF ? "off" : "auto";
  slabfeed_config c;
  base_config(&c, path, 12);
  c.huge_pages = huge;
  c.seed = 7 + (uint64_t)huge;
  char err[1024];
  slabfeed_loader *l = NULL;
  const slabfeed_status st =
      slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err);
  CHECK(st == SLABFEED_OK, "huge_pages %s: open: %s", tag, err);
  if (st != SLABFEED_OK)
    return;
  char line[2048] = "";
  slabfeed_placement(l, line, sizeof line);
  const char *h = strstr(line, "huge pages: ");
  CHECK(h != NULL, "huge_pages %s: the placement names the pages: %s", tag,
        line);
  if (h != NULL && huge == SLABFEED_HUGE_OFF)
    CHECK(strncmp(h, "huge pages: off", 15) == 0,
          "huge_pages off: the placement says '%.60s'", h);
  if (h != NULL && huge == SLABFEED_HUGE_AUTO) {
    double got = -1, of = -1;
    char policy[32] = "";
    if (sscanf(h, "huge pages: %lf of %lf MB", &got, &of) == 2)
      CHECK(got > 0 && got <= of, "huge_pages auto: %g of %g MB", got, of);
    else if (strncmp(h, "huge pages: none (shared memory: ", 33) == 0)
      ; /* a tmpfs file's: its mount's huge= option (and shmem_enabled) */
    else if (sscanf(h,
                    "huge pages: none (private memory: the kernel's "
                    "transparent_hugepage/enabled is %31[a-z_]",
                    policy) == 1) {
      /* None given: only where the kernel's policy refuses them. */
      char mine[32];
      CHECK(strcmp(policy, "never") == 0 || strcmp(policy, "deny") == 0 ||
                strcmp(policy, "unknown") == 0,
            "huge_pages auto: none for private memory while the policy is "
            "'%s'",
            policy);
      CHECK(strcmp(sf__huge_policy(0, mine, sizeof mine), policy) == 0,
            "the policy named (%s) is the kernel's (%s)", policy, mine);
    } else
      /* The policy allows them and none came: a failure where the
       * segment (several MiB) holds whole huge pages of this kernel. */
      CHECK(sf__huge_page_size() > ((size_t)2 << 20),
            "huge_pages auto: a segment of several MiB got no huge page "
            "where the kernel allows them: '%.160s'",
            h);
    if (rank == 0)
      printf("  auto: %.120s\n", h);
  }
  int64_t bad = 0, checked = 0;
  char why[256] = "";
  const int none[1][3] = {{0, 0, 0}};
  for (int s = 0; s < 6; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK) {
      CHECK(0, "huge_pages %s: next: %s", tag, slabfeed_last_error(l));
      break;
    }
    for (int i = 0; i < c.batch; i++)
      for (int d = 0; d < 2; d++)
        bad += crop_mismatches(d == 0 ? &b.input : &b.target, i, d == 0 ? 4 : 5,
                               &w[d], N, c.crop, none, 0, &b.origin[3 * i],
                               b.symmetry[i], &checked, why, sizeof why);
  }
  CHECK(bad == 0 && checked > 0,
        "huge_pages %s: %lld of %lld voxels differ from the file (%s)", tag,
        (long long)bad, (long long)checked, why);
  slabfeed_close(l);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int64_t N[3] = {64, 48, 64}; /* 7 MB of float32: 4 + 5 channels */
  char path[64];
  snprintf(path, sizeof path, "huge_np%d%s.h5", size,
           getenv(SLABFEED_ENV_RANK_PER_NODE) != NULL ? "_rpn" : "");
  if (make_file(path, N[0], N[1], N[2], SLABFEED_LAYOUT_CF, 0, 0, 1) != 0)
    return check_finish("mpi.huge");
  whole w[2];
  const int a = whole_read(path, "Nbody", 0, &w[0]);
  const int b = whole_read(path, "Hydro", 0, &w[1]);
  CHECK(a == 0 && b == 0, "independent read of %s", path);
  if (a == 0 && b == 0) {
    run(SLABFEED_HUGE_AUTO, path, w, N);
    run(SLABFEED_HUGE_OFF, path, w, N);
  }
  whole_free(&w[0]);
  whole_free(&w[1]);
  return check_finish("mpi.huge");
}
