/*
 * Consumer streams of device batches (py_cuda.c, the only file of the
 * extension that calls the CUDA runtime).
 *
 * A device batch is handed to one stream by slabfeed_next (the library then
 * reuses its slot only after that stream has passed the next call of next).
 * __dlpack__(stream=s) on another stream s makes s wait on the batch's ready
 * event and registers s; before the loader's next/seek/close, every
 * registered stream records an event that the stream of the last next waits
 * on, so the library's release point also covers the work queued on s.
 */
#ifndef SFPY_CUDA_H
#define SFPY_CUDA_H

#include <stddef.h>

#define SFPY_MAX_STREAMS 8 /* other consumer streams per batch */

typedef struct sfpy_cuda sfpy_cuda;

/* sfpy_cuda_create - the handoff stream (for next(stream=None)) and the
 * join events, on `device`; the current device is restored.
 * Returns 0, or -1 with a message in err. */
int sfpy_cuda_create(int device, sfpy_cuda **out, char *err, size_t errlen);

/* sfpy_cuda_destroy - releases what create took; NULL is a no-op. Not in a
 * forked child (the caller checks). */
void sfpy_cuda_destroy(sfpy_cuda *c);

/* sfpy_cuda_handoff - the stream next(stream=None) uses. */
void *sfpy_cuda_handoff(const sfpy_cuda *c);

/* sfpy_cuda_export - makes `stream` wait on `event` (no host wait) and,
 * unless `stream` is `given` (the stream of next), registers it for the
 * join. Returns 0, or -1 with a message in err (too many streams, CUDA). */
int sfpy_cuda_export(sfpy_cuda *c, void *stream, void *given, void *event,
                     char *err, size_t errlen);

/* sfpy_cuda_join - every registered stream records an event that `into`
 * waits on; the registry is emptied. No host wait. Returns 0, or -1 with a
 * message in err (the registry is emptied all the same). */
int sfpy_cuda_join(sfpy_cuda *c, void *into, char *err, size_t errlen);

/* sfpy_cuda_available - 1 when the extension was built with CUDA. */
int sfpy_cuda_available(void);

#endif /* SFPY_CUDA_H */
