/* A tiny check header for MPI tests: CHECK records a failure with its
 * location and goes on (CHECK_EQ also prints both values); finish() agrees on
 * the result over all ranks and prints PASS or FAIL once. SKIP prints "SKIP:"
 * (CTest's skip pattern). */
#ifndef SF_TESTS_CHECK_H
#define SF_TESTS_CHECK_H

#include <mpi.h>
#include <stdarg.h>
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

/* CHECK_EQ(a, b, ...): CHECK(a == b, ...) that also prints both values.
 * _Generic picks the printer by the type of 1 ? a : b, the type a == b
 * compares in (the usual arithmetic conversions, or the common pointer
 * type), so both operands convert exactly as for ==: signed integers print
 * with %lld, unsigned with %u / %llu, float and double with %.17g, pointers
 * with %p; other types (long double, structs) do not compile. a and b are
 * evaluated once each. (clang-format cannot lay out _Generic.) */
/* clang-format off */
#define CHECK_EQ(a, b, ...)                                                    \
  _Generic(1 ? (a) : (b),                                                      \
      int: check_eq_ll_, long: check_eq_ll_, long long: check_eq_ll_,          \
      unsigned: check_eq_u_,                                                   \
      unsigned long: check_eq_ull_, unsigned long long: check_eq_ull_,         \
      float: check_eq_d_, double: check_eq_d_,                                 \
      default: check_eq_p_)                                                    \
  ((a), (b), #a, #b, __FILE__, __LINE__, __VA_ARGS__)
/* clang-format on */

/* One printer per compared type: on a != b, CHECK's report with the values
 * "a != b" before the message. */
#define CHECK_EQ_PRINTER_(name, type, fmt)                                     \
  __attribute__((format(printf, 7, 8))) static inline void name(               \
      type x, type y, const char *ex, const char *ey, const char *file,        \
      int line, const char *msg, ...)                                          \
  {                                                                            \
    if (x == y)                                                                \
      return;                                                                  \
    int check_rank_ = 0;                                                       \
    MPI_Comm_rank(MPI_COMM_WORLD, &check_rank_);                               \
    if (check_failures++ < 20) {                                               \
      fprintf(stderr,                                                          \
              "[rank %d] %s:%d: CHECK_EQ(%s, %s) failed: " fmt " != " fmt      \
              ": ",                                                            \
              check_rank_, file, line, ex, ey, x, y);                          \
      va_list ap;                                                              \
      va_start(ap, msg);                                                       \
      vfprintf(stderr, msg, ap);                                               \
      va_end(ap);                                                              \
      fputc('\n', stderr);                                                     \
    }                                                                          \
  }
CHECK_EQ_PRINTER_(check_eq_ll_, long long, "%lld")
CHECK_EQ_PRINTER_(check_eq_u_, unsigned, "%u")
CHECK_EQ_PRINTER_(check_eq_ull_, unsigned long long, "%llu")
CHECK_EQ_PRINTER_(check_eq_d_, double, "%.17g")
CHECK_EQ_PRINTER_(check_eq_p_, const void *, "%p")

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
