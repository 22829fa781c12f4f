/* Parallel slab read: every voxel of every rank's slab and halo equals the
 * index function, for uneven splits, both layouts, float16 and chunking,
 * and for replication groups (every rank its own node, groups of 1 and 2
 * nodes, locality's extra planes): the file is read once in total and the
 * replicas arrive over MPI. */
#include "common/geometry.h"
#include "io/h5.h"
#include "testutil.h"
#include "io/slab.h"

static void check_case(const char *path, int64_t Z, int64_t Y, int64_t X,
                       slabfeed_file_layout layout, int chunked, int f16,
                       int64_t halo, int rank_per_node, int group_nodes,
                       int locality)
{
  /* The cases alternate collective and independent reads (read_mode) and,
   * every other pair, one window for the node and one per rank
   * (shared_window): every voxel is checked every way. */
  static int ncase;
  const int independent = ncase % 2;
  const int window =
      (ncase / 2) % 2 ? SLABFEED_WINDOW_ONE : SLABFEED_WINDOW_PER_RANK;
  ncase++;
  if (make_file(path, Z, Y, X, layout, chunked, f16, 1) != 0)
    return;
  sf__err e;
  sf__err_clear(&e);
  hid_t file = -1, d[2] = {-1, -1};
  slabfeed_dataset_info info[2];
  const char *names[2] = {"Nbody", "Hydro"};
  sf__store s;
  memset(&s, 0, sizeof s);
  sf__h5_quiet q;
  sf__h5_quiet_begin(&q);
  sf__h5_open(MPI_COMM_WORLD, path, &file, &e);
  for (int k = 0; k < 2 && e.status == SLABFEED_OK; k++)
    sf__h5_dataset(file, path, names[k], SLABFEED_LAYOUT_AUTO, &d[k], &info[k],
                   &e);
  CHECK(e.status == SLABFEED_OK, "open %s: %s", path, e.msg);
  if (e.status != SLABFEED_OK)
    return;
  CHECK(info[0].layout == layout && info[0].channels == 4 &&
            info[1].channels == 5,
        "layout and channels resolved from the shape");
  const int64_t ch[2] = {4, 5};
  const sf__store_opts o = {.rank_per_node = rank_per_node,
                            .group_nodes = group_nodes,
                            .locality = locality,
                            .halo = halo,
                            .crop_z = 3,
                            .shared_window = window};
  CHECK(sf__store_open(&s, MPI_COMM_WORLD, 2, ch, info[0].shape, &o, &e) ==
            SLABFEED_OK,
        "store: %s", e.msg);
  /* The progress of the read counts exactly this rank's planes. */
  double want_bytes = 0;
  for (int k = 0; k < 2 && e.status == SLABFEED_OK; k++)
    want_bytes += sf__slab_bytes(&s, k, info[k].channels, &info[k].shape[1], 0,
                                 info[k].shape[0]);
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  sf__progress pg;
  sf__progress_begin(&pg, SLABFEED_PROGRESS_ON, 0, "test_slab", want_bytes, 1);
  for (int k = 0; k < 2 && e.status == SLABFEED_OK; k++)
    sf__slab_read(&s, k, 0, d[k], path, names[k], &info[k], 0, info[k].shape[0],
                  independent, &pg, &e);
  CHECK(sf__agree(MPI_COMM_WORLD, &e) == SLABFEED_OK, "read: %s", e.msg);
  CHECK(want_bytes == 0 || pg.done == want_bytes,
        "rank %d: progress counted %.0f bytes of the %.0f read", me, pg.done,
        want_bytes);
  if (me != 0)
    pg.on = 0; /* one final line per case */
  sf__progress_end(&pg, 1);
  if (e.status == SLABFEED_OK)
    sf__store_publish(&s, &e);
  H5Dclose(d[0]);
  H5Dclose(d[1]);
  H5Fclose(file);
  sf__h5_quiet_end(&q);

  if (e.status != SLABFEED_OK)
    return;
  /* The placement: groups of the requested size, each holding the box. */
  const int nodes = rank_per_node ? s.size : 1;
  const int G = group_nodes > 0 ? group_nodes : nodes;
  CHECK(s.nodes == nodes && s.L.ng == (nodes / G > 1 ? nodes / G : 1),
        "%d nodes in %d groups (G %d)", s.nodes, s.L.ng, G);
  int64_t held = 0;
  for (int r = 0; r < s.size; r++)
    if (s.L.groupof[r] == s.L.groupof[s.rank])
      held += s.L.core1[r] - s.L.core0[r];
  CHECK_EQ(held, Z, "the cores of group %d cover the box", s.L.groupof[s.rank]);
  /* Every plane is read once in total. */
  int64_t read_here = 0, read_all = 0;
  for (int64_t z = 0; z < Z;) {
    int64_t end;
    const int r = sf__placement_reader(&s.L, z, &end);
    CHECK(end > z && z >= s.L.core0[r] && end <= s.L.core1[r],
          "plane %lld read by a rank holding it", (long long)z);
    if (r == s.rank)
      read_here += end - z;
    z = end;
  }
  MPI_Allreduce(&read_here, &read_all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  CHECK_EQ(read_all, Z, "planes read in total");
  /* Every voxel, core and halo, both datasets. */
  int64_t bad = 0;
  const int64_t planes = sf__store_planes(&s, s.rank);
  const int64_t first = sf__placement_first(&s.L, s.rank);
  const int64_t extra = locality && s.L.hi[s.rank] > halo ? 3 - 1 - halo : 0;
  CHECK_EQ(planes, s.L.core1[s.rank] - s.L.core0[s.rank] + 2 * halo + extra,
           "planes held");
  CHECK_EQ(s.bytes, (4 + 5) * planes * Y * X * 4,
           "segment holds slab + halo only");
  const int64_t zr = locality ? s.L.reach0[s.rank] : 0;
  const int64_t nr = locality ? s.L.reach[s.rank] : Z;
  if (locality) /* a crop from the node's range fits in the node */
    for (int r = 0; r < s.size; r++)
      if (s.L.nodeof[r] == s.L.nodeof[s.rank] &&
          s.L.groupof[r] == s.L.groupof[s.rank] && s.L.core1[r] == zr + nr)
        CHECK(s.L.hi[r] >= 2, "rank %d keeps crop - 1 planes above", r);
  for (int k = 0; k < 2 && e.status == SLABFEED_OK; k++) {
    const float *seg =
        (const float *)(s.base + sf__store_offset(&s, s.rank, k));
    for (int64_t c = 0; c < ch[k]; c++)
      for (int64_t p = 0; p < planes; p++)
        for (int64_t y = 0; y < Y; y++)
          for (int64_t x = 0; x < X; x++) {
            const int64_t z = sf__pmod(first + p, Z);
            const float want = slabfeed_index_value(k, (int)c, z, y, x);
            const float got = seg[((c * planes + p) * Y + y) * X + x];
            bad += got != want;
          }
  }
  CHECK(bad == 0, "%s: %lld voxels differ from the index function", path,
        (long long)bad);
  /* Peers of the node are mapped and see the same bytes. */
  for (int r = 0; r < s.size; r++)
    if (s.peer[r] != NULL && r != s.rank) {
      const float *seg = (const float *)s.peer[r];
      CHECK(seg[0] ==
                slabfeed_index_value(0, 0, sf__placement_first(&s.L, r), 0, 0),
            "peer %d segment readable", r);
    }
  sf__store_close(&s);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char path[64];
  snprintf(path, sizeof path, "slab_np%d_a.h5", size);
  /* uneven split */
  check_case(path, 13, 7, 6, SLABFEED_LAYOUT_CF, 0, 0, 0, 0, 0, 0);
  snprintf(path, sizeof path, "slab_np%d_b.h5", size);
  /* cl, chunked f16, halo */
  check_case(path, 11, 7, 6, SLABFEED_LAYOUT_CL, 1, 1, 2, 0, 0, 0);
  snprintf(path, sizeof path, "slab_np%d_c.h5", size);
  /* halo = Z, own nodes, one group */
  check_case(path, 9, 8, 7, SLABFEED_LAYOUT_CF, 1, 0, 9, 1, -1, 0);
  /* own nodes, groups of 1 node (every rank a full replica) and of 2,
   * with and without halo and locality planes */
  snprintf(path, sizeof path, "slab_np%d_d.h5", size);
  check_case(path, 13, 5, 6, SLABFEED_LAYOUT_CF, 1, 0, 0, 1, 1, 0);
  snprintf(path, sizeof path, "slab_np%d_e.h5", size);
  check_case(path, 13, 5, 6, SLABFEED_LAYOUT_CL, 0, 0, 1, 1, 1, 1);
  if (size >= 2) {
    snprintf(path, sizeof path, "slab_np%d_f.h5", size);
    check_case(path, 14, 5, 6, SLABFEED_LAYOUT_CF, 1, 1, 1, 1, 2, 1);
    snprintf(path, sizeof path, "slab_np%d_g.h5", size);
    check_case(path, 17, 4, 5, SLABFEED_LAYOUT_CF, 0, 0, 0, 1, 2, 0);
  }
  return check_finish("mpi.slab");
}
