/* The GPU pipeline (device batches): staging, streams, batch ring and the
 * loader thread. Built only with CUDA (SF_HAVE_CUDA). */
#ifndef SF_PIPELINE_H
#define SF_PIPELINE_H

#include "errors.h"

struct slabfeed_loader;

#ifdef SF_HAVE_CUDA
/* Called at the end of slabfeed_open on every rank with cfg.device >= 0: takes
 * all device and pinned memory, registers the node window, creates the
 * streams and events, starts the loader thread. */
slabfeed_status sf__gpu_open(struct slabfeed_loader *l, sf__err *e);
/* slabfeed_next for device batches. */
slabfeed_status sf__gpu_next(struct slabfeed_loader *l, slabfeed_batch *out,
                             void *stream);
/* slabfeed_seek for device batches: drains the ring, then restarts at (e, s).
 */
slabfeed_status sf__gpu_seek(struct slabfeed_loader *l, uint64_t epoch,
                             uint64_t step);
/* Copies bytes of device memory src to host dst on the loader's copy
 * stream and waits for that stream. */
slabfeed_status sf__gpu_copy_to_host(struct slabfeed_loader *l, const void *src,
                                     size_t bytes, void *dst);
/* Stops the thread and releases everything; NULL l->gpu is a no-op. */
void sf__gpu_close(struct slabfeed_loader *l);
#endif

#endif
