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
#include "io/sink.h"
#include "store/store.h"

/* Pinned staging of the fill from the file (0.9): two buffers of at least
 * this many bytes (more where one plane of a dataset's grid is larger). */
#define SF_RESIDENT_STAGE_BYTES ((int64_t)64 << 20)

typedef struct sf__resident {
  int on;       /* the node's pieces are read from device memory */
  int resided;  /* sf__resident_choose ran */
  int chosen;   /* every rank chose device (close is collective over
                   the node) */
  int staged;   /* the slab went from the file straight into own through
                   pinned staging (sf__resident_stage): no host copy */
  char *own;    /* this rank's copy of its segment (cudaMalloc) */
  char **dpeer; /* [size]: the store's dpeer while on */
  int nmapped;
  void **mapped;     /* [node ranks]: copies opened over IPC */
  uint64_t bytes;    /* of own */
  uint64_t released; /* host bytes of this rank's segment given back, or
                        never taken (staged) */
  double fill_s;     /* the fill of own (from the host segment, or from
                        the file through the staging) */
  double rest_s;     /* staged: the planes read by others, GPU to GPU */
  const char *name;  /* residency "device" or "auto" */
  char fit[160];     /* the chosen GPU's share against its budget */
  char how[512];     /* where, and why (the placement line) */
  /* The staged fill, while the read runs (sf__resident_stage). */
  sf__sink sink;
  const char *base;    /* the host segment: the layout the read gives */
  float *stage[2];     /* pinned, sink.floats each */
  cudaEvent_t done[2]; /* each buffer's copy to own */
  cudaStream_t stream;
  int device, rank, next, puts;
  double t0;
} sf__resident;

/* Local: 1 when the options and the store's placement let
 * sf__resident_choose take device memory (residency device; auto outside
 * a tiled pass, or for a pass of several ranks on one node), so that it
 * needs the device's free memory; 0 when it says host without asking
 * anything. The same on every rank. */
int sf__resident_may_choose_device(const sf__config *cfg, const sf__store *s);

/* Collective over s->comm (and s->node), on every rank once the store is
 * open, with `device` current (any time before the fill; not needed
 * where sf__resident_may_choose_device is 0: then local). A failure
 * already in *e is agreed on, not lost. Chooses the
 * residency (cfg residency and device_memory: auto takes device when every
 * rank's slab, with those of the node's other ranks on its GPU, fits that
 * GPU's budget and every pair of the node's GPUs has peer access; host
 * for a tiled pass) into r->chosen, the same on every rank, and says why
 * in r->how. Fails (agreed) for residency device that cannot be held. */
slabfeed_status sf__resident_choose(sf__resident *r, const sf__config *cfg,
                                    sf__store *s, int device, sf__err *e);

/* Local, on a chosen r with `device` current, before the slabs are read:
 * allocates the device copy of this rank's segment, a stream and the
 * pinned staging, and returns in *sink what the read writes through
 * (io/sink.h): each transfer goes from its staging buffer to its place
 * in the copy while the next one is read (test stages 'device.stage',
 * 'device.put'). The caller agrees on the outcome; the same sink size on
 * every rank. */
slabfeed_status sf__resident_stage(sf__resident *r, sf__store *s, int device,
                                   sf__sink **sink, sf__err *e);

/* Local, after the read on every rank that staged (whatever its outcome):
 * waits for the last copies and frees the staging and its stream. */
slabfeed_status sf__resident_stage_end(sf__resident *r, sf__err *e);

/* Collective over s->comm (and s->node), on every rank after the back
 * end's open succeeded everywhere, with `device` current, on an r that
 * sf__resident_choose made. Where device was chosen: copies this rank's
 * segment into device memory through the copy stream (synchronised:
 * this is open) unless it was staged from the file, maps the node's other
 * copies over CUDA IPC, fills a staged copy's planes read by others from
 * their copies (GPU to GPU), and sets s->dpeer. With host_unread (every rank
 * passes the same: no rank reads another's host segment after open, i.e.
 * no crop piece crosses nodes) each rank then gives its host segment's
 * pages back (sf__release_pages): every crop is read from device memory,
 * so the host copy was only the fill's source. r->how says which and why
 * on every rank. Failures (an allocation, the copy, an IPC handle, the
 * staged copy's rest; test stages 'device.fill', 'device.ipc' and
 * 'device.rest') are
 * agreed on by all ranks; r is then closed by sf__resident_close. */
slabfeed_status sf__resident_open(sf__resident *r, sf__store *s, int device,
                                  cudaStream_t copy, int host_unread,
                                  sf__err *e);

/* Collective over s->node when r->resided: clears s->dpeer, closes the
 * IPC mappings, waits until no rank of the node can still read this
 * rank's copy (a barrier: every rank's streams are drained before), and
 * frees it. The caller's streams must be idle. Safe on a zeroed r. */
void sf__resident_close(sf__resident *r, sf__store *s);

#endif
