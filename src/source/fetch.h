/* Remote pieces fetched ahead. Every rank can compute every future sample
 * (the sampler is a pure function), so the pieces batch j needs from other
 * nodes are requested while earlier batches train. Only the thread that
 * calls slabfeed_next calls these functions, so the loader thread never
 * calls MPI whatever the thread level.
 *
 * A landing slot holds the remote pieces of one batch, dense
 * [C][n0][n1][n2] per piece and dataset, in blocks by holder (in the order
 * holders first appear), and inside a block in the order (sample, piece,
 * dataset): the map below gives every piece's place, for the poster and
 * for the producer alike.
 *
 * Two ways to move them (docs/DECISIONS.md has the measurements):
 *   SF__FETCH_GET  one MPI_Rget per piece and dataset (passive target;
 *                  subarray type at the holder: one network operation per
 *                  crop row in Open MPI's osc components); under other
 *                  MPIs MPI_Get completed by a flush (sf__fetch_get_flushes);
 *   SF__FETCH_SEND the holder, which can compute what each rank will ask,
 *                  sends all of a batch's pieces for one rank as one
 *                  message (a struct of subarray types over its segment,
 *                  packed by MPI), received contiguously: one large message
 *                  per holder and batch. Two-sided, so positions are posted
 *                  in the same order on every rank and sf__fetch_settle is
 *                  collective. */
#ifndef SF_FETCH_H
#define SF_FETCH_H

#include "plan/batch.h"

typedef enum { SF__FETCH_GET = 0, SF__FETCH_SEND = 1 } sf__fetch_mode;

/* Where the remote pieces of one batch land. */
typedef struct sf__fetch_map {
  int64_t *base, *cur; /* [P] floats: each holder's block, its cursor */
  int64_t *len;        /* [P] floats of each holder's block */
  int *touched;        /* holders of this batch, in order of appearance */
  int ntouched;
  sf__piece *pieces;
  sf__zrun *zruns;
} sf__fetch_map;

slabfeed_status sf__fetch_map_init(sf__fetch_map *m, const sf__batch_plan *b,
                                   sf__err *e);
void sf__fetch_map_free(sf__fetch_map *m);

/* Lays out the remote pieces, as rank `viewer` sees them, of the batch
 * whose B crop origins are origins[B][3]; then sf__fetch_map_at gives
 * their places in turn. */
void sf__fetch_map_batch(sf__fetch_map *m, const sf__batch_plan *b, int viewer,
                         const int64_t *origins);

/* Place (floats from the slot's start) of dataset d of remote piece p:
 * call it for every remote piece of the batch in order of samples, pieces
 * and datasets. */
int64_t sf__fetch_map_at(sf__fetch_map *m, const sf__store *s, int d,
                         const sf__piece *p);

/* Asks the back end whether landing slot `slot` may be written (its last
 * batch's copies are done); with block it may wait for that and must then
 * answer 1. */
typedef int (*sf__slot_free_fn)(void *arg, int slot, int block);

typedef struct sf__fetch {
  int active; /* 0: no piece can come from another node (nothing below) */
  sf__fetch_mode mode;
  const sf__batch_plan *plan;
  sf__store *s;
  MPI_Comm comm; /* the store's (the loader's duplicate); not owned */
  int K;         /* landing slots */
  float *const *landing;
  sf__slot_free_fn slot_free;
  void *slot_arg;
  uint64_t epoch0, step0;   /* position of batch 0 of the generation */
  int begun;                /* a generation was started */
  uint64_t recv_posted;     /* batches whose receives are posted */
  uint64_t sent;            /* batches whose sends are posted (SEND) */
  uint64_t landed;          /* batches whose pieces have arrived */
  int get_flush;            /* GET with MPI_Get + flush, not MPI_Rget */
  uint64_t flushed;         /* GET with flush: batches before it are done */
  MPI_Request *rreq, *sreq; /* [K][cap] receive / send requests */
  int *nr, *ns;             /* [K] */
  int cap;
  sf__fetch_map map;   /* the poster's */
  int64_t *origins;    /* [B][3] scratch */
  sf__piece *mine;     /* SEND: this rank's pieces of one message */
  MPI_Datatype *types; /* SEND: scratch of one typed message */
  MPI_Aint *displs;
  int *lens;
  int tcap;
  slabfeed_stats delta; /* transfers since the last sf__fetch_take */
} sf__fetch;

/* Bytes of one landing slot: the batch's crops in floats (the most its
 * remote pieces can take). */
size_t sf__fetch_slot_bytes(const sf__batch_plan *b);

/* 1 when a piece of some crop can be held on another node. */
int sf__fetch_needed(const sf__batch_plan *b);

/* Local. Sets up the engine over K landing slots landing[k] of
 * sf__fetch_slot_bytes each (the back end owns them: pinned for device
 * batches). The mode is the plan's (SLABFEED_REMOTE, agreed
 * at open). Inactive (nothing allocated) when sf__fetch_needed is 0. */
slabfeed_status sf__fetch_open(sf__fetch *f, const sf__batch_plan *b,
                               sf__store *s, int K, float *const landing[],
                               sf__slot_free_fn slot_free, void *arg,
                               sf__err *e);

/* Starts a generation at (epoch, step): batch 0 is that position. Only
 * after open or sf__fetch_settle. */
void sf__fetch_begin(sf__fetch *f, uint64_t epoch, uint64_t step);

/* Posts what it can for batches up to `upto` (inclusive) without waiting
 * and tests what is in flight; f->landed moves on. */
slabfeed_status sf__fetch_pump(sf__fetch *f, uint64_t upto, sf__err *e);

/* Waits until batch j has landed (posting it first when needed). */
slabfeed_status sf__fetch_wait(sf__fetch *f, uint64_t j, sf__err *e);

/* Blocks until this rank's messages for every batch up to j are posted and
 * delivered (SEND mode; a no-op otherwise). The back ends call it before
 * they return batch j: the peers' batch j needs those messages, and once
 * next has returned the caller may enter any other collective (NCCL's
 * gradient all-reduce, a writer's close, a reduction of the validation
 * loss) that cannot end before the peers' next returns. Without it a rank
 * could return batch j with its sends of j still unposted (their slots
 * waiting on older sends) and the peers would wait in next for a message
 * that this rank posts only in its next call: a deadlock. The peers have
 * posted their receives of j (up to K batches ahead) by the time they wait
 * for it, so this wait ends once they are inside next. */
slabfeed_status sf__fetch_serve(sf__fetch *f, uint64_t j, sf__err *e);

/* Collective (every rank at the same point of the stream, as for seek and
 * close). Ends the generation: GET waits for its gets; SEND posts, on
 * every rank, every batch up to the furthest any rank posted, and waits
 * for all, so no message is left unmatched. Landing slots are then
 * overwritten: the back end's copies from them must be done. */
slabfeed_status sf__fetch_settle(sf__fetch *f, sf__err *e);

/* 1 when GET mode uses MPI_Get completed by MPI_Win_flush_local_all
 * rather than MPI_Rget: every MPI but Open MPI (MPICH's ch4 completes an
 * MPI_Rget with a derived target type early). The same on every rank. */
int sf__fetch_get_flushes(void);

/* Collective over the store's communicator, after sf__store_open and
 * before the slabs are read (it writes a pattern into a corner of every
 * segment, which the read then overwrites). When pieces can come from
 * other nodes (some group spans several nodes, no locality), every rank
 * moves one known box from a rank of its group on another node with the
 * transfer design `mode` uses (subarray gets, or a holder's typed message)
 * and compares it with the pattern: an MPI that delivers wrong bytes is
 * refused with an error naming the MPI library and the mode. Local result:
 * the caller agrees on it. */
slabfeed_status sf__fetch_selfcheck(sf__store *s, sf__fetch_mode mode,
                                    int locality, sf__err *e);

/* Transfer counters since the last call (remote_gets, remote_runs). */
void sf__fetch_take(sf__fetch *f, slabfeed_stats *delta);

/* Releases everything; MPI requests must be settled. NULL-safe. */
void sf__fetch_close(sf__fetch *f);

#endif
