#include "source/gather.h"

#include <string.h>

int sf__gather_remote(const sf__store *s, const sf__piece *p)
{
  return s->peer[p->src] == NULL;
}

int64_t sf__gather_elems(const sf__store *s, int d, const sf__piece *p)
{
  return s->channels[d] * p->n[0] * p->n[1] * p->n[2];
}

sf__from sf__gather_source(const sf__store *s, int d, const sf__piece *p,
                           const float *landed, sf__view *v)
{
  const float *seg = sf__store_segment(s, p->src, d);
  if (seg == NULL) {
    *v = (sf__view){landed, {p->n[0], p->n[1], p->n[2]}, {0, 0, 0}};
    return SF__FROM_REMOTE;
  }
  *v = (sf__view){seg,
                  {sf__store_planes(s, p->src), s->shape[1], s->shape[2]},
                  {p->q, p->y, p->x}};
  return p->src == s->rank ? SF__FROM_OWN : SF__FROM_NODE;
}

void sf__gather_copy(const sf__view *v, int64_t C, const sf__piece *p,
                     const int64_t crop[3], float *dst)
{
  const int64_t D = v->dims[0], Y = v->dims[1], X = v->dims[2];
  const size_t row = (size_t)p->n[2] * sizeof(float);
  for (int64_t c = 0; c < C; c++)
    for (int64_t k = 0; k < p->n[0]; k++)
      for (int64_t j = 0; j < p->n[1]; j++) {
        const float *from = v->base +
                            ((c * D + v->at[0] + k) * Y + v->at[1] + j) * X +
                            v->at[2];
        float *to =
            dst +
            ((c * crop[0] + p->d[0] + k) * crop[1] + p->d[1] + j) * crop[2] +
            p->d[2];
        memcpy(to, from, row);
      }
}

slabfeed_status sf__gather_type(const sf__store *s, int d, const sf__piece *p,
                                MPI_Datatype *t, sf__err *e)
{
  const int sizes[4] = {(int)s->channels[d], (int)sf__store_planes(s, p->src),
                        (int)s->shape[1], (int)s->shape[2]};
  const int sub[4] = {(int)s->channels[d], (int)p->n[0], (int)p->n[1],
                      (int)p->n[2]};
  const int start[4] = {0, (int)p->q, (int)p->y, (int)p->x};
  *t = MPI_DATATYPE_NULL;
  SF_MPI_GOTO(
      MPI_Type_create_subarray(4, sizes, sub, start, MPI_ORDER_C, MPI_FLOAT, t),
      e, out);
  SF_MPI_GOTO(MPI_Type_commit(t), e, out);
out:
  if (e->status != SLABFEED_OK && *t != MPI_DATATYPE_NULL)
    MPI_Type_free(t);
  return e->status;
}

void sf__gather_account(const sf__store *s, int d, const sf__piece *p,
                        sf__from from, slabfeed_stats *delta)
{
  const uint64_t b =
      (uint64_t)(s->channels[d] * p->n[0] * p->n[1] * p->n[2]) * sizeof(float);
  if (from == SF__FROM_REMOTE)
    delta->bytes_remote += b;
  else if (from == SF__FROM_OWN)
    delta->bytes_own += b;
  else
    delta->bytes_node += b;
}
