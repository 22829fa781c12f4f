/*
 * The only file of the extension that calls the CUDA runtime: the handoff
 * stream of next(stream=None), and the ordering of other consumer streams
 * of a device batch (py_cuda.h explains the protocol). No host or device
 * synchronisation, no allocation after create, never the legacy default
 * stream on its own account (a consumer may name it).
 */
#include "py_cuda.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef SFPY_HAVE_CUDA
#include <cuda_runtime_api.h>

struct sfpy_cuda {
  int device;
  cudaStream_t handoff;
  cudaEvent_t events[SFPY_MAX_STREAMS];
  cudaStream_t streams[SFPY_MAX_STREAMS]; /* registered for the batch */
  int n;
};

static int fail(char *err, size_t errlen, const char *what, cudaError_t rc)
{
  snprintf(err, errlen, "slabfeed: %s: %s (%s)", what, cudaGetErrorName(rc),
           cudaGetErrorString(rc));
  return -1;
}

int sfpy_cuda_available(void)
{
  return 1;
}

void sfpy_cuda_destroy(sfpy_cuda *c)
{
  if (c == NULL)
    return;
  /* Destruction is deferred by CUDA until pending work is done. */
  for (int i = 0; i < SFPY_MAX_STREAMS; i++)
    if (c->events[i] != NULL)
      (void)cudaEventDestroy(c->events[i]);
  if (c->handoff != NULL)
    (void)cudaStreamDestroy(c->handoff);
  free(c);
}

int sfpy_cuda_create(int device, sfpy_cuda **out, char *err, size_t errlen)
{
  *out = NULL;
  sfpy_cuda *c = calloc(1, sizeof *c);
  if (c == NULL) {
    snprintf(err, errlen, "slabfeed: out of memory");
    return -1;
  }
  c->device = device;
  int prev = 0;
  cudaError_t rc = cudaGetDevice(&prev);
  if (rc != cudaSuccess) {
    free(c);
    return fail(err, errlen, "cudaGetDevice", rc);
  }
  if ((rc = cudaSetDevice(device)) != cudaSuccess) {
    free(c);
    return fail(err, errlen, "cudaSetDevice", rc);
  }
  int ret = 0;
  rc = cudaStreamCreateWithFlags(&c->handoff, cudaStreamNonBlocking);
  if (rc != cudaSuccess)
    ret = fail(err, errlen, "cudaStreamCreateWithFlags", rc);
  for (int i = 0; ret == 0 && i < SFPY_MAX_STREAMS; i++) {
    rc = cudaEventCreateWithFlags(&c->events[i], cudaEventDisableTiming);
    if (rc != cudaSuccess)
      ret = fail(err, errlen, "cudaEventCreateWithFlags", rc);
  }
  (void)cudaSetDevice(prev);
  if (ret != 0) {
    sfpy_cuda_destroy(c);
    return ret;
  }
  *out = c;
  return 0;
}

void *sfpy_cuda_handoff(const sfpy_cuda *c)
{
  return c == NULL ? NULL : (void *)c->handoff;
}

int sfpy_cuda_export(sfpy_cuda *c, void *stream, void *given, void *event,
                     char *err, size_t errlen)
{
  if (stream == given)
    return 0; /* slabfeed_next made it wait already */
  cudaStream_t s = (cudaStream_t)stream;
  for (int i = 0; i < c->n; i++)
    if (c->streams[i] == s)
      return 0;
  if (c->n == SFPY_MAX_STREAMS) {
    snprintf(err, errlen,
             "slabfeed: a batch may be exported to at most %d streams "
             "besides the one given to next()",
             SFPY_MAX_STREAMS);
    return -1;
  }
  /* The per-thread default stream is the calling thread's: the join runs
   * at the loader's next call, maybe on another thread, and would order
   * another stream. Refused (pass the stream's handle instead). */
  if (s == cudaStreamPerThread) {
    snprintf(err, errlen,
             "slabfeed: stream=2 (the per-thread default stream) is not "
             "supported for a batch export: it names another stream on "
             "every thread; pass a cudaStream_t (or 1, the legacy default "
             "stream)");
    return -1;
  }
  /* The legacy default stream is the one of the current device. */
  if (s == cudaStreamLegacy) {
    int dev = -1;
    cudaError_t rc = cudaGetDevice(&dev);
    if (rc != cudaSuccess)
      return fail(err, errlen, "cudaGetDevice", rc);
    if (dev != c->device) {
      snprintf(err, errlen,
               "slabfeed: stream=1 (the legacy default stream) names the "
               "current device's (%d), but the batch lives on device %d: "
               "make device %d current, or pass a stream of it",
               dev, c->device, c->device);
      return -1;
    }
  }
  /* Events cannot be recorded on another device's stream. */
  if (s != cudaStreamLegacy) {
    int dev = -1;
    cudaError_t rc = cudaStreamGetDevice(s, &dev);
    if (rc != cudaSuccess)
      return fail(err, errlen, "cudaStreamGetDevice (consumer stream)", rc);
    if (dev != c->device) {
      snprintf(err, errlen,
               "slabfeed: the consumer stream belongs to device %d but the "
               "batch lives on device %d",
               dev, c->device);
      return -1;
    }
  }
  cudaError_t rc = cudaStreamWaitEvent(s, (cudaEvent_t)event, 0);
  if (rc != cudaSuccess)
    return fail(err, errlen, "cudaStreamWaitEvent (consumer stream)", rc);
  c->streams[c->n++] = s;
  return 0;
}

int sfpy_cuda_join(sfpy_cuda *c, void *into, char *err, size_t errlen)
{
  int ret = 0;
  for (int i = 0; i < c->n && ret == 0; i++) {
    cudaError_t rc = cudaEventRecord(c->events[i], c->streams[i]);
    if (rc == cudaSuccess)
      rc = cudaStreamWaitEvent((cudaStream_t)into, c->events[i], 0);
    if (rc != cudaSuccess)
      ret = fail(err, errlen, "joining a consumer stream", rc);
  }
  c->n = 0;
  return ret;
}

#else /* no CUDA: device loaders are refused by slabfeed_open already */

int sfpy_cuda_available(void)
{
  return 0;
}

int sfpy_cuda_create(int device, sfpy_cuda **out, char *err, size_t errlen)
{
  (void)device;
  *out = NULL;
  snprintf(err, errlen, "slabfeed: this build has no CUDA");
  return -1;
}

void sfpy_cuda_destroy(sfpy_cuda *c)
{
  (void)c;
}

void *sfpy_cuda_handoff(const sfpy_cuda *c)
{
  (void)c;
  return NULL;
}

int sfpy_cuda_export(sfpy_cuda *c, void *stream, void *given, void *event,
                     char *err, size_t errlen)
{
  (void)c;
  (void)stream;
  (void)given;
  (void)event;
  snprintf(err, errlen, "slabfeed: this build has no CUDA");
  return -1;
}

int sfpy_cuda_join(sfpy_cuda *c, void *into, char *err, size_t errlen)
{
  (void)c;
  (void)into;
  (void)err;
  (void)errlen;
  return 0;
}
#endif
