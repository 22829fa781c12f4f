#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/geometry.h"
#include "common/inject.h"
#include "common/sys.h"
#include "common/mpilib.h"

int64_t sf__store_planes(const sf__store *s, int r)
{
  return sf__placement_planes(&s->L, r);
}

int64_t sf__store_chan(const sf__store *s, int r)
{
  return sf__planes_span(&s->g, sf__placement_first(&s->L, r),
                         sf__store_planes(s, r));
}

int64_t sf__store_at(const sf__store *s, int r, int64_t q)
{
  return sf__planes_span(&s->g, sf__placement_first(&s->L, r), q);
}

int64_t sf__store_pitch(const sf__store *s, int r, int64_t q, int64_t yx[2])
{
  const int64_t Z = s->shape[0];
  const int64_t z = sf__pmod(sf__placement_first(&s->L, r) + q, Z);
  const int k = sf__planes_run(&s->g, z);
  const int64_t left = sf__store_planes(s, r) - q, run = s->g.z0[k + 1] - z;
  yx[0] = s->g.yx[k][0];
  yx[1] = s->g.yx[k][1];
  return run < left ? run : left;
}

int64_t sf__store_offset(const sf__store *s, int r, int d)
{
  int64_t off = 0;
  for (int i = 0; i < d; i++)
    off += s->channels[i] * s->cube[i] * sf__store_chan(s, r) *
           (int64_t)sizeof(float);
  return off;
}

float *sf__store_channel(const sf__store *s, int d, int64_t c)
{
  return (float *)(s->base + sf__store_offset(s, s->rank, d)) +
         c * s->cube[d] * sf__store_chan(s, s->rank);
}

/* Segment size of rank r, overflow-checked; -1 on overflow. */
static int64_t segment_bytes(const sf__store *s, int r)
{
  const int64_t chan = sf__store_chan(s, r);
  int64_t total = 0;
  for (int d = 0; d < s->ndsets && chan >= 0; d++) {
    int64_t b;
    if (!sf__prod4(s->channels[d], chan, (int64_t)sizeof(float), s->cube[d],
                   &b) ||
        !sf__add64(total, b, &total))
      return -1;
  }
  return chan < 0 ? -1 : total;
}

/* The node communicator: ranks sharing memory (each rank alone with
 * rank_per_node), node_rank 0 the lowest world rank. */
static slabfeed_status make_node(sf__store *s, int rank_per_node, sf__err *e)
{
  if (rank_per_node)
    SF_MPI_GOTO(MPI_Comm_split(s->comm, s->rank, 0, &s->node), e, out);
  else
    SF_MPI_GOTO(MPI_Comm_split_type(s->comm, MPI_COMM_TYPE_SHARED, s->rank,
                                    MPI_INFO_NULL, &s->node),
                e, out);
  SF_MPI_GOTO(MPI_Comm_rank(s->node, &s->node_rank), e, out);
  SF_MPI_GOTO(MPI_Comm_size(s->node, &s->node_size), e, out);
out:
  return e->status;
}

/* Where the segment files lie: the node's shared memory (tmpfs). */
#define SF_STORE_FILE_DIR "/dev/shm"

/* A segment's files: up to this many per thread of the rank's read, and
 * this many at most, each a multiple of SF_STORE_PART_ALIGN bytes (a
 * huge page of x86-64 and arm64's 4 KiB granule). */
#define SF_STORE_PARTS_PER_THREAD 16
#define SF_STORE_MAX_PARTS 256
#define SF_STORE_PART_ALIGN ((int64_t)2 << 20)

/* The path of part j of node rank k's segment: the node's prefix (agreed),
 * k and j. */
static void file_name(char *buf, size_t len, const char *prefix, int k, int j)
{
  snprintf(buf, len, "%s/%s.%d.%d", SF_STORE_FILE_DIR, prefix, k, j);
}

/* The bytes of each file of a segment of `bytes` that `threads` threads
 * read into: one file where one thread writes it (its writes take turns
 * in the kernel anyway), else small enough that the threads write
 * different files (sf__pio). Test-only: SLABFEED_TEST_PART_BYTES=N makes
 * them N bytes (rounded up to whole pages). Local. */
static int64_t part_bytes(int64_t bytes, int threads)
{
  const char *t = getenv("SLABFEED_TEST_PART_BYTES");
  const long long forced = t != NULL ? atoll(t) : 0;
  if (forced > 0) {
    const int64_t page =
        sysconf(_SC_PAGESIZE) > 0 ? sysconf(_SC_PAGESIZE) : 4096;
    return (forced + page - 1) / page * page;
  }
  if (threads <= 1 || bytes <= SF_STORE_PART_ALIGN)
    return bytes > 0 ? bytes : 1;
  int64_t n = (int64_t)threads * SF_STORE_PARTS_PER_THREAD;
  n = n > SF_STORE_MAX_PARTS ? SF_STORE_MAX_PARTS : n;
  const int64_t part = (bytes + n - 1) / n;
  return (part + SF_STORE_PART_ALIGN - 1) / SF_STORE_PART_ALIGN *
         SF_STORE_PART_ALIGN;
}

const char *sf__store_files_option(const sf__store *s)
{
  return s->files_auto ? "shared_window auto" : "shared_window file";
}

/* The number of files of a segment of `bytes` in parts of `part`. */
static int parts_of(int64_t bytes, int64_t part)
{
  return bytes > 0 ? (int)((bytes + part - 1) / part) : 0;
}

/* Whether this machine's /dev/shm holds the segment files of the ranks
 * on it that want them (want: this rank's; explicit: shared_window file,
 * whose lack of room is this rank's error, reported on the machine's
 * first rank; else auto's, which then takes windows). The same answer on
 * every rank of a machine. Collective over the store's ranks. */
static int files_fit(sf__store *s, int want, int explicit, sf__err *e)
{
  long long need = want ? s->bytes : 0;
  int fit = 1;
  MPI_Comm host = MPI_COMM_NULL;
  int host_rank = 0;
  /* The room is that of the machine's ranks together (also where each
   * rank is its own node, rank_per_node: they share one /dev/shm). */
  int rc = MPI_Comm_split_type(s->comm, MPI_COMM_TYPE_SHARED, s->rank,
                               MPI_INFO_NULL, &host);
  if (rc == MPI_SUCCESS)
    rc = MPI_Allreduce(MPI_IN_PLACE, &need, 1, MPI_LONG_LONG, MPI_SUM, host);
  if (rc == MPI_SUCCESS)
    rc = MPI_Comm_rank(host, &host_rank);
  if (rc == MPI_SUCCESS && host_rank == 0 && need > 0) {
    struct statvfs fs;
    const int got = statvfs(SF_STORE_FILE_DIR, &fs) == 0;
    unsigned long long have =
        got ? (unsigned long long)fs.f_bavail * fs.f_frsize : 0;
    /* Test-only: SLABFEED_TEST_SHM_FREE=N bytes free. */
    const char *t = getenv("SLABFEED_TEST_SHM_FREE");
    if (got && t != NULL && t[0] != '\0')
      have = strtoull(t, NULL, 10);
    fit = got && have >= (unsigned long long)need;
    s->files_have = (double)have / 1e9;
    if (explicit && !got && e->status == SLABFEED_OK)
      sf__fail(e, SLABFEED_ERR_IO, "cannot see the free space of %s: %s",
               SF_STORE_FILE_DIR, strerror(errno));
    else if (explicit && !fit && e->status == SLABFEED_OK)
      sf__fail(e, SLABFEED_ERR_NOMEM,
               "the slabs of this machine's ranks need %.2f GB of %s for "
               "shared_window file, which has %.2f GB free",
               (double)need / 1e9, SF_STORE_FILE_DIR, s->files_have);
  }
  double said[2] = {fit, s->files_have};
  if (rc == MPI_SUCCESS)
    rc = MPI_Bcast(said, 2, MPI_DOUBLE, 0, host);
  fit = said[0] != 0.0;
  s->files_have = said[1];
  if (host != MPI_COMM_NULL)
    MPI_Comm_free(&host);
  if (rc != MPI_SUCCESS) {
    fit = 0;
    if (e->status == SLABFEED_OK)
      sf__fail_mpi(e, rc, "MPI (the room of the machine's slab files)");
  }
  s->files_need = (double)need / 1e9;
  return fit;
}

/* Node rank k's segment of `bytes` in files of `part`, mapped as one
 * range: an address range reserved, then each file mapped in its place.
 * own: this rank's descriptors (else each file opened by name and closed
 * once mapped). The range, or NULL after a failure (reported in e). */
static char *map_parts(const sf__store *s, const char *prefix, int k,
                       int64_t bytes, int64_t part, const int *own, int fail,
                       sf__err *e)
{
  char name[128];
  void *r = mmap(NULL, (size_t)bytes, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) {
    sf__fail(e, SLABFEED_ERR_NOMEM,
             "cannot reserve %lld bytes of address space for node rank %d's "
             "slab files: %s",
             (long long)bytes, k, strerror(errno));
    return NULL;
  }
  const int n = parts_of(bytes, part);
  for (int j = 0; j < n && e->status == SLABFEED_OK; j++) {
    const int64_t at = (int64_t)j * part,
                  len = bytes - at < part ? bytes - at : part;
    file_name(name, sizeof name, prefix, k, j);
    const int fd = fail  ? (errno = EACCES, -1)
                   : own ? own[j]
                         : open(name, O_RDWR | O_CLOEXEC);
    struct stat st;
    const int seen = fd >= 0 && fstat(fd, &st) == 0;
    if (!seen || st.st_size < len)
      sf__fail(e, SLABFEED_ERR_IO,
               "cannot open node rank %d's slab file %s of %lld bytes (%s): "
               "%s",
               k, name, (long long)len, sf__store_files_option(s),
               fail    ? "injected failure (test)"
               : !seen ? strerror(errno)
                       : "it is shorter");
    else if (mmap((char *)r + at, (size_t)len, PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
      sf__fail(e, SLABFEED_ERR_NOMEM,
               "cannot map node rank %d's slab file %s (%lld bytes): %s", k,
               name, (long long)len, strerror(errno));
    if (fd >= 0 && own == NULL)
      close(fd);
  }
  if (e->status != SLABFEED_OK) {
    munmap(r, (size_t)bytes);
    return NULL;
  }
  return r;
}

/* shared_window file: this rank's segment shared-memory files of its own
 * (in SF_STORE_FILE_DIR, sized with ftruncate: no page yet; several where
 * several threads write it, part_bytes), mapped one after the other by
 * every rank of the node, then unlinked as soon as the node's ranks have
 * all mapped them, so that nothing is left in the directory after the
 * open (a rank killed in between leaves SF_STORE_FILE_DIR/slabfeed.*
 * files behind). The node's free space there was checked first
 * (files_fit): a page tmpfs cannot back would be a SIGBUS at its first
 * store, not an error. Collective over the store's ranks: every rank
 * makes every MPI call whatever fails, and a failure is this rank's,
 * reported by the store's agreement. */
static slabfeed_status make_files(sf__store *s, sf__err *e)
{
  char prefix[64] = "", name[128];
  s->map_base = calloc((size_t)s->node_size, sizeof *s->map_base);
  s->map_len = calloc((size_t)s->node_size, sizeof *s->map_len);
  if (s->map_base == NULL || s->map_len == NULL)
    sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the segment table");
  /* The files' size follows the node's most threads (agreed), so that
   * every rank knows every segment's from the placement. */
  int threads = sf__core_share(s->node_size);
  int rc = MPI_Allreduce(MPI_IN_PLACE, &threads, 1, MPI_INT, MPI_MAX, s->node);
  if (rc != MPI_SUCCESS && e->status == SLABFEED_OK)
    sf__fail_mpi(e, rc, "MPI_Allreduce (the node's slab files)");
  s->part = part_bytes(s->bytes, threads);
  s->n_parts = parts_of(s->bytes, s->part);
  s->seg_fds =
      malloc((size_t)(s->n_parts > 0 ? s->n_parts : 1) * sizeof *s->seg_fds);
  if (s->seg_fds == NULL)
    sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the slab files' table");
  if (s->node_rank == 0) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    snprintf(prefix, sizeof prefix, "slabfeed.%ld.%lx.%lx", (long)getpid(),
             (unsigned long)t.tv_sec, (unsigned long)t.tv_nsec);
  }
  rc = MPI_Bcast(prefix, sizeof prefix, MPI_CHAR, 0, s->node);
  if (rc != MPI_SUCCESS && e->status == SLABFEED_OK)
    sf__fail_mpi(e, rc, "MPI_Bcast (the node's slab files)");
  const int injected = sf__inject("alloc", s->rank); /* (test) */
  int made = 0; /* this rank's files that exist: [0, made) */
  for (int j = 0; e->status == SLABFEED_OK && prefix[0] != '\0' &&
                  s->seg_fds != NULL && j < s->n_parts;
       j++) {
    const int64_t at = (int64_t)j * s->part,
                  len = s->bytes - at < s->part ? s->bytes - at : s->part;
    file_name(name, sizeof name, prefix, s->node_rank, j);
    int fd = -1;
    if (injected)
      errno = ENOSPC;
    else
      fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0)
      s->seg_fds[made++] = fd;
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0)
      sf__fail(e,
               errno == ENOMEM || errno == ENOSPC ? SLABFEED_ERR_NOMEM
                                                  : SLABFEED_ERR_IO,
               "cannot create the shared-memory file %s of %lld bytes for "
               "the slab (%s): %s",
               name, (long long)len, sf__store_files_option(s),
               injected ? "injected failure (test)" : strerror(errno));
  }
  s->n_fds = made;
  /* Every file exists (or the open fails on all ranks) before any rank
   * opens another's. */
  const int all = sf__agree(s->comm, e) == SLABFEED_OK;
  const int fail_map = sf__inject("alloc.map", s->rank); /* (test) */
  /* Node rank k is the node's k-th world rank (make_node's order). */
  for (int r = 0, k = 0; all && r < s->size && e->status == SLABFEED_OK; r++) {
    if (s->L.nodeof[r] != s->L.nodeof[s->rank])
      continue;
    const int64_t bytes = segment_bytes(s, r);
    if (bytes > 0) {
      s->map_base[k] =
          map_parts(s, prefix, k, bytes, part_bytes(bytes, threads),
                    k == s->node_rank ? s->seg_fds : NULL, fail_map, e);
      s->map_len[k] = s->map_base[k] != NULL ? (size_t)bytes : 0;
    }
    k++;
  }
  /* The node's ranks have mapped every file of the node (or failed): the
   * names go. */
  rc = MPI_Barrier(s->node);
  if (rc != MPI_SUCCESS && e->status == SLABFEED_OK)
    sf__fail_mpi(e, rc, "MPI_Barrier (the node's slab files)");
  for (int j = 0; j < made; j++) {
    file_name(name, sizeof name, prefix, s->node_rank, j);
    if (unlink(name) != 0)
      fprintf(stderr,
              "slabfeed: rank %d: cannot remove %s (%s): remove it by hand\n",
              s->rank, name, strerror(errno));
  }
  if (e->status == SLABFEED_OK && s->bytes > 0) {
    s->base = s->map_base[s->node_rank];
    s->fileback = sf__fileback_add(s->base, (size_t)s->bytes, (size_t)s->part,
                                   s->seg_fds, s->n_fds);
  }
  return e->status;
}

/* The node's segments as MPI-3 shared windows. *stop: the window table or
 * the windows failed on some rank (agreed: the same on every rank), so no
 * collective call follows; a local failure after them (this rank's
 * mapping) leaves it 0 and the world window is still made on every
 * rank. */
static slabfeed_status alloc_windows(sf__store *s, int *stop, sf__err *e)
{
  MPI_Info info = MPI_INFO_NULL;
  /* The info (only a hint: without it, MPI_INFO_NULL) and the window
   * table, agreed before the collective allocations. */
  if (MPI_Info_create(&info) != MPI_SUCCESS)
    info = MPI_INFO_NULL;
  else if (MPI_Info_set(info, "alloc_shared_noncontig", "true") !=
           MPI_SUCCESS) {
    MPI_Info_free(&info);
    info = MPI_INFO_NULL;
  }
  /* One window per node rank (its segment alone in it: its own
   * shared-memory file, whose pages the rank faults in without the other
   * ranks' faults in the same file; docs/PERFORMANCE.md), or one for the
   * node. Every rank makes every allocation, also after a failure. */
  s->n_shm = s->per_rank ? s->node_size : 1;
  s->shm_wins = malloc((size_t)s->n_shm * sizeof *s->shm_wins);
  if (s->shm_wins != NULL && sf__inject("alloc.table", s->rank)) {
    free(s->shm_wins); /* (test) */
    s->shm_wins = NULL;
  }
  if (s->shm_wins == NULL) {
    s->n_shm = 0;
    sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the window table");
  }
  for (int k = 0; k < s->n_shm; k++)
    s->shm_wins[k] = MPI_WIN_NULL;
  *stop = sf__agree(s->comm, e) != SLABFEED_OK;
  if (*stop)
    goto out;
  for (int k = 0; k < s->n_shm; k++) {
    const int mine = s->n_shm == 1 || k == s->node_rank;
    void *b = NULL;
    const int rc = MPI_Win_allocate_shared(mine ? (MPI_Aint)s->bytes : 0, 1,
                                           info, s->node, &b, &s->shm_wins[k]);
    if (rc != MPI_SUCCESS) {
      if (e->status == SLABFEED_OK)
        sf__fail_mpi(e, rc, "MPI_Win_allocate_shared");
      s->shm_wins[k] = MPI_WIN_NULL;
      continue;
    }
    if (mine)
      s->base = b;
    /* Window errors become return codes, not the end of the job. */
    const int rc2 = MPI_Win_set_errhandler(s->shm_wins[k], MPI_ERRORS_RETURN);
    if (rc2 != MPI_SUCCESS && e->status == SLABFEED_OK)
      sf__fail_mpi(e, rc2, "MPI_Win_set_errhandler");
  }
  /* A window that failed on some ranks stops every rank here (no rank
   * then makes the world window alone). */
  *stop = sf__agree(s->comm, e) != SLABFEED_OK;
  if (*stop)
    goto out;
  /* Open MPI returns success even when its mmap of this rank's segment
   * failed; this rank then goes on with an empty segment through the
   * collective calls below, and the store's agreement reports it. */
  if ((s->bytes > 0 && s->base == NULL) || sf__inject("alloc", s->rank)) {
    sf__fail(e, SLABFEED_ERR_NOMEM,
             "cannot map %lld bytes of the node's shared window for the slab "
             "(/dev/shm full, or memory limits)",
             (long long)s->bytes);
    s->base = NULL;
  }
out:
  if (info != MPI_INFO_NULL)
    MPI_Info_free(&info);
  return e->status;
}

/* The node's segments (windows or files), then the world window over
 * them where there is more than one node. Collective. */
static slabfeed_status make_windows(sf__store *s, sf__err *e)
{
  /* A file's failure is this rank's (its calls to MPI are made on every
   * rank whatever happens), as is a window's mapping: the world window
   * below is still made by all; stop only where alloc_windows agreed. */
  int stop = 0;
  if (s->files || s->files_auto) {
    /* auto: files where the open's read is direct (the loader's word) and
     * the node has several ranks, up to auto's window limit, if its
     * /dev/shm holds them (docs/DECISIONS.md, "The slab store as files
     * of the library's own"). */
    const int want =
        s->files || (s->node_size > 1 && s->node_size <= SF_STORE_MAX_WINDOWS);
    const int fit = files_fit(s, want, s->files, e);
    if (!s->files)
      s->files = want && fit;
  }
  if (s->files)
    make_files(s, e);
  else
    alloc_windows(s, &stop, e);
  if (stop)
    goto out;
  /* The world window exists only when there is more than one node: with
   * one node every piece is reached through the shared window, and some
   * MPI builds cannot create a window on one process (Debian's Open MPI
   * excludes osc ucx and pt2pt, and osc rdma refuses a single rank). */
  if (s->nodes > 1) {
    const MPI_Aint bytes = s->base != NULL ? (MPI_Aint)s->bytes : 0;
    const int rc = MPI_Win_create(s->base, bytes, 1, MPI_INFO_NULL, s->comm,
                                  &s->world_win);
    if (rc != MPI_SUCCESS) {
      sf__fail_mpi(e, rc,
                   "MPI_Win_create over all ranks (for MPI_Get between "
                   "nodes)");
      const size_t n = strlen(e->msg);
      char lib[128];
      sf__mpilib_name(lib, sizeof lib);
      if (sf__mpilib() == SF__MPILIB_OPEN_MPI)
        snprintf(e->msg + n, sizeof e->msg - n,
                 " (%s); Open MPI's osc/rdma needs a transport with RDMA get "
                 "(CMA, XPMEM, UCX, a NIC): where it has none, allow "
                 "osc/pt2pt, e.g. OMPI_MCA_osc=sm,pt2pt (pt2pt refuses "
                 "MPI_THREAD_MULTIPLE)",
                 lib);
      else if (sf__mpilib() == SF__MPILIB_MPICH)
        snprintf(e->msg + n, sizeof e->msg - n,
                 " (%s); an MPICH build needs a device with one-sided "
                 "support (ch4:ucx or ch4:ofi); run `mpichversion` to see "
                 "the device and the MPIR_CVAR_* settings in effect",
                 lib);
      else
        snprintf(e->msg + n, sizeof e->msg - n, " (%s)", lib);
      s->world_win = MPI_WIN_NULL;
      goto out;
    }
    SF_MPI_GOTO(MPI_Win_set_errhandler(s->world_win, MPI_ERRORS_RETURN), e,
                out);
  }
  for (int k = 0; k < s->n_shm; k++)
    SF_MPI_GOTO(MPI_Win_lock_all(MPI_MODE_NOCHECK, s->shm_wins[k]), e, out);
  s->shm_locked = 1;
out:
  return e->status;
}

/* Maps every rank of this node to its segment in the shared window. */
static slabfeed_status map_peers(sf__store *s, sf__err *e)
{
  MPI_Group world = MPI_GROUP_NULL, node = MPI_GROUP_NULL;
  int *nr = NULL, *wr = NULL;
  s->peer = calloc((size_t)s->size, sizeof *s->peer);
  s->peer_bytes = calloc((size_t)s->size, sizeof *s->peer_bytes);
  nr = malloc((size_t)s->node_size * sizeof *nr);
  wr = malloc((size_t)s->node_size * sizeof *wr);
  if (!s->peer || !s->peer_bytes || !nr || !wr) {
    sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the peer table");
    goto out;
  }
  for (int i = 0; i < s->node_size; i++)
    nr[i] = i;
  SF_MPI_GOTO(MPI_Comm_group(s->node, &node), e, out);
  SF_MPI_GOTO(MPI_Comm_group(s->comm, &world), e, out);
  SF_MPI_GOTO(MPI_Group_translate_ranks(node, s->node_size, nr, world, wr), e,
              out);
  for (int i = 0; i < s->node_size; i++) {
    MPI_Aint size = 0;
    int unit;
    void *ptr = NULL;
    if (s->files)
      ptr = s->map_base[i], size = (MPI_Aint)s->map_len[i];
    else
      SF_MPI_GOTO(MPI_Win_shared_query(s->shm_wins[s->n_shm == 1 ? 0 : i], i,
                                       &size, &unit, &ptr),
                  e, out);
    s->peer[wr[i]] = ptr;
    s->peer_bytes[wr[i]] = (int64_t)size;
  }
out:
  if (node != MPI_GROUP_NULL)
    MPI_Group_free(&node);
  if (world != MPI_GROUP_NULL)
    MPI_Group_free(&world);
  free(nr);
  free(wr);
  return e->status;
}

/* Node index of every rank (nodes numbered by their lowest world rank)
 * into nodeof[P], with first[P] as scratch; sets s->nodes. */
static slabfeed_status find_nodes(sf__store *s, int *nodeof, int *first,
                                  sf__err *e)
{
  int leader = s->rank;
  SF_MPI_GOTO(
      MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, s->node), e,
      out);
  SF_MPI_GOTO(MPI_Allgather(&leader, 1, MPI_INT, nodeof, 1, MPI_INT, s->comm),
              e, out);
  /* nodeof holds each rank's leader; leaders are their own leaders. */
  s->nodes = 0;
  for (int r = 0; r < s->size; r++)
    if (nodeof[r] == r)
      first[r] = s->nodes++;
  for (int r = 0; r < s->size; r++)
    nodeof[r] = first[nodeof[r]];
out:
  return e->status;
}

/* The placement: the budget agreed as the minimum over nodes, then the
 * group size (every rank computes the same layout from the same tables).
 * Every rank makes the collective calls or none does (a local allocation
 * failure is agreed on first). */
static slabfeed_status place(sf__store *s, const sf__store_opts *o, sf__err *e)
{
  int *nodeof = malloc((size_t)s->size * sizeof *nodeof);
  int *first = malloc((size_t)s->size * sizeof *first);
  if (nodeof == NULL || first == NULL)
    sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the node table");
  if (sf__inject("place", s->rank))
    sf__fail(e, SLABFEED_ERR_NOMEM, "injected failure at stage 'place' (test)");
  if (sf__agree(s->comm, e) != SLABFEED_OK)
    goto out;
  uint64_t budget = o->budget;
  if (budget == 0) {
    const uint64_t total = sf__meminfo("MemTotal");
    budget = total > 0 ? sf__placement_default_budget(total, s->node_size)
                       : UINT64_MAX;
  }
  if (find_nodes(s, nodeof, first, e) == SLABFEED_OK)
    SF_MPI_GOTO(
        MPI_Allreduce(&budget, &s->budget, 1, MPI_UINT64_T, MPI_MIN, s->comm),
        e, out);
  int64_t chan_bytes = 0;
  for (int d = 0; d < s->ndsets; d++)
    chan_bytes += s->channels[d] * s->cube[d] * (int64_t)sizeof(float);
  const sf__placement_req q = {s->size, s->nodes,    nodeof,    s->shape[0],
                               o->halo, o->locality, o->crop_z, o->ncuts,
                               o->cuts, &s->g};
  if (e->status == SLABFEED_OK &&
      sf__placement_choose(&s->L, &q, o->group_nodes, s->budget, chan_bytes,
                           e) == SLABFEED_OK)
    s->node_bytes = sf__placement_node_bytes(&s->L, &s->g, chan_bytes);
out:
  free(nodeof);
  free(first);
  return e->status;
}

slabfeed_status sf__store_open(sf__store *s, MPI_Comm comm, int ndsets,
                               const int64_t channels[], const int64_t shape[3],
                               const sf__store_opts *o, sf__err *e)
{
  memset(s, 0, sizeof *s);
  s->open = 1;
  s->comm = comm;
  s->node = MPI_COMM_NULL;
  s->world_win = MPI_WIN_NULL;
  s->shm_wins = NULL;
  s->n_shm = 0;
  s->per_rank = o->shared_window; /* resolved once node_size is known */
  s->fileback = -1;
  s->ndsets = ndsets;
  memcpy(s->shape, shape, sizeof s->shape);
  for (int d = 0; d < ndsets; d++) {
    s->channels[d] = channels[d];
    s->scale[d] = o->scale[d] > 1 ? o->scale[d] : 1;
    s->cube[d] = s->scale[d] * s->scale[d] * s->scale[d];
  }
  if (MPI_Comm_rank(comm, &s->rank) != MPI_SUCCESS ||
      MPI_Comm_size(comm, &s->size) != MPI_SUCCESS)
    return sf__fail(e, SLABFEED_ERR_MPI, "MPI_Comm_rank/size failed");

  if (o->halo < 0 || o->halo > shape[0])
    sf__fail(e, SLABFEED_ERR_ARG, "halo %lld must be in [0, Z=%lld]",
             (long long)o->halo, (long long)shape[0]);
  else if (o->runs > 0)
    sf__planes_make(&s->g, o->runs, o->run_z0, o->run_shape, e);
  else
    sf__planes_box(&s->g, shape[0], shape[1], shape[2], e);
  if (sf__inject("planes", s->rank))
    sf__fail(e, SLABFEED_ERR_NOMEM,
             "injected failure at stage 'planes' (test)");
  /* Every rank computes the same placement from agreed inputs, so a
   * failure of the placement itself is found by all. */
  make_node(s, o->rank_per_node, e);
  /* With files, per_rank steers only the writer's windows: auto's rule. */
  s->files = o->shared_window == SLABFEED_WINDOW_FILE;
  s->file_read = o->file_read;
  s->files_auto = o->shared_window == SLABFEED_WINDOW_AUTO && o->file_read;
  s->per_rank = o->shared_window == SLABFEED_WINDOW_PER_RANK ||
                ((o->shared_window == SLABFEED_WINDOW_AUTO || s->files) &&
                 s->node_size <= SF_STORE_MAX_WINDOWS);
  if (sf__agree(comm, e) == SLABFEED_OK && place(s, o, e) == SLABFEED_OK) {
    s->bytes = segment_bytes(s, s->rank);
    if (s->bytes < 0)
      sf__fail(e, SLABFEED_ERR_ARG, "slab size of rank %d overflows 64 bits",
               s->rank);
  }
  if (sf__agree(comm, e) == SLABFEED_OK && make_windows(s, e) == SLABFEED_OK)
    map_peers(s, e);
  /* Diagnostic (docs/PERFORMANCE.md, "The open's read"): with
   * SLABFEED_PREFAULT=1 every rank first touches its own segment and
   * prints how long that took, so that the first-touch cost of the shared
   * window and the read itself are timed apart. Local (no collective). */
  const char *pf = getenv("SLABFEED_PREFAULT");
  if (e->status == SLABFEED_OK && pf != NULL && pf[0] == '1' &&
      s->base != NULL && s->bytes > 0) {
    const double t0 = sf__now();
    memset(s->base, 0, (size_t)s->bytes);
    const double dt = sf__now() - t0;
    fprintf(stderr, "prefault: rank %d touched %.2f GB in %.3f s (%.2f GB/s)\n",
            s->rank, (double)s->bytes / 1e9, dt,
            dt > 0 ? (double)s->bytes / 1e9 / dt : 0.0);
  }
  if (sf__inject("window", s->rank))
    sf__fail(e, SLABFEED_ERR_MPI, "injected failure at stage 'window' (test)");
  if (sf__agree(comm, e) != SLABFEED_OK)
    sf__store_close(s);
  return e->status;
}

const float *sf__store_segment(const sf__store *s, int r, int d)
{
  if (s->peer[r] == NULL)
    return NULL;
  return (const float *)(s->peer[r] + sf__store_offset(s, r, d));
}

/* Hands fn the copies of `len` planes of every channel of every dataset,
 * the box's planes [z, z + len), from plane qr of rank r's segment to
 * plane q of this rank's: one per dataset and channel. */
static slabfeed_status copy_planes(sf__store *s, int r, int64_t z, int64_t qr,
                                   int64_t q, int64_t len, sf__store_copy_fn fn,
                                   void *arg, sf__err *e)
{
  const int64_t fb = (int64_t)sizeof(float);
  const int64_t cr = sf__store_chan(s, r), cm = sf__store_chan(s, s->rank);
  const int64_t ar = sf__store_at(s, r, qr), am = sf__store_at(s, s->rank, q);
  const int64_t span = sf__planes_span(&s->g, z, len) * fb;
  for (int d = 0; d < s->ndsets && e->status == SLABFEED_OK; d++)
    for (int64_t c = 0; c < s->channels[d] && e->status == SLABFEED_OK; c++) {
      /* A dataset of scale f: every offset and length f^3 times. */
      const int64_t k = s->cube[d];
      fn(s, r, sf__store_offset(s, r, d) + (c * cr + ar) * fb * k,
         sf__store_offset(s, s->rank, d) + (c * cm + am) * fb * k, span * k,
         arg, e);
    }
  return e->status;
}

slabfeed_status sf__store_each_copy(sf__store *s, sf__store_copy_fn fn,
                                    void *arg, sf__err *e)
{
  const sf__placement *L = &s->L;
  const int64_t Z = s->shape[0], first = sf__placement_first(L, s->rank);
  const int64_t planes = sf__store_planes(s, s->rank);
  for (int64_t q = 0; q < planes && e->status == SLABFEED_OK;) {
    const int64_t z = sf__pmod(first + q, Z);
    int64_t end;
    const int r = sf__placement_reader(L, z, &end);
    int64_t len = end - z;
    if (len > planes - q)
      len = planes - q;
    const int64_t qr = z - L->core0[r] + L->lo[r];
    if (r != s->rank || qr != q)
      copy_planes(s, r, z, qr, q, len, fn, arg, e);
    q += len;
  }
  return e->status;
}

int sf__store_crops_cross(const sf__store *s, int locality)
{
  /* Some group spans more than one node (groups hold N / ng or one more
   * nodes), and crops are not kept on their node (locality keeps them
   * there; it is refused for datasets of several volumes). */
  return !locality && s->L.N > s->L.ng;
}

/* Clears *arg where a copy comes from another node. */
static slabfeed_status note_remote(sf__store *s, int r, int64_t from,
                                   int64_t to, int64_t bytes, void *arg,
                                   sf__err *e)
{
  (void)from, (void)to, (void)bytes, (void)e;
  if (s->peer[r] == NULL)
    *(int *)arg = 0;
  return SLABFEED_OK;
}

int sf__store_node_read(sf__store *s)
{
  int here = 1;
  sf__err e;
  sf__err_clear(&e);
  sf__store_each_copy(s, note_remote, &here, &e);
  return here;
}

/* The host segments' copy: memcpy from a segment of this node, else
 * MPI_Get (blocks of at most 1 GiB). */
static slabfeed_status host_copy(sf__store *s, int r, int64_t from, int64_t to,
                                 int64_t bytes, void *arg, sf__err *e)
{
  (void)arg;
  if (s->peer[r] != NULL) {
    memmove(s->base + to, s->peer[r] + from, (size_t)bytes);
    return SLABFEED_OK;
  }
  for (int64_t done = 0; done < bytes;) {
    const int64_t n =
        bytes - done < ((int64_t)1 << 30) ? bytes - done : (int64_t)1 << 30;
    SF_MPI_GOTO(MPI_Get(s->base + to + done, (int)n, MPI_BYTE, r,
                        (MPI_Aint)(from + done), (int)n, MPI_BYTE,
                        s->world_win),
                e, out);
    done += n;
    s->fill_remote += (uint64_t)n;
  }
out:
  return e->status;
}

/* Fills every plane of this rank's segment that it did not read itself. */
static slabfeed_status fill(sf__store *s, sf__err *e)
{
  if (sf__store_each_copy(s, host_copy, NULL, e) == SLABFEED_OK &&
      s->world_win != MPI_WIN_NULL)
    SF_MPI_GOTO(MPI_Win_flush_all(s->world_win), e, out);
out:
  return e->status;
}

int sf__store_win_sync(const sf__store *s)
{
  int first = MPI_SUCCESS;
  /* Files of the library's own: plain shared memory, ordered by a fence
   * (the barrier after it orders the ranks). */
  if (s->files)
    atomic_thread_fence(memory_order_seq_cst);
  for (int k = 0; k < s->n_shm; k++) {
    const int rc = MPI_Win_sync(s->shm_wins[k]);
    if (rc != MPI_SUCCESS && first == MPI_SUCCESS)
      first = rc;
  }
  return first;
}

/* Makes this node's writes to the shared window visible to its ranks. */
static slabfeed_status node_sync(sf__store *s, sf__err *e)
{
  SF_MPI_GOTO(sf__store_win_sync(s), e, out);
  SF_MPI_GOTO(MPI_Barrier(s->comm), e, out);
  SF_MPI_GOTO(sf__store_win_sync(s), e, out);
out:
  return e->status;
}

slabfeed_status sf__store_publish(sf__store *s, int fill_host, sf__err *e)
{
  /* The collective calls are made after a local failure too; only the
   * fetches are skipped. */
  sf__err local = *e;
  sf__err_clear(e);
  if (sf__inject("fill", s->rank))
    sf__fail(&local, SLABFEED_ERR_MPI,
             "injected failure at stage 'fill' (test)");
  if (node_sync(s, e) == SLABFEED_OK && s->world_win != MPI_WIN_NULL) {
    const int rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, s->world_win);
    if (rc != MPI_SUCCESS)
      sf__fail_mpi(e, rc, "MPI_Win_lock_all");
    else
      s->world_locked = 1;
  }
  if (e->status == SLABFEED_OK && local.status == SLABFEED_OK &&
      s->base != NULL && fill_host)
    fill(s, e);
  sf__err sync;
  sf__err_clear(&sync);
  node_sync(s, e->status == SLABFEED_OK ? e : &sync);
  if (local.status != SLABFEED_OK)
    *e = local;
  return e->status;
}

void sf__store_close(sf__store *s)
{
  if (!s->open)
    return;
  s->open = 0;
  if (s->world_locked)
    MPI_Win_unlock_all(s->world_win);
  for (int k = 0; s->shm_locked && k < s->n_shm; k++)
    MPI_Win_unlock_all(s->shm_wins[k]);
  s->world_locked = s->shm_locked = 0;
  if (s->world_win != MPI_WIN_NULL)
    MPI_Win_free(&s->world_win);
  for (int k = 0; k < s->n_shm; k++)
    if (s->shm_wins[k] != MPI_WIN_NULL)
      MPI_Win_free(&s->shm_wins[k]);
  free(s->shm_wins);
  s->shm_wins = NULL;
  s->n_shm = 0;
  sf__fileback_remove(s->fileback);
  s->fileback = -1;
  sf__unmap_table(&s->map_base, &s->map_len, s->node_size);
  for (int j = 0; j < s->n_fds; j++)
    close(s->seg_fds[j]);
  free(s->seg_fds);
  s->seg_fds = NULL;
  s->n_fds = s->n_parts = 0;
  if (s->node != MPI_COMM_NULL)
    MPI_Comm_free(&s->node);
  free(s->peer);
  free(s->peer_bytes);
  s->peer = NULL;
  s->peer_bytes = NULL;
  s->base = NULL;
  sf__placement_free(&s->L);
  sf__planes_free(&s->g);
}
