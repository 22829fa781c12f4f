/* Where the volume lives: replication groups of nodes, the z-slab of every
 * rank inside its group, the halo planes each rank keeps, which rank reads
 * which planes of the file, and the choice of the group size G from a
 * per-node memory budget. Pure computation over a rank -> node map; the
 * store (store.c) and slabfeed_plan_placement share it, so the plan a user
 * prints is the plan the loader makes.
 *
 * The N nodes are split into ng = max(1, N / G) groups of consecutive nodes
 * (sizes G or G + 1 when G does not divide N). Each group holds the whole
 * volume: its ranks, ordered by (node, rank), split the Z planes evenly
 * (sf__split_begin; in bytes where the planes differ in size, so that a
 * suite of mixed y, x puts as many bytes on every rank as whole planes
 * allow), so the ranks of one node hold one contiguous z-range (locality
 * over several volumes first cuts the planes into node ranges at volume
 * starts, then splits each range evenly over its node's ranks).
 * Every plane is read from the file once: plane z goes to the group whose
 * part of the group-0 slab holding z contains it (each group-0 slab is cut
 * into ng parts), and is read by the rank of that group holding z. */
#ifndef SF_PLACEMENT_H
#define SF_PLACEMENT_H

#include "common/errors.h"

typedef struct sf__placement {
  int P, N;         /* ranks, nodes */
  int G, ng;        /* nodes per group (the smallest group), groups */
  int64_t Z;        /* planes of the box */
  int *nodeof;      /* [P] node index of each rank (owned copy) */
  int *groupof;     /* [P] group of each rank */
  int *order;       /* [P] ranks by (group, node, rank) */
  int *gfirst;      /* [ng + 1] first index of each group in order */
  int64_t *core0;   /* [P] first core plane of each rank */
  int64_t *core1;   /* [P] end of the core */
  int64_t *lo, *hi; /* [P] halo planes kept below / above the core */
  int64_t *reach0;  /* [P] first plane of the z-range of the rank's
                       node inside its group (locality mode) */
  int64_t *reach;   /* [P] planes of that range */
} sf__placement;

/* What a placement is made for: the ranks and their nodes, the box, and
 * what every rank keeps beyond its core. */
typedef struct sf__placement_req {
  int P, N;          /* ranks, nodes */
  const int *nodeof; /* [P] node of each rank, in [0, N) */
  int64_t Z;         /* planes of the box */
  int64_t halo;      /* planes kept below and above every core */
  int locality;      /* crops drawn in their node's range stay there */
  int64_t crop_z;    /* the crop's z edge (locality) */
  /* Locality over a dataset of several volumes: the planes where the
   * volumes begin (increasing, cuts[0] = 0, all below Z). A group's node
   * ranges then begin only there, so that every volume lies wholly on one
   * node, and no node keeps crop_z - 1 planes above its range (a crop
   * wraps inside its volume). ncuts 0: node ranges follow the even split
   * of the planes over the group's ranks. */
  int ncuts;
  const int64_t *cuts;
  /* The size of the planes (sf__planes below): splits are even in bytes,
   * not in planes, when they differ. NULL: planes of one size (then
   * sf__placement_choose cannot be used). */
  const struct sf__planes *planes;
} sf__placement_req;

/* Fills *L for the request q with groups of G nodes (1 <= G <= q->N):
 * every core keeps q->halo planes on both sides and, with locality and no
 * cuts, the last rank of every node keeps crop_z - 1 planes above its
 * node's z-range. With cuts, node j of a group of gs ranks begins at the
 * cut nearest Z * (ranks of the group before node j) / gs (after the cut
 * of node j - 1, leaving one for every later node; ties to the lower),
 * and the node's ranks split its range evenly. Where q->planes differ in
 * size, "evenly" and "nearest" count floats of a channel, not planes: a
 * range of n ranks is cut where the floats below first reach i / n of the
 * range's (every rank keeping at least one plane), and a cut is measured
 * by the floats below it. Fails with
 * SLABFEED_ERR_ARG when a group (or with cuts, a node) has more ranks than
 * planes, or a group more nodes than cuts; SLABFEED_ERR_NOMEM without
 * memory. */
slabfeed_status sf__placement_make(sf__placement *L, const sf__placement_req *q,
                                   int G, sf__err *e);
void sf__placement_free(sf__placement *L);

/* Planes rank r keeps (core + halo) and the global index of the first one
 * (mod Z). */
int64_t sf__placement_planes(const sf__placement *L, int r);
int64_t sf__placement_first(const sf__placement *L, int r);

/* The rank of group g whose core holds plane z (0 <= z < Z); *end is the
 * end of that core. */
int sf__placement_owner(const sf__placement *L, int g, int64_t z, int64_t *end);

/* The rank that reads plane z from the file; *end is the end of the run of
 * planes from z on that it reads. */
int sf__placement_reader(const sf__placement *L, int64_t z, int64_t *end);

/* The size of the box's planes: planes [z0[i], z0[i + 1]) are yx[i][0]
 * rows of yx[i][1] floats (i < n; z0 increasing from z0[0] = 0 to Z =
 * z0[n]). One box is one run; a dataset of several volumes has a run per
 * volume, so that every volume is stored at its own plane size. */
typedef struct sf__planes {
  int n;
  int64_t *z0;      /* [n + 1] */
  int64_t (*yx)[2]; /* [n] */
  int64_t *below;   /* [n + 1]: floats of one channel before run i */
} sf__planes;

/* Fills *g (owned copies) from n runs: run i is planes [z0[i], z0[i + 1])
 * (z0[n] = Z) of shape[i][1] x shape[i][2] (a suite's volume shapes; the
 * planes come from z0, shape[i][0] is not read). Runs of no plane are
 * left out and adjacent runs of one y, x merged (so planes of one size
 * are one run). SLABFEED_ERR_ARG when the box's floats per channel
 * overflow 64 bits, SLABFEED_ERR_NOMEM; *g is then empty. */
slabfeed_status sf__planes_make(sf__planes *g, int n, const int64_t z0[],
                                const int64_t (*shape)[3], sf__err *e);
/* The geometry of one box of Z planes of Y x X. */
slabfeed_status sf__planes_box(sf__planes *g, int64_t Z, int64_t Y, int64_t X,
                               sf__err *e);
void sf__planes_free(sf__planes *g);

/* The run holding plane z (0 <= z < Z). */
int sf__planes_run(const sf__planes *g, int64_t z);

/* Floats of one channel in the planes [z, z + len) of the box, taken mod
 * Z (z in [0, Z), len >= 0, any number of turns); -1 on overflow. */
int64_t sf__planes_span(const sf__planes *g, int64_t z, int64_t len);

/* Largest store of one node, in bytes, with planes of geometry g and
 * chan_bytes bytes per float of a plane (4 x the channels of all
 * datasets); -1 on overflow. */
int64_t sf__placement_node_bytes(const sf__placement *L, const sf__planes *g,
                                 int64_t chan_bytes);

/* Group size chosen for a budget of `budget` bytes per node, with
 * chan_bytes bytes per float of a plane of q->planes (not NULL): `forced`
 * when > 0 (fails with SLABFEED_ERR_ARG when above N), N when -1, else (0)
 * the smallest G whose largest node store fits the budget, or N when none
 * does. Leaves the layout of the choice in *L. */
slabfeed_status sf__placement_choose(sf__placement *L,
                                     const sf__placement_req *q, int forced,
                                     uint64_t budget, int64_t chan_bytes,
                                     sf__err *e);

/* The default per-node budget of a node with `mem_total` bytes of
 * physical memory and `ranks` ranks: half of it, less 2 GiB per rank for
 * the training processes themselves, and never below an eighth of it. */
uint64_t sf__placement_default_budget(uint64_t mem_total, int ranks);

#endif
