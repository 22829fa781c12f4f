/* Path specs for the apps that need the list of files before (or without)
 * a loader: slabfeed-info, which describes the files and opens no loader;
 * slabfeed-dump, whose check that --out is not an input runs before the
 * loader is open; slabfeed-bench --baseline fullcopy, which reads one
 * volume whole without a loader. Public API only.
 *
 * A spec is what slabfeed_config.path takes (docs/CONVENTIONS.md,
 * "Datasets of several volumes"): entries separated by newlines, each
 *   @FILE     a manifest: one absolute path per line, '#' starts a comment
 *             line, blank and relative lines are refused
 *   PATTERN   a glob pattern (any of * ? [), expanded and sorted; one that
 *             matches nothing is refused
 *   PATH      a file
 * in the order given; the same file twice (by name, or by device and
 * inode) is refused. cli_spec_expand is the library's expansion
 * (slabfeed_volumes_expand), so its list is the loader's list of volumes,
 * index for index; where a loader is open, slabfeed_volume_info is the
 * authority. */
#ifndef SF_APPS_SPEC_H
#define SF_APPS_SPEC_H

#include <stddef.h>

#include "slabfeed.h"

/* Room for one path of a spec (the library's limit on an entry). */
enum { CLI_PATH_MAX = 4200 };

typedef struct cli_spec {
  int n;
  char **path; /* [n], each malloc'd */
} cli_spec;

/* Expands spec into *s. Returns 0, or -1 with the reason in err (naming
 * the entry, the manifest line or the pattern) and *s empty. Local: reads
 * the filesystem, no MPI. */
int cli_spec_expand(const char *spec, cli_spec *s, char *err, size_t errlen);

/* Whether spec is one plain path (no newline, no leading @, none of
 * * ? [): the one-volume dataset the apps always took. */
int cli_spec_plain(const char *spec);

/* Whether the glob entries of spec (patterns only; plain paths and
 * manifests are not) would match `path`, as glob(3) matches names:
 * '/' and a leading '.' only explicitly. Writes the first such pattern to
 * pat (len bytes). */
int cli_spec_pattern_matches(const char *spec, const char *path, char *pat,
                             size_t len);

/* Rank root's *s (and its outcome, ok: 1 expanded, 0 failed) to every rank
 * of comm; the others' *s are replaced. Returns 0, or -1 on every rank
 * (with *s empty) when root failed or memory ran out anywhere.
 * Collective over comm. */
int cli_spec_bcast(cli_spec *s, int ok, int root, MPI_Comm comm);

void cli_spec_free(cli_spec *s);

#endif
