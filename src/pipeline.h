/* The GPU pipeline (device batches): staging, streams, batch ring and the
 * loader thread. Built only with CUDA (SF_HAVE_CUDA). */
#ifndef SF_PIPELINE_H
#define SF_PIPELINE_H

#include "errors.h"

struct sf_loader;

#ifdef SF_HAVE_CUDA
/* Called at the end of sf_open on every rank with cfg.device >= 0: takes
 * all device and pinned memory, registers the node window, creates the
 * streams and events, starts the loader thread. */
sf_status sf_gpu_open(struct sf_loader *l, sf_err *e);
/* sf_next for device batches. */
sf_status sf_gpu_next(struct sf_loader *l, sf_batch *out, void *stream);
/* sf_seek for device batches: drains the ring, then restarts at (e, s). */
sf_status sf_gpu_seek(struct sf_loader *l, uint64_t epoch, uint64_t step);
/* Copies bytes of device memory src to host dst on the loader's copy
 * stream and waits for that stream. */
sf_status sf_gpu_copy_to_host(struct sf_loader *l, const void *src,
                              size_t bytes, void *dst);
/* Stops the thread and releases everything; NULL l->gpu is a no-op. */
void sf_gpu_close(struct sf_loader *l);
#endif

#endif
