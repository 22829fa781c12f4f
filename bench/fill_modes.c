/* Ways to fill a rank's shared-memory segment from a file in the page
 * cache (docs/DECISIONS.md, "The slab store as files of the library's
 * own"): every rank fills its 1/P of the file's bytes, each way in turn,
 * twice, and rank 0 prints the node's rate of each (the slowest rank's
 * time, a barrier before each):
 *   A  pread into an MPI-3 shared window of its own (0.12's per-rank way);
 *   B  the window populated first (MADV_POPULATE_WRITE), then pread;
 *   C  every page of the window touched first, then pread;
 *   D  a /dev/shm file of its own written with pread and pwrite through a
 *      4 MiB buffer, then mapped and every page read once;
 *   E  the same file written with copy_file_range, then mapped and read;
 *   F  pread into fresh private memory (the open's read ceiling).
 * A failing step ends the run on every rank with its reason.
 *   mpirun -n 16 --map-by numa:PE=1 --bind-to core build/bench/fill_modes
 *     /dev/shm/b1024.h5
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

enum { MODES = 6, REPS = 2, MAX_RANKS = 4096 };
static const char *const mode_name[MODES] = {
    "A pread into an MPI shared window",
    "B window populated, then pread",
    "C window's pages touched, then pread",
    "D own file: pread + pwrite via 4 MiB, mapped",
    "E own file: copy_file_range, mapped",
    "F pread into private memory (ceiling)"};
static int rank, size;
static char made[128]; /* this rank's /dev/shm file while it exists */

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Ends the run on every rank: what failed on this one (its file, if
 * any, removed first). */
static void die(const char *what)
{
  fprintf(stderr, "fill_modes: rank %d: %s: %s\n", rank, what, strerror(errno));
  if (made[0] != '\0')
    unlink(made);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* n bytes of fd at `at` into b. */
static void read_into(int fd, char *b, size_t n, off_t at)
{
  for (size_t done = 0; done < n;) {
    const ssize_t k = pread(fd, b + done, n - done, at + (off_t)done);
    if (k <= 0)
      die(k == 0 ? "the file ends early" : "pread");
    done += (size_t)k;
  }
}

/* n bytes of fd at `at` into file `to` from offset 0, one way. */
static void write_file(int fd, off_t at, int to, size_t n, int copy)
{
  if (copy) {
    loff_t in = (loff_t)at, out = 0;
    for (size_t done = 0; done < n;) {
      const ssize_t k = copy_file_range(fd, &in, to, &out, n - done, 0);
      if (k <= 0)
        die("copy_file_range");
      done += (size_t)k;
    }
    return;
  }
  const size_t chunk = (size_t)4 << 20;
  char *b = malloc(chunk);
  if (b == NULL)
    die("malloc");
  for (size_t done = 0; done < n; done += chunk) {
    const size_t m = n - done < chunk ? n - done : chunk;
    read_into(fd, b, m, at + (off_t)done);
    if (pwrite(to, b, m, (off_t)done) != (ssize_t)m)
      die("pwrite");
  }
  free(b);
}

/* One way to fill `part` bytes from the file at `at`: seconds taken. */
static double fill(int mode, int fd, size_t part, off_t at)
{
  MPI_Win win[MAX_RANKS];
  char *b = NULL, path[128] = "";
  int own = -1;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  if (mode <= 2) /* a window per rank, its segment alone in it */
    for (int k = 0; k < size; k++) {
      void *p = NULL;
      if (MPI_Win_allocate_shared(k == rank ? (MPI_Aint)part : 0, 1,
                                  MPI_INFO_NULL, MPI_COMM_WORLD, &p,
                                  &win[k]) != MPI_SUCCESS)
        die("MPI_Win_allocate_shared");
      if (k == rank)
        b = p;
    }
  if (mode == 3 || mode == 4) {
    snprintf(path, sizeof path, "/dev/shm/fill_modes.%ld.%d", (long)getpid(),
             rank);
    own = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (own >= 0)
      snprintf(made, sizeof made, "%s", path);
    if (own < 0 || ftruncate(own, (off_t)part) != 0)
      die(path);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  if (mode == 1) { /* madvise wants the page-aligned start */
    char *a = (char *)(((uintptr_t)b + page - 1) / page * page);
    if (madvise(a, part - (size_t)(a - b), MADV_POPULATE_WRITE) != 0)
      die("madvise(MADV_POPULATE_WRITE)");
  }
  if (mode == 2)
    for (size_t i = 0; i < part; i += page)
      b[i] = 0;
  if (mode <= 2)
    read_into(fd, b, part, at);
  if (mode == 3 || mode == 4) {
    write_file(fd, at, own, part, mode == 4);
    b = mmap(NULL, part, PROT_READ | PROT_WRITE, MAP_SHARED, own, 0);
    if (b == MAP_FAILED)
      die("mmap");
    volatile char sum = 0; /* each page mapped, as the crops would */
    for (size_t i = 0; i < part; i += page)
      sum = (char)(sum + b[i]);
    (void)sum;
  }
  if (mode == 5) {
    b = mmap(NULL, part, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0);
    if (b == MAP_FAILED)
      die("mmap");
    read_into(fd, b, part, at);
  }
  const double t = now() - t0;
  if (mode <= 2)
    for (int k = 0; k < size; k++)
      MPI_Win_free(&win[k]);
  else
    munmap(b, part);
  if (own >= 0) {
    close(own);
    unlink(path);
    made[0] = '\0';
  }
  return t;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 2 || size > MAX_RANKS) {
    if (rank == 0)
      fprintf(stderr, "usage: mpirun -n P fill_modes FILE (P <= %d)\n",
              MAX_RANKS);
    MPI_Finalize();
    return 2;
  }
  const int fd = open(argv[1], O_RDONLY);
  const off_t end = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
  if (end < 0)
    die(argv[1]);
  const size_t part = (size_t)(end / size) / 4096 * 4096;
  const off_t at = (off_t)((size_t)rank * part);
  if (rank == 0)
    printf("fill_modes: %d ranks, %.2f GB each from %s\n", size,
           (double)part / 1e9, argv[1]);
  for (int rep = 0; rep < REPS; rep++)
    for (int mode = 0; mode < MODES; mode++) {
      double t = fill(mode, fd, part, at);
      MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (rank == 0) {
        printf("rep %d %-46s %7.3f s = %6.2f GB/s\n", rep, mode_name[mode], t,
               (double)part * size / 1e9 / t);
        fflush(stdout);
      }
    }
  close(fd);
  MPI_Finalize();
  return 0;
}
