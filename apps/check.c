/* slabfeed-check: run the loader on P ranks for K steps and verify every
 * sample against an independent serial read of the file and the reference
 * transform; report traffic by source and peak memory per rank. With a
 * dataset of several volumes, each sample is read from the file of its
 * volume (slabfeed_batch.volume) at its origin in that volume. Every
 * loader option is checked: training pads and tiled passes (each crop at
 * its documented place), a target on a finer or coarser grid
 * (scale_factor, coarsen_factor), the
 * normalisation, and the amplitude augmentation with the factors each
 * batch reports (whether those follow the documented stream is mpi.aug's
 * test; here, that every voxel is the file's value under them). */
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

/* What one rank checks and counts. */
typedef struct check_run {
  const slabfeed_config *cfg;
  slabfeed_loader *l;
  int nvol;              /* volumes of the dataset */
  slabfeed_reader **ref; /* [nvol]: each volume's reader, opened at its first
                            sample (volume 0 before the steps) */
  int nd;
  const char *names[2];
  size_t es;
  void *got[2], *want[2]; /* a batch from the loader, one reference sample */
  int64_t in_edge[3];     /* the input crop's edge of this step */
  uint64_t checked, mismatched, first_bad;
  double first_batch_age; /* seconds since the process started when the
                             first slabfeed_next returned; -1 before */
  double bytes_out, t_loader;
} check_run;

/* The reference reader of volume v, opened at its first use; NULL after
 * noting the failure in st and msg. */
static slabfeed_reader *reader_of(check_run *c, int v, slabfeed_status *st,
                                  char *msg, size_t len)
{
  if (v < 0 || v >= c->nvol) {
    cli_note(st, msg, len, SLABFEED_ERR_ARG,
             "the loader gave volume %d of a dataset of %d", v, c->nvol);
    return NULL;
  }
  if (c->ref[v] != NULL)
    return c->ref[v];
  char path[4200], err[CLI_ERRLEN];
  slabfeed_status s = slabfeed_volume_info(c->l, v, path, sizeof path, NULL);
  if (s == SLABFEED_OK)
    s = slabfeed_reader_open(path, &c->ref[v], err, sizeof err);
  else
    snprintf(err, sizeof err, "no volume %d", v);
  if (s != SLABFEED_OK) {
    cli_note(st, msg, len, s, "reference reader of volume %d: %s", v, err);
    return NULL;
  }
  return c->ref[v];
}

/* The origin of dataset d's crop of a sample whose input crop is at o
 * (input voxels) in a volume whose input box is `box`: the input's is o;
 * the target's crop of edge `edge` is centred on the input's (edge
 * in_edge): on the input's grid it spans edge x g / f voxels, so it starts
 * at (o + (in_edge - edge x g / f) / 2) mod box, which times f / g is its
 * origin on the target's grid (a finer one: scale_factor f; a coarser
 * one: coarsen_factor g, whose origins make that a multiple of g)
 * (docs/CONVENTIONS.md, "The alignment rule"; training pads and tiled
 * passes alike). */
static void sample_origin(const slabfeed_config *cfg, const int64_t o[3], int d,
                          const int64_t in_edge[3], const int64_t edge[3],
                          const int64_t box[3], int64_t out[3])
{
  const int64_t f = d == 1 && cfg->scale_factor > 1 ? cfg->scale_factor : 1;
  const int64_t g = d == 1 && cfg->coarsen_factor > 1 ? cfg->coarsen_factor : 1;
  for (int a = 0; a < 3; a++) {
    const int64_t off = d == 0 ? 0 : (in_edge[a] - edge[a] * g / f) / 2;
    out[a] = f * (((o[a] + off) % box[a] + box[a]) % box[a]) / g;
  }
}

/* One step on this rank: the batch, copied to host, and every sample
 * compared with the serial reference. A failure goes to st and msg and
 * ends the step at once: the caller's agreement point follows, and a step
 * makes no collective call. */
static void check_step(check_run *c, slabfeed_status *st, char *msg, size_t len)
{
  const slabfeed_config *cfg = c->cfg;
  slabfeed_batch b = SLABFEED_BATCH_INIT;
  const double ta = MPI_Wtime();
  slabfeed_status s = slabfeed_next(c->l, &b, NULL);
  if (s != SLABFEED_OK) {
    cli_note(st, msg, len, s, "%s", slabfeed_last_error(c->l));
    return;
  }
  if (c->first_batch_age < 0)
    c->first_batch_age = cli_process_age();
  for (int d = 0; d < c->nd; d++) {
    const slabfeed_tensor *t = d == 0 ? &b.input : &b.target;
    const size_t sample = (size_t)t->strides[0] * c->es;
    if (c->got[d] == NULL) {
      c->got[d] = malloc(sample * (size_t)cfg->batch);
      c->want[d] = malloc(sample);
      if (c->got[d] == NULL || c->want[d] == NULL) {
        cli_note(st, msg, len, SLABFEED_ERR_NOMEM,
                 "cannot allocate the check buffers of '%s' (%zu bytes)",
                 c->names[d], sample * (size_t)(cfg->batch + 1));
        return;
      }
    }
    if ((s = slabfeed_copy_to_host(c->l, t, c->got[d])) != SLABFEED_OK) {
      cli_note(st, msg, len, s, "%s", slabfeed_last_error(c->l));
      return;
    }
    if (d == c->nd - 1)
      c->t_loader += MPI_Wtime() - ta;
    c->bytes_out += (double)(sample * (size_t)cfg->batch);
    /* The crop's edge as delivered (pads, the target's finer grid). */
    const int sp = cfg->out_layout == SLABFEED_OUT_NDHWC ? 1 : 2;
    const int64_t edge[3] = {t->shape[sp], t->shape[sp + 1], t->shape[sp + 2]};
    for (int i = 0; i < cfg->batch; i++) {
      const int v = b.volume != NULL ? b.volume[i] : 0;
      slabfeed_reader *ref = reader_of(c, v, st, msg, len);
      int64_t box[3];
      if (ref == NULL ||
          slabfeed_volume_info(c->l, v, NULL, 0, box) != SLABFEED_OK) {
        cli_note(st, msg, len, SLABFEED_ERR_ARG, "no volume %d", v);
        return;
      }
      int64_t o[3];
      sample_origin(cfg, &b.origin[3 * i], d, c->in_edge, edge, box, o);
      if (d == 0)
        memcpy(c->in_edge, edge, sizeof c->in_edge);
      const float *aug = d == 0 ? b.input_aug : b.target_aug;
      const int C = (int)t->shape[sp == 1 ? 4 : 1];
      s = slabfeed_reader_crop_values(
          ref, c->names[d], cfg->layout, o, edge, b.symmetry[i],
          d == 0 ? cfg->n_input_vectors : cfg->n_target_vectors,
          (const int(*)[3])(d == 0 ? cfg->input_vectors : cfg->target_vectors),
          d == 0 ? cfg->n_input_norm : cfg->n_target_norm,
          d == 0 ? cfg->input_norm : cfg->target_norm,
          aug != NULL ? aug + (size_t)i * 2 * (size_t)C : NULL, cfg->dtype,
          cfg->out_layout, c->want[d]);
      if (s != SLABFEED_OK) {
        cli_note(st, msg, len, s,
                 "reference read of sample %lld (volume %d): %s",
                 (long long)b.sample[i], v, slabfeed_reader_error(ref));
        return;
      }
      c->checked++;
      if (memcmp(c->want[d], (char *)c->got[d] + (size_t)i * sample, sample) !=
          0) {
        c->mismatched++;
        if (c->first_bad == UINT64_MAX)
          c->first_bad = (uint64_t)b.sample[i];
      }
    }
  }
}

/* Frees the buffers and closes the reference reader and the loader
 * (collective: call it on every rank). */
static void check_release(check_run *c)
{
  for (int d = 0; d < 2; d++) {
    free(c->got[d]);
    free(c->want[d]);
    c->got[d] = c->want[d] = NULL;
  }
  for (int v = 0; c->ref != NULL && v < c->nvol; v++)
    slabfeed_reader_close(c->ref[v]);
  free(c->ref);
  c->ref = NULL;
  slabfeed_close(c->l);
  c->l = NULL;
}

/* Leaves after an agreed failure: every rank releases everything, rank 0
 * prints the message once, all exit 1. */
__attribute__((noreturn)) static void
leave_failed(check_run *c, slabfeed_status st, const char *msg)
{
  check_release(c);
  cli_fail_agreed(prog, st, msg);
}

/* Parses the options (before MPI: the thread level depends on --device),
 * runs the loader for K steps, compares every sample with the serial
 * reference and prints traffic and memory per rank. Every rank meets the
 * others at one agreement point per step, so that a failure on one rank
 * (the loader, a reference read, an allocation) ends the run on all. */
int main(int argc, char **argv)
{
  slabfeed_config cfg;
  slabfeed_config_init(&cfg);
  check_args a = {.steps = 4};
  const cli_app app = {
      prog,
      "Runs the loader for K steps and verifies every sample against an "
      "independent serial read of the file (of the sample's volume, for a "
      "dataset of several); prints the bytes taken from the "
      "own slab, the node window and other nodes, and the memory of every "
      "rank.",
      {{"loader options", cli_loader_options(), &cfg},
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

  char err[CLI_ERRLEN], msg[CLI_ERRLEN] = "";
  check_run c = {.cfg = &cfg,
                 .nd = cfg.target ? 2 : 1,
                 .names = {cfg.input, cfg.target},
                 .es = slabfeed_dtype_size(cfg.dtype),
                 .first_bad = UINT64_MAX,
                 .first_batch_age = -1};
  slabfeed_status st =
      slabfeed_open(MPI_COMM_WORLD, &cfg, &c.l, err, sizeof err);
  if (st != SLABFEED_OK) /* agreed by slabfeed_open */
    cli_fail_agreed(prog, st, err);
  const double open_age = cli_process_age();
  /* The reference takes the options as the loader resolved them (vector
   * groups and normalisations given by field, by channel). */
  slabfeed_config run;
  slabfeed_config_init(&run);
  if (slabfeed_loader_config(c.l, &run) == SLABFEED_OK)
    c.cfg = &run;
  char line[1024];
  if (slabfeed_placement(c.l, line, sizeof line) == SLABFEED_OK && rank == 0)
    printf("%s\n", line);
  /* One reader per volume, volume 0's now: a file the reader cannot open
   * fails here rather than in the first step. */
  c.nvol = slabfeed_volume_count(c.l);
  if (c.nvol < 1 || (c.ref = calloc((size_t)c.nvol, sizeof *c.ref)) == NULL)
    cli_note(&st, msg, sizeof msg, SLABFEED_ERR_NOMEM,
             "cannot allocate the readers of %d volumes", c.nvol);
  else
    reader_of(&c, 0, &st, msg, sizeof msg);
  char first[4200] = "";
  int64_t vshape[3];
  double voxels = 0; /* of every volume */
  for (int v = 0; v < c.nvol; v++)
    if (slabfeed_volume_info(c.l, v, v == 0 ? first : NULL, sizeof first,
                             vshape) == SLABFEED_OK)
      voxels += (double)vshape[0] * (double)vshape[1] * (double)vshape[2];
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    leave_failed(&c, st, msg);

  const int nd = c.nd;
  const char *const *names = c.names;
  const double t0 = MPI_Wtime();
  for (int64_t i = 0; i < steps; i++) {
    check_step(&c, &st, msg, sizeof msg);
    if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
      leave_failed(&c, st, msg);
  }
  const uint64_t checked = c.checked, mismatched = c.mismatched;
  const double bytes_out = c.bytes_out, t_loader = c.t_loader;
  const double dt = MPI_Wtime() - t0;
  slabfeed_stats stats = SLABFEED_STATS_INIT;
  slabfeed_stats_get(c.l, &stats);

  /* Whole-dataset size (every volume) for the memory comparison: the
   * volumes share their channels. */
  double volume = 0;
  for (int d = 0; d < nd; d++) {
    slabfeed_dataset_info in = SLABFEED_DATASET_INFO_INIT;
    if (slabfeed_describe(first, names[d], cfg.layout, &in, err, sizeof err) ==
        SLABFEED_OK)
      volume +=
          (double)in.channels * voxels * 4.0 *
          (d == 1 && cfg.scale_factor > 1
               ? cfg.scale_factor * cfg.scale_factor * cfg.scale_factor
               : 1) /
          (d == 1 && cfg.coarsen_factor > 1
               ? cfg.coarsen_factor * cfg.coarsen_factor * cfg.coarsen_factor
               : 1);
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
  if (rank == 0 && rows == NULL)
    cli_note(&st, msg, sizeof msg, SLABFEED_ERR_NOMEM,
             "cannot allocate the table of %d ranks", size);
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    leave_failed(&c, st, msg);
  MPI_Gather(row, NCOL, MPI_DOUBLE, rows, NCOL, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  uint64_t bad_all = 0;
  MPI_Reduce(&mismatched, &bad_all, 1, MPI_UINT64_T, MPI_SUM, 0,
             MPI_COMM_WORLD);
  /* The start-up, the slowest rank's (-1 where /proc is not there). */
  const double ages[2] = {open_age, c.first_batch_age};
  double ages_max[2] = {-1, -1};
  MPI_Reduce(ages, ages_max, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    char what[4300];
    if (c.nvol > 1)
      snprintf(what, sizeof what, "%d volumes (first %s)", c.nvol, first);
    else
      snprintf(what, sizeof what, "%s", first);
    printf("%s: %s, %d ranks, crop %lldx%lldx%lld, batch %d, %lld steps, %s, "
           "device %d\n",
           prog, what, size, (long long)cfg.crop[0], (long long)cfg.crop[1],
           (long long)cfg.crop[2], cfg.batch, (long long)steps,
           cli_dtype_name(cfg.dtype), cfg.device);
    printf("%4s %8s %8s %12s %12s %12s %9s %10s %10s %7s %9s\n", "rank",
           "samples", "mismatch", "own B", "node B", "remote B", "slab MB",
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
    printf("whole %s %.1f MB (float32); largest slab store %.1f MB = %.3f "
           "x volume/P; largest private RSS %.1f MB (peak RSS also counts "
           "the node window's shared pages and the reference reader%s)\n",
           c.nvol > 1 ? "dataset" : "volume", volume / 1e6, slab_max / 1e6,
           slab_max / (volume / size), anon_max / 1e6, c.nvol > 1 ? "s" : "");
    printf("%s: read %.1f MB of slabs in %.3f s (%.2f GB/s, parallel HDF5); "
           "loader delivered %.1f MB/s on %d ranks\n",
           prog, slab_sum / 1e6, read_max, slab_sum / read_max / 1e9,
           out_sum / 1e6, size);
    if (ages_max[0] >= 0 && ages_max[1] >= 0)
      printf("%s: start-up: first batch %.2f s after the process started "
             "(MPI up and the loader open at %.2f s; slowest rank)\n",
             prog, ages_max[1], ages_max[0]);
    else
      printf("%s: start-up: n/a (no /proc/self/stat)\n", prog);
    printf("%s: %s: %llu samples checked, %llu mismatches in %.2f s\n", prog,
           bad_all ? "FAILED" : "OK",
           (unsigned long long)(checked / (uint64_t)nd * (uint64_t)size),
           (unsigned long long)bad_all, dt);
    free(rows);
  }
  if (mismatched)
    fprintf(stderr, "%s: rank %d: first mismatching global sample %llu\n", prog,
            rank, (unsigned long long)c.first_bad);
  check_release(&c);
  MPI_Finalize();
  return bad_all ? 1 : 0;
}
