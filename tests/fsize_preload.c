/* Test-only (tests/test_diskfull.sh), loaded with LD_PRELOAD into every
 * rank: right after MPI_Init (or MPI_Init_thread) returns, the soft file
 * size limit (RLIMIT_FSIZE) becomes SF_TEST_FSIZE bytes. Set before the
 * program starts, the limit would hit MPI's own shared-memory files in
 * MPI_Init (Open MPI's are larger than a few MiB from three ranks on). */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <mpi.h>

static void *real(const char *name)
{
  void *p = dlsym(RTLD_NEXT, name);
  if (p == NULL) {
    fprintf(stderr, "fsize_preload: no %s\n", name);
    abort();
  }
  return p;
}

static void limit(void)
{
  const char *v = getenv("SF_TEST_FSIZE");
  if (v == NULL || *v == '\0')
    return;
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) != 0)
    return;
  rl.rlim_cur = (rlim_t)strtoull(v, NULL, 10);
  if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
    perror("fsize_preload: setrlimit");
}

int MPI_Init(int *argc, char ***argv)
{
  int (*fn)(int *, char ***);
  void *p = real("MPI_Init");
  memcpy(&fn, &p, sizeof fn);
  const int rc = fn(argc, argv);
  limit();
  return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
  int (*fn)(int *, char ***, int, int *);
  void *p = real("MPI_Init_thread");
  memcpy(&fn, &p, sizeof fn);
  const int rc = fn(argc, argv, required, provided);
  limit();
  return rc;
}
