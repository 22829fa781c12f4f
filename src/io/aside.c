/* Files written aside (aside.h): the temporary name, the reservation of the
 * space, the sync, the caller's read-back check and the rename. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* fallocate(2) and FALLOC_FL_KEEP_SIZE */
#endif
#include "io/aside.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#ifdef __linux__
#include <sys/vfs.h>
#endif
#include <unistd.h>

/* ---- Stop signals -----------------------------------------------------------
 * While rank 0 holds a temporary file, SIGINT, SIGTERM and SIGHUP whose
 * action is the default (ending the process) remove the file first, then
 * end the process as before. A signal the program handles itself is left
 * alone (its handler decides; the write then fails or completes). One
 * temporary file per process is guarded. */

static const int stop_signals[3] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction saved_actions[3];
static int guarded_signal[3];
static char guarded_name[SF_ASIDE_PATH];
static const sf__aside *guard_owner;

static void on_stop_signal(int sig)
{
  unlink(guarded_name); /* async-signal-safe, as are sigaction and raise */
  for (int i = 0; i < 3; i++)
    if (stop_signals[i] == sig)
      sigaction(sig, &saved_actions[i], NULL);
  raise(sig);
}

static void guard(const sf__aside *a)
{
  if (guard_owner != NULL)
    return;
  snprintf(guarded_name, sizeof guarded_name, "%s", a->tmp);
  guard_owner = a;
  for (int i = 0; i < 3; i++) {
    struct sigaction old;
    guarded_signal[i] = 0;
    if (sigaction(stop_signals[i], NULL, &old) != 0 ||
        (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL)
      continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(stop_signals[i], &sa, &saved_actions[i]) == 0)
      guarded_signal[i] = 1;
  }
}

static void unguard(const sf__aside *a)
{
  if (guard_owner != a)
    return;
  for (int i = 0; i < 3; i++)
    if (guarded_signal[i])
      sigaction(stop_signals[i], &saved_actions[i], NULL);
  guard_owner = NULL;
}

/* ---- Begin ------------------------------------------------------------------
 */

/* The directory part of path ("." when it has none). */
void sf__dir_of(const char *path, char *dir, size_t len)
{
  const char *slash = strrchr(path, '/');
  if (slash == NULL)
    snprintf(dir, len, ".");
  else if (slash == path)
    snprintf(dir, len, "/");
  else
    snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* Rank 0: the final path can be replaced (absent or a regular file, in a
 * writable directory), and the temporary file is created, empty and
 * exclusively (another job's file of the same name is never shared). */
static slabfeed_status make_temp(sf__aside *a, sf__err *e)
{
  struct stat st;
  char dir[SF_ASIDE_PATH];
  if (stat(a->path, &st) == 0 && !S_ISREG(st.st_mode))
    return sf__fail(e, SLABFEED_ERR_IO,
                    "cannot write '%s': it exists and is %s", a->path,
                    S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
  sf__dir_of(a->path, dir, sizeof dir);
  if (access(dir, W_OK | X_OK) != 0)
    return sf__fail(e, SLABFEED_ERR_IO, "cannot write '%s': directory '%s': %s",
                    a->path, dir, strerror(errno));
  const long pid = (long)getpid();
  /* A name is never used twice by one process: MPI-IO keeps files and
   * semaphores named after the file (Open MPI's sharedfp), which a failed
   * earlier write may have left behind. */
  static int calls;
  const int first = calls++;
  for (int k = first; k < first + 100; k++) {
    const int n = k == 0
                      ? snprintf(a->tmp, sizeof a->tmp,
                                 "%s.slabfeed-partial.%ld", a->path, pid)
                      : snprintf(a->tmp, sizeof a->tmp,
                                 "%s.slabfeed-partial.%ld.%d", a->path, pid, k);
    if (n < 0 || (size_t)n >= sizeof a->tmp)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "cannot write '%.80s...': the path is too long", a->path);
    const int fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd >= 0) {
      close(fd);
      a->live = 1;
      guard(a);
      return SLABFEED_OK;
    }
    if (errno != EEXIST)
      return sf__fail(e, SLABFEED_ERR_IO,
                      "cannot write '%s': creating '%s': %s", a->path, a->tmp,
                      strerror(errno));
  }
  return sf__fail(e, SLABFEED_ERR_IO,
                  "cannot write '%s': 100 temporary names '%s.slabfeed-"
                  "partial.%ld.*' exist already",
                  a->path, a->path, pid);
}

static void remove_temp(sf__aside *a)
{
  if (a->rank == 0 && a->live)
    unlink(a->tmp);
  a->live = 0;
  unguard(a);
}

slabfeed_status sf__aside_begin(sf__aside *a, MPI_Comm comm, const char *path,
                                int writes, sf__err *e)
{
  memset(a, 0, sizeof *a);
  a->comm = comm;
  a->writes = writes;
  if (MPI_Comm_rank(comm, &a->rank) != MPI_SUCCESS)
    return sf__fail(e, SLABFEED_ERR_MPI, "MPI_Comm_rank failed");
  if (e->status == SLABFEED_OK && path == NULL)
    sf__fail(e, SLABFEED_ERR_ARG, "no path to write");
  else if (e->status == SLABFEED_OK && strlen(path) + 48 >= sizeof a->path)
    sf__fail(e, SLABFEED_ERR_ARG,
             "cannot write '%.80s...': the path is too long", path);
  else if (e->status == SLABFEED_OK)
    snprintf(a->path, sizeof a->path, "%s", path);
  if (e->status == SLABFEED_OK && a->rank == 0)
    make_temp(a, e);
  /* The name of rank 0's file, for everyone. */
  SF_MPI_GOTO(MPI_Bcast(a->tmp, (int)sizeof a->tmp, MPI_CHAR, 0, comm), e, out);
out:
  if (sf__agree(comm, e) != SLABFEED_OK)
    remove_temp(a);
  return e->status;
}

/* ---- Reserve ----------------------------------------------------------------
 */

static double mb(uint64_t bytes)
{
  return (double)bytes / 1e6;
}

slabfeed_status sf__aside_reserve(sf__aside *a, uint64_t bytes, sf__err *e)
{
  if (e->status != SLABFEED_OK)
    return e->status;
  struct rlimit rl;
  if (a->writes && getrlimit(RLIMIT_FSIZE, &rl) == 0 &&
      rl.rlim_cur != RLIM_INFINITY && (uint64_t)rl.rlim_cur < bytes)
    return sf__fail(e, SLABFEED_ERR_IO,
                    "cannot write '%s': it takes %.2f MB but the file size "
                    "limit of this process (ulimit -f) is %llu bytes",
                    a->path, mb(bytes), (unsigned long long)rl.rlim_cur);
  const char *skip = getenv(SF_ENV_NO_RESERVE);
  if (a->rank != 0 || !a->live || (skip != NULL && strcmp(skip, "1") == 0))
    return SLABFEED_OK;
  char dir[SF_ASIDE_PATH];
  sf__dir_of(a->path, dir, sizeof dir);
  /* Free space with a margin of 1% (the filesystem's own blocks, other
   * writers): the only check where the filesystem cannot reserve. */
  struct statvfs fs;
  const uint64_t need = bytes + bytes / 100;
  uint64_t avail = UINT64_MAX;
  if (statvfs(dir, &fs) == 0)
    avail = (uint64_t)fs.f_bavail * (uint64_t)fs.f_frsize;
  if (avail < need)
    return sf__fail(e, SLABFEED_ERR_IO,
                    "not enough space to write '%s': it takes %.2f MB "
                    "(written aside as '%s' while an earlier file stays; "
                    "1%% margin) but the filesystem of '%s' has %.2f MB free",
                    a->path, mb(bytes), a->tmp, dir, mb(avail));
  a->checked = 1;
  if (a->check_only)
    return SLABFEED_OK;
#if defined(__linux__) && defined(FALLOC_FL_KEEP_SIZE)
  /* Blocks reserved past the end (the size stays as the writer makes it):
   * writes into them cannot fail for space. */
  const int fd = open(a->tmp, O_WRONLY);
  if (fd < 0)
    return sf__fail(e, SLABFEED_ERR_IO, "cannot write '%s': opening '%s': %s",
                    a->path, a->tmp, strerror(errno));
  if (bytes > 0 && fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes) == 0) {
    a->reserved = bytes;
  } else if (bytes > 0 && errno != EOPNOTSUPP && errno != ENOSYS &&
             errno != EINVAL) {
    const int err = errno;
    close(fd);
    return sf__fail(e, SLABFEED_ERR_IO,
                    "cannot write '%s': reserving %.2f MB for '%s' failed: %s "
                    "(%.2f MB free on the filesystem of '%s')",
                    a->path, mb(bytes), a->tmp, strerror(err), mb(avail), dir);
  }
  close(fd);
#endif
  return SLABFEED_OK;
}

/* ---- Commit -----------------------------------------------------------------
 */

/* Data still in this node's page cache reaches storage; a write that
 * failed after it returned (writeback) fails here. */
static slabfeed_status sync_file(const sf__aside *a, sf__err *e)
{
  const int fd = open(a->tmp, O_RDONLY);
  if (fd < 0)
    return sf__fail(e, SLABFEED_ERR_IO, "cannot write '%s': opening '%s': %s",
                    a->path, a->tmp, strerror(errno));
  if (fsync(fd) != 0) {
    const int err = errno;
    close(fd);
    return sf__fail(e, SLABFEED_ERR_IO, "cannot write '%s': syncing '%s': %s",
                    a->path, a->tmp, strerror(err));
  }
  close(fd);
  return SLABFEED_OK;
}

/* Whether the filesystem of fd writes into the blocks fallocate reserved
 * (ext2/3/4, XFS, tmpfs). Copy-on-write filesystems (btrfs, ZFS,
 * bcachefs) take new blocks for every write, so a reservation does not
 * make a write safe there; nor is it known for the others. */
static int in_place(int fd)
{
#ifdef __linux__
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0)
    return 0;
  switch ((unsigned long)fs.f_type) {
  case 0xEF53ul:     /* ext2, ext3, ext4 */
  case 0x58465342ul: /* XFS */
  case 0x01021994ul: /* tmpfs */
    return 1;
  default:
    return 0;
  }
#else
  (void)fd;
  return 0;
#endif
}

/* Rank 0, after every rank synced: reserved blocks past the file's end
 * (the estimate of the metadata was generous) go back to the filesystem.
 * A truncation to the size the file has releases them (ext4, XFS, tmpfs);
 * the size is read from a descriptor opened after the writers closed and
 * synced (close-to-open consistency on network filesystems). Returns 1
 * when every byte of the file lies in blocks that were reserved before
 * the first write on a filesystem that writes in place (no write could
 * then fail for space), else 0. */
static int release_reserve(const sf__aside *a)
{
  struct stat st;
  const int fd = a->reserved > 0 ? open(a->tmp, O_WRONLY) : -1;
  if (fd < 0)
    return 0;
  int covered = 0;
  if (fstat(fd, &st) == 0) {
    covered = (uint64_t)st.st_size <= a->reserved && in_place(fd);
    if ((uint64_t)st.st_blocks * 512 > (uint64_t)st.st_size &&
        ftruncate(fd, st.st_size) == 0)
      fsync(fd);
  }
  close(fd);
  return covered;
}

/* Whether the caller's read-back runs: always with SF_ENV_VERIFY=1, else
 * only when the reservation did not cover the file. */
static int want_verify(int covered)
{
  const char *force = getenv(SF_ENV_VERIFY);
  return !covered || (force != NULL && strcmp(force, "1") == 0);
}

slabfeed_status sf__aside_commit(sf__aside *a, sf__aside_verify verify,
                                 void *ctx, sf__err *e)
{
  if (sf__agree(a->comm, e) == SLABFEED_OK && a->writes)
    sync_file(a, e);
  int covered = 0;
  if (sf__agree(a->comm, e) == SLABFEED_OK && a->rank == 0)
    covered = release_reserve(a);
  if (e->status == SLABFEED_OK && verify != NULL) {
    /* Rank 0's answer for every rank: the read-back is collective. */
    const int rc = MPI_Bcast(&covered, 1, MPI_INT, 0, a->comm);
    if (rc != MPI_SUCCESS)
      sf__fail_mpi(e, rc, "MPI_Bcast (reservation of the written file)");
    else if (want_verify(covered))
      verify(ctx, a->tmp, e);
    sf__agree(a->comm, e);
  }
  if (e->status == SLABFEED_OK && a->rank == 0) {
    if (rename(a->tmp, a->path) != 0) {
      sf__fail(e, SLABFEED_ERR_IO, "cannot rename '%s' to '%s': %s", a->tmp,
               a->path, strerror(errno));
    } else {
      a->live = 0;
      char dir[SF_ASIDE_PATH]; /* the rename itself durable (best effort) */
      sf__dir_of(a->path, dir, sizeof dir);
      const int dfd = open(dir, O_RDONLY);
      if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
      }
    }
  }
  sf__agree(a->comm, e);
  remove_temp(a); /* nothing left to remove after the rename */
  return e->status;
}

void sf__aside_abort(sf__aside *a)
{
  remove_temp(a);
}

/* ---- Sums -------------------------------------------------------------------
 */

static uint64_t mix(uint64_t k)
{
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

uint64_t sf__aside_sum(const void *p, size_t n, uint64_t at)
{
  const unsigned char *b = p;
  const uint64_t golden = 0x9e3779b97f4a7c15ULL;
  uint64_t h = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    h += mix(w ^ ((at + i) * golden));
  }
  if (i < n) {
    uint64_t w = 0;
    memcpy(&w, b + i, n - i);
    h += mix(w ^ ((at + i) * golden));
  }
  return h;
}

/* ---- Public API -------------------------------------------------------------
 */

struct slabfeed_aside {
  sf__aside a;
};

slabfeed_status slabfeed_aside_begin(MPI_Comm comm, const char *path,
                                     int writes, slabfeed_aside **out,
                                     char *errbuf, size_t errlen)
{
  sf__err e;
  sf__err_clear(&e);
  slabfeed_aside *s = malloc(sizeof *s);
  if (out == NULL)
    sf__fail(&e, SLABFEED_ERR_ARG, "slabfeed_aside_begin: out is NULL");
  else if (s == NULL)
    sf__fail(&e, SLABFEED_ERR_NOMEM, "cannot allocate a slabfeed_aside");
  sf__aside scratch;
  sf__aside_begin(s != NULL ? &s->a : &scratch, comm, path, writes != 0, &e);
  if (e.status != SLABFEED_OK) {
    free(s);
    s = NULL;
  }
  if (out != NULL)
    *out = s;
  sf__err_copy(&e, errbuf, errlen);
  return e.status;
}

const char *slabfeed_aside_name(const slabfeed_aside *a)
{
  return a != NULL ? a->a.tmp : NULL;
}

slabfeed_status slabfeed_aside_reserve(slabfeed_aside *a, uint64_t bytes,
                                       char *errbuf, size_t errlen)
{
  sf__err e;
  sf__err_clear(&e);
  if (a == NULL)
    sf__fail(&e, SLABFEED_ERR_ARG, "slabfeed_aside_reserve: no aside");
  else
    sf__aside_reserve(&a->a, bytes, &e);
  sf__err_copy(&e, errbuf, errlen);
  return e.status;
}

slabfeed_status slabfeed_aside_commit(slabfeed_aside *a, slabfeed_status st,
                                      const char *msg, char *errbuf,
                                      size_t errlen)
{
  sf__err e;
  sf__err_clear(&e);
  if (a == NULL) {
    sf__fail(&e, SLABFEED_ERR_ARG, "slabfeed_aside_commit: no aside");
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  if (st != SLABFEED_OK)
    sf__fail(&e, st, "%s", msg != NULL ? msg : slabfeed_strerror(st));
  sf__aside_commit(&a->a, NULL, NULL, &e);
  free(a);
  sf__err_copy(&e, errbuf, errlen);
  return e.status;
}

void slabfeed_aside_abort(slabfeed_aside *a)
{
  if (a == NULL)
    return;
  sf__aside_abort(&a->a);
  free(a);
}
