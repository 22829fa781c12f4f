#include "assemble.h"

#include <string.h>

#include "geometry.h"

/* A crop spans at most 2 periodic z-runs; each is cut at most once per
 * slab boundary it crosses (P), plus the own-store run. */
int sf__crop_max_zruns(const sf__store *s)
{
  return 2 * s->size + 4;
}

int sf__crop_max_pieces(const sf__store *s)
{
  return sf__crop_max_zruns(s) * 4;
}

/* Splits the z-run [z, z+len) (inside [0,Z)) by source; appends to zr[]. */
static int split_z(const sf__store *s, int64_t z, int64_t len, int64_t off,
                   sf__zrun *zr)
{
  const int64_t Z = s->shape[0];
  const int64_t mine = sf__store_planes(s, s->rank);
  int n = 0;
  while (len > 0) {
    const int64_t p = sf__pmod(z - (s->z0 - s->halo), Z);
    int64_t run;
    if (p < mine) { /* own core or halo */
      run = len < mine - p ? len : mine - p;
      zr[n++] = (sf__zrun){s->rank, p, run, off};
    } else {
      const int o = sf__slab_owner(Z, s->size, z);
      const int64_t oz0 = sf__slab_begin(Z, s->size, o);
      const int64_t oz1 = sf__slab_begin(Z, s->size, o + 1);
      run = len < oz1 - z ? len : oz1 - z;
      zr[n++] = (sf__zrun){o, z - oz0 + s->halo, run, off};
    }
    z += run;
    off += run;
    len -= run;
  }
  return n;
}

int sf__crop_pieces(const sf__store *s, const int64_t origin[3],
                    const int64_t crop[3], sf__piece *out, sf__zrun *zr)
{
  sf__run zs[2], ys[2], xs[2];
  const int nz = sf__periodic_split(origin[0], crop[0], s->shape[0], zs);
  const int ny = sf__periodic_split(origin[1], crop[1], s->shape[1], ys);
  const int nx = sf__periodic_split(origin[2], crop[2], s->shape[2], xs);
  int nzr = 0;
  for (int i = 0; i < nz; i++)
    nzr += split_z(s, zs[i].begin, zs[i].len, zs[i].crop_off, zr + nzr);
  int n = 0;
  for (int i = 0; i < nzr; i++)
    for (int j = 0; j < ny; j++)
      for (int k = 0; k < nx; k++)
        out[n++] = (sf__piece){zr[i].src,
                               zr[i].q,
                               ys[j].begin,
                               xs[k].begin,
                               {zr[i].len, ys[j].len, xs[k].len},
                               {zr[i].off, ys[j].crop_off, xs[k].crop_off}};
  return n;
}

/* Copies a piece out of a segment this process can address. */
static void copy_piece(const sf__store *s, const float *seg, int64_t planes,
                       int64_t C, const sf__piece *p, const int64_t crop[3],
                       float *dst)
{
  const int64_t Y = s->shape[1], X = s->shape[2];
  const size_t row = (size_t)p->n[2] * sizeof(float);
  for (int64_t c = 0; c < C; c++)
    for (int64_t k = 0; k < p->n[0]; k++)
      for (int64_t j = 0; j < p->n[1]; j++) {
        const float *from =
            seg + ((c * planes + p->q + k) * Y + p->y + j) * X + p->x;
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

void sf__piece_account(const sf__store *s, int d, const sf__piece *p,
                       sf__gather_bytes *bytes)
{
  const uint64_t b =
      (uint64_t)(s->channels[d] * p->n[0] * p->n[1] * p->n[2]) * sizeof(float);
  if (s->peer[p->src] == NULL)
    bytes->remote += b;
  else if (p->src == s->rank)
    bytes->own += b;
  else
    bytes->node += b;
}

slabfeed_status sf__gather_host(sf__store *s, int d, const sf__piece *pieces,
                                int n, const int64_t crop[3], float *dst,
                                sf__gather_bytes *bytes, sf__err *e)
{
  const int64_t C = s->channels[d];
  for (int i = 0; i < n && e->status == SLABFEED_OK; i++) {
    const sf__piece *p = &pieces[i];
    if (s->peer[p->src] != NULL) {
      const float *seg =
          (const float *)(s->peer[p->src] + sf__store_offset(s, p->src, d));
      copy_piece(s, seg, sf__store_planes(s, p->src), C, p, crop, dst);
    } else if (sf__gather_get(s, d, p, crop, dst, e) != SLABFEED_OK) {
      break;
    }
    sf__piece_account(s, d, p, bytes);
  }
  return e->status;
}

slabfeed_status sf__gather_complete(sf__store *s, sf__err *e)
{
  if (s->world_win != MPI_WIN_NULL)
    SF_MPI_GOTO(MPI_Win_flush_local_all(s->world_win), e, out);
out:
  return e->status;
}
