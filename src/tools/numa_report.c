/* The topology report (slabfeed_topology) and a loader's NUMA line
 * (slabfeed_loader_numa): what common/topo reads from sysfs and the
 * kernel, gathered over the ranks and put in words. The GPU's PCI bus id
 * comes through the CUDA layer (cuda/cudart); a build without CUDA has no
 * GPU to report and says so.
 *
 * Test knobs (environment, read at each call; test-only):
 *   SLABFEED_TEST_TOPO_SYS=DIR       sysfs root instead of /sys
 *   SLABFEED_TEST_TOPO_GPU_BUS=ID    the rank's GPU has PCI bus id ID (a
 *                                    planted GPU where none is visible)
 *   SLABFEED_TEST_TOPO_GPU_NUMA=N    the rank's GPU is on NUMA node N (also
 *                                    plants one where none is visible) */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* gethostname */
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/topo.h"
#include "loader/loader.h"
#ifdef SF_HAVE_CUDA
#include "cuda/cudart.h"
#endif

#define BIND_HINT                                                              \
  "bind each rank next to its GPU (srun --cpu-bind=cores "                     \
  "--gpu-bind=single:1; Open MPI mpirun --map-by numa --rank-by core "         \
  "--bind-to core; MPICH mpiexec -bind-to numa; jobs/node-curve.sh --bind "    \
  "gpu)"

/* ---- Small helpers --------------------------------------------------------
 */

/* Text appended to a bounded buffer; what does not fit is cut. */
typedef struct outbuf {
  char *buf;
  size_t len, at;
} outbuf;

__attribute__((format(printf, 2, 3))) static void put(outbuf *o,
                                                      const char *fmt, ...)
{
  if (o->buf == NULL || o->len == 0 || o->at + 1 >= o->len)
    return;
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(o->buf + o->at, o->len - o->at, fmt, ap);
  va_end(ap);
  if (n > 0)
    o->at = o->at + (size_t)n < o->len ? o->at + (size_t)n : o->len - 1;
}

static const char *sys_root(void)
{
  const char *s = getenv("SLABFEED_TEST_TOPO_SYS");
  return s != NULL && *s != '\0' ? s : "/sys";
}

static void host_name(char *buf, size_t len)
{
  if (gethostname(buf, len) != 0)
    snprintf(buf, len, "?");
  buf[len - 1] = '\0';
}

/* Bytes as "12.3 MB" (decimal units, as the apps print them). */
static void bytes_text(double b, char *buf, size_t len)
{
  if (b >= 1e9)
    snprintf(buf, len, "%.2f GB", b / 1e9);
  else if (b >= 1e6)
    snprintf(buf, len, "%.1f MB", b / 1e6);
  else
    snprintf(buf, len, "%.0f kB", b / 1e3);
}

/* ---- The GPU of a rank ----------------------------------------------------
 */

typedef struct gpu_info {
  int device;     /* ordinal, or -1 */
  int present;    /* 1: a GPU with a bus id (visible or planted) */
  int node;       /* its NUMA node, or SF__TOPO_NODE_NONE / _UNKNOWN */
  char bus[32];   /* canonical PCI bus id when it parses */
  char note[160]; /* why there is none */
} gpu_info;

static int visible_gpus(void)
{
  int n = 0;
#ifdef SF_HAVE_CUDA
  sf__cudart_device_count(&n);
#endif
  return n;
}

/* The GPU of `device` (an ordinal, -1, or SLABFEED_DEVICE_LOCAL resolved
 * with the node-local rank `local`) and its NUMA node under sysfs `sys`. */
static void gpu_of(int device, int local, const char *sys, gpu_info *g)
{
  memset(g, 0, sizeof *g);
  g->device = -1;
  g->node = SF__TOPO_NODE_UNKNOWN;
  if (device == -1) {
    snprintf(g->note, sizeof g->note, "none (device -1: host only)");
    return;
  }
  const char *pbus = getenv("SLABFEED_TEST_TOPO_GPU_BUS");
  const char *pnuma = getenv("SLABFEED_TEST_TOPO_GPU_NUMA");
  const int plant_bus = pbus != NULL && *pbus != '\0';
  const int plant_numa = pnuma != NULL && *pnuma != '\0';
  const int count = visible_gpus();
  if (device == SLABFEED_DEVICE_LOCAL)
    device = count > 0 ? local % count : plant_bus || plant_numa ? 0 : -1;
  if (device < 0) {
#ifdef SF_HAVE_CUDA
    snprintf(g->note, sizeof g->note, "none (no CUDA device visible)");
#else
    snprintf(g->note, sizeof g->note, "none (slabfeed was built without CUDA)");
#endif
    return;
  }
  g->device = device;
  char raw[64] = "";
  if (plant_bus)
    snprintf(raw, sizeof raw, "%s", pbus);
#ifdef SF_HAVE_CUDA
  else if (device < count) {
    sf__err e;
    sf__err_clear(&e);
    if (sf__cudart_pci_bus_id(device, raw, (int)sizeof raw, &e) !=
        SLABFEED_OK) {
      snprintf(g->note, sizeof g->note, "%d: PCI bus id unknown (%.80s)",
               device, e.msg);
      return;
    }
  }
#endif
  else if (!plant_numa) {
#ifdef SF_HAVE_CUDA
    snprintf(g->note, sizeof g->note,
             "%d: not visible (%d CUDA device(s) visible)", device, count);
#else
    snprintf(g->note, sizeof g->note,
             "%d: none (slabfeed was built without CUDA)", device);
#endif
    return;
  } else
    snprintf(raw, sizeof raw, "planted");
  g->present = 1;
  if (sf__topo_pci_canon(raw, g->bus, sizeof g->bus) != 0)
    snprintf(g->bus, sizeof g->bus, "%.31s", raw);
  g->node = sf__topo_pci_node(sys, raw);
  if (plant_numa) {
    char *end = NULL;
    const long v = strtol(pnuma, &end, 10);
    if (end != pnuma && *end == '\0' && v >= -1 && v < SF__TOPO_MAX_CPUS)
      g->node = v < 0 ? SF__TOPO_NODE_NONE : (int)v;
  }
}

/* "0 0000:3b:00.0 NUMA 0", or the note. */
static void gpu_text(const gpu_info *g, char *buf, size_t len)
{
  char n[16];
  if (g->present)
    snprintf(buf, len, "%d %s NUMA %s", g->device, g->bus,
             sf__topo_node_text(g->node, n, sizeof n));
  else
    snprintf(buf, len, "%s", g->note);
}

/* ---- The machine and the calling thread ------------------------------------
 */

/* The NUMA nodes of the machine in words: "NUMA 0: CPUs 0-15; NUMA 1:
 * CPUs 16-31", or why there are none. */
static void machine_text(const sf__topo *t, int rc, const char *sys, char *buf,
                         size_t len)
{
  outbuf o = {buf, len, 0};
  buf[0] = '\0';
  if (rc != 0) {
    put(&o, "NUMA nodes unreadable under %s/devices/system/node (%s)", sys,
        strerror(-rc));
    return;
  }
  if (!t->numa) {
    put(&o,
        "no NUMA nodes listed (no %s/devices/system/node): one memory "
        "domain",
        sys);
    return;
  }
  for (int i = 0; i < t->nnodes; i++) {
    sf__idset cpus;
    char list[256];
    sf__topo_node_cpus(t, t->node[i], &cpus);
    sf__idset_format(&cpus, list, sizeof list);
    if (sf__idset_count(&cpus) > 0)
      put(&o, "%sNUMA %d: CPUs %s", i ? "; " : "", t->node[i], list);
    else
      put(&o, "%sNUMA %d: no CPUs (memory only)", i ? "; " : "", t->node[i]);
  }
  if (t->truncated)
    put(&o, " (more nodes or CPUs than listed here)");
}

/* What one rank found, gathered as bytes (one binary on every rank). */
typedef struct rank_rec {
  int numa;     /* the machine lists NUMA nodes */
  int cpus_err; /* 0, or the errno of sched_getaffinity */
  int orphans;  /* allowed CPUs that no listed node holds */
  int ncpu_nodes;
  int warn; /* 0; 1: none of its CPUs on its GPU's node; 2: some not */
  gpu_info gpu;
  char host[64];
  char cpus[192];     /* allowed CPUs, a range list */
  char cpu_nodes[64]; /* their NUMA nodes, a range list */
  char machine[384];  /* machine_text */
} rank_rec;

static void fill_rec(int device, int local, rank_rec *r)
{
  memset(r, 0, sizeof *r);
  const char *sys = sys_root();
  host_name(r->host, sizeof r->host);
  sf__topo *t = malloc(sizeof *t);
  const int rc = t != NULL ? sf__topo_read(sys, t) : -ENOMEM;
  if (t != NULL)
    machine_text(t, rc, sys, r->machine, sizeof r->machine);
  else
    snprintf(r->machine, sizeof r->machine, "NUMA nodes: out of memory");
  r->numa = rc == 0 && t->numa;
  sf__idset cpus, nodes;
  r->cpus_err = -sf__topo_allowed(&cpus);
  if (r->cpus_err == 0) {
    sf__idset_format(&cpus, r->cpus, sizeof r->cpus);
    if (r->numa) {
      r->orphans = sf__topo_cpus_nodes(t, &cpus, &nodes);
      r->ncpu_nodes = sf__idset_count(&nodes);
      sf__idset_format(&nodes, r->cpu_nodes, sizeof r->cpu_nodes);
    }
  } else
    snprintf(r->cpus, sizeof r->cpus, "unknown (%s)", strerror(r->cpus_err));
  gpu_of(device, local, sys, &r->gpu);
  if (r->gpu.present && r->gpu.node >= 0 && r->numa && r->cpus_err == 0 &&
      r->ncpu_nodes > 0)
    r->warn = !sf__idset_has(&nodes, r->gpu.node) ? 1
              : r->ncpu_nodes > 1                 ? 2
                                                  : 0;
  free(t);
}

/* ---- slabfeed_topology ----------------------------------------------------
 */

static size_t width(size_t w, const char *s)
{
  const size_t n = strlen(s);
  return n > w ? n : w;
}

/* Rank 0: the table of all records into o. */
static void write_table(const rank_rec *all, int size, outbuf *o)
{
  int hosts = 0;
  for (int i = 0; i < size; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++)
      seen = strcmp(all[i].host, all[j].host) == 0;
    hosts += !seen;
  }
  put(o, "topology: %d rank%s on %d host%s\n", size, size == 1 ? "" : "s",
      hosts, hosts == 1 ? "" : "s");
  for (int i = 0; i < size; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++)
      seen = strcmp(all[i].host, all[j].host) == 0;
    if (!seen)
      put(o, "host %s: %s\n", all[i].host, all[i].machine);
  }
  size_t wh = 4, wg = 3, wc = 12;
  char g[160];
  for (int i = 0; i < size; i++) {
    wh = width(wh, all[i].host);
    gpu_text(&all[i].gpu, g, sizeof g);
    wg = width(wg, g);
    wc = width(wc, all[i].cpus);
  }
  put(o, "%-4s  %-*s  %-*s  %-*s  %s\n", "rank", (int)wh, "host", (int)wg,
      "GPU", (int)wc, "allowed CPUs", "NUMA of CPUs");
  for (int i = 0; i < size; i++) {
    const rank_rec *r = &all[i];
    gpu_text(&r->gpu, g, sizeof g);
    put(o, "%-4d  %-*s  %-*s  %-*s  %s%s\n", i, (int)wh, r->host, (int)wg, g,
        (int)wc, r->cpus,
        r->cpus_err ? "-"
        : !r->numa  ? "no NUMA"
                    : r->cpu_nodes,
        r->orphans ? " (some CPUs on no listed node)" : "");
  }
  for (int i = 0; i < size; i++) {
    const rank_rec *r = &all[i];
    if (r->warn == 0)
      continue;
    if (r->warn == 1)
      put(o,
          "WARNING: rank %d (%s): its CPUs %s are on NUMA node%s %s, its GPU "
          "%d (%s) on NUMA node %d: the GPU's copy engine reads this rank's "
          "pinned pages across the inter-socket link; " BIND_HINT "\n",
          i, r->host, r->cpus, r->ncpu_nodes > 1 ? "s" : "", r->cpu_nodes,
          r->gpu.device, r->gpu.bus, r->gpu.node);
    else
      put(o,
          "WARNING: rank %d (%s): its CPUs %s span NUMA nodes %s, its GPU %d "
          "(%s) is on NUMA node %d: the loader thread and the pages it first "
          "touches may land on another node than the GPU's; " BIND_HINT "\n",
          i, r->host, r->cpus, r->cpu_nodes, r->gpu.device, r->gpu.bus,
          r->gpu.node);
  }
}

slabfeed_status slabfeed_topology(MPI_Comm comm, int device, char *buf,
                                  size_t len, int *warnings)
{
  sf__err e;
  sf__err_clear(&e);
  int rank = 0, size = 0, warned = 0, total = 0;
  if (comm == MPI_COMM_NULL || MPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
      MPI_Comm_size(comm, &size) != MPI_SUCCESS) {
    sf__fail(&e, SLABFEED_ERR_MPI, "slabfeed_topology: invalid comm");
    sf__err_copy(&e, buf, len);
    return e.status; /* no agreement without a communicator */
  }
  if (buf != NULL && len > 0)
    buf[0] = '\0';
  if (warnings != NULL)
    *warnings = 0;
  if (device < SLABFEED_DEVICE_LOCAL)
    sf__fail(&e, SLABFEED_ERR_ARG,
             "slabfeed_topology: device %d; expected an ordinal, -1 or "
             "SLABFEED_DEVICE_LOCAL",
             device);
  else if (rank == 0 && (buf == NULL || len == 0))
    sf__fail(&e, SLABFEED_ERR_ARG,
             "slabfeed_topology: rank 0 needs a buffer for the table");
  /* The node-local rank (SLABFEED_DEVICE_LOCAL), every rank alike. */
  MPI_Comm node = MPI_COMM_NULL;
  int local = 0;
  SF_MPI_GOTO(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank,
                                  MPI_INFO_NULL, &node),
              &e, local_done);
  SF_MPI_GOTO(MPI_Comm_rank(node, &local), &e, local_done);
local_done:
  if (node != MPI_COMM_NULL)
    MPI_Comm_free(&node);
  rank_rec mine;
  rank_rec *all = NULL;
  if (e.status == SLABFEED_OK)
    fill_rec(device, local, &mine);
  else
    memset(&mine, 0, sizeof mine);
  if (rank == 0 && e.status == SLABFEED_OK &&
      (all = malloc(sizeof *all * (size_t)size)) == NULL)
    sf__fail(&e, SLABFEED_ERR_NOMEM,
             "slabfeed_topology: cannot allocate the records of %d ranks",
             size);
  if (sf__agree(comm, &e) != SLABFEED_OK)
    goto done;
  warned = mine.warn != 0;
  SF_MPI_GOTO(MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all,
                         (int)sizeof mine, MPI_BYTE, 0, comm),
              &e, done);
  SF_MPI_GOTO(MPI_Allreduce(&warned, &total, 1, MPI_INT, MPI_SUM, comm), &e,
              done);
  if (rank == 0) {
    outbuf o = {buf, len, 0};
    write_table(all, size, &o);
  }
  if (warnings != NULL)
    *warnings = total;
done:
  free(all);
  if (sf__agree(comm, &e) != SLABFEED_OK) {
    if (warnings != NULL)
      *warnings = 0;
    sf__err_copy(&e, buf, len);
  }
  return e.status;
}

/* ---- slabfeed_loader_numa -------------------------------------------------
 */

/* dst += src (the nodes of two samples). */
static void pages_merge(sf__topo_pages *dst, const sf__topo_pages *src)
{
  dst->sampled += src->sampled;
  dst->absent += src->absent;
  dst->failed += src->failed;
  dst->others += src->others;
  if (dst->err == 0)
    dst->err = src->err;
  for (int i = 0; i < src->nnodes; i++) {
    int k = 0;
    while (k < dst->nnodes && dst->node[k] != src->node[i])
      k++;
    if (k == dst->nnodes) {
      if (k == SF__TOPO_PAGE_NODES) {
        dst->others += src->count[i];
        continue;
      }
      int at = k;
      while (at > 0 && dst->node[at - 1] > src->node[i]) {
        dst->node[at] = dst->node[at - 1];
        dst->count[at] = dst->count[at - 1];
        at--;
      }
      dst->node[at] = src->node[i];
      dst->count[at] = 0;
      dst->nnodes++;
      k = at;
    }
    dst->count[k] += src->count[i];
  }
}

/* Resident sampled pages of p on node `node` as a share of all resident
 * ones; -1 when none is resident. */
static double share_on(const sf__topo_pages *p, int node)
{
  int on = 0, all = p->others;
  for (int i = 0; i < p->nnodes; i++) {
    all += p->count[i];
    on += p->node[i] == node ? p->count[i] : 0;
  }
  return all > 0 ? (double)on / all : -1;
}

/* "NUMA 0 (64 of 64 sampled pages)", "NUMA 0 50%, 1 50% (...)". */
static void pages_text(const sf__topo_pages *p, outbuf *o)
{
  if (p->err != 0) {
    put(o, "NUMA nodes unknown (move_pages: %s)", strerror(p->err));
    return;
  }
  int resident = p->others;
  for (int i = 0; i < p->nnodes; i++)
    resident += p->count[i];
  if (resident == 0)
    put(o, "not mapped in this process yet");
  else if (p->nnodes == 1 && p->others == 0)
    put(o, "on NUMA %d", p->node[0]);
  else {
    put(o, "on NUMA");
    for (int i = 0; i < p->nnodes; i++)
      put(o, "%s %d %.0f%%", i ? "," : "", p->node[i],
          100.0 * p->count[i] / resident);
    if (p->others)
      put(o, ", others %.0f%%", 100.0 * p->others / resident);
  }
  put(o, " (%d of %d sampled pages", resident, p->sampled);
  if (p->absent)
    put(o, "; %d not mapped in this process yet", p->absent);
  if (p->failed)
    put(o, "; %d without a node", p->failed);
  put(o, ")");
}

slabfeed_status slabfeed_loader_numa(const slabfeed_loader *l, char *buf,
                                     size_t len)
{
  if (l == NULL || buf == NULL || len == 0)
    return SLABFEED_ERR_ARG;
  buf[0] = '\0';
  if (l->forked) {
    snprintf(buf, len, "the loader was used after fork()");
    return SLABFEED_ERR_FORKED;
  }
  const sf__store *s = &l->store;
  const char *sys = sys_root();
  outbuf o = {buf, len, 0};
  char host[64], b[32];
  host_name(host, sizeof host);
  put(&o, "numa: rank %d on %s: ", l->rank, host);
  sf__topo *t = malloc(sizeof *t);
  const int trc = t != NULL ? sf__topo_read(sys, t) : -ENOMEM;
  const int numa = trc == 0 && t->numa;
  if (!numa) {
    char m[160];
    if (t != NULL)
      machine_text(t, trc, sys, m, sizeof m);
    else
      snprintf(m, sizeof m, "NUMA nodes: out of memory");
    put(&o, "%s; ", m);
  }
  /* This rank's segment, then every segment of the node's window. */
  sf__topo_pages own, win, seg;
  sf__topo_mem_nodes(s->base, s->base != NULL ? (size_t)s->bytes : 0, 64, &own);
  bytes_text((double)s->bytes, b, sizeof b);
  put(&o, "slab segment %s ", b);
  if (s->bytes > 0)
    pages_text(&own, &o);
  else
    put(&o, "(empty)");
  memset(&win, 0, sizeof win);
  int segs = 0;
  double wbytes = 0;
  for (int r = 0; s->peer != NULL && r < s->size; r++) {
    if (s->peer[r] == NULL || s->peer_bytes[r] <= 0)
      continue;
    sf__topo_mem_nodes(s->peer[r], (size_t)s->peer_bytes[r], 32, &seg);
    pages_merge(&win, &seg);
    segs++;
    wbytes += (double)s->peer_bytes[r];
  }
  if (segs > 1) {
    bytes_text(wbytes, b, sizeof b);
    put(&o, "; node window of %d segments %s ", segs, b);
    pages_text(&win, &o);
  } else if (segs == 0)
    win = own;
  /* Where the calling thread may run. */
  sf__idset cpus, nodes;
  char list[192], nl[64];
  if (sf__topo_allowed(&cpus) == 0) {
    sf__idset_format(&cpus, list, sizeof list);
    put(&o, "; CPUs %s", list);
    if (numa) {
      sf__topo_cpus_nodes(t, &cpus, &nodes);
      sf__idset_format(&nodes, nl, sizeof nl);
      put(&o, " on NUMA %s", nl);
    }
  }
  /* A device loader: its GPU, and how much of what it reads is local. */
  if (l->plan.device >= 0) {
    gpu_info g;
    gpu_of(l->plan.device, 0, sys, &g);
    if (g.present) {
      char n[16];
      put(&o, "; GPU %d %s on NUMA %s", g.device, g.bus,
          sf__topo_node_text(g.node, n, sizeof n));
      const double sh =
          g.node >= 0 && win.err == 0 ? share_on(&win, g.node) : -1;
      if (sh >= 0)
        put(&o, " (%.0f%% of the sampled window pages on its node)",
            100.0 * sh);
    } else
      put(&o, "; GPU %s", g.note);
  } else
    put(&o, "; host batches");
  free(t);
  return SLABFEED_OK;
}
