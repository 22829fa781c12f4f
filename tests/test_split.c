/* The split of a crop into pieces by holding rank (src/batch.c), brute
 * force over every small placement (1-8 ranks, every node count,
 * blocked and interleaved ranks, every group size, halos 0-3, crops of
 * every depth, locality on and off), every viewer and every z origin:
 * the pieces tile the crop, each names planes its holder keeps, the count
 * stays within sf__batch_max_pieces, no piece crosses nodes when a rank of
 * the viewer's node keeps its planes, and in locality mode no crop whose
 * origin lies in the viewer's node range needs another node at all.
 * Locality over datasets of 2-4 volumes (node ranges cut at volume
 * starts), of one plane size and of mixed ones (ranks split in bytes):
 * every volume lies on one node of each group, and no crop of a volume
 * of the viewer's node needs another node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/batch.h"
#include "check.h"
#include "common/geometry.h"
#include "io/suite.h"

static int64_t bad_tile, bad_plane, bad_count, bad_remote, bad_local,
    bad_volume, cases;

/* 1 when the planes of volume [a, b) all lie on one node in every group. */
static int volume_on_one_node(const sf__placement *L, int64_t a, int64_t b)
{
  for (int g = 0; g < L->ng; g++) {
    int64_t end;
    const int first = sf__placement_owner(L, g, a, &end);
    for (int64_t z = a; z < b; z++)
      if (L->nodeof[sf__placement_owner(L, g, z, &end)] != L->nodeof[first])
        return 0;
  }
  return 1;
}

static int node_keeps(const sf__store *s, int v, int64_t z)
{
  for (int r = 0; r < s->size; r++)
    if (s->L.nodeof[r] == s->L.nodeof[v] &&
        s->L.groupof[r] == s->L.groupof[v] &&
        sf__pmod(z - sf__placement_first(&s->L, r), s->shape[0]) <
            sf__placement_planes(&s->L, r))
      return 1;
  return 0;
}

/* nv > 1: a dataset of nv volumes of about Z / nv planes (locality only);
 * mixed: volume i's planes are 4 (i + 1) squared, so the ranks split the
 * planes in bytes (uneven cores). */
static void one_layout(int P, int N, int inter, int G, int64_t Z, int64_t halo,
                       int64_t cz, int locality, int nv, int mixed)
{
  int nodeof[8];
  for (int r = 0; r < P; r++)
    nodeof[r] = inter ? r % N : (int)((int64_t)r * N / P);
  int64_t z0[5], shape[4][3];
  for (int i = 0; i <= nv; i++)
    z0[i] = sf__split_begin(Z, nv, i);
  int64_t runs[4][3]; /* the store's plane sizes */
  for (int i = 0; i < nv; i++) {
    shape[i][0] = runs[i][0] = z0[i + 1] - z0[i];
    shape[i][1] = shape[i][2] = 4;
    runs[i][1] = runs[i][2] = mixed ? 4 * (i + 1) : 4;
  }
  sf__suite suite = {nv, NULL, z0, shape, NULL, 0, NULL};
  if (nv > 1 && cz > Z / nv)
    return; /* a volume below the crop: refused at open */
  sf__store s;
  memset(&s, 0, sizeof s);
  sf__err e;
  sf__err_clear(&e);
  sf__planes g;
  if (sf__planes_make(&g, nv, z0, (const int64_t(*)[3])runs, &e) !=
      SLABFEED_OK) {
    bad_plane++;
    return;
  }
  const sf__placement_req q = {P,        N,  nodeof,          Z,  halo,
                               locality, cz, nv > 1 ? nv : 0, z0, &g};
  const slabfeed_status made = sf__placement_make(&s.L, &q, G, &e);
  sf__planes_free(&g);
  if (made != SLABFEED_OK)
    return; /* more ranks than planes in a group, or nodes than volumes */
  for (int i = 0; nv > 1 && i < nv; i++)
    bad_volume += !volume_on_one_node(&s.L, z0[i], z0[i + 1]);
  s.size = P;
  s.shape[0] = Z;
  s.shape[1] = s.shape[2] = 4;
  s.ndsets = 1;
  s.channels[0] = 1;
  sf__batch_plan b;
  memset(&b, 0, sizeof b);
  b.store = &s;
  b.suite = nv > 1 ? &suite : NULL;
  b.crop[0] = cz;
  b.crop[1] = b.crop[2] = 4;
  const int maxp = sf__batch_max_pieces(&b);
  sf__piece *pc = malloc((size_t)(4 * maxp + 64) * sizeof *pc);
  sf__zrun *zr = malloc((size_t)(4 * maxp + 64) * sizeof *zr);
  for (int v = 0; v < P; v++)
    for (int64_t z = 0; z < Z; z++) {
      const int64_t o[3] = {z, 0, 0};
      const int np = sf__batch_split(&b, v, o, pc, zr);
      cases++;
      bad_count += np > maxp;
      int64_t covered = 0;
      int remote = 0;
      /* the crop's planes wrap inside the origin's volume */
      const int vol = nv > 1 ? sf__suite_of(&suite, z) : 0;
      const int64_t vb = nv > 1 ? z0[vol] : 0, vn = nv > 1 ? shape[vol][0] : Z;
      for (int k = 0; k < np; k++) {
        const sf__piece *p = &pc[k];
        const int64_t held = sf__placement_planes(&s.L, p->src);
        covered += p->n[0];
        bad_plane += p->q < 0 || p->q + p->n[0] > held;
        const int far = nodeof[p->src] != nodeof[v];
        remote |= far;
        for (int64_t t = 0; t < p->n[0]; t++) {
          const int64_t want = vb + sf__pmod(z - vb + p->d[0] + t, vn);
          bad_plane +=
              sf__pmod(sf__placement_first(&s.L, p->src) + p->q + t, Z) != want;
          bad_remote += far && node_keeps(&s, v, want);
        }
      }
      bad_tile += covered != cz;
      const int64_t a = s.L.reach0[v], n = s.L.reach[v];
      if (locality && z >= a && z < a + n)
        bad_local += remote;
    }
  free(pc);
  free(zr);
  sf__placement_free(&s.L);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  for (int P = 1; P <= 8; P++)
    for (int N = 1; N <= P; N++)
      for (int inter = 0; inter < 2; inter++)
        for (int G = 1; G <= N; G++)
          for (int64_t Z = P; Z <= P + 9; Z += 3)
            for (int64_t halo = 0; halo <= 3; halo++)
              for (int64_t cz = 1; cz <= Z; cz += 2)
                for (int loc = 0; loc < 2; loc++)
                  for (int nv = 1; nv <= (loc ? 4 : 1); nv++)
                    for (int mixed = 0; mixed <= (nv > 1); mixed++)
                      one_layout(P, N, inter, G, Z, halo, cz, loc, nv, mixed);
  printf("unit.split: %lld (placement, viewer, origin) cases\n",
         (long long)cases);
  CHECK(bad_tile == 0, "%lld crops not tiled by their pieces",
        (long long)bad_tile);
  CHECK(bad_plane == 0, "%lld pieces name planes their holder lacks",
        (long long)bad_plane);
  CHECK(bad_count == 0, "%lld splits above sf__batch_max_pieces",
        (long long)bad_count);
  CHECK(bad_remote == 0,
        "%lld planes fetched from another node while the viewer's node "
        "keeps them",
        (long long)bad_remote);
  CHECK(bad_local == 0,
        "%lld locality crops (origin in the node's range) need another node",
        (long long)bad_local);
  CHECK(bad_volume == 0,
        "%lld volumes split between nodes by locality's node cuts",
        (long long)bad_volume);
  return check_finish("unit.split");
}
