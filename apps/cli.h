/* Command-line handling shared by the apps (public API only).
 *
 * Every app describes its options in tables of cli_option; one parser walks
 * argv with them and the same tables generate the usage line and the --help
 * text, so the two cannot disagree. The loader options (dump, check, bench)
 * are made from the library's option table (cli_loader_options), so the
 * apps, the Python module and the library cannot disagree either.
 *
 * An option writes to `base + at`, where base is the struct of its group
 * (cli_group.base): tables are static and const, and a table can be reused
 * for any struct of its type. Accepted forms: `--name value`,
 * `--name=value`, `-x value` for options with a short name; flags take no
 * value. Numbers are decimal and strict: no leading space, no trailing junk,
 * no sign on unsigned values, and within the range of the destination type
 * (or the option's own range). A bad value or an unknown option is a usage
 * error: exit status 2, a one-line message and the usage on stderr.
 *
 * Every app also takes -h/--help (usage and options on stdout, exit 0) and
 * --version ("slabfeed-gen (slabfeed) 0.2.0", exit 0). The ranks agree on
 * the outcome of their command lines before anything collective
 * (cli_settle), so a bad option on one rank of an MPMD launch ends every
 * rank; output goes through one rank only, and every rank leaves with the
 * same status after MPI_Finalize.
 */
#ifndef SF_APPS_CLI_H
#define SF_APPS_CLI_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "slabfeed.h"

/* How an option's value is read and where it goes. */
typedef enum cli_kind {
  CLI_FLAG,   /* no value: stores 1 in an int */
  CLI_INT,    /* int; within [min, max] when min < max */
  CLI_INT64,  /* int64_t; within [min, max] when min < max */
  CLI_U64,    /* uint64_t: digits only, no sign */
  CLI_SIZE,   /* uint64_t bytes: a number, optionally with K, M, G or T */
  CLI_DOUBLE, /* finite double; within [min, max] when min < max */
  CLI_STRING, /* const char *, pointing into argv; not "" (CLI_EMPTY_OK) */
  CLI_TRIPLE, /* int64_t[3]: "A,B,C", "AxBxC", or "A" for all three */
  CLI_VECTOR, /* int[max][3]: appends "K0,K1,K2"; count (int) at count_at */
  CLI_ENUM,   /* one of `choices` by name: stores its value in an int/enum */
  CLI_CALL,   /* calls set(); takes a value when metavar is not NULL */
  CLI_OPTION  /* a loader option of the library's table (`option`): the
                 text goes to slabfeed_config_set on a slabfeed_config base;
                 switches take no value (they set 1) */
} cli_kind;

/* One name of a CLI_ENUM option and the value it stores. */
typedef struct cli_choice {
  const char *name;
  int value;
} cli_choice;

/* A CLI_CALL option's action: value is NULL for an option without a
 * metavar. Returns 0, or -1 after writing the reason (without the option's
 * name, which the parser adds) to err. */
typedef int (*cli_setter)(void *base, const char *value, char *err,
                          size_t errlen);

/* cli_option.flags */
enum {
  CLI_REQUIRED = 1, /* a usage error when not given */
  CLI_EMPTY_OK = 2  /* CLI_STRING: "" is a value (else a usage error) */
};

/* One option. Tables end with an entry whose name is NULL. */
typedef struct cli_option {
  const char *name;          /* "--file" */
  char short_name;           /* 'f' for -f, or 0 */
  cli_kind kind;             /* how the value is read */
  size_t at;                 /* offsetof the destination in the base struct */
  size_t count_at;           /* CLI_VECTOR: offsetof its int count */
  int64_t min, max;          /* ranges (see kinds); CLI_VECTOR: max entries */
  const cli_choice *choices; /* CLI_ENUM: ends with a NULL name */
  cli_setter set;            /* CLI_CALL */
  const slabfeed_option *option; /* CLI_OPTION: its row of the table */
  const char *metavar;           /* the value in the usage: "F", "Z,Y,X" */
  const char *help;              /* one sentence for --help */
  unsigned flags;                /* CLI_REQUIRED, CLI_EMPTY_OK */
} cli_option;

/* A table and the struct its offsets refer to. */
typedef struct cli_group {
  const char *title;         /* heading in --help, e.g. "loader options" */
  const cli_option *options; /* NULL ends an app's list of groups */
  void *base;
} cli_group;

#define CLI_MAX_GROUPS 4

/* One app: its name, what it does, its options. When two groups define the
 * same name, the later group's wins (bench's --device, which also takes
 * "local", replaces the loader's). */
typedef struct cli_app {
  const char *prog;    /* "slabfeed-gen" */
  const char *summary; /* one or two sentences for --help */
  cli_group groups[CLI_MAX_GROUPS];
} cli_app;

/* What cli_scan found. */
typedef enum cli_action {
  CLI_RUN,     /* options stored: go on */
  CLI_HELP,    /* -h or --help given */
  CLI_VERSION, /* --version given */
  CLI_ERROR    /* a usage error, described in cli_result.error */
} cli_action;

typedef struct cli_result {
  cli_action action;
  char error[512];
} cli_result;

/* Walks argv with app's tables and stores the values; needs no MPI and
 * prints nothing (so an app can choose its MPI thread level from the
 * options). --help and --version win over errors anywhere in argv; then
 * the first error is reported. Returns res->action. */
cli_action cli_scan(const cli_app *app, int argc, char **argv, cli_result *res);

/* Acts on a cli_scan result once MPI is initialised. Collective over
 * MPI_COMM_WORLD, before anything else collective: the ranks may have been
 * given different arguments (an MPMD launch, `mpirun -n 1 app ARGS : -n 1
 * app OTHER`), so they first agree on one outcome, the same on every rank:
 *   - a usage error on any rank: the lowest such rank's message (prefixed
 *     "rank R: " unless every rank had that very error) and the usage,
 *     once on stderr (rank 0); every rank exits 2;
 *   - else --help or --version on any rank: printed once on stdout (by the
 *     lowest rank that asked); every rank exits 0;
 *   - else returns on every rank.
 * Every rank calls MPI_Finalize before it exits. Without MPI initialised,
 * the rank's own result. */
void cli_settle(const cli_app *app, const cli_result *res);

/* A usage check after parsing whose outcome may differ between ranks (it
 * reads what only this rank was given). Collective over MPI_COMM_WORLD:
 * call it on every rank, failed nonzero where the check fails (fmt gives
 * the message). When any rank failed, every rank exits 2 and rank 0 prints
 * the lowest failing rank's message and the usage once, as cli_settle;
 * otherwise returns. */
void cli_usage_agree(const cli_app *app, int failed, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* cli_scan then cli_settle: for apps that initialise MPI first. */
void cli_parse(const cli_app *app, int argc, char **argv);

/* A usage error found after parsing, on every rank alike (a check of what
 * every rank knows the same, e.g. after a broadcast): rank 0 prints
 * "prog: message" and the usage on stderr; every rank calls MPI_Finalize
 * and exits with 2. Not collective: a check that may fail on some ranks
 * only goes through cli_usage_agree. */
void cli_usage_fail(const cli_app *app, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* ---- Run-time failures ------------------------------------------------------
 * A run-time failure must reach every rank, or the others wait forever in
 * their next collective. The apps meet at agreement points (cli_agree):
 * at least once per step in dump and check, after the timed region in
 * bench. A rank that fails between two points records the failure
 * (cli_note), skips the rest of its work and calls no collective until the
 * next point; there every rank learns the failure of the lowest failing
 * rank, and all leave together (cli_fail_agreed). Failures of collective
 * library calls (slabfeed_open, slabfeed_generate) are already agreed. */

/* Room for a run-time error message (what one agreement carries). */
enum { CLI_ERRLEN = 1024 };

/* Records a failure of this rank: when *st is SLABFEED_OK, sets it to s and
 * formats the message into msg (len bytes); an earlier failure is kept, so
 * that the first cause is the one reported. Not collective. */
void cli_note(slabfeed_status *st, char *msg, size_t len, slabfeed_status s,
              const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* An agreement point. Collective over comm: every rank passes its own status
 * (*st, SLABFEED_OK when it did not fail) and message (msg, len bytes).
 * Returns 0 when no rank failed (nothing is changed); otherwise returns 1 on
 * every rank, with *st and msg those of the lowest failing rank, its
 * message prefixed "rank R: " (truncated to len and CLI_ERRLEN). */
int cli_agree(MPI_Comm comm, slabfeed_status *st, char *msg, size_t len);

/* Leaves after a failure every rank knows alike (from cli_agree, or the
 * status of a collective library call): rank 0 of MPI_COMM_WORLD prints
 * "prog: status: message" once on stderr; every rank calls MPI_Finalize
 * and exits 1. Call it on every rank; release collective objects first. */
void cli_fail_agreed(const char *prog, slabfeed_status st, const char *msg)
    __attribute__((noreturn));

/* Strict parsers for CLI_CALL setters: return 0, or -1 with the reason in
 * err. cli_parse_int: a decimal integer in [min, max]. cli_parse_triple:
 * "A,B,C", "AxBxC" or "A" (all three equal), each an int64_t. */
int cli_parse_int(const char *s, int64_t min, int64_t max, int64_t *out,
                  char *err, size_t errlen);
int cli_parse_triple(const char *s, int64_t out[3], char *err, size_t errlen);

/* The loader options of dump, check and bench, over a slabfeed_config:
 * one CLI_OPTION per row of the library's option table (slabfeed_option_at),
 * named "--" + its flag, in the table's order; built at the first call.
 * Not thread safe on the first call. */
const cli_option *cli_loader_options(void);

/* Prints the library's option table as a Markdown table to f: one row per
 * option (Python keyword and C field, command-line flag, kind, range,
 * default, help). docs/OPTIONS.md holds this output between its markers,
 * and the test docs.options compares the two. */
void cli_print_option_table(FILE *f);

/* Names of values for output lines. */
const char *cli_dtype_name(slabfeed_dtype d);
const char *cli_layout_name(slabfeed_file_layout l);

/* The progress of an app's own long step (a pass's steps) on rank 0's
 * stderr when it is a terminal and mode (slabfeed_config.progress) is not
 * OFF: "PROG: WHAT done of total (PCT%)", redrawn in place at most every
 * half second (*last: the time of the last line, 0 at the start); done ==
 * total ends the line. Elsewhere a no-op: the app's final line reports. */
void cli_progress(const char *prog, int mode, int rank, const char *what,
                  double done, double total, double *last);

/* Seconds since this process started (/proc/self/stat against
 * /proc/uptime, 10 ms resolution); -1 where unknown. */
double cli_process_age(void);

/* Where slabfeed_open's time went (slabfeed_stats, 0.12), each part the
 * slowest rank's, as one line into buf on rank 0 ("" on the others):
 * "T s (the slowest rank's each): file, store and set-up ..., slabs read
 * ..., waiting for the CUDA context ..., back end ... (of it the slab
 * window registered with CUDA ...)", the set-up being the rest of T.
 * Collective over MPI_COMM_WORLD. */
void cli_open_times(const slabfeed_stats *s, char *buf, size_t len);

/* Peak resident set size of this process in bytes. */
uint64_t cli_peak_rss(void);

/* Current resident memory of this process from /proc/self/status, bytes:
 * private anonymous pages (RssAnon) and shared memory pages (RssShmem,
 * e.g. the node's window, counted in every process that touched them).
 * Zero where /proc is not available. */
void cli_rss_parts(uint64_t *anon, uint64_t *shmem);

#endif
