/* GPU test helpers: skip cleanly without a usable CUDA device. */
#ifndef SF_TESTS_GPU_H
#define SF_TESTS_GPU_H

#include <cuda_runtime_api.h>

#include "check.h"

/* The number of usable devices (0 without a driver or GPU). */
static inline int gpu_count(void)
{
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess)
    n = 0;
  (void)cudaGetLastError();
  return n;
}

#define CUDA_CHECK(call)                                                       \
  do {                                                                         \
    const cudaError_t rc_ = (call);                                            \
    CHECK(rc_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(rc_));       \
  } while (0)

#endif
