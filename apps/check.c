/* slabfeed-check: run the loader on P ranks for K steps and verify every
 * sample against an independent serial read of the file and the reference
 * transform; report traffic by source and peak memory per rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "slabfeed_tools.h"

static const char *prog = "slabfeed-check";

/* What the check's own options fill. */
typedef struct check_args {
  int64_t steps;
} check_args;

static const cli_option options[] = {{.name = "--steps",
                                      .kind = CLI_INT64,
                                      .at = offsetof(check_args, steps),
                                      .min = 1,
                                      .max = INT64_MAX,
                                      .metavar = "K",
                                      .help = "steps to run and check"},
                                     {.name = NULL}};

/* Parses the options (before MPI: the thread level depends on --device),
 * runs the loader for K steps, compares every sample with the serial
 * reference and prints traffic and memory per rank. */
int main(int argc, char **argv)
{
  slabfeed_config cfg;
  slabfeed_config_init(&cfg);
  check_args a = {.steps = 4};
  const cli_app app = {
      prog,
      "Runs the loader for K steps and verifies every sample against an "
      "independent serial read of the file; prints the bytes taken from the "
      "own slab, the node window and MPI_Get, and the memory of every rank.",
      {{"loader options", cli_loader_options, &cfg},
       {"check options", options, &a}}};
  cli_result parsed;
  cli_scan(&app, argc, argv, &parsed);
  /* Device batches: MPI_THREAD_MULTIPLE lets the loader thread make the
   * MPI calls; host batches need no more than the caller's thread. */
  int provided;
  MPI_Init_thread(&argc, &argv,
                  cfg.device >= 0 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED,
                  &provided);
  cli_settle(&app, &parsed);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int64_t steps = a.steps;

  char err[1024];
  slabfeed_loader *l = NULL;
  slabfeed_status st = slabfeed_open(MPI_COMM_WORLD, &cfg, &l, err, sizeof err);
  if (st != SLABFEED_OK)
    cli_fail(prog, st, err);
  slabfeed_reader *ref = NULL;
  if ((st = slabfeed_reader_open(cfg.path, &ref, err, sizeof err)) !=
      SLABFEED_OK)
    cli_fail(prog, st, err);

  const int nd = cfg.target ? 2 : 1;
  const char *names[2] = {cfg.input, cfg.target};
  const size_t es = slabfeed_dtype_size(cfg.dtype);
  void *got[2] = {NULL, NULL}, *want[2] = {NULL, NULL};
  uint64_t checked = 0, mismatched = 0, first_bad = UINT64_MAX;
  double bytes_out = 0;
  const double t0 = MPI_Wtime();
  double t_loader = 0;
  for (int64_t s = 0; s < steps; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    const double ta = MPI_Wtime();
    if ((st = slabfeed_next(l, &b, NULL)) != SLABFEED_OK)
      cli_fail(prog, st, slabfeed_last_error(l));
    for (int d = 0; d < nd; d++) {
      const slabfeed_tensor *t = d == 0 ? &b.input : &b.target;
      const size_t sample = (size_t)t->strides[0] * es;
      if (got[d] == NULL) {
        got[d] = malloc(sample * (size_t)cfg.batch);
        want[d] = malloc(sample);
        if (got[d] == NULL || want[d] == NULL)
          cli_fail(prog, SLABFEED_ERR_NOMEM,
                   "cannot allocate the check buffers");
      }
      if ((st = slabfeed_copy_to_host(l, t, got[d])) != SLABFEED_OK)
        cli_fail(prog, st, slabfeed_last_error(l));
      if (d == nd - 1)
        t_loader += MPI_Wtime() - ta;
      bytes_out += (double)(sample * (size_t)cfg.batch);
      for (int i = 0; i < cfg.batch; i++) {
        st = slabfeed_reader_crop(
            ref, names[d], cfg.layout, &b.origin[3 * i], cfg.crop,
            b.symmetry[i], d == 0 ? cfg.n_input_vectors : cfg.n_target_vectors,
            (const int(*)[3])(d == 0 ? cfg.input_vectors : cfg.target_vectors),
            cfg.dtype, cfg.out_layout, want[d]);
        if (st != SLABFEED_OK)
          cli_fail(prog, st, slabfeed_reader_error(ref));
        checked++;
        if (memcmp(want[d], (char *)got[d] + (size_t)i * sample, sample) != 0) {
          mismatched++;
          if (first_bad == UINT64_MAX)
            first_bad = (uint64_t)b.sample[i];
        }
      }
    }
  }
  const double dt = MPI_Wtime() - t0;
  slabfeed_stats stats = SLABFEED_STATS_INIT;
  slabfeed_stats_get(l, &stats);

  /* Whole-volume size for the memory comparison. */
  double volume = 0;
  for (int d = 0; d < nd; d++) {
    slabfeed_dataset_info in = SLABFEED_DATASET_INFO_INIT;
    if (slabfeed_describe(cfg.path, names[d], cfg.layout, &in, err,
                          sizeof err) == SLABFEED_OK)
      volume += (double)in.channels * (double)in.shape[0] *
                (double)in.shape[1] * (double)in.shape[2] * 4.0;
  }
  const uint64_t rss = cli_peak_rss();
  uint64_t anon, shmem;
  cli_rss_parts(&anon, &shmem);
  enum { NCOL = 10 };
  double row[NCOL] = {(double)checked / nd,       (double)mismatched,
                      (double)stats.bytes_own,    (double)stats.bytes_node,
                      (double)stats.bytes_remote, (double)rss,
                      (double)stats.slab_bytes,   stats.t_read,
                      bytes_out / t_loader,       (double)anon};
  double *rows = rank == 0 ? malloc(sizeof row * (size_t)size) : NULL;
  MPI_Gather(row, NCOL, MPI_DOUBLE, rows, NCOL, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  uint64_t bad_all = 0;
  MPI_Reduce(&mismatched, &bad_all, 1, MPI_UINT64_T, MPI_SUM, 0,
             MPI_COMM_WORLD);
  if (rank == 0) {
    printf("%s: %s, %d ranks, crop %lldx%lldx%lld, batch %d, %lld steps, %s, "
           "device %d\n",
           prog, cfg.path, size, (long long)cfg.crop[0], (long long)cfg.crop[1],
           (long long)cfg.crop[2], cfg.batch, (long long)steps,
           cli_dtype_name(cfg.dtype), cfg.device);
    printf("%4s %8s %8s %12s %12s %12s %9s %10s %10s %7s %9s\n", "rank",
           "samples", "mismatch", "own B", "node B", "MPI_Get B", "slab MB",
           "private MB", "peakRSS MB", "read s", "MB/s out");
    double slab_max = 0, anon_max = 0, slab_sum = 0, read_max = 0, out_sum = 0;
    for (int r = 0; r < size; r++) {
      const double *x = &rows[NCOL * r];
      printf("%4d %8.0f %8.0f %12.0f %12.0f %12.0f %9.1f %10.1f %10.1f %7.3f "
             "%9.1f\n",
             r, x[0], x[1], x[2], x[3], x[4], x[6] / 1e6, x[9] / 1e6,
             x[5] / 1e6, x[7], x[8] / 1e6);
      slab_max = x[6] > slab_max ? x[6] : slab_max;
      anon_max = x[9] > anon_max ? x[9] : anon_max;
      read_max = x[7] > read_max ? x[7] : read_max;
      slab_sum += x[6];
      out_sum += x[8];
    }
    printf("whole volume %.1f MB (float32); largest slab store %.1f MB = %.3f "
           "x volume/P; largest private RSS %.1f MB (peak RSS also counts "
           "the node window's shared pages and the reference reader)\n",
           volume / 1e6, slab_max / 1e6, slab_max / (volume / size),
           anon_max / 1e6);
    printf("%s: read %.1f MB of slabs in %.3f s (%.2f GB/s, parallel HDF5); "
           "loader delivered %.1f MB/s on %d ranks\n",
           prog, slab_sum / 1e6, read_max, slab_sum / read_max / 1e9,
           out_sum / 1e6, size);
    printf("%s: %s: %llu samples checked, %llu mismatches in %.2f s\n", prog,
           bad_all ? "FAILED" : "OK",
           (unsigned long long)(checked / (uint64_t)nd * (uint64_t)size),
           (unsigned long long)bad_all, dt);
    free(rows);
  }
  if (mismatched)
    fprintf(stderr, "%s: rank %d: first mismatching global sample %llu\n", prog,
            rank, (unsigned long long)first_bad);
  free(got[0]);
  free(got[1]);
  free(want[0]);
  free(want[1]);
  slabfeed_reader_close(ref);
  slabfeed_close(l);
  MPI_Finalize();
  return bad_all ? 1 : 0;
}
