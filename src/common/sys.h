/* What the operating system says: a monotonic clock and the node's memory
 * figures. Both are safe on any thread and call no MPI (the loader thread
 * uses the clock). */
#ifndef SF_SYS_H
#define SF_SYS_H

#include <stdint.h>
#include <time.h>

/* Seconds of a monotonic clock (any thread, no MPI). */
static inline double sf__now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A figure of /proc/meminfo in bytes ("MemTotal", "MemAvailable"), 0
 * when unknown (no /proc, or no such line). */
uint64_t sf__meminfo(const char *key);

#endif
