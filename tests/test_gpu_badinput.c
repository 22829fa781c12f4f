/* Misuse of the GPU path fails cleanly. A device index beyond the visible
 * ones is refused at open on every rank, with the same status and a
 * message that names it. A stream of another device (two-GPU machines) is
 * refused by slabfeed_next with a message naming both devices, and the loader
 * goes on: the next slabfeed_next with a stream of its device hands out the
 * batch the host path hands out first. */
#include "gpu.h"
#include "testutil.h"

static int rank, size;

/* slabfeed_open of c on every rank; *same: whether every rank got the
 * same status (errors at open are agreed). */
static slabfeed_status open_all(const slabfeed_config *c, slabfeed_loader **l,
                                char *err, size_t len, int *same)
{
  *l = NULL;
  const slabfeed_status st = slabfeed_open(MPI_COMM_WORLD, c, l, err, len);
  int lo = st, hi = st;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  *same = lo == hi;
  return st;
}

/* base_config (testutil.h) with this test's crop and seed. */
static void config_of(slabfeed_config *c, const char *path)
{
  base_config(c, path, 12);
  c->seed = 4;
}

static void device_out_of_range(const char *path, int n)
{
  slabfeed_config c;
  config_of(&c, path);
  c.device = n;
  char err[1024] = "";
  slabfeed_loader *l = NULL;
  int same = 0;
  const slabfeed_status st = open_all(&c, &l, err, sizeof err, &same);
  CHECK(same, "device %d: ranks disagree on the status", n);
  CHECK(st == SLABFEED_ERR_CUDA && l == NULL, "device %d: status %s, loader %p",
        n, slabfeed_strerror(st), (void *)l);
  char want[64];
  snprintf(want, sizeof want, "device %d requested", n);
  CHECK(strstr(err, want) != NULL && strncmp(err, "rank ", 5) == 0,
        "device %d: message '%s' should name the rank and '%s'", n, err, want);
  if (rank == 0)
    printf("gpu.badinput: device %d -> %s: %s\n", n, slabfeed_strerror(st),
           err);
  if (st == SLABFEED_OK)
    slabfeed_close(l);
}

/* A failure on the last rank only at a stage of the GPU back end's open
 * (the test-only injection points): the registration of the node window
 * (residency host); with residency device on one node, the staged fill's
 * allocations, a copy from its staging in the middle of the read, and the
 * copies of the planes other ranks read, GPU to GPU; every rank its own
 * node in groups of one (rpn: planes come from other nodes at open), the
 * copy of the host slab into device memory; and the mapping of the node's
 * copies over CUDA IPC: every rank gets the same status and a message
 * naming that rank and the stage, nothing hangs, and nothing leaks into
 * the next open (a good one follows). `pass`: a tiled pass (tile 6 + 2 x
 * 2), whose residency auto takes the device for several ranks of one node
 * (0.12). */
static void one_rank_fails(const char *path, const char *stage,
                           slabfeed_residency res, int rpn, int pass)
{
  slabfeed_config c;
  config_of(&c, path);
  c.device = rank % gpu_count();
  c.residency = res;
  if (pass) {
    c.target = NULL;
    c.tile = 6;
    c.pad = 2;
  }
  /* Halo planes, so that the staged fill's rest has copies to make. */
  if (strcmp(stage, "device.rest") == 0)
    c.halo = 2;
  char v[48], err[1024] = "", want[32];
  snprintf(v, sizeof v, "%s@%d", stage, size - 1);
  if (rpn) {
    setenv("SLABFEED_RANK_PER_NODE", "1", 1);
    setenv("SLABFEED_GROUP_NODES", "1", 1);
  }
  setenv("SLABFEED_TEST_FAIL", v, 1);
  slabfeed_loader *l = NULL;
  int same = 0;
  const slabfeed_status st = open_all(&c, &l, err, sizeof err, &same);
  unsetenv("SLABFEED_TEST_FAIL");
  snprintf(want, sizeof want, "rank %d:", size - 1);
  CHECK(same && st == SLABFEED_ERR_CUDA && l == NULL &&
            strstr(err, want) != NULL && strstr(err, stage) != NULL,
        "%s fails on rank %d only: status %s, '%s'", stage, size - 1,
        slabfeed_strerror(st), err);
  if (rank == 0)
    printf("gpu.badinput: %s fails on rank %d -> every rank %s: %s\n", stage,
           size - 1, slabfeed_status_name(st), err);
  slabfeed_close(l);
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "good open after the failure at %s: %s", stage, err);
  slabfeed_close(l);
  unsetenv("SLABFEED_RANK_PER_NODE");
  unsetenv("SLABFEED_GROUP_NODES");
}

/* A GPU budget too small for the slabs: residency device is refused on
 * every rank with the budget named; auto falls back to host memory and
 * the placement line says why. */
static void budget_too_small(const char *path)
{
  slabfeed_config c;
  config_of(&c, path);
  c.device = rank % gpu_count();
  c.residency = SLABFEED_RESIDENCY_DEVICE;
  c.device_memory = 4096;
  char err[1024] = "";
  slabfeed_loader *l = NULL;
  int same = 0;
  const slabfeed_status st = open_all(&c, &l, err, sizeof err, &same);
  CHECK(same && st == SLABFEED_ERR_ARG && l == NULL &&
            strstr(err, "residency device") != NULL &&
            strstr(err, "over its budget of 0.00 GB") != NULL &&
            strstr(err, "--device-memory") != NULL,
        "residency device over budget: status %s, '%s'", slabfeed_strerror(st),
        err);
  if (rank == 0)
    printf("gpu.badinput: residency device over budget -> %s: %s\n",
           slabfeed_status_name(st), err);
  slabfeed_close(l);
  c.residency = SLABFEED_RESIDENCY_AUTO;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "residency auto over budget: %s", err);
  if (l != NULL) {
    char line[1024];
    slabfeed_placement(l, line, sizeof line);
    slabfeed_stats s = SLABFEED_STATS_INIT;
    slabfeed_stats_get(l, &s);
    CHECK(s.device_slab_bytes == 0 &&
              strstr(line, "crops read from host shared memory (residency "
                           "auto: rank ") != NULL &&
              strstr(line, "over its budget") != NULL,
          "residency auto over budget: %s", line);
    if (rank == 0)
      printf("gpu.badinput: residency auto over budget -> %s\n",
             strstr(line, "crops read from"));
  }
  slabfeed_close(l);
}

static void stream_of_other_device(const char *path)
{
  slabfeed_config c;
  config_of(&c, path);
  char err[1024];
  slabfeed_loader *cpu = NULL, *gpu = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &cpu, err, sizeof err) == SLABFEED_OK,
        "cpu open: %s", err);
  c.device = 0;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &gpu, err, sizeof err) == SLABFEED_OK,
        "gpu open: %s", err);
  cudaStream_t other = NULL, own = NULL;
  CUDA_CHECK(cudaSetDevice(1));
  CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
  if (cpu != NULL && gpu != NULL) {
    slabfeed_batch a = SLABFEED_BATCH_INIT, b = SLABFEED_BATCH_INIT;
    const slabfeed_status st = slabfeed_next(gpu, &b, other);
    const char *msg = slabfeed_last_error(gpu);
    CHECK(st == SLABFEED_ERR_ARG && strstr(msg, "device 1") != NULL &&
              strstr(msg, "device 0") != NULL,
          "stream of device 1: status %s, message '%s'", slabfeed_strerror(st),
          msg);
    if (rank == 0)
      printf("gpu.badinput: stream of device 1 -> %s: %s\n",
             slabfeed_strerror(st), msg);
    CHECK(slabfeed_next(cpu, &a, NULL) == SLABFEED_OK, "cpu next: %s",
          slabfeed_last_error(cpu));
    CHECK(slabfeed_next(gpu, &b, own) == SLABFEED_OK,
          "gpu next after the refusal: %s", slabfeed_last_error(gpu));
    const size_t bytes = (size_t)a.input.strides[0] * 2 * sizeof(float);
    float *host = malloc(bytes);
    CHECK(slabfeed_copy_to_host(gpu, &b.input, host) == SLABFEED_OK, "copy: %s",
          slabfeed_last_error(gpu));
    CHECK(b.step == a.step && b.sample[0] == a.sample[0] &&
              memcmp(host, a.input.data, bytes) == 0,
          "after the refusal: not the host path's first batch");
    free(host);
  }
  slabfeed_close(cpu);
  slabfeed_close(gpu);
  cudaStreamDestroy(own);
  cudaStreamDestroy(other);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int n = gpu_count();
  if (n == 0)
    return check_skip("gpu.badinput", "no CUDA device");
  char path[64];
  snprintf(path, sizeof path, "gpubad_np%d.h5", size);
  make_file(path, 24, 20, 18, SLABFEED_LAYOUT_CF, 0, 0, 1);
  device_out_of_range(path, n);
  one_rank_fails(path, "register", SLABFEED_RESIDENCY_HOST, 0, 0);
  one_rank_fails(path, "device.stage", SLABFEED_RESIDENCY_DEVICE, 0, 0);
  one_rank_fails(path, "device.put", SLABFEED_RESIDENCY_DEVICE, 0, 0);
  one_rank_fails(path, "device.rest", SLABFEED_RESIDENCY_DEVICE, 0, 0);
  if (size > 1) {
    one_rank_fails(path, "device.fill", SLABFEED_RESIDENCY_DEVICE, 1, 0);
    one_rank_fails(path, "device.ipc", SLABFEED_RESIDENCY_DEVICE, 0, 0);
    /* A pass of several ranks: auto's staged fill and IPC mapping. */
    one_rank_fails(path, "device.put", SLABFEED_RESIDENCY_AUTO, 0, 1);
    one_rank_fails(path, "device.ipc", SLABFEED_RESIDENCY_AUTO, 0, 1);
  }
  budget_too_small(path);
  if (n >= 2)
    stream_of_other_device(path);
  else if (rank == 0)
    printf("gpu.badinput: one GPU visible: the stream-of-another-device case "
           "needs two and did not run\n");
  return check_finish("gpu.badinput");
}
