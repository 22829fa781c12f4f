/* The loader handle and its internal helpers shared by the host path
 * (loader.c) and the GPU pipeline (pipeline.c). */
#ifndef SF_LOADER_H
#define SF_LOADER_H

#include <pthread.h>

#include "assemble.h"
#include "sampler.h"
#include "transform.h"
#include "window.h"

#define SF_NAME_MAX 256

typedef struct sf__gpu sf__gpu; /* pipeline.c */

struct slabfeed_loader {
  slabfeed_config cfg; /* strings point into the names below */
  char path[4096], input[SF_NAME_MAX], target[SF_NAME_MAX];
  MPI_Comm comm; /* duplicate of the caller's */
  int rank, size, thread_level;
  int ndsets;
  sf__store store;
  sf__sampler sampler;
  sf__xform xf[SF_MAX_DSETS];
  uint64_t epoch, step, steps_per_epoch;

  /* host path */
  float *staging[SF_MAX_DSETS]; /* one staged crop per dataset */
  void *out[SF_MAX_DSETS];      /* prefetch ring of host batches */
  int slot;
  sf__piece *pieces;
  int max_pieces;
  sf__zrun *zruns; /* scratch of sf__crop_pieces */
  int64_t *origin; /* [prefetch][B][3] */
  int32_t *sym;    /* [prefetch][B] */
  int64_t *sample; /* [prefetch][B] */

  sf__gpu *gpu; /* device path, NULL for host batches */
  slabfeed_stats stats;
  volatile int forked;
  char last_error[SF_ERRLEN];
  struct slabfeed_loader *next_live; /* registry for the fork handler */
};

/* Records e as the loader's last error; returns e->status. */
slabfeed_status sf__loader_error(slabfeed_loader *l, const sf__err *e);

/* Sample indices, origins and symmetries of batch (epoch, step) of this
 * rank into the arrays of ring slot `slot`. */
void sf__loader_plan(slabfeed_loader *l, uint64_t epoch, uint64_t step,
                     int slot);

/* Gathers sample b of ring slot `slot` on the host into l->staging. */
slabfeed_status sf__loader_gather(slabfeed_loader *l, int slot, int b,
                                  sf__err *e);

/* Adds gathered bytes to the loader's counters. */
void sf__loader_count(slabfeed_loader *l, const sf__gather_bytes *b);

/* Advances (epoch, step) by one batch. */
void sf__loader_advance(slabfeed_loader *l);

/* Output elements and bytes of one sample of dataset d. */
int64_t sf__sample_elems(const slabfeed_loader *l, int d);
int64_t sf__sample_bytes(const slabfeed_loader *l, int d);

/* Fills the tensors, metadata pointers and position of *out for ring slot
 * `slot` whose data pointers are data[d]. */
void sf__loader_describe(const slabfeed_loader *l, int slot, void *const data[],
                         uint64_t epoch, uint64_t step, slabfeed_batch *out);

#endif
