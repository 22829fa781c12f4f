/* The rate at which this host gives a process new pages (docs/DECISIONS.md,
 * "The writer's slab as the output file's own pages"): T threads populate
 * (MADV_POPULATE_WRITE) disjoint shares of GB gigabytes, each way in turn:
 *   one file     one /dev/shm file mapped shared (the writer's output);
 *   fallocate    the same after one fallocate of the whole file;
 *   own ranges   each thread fallocates its share of the file, then
 *                populates it;
 *   file each    a /dev/shm file per thread (the slab store's files);
 *   private      private anonymous memory (the host's page-fault rate).
 * Prints one line per way: seconds and GB/s. Local; no MPI.
 *   build/bench/populate_rate 4 16
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

enum { MAX_THREADS = 64 };
enum way { ONE_FILE, FALLOCATE, OWN_RANGES, FILE_EACH, PRIVATE, WAYS };

static const char *const way_name[WAYS] = {
    "one file", "one file, fallocate first", "one file, own ranges fallocated",
    "a file per thread", "private anonymous"};

typedef struct job {
  enum way way;
  int fd;   /* the file of this share (-1 for private memory) */
  off_t at; /* the share's offset in it */
  char *p;  /* the share's mapping */
  size_t n; /* its bytes */
  int err;  /* out: 0 or errno */
} job;

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what)
{
  fprintf(stderr, "populate_rate: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void *run(void *arg)
{
  job *j = arg;
  if (j->way == OWN_RANGES && fallocate(j->fd, 0, j->at, (off_t)j->n) != 0)
    j->err = errno;
  else if (madvise(j->p, j->n, MADV_POPULATE_WRITE) != 0)
    j->err = errno;
  return NULL;
}

/* An unlinked /dev/shm file of bytes, mapped shared into *p. */
static int shm_file(size_t bytes, char **p)
{
  char name[64];
  static int k;
  snprintf(name, sizeof name, "/dev/shm/populate_rate.%d.%d", (int)getpid(),
           k++);
  const int fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    die(name);
  unlink(name);
  if (ftruncate(fd, (off_t)bytes) != 0)
    die("ftruncate");
  *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (*p == MAP_FAILED)
    die("mmap");
  return fd;
}

int main(int argc, char **argv)
{
  const double gb = argc > 1 ? atof(argv[1]) : 2.0;
  const int T = argc > 2 ? atoi(argv[2]) : 4;
  if (gb <= 0 || T < 1 || T > MAX_THREADS) {
    fprintf(stderr, "usage: populate_rate GB THREADS (1..%d)\n", MAX_THREADS);
    return 2;
  }
  const size_t huge = (size_t)2 << 20; /* shares of whole 2 MiB */
  const size_t per = (size_t)(gb * 1e9) / ((size_t)T * huge) * huge;
  const size_t bytes = per * (size_t)T;
  if (per == 0) {
    fprintf(stderr, "populate_rate: %.3f GB is less than 2 MiB a thread\n", gb);
    return 2;
  }
  for (int w = 0; w < WAYS; w++) {
    job jobs[MAX_THREADS];
    char *whole = NULL;
    const int fd = w < FILE_EACH ? shm_file(bytes, &whole) : -1;
    for (int t = 0; t < T; t++) {
      jobs[t] = (job){(enum way)w,
                      fd,
                      (off_t)((size_t)t * per),
                      whole != NULL ? whole + (size_t)t * per : NULL,
                      per,
                      0};
      if (w == FILE_EACH) {
        jobs[t].fd = shm_file(per, &jobs[t].p);
        jobs[t].at = 0;
      } else if (w == PRIVATE) {
        jobs[t].p = mmap(NULL, per, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (jobs[t].p == MAP_FAILED)
          die("mmap");
      }
    }
    const double t0 = now();
    if (w == FALLOCATE && fallocate(fd, 0, 0, (off_t)bytes) != 0)
      die("fallocate");
    const double t_fall = now() - t0;
    pthread_t th[MAX_THREADS];
    for (int t = 0; t < T; t++)
      if (pthread_create(&th[t], NULL, run, &jobs[t]) != 0)
        die("pthread_create");
    for (int t = 0; t < T; t++)
      pthread_join(th[t], NULL);
    const double s = now() - t0;
    for (int t = 0; t < T; t++)
      if (jobs[t].err != 0) {
        errno = jobs[t].err;
        die(way_name[w]);
      }
    printf("populate_rate: %-32s %2d threads, %.2f GB: %.3f s (%.2f GB/s)",
           way_name[w], T, (double)bytes / 1e9, s, (double)bytes / 1e9 / s);
    if (w == FALLOCATE)
      printf(", of which fallocate %.3f s", t_fall);
    printf("\n");
    if (whole != NULL)
      munmap(whole, bytes);
    if (fd >= 0)
      close(fd);
    for (int t = 0; t < T && w >= FILE_EACH; t++) {
      munmap(jobs[t].p, per);
      if (jobs[t].fd >= 0)
        close(jobs[t].fd);
    }
  }
  return 0;
}
