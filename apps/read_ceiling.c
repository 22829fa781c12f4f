/* The read ceiling of a loader's open (slabfeed-bench, slabfeed-predict;
 * read_ceiling.h). The same ranks read the
 * same bytes of the same file as the open's slab read did, with plain
 * pread(2) into private memory freshly allocated (its pages first touched
 * by the read, as the open's window is), one thread per rank, then on the
 * rank's share of the node's cores (as read_mode direct reads), right
 * after the loader closed (the page cache as the open left it). The bytes: for
 * each dataset of the input and the target, rank r's z-slab of the box
 * (slabfeed_slab_plan: the open's split over one group of ranks), every
 * channel, as stored (float16 files: 2 bytes per value). Only contiguous
 * datasets of one file have their bytes at known offsets; other files
 * (chunked, several volumes or fields) get no ceiling (n/a). */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "read_ceiling.h"

#include "cli.h"
#include "slabfeed_tools.h"

/* Where one dataset's values are in the file, found by rank 0. */
typedef struct stored {
  double offset; /* file offset of the first value; < 0: not contiguous */
  double Z, C, plane, esize;
  double cf; /* 1: channels first */
} stored;

/* The storage of `name` in path (rank 0, serial HDF5): contiguous, its
 * offset, extents and element size; offset -1 where it is not known. */
static stored find_stored(const char *path, const char *name,
                          slabfeed_file_layout layout)
{
  stored s = {-1, 0, 0, 0, 0, 0};
  slabfeed_dataset_info in = SLABFEED_DATASET_INFO_INIT;
  char err[512];
  if (name == NULL || strpbrk(name, ",@") != NULL ||
      slabfeed_describe(path, name, layout, &in, err, sizeof err) !=
          SLABFEED_OK ||
      in.chunked)
    return s;
  const hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = f >= 0 ? H5Dopen2(f, name, H5P_DEFAULT) : H5I_INVALID_HID;
  const haddr_t off = d >= 0 ? H5Dget_offset(d) : HADDR_UNDEF;
  if (off != HADDR_UNDEF) {
    s.offset = (double)off;
    s.Z = (double)in.shape[0];
    s.C = (double)in.channels;
    s.plane = (double)(in.shape[1] * in.shape[2]);
    s.esize = in.type_bits / 8.0;
    s.cf = in.ndim == 4 && in.layout == SLABFEED_LAYOUT_CF;
  }
  if (d >= 0)
    H5Dclose(d);
  if (f >= 0)
    H5Fclose(f);
  return s;
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

/* One thread's part of the ranges: part k of T of each range, at its
 * place in the buffer (ranges laid end to end). */
typedef struct range_job {
  int fd;
  char *buf;
  off_t (*off)[64];
  size_t (*len)[64];
  const int *nr;
  int nd, k, T, err;
} range_job;

static void *read_part(void *p)
{
  range_job *j = p;
  size_t at = 0;
  for (int d = 0; d < j->nd && j->err == 0; d++)
    for (int r = 0; r < j->nr[d] && j->err == 0; r++) {
      const size_t n = j->len[d][r];
      const size_t part = (n / (size_t)j->T + 4095) / 4096 * 4096;
      const size_t a = (size_t)j->k * part < n ? (size_t)j->k * part : n;
      const size_t b = a + part < n ? a + part : n;
      if (b > a && read_range(j->fd, j->buf + at + a, j->off[d][r] + (off_t)a,
                              b - a) != 0)
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
  enum { ND = 2 };
  stored s[ND];
  memset(s, 0, sizeof s);
  if (rank == 0)
    for (int d = 0; d < ND; d++)
      s[d] = find_stored(path, d == 0 ? input : target, layout);
  MPI_Bcast(s, (int)(ND * (sizeof(stored) / sizeof(double))), MPI_DOUBLE, 0,
            MPI_COMM_WORLD);
  const int nd = target != NULL ? 2 : 1;
  int known = path != NULL && path[0] != '\0';
  for (int d = 0; d < nd; d++)
    known &= s[d].offset >= 0 && s[d].Z >= size;
  if (!known)
    return 0; /* n/a, alike on every rank (rank 0's findings) */
  /* This rank's ranges and their bytes. */
  off_t off[ND][64];
  size_t len[ND][64];
  int nr[ND] = {0, 0};
  size_t mine = 0;
  for (int d = 0; d < nd; d++) {
    int64_t z0 = 0, z1 = 0;
    slabfeed_slab_plan((int64_t)s[d].Z, size, rank, &z0, &z1);
    const double row = s[d].plane * s[d].esize; /* one plane of a channel */
    const int runs = s[d].cf ? (int)s[d].C : 1;
    for (int k = 0; k < runs && k < 64; k++) {
      const double first =
          s[d].cf ? (k * s[d].Z + (double)z0) * row : (double)z0 * row * s[d].C;
      off[d][k] = (off_t)(s[d].offset + first);
      len[d][k] = (size_t)((double)(z1 - z0) * row * (s[d].cf ? 1 : s[d].C));
      mine += len[d][k];
    }
    nr[d] = runs < 64 ? runs : 64;
  }
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
  const long cores = sysconf(_SC_NPROCESSORS_ONLN) / node_size;
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
      job[k] = (range_job){fd, buf, off, len, nr, nd, k, T, 0};
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
