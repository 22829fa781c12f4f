#include "plan/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/geometry.h"
#include "common/sys.h"

void sf__placement_free(sf__placement *L)
{
  free(L->nodeof);
  free(L->groupof);
  free(L->order);
  free(L->gfirst);
  free(L->core0);
  free(L->core1);
  free(L->lo);
  free(L->hi);
  free(L->reach0);
  free(L->reach);
  memset(L, 0, sizeof *L);
}

static int alloc_tables(sf__placement *L)
{
  const size_t P = (size_t)L->P;
  L->nodeof = malloc(P * sizeof *L->nodeof);
  L->groupof = malloc(P * sizeof *L->groupof);
  L->order = malloc(P * sizeof *L->order);
  L->gfirst = malloc(((size_t)L->ng + 1) * sizeof *L->gfirst);
  L->core0 = malloc(P * sizeof *L->core0);
  L->core1 = malloc(P * sizeof *L->core1);
  L->lo = malloc(P * sizeof *L->lo);
  L->hi = malloc(P * sizeof *L->hi);
  L->reach0 = malloc(P * sizeof *L->reach0);
  L->reach = malloc(P * sizeof *L->reach);
  return L->nodeof && L->groupof && L->order && L->gfirst && L->core0 &&
         L->core1 && L->lo && L->hi && L->reach0 && L->reach;
}

/* Orders the ranks by (group, node, rank): a counting sort over nodes. */
static int order_ranks(sf__placement *L)
{
  int *count = calloc((size_t)L->N + 1, sizeof *count);
  if (count == NULL)
    return 0;
  for (int r = 0; r < L->P; r++)
    count[L->nodeof[r] + 1]++;
  for (int j = 0; j < L->N; j++)
    count[j + 1] += count[j];
  /* Groups are runs of consecutive nodes, so node order is group order. */
  for (int r = 0; r < L->P; r++)
    L->order[count[L->nodeof[r]]++] = r;
  free(count);
  int g = 0;
  L->gfirst[0] = 0;
  for (int i = 0; i < L->P; i++) {
    const int r = L->order[i];
    L->groupof[r] = sf__split_owner(L->N, L->ng, L->nodeof[r]);
    while (g < L->groupof[r])
      L->gfirst[++g] = i;
  }
  while (g < L->ng)
    L->gfirst[++g] = L->P;
  return 1;
}

/* Floats of one channel in planes [0, z), 0 <= z <= Z (no overflow: below
 * the total, checked by sf__planes_make). */
static int64_t planes_below(const sf__planes *g, int64_t z)
{
  if (z >= g->z0[g->n])
    return g->below[g->n];
  const int k = sf__planes_run(g, z);
  return g->below[k] + (z - g->z0[k]) * g->yx[k][0] * g->yx[k][1];
}

/* Floats of one channel in planes [0, z) of the request's box (planes
 * when they are all of one size). */
static int64_t floats_below(const sf__placement_req *q, int64_t z)
{
  return q->planes != NULL ? planes_below(q->planes, z) : z;
}

/* Boundary i of the split of planes [a, b) into n ranges of at least one
 * plane each (boundary 0 is a, n is b), given boundary i - 1 at prev. With
 * planes of one size, the even split in planes (sf__split_begin); else the
 * first plane where the floats since a reach i / n of the range's, kept
 * after prev and before the planes the later ranges need. */
static int64_t split_at(const sf__placement_req *q, int64_t a, int64_t b, int n,
                        int i, int64_t prev)
{
  if (i == 0 || i == n || q->planes == NULL || q->planes->n <= 1)
    return a + sf__split_begin(b - a, n, i);
  const int64_t base = floats_below(q, a);
  const int64_t want = (floats_below(q, b) - base) * i; /* x n at the cut */
  int64_t lo = prev + 1, hi = b - (n - i);
  while (lo < hi) { /* the first z in [lo, hi] with enough, else hi */
    const int64_t mid = lo + (hi - lo) / 2;
    if ((floats_below(q, mid) - base) * n >= want)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* The start of node range j of a group with cuts: the cut nearest the
 * even split's boundary (Z * before / gs, in floats where planes differ),
 * from index lo to hi (inclusive); ties go to the lower cut. Returns the
 * index of the cut. */
static int nearest_cut(const sf__placement_req *q, int lo, int hi,
                       int64_t before, int64_t gs)
{
  /* |below(cut) * gs - below(Z) * before| is exact in 64 bits while a
   * channel's floats times the ranks stay below 2^63 (9e18: a 1.2 TB
   * suite has 3e10 floats per channel). */
  const int64_t want = floats_below(q, q->Z) * before;
  int c = lo;
  while (c < hi) {
    const int64_t here = floats_below(q, q->cuts[c]) * gs - want;
    const int64_t next = floats_below(q, q->cuts[c + 1]) * gs - want;
    if ((next < 0 ? -next : next) >= (here < 0 ? -here : here))
      break;
    c++;
  }
  return c;
}

/* Cores of the n ranks order[first .. first + n) of L: the split of
 * planes [a, b). */
static void split_cores(sf__placement *L, const sf__placement_req *q, int first,
                        int n, int64_t a, int64_t b)
{
  int64_t at = a;
  for (int i = 0; i < n; i++) {
    const int r = L->order[first + i];
    L->core0[r] = at;
    L->core1[r] = at = split_at(q, a, b, n, i + 1, at);
  }
}

/* The cores of group g: the even split of [0, Z) over its ranks, or with
 * cuts, node ranges beginning at cuts and each split evenly over its
 * node's ranks. */
static slabfeed_status group_cores(sf__placement *L, const sf__placement_req *q,
                                   int g, sf__err *e)
{
  const int first = L->gfirst[g], gs = L->gfirst[g + 1] - first;
  const int64_t Z = q->Z;
  if ((int64_t)gs > Z)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "group %d of %d has %d ranks but the box has only %lld "
                    "z-planes: every rank needs at least one plane (use fewer "
                    "ranks, or larger groups of nodes share less: fewer nodes "
                    "per group)",
                    g, L->ng, gs, (long long)Z);
  if (q->ncuts == 0) {
    split_cores(L, q, first, gs, 0, Z);
    return SLABFEED_OK;
  }
  const int n0 = L->nodeof[L->order[first]];
  const int nodes = L->nodeof[L->order[first + gs - 1]] - n0 + 1;
  if (nodes > q->ncuts)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "locality over a dataset of several volumes keeps every "
                    "volume on one node, but group %d has %d nodes and the "
                    "dataset only %d volume%s to place (fewer nodes per "
                    "group: group_nodes, or a larger node_memory; or no "
                    "locality)",
                    g, nodes, q->ncuts, q->ncuts == 1 ? "" : "s");
  int c = 0; /* the cut node j begins at */
  for (int i = 0, j = 0; i < gs; j++) {
    int k = i; /* the node's ranks: members i..k of the group */
    while (k + 1 < gs &&
           L->nodeof[L->order[first + k + 1]] == L->nodeof[L->order[first + i]])
      k++;
    const int next =
        k + 1 < gs
            ? nearest_cut(q, c + 1, q->ncuts - (nodes - j - 1), k + 1, gs)
            : q->ncuts;
    const int64_t a = q->cuts[c], b = next < q->ncuts ? q->cuts[next] : Z;
    const int n = k - i + 1;
    if (b - a < n)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "locality over a dataset of several volumes: node %d "
                      "of group %d runs %d ranks but holds only %lld "
                      "z-planes (the volumes from plane %lld): every rank "
                      "needs one (fewer ranks per node, or no locality)",
                      L->nodeof[L->order[first + i]], g, n, (long long)(b - a),
                      (long long)a);
    split_cores(L, q, first + i, n, a, b);
    c = next;
    i = k + 1;
  }
  return SLABFEED_OK;
}

slabfeed_status sf__placement_make(sf__placement *L, const sf__placement_req *q,
                                   int G, sf__err *e)
{
  const int P = q->P, N = q->N;
  memset(L, 0, sizeof *L);
  L->P = P;
  L->N = N;
  L->G = G;
  L->ng = N / G > 1 ? N / G : 1;
  L->Z = q->Z;
  if (!alloc_tables(L)) {
    sf__placement_free(L);
    return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the placement");
  }
  memcpy(L->nodeof, q->nodeof, (size_t)P * sizeof *q->nodeof);
  if (!order_ranks(L)) {
    sf__placement_free(L);
    return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the placement");
  }
  /* The smallest group sets the G reported. */
  L->G = N / L->ng;
  for (int g = 0; g < L->ng; g++) {
    if (group_cores(L, q, g, e) != SLABFEED_OK) {
      sf__placement_free(L);
      return e->status;
    }
    const int first = L->gfirst[g], gs = L->gfirst[g + 1] - first;
    for (int i = 0; i < gs; i++)
      L->lo[L->order[first + i]] = L->hi[L->order[first + i]] = q->halo;
    /* The z-range of each node of the group; without cuts, its last rank
     * keeps the planes a crop starting in the range reaches above it. */
    for (int i = 0; i < gs;) {
      int j = i;
      while (j + 1 < gs && L->nodeof[L->order[first + j + 1]] ==
                               L->nodeof[L->order[first + i]])
        j++;
      const int64_t a = L->core0[L->order[first + i]];
      const int64_t b = L->core1[L->order[first + j]];
      for (int k = i; k <= j; k++) {
        L->reach0[L->order[first + k]] = a;
        L->reach[L->order[first + k]] = b - a;
      }
      const int last = L->order[first + j];
      if (q->locality && q->ncuts == 0 && q->crop_z - 1 > L->hi[last])
        L->hi[last] = q->crop_z - 1;
      i = j + 1;
    }
  }
  return SLABFEED_OK;
}

int64_t sf__placement_planes(const sf__placement *L, int r)
{
  return L->core1[r] - L->core0[r] + L->lo[r] + L->hi[r];
}

int64_t sf__placement_first(const sf__placement *L, int r)
{
  return sf__pmod(L->core0[r] - L->lo[r], L->Z);
}

int sf__placement_owner(const sf__placement *L, int g, int64_t z, int64_t *end)
{
  /* The last member of the group whose core begins at or below z (cores
   * tile [0, Z) in the group's order). */
  int lo = L->gfirst[g], hi = L->gfirst[g + 1] - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (L->core0[L->order[mid]] <= z)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int r = L->order[lo];
  *end = L->core1[r];
  return r;
}

int sf__placement_reader(const sf__placement *L, int64_t z, int64_t *end)
{
  int64_t e0, ek;
  const int o = sf__placement_owner(L, 0, z, &e0);
  const int64_t a = L->core0[o], len = e0 - a;
  const int k = sf__split_owner(len, L->ng, z - a);
  const int64_t part_end = a + sf__split_begin(len, L->ng, k + 1);
  const int r = sf__placement_owner(L, k, z, &ek);
  *end = part_end < ek ? part_end : ek;
  return r;
}

int sf__planes_run(const sf__planes *g, int64_t z)
{
  return sf__last_at_or_below(g->z0, g->n, z);
}

slabfeed_status sf__planes_make(sf__planes *g, int n, const int64_t z0[],
                                const int64_t (*shape)[3], sf__err *e)
{
  memset(g, 0, sizeof *g);
  g->z0 = malloc(((size_t)n + 1) * sizeof *g->z0);
  g->yx = malloc(((size_t)n + 1) * sizeof *g->yx);
  g->below = malloc(((size_t)n + 1) * sizeof *g->below);
  if (g->z0 == NULL || g->yx == NULL || g->below == NULL) {
    sf__planes_free(g);
    return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the plane table");
  }
  int64_t sum = 0;
  for (int i = 0; i < n; i++) {
    const int64_t *yx = &shape[i][1];
    int64_t b;
    if (z0[i + 1] == z0[i])
      continue;
    if (!sf__prod4(z0[i + 1] - z0[i], yx[0], yx[1], 1, &b) ||
        !sf__add64(sum, b, &b)) {
      sf__planes_free(g);
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "the box's floats per channel overflow 64 bits");
    }
    if (g->n > 0 && g->yx[g->n - 1][0] == yx[0] &&
        g->yx[g->n - 1][1] == yx[1]) { /* the run before goes on */
      sum = b;
      continue;
    }
    g->z0[g->n] = z0[i];
    memcpy(g->yx[g->n], yx, sizeof g->yx[0]);
    g->below[g->n++] = sum;
    sum = b;
  }
  g->z0[g->n] = z0[n];
  g->below[g->n] = sum;
  return SLABFEED_OK;
}

slabfeed_status sf__planes_box(sf__planes *g, int64_t Z, int64_t Y, int64_t X,
                               sf__err *e)
{
  const int64_t z0[2] = {0, Z}, shape[1][3] = {{Z, Y, X}};
  return sf__planes_make(g, 1, z0, shape, e);
}

void sf__planes_free(sf__planes *g)
{
  free(g->z0);
  free(g->yx);
  free(g->below);
  memset(g, 0, sizeof *g);
}

int64_t sf__planes_span(const sf__planes *g, int64_t z, int64_t len)
{
  const int64_t Z = g->z0[g->n], all = g->below[g->n];
  const int64_t below = planes_below(g, z);
  int64_t turns, span = 0;
  const int64_t rest = len % Z, end = z + rest;
  if (!sf__mul64(len / Z, all, &turns))
    return -1;
  if (end <= Z)
    span = planes_below(g, end) - below;
  else /* around the end of the box, into its first planes */
    span = all - below + planes_below(g, end - Z);
  return sf__add64(turns, span, &span) ? span : -1;
}

int64_t sf__placement_node_bytes(const sf__placement *L, const sf__planes *g,
                                 int64_t chan_bytes)
{
  int64_t *node = calloc((size_t)L->N, sizeof *node);
  int64_t max = 0;
  if (node == NULL)
    return -1;
  for (int r = 0; r < L->P && max >= 0; r++) {
    const int64_t f = sf__planes_span(g, sf__placement_first(L, r),
                                      sf__placement_planes(L, r));
    int64_t b;
    if (f < 0 || !sf__mul64(f, chan_bytes, &b) ||
        !sf__add64(node[L->nodeof[r]], b, &node[L->nodeof[r]]))
      max = -1;
    else if (node[L->nodeof[r]] > max)
      max = node[L->nodeof[r]];
  }
  free(node);
  return max;
}

slabfeed_status sf__placement_choose(sf__placement *L,
                                     const sf__placement_req *q, int forced,
                                     uint64_t budget, int64_t chan_bytes,
                                     sf__err *e)
{
  const int N = q->N;
  if (forced > N)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: group_nodes %d but the job has %d node(s) "
                    "(-1 for all nodes)",
                    forced, N);
  if (forced > 0 || forced == -1)
    return sf__placement_make(L, q, forced > 0 ? forced : N, e);
  int last_ng = 0;
  for (int G = 1; G <= N; G++) {
    const int ng = N / G > 1 ? N / G : 1;
    if (ng == last_ng) /* the same groups as the G before */
      continue;
    last_ng = ng;
    sf__err probe;
    sf__err_clear(&probe);
    if (sf__placement_make(L, q, G, &probe) != SLABFEED_OK) {
      if (probe.status == SLABFEED_ERR_NOMEM) {
        *e = probe;
        return e->status;
      }
      continue; /* a group with more ranks than planes: larger groups */
    }
    const int64_t need = sf__placement_node_bytes(L, q->planes, chan_bytes);
    if (G == N || (need >= 0 && (uint64_t)need <= budget))
      return SLABFEED_OK;
    sf__placement_free(L);
  }
  /* Only reached when even one group of all nodes has too few planes. */
  return sf__placement_make(L, q, N, e);
}

uint64_t sf__placement_default_budget(uint64_t mem_total, int ranks)
{
  const uint64_t half = mem_total / 2, floor = mem_total / 8;
  const uint64_t reserve = (uint64_t)ranks << 31;
  return half > floor + reserve ? half - reserve : floor;
}

slabfeed_status slabfeed_plan_placement(int64_t Z, uint64_t plane_bytes,
                                        int ranks, int nodes, int group_nodes,
                                        uint64_t node_memory, int64_t halo,
                                        slabfeed_placement_plan *out)
{
  sf__err e;
  sf__err_clear(&e);
  if (out == NULL || Z < 1 || ranks < 1 || nodes < 1 || nodes > ranks ||
      halo < 0 || group_nodes < -1 || plane_bytes > INT64_MAX)
    return SLABFEED_ERR_ARG;
  int *nodeof = malloc((size_t)ranks * sizeof *nodeof);
  if (nodeof == NULL)
    return SLABFEED_ERR_NOMEM;
  /* Ranks in blocks by node, as srun and mpirun place them by default. */
  for (int r = 0; r < ranks; r++)
    nodeof[r] = (int)((int64_t)r * nodes / ranks);
  uint64_t budget = node_memory;
  if (budget == 0) {
    const uint64_t total = sf__meminfo("MemTotal");
    budget =
        total > 0
            ? sf__placement_default_budget(total, (ranks + nodes - 1) / nodes)
            : UINT64_MAX;
  }
  sf__placement L;
  /* Planes of one float, each taking plane_bytes. */
  sf__planes g;
  const sf__placement_req q = {ranks, nodes, nodeof, Z,    halo,
                               0,     1,     0,      NULL, &g};
  if (sf__planes_box(&g, Z, 1, 1, &e) == SLABFEED_OK &&
      sf__placement_choose(&L, &q, group_nodes, budget, (int64_t)plane_bytes,
                           &e) == SLABFEED_OK) {
    slabfeed_placement_plan p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    p.nodes = nodes;
    p.group_nodes = L.G;
    p.groups = L.ng;
    const int64_t need = sf__placement_node_bytes(&L, &g, (int64_t)plane_bytes);
    p.node_store_bytes = need < 0 ? UINT64_MAX : (uint64_t)need;
    p.budget = budget;
    p.fits = need >= 0 && (uint64_t)need <= budget;
    /* A crop's planes are uniform over the box: the share held outside the
     * node's range (a 1/G-th of the box) comes from other nodes. */
    p.remote_fraction = L.ng < nodes ? 1.0 - (double)L.ng / nodes : 0.0;
    sf__sized_write(out, &p, sizeof p, sizeof(size_t));
    sf__placement_free(&L);
  }
  sf__planes_free(&g);
  free(nodeof);
  return e.status;
}
