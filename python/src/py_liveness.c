/*
 * The liveness rule of what a Loader hands out: a batch or tensor may be
 * used while its loader is open, of this process, idle and still in the
 * generation it was handed out in.
 */
#include "py_liveness.h"

#include "py_errors.h"

int sfpy_loader_check_live(sfpy_loader *L, uint64_t generation)
{
  sfpy_state *st = sfpy_state_of(Py_TYPE(L));
  uint64_t e, s;
  if (L->l == NULL) {
    sfpy_raise_stale(st, "slabfeed: this batch belongs to a closed loader");
    return -1;
  }
  /* Forked first: a call of next in the child has moved the generation. */
  if (!L->busy && slabfeed_tell(L->l, &e, &s) == SLABFEED_ERR_FORKED) {
    sfpy_raise(st, SLABFEED_ERR_FORKED,
               "slabfeed: this batch belongs to a loader of the parent "
               "process (forked since): MPI windows, CUDA state and the "
               "loader thread do not survive fork(); open a new loader in "
               "the child (or do not fork: use threads)");
    return -1;
  }
  if (L->generation != generation) {
    sfpy_raise_stale(st, "slabfeed: this batch is stale: next(), seek() or "
                         "close() was called on its loader since it was handed "
                         "out, and its memory may hold another batch by now");
    return -1;
  }
  if (L->busy) {
    sfpy_raise(st, SLABFEED_ERR_STATE, SFPY_BUSY_MESSAGE);
    return -1;
  }
  return 0;
}
