/* gpu.writer: the writer of a tiled pass fed device tensors.
 *  - The identity model on the GPU: device batches of a pass (f32 NCDHW,
 *    and f32 NDHWC with a symmetry and vector channels) put as device
 *    tensors on a stream of the test's own give back the input's region
 *    bit for bit, read independently with plain HDF5.
 *  - Device puts give the same file, bit for bit, as host puts of the
 *    same outputs copied to host memory (the inverse kernel against the
 *    host path), for all 48 symmetries, f32/f16/bf16 outputs, NCDHW and
 *    NDHWC, with and without a log normalisation, channels-first and
 *    channels-last files, outputs of edge T + 2P and of edge T.
 *  - After the writer's open, put allocates and frees nothing on the
 *    device or in pinned memory and puts no work on the legacy default
 *    stream (the library's CUDA call counters).
 *  - Run with every rank its own node (gpu.writer.rpn), the shares of
 *    other ranks go through pinned staging and MPI_Put.
 *  - A device output of a host loader and a device output on another
 *    device than the loader's are refused. */
#include "cuda/cudart.h"
#include "gpu.h"
#include "testutil.h"

#include <unistd.h>

static int rank, size;
static const char *tag = ""; /* argv[1]: keeps the files of variants apart */

/* 1 when the environment injects a refused registration on this rank
 * (SLABFEED_TEST_FAIL=writer.register@R, tests/CMakeLists.txt). */
static int registration_refused_here(void)
{
  const char *f = getenv("SLABFEED_TEST_FAIL");
  char want[64];
  snprintf(want, sizeof want, "writer.register@%d", rank);
  return f != NULL && strcmp(f, want) == 0;
}

static void round_trip(const char *input, int symmetry, slabfeed_out_layout lay,
                       slabfeed_write_register reg, const char *name)
{
  char out[256];
  snprintf(out, sizeof out, "gpu_writer_%s%s.%d.h5", tag, name, size);
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
  c.write_register = reg;
  char err[1024] = "";
  slabfeed_loader *l = NULL;
  slabfeed_status st = slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err);
  CHECK(st == SLABFEED_OK, "open: %s", err);
  if (st != SLABFEED_OK)
    return;
  /* residency auto (0.12): a pass of several ranks on one node holds its
   * slabs on the GPU (the staged fill: no host window to register), unless
   * the verdict says why not (a GPU pair without peer access, a budget);
   * one rank per node keeps host memory for the pass's sake. */
  slabfeed_stats ps = SLABFEED_STATS_INIT;
  CHECK(slabfeed_stats_get(l, &ps) == SLABFEED_OK, "stats");
  const int want_device = ps.nodes == 1 && size > 1;
  char line[1024];
  slabfeed_placement(l, line, sizeof line);
  const char *pass_rule = strstr(line, "a tiled pass of one rank per node");
  const int refused =
      strstr(line, "host shared memory (residency auto: ") != NULL &&
      pass_rule == NULL;
  CHECK(want_device ? ps.device_slab_bytes > 0 || refused
                    : ps.device_slab_bytes == 0 && pass_rule != NULL,
        "residency auto, %d rank(s) on %d node(s): %llu slab bytes on the "
        "GPU; %s",
        size, ps.nodes, (unsigned long long)ps.device_slab_bytes, line);
  slabfeed_writer_config wc;
  slabfeed_writer_config_init(&wc);
  wc.path = out;
  wc.like = SLABFEED_LIKE_INPUT;
  wc.overwrite = 1;
  slabfeed_writer *w = NULL;
  st = slabfeed_writer_open(l, &wc, &w, err, sizeof err);
  CHECK(st == SLABFEED_OK, "writer open: %s", err);
  /* write_register (0.12): the registration the report names is the one
   * asked for, auto's by the ranks on the node (the test runs on one
   * node, or every rank its own). */
  if (w != NULL) {
    const char *io = slabfeed_writer_io(w);
    int local = size;
    if (ps.nodes > 1)
      local = 1;
    const int node = reg == SLABFEED_WRITE_REGISTER_NODE ||
                     (reg == SLABFEED_WRITE_REGISTER_AUTO && local <= 4);
    /* gpu.writer.refused: this rank's registration refused (injected),
     * which its report says, with the reason. */
    const int injected = registration_refused_here();
    CHECK(strstr(io, node ? "registration of the node's slabs"
                          : "registration of its own slab") != NULL &&
              (strstr(io, "refused (") != NULL) == injected,
          "write_register %d, %d rank(s) on the node, refusal %s: %s", (int)reg,
          local, injected ? "injected" : "not expected", io);
  }
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
    CHECK_EQ(bad, (int64_t)0, "%s: voxels differing from the input", name);
    printf("  %-12s symmetry %2d %s: %s\n", name, symmetry,
           lay == SLABFEED_OUT_NCDHW ? "NCDHW" : "NDHWC",
           bad == 0 ? "bit for bit" : "DIFFERS");
    whole_free(&in);
    whole_free(&got);
    unlink(out);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* One pass whose every batch is put twice: as the device tensor into one
 * writer, and copied to host memory into another. The two files must be
 * equal bit for bit. `centre`: the "model" keeps the tile only (edge T:
 * the target of the pass, which is the tile of the input here). */
static int64_t device_vs_host(const char *input, int g, slabfeed_out_layout lay,
                              slabfeed_dtype dt, int norm, int file_cl,
                              int centre)
{
  char out[2][256];
  for (int k = 0; k < 2; k++)
    snprintf(out[k], sizeof out[k], "gpu_writer_%sdh%d.%d.h5", tag, k, size);
  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = input;
  c.input = "Nbody";
  c.target = centre ? "Nbody" : NULL;
  c.batch = 2;
  c.tile = 5;
  c.pad = 2;
  c.pass_symmetry = g;
  c.out_layout = lay;
  c.dtype = dt;
  c.device = rank % gpu_count();
  c.n_input_vectors = 1;
  c.input_vectors[0][0] = 1, c.input_vectors[0][1] = 2,
  c.input_vectors[0][2] = 3;
  if (norm) {
    c.n_input_norm = 4;
    c.input_norm[0] = (slabfeed_norm){1, 1100.0f, 7.0f, 0.5f};
    for (int ch = 1; ch < 4; ch++)
      c.input_norm[ch] = (slabfeed_norm){0, 0.0f, 0.0f, 3.0f};
  }
  if (centre) { /* the target is the input's tile: the same groups, norm */
    c.n_target_vectors = 1;
    memcpy(c.target_vectors, c.input_vectors, sizeof c.input_vectors);
    c.n_target_norm = c.n_input_norm;
    memcpy(c.target_norm, c.input_norm, sizeof c.input_norm);
  }
  char err[1024] = "";
  slabfeed_loader *l = NULL;
  slabfeed_writer *w[2] = {NULL, NULL};
  slabfeed_status st = slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err);
  CHECK(st == SLABFEED_OK, "open: %s", err);
  if (st != SLABFEED_OK)
    return -1;
  for (int k = 0; k < 2; k++) {
    slabfeed_writer_config wc;
    slabfeed_writer_config_init(&wc);
    wc.path = out[k];
    wc.like = SLABFEED_LIKE_INPUT;
    wc.layout = file_cl ? SLABFEED_LAYOUT_CL : SLABFEED_LAYOUT_CF;
    wc.overwrite = 1;
    st = slabfeed_writer_open(l, &wc, &w[k], err, sizeof err);
    CHECK(st == SLABFEED_OK, "writer open: %s", err);
  }
  cudaStream_t s;
  CUDA_CHECK(cudaSetDevice(c.device));
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *host = NULL;
  const uint64_t steps = slabfeed_steps_per_epoch(l);
  for (uint64_t i = 0; i < steps && w[0] != NULL && w[1] != NULL; i++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    st = slabfeed_next(l, &b, s);
    CHECK(st == SLABFEED_OK, "next: %s", slabfeed_last_error(l));
    if (st != SLABFEED_OK)
      break;
    const slabfeed_tensor *t = centre ? &b.target : &b.input;
    size_t bytes = slabfeed_dtype_size(t->dtype);
    for (int a = 0; a < 5; a++)
      bytes *= (size_t)t->shape[a];
    if (host == NULL)
      CUDA_CHECK(cudaMallocHost(&host, bytes));
    CUDA_CHECK(
        cudaMemcpyAsync(host, t->data, bytes, cudaMemcpyDeviceToHost, s));
    st = slabfeed_writer_put(w[0], &b, t, lay, b.device, s);
    CHECK(st == SLABFEED_OK, "device put: %s",
          slabfeed_writer_last_error(w[0]));
    CUDA_CHECK(cudaStreamSynchronize(s));
    slabfeed_tensor h = *t;
    h.data = host;
    st = slabfeed_writer_put(w[1], &b, &h, lay, -1, NULL);
    CHECK(st == SLABFEED_OK, "host put: %s", slabfeed_writer_last_error(w[1]));
  }
  for (int k = 0; k < 2; k++)
    if (w[k] != NULL) {
      st = slabfeed_writer_close(w[k], err, sizeof err);
      CHECK(st == SLABFEED_OK, "writer close: %s", err);
    }
  slabfeed_close(l);
  CUDA_CHECK(cudaStreamDestroy(s));
  if (host != NULL)
    CUDA_CHECK(cudaFreeHost(host));
  int64_t bad = -1;
  if (rank == 0) {
    whole a, b;
    const int ra = whole_read(out[0], "prediction", file_cl, &a);
    const int rb = whole_read(out[1], "prediction", file_cl, &b);
    CHECK(ra == 0 && rb == 0, "read the two outputs");
    if (ra == 0 && rb == 0) {
      int64_t n = 1;
      for (int d = 0; d < 4; d++)
        n *= a.dims[d];
      bad = memcmp(a.dims, b.dims, sizeof a.dims) != 0 ? n : 0;
      for (int64_t i = 0; i < n && bad == 0; i++)
        bad += memcmp(&a.v[i], &b.v[i], sizeof(float)) != 0;
    }
    whole_free(&a);
    whole_free(&b);
    unlink(out[0]);
    unlink(out[1]);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return bad;
}

/* All 48 symmetries, each with another combination of output dtype,
 * layout, normalisation, file layout and output edge. */
static void device_equals_host(const char *input)
{
  static const char *dts[3] = {"f32", "f16", "bf16"};
  int64_t total = 0;
  for (int g = 0; g < 48; g++) {
    const slabfeed_out_layout lay =
        g % 2 ? SLABFEED_OUT_NDHWC : SLABFEED_OUT_NCDHW;
    const slabfeed_dtype dt = (slabfeed_dtype)(g % 3);
    const int norm = g % 4 >= 2, file_cl = g % 5 == 0, centre = g % 7 == 3;
    const int64_t bad =
        device_vs_host(input, g, lay, dt, norm, file_cl, centre);
    if (rank == 0) {
      CHECK_EQ(bad, (int64_t)0,
               "symmetry %d: voxels where device and host "
               "puts differ",
               g);
      if (bad != 0 || g % 8 == 0)
        printf("  device = host, symmetry %2d %s %s%s%s%s: %lld differ\n", g,
               lay == SLABFEED_OUT_NCDHW ? "NCDHW" : "NDHWC", dts[dt],
               norm ? " log-norm" : "", file_cl ? " cl-file" : "",
               centre ? " edge-T" : "", (long long)bad);
      total += bad > 0 ? bad : 0;
    }
  }
  if (rank == 0)
    printf("  device = host over 48 symmetries: %lld voxels differ\n",
           (long long)total);
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
  char host_out[96];
  snprintf(host_out, sizeof host_out, "gpu_writer_%shost.%d.h5", tag, size);
  wc.path = host_out;
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
  tag = argc > 1 ? argv[1] : "";
  if (gpu_count() == 0)
    return check_skip("gpu.writer", "no CUDA device");
  char input[64];
  snprintf(input, sizeof input, "gpu_writer_%sin.%d.h5", tag, size);
  make_file(input, 20, 18, 16, SLABFEED_LAYOUT_CF, 0, 0, 0);
  round_trip(input, 0, SLABFEED_OUT_NCDHW, SLABFEED_WRITE_REGISTER_AUTO,
             "identity");
  round_trip(input, 23, SLABFEED_OUT_NDHWC, SLABFEED_WRITE_REGISTER_AUTO,
             "g23_ndhwc");
  /* Each registration forced: own sends the node's other ranks' parts
   * through pinned staging and the CPU; node copies all on the device. */
  round_trip(input, 5, SLABFEED_OUT_NCDHW, SLABFEED_WRITE_REGISTER_OWN,
             "g5_own");
  round_trip(input, 0, SLABFEED_OUT_NDHWC, SLABFEED_WRITE_REGISTER_NODE,
             "identity_node");
  device_equals_host(input);
  host_loader_refuses_device(input);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    unlink(input);
  return check_finish("gpu.writer");
}
