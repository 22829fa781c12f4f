/* The read ceiling of a loader's open, shared by slabfeed-bench and
 * slabfeed-predict (read_ceiling.c): the rate at which the same ranks read
 * the same bytes of the same file with plain pread into fresh private
 * memory, to print the open's slab read as a ratio of it. */
#ifndef SF_APPS_READ_CEILING_H
#define SF_APPS_READ_CEILING_H

#include "slabfeed.h"

typedef struct read_ceiling {
  double bytes;     /* all ranks' bytes read (the datasets as stored) */
  double pread_gbs; /* those bytes over the slowest rank's time, GB/s */
  /* The same on `threads` threads per rank (the node's online cores over
   * its ranks, as read_mode direct reads), into fresh memory again. */
  double pread_threads_gbs;
  double threads;
} read_ceiling;

/* Collective over MPI_COMM_WORLD; call it after the loader closed (the
 * page cache as its open left it). Each rank preads its z-slab
 * (slabfeed_slab_plan) of every channel of the datasets input and target
 * (NULL: none) of path, as stored, on one thread and then on the
 * rank's share of the node's cores. Returns 1 with *out set, or 0 (*out
 * zero, alike on every rank) where the bytes are not at known offsets
 * (slabfeed_stored_ranges: filters, virtual datasets), a list of fields,
 * fewer planes than ranks, or a failed read. */
int read_ceiling_measure(const char *path, const char *input,
                         const char *target, slabfeed_file_layout layout,
                         read_ceiling *out);

#endif
