/* The GPU path against the host path: whole batches of the same config and
 * seed are equal bit for bit (all dtypes and layouts, input + target,
 * vector groups, with and without per-channel normalisation (and amplitude
 * augmentation: the same factors, the same bits): log channels
 * whose NaN and -inf come out alike, vector groups of one scale), on 1 and
 * 2 ranks, also with one rank per "node" (MPI_Get into pinned staging),
 * training pads (the target core cut out of each piece on both paths),
 * a target on a grid twice as fine (scale_factor 2, with a pad) and
 * one twice as coarse (coarsen_factor 2, a pad of 3, random crops and a
 * pass),
 * also for crops as large as the box on some axes (staged as one source
 * box and rearranged on the device). Then
 * 200 steps on a training stream: the counters of the CUDA layer show no
 * allocation, free, registration, stream synchronisation or default-stream use
 * after slabfeed_open (device synchronisation does not exist in the library:
 * lint.cuda_layer). And a slow consumer: batch slots are not reused before the
 * consumer's stream has passed the next slabfeed_next. argv[1]: "multiple" or
 * "single" (the MPI thread level asked for); argv[2]: the GPU loaders'
 * residency, "host" (crops over the link from the node's shared memory) or
 * "device" (0.8: slabs held in GPU memory, the node's other ranks' read
 * over CUDA IPC: the same bits, and again no allocation after open); with
 * SLABFEED_TEST_DIRECT=1 every crop takes the in-place transform of large
 * crops (one launch per piece, no staging). */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <time.h>
#include <unistd.h> /* sysconf */

#include "cuda/cudart.h"
#include "gpu.h"
#include "testutil.h"

static int rank, size;
static slabfeed_residency residency = SLABFEED_RESIDENCY_HOST;

/* The GPU loader reads its crops where asked: its slab in device memory
 * (and the placement line says so) for residency device, none there for
 * host. */
static void check_residency(slabfeed_loader *l)
{
  slabfeed_stats st = SLABFEED_STATS_INIT;
  slabfeed_stats_get(l, &st);
  char line[1024];
  slabfeed_placement(l, line, sizeof line);
  /* The open's parts are parts of it, wherever the context's wait fell
   * (before the read for residency device, after it for host). */
  CHECK(st.t_open > 0 && st.t_read >= 0 && st.t_open_context >= 0 &&
            st.t_open_backend >= 0 &&
            st.t_read + st.t_open_context + st.t_open_backend <=
                st.t_open + 1e-6 &&
            st.t_open_register <= st.t_open_backend + 1e-6,
        "open %.4f s: read %.4f + context %.4f + back end %.4f (register "
        "%.4f) exceed it",
        st.t_open, st.t_read, st.t_open_context, st.t_open_backend,
        st.t_open_register);
  if (residency == SLABFEED_RESIDENCY_DEVICE) {
    CHECK(st.device_slab_bytes == st.slab_bytes &&
              strstr(line, "crops read from GPU memory (residency device") !=
                  NULL,
          "residency device: %llu of %llu slab bytes on the GPU; %s",
          (unsigned long long)st.device_slab_bytes,
          (unsigned long long)st.slab_bytes, line);
    /* One node: every plane is read on it, so the slab goes from the
     * file to the GPU through pinned staging and the host copy is never
     * made (all of slab_bytes counted as not held). Groups of one node
     * each (no piece crosses nodes, but planes come from other nodes at
     * open): the host copy goes back, all of it but the partial pages at
     * its two ends. Else it stays for the other nodes' MPI reads. */
    const long pg = sysconf(_SC_PAGESIZE);
    if (st.nodes == 1)
      CHECK(st.slab_released_bytes == st.slab_bytes &&
                strstr(line, "pinned staging, no host copy") != NULL,
            "residency device, one node: %llu of %llu host slab bytes not "
            "held; %s",
            (unsigned long long)st.slab_released_bytes,
            (unsigned long long)st.slab_bytes, line);
    else if (st.nodes <= st.groups)
      CHECK(st.slab_released_bytes + 2 * (uint64_t)pg >= st.slab_bytes &&
                st.slab_released_bytes <= st.slab_bytes &&
                strstr(line, "host copy given back") != NULL,
            "residency device, one node a group: %llu of %llu host slab "
            "bytes given back; %s",
            (unsigned long long)st.slab_released_bytes,
            (unsigned long long)st.slab_bytes, line);
    else
      CHECK(st.slab_released_bytes == 0 &&
                strstr(line, "host copy kept") != NULL,
            "residency device across nodes: %llu host slab bytes given "
            "back; %s",
            (unsigned long long)st.slab_released_bytes, line);
  } else
    CHECK(st.device_slab_bytes == 0 && st.slab_released_bytes == 0 &&
              strstr(line, "crops read from host shared memory") != NULL,
          "residency host: %llu slab bytes on the GPU; %s",
          (unsigned long long)st.device_slab_bytes, line);
}

/* The host-path and the GPU-path loader of the same config (device: this
 * rank's GPU); 0 (and neither open) when either failed to open. */
static int open_pair(slabfeed_config *c, slabfeed_loader **cpu,
                     slabfeed_loader **gpu)
{
  char err[1024];
  *cpu = *gpu = NULL;
  c->device = -1;
  CHECK(slabfeed_open(MPI_COMM_WORLD, c, cpu, err, sizeof err) == SLABFEED_OK,
        "cpu open: %s", err);
  c->device = rank % gpu_count();
  c->residency = residency;
  CHECK(slabfeed_open(MPI_COMM_WORLD, c, gpu, err, sizeof err) == SLABFEED_OK,
        "gpu open: %s", err);
  c->residency = SLABFEED_RESIDENCY_AUTO;
  if (*cpu != NULL && *gpu != NULL) {
    check_residency(*gpu);
    return 1;
  }
  slabfeed_close(*cpu); /* open failures are agreed: the same on every rank */
  slabfeed_close(*gpu);
  return 0;
}

/* What compare() runs: random crops, random crops with a hold-out, or a
 * tiled pass (workflow options; the same plan feeds both back ends). */
enum {
  RANDOM = 0,
  HOLDOUT = 1,
  PASS = 2,
  PADS = 3,
  SR = 4,
  COARSE = 5,
  COARSE_PASS = 6
};

/* SR mode: the target of a file twice as fine (scale_factor 2); COARSE
 * modes: of a file twice as coarse (coarsen_factor 2). */
static char sr_target[96], coarse_target[96];

static void compare(const char *path, slabfeed_dtype dt,
                    slabfeed_out_layout lay, int halo, cudaStream_t s,
                    int expect_thread, int expect_remote, int mode, int norm)
{
  slabfeed_config c;
  base_config(&c, path, 20);
  char err[256];
  /* Index content is in [-1024, 1023]: the log of input channel 0 has
   * x + a < 0 (NaN) and = 0 (-inf) in it, the target's log does not. */
  /* norm 2: amplitude augmentation as well (random crops only) */
  if (norm == 2)
    CHECK(slabfeed_config_set(&c, "aug_add", "0.3,0,0,0", err, sizeof err) ==
                  SLABFEED_OK &&
              slabfeed_config_set(&c, "aug_mul", "0.25", err, sizeof err) ==
                  SLABFEED_OK &&
              slabfeed_config_set(&c, "target_aug_mul", "0.25,0.25,0.25,0.25,0",
                                  err, sizeof err) == SLABFEED_OK &&
              slabfeed_config_set(&c, "target_aug_add", "0,0,0,0,0.5", err,
                                  sizeof err) == SLABFEED_OK,
          "aug: %s", err);
  if (norm)
    CHECK(slabfeed_config_set(&c, "input_norm",
                              "log(1000),6.5,0.75;0,3.5;0,3.5;0,3.5", err,
                              sizeof err) == SLABFEED_OK &&
              slabfeed_config_set(&c, "target_norm",
                                  "7,0.3;0,-2;0,-2;0,-2;log(2000.5),7.2,0.5",
                                  err, sizeof err) == SLABFEED_OK,
          "norms: %s", err);
  if (mode == HOLDOUT)
    CHECK(slabfeed_config_set(&c, "holdout", "42,0,0,6,0,0;5,3,30,7,9,12", err,
                              sizeof err) == SLABFEED_OK,
          "holdout: %s", err);
  if (mode == SR) { /* input crops of 10 + 2 x 2, target 20 on its grid */
    c.crop[0] = c.crop[1] = c.crop[2] = 10;
    c.pad = 2;
    c.target = sr_target;
    c.scale_factor = 2;
  }
  if (mode == COARSE) { /* input crops of 10 + 2 x 3, target 5 on its grid */
    c.crop[0] = c.crop[1] = c.crop[2] = 10;
    c.pad = 3;
    c.target = coarse_target;
    c.coarsen_factor = 2;
  }
  if (mode == COARSE_PASS) { /* tiles of 12 + 2 x 3, target tiles of 6 */
    c.tile = 12;
    c.pad = 3;
    c.pass_symmetry = 29;
    c.target = coarse_target;
    c.coarsen_factor = 2;
    CHECK(slabfeed_config_set(&c, "region", "8,4,0,30,0,0", err, sizeof err) ==
              SLABFEED_OK,
          "region: %s", err);
  }
  if (mode == PADS) { /* input crops of 20, target cores of 14 */
    c.crop[0] = c.crop[1] = c.crop[2] = 14;
    c.pad = 3;
  }
  if (mode == PASS) {
    c.tile = 12; /* crops of 20 */
    c.pad = 4;
    c.pass_symmetry = 17;
    CHECK(slabfeed_config_set(&c, "region", "40,0,0,30,0,0", err, sizeof err) ==
              SLABFEED_OK,
          "region: %s", err);
  }
  c.seed = 11;
  c.dtype = dt;
  c.out_layout = lay;
  c.halo = halo;
  c.prefetch = 3;
  c.n_input_vectors = c.n_target_vectors = 1;
  c.input_vectors[0][0] = c.target_vectors[0][0] = 1;
  c.input_vectors[0][1] = c.target_vectors[0][1] = 2;
  c.input_vectors[0][2] = c.target_vectors[0][2] = 3;
  slabfeed_loader *cpu, *gpu;
  if (!open_pair(&c, &cpu, &gpu))
    return;
  slabfeed_stats st = SLABFEED_STATS_INIT;
  slabfeed_stats_get(gpu, &st);
  CHECK_EQ(st.loader_thread, expect_thread, "loader thread");
  const size_t es = slabfeed_dtype_size(dt);
  int64_t bad = 0;
  for (int step = 0; step < 10; step++) {
    slabfeed_batch a = SLABFEED_BATCH_INIT, b = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(cpu, &a, NULL) == SLABFEED_OK, "cpu next: %s",
          slabfeed_last_error(cpu));
    CHECK(slabfeed_next(gpu, &b, s) == SLABFEED_OK, "gpu next: %s",
          slabfeed_last_error(gpu));
    CHECK(b.device == rank % gpu_count() && b.ready_event != NULL,
          "device batch");
    CHECK(memcmp(a.origin, b.origin, 2 * 3 * sizeof *a.origin) == 0 &&
              memcmp(a.symmetry, b.symmetry, 2 * sizeof *a.symmetry) == 0,
          "same samples");
    if (norm == 2)
      CHECK(a.input_aug != NULL && b.input_aug != NULL &&
                b.target_aug != NULL &&
                memcmp(a.input_aug, b.input_aug, 2 * 2 * 4 * sizeof(float)) ==
                    0 &&
                memcmp(a.target_aug, b.target_aug, 2 * 2 * 5 * sizeof(float)) ==
                    0,
            "the same augmentation factors on both paths");
    for (int d = 0; d < 2; d++) {
      const slabfeed_tensor *ta = d ? &a.target : &a.input,
                            *tb = d ? &b.target : &b.input;
      const size_t bytes = (size_t)ta->strides[0] * 2 * es;
      void *host = malloc(bytes);
      CHECK(slabfeed_copy_to_host(gpu, tb, host) == SLABFEED_OK, "copy: %s",
            slabfeed_last_error(gpu));
      bad += memcmp(host, ta->data, bytes) != 0;
      free(host);
    }
    if (step == 5) { /* resume mid-way on both */
      const uint64_t to = slabfeed_steps_per_epoch(cpu) > 1; /* in range */
      CHECK(slabfeed_seek(cpu, 3, to) == SLABFEED_OK &&
                slabfeed_seek(gpu, 3, to) == SLABFEED_OK,
            "seek");
    }
  }
  CHECK(bad == 0,
        "dtype %d layout %d halo %d mode %d norm %d: %lld batches differ "
        "between GPU and CPU",
        dt, lay, halo, mode, norm, (long long)bad);
  if (rank == 0 && norm && bad == 0)
    printf("gpu.loader: normalised%s batches (dtype %d, layout %d, mode %d) "
           "equal the host path's\n",
           norm == 2 ? " and augmented" : "", dt, lay, mode);
  /* Every rank its own node and one group: pieces of the other ranks'
   * slabs crossed "nodes" on both paths. */
  slabfeed_stats sc = SLABFEED_STATS_INIT, sg = SLABFEED_STATS_INIT;
  slabfeed_stats_get(cpu, &sc);
  slabfeed_stats_get(gpu, &sg);
  uint64_t moved[2] = {sc.bytes_remote, sg.bytes_remote};
  MPI_Allreduce(MPI_IN_PLACE, moved, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (expect_remote)
    CHECK(moved[0] > 0 && moved[1] > 0,
          "remote bytes host %llu, device %llu: expected both > 0",
          (unsigned long long)moved[0], (unsigned long long)moved[1]);
  slabfeed_close(cpu);
  slabfeed_close(gpu);
}

static void CUDART_CB nap(void *arg)
{
  (void)arg;
  const struct timespec t = {0, 3000000};
  nanosleep(&t, NULL);
}

/* A consumer whose stream lags: after each slabfeed_next the stream is held by
 * a 3 ms host function before it copies the batch out (asynchronously, on the
 * same stream), and the host never waits between steps. With K = 2 the loader
 * runs ahead, so it must hold each slot until the stream has passed the next
 * slabfeed_next, or a batch would be overwritten before its copy ran. Every
 * copy must equal the host path's batch. */
static void slow_consumer(const char *path, cudaStream_t s)
{
  enum { N = 12 };
  slabfeed_config c;
  base_config(&c, path, 16);
  c.seed = 21;
  c.prefetch = 2;
  slabfeed_loader *cpu, *gpu;
  if (!open_pair(&c, &cpu, &gpu))
    return;
  size_t bytes[2] = {0, 0};
  char *want[N][2], *got[N][2];
  memset(got, 0, sizeof got);
  for (int n = 0; n < N; n++) {
    slabfeed_batch a = SLABFEED_BATCH_INIT, b = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(cpu, &a, NULL) == SLABFEED_OK, "cpu next: %s",
          slabfeed_last_error(cpu));
    CHECK(slabfeed_next(gpu, &b, s) == SLABFEED_OK, "gpu next: %s",
          slabfeed_last_error(gpu));
    CUDA_CHECK(cudaLaunchHostFunc(s, nap, NULL));
    for (int d = 0; d < 2; d++) {
      const slabfeed_tensor *ta = d ? &a.target : &a.input,
                            *tb = d ? &b.target : &b.input;
      bytes[d] = (size_t)ta->strides[0] * (size_t)c.batch * sizeof(float);
      want[n][d] = malloc(bytes[d]);
      memcpy(want[n][d], ta->data, bytes[d]);
      CUDA_CHECK(cudaMallocHost((void **)&got[n][d], bytes[d]));
      if (got[n][d] != NULL)
        CUDA_CHECK(cudaMemcpyAsync(got[n][d], tb->data, bytes[d],
                                   cudaMemcpyDeviceToHost, s));
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  int bad = 0;
  for (int n = 0; n < N; n++)
    for (int d = 0; d < 2; d++) {
      bad += got[n][d] == NULL || memcmp(got[n][d], want[n][d], bytes[d]) != 0;
      free(want[n][d]);
      cudaFreeHost(got[n][d]);
    }
  CHECK(bad == 0, "slow consumer: %d of %d batches overwritten or wrong", bad,
        2 * N);
  if (rank == 0 && bad == 0)
    printf("gpu.loader: slow consumer (stream held 3 ms per step, K = 2): %d "
           "batches equal the host path\n",
           N);
  slabfeed_close(cpu);
  slabfeed_close(gpu);
}

/* Two consumer streams, alternating: batch n goes to stream A when n is
 * even (held 3 ms, then copied out) and to stream B when n is odd (copied
 * at once). The slot of batch n must stay untouched until the stream that
 * received it, not the one passed to the next call, has passed: recording
 * the release on the next call's stream (the fast B) lets the loader
 * overwrite A's batch before A copies it. */
static void two_streams(const char *path, cudaStream_t a_stream)
{
  enum { N = 12 };
  slabfeed_config c;
  base_config(&c, path, 16);
  c.seed = 33;
  c.prefetch = 2;
  slabfeed_loader *cpu, *gpu;
  if (!open_pair(&c, &cpu, &gpu))
    return;
  cudaStream_t b_stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&b_stream, cudaStreamNonBlocking));
  size_t bytes = 0;
  char *want[N], *got[N];
  memset(got, 0, sizeof got);
  for (int n = 0; n < N; n++) {
    cudaStream_t s = n % 2 == 0 ? a_stream : b_stream;
    slabfeed_batch a = SLABFEED_BATCH_INIT, b = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(cpu, &a, NULL) == SLABFEED_OK, "cpu next: %s",
          slabfeed_last_error(cpu));
    CHECK(slabfeed_next(gpu, &b, s) == SLABFEED_OK, "gpu next: %s",
          slabfeed_last_error(gpu));
    if (s == a_stream)
      CUDA_CHECK(cudaLaunchHostFunc(s, nap, NULL));
    bytes = (size_t)a.input.strides[0] * (size_t)c.batch * sizeof(float);
    want[n] = malloc(bytes);
    memcpy(want[n], a.input.data, bytes);
    CUDA_CHECK(cudaMallocHost((void **)&got[n], bytes));
    if (got[n] != NULL)
      CUDA_CHECK(cudaMemcpyAsync(got[n], b.input.data, bytes,
                                 cudaMemcpyDeviceToHost, s));
  }
  CUDA_CHECK(cudaStreamSynchronize(a_stream));
  CUDA_CHECK(cudaStreamSynchronize(b_stream));
  int bad = 0;
  for (int n = 0; n < N; n++) {
    bad += got[n] == NULL || memcmp(got[n], want[n], bytes) != 0;
    free(want[n]);
    cudaFreeHost(got[n]);
  }
  CHECK(bad == 0, "two streams: %d of %d batches overwritten or wrong", bad, N);
  if (rank == 0 && bad == 0)
    printf("gpu.loader: two consumer streams alternating (A held 3 ms per "
           "batch, K = 2): %d batches equal the host path\n",
           N);
  CUDA_CHECK(cudaStreamDestroy(b_stream));
  slabfeed_close(cpu);
  slabfeed_close(gpu);
}

/* slabfeed_open must leave the calling thread's current device as it was,
 * also when the loader's device is another one. */
static void device_restored(const char *path)
{
  const int n = gpu_count();
  const int other = n > 1 ? (rank + 1) % n : 0;
  CUDA_CHECK(cudaSetDevice(other));
  slabfeed_config c;
  base_config(&c, path, 8);
  c.device = rank % n;
  slabfeed_loader *l = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open: %s", err);
  int now = -1;
  CUDA_CHECK(cudaGetDevice(&now));
  CHECK_EQ(now, other, "open changed the current device");
  slabfeed_close(l);
  CUDA_CHECK(cudaSetDevice(rank % n));
  if (rank == 0)
    printf("gpu.loader: open on device %d left the current device %d\n",
           c.device, other);
}

/* 200 steps after open: the CUDA layer's counters must not move. */
static void quiet_steps(const char *path, cudaStream_t s)
{
  slabfeed_config c;
  base_config(&c, path, 16);
  c.device = rank % gpu_count();
  c.dtype = SLABFEED_DTYPE_BF16;
  c.residency = residency;
  char err[1024];
  slabfeed_loader *l = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open: %s", err);
  if (l == NULL)
    return;
  check_residency(l);
  sf__cudart_counts before, after;
  sf__cudart_counts_get(&before);
  for (int i = 0; i < 200; i++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(l, &b, s) == SLABFEED_OK, "next %d: %s", i,
          slabfeed_last_error(l));
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  sf__cudart_counts_get(&after);
  CHECK(after.allocs == before.allocs && after.frees == before.frees,
        "allocations after open: %llu, frees %llu",
        (unsigned long long)(after.allocs - before.allocs),
        (unsigned long long)(after.frees - before.frees));
  CHECK_EQ(after.registers, before.registers, "host registrations after open");
  CHECK_EQ(after.default_stream, before.default_stream,
           "legacy default stream used after open");
  CHECK_EQ(after.stream_syncs, before.stream_syncs,
           "stream synchronisation in steady state");
  /* One launch per sample (2) and dataset (2), and with the slabs in
   * device memory one gather per sample whose pieces all are there. The
   * loader thread starts at open: up to K = 2 batches may be done before
   * the first snapshot, and up to K - 1 beyond the last batch handed out
   * at the second. */
  const uint64_t launched = after.launches - before.launches;
  /* With SLABFEED_TEST_DIRECT=1 every crop is transformed piece by piece
   * in place (one launch per piece and dataset). */
  const char *direct = getenv("SLABFEED_TEST_DIRECT");
  const uint64_t per_step = residency != SLABFEED_RESIDENCY_DEVICE ? 4
                            : direct != NULL && direct[0] == '1'   ? 64
                                                                   : 6;
  CHECK(launched >= (200 - 2) * 4 && launched <= (200 + 1) * per_step,
        "%llu launches for 200 steps", (unsigned long long)launched);
  if (rank == 0)
    printf("gpu.loader: 200 steps: +%llu copies, +%llu launches, +%llu event "
           "waits, "
           "0 allocations/registrations/device syncs/default-stream calls\n",
           (unsigned long long)(after.copies - before.copies),
           (unsigned long long)(after.launches - before.launches),
           (unsigned long long)(after.event_waits - before.event_waits));
  slabfeed_close(l);
}

/* device "local": the rank's node-local rank modulo the visible GPUs. */
static void device_local(const char *path)
{
  slabfeed_config c;
  base_config(&c, path, 8);
  c.device = SLABFEED_DEVICE_LOCAL;
  MPI_Comm node;
  int local = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                      &node);
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  slabfeed_loader *l = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open with device local: %s", err);
  slabfeed_batch b = SLABFEED_BATCH_INIT;
  CHECK(l != NULL && slabfeed_next(l, &b, NULL) == SLABFEED_OK &&
            b.device == local % gpu_count(),
        "device local: batch on device %d, want %d", b.device,
        local % gpu_count());
  slabfeed_close(l);
}

/* A line of /proc/self/status in kB (-1 when absent). */
static long status_kb(const char *key)
{
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  const size_t n = strlen(key);
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, key, n) == 0 && line[n] == ':')
      v = atol(line + n + 1);
  if (f != NULL)
    fclose(f);
  return v;
}

/* The growth of this process's peak resident memory (VmHWM, shared
 * pages included) while c opens, in bytes; -1 where the peak cannot be
 * reset (clear_refs). */
static double open_peak(slabfeed_config *c, slabfeed_loader **l)
{
  char err[512];
  FILE *f = fopen("/proc/self/clear_refs", "w");
  const int reset = f != NULL && fputs("5", f) >= 0;
  if (f != NULL && fclose(f) != 0)
    return -1;
  const long before = status_kb("VmRSS");
  CHECK(slabfeed_open(MPI_COMM_WORLD, c, l, err, sizeof err) == SLABFEED_OK,
        "open for the peak: %s", err);
  const long peak = status_kb("VmHWM");
  return reset && before >= 0 && peak >= 0 ? (double)(peak - before) * 1024
                                           : -1;
}

/* Residency device on one node fills the GPU from the file through
 * pinned staging: the open's peak host memory grows by the staging, not
 * by the slab (a 604 MB box), while residency host grows by the slab
 * (which shows that the measure sees shared pages). Then the crops of
 * both are compared bit for bit. */
static void check_open_peak(cudaStream_t s, int expect_thread)
{
  const char *path = "gpu_peak.h5";
  if (make_file(path, 256, 256, 256, SLABFEED_LAYOUT_CF, 0, 0, 1) != 0)
    return;
  slabfeed_config c;
  base_config(&c, path, 32);
  c.device = rank % gpu_count();
  slabfeed_loader *l = NULL;
  c.residency = SLABFEED_RESIDENCY_HOST;
  const double host = open_peak(&c, &l);
  slabfeed_stats st = SLABFEED_STATS_INIT;
  slabfeed_stats_get(l, &st);
  slabfeed_close(l);
  l = NULL;
  c.residency = SLABFEED_RESIDENCY_DEVICE;
  const double dev = open_peak(&c, &l);
  slabfeed_close(l);
  const double slab = (double)st.slab_bytes;
  if (host < 0 || dev < 0) {
    printf("gpu.loader: the open's peak not measured (no clear_refs)\n");
    return;
  }
  printf("gpu.loader: open's peak host memory: %.0f MB with residency host, "
         "%.0f MB with device (slab %.0f MB)\n",
         host / 1e6, dev / 1e6, slab / 1e6);
  CHECK(host >= 0.9 * slab,
        "residency host: the open's peak grew %.0f MB, the slab is %.0f MB",
        host / 1e6, slab / 1e6);
  CHECK(dev <= 0.4 * slab,
        "residency device: the open's peak grew %.0f MB (staging is 134 MB), "
        "the slab is %.0f MB",
        dev / 1e6, slab / 1e6);
  compare(path, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW, 0, s, expect_thread, 0,
          RANDOM, 1);
}

/* slabfeed_warm_device where it must do nothing: device -1, no local
 * rank, a batch script's SLURM_LOCALID (no step), local ranks that are not
 * numbers. Before MPI_Init and before any thread (the environment is
 * changed and restored here, and a thread in the CUDA runtime reads it);
 * the answers into acted[4]. Returns whether the launch names a local
 * rank (or every rank is its own node: device 0). */
static int warm_refusals(int acted[4])
{
  static const char *const names[] = {
      "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
      "SLURM_STEP_ID", SLABFEED_ENV_RANK_PER_NODE};
  enum { N = sizeof names / sizeof names[0] };
  char *saved[N];
  for (int i = 0; i < N; i++) {
    const char *v = getenv(names[i]);
    saved[i] = v != NULL ? strdup(v) : NULL;
  }
#define SF_NUM(i) (saved[i] != NULL && saved[i][0] >= '0' && saved[i][0] <= '9')
  const int launcher = SF_NUM(0) || SF_NUM(1) || (SF_NUM(2) && saved[3]) ||
                       (saved[4] != NULL && saved[4][0] == '1');
#undef SF_NUM
  acted[0] = slabfeed_warm_device(-1);
  for (int i = 0; i < N; i++)
    unsetenv(names[i]);
  acted[1] = slabfeed_warm_device(SLABFEED_DEVICE_LOCAL);
  setenv("SLURM_LOCALID", "3", 1);
  acted[2] = slabfeed_warm_device(SLABFEED_DEVICE_LOCAL);
  setenv("SLURM_STEP_ID", "0", 1);
  setenv("SLURM_LOCALID", "1x", 1);
  setenv("MPI_LOCALRANKID", "-1", 1);
  acted[3] = slabfeed_warm_device(SLABFEED_DEVICE_LOCAL);
  for (int i = 0; i < N; i++) {
    if (saved[i] != NULL)
      setenv(names[i], saved[i], 1);
    else
      unsetenv(names[i]);
    free(saved[i]);
  }
  return launcher;
}

/* What warm_refusals found, and `warmed`: slabfeed_warm_device(local)
 * before MPI_Init, with the launcher's local rank set, started a thread
 * (whose context every loader below then uses). Runs without a GPU too. */
static void check_warm_device(const int acted[4], int launcher, int warmed)
{
  CHECK(acted[0] == 0, "slabfeed_warm_device(-1) acted");
  CHECK(acted[1] == 0, "slabfeed_warm_device(local) acted without a local "
                       "rank");
  CHECK(acted[2] == 0, "slabfeed_warm_device(local) acted on a batch "
                       "script's SLURM_LOCALID (no step)");
  CHECK(acted[3] == 0, "slabfeed_warm_device(local) acted on local ranks "
                       "'1x' and '-1'");
  if (launcher)
    CHECK(warmed == 1,
          "slabfeed_warm_device(local) before MPI_Init gave %d with the "
          "launcher's local rank set",
          warmed);
}

int main(int argc, char **argv)
{
  const int want = argc > 1 && strcmp(argv[1], "single") == 0
                       ? MPI_THREAD_SINGLE
                       : MPI_THREAD_MULTIPLE;
  int acted[4];
  const int launcher = warm_refusals(acted);
  /* The context made beside MPI_Init, as a program would ask for it. */
  const int warmed = slabfeed_warm_device(SLABFEED_DEVICE_LOCAL);
  int provided;
  MPI_Init_thread(&argc, &argv, want, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 2 && strcmp(argv[2], "device") == 0)
    residency = SLABFEED_RESIDENCY_DEVICE;
  check_warm_device(acted, launcher, warmed);
  if (gpu_count() == 0) {
    int failed = check_failures; /* agreed: check_finish is collective */
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    return failed > 0 ? check_finish("gpu.loader")
                      : check_skip("gpu.loader", "no CUDA device");
  }
  const char *env = getenv(SLABFEED_ENV_RANK_PER_NODE);
  const int rpn = env != NULL && env[0] == '1' && size > 1;
  /* The loader thread never calls MPI: it runs at every thread level. */
  const int expect_thread = 1;
  const char *g = getenv(SLABFEED_ENV_GROUP_NODES);
  const int expect_remote = rpn && g != NULL && strcmp(g, "1") != 0;
  (void)provided;
  char path[64];
  snprintf(path, sizeof path, "gpu_np%d_%d.h5", size, rpn);
  make_file(path, 48, 40, 36, SLABFEED_LAYOUT_CF, 0, 0, 1);
  char hr[64];
  snprintf(hr, sizeof hr, "gpu_np%d_%d_hr.h5", size, rpn);
  make_file(hr, 96, 80, 72, SLABFEED_LAYOUT_CF, 0, 0, 1);
  snprintf(sr_target, sizeof sr_target, "Hydro@%s", hr);
  char lo[64];
  snprintf(lo, sizeof lo, "gpu_np%d_%d_lo.h5", size, rpn);
  make_file(lo, 24, 20, 18, SLABFEED_LAYOUT_CF, 0, 0, 1);
  snprintf(coarse_target, sizeof coarse_target, "Hydro@%s", lo);
  cudaStream_t s;
  CUDA_CHECK(cudaSetDevice(rank % gpu_count()));
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (residency == SLABFEED_RESIDENCY_DEVICE && size == 1 && !rpn)
    check_open_peak(s, expect_thread);
  for (int norm = 0; norm < 3; norm++)
    for (int dt = 0; dt < 3; dt++)
      for (int lay = 0; lay < 2; lay++)
        compare(path, (slabfeed_dtype)dt, (slabfeed_out_layout)lay,
                dt == 1 ? 3 : 0, s, expect_thread, expect_remote, RANDOM, norm);
  compare(path, SLABFEED_DTYPE_BF16, SLABFEED_OUT_NDHWC, 0, s, expect_thread,
          expect_remote, HOLDOUT, 0);
  compare(path, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW, 0, s, expect_thread,
          expect_remote, PADS, 2);
  compare(path, SLABFEED_DTYPE_BF16, SLABFEED_OUT_NDHWC, 0, s, expect_thread,
          expect_remote, PADS, 0);
  compare(path, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW, 0, s, expect_thread,
          expect_remote, SR, 2);
  compare(path, SLABFEED_DTYPE_F16, SLABFEED_OUT_NDHWC, 0, s, expect_thread,
          expect_remote, SR, 0);
  compare(path, SLABFEED_DTYPE_BF16, SLABFEED_OUT_NCDHW, 0, s, expect_thread,
          expect_remote, COARSE, 2);
  compare(path, SLABFEED_DTYPE_F32, SLABFEED_OUT_NDHWC, 0, s, expect_thread,
          expect_remote, COARSE, 1);
  compare(path, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW, 0, s, expect_thread,
          expect_remote, COARSE_PASS, 1);
  compare(path, SLABFEED_DTYPE_F16, SLABFEED_OUT_NCDHW, 0, s, expect_thread,
          expect_remote, PASS, 0);
  compare(path, SLABFEED_DTYPE_F32, SLABFEED_OUT_NDHWC, 0, s, expect_thread,
          expect_remote, PASS, 1);
  /* Crops as large as the box on every axis (20^3), and on y and x only
   * (26 x 20 x 20): the GPU path stages a crop whose pieces fill one
   * source box as that box, then rearranges it on the device. */
  const int64_t edge[2][3] = {{20, 20, 20}, {26, 20, 20}};
  for (int w = 0; w < 2; w++) {
    char wpath[64];
    snprintf(wpath, sizeof wpath, "gpu_whole%d_np%d_%d.h5", w, size, rpn);
    make_file(wpath, edge[w][0], edge[w][1], edge[w][2], SLABFEED_LAYOUT_CF, 0,
              0, 1);
    compare(wpath, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW, 0, s, expect_thread,
            expect_remote, RANDOM, 0);
    compare(wpath, SLABFEED_DTYPE_BF16, SLABFEED_OUT_NDHWC, 0, s, expect_thread,
            expect_remote, RANDOM, 1);
  }
  /* Two volumes of other plane sizes (20 x 20 and 24 x 21), each stored
   * at its own: the GPU's pitched copies out of either (the host path is
   * checked against the files by mpi.suite). */
  char mixed[64], spec[160];
  snprintf(mixed, sizeof mixed, "gpu_mixed_np%d_%d.h5", size, rpn);
  make_file(mixed, 22, 24, 21, SLABFEED_LAYOUT_CF, 0, 0, 1);
  snprintf(spec, sizeof spec, "gpu_whole0_np%d_%d.h5\n%s", size, rpn, mixed);
  compare(spec, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW, 0, s, expect_thread,
          expect_remote, RANDOM, 0);
  slow_consumer(path, s);
  two_streams(path, s);
  device_restored(path);
  device_local(path);
  quiet_steps(path, s);
  cudaStreamDestroy(s);
  return check_finish("gpu.loader");
}
