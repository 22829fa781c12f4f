#include "source/gather.h"

#include <assert.h>
#include <string.h>

int64_t sf__gather_elems(const sf__store *s, int d, const sf__piece *p)
{
  return s->channels[d] * s->cube[d] * p->n[0] * p->n[1] * p->n[2];
}

void sf__gather_copy(const sf__view *v, int64_t C, const sf__piece *p,
                     const int64_t crop[3], float *dst)
{
  assert(v->mem == SF__MEM_HOST);
  const size_t row = (size_t)p->n[2] * sizeof(float);
  for (int64_t c = 0; c < C; c++)
    for (int64_t k = 0; k < p->n[0]; k++)
      for (int64_t j = 0; j < p->n[1]; j++) {
        const float *from = sf__view_row(v, c, k, j);
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
  int64_t yx[2];
  sf__store_pitch(s, p->src, p->q, yx);
  /* A dataset of scale f: the piece scaled, in planes of f x the rows and
   * columns, f^3 x the offsets. */
  const int64_t f = s->scale[d];
  const int sizes[3] = {(int)(f * p->n[0]), (int)(f * yx[0]), (int)(f * yx[1])};
  const int sub[3] = {(int)(f * p->n[0]), (int)(f * p->n[1]),
                      (int)(f * p->n[2])};
  const int start[3] = {0, (int)(f * p->y), (int)(f * p->x)};
  const int one = 1;
  const MPI_Aint fb = (MPI_Aint)sizeof(float);
  const MPI_Aint at =
      (MPI_Aint)(s->cube[d] * sf__store_at(s, p->src, p->q)) * fb;
  MPI_Datatype box = MPI_DATATYPE_NULL, chans = MPI_DATATYPE_NULL;
  *t = MPI_DATATYPE_NULL;
  SF_MPI_GOTO(MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_C,
                                       MPI_FLOAT, &box),
              e, out);
  SF_MPI_GOTO(MPI_Type_create_hvector(
                  (int)s->channels[d], 1,
                  (MPI_Aint)(s->cube[d] * sf__store_chan(s, p->src)) * fb, box,
                  &chans),
              e, out);
  SF_MPI_GOTO(MPI_Type_create_struct(1, &one, &at, &chans, t), e, out);
  SF_MPI_GOTO(MPI_Type_commit(t), e, out);
out:
  if (chans != MPI_DATATYPE_NULL)
    MPI_Type_free(&chans);
  if (box != MPI_DATATYPE_NULL)
    MPI_Type_free(&box);
  if (e->status != SLABFEED_OK && *t != MPI_DATATYPE_NULL)
    MPI_Type_free(t);
  return e->status;
}
