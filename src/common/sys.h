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

/* The size of a transparent huge page (transparent_hugepage/
 * hpage_pmd_size: 2 MiB on x86-64 and on aarch64 with 4 KiB pages), 2 MiB
 * where the kernel does not say. Local. */
size_t sf__huge_page_size(void);
int sf__touch_threads(int option, int node_ranks);

/* The node's online cores shared by its node_ranks ranks (at least 1),
 * and no more than the CPUs the calling thread may run on (a launcher's
 * binding: Open MPI's mpirun binds one or two ranks to a core each): the
 * threads one rank takes for its direct reads and writes, its page
 * faults and its float16 widening. Local. */
int sf__core_share(int node_ranks);

/* The CPUs the calling thread may run on (its affinity mask), 0 where
 * the kernel does not say. Local. */
int sf__cpus_allowed(void);

/* Into buf: "" where sf__core_share(node_ranks) is the node's share, else
 * a note that the launcher's binding narrowed it and how to widen it (for
 * the reports of the open and the writer). Local. */
void sf__core_note(int node_ranks, char *buf, size_t len);

/* Faults in the pages of [p, p + bytes) for writing, spread over
 * `threads` threads (this one among them; 1: this one alone) in ranges
 * of whole 2 MiB blocks where the memory is large enough (a huge page is
 * faulted by one thread): each range
 * with madvise(MADV_POPULATE_WRITE) where the kernel has it (Linux 5.14),
 * else by rewriting one byte of each page with its own value. Contents
 * are kept. A thread that cannot start leaves its range to this one.
 * Returns 1 where madvise populated every range, 0 where pages were
 * touched instead. Local; no MPI; the memory must stay mapped. */
int sf__populate(void *p, size_t bytes, int threads);

/* sf__populate without the page touches: where madvise fails nothing is
 * touched. For a shared mapping of a file that may not back every page (a
 * full tmpfs): the kernel then refuses (EFAULT, ENOMEM) where a touch
 * would raise SIGBUS. Returns 0, or the first failing range's errno
 * (EINVAL: no MADV_POPULATE_WRITE in this kernel, or the test variable
 * SLABFEED_TEST_NO_POPULATE=1). Local; no MPI. */
int sf__populate_strict(void *p, size_t bytes, int threads);

/* Transparent huge pages for [p, p + bytes) (whole pages inside it):
 * want 1 asks the kernel for them (madvise MADV_HUGEPAGE), want 0 asks
 * for none (MADV_NOHUGEPAGE). Call it before the memory is first
 * touched; the kernel's policy decides (sf__huge_policy). Returns 1 where
 * madvise accepted the advice, 0 where it refused (the memory is then
 * unchanged). Local; no MPI. */
int sf__huge_advise(void *p, size_t bytes, int want);

/* Bytes of [p, p + bytes) that the kernel maps with huge pages now
 * (AnonHugePages, ShmemPmdMapped and FilePmdMapped of the mappings that
 * hold it, in /proc/self/smaps, at most each mapping's share of the
 * range), and into *shared whether the first of those mappings is shared
 * memory (1) or private (0). 0 where /proc is not readable. Local. */
uint64_t sf__huge_bytes(const void *p, size_t bytes, int *shared);

/* The kernel's transparent huge page policy for private (shared 0) or
 * shared memory (shared 1), the word in brackets of
 * /sys/kernel/mm/transparent_hugepage/enabled or shmem_enabled ("always",
 * "madvise", "never", ...), into buf; "unknown" where it cannot be read.
 * Returns buf. Local. */
const char *sf__huge_policy(int shared, char *buf, size_t len);

/* What the memory [p, p + bytes) got, as text for a report into buf:
 * "huge pages: off" (want 0), "huge pages: X of Y MB", or "huge pages:
 * none (...)" with the reason: for private memory the kernel's policy
 * (transparent_hugepage/enabled), for shared memory the tmpfs mount's
 * huge= option and shmem_enabled. Local. */
void sf__huge_report(const void *p, size_t bytes, int want, char *buf,
                     size_t len);

/* Runs fn on each of n jobs (jobs[0] .. jobs[n - 1], `size` bytes
 * apart; n at most 64): jobs 1 .. n - 1 on threads of their own, job 0
 * on the calling thread, which then joins the others. A job whose thread
 * cannot be started runs on the calling thread instead. */
void sf__run_jobs(void *(*fn)(void *), void *jobs, size_t size, int n);

/* Reads (write 0) or writes n bytes of fd at offset `at` from or into
 * buf with pread/pwrite, on up to `threads` threads (parts of at least 4
 * MiB, page-aligned). Returns 0, the first failing part's errno, or -1
 * where a read met the end of the file first. A read into memory that
 * sf__fileback_add named (shared mappings of files) goes into those files
 * instead, with copy_file_range (or pread and pwrite through a 4 MiB
 * buffer where the two files' filesystems cannot copy): the pages are
 * written as the files', with no page fault and no zeroing of them first
 * (docs/DECISIONS.md, "The slab store as files of the library's own").
 * The writes of one file take turns in the kernel, so its threads take
 * the memory's files in turn (thread t the t-th, the (t + threads)-th,
 * ... file of the range): no two threads of one call write one file. */
int sf__pio(int fd, char *buf, size_t n, off_t at, int threads, int write);

/* Names [base, base + bytes) as MAP_SHARED mappings of the n files fds,
 * one after the other from their offset 0, each `part` bytes long (the
 * last the rest; n >= bytes / part rounded up), for sf__pio's reads into
 * them. fds (the array and the files) stay the caller's, valid and open
 * until sf__fileback_remove. Thread-safe. Returns a handle (>= 0), or -1
 * where the table (8 entries) is full or the arguments do not describe
 * such memory: then reads go through the mapping as into any memory. */
int sf__fileback_add(void *base, size_t bytes, size_t part, const int *fds,
                     int n);

/* Forgets handle h of sf__fileback_add (h < 0: nothing). Thread-safe,
 * but the caller must not remove (and close the file) while a read into
 * that memory may still run: the descriptor is used outside the lock. */
void sf__fileback_remove(int h);

/* 1 when p lies in memory that sf__fileback_add named (reads into it
 * write its file). Thread-safe. */
int sf__fileback_has(const void *p);

/* Unmaps each mapping (*base)[k] of (*len)[k] bytes, k < n (NULL
 * entries skipped), frees both tables and leaves them NULL. Local. */
void sf__unmap_table(char ***base, size_t **len, int n);

/* Gives the pages of [p, p + bytes) back to the system, backing store
 * included (madvise MADV_REMOVE: shared memory and files that can punch
 * holes; MADV_DONTNEED: private memory), whole pages inside the range
 * only. Reading them afterwards gives zeros (private memory of a file:
 * the file's bytes): only for memory nothing will read again. Returns the
 * bytes given back, 0 where the system refused (the memory is then
 * unchanged). Local; no MPI. */
uint64_t sf__release_pages(void *p, uint64_t bytes);

#endif
