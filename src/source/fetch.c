#include "source/fetch.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/nvtx.h"

/* ---- The map of a landing slot ------------------------------------------ */

slabfeed_status sf__fetch_map_init(sf__fetch_map *m, const sf__batch_plan *b,
                                   sf__err *e)
{
  const size_t P = (size_t)b->size;
  memset(m, 0, sizeof *m);
  m->base = malloc(P * sizeof *m->base);
  m->cur = malloc(P * sizeof *m->cur);
  m->len = malloc(P * sizeof *m->len);
  m->touched = malloc(P * sizeof *m->touched);
  m->pieces = malloc((size_t)sf__batch_max_pieces(b) * sizeof *m->pieces);
  m->zruns = malloc((size_t)sf__batch_max_zruns(b) * sizeof *m->zruns);
  if (!m->base || !m->cur || !m->len || !m->touched || !m->pieces || !m->zruns)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the landing map");
  for (size_t r = 0; r < P; r++)
    m->base[r] = -1;
  return SLABFEED_OK;
}

void sf__fetch_map_free(sf__fetch_map *m)
{
  free(m->base);
  free(m->cur);
  free(m->len);
  free(m->touched);
  free(m->pieces);
  free(m->zruns);
  memset(m, 0, sizeof *m);
}

/* 1 when piece p, as rank v sees it, comes from another node. */
static int remote_for(const sf__store *s, int v, const sf__piece *p)
{
  return s->L.nodeof[p->src] != s->L.nodeof[v];
}

static int64_t piece_floats(const sf__batch_plan *b, const sf__piece *p)
{
  int64_t n = 0;
  for (int d = 0; d < b->ndsets; d++)
    n += sf__gather_elems(b->store, d, p);
  return n;
}

void sf__fetch_map_batch(sf__fetch_map *m, const sf__batch_plan *b, int viewer,
                         const int64_t *origins)
{
  for (int t = 0; t < m->ntouched; t++)
    m->base[m->touched[t]] = -1;
  m->ntouched = 0;
  for (int i = 0; i < b->B; i++) {
    const int n =
        sf__batch_split(b, viewer, origins + 3 * i, m->pieces, m->zruns);
    for (int k = 0; k < n; k++) {
      const sf__piece *p = &m->pieces[k];
      if (!remote_for(b->store, viewer, p))
        continue;
      if (m->base[p->src] < 0) {
        m->base[p->src] = 0;
        m->len[p->src] = 0;
        m->touched[m->ntouched++] = p->src;
      }
      m->len[p->src] += piece_floats(b, p);
    }
  }
  int64_t at = 0;
  for (int t = 0; t < m->ntouched; t++) {
    const int r = m->touched[t];
    m->base[r] = m->cur[r] = at;
    at += m->len[r];
  }
}

int64_t sf__fetch_map_at(sf__fetch_map *m, const sf__store *s, int d,
                         const sf__piece *p)
{
  const int64_t at = m->cur[p->src];
  m->cur[p->src] += sf__gather_elems(s, d, p);
  return at;
}

/* ---- The engine ------------------------------------------------------------
 */

size_t sf__fetch_slot_bytes(const sf__batch_plan *b)
{
  size_t n = 0;
  for (int d = 0; d < b->ndsets; d++)
    n += (size_t)b->B * (size_t)sf__batch_sample_elems(b, d) * sizeof(float);
  return n;
}

int sf__fetch_needed(const sf__batch_plan *b)
{
  /* Some group spans more than one node (groups hold N / ng or one more
   * nodes), and crops are not kept on their node. */
  return !b->locality && b->store->L.N > b->store->L.ng;
}

slabfeed_status sf__fetch_open(sf__fetch *f, const sf__batch_plan *b,
                               sf__store *s, int K, float *const landing[],
                               sf__slot_free_fn slot_free, void *arg,
                               sf__err *e)
{
  memset(f, 0, sizeof *f);
  if (!sf__fetch_needed(b))
    return SLABFEED_OK;
  f->active = 1;
  f->mode = b->remote_get ? SF__FETCH_GET : SF__FETCH_SEND;
  f->plan = b;
  f->s = s;
  f->K = K;
  f->landing = landing;
  f->slot_free = slot_free;
  f->slot_arg = arg;
  /* The loader's own duplicate of the caller's communicator: only these
   * messages travel on it point to point. */
  f->comm = s->comm;
  if (sf__fetch_slot_bytes(b) / sizeof(float) > (size_t)INT_MAX)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: one batch holds %zu floats; remote pieces need "
                    "fewer than 2^31 per batch (smaller batch or crop)",
                    sf__fetch_slot_bytes(b) / sizeof(float));
  const int64_t per_batch =
      (int64_t)b->B * sf__batch_max_pieces(b) * (int64_t)b->ndsets;
  if (per_batch > INT_MAX / K)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: batch %d of crops split over groups of this "
                    "size needs too many transfer requests (smaller batch)",
                    b->B);
  f->cap = per_batch > b->size ? (int)per_batch : b->size;
  f->tcap = (int)per_batch;
  f->rreq = malloc((size_t)K * (size_t)f->cap * sizeof *f->rreq);
  f->sreq = malloc((size_t)K * (size_t)b->size * sizeof *f->sreq);
  f->nr = calloc((size_t)K, sizeof *f->nr);
  f->ns = calloc((size_t)K, sizeof *f->ns);
  f->origins = malloc((size_t)b->B * 3 * sizeof *f->origins);
  f->types = malloc((size_t)f->tcap * sizeof *f->types);
  f->mine =
      malloc((size_t)b->B * (size_t)sf__batch_max_pieces(b) * sizeof *f->mine);
  f->displs = malloc((size_t)f->tcap * sizeof *f->displs);
  f->lens = malloc((size_t)f->tcap * sizeof *f->lens);
  if (!f->rreq || !f->sreq || !f->nr || !f->ns || !f->origins || !f->types ||
      !f->displs || !f->lens || !f->mine)
    return sf__fail(e, SLABFEED_ERR_NOMEM,
                    "cannot allocate the remote-piece requests");
  return sf__fetch_map_init(&f->map, b, e);
}

void sf__fetch_begin(sf__fetch *f, uint64_t epoch, uint64_t step)
{
  f->epoch0 = epoch;
  f->step0 = step;
  f->recv_posted = f->sent = f->landed = 0;
  f->begun = 1;
}

/* Origins of the batch of `rank` at batch j of the generation. */
static void draw_batch(sf__fetch *f, int rank, uint64_t j)
{
  uint64_t epoch, step;
  sf__batch_position(f->plan, f->epoch0, f->step0, j, &epoch, &step);
  for (int i = 0; i < f->plan->B; i++) {
    int32_t sym;
    sf__batch_draw(f->plan, rank, epoch, step, i, f->origins + 3 * i, &sym);
  }
}

/* Posts the receives (SEND) or gets (GET) of batch j into its slot. */
static slabfeed_status post_recv(sf__fetch *f, uint64_t j, sf__err *e)
{
  const sf__batch_plan *b = f->plan;
  sf__store *s = f->s;
  const int slot = (int)(j % (uint64_t)f->K);
  float *land = f->landing[slot];
  MPI_Request *req = f->rreq + (size_t)slot * (size_t)f->cap;
  int n = 0;
  draw_batch(f, s->rank, j);
  sf__fetch_map_batch(&f->map, b, s->rank, f->origins);
  if (f->mode == SF__FETCH_SEND) {
    for (int t = 0; t < f->map.ntouched; t++) {
      const int r = f->map.touched[t];
      SF_MPI_GOTO(MPI_Irecv(land + f->map.base[r], (int)f->map.len[r],
                            MPI_FLOAT, r, (int)(j & 0x7fff), f->comm, &req[n]),
                  e, out);
      n++;
      f->delta.remote_gets++;
      f->delta.remote_runs++;
    }
    goto out;
  }
  for (int i = 0; i < b->B; i++) {
    const int np = sf__batch_split(b, s->rank, f->origins + 3 * i,
                                   f->map.pieces, f->map.zruns);
    for (int k = 0; k < np; k++) {
      const sf__piece *p = &f->map.pieces[k];
      if (!remote_for(s, s->rank, p))
        continue;
      for (int d = 0; d < b->ndsets; d++) {
        MPI_Datatype t;
        const int64_t at = sf__fetch_map_at(&f->map, s, d, p);
        if (sf__gather_type(s, d, p, &t, e) != SLABFEED_OK)
          goto out;
        const int rc =
            MPI_Rget(land + at, (int)sf__gather_elems(s, d, p), MPI_FLOAT,
                     p->src, (MPI_Aint)sf__store_offset(s, p->src, d), 1, t,
                     s->world_win, &req[n]);
        MPI_Type_free(&t);
        if (rc != MPI_SUCCESS) {
          sf__fail_mpi(e, rc, "MPI_Rget");
          goto out;
        }
        n++;
        f->delta.remote_gets++;
        f->delta.remote_runs += (uint64_t)(s->channels[d] * p->n[0] * p->n[1]);
      }
    }
  }
out:
  f->nr[slot] = n;
  return e->status;
}

/* SEND: the message of batch j for rank r: this rank's n pieces of r's
 * batch (in f->mine, in r's landing order) as one derived datatype over
 * this rank's segment, which MPI packs as it sends. */
static slabfeed_status send_typed(sf__fetch *f, int r, int n, uint64_t j,
                                  MPI_Request *req, sf__err *e)
{
  sf__store *s = f->s;
  int nt = 0;
  MPI_Datatype msg = MPI_DATATYPE_NULL;
  for (int k = 0; k < n && e->status == SLABFEED_OK; k++)
    for (int d = 0; d < f->plan->ndsets && e->status == SLABFEED_OK; d++)
      if (sf__gather_type(s, d, &f->mine[k], &f->types[nt], e) == SLABFEED_OK) {
        f->displs[nt] = (MPI_Aint)sf__store_offset(s, s->rank, d);
        f->lens[nt] = 1;
        nt++;
      }
  if (e->status != SLABFEED_OK)
    goto out;
  SF_MPI_GOTO(MPI_Type_create_struct(nt, f->lens, f->displs, f->types, &msg), e,
              out);
  SF_MPI_GOTO(MPI_Type_commit(&msg), e, out);
  SF_MPI_GOTO(MPI_Isend(s->base, 1, msg, r, (int)(j & 0x7fff), f->comm, req), e,
              out);
out:
  if (msg != MPI_DATATYPE_NULL)
    MPI_Type_free(&msg);
  for (int t = 0; t < nt; t++)
    MPI_Type_free(&f->types[t]);
  return e->status;
}

/* SEND: posts the messages of batch j from this rank to every rank of its
 * group on another node that needs pieces of it. (Packing each message
 * into a contiguous send slot first was measured slower on the H200
 * machine: docs/DECISIONS.md.) */
static slabfeed_status post_send(sf__fetch *f, uint64_t j, sf__err *e)
{
  const sf__batch_plan *b = f->plan;
  sf__store *s = f->s;
  const sf__placement *L = &s->L;
  const int slot = (int)(j % (uint64_t)f->K);
  MPI_Request *req = f->sreq + (size_t)slot * (size_t)b->size;
  int n = 0;
  const int g = L->groupof[s->rank];
  for (int m = L->gfirst[g]; m < L->gfirst[g + 1] && e->status == SLABFEED_OK;
       m++) {
    const int r = L->order[m];
    if (L->nodeof[r] == L->nodeof[s->rank])
      continue;
    /* The pieces of r's batch j held here, in r's landing order. */
    draw_batch(f, r, j);
    int np = 0;
    for (int i = 0; i < b->B; i++) {
      const int q = sf__batch_split(b, r, f->origins + 3 * i, f->map.pieces,
                                    f->map.zruns);
      for (int k = 0; k < q; k++)
        if (f->map.pieces[k].src == s->rank)
          f->mine[np++] = f->map.pieces[k];
    }
    if (np > 0 && send_typed(f, r, np, j, &req[n], e) == SLABFEED_OK)
      n++;
  }
  f->ns[slot] = n;
  return e->status;
}

/* Completes (block) or tests the requests of one array; *done tells. */
static slabfeed_status complete(int n, MPI_Request *req, int block, int *done,
                                sf__err *e)
{
  *done = 1;
  if (n == 0)
    return SLABFEED_OK;
  int rc;
  if (block)
    rc = MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
  else
    rc = MPI_Testall(n, req, done, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    *done = 0;
    return sf__fail_mpi(e, rc, "completing remote-piece transfers");
  }
  return SLABFEED_OK;
}

/* One step of progress: the next send batch, the next receive batch or
 * the oldest batch in flight; 0 when nothing could move (without
 * blocking), else 1. */
static int advance(sf__fetch *f, uint64_t upto, int block, sf__err *e)
{
  const uint64_t K = (uint64_t)f->K;
  int done;
  if (f->mode == SF__FETCH_SEND && f->sent <= upto) {
    const int slot = (int)(f->sent % K);
    if (complete(f->ns[slot], f->sreq + (size_t)slot * (size_t)f->plan->size,
                 block, &done, e) != SLABFEED_OK)
      return 0;
    if (done) {
      f->ns[slot] = 0;
      if (post_send(f, f->sent, e) != SLABFEED_OK)
        return 0;
      f->sent++;
      return 1;
    }
  }
  if (f->recv_posted <= upto && f->recv_posted < f->landed + K &&
      f->slot_free(f->slot_arg, (int)(f->recv_posted % K), block)) {
    if (post_recv(f, f->recv_posted, e) != SLABFEED_OK)
      return 0;
    f->recv_posted++;
    return 1;
  }
  if (f->landed < f->recv_posted) {
    const int slot = (int)(f->landed % K);
    if (complete(f->nr[slot], f->rreq + (size_t)slot * (size_t)f->cap, block,
                 &done, e) != SLABFEED_OK)
      return 0;
    if (done) {
      f->nr[slot] = 0;
      f->landed++;
      return 1;
    }
  }
  return 0;
}

slabfeed_status sf__fetch_pump(sf__fetch *f, uint64_t upto, sf__err *e)
{
  if (!f->active)
    return SLABFEED_OK;
  while (advance(f, upto, 0, e))
    ;
  /* With nothing of its own in flight this rank still serves the others:
   * gets and messages aimed at it move only while it is inside MPI. */
  int flag;
  if (e->status == SLABFEED_OK &&
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, f->comm, &flag,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS)
    sf__fail(e, SLABFEED_ERR_MPI, "MPI_Iprobe (progress)");
  return e->status;
}

slabfeed_status sf__fetch_wait(sf__fetch *f, uint64_t j, sf__err *e)
{
  if (!f->active)
    return SLABFEED_OK;
  SF_RANGE_PUSH("fetch wait");
  /* Non-blocking moves first; then block on the oldest operation in the
   * way: batch j's receives, or this rank's own sends of K batches before
   * the ones it still has to post (the peers wait for those). */
  while (f->landed <= j && e->status == SLABFEED_OK)
    if (!advance(f, j, 0, e) && e->status == SLABFEED_OK)
      advance(f, j, 1, e);
  SF_RANGE_POP();
  return e->status;
}

slabfeed_status sf__fetch_settle(sf__fetch *f, sf__err *e)
{
  /* Before the first generation nothing was posted on any rank (open
   * agrees before it starts one), so there is nothing to agree on. */
  if (!f->active || !f->begun)
    return SLABFEED_OK;
  uint64_t h = f->recv_posted > f->sent ? f->recv_posted : f->sent;
  if (f->mode == SF__FETCH_SEND) {
    const int rc =
        MPI_Allreduce(MPI_IN_PLACE, &h, 1, MPI_UINT64_T, MPI_MAX, f->comm);
    if (rc != MPI_SUCCESS)
      return sf__fail_mpi(e, rc, "MPI_Allreduce (settling remote pieces)");
  } else {
    h = f->recv_posted;
  }
  /* Everything up to h posted and completed on every rank. */
  while (e->status == SLABFEED_OK &&
         (f->landed < h || (f->mode == SF__FETCH_SEND && f->sent < h)))
    if (!advance(f, h - 1, 0, e) && e->status == SLABFEED_OK)
      advance(f, h - 1, 1, e);
  for (int k = 0; k < f->K && e->status == SLABFEED_OK; k++) {
    int done;
    complete(f->ns[k], f->sreq + (size_t)k * (size_t)f->plan->size, 1, &done,
             e);
    f->ns[k] = 0;
  }
  return e->status;
}

void sf__fetch_take(sf__fetch *f, slabfeed_stats *delta)
{
  delta->remote_gets += f->delta.remote_gets;
  delta->remote_runs += f->delta.remote_runs;
  f->delta.remote_gets = f->delta.remote_runs = 0;
}

void sf__fetch_close(sf__fetch *f)
{
  if (f == NULL)
    return;
  free(f->rreq);
  free(f->sreq);
  free(f->nr);
  free(f->ns);
  free(f->origins);
  free(f->types);
  free(f->displs);
  free(f->lens);
  free(f->mine);
  sf__fetch_map_free(&f->map);
  memset(f, 0, sizeof *f);
}
