/* Path specs expanded by the library (slabfeed_volumes_expand), shared
 * over MPI, and matched against output names (see spec.h). */
#include "spec.h"

#include "slabfeed_tools.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_spec_free(cli_spec *s)
{
  slabfeed_volumes_free(s->path, s->n);
  s->path = NULL;
  s->n = 0;
}

int cli_spec_expand(const char *spec, cli_spec *s, char *err, size_t errlen)
{
  s->path = NULL;
  s->n = 0;
  return slabfeed_volumes_expand(spec, &s->path, &s->n, err, errlen) ==
                 SLABFEED_OK
             ? 0
             : -1;
}

int cli_spec_plain(const char *spec)
{
  return spec != NULL && spec[0] != '\0' && spec[0] != '@' &&
         strpbrk(spec, "\n*?[") == NULL;
}

/* The entry of spec at p into item (len bytes; *n its length, which may
 * exceed len - 1: then item is cut); returns its newline or NULL. */
static const char *next_entry(const char *p, char *item, size_t len, size_t *n)
{
  const char *nl = strchr(p, '\n');
  *n = nl != NULL ? (size_t)(nl - p) : strlen(p);
  snprintf(item, len, "%.*s", (int)(*n < len ? *n : len - 1), p);
  return nl;
}

int cli_spec_pattern_matches(const char *spec, const char *path, char *pat,
                             size_t len)
{
  for (const char *p = spec; p != NULL && *p != '\0';) {
    char item[CLI_PATH_MAX];
    size_t n;
    const char *nl = next_entry(p, item, sizeof item, &n);
    if (n > 0 && n < sizeof item && item[0] != '@' &&
        strpbrk(item, "*?[") != NULL &&
        fnmatch(item, path, FNM_PATHNAME | FNM_PERIOD) == 0) {
      snprintf(pat, len, "%s", item);
      return 1;
    }
    p = nl != NULL ? nl + 1 : NULL;
  }
  return 0;
}

int cli_spec_bcast(cli_spec *s, int ok, int root, MPI_Comm comm)
{
  int rank;
  MPI_Comm_rank(comm, &rank);
  long long hdr[2] = {ok ? s->n : -1, 0}; /* volumes (-1: failed), bytes */
  for (int i = 0; rank == root && ok && i < s->n; i++)
    hdr[1] += (long long)strlen(s->path[i]) + 1;
  MPI_Bcast(hdr, 2, MPI_LONG_LONG, root, comm);
  if (hdr[0] < 0) {
    cli_spec_free(s);
    return -1;
  }
  char *buf = malloc((size_t)hdr[1] + 1);
  int good = buf != NULL, all = 0;
  MPI_Allreduce(&good, &all, 1, MPI_INT, MPI_MIN, comm);
  if (!all) {
    free(buf);
    cli_spec_free(s);
    return -1;
  }
  if (rank == root)
    for (int i = 0, at = 0; i < s->n; i++) {
      const size_t k = strlen(s->path[i]) + 1;
      memcpy(buf + at, s->path[i], k);
      at += (int)k;
    }
  for (long long at = 0; at < hdr[1]; at += 1 << 30) {
    const int k = (int)(hdr[1] - at < (1 << 30) ? hdr[1] - at : (1 << 30));
    MPI_Bcast(buf + at, k, MPI_CHAR, root, comm);
  }
  good = 1;
  if (rank != root) {
    cli_spec_free(s);
    s->path = calloc((size_t)hdr[0] + 1, sizeof *s->path);
    good = s->path != NULL;
    for (long long i = 0, at = 0; good && i < hdr[0]; i++) {
      good = (s->path[i] = strdup(buf + at)) != NULL;
      s->n = (int)i + good;
      at += (long long)strlen(buf + at) + 1;
    }
  }
  free(buf);
  MPI_Allreduce(&good, &all, 1, MPI_INT, MPI_MIN, comm);
  if (!all) {
    cli_spec_free(s);
    return -1;
  }
  return 0;
}
