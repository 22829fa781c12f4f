// Does compute-sanitizer's initcheck see what cudaMemcpy3DAsync writes
// into a device buffer at a non-zero destination position? The loader
// stages crops with such copies (one per piece; pieces of a crop that
// wraps around the box land at offsets inside the staged crop), and
// initcheck reported reads of "uninitialized" staged data although every
// batch equals the host reference bit for bit. This probe copies a box
// from registered host memory into a device buffer in one piece, or in two
// pieces split along x, y or z, then reads every element in a kernel:
//   compute-sanitizer --tool initcheck bench/initcheck_probe
// prints, for each case, whether the kernel's checksum is right; initcheck
// reports (or not) per case between the case markers.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime_api.h>

#define CK(call)                                                               \
  do {                                                                         \
    cudaError_t rc_ = (call);                                                  \
    if (rc_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(rc_));        \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

static __global__ void sum(const float *in, int n, double *out)
{
  double s = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    s += in[i];
  atomicAdd(out, s);
}

enum { E = 16, N = E * E * E };

// Copies box [z0,z0+nz) x [y0,y0+ny) x [x0,x0+nx) of the host cube h (edge
// E) to the same place in the device cube d; `folded`: the start position
// goes into the base pointers instead of srcPos/dstPos (what the loader
// does).
static void copy_box(const float *h, float *d, int z0, int y0, int x0, int nz,
                     int ny, int nx, cudaStream_t s, bool folded = false)
{
  cudaMemcpy3DParms m;
  std::memset(&m, 0, sizeof m);
  const size_t off = folded ? ((size_t)z0 * E + y0) * E + x0 : 0;
  m.srcPtr = make_cudaPitchedPtr((void *)(h + off), E * sizeof(float), E, E);
  m.dstPtr = make_cudaPitchedPtr(d + off, E * sizeof(float), E, E);
  if (!folded) {
    m.srcPos = make_cudaPos(x0 * sizeof(float), y0, z0);
    m.dstPos = make_cudaPos(x0 * sizeof(float), y0, z0);
  }
  m.extent = make_cudaExtent(nx * sizeof(float), ny, nz);
  m.kind = cudaMemcpyHostToDevice;
  CK(cudaMemcpy3DAsync(&m, s));
}

int main()
{
  float *h = static_cast<float *>(std::malloc(N * sizeof(float)));
  double want = 0;
  for (int i = 0; i < N; i++)
    want += h[i] = (float)(i % 97);
  CK(cudaHostRegister(h, N * sizeof(float), cudaHostRegisterDefault));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double *got;
  CK(cudaMallocManaged(&got, sizeof(double)));
  const char *names[] = {"one piece",
                         "split along x",
                         "split along y",
                         "split along z",
                         "split along y, positions folded",
                         "split along y, plane by plane"};
  for (int c = 0; c < 6; c++) {
    float *d;
    CK(cudaMalloc(&d, N * sizeof(float)));
    std::printf("case %s: begin\n", names[c]);
    std::fflush(stdout);
    const int k = 11;
    if (c == 0)
      copy_box(h, d, 0, 0, 0, E, E, E, s);
    else if (c == 1)
      copy_box(h, d, 0, 0, 0, E, E, k, s),
          copy_box(h, d, 0, 0, k, E, E, E - k, s);
    else if (c == 2)
      copy_box(h, d, 0, 0, 0, E, k, E, s),
          copy_box(h, d, 0, k, 0, E, E - k, E, s);
    else if (c == 3)
      copy_box(h, d, 0, 0, 0, k, E, E, s),
          copy_box(h, d, k, 0, 0, E - k, E, E, s);
    else if (c == 4)
      copy_box(h, d, 0, 0, 0, E, k, E, s, true),
          copy_box(h, d, 0, k, 0, E, E - k, E, s, true);
    else
      for (int z = 0; z < E; z++)
        copy_box(h, d, z, 0, 0, 1, k, E, s),
            copy_box(h, d, z, k, 0, 1, E - k, E, s);
    *got = 0;
    sum<<<1, 256, 0, s>>>(d, N, got);
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(s));
    std::printf("case %s: end, checksum %s\n", names[c],
                *got == want ? "right" : "WRONG");
    std::fflush(stdout);
    CK(cudaFree(d));
  }
  CK(cudaHostUnregister(h));
  std::free(h);
  return 0;
}
