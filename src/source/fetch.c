#include "source/fetch.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/nvtx.h"
#include "common/inject.h"
#include "common/mpilib.h"

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
  /* Remote pieces land whole (a target core is cut out of them after):
   * every dataset's channels over the whole crop. */
  const size_t vol = (size_t)(b->crop[0] * b->crop[1] * b->crop[2]);
  size_t n = 0;
  for (int d = 0; d < b->ndsets; d++)
    n += (size_t)b->B * (size_t)b->xf[d].channels * (size_t)b->store->cube[d] *
         vol * sizeof(float);
  return n;
}

int sf__fetch_needed(const sf__batch_plan *b)
{
  return sf__store_crops_cross(b->store, b->locality);
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
  f->get_flush = f->mode == SF__FETCH_GET && sf__fetch_get_flushes();
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
  f->recv_posted = f->sent = f->landed = f->flushed = 0;
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

/* GET: one piece of `count` floats from rank `src` (target type t at
 * displacement `at` of its segment) into dst. MPI_Rget where its request
 * is known to complete only once the data is there (Open MPI); elsewhere
 * MPI_Get, completed by MPI_Win_flush_local_all: MPICH 4.0 (ch4:ucx)
 * completes an MPI_Rget with a derived target type before the data has
 * landed (pmodels/mpich#7896), and its derivatives share that code. */
static int get_piece(sf__fetch *f, float *dst, int count, int src, size_t at,
                     MPI_Datatype t, MPI_Request *req)
{
  if (f->get_flush) {
    *req = MPI_REQUEST_NULL;
    return MPI_Get(dst, count, MPI_FLOAT, src, (MPI_Aint)at, 1, t,
                   f->s->world_win);
  }
  return MPI_Rget(dst, count, MPI_FLOAT, src, (MPI_Aint)at, 1, t,
                  f->s->world_win, req);
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
            get_piece(f, land + at, (int)sf__gather_elems(s, d, p), p->src,
                      sf__store_offset(s, p->src, d), t, &req[n]);
        MPI_Type_free(&t);
        if (rc != MPI_SUCCESS) {
          sf__fail_mpi(e, rc, f->get_flush ? "MPI_Get" : "MPI_Rget");
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

/* MPI_Waitall / MPI_Testall without statuses. GCC 12 takes MPICH's
 * MPI_STATUSES_IGNORE (a cast constant) for an empty array and warns
 * -Wstringop-overflow on these calls (a false positive:
 * pmodels/mpich#5687); the warning is off for these two only. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
static int wait_all(int n, MPI_Request *req)
{
  return MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
}

static int test_all(int n, MPI_Request *req, int *done)
{
  return MPI_Testall(n, req, done, MPI_STATUSES_IGNORE);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* Completes (block) or tests the requests of one array; *done tells. */
static slabfeed_status complete(int n, MPI_Request *req, int block, int *done,
                                sf__err *e)
{
  *done = 1;
  if (n == 0)
    return SLABFEED_OK;
  const int rc = block ? wait_all(n, req) : test_all(n, req, done);
  if (rc != MPI_SUCCESS) {
    *done = 0;
    return sf__fail_mpi(e, rc, "completing remote-piece transfers");
  }
  return SLABFEED_OK;
}

/* GET with MPI_Get: batch `j` of slot's gets is complete once a flush
 * after its posting returned; block flushes everything posted. */
static slabfeed_status complete_flushed(sf__fetch *f, uint64_t j, int block,
                                        int *done, sf__err *e)
{
  *done = j < f->flushed;
  if (*done || !block)
    return SLABFEED_OK;
  const int rc = MPI_Win_flush_local_all(f->s->world_win);
  if (rc != MPI_SUCCESS)
    return sf__fail_mpi(e, rc, "MPI_Win_flush_local_all (remote pieces)");
  f->flushed = f->recv_posted;
  *done = 1;
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
    const slabfeed_status st =
        f->get_flush
            ? complete_flushed(f, f->landed, block, &done, e)
            : complete(f->nr[slot], f->rreq + (size_t)slot * (size_t)f->cap,
                       block, &done, e);
    if (st != SLABFEED_OK)
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

slabfeed_status sf__fetch_serve(sf__fetch *f, uint64_t j, sf__err *e)
{
  if (!f->active || f->mode != SF__FETCH_SEND)
    return SLABFEED_OK;
  SF_RANGE_PUSH("fetch serve");
  const uint64_t K = (uint64_t)f->K;
  /* Posted: every send of batches up to j (each waits for the sends K
   * batches before it, which the peers' next calls receive). */
  while (f->sent <= j && e->status == SLABFEED_OK)
    if (!advance(f, j, 0, e) && e->status == SLABFEED_OK)
      advance(f, j, 1, e);
  /* Delivered: the last K of them, the older ones were completed before
   * their slots were reused. A slot that already holds a later batch
   * (sends run up to K - 1 batches ahead) is left alone: its receives may
   * not be posted yet, and the peer posts them only in a later next. */
  uint64_t b0 = j + 1 > K ? j + 1 - K : 0;
  if (f->sent > K && f->sent - K > b0)
    b0 = f->sent - K;
  for (uint64_t b = b0; b <= j && e->status == SLABFEED_OK; b++) {
    const int slot = (int)(b % K);
    int done;
    if (complete(f->ns[slot], f->sreq + (size_t)slot * (size_t)f->plan->size, 1,
                 &done, e) == SLABFEED_OK)
      f->ns[slot] = 0;
  }
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

int sf__fetch_get_flushes(void)
{
  /* SLABFEED_TEST_FORCE_RGET=1 (tests only) keeps MPI_Rget under any MPI,
   * so that a test can show the self-check catching a broken one. */
  const char *force = getenv("SLABFEED_TEST_FORCE_RGET");
  if (force != NULL && strcmp(force, "1") == 0)
    return 0;
  return sf__mpilib() != SF__MPILIB_OPEN_MPI;
}

/* ---- Self-check at open
 * ------------------------------------------------------ Known bytes over the
 * real windows, with the real transfer design, before any crop is delivered:
 * the only defence against an MPI that completes a transfer without moving its
 * data. */

/* How many copies of the probe are in flight at once: MPICH's early
 * completion of MPI_Rget with a derived target type (the reason for the
 * check) showed with several large gets outstanding and not with one
 * small one. */
#define SF_PROBE_REPS 4

/* The box probed in rank h's dataset-0 segment: every channel, up to 4
 * planes of the size of its first plane, 32 rows and 32 columns, off the
 * segment's first row and column where the box allows (a true subarray,
 * as crop pieces are). */
static sf__piece probe_piece(const sf__store *s, int h)
{
  const int64_t planes = sf__store_planes(s, h);
  sf__piece p = {.src = h};
  int64_t yx[2] = {0, 0};
  const int64_t run = planes > 0 ? sf__store_pitch(s, h, 0, yx) : 0;
  /* The same floats at most on an input grid finer than the planes'. */
  const int64_t f = s->scale[0], mz = 4 / f > 1 ? 4 / f : 1,
                myx = 32 / f > 1 ? 32 / f : 1;
  p.n[0] = run < mz ? run : mz;
  for (int a = 1; a < 3; a++) {
    const int64_t N = yx[a - 1];
    p.n[a] = N <= 1 ? N : N - 1 < myx ? N - 1 : myx;
  }
  p.q = run > p.n[0] ? 1 : 0;
  p.y = yx[0] > p.n[1] ? 1 : 0;
  p.x = yx[1] > p.n[2] ? 1 : 0;
  return p;
}

/* The pattern value of element i of rank h's probe (an exact integer in
 * float: below 2^24). */
static float probe_value(int h, int64_t i)
{
  return (float)((h % 1021) * 8192 + i % 8192);
}

/* The rank whose probe rank r reads: the first rank of r's group on
 * another node with planes, or -1 (then r reads none). */
static int probe_holder(const sf__store *s, int r)
{
  const sf__placement *L = &s->L;
  const int g = L->groupof[r];
  for (int m = L->gfirst[g]; m < L->gfirst[g + 1]; m++) {
    const int h = L->order[m];
    if (L->nodeof[h] != L->nodeof[r] && sf__store_planes(s, h) > 0)
      return h;
  }
  return -1;
}

/* Writes this rank's probe pattern into its own segment (in place, in the
 * segment's layout: store.h; the input's grid is scale[0] x the planes',
 * a coarser target's input, as sf__gather_type reads it). */
static void probe_fill(sf__store *s)
{
  const sf__piece q = probe_piece(s, s->rank);
  const int64_t f = s->scale[0];
  const sf__piece p = sf__piece_scale(&q, f);
  int64_t yx[2];
  sf__store_pitch(s, s->rank, 0, yx);
  const sf__view at = {
      (const float *)(s->base + sf__store_offset(s, s->rank, 0)),
      SF__MEM_HOST,
      s->cube[0] * sf__store_chan(s, s->rank),
      f * yx[0],
      f * yx[1],
      {f * q.q, f * q.y, f * q.x}};
  int64_t i = 0;
  for (int64_t c = 0; c < s->channels[0]; c++)
    for (int64_t k = 0; k < p.n[0]; k++)
      for (int64_t j = 0; j < p.n[1]; j++) {
        float *row = (float *)sf__view_row(&at, c, k, j);
        for (int64_t x = 0; x < p.n[2]; x++)
          row[x] = probe_value(s->rank, i++);
      }
}

/* GET: this rank reads its holder's probe SF_PROBE_REPS times at once, as
 * crops are read (subarray gets inside the passive-target epoch the
 * caller holds, completed as the mode completes them: the epoch's end
 * would complete them anyway and hide an early completion). */
static slabfeed_status probe_get(sf__store *s, int h, float *got, int count,
                                 sf__err *e)
{
  const sf__piece p = probe_piece(s, h);
  MPI_Datatype t = MPI_DATATYPE_NULL;
  MPI_Request req[SF_PROBE_REPS];
  int n = 0;
  const int flush = sf__fetch_get_flushes();
  if (h < 0 || count == 0)
    return e->status;
  if (sf__gather_type(s, 0, &p, &t, e) != SLABFEED_OK)
    return e->status;
  const MPI_Aint at = (MPI_Aint)sf__store_offset(s, h, 0);
  for (int r = 0; r < SF_PROBE_REPS; r++) {
    float *dst = got + (size_t)r * (size_t)count;
    if (flush)
      SF_MPI_GOTO(MPI_Get(dst, count, MPI_FLOAT, h, at, 1, t, s->world_win), e,
                  out);
    else
      SF_MPI_GOTO(
          MPI_Rget(dst, count, MPI_FLOAT, h, at, 1, t, s->world_win, &req[n]),
          e, out);
    n += !flush;
  }
  if (flush)
    SF_MPI_GOTO(MPI_Win_flush_local_all(s->world_win), e, out);
out:
  if (n > 0) {
    const int rc = wait_all(n, req);
    if (rc != MPI_SUCCESS && e->status == SLABFEED_OK)
      sf__fail_mpi(e, rc, "MPI_Rget (self-check)");
  }
  MPI_Type_free(&t);
  return e->status;
}

/* SEND: every holder sends its probe SF_PROBE_REPS times, as typed
 * messages over its segment, to each rank that reads it; this rank
 * receives its own contiguously. Every rank posts its receives before it
 * sends, so the blocking sends all find their match. */
static slabfeed_status probe_send(sf__store *s, int h, float *got, int count,
                                  sf__err *e)
{
  MPI_Datatype sub = MPI_DATATYPE_NULL, msg = MPI_DATATYPE_NULL;
  MPI_Request req[SF_PROBE_REPS];
  int n = 0;
  const sf__piece mine = probe_piece(s, s->rank);
  const MPI_Aint displ = (MPI_Aint)sf__store_offset(s, s->rank, 0);
  const int one = 1;
  for (int r = 0; r < SF_PROBE_REPS && h >= 0; r++, n++)
    SF_MPI_GOTO(MPI_Irecv(got + (size_t)r * (size_t)count, count, MPI_FLOAT, h,
                          0x5fc, s->comm, &req[n]),
                e, out);
  if (sf__gather_type(s, 0, &mine, &sub, e) != SLABFEED_OK)
    goto out;
  SF_MPI_GOTO(MPI_Type_create_struct(1, &one, &displ, &sub, &msg), e, out);
  SF_MPI_GOTO(MPI_Type_commit(&msg), e, out);
  for (int r = 0; r < s->size; r++)
    for (int k = 0; k < SF_PROBE_REPS && probe_holder(s, r) == s->rank; k++)
      SF_MPI_GOTO(MPI_Send(s->base, 1, msg, r, 0x5fc, s->comm), e, out);
out:
  if (n > 0) {
    const int rc = wait_all(n, req);
    if (rc != MPI_SUCCESS && e->status == SLABFEED_OK)
      sf__fail_mpi(e, rc, "self-check messages");
  }
  if (msg != MPI_DATATYPE_NULL)
    MPI_Type_free(&msg);
  if (sub != MPI_DATATYPE_NULL)
    MPI_Type_free(&sub);
  return e->status;
}

slabfeed_status sf__fetch_selfcheck(sf__store *s, sf__fetch_mode mode,
                                    int locality, sf__err *e)
{
  if (locality || s->L.N <= s->L.ng || s->world_win == MPI_WIN_NULL)
    return SLABFEED_OK; /* no piece crosses nodes */
  const int h = probe_holder(s, s->rank);
  const sf__piece p = probe_piece(s, h < 0 ? s->rank : h);
  int count = h < 0 ? 0 : (int)sf__gather_elems(s, 0, &p);
  /* At most 64 channels x 4 x 32 x 32 floats a copy (4 MiB in all). */
  float *got = malloc(((size_t)count * SF_PROBE_REPS + 1) * sizeof *got);
  if (got == NULL) {
    /* This rank still takes part, receiving nothing (its holder's message
     * is then truncated: an error on this rank, which the caller agrees
     * on). */
    sf__fail(e, SLABFEED_ERR_NOMEM, "self-check: cannot allocate %zu bytes",
             (size_t)count * SF_PROBE_REPS * sizeof *got);
    count = 0;
    got = NULL;
  }
  float none = 0;
  if (got == NULL)
    got = &none;
  else /* all-ones bits: a NaN, equal to no pattern value */
    memset(got, 0xff, ((size_t)count * SF_PROBE_REPS + 1) * sizeof *got);
  if (sf__store_planes(s, s->rank) > 0)
    probe_fill(s);
  /* The pattern is in every segment before anyone reads it. */
  int rc = sf__store_win_sync(s);
  if (rc == MPI_SUCCESS)
    rc = MPI_Barrier(s->comm);
  int locked = 0;
  if (rc != MPI_SUCCESS)
    sf__fail_mpi(e, rc, "MPI_Barrier (self-check)");
  else if (mode == SF__FETCH_GET) {
    rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, s->world_win);
    if (rc != MPI_SUCCESS)
      sf__fail_mpi(e, rc, "MPI_Win_lock_all (self-check)");
    else
      locked = 1, probe_get(s, h, got, count, e);
  } else
    probe_send(s, h, got, count, e);
  if (count > 0 && sf__inject("selfcheck", s->rank))
    got[count / 2] += 1.0f; /* a test's stand-in for a broken MPI */
  /* Compared as the transfers' completion left them, before the epoch's
   * end completes whatever is still on its way. */
  int wrong = 0;
  for (int r = 0; r < SF_PROBE_REPS && e->status == SLABFEED_OK; r++)
    for (int i = 0; i < count; i++)
      wrong += got[(size_t)r * (size_t)count + (size_t)i] != probe_value(h, i);
  if (locked && (rc = MPI_Win_unlock_all(s->world_win)) != MPI_SUCCESS &&
      e->status == SLABFEED_OK)
    sf__fail_mpi(e, rc, "MPI_Win_unlock_all (self-check)");
  if (got != &none)
    free(got);
  count *= SF_PROBE_REPS;
  if (wrong > 0) {
    char lib[128];
    sf__mpilib_name(lib, sizeof lib);
    sf__fail(
        e, SLABFEED_ERR_MPI,
        "self-check of transfers between nodes failed: %d of %d floats "
        "of a known box from rank %d arrived wrong with SLABFEED_REMOTE=%s "
        "(%s) under %s; slabfeed refuses to deliver crops that may be "
        "wrong: try SLABFEED_REMOTE=%s, or another MPI build",
        wrong, count, h, mode == SF__FETCH_GET ? "get" : "send",
        mode == SF__FETCH_GET
            ? (sf__fetch_get_flushes() ? "MPI_Get + flush" : "MPI_Rget")
            : "typed messages",
        lib, mode == SF__FETCH_GET ? "send" : "get");
  }
  /* Nobody overwrites its segment (the slab read) while others read it. */
  rc = MPI_Barrier(s->comm);
  if (rc != MPI_SUCCESS && e->status == SLABFEED_OK)
    sf__fail_mpi(e, rc, "MPI_Barrier (self-check)");
  return e->status;
}
