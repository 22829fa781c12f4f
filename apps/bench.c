/* slabfeed-bench: throughput of the loader on P ranks next to the ceilings
 * measured in the same run (pinned and pageable H2D, device copy, host
 * memcpy on one thread and on all, a one-sided MPI_Get between two ranks;
 * n/a where not measured), each figure also as a ratio to its ceiling;
 * stage times, exposed wait per step with and without a simulated training
 * step, peak host RSS and device memory.
 * --baseline fullcopy runs the original approach instead: every rank reads
 * the whole volume and crops it locally with the same transform.
 * --topology prints where every rank runs against its GPU before the runs
 * (slabfeed_topology) and every rank's NUMA line of the loader after open
 * (slabfeed_loader_numa); without it only the topology's warnings.
 * Output: a table for people, and JSON lines (prefix "JSON ") for plots.
 *
 * This file: options and the order of the runs. bench_ceilings.c,
 * bench_run.c and bench_report.c measure, run and print; bench_gpu.cu holds
 * the CUDA parts. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "slabfeed_tools.h"
#include "spec.h"
#ifdef SF_BENCH_CUDA
#include "bench_gpu.h"
#endif

/* What the bench's own options fill. */
typedef struct bench_args {
  slabfeed_config *cfg; /* --device writes cfg->device */
  int device_local;     /* --device local */
  int warmup, steps;
  double step_ms;
  int fullcopy;
  const char *label;
  int topology; /* --topology */
} bench_args;

/* --device local|-1|N: "local" picks the node-local rank modulo the GPUs
 * (one GPU per rank); a number goes to the loader's cfg.device. */
static int set_device(void *base, const char *value, char *err, size_t errlen)
{
  bench_args *a = base;
  if (strcmp(value, "local") == 0) {
    a->device_local = 1;
    return 0;
  }
  int64_t v;
  if (cli_parse_int(value, INT_MIN, INT_MAX, &v, err, errlen) != 0)
    return -1;
  a->device_local = 0;
  a->cfg->device = (int)v;
  return 0;
}

static const cli_choice baselines[] = {{"fullcopy", 1}, {NULL, 0}};

/* Listed after the loader options: this --device replaces theirs. */
static const cli_option options[] = {
    {.name = "--device",
     .kind = CLI_CALL,
     .set = set_device,
     .metavar = "local|-1|N",
     .help = "CUDA device of the batches, -1 for host batches (the default), "
             "or local: the node-local rank modulo the GPUs"},
    {.name = "--warmup",
     .kind = CLI_INT,
     .at = offsetof(bench_args, warmup),
     .min = 0,
     .max = INT_MAX,
     .metavar = "W",
     .help = "untimed steps before each run"},
    {.name = "--steps",
     .kind = CLI_INT,
     .at = offsetof(bench_args, steps),
     .min = 1,
     .max = INT_MAX,
     .metavar = "S",
     .help = "timed steps (at most 20 with a simulated step)"},
    {.name = "--step-ms",
     .kind = CLI_DOUBLE,
     .at = offsetof(bench_args, step_ms),
     .min = 0,
     .max = 3600000,
     .metavar = "T",
     .help = "length of the simulated training step of the second GPU run; "
             "0: none"},
    {.name = "--baseline",
     .kind = CLI_ENUM,
     .at = offsetof(bench_args, fullcopy),
     .choices = baselines,
     .help = "run the original approach instead of the loader: every rank "
             "reads the whole volume"},
    {.name = "--label",
     .kind = CLI_STRING,
     .at = offsetof(bench_args, label),
     .metavar = "L",
     .help = "label copied into the JSON lines",
     .flags = CLI_EMPTY_OK},
    {.name = "--topology",
     .kind = CLI_FLAG,
     .at = offsetof(bench_args, topology),
     .help = "print every rank's host, GPU, CPUs and NUMA nodes before the "
             "runs and where the loader's pages lie after open (without it: "
             "only the warnings of ranks bound away from their GPU)"},
    {.name = NULL}};

enum { TOPO_LEN = 1 << 16, NUMA_LINE = 512 };

/* The topology of the ranks (collective): with --topology the whole table
 * on rank 0, else only its WARNING lines. A failure is reported and the
 * bench goes on: the report is advice, not a measurement. */
static void print_topology(const bench_ctx *b, int all)
{
  char *buf = b->rank == 0 ? malloc(TOPO_LEN) : NULL;
  int warnings = 0;
  const slabfeed_status st =
      slabfeed_topology(MPI_COMM_WORLD, b->cfg.device, buf,
                        buf != NULL ? TOPO_LEN : 0, &warnings);
  if (b->rank == 0) {
    if (st != SLABFEED_OK)
      fprintf(stderr, "%s: topology: %s: %s\n", b->prog,
              slabfeed_status_name(st), buf != NULL ? buf : "no memory");
    else if (all)
      fputs(buf, stdout);
    else
      for (char *line = buf; line != NULL && *line;) {
        char *end = strchr(line, '\n');
        if (strncmp(line, "WARNING: ", 9) == 0)
          printf("%.*s\n", end ? (int)(end - line) : (int)strlen(line), line);
        line = end ? end + 1 : NULL;
      }
    fflush(stdout);
  }
  free(buf);
}

/* Every rank's NUMA line of loader l, printed by rank 0 in rank order
 * (collective). */
static void print_loader_numa(const bench_ctx *b, slabfeed_loader *l)
{
  char mine[NUMA_LINE];
  if (slabfeed_loader_numa(l, mine, sizeof mine) != SLABFEED_OK)
    snprintf(mine, sizeof mine, "numa: rank %d: unavailable", b->rank);
  char *all = b->rank == 0 ? malloc((size_t)NUMA_LINE * (size_t)b->size) : NULL;
  int ok = b->rank != 0 || all != NULL;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) { /* rank 0 alone knows: it says so, the others skip alike */
    if (b->rank == 0)
      fprintf(stderr, "%s: no memory for the ranks' NUMA lines\n", b->prog);
    return;
  }
  MPI_Gather(mine, NUMA_LINE, MPI_CHAR, all, NUMA_LINE, MPI_CHAR, 0,
             MPI_COMM_WORLD);
  if (b->rank == 0) {
    for (int r = 0; r < b->size; r++)
      printf("%.*s\n", NUMA_LINE, all + (size_t)r * NUMA_LINE);
    fflush(stdout);
  }
  free(all);
}

/* --device local: this rank's GPU is its node-local rank modulo the
 * visible devices. */
static void resolve_local_device(const cli_app *app, bench_ctx *b)
{
#ifdef SF_BENCH_CUDA
  MPI_Comm node;
  int local = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, b->rank,
                      MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  const int n = bench_device_count();
  slabfeed_status st = SLABFEED_OK; /* nodes may differ: agreed */
  char msg[CLI_ERRLEN] = "";
  if (n == 0)
    cli_note(&st, msg, sizeof msg, SLABFEED_ERR_ARG,
             "--device local: no CUDA device");
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    cli_usage_fail(app, "%s", msg);
  b->cfg.device = local % n;
#else
  (void)b;
  cli_usage_fail(app, "built without CUDA: use --device -1");
#endif
}

/* Opens the loader, runs it without and (on a GPU) with a simulated step
 * into r and rs; *have_step tells whether rs was measured. Sets b->path
 * to the first volume's file (the ceilings' describe). */
static void run_loader_runs(bench_ctx *b, const bench_args *a, bench_result *r,
                            bench_result *rs, int *have_step)
{
#ifdef SF_BENCH_CUDA
  const double dev0 = b->cfg.device >= 0 ? bench_device_used() : 0;
#endif
  char err[1024];
  slabfeed_loader *l = NULL;
  const double t0 = MPI_Wtime();
  slabfeed_status st =
      slabfeed_open(MPI_COMM_WORLD, &b->cfg, &l, err, sizeof err);
  b->t_open = MPI_Wtime() - t0;
  if (st != SLABFEED_OK) /* agreed by slabfeed_open */
    cli_fail_agreed(b->prog, st, err);
  slabfeed_volume_info(l, 0, b->path, sizeof b->path, NULL);
  const int nvol = slabfeed_volume_count(l);
  slabfeed_stats s = SLABFEED_STATS_INIT;
  slabfeed_stats_get(l, &s);
  b->t_read_max = s.t_read;
  MPI_Allreduce(MPI_IN_PLACE, &b->t_open, 1, MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &b->t_read_max, 1, MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
  char open_times[256];
  cli_open_times(&s, open_times, sizeof open_times);
  char line[1024];
  slabfeed_placement(l, line, sizeof line);
  if (b->rank == 0 && nvol > 1)
    printf("dataset: %d volumes stacked along z (first %s)\n", nvol, b->path);
  if (b->rank == 0)
    printf("open: slab %.1f MB per rank read in %.2f s; staging %.1f MB; "
           "loader thread %d\n%s\n",
           s.slab_bytes / 1e6, s.t_read, s.staging_bytes / 1e6, s.loader_thread,
           line);
  if (b->rank == 0)
    printf("open: %s\n", open_times);
  if (a->topology)
    print_loader_numa(b, l);
  memset(r, 0, sizeof *r);
#ifdef SF_BENCH_CUDA
  r->device_mem = b->cfg.device >= 0 ? bench_device_used() - dev0 : 0;
#endif
  const double dmem = r->device_mem;
  bench_run_loader(b, l, a->warmup, a->steps, 0, r);
  r->device_mem = dmem;
  double first = r->first_batch_s;
  MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (b->rank == 0)
    printf("start-up: first batch %.2f s after the process started (the "
           "slowest rank; open %.2f s, of it the slab read %.2f s)\n",
           first, b->t_open, b->t_read_max);
  *have_step = 0;
  if (b->cfg.device >= 0 && a->step_ms > 0) {
    bench_run_loader(b, l, a->warmup, a->steps < 20 ? a->steps : 20, a->step_ms,
                     rs);
    rs->device_mem = dmem;
    *have_step = 1;
  }
  slabfeed_close(l);
}

/* --baseline fullcopy reads one volume whole, without a loader: rank 0
 * expands the path spec as the loader would and every rank takes its one
 * file into b->path; a spec that does not expand fails (exit 1), one of
 * several volumes is a usage error (exit 2), alike on every rank. */
static void fullcopy_path(const cli_app *app, bench_ctx *b)
{
  cli_spec vols = {0, NULL};
  char err[CLI_ERRLEN] = "";
  const int ok =
      b->rank != 0 || cli_spec_expand(b->cfg.path, &vols, err, sizeof err) == 0;
  int n = ok ? vols.n : -1;
  MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Bcast(err, (int)sizeof err, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (n < 0)
    cli_fail_agreed(b->prog, SLABFEED_ERR_ARG, err);
  if (n != 1) {
    cli_spec_free(&vols);
    cli_usage_fail(app,
                   "--baseline fullcopy reads one volume whole; --file names "
                   "%d (give one volume's file)",
                   n);
  }
  if (b->rank == 0)
    snprintf(b->path, sizeof b->path, "%s", vols.path[0]);
  cli_spec_free(&vols);
  MPI_Bcast(b->path, (int)sizeof b->path, MPI_CHAR, 0, MPI_COMM_WORLD);
}

/* Parses the options, runs the loader (or the baseline), then measures the
 * ceilings and prints the reports. */
int main(int argc, char **argv)
{
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  bench_ctx b = {.prog = "slabfeed-bench", .stream = NULL, .path = ""};
  MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b.size);
  slabfeed_config_init(&b.cfg);
  bench_args a = {&b.cfg, 0, 5, 40, 50, 0, "", 0};
  const cli_app app = {
      b.prog,
      "Measures the loader's throughput, stage times, exposed wait per step "
      "(with a simulated training step on a GPU) and memory next to the "
      "ceilings measured in the same run; prints a table and JSON lines.",
      {{"loader options", cli_loader_options(), &b.cfg},
       {"bench options", options, &a}}};
  cli_parse(&app, argc, argv);
  b.label = a.label;
  if (a.device_local)
    resolve_local_device(&app, &b);
#ifndef SF_BENCH_CUDA
  if (b.cfg.device >= 0)
    cli_usage_fail(&app, "built without CUDA: use --device -1");
#else
  slabfeed_status st = SLABFEED_OK;
  char msg[CLI_ERRLEN] = "";
  if (b.cfg.device >= 0 &&
      (b.stream = bench_stream_create(b.cfg.device)) == NULL)
    cli_note(&st, msg, sizeof msg, SLABFEED_ERR_CUDA,
             "cannot create the consumer stream on device %d", b.cfg.device);
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    cli_fail_agreed(b.prog, st, msg);
#endif
  print_topology(&b, a.topology);
  /* The runs first, the ceilings after them: the ceilings' buffers must
   * not count in the runs' peak RSS. */
  bench_result r, rs;
  int have_step = 0;
  uint64_t differ = 0;
  if (a.fullcopy) {
    fullcopy_path(&app, &b);
    differ = bench_run_fullcopy(&b, a.warmup, a.steps, &r);
  } else
    run_loader_runs(&b, &a, &r, &rs, &have_step);
  bench_ceilings c;
  bench_ceilings_measure(&b, &c);
  bench_ceilings_print(&b, &c);
  bench_report(&b, a.fullcopy ? "fullcopy" : "loader", &c, 0, &r);
  if (have_step)
    bench_report(&b, "loader", &c, a.step_ms, &rs);
#ifdef SF_BENCH_CUDA
  if (b.stream != NULL)
    bench_stream_destroy(b.stream);
#endif
  MPI_Finalize();
  return differ != 0 ? 1 : 0; /* a baseline that computed wrong crops */
}
