#include "source/gather.h"

#include <assert.h>
#include <string.h>

int64_t sf__gather_elems(const sf__store *s, int d, const sf__piece *p)
{
  return s->channels[d] * p->n[0] * p->n[1] * p->n[2];
}

void sf__gather_copy(const sf__view *v, int64_t C, const sf__piece *p,
                     const int64_t crop[3], float *dst)
{
  assert(v->mem == SF__MEM_HOST);
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
