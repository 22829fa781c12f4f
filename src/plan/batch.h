/* The plan of a batch, shared by both back ends: which global samples a
 * step of this rank holds, their origins and symmetry ids (the sampler),
 * how each crop splits into pieces by the rank holding them, and how the
 * finished batch is described to the caller. Holds the per-slot metadata
 * of the batch ring and the split scratch; knows nothing of how bytes move
 * (gather) or where batches live (back ends). */
#ifndef SF_BATCH_H
#define SF_BATCH_H

#include "config/config.h"
#include "io/suite.h"
#include "source/gather.h"
#include "plan/sampler.h"
#include "plan/tiles.h"
#include "transform/transform.h"

/* A run of z-planes of a crop held by one rank (scratch of the split). */
typedef struct sf__zrun {
  int src;
  int64_t q, len, off;
} sf__zrun;

typedef struct sf__batch_plan {
  const sf__store *store;
  int rank, size;  /* of the loader's communicator */
  int K, B;        /* ring slots, samples per batch */
  int ndsets;      /* 1 or 2 */
  int device;      /* -1 host batches, else the CUDA device */
  int64_t crop[3]; /* crop extents (z,y,x) on the planes' grid */
  uint64_t steps_per_epoch;
  sf__sampler sampler;
  int locality; /* z origins from the z-range of the rank's node */
  int pass;     /* a tiled pass (tiles below) instead of the sampler */
  sf__tiles tiles;
  int32_t pass_symmetry;
  int remote_get; /* remote pieces by MPI_Rget (else holders send) */
  sf__xform xf[SF_MAX_DSETS];
  /* Dataset d gathers the box [sub_lo, sub_lo + xf[d].ext) of the crop
   * (sub[d] 1: the target core of training pads) instead of all of it. */
  int sub[SF_MAX_DSETS];
  int64_t sub_lo[SF_MAX_DSETS][3]; /* on dataset d's grid */
  int64_t scale[SF_MAX_DSETS];     /* dataset d's grid over the planes' */
  /* A coarser target (coarsen_factor): the planes are on its grid, the
   * input's is scale[0] (g) x theirs; in_shift = g x ceil(pad / g) - pad
   * input voxels from the planes' crop to the input crop on every axis.
   * Origins and tiles in the plan are on the planes' grid; the caller's
   * (slabfeed_batch.origin, .tile) on the input's. g 1: both the same. */
  int64_t in_shift;
  const sf__suite *suite; /* the volumes (the loader's); NULL or n == 1:
                             one volume */
  int64_t *origin;        /* [K][B][3] in the stacked box */
  int64_t *origin_out;    /* [K][B][3] in the sample's volume (the caller's
                             slabfeed_batch.origin) */
  int32_t *volume;        /* [K][B] the volume of each sample */
  int nparams;            /* parameters per sample (suite->nparam) */
  float *params;          /* [K][B][nparams] each sample's volume's; NULL
                             at nparams 0 */
  int aug;                /* amplitude augmentation (random crops) */
  float sigma[SF_MAX_DSETS][2][64];       /* per channel: add, mul deviations */
  uint32_t aug_draw[SF_MAX_DSETS][2][64]; /* first draw of each normal */
  float *aug_f[SF_MAX_DSETS]; /* [K][B][2][C]: factor, offset per channel */
  int32_t *sym;               /* [K][B] */
  int64_t *sample;            /* [K][B] global sample index within the epoch (a
                                 pass: the tile, -1 for slots past the last) */
  int64_t *tile; /* [K][B][9] a pass: slabfeed_batch.tile; else NULL */
  int *valid;    /* [K] real samples of each slot */
  sf__piece *pieces;
  sf__zrun *zruns;
} sf__batch_plan;

/* Local. The weight of each of the n volumes of dataset s (s->shape set)
 * for a training stream, from the options volume_weights (voxels, the
 * default; equal; or W0,W1,... scaled to integers) and holdout_volumes
 * (indices, ranges I-J or paths: weight 0), into w[n]. Fails naming the
 * bad entry, or when every weight is 0. */
slabfeed_status sf__batch_volume_weights(const sf__config *c,
                                         const sf__suite *s, uint64_t *w,
                                         sf__err *e);

/* Sets up the plan of a loader with options c over the datasets info[] (of
 * the stacked box of the volumes of `suite`, which must outlive the plan)
 * and the store; allocates the per-slot tables and the scratch. */
slabfeed_status sf__batch_init(sf__batch_plan *b, const sf__config *c,
                               const slabfeed_dataset_info info[],
                               const sf__suite *suite, const sf__store *store,
                               sf__err *e);
void sf__batch_free(sf__batch_plan *b);

/* Samples, origins and symmetries of the batch at (epoch, step) of this
 * rank, into ring slot `slot`. */
void sf__batch_plan_slot(sf__batch_plan *b, int slot, uint64_t epoch,
                         uint64_t step);

/* Origin and symmetry of sample i of the batch of `rank` at (epoch, step):
 * a pure function, callable from any thread for any rank. */
void sf__batch_draw(const sf__batch_plan *b, int rank, uint64_t epoch,
                    uint64_t step, int i, int64_t origin[3], int32_t *sym);

/* Splits the crop at `origin` (stacked box; it wraps inside the volume of
 * its z origin) into pieces by the rank holding them as rank
 * `viewer` sees it (its own segment, halo included, first; else the ranks
 * of its group); returns the count. pieces[] and zruns[] are the caller's
 * scratch of sf__batch_max_pieces and sf__batch_max_zruns entries. Pure:
 * any thread, any viewer. */
int sf__batch_split(const sf__batch_plan *b, int viewer,
                    const int64_t origin[3], sf__piece *pieces,
                    sf__zrun *zruns);
int sf__batch_max_pieces(const sf__batch_plan *b);
int sf__batch_max_zruns(const sf__batch_plan *b);

/* Splits sample i of slot `slot` of this rank (sf__batch_split into the
 * plan's own scratch); returns the count, pieces in b->pieces (valid until
 * the next call). */
int sf__batch_pieces(sf__batch_plan *b, int slot, int i);

/* The amplitude augmentation of sample i of slot `slot` for dataset d
 * ([2][C]: factors, then offsets), or NULL without augmentation. */
const float *sf__batch_aug(const sf__batch_plan *b, int slot, int i, int d);

/* The part of piece p that dataset d gathers (its sub-box of the crop,
 * or all of p) into *out, with the planes, rows and columns of p before it
 * in skip[] (to add to a view's at[]); 0 when d takes nothing of p. */
int sf__batch_piece_of(const sf__batch_plan *b, int d, const sf__piece *p,
                       sf__piece *out, int64_t skip[3]);

/* Symmetry id of sample i of slot `slot`. */
int32_t sf__batch_symmetry(const sf__batch_plan *b, int slot, int i);

/* Output elements and bytes of one sample of dataset d, and the elements
 * of its staged crop (more than the output where the output is trimmed:
 * the target of a tiled pass). */
int64_t sf__batch_sample_elems(const sf__batch_plan *b, int d);
int64_t sf__batch_stage_elems(const sf__batch_plan *b, int d);
int64_t sf__batch_sample_bytes(const sf__batch_plan *b, int d);

/* Position of the n-th batch counted from (epoch0, step0). */
void sf__batch_position(const sf__batch_plan *b, uint64_t epoch0,
                        uint64_t step0, uint64_t n, uint64_t *epoch,
                        uint64_t *step);

/* Fills *out (a full struct of this library) for slot `slot` whose
 * datasets' data pointers are data[d], at position (epoch, step). */
void sf__batch_describe(const sf__batch_plan *b, int slot, void *const data[],
                        uint64_t epoch, uint64_t step, slabfeed_batch *out);

#endif
