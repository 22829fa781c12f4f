/* mpi.pads: training pads (random crops with pad P: input crops of edge
 * crop + 2P, target crops of the core, edge crop, concentric), on 1-3
 * ranks, rank-per-node (remote pieces sent, and over MPI_Get).
 *  - Every voxel of the input and of the target of every sample (all
 *    symmetries, vector groups, non-cubic crops without symmetries)
 *    against an independent serial read of the file: the input is the
 *    crop of edge crop + 2P at the sample's origin, the target the crop of
 *    edge crop at origin + P, each under the sample's symmetry about its
 *    own centre (the same centre); the tensors have those shapes.
 *  - Only the bytes of each crop are copied: the byte counters of the
 *    stats (own + node slabs) are exactly the input's and the target's
 *    crop bytes without remote pieces, and with them (which land whole)
 *    at least that and at most the padded target's.
 *  - target_pad 1: the target is padded like the input.
 *  - An input crop larger than the box is refused on every rank, naming
 *    crop, pad and axis. */
#include "testutil.h"

static int rank, size;
static const int vin[1][3] = {{1, 2, 3}}, vtg[1][3] = {{3, 1, 2}};

/* One loader: `steps` batches checked voxel by voxel. */
static void run(const char *path, const whole w[2], const int64_t N[3],
                const int64_t core[3], int pad, int target_pad,
                slabfeed_symmetries sym, int steps, int remote)
{
  slabfeed_config c;
  base_config(&c, path, 1);
  memcpy(c.crop, core, sizeof c.crop);
  c.pad = pad;
  c.target_pad = target_pad;
  c.symmetries = sym;
  c.batch = 3;
  c.seed = 9;
  c.n_input_vectors = c.n_target_vectors = 1;
  memcpy(c.input_vectors, vin, sizeof vin);
  memcpy(c.target_vectors, vtg, sizeof vtg);
  slabfeed_loader *l = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open (pad %d): %s", pad, err);
  if (l == NULL)
    return;
  int64_t ein[3], etg[3];
  for (int a = 0; a < 3; a++) {
    ein[a] = core[a] + 2 * pad;
    etg[a] = target_pad ? ein[a] : core[a];
  }
  int64_t bad = 0, checked = 0;
  uint64_t want_bytes = 0;
  for (int s = 0; s < steps; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK) {
      CHECK(0, "next: %s", slabfeed_last_error(l));
      break;
    }
    for (int d = 0; d < 2; d++) {
      const slabfeed_tensor *t = d == 0 ? &b.input : &b.target;
      const int64_t *ed = d == 0 ? ein : etg;
      const int C = d == 0 ? 4 : 5;
      for (int i = 0; i < c.batch; i++) {
        const int g = b.symmetry[i];
        int64_t e[3], o[3];
        for (int a = 0; a < 3; a++) {
          e[a] = ed[sym_perms[g % 6][a]];
          o[a] = b.origin[3 * i + a] + (d == 1 && !target_pad ? pad : 0);
        }
        if (i == 0)
          CHECK(t->shape[1] == C && t->shape[2] == e[0] &&
                    t->shape[3] == e[1] && t->shape[4] == e[2],
                "dataset %d shape (%lld,%lld,%lld,%lld), want (%d,%lld,%lld,"
                "%lld)",
                d, (long long)t->shape[1], (long long)t->shape[2],
                (long long)t->shape[3], (long long)t->shape[4], C,
                (long long)e[0], (long long)e[1], (long long)e[2]);
        char why[256];
        const int64_t n =
            crop_mismatches(t, i, C, &w[d], N, ed, d == 0 ? vin : vtg, 1, o, g,
                            &checked, why, sizeof why);
        CHECK(n == 0, "pad %d tp %d step %d d%d: %lld voxels differ, first %s",
              pad, target_pad, s, d, (long long)n, why);
        bad += n;
        want_bytes += (uint64_t)C * (uint64_t)(ed[0] * ed[1] * ed[2]) * 4;
      }
    }
  }
  slabfeed_stats st = SLABFEED_STATS_INIT;
  slabfeed_stats_get(l, &st);
  const uint64_t moved = st.bytes_own + st.bytes_node + st.bytes_remote;
  const uint64_t padded =
      want_bytes +
      (uint64_t)steps * (uint64_t)c.batch * 5 * 4 *
          (uint64_t)(ein[0] * ein[1] * ein[2] - etg[0] * etg[1] * etg[2]);
  if (!remote)
    CHECK(moved == want_bytes, "pad %d: %llu bytes copied, the crops hold %llu",
          pad, (unsigned long long)moved, (unsigned long long)want_bytes);
  else
    CHECK(moved >= want_bytes && moved <= padded,
          "pad %d: %llu bytes copied, the crops hold %llu (padded %llu)", pad,
          (unsigned long long)moved, (unsigned long long)want_bytes,
          (unsigned long long)padded);
  CHECK(bad == 0, "pad %d target_pad %d: %lld of %lld voxels differ", pad,
        target_pad, (long long)bad, (long long)checked);
  if (rank == 0)
    printf("  crop %lldx%lldx%lld pad %d target_pad %d: %lld voxels checked "
           "on rank 0, %llu bytes copied (crops %llu)\n",
           (long long)core[0], (long long)core[1], (long long)core[2], pad,
           target_pad, (long long)checked, (unsigned long long)moved,
           (unsigned long long)want_bytes);
  slabfeed_close(l);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int remote = getenv("SLABFEED_RANK_PER_NODE") != NULL && size > 1;
  char path[256];
  snprintf(path, sizeof path, "pads_%s_%d.h5", argc > 1 ? argv[1] : "t", size);
  const int64_t N[3] = {18, 14, 12};
  whole w[2];
  generate_and_read(path, N, w);
  const int64_t cube[3] = {4, 4, 4}, odd[3] = {3, 5, 2};
  run(path, w, N, cube, 3, 0, SLABFEED_SYM_ALL, 30, remote);
  run(path, w, N, cube, 1, 0, SLABFEED_SYM_ALL, 20, remote);
  run(path, w, N, odd, 2, 0, SLABFEED_SYM_NONE, 20, remote);
  run(path, w, N, cube, 2, 1, SLABFEED_SYM_ROTATIONS, 10, remote);
  run(path, w, N, cube, 0, 0, SLABFEED_SYM_ALL, 10, remote);
  /* The input crop must fit the box. */
  slabfeed_config c;
  base_config(&c, path, 8);
  c.pad = 3;
  expect_open_refused(&c,
                      "crop 8 + 2 x pad 3 = 14 (the input crop) is larger "
                      "than the box's 12 voxels on axis x",
                      "padded crop too large");
  whole_free(&w[0]);
  whole_free(&w[1]);
  return check_finish("mpi.pads");
}
