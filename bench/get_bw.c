/* get_bw: one-sided MPI_Get bandwidth by message size, the figures
 * bench/scale_model.py needs (docs/SCALING.md).
 *
 * Contract
 *   Run:        mpirun -n P get_bw [options]   (P >= 2, even for --pairs all)
 *   Pairs:      rank i < P/2 reads from rank i + P/2. With one rank per GPU
 *               and block placement over 2 nodes (srun's default), every
 *               reader is on node 0 and every target on node 1, so --pairs
 *               all measures what a node's GPUs share (its NICs) and
 *               --pairs one (only rank 0 reads, from rank P/2) a single
 *               stream. Ranks that share a host measure shared memory, not
 *               the network; the header names both hosts of the first pair.
 *   Window:     --max bytes on every rank, by MPI_Win_create over malloc'd
 *               memory as the loader's world window (src/store.c; with
 *               Open MPI on one host that is osc/rdma, not osc/sm), or by
 *               MPI_Win_allocate (--win allocate) as slabfeed-bench's get
 *               ceiling; passive target,
 *               MPI_Win_lock_all(MPI_MODE_NOCHECK) once. Per size m:
 *               --window gets of m bytes (each to its own offset of the
 *               target window and of the local buffer, so in-flight gets
 *               never overlap), then MPI_Win_flush(target); repeated until
 *               about --bytes per size were read (at least 5 rounds), after
 *               one untimed round; successive gets walk through the whole
 *               window, which one untimed get of all of it maps first.
 *               Each size is timed --reps times; the fastest is kept.
 *   Rows:       one MPI_Get of a vector datatype of --rows rows of r bytes
 *               (r = 256, 512, 1024: crop rows of 64^3, 128^3, 256^3 float32
 *               crops) at a stride of 4 KiB (a 1024-voxel box row), like
 *               one piece of today's loader, then a flush: what the MPI
 *               library makes of a crop piece.
 *   Output:     rank 0 prints, per size, the mean GB/s per reading rank, the
 *               slowest reader's GB/s, the sum over readers, and the time per
 *               get (elapsed / gets: an inverse rate with gets in flight,
 *               not a latency); the same per row for the row test; then the
 *               best large-message (>= 1 MiB) rate per reader and summed,
 *               the fit of bw(m) = m / (alpha + m/peak) through the 1 KiB
 *               and 64 KiB figures, the per-row cost net of the row's bytes
 *               at the large-message rate, and the options
 *               bench/scale_model.py takes from them ("scale_model:
 *               --curve ..." and "scale_model: --op-us ..."; a fit that
 *               gives no positive alpha and peak prints no option).
 *               GB = 1e9 bytes.
 *   Collective: every rank runs every size; targets wait in a barrier
 *               (which also gives MPI libraries without asynchronous
 *               progress the chance to serve the gets).
 *   Failure:    a bad option prints the usage on rank 0 and all exit 2; an
 *               MPI error aborts (MPI_ERRORS_ARE_FATAL, the default).
 *   Threads:    MPI_Init (single-threaded).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct options {
  long long min, max, bytes;
  int window, rows, all, reps, create;
} options;

static void usage(FILE *f)
{
  fprintf(f, "usage: get_bw [--min BYTES] [--max BYTES] [--window W] "
             "[--bytes BYTES] [--rows N] [--reps R] [--pairs all|one]\n"
             "              [--win create|allocate]\n"
             "One-sided MPI_Get bandwidth, rank i < P/2 reading from rank i + "
             "P/2.\n"
             "  --min BYTES    smallest message (default 1024)\n"
             "  --max BYTES    largest message, also the window size "
             "(default 67108864)\n"
             "  --window W     gets in flight before each flush (default 64)\n"
             "  --bytes BYTES  bytes read per size and reader (default "
             "268435456)\n"
             "  --rows N       rows of the row-datatype test (default 4096)\n"
             "  --reps R       repetitions per size, the best kept (default "
             "3)\n"
             "  --win create|allocate  MPI_Win_create over malloc'd memory, "
             "as the\n"
             "                 loader's window (default), or MPI_Win_allocate, "
             "as\n"
             "                 slabfeed-bench's ceiling\n"
             "  --pairs all|one  every rank of the first half reads (default) "
             "or rank 0 only\n");
}

static int parse_size(const char *s, long long lo, long long *out)
{
  char *end;
  const long long v = strtoll(s, &end, 10);
  if (end == s || *end != '\0' || v < lo)
    return -1;
  *out = v;
  return 0;
}

/* 0: parsed; 1: --help; 2: bad usage. */
static int parse(int argc, char **argv, options *o)
{
  *o = (options){1024, 64LL << 20, 256LL << 20, 64, 4096, 1, 3, 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    long long x;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
      return 1;
    if (v == NULL)
      return 2;
    if (strcmp(a, "--win") == 0) {
      if (strcmp(v, "create") == 0)
        o->create = 1;
      else if (strcmp(v, "allocate") == 0)
        o->create = 0;
      else
        return 2;
    } else if (strcmp(a, "--pairs") == 0) {
      if (strcmp(v, "all") == 0)
        o->all = 1;
      else if (strcmp(v, "one") == 0)
        o->all = 0;
      else
        return 2;
    } else if (parse_size(v, 1, &x) != 0) {
      return 2;
    } else if (strcmp(a, "--min") == 0) {
      o->min = x;
    } else if (strcmp(a, "--max") == 0) {
      o->max = x;
    } else if (strcmp(a, "--bytes") == 0) {
      o->bytes = x;
    } else if (strcmp(a, "--window") == 0 && x <= 1 << 20) {
      o->window = (int)x;
    } else if (strcmp(a, "--rows") == 0 && x <= 1 << 20) {
      o->rows = (int)x;
    } else if (strcmp(a, "--reps") == 0 && x <= 1000) {
      o->reps = (int)x;
    } else {
      return 2;
    }
    i++;
  }
  if (o->min > o->max || o->max > (1LL << 30) ||
      (long long)o->rows * 4096 > o->max)
    return 2;
  return 0;
}

/* Reads m bytes per get from `target`, k gets in flight per flush, for
 * `rounds` timed rounds after one untimed one; returns seconds. Successive
 * gets walk through the whole window (and the local buffer), so small
 * messages are not served from a cache-resident corner of it. */
static double time_gets(MPI_Win win, char *buf, int target, long long m, int k,
                        long long rounds, long long max)
{
  const long long slots = max / m;
  long long next = 0;
  double t0 = 0;
  for (long long r = -1; r < rounds; r++) {
    if (r == 0)
      t0 = MPI_Wtime();
    for (int j = 0; j < k; j++) {
      const long long at = next * m;
      MPI_Get(buf + at, (int)m, MPI_BYTE, target, (MPI_Aint)at, (int)m,
              MPI_BYTE, win);
      next = next + 1 < slots ? next + 1 : 0;
    }
    MPI_Win_flush(target, win);
  }
  return MPI_Wtime() - t0;
}

/* One MPI_Get of `rows` rows of `row` bytes at a 4 KiB stride (both
 * sides), then a flush, `rounds` times after one untimed, moving through
 * the window; returns seconds. */
static double time_rows(MPI_Win win, char *buf, int target, int row, int rows,
                        long long rounds, long long max)
{
  const long long extent = (long long)rows * 4096;
  const long long slots = max / extent;
  MPI_Datatype t;
  MPI_Type_vector(rows, row, 4096, MPI_BYTE, &t);
  MPI_Type_commit(&t);
  double t0 = 0;
  for (long long r = -1; r < rounds; r++) {
    if (r == 0)
      t0 = MPI_Wtime();
    const long long at = ((r + 1) % slots) * extent;
    MPI_Get(buf + at, 1, t, target, (MPI_Aint)at, 1, t, win);
    MPI_Win_flush(target, win);
  }
  const double dt = MPI_Wtime() - t0;
  MPI_Type_free(&t);
  return dt;
}

typedef struct figure {
  double mean, min, sum, us_per_get;
} figure;

/* Combines every reader's seconds for `bytes` bytes in `gets` gets into
 * figures on rank 0 (collective). */
static figure gather(double dt, int reader, double bytes, double gets,
                     int readers)
{
  double in[2] = {reader ? bytes / dt / 1e9 : 0, reader ? dt : 0};
  double mn = reader ? in[0] : 1e300, sum[2], least;
  MPI_Reduce(in, sum, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(&mn, &least, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
  figure f = {sum[0] / readers, least, sum[0], sum[1] / readers / gets * 1e6};
  return f;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  options o;
  const int st = parse(argc, argv, &o);
  if (st != 0 || size < 2 || (o.all && size % 2 != 0)) {
    if (rank == 0) {
      if (st == 0)
        fprintf(stderr, "get_bw: needs an even number of ranks >= 2 (or "
                        "--pairs one with >= 2)\n");
      usage(st == 1 ? stdout : stderr);
    }
    MPI_Finalize();
    return st == 1 ? 0 : 2;
  }
  const int half = size / 2;
  const int reader = o.all ? rank < half : rank == 0;
  const int readers = o.all ? half : 1;
  const int target = rank + half;

  char *base = NULL;
  MPI_Win win;
  if (o.create) {
    base = malloc((size_t)o.max);
    if (base == NULL) {
      fprintf(stderr, "get_bw: rank %d: cannot allocate %lld bytes\n", rank,
              o.max);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Win_create(base, (MPI_Aint)o.max, 1, MPI_INFO_NULL, MPI_COMM_WORLD,
                   &win);
  } else {
    MPI_Win_allocate((MPI_Aint)o.max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base,
                     &win);
  }
  memset(base, rank & 0xff, (size_t)o.max);
  char *buf = reader ? malloc((size_t)o.max) : NULL;
  if (reader && buf == NULL) {
    fprintf(stderr, "get_bw: rank %d: cannot allocate %lld bytes\n", rank,
            o.max);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (reader)
    memset(buf, 0, (size_t)o.max);

  char host[2][MPI_MAX_PROCESSOR_NAME] = {"", ""};
  int len;
  MPI_Get_processor_name(host[0], &len);
  if (rank == half)
    MPI_Send(host[0], MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
  if (rank == 0)
    MPI_Recv(host[1], MPI_MAX_PROCESSOR_NAME, MPI_CHAR, half, 0, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  MPI_Get_library_version(lib, &len);
  lib[strcspn(lib, "\n,")] = '\0';
  if (rank == 0) {
    printf("get_bw: %d ranks, %d reader(s), rank i reads from rank i+%d; "
           "window by MPI_Win_%s; first pair %s -> %s%s; %s\n",
           size, readers, half, o.create ? "create" : "allocate", host[0],
           host[1],
           strcmp(host[0], host[1]) == 0 ? " (same host: shared memory, not "
                                           "a network)"
                                         : "",
           lib);
    printf("%10s %8s %9s %14s %12s %14s %10s\n", "bytes", "inflight", "gets",
           "GB/s/reader", "slowest", "GB/s all", "us/get");
  }

  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  /* Untimed: one pass over the whole window, so that page mappings (a
   * shared-memory window is mapped into the reader) are in place. */
  if (reader) {
    MPI_Get(buf, (int)o.max, MPI_BYTE, target, 0, (int)o.max, MPI_BYTE, win);
    MPI_Win_flush(target, win);
  }
  double at1k = 0, at64k = 0, big = 0, big_all = 0, row1k_us = 0;
  for (long long m = o.min; m <= o.max; m *= 2) {
    const long long k0 = o.max / m;
    const int k = k0 < o.window ? (int)k0 : o.window;
    long long rounds = o.bytes / (m * k);
    if (rounds < 5)
      rounds = 5;
    double dt = 1e300;
    for (int r = 0; r < o.reps; r++) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t =
          reader ? time_gets(win, buf, target, m, k, rounds, o.max) : 1;
      dt = t < dt ? t : dt;
    }
    const double gets = (double)rounds * k;
    const figure f = gather(dt, reader, (double)m * gets, gets, readers);
    if (rank == 0) {
      printf("%10lld %8d %9.0f %14.3f %12.3f %14.3f %10.3f\n", m, k, gets,
             f.mean, f.min, f.sum, f.us_per_get);
      if (m == 1024)
        at1k = f.mean;
      if (m == 65536)
        at64k = f.mean;
      if (m >= (1 << 20) && f.mean > big) {
        big = f.mean;
        big_all = f.sum;
      }
    }
  }
  if (rank == 0)
    printf("\nrow gets (one MPI_Get of a vector datatype, %d rows at a "
           "4 KiB stride, then a flush):\n%10s %8s %9s %14s %12s %14s "
           "%10s\n",
           o.rows, "row bytes", "rows", "gets", "GB/s/reader", "slowest",
           "GB/s all", "us/row");
  for (int row = 256; row <= 1024; row *= 2) {
    long long rounds = o.bytes / ((long long)row * o.rows);
    if (rounds < 5)
      rounds = 5;
    double dt = 1e300;
    for (int r = 0; r < o.reps; r++) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t =
          reader ? time_rows(win, buf, target, row, o.rows, rounds, o.max) : 1;
      dt = t < dt ? t : dt;
    }
    const double rows = (double)rounds * o.rows;
    const figure f = gather(dt, reader, (double)row * rows, rows, readers);
    if (rank == 0)
      printf("%10d %8d %9lld %14.3f %12.3f %14.3f %10.3f\n", row, o.rows,
             rounds, f.mean, f.min, f.sum, f.us_per_get);
    if (row == 1024)
      row1k_us = f.us_per_get;
  }
  MPI_Win_unlock_all(win);

  if (rank == 0 && big > 0)
    printf("\nlarge messages (>= 1 MiB, best size): %.3f GB/s per reader, "
           "%.3f GB/s all %d reader(s)\n",
           big, big_all, readers);
  if (rank == 0 && at1k > 0 && at64k > 0) {
    /* m / bw = alpha + m / peak through (1 KiB, at1k) and (64 KiB, at64k) */
    const double t1 = 1024 / (at1k * 1e9), t2 = 65536 / (at64k * 1e9);
    const double inv_peak = (t2 - t1) / (65536 - 1024);
    const double alpha = t1 - 1024 * inv_peak;
    const int ok = alpha > 0 && inv_peak > 0;
    printf("fit bw(m) = m / (alpha + m/peak) per reader: alpha %.3f us, "
           "peak %.2f GB/s%s\n",
           alpha * 1e6, inv_peak > 0 ? 1e-9 / inv_peak : 0.0,
           ok ? "" : " (not a usable fit)");
    if (ok)
      printf("scale_model: --curve 1024:%.3f,65536:%.3f\n", at1k, at64k);
  }
  if (rank == 0 && row1k_us > 0 && big > 0) {
    /* per-row overhead net of the row's bytes at the large-message rate */
    const double a = row1k_us - 1024 / (big * 1e9) * 1e6;
    printf("per 1 KiB row of a datatype get: %.3f us, %.3f us net of its "
           "bytes\n",
           row1k_us, a);
    if (a > 0)
      printf("scale_model: --op-us %.3f\n", a);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_free(&win);
  if (o.create)
    free(base);
  free(buf);
  MPI_Finalize();
  return 0;
}
