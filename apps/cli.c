/* The apps' table-driven option parser, usage text and small helpers (see
 * cli.h). Public API only. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
  MAX_OPTIONS = 64, /* per group */
  WIDTH = 79,       /* of the usage and help text */
  HELP_COLUMN = 26  /* where the help sentence of an option starts */
};

/* ---- Strict numbers ------------------------------------------------------ */

/* Writes a reason to err (printf style); returns -1 for the callers'
 * `return reason(...)`. */
__attribute__((format(printf, 3, 4))) static int
reason(char *err, size_t errlen, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

/* Checks the shape of a decimal integer, [sign]digits, before strtoll and
 * strtoull see it: they skip leading space and take "-1" as 2^64-1. */
static int integer_text(const char *s, int allow_minus)
{
  if (*s == '+' || (allow_minus && *s == '-'))
    s++;
  if (*s < '0' || *s > '9')
    return 0;
  while (*s >= '0' && *s <= '9')
    s++;
  return *s == '\0';
}

/* See cli.h: a decimal integer in [min, max], checked before conversion
 * and for overflow. */
int cli_parse_int(const char *s, int64_t min, int64_t max, int64_t *out,
                  char *err, size_t errlen)
{
  if (*s == '\0')
    return reason(err, errlen, "empty value, expected an integer");
  if (!integer_text(s, min < 0))
    return reason(err, errlen, "'%s' is not %s", s,
                  min < 0 ? "an integer" : "a non-negative integer");
  char *end;
  errno = 0;
  const long long v = strtoll(s, &end, 10);
  if ((errno == ERANGE && *s == '-') || v < min)
    return reason(err, errlen, "'%s' is less than the minimum %lld", s,
                  (long long)min);
  if (errno == ERANGE || v > max)
    return reason(err, errlen, "'%s' is more than the maximum %lld", s,
                  (long long)max);
  *out = v;
  return 0;
}

/* A uint64_t: digits only (no sign, no space), at most 2^64-1. */
static int parse_u64(const char *s, uint64_t *out, char *err, size_t errlen)
{
  if (*s == '\0')
    return reason(err, errlen, "empty value, expected an integer");
  if (!integer_text(s, 0))
    return reason(err, errlen, "'%s' is not a non-negative integer", s);
  char *end;
  errno = 0;
  const unsigned long long v = strtoull(s, &end, 10);
  if (errno == ERANGE)
    return reason(err, errlen, "'%s' is more than the maximum %llu", s,
                  (unsigned long long)UINT64_MAX);
  *out = v;
  return 0;
}

/* A finite double in [min, max] (any range when min >= max), the whole
 * text a number: atof would take "5ms" as 5 and "x" as 0. */
static int parse_double(const char *s, double min, double max, double *out,
                        char *err, size_t errlen)
{
  if (*s == '\0')
    return reason(err, errlen, "empty value, expected a number");
  char *end;
  errno = 0;
  const double v = strtod(s, &end);
  const int lead = (*s >= '0' && *s <= '9') || *s == '-' || *s == '+' ||
                   *s == '.'; /* no leading space */
  if (!lead || *end != '\0' || end == s || !isfinite(v))
    return reason(err, errlen, "'%s' is not a number", s);
  if (errno == ERANGE || (min < max && (v < min || v > max)))
    return reason(err, errlen, "'%s' is out of range [%g, %g]", s, min, max);
  *out = v;
  return 0;
}

/* Splits s at any of `seps` into at most maxn integers in [min, max]; an
 * empty piece ("1,,2") is an error. *n gets the count. */
static int parse_list(const char *s, const char *seps, int64_t min, int64_t max,
                      int64_t *out, int maxn, int *n, char *err, size_t errlen)
{
  char buf[128];
  if (strlen(s) >= sizeof buf)
    return reason(err, errlen, "'%.20s...' is too long", s);
  memcpy(buf, s, strlen(s) + 1);
  *n = 0;
  char *p = buf;
  for (;;) {
    char *end = p + strcspn(p, seps);
    const int last = *end == '\0';
    *end = '\0';
    if (*n == maxn)
      return reason(err, errlen, "'%s' has more than %d values", s, maxn);
    char why[160];
    if (cli_parse_int(p, min, max, &out[(*n)++], why, sizeof why) != 0)
      return reason(err, errlen, "in '%s': %s", s, why);
    if (last)
      return 0;
    p = end + 1;
  }
}

/* See cli.h; out is written only on success. */
int cli_parse_triple(const char *s, int64_t out[3], char *err, size_t errlen)
{
  int n = 0;
  int64_t t[3];
  if (parse_list(s, ",x", INT64_MIN, INT64_MAX, t, 3, &n, err, errlen) != 0)
    return -1;
  if (n == 2)
    return reason(err, errlen, "'%s': expected A,B,C or one value", s);
  for (int a = 0; a < 3; a++)
    out[a] = t[n == 1 ? 0 : a];
  return 0;
}

/* ---- Storing one option -------------------------------------------------- */

/* "a\nb": the path spec of repeated --file flags. The joined strings live
 * until exit (the config points at them). */
static char **joined;
static int njoined;

static void free_joined(void)
{
  for (int i = 0; i < njoined; i++)
    free(joined[i]);
  free(joined);
}

static const char *join_paths(const char *a, const char *b)
{
  const size_t n = strlen(a) + strlen(b) + 2;
  char *j = malloc(n);
  char **grown = realloc(joined, (size_t)(njoined + 1) * sizeof *joined);
  if (j == NULL || grown == NULL) {
    free(j);
    if (grown != NULL)
      joined = grown;
    return NULL;
  }
  if (joined == NULL)
    atexit(free_joined);
  joined = grown;
  joined[njoined++] = j;
  snprintf(j, n, "%s\n%s", a, b);
  return j;
}

/* Whether the option is followed by a value. */
static int takes_value(const cli_option *o)
{
  if (o->kind == CLI_OPTION)
    return o->option->kind != SLABFEED_OPTION_SWITCH;
  return o->kind != CLI_FLAG && !(o->kind == CLI_CALL && o->metavar == NULL);
}

/* A size: bytes, or a number with a binary suffix K, M, G or T ("200G").
 * Returns 0, or -1 after writing the reason to err. */
static int parse_size(const char *value, uint64_t *out, char *err,
                      size_t errlen)
{
  char *end;
  errno = 0;
  const double v = strtod(value, &end);
  double scale = 1;
  if (*end != '\0' && end[1] == '\0') {
    const char *units = "KMGT";
    const char *u = strchr(units, *end);
    if (u != NULL) {
      scale = ldexp(1.0, 10 * (int)(u - units + 1));
      end++;
    }
  }
  if (end == value || *end != '\0' || errno != 0 || !(v > 0) ||
      v * scale >= 0x1p63) {
    snprintf(err, errlen,
             "'%s' is not a size (bytes, or a number with K, M, G or T)",
             value);
    return -1;
  }
  *out = (uint64_t)(v * scale);
  return 0;
}

/* The integer range of an option: its own when min < max, else the type's. */
static void int_range(const cli_option *o, int64_t *min, int64_t *max)
{
  if (o->min < o->max) {
    *min = o->min;
    *max = o->max;
  } else if (o->kind == CLI_INT) {
    *min = INT_MIN;
    *max = INT_MAX;
  } else {
    *min = INT64_MIN;
    *max = INT64_MAX;
  }
}

/* The names of a CLI_ENUM option's choices, "a|b|c", in buf. */
static const char *choice_names(const cli_option *o, char *buf, size_t n)
{
  buf[0] = '\0';
  for (const cli_choice *c = o->choices; c->name != NULL; c++)
    snprintf(buf + strlen(buf), n - strlen(buf), "%s%s",
             c == o->choices ? "" : "|", c->name);
  return buf;
}

/* Reads value (NULL for flags) into the option's destination in base. */
static int store(const cli_option *o, void *base, const char *value, char *err,
                 size_t errlen)
{
  char *dst = (char *)base + o->at;
  int64_t v, min, max;
  int_range(o, &min, &max);
  switch (o->kind) {
  case CLI_FLAG:
    *(int *)dst = 1;
    return 0;
  case CLI_INT:
    if (cli_parse_int(value, min, max, &v, err, errlen) != 0)
      return -1;
    *(int *)dst = (int)v;
    return 0;
  case CLI_INT64:
    return cli_parse_int(value, min, max, (int64_t *)dst, err, errlen);
  case CLI_U64:
    return parse_u64(value, (uint64_t *)dst, err, errlen);
  case CLI_SIZE:
    return parse_size(value, (uint64_t *)dst, err, errlen);
  case CLI_DOUBLE:
    return parse_double(value, (double)o->min, (double)o->max, (double *)dst,
                        err, errlen);
  case CLI_STRING:
    if (*value == '\0' && !(o->flags & CLI_EMPTY_OK))
      return reason(err, errlen, "empty value");
    *(const char **)dst = value;
    return 0;
  case CLI_TRIPLE:
    return cli_parse_triple(value, (int64_t *)dst, err, errlen);
  case CLI_VECTOR: {
    int *count = (int *)((char *)base + o->count_at), n = 0;
    int64_t t[3];
    if (*count >= o->max)
      return reason(err, errlen, "given more than %lld times",
                    (long long)o->max);
    if (parse_list(value, ",", INT_MIN, INT_MAX, t, 3, &n, err, errlen) != 0)
      return -1;
    if (n != 3)
      return reason(err, errlen, "'%s': expected three channels K0,K1,K2",
                    value);
    int(*groups)[3] = (int(*)[3])dst;
    for (int a = 0; a < 3; a++)
      groups[*count][a] = (int)t[a];
    ++*count;
    return 0;
  }
  case CLI_ENUM: {
    for (const cli_choice *c = o->choices; c->name != NULL; c++)
      if (strcmp(c->name, value) == 0) {
        *(int *)dst = c->value;
        return 0;
      }
    char names[128];
    return reason(err, errlen, "'%s' is not one of %s", value,
                  choice_names(o, names, sizeof names));
  }
  case CLI_CALL:
    return o->set(base, value, err, errlen);
  case CLI_OPTION: {
    char msg[512];
    /* --file repeated: the entries of a dataset of several volumes, one
     * per line of the path spec. */
    if (value != NULL && strcmp(o->option->name, "path") == 0 &&
        ((slabfeed_config *)base)->path != NULL &&
        ((slabfeed_config *)base)->path[0] != '\0' &&
        (value = join_paths(((slabfeed_config *)base)->path, value)) == NULL)
      return reason(err, errlen, "out of memory joining --file entries");
    if (slabfeed_config_set(base, o->option->name, value ? value : "1", msg,
                            sizeof msg) == SLABFEED_OK)
      return 0;
    /* The library names the option ("crop: ..."); the parser adds the
     * flag, so drop the library's name. */
    const size_t n = strlen(o->option->name);
    const char *why = strncmp(msg, o->option->name, n) == 0 && msg[n] == ':'
                          ? msg + n + 2
                          : msg;
    return reason(err, errlen, "%s", why);
  }
  }
  return reason(err, errlen, "unknown option kind");
}

/* ---- Looking options up -------------------------------------------------- */

/* The option of the app matching arg: "--name", "--name=value" or
 * "-x". Sets *group and *index, and *inline_value to the text after '='
 * (NULL when none). NULL when nothing matches. */
static const cli_option *lookup(const cli_app *app, const char *arg, int *group,
                                int *index, const char **inline_value)
{
  *inline_value = NULL;
  size_t len = strlen(arg);
  const int is_long = arg[0] == '-' && arg[1] == '-';
  if (is_long) {
    const char *eq = strchr(arg, '=');
    if (eq != NULL) {
      len = (size_t)(eq - arg);
      *inline_value = eq + 1;
    }
  } else if (!(arg[0] == '-' && arg[1] != '\0' && arg[2] == '\0')) {
    return NULL;
  }
  int ngroups = 0;
  while (ngroups < CLI_MAX_GROUPS && app->groups[ngroups].options != NULL)
    ngroups++;
  for (int g = ngroups - 1; g >= 0; g--) /* the last definition wins */
    for (int k = 0; app->groups[g].options[k].name != NULL; k++) {
      const cli_option *o = &app->groups[g].options[k];
      const int hit =
          is_long ? strncmp(o->name, arg, len) == 0 && o->name[len] == '\0'
                  : o->short_name != 0 && o->short_name == arg[1];
      if (hit) {
        *group = g;
        *index = k;
        return o;
      }
    }
  return NULL;
}

/* Whether option k of group g is hidden by a later one of the same name
 * (so it is neither listed nor required). */
static int shadowed(const cli_app *app, int g, int k)
{
  int g2, k2;
  const char *v;
  lookup(app, app->groups[g].options[k].name, &g2, &k2, &v);
  return g2 != g || k2 != k;
}

/* ---- Parsing ------------------------------------------------------------- */

/* Records the first usage error in res (later ones are dropped). */
__attribute__((format(printf, 2, 3))) static void error_at(cli_result *res,
                                                           const char *fmt, ...)
{
  if (res->action == CLI_ERROR)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(res->error, sizeof res->error, fmt, ap);
  va_end(ap);
  res->action = CLI_ERROR;
}

/* Pass 1: only looks for --help and --version, stepping over the values
 * of known options (so "--label --help" keeps its label). */
static cli_action find_help(const cli_app *app, int argc, char **argv)
{
  int help = 0, version = 0;
  for (int i = 1; i < argc; i++) {
    int g, k;
    const char *inl;
    const cli_option *o = lookup(app, argv[i], &g, &k, &inl);
    if (o != NULL && takes_value(o) && inl == NULL)
      i++;
    else if (o == NULL &&
             (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0))
      help = 1;
    else if (o == NULL && strcmp(argv[i], "--version") == 0)
      version = 1;
  }
  return help ? CLI_HELP : version ? CLI_VERSION : CLI_RUN;
}

/* Two passes over argv (see cli.h): --help/--version first, so that they
 * work with any other argument, then the values, then required options. */
cli_action cli_scan(const cli_app *app, int argc, char **argv, cli_result *res)
{
  res->action = find_help(app, argc, argv);
  res->error[0] = '\0';
  if (res->action != CLI_RUN)
    return res->action;
  unsigned char seen[CLI_MAX_GROUPS][MAX_OPTIONS] = {{0}};
  for (int g = 0; g < CLI_MAX_GROUPS && app->groups[g].options; g++)
    for (int k = 0; app->groups[g].options[k].name != NULL; k++)
      if (k >= MAX_OPTIONS) { /* a table too long for `seen`: a bug */
        error_at(res, "more than %d options in '%s'", MAX_OPTIONS,
                 app->groups[g].title);
        return res->action;
      }
  for (int i = 1; i < argc && res->action == CLI_RUN; i++) {
    const char *arg = argv[i], *value;
    int g, k;
    const cli_option *o = lookup(app, arg, &g, &k, &value);
    if (o == NULL) {
      struct stat st;
      if (arg[0] == '-' && arg[1] != '\0')
        error_at(res, "unknown option '%s'", arg);
      else if (stat(arg, &st) == 0)
        /* A file after a file: a pattern the shell expanded. */
        error_at(res,
                 "unexpected argument '%s' (a glob pattern the shell "
                 "expanded? quote it, --file 'dir/*.h5', or repeat --file "
                 "for each file)",
                 arg);
      else
        error_at(res, "unexpected argument '%s'", arg);
      break;
    }
    /* A switch alone sets 1; --switch=0 (or no, off...) sets its value. */
    const int sw =
        o->kind == CLI_OPTION && o->option->kind == SLABFEED_OPTION_SWITCH;
    if (!takes_value(o) && value != NULL && !sw) {
      error_at(res, "%s takes no value", o->name);
      break;
    }
    if (takes_value(o) && value == NULL) {
      if (i + 1 >= argc) {
        error_at(res, "%s needs a value (%s)", o->name, o->metavar);
        break;
      }
      value = argv[++i];
    }
    char why[400];
    if (store(o, app->groups[g].base, value, why, sizeof why) != 0)
      error_at(res, "%s: %s", o->name, why);
    seen[g][k] = 1;
  }
  for (int g = 0; g < CLI_MAX_GROUPS && app->groups[g].options; g++)
    for (int k = 0; app->groups[g].options[k].name != NULL; k++) {
      const cli_option *o = &app->groups[g].options[k];
      if ((o->flags & CLI_REQUIRED) && !seen[g][k] && !shadowed(app, g, k))
        error_at(res, "%s is required", o->name);
    }
  return res->action;
}

/* ---- Usage and help ------------------------------------------------------ */

/* The value placeholder of o: its metavar, or the enum's names "a|b|c". */
static const char *metavar(const cli_option *o, char *buf, size_t n)
{
  if (o->metavar != NULL || o->kind != CLI_ENUM)
    return o->metavar;
  return choice_names(o, buf, n);
}

/* Prints words to f wrapped at WIDTH; continuation lines start at column
 * `indent`, the first line continues from column `col`. Returns the column
 * after the last word. */
static int wrap(FILE *f, const char *text, int col, int indent)
{
  const char *p = text;
  while (*p != '\0') {
    while (*p == ' ')
      p++;
    const int len = (int)strcspn(p, " ");
    if (len == 0)
      break;
    if (col > indent && col + 1 + len > WIDTH) {
      fprintf(f, "\n%*s", indent, "");
      col = indent;
    } else if (col > indent) {
      fputc(' ', f);
      col++;
    }
    fprintf(f, "%.*s", len, p);
    col += len;
    p += len;
  }
  return col;
}

/* "usage: prog --file F [--input NAME] ... [--input-vector K0,K1,K2]...",
 * wrapped under the first option. */
static void print_usage(FILE *f, const cli_app *app)
{
  int col = fprintf(f, "usage: %s", app->prog);
  const int indent = col + 1;
  for (int g = 0; g < CLI_MAX_GROUPS && app->groups[g].options; g++)
    for (int k = 0; app->groups[g].options[k].name != NULL; k++) {
      const cli_option *o = &app->groups[g].options[k];
      if (shadowed(app, g, k))
        continue;
      char mv[128], word[256];
      const char *m = metavar(o, mv, sizeof mv);
      const int req = (o->flags & CLI_REQUIRED) != 0;
      snprintf(word, sizeof word, "%s%s%s%s%s%s", req ? "" : "[", o->name,
               m ? " " : "", m ? m : "", req ? "" : "]",
               o->kind == CLI_VECTOR ||
                       (o->kind == CLI_OPTION &&
                        (o->option->kind == SLABFEED_OPTION_VECTORS ||
                         o->option->kind == SLABFEED_OPTION_REGIONS))
                   ? "..."
                   : "");
      /* keep "--opt VALUE" together: wrap on the whole word */
      if (col + 1 + (int)strlen(word) > WIDTH) {
        fprintf(f, "\n%*s", indent - 1, "");
        col = indent - 1;
      }
      col += fprintf(f, " %s", word);
    }
  fputc('\n', f);
}

/* The current value of o's destination as text, for "(default: ...)";
 * empty where there is none to show. Called before any option is stored. */
static void default_text(const cli_option *o, const void *base, char *buf,
                         size_t n)
{
  const char *src = (const char *)base + o->at;
  buf[0] = '\0';
  if (o->flags & CLI_REQUIRED)
    return;
  switch (o->kind) {
  case CLI_INT:
    snprintf(buf, n, "%d", *(const int *)src);
    break;
  case CLI_INT64:
    snprintf(buf, n, "%lld", (long long)*(const int64_t *)src);
    break;
  case CLI_U64:
    snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)src);
    break;
  case CLI_SIZE: /* 0 stands for a computed default: the help says which */
    if (*(const uint64_t *)src != 0)
      snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)src);
    break;
  case CLI_DOUBLE:
    snprintf(buf, n, "%g", *(const double *)src);
    break;
  case CLI_STRING: {
    const char *s = *(const char *const *)src;
    if (s != NULL && *s != '\0')
      snprintf(buf, n, "%s", s);
    break;
  }
  case CLI_TRIPLE: {
    const int64_t *t = (const int64_t *)src;
    if (t[0] == t[1] && t[1] == t[2])
      snprintf(buf, n, "%lld", (long long)t[0]);
    else
      snprintf(buf, n, "%lld,%lld,%lld", (long long)t[0], (long long)t[1],
               (long long)t[2]);
    break;
  }
  case CLI_ENUM:
    for (const cli_choice *c = o->choices; c->name != NULL; c++)
      if (c->value == *(const int *)src) {
        snprintf(buf, n, "%s", c->name);
        break;
      }
    break;
  case CLI_OPTION:
    /* Switches and lists have no default worth showing; "0" for a size
     * stands for a computed default, which the help says. */
    if (o->option->kind == SLABFEED_OPTION_SWITCH ||
        o->option->kind == SLABFEED_OPTION_VECTORS ||
        o->option->kind == SLABFEED_OPTION_REGIONS ||
        slabfeed_config_get(base, o->option->name, buf, n) != SLABFEED_OK ||
        (o->option->kind == SLABFEED_OPTION_SIZE && strcmp(buf, "0") == 0))
      buf[0] = '\0';
    break;
  case CLI_FLAG:
  case CLI_VECTOR:
  case CLI_CALL:
    break;
  }
}

/* One option line of --help: "  -x, --name VALUE   help (default: v)". */
static void print_option(FILE *f, const char *label, const char *help,
                         const char *def)
{
  int col = fprintf(f, "  %s", label);
  if (col + 2 > HELP_COLUMN) {
    fputc('\n', f);
    col = 0;
  }
  col += fprintf(f, "%*s", HELP_COLUMN - col, "");
  col = wrap(f, help, col, HELP_COLUMN);
  if (def != NULL && def[0] != '\0') {
    char d[300];
    snprintf(d, sizeof d, "(default: %s)", def);
    wrap(f, d, col, HELP_COLUMN);
  }
  fputc('\n', f);
}

/* The --help text: usage, summary, then every group's options with their
 * defaults, then --help and --version. */
static void print_help(FILE *f, const cli_app *app)
{
  print_usage(f, app);
  fputc('\n', f);
  wrap(f, app->summary, 0, 0);
  fputc('\n', f);
  for (int g = 0; g < CLI_MAX_GROUPS && app->groups[g].options; g++) {
    fprintf(f, "\n%s:\n", app->groups[g].title);
    for (int k = 0; app->groups[g].options[k].name != NULL; k++) {
      const cli_option *o = &app->groups[g].options[k];
      if (shadowed(app, g, k))
        continue;
      char mv[128], label[256], def[200];
      const char *m = metavar(o, mv, sizeof mv);
      snprintf(label, sizeof label, "%c%c%s%s%s%s", o->short_name ? '-' : ' ',
               o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ",
               o->name, m ? " " : "", m ? m : "");
      default_text(o, app->groups[g].base, def, sizeof def);
      print_option(f, label, o->help, def);
    }
  }
  fprintf(f, "\ncommon options:\n");
  print_option(f, "-h, --help", "print this help and exit", NULL);
  print_option(f, "    --version", "print the version and exit", NULL);
}

/* ---- Leaving ------------------------------------------------------------- */

/* Rank 0 of MPI_COMM_WORLD prints; 0 also when MPI is not initialised. */
static int world_rank(void)
{
  int init = 0, fin = 0, rank = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin)
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

/* Every rank finalises MPI (when initialised) and exits with status. */
__attribute__((noreturn)) static void leave(int status)
{
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  fflush(stdout);
  fflush(stderr);
  if (init && !fin)
    MPI_Finalize();
  exit(status);
}

/* The usage error exit: "prog: message", the usage and a hint on stderr. */
__attribute__((noreturn)) static void usage_error(const cli_app *app,
                                                  const char *msg)
{
  if (world_rank() == 0) {
    fprintf(stderr, "%s: %s\n", app->prog, msg);
    print_usage(stderr, app);
    fprintf(stderr, "Run '%s --help' for the list of options.\n", app->prog);
  }
  leave(2);
}

/* Whether MPI can be called: initialised and not finalised. */
static int mpi_active(void)
{
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

/* The outcome every rank of MPI_COMM_WORLD acts on (see cli.h): a usage
 * error on any rank wins (the lowest such rank's message, into *agreed),
 * then help, then version, else run. *from is the rank whose result was
 * taken; *alike tells whether every rank had that same result (then the
 * message needs no rank). Before MPI_Init (or after MPI_Finalize) the
 * rank's own result. MPI errors stay fatal (MPI_COMM_WORLD's default
 * handler): an agreement that cannot complete must not leave a rank
 * waiting. */
static void agree_result(const cli_result *mine, cli_result *agreed, int *from,
                         int *alike)
{
  *agreed = *mine;
  *from = 0;
  *alike = 1;
  if (!mpi_active())
    return;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* The lowest rank with each outcome, in one reduction. */
  const cli_action order[3] = {CLI_ERROR, CLI_HELP, CLI_VERSION};
  int want[3], first[3];
  for (int i = 0; i < 3; i++)
    want[i] = mine->action == order[i] ? rank : size;
  MPI_Allreduce(want, first, 3, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  int i = 0;
  while (i < 3 && first[i] == size)
    i++;
  if (i == 3) {
    agreed->action = CLI_RUN;
    agreed->error[0] = '\0';
    return;
  }
  agreed->action = order[i];
  *from = first[i];
  if (agreed->action == CLI_ERROR) /* the message of that rank */
    MPI_Bcast(agreed->error, (int)sizeof agreed->error, MPI_CHAR, *from,
              MPI_COMM_WORLD);
  agreed->error[sizeof agreed->error - 1] = '\0';
  int same =
      mine->action == agreed->action &&
      (agreed->action != CLI_ERROR || strcmp(mine->error, agreed->error) == 0);
  MPI_Allreduce(&same, alike, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
}

/* Agrees on the outcome, then: help and version on stdout by the lowest
 * rank that asked (its tables were not written to, so the help shows the
 * defaults), errors on stderr by rank 0; every rank leaves with the same
 * status (see cli.h). */
void cli_settle(const cli_app *app, const cli_result *res)
{
  cli_result agreed;
  int from, alike;
  agree_result(res, &agreed, &from, &alike);
  switch (agreed.action) {
  case CLI_RUN:
    return;
  case CLI_HELP:
    if (world_rank() == from)
      print_help(stdout, app);
    leave(0);
  case CLI_VERSION:
    if (world_rank() == from)
      printf("%s (slabfeed) %s\n", app->prog, slabfeed_version_string());
    leave(0);
  case CLI_ERROR:
    break;
  }
  if (alike)
    usage_error(app, agreed.error);
  char msg[sizeof agreed.error + 32];
  snprintf(msg, sizeof msg, "rank %d: %s", from, agreed.error);
  usage_error(app, msg);
}

/* A usage check after parsing that only some ranks may fail (see cli.h). */
void cli_usage_agree(const cli_app *app, int failed, const char *fmt, ...)
{
  cli_result res = {failed ? CLI_ERROR : CLI_RUN, ""};
  if (failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res.error, sizeof res.error, fmt, ap);
    va_end(ap);
  }
  cli_settle(app, &res);
}

/* cli_scan and cli_settle in one call (see cli.h). */
void cli_parse(const cli_app *app, int argc, char **argv)
{
  cli_result res;
  cli_scan(app, argc, argv, &res);
  cli_settle(app, &res);
}

/* A usage error found by the app after parsing (see cli.h). */
void cli_usage_fail(const cli_app *app, const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  usage_error(app, msg);
}

/* ---- Run-time failures --------------------------------------------------- */

/* Keeps this rank's first failure (see cli.h). */
void cli_note(slabfeed_status *st, char *msg, size_t len, slabfeed_status s,
              const char *fmt, ...)
{
  if (*st != SLABFEED_OK)
    return;
  *st = s;
  if (msg == NULL || len == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, len, fmt, ap);
  va_end(ap);
}

/* The agreement point (see cli.h): a MIN reduction over (failed ? rank :
 * size) finds the lowest failing rank, which then broadcasts its status
 * and message in one fixed-size packet. MPI errors stay fatal here (the
 * default handler of MPI_COMM_WORLD): an agreement that cannot complete
 * must not leave any rank waiting. */
int cli_agree(MPI_Comm comm, slabfeed_status *st, char *msg, size_t len)
{
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int mine = *st != SLABFEED_OK ? rank : size, first = size;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
  if (first == size)
    return 0;
  struct {
    int status;
    char msg[CLI_ERRLEN];
  } pkt;
  memset(&pkt, 0, sizeof pkt);
  if (rank == first) {
    pkt.status = (int)*st;
    snprintf(pkt.msg, sizeof pkt.msg, "rank %d: %s", rank,
             msg != NULL && len > 0 ? msg : "");
  }
  MPI_Bcast(&pkt, (int)sizeof pkt, MPI_BYTE, first, comm);
  *st = (slabfeed_status)pkt.status;
  if (msg != NULL && len > 0)
    snprintf(msg, len, "%s", pkt.msg);
  return 1;
}

/* An agreed failure: printed once, every rank leaves (see cli.h). */
void cli_fail_agreed(const char *prog, slabfeed_status st, const char *msg)
{
  if (world_rank() == 0)
    fprintf(stderr, "%s: %s: %s\n", prog, slabfeed_strerror(st), msg);
  leave(1);
}

/* ---- Output helpers ------------------------------------------------------ */

/* The --dtype name of d, for output lines. */
const char *cli_dtype_name(slabfeed_dtype d)
{
  return d == SLABFEED_DTYPE_F32   ? "f32"
         : d == SLABFEED_DTYPE_F16 ? "f16"
                                   : "bf16";
}

/* A readable name of a file layout, for slabfeed-info. */
const char *cli_layout_name(slabfeed_file_layout l)
{
  return l == SLABFEED_LAYOUT_CF   ? "channels-first (C,Z,Y,X)"
         : l == SLABFEED_LAYOUT_CL ? "channels-last (Z,Y,X,C)"
                                   : "auto";
}

/* Peak RSS from getrusage (kB on Linux), in bytes. */
void cli_progress(const char *prog, int mode, int rank, const char *what,
                  double done, double total, double *last)
{
  if (rank != 0 || mode == SLABFEED_PROGRESS_OFF || total <= 0 ||
      !isatty(STDERR_FILENO))
    return;
  const double t = MPI_Wtime();
  if (done<total && * last> 0 && t - *last < 0.5)
    return;
  if (*last == 0 && done >= total)
    return; /* too short to have shown a line */
  *last = t;
  fprintf(stderr, "\r%s: %s %.0f of %.0f (%3.0f%%)%s", prog, what, done, total,
          100 * done / total, done >= total ? "\n" : "   ");
  fflush(stderr);
}

double cli_process_age(void)
{
  char buf[1024];
  double up = -1, start = -1;
  FILE *f = fopen("/proc/uptime", "r");
  if (f != NULL) {
    if (fscanf(f, "%lf", &up) != 1)
      up = -1;
    fclose(f);
  }
  f = fopen("/proc/self/stat", "r");
  if (f != NULL) {
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Field 22 (starttime, clock ticks after boot) counts from the field
     * after the command's closing parenthesis (field 3). */
    char *p = strrchr(buf, ')');
    for (int field = 2; p != NULL && field < 22; field++)
      p = strchr(p + 1, ' ');
    long long ticks = 0;
    const long hz = sysconf(_SC_CLK_TCK);
    if (p != NULL && sscanf(p + 1, "%lld", &ticks) == 1 && hz > 0)
      start = (double)ticks / (double)hz;
  }
  return up >= 0 && start >= 0 && up >= start ? up - start : -1;
}

void cli_open_times(const slabfeed_stats *s, char *buf, size_t len)
{
  /* The rest: the file's open, the store and the residency's set-up. */
  const double rest =
      s->t_open - s->t_read - s->t_open_context - s->t_open_backend;
  const double mine[6] = {s->t_open,          s->t_read,
                          s->t_open_context,  s->t_open_backend,
                          s->t_open_register, rest > 0 ? rest : 0};
  double t[6] = {0, 0, 0, 0, 0, 0};
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Reduce(mine, t, 6, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0)
    snprintf(buf, len,
             "%.2f s (the slowest rank's each): file, store and set-up "
             "%.2f, slabs read %.2f, waiting for the CUDA context %.2f, "
             "back end %.2f (of it the slab window registered with CUDA "
             "%.2f)",
             t[0], t[5], t[1], t[2], t[3], t[4]);
  else if (len > 0)
    buf[0] = '\0';
}

uint64_t cli_peak_rss(void)
{
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return 0;
  return (uint64_t)ru.ru_maxrss * 1024u;
}

/* RssAnon and RssShmem of /proc/self/status, in bytes (see cli.h). */
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
