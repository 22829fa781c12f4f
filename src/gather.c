#include "gather.h"

#include <string.h>

int sf__gather_remote(const sf__store *s, const sf__piece *p)
{
  return s->peer[p->src] == NULL;
}

sf__from sf__gather_source(const sf__store *s, int d, const sf__piece *p,
                           const float *landing, const int64_t crop[3],
                           sf__view *v)
{
  const float *seg = sf__store_segment(s, p->src, d);
  if (seg == NULL) {
    *v = (sf__view){
        landing, {crop[0], crop[1], crop[2]}, {p->d[0], p->d[1], p->d[2]}};
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

slabfeed_status sf__gather_get(sf__store *s, int d, const sf__piece *p,
                               const int64_t crop[3], float *dst, sf__err *e)
{
  const int64_t C = s->channels[d];
  MPI_Datatype to = MPI_DATATYPE_NULL, from = MPI_DATATYPE_NULL;
  const int dsizes[4] = {(int)C, (int)crop[0], (int)crop[1], (int)crop[2]};
  const int sub[4] = {(int)C, (int)p->n[0], (int)p->n[1], (int)p->n[2]};
  const int dstart[4] = {0, (int)p->d[0], (int)p->d[1], (int)p->d[2]};
  const int ssizes[4] = {(int)C, (int)sf__store_planes(s, p->src),
                         (int)s->shape[1], (int)s->shape[2]};
  const int sstart[4] = {0, (int)p->q, (int)p->y, (int)p->x};
  SF_MPI_GOTO(MPI_Type_create_subarray(4, dsizes, sub, dstart, MPI_ORDER_C,
                                       MPI_FLOAT, &to),
              e, out);
  SF_MPI_GOTO(MPI_Type_commit(&to), e, out);
  SF_MPI_GOTO(MPI_Type_create_subarray(4, ssizes, sub, sstart, MPI_ORDER_C,
                                       MPI_FLOAT, &from),
              e, out);
  SF_MPI_GOTO(MPI_Type_commit(&from), e, out);
  SF_MPI_GOTO(MPI_Get(dst, 1, to, p->src,
                      (MPI_Aint)sf__store_offset(s, p->src, d), 1, from,
                      s->world_win),
              e, out);
out:
  if (to != MPI_DATATYPE_NULL)
    MPI_Type_free(&to);
  if (from != MPI_DATATYPE_NULL)
    MPI_Type_free(&from);
  return e->status;
}

slabfeed_status sf__gather_complete(sf__store *s, sf__err *e)
{
  if (s->world_win != MPI_WIN_NULL)
    SF_MPI_GOTO(MPI_Win_flush_local_all(s->world_win), e, out);
out:
  return e->status;
}

void sf__gather_account(const sf__store *s, int d, const sf__piece *p,
                        sf__from from, slabfeed_stats *delta)
{
  const uint64_t b =
      (uint64_t)(s->channels[d] * p->n[0] * p->n[1] * p->n[2]) * sizeof(float);
  if (from == SF__FROM_REMOTE) {
    /* One get per piece and dataset; its subarray types move one
     * contiguous run per crop row of each channel (a row is contiguous on
     * both sides; more only when a crop spans whole rows of the box). */
    delta->bytes_remote += b;
    delta->remote_gets += 1;
    delta->remote_runs += (uint64_t)(s->channels[d] * p->n[0] * p->n[1]);
  } else if (from == SF__FROM_OWN)
    delta->bytes_own += b;
  else
    delta->bytes_node += b;
}
