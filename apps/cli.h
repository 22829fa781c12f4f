/* Small command-line helpers shared by the apps (public API only). */
#ifndef SF_APPS_CLI_H
#define SF_APPS_CLI_H

#include <stdint.h>

#include "slabfeed.h"

/* Prints the message on rank 0 of MPI_COMM_WORLD, finalises MPI and exits
 * with status 2 (usage errors) on every rank. */
void cli_usage_fail(const char *prog, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

/* Prints "prog: rank R: message" on every rank that failed, finalises MPI
 * and exits 1. */
void cli_fail(const char *prog, slabfeed_status st, const char *msg)
    __attribute__((noreturn));

/* Parsers: return 0 on success, -1 on malformed text. */
int cli_int64(const char *s, int64_t *out);
int cli_u64(const char *s, uint64_t *out);
/* "A,B,C" or "A" (then all three equal). */
int cli_triple(const char *s, int64_t out[3]);
int cli_vector(const char *s, int out[3]);
int cli_layout(const char *s, slabfeed_file_layout *out);
int cli_symmetries(const char *s, slabfeed_symmetries *out);
int cli_dtype(const char *s, slabfeed_dtype *out);
int cli_out_layout(const char *s, slabfeed_out_layout *out);

const char *cli_dtype_name(slabfeed_dtype d);
const char *cli_layout_name(slabfeed_file_layout l);

/* Peak resident set size of this process in bytes. */
uint64_t cli_peak_rss(void);

/* Current resident memory of this process from /proc/self/status, bytes:
 * private anonymous pages (RssAnon) and shared memory pages (RssShmem,
 * e.g. the node's window, counted in every process that touched them).
 * Zero where /proc is not available. */
void cli_rss_parts(uint64_t *anon, uint64_t *shmem);

/* Common loader options shared by dump, check and bench: recognises
 * argv[*i] (and its value), fills *cfg, advances *i. Returns 1 when the
 * option was consumed, 0 when it is not a loader option; a malformed or
 * missing value ends the program through cli_usage_fail(prog, usage). */
int cli_loader_option(const char *prog, const char *usage, int argc,
                      char **argv, int *i, slabfeed_config *cfg);

/* The text describing cli_loader_option's options for usage lines. */
extern const char cli_loader_usage[];

#endif
