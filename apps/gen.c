/* slabfeed-gen: write a synthetic volume in parallel. */
#include <signal.h>
#include <stdio.h>

#include "cli.h"
#include "slabfeed_tools.h"

/* Enums are stored through an int (CLI_ENUM). */
_Static_assert(sizeof(slabfeed_content) == sizeof(int), "enum size");

/* What the options fill. */
typedef struct gen_args {
  slabfeed_gen_config g;
  int quiet;
} gen_args;

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
             "over F only once complete)",
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
     .help = "seed of the field"},
    {.name = "--quiet",
     .kind = CLI_FLAG,
     .at = offsetof(gen_args, quiet),
     .help = "print nothing on success"},
    {.name = NULL}};

/* Parses the options, generates the volume collectively, and prints one
 * line of what was written and how fast (rank 0). */
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
  gen_args a = {.quiet = 0};
  slabfeed_gen_config_init(&a.g);
  const cli_app app = {
      prog,
      "Writes a synthetic volume in parallel: every rank writes its z-slab "
      "of each dataset, collectively.",
      {{"options", options, &a}}};
  cli_parse(&app, argc, argv);
  slabfeed_gen_config *g = &a.g;
  g->progress = !a.quiet;

  char err[1024];
  const double t0 = MPI_Wtime();
  const slabfeed_status st =
      slabfeed_generate(MPI_COMM_WORLD, g, err, sizeof err);
  const double dt = MPI_Wtime() - t0;
  if (st != SLABFEED_OK)
    cli_fail_agreed(prog, st, err); /* agreed by slabfeed_generate */
  if (rank == 0 && !a.quiet) {
    const double vox =
        (double)g->shape[0] * (double)g->shape[1] * (double)g->shape[2];
    const double bytes =
        vox * (g->float16 ? 2 : 4) *
        (g->input_channels + (g->target ? g->target_channels : 0));
    printf("slabfeed-gen: wrote %s: %s %dx%lldx%lldx%lld%s%s, %s, %s, %s, "
           "%.3f GB in %.2f s on %d ranks (%.2f GB/s)\n",
           g->path, g->input, g->input_channels, (long long)g->shape[0],
           (long long)g->shape[1], (long long)g->shape[2],
           g->target ? " + " : "", g->target ? g->target : "",
           g->layout == SLABFEED_LAYOUT_CL ? "channels-last" : "channels-first",
           g->float16 ? "float16" : "float32",
           g->content == SLABFEED_CONTENT_FIELD ? "field" : "index",
           bytes / 1e9, dt, size, bytes / 1e9 / dt);
  }
  MPI_Finalize();
  return 0;
}
