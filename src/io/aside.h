/* Files written aside: how slabfeed replaces a file. Every file the library
 * and the apps write (slabfeed_generate, slabfeed-dump; any later writer)
 * is written under a temporary name in its own directory, with its space
 * reserved before the bulk write, then synced, checked and renamed over
 * the final name only when every rank succeeded. On any failure the
 * temporary file is removed and an earlier file of the final name is left
 * as it was, byte for byte.
 *
 * The protocol, over the communicator of the ranks that make one file:
 *
 *   sf__aside_begin    collective, agreed: the checks of the path (not a
 *                      directory, a writable directory), the temporary
 *                      file (created empty, exclusively, by rank 0:
 *                      <path>.slabfeed-partial.<pid of rank 0>[.k]); stop
 *                      signals that would kill rank 0 remove it first
 *   (caller)           creates the file under a->tmp: H5Fcreate with
 *                      H5F_ACC_TRUNC, any driver
 *   sf__aside_reserve  local, on every rank (acts on those that write):
 *                      the file size limit of each writing rank; on rank
 *                      0 the free space (statvfs, 1% margin) and the
 *                      reservation of the blocks (fallocate with
 *                      FALLOC_FL_KEEP_SIZE; where the filesystem cannot
 *                      reserve, the free-space check stands alone). Call
 *                      it after the file is created (a truncating create
 *                      would release the blocks) and before the first
 *                      write; the caller agrees on the status
 *   (caller)           writes, closes the file on every rank
 *   sf__aside_commit   collective, agreed: every writing rank syncs the
 *                      file (a deferred write error surfaces here), rank
 *                      0 releases reserved blocks past the end, the
 *                      caller's verify step reads back what it wrote
 *                      (where the reservation did not cover the file),
 *                      rank 0 renames the file over the final name and
 *                      syncs the directory. A failure anywhere, also one
 *                      the caller brings in *e, removes the file
 *   sf__aside_abort    local, instead of commit once all ranks know of a
 *                      failure: rank 0 removes the file
 *
 * The verify step exists because MPI-IO may report success for a write
 * that did not land (Open MPI 4.1's collective write on a full disk): the
 * writer keeps a sum of what it wrote (sf__aside_sum) and compares it with
 * what it reads back after the sync (the writer compares with the slab
 * it still holds). It is skipped only where a write cannot fail for
 * space: when blocks reserved before the first write cover the whole
 * file on a filesystem that writes in place (ext4, XFS, tmpfs). It runs
 * on any other filesystem (copy-on-write ones such as btrfs and ZFS take
 * new blocks for every write; network filesystems), where the filesystem
 * cannot reserve, where the metadata outgrew the estimate, and under the
 * test switch below. SF_ENV_VERIFY=1 makes it run always. */
#ifndef SF_ASIDE_H
#define SF_ASIDE_H

#include <stdint.h>

#include "common/errors.h"

/* Test-only: set to 1, the free-space check and the reservation of the
 * blocks are skipped (the file size limit is still checked: a close past
 * it fails, and HDF5 1.10 then crashes at exit), so that tests can make
 * the bulk write itself fail on a full disk. */
#define SF_ENV_NO_RESERVE "SLABFEED_TEST_NO_RESERVE"

/* Set to 1, the read-back check runs even when the reservation covered
 * the file (for users who want it, and for tests of the check itself). */
#define SF_ENV_VERIFY "SLABFEED_VERIFY_WRITES"

#define SF_ASIDE_PATH 4160

typedef struct sf__aside {
  MPI_Comm comm;
  int rank;
  int writes;        /* this rank writes to the file */
  int live;          /* rank 0: the temporary file exists */
  uint64_t reserved; /* rank 0: bytes reserved with fallocate, or 0 */
  int check_only;    /* set by the caller before sf__aside_reserve: the
                        free space is checked, the blocks are the caller's
                        to reserve (the writer's mapped pages) */
  int checked;       /* rank 0: the free space was checked */
  char path[SF_ASIDE_PATH];
  char tmp[SF_ASIDE_PATH]; /* the name to create and write */
} sf__aside;

/* Local. The directory of path into dir ("." without a slash, "/" for a
 * path in the root). */
void sf__dir_of(const char *path, char *dir, size_t len);

/* Collective over comm, agreed. Call on every rank, also after a local
 * failure in *e (then nothing is created and the failure is agreed).
 * `writes`: whether this rank writes to the file (limits are checked on
 * those). On success a->tmp names an empty file; on failure nothing is
 * left. */
slabfeed_status sf__aside_begin(sf__aside *a, MPI_Comm comm, const char *path,
                                int writes, sf__err *e);

/* Local (see above): `bytes` is the final size the file will take, data
 * and metadata. Does nothing when *e holds a failure. With a->check_only
 * rank 0 checks the free space (and sets a->checked) but reserves
 * nothing: the caller allocates the blocks itself. */
slabfeed_status sf__aside_reserve(sf__aside *a, uint64_t bytes, sf__err *e);

/* The caller's read-back check, called on every rank of the communicator
 * when all ranks have synced the file: collective as the caller needs;
 * records a failure in *e. */
typedef slabfeed_status (*sf__aside_verify)(void *ctx, const char *tmp,
                                            sf__err *e);

/* Collective over the communicator, agreed (see above). *e: this rank's
 * outcome of the writes and the close; on return the agreed outcome, the
 * file renamed on success, removed on failure. verify may be NULL (a
 * writer whose every write reports its failure, as POSIX write does); it
 * is called on every rank or on none. */
slabfeed_status sf__aside_commit(sf__aside *a, sf__aside_verify verify,
                                 void *ctx, sf__err *e);

/* Local: rank 0 removes the temporary file. For when every rank already
 * knows of a failure (after an agreement). */
void sf__aside_abort(sf__aside *a);

/* A sum of n bytes at byte position `at` of a stream, for read-back
 * checks: every 8-byte word is mixed with its position and the mixes are
 * added, so any split of a stream at multiples of 8 bytes sums to the same
 * value, and a lost, zeroed or displaced word changes it. */
uint64_t sf__aside_sum(const void *p, size_t n, uint64_t at);

#endif
