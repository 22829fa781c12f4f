/* What the operating system says: a monotonic clock and the node's memory
 * figures. Both are safe on any thread and call no MPI (the loader thread
 * uses the clock). */
#ifndef SF_SYS_H
#define SF_SYS_H

#include <stdint.h>
#include <sys/types.h>
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

/* The threads a rank gives to faulting in its memory: `option` when > 0
 * (slabfeed_config.touch_threads), else (auto) the node's online cores
 * over its `node_ranks` ranks, at least 1 and at most SF_TOUCH_AUTO_MAX. */
#define SF_TOUCH_AUTO_MAX 8
int sf__touch_threads(int option, int node_ranks);

/* The node's online cores shared by its node_ranks ranks (at least 1):
 * the threads one rank takes for its direct reads and writes and its
 * float16 widening. */
int sf__core_share(int node_ranks);

/* Faults in the pages of [p, p + bytes) for writing, spread over
 * `threads` threads (this one among them; 1: this one alone): each range
 * with madvise(MADV_POPULATE_WRITE) where the kernel has it (Linux 5.14),
 * else by rewriting one byte of each page with its own value. Contents
 * are kept. A thread that cannot start leaves its range to this one.
 * Returns 1 where madvise populated every range, 0 where pages were
 * touched instead. Local; no MPI; the memory must stay mapped. */
int sf__populate(void *p, size_t bytes, int threads);

/* Runs fn on each of n jobs (jobs[0] .. jobs[n - 1], `size` bytes
 * apart; n at most 64): jobs 1 .. n - 1 on threads of their own, job 0
 * on the calling thread, which then joins the others. A job whose thread
 * cannot be started runs on the calling thread instead. */
void sf__run_jobs(void *(*fn)(void *), void *jobs, size_t size, int n);

/* Reads (write 0) or writes n bytes of fd at offset `at` from or into
 * buf with pread/pwrite, on up to `threads` threads (parts of at least 4
 * MiB, page-aligned). Returns 0, the first failing part's errno, or -1
 * where a read met the end of the file first. */
int sf__pio(int fd, char *buf, size_t n, off_t at, int threads, int write);

/* Gives the pages of [p, p + bytes) back to the system, backing store
 * included (madvise MADV_REMOVE: shared memory and files that can punch
 * holes; MADV_DONTNEED: private memory), whole pages inside the range
 * only. Reading them afterwards gives zeros (private memory of a file:
 * the file's bytes): only for memory nothing will read again. Returns the
 * bytes given back, 0 where the system refused (the memory is then
 * unchanged). Local; no MPI. */
uint64_t sf__release_pages(void *p, uint64_t bytes);

#endif
