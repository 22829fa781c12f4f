/* The read ceiling of a loader's open (slabfeed-bench, slabfeed-predict;
 * read_ceiling.h). The same ranks read the
 * same bytes of the same file as the open's slab read did, with plain
 * pread(2) into private memory freshly allocated (its pages first touched
 * by the read, as the open's window is), one thread per rank, then on the
 * rank's share of the node's cores within the CPUs it may run on (as
 * read_mode direct reads), right
 * after the loader closed (the page cache as the open left it). The bytes: for
 * each dataset of the input and the target, rank r's z-slab of the box
 * (slabfeed_slab_plan: the open's split over one group of ranks), every
 * channel, as stored (float16 files: 2 bytes per value), at the ranges
 * slabfeed_stored_ranges gives: contiguous datasets and chunked ones
 * without filters (0.10: the rows of those planes in each chunk, as
 * read_mode direct reads them). Other files (filters, several volumes or
 * fields) get no ceiling (n/a). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "read_ceiling.h"

#include "cli.h"
#include "slabfeed_tools.h"

/* Appends to *r (*n of them, *cap room) the ranges of bytes of path
 * holding this rank's z-slab (slabfeed_slab_plan over `size` ranks) of
 * every channel of dataset `name` (slabfeed_stored_ranges: what the open
 * reads directly). 0, or -1 where they are not known: a list of fields,
 * fewer planes than ranks, values not at known offsets (filters, virtual
 * datasets), no memory. */
static int add_ranges(const char *path, const char *name,
                      slabfeed_file_layout layout, int size, int rank,
                      slabfeed_byte_range **r, int64_t *n, int64_t *cap)
{
  slabfeed_dataset_info in = SLABFEED_DATASET_INFO_INIT;
  char err[512];
  int64_t z0 = 0, z1 = 0, more = 0;
  if (name == NULL || strpbrk(name, ",@") != NULL ||
      slabfeed_describe(path, name, layout, &in, err, sizeof err) !=
          SLABFEED_OK ||
      slabfeed_slab_plan(in.shape[0], size, rank, &z0, &z1) != SLABFEED_OK ||
      slabfeed_stored_ranges(path, name, layout, z0, z1, NULL, 0, &more, err,
                             sizeof err) != SLABFEED_OK)
    return -1;
  if (*n + more > *cap) {
    slabfeed_byte_range *g = realloc(*r, (size_t)(*n + more) * sizeof *g);
    if (g == NULL)
      return -1;
    *r = g;
    *cap = *n + more;
  }
  int64_t got = 0;
  if (slabfeed_stored_ranges(path, name, layout, z0, z1, *r + *n, more, &got,
                             err, sizeof err) != SLABFEED_OK ||
      got != more)
    return -1;
  *n += got;
  return 0;
}

/* Reads [off, off + len) of fd into buf with pread, in pieces of at most
 * 1 GiB; 0, or -1 with errno. */
static int read_range(int fd, char *buf, off_t off, size_t len)
{
  while (len > 0) {
    const size_t n = len < ((size_t)1 << 30) ? len : ((size_t)1 << 30);
    const ssize_t got = pread(fd, buf, n, off);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return -1;
    buf += got;
    off += got;
    len -= (size_t)got;
  }
  return 0;
}

/* One thread's part of the ranges: part k of T of their bytes laid end
 * to end (so each thread reads one slice of the buffer, a few long
 * preads, however small the ranges: a chunked file's are a chunk row
 * each). */
typedef struct range_job {
  int fd;
  char *buf;
  const slabfeed_byte_range *r;
  int64_t n;
  size_t total;
  int k, T, err;
} range_job;

static void *read_part(void *p)
{
  range_job *j = p;
  const size_t part = (j->total / (size_t)j->T + 4095) / 4096 * 4096;
  const size_t lo =
      (size_t)j->k * part < j->total ? (size_t)j->k * part : j->total;
  const size_t hi = lo + part < j->total ? lo + part : j->total;
  size_t at = 0; /* where range i starts in the buffer */
  for (int64_t i = 0; i < j->n && at < hi && j->err == 0; i++) {
    const size_t n = (size_t)j->r[i].bytes;
    const size_t a = lo > at ? lo - at : 0, b = hi - at < n ? hi - at : n;
    if (b > a && read_range(j->fd, j->buf + at + a,
                            (off_t)(j->r[i].offset + (int64_t)a), b - a) != 0)
      j->err = errno != 0 ? errno : EIO;
    at += n;
  }
  return NULL;
}

int read_ceiling_measure(const char *path, const char *input,
                         const char *target, slabfeed_file_layout layout,
                         read_ceiling *out)
{
  memset(out, 0, sizeof *out);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* This rank's ranges and their bytes; known only where every rank's
   * are. */
  slabfeed_byte_range *r = NULL;
  int64_t nr = 0, cap = 0;
  int known = path != NULL && path[0] != '\0' &&
              add_ranges(path, input, layout, size, rank, &r, &nr, &cap) == 0 &&
              (target == NULL || add_ranges(path, target, layout, size, rank,
                                            &r, &nr, &cap) == 0);
  MPI_Allreduce(MPI_IN_PLACE, &known, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!known) {
    free(r);
    return 0; /* n/a, alike on every rank */
  }
  size_t mine = 0;
  for (int64_t i = 0; i < nr; i++)
    mine += (size_t)r[i].bytes;
  slabfeed_status st = SLABFEED_OK;
  char msg[CLI_ERRLEN] = "";
  const int fd = open(path, O_RDONLY);
  if (fd < 0)
    cli_note(&st, msg, sizeof msg, SLABFEED_ERR_IO,
             "read ceiling: cannot open '%s': %s", path, strerror(errno));
  /* The rank's share of the node's cores, as read_mode direct reads. */
  MPI_Comm node = MPI_COMM_NULL;
  int node_size = 1;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                          MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &node_size);
    MPI_Comm_free(&node);
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN) / node_size;
  cpu_set_t allowed; /* and no more than the rank may run on, as the open */
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 &&
      CPU_COUNT(&allowed) < cores)
    cores = CPU_COUNT(&allowed);
  const int threads = cores < 1 ? 1 : cores > 64 ? 64 : (int)cores;
  double t[2] = {0, 0};
  for (int pass = 0; pass < 2; pass++) {
    char *buf = mine > 0 ? malloc(mine) : NULL;
    if (mine > 0 && buf == NULL)
      cli_note(&st, msg, sizeof msg, SLABFEED_ERR_NOMEM,
               "read ceiling: cannot allocate %zu bytes", mine);
    range_job job[64];
    const int T = pass == 0 ? 1 : threads;
    for (int k = 0; k < T; k++)
      job[k] = (range_job){fd, buf, r, nr, mine, k, T, 0};
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    pthread_t th[64];
    int started[64] = {0};
    for (int k = 1; k < T && st == SLABFEED_OK; k++)
      started[k] = pthread_create(&th[k], NULL, read_part, &job[k]) == 0;
    for (int k = 0; k < T && st == SLABFEED_OK; k++)
      if (k == 0 || !started[k])
        read_part(&job[k]);
    for (int k = 1; k < T; k++)
      if (started[k])
        pthread_join(th[k], NULL);
    t[pass] = MPI_Wtime() - t0;
    for (int k = 0; k < T && st == SLABFEED_OK; k++)
      if (job[k].err != 0)
        cli_note(&st, msg, sizeof msg, SLABFEED_ERR_IO,
                 "read ceiling: pread of '%s' failed: %s", path,
                 strerror(job[k].err));
    free(buf);
  }
  if (fd >= 0)
    close(fd);
  free(r);
  double bytes = (double)mine;
  MPI_Allreduce(MPI_IN_PLACE, t, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  int bad = st != SLABFEED_OK;
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (bad || t[0] <= 0 || t[1] <= 0)
    return 0; /* n/a: the app's figures stand without it */
  out->pread_threads_gbs = bytes / t[1] / 1e9;
  out->threads = threads;
  const double dt = t[0];
  out->bytes = bytes;
  out->pread_gbs = bytes / dt / 1e9;
  return 1;
}
