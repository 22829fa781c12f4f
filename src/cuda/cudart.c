#include "cuda/cudart.h"

#include <stdatomic.h>

static _Atomic uint64_t c_allocs, c_frees, c_registers, c_default_stream,
    c_stream_syncs, c_event_waits, c_launches, c_copies;

void sf__cudart_counts_get(sf__cudart_counts *out)
{
  out->allocs = atomic_load(&c_allocs);
  out->frees = atomic_load(&c_frees);
  out->registers = atomic_load(&c_registers);
  out->default_stream = atomic_load(&c_default_stream);
  out->stream_syncs = atomic_load(&c_stream_syncs);
  out->event_waits = atomic_load(&c_event_waits);
  out->launches = atomic_load(&c_launches);
  out->copies = atomic_load(&c_copies);
}

slabfeed_status sf__cudart_fail(sf__err *e, cudaError_t rc, const char *what)
{
  return sf__fail(e, SLABFEED_ERR_CUDA, "%s failed: %s (%s)", what,
                  cudaGetErrorString(rc), cudaGetErrorName(rc));
}

#define SF_CU_CHECK(call, e)                                                   \
  do {                                                                         \
    const cudaError_t sf__cudart_rc_ = (call);                                 \
    if (sf__cudart_rc_ != cudaSuccess)                                         \
      return sf__cudart_fail((e), sf__cudart_rc_, #call);                      \
  } while (0)

/* Work given the legacy default stream (0) is counted: it serialises with
 * every blocking stream, NCCL's included. */
static void note_stream(cudaStream_t s)
{
  if (s == NULL || s == cudaStreamLegacy)
    atomic_fetch_add(&c_default_stream, 1);
}

void sf__cudart_device_count(int *n)
{
  if (cudaGetDeviceCount(n) != cudaSuccess)
    *n = 0;
  (void)cudaGetLastError(); /* do not leave a sticky "no driver" behind */
}

/* A query, like the device count: not one of the counted calls. */
slabfeed_status sf__cudart_pci_bus_id(int device, char *buf, int len,
                                      sf__err *e)
{
  if (buf == NULL || len < 1)
    return sf__fail(e, SLABFEED_ERR_ARG, "sf__cudart_pci_bus_id: no buffer");
  buf[0] = '\0';
  const cudaError_t rc = cudaDeviceGetPCIBusId(buf, len, device);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError(); /* leave no error for a later launch check */
    buf[0] = '\0';
    return sf__cudart_fail(e, rc, "cudaDeviceGetPCIBusId");
  }
  return SLABFEED_OK;
}

slabfeed_status sf__cudart_get_device(int *device, sf__err *e)
{
  SF_CU_CHECK(cudaGetDevice(device), e);
  return SLABFEED_OK;
}

slabfeed_status sf__cudart_set_device(int device, sf__err *e)
{
  SF_CU_CHECK(cudaSetDevice(device), e);
  return SLABFEED_OK;
}

slabfeed_status sf__cudart_malloc(void **p, size_t bytes, sf__err *e)
{
  atomic_fetch_add(&c_allocs, 1);
  SF_CU_CHECK(cudaMalloc(p, bytes), e);
  return SLABFEED_OK;
}

void sf__cudart_free(void *p)
{
  if (p == NULL)
    return;
  atomic_fetch_add(&c_frees, 1);
  cudaFree(p);
}

slabfeed_status sf__cudart_host_alloc(void **p, size_t bytes, sf__err *e)
{
  atomic_fetch_add(&c_allocs, 1);
  SF_CU_CHECK(cudaHostAlloc(p, bytes, cudaHostAllocPortable), e);
  return SLABFEED_OK;
}

void sf__cudart_free_host(void *p)
{
  if (p == NULL)
    return;
  atomic_fetch_add(&c_frees, 1);
  cudaFreeHost(p);
}

slabfeed_status sf__cudart_host_register(void *p, size_t bytes, sf__err *e)
{
  atomic_fetch_add(&c_registers, 1);
  const cudaError_t rc = cudaHostRegister(p, bytes, cudaHostRegisterPortable);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError(); /* a failed registration may be retried */
    return sf__cudart_fail(e, rc, "cudaHostRegister");
  }
  return SLABFEED_OK;
}

void sf__cudart_host_unregister(void *p)
{
  if (p == NULL)
    return;
  atomic_fetch_add(&c_registers, 1);
  cudaHostUnregister(p);
}

slabfeed_status sf__cudart_stream_create(cudaStream_t *s, sf__err *e)
{
  SF_CU_CHECK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), e);
  return SLABFEED_OK;
}

void sf__cudart_stream_destroy(cudaStream_t s)
{
  if (s != NULL)
    cudaStreamDestroy(s);
}

slabfeed_status sf__cudart_event_create(cudaEvent_t *ev, sf__err *e)
{
  SF_CU_CHECK(cudaEventCreateWithFlags(ev, cudaEventDisableTiming), e);
  return SLABFEED_OK;
}

void sf__cudart_event_destroy(cudaEvent_t ev)
{
  if (ev != NULL)
    cudaEventDestroy(ev);
}

slabfeed_status sf__cudart_record(cudaEvent_t ev, cudaStream_t s, sf__err *e)
{
  note_stream(s);
  SF_CU_CHECK(cudaEventRecord(ev, s), e);
  return SLABFEED_OK;
}

slabfeed_status sf__cudart_wait(cudaStream_t s, cudaEvent_t ev, sf__err *e)
{
  note_stream(s);
  SF_CU_CHECK(cudaStreamWaitEvent(s, ev, 0), e);
  return SLABFEED_OK;
}

slabfeed_status sf__cudart_event_sync(cudaEvent_t ev, sf__err *e)
{
  atomic_fetch_add(&c_event_waits, 1);
  SF_CU_CHECK(cudaEventSynchronize(ev), e);
  return SLABFEED_OK;
}

slabfeed_status sf__cudart_stream_sync(cudaStream_t s, sf__err *e)
{
  note_stream(s);
  atomic_fetch_add(&c_stream_syncs, 1);
  SF_CU_CHECK(cudaStreamSynchronize(s), e);
  return SLABFEED_OK;
}

int sf__cudart_event_done(cudaEvent_t ev, sf__err *e)
{
  const cudaError_t rc = cudaEventQuery(ev);
  if (rc == cudaSuccess)
    return 1;
  if (rc == cudaErrorNotReady)
    return 0;
  sf__cudart_fail(e, rc, "cudaEventQuery");
  return -1;
}

slabfeed_status sf__cudart_copy3d(const struct cudaMemcpy3DParms *p,
                                  cudaStream_t s, sf__err *e)
{
  note_stream(s);
  atomic_fetch_add(&c_copies, 1);
  SF_CU_CHECK(cudaMemcpy3DAsync(p, s), e);
  return SLABFEED_OK;
}

slabfeed_status sf__cudart_copy(void *dst, const void *src, size_t bytes,
                                enum cudaMemcpyKind kind, cudaStream_t s,
                                sf__err *e)
{
  note_stream(s);
  atomic_fetch_add(&c_copies, 1);
  SF_CU_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s), e);
  return SLABFEED_OK;
}

slabfeed_status sf__cudart_stream_device(cudaStream_t s, int *device,
                                         sf__err *e)
{
  SF_CU_CHECK(cudaStreamGetDevice(s, device), e);
  return SLABFEED_OK;
}

slabfeed_status sf__cudart_mem_info(size_t *free_bytes, size_t *total,
                                    sf__err *e)
{
  SF_CU_CHECK(cudaMemGetInfo(free_bytes, total), e);
  return SLABFEED_OK;
}

int sf__cudart_can_access_peer(int from, int to)
{
  if (from == to)
    return 1;
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return can;
}

slabfeed_status sf__cudart_enable_peer(int to, sf__err *e)
{
  int me = 0;
  SF_CU_CHECK(cudaGetDevice(&me), e);
  if (me == to)
    return SLABFEED_OK;
  const cudaError_t rc = cudaDeviceEnablePeerAccess(to, 0);
  if (rc == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
    return SLABFEED_OK;
  }
  SF_CU_CHECK(rc, e);
  return SLABFEED_OK;
}

slabfeed_status sf__cudart_ipc_get(cudaIpcMemHandle_t *h, void *p, sf__err *e)
{
  SF_CU_CHECK(cudaIpcGetMemHandle(h, p), e);
  return SLABFEED_OK;
}

slabfeed_status sf__cudart_ipc_open(void **p, cudaIpcMemHandle_t h, sf__err *e)
{
  atomic_fetch_add(&c_registers, 1);
  SF_CU_CHECK(cudaIpcOpenMemHandle(p, h, cudaIpcMemLazyEnablePeerAccess), e);
  return SLABFEED_OK;
}

void sf__cudart_ipc_close(void *p)
{
  if (p == NULL)
    return;
  atomic_fetch_add(&c_registers, 1);
  cudaIpcCloseMemHandle(p);
}

slabfeed_status sf__cudart_launched(const char *what, sf__err *e)
{
  atomic_fetch_add(&c_launches, 1);
  const cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess)
    return sf__cudart_fail(e, rc, what);
  return SLABFEED_OK;
}
