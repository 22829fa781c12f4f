/* The fit rule of slabs resident in GPU memory (slabfeed_residency), as a
 * pure function over what the node's ranks report, so that it is the same
 * on every rank and testable without a GPU (backend/resident.c gathers
 * the reports and applies it). */
#ifndef SF_RESIDENCY_H
#define SF_RESIDENCY_H

#include <stdint.h>

/* What one rank of a node reports. */
typedef struct sf__gpu_share {
  int rank;        /* in the loader's communicator */
  int device;      /* its CUDA device */
  int64_t bytes;   /* its slab segment */
  uint64_t free_b; /* its device's free memory, as it saw it */
} sf__gpu_share;

/* The verdict for GPU `device` among the n reports of a node: into *share
 * the bytes of the slabs of the ranks using it, *sharing their count, and
 * *budget that GPU's budget: budget_opt when non-zero (device_memory),
 * else half of the smallest free memory those ranks saw. Returns 1 when
 * the slabs fit (share <= budget), else 0. A device no report names has
 * share 0 and fits. */
int sf__residency_fits(const sf__gpu_share *all, int n, int device,
                       uint64_t budget_opt, uint64_t *share, int *sharing,
                       uint64_t *budget);

#endif
