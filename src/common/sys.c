#define _DEFAULT_SOURCE /* madvise(2) */
#include "common/sys.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

uint64_t sf__meminfo(const char *key)
{
  FILE *f = fopen("/proc/meminfo", "r");
  if (f == NULL)
    return 0;
  char line[256];
  const size_t n = strlen(key);
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, key, n) == 0 && line[n] == ':' &&
        sscanf(line + n + 1, "%llu", &kb) == 1)
      break;
  fclose(f);
  return (uint64_t)kb * 1024;
}

int sf__core_share(int node_ranks)
{
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const long per = cores > 0 && node_ranks > 0 ? cores / node_ranks : 1;
  return per < 1 ? 1 : per > INT_MAX ? INT_MAX : (int)per;
}

int sf__touch_threads(int option, int node_ranks)
{
  if (option > 0)
    return option;
  const int per = sf__core_share(node_ranks);
  return per > SF_TOUCH_AUTO_MAX ? SF_TOUCH_AUTO_MAX : per;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels say EINVAL */
#endif

typedef struct populate_job {
  char *a;        /* page-aligned start of this thread's pages */
  size_t n;       /* their bytes */
  const char *lo; /* the caller's bytes: touches stay inside them */
  const char *hi;
  int advised; /* out: madvise populated the range */
} populate_job;

/* Test-only: SLABFEED_TEST_NO_POPULATE=1 takes the page touches of a
 * kernel without MADV_POPULATE_WRITE. */
static int populate_advice(void)
{
  const char *v = getenv("SLABFEED_TEST_NO_POPULATE");
  return v == NULL || v[0] != '1';
}

static void *populate_range(void *arg)
{
  populate_job *j = arg;
  j->advised = j->n == 0 || (populate_advice() &&
                             madvise(j->a, j->n, MADV_POPULATE_WRITE) == 0);
  if (!j->advised) {
    /* One byte of each page, the caller's own: the first page may start
     * before the range and the last end after it, and those bytes may
     * belong to another object that a thread writes meanwhile. */
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < j->n; i += page) {
      volatile char *v = j->a + i;
      if ((const char *)v < j->lo)
        v = (volatile char *)j->lo;
      if ((const char *)v < j->hi)
        *v = *v;
    }
  }
  return NULL;
}

uint64_t sf__release_pages(void *p, uint64_t bytes)
{
  const long pg = sysconf(_SC_PAGESIZE);
  if (p == NULL || pg <= 0)
    return 0;
  const uintptr_t page = (uintptr_t)pg, a = (uintptr_t)p;
  const uintptr_t lo = (a + page - 1) / page * page;
  const uintptr_t hi = (a + (uintptr_t)bytes) / page * page;
  if (hi <= lo)
    return 0;
  /* Shared memory: MADV_REMOVE frees the backing store. Private memory
   * (an MPI library may allocate a node window of one process so) refuses
   * it with EINVAL: MADV_DONTNEED frees private pages. A shared mapping
   * whose file cannot punch holes refuses with another errno: kept. */
  if (madvise((void *)lo, (size_t)(hi - lo), MADV_REMOVE) == 0)
    return (uint64_t)(hi - lo);
  if (errno == EINVAL &&
      madvise((void *)lo, (size_t)(hi - lo), MADV_DONTNEED) == 0)
    return (uint64_t)(hi - lo);
  return 0;
}

void sf__run_jobs(void *(*fn)(void *), void *jobs, size_t size, int n)
{
  enum { MAX = 64 };
  pthread_t th[MAX];
  int started[MAX] = {0};
  n = n < 1 ? 1 : n > MAX ? MAX : n;
  for (int t = 1; t < n; t++) {
    void *job = (char *)jobs + (size_t)t * size;
    started[t] = pthread_create(&th[t], NULL, fn, job) == 0;
    if (!started[t])
      fn(job);
  }
  fn(jobs);
  for (int t = 1; t < n; t++)
    if (started[t])
      pthread_join(th[t], NULL);
}

int sf__populate(void *p, size_t bytes, int threads)
{
  enum { MAX = 64 };
  if (p == NULL || bytes == 0)
    return 1;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  /* madvise wants a page-aligned start: the range from p's page on. */
  char *a = (char *)((uintptr_t)p / page * page);
  const size_t n = bytes + (size_t)((char *)p - a);
  const int T = threads < 1 ? 1 : threads > MAX ? MAX : threads;
  const size_t pages = (n + page - 1) / page;
  const size_t per = (pages + (size_t)T - 1) / (size_t)T * page;
  populate_job job[MAX];
  for (int t = 0; t < T; t++) {
    const size_t at = (size_t)t * per < n ? (size_t)t * per : n;
    job[t] = (populate_job){a + at, at + per < n ? per : n - at, p,
                            (char *)p + bytes, 0};
  }
  sf__run_jobs(populate_range, job, sizeof job[0], T);
  int advised = 1;
  for (int t = 0; t < T; t++)
    advised &= job[t].advised;
  return advised;
}

/* Bytes [at, at + n) of the file and buf, one way, on one thread; err:
 * 0, an errno, or -1 where a read meets the file's end first. */
typedef struct pio_job {
  int fd, write;
  char *buf;
  size_t n;
  off_t at;
  int err;
} pio_job;

static void *pio_range(void *p)
{
  pio_job *j = p;
  for (size_t done = 0; done < j->n && j->err == 0;) {
    const ssize_t got =
        j->write
            ? pwrite(j->fd, j->buf + done, j->n - done, j->at + (off_t)done)
            : pread(j->fd, j->buf + done, j->n - done, j->at + (off_t)done);
    if (got > 0)
      done += (size_t)got;
    else if (got == 0)
      j->err = j->write ? EIO : -1;
    else if (errno != EINTR)
      j->err = errno;
  }
  return NULL;
}

/* Parts of at least this many bytes go to threads of their own. */
#define SF_PIO_PART ((size_t)4 << 20)
#define SF_PIO_THREADS 64

int sf__pio(int fd, char *buf, size_t n, off_t at, int threads, int write)
{
  int T = threads < 1 ? 1 : threads > SF_PIO_THREADS ? SF_PIO_THREADS : threads;
  if ((size_t)T > n / SF_PIO_PART)
    T = n / SF_PIO_PART > 1 ? (int)(n / SF_PIO_PART) : 1;
  const size_t part = (n / (size_t)T + 4095) / 4096 * 4096;
  pio_job job[SF_PIO_THREADS];
  for (int t = 0; t < T; t++) {
    const size_t a = (size_t)t * part < n ? (size_t)t * part : n;
    job[t] = (pio_job){
        fd, write, buf + a, a + part < n ? part : n - a, at + (off_t)a, 0};
  }
  sf__run_jobs(pio_range, job, sizeof job[0], T);
  int err = 0;
  for (int t = 0; t < T && err == 0; t++)
    err = job[t].err;
  return err;
}
