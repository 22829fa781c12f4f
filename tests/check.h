/* A tiny check header for MPI tests: CHECK records a failure with its
 * location and goes on; finish() agrees on the result over all ranks and
 * prints PASS or FAIL once. SKIP prints "SKIP:" (CTest's skip pattern). */
#ifndef SF_TESTS_CHECK_H
#define SF_TESTS_CHECK_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      int check_rank_ = 0;                                                     \
      MPI_Comm_rank(MPI_COMM_WORLD, &check_rank_);                             \
      if (check_failures++ < 20) {                                             \
        fprintf(stderr, "[rank %d] %s:%d: CHECK(%s) failed: ", check_rank_,    \
                __FILE__, __LINE__, #cond);                                    \
        fprintf(stderr, __VA_ARGS__);                                          \
        fputc('\n', stderr);                                                   \
      }                                                                        \
    }                                                                          \
  } while (0)

/* Agree on the outcome, print it on rank 0, finalise MPI; the exit code. */
static inline int check_finish(const char *name)
{
  int mine = check_failures, all = 0, rank = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    printf("%s: %s (%d failed checks)\n", name, all ? "FAIL" : "PASS", all);
  MPI_Finalize();
  return all ? 1 : 0;
}

static inline int check_skip(const char *name, const char *why)
{
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    printf("SKIP: %s: %s\n", name, why);
  MPI_Finalize();
  return 0;
}

#endif
