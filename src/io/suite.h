/* A dataset of several volumes (a suite of simulations): the expansion of
 * a path spec into the list of files, and the stacked box the loader sees.
 *
 * A spec is one or more entries separated by newlines, each
 *   @FILE      a manifest: one path per line, absolute or relative to
 *              the manifest's folder ('#' starts a comment line); blank
 *              lines are refused. A
 *              line may end in columns NAME=VALUE (separated from the
 *              path and each other by blanks): a number, the volume's
 *              parameters (params), or a file, a field's file of the
 *              volume (a field DATASET@{NAME}), absolute or relative to
 *              the manifest's folder
 *   PATTERN    a glob pattern (any of * ? [), expanded and sorted; a
 *              pattern that matches nothing is refused
 *   PATH       a file
 * in the order given. The same file twice (by name or by device and
 * inode) is refused. One plain path is the one-volume dataset of before.
 *
 * The volumes are stacked along z: volume v holds planes [z0[v], z0[v+1])
 * of a box of z0[n] planes, stored at its own shape[v][1] x shape[v][2]
 * (the store's plane table, store.h). Every crop stays inside
 * one volume and wraps periodically inside it on all three axes
 * (sf__suite_of finds it). */
#ifndef SF_SUITE_H
#define SF_SUITE_H

#include <stdint.h>

#include "common/errors.h"

#define SF_SUITE_MAX 100000 /* volumes in one dataset */

typedef struct sf__suite {
  int n;
  char **path;         /* [n] */
  int64_t *z0;         /* [n + 1]: set by the caller once shapes are known */
  int64_t (*shape)[3]; /* [n] */
  char **cols;         /* [n] the manifest columns of each volume
                          ("NAME=VALUE NAME=VALUE"), NULL where none */
  int nparam;          /* K: parameters per volume (config params) */
  float *param;        /* [n][K] their values, normalised; NULL at K 0:
                          set by the caller (io/volume.h) */
} sf__suite;

/* Local: expands spec into *s (paths only; z0 and shape zeroed). On
 * failure *s is empty and *e names the entry, the manifest line or the
 * pattern. */
slabfeed_status sf__suite_expand(const char *spec, sf__suite *s, sf__err *e);

/* Collective over comm: the paths of rank `root` (after its expansion, or
 * its failure in *e) to every rank; the outcome is agreed. */
slabfeed_status sf__suite_bcast(sf__suite *s, MPI_Comm comm, int root,
                                sf__err *e);

/* A deep copy of src into *dst (NOMEM on failure, *dst then empty). */
slabfeed_status sf__suite_copy(sf__suite *dst, const sf__suite *src,
                               sf__err *e);

void sf__suite_free(sf__suite *s);

/* Local. The value of manifest column `name` of volume i into *value:
 * 1 when its line has that column, 0 when not, -1 when it has it but the
 * value is not a number. */
int sf__suite_column(const sf__suite *s, int i, const char *name,
                     double *value);

/* Local. The text of manifest column `name` of volume i into out (len
 * bytes): 1 when its line has that column, 0 when not. */
int sf__suite_text(const sf__suite *s, int i, const char *name, char *out,
                   size_t len);

/* Local. The files of a field named by manifest column `name`, one per
 * volume of s, as a suite (paths only) in *out; a volume whose line lacks
 * the column is refused, naming `what` (the field), the volume and the
 * column; *out is then empty. */
slabfeed_status sf__suite_from_column(const sf__suite *s, const char *name,
                                      const char *what, sf__suite *out,
                                      sf__err *e);

/* The volume holding stacked plane z (0 <= z < z0[n]). */
int sf__suite_of(const sf__suite *s, int64_t z);

#endif
