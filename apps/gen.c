/* slabfeed-gen: write a synthetic volume in parallel. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "--file F [--input NAME] [--target NAME | --no-target] [--shape Z,Y,X] "
    "[--input-channels C] [--target-channels C] [--layout cf|cl] "
    "[--chunked] [--chunk Z,Y,X] [--dtype f32|f16] [--content index|field] "
    "[--seed S] [--quiet]";

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *prog = "slabfeed-gen";
  slabfeed_gen_config g;
  slabfeed_gen_config_init(&g);
  g.progress = 1;
  int quiet = 0;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int64_t n;
    int bad = 0, used = 1;
    if (strcmp(o, "--no-target") == 0) {
      g.target = NULL;
      used = 0;
    } else if (strcmp(o, "--chunked") == 0) {
      g.chunked = 1;
      used = 0;
    } else if (strcmp(o, "--quiet") == 0) {
      quiet = 1;
      g.progress = 0;
      used = 0;
    } else if (strcmp(o, "--help") == 0) {
      cli_usage_fail(prog, usage, "write a synthetic volume");
    } else if (v == NULL) {
      cli_usage_fail(prog, usage, "%s needs a value or is unknown", o);
    } else if (strcmp(o, "--file") == 0) {
      g.path = v;
    } else if (strcmp(o, "--input") == 0) {
      g.input = v;
    } else if (strcmp(o, "--target") == 0) {
      g.target = v;
    } else if (strcmp(o, "--shape") == 0) {
      bad = cli_triple(v, g.shape);
    } else if (strcmp(o, "--chunk") == 0) {
      bad = cli_triple(v, g.chunk);
      g.chunked = 1;
    } else if (strcmp(o, "--input-channels") == 0) {
      bad = cli_int64(v, &n) || n < 1 || n > 64;
      g.input_channels = (int)n;
    } else if (strcmp(o, "--target-channels") == 0) {
      bad = cli_int64(v, &n) || n < 1 || n > 64;
      g.target_channels = (int)n;
    } else if (strcmp(o, "--layout") == 0) {
      bad = cli_layout(v, &g.layout) || g.layout == SLABFEED_LAYOUT_AUTO;
    } else if (strcmp(o, "--dtype") == 0) {
      bad = strcmp(v, "f32") != 0 && strcmp(v, "f16") != 0;
      g.float16 = strcmp(v, "f16") == 0;
    } else if (strcmp(o, "--content") == 0) {
      bad = strcmp(v, "index") != 0 && strcmp(v, "field") != 0;
      g.content = strcmp(v, "field") == 0 ? SLABFEED_CONTENT_FIELD
                                          : SLABFEED_CONTENT_INDEX;
    } else if (strcmp(o, "--seed") == 0) {
      bad = cli_u64(v, &g.seed);
    } else {
      cli_usage_fail(prog, usage, "unknown option %s", o);
    }
    if (bad)
      cli_usage_fail(prog, usage, "bad value '%s' for %s", v, o);
    i += used;
  }
  if (g.path == NULL)
    cli_usage_fail(prog, usage, "--file is required");

  char err[1024];
  const double t0 = MPI_Wtime();
  const slabfeed_status st =
      slabfeed_generate(MPI_COMM_WORLD, &g, err, sizeof err);
  const double dt = MPI_Wtime() - t0;
  if (st != SLABFEED_OK)
    cli_fail(prog, st, err);
  if (rank == 0 && !quiet) {
    const double vox =
        (double)g.shape[0] * (double)g.shape[1] * (double)g.shape[2];
    const double bytes =
        vox * (g.float16 ? 2 : 4) *
        (g.input_channels + (g.target ? g.target_channels : 0));
    printf("slabfeed-gen: wrote %s: %s %dx%lldx%lldx%lld%s%s, %s, %s, %s, "
           "%.3f GB in %.2f s on %d ranks (%.2f GB/s)\n",
           g.path, g.input, g.input_channels, (long long)g.shape[0],
           (long long)g.shape[1], (long long)g.shape[2], g.target ? " + " : "",
           g.target ? g.target : "",
           g.layout == SLABFEED_LAYOUT_CL ? "channels-last" : "channels-first",
           g.float16 ? "float16" : "float32",
           g.content == SLABFEED_CONTENT_FIELD ? "field" : "index", bytes / 1e9,
           dt, size, bytes / 1e9 / dt);
  }
  MPI_Finalize();
  return 0;
}
