/* Verifies a slabfeed-dump file on its own terms: rows in global sample
 * order, origins and symmetries from the documented sampler, and every
 * crop equal to the serial reference read of the volume, in the dtype and
 * layout the file's attributes name. */
#include "plan/sampler.h"
#include "testutil.h"

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  if (argc != 3) {
    CHECK(0, "usage: test_dumpfile VOLUME DUMP");
    return check_finish("apps.dump.verify");
  }
  const hid_t f = H5Fopen(argv[2], H5F_ACC_RDONLY, H5P_DEFAULT);
  CHECK(f >= 0, "open %s", argv[2]);
  if (f < 0)
    return check_finish("apps.dump.verify");
  uint64_t seed = 0, epoch = 0;
  const hid_t a1 = H5Aopen(f, "seed", H5P_DEFAULT),
              a2 = H5Aopen(f, "epoch", H5P_DEFAULT);
  H5Aread(a1, H5T_NATIVE_UINT64, &seed);
  H5Aread(a2, H5T_NATIVE_UINT64, &epoch);
  H5Aclose(a1);
  H5Aclose(a2);
  CHECK(seed == 5 && epoch == 2, "attributes seed/epoch");
  char dts[16], lays[16];
  read_str(f, "dtype", dts, sizeof dts);
  read_str(f, "layout", lays, sizeof lays);
  const slabfeed_dtype dt = strcmp(dts, "f32") == 0   ? SLABFEED_DTYPE_F32
                            : strcmp(dts, "f16") == 0 ? SLABFEED_DTYPE_F16
                                                      : SLABFEED_DTYPE_BF16;
  const slabfeed_out_layout lay =
      strcmp(lays, "ndhwc") == 0 ? SLABFEED_OUT_NDHWC : SLABFEED_OUT_NCDHW;
  CHECK((strcmp(dts, "f32") == 0 || strcmp(dts, "f16") == 0 ||
         strcmp(dts, "bf16") == 0) &&
            (strcmp(lays, "ncdhw") == 0 || strcmp(lays, "ndhwc") == 0),
        "attributes dtype '%s' and layout '%s'", dts, lays);
  const size_t es = dt == SLABFEED_DTYPE_F32 ? 4 : 2;
  const hid_t din = H5Dopen2(f, "input", H5P_DEFAULT);
  const hid_t sp = H5Dget_space(din);
  hsize_t dims[5];
  H5Sget_simple_extent_dims(sp, dims, NULL);
  H5Sclose(sp);
  H5Dclose(din);
  const size_t S = dims[0], in_elems = dims[1] * dims[2] * dims[3] * dims[4];
  const size_t tg_elems = in_elems / 4 * 5;
  char *in = malloc(S * in_elems * es), *tg = malloc(S * tg_elems * es);
  int64_t *org = malloc(S * 3 * 8), *smp = malloc(S * 8), *ep = malloc(S * 8);
  int32_t *sym = malloc(S * 4);
  CHECK(!read_all(f, "input", -1, in) && !read_all(f, "target", -1, tg),
        "read crops");
  CHECK(!read_all(f, "origin", H5T_NATIVE_INT64, org) &&
            !read_all(f, "symmetry", H5T_NATIVE_INT32, sym) &&
            !read_all(f, "sample", H5T_NATIVE_INT64, smp) &&
            !read_all(f, "sample_epoch", H5T_NATIVE_INT64, ep),
        "read metadata");
  H5Fclose(f);

  slabfeed_dataset_info info = SLABFEED_DATASET_INFO_INIT;
  char err[512];
  CHECK(slabfeed_describe(argv[1], "Nbody", SLABFEED_LAYOUT_AUTO, &info, err,
                          sizeof err) == SLABFEED_OK,
        "%s", err);
  sf__sampler ref;
  sf__sampler_init(&ref, info.shape, seed, SLABFEED_SYM_ALL);
  slabfeed_reader *r = NULL;
  CHECK(slabfeed_reader_open(argv[1], &r, err, sizeof err) == SLABFEED_OK, "%s",
        err);
  char *want = malloc(tg_elems * es);
  const int vec[1][3] = {{1, 2, 3}};
  const int sp0 =
      lay == SLABFEED_OUT_NDHWC ? 1 : 2; /* first spatial dimension */
  const int64_t crop[3] = {(int64_t)dims[sp0], (int64_t)dims[sp0 + 1],
                           (int64_t)dims[sp0 + 2]};
  size_t bad = 0;
  for (size_t k = 0; k < S && r != NULL; k++) {
    /* Global order: the sample index counts up and restarts at 0 when
     * the epoch moves on. */
    int64_t o[3];
    int32_t g;
    sf__sampler_draw(&ref, (uint64_t)ep[k], (uint64_t)smp[k], o, &g);
    if (k == 0)
      CHECK(ep[0] == (int64_t)epoch && smp[0] == 0,
            "first row is sample 0 of epoch %llu", (unsigned long long)epoch);
    else
      CHECK((ep[k] == ep[k - 1] && smp[k] == smp[k - 1] + 1) ||
                (ep[k] == ep[k - 1] + 1 && smp[k] == 0),
            "row %zu: epoch %lld sample %lld follows epoch %lld sample %lld", k,
            (long long)ep[k], (long long)smp[k], (long long)ep[k - 1],
            (long long)smp[k - 1]);
    CHECK(memcmp(o, &org[3 * k], sizeof o) == 0 && g == sym[k],
          "row %zu: sampler", k);
    slabfeed_reader_crop(r, "Nbody", SLABFEED_LAYOUT_AUTO, &org[3 * k], crop,
                         sym[k], 1, vec, dt, lay, want);
    bad += memcmp(want, in + k * in_elems * es, in_elems * es) != 0;
    slabfeed_reader_crop(r, "Hydro", SLABFEED_LAYOUT_AUTO, &org[3 * k], crop,
                         sym[k], 1, vec, dt, lay, want);
    bad += memcmp(want, tg + k * tg_elems * es, tg_elems * es) != 0;
  }
  CHECK(bad == 0, "%zu crops differ from the reference", bad);
  printf("apps.dump.verify: %zu rows checked (%s, %s)\n", S, dts, lays);
  slabfeed_reader_close(r);
  free(in);
  free(tg);
  free(org);
  free(smp);
  free(ep);
  free(sym);
  free(want);
  return check_finish("apps.dump.verify");
}
