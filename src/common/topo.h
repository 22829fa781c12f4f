/* The machine's topology as Linux reports it, without libnuma: the NUMA
 * nodes and their CPUs (sysfs), the CPUs the calling thread may run on
 * (sched_getaffinity), the NUMA node of a PCI device by bus id (sysfs) and
 * the NUMA nodes of the pages of a memory range (move_pages in query
 * mode). A machine without NUMA (no /sys/devices/system/node) is a result,
 * not a failure. Base layer: no MPI, no CUDA; every function is safe on
 * any thread. `sys` is the sysfs root: "/sys", or a copy of its layout
 * (tests). */
#ifndef SF_TOPO_H
#define SF_TOPO_H

#include <stddef.h>
#include <stdint.h>

#define SF__TOPO_MAX_CPUS 4096 /* CPU and node ids below this */
#define SF__TOPO_MAX_NODES 256 /* NUMA nodes kept */
#define SF__TOPO_PAGE_NODES 16 /* distinct nodes counted in a page sample */

/* The NUMA node of a device or a page, when it is not a node id (>= 0). */
#define SF__TOPO_NODE_NONE (-1)    /* the device reports no NUMA affinity */
#define SF__TOPO_NODE_UNKNOWN (-2) /* no such device, or unreadable */

/* A set of small ids (CPUs, NUMA nodes), in the kernel's cpumask layout. */
typedef struct sf__idset {
  unsigned long w[SF__TOPO_MAX_CPUS / (8 * sizeof(unsigned long))];
} sf__idset;

void sf__idset_clear(sf__idset *s);
/* Adds id; ids outside [0, SF__TOPO_MAX_CPUS) are ignored. */
void sf__idset_add(sf__idset *s, int id);
int sf__idset_has(const sf__idset *s, int id);
int sf__idset_count(const sf__idset *s);
/* The lowest id >= from in s, or -1. */
int sf__idset_next(const sf__idset *s, int from);
/* Parses a sysfs list ("0-3,8,10-11", "" or "\n" for none) into *s;
 * returns 0, 1 when ids >= SF__TOPO_MAX_CPUS were left out, or -1 for
 * anything else (*s is then unspecified). */
int sf__idset_parse(const char *text, sf__idset *s);
/* Writes s as such a list ("" when empty) into buf, NUL-terminated; a
 * list longer than len - 1 ends in "...". */
void sf__idset_format(const sf__idset *s, char *buf, size_t len);

/* The NUMA nodes of the machine. */
typedef struct sf__topo {
  int numa;   /* 1: the kernel lists NUMA nodes (sys/devices/system/node) */
  int nnodes; /* nodes listed (kept: at most SF__TOPO_MAX_NODES) */
  int node[SF__TOPO_MAX_NODES];        /* their ids, ascending */
  int16_t cpu_node[SF__TOPO_MAX_CPUS]; /* the node of each CPU, or -1 */
  int truncated; /* 1: more nodes, or CPUs above the limits, were left out */
} sf__topo;

/* Reads the NUMA nodes and their CPUs (the cpulist of every nodeN under
 * sys/devices/system/node) into *t. No such directory: t->numa = 0 and
 * success. Returns 0, or -errno when a listed node cannot be read or its
 * list does not parse (-EINVAL); *t then holds the nodes read so far. */
int sf__topo_read(const char *sys, sf__topo *t);

/* The CPUs of node `node` of t into *cpus (empty for a node without CPUs
 * or one not listed). */
void sf__topo_node_cpus(const sf__topo *t, int node, sf__idset *cpus);

/* The NUMA nodes the CPUs of `cpus` belong to into *nodes; returns the
 * number of CPUs of `cpus` that no listed node holds. */
int sf__topo_cpus_nodes(const sf__topo *t, const sf__idset *cpus,
                        sf__idset *nodes);

/* The CPUs the calling thread may run on (sched_getaffinity) into *cpus;
 * returns 0, or -errno (-EINVAL: the kernel has more than
 * SF__TOPO_MAX_CPUS CPUs). */
int sf__topo_allowed(sf__idset *cpus);

/* The canonical form "dddd:bb:ss.f" (lower-case hex, as sysfs names
 * devices) of a PCI bus id given as "D:B:S.F" or "B:S.F" in hex of any
 * case (CUDA writes "0000:3B:00.0", nvidia-smi "00000000:3B:00.0");
 * returns 0, or -1 when id is not of that form. */
int sf__topo_pci_canon(const char *id, char *out, size_t len);

/* The NUMA node of PCI device bus_id (sys/bus/pci/devices/<canonical
 * id>/numa_node): a node id, SF__TOPO_NODE_NONE where the device reports
 * -1, SF__TOPO_NODE_UNKNOWN for a malformed id or a device that does not
 * exist. */
int sf__topo_pci_node(const char *sys, const char *bus_id);

/* A node as text: "3", "none" (SF__TOPO_NODE_NONE), "unknown". Returns
 * buf. */
const char *sf__topo_node_text(int node, char *buf, size_t len);

/* Where sampled pages of a memory range lie. */
typedef struct sf__topo_pages {
  int sampled; /* pages asked about */
  int absent;  /* not resident in this process (never touched here) */
  int failed;  /* other per-page answers (e.g. the shared zero page) */
  int others;  /* on nodes beyond the SF__TOPO_PAGE_NODES counted */
  int nnodes;
  int node[SF__TOPO_PAGE_NODES]; /* node ids seen, ascending */
  int count[SF__TOPO_PAGE_NODES];
  int err; /* 0, or the errno of move_pages itself (ENOSYS: a kernel
              without NUMA; EPERM: not permitted here) */
} sf__topo_pages;

/* Asks the kernel (move_pages(0, n, pages, NULL, status, 0): a query,
 * nothing moves) which NUMA node holds each of up to `samples` pages
 * spread evenly over [p, p + bytes), into *out. Pages are not touched.
 * Returns 0, or -errno when move_pages fails as a whole (also in
 * out->err). */
int sf__topo_mem_nodes(const void *p, size_t bytes, int samples,
                       sf__topo_pages *out);

#endif
