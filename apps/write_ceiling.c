/* The write ceiling of a writer's close (write_ceiling.h): plain pwrite
 * of the same bytes by the same ranks into a file beside the output,
 * synced, timed from a barrier to the slowest rank's fsync. The writer's
 * close does more than this (a coverage check, HDF5's transfers, the
 * rename), so the ratio says what that costs over the filesystem. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "write_ceiling.h"

#define CHUNK ((size_t)64 << 20)

static int write_range(int fd, const char *buf, size_t chunk, off_t off,
                       size_t len)
{
  while (len > 0) {
    const size_t n = len < chunk ? len : chunk;
    const ssize_t put = pwrite(fd, buf, n, off);
    if (put < 0 && errno == EINTR)
      continue;
    if (put <= 0)
      return -1;
    off += put;
    len -= (size_t)put;
  }
  return 0;
}

int write_ceiling_measure(const char *path, double mine, write_ceiling *out)
{
  memset(out, 0, sizeof *out);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  /* The file's name: rank 0's pid, so that jobs side by side differ. */
  long pid = (long)getpid();
  MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  char name[4352];
  const int fit = snprintf(name, sizeof name, "%s.slabfeed-ceiling.%ld", path,
                           pid) < (int)sizeof name;
  int fd = -1, ok = fit;
  if (rank == 0 && ok) {
    fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ok = fd >= 0;
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok)
    return 0; /* rank 0 made nothing: nothing to remove */
  if (rank != 0) {
    fd = open(name, O_WRONLY);
    ok = fd >= 0;
  }
  double start = 0;
  MPI_Exscan(&mine, &start, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    start = 0; /* MPI_Exscan leaves rank 0's undefined */
  const size_t len = (size_t)mine;
  const size_t chunk = len < CHUNK ? (len > 0 ? len : 1) : CHUNK;
  char *buf = malloc(chunk);
  if (buf == NULL)
    ok = 0;
  else
    memset(buf, 0x5a, chunk); /* faulted in before the clock */
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  if (ok && len > 0)
    ok = write_range(fd, buf, chunk, (off_t)start, len) == 0 && fsync(fd) == 0;
  double t = MPI_Wtime() - t0;
  if (fd >= 0 && close(fd) != 0)
    ok = 0;
  free(buf);
  double bytes = (double)len;
  MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &bytes, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0)
    unlink(name); /* every rank has closed it */
  if (!ok || t <= 0)
    return 0;
  out->bytes = bytes;
  out->pwrite_gbs = bytes / t / 1e9;
  return 1;
}
