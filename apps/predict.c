/* slabfeed-predict: a tiled pass through the writer from the command line.
 * The "model" is the identity of the dataset the outputs are like (each
 * tile's output is its input crop, or with --centre its T^3 centre; with
 * --like target and a target, the batch's target: the tile, on the
 * target's grid for a super-resolution pair), so the output file must
 * hold that dataset's region bit for bit: --verify compares it (every rank
 * its own z-range of the output, read back with the serial reference
 * reader). Prints the
 * pass and writer rates next to the read rate of the same run's open
 * (the ceiling a writer of the same bytes is measured against) and the
 * ratio. Device batches go through the writer as device tensors.
 *
 * A pass runs over one volume: a path spec of several (--file repeated, a
 * pattern or a manifest naming more than one file) is refused by the
 * library at open (exit 1, its message); one that names a single file
 * works, and what predict reads itself (--verify) is that file
 * (slabfeed_volume_info), not the spec.
 *
 * Puts are one-sided, so a rank whose put fails (or is refused) stops
 * putting but reaches the writer's close like every rank; after it the
 * failure is agreed, and the put's message is reported in preference to
 * the close's (which would only count the voxels left out). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "read_ceiling.h"
#include "slabfeed_tools.h"
#include "write_ceiling.h"

static const char *prog = "slabfeed-predict";

typedef struct predict_args {
  slabfeed_writer_config w;
  int centre, verify, write_ceiling, no_read_ceiling, late_context;
} predict_args;

static const cli_choice layouts[] = {
    {"cf", SLABFEED_LAYOUT_CF}, {"cl", SLABFEED_LAYOUT_CL}, {NULL, 0}};
static const cli_choice dtypes[] = {
    {"f32", SLABFEED_DTYPE_F32}, {"f16", SLABFEED_DTYPE_F16}, {NULL, 0}};
static const cli_choice likes[] = {{"target", SLABFEED_LIKE_TARGET},
                                   {"input", SLABFEED_LIKE_INPUT},
                                   {"none", SLABFEED_LIKE_NONE},
                                   {NULL, 0}};

static const cli_option options[] = {
    {.name = "--out",
     .kind = CLI_STRING,
     .at = offsetof(predict_args, w.path),
     .metavar = "F",
     .help = "the HDF5 file to write (never the input)",
     .flags = CLI_REQUIRED},
    {.name = "--out-dataset",
     .kind = CLI_STRING,
     .at = offsetof(predict_args, w.dataset),
     .metavar = "NAME",
     .help = "dataset name in the output"},
    {.name = "--out-layout",
     .kind = CLI_ENUM,
     .at = offsetof(predict_args, w.layout),
     .choices = layouts,
     .metavar = "cf|cl",
     .help = "layout of the output dataset"},
    {.name = "--out-dtype",
     .kind = CLI_ENUM,
     .at = offsetof(predict_args, w.dtype),
     .choices = dtypes,
     .metavar = "f32|f16",
     .help = "element type of the output dataset"},
    {.name = "--chunk",
     .kind = CLI_TRIPLE,
     .at = offsetof(predict_args, w.chunk),
     .metavar = "Z,Y,X",
     .help = "chunk edge of the output (0: contiguous)"},
    {.name = "--overwrite",
     .kind = CLI_FLAG,
     .at = offsetof(predict_args, w.overwrite),
     .help = "replace an existing output file"},
    {.name = "--like",
     .kind = CLI_ENUM,
     .at = offsetof(predict_args, w.like),
     .choices = likes,
     .metavar = "target|input|none",
     .help = "dataset whose vector groups and normalisation the outputs "
             "carry, and which the identity model returns (target: the "
             "batch's target)"},
    {.name = "--centre",
     .kind = CLI_FLAG,
     .at = offsetof(predict_args, centre),
     .help = "put each tile's T^3 centre instead of the whole input crop "
             "(host batches)"},
    {.name = "--verify",
     .kind = CLI_FLAG,
     .at = offsetof(predict_args, verify),
     .help = "compare the output with the input's region, bit for bit "
             "(f32 output, f32 batches)"},
    {.name = "--write-ceiling",
     .kind = CLI_FLAG,
     .at = offsetof(predict_args, write_ceiling),
     .help = "after the pass, time a plain pwrite + fsync of the output's "
             "bytes by the same ranks into a file beside it (removed "
             "afterwards) and print close against it"},
    {.name = "--late-context",
     .kind = CLI_FLAG,
     .at = offsetof(predict_args, late_context),
     .help = "make the GPU's CUDA context inside the open, not from the "
             "process's start beside MPI_Init (slabfeed_warm_device), e.g. "
             "to time what the early one saves"},
    {.name = "--no-read-ceiling",
     .kind = CLI_FLAG,
     .at = offsetof(predict_args, no_read_ceiling),
     .help = "skip the open's read ceiling (a pread of the input's bytes "
             "after the pass), e.g. to time the whole run"},
    {.name = NULL}};

/* The centre T^3 of every slot of a host batch tensor (NCDHW or NDHWC) as
 * an NCDHW tensor in buf. */
static void centre_of(const slabfeed_tensor *t, slabfeed_out_layout lay,
                      int64_t T, int64_t P, char *buf, slabfeed_tensor *out)
{
  const size_t es = slabfeed_dtype_size(t->dtype);
  const int nc = lay == SLABFEED_OUT_NCDHW;
  const int64_t B = t->shape[0], C = t->shape[nc ? 1 : 4];
  const char *src = t->data;
  size_t o = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t z = P; z < P + T; z++)
        for (int64_t y = P; y < P + T; y++)
          for (int64_t x = P; x < P + T; x++, o++) {
            const int64_t at = b * t->strides[0] + c * t->strides[nc ? 1 : 4] +
                               z * t->strides[nc ? 2 : 1] +
                               y * t->strides[nc ? 3 : 2] +
                               x * t->strides[nc ? 4 : 3];
            memcpy(buf + o * es, src + (size_t)at * es, es);
          }
  *out = *t;
  out->data = buf;
  const int64_t shape[5] = {B, C, T, T, T};
  const int64_t strides[5] = {C * T * T * T, T * T * T, T * T, T, 1};
  memcpy(out->shape, shape, sizeof shape);
  memcpy(out->strides, strides, sizeof strides);
}

/* Compares this rank's output planes [z0, z1) with the region of
 * `dataset` (the input or the target, of the file `input`; R its region
 * on that dataset's grid). */
static uint64_t verify(const slabfeed_config *cfg, const char *input,
                       const char *dataset, const slabfeed_writer_config *wc,
                       const int64_t R[6], int64_t C, int64_t z0, int64_t z1,
                       slabfeed_status *st, char *msg, size_t len)
{
  if (z1 <= z0)
    return 0;
  slabfeed_reader *in = NULL, *out = NULL;
  char err[CLI_ERRLEN];
  const size_t n = (size_t)(C * (z1 - z0) * R[4] * R[5]);
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  uint64_t bad = 0;
  slabfeed_status s = a == NULL || b == NULL ? SLABFEED_ERR_NOMEM : SLABFEED_OK;
  if (s == SLABFEED_OK)
    s = slabfeed_reader_open(input, &in, err, sizeof err);
  if (s == SLABFEED_OK)
    s = slabfeed_reader_open(wc->path, &out, err, sizeof err);
  const int64_t o_in[3] = {(R[0] + z0) % R[6], R[1], R[2]};
  const int64_t o_out[3] = {z0, 0, 0}, ext[3] = {z1 - z0, R[4], R[5]};
  if (s == SLABFEED_OK)
    s = slabfeed_reader_crop(in, dataset, cfg->layout, o_in, ext, 0, 0, NULL,
                             SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW, a);
  if (s == SLABFEED_OK)
    s = slabfeed_reader_crop(out, wc->dataset, SLABFEED_LAYOUT_AUTO, o_out, ext,
                             0, 0, NULL, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW,
                             b);
  if (s != SLABFEED_OK)
    cli_note(st, msg, len, s, "verify: %s",
             in != NULL ? slabfeed_reader_error(out != NULL ? out : in) : err);
  for (size_t i = 0; s == SLABFEED_OK && i < n; i++)
    bad += memcmp(&a[i], &b[i], sizeof *a) != 0;
  slabfeed_reader_close(in);
  slabfeed_reader_close(out);
  free(a);
  free(b);
  return bad;
}

/* The Unix time at which `path` took its name: its inode's change time,
 * which the rename set, where that lies within the minute before
 * `closed` (the close's return); else `closed`. On a network filesystem
 * the change time is the server's clock: a skew under a minute passes
 * this filter and moves the figure by as much. */
static double renamed_at(const char *path, double closed)
{
  struct stat st;
  if (closed <= 0 || stat(path, &st) != 0)
    return closed;
  const double c =
      (double)st.st_ctim.tv_sec + 1e-9 * (double)st.st_ctim.tv_nsec;
  return c <= closed && c > closed - 60 ? c : closed;
}

int main(int argc, char **argv)
{
  slabfeed_config cfg;
  slabfeed_config_init(&cfg);
  predict_args a;
  memset(&a, 0, sizeof a);
  slabfeed_writer_config_init(&a.w);
  a.w.like = SLABFEED_LIKE_INPUT;
  const cli_app app = {
      prog,
      "Runs a tiled pass (--tile, --pad, --region, --pass-symmetry) with the "
      "identity as the model and writes the outputs with the distributed "
      "writer; prints the pass and writer rates next to the read rate of the "
      "open, and with --verify checks the file against the input.",
      {{"loader options", cli_loader_options(), &cfg},
       {"predict options", options, &a}}};
  cli_result parsed;
  cli_scan(&app, argc, argv, &parsed);
  /* The device's context made beside MPI_Init and the open's first steps. */
  if (parsed.action == CLI_RUN && cfg.device != -1 && cfg.tile > 0 &&
      !a.late_context)
    slabfeed_warm_device(cfg.device);
  int provided;
  MPI_Init_thread(&argc, &argv,
                  cfg.device != -1 ? MPI_THREAD_MULTIPLE
                                   : MPI_THREAD_SERIALIZED,
                  &provided);
  cli_settle(&app, &parsed);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* The timeline of the run: seconds since this process started at the
   * end of each step (the slowest rank's, printed at the end). */
  enum { AGE_INIT, AGE_OPEN, AGE_WOPEN, AGE_PASS, AGE_CLOSE, AGE_LCLOSE, AGES };
  double age[AGES] = {cli_process_age()};
  if (cfg.tile <= 0)
    cli_usage_fail(&app, "--tile is required: the writer needs a tiled pass");
  if (a.centre && cfg.device != -1)
    cli_usage_fail(&app, "--centre takes host batches (--device -1)");

  char err[CLI_ERRLEN], msg[CLI_ERRLEN] = "";
  slabfeed_loader *l = NULL;
  slabfeed_status st = slabfeed_open(MPI_COMM_WORLD, &cfg, &l, err, sizeof err);
  if (st != SLABFEED_OK)
    cli_fail_agreed(prog, st, err);
  age[AGE_OPEN] = cli_process_age();
  /* The one volume of the pass (the library refuses several). */
  char input[4200];
  slabfeed_volume_info(l, 0, input, sizeof input, NULL);
  slabfeed_writer *w = NULL;
  const double tw0 = MPI_Wtime();
  st = slabfeed_writer_open(l, &a.w, &w, err, sizeof err);
  const double t_wopen = MPI_Wtime() - tw0;
  age[AGE_WOPEN] = cli_process_age();
  if (st != SLABFEED_OK) {
    slabfeed_close(l);
    cli_fail_agreed(prog, st, err);
  }
  int64_t shape[4], z0, z1;
  slabfeed_writer_shape(w, shape, &z0, &z1);
  const int cl = a.w.layout == SLABFEED_LAYOUT_CL;
  const int64_t C = shape[cl ? 3 : 0];
  const int64_t T = cfg.tile, P = cfg.pad;
  char *buf = NULL;
  if (a.centre) {
    const size_t es = slabfeed_dtype_size(cfg.dtype);
    buf = malloc((size_t)(cfg.batch * C * T * T * T) * es);
    if (buf == NULL)
      cli_note(&st, msg, sizeof msg, SLABFEED_ERR_NOMEM,
               "cannot allocate the centre buffer");
  }
  /* The pass: next and put timed apart; a failed or refused put ends this
   * rank's pass and is agreed after the close. */
  const uint64_t steps = slabfeed_steps_per_epoch(l);
  /* The identity of the dataset the outputs are like. */
  const int like_target = a.w.like != SLABFEED_LIKE_INPUT && cfg.target != NULL;
  double t_next = 0, t_put = 0, shown = 0;
  uint64_t tiles = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (uint64_t s = 0; s < steps && st == SLABFEED_OK; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    double t = MPI_Wtime();
    slabfeed_status ls = slabfeed_next(l, &b, NULL);
    t_next += MPI_Wtime() - t;
    if (ls != SLABFEED_OK) {
      cli_note(&st, msg, sizeof msg, ls, "%s", slabfeed_last_error(l));
      break;
    }
    slabfeed_tensor out = like_target ? b.target : b.input;
    slabfeed_out_layout lay = cfg.out_layout;
    if (a.centre && !like_target) {
      centre_of(&b.input, cfg.out_layout, T, P, buf, &out);
      lay = SLABFEED_OUT_NCDHW;
    }
    t = MPI_Wtime();
    ls = slabfeed_writer_put(w, &b, &out, lay, b.device, NULL);
    t_put += MPI_Wtime() - t;
    if (ls != SLABFEED_OK)
      cli_note(&st, msg, sizeof msg, ls, "%s", slabfeed_writer_last_error(w));
    tiles += (uint64_t)b.valid;
    cli_progress(prog, (int)cfg.progress, rank, "pass step", (double)(s + 1),
                 (double)steps, &shown);
  }
  if (shown > 0 && tiles > 0 && st != SLABFEED_OK)
    cli_progress(prog, (int)cfg.progress, rank, "pass step", (double)steps,
                 (double)steps, &shown); /* ends the line */
  const double t_pass = MPI_Wtime() - t0;
  age[AGE_PASS] = cli_process_age();
  char io_how[1024]; /* slabfeed_writer_io's text, whole */
  snprintf(io_how, sizeof io_how, "%s", slabfeed_writer_io(w));
  const double tc0 = MPI_Wtime();
  slabfeed_status cs = slabfeed_writer_close(w, err, sizeof err);
  const double t_close = MPI_Wtime() - tc0;
  age[AGE_CLOSE] = cli_process_age();
  /* The file is in place from its rename on (rank 0's, inside the close,
   * which then releases the writer's memory): the Unix time of that
   * moment, and how long before the close returned. */
  struct timespec now;
  const double closed = clock_gettime(CLOCK_REALTIME, &now) == 0
                            ? (double)now.tv_sec + 1e-9 * (double)now.tv_nsec
                            : -1;
  const double placed =
      cs == SLABFEED_OK && rank == 0 ? renamed_at(a.w.path, closed) : -1;
  const double release = placed > 0 ? closed - placed : 0;
  slabfeed_stats stats = SLABFEED_STATS_INIT;
  slabfeed_stats_get(l, &stats);
  slabfeed_close(l);
  age[AGE_LCLOSE] = cli_process_age();
  free(buf);
  /* A put refused or failed (or a next failed) on any rank is the cause:
   * its message (the lowest such rank's first) before the close's, which
   * then only counts the voxels that rank left out. A refused put is not
   * kept by the writer, so the close alone would not name it. */
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    cli_fail_agreed(prog, st, msg);
  if (cs != SLABFEED_OK) /* agreed by the writer */
    cli_fail_agreed(prog, cs, err);

  int64_t R[7];
  for (int a2 = 0; a2 < 3; a2++)
    R[3 + a2] = shape[cl ? a2 : a2 + 1];
  uint64_t bad = 0;
  if (a.verify) {
    slabfeed_dataset_info info = SLABFEED_DATASET_INFO_INIT;
    const char *like = like_target ? cfg.target : cfg.input;
    /* The output's grid over the input's: f / g (a finer target's
     * scale_factor, a coarser one's coarsen_factor). */
    const int64_t f = like_target ? cfg.scale_factor : 1;
    const int64_t g =
        like_target && cfg.coarsen_factor > 1 ? cfg.coarsen_factor : 1;
    if (slabfeed_describe(input, like, cfg.layout, &info, err, sizeof err) !=
        SLABFEED_OK)
      cli_note(&st, msg, sizeof msg, SLABFEED_ERR_IO, "%s", err);
    for (int a2 = 0; a2 < 3; a2++)
      R[a2] = f * (cfg.n_region ? cfg.region[0][a2] : 0) / g;
    R[6] = info.shape[0];
    if (st == SLABFEED_OK)
      bad = verify(&cfg, input, like, &a.w, R, C, z0, z1, &st, msg, sizeof msg);
    if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
      cli_fail_agreed(prog, st, msg);
  }
  /* The open's read ceiling, the loader closed (collective), and on
   * request the close's write ceiling. */
  read_ceiling ceil;
  const int have_ceiling =
      !a.no_read_ceiling &&
      read_ceiling_measure(input, cfg.input, cfg.target, cfg.layout, &ceil);
  double age_max[AGES];
  MPI_Reduce(age, age_max, AGES, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  write_ceiling wceil = {0, 0};
  const double es_out = a.w.dtype == SLABFEED_DTYPE_F16 ? 2.0 : 4.0;
  const int have_wceil =
      a.write_ceiling &&
      write_ceiling_measure(
          a.w.path,
          (double)(C * (z1 - z0) * shape[cl ? 1 : 2] * shape[cl ? 2 : 3]) *
              es_out,
          &wceil);
  double mine[6] = {t_next,        t_put,
                    stats.t_read,  (double)stats.slab_bytes,
                    (double)tiles, (double)bad};
  double sum[6], max[6];
  MPI_Reduce(mine, sum, 6, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  MPI_Reduce(mine, max, 6, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  char open_times[256];
  cli_open_times(&stats, open_times, sizeof open_times);
  if (rank == 0) {
    const double out_bytes = (double)(C * R[3] * R[4] * R[5]) * 4.0;
    const double read_rate = sum[3] / max[2];
    const double write_rate = out_bytes / (max[1] + t_close);
    printf("%s: %s -> %s, %d ranks, tile %lld + 2 x %lld pad, batch %d, "
           "%.0f tiles in %llu steps, output %lldx%lldx%lld x %lld (%s, %s)\n",
           prog, input, a.w.path, size, (long long)T, (long long)P, cfg.batch,
           sum[4], (unsigned long long)steps, (long long)R[3], (long long)R[4],
           (long long)R[5], (long long)C, cl ? "CL" : "CF",
           a.w.dtype == SLABFEED_DTYPE_F16 ? "f16" : "f32");
    printf("%s: pass %.3f s (%.1f tiles/s; in next %.3f s, in put %.3f s, "
           "slowest rank); writer open %.3f s, close %.3f s\n",
           prog, t_pass, sum[4] / t_pass, max[0], max[1], t_wopen, t_close);
    printf("%s: writer %.2f GB/s (%.2f GB of f32 output over put + close) vs "
           "read at open %.2f GB/s (%.2f GB of slabs): %.2f x\n",
           prog, write_rate / 1e9, out_bytes / 1e9, read_rate / 1e9,
           sum[3] / 1e9, write_rate / read_rate);
    if (have_wceil)
      printf("%s: close: wrote %.2f GB at %.2f GB/s = %.3f x the write "
             "ceiling (the same bytes by the same %d ranks with pwrite + "
             "fsync beside it: %.2f GB/s); %s\n",
             prog, wceil.bytes / 1e9, wceil.bytes / t_close / 1e9,
             wceil.bytes / t_close / 1e9 / wceil.pwrite_gbs, size,
             wceil.pwrite_gbs, io_how);
    else
      printf("%s: close: %.3f s, %s%s\n", prog, t_close, io_how,
             a.write_ceiling ? "; write ceiling n/a (the file beside the "
                               "output could not be written)"
                             : "");
    if (have_ceiling)
      printf("%s: open: read %.2f GB of '%s' at %.2f GB/s = %.3f x the read "
             "ceiling (the same bytes by the same %d ranks with pread into "
             "fresh private memory: %.2f GB/s) = %.3f x the same on %.0f "
             "thread%s per rank (%.2f GB/s)\n",
             prog, ceil.bytes / 1e9, input, ceil.bytes / max[2] / 1e9,
             ceil.bytes / max[2] / 1e9 / ceil.pread_gbs, size, ceil.pread_gbs,
             ceil.bytes / max[2] / 1e9 / ceil.pread_threads_gbs, ceil.threads,
             ceil.threads == 1 ? "" : "s", ceil.pread_threads_gbs);
    else if (a.no_read_ceiling)
      printf("%s: open: read ceiling not measured (--no-read-ceiling)\n", prog);
    else
      printf("%s: open: read ceiling n/a (filters or fields: their bytes "
             "are not at known offsets)\n",
             prog);
    printf("%s: loader open %s\n", prog, open_times);
    /* Rank 0 renamed the file (after every rank's pass): its own age
     * then, and the release its close went on with. */
    const double renamed = age[AGE_CLOSE] - release;
    const double in_place =
        renamed > age_max[AGE_PASS] ? renamed : age_max[AGE_PASS];
    if (age_max[AGE_INIT] >= 0)
      printf("%s: timeline (seconds since the process started, slowest "
             "rank): MPI up %.2f, loader open %.2f (+%.2f), writer open %.2f "
             "(+%.2f), pass %.2f (+%.2f), output in place %.2f (+%.2f), "
             "writer closed %.2f (+%.2f), loader closed %.2f (+%.2f)\n",
             prog, age_max[AGE_INIT], age_max[AGE_OPEN],
             age_max[AGE_OPEN] - age_max[AGE_INIT], age_max[AGE_WOPEN],
             age_max[AGE_WOPEN] - age_max[AGE_OPEN], age_max[AGE_PASS],
             age_max[AGE_PASS] - age_max[AGE_WOPEN], in_place,
             in_place - age_max[AGE_PASS], age_max[AGE_CLOSE],
             age_max[AGE_CLOSE] - in_place, age_max[AGE_LCLOSE],
             age_max[AGE_LCLOSE] - age_max[AGE_CLOSE]);
    /* For a clock outside the job (bench/predict_vs_original.sh). */
    if (placed > 0)
      printf("%s: output in place at Unix time %.3f (its rename)\n", prog,
             placed);
    if (a.verify)
      printf("%s: verify: %s (%.0f voxels differ)\n", prog,
             sum[5] == 0 ? "OK, bit for bit" : "FAILED", sum[5]);
    fflush(stdout);
  }
  double badall = 0;
  MPI_Bcast(sum + 5, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  badall = sum[5];
  MPI_Finalize();
  return badall == 0 ? 0 : 1;
}
