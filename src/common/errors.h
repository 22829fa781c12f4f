/* Internal error plumbing: a status plus a message, and the agreement of an
 * error among all ranks of a communicator. */
#ifndef SF_ERRORS_H
#define SF_ERRORS_H

#include "slabfeed_tools.h"

#include <stdarg.h>

#define SF_ERRLEN 768
#define SF_MAX_DSETS 2 /* input and target */

/* The outcome of an operation: status and a message naming the problem. */
typedef struct sf__err {
  slabfeed_status status;
  int agreed; /* the message already names the rank that found it */
  char msg[SF_ERRLEN];
} sf__err;

/* Resets *e to SLABFEED_OK with an empty message. */
void sf__err_clear(sf__err *e);

/* Records status st and a printf-style message in *e, unless *e already
 * holds a failure (the first cause wins). Returns st. */
slabfeed_status sf__fail(sf__err *e, slabfeed_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records an MPI failure of `what` with MPI's own error string. */
slabfeed_status sf__fail_mpi(sf__err *e, int mpi_rc, const char *what);

/* Collective over comm. Makes every rank agree on one outcome: when any rank
 * failed, every rank's *e becomes the failure of the lowest failing rank,
 * prefixed with "rank R: ". Returns the agreed status. If the agreement
 * itself fails (MPI broken), returns SLABFEED_ERR_MPI locally. */
slabfeed_status sf__agree(MPI_Comm comm, sf__err *e);

/* Copies e->msg into buf (NUL-terminated, truncated to len) when buf != NULL.
 */
void sf__err_copy(const sf__err *e, char *buf, size_t len);

/* Writes src (a full struct of this library) into the caller's sized
 * struct dst: only min(dst->size, sizeof) bytes, the caller's size kept,
 * bytes past what this library knows zeroed. Both structs start with
 * size_t size. Returns 0, or -1 when dst->size is smaller than min. */
int sf__sized_write(void *dst, const void *src, size_t src_size, size_t min);

/* Fills the caller's sized struct dst of `size` bytes from defaults (a
 * full struct of this library, `full` bytes, its size member set to
 * `size`): min(size, full) bytes copied, the rest zeroed. Both start with
 * size_t size. Nothing happens for size < sizeof(size_t). */
void sf__sized_init(void *dst, size_t size, const void *defaults, size_t full);

/* Jump to `label` with an MPI failure recorded in *e when `call` fails. */
#define SF_MPI_GOTO(call, e, label)                                            \
  do {                                                                         \
    int sf__mpi_rc_ = (call);                                                  \
    if (sf__mpi_rc_ != MPI_SUCCESS) {                                          \
      sf__fail_mpi((e), sf__mpi_rc_, #call);                                   \
      goto label;                                                              \
    }                                                                          \
  } while (0)

#endif
