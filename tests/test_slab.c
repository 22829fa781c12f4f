/* Parallel slab read: every voxel of every rank's slab and halo equals the
 * index function, for uneven splits, both layouts, float16 and chunking. */
#include "geometry.h"
#include "h5.h"
#include "testutil.h"
#include "slab.h"

static void check_case(const char *path, int64_t Z, int64_t Y, int64_t X,
                       slabfeed_file_layout layout, int chunked, int f16,
                       int64_t halo, int rank_per_node)
{
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
  CHECK(sf__store_open(&s, MPI_COMM_WORLD, 2, ch, info[0].shape, halo,
                       rank_per_node, &e) == SLABFEED_OK,
        "store: %s", e.msg);
  for (int k = 0; k < 2 && e.status == SLABFEED_OK; k++)
    sf__slab_read(&s, k, d[k], path, names[k], &info[k], &e);
  CHECK(sf__agree(MPI_COMM_WORLD, &e) == SLABFEED_OK, "read: %s", e.msg);
  if (e.status == SLABFEED_OK)
    sf__store_publish(&s, &e);
  H5Dclose(d[0]);
  H5Dclose(d[1]);
  H5Fclose(file);
  sf__h5_quiet_end(&q);

  /* Every voxel, core and halo, both datasets. */
  int64_t bad = 0;
  const int64_t planes = sf__store_planes(&s, s.rank);
  CHECK(planes == s.z1 - s.z0 + 2 * halo, "planes held");
  CHECK(s.bytes == (4 + 5) * planes * Y * X * 4,
        "segment holds slab + halo only");
  for (int k = 0; k < 2 && e.status == SLABFEED_OK; k++) {
    const float *seg =
        (const float *)(s.base + sf__store_offset(&s, s.rank, k));
    for (int64_t c = 0; c < ch[k]; c++)
      for (int64_t p = 0; p < planes; p++)
        for (int64_t y = 0; y < Y; y++)
          for (int64_t x = 0; x < X; x++) {
            const int64_t z = sf__pmod(s.z0 - halo + p, Z);
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
      const int64_t z0 = sf__split_begin(Z, s.size, r);
      CHECK(seg[0] == slabfeed_index_value(0, 0, sf__pmod(z0 - halo, Z), 0, 0),
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
  check_case(path, 13, 7, 6, SLABFEED_LAYOUT_CF, 0, 0, 0, 0); /* uneven split */
  snprintf(path, sizeof path, "slab_np%d_b.h5", size);
  check_case(path, 11, 7, 6, SLABFEED_LAYOUT_CL, 1, 1, 2,
             0); /* cl, chunked f16, halo */
  snprintf(path, sizeof path, "slab_np%d_c.h5", size);
  check_case(path, 9, 8, 7, SLABFEED_LAYOUT_CF, 1, 0, 9,
             1); /* halo = Z, own nodes */
  return check_finish("mpi.slab");
}
