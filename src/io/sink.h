/* Where a slab read writes when the slab is not kept in the host segment
 * (0.9, residency device with every plane read on the node): each
 * transfer of the read lands in a buffer the sink lends, and the sink
 * takes it from there to its own copy of the segment (the GPU's, through
 * pinned staging: backend/resident.c). The io layer sees only this. */
#ifndef SF_SINK_H
#define SF_SINK_H

#include <stdint.h>

#include "slabfeed.h"

struct sf__err; /* common/errors.h (a module of layer 0 includes none) */

typedef struct sf__sink sf__sink;
struct sf__sink {
  /* Floats one buffer holds: no transfer of the read is larger. The same
   * on every rank (the read's collective calls are counted with it). */
  int64_t floats;
  /* The buffer the next transfer lands in, free to be written (it waits
   * for the sink to be done with what it held before); NULL with a
   * failure in *e. */
  float *(*buffer)(sf__sink *k, struct sf__err *e);
  /* The n floats just read into buf belong at `at` of this rank's host
   * segment (an address in the segment's layout, never written): the
   * sink takes them to the same place of its copy. */
  slabfeed_status (*put)(sf__sink *k, float *buf, const float *at, int64_t n,
                         struct sf__err *e);
};

#endif
