/* slabfeed-info: datasets, shapes, dtypes, layout, chunking, sizes, and
 * the slab plan for a number of ranks. Runs on one rank (others wait),
 * except --stats: the per-channel statistics of datasets, read in parallel
 * by every rank (slabfeed_field_stats), and the normalisation they give.
 * A dataset of several volumes (--file repeated, a glob pattern, @MANIFEST:
 * the loader's path spec, expanded by its rules without opening a loader)
 * is listed one volume per line with the stacked box; then the first
 * volume's datasets as for one file, the plan for the stacked box, and
 * --stats over every volume. */
#include <errno.h>
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "slabfeed_tools.h"
#include "spec.h"

/* What the options fill. */
typedef struct info_args {
  char *path; /* the path spec: repeated --file joined by newlines */
  slabfeed_file_layout layout;
  int ranks;
  int64_t halo;
  int nodes;
  int group_nodes;
  uint64_t node_memory;
  int options; /* --options: print the loader's option table */
  /* --stats: per-channel statistics of datasets */
  int stats;
  const char *input, *target, *dataset; /* which; none given: all */
  int has_log_a;
  double log_a;
  int n_input_vectors;
  int input_vectors[SLABFEED_MAX_VECTORS][3];
  int n_target_vectors;
  int target_vectors[SLABFEED_MAX_VECTORS][3];
} info_args;

/* --file F: one entry of the path spec; repeated, the entries are joined
 * with newlines (a dataset of several volumes, as the loader's --file). */
static int set_file(void *base, const char *value, char *err, size_t errlen)
{
  info_args *a = base;
  if (value[0] == '\0') {
    snprintf(err, errlen, "empty value");
    return -1;
  }
  const size_t had = a->path != NULL ? strlen(a->path) + 1 : 0;
  char *p = realloc(a->path, had + strlen(value) + 1);
  if (p == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (had > 0)
    p[had - 1] = '\n';
  memcpy(p + had, value, strlen(value) + 1);
  a->path = p;
  return 0;
}

/* --log-a A: a finite number. */
static int set_log_a(void *base, const char *value, char *err, size_t errlen)
{
  info_args *a = base;
  char *end = NULL;
  const double v =
      value[0] != '\0' && value[0] != ' ' ? strtod(value, &end) : NAN;
  if (end == NULL || *end != '\0' || !isfinite(v) || !isfinite((float)v)) {
    snprintf(err, errlen, "'%s' is not a finite number", value);
    return -1;
  }
  a->log_a = v;
  a->has_log_a = 1;
  return 0;
}

static const cli_choice layouts[] = {{"auto", SLABFEED_LAYOUT_AUTO},
                                     {"cf", SLABFEED_LAYOUT_CF},
                                     {"cl", SLABFEED_LAYOUT_CL},
                                     {NULL, 0}};

static const cli_option options[] = {
    {.name = "--file",
     .kind = CLI_CALL,
     .set = set_file,
     .metavar = "F",
     .help = "the HDF5 file (required unless --options); or, as the "
             "loader's --file, a glob pattern or @MANIFEST, and repeated for "
             "a dataset of several volumes"},
    {.name = "--layout",
     .kind = CLI_ENUM,
     .at = offsetof(info_args, layout),
     .choices = layouts,
     .help = "layout of the datasets, or decided from the shape"},
    {.name = "--ranks",
     .kind = CLI_INT,
     .at = offsetof(info_args, ranks),
     .min = 1,
     .max = INT_MAX,
     .metavar = "P",
     .help = "ranks of the slab plan, by default those of this run"},
    {.name = "--halo",
     .kind = CLI_INT64,
     .at = offsetof(info_args, halo),
     .min = 0,
     .max = INT32_MAX,
     .metavar = "H",
     .help = "z-planes held on each side of a slab, at most the box's Z (as "
             "the loader's halo)"},
    {.name = "--nodes",
     .kind = CLI_INT,
     .at = offsetof(info_args, nodes),
     .min = 1,
     .max = INT_MAX,
     .metavar = "N",
     .help = "nodes the ranks run on (ranks in blocks by node)"},
    {.name = "--group-nodes",
     .kind = CLI_INT,
     .at = offsetof(info_args, group_nodes),
     .min = -1,
     .max = INT_MAX,
     .metavar = "G",
     .help = "nodes per replication group: 0 from --node-memory, -1 all"},
    {.name = "--node-memory",
     .kind = CLI_SIZE,
     .at = offsetof(info_args, node_memory),
     .metavar = "BYTES",
     .help = "slab store one node may hold, e.g. 200G (default: half of this "
             "machine's memory less 2 GiB per rank)"},
    {.name = "--options",
     .kind = CLI_FLAG,
     .at = offsetof(info_args, options),
     .help = "print the loader's options (every app, the C API and Python "
             "take them) as a Markdown table, as docs/OPTIONS.md has it, and "
             "exit"},
    {.name = "--stats",
     .kind = CLI_FLAG,
     .at = offsetof(info_args, stats),
     .help = "per-channel statistics (count, mean, std, min, max; of "
             "log(x + A) too with --log-a) of the datasets, read in parallel "
             "by every rank, and the --input-norm / --target-norm value they "
             "give"},
    {.name = "--input",
     .kind = CLI_STRING,
     .at = offsetof(info_args, input),
     .metavar = "NAME",
     .help = "--stats: the input dataset (its normalisation is printed as "
             "--input-norm)"},
    {.name = "--target",
     .kind = CLI_STRING,
     .at = offsetof(info_args, target),
     .metavar = "NAME",
     .help = "--stats: the target dataset (printed as --target-norm)"},
    {.name = "--dataset",
     .kind = CLI_STRING,
     .at = offsetof(info_args, dataset),
     .metavar = "NAME",
     .help = "--stats: another dataset; with none of --input, --target and "
             "--dataset, every dataset of the file"},
    {.name = "--log-a",
     .kind = CLI_CALL,
     .set = set_log_a,
     .metavar = "A",
     .help = "--stats: also the statistics of log(x + A), and a "
             "normalisation with log(A) for the channels where x + A > 0 "
             "everywhere"},
    {.name = "--input-vector",
     .kind = CLI_VECTOR,
     .at = offsetof(info_args, input_vectors),
     .count_at = offsetof(info_args, n_input_vectors),
     .max = SLABFEED_MAX_VECTORS,
     .metavar = "K0,K1,K2",
     .help = "--stats: input channels of one vector: they share one scale "
             "(the rms of the components) and shift 0; repeatable"},
    {.name = "--target-vector",
     .kind = CLI_VECTOR,
     .at = offsetof(info_args, target_vectors),
     .count_at = offsetof(info_args, n_target_vectors),
     .max = SLABFEED_MAX_VECTORS,
     .metavar = "K0,K1,K2",
     .help = "--stats: target channels of one vector; repeatable"},
    {.name = NULL}};

/* State of the walk over the file's datasets. */
typedef struct ctx {
  const char *path;
  slabfeed_file_layout layout;
  int quiet; /* 1: collect only, print nothing */
  int nvol;  /* volumes of the dataset (the plan's box stacks them) */
  int found;
  int64_t shape[3];
  double bytes_f32;
  char names[4096]; /* the datasets found, each followed by '\n' */
} ctx;

#if H5_VERSION_GE(1, 12, 0)
typedef H5L_info2_t link_info;
#define ITERATE H5Literate2
#else
typedef H5L_info_t link_info;
#define ITERATE H5Literate
#endif

/* H5Literate callback: prints one line per readable dataset and adds it to
 * the totals (other objects are listed as skipped). */
static herr_t show(hid_t group, const char *name, const link_info *li,
                   void *data)
{
  (void)group;
  (void)li;
  ctx *c = data;
  slabfeed_dataset_info in = SLABFEED_DATASET_INFO_INIT;
  char err[1024];
  if (slabfeed_describe(c->path, name, c->layout, &in, err, sizeof err) !=
      SLABFEED_OK) {
    if (!c->quiet)
      printf("  %-12s (skipped: %s)\n", name, err);
    return 0;
  }
  const double vox =
      (double)in.shape[0] * (double)in.shape[1] * (double)in.shape[2];
  const double bytes = vox * (double)in.channels * in.type_bits / 8.0;
  if (!c->quiet) {
    printf("  %-12s dims (%lld,%lld,%lld,%lld)  %s  C=%lld  box "
           "%lldx%lldx%lld  float%d  %s",
           name, (long long)in.dims[0], (long long)in.dims[1],
           (long long)in.dims[2], (long long)in.dims[3],
           cli_layout_name(in.layout), (long long)in.channels,
           (long long)in.shape[0], (long long)in.shape[1],
           (long long)in.shape[2], in.type_bits,
           in.chunked ? "chunked (" : "contiguous");
    if (in.chunked)
      printf("%lld,%lld,%lld,%lld)", (long long)in.chunk[0],
             (long long)in.chunk[1], (long long)in.chunk[2],
             (long long)in.chunk[3]);
    printf("  %.3f GB in file, %.3f GB as float32\n", bytes / 1e9,
           vox * (double)in.channels * 4 / 1e9);
  }
  if (c->found == 0)
    memcpy(c->shape, in.shape, sizeof c->shape);
  c->found++;
  const size_t used = strlen(c->names);
  if (used + strlen(name) + 2 < sizeof c->names)
    snprintf(c->names + used, sizeof c->names - used, "%s\n", name);
  c->bytes_f32 += vox * (double)in.channels * 4;
  return 0;
}

/* Parses the options; rank 0 lists the datasets and the slab plan while
 * the other ranks wait for its status. */
/* The placement for --nodes, --group-nodes and --node-memory, then the
 * slab of each rank inside its group. Returns the exit status. */
static int print_plan(const char *prog, const info_args *a, const ctx *c)
{
  const int64_t ranks = a->ranks, halo = a->halo;
  /* The mean plane: exact for a box or a suite at one resolution; for
   * mixed resolutions the loader splits the planes evenly in bytes, so
   * its node stores differ from the mean's by at most one plane per
   * rank. */
  const double per_plane = c->bytes_f32 / (double)c->shape[0];
  /* The loader's rule (slabfeed_open refuses more): 0 <= halo <= Z. */
  if (halo > c->shape[0]) {
    fprintf(stderr,
            "%s: --halo %lld: the halo is at most the box's Z = %lld "
            "z-planes (the loader refuses a larger one)\n",
            prog, (long long)halo, (long long)c->shape[0]);
    return 2;
  }
  slabfeed_placement_plan p = SLABFEED_PLACEMENT_PLAN_INIT;
  if (a->nodes > ranks ||
      slabfeed_plan_placement(c->shape[0], (uint64_t)per_plane, (int)ranks,
                              a->nodes, a->group_nodes, a->node_memory, halo,
                              &p) != SLABFEED_OK) {
    fprintf(stderr,
            "%s: no placement for %lld ranks on %d nodes with --group-nodes "
            "%d over %lld z-planes (more nodes than ranks, G above the node "
            "count, or a group with more ranks than planes)\n",
            prog, (long long)ranks, a->nodes, a->group_nodes,
            (long long)c->shape[0]);
    return 1;
  }
  printf("placement on %d node(s) of %lld rank(s): %d group(s) of %d node(s)"
         "%s, each holding the whole volume; slab store %.4g GB on the fullest "
         "node, budget %.4g GB per node (%s); expected share of crop bytes "
         "from other nodes %.3f\n",
         p.nodes, (long long)ranks, p.groups, p.group_nodes,
         p.nodes % p.groups ? " (some one more)" : "",
         (double)p.node_store_bytes / 1e9, (double)p.budget / 1e9,
         p.fits ? "fits" : "exceeded: even one group of all nodes is over it",
         p.remote_fraction);
  const int64_t gs = ranks / p.groups; /* ranks of a group (the first) */
  printf("slab plan inside a group of %lld ranks (halo %lld):\n", (long long)gs,
         (long long)halo);
  for (int64_t r = 0; r < gs; r++) {
    int64_t z0, z1;
    if (slabfeed_slab_plan(c->shape[0], (int)gs, (int)r, &z0, &z1) !=
        SLABFEED_OK) {
      fprintf(stderr, "%s: %lld ranks but only %lld z-planes\n", prog,
              (long long)gs, (long long)c->shape[0]);
      return 1;
    }
    if (r < 8 || r == gs - 1)
      printf("  rank %4lld: z [%lld, %lld)  %lld planes  %.3f GB in memory\n",
             (long long)r, (long long)z0, (long long)z1, (long long)(z1 - z0),
             per_plane * (double)(z1 - z0 + 2 * halo) / 1e9);
    else if (r == 8)
      printf("  ...\n");
  }
  printf("whole %s %.3f GB as float32 in the store; per rank about %.3f GB\n",
         c->nvol > 1 ? "dataset" : "volume", c->bytes_f32 / 1e9,
         c->bytes_f32 / 1e9 / (double)gs);
  /* The residency rule of device batches (slabfeed.h, slabfeed_residency),
   * with this plan's figures: GPU memory is not queried here. */
  const double rank_gb =
      per_plane * (double)((c->shape[0] + gs - 1) / gs + 2 * halo) / 1e9;
  printf("device batches, --residency auto: each rank's slab (up to %.3f GB "
         "here) is also held in its GPU's memory when the slabs of the ranks "
         "sharing that GPU fit its budget (--device-memory; default: half of "
         "the GPU's free memory at open, e.g. %.3f GB of slabs for one rank "
         "per GPU needs %.3f GB free) and the node's GPUs have peer access; "
         "else crops cross the host-to-device link\n",
         rank_gb, rank_gb, 2 * rank_gb);
  return 0;
}

/* One normalisation entry per channel as --input-norm takes it: shift the
 * mean and scale the standard deviation of a scalar channel (with log:
 * those of log(x + a), where x + a > 0 everywhere); shift 0 and one scale,
 * the rms of the components, for the channels of a vector group. A scale
 * that would be 0 (a constant channel) is 1. */
static void norm_text(const slabfeed_field_stat *st, int C, int ngroups,
                      const int (*groups)[3], int with_log, float log_a,
                      char *buf, size_t len)
{
  size_t used = 0;
  buf[0] = '\0';
  for (int c = 0; c < C; c++) {
    int group = -1;
    for (int v = 0; v < ngroups; v++)
      for (int k = 0; k < 3; k++)
        group = groups[v][k] == c ? v : group;
    char one[128];
    if (group >= 0) {
      double ms = 0;
      for (int k = 0; k < 3; k++) {
        const slabfeed_field_stat *x = &st[groups[group][k]];
        ms += (x->std * x->std + x->mean * x->mean) / 3.0;
      }
      const float scale = (float)sqrt(ms);
      snprintf(one, sizeof one, "0,%.9g",
               isfinite(scale) && scale != 0.0f ? (double)scale : 1.0);
    } else if (with_log && st[c].count > 0 && st[c].log_count == st[c].count) {
      const float scale = (float)st[c].log_std;
      snprintf(one, sizeof one, "log(%.9g),%.9g,%.9g", (double)log_a,
               (double)(float)st[c].log_mean,
               isfinite(scale) && scale != 0.0f ? (double)scale : 1.0);
    } else {
      const float scale = (float)st[c].std;
      snprintf(one, sizeof one, "%.9g,%.9g",
               isfinite(st[c].mean) ? (double)(float)st[c].mean : 0.0,
               isfinite(scale) && scale != 0.0f ? (double)scale : 1.0);
    }
    const int n = snprintf(buf + used, len - used, "%s%s", c ? ";" : "", one);
    if (n < 0 || (size_t)n >= len - used)
      return;
    used += (size_t)n;
  }
}

/* One side's mean, population std and count into the running totals of
 * the pairwise update of Chan et al. (*n, *mean, *m2: the sum of squared
 * deviations). */
static void merge_moments(uint64_t *n, double *mean, double *m2, uint64_t nb,
                          double mean_b, double std_b)
{
  if (nb == 0)
    return;
  const double m2b = std_b * std_b * (double)nb;
  if (*n == 0) {
    *n = nb, *mean = mean_b, *m2 = m2b;
    return;
  }
  const double na = (double)*n, nbd = (double)nb, nt = na + nbd;
  const double delta = mean_b - *mean;
  *mean += delta * nbd / nt;
  *m2 += m2b + delta * delta * na * nbd / nt;
  *n += nb;
}

/* The statistics of one more volume (b) into those of the volumes before
 * (a, per channel): counts added, moments merged, extremes kept; the
 * fields of an empty count stay NaN. */
static void merge_stat(slabfeed_field_stat *a, const slabfeed_field_stat *b)
{
  const uint64_t n0 = a->count, l0 = a->log_count;
  double m2 = a->std * a->std * (double)n0, lm2 = 0;
  if (l0 > 0)
    lm2 = a->log_std * a->log_std * (double)l0;
  merge_moments(&a->count, &a->mean, &m2, b->count, b->mean, b->std);
  merge_moments(&a->log_count, &a->log_mean, &lm2, b->log_count, b->log_mean,
                b->log_std);
  a->nonfinite += b->nonfinite;
  if (b->count > 0) {
    a->std = sqrt(m2 / (double)a->count);
    a->min = n0 == 0 || b->min < a->min ? b->min : a->min;
    a->max = n0 == 0 || b->max > a->max ? b->max : a->max;
  }
  if (b->log_count > 0) {
    a->log_std = sqrt(lm2 / (double)a->log_count);
    a->log_min = l0 == 0 || b->log_min < a->log_min ? b->log_min : a->log_min;
    a->log_max = l0 == 0 || b->log_max > a->log_max ? b->log_max : a->log_max;
  }
}

/* The statistics of `dataset` over every volume of vols (each read by
 * every rank with slabfeed_field_stats, then merged); agreed like
 * slabfeed_field_stats, err naming the volume that failed. */
static slabfeed_status suite_stats(const cli_spec *vols, const char *dataset,
                                   slabfeed_file_layout layout, float log_a,
                                   slabfeed_field_stat *st, int *C, char *err,
                                   size_t errlen)
{
  slabfeed_field_stat one[SLABFEED_MAX_CHANNELS];
  for (int v = 0; v < vols->n; v++) {
    int Cv = 0;
    const slabfeed_status s = slabfeed_field_stats(
        MPI_COMM_WORLD, vols->path[v], dataset, layout, log_a,
        v == 0 ? st : one, SLABFEED_MAX_CHANNELS, &Cv, err, errlen);
    if (s != SLABFEED_OK) {
      /* "volume v: " before the message, truncated to errlen */
      char pre[32];
      const size_t k = (size_t)snprintf(pre, sizeof pre, "volume %d: ", v);
      size_t m = strlen(err);
      if (vols->n > 1 && errlen > k + 1) {
        m = k + m + 1 > errlen ? errlen - k - 1 : m;
        memmove(err + k, err, m);
        memcpy(err, pre, k);
        err[k + m] = '\0';
      }
      return s;
    }
    if (v == 0)
      *C = Cv;
    else if (Cv != *C) {
      snprintf(err, errlen,
               "volume %d '%s': '%s' has %d channels, volume 0 '%s' %d", v,
               vols->path[v], dataset, Cv, vols->path[0], *C);
      return SLABFEED_ERR_ARG;
    }
    for (int k = 0; v > 0 && k < Cv; k++)
      merge_stat(&st[k], &one[k]);
  }
  return SLABFEED_OK;
}

/* --stats: the statistics of each dataset named (or of every dataset of
 * the file, names from rank 0), read by every rank over every volume of
 * vols; rank 0 prints. Every rank returns the same exit status. */
static int print_stats(const char *prog, const info_args *a, const ctx *c,
                       const cli_spec *vols, int rank, int size)
{
  /* The datasets and their roles: 0 input, 1 target, 2 another. */
  char names[4096] = "";
  if (a->input == NULL && a->target == NULL && a->dataset == NULL) {
    if (rank == 0)
      snprintf(names, sizeof names, "%s", c->names);
    MPI_Bcast(names, (int)sizeof names, MPI_CHAR, 0, MPI_COMM_WORLD);
  }
  const char *list[64];
  int role[64], n = 0;
  const char *given[3] = {a->input, a->target, a->dataset};
  for (int r = 0; r < 3; r++)
    if (given[r] != NULL)
      list[n] = given[r], role[n++] = r;
  for (char *p = names; *p != '\0' && n < 64;) {
    char *nl = strchr(p, '\n');
    *nl = '\0';
    list[n] = p, role[n++] = 2;
    p = nl + 1;
  }
  const int with_log = a->has_log_a;
  const float log_a = with_log ? (float)a->log_a : NAN;
  int rc = 0;
  for (int d = 0; d < n && rc == 0; d++) {
    slabfeed_field_stat st[SLABFEED_MAX_CHANNELS];
    int C = 0;
    char err[1024];
    const slabfeed_status s =
        suite_stats(vols, list[d], a->layout, log_a, st, &C, err, sizeof err);
    if (s != SLABFEED_OK) { /* agreed: the same on every rank */
      if (rank == 0)
        fprintf(stderr, "%s: %s: %s\n", prog, slabfeed_status_name(s), err);
      rc = 1;
      break;
    }
    const int ng = role[d] == 0   ? a->n_input_vectors
                   : role[d] == 1 ? a->n_target_vectors
                                  : 0;
    const int(*groups)[3] = role[d] == 0 ? a->input_vectors : a->target_vectors;
    for (int v = 0; v < ng; v++)
      for (int k = 0; k < 3; k++)
        if (groups[v][k] < 0 || groups[v][k] >= C) {
          if (rank == 0)
            fprintf(stderr,
                    "%s: --%s-vector %d,%d,%d: '%s' has channels 0..%d\n", prog,
                    role[d] == 0 ? "input" : "target", groups[v][0],
                    groups[v][1], groups[v][2], list[d], C - 1);
          rc = 2;
        }
    if (rank != 0 || rc != 0)
      continue;
    if (vols->n > 1)
      printf("statistics of '%s' over %d volumes (%d channels, read by %d "
             "ranks):\n",
             list[d], vols->n, C, size);
    else
      printf("statistics of '%s' (%d channels, read by %d ranks):\n", list[d],
             C, size);
    printf("  %4s %14s %10s %15s %15s %15s %15s\n", "ch", "count", "nonfinite",
           "mean", "std", "min", "max");
    for (int k = 0; k < C; k++)
      printf("  %4d %14llu %10llu %15.8g %15.8g %15.8g %15.8g\n", k,
             (unsigned long long)st[k].count,
             (unsigned long long)st[k].nonfinite, st[k].mean, st[k].std,
             st[k].min, st[k].max);
    if (with_log) {
      printf("  log(x + %.9g):\n", (double)log_a);
      printf("  %4s %14s %10s %15s %15s %15s %15s\n", "ch", "count", "", "mean",
             "std", "min", "max");
      for (int k = 0; k < C; k++)
        printf("  %4d %14llu %10s %15.8g %15.8g %15.8g %15.8g\n", k,
               (unsigned long long)st[k].log_count, "", st[k].log_mean,
               st[k].log_std, st[k].log_min, st[k].log_max);
    }
    const char *flag =
        role[d] == 0   ? "--input-norm"
        : role[d] == 1 ? "--target-norm"
                       : "normalisation (as --input-norm or --target-norm):";
    char text[SLABFEED_MAX_CHANNELS * 64];
    norm_text(st, C, ng, groups, 0, log_a, text, sizeof text);
    printf("  %s '%s'\n", flag, text);
    if (with_log) {
      norm_text(st, C, ng, groups, 1, log_a, text, sizeof text);
      printf("  with log: %s '%s'\n", flag, text);
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return rc;
}

/* Rank 0: checks that c->path can be opened (the operating system's
 * reason first: missing, a directory, no permission; HDF5's own failure
 * says only that it could not open), then walks its datasets with show.
 * Returns 0, or 1 after a message on stderr. */
static int describe_file(const char *prog, ctx *c)
{
  struct stat st;
  hid_t f = H5I_INVALID_HID;
  if (stat(c->path, &st) != 0 || access(c->path, R_OK) != 0)
    fprintf(stderr, "%s: cannot open HDF5 file '%s': %s\n", prog, c->path,
            strerror(errno));
  else if (!S_ISREG(st.st_mode))
    fprintf(stderr, "%s: '%s' is not a regular file (an HDF5 file is needed)\n",
            prog, c->path);
  else if ((f = H5Fopen(c->path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0)
    fprintf(stderr,
            "%s: HDF5 cannot open '%s': not an HDF5 file, truncated, or "
            "locked by a writer (HDF5_USE_FILE_LOCKING=FALSE lifts locks)\n",
            prog, c->path);
  if (f < 0)
    return 1;
  if (!c->quiet)
    printf("%s (slabfeed %s)\n", c->path, slabfeed_version_string());
  c->found = 0;
  c->bytes_f32 = 0;
  c->names[0] = '\0';
  ITERATE(f, H5_INDEX_NAME, H5_ITER_INC, NULL, show, c);
  H5Fclose(f);
  if (c->found == 0) {
    fprintf(stderr, "%s: no rank-4 floating-point dataset in '%s'\n", prog,
            c->path);
    return 1;
  }
  return 0;
}

/* Rank 0, a dataset of several volumes: one line per volume (its box, from
 * the datasets volume 0 has), the stacked box and its size, each volume
 * checked against volume 0 as the loader checks it (channels, element
 * type, layout, y and x; here every dataset of volume 0, where the loader
 * checks the input and target it reads). Then c describes the stacked box
 * (shape[0] and bytes_f32 over every volume). Returns 0, or 1 when a
 * volume cannot be described or differs. */
static int list_volumes(const char *prog, ctx *c, const cli_spec *vols)
{
  printf("dataset of %d volumes (slabfeed %s), stacked along z as the loader "
         "stacks them:\n",
         vols->n, slabfeed_version_string());
  int rc = 0;
  int64_t z = 0, yx[2] = {0, 0};
  double f32 = 0, voxels = 0;
  slabfeed_dataset_info first[64];
  for (int v = 0; v < vols->n; v++) {
    char why[1400] = "";
    int64_t box[3] = {0, 0, 0};
    int d = 0;
    for (const char *p = c->names; *p != '\0' && why[0] == '\0' && d < 64;
         d++) {
      const char *nl = strchr(p, '\n');
      char name[1024];
      snprintf(name, sizeof name, "%.*s", (int)(nl - p), p);
      p = nl + 1;
      slabfeed_dataset_info in = SLABFEED_DATASET_INFO_INIT;
      char err[1024];
      if (slabfeed_describe(vols->path[v], name, c->layout, &in, err,
                            sizeof err) != SLABFEED_OK) {
        snprintf(why, sizeof why, "%s", err);
        break;
      }
      if (v == 0)
        first[d] = in;
      const slabfeed_dataset_info *a0 = &first[d];
      if (d == 0)
        memcpy(box, in.shape, sizeof box);
      if (in.channels != a0->channels || in.type_bits != a0->type_bits ||
          in.layout != a0->layout)
        snprintf(why, sizeof why,
                 "'%s' is C=%lld float%d %s where volume 0 has C=%lld "
                 "float%d %s",
                 name, (long long)in.channels, in.type_bits,
                 cli_layout_name(in.layout), (long long)a0->channels,
                 a0->type_bits, cli_layout_name(a0->layout));
      else if (memcmp(in.shape, box, sizeof box) != 0)
        snprintf(why, sizeof why,
                 "'%s' is %lldx%lldx%lld where the volume's first dataset "
                 "is %lldx%lldx%lld",
                 name, (long long)in.shape[0], (long long)in.shape[1],
                 (long long)in.shape[2], (long long)box[0], (long long)box[1],
                 (long long)box[2]);
      f32 += (double)in.channels * (double)in.shape[0] * (double)in.shape[1] *
             (double)in.shape[2] * 4;
    }
    if (why[0] != '\0') {
      printf("  volume %5d: %s  (differs from volume 0 or unreadable: %s)\n", v,
             vols->path[v], why);
      rc = 1;
      continue;
    }
    printf("  volume %5d: %s  box %lldx%lldx%lld  z [%lld, %lld) stacked\n", v,
           vols->path[v], (long long)box[0], (long long)box[1],
           (long long)box[2], (long long)z, (long long)(z + box[0]));
    z += box[0];
    for (int a = 1; a < 3; a++)
      yx[a - 1] = box[a] > yx[a - 1] ? box[a] : yx[a - 1];
    voxels += (double)box[0] * (double)box[1] * (double)box[2];
  }
  if (rc != 0) {
    fprintf(stderr,
            "%s: volumes differ from volume 0 or cannot be read (see above); "
            "the loader refuses a dataset whose volumes differ in the "
            "datasets it reads\n",
            prog);
    return 1;
  }
  /* Every volume is stored at its own plane size: the store holds the
   * volumes' own bytes. The stacked box's y and x are the largest. */
  printf("  total: %d volumes, stacked box %lldx%lldx%lld, %.3f GB as "
         "float32",
         vols->n, (long long)z, (long long)yx[0], (long long)yx[1], f32 / 1e9);
  if (voxels < (double)z * (double)yx[0] * (double)yx[1])
    printf(" (volumes of other y,x: each stored at its own plane size)");
  printf("; volume 0's datasets:\n");
  c->quiet = 0;
  if (describe_file(prog, c) != 0)
    return 1;
  c->shape[0] = z;
  c->shape[1] = yx[0];
  c->shape[2] = yx[1];
  c->bytes_f32 = f32;
  return 0;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *prog = "slabfeed-info";
  info_args a = {
      .path = NULL, .layout = SLABFEED_LAYOUT_AUTO, .ranks = size, .nodes = 1};
  const cli_app app = {
      prog,
      "Lists the datasets of an HDF5 file (shape, dtype, layout, chunking, "
      "size) and the slab plan for a number of ranks; rank 0 does the work. "
      "A dataset of several volumes (--file repeated, a pattern, a manifest) "
      "is listed volume by volume, and planned as the loader stacks it. "
      "With --stats every rank also reads its slab of the datasets for "
      "their per-channel statistics and the normalisation they give.",
      {{"options", options, &a}}};
  cli_parse(&app, argc, argv);
  if (a.options) {
    if (rank == 0)
      cli_print_option_table(stdout);
    free(a.path);
    MPI_Finalize();
    return 0;
  }
  /* Collective: a rank without --file (MPMD) must not leave alone. */
  cli_usage_agree(&app, a.path == NULL, "--file is required (or --options)");
  ctx c = {NULL, a.layout, 0, 1, 0, {0, 0, 0}, 0, ""};
  cli_spec vols = {0, NULL};
  int rc = 0;
  if (rank == 0) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    char err[CLI_ERRLEN];
    if (cli_spec_expand(a.path, &vols, err, sizeof err) != 0) {
      fprintf(stderr, "%s: %s\n", prog, err);
      rc = 1;
    } else {
      c.path = vols.path[0];
      c.nvol = vols.n;
      /* One plain path: the listing of before. Else the volumes first, from
       * the datasets of volume 0 (collected quietly), then volume 0's. */
      if (cli_spec_plain(a.path) && vols.n == 1)
        rc = describe_file(prog, &c);
      else if ((c.quiet = 1, rc = describe_file(prog, &c)) == 0)
        rc = list_volumes(prog, &c, &vols);
    }
    if (rc == 0)
      rc = print_plan(prog, &a, &c);
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rc == 0 && a.stats) {
    fflush(stdout);
    if (cli_spec_bcast(&vols, 1, 0, MPI_COMM_WORLD) != 0) {
      if (rank == 0)
        fprintf(stderr, "%s: out of memory sharing the list of volumes\n",
                prog);
      rc = 1;
    } else
      rc = print_stats(prog, &a, &c, &vols, rank, size);
  }
  cli_spec_free(&vols);
  free(a.path);
  MPI_Finalize();
  return rc;
}
