/* slabfeed_generate on a small filesystem that fills up (issue "Nothing
 * lost, nothing hangs"), run by tests/test_diskfull.sh on 1-4 ranks:
 *
 *   test_diskfull DIR LAYOUT MODE
 *
 * DIR is on a 4 MiB tmpfs (MODE tmpfs) or under a 4 MiB file size limit
 * set right after MPI_Init (MODE fsize, fsize_preload.c); LAYOUT is
 * contig or chunked. An earlier good file DIR/g.h5 is written, then a
 * volume of 9.4 MB over it, twice: as is (the free space or the limit is
 * found before the bulk write) and, on tmpfs, with the reservation
 * skipped (SLABFEED_TEST_NO_RESERVE=1: the bulk write itself meets the
 * full disk; Open MPI on 3-4 ranks reports success for writes that did
 * not land, which the read-back catches). Each failing run: every rank
 * returns the same failure status and message, the earlier file is byte
 * for byte what it was, nothing but it is left in DIR. Then runs that fit
 * succeed, and the file holds exactly the generated values. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

static int rank, size;

/* The whole file at path (rank 0), or NULL. */
static char *slurp(const char *path, long *len)
{
  FILE *f = fopen(path, "rb");
  char *b = NULL;
  *len = -1;
  if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (*len = ftell(f)) >= 0 &&
      fseek(f, 0, SEEK_SET) == 0 && (b = malloc((size_t)*len + 1)) != NULL &&
      fread(b, 1, (size_t)*len, f) != (size_t)*len) {
    free(b);
    b = NULL;
  }
  if (f != NULL)
    fclose(f);
  return b;
}

/* Rank 0: DIR holds g.h5 and nothing else. */
static void only_the_file(const char *dir, const char *what)
{
  DIR *d = opendir(dir);
  CHECK(d != NULL, "cannot list %s", dir);
  for (struct dirent *de; d != NULL && (de = readdir(d)) != NULL;)
    CHECK(strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
              strcmp(de->d_name, "g.h5") == 0 ||
              strcmp(de->d_name, "lost+found") == 0,
          "%s: '%s' left in %s", what, de->d_name, dir);
  if (d != NULL)
    closedir(d);
}

static slabfeed_status gen(const char *path, int64_t edge, int chunked, int f16,
                           slabfeed_file_layout layout,
                           slabfeed_content content, char *err, size_t len)
{
  slabfeed_gen_config g;
  slabfeed_gen_config_init(&g);
  g.overwrite = 1; /* a rerun regenerates */
  g.path = path;
  g.shape[0] = g.shape[1] = g.shape[2] = edge;
  if (edge == 20)
    g.shape[1] = 18, g.shape[2] = 16;
  g.chunked = chunked;
  g.float16 = f16;
  g.layout = layout;
  g.content = content;
  g.seed = 7;
  return slabfeed_generate(MPI_COMM_WORLD, &g, err, len);
}

/* A run that must fail: same status and message on every rank, the
 * earlier file unchanged, nothing left. */
static void must_fail(const char *dir, const char *path, int chunked,
                      const char *earlier, long earlier_len, const char *what)
{
  char err[1024] = "";
  const slabfeed_status st = gen(path, 64, chunked, 0, SLABFEED_LAYOUT_CF,
                                 SLABFEED_CONTENT_INDEX, err, sizeof err);
  CHECK(st != SLABFEED_OK, "%s: the 9.4 MB volume was written", what);
  int all[8] = {0};
  char *msgs = rank == 0 ? calloc((size_t)size, sizeof err) : NULL;
  const int mine = (int)st;
  MPI_Gather(&mine, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Gather(err, (int)sizeof err, MPI_CHAR, msgs, (int)sizeof err, MPI_CHAR, 0,
             MPI_COMM_WORLD);
  if (rank == 0) {
    printf("diskfull: %s on %d rank(s): %s: %s\n", what, size,
           slabfeed_status_name(st), err);
    for (int r = 1; r < size && r < 8; r++) {
      CHECK_EQ(all[r], all[0], "%s: status of rank %d", what, r);
      CHECK(strcmp(msgs + (size_t)r * sizeof err, msgs) == 0,
            "%s: rank %d says '%s', rank 0 '%s'", what, r,
            msgs + (size_t)r * sizeof err, msgs);
    }
    long len = 0;
    char *now = slurp(path, &len);
    CHECK(now != NULL && len == earlier_len &&
              memcmp(now, earlier, (size_t)len) == 0,
          "%s: the earlier %s changed (%ld bytes, was %ld)", what, path, len,
          earlier_len);
    free(now);
    only_the_file(dir, what);
  }
  free(msgs);
}

/* A run that must succeed and read back as generated (index content). */
static void must_fit(const char *dir, const char *path, int64_t edge,
                     int chunked, int f16, slabfeed_file_layout layout,
                     slabfeed_content content, const char *what)
{
  char err[1024] = "";
  const slabfeed_status st =
      gen(path, edge, chunked, f16, layout, content, err, sizeof err);
  CHECK(st == SLABFEED_OK, "%s: %s", what, err);
  if (rank != 0 || st != SLABFEED_OK)
    return;
  only_the_file(dir, what);
  struct stat sb;
  CHECK(stat(path, &sb) == 0, "%s: no %s", what, path);
  /* The reservation's surplus past the end went back (blocks ~ size). */
  CHECK((uint64_t)sb.st_blocks * 512 <= (uint64_t)sb.st_size + 65536,
        "%s: %lld bytes allocated for a file of %lld", what,
        (long long)sb.st_blocks * 512, (long long)sb.st_size);
  if (content != SLABFEED_CONTENT_INDEX) {
    printf("diskfull: %s on %d rank(s): written\n", what, size);
    return;
  }
  const char *names[2] = {"Nbody", "Hydro"};
  for (int d = 0; d < 2; d++) {
    whole w;
    CHECK(whole_read(path, names[d], layout == SLABFEED_LAYOUT_CL, &w) == 0,
          "%s: cannot read %s", what, names[d]);
    const int64_t C = layout == SLABFEED_LAYOUT_CL ? w.dims[3] : w.dims[0];
    int64_t bad = 0;
    for (int64_t c = 0; w.v != NULL && c < C; c++)
      for (int64_t z = 0; z < edge; z++)
        for (int64_t y = 0; y < edge; y++)
          for (int64_t x = 0; x < edge; x++)
            bad += whole_at(&w, c, z, y, x) !=
                   slabfeed_index_value(d, (int)c, z, y, x);
    CHECK_EQ(bad, 0, "%s: values of %s differ from the index", what, names[d]);
    whole_free(&w);
  }
  printf("diskfull: %s on %d rank(s): written and read back\n", what, size);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  signal(SIGXFSZ, SIG_IGN); /* a write past the limit: EFBIG */
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 4) {
    CHECK(0, "usage: test_diskfull DIR contig|chunked tmpfs|fsize");
    return check_finish("diskfull");
  }
  const char *dir = argv[1];
  const int chunked = strcmp(argv[2], "chunked") == 0;
  const int tmpfs = strcmp(argv[3], "tmpfs") == 0;
  char path[4096];
  snprintf(path, sizeof path, "%s/g.h5", dir);

  /* The earlier file: 24^3, 0.5 MB. */
  char err[1024] = "";
  CHECK(gen(path, 24, chunked, 0, SLABFEED_LAYOUT_CF, SLABFEED_CONTENT_FIELD,
            err, sizeof err) == SLABFEED_OK,
        "the earlier file: %s", err);
  long earlier_len = 0;
  char *earlier = rank == 0 ? slurp(path, &earlier_len) : NULL;
  CHECK(rank != 0 || earlier != NULL, "cannot read %s", path);

  must_fail(dir, path, chunked, earlier, earlier_len,
            tmpfs ? "64^3 on a full tmpfs, space checked"
                  : "64^3 past the file size limit");
  setenv("SLABFEED_TEST_NO_RESERVE", "1", 1);
  must_fail(dir, path, chunked, earlier, earlier_len,
            tmpfs ? "64^3 on a full tmpfs, reservation skipped"
                  : "64^3 past the file size limit, reservation skipped");
  unsetenv("SLABFEED_TEST_NO_RESERVE");

  /* With enough space: the same calls succeed (f32 index values checked;
   * float16 and channels-last read back through the same verify). */
  must_fit(dir, path, 32, chunked, 0, SLABFEED_LAYOUT_CF,
           SLABFEED_CONTENT_INDEX, "32^3 f32");
  must_fit(dir, path, 20, chunked, 1, SLABFEED_LAYOUT_CL,
           SLABFEED_CONTENT_FIELD, "20x18x16 f16 channels-last");
  free(earlier);
  return check_finish("diskfull");
}
