/* mpi.populate: the page faults of touch_threads (common/sys.h). On
 * private memory and on an MPI-3 shared window of two ranks, at unaligned
 * starts and odd lengths, with 1 to 100 threads asked for, through
 * MADV_POPULATE_WRITE and through the page touches of older kernels
 * (SLABFEED_TEST_NO_POPULATE=1): every byte keeps its value, and a rank
 * reads the other's values through the window after it populated. The
 * automatic thread count stays within [1, SF_TOUCH_AUTO_MAX]. And the
 * release of a shared window's pages (sf__release_pages). Huge pages
 * (0.11): every page of fresh memory is resident after a populate split
 * over threads at 2 MiB boundaries, with huge pages asked for and
 * refused; refused, none is mapped huge; asked for where the kernel's
 * policy allows them, some are; and what sf__huge_report says. */
#define _DEFAULT_SOURCE /* mincore(2) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "check.h"
#include "common/sys.h"

static unsigned char pattern(size_t i)
{
  return (unsigned char)((i * 2654435761u) >> 13);
}

static int intact(const unsigned char *p, size_t n, size_t base)
{
  for (size_t i = 0; i < n; i++)
    if (p[i] != pattern(base + i))
      return 0;
  return 1;
}

static void private_memory(int touch)
{
  const size_t n = ((size_t)3 << 20) + 4093;
  unsigned char *buf = malloc(n + 64);
  CHECK(buf != NULL, "allocate %zu bytes", n);
  if (buf == NULL)
    return;
  for (size_t i = 0; i < n + 64; i++)
    buf[i] = pattern(i);
  const int threads[] = {1, 2, 3, 8, 64, 100};
  const size_t starts[] = {0, 7, 4096, 4095};
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
    for (size_t s = 0; s < sizeof starts / sizeof *starts; s++) {
      const int advised =
          sf__populate(buf + starts[s], n - starts[s] - 1, threads[t]);
      CHECK(!touch || !advised, "touches asked for, madvise reported");
      CHECK(intact(buf, n + 64, 0), "%s, %d threads, start %zu: a byte changed",
            touch ? "touches" : "madvise", threads[t], starts[s]);
    }
  CHECK(sf__populate(NULL, 10, 4) == 1 && sf__populate(buf, 0, 4) == 1,
        "nothing to populate is a success");
  free(buf);
}

static void shared_window(void)
{
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                      &node);
  int nrank = 0, nsize = 1;
  MPI_Comm_rank(node, &nrank);
  MPI_Comm_size(node, &nsize);
  const size_t n = ((size_t)5 << 20) + 11;
  unsigned char *mine = NULL;
  MPI_Win win;
  CHECK(MPI_Win_allocate_shared((MPI_Aint)n, 1, MPI_INFO_NULL, node, &mine,
                                &win) == MPI_SUCCESS,
        "MPI_Win_allocate_shared");
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  const int touch_n = sf__touch_threads(0, nsize);
  CHECK(touch_n >= 1 && touch_n <= SF_TOUCH_AUTO_MAX,
        "auto threads %d for %d node ranks", touch_n, nsize);
  CHECK(sf__touch_threads(5, nsize) == 5, "an explicit count is kept");
  sf__populate(mine, n, touch_n);
  for (size_t i = 0; i < n; i++)
    mine[i] = pattern(i + (size_t)nrank);
  sf__populate(mine + 1, n - 1, 3); /* populated pages again: kept */
  MPI_Win_sync(win);
  MPI_Barrier(node);
  MPI_Win_sync(win);
  const int peer = (nrank + 1) % nsize;
  MPI_Aint sz;
  int unit;
  unsigned char *theirs = NULL;
  MPI_Win_shared_query(win, peer, &sz, &unit, &theirs);
  CHECK(sz == (MPI_Aint)n && theirs != NULL && intact(theirs, n, (size_t)peer),
        "rank %d: node rank %d's window after it populated", rank, peer);
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  MPI_Comm_free(&node);
}

/* sf__release_pages on a shared window (residency device gives the host
 * segment back after the fill): the whole pages inside the range read
 * zero afterwards and the count says how many bytes; the partial pages at
 * both ends keep their bytes, as does the other rank's segment; the
 * window stays usable. Private memory (a large malloc: its own mapping)
 * is given back the same way (MADV_DONTNEED). */
static void release(void)
{
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                      &node);
  int nrank = 0, nsize = 1;
  MPI_Comm_rank(node, &nrank);
  MPI_Comm_size(node, &nsize);
  const size_t n = ((size_t)3 << 20) + 4097, pg = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char *mine = NULL;
  MPI_Win win;
  CHECK(MPI_Win_allocate_shared((MPI_Aint)n, 1, MPI_INFO_NULL, node, &mine,
                                &win) == MPI_SUCCESS,
        "MPI_Win_allocate_shared");
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  for (size_t i = 0; i < n; i++)
    mine[i] = (unsigned char)(pattern(i + (size_t)nrank) | 1);
  MPI_Win_sync(win);
  MPI_Barrier(node);
  /* From 5 bytes in to 7 before the end. */
  const size_t a = 5, len = n - 12;
  const uintptr_t lo = ((uintptr_t)(mine + a) + pg - 1) / pg * pg,
                  hi = (uintptr_t)(mine + a + len) / pg * pg;
  const uint64_t got = sf__release_pages(mine + a, len);
  CHECK(got == (uint64_t)(hi - lo), "released %llu bytes, want %llu",
        (unsigned long long)got, (unsigned long long)(hi - lo));
  size_t zeros = 0, kept = 0;
  for (size_t i = 0; i < n; i++) {
    const uintptr_t at = (uintptr_t)(mine + i);
    if (at >= lo && at < hi)
      zeros += mine[i] == 0;
    else
      kept += mine[i] == (unsigned char)(pattern(i + (size_t)nrank) | 1);
  }
  CHECK(zeros == (size_t)(hi - lo) && kept == n - (size_t)(hi - lo),
        "after the release: %zu of %zu given-back bytes read 0, %zu of %zu "
        "others kept",
        zeros, (size_t)(hi - lo), kept, n - (size_t)(hi - lo));
  MPI_Win_sync(win);
  MPI_Barrier(node);
  MPI_Win_sync(win);
  const int peer = (nrank + 1) % nsize;
  MPI_Aint sz;
  int unit;
  unsigned char *theirs = NULL;
  MPI_Win_shared_query(win, peer, &sz, &unit, &theirs);
  if (nsize > 1) {
    /* The peer's bytes outside its given-back pages are its pattern (its
     * given-back pages read 0; the pattern has no zero byte). */
    size_t ok = 0, nz = 0;
    for (size_t i = 0; i < (size_t)sz; i++) {
      nz += theirs[i] != 0;
      ok += theirs[i] == (unsigned char)(pattern(i + (size_t)peer) | 1);
    }
    CHECK(ok == nz && nz > 0,
          "rank %d: node rank %d's kept bytes: %zu of its %zu non-zero "
          "bytes are its own",
          rank, peer, ok, nz);
  }
  MPI_Barrier(node); /* the peer has read this segment */
  /* Written again after the release, the pages hold the new bytes. */
  memset(mine, 0x5a, n);
  size_t back = 0;
  for (size_t i = 0; i < n; i++)
    back += mine[i] == 0x5a;
  CHECK(back == n, "the window after the release: %zu of %zu bytes written",
        back, n);
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  MPI_Comm_free(&node);
  unsigned char *priv = malloc(n);
  CHECK(priv != NULL, "allocate");
  if (priv != NULL) {
    memset(priv, 0x33, n);
    const uint64_t r = sf__release_pages(priv + 3, n - 3);
    const uintptr_t plo = ((uintptr_t)(priv + 3) + pg - 1) / pg * pg,
                    phi = (uintptr_t)(priv + n) / pg * pg;
    size_t zero = 0, same = 0;
    for (size_t i = 0; i < n; i++) {
      const uintptr_t at = (uintptr_t)(priv + i);
      if (at >= plo && at < phi)
        zero += priv[i] == 0;
      else
        same += priv[i] == 0x33;
    }
    CHECK(r == (uint64_t)(phi - plo) && zero == (size_t)(phi - plo) &&
              same == n - (size_t)(phi - plo),
          "private memory: %llu of %llu bytes released, %zu read 0, %zu "
          "of the rest kept",
          (unsigned long long)r, (unsigned long long)(phi - plo), zero, same);
    free(priv);
  }
  CHECK(sf__release_pages(NULL, 100) == 0, "NULL: nothing released");
}

/* Pages of [p, p + n) resident (mincore), n page-aligned. */
static size_t resident(void *p, size_t n)
{
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE), pages = n / pg;
  unsigned char *v = malloc(pages);
  size_t in = 0;
  if (v != NULL && mincore(p, n, v) == 0)
    for (size_t i = 0; i < pages; i++)
      in += v[i] & 1;
  free(v);
  return in * pg;
}

static void huge_pages(void)
{
  const size_t n = (size_t)13 << 20; /* 13 MiB: at least 5 whole 2 MiB */
  char policy[32];
  sf__huge_policy(0, policy, sizeof policy);
  /* Huge pages where the policy allows them and two fit the buffer (a
   * kernel of 64 KiB pages has 512 MiB ones). */
  const size_t huge = sf__huge_page_size();
  const int allowed =
      (strcmp(policy, "always") == 0 || strcmp(policy, "madvise") == 0) &&
      2 * huge <= n;
  for (int want = 0; want < 2; want++)
    for (int threads = 1; threads <= 5; threads += 2) {
      char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      CHECK(p != MAP_FAILED, "mmap %zu bytes", n);
      if (p == MAP_FAILED)
        return;
      /* A kernel without transparent huge pages refuses the advice. */
      CHECK(sf__huge_advise(p, n, want) == 1 || strcmp(policy, "unknown") == 0,
            "madvise %s refused", want ? "MADV_HUGEPAGE" : "MADV_NOHUGEPAGE");
      sf__populate(p, n, threads);
      CHECK(resident(p, n) == n,
            "huge %d, %d threads: %zu of %zu bytes resident after the "
            "populate",
            want, threads, resident(p, n), n);
      int shared = -1;
      const uint64_t got = sf__huge_bytes(p, n, &shared);
      CHECK(shared == 0 && got <= n,
            "private memory: %llu huge bytes, shared %d",
            (unsigned long long)got, shared);
      if (!want)
        CHECK(got == 0, "huge pages refused, %llu bytes mapped huge",
              (unsigned long long)got);
      else
        CHECK(!allowed || got >= huge,
              "huge pages asked for (policy %s): %llu bytes mapped huge",
              policy, (unsigned long long)got);
      size_t zero = 0;
      for (size_t i = 0; i < n; i++)
        zero += p[i] == 0;
      for (size_t i = 0; i < n; i++)
        p[i] = (char)pattern(i);
      CHECK(zero == n && intact((unsigned char *)p, n, 0),
            "fresh pages read 0 (%zu of %zu) and keep what is written", zero,
            n);
      char line[256];
      sf__huge_report(p, n, want, line, sizeof line);
      CHECK(want ? strncmp(line, "huge pages: ", 12) == 0 &&
                       strcmp(line, "huge pages: off") != 0
                 : strcmp(line, "huge pages: off") == 0,
            "report of huge %d: '%s'", want, line);
      munmap(p, n);
    }
  CHECK(sf__huge_bytes(NULL, 10, NULL) == 0, "NULL: no huge bytes");
  CHECK(strchr(policy, '[') == NULL && strchr(policy, ']') == NULL &&
            policy[0] != '\0',
        "the policy word '%s'", policy);
  /* The node's shared window: shared memory, said so. */
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                      &node);
  int nsize = 1;
  MPI_Comm_size(node, &nsize);
  char *mine = NULL;
  MPI_Win win;
  CHECK(MPI_Win_allocate_shared((MPI_Aint)n, 1, MPI_INFO_NULL, node, &mine,
                                &win) == MPI_SUCCESS,
        "MPI_Win_allocate_shared");
  sf__huge_advise(mine, n, 1);
  sf__populate(mine, n, 3);
  int shared = -1;
  const uint64_t got = sf__huge_bytes(mine, n, &shared);
  char line[256];
  sf__huge_report(mine, n, 1, line, sizeof line);
  CHECK(nsize == 1 || shared == 1, "a window of %d ranks is shared memory",
        nsize);
  CHECK(got > 0 ? strstr(line, " of ") != NULL
                : strstr(line, shared ? "(shared memory" : "(private memory") !=
                      NULL,
        "report of the window: '%s'", line);
  if (rank == 0)
    printf("  window of %d ranks: %s\n", nsize, line);
  MPI_Win_free(&win);
  MPI_Comm_free(&node);
}

/* sf__populate_strict over a shared mapping of a file that backs only
 * its first 2 pages of 8 (the rest lie past its end: a touch would raise
 * SIGBUS): the kernel's refusal comes back as an errno, with no signal;
 * the 2 pages inside populate; with SLABFEED_TEST_NO_POPULATE=1 (a
 * kernel without MADV_POPULATE_WRITE) EINVAL, and nothing touched. In a
 * tmpfs where there is one (the writer's mapped slab), else here. */
static void strict(void)
{
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  char path[128];
  snprintf(path, sizeof path, "%s/sf_strict_%d_%d",
           access("/dev/shm", W_OK) == 0 ? "/dev/shm" : ".", (int)getpid(),
           rank);
  const int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0 && ftruncate(fd, (off_t)(2 * pg)) == 0, "create %s", path);
  if (fd < 0)
    return;
  unlink(path);
  char *m = mmap(NULL, 8 * pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(m != MAP_FAILED, "mmap 8 pages of %s", path);
  if (m != MAP_FAILED) {
    struct stat st;
    setenv("SLABFEED_TEST_NO_POPULATE", "1", 1);
    const int no = sf__populate_strict(m, 2 * pg, 2);
    unsetenv("SLABFEED_TEST_NO_POPULATE");
    CHECK(no == EINVAL && resident(m, 2 * pg) == 0 && fstat(fd, &st) == 0 &&
              st.st_blocks == 0,
          "without MADV_POPULATE_WRITE: errno %d, %zu bytes resident, %lld "
          "blocks",
          no, resident(m, 2 * pg), (long long)st.st_blocks);
    const int past = sf__populate_strict(m, 8 * pg, 3);
    const int in = sf__populate_strict(m, 2 * pg, 2);
    /* EINVAL for both: a kernel before 5.14 (no MADV_POPULATE_WRITE). */
    CHECK((past == EFAULT && in == 0) || (past == EINVAL && in == EINVAL),
          "pages past the file's end: errno %d (want EFAULT); the file's 2 "
          "pages: errno %d (want 0)",
          past, in);
    if (in == 0)
      CHECK(resident(m, 2 * pg) == 2 * pg && fstat(fd, &st) == 0 &&
                (size_t)st.st_blocks * 512 >= 2 * pg,
            "the file's 2 pages populated: %zu bytes resident, %lld blocks",
            resident(m, 2 * pg), (long long)st.st_blocks);
    munmap(m, 8 * pg);
  }
  close(fd);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  release();
  strict();
  huge_pages();
  private_memory(0);
  setenv("SLABFEED_TEST_NO_POPULATE", "1", 1);
  private_memory(1);
  shared_window();
  unsetenv("SLABFEED_TEST_NO_POPULATE");
  shared_window();
  return check_finish("mpi.populate");
}
