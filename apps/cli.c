#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

void cli_usage_fail(const char *prog, const char *usage, const char *fmt, ...)
{
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nusage: %s %s\n", prog, usage);
    va_end(ap);
  }
  MPI_Finalize();
  exit(2);
}

void cli_fail(const char *prog, slabfeed_status st, const char *msg)
{
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "%s: [rank %d] %s: %s\n", prog, rank, slabfeed_strerror(st),
          msg);
  MPI_Finalize();
  exit(1);
}

int cli_int64(const char *s, int64_t *out)
{
  char *end;
  errno = 0;
  const long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0')
    return -1;
  *out = v;
  return 0;
}

int cli_u64(const char *s, uint64_t *out)
{
  char *end;
  errno = 0;
  const unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-')
    return -1;
  *out = v;
  return 0;
}

int cli_triple(const char *s, int64_t out[3])
{
  char buf[128];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL, *tok = strtok_r(buf, ",x", &save);
  int n = 0;
  while (tok != NULL && n < 3) {
    if (cli_int64(tok, &out[n++]) != 0)
      return -1;
    tok = strtok_r(NULL, ",x", &save);
  }
  if (tok != NULL || (n != 1 && n != 3))
    return -1;
  if (n == 1)
    out[1] = out[2] = out[0];
  return 0;
}

int cli_vector(const char *s, int out[3])
{
  int64_t t[3];
  if (strchr(s, ',') == NULL || cli_triple(s, t) != 0)
    return -1;
  for (int a = 0; a < 3; a++)
    out[a] = (int)t[a];
  return 0;
}

#define MATCH(s, name, value)                                                  \
  if (strcmp((s), (name)) == 0) {                                              \
    *out = (value);                                                            \
    return 0;                                                                  \
  }

int cli_layout(const char *s, slabfeed_file_layout *out)
{
  MATCH(s, "auto", SLABFEED_LAYOUT_AUTO);
  MATCH(s, "cf", SLABFEED_LAYOUT_CF);
  MATCH(s, "cl", SLABFEED_LAYOUT_CL);
  return -1;
}

int cli_symmetries(const char *s, slabfeed_symmetries *out)
{
  MATCH(s, "all", SLABFEED_SYM_ALL);
  MATCH(s, "rotations", SLABFEED_SYM_ROTATIONS);
  MATCH(s, "none", SLABFEED_SYM_NONE);
  return -1;
}

int cli_dtype(const char *s, slabfeed_dtype *out)
{
  MATCH(s, "f32", SLABFEED_DTYPE_F32);
  MATCH(s, "f16", SLABFEED_DTYPE_F16);
  MATCH(s, "bf16", SLABFEED_DTYPE_BF16);
  return -1;
}

int cli_out_layout(const char *s, slabfeed_out_layout *out)
{
  MATCH(s, "ncdhw", SLABFEED_OUT_NCDHW);
  MATCH(s, "ndhwc", SLABFEED_OUT_NDHWC);
  return -1;
}

const char *cli_dtype_name(slabfeed_dtype d)
{
  return d == SLABFEED_DTYPE_F32   ? "f32"
         : d == SLABFEED_DTYPE_F16 ? "f16"
                                   : "bf16";
}

const char *cli_layout_name(slabfeed_file_layout l)
{
  return l == SLABFEED_LAYOUT_CF   ? "channels-first (C,Z,Y,X)"
         : l == SLABFEED_LAYOUT_CL ? "channels-last (Z,Y,X,C)"
                                   : "auto";
}

uint64_t cli_peak_rss(void)
{
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return 0;
  return (uint64_t)ru.ru_maxrss * 1024u;
}

void cli_rss_parts(uint64_t *anon, uint64_t *shmem)
{
  *anon = *shmem = 0;
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL)
    return;
  char line[256];
  unsigned long long kb;
  while (fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, "RssAnon: %llu kB", &kb) == 1)
      *anon = (uint64_t)kb * 1024u;
    else if (sscanf(line, "RssShmem: %llu kB", &kb) == 1)
      *shmem = (uint64_t)kb * 1024u;
  }
  fclose(f);
}

const char cli_loader_usage[] =
    "--file F --input NAME [--target NAME] [--layout auto|cf|cl] --crop C "
    "--batch B [--seed S] [--symmetries all|rotations|none] "
    "[--input-vector K0,K1,K2]... [--target-vector K0,K1,K2]... "
    "[--dtype f32|f16|bf16] [--out-layout ncdhw|ndhwc] [--device -1|N] "
    "[--halo H] [--prefetch K] [--rank-per-node]";

static int loader_option(int argc, char **argv, int *i, slabfeed_config *cfg)
{
  const char *opt = argv[*i];
  if (strcmp(opt, "--rank-per-node") == 0) {
    cfg->rank_per_node = 1;
    return 1;
  }
  static const char *const with_value[] = {
      "--file",  "--input",         "--target",   "--layout",
      "--crop",  "--batch",         "--seed",     "--symmetries",
      "--dtype", "--out-layout",    "--device",   "--input-vector",
      "--halo",  "--target-vector", "--prefetch", NULL};
  int known = 0;
  for (int k = 0; with_value[k] != NULL; k++)
    known |= strcmp(opt, with_value[k]) == 0;
  if (!known)
    return 0;
  if (*i + 1 >= argc)
    return -1;
  const char *v = argv[++*i];
  int64_t n = 0;
  if (strcmp(opt, "--file") == 0)
    cfg->path = v;
  else if (strcmp(opt, "--input") == 0)
    cfg->input = v;
  else if (strcmp(opt, "--target") == 0)
    cfg->target = v;
  else if (strcmp(opt, "--layout") == 0)
    return cli_layout(v, &cfg->layout) == 0 ? 1 : -1;
  else if (strcmp(opt, "--crop") == 0)
    return cli_triple(v, cfg->crop) == 0 ? 1 : -1;
  else if (strcmp(opt, "--seed") == 0)
    return cli_u64(v, &cfg->seed) == 0 ? 1 : -1;
  else if (strcmp(opt, "--symmetries") == 0)
    return cli_symmetries(v, &cfg->symmetries) == 0 ? 1 : -1;
  else if (strcmp(opt, "--dtype") == 0)
    return cli_dtype(v, &cfg->dtype) == 0 ? 1 : -1;
  else if (strcmp(opt, "--out-layout") == 0)
    return cli_out_layout(v, &cfg->out_layout) == 0 ? 1 : -1;
  else if (strcmp(opt, "--input-vector") == 0) {
    if (cfg->n_input_vectors >= SLABFEED_MAX_VECTORS)
      return -1;
    return cli_vector(v, cfg->input_vectors[cfg->n_input_vectors++]) == 0 ? 1
                                                                          : -1;
  } else if (strcmp(opt, "--target-vector") == 0) {
    if (cfg->n_target_vectors >= SLABFEED_MAX_VECTORS)
      return -1;
    return cli_vector(v, cfg->target_vectors[cfg->n_target_vectors++]) == 0
               ? 1
               : -1;
  } else {
    if (cli_int64(v, &n) != 0 || n < -1000000000 || n > 1000000000)
      return -1;
    if (strcmp(opt, "--batch") == 0)
      cfg->batch = (int)n;
    else if (strcmp(opt, "--device") == 0)
      cfg->device = (int)n;
    else if (strcmp(opt, "--halo") == 0)
      cfg->halo = (int)n;
    else
      cfg->prefetch = (int)n;
  }
  return 1;
}

int cli_loader_option(const char *prog, const char *usage, int argc,
                      char **argv, int *i, slabfeed_config *cfg)
{
  const char *opt = argv[*i];
  const int r = loader_option(argc, argv, i, cfg);
  if (r < 0)
    cli_usage_fail(prog, usage, "bad or missing value for %s", opt);
  return r;
}
