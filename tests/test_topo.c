/* The topology module (common/topo) and the report over it
 * (slabfeed_topology, slabfeed_loader_numa), on 1-3 ranks of one machine:
 * - id lists parse and print as sysfs writes them, and refuse the rest;
 * - a fake sysfs tree (two NUMA nodes, a memory-only node, PCI devices
 *   with and without an affinity) reads back as written, and a tree
 *   without NUMA is a result, not a failure;
 * - on this machine: the allowed CPUs are sched_getaffinity's, each on a
 *   listed node; a freshly touched malloc'd page lies on one of the
 *   machine's nodes, a page never touched is not resident; a PCI bus id
 *   that does not exist gives "unknown";
 * - slabfeed_topology returns the same status on every rank and a table
 *   with one line per rank; a GPU planted on another NUMA node than the
 *   rank's CPUs (SLABFEED_TEST_TOPO_GPU_NUMA, on the last rank only)
 *   makes a WARNING naming that rank, counted on every rank; the fake
 *   tree through SLABFEED_TEST_TOPO_SYS gives a warning for a GPU on a
 *   node without the rank's CPUs and none for a device without affinity
 *   or a machine without NUMA; bad arguments fail alike on every rank;
 * - slabfeed_loader_numa names the rank and the nodes of its slab;
 * - the threads of a rank (sf__core_share) are the node's cores over its
 *   ranks and no more than its CPUs: bound to one CPU, one thread and a
 *   note saying how to widen it; unbound, the share and no note. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_ISSET, mkdtemp, setenv */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "common/sys.h"
#include "common/topo.h"
#include "slabfeed_tools.h"
#include "testutil.h"

static int rank, size;

/* ---- Id lists ------------------------------------------------------------ */

static void test_idset(void)
{
  sf__idset s;
  char buf[256];
  CHECK_EQ(sf__idset_parse("0-3,8,10-11\n", &s), 0, "a sysfs list");
  CHECK_EQ(sf__idset_count(&s), 7, "ids of 0-3,8,10-11");
  CHECK(sf__idset_has(&s, 3) && !sf__idset_has(&s, 4) && sf__idset_has(&s, 8),
        "members");
  CHECK_EQ(sf__idset_next(&s, 4), 8, "next member after 3");
  CHECK_EQ(sf__idset_next(&s, 12), -1, "no member after 11");
  sf__idset_format(&s, buf, sizeof buf);
  CHECK(strcmp(buf, "0-3,8,10-11") == 0, "formatted '%s'", buf);
  CHECK_EQ(sf__idset_parse("\n", &s), 0, "an empty list (a node without CPUs)");
  CHECK_EQ(sf__idset_count(&s), 0, "empty");
  sf__idset_format(&s, buf, sizeof buf);
  CHECK(buf[0] == '\0', "an empty set prints as ''");
  CHECK_EQ(sf__idset_parse("", &s), 0, "''");
  const char *bad[] = {"0-", "a", "3-1", "1,,2", "1 2", "-1", "0-3:2", "1,"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK_EQ(sf__idset_parse(bad[i], &s), -1, "'%s' must be refused", bad[i]);
  CHECK_EQ(sf__idset_parse("4090-5000", &s), 1, "ids beyond the limit");
  CHECK_EQ(sf__idset_count(&s), 6, "4090-4095 kept");
  /* Alternate ids: a long list, cut with "..." inside the buffer. */
  sf__idset_clear(&s);
  for (int i = 0; i < 200; i += 2)
    sf__idset_add(&s, i);
  char small[24];
  memset(small, 'x', sizeof small);
  sf__idset_format(&s, small, sizeof small);
  const size_t n = strlen(small);
  CHECK(n < sizeof small && n >= 3 && strcmp(small + n - 3, "...") == 0,
        "cut list '%s'", small);
  CHECK(strncmp(small, "0,2,4,6,8,10", 12) == 0, "cut list starts '%s'", small);
}

/* ---- A fake sysfs tree ------------------------------------------------------
 */

static char fake[64];   /* the tree: two NUMA nodes and a memory-only one */
static char nonuma[80]; /* a tree without devices/system/node */

static void put_file(const char *dir, const char *name, const char *text)
{
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  CHECK(f != NULL, "cannot write %s: %s", path, strerror(errno));
  if (f != NULL) {
    fputs(text, f);
    fclose(f);
  }
}

static void make_dir(const char *fmt, const char *a, const char *b)
{
  char path[512];
  snprintf(path, sizeof path, fmt, a, b);
  CHECK(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path,
        strerror(errno));
}

static const char *pci_ids[] = {"0000:3b:00.0", "0000:5e:00.0"};

/* Rank 0 writes the tree: node0 holds every CPU any rank may use, node1
 * none (a GPU's node without the ranks' CPUs), node2 is memory only;
 * device 0000:3b:00.0 on node 1, 0000:5e:00.0 without affinity. Then the
 * path goes to every rank. */
static void make_fake_tree(void)
{
  sf__idset cpus;
  CHECK_EQ(sf__topo_allowed(&cpus), 0, "allowed CPUs");
  MPI_Allreduce(MPI_IN_PLACE, cpus.w, (int)(sizeof cpus.w / sizeof cpus.w[0]),
                MPI_UNSIGNED_LONG, MPI_BOR, MPI_COMM_WORLD);
  if (rank == 0) {
    snprintf(fake, sizeof fake, "/tmp/sf_topo_XXXXXX");
    CHECK(mkdtemp(fake) != NULL, "mkdtemp: %s", strerror(errno));
    const char *dirs[] = {"devices",
                          "devices/system",
                          "devices/system/node",
                          "devices/system/node/node0",
                          "devices/system/node/node1",
                          "devices/system/node/node2",
                          "devices/system/node/nodeX",
                          "bus",
                          "bus/pci",
                          "bus/pci/devices",
                          "bus/pci/devices/0000:3b:00.0",
                          "bus/pci/devices/0000:5e:00.0",
                          "empty"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
      make_dir("%s/%s", fake, dirs[i]);
    char list[1024];
    sf__idset_format(&cpus, list, sizeof list);
    strcat(list, "\n");
    char dir[256];
    snprintf(dir, sizeof dir, "%s/devices/system/node", fake);
    put_file(dir, "node0/cpulist", list);
    put_file(dir, "node1/cpulist", "\n");
    put_file(dir, "possible", "0-2\n");
    put_file(dir, "nodeX/cpulist", "garbage\n"); /* not a node: ignored */
    snprintf(dir, sizeof dir, "%s/bus/pci/devices", fake);
    put_file(dir, "0000:3b:00.0/numa_node", "1\n");
    put_file(dir, "0000:5e:00.0/numa_node", "-1\n");
  }
  MPI_Bcast(fake, sizeof fake, MPI_CHAR, 0, MPI_COMM_WORLD);
  snprintf(nonuma, sizeof nonuma, "%s/empty", fake);
}

static void remove_fake_tree(void)
{
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0)
    return;
  const char *files[] = {"devices/system/node/node0/cpulist",
                         "devices/system/node/node1/cpulist",
                         "devices/system/node/nodeX/cpulist",
                         "devices/system/node/possible",
                         "bus/pci/devices/0000:3b:00.0/numa_node",
                         "bus/pci/devices/0000:5e:00.0/numa_node"};
  const char *dirs[] = {"devices/system/node/node0",
                        "devices/system/node/node1",
                        "devices/system/node/node2",
                        "devices/system/node/nodeX",
                        "devices/system/node",
                        "devices/system",
                        "devices",
                        "bus/pci/devices/0000:3b:00.0",
                        "bus/pci/devices/0000:5e:00.0",
                        "bus/pci/devices",
                        "bus/pci",
                        "bus",
                        "empty",
                        ""};
  char path[512];
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", fake, files[i]);
    CHECK(unlink(path) == 0, "unlink %s: %s", path, strerror(errno));
  }
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", fake, dirs[i]);
    CHECK(rmdir(path) == 0, "rmdir %s: %s", path, strerror(errno));
  }
}

static void test_fake_tree(void)
{
  static sf__topo t; /* 9 KB: off the stack */
  CHECK_EQ(sf__topo_read(fake, &t), 0, "read the fake tree");
  CHECK_EQ(t.numa, 1, "the fake tree lists NUMA nodes");
  CHECK_EQ(t.nnodes, 3, "node0, node1, node2 (nodeX is no node)");
  CHECK(t.node[0] == 0 && t.node[1] == 1 && t.node[2] == 2, "ids %d %d %d",
        t.node[0], t.node[1], t.node[2]);
  sf__idset cpus, nodes, n1;
  CHECK_EQ(sf__topo_allowed(&cpus), 0, "allowed CPUs");
  CHECK_EQ(sf__topo_cpus_nodes(&t, &cpus, &nodes), 0, "no orphan CPU");
  CHECK(sf__idset_count(&nodes) == 1 && sf__idset_has(&nodes, 0),
        "the allowed CPUs lie on node 0 of the fake tree");
  sf__topo_node_cpus(&t, 1, &n1);
  CHECK_EQ(sf__idset_count(&n1), 0, "node 1 has no CPU");
  /* PCI devices in every spelling CUDA and nvidia-smi use. */
  const char *forms[] = {"0000:3b:00.0", "0000:3B:00.0", "00000000:3B:00.0",
                         "3b:00.0"};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    char canon[32];
    CHECK_EQ(sf__topo_pci_canon(forms[i], canon, sizeof canon), 0, "'%s'",
             forms[i]);
    CHECK(strcmp(canon, pci_ids[0]) == 0, "'%s' -> '%s'", forms[i], canon);
    CHECK_EQ(sf__topo_pci_node(fake, forms[i]), 1, "node of '%s'", forms[i]);
  }
  CHECK_EQ(sf__topo_pci_node(fake, pci_ids[1]), SF__TOPO_NODE_NONE,
           "a device that reports -1");
  CHECK_EQ(sf__topo_pci_node(fake, "0000:ff:1f.7"), SF__TOPO_NODE_UNKNOWN,
           "a device that does not exist");
  const char *bad[] = {"",
                       "../../etc/passwd",
                       "0000:3b:00",
                       "0000:3b:20.0",
                       "0000:3b:00.8",
                       "0000:3b:00.0/x",
                       "123456789:3b:00.0",
                       "0000:3bb:00.0",
                       "planted"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char canon[32];
    CHECK_EQ(sf__topo_pci_canon(bad[i], canon, sizeof canon), -1,
             "'%s' is no bus id", bad[i]);
    CHECK_EQ(sf__topo_pci_node(fake, bad[i]), SF__TOPO_NODE_UNKNOWN, "'%s'",
             bad[i]);
  }
  /* No NUMA at all: said, not failed. */
  CHECK_EQ(sf__topo_read(nonuma, &t), 0, "a tree without NUMA reads");
  CHECK_EQ(t.numa, 0, "no NUMA listed");
  CHECK_EQ(t.nnodes, 0, "no nodes");
  CHECK_EQ(sf__topo_pci_node(nonuma, pci_ids[0]), SF__TOPO_NODE_UNKNOWN,
           "no PCI tree");
}

/* ---- This machine -------------------------------------------------------- */

static void test_machine(void)
{
  static sf__topo t;
  CHECK_EQ(sf__topo_read("/sys", &t), 0, "read /sys");
  /* The allowed CPUs: what glibc's sched_getaffinity says. */
  sf__idset mine, nodes;
  cpu_set_t set;
  CPU_ZERO(&set);
  CHECK_EQ(sf__topo_allowed(&mine), 0, "allowed CPUs");
  CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity: %s",
        strerror(errno));
  int same = 1;
  for (int c = 0; c < CPU_SETSIZE && c < SF__TOPO_MAX_CPUS; c++)
    same &= !!CPU_ISSET(c, &set) == sf__idset_has(&mine, c);
  CHECK(same, "allowed CPUs differ from sched_getaffinity");
  CHECK_EQ(sf__idset_count(&mine), CPU_COUNT(&set), "allowed CPU count");
  if (!t.numa) {
    if (rank == 0)
      printf("  this machine lists no NUMA node: node checks skipped\n");
    return;
  }
  CHECK(t.nnodes >= 1, "a NUMA machine has a node");
  CHECK_EQ(sf__topo_cpus_nodes(&t, &mine, &nodes), 0,
           "every allowed CPU is on a listed node");
  CHECK(sf__idset_count(&nodes) >= 1, "the allowed CPUs are on some node");
  /* A freshly touched malloc'd page lies on one of the machine's nodes. */
  const long ps = sysconf(_SC_PAGESIZE);
  char *p = NULL; /* malloc'd, page-aligned: 4 pages exactly */
  CHECK(posix_memalign((void **)&p, (size_t)ps, (size_t)ps * 4) == 0,
        "posix_memalign");
  if (p == NULL)
    return;
  memset(p, 1, (size_t)ps * 4);
  sf__topo_pages pg;
  const int rc = sf__topo_mem_nodes(p + ps, 1, 1, &pg);
  if (rc == -EPERM || rc == -ENOSYS) {
    if (rank == 0)
      printf("  move_pages refused here (%s): page checks skipped\n",
             strerror(-rc));
    free(p);
    return;
  }
  CHECK_EQ(rc, 0, "move_pages query: %s", strerror(-rc));
  CHECK_EQ(pg.sampled, 1, "one page sampled");
  CHECK(pg.nnodes == 1 && pg.count[0] == 1 && pg.absent == 0,
        "the touched page is on one node (nodes %d, absent %d, failed %d)",
        pg.nnodes, pg.absent, pg.failed);
  int listed = 0;
  for (int i = 0; i < t.nnodes; i++)
    listed |= pg.nnodes == 1 && t.node[i] == pg.node[0];
  CHECK(listed, "the page's node %d is one of the machine's",
        pg.nnodes ? pg.node[0] : -1);
  /* The whole buffer, sampled: every sample resident. */
  CHECK_EQ(sf__topo_mem_nodes(p, (size_t)ps * 4, 64, &pg), 0, "4 pages");
  CHECK_EQ(pg.sampled, 4, "at most one sample per page");
  free(p);
  /* A mapping never touched: its pages are not resident. */
  char *m = mmap(NULL, (size_t)ps * 2, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED, "mmap");
  if (m != MAP_FAILED) {
    m[0] = 1;
    CHECK_EQ(sf__topo_mem_nodes(m, (size_t)ps * 2, 2, &pg), 0, "2 pages");
    CHECK(pg.sampled == 2 && pg.absent == 1 && pg.nnodes == 1 &&
              pg.count[0] == 1,
          "touched + untouched: sampled %d absent %d nodes %d", pg.sampled,
          pg.absent, pg.nnodes);
    munmap(m, (size_t)ps * 2);
  }
  char n[16];
  CHECK(strcmp(sf__topo_node_text(sf__topo_pci_node("/sys", "0000:ff:1f.7"), n,
                                  sizeof n),
               "unknown") == 0,
        "a PCI bus id that does not exist: '%s'", n);
}

/* ---- slabfeed_topology ------------------------------------------------------
 */

static char table[1 << 16];

/* Lines of s that begin with `prefix`. */
static int lines_with(const char *s, const char *prefix)
{
  int n = 0;
  for (const char *p = s; p != NULL && *p;) {
    n += strncmp(p, prefix, strlen(prefix)) == 0;
    p = strchr(p, '\n');
    p = p ? p + 1 : NULL;
  }
  return n;
}

/* Rank lines: "<rank>  host ...", one per rank, in order. */
static int rank_lines(const char *s)
{
  int n = 0;
  for (const char *p = s; p != NULL && *p;) {
    char *end = NULL;
    const long r = strtol(p, &end, 10);
    if (end != p && end[0] == ' ' && end[1] == ' ' && r == n)
      n++;
    p = strchr(p, '\n');
    p = p ? p + 1 : NULL;
  }
  return n;
}

/* One call on every rank; checks the status is the same everywhere and
 * the warning count too; returns the status, *warnings of this rank. */
static slabfeed_status topo_call(int device, char *buf, size_t len,
                                 int *warnings, const char *what)
{
  const slabfeed_status st =
      slabfeed_topology(MPI_COMM_WORLD, device, buf, len, warnings);
  int lo = st, hi = st, wlo = *warnings, whi = *warnings;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &wlo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &whi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi, "%s: statuses differ between ranks (%d..%d)", what, lo, hi);
  CHECK(wlo == whi, "%s: warning counts differ between ranks (%d..%d)", what,
        wlo, whi);
  return st;
}

static void test_topology(void)
{
  int w = -1;
  /* This machine as it is. */
  slabfeed_status st =
      topo_call(SLABFEED_DEVICE_LOCAL, table, sizeof table, &w, "plain");
  CHECK(st == SLABFEED_OK, "plain: %s: %s", slabfeed_status_name(st), table);
  if (rank == 0) {
    printf("%s", table);
    char head[64];
    snprintf(head, sizeof head, "topology: %d rank%s on 1 host\n", size,
             size == 1 ? "" : "s");
    CHECK(strncmp(table, head, strlen(head)) == 0, "header: '%.60s'", table);
    CHECK_EQ(rank_lines(table), size, "one line per rank:\n%s", table);
    CHECK_EQ(lines_with(table, "host "), 1, "one line per host");
    CHECK_EQ(lines_with(table, "WARNING: rank "), w,
             "warnings counted as listed");
  } else
    CHECK(table[0] == '\0', "only rank 0 receives the table");

  /* A GPU planted on the last rank, on a node none of its CPUs is on. */
  static sf__topo t;
  sf__topo_read("/sys", &t);
  if (t.numa) {
    const int planted = size - 1;
    char node[16];
    snprintf(node, sizeof node, "%d", t.node[t.nnodes - 1] + 1);
    if (rank == planted)
      setenv("SLABFEED_TEST_TOPO_GPU_NUMA", node, 1);
    st = topo_call(SLABFEED_DEVICE_LOCAL, table, sizeof table, &w, "planted");
    unsetenv("SLABFEED_TEST_TOPO_GPU_NUMA");
    CHECK(st == SLABFEED_OK, "planted: %s", slabfeed_status_name(st));
    CHECK_EQ(w, 1, "the planted mismatch counts on every rank");
    if (rank == 0) {
      printf("%s", table);
      char want[64];
      snprintf(want, sizeof want, "WARNING: rank %d (", planted);
      CHECK(strstr(table, want) != NULL, "no '%s' in:\n%s", want, table);
      CHECK_EQ(lines_with(table, "WARNING: rank "), 1, "one warning");
      CHECK(strstr(table, "planted NUMA ") != NULL, "the planted GPU is shown");
      CHECK_EQ(rank_lines(table), size, "one line per rank");
    }
  } else if (rank == 0)
    printf("  no NUMA on this machine: the planted case runs on the fake "
           "tree only\n");

  /* The fake tree: a GPU on node 1, whose CPUs none of the ranks has. */
  setenv("SLABFEED_TEST_TOPO_SYS", fake, 1);
  setenv("SLABFEED_TEST_TOPO_GPU_BUS", "0000:3B:00.0", 1);
  st = topo_call(0, table, sizeof table, &w, "fake, GPU on node 1");
  CHECK(st == SLABFEED_OK, "fake: %s", slabfeed_status_name(st));
  CHECK_EQ(w, size, "every rank's GPU is on node 1, its CPUs on node 0");
  if (rank == 0) {
    printf("%s", table);
    CHECK(strstr(table, "NUMA 0: CPUs ") != NULL &&
              strstr(table, "NUMA 1: no CPUs (memory only)") != NULL &&
              strstr(table, "NUMA 2: no CPUs") != NULL,
          "the fake machine's nodes:\n%s", table);
    CHECK(strstr(table, "0 0000:3b:00.0 NUMA 1") != NULL, "GPU column");
    for (int r = 0; r < size; r++) {
      char want[64];
      snprintf(want, sizeof want, "WARNING: rank %d (", r);
      CHECK(strstr(table, want) != NULL, "no '%s'", want);
    }
  }
  /* A device without NUMA affinity: no warning, and said so. */
  setenv("SLABFEED_TEST_TOPO_GPU_BUS", pci_ids[1], 1);
  st = topo_call(0, table, sizeof table, &w, "fake, no affinity");
  CHECK(st == SLABFEED_OK && w == 0, "no affinity: %s, %d warnings",
        slabfeed_status_name(st), w);
  if (rank == 0)
    CHECK(strstr(table, "0000:5e:00.0 NUMA none") != NULL, "%s", table);
  /* A bus id that does not exist: "unknown", no warning. */
  setenv("SLABFEED_TEST_TOPO_GPU_BUS", "0000:ff:1f.7", 1);
  st = topo_call(0, table, sizeof table, &w, "fake, unknown device");
  CHECK(st == SLABFEED_OK && w == 0, "unknown device: %s, %d warnings",
        slabfeed_status_name(st), w);
  if (rank == 0)
    CHECK(strstr(table, "0000:ff:1f.7 NUMA unknown") != NULL, "%s", table);
  /* No NUMA at all: said so, no warning even with a planted node. */
  setenv("SLABFEED_TEST_TOPO_SYS", nonuma, 1);
  setenv("SLABFEED_TEST_TOPO_GPU_NUMA", "1", 1);
  st = topo_call(0, table, sizeof table, &w, "no NUMA");
  CHECK(st == SLABFEED_OK && w == 0, "no NUMA: %s, %d warnings",
        slabfeed_status_name(st), w);
  if (rank == 0) {
    printf("%s", table);
    CHECK(strstr(table, "no NUMA nodes listed") != NULL, "%s", table);
    CHECK_EQ(rank_lines(table), size, "one line per rank");
  }
  unsetenv("SLABFEED_TEST_TOPO_GPU_NUMA");
  unsetenv("SLABFEED_TEST_TOPO_GPU_BUS");
  unsetenv("SLABFEED_TEST_TOPO_SYS");

  /* Host only (device -1): no GPU, no warning. */
  st = topo_call(-1, table, sizeof table, &w, "device -1");
  CHECK(st == SLABFEED_OK && w == 0, "device -1");
  if (rank == 0)
    CHECK(strstr(table, "none (device -1") != NULL, "%s", table);
  /* A short buffer: cut, not overrun. */
  char tiny[16];
  memset(tiny, 'x', sizeof tiny);
  st = topo_call(-1, tiny, sizeof tiny, &w, "short buffer");
  CHECK(st == SLABFEED_OK, "short buffer");
  if (rank == 0)
    CHECK(strlen(tiny) == sizeof tiny - 1, "cut to %zu: '%s'", sizeof tiny - 1,
          tiny);
  /* Refusals, alike on every rank, the message in buf. */
  st = topo_call(-3, table, sizeof table, &w, "device -3");
  CHECK(st == SLABFEED_ERR_ARG, "device -3: %s", slabfeed_status_name(st));
  CHECK(strstr(table, "device -3") != NULL, "message '%s'", table);
  st = topo_call(-1, rank == 0 ? NULL : table, rank == 0 ? 0 : sizeof table, &w,
                 "no buffer on rank 0");
  CHECK(st == SLABFEED_ERR_ARG, "no buffer on rank 0: %s",
        slabfeed_status_name(st));
  if (rank != 0)
    CHECK(strstr(table, "rank 0") != NULL, "message '%s'", table);
}

/* ---- slabfeed_loader_numa ---------------------------------------------------
 */

static void test_loader_numa(void)
{
  const char *path = "topo_vol.h5";
  if (make_file(path, 16, 8, 8, SLABFEED_LAYOUT_CF, 0, 0, 1) != 0)
    return;
  slabfeed_config c;
  base_config(&c, path, 4);
  slabfeed_loader *l = NULL;
  char err[1024], line[1024];
  const slabfeed_status st =
      slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err);
  CHECK(st == SLABFEED_OK, "open: %s", err);
  if (st != SLABFEED_OK)
    return;
  CHECK(slabfeed_loader_numa(l, line, sizeof line) == SLABFEED_OK, "numa");
  char want[32];
  snprintf(want, sizeof want, "numa: rank %d on ", rank);
  CHECK(strncmp(line, want, strlen(want)) == 0, "line '%s'", line);
  CHECK(strstr(line, "slab segment ") != NULL && strstr(line, "CPUs ") &&
            strstr(line, "host batches") != NULL,
        "line '%s'", line);
  static sf__topo t;
  sf__topo_read("/sys", &t);
  if (t.numa && strstr(line, "move_pages") == NULL) {
    /* the segment was read into at open: its pages are on a listed node */
    const char *seg = strstr(line, "slab segment ");
    int found = 0;
    for (int i = 0; i < t.nnodes && seg != NULL; i++) {
      char on[24];
      snprintf(on, sizeof on, "NUMA %d", t.node[i]);
      found |= strstr(seg, on) != NULL;
    }
    CHECK(found, "the slab's node is one of the machine's: '%s'", line);
  }
  for (int r = 0; r < size; r++) {
    if (r == rank)
      printf("  %s\n", line);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  char tiny[8];
  CHECK(slabfeed_loader_numa(l, tiny, sizeof tiny) == SLABFEED_OK &&
            strlen(tiny) == sizeof tiny - 1,
        "cut line '%s'", tiny);
  CHECK(slabfeed_loader_numa(NULL, line, sizeof line) == SLABFEED_ERR_ARG,
        "NULL loader");
  CHECK(slabfeed_loader_numa(l, NULL, 8) == SLABFEED_ERR_ARG, "NULL buf");
  CHECK(slabfeed_loader_numa(l, line, 0) == SLABFEED_ERR_ARG, "len 0");
  slabfeed_close(l);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    remove(path);
}

static void test_core_share(void)
{
  cpu_set_t saved, one;
  CHECK_EQ(sched_getaffinity(0, sizeof saved, &saved), 0, "sched_getaffinity");
  const int mine = CPU_COUNT(&saved);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  CHECK_EQ(sf__cpus_allowed(), mine, "the CPUs of this thread's mask");
  const long want = online < mine ? online : mine;
  CHECK_EQ(sf__core_share(1), (int)(want > 0 ? want : 1),
           "one rank: the node's cores within its mask");
  char note[160] = "x";
  if (mine >= online) {
    sf__core_note(1, note, sizeof note);
    CHECK(note[0] == '\0', "unbound: no note, got '%s'", note);
  }
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &saved))
    first++;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  CHECK_EQ(sched_setaffinity(0, sizeof one, &one), 0, "bind to CPU %d", first);
  CHECK_EQ(sf__core_share(1), 1, "bound to one CPU: one thread");
  CHECK_EQ(sf__touch_threads(0, 1), 1, "and one page-fault thread");
  CHECK_EQ(sf__touch_threads(3, 1), 3, "an explicit count stays");
  sf__core_note(1, note, sizeof note);
  if (online >= 2)
    CHECK(strstr(note, "bound to 1 CPU of the") != NULL &&
              strstr(note, "--bind-to none") != NULL,
          "bound: the note says so and how to widen it: '%s'", note);
  sf__core_note((int)online, note, sizeof note); /* a share of one core */
  CHECK(note[0] == '\0', "a share of one core is not narrowed: '%s'", note);
  CHECK_EQ(sched_setaffinity(0, sizeof saved, &saved), 0, "mask restored");
  CHECK_EQ(sf__cpus_allowed(), mine, "the mask back");
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  test_idset();
  make_fake_tree();
  test_fake_tree();
  test_machine();
  test_topology();
  test_loader_numa();
  test_core_share();
  remove_fake_tree();
  return check_finish("topo");
}
