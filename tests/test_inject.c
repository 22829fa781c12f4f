/* A failure on exactly one rank, at every collective stage of
 * slabfeed_open and slabfeed_generate (the test-only injection point of
 * src/inject.h), gives every rank the same status and the same message,
 * naming the failing rank and the stage, within seconds: no hang (the
 * CTest timeout would catch one), no abort. After a failed generator run
 * the earlier file of that name is intact and no partial file is left. A
 * good open afterwards still works: a failed stage leaks nothing that
 * breaks the next collective calls. */
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static int rank, size;

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Every rank holds the same status and message; returns 1 if so. */
static int agreed(slabfeed_status st, const char *msg)
{
  int lo = (int)st, hi = (int)st;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  char first[1024];
  snprintf(first, sizeof first, "%s", msg);
  MPI_Bcast(first, sizeof first, MPI_CHAR, 0, MPI_COMM_WORLD);
  int same = strcmp(first, msg) == 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return lo == hi && all;
}

/* Slowest rank's elapsed time. */
static double slowest(double t)
{
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return t;
}

static void inject(const char *stage, int victim)
{
  char v[64];
  snprintf(v, sizeof v, "%s@%d", stage, victim);
  setenv("SLABFEED_TEST_FAIL", v, 1);
}

/* The open's slab memory is a file per rank (shared_window file): its
 * allocation failure says so. */
static int files_mode;

/* What the message of a stage must say: the injected stages name
 * themselves; an allocation failure is reported as what it is. */
static void stage_words(const char *stage, char *what, size_t n)
{
  if (strcmp(stage, "alloc") == 0 && files_mode)
    snprintf(what, n, "cannot create the shared-memory file");
  else if (strcmp(stage, "alloc.table") == 0)
    snprintf(what, n, "cannot allocate the window table");
  else if (strcmp(stage, "shm.room") == 0)
    snprintf(what, n, "of /dev/shm for shared_window file, which has");
  else if (strcmp(stage, "alloc.map") == 0)
    snprintf(what, n, "cannot open node rank");
  else if (strcmp(stage, "alloc") == 0)
    snprintf(what, n, "cannot map");
  else if (strcmp(stage, "selfcheck") == 0)
    snprintf(what, n, "self-check of transfers between nodes failed");
  else if (strcmp(stage, "gen.alloc") == 0)
    snprintf(what, n, "cannot allocate");
  else
    snprintf(what, n, "stage '%s'", stage);
}

static void expect_stage(const char *stage, int victim, const char *msg,
                         slabfeed_status st, double t)
{
  char who[32], what[96];
  snprintf(who, sizeof who, "rank %d:", victim);
  stage_words(stage, what, sizeof what);
  CHECK(st != SLABFEED_OK, "%s: injected failure not reported", stage);
  CHECK(agreed(st, msg), "%s: ranks disagree (this rank: %s)", stage, msg);
  CHECK(strstr(msg, who) != NULL && strstr(msg, what) != NULL,
        "%s: message '%s' should name %s and %s", stage, msg, who, what);
  const double dt = slowest(t);
  CHECK(dt < 10.0, "%s: the error took %.1f s to reach every rank", stage, dt);
  if (rank == 0 && st != SLABFEED_OK)
    printf("  %-12s failing rank %d -> every rank: %s (%s) in %.3f s\n", stage,
           victim, slabfeed_status_name(st), msg, dt);
}

static void open_stage(const slabfeed_config *c, const char *stage, int victim)
{
  inject(stage, victim);
  slabfeed_loader *l = NULL;
  char err[1024] = "";
  const double t0 = now();
  const slabfeed_status st =
      slabfeed_open(MPI_COMM_WORLD, c, &l, err, sizeof err);
  const double t = now() - t0;
  unsetenv("SLABFEED_TEST_FAIL");
  CHECK(l == NULL, "%s: a failed open returned a loader", stage);
  expect_stage(stage, victim, err, st, t);
  if (l != NULL)
    slabfeed_close(l);
}

/* The generator's stages, over an existing file that must survive. */
static void gen_stage(const char *path, off_t size_before, const char *stage,
                      int victim)
{
  inject(stage, victim);
  slabfeed_gen_config g;
  slabfeed_gen_config_init(&g);
  g.overwrite = 1; /* a rerun regenerates */
  g.path = path;
  g.shape[0] = 12, g.shape[1] = 8, g.shape[2] = 8;
  g.seed = 99;
  g.content = SLABFEED_CONTENT_FIELD;
  char err[1024] = "";
  const double t0 = now();
  const slabfeed_status st =
      slabfeed_generate(MPI_COMM_WORLD, &g, err, sizeof err);
  const double t = now() - t0;
  unsetenv("SLABFEED_TEST_FAIL");
  expect_stage(stage, victim, err, st, t);
  struct stat sb;
  char partial[128];
  snprintf(partial, sizeof partial, "%s.slabfeed-partial", path);
  CHECK(stat(path, &sb) == 0 && sb.st_size == size_before,
        "%s: the earlier '%s' was changed", stage, path);
  CHECK(access(partial, F_OK) != 0, "%s: '%s' was left behind", stage, partial);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char path[64];
  snprintf(path, sizeof path, "inject_np%d.h5", size);
  if (make_file(path, 12, 8, 8, SLABFEED_LAYOUT_CF, 0, 0, 1) != 0)
    return check_finish("inject");
  struct stat sb;
  const off_t before = stat(path, &sb) == 0 ? sb.st_size : -1;

  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = path;
  c.input = "Nbody";
  c.target = "Hydro";
  c.crop[0] = c.crop[1] = c.crop[2] = 4;
  c.halo = 1;
  /* The windows' stages: since 0.13 auto takes files where the read is
   * direct (as here, the file being local); the files' stages follow. */
  c.shared_window = SLABFEED_WINDOW_PER_RANK;
  const char *stages[] = {"open",  "dataset", "place",      "alloc.table",
                          "alloc", "window",  "read.input", "read.target",
                          "fill",  "plan",    "backend"};
  const int nst = (int)(sizeof stages / sizeof *stages);
  if (rank == 0)
    printf("inject: one rank fails at each stage of slabfeed_open (%d "
           "ranks)\n",
           size);
  for (int i = 0; i < nst; i++)
    open_stage(&c, stages[i], (i % 2) ? size - 1 : 0);
  /* Direct reads (pread where the values lie) have no collective call: a
   * failure of one rank's read of a chunked file must still reach every
   * rank. */
  char chunked[64];
  snprintf(chunked, sizeof chunked, "inject_np%d_chunks.h5", size);
  if (make_file(chunked, 12, 8, 8, SLABFEED_LAYOUT_CF, 1, 0, 1) == 0) {
    slabfeed_config d = c;
    d.path = chunked;
    d.read_mode = SLABFEED_READ_DIRECT;
    open_stage(&d, "read.direct", size - 1);
    open_stage(&d, "read.direct", 0);
    /* A file per rank (0.12): one rank's file not made, one rank's
     * direct read (written as a file) failing, the window stage after. */
    d.shared_window = SLABFEED_WINDOW_FILE;
    files_mode = 1;
    open_stage(&d, "alloc", size - 1);
    open_stage(&d, "alloc.map", 0);
    open_stage(&d, "window", 0);
    open_stage(&d, "read.direct", size - 1);
    /* /dev/shm without room (test switch: 1000 bytes free), seen by the
     * machine's first rank alone: shared_window file fails on every
     * rank with its word; auto takes windows and says why. */
    setenv("SLABFEED_TEST_SHM_FREE", "1000", 1);
    open_stage(&d, "shm.room", 0);
    slabfeed_config a = d;
    a.shared_window = SLABFEED_WINDOW_AUTO;
    slabfeed_loader *l = NULL;
    char err[1024] = "", how[4096] = "";
    CHECK(slabfeed_open(MPI_COMM_WORLD, &a, &l, err, sizeof err) ==
                  SLABFEED_OK &&
              slabfeed_placement(l, how, sizeof how) == SLABFEED_OK,
          "auto without room in /dev/shm: %s", err);
    CHECK(l == NULL || size == 1 || getenv("SLABFEED_RANK_PER_NODE") != NULL ||
              strstr(how, "(not files: the slabs need") != NULL,
          "auto without room: windows, and why: %s", how);
    slabfeed_close(l);
    unsetenv("SLABFEED_TEST_SHM_FREE");
    files_mode = 0;
    /* None of the node's files is left behind (they carry the pid of the
     * node's first rank: every rank looks for its own). */
    char mine[64];
    snprintf(mine, sizeof mine, "slabfeed.%ld.", (long)getpid());
    int left = 0;
    DIR *dir = opendir("/dev/shm");
    for (struct dirent *f = dir != NULL ? readdir(dir) : NULL; f != NULL;
         f = readdir(dir))
      left += strncmp(f->d_name, mine, strlen(mine)) == 0;
    if (dir != NULL)
      closedir(dir);
    CHECK(left == 0, "rank %d: %d slab files /dev/shm/%s* left behind", rank,
          left, mine);
  }
  /* With pieces crossing "nodes", the open's self-check of each transfer
   * design must catch an MPI that delivers a wrong float (the injection
   * changes one float of what arrived on one rank). */
  const char *groups = getenv("SLABFEED_GROUP_NODES");
  if (groups != NULL && strcmp(groups, "-1") == 0)
    for (int m = 0; m < 2; m++) {
      setenv("SLABFEED_REMOTE", m ? "get" : "send", 1);
      if (rank == 0)
        printf("inject: self-check with SLABFEED_REMOTE=%s\n",
               m ? "get" : "send");
      open_stage(&c, "selfcheck", size - 1);
      unsetenv("SLABFEED_REMOTE");
    }
  if (rank == 0)
    printf("inject: one rank fails at each stage of slabfeed_generate\n");
  const char *gstages[] = {"gen.alloc", "gen.create", "gen.write"};
  for (int i = 0; i < 3; i++)
    gen_stage(path, before, gstages[i], size - 1);

  /* Nothing left broken: a good open reads the (intact) file. */
  slabfeed_loader *l = NULL;
  char err[1024] = "";
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "good open after the failures: %s", err);
  slabfeed_batch b = SLABFEED_BATCH_INIT;
  CHECK(l != NULL && slabfeed_next(l, &b, NULL) == SLABFEED_OK,
        "a batch after the failures");
  slabfeed_close(l);
  return check_finish("inject");
}
