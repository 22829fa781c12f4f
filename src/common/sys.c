#define _GNU_SOURCE /* madvise(2), sched_getaffinity(2), CPU_COUNT */
#include "common/sys.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
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

int sf__cpus_allowed(void)
{
  cpu_set_t cpus; /* a machine of more than CPU_SETSIZE CPUs: 0, no cap */
  return sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
}

/* The node's online cores over its node_ranks ranks, whatever the
 * binding. */
static long node_share(int node_ranks)
{
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores > 0 && node_ranks > 0 ? cores / node_ranks : 1;
}

int sf__core_share(int node_ranks)
{
  long per = node_share(node_ranks);
  const int allowed = sf__cpus_allowed();
  if (allowed > 0 && per > allowed)
    per = allowed; /* bound by the launcher: no more threads than CPUs */
  return per < 1 ? 1 : per > INT_MAX ? INT_MAX : (int)per;
}

void sf__core_note(int node_ranks, char *buf, size_t len)
{
  const long per = node_share(node_ranks);
  const int allowed = sf__cpus_allowed();
  if (allowed > 0 && allowed < per)
    snprintf(buf, len,
             " (the rank is bound to %d CPU%s of the %ld it could share: "
             "mpirun --bind-to none, or --map-by ...:PE=N, or srun "
             "--cpus-per-task=N gives it more)",
             allowed, allowed == 1 ? "" : "s", per);
  else if (len > 0)
    buf[0] = '\0';
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
  int strict;  /* no page touches where madvise fails */
  int err;     /* out, strict: 0 or madvise's errno */
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
  j->err = j->advised ? 0 : !populate_advice() ? EINVAL : errno;
  if (!j->advised && !j->strict) {
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

/* The whole pages inside [p, p + bytes) into [*lo, *hi); 0 where there
 * is none. */
static int whole_pages(const void *p, uint64_t bytes, uintptr_t *lo,
                       uintptr_t *hi)
{
  const long pg = sysconf(_SC_PAGESIZE);
  if (p == NULL || pg <= 0)
    return 0;
  const uintptr_t page = (uintptr_t)pg, a = (uintptr_t)p;
  *lo = (a + page - 1) / page * page;
  *hi = (a + (uintptr_t)bytes) / page * page;
  return *hi > *lo;
}

uint64_t sf__release_pages(void *p, uint64_t bytes)
{
  uintptr_t lo, hi;
  if (!whole_pages(p, bytes, &lo, &hi))
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

size_t sf__huge_page_size(void)
{
  unsigned long long v = 0;
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "r");
  if (f != NULL) {
    if (fscanf(f, "%llu", &v) != 1)
      v = 0;
    fclose(f);
  }
  return v > 0 ? (size_t)v : (size_t)2 << 20;
}

int sf__huge_advise(void *p, size_t bytes, int want)
{
  uintptr_t lo, hi;
  if (!whole_pages(p, bytes, &lo, &hi))
    return 0;
  return madvise((void *)lo, (size_t)(hi - lo),
                 want ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) == 0;
}

/* The kB of a "Key:   N kB" line of smaps into *kb; 1 where it is one. */
static int smaps_kb(const char *line, const char *key, uint64_t *kb)
{
  const size_t n = strlen(key);
  unsigned long long v = 0;
  if (strncmp(line, key, n) != 0 || line[n] != ':' ||
      sscanf(line + n + 1, "%llu", &v) != 1)
    return 0;
  *kb += (uint64_t)v;
  return 1;
}

uint64_t sf__huge_bytes(const void *p, size_t bytes, int *shared)
{
  FILE *f = fopen("/proc/self/smaps", "r");
  if (shared != NULL)
    *shared = 0;
  if (f == NULL || p == NULL || bytes == 0) {
    if (f != NULL)
      fclose(f);
    return 0;
  }
  const uintptr_t lo = (uintptr_t)p, hi = lo + (uintptr_t)bytes;
  uint64_t total = 0, kb = 0, share = 0;
  int in = 0, first = 1;
  char line[512];
  /* A mapping's header ("start-end perms ...") then its "Key: N kB"
   * lines; the huge kB of a mapping count up to its overlap with the
   * range. */
  for (;;) {
    const int more = fgets(line, sizeof line, f) != NULL;
    unsigned long long a = 0, b = 0;
    char perms[8] = "";
    const int header =
        more && sscanf(line, "%llx-%llx %7s", &a, &b, perms) == 3;
    if (!more || header) {
      if (in)
        total += kb * 1024 < share ? kb * 1024 : share;
      if (!more)
        break;
      in = (uintptr_t)a < hi && (uintptr_t)b > lo;
      kb = 0;
      if (in) {
        const uintptr_t s0 = (uintptr_t)a > lo ? (uintptr_t)a : lo;
        const uintptr_t s1 = (uintptr_t)b < hi ? (uintptr_t)b : hi;
        share = (uint64_t)(s1 - s0);
        if (first && shared != NULL)
          *shared = perms[3] == 's';
        first = 0;
      }
    } else if (in && !smaps_kb(line, "AnonHugePages", &kb) &&
               !smaps_kb(line, "ShmemPmdMapped", &kb))
      smaps_kb(line, "FilePmdMapped", &kb);
  }
  fclose(f);
  return total;
}

const char *sf__huge_policy(int shared, char *buf, size_t len)
{
  const char *path = shared
                         ? "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
                         : "/sys/kernel/mm/transparent_hugepage/enabled";
  char line[256] = "";
  FILE *f = fopen(path, "r");
  const int got = f != NULL && fgets(line, sizeof line, f) != NULL;
  if (f != NULL)
    fclose(f);
  const char *o = got ? strchr(line, '[') : NULL;
  const char *c = o != NULL ? strchr(o, ']') : NULL;
  if (c == NULL)
    snprintf(buf, len, "unknown");
  else
    snprintf(buf, len, "%.*s", (int)(c - o - 1), o + 1);
  return buf;
}

void sf__huge_report(const void *p, size_t bytes, int want, char *buf,
                     size_t len)
{
  if (!want) {
    snprintf(buf, len, "huge pages: off");
    return;
  }
  int shared = 0;
  const uint64_t got = sf__huge_bytes(p, bytes, &shared);
  char policy[32];
  sf__huge_policy(shared, policy, sizeof policy);
  const int refused = strcmp(policy, "never") == 0 ||
                      strcmp(policy, "deny") == 0 ||
                      strcmp(policy, "unknown") == 0;
  if (got > 0)
    snprintf(buf, len, "huge pages: %.1f of %.1f MB", (double)got / 1e6,
             (double)bytes / 1e6);
  else if (shared)
    /* An MPI window is a file of a tmpfs mount (/dev/shm): the mount's
     * huge= option decides, shmem_enabled only where it forces or
     * denies. */
    snprintf(buf, len,
             "huge pages: none (shared memory: a file of a tmpfs mount, "
             "whose huge= option decides; transparent_hugepage/"
             "shmem_enabled is %s)",
             policy);
  else if (refused)
    snprintf(buf, len,
             "huge pages: none (private memory: the kernel's "
             "transparent_hugepage/enabled is %s)",
             policy);
  else
    snprintf(buf, len,
             "huge pages: none (private memory: the kernel gave none though "
             "transparent_hugepage/enabled is %s; under 2 MiB, or none "
             "free)",
             policy);
}

/* sf__populate (strict 0) and sf__populate_strict (strict 1): the
 * first failing range's errno into *err. */
static int populate(void *p, size_t bytes, int threads, int strict, int *err)
{
  enum { MAX = 64 };
  *err = 0;
  if (p == NULL || bytes == 0)
    return 1;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  /* madvise wants a page-aligned start: the range from p's page on. */
  char *a = (char *)((uintptr_t)p / page * page);
  const size_t n = bytes + (size_t)((char *)p - a);
  const int T = threads < 1 ? 1 : threads > MAX ? MAX : threads;
  const size_t pages = (n + page - 1) / page;
  const size_t per = (pages + (size_t)T - 1) / (size_t)T * page;
  /* Thread t's range ends at the boundary after t + 1 shares, moved up
   * to a 2 MiB address where a share holds whole huge pages (no huge page
   * faulted by two threads). */
  const size_t huge = sf__huge_page_size();
  const uintptr_t align = per >= huge ? huge : page;
  populate_job job[MAX];
  size_t at = 0;
  for (int t = 0; t < T; t++) {
    const uintptr_t want = (uintptr_t)a + (size_t)(t + 1) * per;
    const uintptr_t up = (want + align - 1) / align * align;
    size_t end = t == T - 1 ? n : (size_t)(up - (uintptr_t)a);
    end = end < at ? at : end > n ? n : end;
    job[t] =
        (populate_job){a + at, end - at, p, (char *)p + bytes, 0, strict, 0};
    at = end;
  }
  sf__run_jobs(populate_range, job, sizeof job[0], T);
  int advised = 1;
  for (int t = 0; t < T; t++) {
    advised &= job[t].advised;
    if (*err == 0)
      *err = job[t].err;
  }
  return advised;
}

int sf__populate(void *p, size_t bytes, int threads)
{
  int err;
  return populate(p, bytes, threads, 0, &err);
}

int sf__populate_strict(void *p, size_t bytes, int threads)
{
  int err;
  populate(p, bytes, threads, 1, &err);
  return err;
}

void sf__unmap_table(char ***base, size_t **len, int n)
{
  for (int k = 0; *base != NULL && *len != NULL && k < n; k++)
    if ((*base)[k] != NULL)
      munmap((*base)[k], (*len)[k]);
  free(*base);
  free(*len);
  *base = NULL;
  *len = NULL;
}

/* ---- Memory written as its files (sf__fileback_add) -------------------- */

enum { SF_FILEBACKS = 8 };
/* One entry: [base, base + bytes) maps the files fds[0 .. n) one after the
 * other, each `part` bytes (the last the rest). */
typedef struct fileback_entry {
  char *base;
  size_t bytes, part;
  const int *fds;
  int n;
} fileback_entry;
static fileback_entry fileback[SF_FILEBACKS];
static pthread_mutex_t fileback_mu = PTHREAD_MUTEX_INITIALIZER;

int sf__fileback_add(void *base, size_t bytes, size_t part, const int *fds,
                     int n)
{
  int h = -1;
  if (base == NULL || fds == NULL || n < 1 || part == 0 ||
      (size_t)n < (bytes + part - 1) / part)
    return h;
  pthread_mutex_lock(&fileback_mu);
  for (int i = 0; i < SF_FILEBACKS && h < 0; i++)
    if (fileback[i].base == NULL) {
      fileback[i] = (fileback_entry){base, bytes, part, fds, n};
      h = i;
    }
  pthread_mutex_unlock(&fileback_mu);
  return h;
}

void sf__fileback_remove(int h)
{
  if (h < 0 || h >= SF_FILEBACKS)
    return;
  pthread_mutex_lock(&fileback_mu);
  fileback[h].base = NULL;
  pthread_mutex_unlock(&fileback_mu);
}

/* The entry holding all of [buf, buf + n), copied into *out with *off the
 * offset of buf in it: 1, else 0. */
static int fileback_of(const void *buf, size_t n, fileback_entry *out,
                       size_t *off)
{
  int found = 0;
  const uintptr_t p = (uintptr_t)buf;
  pthread_mutex_lock(&fileback_mu);
  for (int i = 0; i < SF_FILEBACKS && !found; i++) {
    const uintptr_t b = (uintptr_t)fileback[i].base;
    if (b != 0 && p >= b && p - b <= fileback[i].bytes &&
        n <= fileback[i].bytes - (p - b)) {
      *out = fileback[i];
      *off = (size_t)(p - b);
      found = 1;
    }
  }
  pthread_mutex_unlock(&fileback_mu);
  return found;
}

int sf__fileback_has(const void *p)
{
  fileback_entry f;
  size_t off;
  return fileback_of(p, 1, &f, &off);
}

/* n bytes of fd at `at` into file to at `off`: copy_file_range, else
 * (filesystems that cannot copy between them) pread and pwrite through a
 * buffer. 0, an errno, or -1 where fd ends first. */
static int copy_into_file(int fd, off_t at, int to, off_t off, size_t n)
{
  size_t done = 0;
  /* Test-only: SLABFEED_TEST_NO_COPY_RANGE=1 takes the buffer's way. */
  const char *no = getenv("SLABFEED_TEST_NO_COPY_RANGE");
  const int copy = no == NULL || no[0] != '1';
  while (copy && done < n) {
    loff_t in = (loff_t)at + (loff_t)done, out = (loff_t)off + (loff_t)done;
    const ssize_t got = copy_file_range(fd, &in, to, &out, n - done, 0);
    if (got > 0)
      done += (size_t)got;
    else if (got == 0)
      break; /* not always the end of fd: pread below decides */
    else if (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
             errno == EOPNOTSUPP || errno == EBADF)
      break; /* not between these files: through a buffer below */
    else if (errno != EINTR)
      return errno;
  }
  if (done == n)
    return 0;
  enum { BOUNCE = 4 << 20 };
  char *b = malloc(BOUNCE);
  if (b == NULL)
    return ENOMEM;
  int err = 0;
  while (done < n && err == 0) {
    const size_t m = n - done < BOUNCE ? n - done : BOUNCE;
    size_t got = 0, put = 0;
    while (got < m && err == 0) {
      const ssize_t k = pread(fd, b + got, m - got, at + (off_t)(done + got));
      err = k > 0 ? 0 : k == 0 ? -1 : errno == EINTR ? 0 : errno;
      got += k > 0 ? (size_t)k : 0;
    }
    while (put < got && err == 0) {
      const ssize_t k =
          pwrite(to, b + put, got - put, off + (off_t)(done + put));
      err = k > 0 ? 0 : k == 0 ? EIO : errno == EINTR ? 0 : errno;
      put += k > 0 ? (size_t)k : 0;
    }
    done += got;
  }
  free(b);
  return err;
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

/* The pieces t, t + T, t + 2T, ... of bytes [off, off + n) of a file-backed
 * entry (a piece: the bytes that lie in one of its files), copied from fd
 * at `at` on one thread: the threads of one call write different files. */
typedef struct part_job {
  int fd;
  off_t at;
  fileback_entry f;
  size_t off, n;
  int t, T, err;
} part_job;

static void *copy_parts(void *p)
{
  part_job *j = p;
  const size_t first = j->off / j->f.part;
  for (size_t k = first + (size_t)j->t;
       k * j->f.part < j->off + j->n && j->err == 0; k += (size_t)j->T) {
    const size_t a = k * j->f.part > j->off ? k * j->f.part : j->off;
    const size_t b = (k + 1) * j->f.part < j->off + j->n ? (k + 1) * j->f.part
                                                         : j->off + j->n;
    j->err = copy_into_file(j->fd, j->at + (off_t)(a - j->off), j->f.fds[k],
                            (off_t)(a - k * j->f.part), b - a);
  }
  return NULL;
}

int sf__pio(int fd, char *buf, size_t n, off_t at, int threads, int write)
{
  fileback_entry f;
  size_t off = 0;
  if (!write && n > 0 && fileback_of(buf, n, &f, &off)) {
    const size_t pieces = (off + n - 1) / f.part - off / f.part + 1;
    const int T = threads < 1                ? 1
                  : threads > SF_PIO_THREADS ? SF_PIO_THREADS
                  : (size_t)threads > pieces ? (int)pieces
                                             : threads;
    part_job job[SF_PIO_THREADS];
    for (int t = 0; t < T; t++)
      job[t] = (part_job){fd, at, f, off, n, t, T, 0};
    sf__run_jobs(copy_parts, job, sizeof job[0], T);
    int err = 0;
    for (int t = 0; t < T && err == 0; t++)
      err = job[t].err;
    return err;
  }
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
