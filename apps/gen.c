/* slabfeed-gen: write a synthetic volume in parallel, or a suite of N
 * volumes of one shape (--volumes N: N files, volume i with seed S + i). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "slabfeed_tools.h"

/* Enums are stored through an int (CLI_ENUM). */
_Static_assert(sizeof(slabfeed_content) == sizeof(int), "enum size");

/* What the options fill. */
typedef struct gen_args {
  slabfeed_gen_config g;
  int quiet;
  int volumes;         /* --volumes N */
  char attrs[4096];    /* --attr entries, "NAME=V[:V...]" joined by ',' */
  char attrs_of[4096]; /* those of the volume being written */
} gen_args;

/* --attr NAME=VALUE (repeatable): a numeric attribute of the root group;
 * with --volumes N, NAME=V0:V1:...:VN-1 gives each volume its own. */
static int add_attr(void *base, const char *value, char *err, size_t errlen)
{
  gen_args *a = base;
  const char *eq = strchr(value, '=');
  if (eq == NULL || eq == value || eq[1] == '\0' || strchr(value, ',')) {
    snprintf(err, errlen,
             "'%s': expected NAME=VALUE (or NAME=V0:V1:... "
             "with --volumes)",
             value);
    return -1;
  }
  const size_t have = strlen(a->attrs);
  if (have + strlen(value) + 2 > sizeof a->attrs) {
    snprintf(err, errlen,
             "'%s': --attr entries are limited to %zu bytes in "
             "all",
             value, sizeof a->attrs - 1);
    return -1;
  }
  snprintf(a->attrs + have, sizeof a->attrs - have, "%s%s", have ? "," : "",
           value);
  return 0;
}

/* The attrs of volume i of n into a->attrs_of: each entry's i-th value of
 * its ':' list (or its only one). Returns 0, or -1 with the bad entry in
 * err when a list has neither 1 nor n values. */
static int volume_attrs(gen_args *a, int n, int i, char *err, size_t errlen)
{
  size_t at = 0;
  a->attrs_of[0] = '\0';
  for (const char *p = a->attrs; *p != '\0';) {
    const size_t len = strcspn(p, ","), eq = strcspn(p, "=");
    int count = 1;
    for (size_t k = eq; k < len; k++)
      count += p[k] == ':';
    if (count != 1 && count != n) {
      snprintf(err, errlen,
               "--attr '%.*s' has %d values for %d volumes (one, "
               "or one per volume)",
               (int)len, p, count, n);
      return -1;
    }
    const char *v = p + eq + 1;
    for (int k = 0; count > 1 && k < i; k++)
      v = strchr(v, ':') + 1;
    const size_t vl = strcspn(v, ":,");
    at +=
        (size_t)snprintf(a->attrs_of + at, sizeof a->attrs_of - at,
                         "%s%.*s=%.*s", at ? "," : "", (int)eq, p, (int)vl, v);
    p += len + (p[len] == ',');
  }
  return 0;
}

/* --chunk Z,Y,X: the chunk edge (each in [1, 65535]), and chunked
 * storage. */
static int set_chunk(void *base, const char *value, char *err, size_t errlen)
{
  gen_args *a = base;
  if (cli_parse_triple(value, a->g.chunk, err, errlen) != 0)
    return -1;
  for (int i = 0; i < 3; i++)
    if (a->g.chunk[i] < 1 || a->g.chunk[i] > 65535) {
      snprintf(err, errlen, "'%s': every chunk edge must be in [1, 65535]",
               value);
      return -1;
    }
  a->g.chunked = 1;
  return 0;
}

/* --no-target: write the input dataset only. */
static int set_no_target(void *base, const char *value, char *err,
                         size_t errlen)
{
  (void)value;
  (void)err;
  (void)errlen;
  ((gen_args *)base)->g.target = NULL;
  return 0;
}

static const cli_choice layouts[] = {
    {"cf", SLABFEED_LAYOUT_CF}, {"cl", SLABFEED_LAYOUT_CL}, {NULL, 0}};
static const cli_choice dtypes[] = {{"f32", 0}, {"f16", 1}, {NULL, 0}};
static const cli_choice progresses[] = {
    {"auto", 1}, {"on", 2}, {"off", 0}, {NULL, 0}};
static const cli_choice contents[] = {{"index", SLABFEED_CONTENT_INDEX},
                                      {"field", SLABFEED_CONTENT_FIELD},
                                      {NULL, 0}};

#define GEN(field) offsetof(gen_args, g.field)

static const cli_option options[] = {
    {.name = "--file",
     .kind = CLI_STRING,
     .at = GEN(path),
     .metavar = "F",
     .help = "the HDF5 file to write (written aside, read back, and renamed "
             "over F only once complete); {} in F is replaced by the volume's "
             "index (zero-padded to 3 or more digits), and with --volumes N > "
             "1 and no {} the index goes before F's extension as _i",
     .flags = CLI_REQUIRED},
    {.name = "--input",
     .kind = CLI_STRING,
     .at = GEN(input),
     .metavar = "NAME",
     .help = "input dataset"},
    {.name = "--target",
     .kind = CLI_STRING,
     .at = GEN(target),
     .metavar = "NAME",
     .help = "target dataset"},
    {.name = "--no-target",
     .kind = CLI_CALL,
     .set = set_no_target,
     .help = "write the input dataset only"},
    {.name = "--shape",
     .kind = CLI_TRIPLE,
     .at = GEN(shape),
     .metavar = "Z,Y,X",
     .help = "box size: Z,Y,X or one edge"},
    {.name = "--input-channels",
     .kind = CLI_INT,
     .at = GEN(input_channels),
     .min = 1,
     .max = 64,
     .metavar = "C",
     .help = "channels of the input, 1..64"},
    {.name = "--target-channels",
     .kind = CLI_INT,
     .at = GEN(target_channels),
     .min = 1,
     .max = 64,
     .metavar = "C",
     .help = "channels of the target, 1..64"},
    {.name = "--layout",
     .kind = CLI_ENUM,
     .at = GEN(layout),
     .choices = layouts,
     .help = "channels-first (C,Z,Y,X) or channels-last (Z,Y,X,C)"},
    {.name = "--chunked",
     .kind = CLI_FLAG,
     .at = GEN(chunked),
     .help = "chunked storage (chunk edge min(64, shape) unless --chunk)"},
    {.name = "--chunk",
     .kind = CLI_CALL,
     .set = set_chunk,
     .metavar = "Z,Y,X",
     .help = "chunked storage with this spatial chunk edge"},
    {.name = "--dtype",
     .kind = CLI_ENUM,
     .at = GEN(float16),
     .choices = dtypes,
     .help = "stored element type"},
    {.name = "--content",
     .kind = CLI_ENUM,
     .at = GEN(content),
     .choices = contents,
     .help = "exact index values (slabfeed_index_value) or a smooth random "
             "field"},
    {.name = "--seed",
     .kind = CLI_U64,
     .at = GEN(seed),
     .metavar = "S",
     .help = "seed of the field (volume i of --volumes: S + i)"},
    {.name = "--volumes",
     .kind = CLI_INT,
     .at = offsetof(gen_args, volumes),
     .min = 1,
     .max = 100000,
     .metavar = "N",
     .help = "write a dataset of N volumes of this shape, one file each "
             "(see --file); with --content index they are alike, with field "
             "each has its own seed"},
    {.name = "--attr",
     .kind = CLI_CALL,
     .set = add_attr,
     .metavar = "NAME=V",
     .help = "a numeric attribute of the file's root group (float64; "
             "repeatable), e.g. a parameter for the loader's --params; with "
             "--volumes N, NAME=V0:V1:... gives each volume its value"},
    {.name = "--input-fields",
     .kind = CLI_STRING,
     .at = GEN(input_fields),
     .metavar = "NAME:C,...",
     .help = "write the input as fields, datasets of their own (a field of "
             "one channel 3-D), e.g. density:1,velocity:3; read them with "
             "--input density,velocity"},
    {.name = "--target-fields",
     .kind = CLI_STRING,
     .at = GEN(target_fields),
     .metavar = "NAME:C,...",
     .help = "write the target as fields (as --input-fields)"},
    {.name = "--scale-factor",
     .kind = CLI_INT,
     .at = GEN(scale_factor),
     .min = 1,
     .max = 16,
     .metavar = "F",
     .help = "a super-resolution pair: the target on a grid F times finer "
             "on every axis (F x --shape), the same field sampled F times "
             "finer; read with the loader's --scale-factor F"},
    {.name = "--coarsen-factor",
     .kind = CLI_INT,
     .at = GEN(coarsen_factor),
     .min = 1,
     .max = 16,
     .metavar = "G",
     .help = "a coarser target: on a grid G times coarser on every axis "
             "(--shape / G), the same field sampled every G voxels; read "
             "with the loader's --coarsen-factor G"},
    {.name = "--overwrite",
     .kind = CLI_FLAG,
     .at = GEN(overwrite),
     .help = "replace an existing file (once the new one is complete); "
             "without it an existing file is refused and left as it was"},
    {.name = "--progress",
     .kind = CLI_ENUM,
     .at = GEN(progress),
     .choices = progresses,
     .help = "progress of the writes and the read-back on rank 0's stderr: "
             "auto for 1 GB or more (updated in place on a terminal, else a "
             "final line), on for any size, off (--quiet: off unless given)"},
    {.name = "--quiet",
     .kind = CLI_FLAG,
     .at = offsetof(gen_args, quiet),
     .help = "print nothing on success"},
    {.name = NULL}};

/* Digits of the volume index in file names: 3, or more for N > 1000. */
static int index_width(int n)
{
  int w = 1;
  for (int v = n - 1; v >= 10; v /= 10)
    w++;
  return w < 3 ? 3 : w;
}

/* The file of volume i of n: every {} of f replaced by the index; without
 * {}, for n > 1, "_index" before the extension of the file name (its last
 * '.', not a leading one), or at the end. Returns 0, or -1 when the name
 * does not fit in len bytes. */
static int volume_name(const char *f, int n, int i, char *out, size_t len)
{
  char digits[16], idx[32];
  snprintf(digits, sizeof digits, "%d", i);
  const size_t nd = strlen(digits), w = (size_t)index_width(n);
  const size_t pad = w > nd ? w - nd : 0;
  memset(idx, '0', pad);
  memcpy(idx + pad, digits, nd + 1);
  size_t at = 0;
  if (strstr(f, "{}") != NULL) {
    for (const char *p = f; *p != '\0';) {
      const int brace = p[0] == '{' && p[1] == '}';
      const char *piece = brace ? idx : p;
      const size_t k = brace ? strlen(idx) : 1;
      if (at + k >= len)
        return -1;
      memcpy(out + at, piece, k);
      at += k;
      p += brace ? 2 : 1;
    }
    out[at] = '\0';
    return 0;
  }
  if (n == 1)
    return snprintf(out, len, "%s", f) < (int)len ? 0 : -1;
  const char *base = strrchr(f, '/');
  base = base != NULL ? base + 1 : f;
  const char *dot = strrchr(base, '.');
  if (dot == NULL || dot == base)
    dot = f + strlen(f);
  const int k = snprintf(out, len, "%.*s_%s%s", (int)(dot - f), f, idx, dot);
  return k >= 0 && (size_t)k < len ? 0 : -1;
}

/* Parses the options, generates the volume (or each of --volumes N in
 * turn) collectively, and prints one line per file of what was written and
 * how fast (rank 0), with a summary line for several. */
int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  /* A file size limit (ulimit -f) makes a write fail with EFBIG, which the
   * generator reports, instead of ending the process. */
  signal(SIGXFSZ, SIG_IGN);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *prog = "slabfeed-gen";
  gen_args a = {.quiet = 0, .volumes = 1};
  slabfeed_gen_config_init(&a.g);
  a.g.progress = -1; /* not given */
  const cli_app app = {
      prog,
      "Writes a synthetic volume in parallel: every rank writes its z-slab "
      "of each dataset, collectively. With --volumes N, a dataset of N "
      "volumes of one shape, one file each, volume i with seed S + i.",
      {{"options", options, &a}}};
  cli_parse(&app, argc, argv);
  slabfeed_gen_config *g = &a.g;
  if (g->progress < 0)
    g->progress = a.quiet ? 0 : 1;
  const int nv = a.volumes;
  const char *spec = g->path;
  const uint64_t seed0 = g->seed;

  /* Every name first: a usage error before any file is written. */
  char first[4200] = "", last[4200] = "", path[4200];
  int bad = 0;
  for (int i = 0; i < nv && !bad; i++)
    bad = volume_name(spec, nv, i, path, sizeof path) != 0;
  cli_usage_agree(&app, bad,
                  "--file '%s': the file name of a volume is longer "
                  "than %zu bytes",
                  spec, sizeof path - 1);
  char why[512] = "";
  bad = volume_attrs(&a, nv, 0, why, sizeof why) != 0;
  cli_usage_agree(&app, bad, "%s", why);

  char err[1024];
  double bytes_all = 0;
  const double t_all = MPI_Wtime();
  for (int i = 0; i < nv; i++) {
    volume_name(spec, nv, i, path, sizeof path);
    g->path = path;
    g->seed = seed0 + (uint64_t)i;
    volume_attrs(&a, nv, i, why, sizeof why);
    g->attrs = a.attrs_of;
    const double t0 = MPI_Wtime();
    const slabfeed_status st =
        slabfeed_generate(MPI_COMM_WORLD, g, err, sizeof err);
    const double dt = MPI_Wtime() - t0;
    if (st != SLABFEED_OK && nv > 1) { /* agreed by slabfeed_generate */
      char msg[2048];
      snprintf(msg, sizeof msg, "volume %d of %d: %.1023s%s%.400s", i, nv, err,
               i > 0 ? "; written before it: " : "", i > 0 ? first : "");
      if (i > 1)
        snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " .. %.400s",
                 last);
      cli_fail_agreed(prog, st, msg);
    }
    if (st != SLABFEED_OK)
      cli_fail_agreed(prog, st, err); /* agreed by slabfeed_generate */
    if (i == 0)
      snprintf(first, sizeof first, "%s", path);
    snprintf(last, sizeof last, "%s", path);
    const double vox =
        (double)g->shape[0] * (double)g->shape[1] * (double)g->shape[2];
    const double f3 = (double)g->scale_factor * g->scale_factor *
                      g->scale_factor /
                      ((double)g->coarsen_factor * g->coarsen_factor *
                       g->coarsen_factor); /* the target's grid */
    const double bytes =
        vox * (g->float16 ? 2 : 4) *
        (g->input_channels + (g->target ? g->target_channels * f3 : 0));
    bytes_all += bytes;
    if (rank == 0 && !a.quiet) {
      printf("slabfeed-gen: wrote %s: %s %dx%lldx%lldx%lld%s%s, %s, %s, %s, "
             "%.3f GB in %.2f s on %d ranks (%.2f GB/s)",
             g->path, g->input, g->input_channels, (long long)g->shape[0],
             (long long)g->shape[1], (long long)g->shape[2],
             g->target ? " + " : "", g->target ? g->target : "",
             g->layout == SLABFEED_LAYOUT_CL ? "channels-last"
                                             : "channels-first",
             g->float16 ? "float16" : "float32",
             g->content == SLABFEED_CONTENT_FIELD ? "field" : "index",
             bytes / 1e9, dt, size, bytes / 1e9 / dt);
      if (g->target && g->scale_factor > 1)
        printf(", target %dx%lldx%lldx%lld (scale factor %d)",
               g->target_channels, (long long)g->shape[0] * g->scale_factor,
               (long long)g->shape[1] * g->scale_factor,
               (long long)g->shape[2] * g->scale_factor, g->scale_factor);
      if (g->target && g->coarsen_factor > 1)
        printf(", target %dx%lldx%lldx%lld (coarsen factor %d)",
               g->target_channels, (long long)g->shape[0] / g->coarsen_factor,
               (long long)g->shape[1] / g->coarsen_factor,
               (long long)g->shape[2] / g->coarsen_factor, g->coarsen_factor);
      if (nv > 1)
        printf(", volume %d of %d, seed %llu", i, nv,
               (unsigned long long)g->seed);
      printf("\n");
    }
  }
  if (rank == 0 && !a.quiet && nv > 1) {
    const double dt = MPI_Wtime() - t_all;
    printf("slabfeed-gen: wrote %d volumes %s .. %s (seeds %llu..%llu), "
           "%.3f GB in %.2f s on %d ranks (%.2f GB/s)\n",
           nv, first, last, (unsigned long long)seed0,
           (unsigned long long)(seed0 + (uint64_t)nv - 1), bytes_all / 1e9, dt,
           size, bytes_all / 1e9 / dt);
  }
  MPI_Finalize();
  return 0;
}
