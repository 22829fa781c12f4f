/* Unit test of the apps' option parser (cli_scan): strict numbers, ranges
 * of the destination types, lists, enums, flags, --opt=value, required
 * options, --help/--version precedence, overriding a loader option. Needs
 * no MPI run (cli_scan makes no MPI call). Prints "FAIL ..." per failed
 * case and exits 1 when any failed. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* Every kind once, with the ranges the apps use. */
typedef struct args {
  int flag, i, e, n_vec, vec[2][3];
  int64_t i64, triple[3];
  uint64_t u64, size;
  double d;
  const char *s, *req, *label;
  int called;
} args;

/* A CLI_CALL option: "ok" sets called, anything else fails. */
static int set_call(void *base, const char *value, char *err, size_t errlen)
{
  if (strcmp(value, "ok") != 0) {
    snprintf(err, errlen, "'%s' is not ok", value);
    return -1;
  }
  ((args *)base)->called = 1;
  return 0;
}

static const cli_choice colours[] = {{"red", 1}, {"blue", 2}, {NULL, 0}};

#define AT(f) offsetof(args, f)

static const cli_option options[] = {
    {.name = "--flag", .short_name = 'f', .kind = CLI_FLAG, .at = AT(flag)},
    {.name = "--int", .kind = CLI_INT, .at = AT(i), .metavar = "N"},
    {.name = "--small",
     .kind = CLI_INT,
     .at = AT(i),
     .min = 1,
     .max = 64,
     .metavar = "N"},
    {.name = "--i64", .kind = CLI_INT64, .at = AT(i64), .metavar = "N"},
    {.name = "--u64",
     .short_name = 'u',
     .kind = CLI_U64,
     .at = AT(u64),
     .metavar = "N"},
    {.name = "--size", .kind = CLI_SIZE, .at = AT(size), .metavar = "BYTES"},
    {.name = "--double",
     .kind = CLI_DOUBLE,
     .at = AT(d),
     .min = 0,
     .max = 1000,
     .metavar = "T"},
    {.name = "--string", .kind = CLI_STRING, .at = AT(s), .metavar = "S"},
    {.name = "--label",
     .kind = CLI_STRING,
     .at = AT(label),
     .metavar = "L",
     .flags = CLI_EMPTY_OK},
    {.name = "--triple", .kind = CLI_TRIPLE, .at = AT(triple), .metavar = "T"},
    {.name = "--vec",
     .kind = CLI_VECTOR,
     .at = AT(vec),
     .count_at = AT(n_vec),
     .max = 2,
     .metavar = "K0,K1,K2"},
    {.name = "--colour", .kind = CLI_ENUM, .at = AT(e), .choices = colours},
    {.name = "--call", .kind = CLI_CALL, .set = set_call, .metavar = "X"},
    {.name = "--req",
     .kind = CLI_STRING,
     .at = AT(req),
     .metavar = "R",
     .flags = CLI_REQUIRED},
    {.name = NULL}};

/* A later group that replaces --int (as bench replaces --device). */
static const cli_option override[] = {
    {.name = "--int", .kind = CLI_CALL, .set = set_call, .metavar = "X"},
    {.name = NULL}};

static int failures = 0;

/* Runs cli_scan on "prog --req r" plus the given words (NULL-terminated)
 * into a fresh args; checks the action and, for errors, that the message
 * contains `want` (when not NULL). */
static args scan(const cli_app *tmpl, cli_action expect, const char *want,
                 const char *const *words)
{
  args a = {.i = 7, .i64 = 7, .label = "dflt"};
  cli_app app = *tmpl;
  for (int g = 0; g < CLI_MAX_GROUPS && app.groups[g].options; g++)
    app.groups[g].base = &a;
  char *argv[32] = {"prog", "--req", "r"};
  int argc = 3;
  for (int k = 0; words[k] != NULL && argc < 31; k++)
    argv[argc++] = (char *)words[k];
  cli_result res;
  const cli_action got = cli_scan(&app, argc, argv, &res);
  char line[512] = "";
  for (int k = 3; k < argc; k++)
    snprintf(line + strlen(line), sizeof line - strlen(line), " [%s]", argv[k]);
  if (got != expect || (want != NULL && strstr(res.error, want) == NULL)) {
    printf("FAIL%s: action %d (want %d), error '%s' (want '%s')\n", line,
           (int)got, (int)expect, res.error, want ? want : "");
    failures++;
  }
  return a;
}

/* Expects a == b, or prints the case and counts a failure. */
static void expect_i(const char *what, long long a, long long b)
{
  if (a != b) {
    printf("FAIL %s: %lld, want %lld\n", what, a, b);
    failures++;
  }
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The cases. */
int main(void)
{
  const cli_app app = {"prog", "test", {{"options", options, NULL}}};
  const cli_app two = {
      "prog", "test", {{"options", options, NULL}, {"over", override, NULL}}};
  args a;

  /* values stored, both spellings */
  a = scan(&app, CLI_RUN, NULL,
           W("--flag", "--int", "-5", "--i64=-9000000000", "-u", "42",
             "--double", "2.5", "--string=x=y", "--triple", "3", "--vec",
             "1,2,3", "--vec=4,5,6", "--colour", "blue", "--call", "ok",
             "--label="));
  expect_i("flag", a.flag, 1);
  expect_i("int", a.i, -5);
  expect_i("i64", a.i64, -9000000000LL);
  expect_i("u64", (long long)a.u64, 42);
  expect_i("double", (long long)(a.d * 10), 25);
  expect_i("string", strcmp(a.s, "x=y"), 0);
  expect_i("label", strcmp(a.label, ""), 0);
  expect_i("triple", a.triple[0] + a.triple[1] + a.triple[2], 9);
  expect_i("vectors", a.n_vec, 2);
  expect_i("vector", a.vec[1][0] * 100 + a.vec[1][1] * 10 + a.vec[1][2], 456);
  expect_i("enum", a.e, 2);
  expect_i("call", a.called, 1);
  a = scan(&app, CLI_RUN, NULL, W("--triple", "24x20x18", "-f"));
  expect_i("triple x", a.triple[0] * 10000 + a.triple[1] * 100 + a.triple[2],
           242018);
  a = scan(&app, CLI_RUN, NULL, W("--u64", "18446744073709551615"));
  expect_i("u64 max", a.u64 == UINT64_MAX, 1);
  a = scan(&app, CLI_RUN, NULL, W("--size", "200G"));
  expect_i("size G", (long long)a.size, 200LL << 30);
  a = scan(&app, CLI_RUN, NULL, W("--size", "1.5K"));
  expect_i("size K", (long long)a.size, 1536);
  a = scan(&app, CLI_RUN, NULL, W("--size", "4096"));
  expect_i("size bytes", (long long)a.size, 4096);
  scan(&app, CLI_ERROR, "not a size", W("--size", "2X"));
  scan(&app, CLI_ERROR, "not a size", W("--size", "-1G"));
  scan(&app, CLI_ERROR, "not a size", W("--size", "G"));
  scan(&app, CLI_ERROR, "not a size", W("--size", "9000000T"));
  a = scan(&app, CLI_RUN, NULL, W("--int", "2147483647", "--int", "+3"));
  expect_i("last wins", a.i, 3);

  /* strict numbers (issue 12: wrapping) */
  scan(&app, CLI_ERROR, "not a non-negative", W("--u64", " -1"));
  scan(&app, CLI_ERROR, "not a non-negative", W("--u64", "-1"));
  scan(&app, CLI_ERROR, "maximum", W("--u64", "18446744073709551616"));
  scan(&app, CLI_ERROR, "not an integer", W("--int", " 5"));
  scan(&app, CLI_ERROR, "not an integer", W("--int", "5 "));
  scan(&app, CLI_ERROR, "not an integer", W("--int", "5x"));
  scan(&app, CLI_ERROR, "not an integer", W("--int", "0x10"));
  scan(&app, CLI_ERROR, "empty", W("--int", ""));
  scan(&app, CLI_ERROR, "maximum 2147483647", W("--int", "2147483648"));
  scan(&app, CLI_ERROR, "minimum -2147483648", W("--int", "-2147483649"));
  scan(&app, CLI_ERROR, "minimum 1", W("--small", "0"));
  scan(&app, CLI_ERROR, "not a non-negative", W("--small", "-3"));
  scan(&app, CLI_ERROR, "maximum 64", W("--small", "65"));
  scan(&app, CLI_ERROR, "maximum", W("--i64", "9223372036854775808"));
  scan(&app, CLI_ERROR, "minimum", W("--i64", "-9223372036854775809"));
  scan(&app, CLI_ERROR, "not a number", W("--double", "5ms"));
  scan(&app, CLI_ERROR, "not a number", W("--double", "nan"));
  scan(&app, CLI_ERROR, "not a number", W("--double", " 1"));
  scan(&app, CLI_ERROR, "range", W("--double", "-1"));
  scan(&app, CLI_ERROR, "maximum 2147483647",
       W("--vec", "4294967297,2,3")); /* was taken as 1,2,3 */
  scan(&app, CLI_ERROR, "three", W("--vec", "1,2"));
  scan(&app, CLI_ERROR, "more than 3", W("--vec", "1,2,3,4"));
  scan(&app, CLI_ERROR, "empty", W("--vec", "1,,3"));
  scan(&app, CLI_ERROR, "more than 2 times",
       W("--vec", "1,2,3", "--vec", "1,2,3", "--vec", "1,2,3"));
  scan(&app, CLI_ERROR, "A,B,C", W("--triple", "1,2"));
  scan(&app, CLI_ERROR, "empty", W("--triple", "1,2,"));
  scan(&app, CLI_ERROR, "not one of red|blue", W("--colour", "green"));
  scan(&app, CLI_ERROR, "empty value", W("--string", ""));
  scan(&app, CLI_ERROR, "--call: 'no' is not ok", W("--call", "no"));

  /* options and arguments */
  scan(&app, CLI_ERROR, "unknown option '--bogus'", W("--bogus"));
  scan(&app, CLI_ERROR, "unknown option '-x'", W("-x"));
  scan(&app, CLI_ERROR, "unexpected argument 'stray'", W("stray"));
  /* An existing file after a value: a pattern the shell expanded. */
  scan(&app, CLI_ERROR,
       "unexpected argument '/' (a glob pattern the shell expanded? quote it",
       W("--string", "a.h5", "/"));
  scan(&app, CLI_ERROR, "--int needs a value", W("--int"));
  scan(&app, CLI_ERROR, "--flag takes no value", W("--flag=1"));
  scan(&app, CLI_ERROR, "unknown option '--in'", W("--in", "3"));
  const char *noreq[] = {"prog", "--int", "3"};
  cli_result res;
  args b = {0};
  cli_app bound = {"prog", "test", {{"options", options, &b}}};
  if (cli_scan(&bound, 3, (char **)noreq, &res) != CLI_ERROR ||
      strstr(res.error, "--req is required") == NULL) {
    printf("FAIL required: '%s'\n", res.error);
    failures++;
  }

  /* --help and --version win, also after errors; values are skipped */
  a = scan(&app, CLI_HELP, NULL, W("--bogus", "--int", "5", "-h"));
  expect_i("help stores nothing", a.i, 7);
  scan(&app, CLI_HELP, NULL, W("--version", "--help"));
  scan(&app, CLI_VERSION, NULL, W("--int", "x", "--version"));
  a = scan(&app, CLI_RUN, NULL, W("--string", "--help"));
  expect_i("value --help", strcmp(a.s, "--help"), 0);
  scan(&app, CLI_ERROR, "unknown option '--help=1'", W("--help=1"));

  /* a later group replaces an option of the same name */
  a = scan(&two, CLI_RUN, NULL, W("--int", "ok"));
  expect_i("override", a.called * 10 + a.i, 17);
  scan(&two, CLI_ERROR, "--int: '5' is not ok", W("--int", "5"));

  printf("%s: %d failure(s)\n", failures ? "FAIL" : "OK", failures);
  return failures ? 1 : 0;
}
