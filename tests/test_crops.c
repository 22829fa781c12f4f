/* Crops from the loader (host path) against an independent serial read of
 * the whole file and the DESIGN formulas written out here: periodic wrap on
 * every axis, slab-crossing crops, both file layouts, input plus target,
 * vector groups, all 48 symmetry ids, every dtype and output layout; for
 * every placement the environment asks for (SLABFEED_RANK_PER_NODE,
 * SLABFEED_GROUP_NODES, SF_TEST_LOCALITY=1), with the slab of each rank and
 * how the pieces travel checked against the placement worked out here. */
#include "common/convert.h"
#include "testutil.h"

static int rank, size;

/* This rank's place, worked out from the documented rules: groups of
 * consecutive nodes, the group's ranks splitting the box. */
typedef struct place {
  int rpn, G, locality;
  int gs, idx; /* ranks in this rank's group, index in it */
} place;

static void find_place(place *p)
{
  const char *g = getenv(SLABFEED_ENV_GROUP_NODES);
  const char *loc = getenv("SF_TEST_LOCALITY");
  const int nodes = p->rpn ? size : 1;
  const int want = g != NULL ? atoi(g) : 0;
  /* 0 (the budget) gives 1 node per group for these small boxes */
  p->G = want == -1 ? nodes : want == 0 ? 1 : want;
  p->locality = loc != NULL && loc[0] == '1';
  const int ng = nodes / p->G > 1 ? nodes / p->G : 1;
  p->G = nodes / ng; /* the smallest group */
  if (!p->rpn) {
    p->gs = size;
    p->idx = rank;
    return;
  }
  for (int k = 0; k < ng; k++) {
    int64_t a, b;
    slabfeed_slab_plan(nodes, ng, k, &a, &b);
    if (rank >= a && rank < b) {
      p->gs = (int)(b - a);
      p->idx = rank - (int)a;
    }
  }
}

typedef struct tcase {
  const char *tag;
  slabfeed_file_layout layout;
  int chunked, f16file;
  int64_t crop[3];
  slabfeed_symmetries sym;
  slabfeed_dtype dtype;
  slabfeed_out_layout out;
  int halo;
  int min_samples; /* global samples to check */
} tcase;

static uint32_t bits_of(float v, slabfeed_dtype d)
{
  return d == SLABFEED_DTYPE_F32   ? sf__f32_bits(v)
         : d == SLABFEED_DTYPE_F16 ? sf__f32_to_f16(v)
                                   : sf__f32_to_bf16(v);
}

static uint32_t bits_at(const slabfeed_tensor *t, int64_t i)
{
  if (t->dtype == SLABFEED_DTYPE_F32)
    return ((const uint32_t *)t->data)[i];
  return ((const uint16_t *)t->data)[i];
}

static void run_case(const tcase *t, const place *pl)
{
  const int rpn = pl->rpn;
  const int64_t N[3] = {13, 11, 9};
  char path[96];
  snprintf(path, sizeof path, "crops_np%d_%s.h5", size, t->tag);
  if (make_file(path, N[0], N[1], N[2], t->layout, t->chunked, t->f16file, 1) !=
      0)
    return;
  const int vin[1][3] = {{1, 2, 3}}, vtg[1][3] = {{3, 1, 2}};
  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = path;
  c.input = "Nbody";
  c.target = "Hydro";
  memcpy(c.crop, t->crop, sizeof c.crop);
  c.batch = 3;
  c.seed = 99;
  c.symmetries = t->sym;
  c.dtype = t->dtype;
  c.out_layout = t->out;
  c.halo = t->halo;
  c.prefetch = 2;
  c.n_input_vectors = 1;
  memcpy(c.input_vectors, vin, sizeof vin);
  c.n_target_vectors = 1;
  memcpy(c.target_vectors, vtg, sizeof vtg);
  c.locality = pl->locality;
  char err[1024];
  slabfeed_loader *l = NULL;
  const slabfeed_status st =
      slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err);
  /* SF_TEST_SELFCHECK_OK=1: the run forces a transfer pattern an MPI may
   * get wrong (SLABFEED_TEST_FORCE_RGET); the open's self-check may then
   * refuse, else every crop must be right: never a silent wrong crop. */
  if (st == SLABFEED_ERR_MPI && getenv("SF_TEST_SELFCHECK_OK") != NULL &&
      strstr(err, "self-check of transfers between nodes failed") != NULL) {
    if (rank == 0)
      printf("  %-10s refused by the self-check: %s\n", t->tag, err);
    return;
  }
  CHECK(st == SLABFEED_OK, "%s: open: %s", t->tag, err);
  if (st != SLABFEED_OK)
    return;
  /* Both reads always run (no && short cut), so both are initialised for
   * whole_free even when the first fails. */
  whole w[2];
  const int cl = t->layout == SLABFEED_LAYOUT_CL;
  const int read_in = whole_read(path, "Nbody", cl, &w[0]);
  const int read_tg = whole_read(path, "Hydro", cl, &w[1]);
  CHECK(read_in == 0 && read_tg == 0, "independent read of %s", path);

  const int steps = (t->min_samples + size * c.batch - 1) / (size * c.batch);
  /* This rank's slab in its group, and the z-range its origins come from
   * in locality mode (its node's range: its slab, or the box on one node). */
  int64_t z0, z1;
  slabfeed_slab_plan(N[0], pl->gs, pl->idx, &z0, &z1);
  const int64_t lz0 = rpn ? z0 : 0, lz1 = rpn ? z1 : N[0];
  int outside = 0;
  int64_t bad = 0, checked = 0;
  int seen[48] = {0}, wraps[3] = {0, 0, 0}, crosses = 0;
  for (int s = 0; s < steps; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK) {
      CHECK(0, "%s: slabfeed_next: %s", t->tag, slabfeed_last_error(l));
      break;
    }
    for (int d = 0; d < 2; d++) {
      const slabfeed_tensor *ten = d == 0 ? &b.input : &b.target;
      const int64_t C = d == 0 ? 4 : 5;
      const int ncdhw = t->out == SLABFEED_OUT_NCDHW;
      CHECK(ten->ndim == 5 && ten->shape[0] == c.batch &&
                ten->shape[ncdhw ? 1 : 4] == C,
            "tensor shape");
      for (int bi = 0; bi < c.batch; bi++) {
        const int64_t *o = &b.origin[3 * bi];
        const int g = b.symmetry[bi];
        if (d == 0) {
          seen[g] = 1;
          for (int a = 0; a < 3; a++)
            wraps[a] += o[a] + t->crop[a] > N[a];
          outside += pl->locality && (o[0] < lz0 || o[0] >= lz1);
          /* planes of more than one rank's slab of the group */
          int owners = 0, last = -1;
          for (int64_t k = 0; k < t->crop[0]; k++) {
            const int64_t z = (o[0] + k) % N[0];
            int r = 0;
            for (; r < pl->gs; r++) {
              int64_t a0, a1;
              slabfeed_slab_plan(N[0], pl->gs, r, &a0, &a1);
              if (z >= a0 && z < a1)
                break;
            }
            owners += r != last;
            last = r;
          }
          crosses += owners > 1;
        }
        int64_t e[3];
        for (int a = 0; a < 3; a++)
          e[a] = t->crop[sym_perms[g % 6][a]];
        for (int64_t k = 0; k < C; k++)
          for (int64_t i0 = 0; i0 < e[0]; i0++)
            for (int64_t i1 = 0; i1 < e[1]; i1++)
              for (int64_t i2 = 0; i2 < e[2]; i2++) {
                const int64_t i[3] = {i0, i1, i2};
                int src;
                const float v = sym_value(&w[d], N, t->crop, d == 0 ? vin : vtg,
                                          1, (int)k, i, o, g, &src);
                const int64_t at =
                    bi * ten->strides[0] +
                    (ncdhw ? k * ten->strides[1] + i0 * ten->strides[2] +
                                 i1 * ten->strides[3] + i2 * ten->strides[4]
                           : i0 * ten->strides[1] + i1 * ten->strides[2] +
                                 i2 * ten->strides[3] + k * ten->strides[4]);
                const int ok = bits_at(ten, at) == bits_of(v, t->dtype);
                if (!ok && bad < 3)
                  fprintf(stderr,
                          "[rank %d] %s: d%d b%d k%lld i(%lld,%lld,%lld) "
                          "o(%lld,%lld,%lld) g%d\n",
                          rank, t->tag, d, bi, (long long)k, (long long)i0,
                          (long long)i1, (long long)i2, (long long)o[0],
                          (long long)o[1], (long long)o[2], g);
                bad += !ok;
                checked++;
              }
      }
    }
  }
  CHECK(bad == 0, "%s: %lld of %lld values differ", t->tag, (long long)bad,
        (long long)checked);

  slabfeed_stats stats = SLABFEED_STATS_INIT;
  slabfeed_stats_get(l, &stats);
  /* Locality: the last rank of each node keeps crop - 1 planes above. */
  const int last_of_node = rpn || z1 == N[0];
  const int64_t above = pl->locality && last_of_node && t->crop[0] - 1 > t->halo
                            ? t->crop[0] - 1
                            : t->halo;
  const int64_t planes_held = z1 - z0 + t->halo + above;
  CHECK_EQ(stats.slab_bytes, (uint64_t)(9 * planes_held * N[1] * N[2] * 4),
           "%s: slab store holds slab + halo only", t->tag);
  CHECK(stats.group_nodes == (rpn ? pl->G : 1) &&
            stats.nodes == (rpn ? size : 1),
        "%s: placement %d nodes, G %d (stats say %d, %d)", t->tag,
        rpn ? size : 1, pl->G, stats.nodes, stats.group_nodes);
  CHECK(outside == 0, "%s: %d origins outside the node's range [%lld, %lld)",
        t->tag, outside, (long long)lz0, (long long)lz1);
  uint64_t node = stats.bytes_node, remote = stats.bytes_remote;
  MPI_Allreduce(MPI_IN_PLACE, seen, 48, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, wraps, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &crosses, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &node, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &remote, 1, MPI_UINT64_T, MPI_SUM,
                MPI_COMM_WORLD);
  for (int a = 0; a < 3; a++)
    CHECK(wraps[a] > 0, "%s: no crop wrapped on axis %d", t->tag, a);
  int gs_max = pl->gs;
  MPI_Allreduce(MPI_IN_PLACE, &gs_max, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (pl->locality || (rpn && gs_max == 1))
    CHECK(remote == 0, "%s: %llu bytes crossed nodes (none may)", t->tag,
          (unsigned long long)remote);
  else if (gs_max > 1 && t->halo == 0) {
    CHECK(crosses > 0, "%s: no crop crossed a slab boundary", t->tag);
    CHECK(rpn ? remote > 0 && node == 0 : node > 0 && remote == 0,
          "%s: pieces must travel by %s (node %llu, remote %llu)", t->tag,
          rpn ? "MPI_Get" : "the node window", (unsigned long long)node,
          (unsigned long long)remote);
  }
  if (t->sym == SLABFEED_SYM_ALL && t->min_samples >= 400) {
    int n = 0;
    for (int g = 0; g < 48; g++)
      n += seen[g];
    CHECK_EQ(n, 48, "%s: symmetry ids checked", t->tag);
  }
  if (rank == 0)
    printf("  %-10s %lld values per rank checked, wraps z/y/x %d/%d/%d, "
           "slab-crossing %d, "
           "node %llu B, MPI_Get %llu B\n",
           t->tag, (long long)checked, wraps[0], wraps[1], wraps[2], crosses,
           (unsigned long long)node, (unsigned long long)remote);
  whole_free(&w[0]);
  whole_free(&w[1]);
  slabfeed_close(l);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *env = getenv(SLABFEED_ENV_RANK_PER_NODE);
  place pl = {.rpn = env != NULL && env[0] == '1'};
  find_place(&pl);
  const tcase cases[] = {
      {"cf_all",
       SLABFEED_LAYOUT_CF,
       0,
       0,
       {7, 7, 7},
       SLABFEED_SYM_ALL,
       SLABFEED_DTYPE_F32,
       SLABFEED_OUT_NCDHW,
       0,
       400},
      {"cl_rot",
       SLABFEED_LAYOUT_CL,
       1,
       1,
       {6, 6, 6},
       SLABFEED_SYM_ROTATIONS,
       SLABFEED_DTYPE_BF16,
       SLABFEED_OUT_NDHWC,
       2,
       60},
      {"cf_none",
       SLABFEED_LAYOUT_CF,
       1,
       0,
       {5, 8, 3},
       SLABFEED_SYM_NONE,
       SLABFEED_DTYPE_F16,
       SLABFEED_OUT_NCDHW,
       0,
       60},
      {"cl_f16",
       SLABFEED_LAYOUT_CL,
       0,
       0,
       {9, 9, 9},
       SLABFEED_SYM_ALL,
       SLABFEED_DTYPE_F16,
       SLABFEED_OUT_NDHWC,
       1,
       60},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_case(&cases[i], &pl);
  if (rank == 0)
    printf("placement: %s, G %d%s\n", pl.rpn ? "rank per node" : "one node",
           pl.G, pl.locality ? ", locality" : "");
  return check_finish("mpi.crops");
}
