/* gpu.writer: the writer of a tiled pass fed device tensors.
 *  - The identity model on the GPU: device batches of a pass (f32 NCDHW,
 *    and f32 NDHWC with a symmetry and vector channels) put as device
 *    tensors on a stream of the test's own give back the input's region
 *    bit for bit, read independently with plain HDF5.
 *  - After the writer's open, put allocates and frees nothing on the
 *    device or in pinned memory and puts no work on the legacy default
 *    stream (the library's CUDA call counters).
 *  - A device output of a host loader and a device output on another
 *    device than the loader's are refused. */
#include "cuda/cudart.h"
#include "gpu.h"
#include "testutil.h"

#include <unistd.h>

static int rank, size;

static void round_trip(const char *input, int symmetry, slabfeed_out_layout lay,
                       const char *tag)
{
  char out[256];
  snprintf(out, sizeof out, "gpu_writer_%s.%d.h5", tag, size);
  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = input;
  c.input = "Nbody";
  c.target = NULL;
  c.batch = 3;
  c.tile = 6;
  c.pad = 2;
  c.pass_symmetry = symmetry;
  c.out_layout = lay;
  c.device = rank % gpu_count();
  c.n_input_vectors = 1;
  c.input_vectors[0][0] = 1, c.input_vectors[0][1] = 2,
  c.input_vectors[0][2] = 3;
  char err[1024] = "";
  slabfeed_loader *l = NULL;
  slabfeed_status st = slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err);
  CHECK(st == SLABFEED_OK, "open: %s", err);
  if (st != SLABFEED_OK)
    return;
  slabfeed_writer_config wc;
  slabfeed_writer_config_init(&wc);
  wc.path = out;
  wc.like = SLABFEED_LIKE_INPUT;
  wc.overwrite = 1;
  slabfeed_writer *w = NULL;
  st = slabfeed_writer_open(l, &wc, &w, err, sizeof err);
  CHECK(st == SLABFEED_OK, "writer open: %s", err);
  cudaStream_t s;
  CUDA_CHECK(cudaSetDevice(c.device));
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  sf__cudart_counts before, after;
  sf__cudart_counts_get(&before);
  const uint64_t steps = slabfeed_steps_per_epoch(l);
  for (uint64_t i = 0; i < steps && w != NULL; i++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    st = slabfeed_next(l, &b, s);
    CHECK(st == SLABFEED_OK, "next: %s", slabfeed_last_error(l));
    if (st != SLABFEED_OK)
      break;
    st = slabfeed_writer_put(w, &b, &b.input, lay, b.device, s);
    CHECK(st == SLABFEED_OK, "put: %s", slabfeed_writer_last_error(w));
    if (i == 0) {
      /* Refused: a device output on a device other than the loader's. */
      st = slabfeed_writer_put(w, &b, &b.input, lay, b.device + 1, s);
      CHECK(st == SLABFEED_ERR_ARG, "put on another device: %s",
            slabfeed_status_name(st));
    }
  }
  sf__cudart_counts_get(&after);
  CHECK_EQ(after.allocs - before.allocs, (uint64_t)0, "allocations in put");
  CHECK_EQ(after.frees - before.frees, (uint64_t)0, "frees in put");
  CHECK_EQ(after.default_stream - before.default_stream, (uint64_t)0,
           "work on the legacy default stream in put");
  if (w != NULL) {
    st = slabfeed_writer_close(w, err, sizeof err);
    CHECK(st == SLABFEED_OK, "writer close: %s", err);
  }
  slabfeed_close(l);
  CUDA_CHECK(cudaStreamDestroy(s));
  if (rank == 0 && st == SLABFEED_OK) {
    whole in, got;
    CHECK(whole_read(input, "Nbody", 0, &in) == 0, "read %s", input);
    CHECK(whole_read(out, "prediction", 0, &got) == 0, "read %s", out);
    int64_t bad = 0, n = 1;
    for (int a = 0; a < 4; a++)
      n *= in.dims[a];
    for (int64_t i = 0; i < n && got.v != NULL; i++)
      bad += memcmp(&in.v[i], &got.v[i], sizeof(float)) != 0;
    CHECK_EQ(bad, (int64_t)0, "%s: voxels differing from the input", tag);
    printf("  %-12s symmetry %2d %s: %s\n", tag, symmetry,
           lay == SLABFEED_OUT_NCDHW ? "NCDHW" : "NDHWC",
           bad == 0 ? "bit for bit" : "DIFFERS");
    whole_free(&in);
    whole_free(&got);
    unlink(out);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* A host loader's writer takes host memory only. */
static void host_loader_refuses_device(const char *input)
{
  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = input;
  c.input = "Nbody";
  c.target = NULL;
  c.tile = 6;
  char err[1024] = "";
  slabfeed_loader *l = NULL;
  slabfeed_writer *w = NULL;
  if (slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) != SLABFEED_OK)
    return;
  slabfeed_writer_config wc;
  slabfeed_writer_config_init(&wc);
  wc.path = "gpu_writer_host.h5";
  wc.overwrite = 1;
  wc.like = SLABFEED_LIKE_INPUT;
  CHECK(slabfeed_writer_open(l, &wc, &w, err, sizeof err) == SLABFEED_OK,
        "writer open: %s", err);
  slabfeed_batch b = SLABFEED_BATCH_INIT;
  if (w != NULL && slabfeed_next(l, &b, NULL) == SLABFEED_OK) {
    void *dev = NULL;
    CUDA_CHECK(cudaMalloc(&dev, 16));
    slabfeed_tensor t = b.input;
    t.data = dev;
    CHECK(slabfeed_writer_put(w, &b, &t, SLABFEED_OUT_NCDHW, 0, NULL) ==
              SLABFEED_ERR_ARG,
          "device output of a host loader accepted");
    CUDA_CHECK(cudaFree(dev));
  }
  slabfeed_writer_abort(w);
  slabfeed_close(l);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (gpu_count() == 0)
    return check_skip("gpu.writer", "no CUDA device");
  char input[64];
  snprintf(input, sizeof input, "gpu_writer_in.%d.h5", size);
  make_file(input, 20, 18, 16, SLABFEED_LAYOUT_CF, 0, 0, 0);
  round_trip(input, 0, SLABFEED_OUT_NCDHW, "identity");
  round_trip(input, 23, SLABFEED_OUT_NDHWC, "g23_ndhwc");
  host_loader_refuses_device(input);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    unlink(input);
  return check_finish("gpu.writer");
}
