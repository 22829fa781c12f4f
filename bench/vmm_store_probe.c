/* A probe of a node store pinned once (docs/DECISIONS.md, "A node store
 * pinned once: measured, not built"): can the ranks of a node share one host
 * allocation of the CUDA driver, pinned and mapped for the device once, instead
 * of an MPI shared window that every rank registers with CUDA for itself?
 *
 * The node's first rank creates N MiB per rank of pinned host memory on
 * its GPU's NUMA node (cuMemCreate, CU_MEM_LOCATION_TYPE_HOST_NUMA),
 * exports it as a POSIX file descriptor and passes the descriptor to the
 * node's other ranks over a Unix socket (SCM_RIGHTS); every rank imports
 * it, maps it and makes it readable and writable by the CPU and its GPU.
 * Then, each timed against the usual way in the same run:
 *   - the allocation and each rank's mapping, against cudaHostRegister of
 *     an MPI shared window of the same size by every rank;
 *   - each rank's part written by the CPU (the store's fill), then checked
 *     by the next rank (the memory is shared);
 *   - with --file F, each rank's part read from F with pread, against
 *     pread into private memory;
 *   - the next rank's part copied to the GPU, against pinned H2D;
 *   - an MPI window over all ranks on the mapping (MPI_Win_create, as
 *     the loader's remote gets need) and an MPI_Get checked.
 * Every step's failure is reported by the rank that met it and agreed on
 * by all ranks before the next step (no hang). Run on one node:
 *   mpirun -n 4 bench/vmm_store_probe [--mib 1024] [--file /dev/shm/box.h5]
 *     [--per-rank]
 * --per-rank: each rank creates its own part (in parallel) and every rank
 * maps all the node's parts next to each other, one range. */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { MAX_NODE_RANKS = 1024 }; /* --per-rank: parts a node maps */
static int rank, size, nrank, nsize;
static MPI_Comm node = MPI_COMM_NULL;
static char why[512]; /* this rank's first failure */
static int stopped;   /* a step failed on some rank: exit status 1 */
static struct {
  __typeof__(&cuGetErrorName) GetErrorName;
  __typeof__(&cuMemGetAllocationGranularity) MemGetAllocationGranularity;
  __typeof__(&cuMemCreate) MemCreate;
  __typeof__(&cuMemExportToShareableHandle) MemExportToShareableHandle;
  __typeof__(&cuMemImportFromShareableHandle) MemImportFromShareableHandle;
  __typeof__(&cuMemAddressReserve) MemAddressReserve;
  __typeof__(&cuMemMap) MemMap;
  __typeof__(&cuMemSetAccess) MemSetAccess;
  __typeof__(&cuMemUnmap) MemUnmap;
  __typeof__(&cuMemAddressFree) MemAddressFree;
  __typeof__(&cuMemRelease) MemRelease;
} cu; /* the driver's entry points, through the runtime */

static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Records the first failure of this rank; returns 0. */
static int fail(const char *fmt, const char *what, long code)
{
  if (why[0] == '\0')
    snprintf(why, sizeof why, fmt, what, code);
  return 0;
}

/* The driver's functions through the runtime (cudaGetDriverEntryPoint-
 * ByVersion): no link to libcuda, so the probe starts, and fails clearly,
 * where no driver is installed. */
static int load_driver(void)
{
  struct {
    const char *name;
    void **fn;
  } t[] = {
      {"cuGetErrorName", (void **)&cu.GetErrorName},
      {"cuMemGetAllocationGranularity",
       (void **)&cu.MemGetAllocationGranularity},
      {"cuMemCreate", (void **)&cu.MemCreate},
      {"cuMemExportToShareableHandle", (void **)&cu.MemExportToShareableHandle},
      {"cuMemImportFromShareableHandle",
       (void **)&cu.MemImportFromShareableHandle},
      {"cuMemAddressReserve", (void **)&cu.MemAddressReserve},
      {"cuMemMap", (void **)&cu.MemMap},
      {"cuMemSetAccess", (void **)&cu.MemSetAccess},
      {"cuMemUnmap", (void **)&cu.MemUnmap},
      {"cuMemAddressFree", (void **)&cu.MemAddressFree},
      {"cuMemRelease", (void **)&cu.MemRelease},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    enum cudaDriverEntryPointQueryResult st =
        cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion(
            t[i].name, t[i].fn, 12020, cudaEnableDefault, &st) != cudaSuccess ||
        st != cudaDriverEntryPointSuccess || *t[i].fn == NULL)
      return fail("%s: not in this driver (%ld)", t[i].name, (long)st);
  }
  return 1;
}

static int cu_ok(CUresult r, const char *what)
{
  if (r == CUDA_SUCCESS)
    return 1;
  const char *name = NULL;
  cu.GetErrorName(r, &name);
  char text[160];
  snprintf(text, sizeof text, "%s: %s", what, name != NULL ? name : "?");
  return fail("%s (CUresult %ld)", text, (long)r);
}

static int rt_ok(cudaError_t r, const char *what)
{
  if (r == cudaSuccess)
    return 1;
  char text[160];
  snprintf(text, sizeof text, "%s: %s", what, cudaGetErrorName(r));
  return fail("%s (cudaError %ld)", text, (long)r);
}

static int mpi_ok(int rc, const char *what)
{
  if (rc == MPI_SUCCESS)
    return 1;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  char both[MPI_MAX_ERROR_STRING + 160];
  snprintf(both, sizeof both, "%s: %s", what, text);
  return fail("%s (MPI rc %ld)", both, (long)rc);
}

/* Every rank's ok, agreed; on a failure every rank prints the reasons of
 * the ranks that failed and the probe ends. */
static int agreed(int ok, const char *stage)
{
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all)
    return 1;
  stopped = 1;
  char mine[512], *every = rank == 0 ? malloc((size_t)size * 512) : NULL;
  snprintf(mine, sizeof mine, "%s", ok ? "" : why);
  MPI_Gather(mine, 512, MPI_CHAR, every, 512, MPI_CHAR, 0, MPI_COMM_WORLD);
  for (int r = 0; every != NULL && r < size; r++)
    if (every[(size_t)r * 512] != '\0')
      printf("vmm_store_probe: %s failed on rank %d: %s\n", stage, r,
             every + (size_t)r * 512);
  free(every);
  return 0;
}

/* The largest of every rank's seconds. */
static double slowest(double t)
{
  double m = 0;
  MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

/* The NUMA node of the current device's PCI function (0 where unknown). */
static int device_numa(int dev)
{
  char bus[32] = "", path[128];
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, dev) != cudaSuccess)
    return 0;
  for (char *c = bus; *c != '\0'; c++)
    if (*c >= 'A' && *c <= 'F')
      *c = (char)(*c - 'A' + 'a');
  snprintf(path, sizeof path, "/sys/bus/pci/devices/%s/numa_node", bus);
  FILE *f = fopen(path, "r");
  int n = 0;
  if (f != NULL) {
    if (fscanf(f, "%d", &n) != 1 || n < 0)
      n = 0;
    fclose(f);
  }
  return n;
}

/* A control buffer for one descriptor, aligned for struct cmsghdr. */
typedef union fd_ctl {
  char buf[CMSG_SPACE(sizeof(int))];
  struct cmsghdr align;
} fd_ctl;

/* A message of one byte carrying control buffer c. */
static void fd_msg(struct msghdr *m, struct iovec *io, char *byte, fd_ctl *c)
{
  memset(m, 0, sizeof *m);
  memset(c, 0, sizeof *c);
  io->iov_base = byte;
  io->iov_len = 1;
  m->msg_iov = io;
  m->msg_iovlen = 1;
  m->msg_control = c->buf;
  m->msg_controllen = sizeof c->buf;
}

/* Node rank `root` sends fd to each other rank of the node over an
 * abstract Unix socket whose name it broadcasts; the others return the
 * descriptor they received (or -1). A connection is queued without
 * accept (the backlog holds the node's ranks), so the ranks agree on
 * how many connected before the root accepts that many: a rank that
 * could not connect makes no one wait. Collective over the node. */
static int share_fd(int fd, int root)
{
  char name[100] = "";
  int lfd = -1, ok = 1;
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  if (nrank == root) {
    snprintf(name, sizeof name, "slabfeed-vmm-probe-%ld-%ld", (long)getpid(),
             (long)time(NULL));
    memcpy(a.sun_path + 1, name, strlen(name));
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (lfd < 0 ||
        bind(lfd, (struct sockaddr *)&a,
             (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                         strlen(name))) != 0 ||
        listen(lfd, nsize) != 0)
      ok = fail("%s: errno %ld", "the socket", (long)errno);
  }
  MPI_Bcast(name, sizeof name, MPI_CHAR, root, node);
  MPI_Bcast(&ok, 1, MPI_INT, root, node);
  if (!ok)
    return -1;
  int got = -1, s = -1, connected = 0, all = 0;
  if (nrank != root) {
    memcpy(a.sun_path + 1, name, strlen(name));
    s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s >= 0 && connect(s, (struct sockaddr *)&a,
                          (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
                                      1 + strlen(name))) == 0)
      connected = 1;
    else
      fail("%s: errno %ld", "connect", (long)errno);
  }
  MPI_Allreduce(&connected, &all, 1, MPI_INT, MPI_SUM, node);
  if (nrank == root) {
    for (int i = 0; i < all; i++) {
      const int c = accept(lfd, NULL, NULL);
      char byte = 1;
      struct iovec io;
      struct msghdr m;
      fd_ctl ctl;
      fd_msg(&m, &io, &byte, &ctl);
      struct cmsghdr *h = CMSG_FIRSTHDR(&m);
      h->cmsg_level = SOL_SOCKET;
      h->cmsg_type = SCM_RIGHTS;
      h->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(h), &fd, sizeof fd);
      if (c < 0 || sendmsg(c, &m, 0) != 1)
        fail("%s: errno %ld", "accept or sendmsg", (long)errno);
      if (c >= 0)
        close(c); /* a failed send: the peer's recvmsg ends, no wait */
    }
    close(lfd);
  } else if (connected) {
    char byte = 0;
    struct iovec io;
    struct msghdr m;
    fd_ctl ctl;
    fd_msg(&m, &io, &byte, &ctl);
    const ssize_t n = recvmsg(s, &m, 0);
    const struct cmsghdr *c = n == 1 ? CMSG_FIRSTHDR(&m) : NULL;
    if (c != NULL && !(m.msg_flags & MSG_CTRUNC) &&
        c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len == CMSG_LEN(sizeof(int)))
      memcpy(&got, CMSG_DATA(c), sizeof got);
    if (got < 0)
      fail("%s (%ld bytes)", "recvmsg: no descriptor", (long)n);
  }
  if (s >= 0)
    close(s);
  return got;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                      &node);
  MPI_Comm_rank(node, &nrank);
  MPI_Comm_size(node, &nsize);
  size_t mib = 1024;
  const char *file = NULL;
  int per_rank = 0; /* --per-rank: each rank creates its own part */
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc)
      mib = (size_t)strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc)
      file = argv[++i];
    else if (strcmp(argv[i], "--per-rank") == 0)
      per_rank = 1;
  int nodes = 0, lead = nrank == 0;
  MPI_Allreduce(&lead, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (!agreed(nodes == 1 ||
                  fail("%s (%ld nodes)", "run on one node", (long)nodes),
              "the launch"))
    goto out;
  if (!agreed(nsize <= MAX_NODE_RANKS ||
                  fail("%s (%ld)", "too many ranks on the node", (long)nsize),
              "the launch"))
    goto out;
  if (!agreed(mib > 0 ||
                  fail("%s (%ld)", "--mib must be at least 1", (long)mib),
              "the options"))
    goto out;
  const size_t part = mib << 20;

  /* 1. The device, its NUMA node, the allocation's granularity. */
  int ndev = 0, ok = rt_ok(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
  const int dev = ndev > 0 ? nrank % ndev : 0;
  ok = ok && rt_ok(cudaSetDevice(dev), "cudaSetDevice") &&
       rt_ok(cudaFree(NULL), "cudaFree(NULL) (the context)") && load_driver();
  const int numa = ok ? device_numa(dev) : 0;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = numa;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  ok = ok && cu_ok(cu.MemGetAllocationGranularity(
                       &gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                   "cuMemGetAllocationGranularity (host NUMA, POSIX fd)");
  if (!agreed(ok, "the device"))
    goto out;
  /* One allocation on the node's first rank, or (--per-rank) one part
   * per rank, each rounded up to the granularity: a stride per rank. */
  const size_t stride = per_rank ? (part + gran - 1) / gran * gran : part;
  const size_t bytes = per_rank
                           ? stride * (size_t)nsize
                           : (part * (size_t)nsize + gran - 1) / gran * gran;
  const int nh = per_rank ? nsize : 1, own = per_rank ? nrank : 0;
  const size_t piece = per_rank ? stride : bytes;

  /* 2. The allocation(s), shared by descriptor. */
  CUmemGenericAllocationHandle h[MAX_NODE_RANKS];
  int fds[MAX_NODE_RANKS];
  for (int k = 0; k < nh; k++)
    h[k] = 0, fds[k] = -1;
  double t0 = now();
  if (own < nh && (per_rank || nrank == 0))
    ok = cu_ok(cu.MemCreate(&h[own], piece, &prop, 0), "cuMemCreate") &&
         cu_ok(cu.MemExportToShareableHandle(
                   &fds[own], h[own], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                   0),
               "cuMemExportToShareableHandle");
  const double t_create = slowest(now() - t0);
  if (!agreed(ok, "the allocation"))
    goto release;
  t0 = now();
  for (int k = 0; k < nh; k++) {
    const int got = share_fd(nrank == k ? fds[k] : -1, k);
    if (nrank != k)
      fds[k] = got;
  }
  const double t_share = slowest(now() - t0);
  ok = why[0] == '\0';
  if (!agreed(ok, "passing the descriptors"))
    goto release;
  t0 = now();
  for (int k = 0; k < nh && ok; k++)
    if (h[k] == 0)
      ok = cu_ok(cu.MemImportFromShareableHandle(
                     &h[k], (void *)(uintptr_t)fds[k],
                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                 "cuMemImportFromShareableHandle");
  CUdeviceptr va = 0;
  int mapped = 0;
  ok = ok && cu_ok(cu.MemAddressReserve(&va, bytes, gran, 0, 0),
                   "cuMemAddressReserve");
  for (int k = 0; k < nh && ok; k++) {
    ok = cu_ok(
        cu.MemMap(va + (CUdeviceptr)((size_t)k * piece), piece, 0, h[k], 0),
        "cuMemMap");
    mapped += ok;
  }
  CUmemAccessDesc acc[2];
  memset(acc, 0, sizeof acc);
  acc[0].location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  acc[0].location.id = numa;
  acc[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  acc[1].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc[1].location.id = dev;
  acc[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ok = ok && cu_ok(cu.MemSetAccess(va, bytes, acc, 2),
                   "cuMemSetAccess (CPU and device)");
  const double t_map = slowest(now() - t0);
  if (!agreed(ok, "the mapping"))
    goto unmap;
  char *store = (char *)(uintptr_t)va;
  uint32_t *mine = (uint32_t *)(void *)(store + (size_t)nrank * stride);
  const size_t words = part / sizeof(uint32_t);

  /* 3. The CPU fills its part; the next rank checks it. Beside it, the
   * same fill into private memory already faulted in (the store's pages
   * were populated by its allocation, whose time is reported above). */
  uint32_t *priv = malloc(part);
  ok = priv != NULL || fail("%s (%ld MiB)", "malloc", (long)mib);
  if (!agreed(ok, "private memory"))
    goto unmap;
  memset(priv, 0, part);
  MPI_Barrier(MPI_COMM_WORLD);
  t0 = now();
  for (size_t i = 0; i < words; i++)
    mine[i] = (uint32_t)(i * 2654435761u) ^ (uint32_t)rank;
  const double t_fill = slowest(now() - t0);
  MPI_Barrier(MPI_COMM_WORLD);
  t0 = now();
  for (size_t i = 0; i < words; i++)
    priv[i] = (uint32_t)(i * 2654435761u) ^ (uint32_t)rank;
  const double t_fill_priv = slowest(now() - t0);
  MPI_Barrier(MPI_COMM_WORLD);
  const int next = (nrank + 1) % nsize;
  const uint32_t *theirs =
      (const uint32_t *)(const void *)(store + (size_t)next * stride);
  size_t bad = 0;
  for (size_t i = 0; i < words; i++)
    bad += theirs[i] != ((uint32_t)(i * 2654435761u) ^ (uint32_t)next);
  ok = bad == 0 ||
       fail("%s: %ld words differ", "the next rank's part", (long)bad);
  if (!agreed(ok, "the shared fill"))
    goto unmap;

  /* 4. pread from a file into the part, against private memory: an
   * untimed read first, so that both timed reads find the page cache
   * alike. Every rank makes every collective, whatever its reads did. */
  double t_read = 0, t_read_priv = 0;
  if (file != NULL) {
    const int f = open(file, O_RDONLY);
    ok = f >= 0 || fail("%s: errno %ld", file, (long)errno);
    const off_t at = (off_t)((size_t)nrank * part);
    for (int pass = 0; pass < 3; pass++) {
      char *to = pass == 1 ? (char *)mine : (char *)priv;
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = now();
      for (size_t done = 0; done < part && ok;) {
        const ssize_t n = pread(f, to + done, part - done, at + (off_t)done);
        if (n < 0)
          ok = fail("%s: pread: errno %ld", file, (long)errno);
        else if (n == 0)
          ok = fail("%s: ends before this rank's part (%ld bytes short)", file,
                    (long)(part - done));
        else
          done += (size_t)n;
      }
      const double t = slowest(now() - t0);
      if (pass > 0)
        (pass == 1 ? &t_read : &t_read_priv)[0] = t;
    }
    if (f >= 0)
      close(f);
    if (!agreed(ok, "the file's read (it needs ranks x --mib MiB)"))
      goto unmap;
  }

  /* 5. The next rank's part to the GPU, against a pinned buffer: one
   * untimed copy of each, then the best of three. */
  void *dbuf = NULL, *pinned = NULL;
  cudaStream_t s = NULL;
  ok = rt_ok(cudaMalloc(&dbuf, part), "cudaMalloc") &&
       rt_ok(cudaMallocHost(&pinned, part), "cudaMallocHost") &&
       rt_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
             "cudaStreamCreate");
  double t_h2d = 1e30, t_h2d_pinned = 1e30;
  if (agreed(ok, "the GPU's buffers")) {
    for (int i = 0; i < 8; i++) {
      const int vmm = i % 2 == 0;
      const void *from = vmm ? (const void *)theirs : pinned;
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = now();
      ok = ok &&
           rt_ok(cudaMemcpyAsync(dbuf, from, part, cudaMemcpyDefault, s),
                 "cudaMemcpyAsync") &&
           rt_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      const double t = now() - t0;
      double *best = vmm ? &t_h2d : &t_h2d_pinned;
      if (i >= 2 && t < *best)
        *best = t;
    }
    /* The copy's bytes are the next rank's. */
    uint32_t head[4] = {0, 0, 0, 0};
    ok = ok &&
         rt_ok(cudaMemcpyAsync(dbuf, theirs, sizeof head, cudaMemcpyDefault, s),
               "cudaMemcpyAsync (check)") &&
         rt_ok(cudaMemcpyAsync(head, dbuf, sizeof head, cudaMemcpyDefault, s),
               "cudaMemcpyAsync (back)") &&
         rt_ok(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    for (int i = 0; ok && i < 4; i++)
      ok = head[i] == theirs[i] ||
           fail("%s: word %ld differs", "the copy to the GPU", (long)i);
  }
  if (agreed(ok, "the copy to the GPU")) {
    /* 6. One-sided MPI over the mapping (window errors returned, not
     * fatal: they are what this step asks about). */
    MPI_Win win = MPI_WIN_NULL;
    ok = mpi_ok(MPI_Win_create(mine, (MPI_Aint)part, sizeof(uint32_t),
                               MPI_INFO_NULL, MPI_COMM_WORLD, &win),
                "MPI_Win_create over the mapping");
    if (win != MPI_WIN_NULL)
      MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    if (agreed(ok, "the MPI window")) {
      uint32_t probe[4] = {0, 0, 0, 0};
      const int to = (rank + 1) % size;
      ok = mpi_ok(MPI_Win_lock(MPI_LOCK_SHARED, to, 0, win), "MPI_Win_lock") &&
           mpi_ok(MPI_Get(probe, 4, MPI_UINT32_T, to, 8, 4, MPI_UINT32_T, win),
                  "MPI_Get") &&
           mpi_ok(MPI_Win_unlock(to, win), "MPI_Win_unlock");
      /* Step 4 may have overwritten the part with the file's bytes. */
      for (int i = 0; ok && file == NULL && i < 4; i++)
        ok = probe[i] ==
                 ((uint32_t)((size_t)(8 + i) * 2654435761u) ^ (uint32_t)to) ||
             fail("%s: word %ld differs", "MPI_Get", (long)(8 + i));
      agreed(ok, "MPI_Get over the mapping");
    }
    if (win != MPI_WIN_NULL)
      MPI_Win_free(&win);
    /* The usual way beside it: an MPI shared window of the node's size,
     * each rank's pages touched by it (as the open), then registered by
     * every rank with CUDA. */
    MPI_Win shw = MPI_WIN_NULL;
    char *base = NULL, *first = NULL;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now();
    ok = mpi_ok(MPI_Win_allocate_shared((MPI_Aint)part, 1, MPI_INFO_NULL, node,
                                        &base, &shw),
                "MPI_Win_allocate_shared");
    if (shw != MPI_WIN_NULL)
      MPI_Win_set_errhandler(shw, MPI_ERRORS_RETURN);
    MPI_Aint seg = 0;
    int du = 0;
    ok = ok && mpi_ok(MPI_Win_shared_query(shw, 0, &seg, &du, &first),
                      "MPI_Win_shared_query");
    if (ok)
      memset(base, 1, part);
    const double t_window = slowest(now() - t0);
    double t_register = 0;
    if (agreed(ok, "the shared window")) {
      t0 = now();
      ok = rt_ok(cudaHostRegister(first, part * (size_t)nsize,
                                  cudaHostRegisterDefault),
                 "cudaHostRegister of the shared window");
      t_register = slowest(now() - t0);
      if (ok)
        cudaHostUnregister(first);
    }
    if (shw != MPI_WIN_NULL)
      MPI_Win_free(&shw);
    if (agreed(ok, "the shared window's registration") && rank == 0) {
      const double gb = (double)part / 1e9, node_gb = gb * nsize;
      printf("vmm_store_probe: %d ranks on one node, %.2f GB a rank, host "
             "NUMA node %d, granularity %zu KiB\n",
             size, gb, numa, gran >> 10);
      printf("  allocation (cuMemCreate, %s, pages populated): %.3f s = "
             "%.2f GB/s; descriptors passed %.3f s; import, map and access: "
             "%.3f s (slowest rank)\n",
             per_rank ? "each rank its part" : "first rank", t_create,
             node_gb / t_create, t_share, t_map);
      printf("  today's way: the shared window allocated and first touched "
             "%.3f s, then registered by every rank %.3f s (%.2f GB of "
             "pages pinned in all)\n",
             t_window, t_register, node_gb * nsize);
      printf("  CPU fill of each part: %.2f GB/s a rank (private memory, "
             "faulted in: %.2f)\n",
             gb / t_fill, gb / t_fill_priv);
      if (file != NULL)
        printf("  pread into each part: %.2f GB/s a rank (private memory: "
               "%.2f)\n",
               gb / t_read, gb / t_read_priv);
      printf("  H2D from the next rank's part, rank 0, all ranks copying, "
             "best of 3: %.2f GB/s (pinned buffer: %.2f)\n",
             gb / t_h2d, gb / t_h2d_pinned);
      printf("JSON {\"bench\":\"vmm_store_probe\",\"ranks\":%d,\"per_rank\":%d,"
             "\"gb_rank\":%.3f,\"create_s\":%.4f,\"share_s\":%.4f,"
             "\"map_s\":%.4f,\"window_s\":%.4f,"
             "\"register_window_s\":%.4f,\"fill_gbs\":%.3f,\"fill_priv_gbs\":"
             "%.3f,\"read_gbs\":%.3f,\"read_priv_gbs\":%.3f,"
             "\"h2d_gbs_rank0\":%.3f,\"pinned_gbs_rank0\":%.3f}\n",
             size, per_rank, gb, t_create, t_share, t_map, t_window, t_register,
             gb / t_fill, gb / t_fill_priv, file != NULL ? gb / t_read : 0.0,
             file != NULL ? gb / t_read_priv : 0.0, gb / t_h2d,
             gb / t_h2d_pinned);
    }
  }
  if (s != NULL)
    cudaStreamDestroy(s);
  cudaFree(dbuf);
  cudaFreeHost(pinned);
  free(priv);
unmap:
  for (int k = 0; k < mapped; k++)
    cu.MemUnmap(va + (CUdeviceptr)((size_t)k * piece), piece);
  if (va != 0)
    cu.MemAddressFree(va, bytes);
release:
  for (int k = 0; k < nh; k++) {
    if (h[k] != 0)
      cu.MemRelease(h[k]);
    if (fds[k] >= 0)
      close(fds[k]);
  }
out:
  MPI_Comm_free(&node);
  MPI_Finalize();
  return stopped;
}
