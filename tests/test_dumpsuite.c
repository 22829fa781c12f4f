/* Verifies a slabfeed-dump file of a dataset of several volumes:
 * volume_path lists the given files in order, every row's volume indexes
 * it, rows come in global sample order, more than one volume was drawn,
 * and every crop (input and target) equals the serial reference read of
 * its volume's file at the row's origin and symmetry, in the dtype and
 * layout the file's attributes name.
 *   test_dumpsuite DUMP VOLUME0 VOLUME1 ... */
#include "testutil.h"

/* The extent of a dataset's dimension 0 (0 when missing); its rank and
 * dims into dims (up to 5). */
static hsize_t extent(hid_t f, const char *name, hsize_t dims[5])
{
  const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  if (d < 0)
    return 0;
  const hid_t s = H5Dget_space(d);
  const int r = H5Sget_simple_extent_ndims(s);
  if (r >= 1 && r <= 5)
    H5Sget_simple_extent_dims(s, dims, NULL);
  H5Sclose(s);
  H5Dclose(d);
  return r >= 1 && r <= 5 ? dims[0] : 0;
}

/* volume_path into *paths (n strings of `width` bytes each); 0 or -1. */
static int read_paths(hid_t f, int n, char **paths, size_t *width)
{
  const hid_t d = H5Dopen2(f, "volume_path", H5P_DEFAULT);
  const hid_t t = d < 0 ? -1 : H5Dget_type(d);
  int rc = -1;
  if (t >= 0 && H5Tget_class(t) == H5T_STRING && !H5Tis_variable_str(t)) {
    *width = H5Tget_size(t);
    *paths = calloc((size_t)n, *width);
    rc = *paths == NULL ||
                 H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, *paths) < 0
             ? -1
             : 0;
  }
  if (t >= 0)
    H5Tclose(t);
  if (d >= 0)
    H5Dclose(d);
  return rc;
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  const char *name = "apps.suite.dump.verify";
  if (argc < 4) {
    CHECK(0, "usage: test_dumpsuite DUMP VOLUME0 VOLUME1 ...");
    return check_finish(name);
  }
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  const int nv = argc - 2;
  const hid_t f = H5Fopen(argv[1], H5F_ACC_RDONLY, H5P_DEFAULT);
  CHECK(f >= 0, "open %s", argv[1]);
  if (f < 0)
    return check_finish(name);
  char dts[16], lays[16];
  read_str(f, "dtype", dts, sizeof dts);
  read_str(f, "layout", lays, sizeof lays);
  const slabfeed_dtype dt = strcmp(dts, "f32") == 0   ? SLABFEED_DTYPE_F32
                            : strcmp(dts, "f16") == 0 ? SLABFEED_DTYPE_F16
                                                      : SLABFEED_DTYPE_BF16;
  const slabfeed_out_layout lay =
      strcmp(lays, "ndhwc") == 0 ? SLABFEED_OUT_NDHWC : SLABFEED_OUT_NCDHW;
  const size_t es = dt == SLABFEED_DTYPE_F32 ? 4 : 2;

  /* The list of files. */
  hsize_t pd[5] = {0};
  CHECK_EQ((long long)extent(f, "volume_path", pd), (long long)nv,
           "volume_path lists the %d volumes", nv);
  char *paths = NULL;
  size_t width = 0;
  const int have_paths = extent(f, "volume_path", pd) == (hsize_t)nv &&
                         read_paths(f, nv, &paths, &width) == 0;
  CHECK(have_paths, "read volume_path");
  for (int v = 0; have_paths && v < nv; v++)
    CHECK(strcmp(paths + (size_t)v * width, argv[2 + v]) == 0,
          "volume_path[%d] is '%s', not '%s'", v, paths + (size_t)v * width,
          argv[2 + v]);

  /* The rows. */
  hsize_t dims[5] = {0}, tdims[5] = {0}, vd[5] = {0};
  const size_t S = extent(f, "input", dims);
  extent(f, "target", tdims);
  CHECK(S > 0 && extent(f, "volume", vd) == S, "volume has one row per sample");
  const size_t in_elems = dims[1] * dims[2] * dims[3] * dims[4];
  const size_t tg_elems = tdims[1] * tdims[2] * tdims[3] * tdims[4];
  char *in = malloc(S * in_elems * es + 1), *tg = malloc(S * tg_elems * es + 1);
  int64_t *org = malloc(S * 3 * 8 + 8), *smp = malloc(S * 8 + 8),
          *ep = malloc(S * 8 + 8);
  int32_t *sym = malloc(S * 4 + 4), *vol = malloc(S * 4 + 4);
  CHECK(!read_all(f, "input", -1, in) && !read_all(f, "target", -1, tg),
        "read crops");
  CHECK(!read_all(f, "origin", H5T_NATIVE_INT64, org) &&
            !read_all(f, "symmetry", H5T_NATIVE_INT32, sym) &&
            !read_all(f, "sample", H5T_NATIVE_INT64, smp) &&
            !read_all(f, "sample_epoch", H5T_NATIVE_INT64, ep) &&
            !read_all(f, "volume", H5T_NATIVE_INT32, vol),
        "read metadata");
  H5Fclose(f);

  slabfeed_reader **r = calloc((size_t)nv, sizeof *r);
  char err[512];
  for (int v = 0; v < nv; v++)
    CHECK(slabfeed_reader_open(argv[2 + v], &r[v], err, sizeof err) ==
              SLABFEED_OK,
          "%s", err);
  const int sp0 = lay == SLABFEED_OUT_NDHWC ? 1 : 2; /* first spatial dim */
  const int64_t crop[3] = {(int64_t)dims[sp0], (int64_t)dims[sp0 + 1],
                           (int64_t)dims[sp0 + 2]};
  const int vec[1][3] = {{1, 2, 3}};
  char *want = malloc((tg_elems > in_elems ? tg_elems : in_elems) * es + 1);
  size_t bad = 0, per[64] = {0};
  int distinct = 0;
  for (size_t k = 0; k < S; k++) {
    if (k > 0)
      CHECK((ep[k] == ep[k - 1] && smp[k] == smp[k - 1] + 1) ||
                (ep[k] == ep[k - 1] + 1 && smp[k] == 0),
            "row %zu: epoch %lld sample %lld follows epoch %lld sample %lld", k,
            (long long)ep[k], (long long)smp[k], (long long)ep[k - 1],
            (long long)smp[k - 1]);
    const int v = vol[k];
    CHECK(v >= 0 && v < nv, "row %zu: volume %d of %d", k, v, nv);
    if (v < 0 || v >= nv || r[v] == NULL)
      continue;
    if (v < 64 && per[v]++ == 0)
      distinct++;
    CHECK(slabfeed_reader_crop(r[v], "Nbody", SLABFEED_LAYOUT_AUTO, &org[3 * k],
                               crop, sym[k], 1, vec, dt, lay,
                               want) == SLABFEED_OK,
          "row %zu: %s", k, slabfeed_reader_error(r[v]));
    bad += memcmp(want, in + k * in_elems * es, in_elems * es) != 0;
    CHECK(slabfeed_reader_crop(r[v], "Hydro", SLABFEED_LAYOUT_AUTO, &org[3 * k],
                               crop, sym[k], 1, vec, dt, lay,
                               want) == SLABFEED_OK,
          "row %zu: %s", k, slabfeed_reader_error(r[v]));
    bad += memcmp(want, tg + k * tg_elems * es, tg_elems * es) != 0;
  }
  CHECK(bad == 0, "%zu crops differ from the reference of their volume", bad);
  CHECK(distinct >= 2, "the %zu rows came from %d volume(s) of %d", S, distinct,
        nv);
  printf("%s: %zu rows from %d of %d volumes checked (%s, %s)\n", name, S,
         distinct, nv, dts, lays);
  for (int v = 0; v < nv; v++)
    slabfeed_reader_close(r[v]);
  free(r);
  free(paths);
  free(in);
  free(tg);
  free(org);
  free(smp);
  free(ep);
  free(sym);
  free(vol);
  free(want);
  return check_finish(name);
}
