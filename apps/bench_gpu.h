/* GPU helpers of slabfeed-bench: ceilings and the simulated training step.
 * All timings with CUDA events on the bench's own stream. */
#ifndef SF_APPS_BENCH_GPU_H
#define SF_APPS_BENCH_GPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* GB/s of bytes copied (a copy of N bytes counts N); < 0 on error. */
double bench_h2d_pinned(size_t bytes, int reps);
double bench_h2d_pageable(size_t bytes, int reps);
double bench_d2d(size_t bytes, int reps);
/* The copy the loader makes per crop and channel: one cudaMemcpy3DAsync of
 * planes x rows rows of row_bytes from pinned memory with row pitch
 * src_pitch into a packed device box, repeated from random origins (GPU
 * time). The host time to enqueue one such copy into an idle stream goes
 * to *enqueue_us. */
double bench_h2d_pitched(size_t row_bytes, size_t rows, size_t planes,
                         size_t src_pitch, double *enqueue_us);

/* The concurrent ceiling: every rank copies at once. setup allocates
 * `bytes` of pinned host and device memory on `device` (and makes it
 * current), run makes reps pinned host-to-device copies on a stream of its
 * own and waits for them (0, or -1 on a CUDA error), free releases what
 * setup took (NULL: no-op). setup returns NULL on any failure. */
void *bench_h2d_setup(int device, size_t bytes);
int bench_h2d_run(void *h, int reps);
void bench_h2d_free(void *h);
/* GB/s of copies of `bytes` from device 0 to device 1 (GPU time), with
 * peer access enabled where the pair allows it (*peer = 1) and put back as
 * it was after; -1 with fewer than two devices or on a CUDA error. */
double bench_p2p(size_t bytes, int reps, int *peer);

/* Enqueues a kernel on stream that keeps the GPU busy for ms milliseconds
 * (one block spinning on the global timer): a stand-in for a training
 * step on the consumer stream. */
int bench_busy(void *stream, double ms);

/* Timing events on a stream: create, record, and milliseconds between two
 * recorded events (waits for the second). */
void *bench_event_create(void);
int bench_event_record(void *ev, void *stream);
double bench_event_ms(void *a, void *b);

/* Number of visible CUDA devices (0 without a driver). */
int bench_device_count(void);

/* Stream create/sync/destroy, device memory in use (bytes). */
void *bench_stream_create(int device);
int bench_stream_sync(void *stream);
void bench_stream_destroy(void *stream);
double bench_device_used(void);
/* Pinned host buffer and an async H2D copy into a device buffer, for the
 * full-copy baseline. */
void *bench_host_pinned(size_t bytes);
void *bench_device_alloc(size_t bytes);
int bench_copy_h2d(void *dst, const void *src, size_t bytes, void *stream);
/* Frees what bench_host_pinned / bench_device_alloc returned (NULL: no-op). */
void bench_host_free(void *p);
void bench_device_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
