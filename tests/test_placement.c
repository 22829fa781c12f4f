/* The placement (src/placement.c) on its own, over rank -> node maps no
 * machine here has: interleaved ranks, uneven groups, more groups than
 * planes per slab. Every group's cores tile the box, a node's ranks hold
 * one contiguous range, every plane is read exactly once and by a rank
 * holding it, and the budget picks the smallest group that fits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/geometry.h"
#include "plan/placement.h"

static void check_layout(int P, int N, int interleaved, int64_t Z, int G)
{
  int *nodeof = malloc((size_t)P * sizeof *nodeof);
  for (int r = 0; r < P; r++)
    nodeof[r] = interleaved ? r % N : (int)((int64_t)r * N / P);
  sf__placement L;
  sf__err e;
  sf__err_clear(&e);
  const sf__placement_req q = {P, N, nodeof, Z, 1, 1, 5, 0, NULL, NULL};
  CHECK(sf__placement_make(&L, &q, G, &e) == SLABFEED_OK,
        "P %d N %d Z %lld G %d: %s", P, N, (long long)Z, G, e.msg);
  if (e.status != SLABFEED_OK) {
    free(nodeof);
    return;
  }
  const int ng = N / G > 1 ? N / G : 1;
  CHECK(L.ng == ng && L.G == N / ng, "groups %d (G %d)", L.ng, L.G);
  int64_t *reads = calloc((size_t)Z, sizeof *reads);
  for (int g = 0; g < L.ng; g++) {
    /* cores tile [0, Z) in order; a node's ranks are adjacent */
    int64_t z = 0;
    for (int i = L.gfirst[g]; i < L.gfirst[g + 1]; i++) {
      const int r = L.order[i];
      CHECK(L.groupof[r] == g && L.core0[r] == z && L.core1[r] > z,
            "group %d member %d core [%lld,%lld) after %lld", g, i,
            (long long)L.core0[r], (long long)L.core1[r], (long long)z);
      CHECK(L.reach0[r] <= L.core0[r] && L.core1[r] <= L.reach0[r] + L.reach[r],
            "rank %d core inside its node's range", r);
      z = L.core1[r];
      if (i > L.gfirst[g])
        CHECK(nodeof[L.order[i - 1]] <= nodeof[r], "ranks ordered by node");
    }
    CHECK_EQ(z, Z, "group %d covers the planes", g);
    /* each group's node count is N / ng or one more */
    int first = nodeof[L.order[L.gfirst[g]]],
        last = nodeof[L.order[L.gfirst[g + 1] - 1]];
    CHECK(last - first + 1 == N / ng || last - first + 1 == N / ng + 1,
          "group %d has %d nodes", g, last - first + 1);
  }
  for (int64_t z = 0; z < Z;) {
    int64_t end;
    const int r = sf__placement_reader(&L, z, &end);
    CHECK(end > z && L.core0[r] <= z && end <= L.core1[r],
          "plane %lld read by a holder", (long long)z);
    for (int64_t k = z; k < end && k < Z; k++)
      reads[k]++;
    z = end > z ? end : z + 1;
  }
  int64_t bad = 0;
  for (int64_t z = 0; z < Z; z++)
    bad += reads[z] != 1;
  CHECK(bad == 0, "%lld planes not read exactly once", (long long)bad);
  /* locality: the node's last rank keeps crop - 1 = 4 planes above */
  for (int r = 0; r < P; r++)
    if (L.core1[r] == L.reach0[r] + L.reach[r])
      CHECK(L.hi[r] == 4 && L.lo[r] == 1, "rank %d halo %lld/%lld", r,
            (long long)L.lo[r], (long long)L.hi[r]);
  free(reads);
  free(nodeof);
  sf__placement_free(&L);
}

static void check_choose(void)
{
  /* 8 nodes of 2 ranks, 64 planes of 1 MB: a node holds 64/G MB */
  int nodeof[16];
  for (int r = 0; r < 16; r++)
    nodeof[r] = r / 2;
  sf__planes g;
  const sf__placement_req q = {16, 8, nodeof, 64, 0, 0, 1, 0, NULL, &g};
  const struct {
    uint64_t budget;
    int forced, want;
  } cases[] = {{64 << 20, 0, 1}, {32 << 20, 0, 2}, {20 << 20, 0, 4},
               {9 << 20, 0, 8},  {1 << 20, 0, 8},  {1 << 30, 4, 4},
               {1, -1, 8}};
  sf__err e;
  sf__err_clear(&e);
  CHECK(sf__planes_box(&g, 64, 512, 512, &e) == SLABFEED_OK, "box: %s", e.msg);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    sf__placement L;
    sf__err_clear(&e);
    CHECK(sf__placement_choose(&L, &q, cases[i].forced, cases[i].budget, 4,
                               &e) == SLABFEED_OK,
          "choose: %s", e.msg);
    CHECK_EQ(L.G, cases[i].want, "budget %llu forced %d: G",
             (unsigned long long)cases[i].budget, cases[i].forced);
    sf__placement_free(&L);
  }
  sf__placement L;
  sf__err_clear(&e);
  CHECK(sf__placement_choose(&L, &q, 9, 0, 4, &e) == SLABFEED_ERR_ARG &&
            strstr(e.msg, "group_nodes 9") != NULL,
        "G above the node count refused: %s", e.msg);
  sf__planes_free(&g);
  CHECK(sf__placement_default_budget((uint64_t)256 << 30, 4) ==
            ((uint64_t)128 << 30) - ((uint64_t)8 << 30),
        "default budget: half of 256 GiB less 2 GiB per rank");
}

/* Locality over several volumes: node ranges begin at volume starts, the
 * one nearest the even split (ties to the lower), each node's ranks split
 * its range evenly, no node keeps planes above its range; a group with
 * more nodes than volumes is refused. */
static void check_cuts(void)
{
  /* 3 nodes of 1, 2 and 1 ranks; 7 volumes: starts 0 10 20 25 40 50 55,
   * 64 planes. Even boundaries at 16 (1/4) and 48 (3/4): cuts 20 and 50. */
  const int nodeof[4] = {0, 1, 1, 2};
  const int64_t cuts[7] = {0, 10, 20, 25, 40, 50, 55};
  const sf__placement_req q = {4, 3, nodeof, 64, 0, 1, 5, 7, cuts, NULL};
  sf__placement L;
  sf__err e;
  sf__err_clear(&e);
  CHECK(sf__placement_make(&L, &q, 3, &e) == SLABFEED_OK, "cuts: %s", e.msg);
  if (e.status != SLABFEED_OK)
    return;
  const int64_t want[4][2] = {{0, 20}, {20, 35}, {35, 50}, {50, 64}};
  for (int r = 0; r < 4; r++) {
    CHECK(L.core0[r] == want[r][0] && L.core1[r] == want[r][1] &&
              L.hi[r] == 0 && L.lo[r] == 0,
          "rank %d core [%lld, %lld) halo %lld/%lld, want [%lld, %lld)", r,
          (long long)L.core0[r], (long long)L.core1[r], (long long)L.lo[r],
          (long long)L.hi[r], (long long)want[r][0], (long long)want[r][1]);
    int64_t end;
    for (int64_t z = want[r][0]; z < want[r][1]; z++)
      CHECK(sf__placement_owner(&L, 0, z, &end) == r && end == want[r][1],
            "owner of plane %lld", (long long)z);
  }
  CHECK(L.reach0[1] == 20 && L.reach[1] == 30 && L.reach0[2] == 20,
        "node 1's range [20, 50)");
  sf__placement_free(&L);
  /* A tie (even boundary 32 between cuts 25 and 39) goes to the lower. */
  const int nodeof2[2] = {0, 1};
  const int64_t tie[3] = {0, 25, 39};
  const sf__placement_req t = {2, 2, nodeof2, 64, 0, 1, 5, 3, tie, NULL};
  CHECK(sf__placement_make(&L, &t, 2, &e) == SLABFEED_OK && L.core1[0] == 25,
        "tie: node 0 ends at %lld", (long long)L.core1[0]);
  sf__placement_free(&L);
  /* Two volumes, three nodes in one group: refused; in groups of one
   * node (G = 1) each node holds both. */
  const int64_t two[2] = {0, 30};
  const int n3[3] = {0, 1, 2};
  const sf__placement_req f3 = {3, 3, n3, 64, 0, 1, 5, 2, two, NULL};
  CHECK(
      sf__placement_make(&L, &f3, 3, &e) == SLABFEED_ERR_ARG &&
          strstr(e.msg, "group 0 has 3 nodes and the dataset only 2 volumes") !=
              NULL,
      "more nodes than volumes refused: %s", e.msg);
  sf__err_clear(&e);
  CHECK(sf__placement_make(&L, &f3, 1, &e) == SLABFEED_OK && L.ng == 3 &&
            L.reach[0] == 64,
        "groups of one node: %s", e.msg);
  sf__placement_free(&L);
}

/* Plane sizes per volume: sf__planes_span against a plane-by-plane sum,
 * for every start and lengths of up to three turns, runs of no plane left
 * out; and a store of mixed plane sizes chooses its group from the bytes
 * it holds, not from its largest plane. */
static void check_planes(void)
{
  const int64_t z0[5] = {0, 3, 3, 8, 10};
  const int64_t yx[4][3] = {{3, 4, 5}, {0, 9, 9}, {5, 2, 3}, {2, 6, 1}};
  sf__planes g;
  sf__err e;
  sf__err_clear(&e);
  CHECK(sf__planes_make(&g, 4, z0, yx, &e) == SLABFEED_OK, "make: %s", e.msg);
  CHECK(g.n == 3 && g.below[3] == 3 * 20 + 5 * 6 + 2 * 6,
        "3 runs (the empty one left out), %lld floats",
        (long long)g.below[g.n]);
  int64_t area[10];
  for (int64_t z = 0; z < 10; z++)
    area[z] = z < 3 ? 20 : z < 8 ? 6 : 6;
  int bad = 0;
  for (int64_t z = 0; z < 10; z++) {
    const int k = sf__planes_run(&g, z);
    bad += !(g.z0[k] <= z && z < g.z0[k + 1]) ||
           g.yx[k][0] * g.yx[k][1] != area[z];
    for (int64_t len = 0; len <= 30; len++) {
      int64_t want = 0;
      for (int64_t i = 0; i < len; i++)
        want += area[(z + i) % 10];
      bad += sf__planes_span(&g, z, len) != want;
    }
  }
  CHECK(bad == 0, "%d plane spans or runs wrong", bad);
  sf__planes_free(&g);

  /* 2 nodes of 1 rank, volumes of 8 planes of 64^2 and 8 planes of 8^2
   * floats, a byte each: padded to 64^2 they would take 64 KiB a node at
   * G = 1; at their own sizes 32768 + 512 bytes, so a budget of 40 KiB
   * keeps one node per group. */
  const int nodeof[2] = {0, 1};
  const int64_t mz[3] = {0, 8, 16}, myx[2][3] = {{8, 64, 64}, {8, 8, 8}};
  CHECK(sf__planes_make(&g, 2, mz, myx, &e) == SLABFEED_OK, "make: %s", e.msg);
  const sf__placement_req q = {2, 2, nodeof, 16, 0, 0, 1, 0, NULL, &g};
  sf__placement L;
  CHECK(sf__placement_choose(&L, &q, 0, 40 << 10, 1, &e) == SLABFEED_OK,
        "choose: %s", e.msg);
  CHECK(L.G == 1 && sf__placement_node_bytes(&L, &g, 1) == 32768 + 512,
        "G %d, node store %lld bytes (want G 1, 33280)", L.G,
        (long long)sf__placement_node_bytes(&L, &g, 1));
  sf__placement_free(&L);
  sf__planes_free(&g);
}

/* The floats of one channel in rank r's core. */
static int64_t core_floats(const sf__placement *L, const sf__planes *g, int r)
{
  return sf__planes_span(g, L->core0[r], L->core1[r] - L->core0[r]);
}

/* Planes of mixed sizes are split in bytes: on a group of n ranks every
 * core holds one plane at least, the cores tile the box, and no core is
 * further from 1/n of the box's floats than its largest plane; planes of
 * one size (one run) split as sf__split_begin does. With cuts, a node
 * range is measured in floats: a small first volume does not pull the
 * node boundary to it. */
static void check_bytes(void)
{
  /* 8 planes of 4 x 4, 8 of 16 x 16, 3 of 2 x 2: 128 + 2048 + 12 floats */
  const int64_t z0[4] = {0, 8, 16, 19},
                yx[3][3] = {{8, 4, 4}, {8, 16, 16}, {3, 2, 2}};
  sf__planes g;
  sf__err e;
  sf__err_clear(&e);
  CHECK(sf__planes_make(&g, 3, z0, yx, &e) == SLABFEED_OK, "make: %s", e.msg);
  const int nodeof[7] = {0, 1, 2, 3, 4, 5, 6};
  for (int n = 1; n <= 7; n++) {
    const sf__placement_req q = {n, n, nodeof, 19, 0, 0, 1, 0, NULL, &g};
    sf__placement L;
    CHECK(sf__placement_make(&L, &q, n, &e) == SLABFEED_OK, "%d ranks: %s", n,
          e.msg);
    if (e.status != SLABFEED_OK)
      continue;
    int64_t at = 0;
    for (int r = 0; r < n; r++) {
      const int64_t f = core_floats(&L, &g, r), share = 2188 / n;
      CHECK(L.core0[r] == at && L.core1[r] > at,
            "%d ranks: rank %d [%lld, %lld)", n, r, (long long)L.core0[r],
            (long long)L.core1[r]);
      CHECK(f - share <= 257 && share - f <= 257,
            "%d ranks: rank %d holds %lld floats, 1/n is %lld", n, r,
            (long long)f, (long long)share);
      at = L.core1[r];
    }
    CHECK(at == 19, "%d ranks: cores end at %lld", n, (long long)at);
    sf__placement_free(&L);
  }
  /* 4 ranks: the floats reach 1/4 (547) at plane 10, 1/2 at 12, 3/4 at 14
   * (by planes it would be 0, 5, 10, 15: 80, 560, 1280 and 268 floats). */
  const sf__placement_req q4 = {4, 4, nodeof, 19, 0, 0, 1, 0, NULL, &g};
  sf__placement L;
  CHECK(sf__placement_make(&L, &q4, 4, &e) == SLABFEED_OK && L.core1[0] == 10 &&
            L.core1[1] == 12 && L.core1[2] == 14,
        "4 ranks: boundaries %lld %lld %lld, want 10 12 14",
        (long long)L.core1[0], (long long)L.core1[1], (long long)L.core1[2]);
  sf__placement_free(&L);
  sf__planes_free(&g);
  /* Locality over volumes of 4 and 12 planes of 16 x 16 and 6 of 1 x 1,
   * cut at 0, 4, 16 for 2 nodes: by planes the half (11) is nearest cut 16
   * (node 0 would hold 4096 floats, node 1 6); by floats the half (2051)
   * is nearest cut 4 (1024 below it, against 4096). */
  const int64_t lz[4] = {0, 4, 16, 22},
                lyx[3][3] = {{4, 16, 16}, {12, 16, 16}, {6, 1, 1}};
  CHECK(sf__planes_make(&g, 3, lz, lyx, &e) == SLABFEED_OK && g.n == 2,
        "two runs (the two of 16 x 16 merged): %s", e.msg);
  const int64_t cuts[3] = {0, 4, 16};
  const sf__placement_req qc = {2, 2, nodeof, 22, 0, 1, 3, 3, cuts, &g};
  CHECK(sf__placement_make(&L, &qc, 2, &e) == SLABFEED_OK, "cuts: %s", e.msg);
  if (e.status == SLABFEED_OK) {
    const int64_t f0 = core_floats(&L, &g, 0), f1 = core_floats(&L, &g, 1);
    CHECK(L.core1[0] == 4 && f0 == 1024 && f1 == 3078,
          "cuts: node 0 ends at %lld (%lld / %lld floats), want 4",
          (long long)L.core1[0], (long long)f0, (long long)f1);
    sf__placement_free(&L);
  }
  sf__planes_free(&g);
  /* One size: the even split in planes, as without a plane table. */
  CHECK(sf__planes_box(&g, 10, 3, 3, &e) == SLABFEED_OK, "box: %s", e.msg);
  const sf__placement_req qu = {4, 4, nodeof, 10, 0, 0, 1, 0, NULL, &g};
  CHECK(sf__placement_make(&L, &qu, 4, &e) == SLABFEED_OK, "one size: %s",
        e.msg);
  for (int r = 0; r < 4 && e.status == SLABFEED_OK; r++)
    CHECK(L.core0[r] == sf__split_begin(10, 4, r) &&
              L.core1[r] == sf__split_begin(10, 4, r + 1),
          "one size: rank %d [%lld, %lld)", r, (long long)L.core0[r],
          (long long)L.core1[r]);
  if (e.status == SLABFEED_OK)
    sf__placement_free(&L);
  sf__planes_free(&g);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  check_layout(1, 1, 0, 7, 1);
  check_layout(12, 4, 0, 50, 1); /* 4 full replicas */
  check_layout(12, 4, 1, 50, 2); /* interleaved ranks */
  check_layout(15, 5, 0, 31, 2); /* groups of 2 and 3 nodes */
  check_layout(16, 8, 1, 16, 3); /* one plane per rank in a group */
  check_choose();
  check_planes();
  check_bytes();
  check_cuts();
  /* a group with more ranks than planes is refused */
  int nodeof[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  sf__placement L;
  sf__err e;
  sf__err_clear(&e);
  const sf__placement_req q = {8, 8, nodeof, 3, 0, 0, 1, 0, NULL, NULL};
  CHECK(sf__placement_make(&L, &q, 8, &e) == SLABFEED_ERR_ARG &&
            strstr(e.msg, "8 ranks but the box has only 3") != NULL,
        "too few planes refused: %s", e.msg);
  return check_finish("unit.placement");
}
