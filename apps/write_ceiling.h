/* The write ceiling of a writer's close, for slabfeed-predict
 * (write_ceiling.c): the rate at which the same ranks write the same
 * number of bytes to the same filesystem with plain pwrite(2) and fsync,
 * to print close as a ratio of it. */
#ifndef SF_APPS_WRITE_CEILING_H
#define SF_APPS_WRITE_CEILING_H

typedef struct write_ceiling {
  double bytes;      /* all ranks' bytes written */
  double pwrite_gbs; /* those bytes over the slowest rank's time, GB/s */
} write_ceiling;

/* Collective over MPI_COMM_WORLD. Each rank pwrites `mine` bytes (its
 * share of the output as stored) from a private buffer of at most 64 MiB,
 * written again and again and faulted in before the clock starts, at its
 * offset in one new file beside `path` (`path`.slabfeed-ceiling.<pid of
 * rank 0>, created exclusively by rank 0, never an existing file), in
 * calls of at most 64 MiB, then fsyncs it; the clock runs from a barrier
 * to the slowest rank's fsync. The file is removed afterwards, also after
 * a failure. Returns 1 with *out set, or 0 (*out zero, alike on every
 * rank) where a rank could not create, write or sync it (a full disk: the
 * app's figures stand without it). */
int write_ceiling_measure(const char *path, double mine, write_ceiling *out);

#endif
