#include "cudart.h"

#include <stdatomic.h>

static _Atomic uint64_t c_allocs, c_frees, c_registers, c_default_stream,
    c_stream_syncs, c_event_waits, c_launches, c_copies;

void sf_cuda_counts_get(sf_cuda_counts *out)
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

sf_status sf_cuda_fail(sf_err *e, cudaError_t rc, const char *what)
{
  return sf_fail(e, SF_ERR_CUDA, "%s failed: %s (%s)", what,
                 cudaGetErrorString(rc), cudaGetErrorName(rc));
}

#define SF_CU_CHECK(call, e)                                                   \
  do {                                                                         \
    const cudaError_t sf_cu_rc_ = (call);                                      \
    if (sf_cu_rc_ != cudaSuccess)                                              \
      return sf_cuda_fail((e), sf_cu_rc_, #call);                              \
  } while (0)

/* Work given the legacy default stream (0) is counted: it serialises with
 * every blocking stream, NCCL's included. */
static void note_stream(cudaStream_t s)
{
  if (s == NULL || s == cudaStreamLegacy)
    atomic_fetch_add(&c_default_stream, 1);
}

void sf_cu_device_count(int *n)
{
  if (cudaGetDeviceCount(n) != cudaSuccess)
    *n = 0;
  (void)cudaGetLastError(); /* do not leave a sticky "no driver" behind */
}

sf_status sf_cu_set_device(int device, sf_err *e)
{
  SF_CU_CHECK(cudaSetDevice(device), e);
  return SF_OK;
}

sf_status sf_cu_malloc(void **p, size_t bytes, sf_err *e)
{
  atomic_fetch_add(&c_allocs, 1);
  SF_CU_CHECK(cudaMalloc(p, bytes), e);
  return SF_OK;
}

void sf_cu_free(void *p)
{
  if (p == NULL)
    return;
  atomic_fetch_add(&c_frees, 1);
  cudaFree(p);
}

sf_status sf_cu_host_alloc(void **p, size_t bytes, sf_err *e)
{
  atomic_fetch_add(&c_allocs, 1);
  SF_CU_CHECK(cudaHostAlloc(p, bytes, cudaHostAllocPortable), e);
  return SF_OK;
}

void sf_cu_free_host(void *p)
{
  if (p == NULL)
    return;
  atomic_fetch_add(&c_frees, 1);
  cudaFreeHost(p);
}

sf_status sf_cu_host_register(void *p, size_t bytes, sf_err *e)
{
  atomic_fetch_add(&c_registers, 1);
  const cudaError_t rc = cudaHostRegister(p, bytes, cudaHostRegisterPortable);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError(); /* a failed registration may be retried */
    return sf_cuda_fail(e, rc, "cudaHostRegister");
  }
  return SF_OK;
}

void sf_cu_host_unregister(void *p)
{
  if (p == NULL)
    return;
  atomic_fetch_add(&c_registers, 1);
  cudaHostUnregister(p);
}

sf_status sf_cu_stream_create(cudaStream_t *s, sf_err *e)
{
  SF_CU_CHECK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), e);
  return SF_OK;
}

void sf_cu_stream_destroy(cudaStream_t s)
{
  if (s != NULL)
    cudaStreamDestroy(s);
}

sf_status sf_cu_event_create(cudaEvent_t *ev, sf_err *e)
{
  SF_CU_CHECK(cudaEventCreateWithFlags(ev, cudaEventDisableTiming), e);
  return SF_OK;
}

void sf_cu_event_destroy(cudaEvent_t ev)
{
  if (ev != NULL)
    cudaEventDestroy(ev);
}

sf_status sf_cu_record(cudaEvent_t ev, cudaStream_t s, sf_err *e)
{
  note_stream(s);
  SF_CU_CHECK(cudaEventRecord(ev, s), e);
  return SF_OK;
}

sf_status sf_cu_wait(cudaStream_t s, cudaEvent_t ev, sf_err *e)
{
  note_stream(s);
  SF_CU_CHECK(cudaStreamWaitEvent(s, ev, 0), e);
  return SF_OK;
}

sf_status sf_cu_event_sync(cudaEvent_t ev, sf_err *e)
{
  atomic_fetch_add(&c_event_waits, 1);
  SF_CU_CHECK(cudaEventSynchronize(ev), e);
  return SF_OK;
}

sf_status sf_cu_stream_sync(cudaStream_t s, sf_err *e)
{
  note_stream(s);
  atomic_fetch_add(&c_stream_syncs, 1);
  SF_CU_CHECK(cudaStreamSynchronize(s), e);
  return SF_OK;
}

int sf_cu_event_done(cudaEvent_t ev, sf_err *e)
{
  const cudaError_t rc = cudaEventQuery(ev);
  if (rc == cudaSuccess)
    return 1;
  if (rc == cudaErrorNotReady)
    return 0;
  sf_cuda_fail(e, rc, "cudaEventQuery");
  return -1;
}

sf_status sf_cu_copy3d(const struct cudaMemcpy3DParms *p, cudaStream_t s,
                       sf_err *e)
{
  note_stream(s);
  atomic_fetch_add(&c_copies, 1);
  SF_CU_CHECK(cudaMemcpy3DAsync(p, s), e);
  return SF_OK;
}

sf_status sf_cu_copy(void *dst, const void *src, size_t bytes,
                     enum cudaMemcpyKind kind, cudaStream_t s, sf_err *e)
{
  note_stream(s);
  atomic_fetch_add(&c_copies, 1);
  SF_CU_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s), e);
  return SF_OK;
}

sf_status sf_cu_stream_device(cudaStream_t s, int *device, sf_err *e)
{
  SF_CU_CHECK(cudaStreamGetDevice(s, device), e);
  return SF_OK;
}

sf_status sf_cu_launched(const char *what, sf_err *e)
{
  atomic_fetch_add(&c_launches, 1);
  const cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess)
    return sf_cuda_fail(e, rc, what);
  return SF_OK;
}
