/* The machine's topology from sysfs and raw system calls (topo.h). */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* syscall(2) */
#endif
#include "common/topo.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BITS (8 * sizeof(unsigned long))

/* ---- Id sets ------------------------------------------------------------- */

void sf__idset_clear(sf__idset *s)
{
  memset(s, 0, sizeof *s);
}

void sf__idset_add(sf__idset *s, int id)
{
  if (id >= 0 && id < SF__TOPO_MAX_CPUS)
    s->w[(size_t)id / BITS] |= 1UL << ((size_t)id % BITS);
}

int sf__idset_has(const sf__idset *s, int id)
{
  if (id < 0 || id >= SF__TOPO_MAX_CPUS)
    return 0;
  return (s->w[(size_t)id / BITS] >> ((size_t)id % BITS)) & 1UL;
}

int sf__idset_count(const sf__idset *s)
{
  int n = 0;
  for (size_t i = 0; i < sizeof s->w / sizeof s->w[0]; i++)
    n += __builtin_popcountl(s->w[i]);
  return n;
}

int sf__idset_next(const sf__idset *s, int from)
{
  for (int id = from < 0 ? 0 : from; id < SF__TOPO_MAX_CPUS; id++) {
    const unsigned long w = s->w[(size_t)id / BITS] >> ((size_t)id % BITS);
    if (w == 0) { /* nothing more in this word */
      id = (int)(((size_t)id / BITS + 1) * BITS) - 1;
      continue;
    }
    id += __builtin_ctzl(w);
    return id;
  }
  return -1;
}

/* A decimal number at *p (digits only) into *v; advances *p. */
static int parse_uint(const char **p, long *v)
{
  const char *s = *p;
  long n = 0;
  if (*s < '0' || *s > '9')
    return -1;
  while (*s >= '0' && *s <= '9') {
    n = n * 10 + (*s++ - '0');
    if (n >= SF__TOPO_MAX_CPUS * 16L) /* far above any id we keep */
      return -1;
  }
  *p = s;
  *v = n;
  return 0;
}

int sf__idset_parse(const char *text, sf__idset *s)
{
  sf__idset_clear(s);
  int beyond = 0;
  const char *p = text;
  while (*p == ' ' || *p == '\t')
    p++;
  if (*p == '\0' || *p == '\n')
    return 0;
  for (;;) {
    long a, b;
    if (parse_uint(&p, &a) != 0)
      return -1;
    b = a;
    if (*p == '-') {
      p++;
      if (parse_uint(&p, &b) != 0 || b < a)
        return -1;
    }
    beyond |= b >= SF__TOPO_MAX_CPUS;
    for (long id = a; id <= b && id < SF__TOPO_MAX_CPUS; id++)
      sf__idset_add(s, (int)id);
    if (*p != ',')
      break;
    p++;
  }
  while (*p == '\n' || *p == ' ' || *p == '\t')
    p++;
  if (*p != '\0')
    return -1;
  return beyond;
}

void sf__idset_format(const sf__idset *s, char *buf, size_t len)
{
  if (len == 0)
    return;
  buf[0] = '\0';
  size_t at = 0;
  for (int a = sf__idset_next(s, 0); a >= 0;) {
    int b = a;
    while (b + 1 < SF__TOPO_MAX_CPUS && sf__idset_has(s, b + 1))
      b++;
    const int next = sf__idset_next(s, b + 1);
    char item[32];
    const int n =
        b > a ? snprintf(item, sizeof item, "%s%d-%d", at ? "," : "", a, b)
              : snprintf(item, sizeof item, "%s%d", at ? "," : "", a);
    /* Room for this item, and for "..." after it unless it is the last:
     * so "..." always fits where a list stops (at <= len - 4). */
    const size_t room = next < 0 ? len - 1 : len >= 4 ? len - 4 : 0;
    if (n < 0 || at + (size_t)n > room) {
      if (len >= 4)
        memcpy(buf + (at <= len - 4 ? at : len - 4), "...", 4);
      return;
    }
    memcpy(buf + at, item, (size_t)n + 1);
    at += (size_t)n;
    a = next;
  }
}

/* ---- sysfs --------------------------------------------------------------- */

/* Reads the whole (small) text file at path into a NUL-terminated
 * malloc'd buffer in *out; 0 or -errno. */
static int read_text(const char *path, char **out)
{
  *out = NULL;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  int rc = buf == NULL ? -ENOMEM : 0;
  while (rc == 0) {
    if (n + 1 == cap) {
      char *more = cap < ((size_t)1 << 20) ? realloc(buf, cap * 2) : NULL;
      if (more == NULL) {
        rc = -ENOMEM;
        break;
      }
      buf = more;
      cap *= 2;
    }
    const ssize_t got = read(fd, buf + n, cap - 1 - n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      rc = -errno;
    else if (got == 0)
      break;
    else
      n += (size_t)got;
  }
  if (close(fd) != 0 && rc == 0)
    rc = -errno;
  if (rc != 0) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *out = buf;
  return 0;
}

/* path = a + b + c, or -ENAMETOOLONG. */
static int join(char *path, size_t len, const char *a, const char *b,
                const char *c)
{
  const int n = snprintf(path, len, "%s%s%s", a, b, c);
  return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int cmp_int(const void *a, const void *b)
{
  const int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* The id of a directory entry named "node<digits>", or -1. */
static int node_entry(const char *name)
{
  if (strncmp(name, "node", 4) != 0 || name[4] == '\0')
    return -1;
  const char *p = name + 4;
  long v;
  if (parse_uint(&p, &v) != 0 || *p != '\0' || v >= SF__TOPO_MAX_CPUS)
    return -1;
  return (int)v;
}

int sf__topo_read(const char *sys, sf__topo *t)
{
  memset(t, 0, sizeof *t);
  for (int c = 0; c < SF__TOPO_MAX_CPUS; c++)
    t->cpu_node[c] = -1;
  char dir[4096];
  int rc = join(dir, sizeof dir, sys, "/devices/system/node", "");
  if (rc != 0)
    return rc;
  DIR *d = opendir(dir);
  if (d == NULL)
    return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
  t->numa = 1;
  struct dirent *ent;
  while ((ent = readdir(d)) != NULL) {
    const int id = node_entry(ent->d_name);
    if (id < 0)
      continue;
    if (t->nnodes == SF__TOPO_MAX_NODES) {
      t->truncated = 1;
      continue;
    }
    t->node[t->nnodes++] = id;
  }
  if (closedir(d) != 0)
    return -errno;
  qsort(t->node, (size_t)t->nnodes, sizeof t->node[0], cmp_int);
  for (int i = 0; i < t->nnodes; i++) {
    char path[4096 + 64], name[32];
    snprintf(name, sizeof name, "/node%d/cpulist", t->node[i]);
    if ((rc = join(path, sizeof path, dir, name, "")) != 0)
      return rc;
    char *text = NULL;
    rc = read_text(path, &text);
    if (rc == -ENOENT) /* a node without a CPU list: memory only */
      continue;
    if (rc != 0)
      return rc;
    sf__idset cpus;
    const int parsed = sf__idset_parse(text, &cpus);
    free(text);
    rc = parsed < 0 ? -EINVAL : 0;
    t->truncated |= parsed > 0;
    if (rc != 0)
      return rc;
    for (int c = sf__idset_next(&cpus, 0); c >= 0;
         c = sf__idset_next(&cpus, c + 1))
      t->cpu_node[c] = (int16_t)t->node[i];
  }
  return 0;
}

void sf__topo_node_cpus(const sf__topo *t, int node, sf__idset *cpus)
{
  sf__idset_clear(cpus);
  for (int c = 0; c < SF__TOPO_MAX_CPUS; c++)
    if (t->cpu_node[c] == node && node >= 0)
      sf__idset_add(cpus, c);
}

int sf__topo_cpus_nodes(const sf__topo *t, const sf__idset *cpus,
                        sf__idset *nodes)
{
  sf__idset_clear(nodes);
  int orphans = 0;
  for (int c = sf__idset_next(cpus, 0); c >= 0; c = sf__idset_next(cpus, c + 1))
    if (t->cpu_node[c] >= 0)
      sf__idset_add(nodes, t->cpu_node[c]);
    else
      orphans++;
  return orphans;
}

int sf__topo_allowed(sf__idset *cpus)
{
  sf__idset_clear(cpus);
#ifdef SYS_sched_getaffinity
  /* The raw call: the kernel copies its cpumask (nr_cpu_ids bits rounded
   * up to longs) and returns its size; the rest of ours stays zero. */
  const long n = syscall(SYS_sched_getaffinity, 0, sizeof cpus->w, cpus->w);
  return n < 0 ? -errno : 0;
#else
  return -ENOSYS;
#endif
}

/* ---- PCI devices --------------------------------------------------------- */

/* Hex digits at *p (at most max of them, at least one) into *v. */
static int parse_hex(const char **p, int max, unsigned long *v)
{
  const char *s = *p;
  unsigned long n = 0;
  int k = 0;
  for (;; s++, k++) {
    const char c = *s;
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      break;
    if (k == max)
      return -1;
    n = n * 16 + (unsigned long)d;
  }
  if (k == 0)
    return -1;
  *p = s;
  *v = n;
  return 0;
}

int sf__topo_pci_canon(const char *id, char *out, size_t len)
{
  if (id == NULL)
    return -1;
  unsigned long f[4] = {0, 0, 0, 0};
  const char *p = id;
  /* D:B:S.F, or B:S.F with domain 0: count the colons first */
  const char *c1 = strchr(id, ':');
  const int with_domain = c1 != NULL && strchr(c1 + 1, ':') != NULL;
  if (with_domain && (parse_hex(&p, 8, &f[0]) != 0 || *p++ != ':'))
    return -1;
  if (parse_hex(&p, 2, &f[1]) != 0 || *p++ != ':' ||
      parse_hex(&p, 2, &f[2]) != 0 || *p++ != '.' ||
      parse_hex(&p, 1, &f[3]) != 0 || *p != '\0')
    return -1;
  if (f[2] > 0x1f || f[3] > 7)
    return -1;
  const int n =
      snprintf(out, len, "%04lx:%02lx:%02lx.%lx", f[0], f[1], f[2], f[3]);
  return n < 0 || (size_t)n >= len ? -1 : 0;
}

int sf__topo_pci_node(const char *sys, const char *bus_id)
{
  char canon[32], path[4096 + 64];
  if (sf__topo_pci_canon(bus_id, canon, sizeof canon) != 0 ||
      join(path, sizeof path, sys, "/bus/pci/devices/", canon) != 0)
    return SF__TOPO_NODE_UNKNOWN;
  const size_t at = strlen(path);
  if (at + sizeof "/numa_node" > sizeof path)
    return SF__TOPO_NODE_UNKNOWN;
  memcpy(path + at, "/numa_node", sizeof "/numa_node");
  char *text = NULL;
  if (read_text(path, &text) != 0)
    return SF__TOPO_NODE_UNKNOWN;
  char *end = NULL;
  errno = 0;
  const long v = strtol(text, &end, 10);
  const int ok = errno == 0 && end != text && (*end == '\n' || *end == '\0');
  free(text);
  if (!ok || v < -1 || v >= SF__TOPO_MAX_CPUS)
    return SF__TOPO_NODE_UNKNOWN;
  return v < 0 ? SF__TOPO_NODE_NONE : (int)v;
}

const char *sf__topo_node_text(int node, char *buf, size_t len)
{
  if (node >= 0)
    snprintf(buf, len, "%d", node);
  else
    snprintf(buf, len, "%s", node == SF__TOPO_NODE_NONE ? "none" : "unknown");
  return buf;
}

/* ---- Pages --------------------------------------------------------------- */

/* Counts one page's answer (a node id, or -errno) into *out. */
static void count_page(sf__topo_pages *out, int status)
{
  if (status == -ENOENT) {
    out->absent++;
    return;
  }
  if (status < 0) {
    out->failed++;
    return;
  }
  int i = 0;
  while (i < out->nnodes && out->node[i] < status)
    i++;
  if (i < out->nnodes && out->node[i] == status) {
    out->count[i]++;
    return;
  }
  if (out->nnodes == SF__TOPO_PAGE_NODES) {
    out->others++;
    return;
  }
  memmove(&out->node[i + 1], &out->node[i],
          (size_t)(out->nnodes - i) * sizeof out->node[0]);
  memmove(&out->count[i + 1], &out->count[i],
          (size_t)(out->nnodes - i) * sizeof out->count[0]);
  out->node[i] = status;
  out->count[i] = 1;
  out->nnodes++;
}

int sf__topo_mem_nodes(const void *p, size_t bytes, int samples,
                       sf__topo_pages *out)
{
  memset(out, 0, sizeof *out);
  if (p == NULL || bytes == 0 || samples <= 0)
    return 0;
  const long ps = sysconf(_SC_PAGESIZE);
  const uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
  const uintptr_t first = (uintptr_t)p / page,
                  last = ((uintptr_t)p + bytes - 1) / page;
  const uintptr_t pages = last - first + 1;
  const uintptr_t n = (uintptr_t)samples < pages ? (uintptr_t)samples : pages;
  enum { BATCH = 64 };
  void *addr[BATCH];
  int status[BATCH];
  for (uintptr_t i = 0; i < n;) {
    const uintptr_t k = n - i < BATCH ? n - i : BATCH;
    for (uintptr_t j = 0; j < k; j++) {
      /* sample s of n: page first + s (pages - 1) / (n - 1), both ends in */
      const uintptr_t s = i + j;
      const uintptr_t at = n > 1 ? s * (pages - 1) / (n - 1) : 0;
      addr[j] = (void *)((first + at) * page);
      status[j] = -ENOENT;
    }
#ifdef SYS_move_pages
    const long rc =
        syscall(SYS_move_pages, 0, (unsigned long)k, addr, NULL, status, 0);
#else
    const long rc = -1;
    errno = ENOSYS;
#endif
    if (rc < 0) {
      out->err = errno;
      return -out->err;
    }
    for (uintptr_t j = 0; j < k; j++)
      count_page(out, status[j]);
    out->sampled += (int)k;
    i += k;
  }
  return 0;
}
