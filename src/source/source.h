/* Piece sources: where a piece of a crop is read from, as a small table of
 * operations (NCCL's transports are the model). Each source says whether
 * it serves a piece, gives the piece's view (an address, its memory kind
 * and its extents) and names the counter its bytes go to; both back ends
 * walk the same list and copy from the view (memcpy on the host, a 3D
 * copy of the view's kind on the GPU), so that a new place where slabs
 * live (another file of a dataset of many volumes, slabs held in GPU
 * memory) is one more entry here, not a change of the back ends.
 *
 * Today's entries, in the order they are asked:
 *   device own, device node
 *           residency device (0.8): the same segments' copies in GPU
 *           memory, this rank's own and (over CUDA IPC) its node's;
 *   own     this rank's own segment (core or halo) of the node window;
 *   node    another rank's segment of this node's window (load/store);
 *   landed  another node: fetched ahead over MPI (fetch.h) into a landing
 *           buffer of the back end, which passes it to view(). */
#ifndef SF_SOURCE_H
#define SF_SOURCE_H

#include "source/gather.h"

typedef struct sf__source {
  const char *name;
  /* 1: the piece moves over MPI ahead of use (fetch.h lands it; view()
   * then needs `landed`); 0: it is addressable in place. */
  int fetched;
  /* The slabfeed_stats counter its bytes add to (offsetof). */
  size_t counter;
  /* 1 when this source serves piece p of store s. */
  int (*serves)(const sf__store *s, const sf__piece *p);
  /* The view of dataset d of piece p (landed: where a fetched piece
   * arrived, a dense [C][n0][n1][n2] array; NULL for the others). */
  void (*view)(const sf__store *s, int d, const sf__piece *p,
               const float *landed, sf__view *v);
} sf__source;

extern const sf__source sf__source_dev_own, sf__source_dev_node, sf__source_own,
    sf__source_node, sf__source_landed;

/* The first source of the list that serves piece p (every piece has one:
 * `landed` serves what no other does). The same answer for every dataset
 * of the piece, on every thread. */
const sf__source *sf__source_of(const sf__store *s, const sf__piece *p);

/* Adds the bytes of dataset d of piece p to src's counter in *delta. */
void sf__source_account(const sf__source *src, const sf__store *s, int d,
                        const sf__piece *p, slabfeed_stats *delta);

/* Adds `bytes` to src's byte counter in delta (what a copy out of src
 * moved, when it is not a whole piece). */
void sf__source_count(const sf__source *src, uint64_t bytes,
                      slabfeed_stats *delta);

#endif
