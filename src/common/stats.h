/* The loader's statistics: one writer function, merged under a lock, so
 * that slabfeed_stats_get reads a consistent copy while a loader thread
 * produces. Also the clock the producers use: a monotonic clock instead of
 * MPI_Wtime, because below MPI_THREAD_MULTIPLE the loader thread may make
 * no MPI call at all. */
#ifndef SF_STATS_H
#define SF_STATS_H

#include <pthread.h>

#include "slabfeed.h"

typedef struct sf__stats {
  pthread_mutex_t mu;
  slabfeed_stats total; /* size is sizeof(slabfeed_stats) */
} sf__stats;

/* Zeroes the counters and creates the lock. */
void sf__stats_init(sf__stats *s);
void sf__stats_destroy(sf__stats *s);

/* Adds every counter and time of *delta to the totals (the one writer);
 * loader_thread is taken from delta when it is non-zero. */
void sf__stats_add(sf__stats *s, const slabfeed_stats *delta);

/* A consistent copy of the totals. */
void sf__stats_read(sf__stats *s, slabfeed_stats *out);

#endif
