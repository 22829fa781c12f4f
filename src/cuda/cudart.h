/* The one layer through which the library calls the CUDA runtime. It
 * checks every return code and counts the calls that matter next to NCCL:
 * allocations, frees, host registrations, stream and event waits, and work
 * put on the legacy default stream. It offers no device synchronisation at
 * all (tests/lint_cuda_layer.sh keeps it that way). Tests read
 * the counters to prove that nothing of that kind happens after slabfeed_open.
 */
#ifndef SF_CUDART_H
#define SF_CUDART_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "common/errors.h"

typedef struct sf__cudart_counts {
  uint64_t allocs;         /* cudaMalloc, cudaHostAlloc */
  uint64_t frees;          /* cudaFree, cudaFreeHost */
  uint64_t registers;      /* cudaHostRegister, cudaHostUnregister */
  uint64_t default_stream; /* calls given the legacy default stream */
  uint64_t stream_syncs;   /* cudaStreamSynchronize on a loader stream */
  uint64_t event_waits;    /* cudaEventSynchronize on a loader event */
  uint64_t launches, copies;
} sf__cudart_counts;

/* A snapshot of the process-wide counters (atomic reads). */
void sf__cudart_counts_get(sf__cudart_counts *out);

/* Records a CUDA failure of `what` in *e; returns SLABFEED_ERR_CUDA. */
slabfeed_status sf__cudart_fail(sf__err *e, cudaError_t rc, const char *what);

/* Number of visible devices into *n (0 without a driver: not an error). */
void sf__cudart_device_count(int *n);
/* The PCI bus id of `device` ("0000:3B:00.0": domain:bus:device.function
 * in hex) into buf of len bytes, NUL-terminated (13 bytes suffice; ""
 * on failure). A query: not counted, and a failure leaves no error behind
 * for a later cudaGetLastError. */
slabfeed_status sf__cudart_pci_bus_id(int device, char *buf, int len,
                                      sf__err *e);
/* The calling thread's current device into *device. */
slabfeed_status sf__cudart_get_device(int *device, sf__err *e);
slabfeed_status sf__cudart_set_device(int device, sf__err *e);
slabfeed_status sf__cudart_malloc(void **p, size_t bytes, sf__err *e);
void sf__cudart_free(void *p);
slabfeed_status sf__cudart_host_alloc(void **p, size_t bytes, sf__err *e);
void sf__cudart_free_host(void *p);
slabfeed_status sf__cudart_host_register(void *p, size_t bytes, sf__err *e);
void sf__cudart_host_unregister(void *p);
slabfeed_status sf__cudart_stream_create(cudaStream_t *s, sf__err *e);
void sf__cudart_stream_destroy(cudaStream_t s);
slabfeed_status sf__cudart_event_create(cudaEvent_t *ev, sf__err *e);
void sf__cudart_event_destroy(cudaEvent_t ev);

slabfeed_status sf__cudart_record(cudaEvent_t ev, cudaStream_t s, sf__err *e);
slabfeed_status sf__cudart_wait(cudaStream_t s, cudaEvent_t ev, sf__err *e);
/* Host waits for an event of the loader's own streams. */
slabfeed_status sf__cudart_event_sync(cudaEvent_t ev, sf__err *e);
slabfeed_status sf__cudart_stream_sync(cudaStream_t s, sf__err *e);
/* 1 when ev has completed, 0 when not yet, -1 on error (recorded in e). */
int sf__cudart_event_done(cudaEvent_t ev, sf__err *e);

slabfeed_status sf__cudart_copy3d(const struct cudaMemcpy3DParms *p,
                                  cudaStream_t s, sf__err *e);
slabfeed_status sf__cudart_copy(void *dst, const void *src, size_t bytes,
                                enum cudaMemcpyKind kind, cudaStream_t s,
                                sf__err *e);

/* The device of stream s into *device. */
slabfeed_status sf__cudart_stream_device(cudaStream_t s, int *device,
                                         sf__err *e);

/* Free and total memory of the current device (a query, not counted). */
slabfeed_status sf__cudart_mem_info(size_t *free_bytes, size_t *total,
                                    sf__err *e);

/* 1 when device `from` can access device `to`'s memory (peer access;
 * 1 for the same device), 0 when not or on error (a query). */
int sf__cudart_can_access_peer(int from, int to);

/* Enables the current device's access to device `to`'s memory (already
 * enabled is fine; the same device: nothing). At open, so that no peer
 * mapping is made later, mid-run. */
slabfeed_status sf__cudart_enable_peer(int to, sf__err *e);

/* CUDA IPC (residency device, 0.8): the handle of device allocation p
 * (the base of a cudaMalloc), opening another process's handle on the
 * current device (peer access enabled first: sf__cudart_enable_peer), and
 * closing it. Opens and closes count as registrations. */
slabfeed_status sf__cudart_ipc_get(cudaIpcMemHandle_t *h, void *p, sf__err *e);
slabfeed_status sf__cudart_ipc_open(void **p, cudaIpcMemHandle_t h, sf__err *e);
void sf__cudart_ipc_close(void *p);

/* Counts a kernel launch and checks cudaGetLastError. */
slabfeed_status sf__cudart_launched(const char *what, sf__err *e);

#endif
