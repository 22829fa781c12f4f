/* The source of pieces held on other nodes: fetched ahead over MPI
 * (fetch.h) into a landing buffer in pinned host memory, where the piece
 * is a dense [C][n0][n1][n2] array. */
#include "source/source.h"

static int serves_landed(const sf__store *s, const sf__piece *p)
{
  return sf__store_segment(s, p->src, 0) == NULL;
}

static void landed_view(const sf__store *s, int d, const sf__piece *p,
                        const float *landed, sf__view *v)
{
  /* A dataset of scale f lands as the piece scaled: f x every extent. */
  const int64_t f = s->scale[d];
  *v = (sf__view){.base = landed,
                  .mem = SF__MEM_HOST,
                  .cstride = s->cube[d] * p->n[0] * p->n[1] * p->n[2],
                  .rows = f * p->n[1],
                  .cols = f * p->n[2]};
}

const sf__source sf__source_landed = {"landed", 1,
                                      offsetof(slabfeed_stats, bytes_remote),
                                      serves_landed, landed_view};
