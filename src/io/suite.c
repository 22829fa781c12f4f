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
  char **cols; /* manifest columns, or NULL */
  struct id {
    dev_t dev;
    ino_t ino;
    int known; /* the file could be stat'ed */
  } * id;
} list;

static void list_free(list *l)
{
  for (int i = 0; i < l->n; i++) {
    free(l->path[i]);
    free(l->cols[i]);
  }
  free(l->path);
  free(l->cols);
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
  char **c = realloc(l->cols, (size_t)cap * sizeof *c);
  if (c != NULL)
    l->cols = c;
  struct id *d = realloc(l->id, (size_t)cap * sizeof *d);
  if (d != NULL)
    l->id = d;
  if (p == NULL || c == NULL || d == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: list of volumes");
  l->cap = cap;
  return SLABFEED_OK;
}

/* Appends path (described as `from` in messages) with its manifest
 * columns (or NULL), refusing a file already listed. */
static slabfeed_status add(list *l, const char *path, const char *cols,
                           const char *from, sf__err *e)
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
  l->cols[l->n] = cols != NULL && cols[0] != '\0' ? strdup(cols) : NULL;
  if (l->path[l->n] == NULL ||
      (cols != NULL && cols[0] != '\0' && l->cols[l->n] == NULL)) {
    free(l->path[l->n]);
    free(l->cols[l->n]);
    return sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: list of volumes");
  }
  l->id[l->n] =
      (struct id){known ? st.st_dev : 0, known ? st.st_ino : 0, known};
  l->n++;
  return SLABFEED_OK;
}

/* Whether s (n bytes) is one number as strtod reads it. */
static int is_number(const char *s, size_t n)
{
  char num[128];
  char *end = num;
  if (n == 0 || n >= sizeof num)
    return 0;
  memcpy(num, s, n);
  num[n] = '\0';
  (void)strtod(num, &end);
  return end != num && *end == '\0';
}

/* Blank-separated token [a, b) of `line`: a column NAME=VALUE? 1 when it
 * is NAME=NUMBER, 2 when NAME=TEXT (a field's file, 0.7), 0 when it holds
 * no '=', -1 (a failure in *e, naming the line) when its name or value is
 * empty. */
static int column(const char *line, size_t a, size_t b, const char *where,
                  sf__err *e)
{
  const char *eq = memchr(line + a, '=', b - a);
  if (eq == NULL)
    return 0;
  const size_t nlen = (size_t)(line + b - (eq + 1));
  if (eq == line + a || nlen == 0) {
    sf__fail(e, SLABFEED_ERR_ARG,
             "dataset: %s: column '%.*s' is not NAME=VALUE (a manifest line "
             "is a path, then optional columns NAME=VALUE: a number, or the "
             "file of a field)",
             where, (int)(b - a), line + a);
    return -1;
  }
  return is_number(eq + 1, nlen) ? 1 : 2;
}

/* Splits a manifest line (no newline) into its path and the columns at
 * its end: cols gets the columns, blank-separated ("" when none), a text
 * value that is a relative path joined to `folder` (the manifest's; NULL
 * or "" for none), and line is cut after its path. */
static slabfeed_status split_columns(char *line, char *cols, size_t cap,
                                     const char *folder, const char *where,
                                     sf__err *e)
{
  size_t end = strlen(line), first = end;
  for (;;) {
    size_t b = end;
    while (b > 0 && (line[b - 1] == ' ' || line[b - 1] == '\t'))
      b--;
    size_t a = b;
    while (a > 0 && line[a - 1] != ' ' && line[a - 1] != '\t')
      a--;
    if (a == 0 || a == b)
      break; /* the first token is the path */
    const int c = column(line, a, b, where, e);
    if (c < 0)
      return e->status;
    if (c == 0)
      break;
    first = a;
    end = a;
  }
  /* The columns in order, text values relative to the manifest's folder. */
  size_t used = 0;
  cols[0] = '\0';
  for (const char *p = line + first; *p != '\0' && used + 1 < cap;) {
    p += strspn(p, " \t");
    const size_t len = strcspn(p, " \t");
    if (len == 0)
      break;
    const char *eq = memchr(p, '=', len);
    const int text =
        eq != NULL && !is_number(eq + 1, (size_t)(p + len - eq - 1));
    const int join = text && eq[1] != '/' && folder != NULL && folder[0];
    const int k = join ? snprintf(cols + used, cap - used, "%s%.*s%s/%.*s",
                                  used ? " " : "", (int)(eq + 1 - p), p, folder,
                                  (int)(p + len - eq - 1), eq + 1)
                       : snprintf(cols + used, cap - used, "%s%.*s",
                                  used ? " " : "", (int)len, p);
    if (k < 0 || (size_t)k >= cap - used)
      return sf__fail(e, SLABFEED_ERR_ARG, "dataset: %s: columns too long",
                      where);
    used += (size_t)k;
    p += len;
  }
  size_t n = first;
  while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t'))
    n--;
  line[n] = '\0';
  /* A column named twice on one line is a typo, not a choice. */
  for (const char *p = cols; *p != '\0';) {
    const size_t len = strcspn(p, " \t"), name = strcspn(p, "=");
    for (const char *q = p + len; *q != '\0';) {
      q += strspn(q, " \t");
      if (strncmp(q, p, name + 1) == 0)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "dataset: %s: column '%.*s' is given twice", where,
                        (int)name, p);
      q += strcspn(q, " \t");
    }
    p += len;
    p += strspn(p, " \t");
  }
  return SLABFEED_OK;
}

static slabfeed_status manifest(list *l, const char *file, sf__err *e)
{
  FILE *f = fopen(file, "r");
  if (f == NULL)
    return sf__fail(e, SLABFEED_ERR_IO,
                    "dataset: cannot read manifest '%s': %s", file,
                    strerror(errno));
  char line[4200], from[8600], cols[4200];
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
               "dataset: manifest '%s' line %d is blank (one path per line, "
               "absolute or relative to the manifest's folder; '#' starts a "
               "comment)",
               file, no);
    else {
      snprintf(from, sizeof from, "manifest '%s' line %d", file, no);
      /* A relative path is relative to the manifest's folder (0.7). */
      char full[8400];
      const char *slash = strrchr(file, '/');
      if (line[0] != '/' && slash != NULL)
        snprintf(full, sizeof full, "%.*s/%s", (int)(slash - file), file, line);
      else
        snprintf(full, sizeof full, "%s", line);
      char folder[4200] = "";
      if (slash != NULL)
        snprintf(folder, sizeof folder, "%.*s", (int)(slash - file), file);
      if (split_columns(full, cols, sizeof cols, folder, from, e) ==
          SLABFEED_OK)
        add(l, full, cols, from, e);
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
    add(l, g.gl_pathv[i], NULL, from, e); /* glob sorts its matches */
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
      add(&l, item, NULL, "as given", e);
    if (nl == NULL)
      break;
    p = nl + 1;
  }
  if (e->status == SLABFEED_OK) {
    s->path = l.path;
    s->cols = l.cols;
    s->n = l.n;
    l.path = NULL;
    l.cols = NULL;
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
  /* The paths and their columns as one buffer of NUL-terminated strings:
   * path, columns ("" for none), path, ... */
  long long len = 0;
  int n = rank == root ? s->n : 0;
  for (int i = 0; rank == root && i < s->n; i++)
    len += (long long)strlen(s->path[i]) + 2 +
           (s->cols[i] != NULL ? (long long)strlen(s->cols[i]) : 0);
  long long hdr[2] = {n, len};
  int rc = MPI_Bcast(hdr, 2, MPI_LONG_LONG, root, comm);
  if (rc != MPI_SUCCESS)
    return sf__fail_mpi(e, rc, "MPI_Bcast (list of volumes)");
  n = (int)hdr[0];
  len = hdr[1];
  char *buf = malloc((size_t)len + 1);
  if (buf != NULL && rank == root)
    for (long long i = 0, at = 0; i < n; i++) {
      const char *c = s->cols[i] != NULL ? s->cols[i] : "";
      const size_t k = strlen(s->path[i]) + 1, m = strlen(c) + 1;
      memcpy(buf + at, s->path[i], k);
      memcpy(buf + at + k, c, m);
      at += (long long)(k + m);
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
    s->cols = calloc((size_t)n, sizeof *s->cols);
    s->z0 = calloc((size_t)n + 1, sizeof *s->z0);
    s->shape = calloc((size_t)n, sizeof *s->shape);
    if (s->path == NULL || s->cols == NULL || s->z0 == NULL || s->shape == NULL)
      sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: list of volumes");
    for (long long i = 0, at = 0; e->status == SLABFEED_OK && i < n; i++) {
      s->path[i] = strdup(buf + at);
      at += (long long)strlen(buf + at) + 1;
      if (buf[at] != '\0')
        s->cols[i] = strdup(buf + at);
      if (s->path[i] == NULL || (buf[at] != '\0' && s->cols[i] == NULL))
        sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: list of volumes");
      at += (long long)strlen(buf + at) + 1;
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
  dst->cols = calloc((size_t)src->n, sizeof *dst->cols);
  dst->z0 = malloc(((size_t)src->n + 1) * sizeof *dst->z0);
  dst->shape = malloc((size_t)src->n * sizeof *dst->shape + 1);
  const size_t np = (size_t)src->n * (size_t)src->nparam;
  dst->nparam = src->nparam;
  dst->param = np > 0 ? malloc(np * sizeof *dst->param) : NULL;
  int ok = dst->path != NULL && dst->cols != NULL && dst->z0 != NULL &&
           dst->shape != NULL && (np == 0 || dst->param != NULL);
  for (int i = 0; ok && i < src->n; i++)
    ok =
        (dst->path[i] = strdup(src->path[i])) != NULL &&
        (src->cols[i] == NULL || (dst->cols[i] = strdup(src->cols[i])) != NULL);
  if (!ok) {
    sf__suite_free(dst);
    return sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: list of volumes");
  }
  memcpy(dst->z0, src->z0, ((size_t)src->n + 1) * sizeof *dst->z0);
  memcpy(dst->shape, src->shape, (size_t)src->n * sizeof *dst->shape);
  if (np > 0)
    memcpy(dst->param, src->param, np * sizeof *dst->param);
  return SLABFEED_OK;
}

void sf__suite_free(sf__suite *s)
{
  for (int i = 0; s->path != NULL && i < s->n; i++)
    free(s->path[i]);
  for (int i = 0; s->cols != NULL && i < s->n; i++)
    free(s->cols[i]);
  free(s->path);
  free(s->cols);
  free(s->param);
  free(s->z0);
  free(s->shape);
  memset(s, 0, sizeof *s);
}

int sf__suite_text(const sf__suite *s, int i, const char *name, char *out,
                   size_t len)
{
  const size_t n = strlen(name);
  for (const char *p = s->cols != NULL ? s->cols[i] : NULL;
       p != NULL && *p != '\0';) {
    const size_t tl = strcspn(p, " \t");
    if (tl > n && strncmp(p, name, n) == 0 && p[n] == '=') {
      snprintf(out, len, "%.*s", (int)(tl - n - 1), p + n + 1);
      return 1;
    }
    p += tl;
    p += strspn(p, " \t");
  }
  return 0;
}

int sf__suite_column(const sf__suite *s, int i, const char *name, double *value)
{
  char text[4200];
  if (!sf__suite_text(s, i, name, text, sizeof text))
    return 0;
  if (!is_number(text, strlen(text)))
    return -1;
  *value = strtod(text, NULL);
  return 1;
}

slabfeed_status sf__suite_from_column(const sf__suite *s, const char *name,
                                      const char *what, sf__suite *out,
                                      sf__err *e)
{
  memset(out, 0, sizeof *out);
  out->path = calloc((size_t)s->n, sizeof *out->path);
  out->cols = calloc((size_t)s->n, sizeof *out->cols); /* none */
  out->z0 = calloc((size_t)s->n + 1, sizeof *out->z0);
  out->shape = calloc((size_t)s->n, sizeof *out->shape);
  if (out->path == NULL || out->cols == NULL || out->z0 == NULL ||
      out->shape == NULL) {
    sf__suite_free(out);
    return sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: the files of %s", what);
  }
  out->n = s->n;
  for (int i = 0; i < s->n; i++) {
    char text[4200];
    if (!sf__suite_text(s, i, name, text, sizeof text)) {
      sf__fail(e, SLABFEED_ERR_ARG,
               "dataset: %s: volume %d '%s' has no manifest column %s=FILE "
               "(name each volume's file of the field on its manifest line)",
               what, i, s->path[i], name);
      break;
    }
    if ((out->path[i] = strdup(text)) == NULL) {
      sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: the files of %s", what);
      break;
    }
  }
  if (e->status != SLABFEED_OK)
    sf__suite_free(out);
  return e->status;
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
    for (int i = 0; i < s.n; i++)
      free(s.cols[i]);
    free(s.cols);
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
