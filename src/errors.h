/* Internal error plumbing: a status plus a message, and the agreement of an
 * error among all ranks of a communicator. */
#ifndef SF_ERRORS_H
#define SF_ERRORS_H

#include "slabfeed.h"

#include <stdarg.h>

#define SF_ERRLEN 768

/* The outcome of an operation: status and a message naming the problem. */
typedef struct sf_err {
  sf_status status;
  int agreed; /* the message already names the rank that found it */
  char msg[SF_ERRLEN];
} sf_err;

/* Resets *e to SF_OK with an empty message. */
void sf_err_clear(sf_err *e);

/* Records status st and a printf-style message in *e, unless *e already
 * holds a failure (the first cause wins). Returns st. */
sf_status sf_fail(sf_err *e, sf_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records an MPI failure of `what` with MPI's own error string. */
sf_status sf_fail_mpi(sf_err *e, int mpi_rc, const char *what);

/* Collective over comm. Makes every rank agree on one outcome: when any rank
 * failed, every rank's *e becomes the failure of the lowest failing rank,
 * prefixed with "rank R: ". Returns the agreed status. If the agreement
 * itself fails (MPI broken), returns SF_ERR_MPI locally. */
sf_status sf_agree(MPI_Comm comm, sf_err *e);

/* Copies e->msg into buf (NUL-terminated, truncated to len) when buf != NULL.
 */
void sf_err_copy(const sf_err *e, char *buf, size_t len);

/* Jump to `label` with an MPI failure recorded in *e when `call` fails. */
#define SF_MPI_GOTO(call, e, label)                                            \
  do {                                                                         \
    int sf_mpi_rc_ = (call);                                                   \
    if (sf_mpi_rc_ != MPI_SUCCESS) {                                           \
      sf_fail_mpi((e), sf_mpi_rc_, #call);                                     \
      goto label;                                                              \
    }                                                                          \
  } while (0)

#endif
