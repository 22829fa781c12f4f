// GPU helpers of slabfeed-bench (see bench_gpu.h).
#include <chrono>

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench_gpu.h"

namespace {

// GB/s of reps copies of `bytes` on a fresh stream after one warm-up copy
// (CUDA event time); -1 on any CUDA error.
double copy_rate(void *dst, const void *src, size_t bytes, int reps,
                 cudaMemcpyKind kind)
{
  cudaStream_t s;
  cudaEvent_t a = nullptr, b = nullptr;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    return -1;
  bool ok = cudaEventCreate(&a) == cudaSuccess &&
            cudaEventCreate(&b) == cudaSuccess &&
            cudaMemcpyAsync(dst, src, bytes, kind, s) == cudaSuccess && // warm
            cudaEventRecord(a, s) == cudaSuccess;
  for (int r = 0; r < reps && ok; r++)
    ok = cudaMemcpyAsync(dst, src, bytes, kind, s) == cudaSuccess;
  float ms = 0;
  ok = ok && cudaEventRecord(b, s) == cudaSuccess &&
       cudaEventSynchronize(b) == cudaSuccess &&
       cudaEventElapsedTime(&ms, a, b) == cudaSuccess;
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
  return ok ? (double)bytes * reps / (ms * 1e-3) / 1e9 : -1;
}

// Keeps one thread busy for ns nanoseconds of the global timer: the
// simulated training step.
__global__ void spin(uint64_t ns)
{
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

} // namespace

// Pinned host to device copies of `bytes` (see bench_gpu.h).
extern "C" double bench_h2d_pinned(size_t bytes, int reps)
{
  void *h = nullptr, *d = nullptr;
  double r = -1;
  if (cudaHostAlloc(&h, bytes, cudaHostAllocDefault) == cudaSuccess &&
      cudaMalloc(&d, bytes) == cudaSuccess)
    r = copy_rate(d, h, bytes, reps, cudaMemcpyHostToDevice);
  cudaFree(d);
  cudaFreeHost(h);
  return r;
}

// The loader's per-channel 3D copy from random origins (see bench_gpu.h).
extern "C" double bench_h2d_pitched(size_t row_bytes, size_t rows,
                                    size_t planes, size_t src_pitch,
                                    double *enqueue_us)
{
  // The source: 2x the box's rows and planes of src_pitch-byte rows, at
  // most 1 GiB (fewer planes when it would not fit), so that each copy
  // starts at a random (z, y, x) as the loader's crops do.
  const size_t cap = (size_t)1 << 30;
  while (planes > 1 && src_pitch * 2 * rows * 2 * planes > cap)
    planes /= 2;
  const size_t box = row_bytes * rows * planes;
  const size_t src_bytes = src_pitch * 2 * rows * 2 * planes;
  const int reps = (int)(((size_t)2 << 30) / box) + 4;
  char *h = nullptr;
  void *d = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  double r = -1;
  if (cudaHostAlloc((void **)&h, src_bytes, cudaHostAllocDefault) ==
          cudaSuccess &&
      cudaMalloc(&d, box) == cudaSuccess &&
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
      cudaEventCreate(&a) == cudaSuccess &&
      cudaEventCreate(&b) == cudaSuccess) {
    uint64_t x = 0x9e3779b97f4a7c15ull; // xorshift: random box origins
    auto copy = [&]() {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const size_t oz = x % (planes + 1), oy = (x >> 20) % (rows + 1),
                   ox = (x >> 40) % ((src_pitch - row_bytes) / 4 + 1) * 4;
      cudaMemcpy3DParms m = {};
      m.srcPtr = make_cudaPitchedPtr(h + (oz * 2 * rows + oy) * src_pitch + ox,
                                     src_pitch, row_bytes, 2 * rows);
      m.dstPtr = make_cudaPitchedPtr(d, row_bytes, row_bytes, rows);
      m.extent = make_cudaExtent(row_bytes, rows, planes);
      m.kind = cudaMemcpyHostToDevice;
      return cudaMemcpy3DAsync(&m, s);
    };
    // Host time of one enqueue into an idle stream (no back-pressure).
    double enq = 0;
    bool ok = true;
    for (int i = 0; i < 9 && ok; i++) {
      ok = cudaStreamSynchronize(s) == cudaSuccess;
      const auto t0 = std::chrono::steady_clock::now();
      ok = ok && copy() == cudaSuccess;
      const auto t1 = std::chrono::steady_clock::now();
      if (i > 0) // the first one warms up
        enq += std::chrono::duration<double, std::micro>(t1 - t0).count();
    }
    ok = ok && cudaStreamSynchronize(s) == cudaSuccess &&
         cudaEventRecord(a, s) == cudaSuccess;
    for (int i = 0; i < reps && ok; i++)
      ok = copy() == cudaSuccess;
    float ms = 0;
    if (ok && cudaEventRecord(b, s) == cudaSuccess &&
        cudaEventSynchronize(b) == cudaSuccess &&
        cudaEventElapsedTime(&ms, a, b) == cudaSuccess && ms > 0) {
      r = (double)box * reps / (ms * 1e-3) / 1e9;
      *enqueue_us = enq / 8;
    }
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaStreamDestroy(s);
  cudaFree(d);
  cudaFreeHost(h);
  return r;
}

// Pageable (malloc) host to device copies, pages touched first.
extern "C" double bench_h2d_pageable(size_t bytes, int reps)
{
  char *h = static_cast<char *>(malloc(bytes));
  void *d = nullptr;
  double r = -1;
  if (h != nullptr && cudaMalloc(&d, bytes) == cudaSuccess) {
    for (size_t i = 0; i < bytes; i += 4096)
      h[i] = 1;
    r = copy_rate(d, h, bytes, reps, cudaMemcpyHostToDevice);
  }
  cudaFree(d);
  free(h);
  return r;
}

// Device to device copies: the device memory ceiling.
extern "C" double bench_d2d(size_t bytes, int reps)
{
  void *a = nullptr, *b = nullptr;
  double r = -1;
  if (cudaMalloc(&a, bytes) == cudaSuccess &&
      cudaMalloc(&b, bytes) == cudaSuccess)
    r = copy_rate(b, a, bytes, reps, cudaMemcpyDeviceToDevice);
  cudaFree(a);
  cudaFree(b);
  return r;
}

namespace {

// What bench_h2d_setup holds for the concurrent ceiling.
struct h2d_all {
  void *host, *dev;
  size_t bytes;
  cudaStream_t s;
};

} // namespace

// Pinned and device buffers and a stream on `device` (see bench_gpu.h).
extern "C" void *bench_h2d_setup(int device, size_t bytes)
{
  h2d_all *h = static_cast<h2d_all *>(calloc(1, sizeof(h2d_all)));
  if (h == nullptr)
    return nullptr;
  h->bytes = bytes;
  if (cudaSetDevice(device) != cudaSuccess ||
      cudaHostAlloc(&h->host, bytes, cudaHostAllocDefault) != cudaSuccess ||
      cudaMalloc(&h->dev, bytes) != cudaSuccess ||
      cudaStreamCreateWithFlags(&h->s, cudaStreamNonBlocking) != cudaSuccess ||
      // one warm-up copy, so that the timed ones find everything mapped
      cudaMemcpyAsync(h->dev, h->host, bytes, cudaMemcpyHostToDevice, h->s) !=
          cudaSuccess ||
      cudaStreamSynchronize(h->s) != cudaSuccess) {
    bench_h2d_free(h);
    return nullptr;
  }
  return h;
}

// reps copies, then the host waits for them; 0 or -1.
extern "C" int bench_h2d_run(void *p, int reps)
{
  h2d_all *h = static_cast<h2d_all *>(p);
  bool ok = true;
  for (int r = 0; r < reps && ok; r++)
    ok = cudaMemcpyAsync(h->dev, h->host, h->bytes, cudaMemcpyHostToDevice,
                         h->s) == cudaSuccess;
  ok = cudaStreamSynchronize(h->s) == cudaSuccess && ok;
  return ok ? 0 : -1;
}

// Releases what bench_h2d_setup took.
extern "C" void bench_h2d_free(void *p)
{
  h2d_all *h = static_cast<h2d_all *>(p);
  if (h == nullptr)
    return;
  if (h->s != nullptr)
    cudaStreamDestroy(h->s);
  cudaFree(h->dev);
  cudaFreeHost(h->host);
  free(h);
}

// Device 0 to device 1 copies (see bench_gpu.h).
extern "C" double bench_p2p(size_t bytes, int reps, int *peer)
{
  *peer = 0;
  int n = 0, caller = 0, can = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n < 2 ||
      cudaGetDevice(&caller) != cudaSuccess)
    return -1;
  void *src = nullptr, *dst = nullptr;
  cudaStream_t s = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  bool enabled = false, ok = cudaSetDevice(1) == cudaSuccess &&
                             cudaMalloc(&dst, bytes) == cudaSuccess &&
                             cudaSetDevice(0) == cudaSuccess &&
                             cudaMalloc(&src, bytes) == cudaSuccess &&
                             cudaDeviceCanAccessPeer(&can, 0, 1) == cudaSuccess;
  if (ok && can) {
    const cudaError_t rc = cudaDeviceEnablePeerAccess(1, 0);
    enabled = rc == cudaSuccess; // AlreadyEnabled: someone else's, left on
    *peer = rc == cudaSuccess || rc == cudaErrorPeerAccessAlreadyEnabled;
    (void)cudaGetLastError();
  }
  ok = ok &&
       cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
       cudaEventCreate(&a) == cudaSuccess &&
       cudaEventCreate(&b) == cudaSuccess &&
       cudaMemcpyPeerAsync(dst, 1, src, 0, bytes, s) == cudaSuccess && // warm
       cudaEventRecord(a, s) == cudaSuccess;
  for (int r = 0; r < reps && ok; r++)
    ok = cudaMemcpyPeerAsync(dst, 1, src, 0, bytes, s) == cudaSuccess;
  float ms = 0;
  ok = ok && cudaEventRecord(b, s) == cudaSuccess &&
       cudaEventSynchronize(b) == cudaSuccess &&
       cudaEventElapsedTime(&ms, a, b) == cudaSuccess && ms > 0;
  if (a != nullptr)
    cudaEventDestroy(a);
  if (b != nullptr)
    cudaEventDestroy(b);
  if (s != nullptr)
    cudaStreamDestroy(s);
  if (enabled)
    cudaDeviceDisablePeerAccess(1);
  cudaFree(src);
  cudaSetDevice(1);
  cudaFree(dst);
  cudaSetDevice(caller);
  (void)cudaGetLastError();
  return ok ? (double)bytes * reps / (ms * 1e-3) / 1e9 : -1;
}

// Enqueues the spin kernel for ms milliseconds on stream.
extern "C" int bench_busy(void *stream, double ms)
{
  spin<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>((uint64_t)(ms * 1e6));
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

// A timing event, or NULL on error.
extern "C" void *bench_event_create(void)
{
  cudaEvent_t e = nullptr;
  return cudaEventCreate(&e) == cudaSuccess ? e : nullptr;
}

// Records ev on stream; 0 or -1.
extern "C" int bench_event_record(void *ev, void *stream)
{
  return cudaEventRecord(static_cast<cudaEvent_t>(ev),
                         static_cast<cudaStream_t>(stream)) == cudaSuccess
             ? 0
             : -1;
}

// Milliseconds from a to b after b completed; -1 on error.
extern "C" double bench_event_ms(void *a, void *b)
{
  float ms = -1;
  if (cudaEventSynchronize(static_cast<cudaEvent_t>(b)) != cudaSuccess ||
      cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(a),
                           static_cast<cudaEvent_t>(b)) != cudaSuccess)
    return -1;
  return ms;
}

// Visible CUDA devices, 0 without a driver.
extern "C" int bench_device_count(void)
{
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess)
    n = 0;
  return n;
}

// Makes device current and creates a non-blocking stream on it.
extern "C" void *bench_stream_create(int device)
{
  cudaStream_t s = nullptr;
  if (cudaSetDevice(device) != cudaSuccess ||
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    return nullptr;
  return s;
}

// Waits for stream; 0 or -1.
extern "C" int bench_stream_sync(void *stream)
{
  return cudaStreamSynchronize(static_cast<cudaStream_t>(stream)) == cudaSuccess
             ? 0
             : -1;
}

// Destroys a stream of bench_stream_create.
extern "C" void bench_stream_destroy(void *stream)
{
  cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}

// Bytes of device memory in use (total - free) on the current device.
extern "C" double bench_device_used(void)
{
  size_t free_b = 0, total = 0;
  if (cudaMemGetInfo(&free_b, &total) != cudaSuccess)
    return -1;
  return (double)(total - free_b);
}

// Pinned host memory for the full-copy baseline, or NULL.
extern "C" void *bench_host_pinned(size_t bytes)
{
  void *p = nullptr;
  return cudaHostAlloc(&p, bytes, cudaHostAllocDefault) == cudaSuccess
             ? p
             : nullptr;
}

// Device memory for the full-copy baseline, or NULL.
extern "C" void *bench_device_alloc(size_t bytes)
{
  void *p = nullptr;
  return cudaMalloc(&p, bytes) == cudaSuccess ? p : nullptr;
}

// Asynchronous host to device copy on stream; 0 or -1.
extern "C" int bench_copy_h2d(void *dst, const void *src, size_t bytes,
                              void *stream)
{
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                         static_cast<cudaStream_t>(stream)) == cudaSuccess
             ? 0
             : -1;
}

// Frees pinned memory of bench_host_pinned.
extern "C" void bench_host_free(void *p)
{
  if (p != nullptr)
    cudaFreeHost(p);
}

// Frees device memory of bench_device_alloc.
extern "C" void bench_device_free(void *p)
{
  if (p != nullptr)
    cudaFree(p);
}
