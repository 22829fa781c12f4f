/* Slabs resident in GPU memory (residency, 0.8): the GPU back end's
 * choice of where crops are read from, the device copy of this rank's
 * slab and the CUDA IPC mappings of its node's other copies. Once open,
 * the store's dpeer[] points at them and the piece sources "device own"
 * and "device node" (source.h) serve the node's pieces from device memory;
 * the back ends need no other change. */
#ifndef SF_RESIDENT_H
#define SF_RESIDENT_H

#include <cuda_runtime.h>

#include "config/config.h"
#include "store/store.h"

typedef struct sf__resident {
  int on;       /* the node's pieces are read from device memory */
  int resided;  /* sf__resident_open ran */
  int chosen;   /* every rank chose device (close is collective over
                   the node) */
  char *own;    /* this rank's copy of its segment (cudaMalloc) */
  char **dpeer; /* [size]: the store's dpeer while on */
  int nmapped;
  void **mapped;     /* [node ranks]: copies opened over IPC */
  uint64_t bytes;    /* of own */
  uint64_t released; /* host bytes of this rank's segment given back */
  double fill_s;     /* the copy of own from the host segment */
  char how[384];     /* where, and why (the placement line) */
} sf__resident;

/* Collective over s->comm (and s->node), on every rank after the back
 * end's open succeeded everywhere, with `device` current. Chooses the
 * residency (cfg residency and device_memory: auto takes device when every
 * rank's slab, with those of the node's other ranks on its GPU, fits that
 * GPU's budget and every pair of the node's GPUs has peer access), then
 * for device copies this rank's segment into device memory through the
 * copy stream (synchronised: this is open) and maps the node's other
 * copies over CUDA IPC, and sets s->dpeer. With host_unread (every rank
 * passes the same: no rank reads another's host segment after open, i.e.
 * no crop piece crosses nodes) each rank then gives its host segment's
 * pages back (sf__release_pages): every crop is read from device memory,
 * so the host copy was only the fill's source. r->how says which and why
 * on every rank. Failures (a refusal of residency device, an allocation, the
 * copy, an IPC handle; test stages 'device.fill' and 'device.ipc') are
 * agreed on by all ranks; r is then closed by sf__resident_close. */
slabfeed_status sf__resident_open(sf__resident *r, const sf__config *cfg,
                                  sf__store *s, int device, cudaStream_t copy,
                                  int host_unread, sf__err *e);

/* Collective over s->node when r->resided: clears s->dpeer, closes the
 * IPC mappings, waits until no rank of the node can still read this
 * rank's copy (a barrier: every rank's streams are drained before), and
 * frees it. The caller's streams must be idle. Safe on a zeroed r. */
void sf__resident_close(sf__resident *r, sf__store *s);

#endif
