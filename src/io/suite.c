#include "io/suite.h"

#include "slabfeed_tools.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/geometry.h"

/* ---- Building the list -------------------------------------------------- */

/* The paths found so far, and each file's identity (to find a file
 * listed twice under another name). */
typedef struct list {
  int n, cap;
  char **path;
  struct id {
    dev_t dev;
    ino_t ino;
    int known; /* the file could be stat'ed */
  } * id;
} list;

static void list_free(list *l)
{
  for (int i = 0; i < l->n; i++)
    free(l->path[i]);
  free(l->path);
  free(l->id);
  memset(l, 0, sizeof *l);
}

static slabfeed_status grow(list *l, sf__err *e)
{
  if (l->n < l->cap)
    return SLABFEED_OK;
  const int cap = l->cap ? 2 * l->cap : 16;
  char **p = realloc(l->path, (size_t)cap * sizeof *p);
  if (p != NULL)
    l->path = p;
  struct id *d = realloc(l->id, (size_t)cap * sizeof *d);
  if (d != NULL)
    l->id = d;
  if (p == NULL || d == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: list of volumes");
  l->cap = cap;
  return SLABFEED_OK;
}

/* Appends path (described as `from` in messages), refusing a file
 * already listed. */
static slabfeed_status add(list *l, const char *path, const char *from,
                           sf__err *e)
{
  if (l->n >= SF_SUITE_MAX)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "dataset: more than %d volumes (at %s)", SF_SUITE_MAX,
                    from);
  if (grow(l, e) != SLABFEED_OK)
    return e->status;
  struct stat st;
  const int known = stat(path, &st) == 0;
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->path[i], path) == 0 ||
        (known && l->id[i].known && l->id[i].dev == st.st_dev &&
         l->id[i].ino == st.st_ino))
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "dataset: '%s' (%s) is the same file as volume %d "
                      "'%s': every volume must be listed once",
                      path, from, i, l->path[i]);
  l->path[l->n] = strdup(path);
  if (l->path[l->n] == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: list of volumes");
  l->id[l->n] =
      (struct id){known ? st.st_dev : 0, known ? st.st_ino : 0, known};
  l->n++;
  return SLABFEED_OK;
}

static slabfeed_status manifest(list *l, const char *file, sf__err *e)
{
  FILE *f = fopen(file, "r");
  if (f == NULL)
    return sf__fail(e, SLABFEED_ERR_IO,
                    "dataset: cannot read manifest '%s': %s", file,
                    strerror(errno));
  char line[4200], from[8600];
  int no = 0, any = 0;
  while (e->status == SLABFEED_OK && fgets(line, sizeof line, f) != NULL) {
    no++;
    size_t n = strlen(line);
    if (n == sizeof line - 1 && line[n - 1] != '\n') {
      sf__fail(e, SLABFEED_ERR_ARG,
               "dataset: manifest '%s' line %d is longer than %zu bytes", file,
               no, sizeof line - 2);
      break;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
      line[--n] = '\0';
    if (line[0] == '#')
      continue;
    if (n == 0 || strspn(line, " \t") == n)
      sf__fail(e, SLABFEED_ERR_ARG,
               "dataset: manifest '%s' line %d is blank (one absolute path "
               "per line; '#' starts a comment)",
               file, no);
    else if (line[0] != '/')
      sf__fail(e, SLABFEED_ERR_ARG,
               "dataset: manifest '%s' line %d: '%s' is a relative path; "
               "manifest paths must be absolute (a relative path would "
               "depend on each rank's working directory)",
               file, no, line);
    else {
      snprintf(from, sizeof from, "manifest '%s' line %d", file, no);
      add(l, line, from, e);
      any = 1;
    }
  }
  fclose(f);
  if (e->status == SLABFEED_OK && !any)
    sf__fail(e, SLABFEED_ERR_ARG, "dataset: manifest '%s' lists no file", file);
  return e->status;
}

static slabfeed_status pattern(list *l, const char *pat, sf__err *e)
{
  glob_t g;
  memset(&g, 0, sizeof g);
  const int rc = glob(pat, GLOB_ERR, NULL, &g);
  if (rc == GLOB_NOMATCH || (rc == 0 && g.gl_pathc == 0))
    sf__fail(e, SLABFEED_ERR_ARG, "dataset: pattern '%s' matches no file", pat);
  else if (rc != 0)
    sf__fail(e, SLABFEED_ERR_IO, "dataset: expanding pattern '%s' failed%s",
             pat, rc == GLOB_ABORTED ? " (a directory could not be read)" : "");
  char from[4300];
  snprintf(from, sizeof from, "from pattern '%s'", pat);
  for (size_t i = 0; rc == 0 && i < g.gl_pathc && e->status == SLABFEED_OK; i++)
    add(l, g.gl_pathv[i], from, e); /* glob sorts its matches */
  if (rc == 0)
    globfree(&g);
  return e->status;
}

slabfeed_status sf__suite_expand(const char *spec, sf__suite *s, sf__err *e)
{
  memset(s, 0, sizeof *s);
  list l;
  memset(&l, 0, sizeof l);
  if (spec == NULL || spec[0] == '\0')
    return sf__fail(e, SLABFEED_ERR_ARG, "dataset: no path given");
  const char *p = spec;
  for (int entry = 1; e->status == SLABFEED_OK; entry++) {
    const char *nl = strchr(p, '\n');
    const size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
    char item[4200];
    if (n == 0) {
      sf__fail(e, SLABFEED_ERR_ARG,
               "dataset: entry %d of the path list is empty", entry);
      break;
    }
    if (n >= sizeof item) {
      sf__fail(e, SLABFEED_ERR_ARG,
               "dataset: entry %d is longer than %zu bytes", entry,
               sizeof item - 1);
      break;
    }
    memcpy(item, p, n);
    item[n] = '\0';
    if (item[0] == '@')
      manifest(&l, item + 1, e);
    else if (strpbrk(item, "*?[") != NULL)
      pattern(&l, item, e);
    else
      add(&l, item, "as given", e);
    if (nl == NULL)
      break;
    p = nl + 1;
  }
  if (e->status == SLABFEED_OK) {
    s->path = l.path;
    s->n = l.n;
    l.path = NULL;
    l.n = 0;
    s->z0 = calloc((size_t)s->n + 1, sizeof *s->z0);
    s->shape = calloc((size_t)s->n, sizeof *s->shape);
    if (s->z0 == NULL || s->shape == NULL) {
      sf__suite_free(s);
      sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: list of volumes");
    }
  }
  list_free(&l);
  return e->status;
}

/* ---- Sharing it --------------------------------------------------------- */

slabfeed_status sf__suite_bcast(sf__suite *s, MPI_Comm comm, int root,
                                sf__err *e)
{
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  /* The root's outcome first: on failure no rank goes on. */
  if (sf__agree(comm, e) != SLABFEED_OK) {
    sf__suite_free(s);
    return e->status;
  }
  /* The paths as one buffer of NUL-terminated strings. */
  long long len = 0;
  int n = rank == root ? s->n : 0;
  for (int i = 0; rank == root && i < s->n; i++)
    len += (long long)strlen(s->path[i]) + 1;
  long long hdr[2] = {n, len};
  int rc = MPI_Bcast(hdr, 2, MPI_LONG_LONG, root, comm);
  if (rc != MPI_SUCCESS)
    return sf__fail_mpi(e, rc, "MPI_Bcast (list of volumes)");
  n = (int)hdr[0];
  len = hdr[1];
  char *buf = malloc((size_t)len + 1);
  if (buf != NULL && rank == root)
    for (int i = 0, at = 0; i < n; i++) {
      const size_t k = strlen(s->path[i]) + 1;
      memcpy(buf + at, s->path[i], k);
      at += (int)k;
    }
  /* Bcast counts are int: in pieces of 1 GiB at most. */
  for (long long at = 0; buf != NULL && at < len && rc == MPI_SUCCESS;
       at += 1 << 30) {
    const int k = (int)(len - at < (1 << 30) ? len - at : (1 << 30));
    rc = MPI_Bcast(buf + at, k, MPI_CHAR, root, comm);
  }
  if (buf == NULL)
    sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: list of volumes");
  else if (rc != MPI_SUCCESS)
    sf__fail_mpi(e, rc, "MPI_Bcast (list of volumes)");
  if (e->status == SLABFEED_OK && rank != root) {
    sf__suite_free(s);
    s->n = n;
    s->path = calloc((size_t)n, sizeof *s->path);
    s->z0 = calloc((size_t)n + 1, sizeof *s->z0);
    s->shape = calloc((size_t)n, sizeof *s->shape);
    if (s->path == NULL || s->z0 == NULL || s->shape == NULL)
      sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: list of volumes");
    for (int i = 0, at = 0; e->status == SLABFEED_OK && i < n; i++) {
      s->path[i] = strdup(buf + at);
      if (s->path[i] == NULL)
        sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: list of volumes");
      at += (int)strlen(buf + at) + 1;
    }
  }
  free(buf);
  if (sf__agree(comm, e) != SLABFEED_OK)
    sf__suite_free(s);
  return e->status;
}

slabfeed_status sf__suite_copy(sf__suite *dst, const sf__suite *src, sf__err *e)
{
  memset(dst, 0, sizeof *dst);
  dst->n = src->n;
  dst->path = calloc((size_t)src->n, sizeof *dst->path);
  dst->z0 = malloc(((size_t)src->n + 1) * sizeof *dst->z0);
  dst->shape = malloc((size_t)src->n * sizeof *dst->shape + 1);
  int ok = dst->path != NULL && dst->z0 != NULL && dst->shape != NULL;
  for (int i = 0; ok && i < src->n; i++)
    ok = (dst->path[i] = strdup(src->path[i])) != NULL;
  if (!ok) {
    sf__suite_free(dst);
    return sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: list of volumes");
  }
  memcpy(dst->z0, src->z0, ((size_t)src->n + 1) * sizeof *dst->z0);
  memcpy(dst->shape, src->shape, (size_t)src->n * sizeof *dst->shape);
  return SLABFEED_OK;
}

void sf__suite_free(sf__suite *s)
{
  for (int i = 0; s->path != NULL && i < s->n; i++)
    free(s->path[i]);
  free(s->path);
  free(s->z0);
  free(s->shape);
  memset(s, 0, sizeof *s);
}

int sf__suite_of(const sf__suite *s, int64_t z)
{
  return sf__last_at_or_below(s->z0, s->n, z); /* the last with z0 <= z */
}

/* ---- Public: the expansion for tools ------------------------------------ */

slabfeed_status slabfeed_volumes_expand(const char *spec, char ***paths, int *n,
                                        char *errbuf, size_t errlen)
{
  sf__err e;
  sf__err_clear(&e);
  if (paths == NULL || n == NULL) {
    sf__fail(&e, SLABFEED_ERR_ARG, "slabfeed_volumes_expand: NULL output");
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  *paths = NULL;
  *n = 0;
  sf__suite s;
  if (sf__suite_expand(spec, &s, &e) == SLABFEED_OK) {
    *paths = s.path;
    *n = s.n;
    free(s.z0);
    free(s.shape);
  }
  sf__err_copy(&e, errbuf, errlen);
  return e.status;
}

void slabfeed_volumes_free(char **paths, int n)
{
  for (int i = 0; paths != NULL && i < n; i++)
    free(paths[i]);
  free(paths);
}
