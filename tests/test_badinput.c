/* Bad input fails at open on every rank, with the same status and a
 * message naming the problem; nothing hangs (CTest TIMEOUT). */
#include <unistd.h>

#include "testutil.h"

static int rank, size;

/* Rank 0 writes a small file with plain serial HDF5; the others wait. */
static void write_raw(const char *path, const char *name, int rank4, hid_t type,
                      const hsize_t *dims, const char *name2,
                      const hsize_t *dims2)
{
  if (rank == 0) {
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t s = H5Screate_simple(rank4, dims, NULL);
    const hid_t d =
        H5Dcreate2(f, name, type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d);
    H5Sclose(s);
    if (name2 != NULL) {
      const hid_t s2 = H5Screate_simple(4, dims2, NULL);
      const hid_t d2 =
          H5Dcreate2(f, name2, type, s2, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      H5Dclose(d2);
      H5Sclose(s2);
    }
    H5Fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Opens with cfg; checks that every rank failed with `want` and that the
 * message holds `needle`. */
static void expect_fail(const char *what, const slabfeed_config *cfg,
                        slabfeed_status want, const char *needle)
{
  char err[1024] = "";
  slabfeed_loader *l = (slabfeed_loader *)0x1;
  const slabfeed_status st =
      slabfeed_open(MPI_COMM_WORLD, cfg, &l, err, sizeof err);
  int lo = st, hi = st;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK_EQ(lo, hi, "%s: ranks disagree on the status", what);
  CHECK_EQ(st, want, "%s: status %s, want %s; message: %s", what,
           slabfeed_strerror(st), slabfeed_strerror(want), err);
  CHECK(l == NULL, "%s: no loader on failure", what);
  CHECK(strstr(err, needle) != NULL, "%s: message '%s' should mention '%s'",
        what, err, needle);
  CHECK(strncmp(err, "rank ", 5) == 0, "%s: message names the rank: %s", what,
        err);
  if (rank == 0)
    printf("  %-22s -> %s: %s\n", what, slabfeed_strerror(st), err);
  if (st == SLABFEED_OK)
    slabfeed_close(l);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char good[64], path[64];
  snprintf(good, sizeof good, "bad_np%d_good.h5", size);
  make_file(good, 12, 8, 8, SLABFEED_LAYOUT_CF, 0, 0, 1);

  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = good;
  c.input = "Nbody";
  c.target = "Hydro";
  c.crop[0] = c.crop[1] = c.crop[2] = 4;

  slabfeed_config b = c;
  b.path = "no_such_file.h5";
  expect_fail("missing file", &b, SLABFEED_ERR_IO, "no_such_file.h5");

  b = c;
  b.input = "Density";
  expect_fail("missing dataset", &b, SLABFEED_ERR_FORMAT, "'Density'");

  snprintf(path, sizeof path, "bad_np%d_rank.h5", size);
  const hsize_t d2[2] = {64, 8};
  write_raw(path, "Nbody", 2, H5T_IEEE_F32LE, d2, NULL, NULL);
  b = c;
  b.path = path;
  b.target = NULL;
  expect_fail("wrong rank", &b, SLABFEED_ERR_FORMAT,
              "has rank 2; expected rank 4, (C,Z,Y,X) or (Z,Y,X,C), or rank "
              "3, (Z,Y,X)");

  snprintf(path, sizeof path, "bad_np%d_int.h5", size);
  const hsize_t d4[4] = {4, 8, 8, 8};
  write_raw(path, "Nbody", 4, H5T_STD_I32LE, d4, NULL, NULL);
  b.path = path;
  expect_fail("integer dataset", &b, SLABFEED_ERR_FORMAT, "not floating point");

  snprintf(path, sizeof path, "bad_np%d_shape.h5", size);
  const hsize_t t4[4] = {5, 10, 10, 12};
  write_raw(path, "Nbody", 4, H5T_IEEE_F32LE, d4, "Hydro", t4);
  b = c;
  b.path = path;
  expect_fail("input/target mismatch", &b, SLABFEED_ERR_FORMAT, "same box");

  snprintf(path, sizeof path, "bad_np%d_amb.h5", size);
  const hsize_t a4[4] = {4, 8, 8, 4};
  write_raw(path, "Nbody", 4, H5T_IEEE_F32LE, a4, NULL, NULL);
  b.path = path;
  b.target = NULL;
  expect_fail("ambiguous layout", &b, SLABFEED_ERR_FORMAT, "layout auto");

  /* P > Z: a box with fewer planes than ranks. */
  snprintf(path, sizeof path, "bad_np%d_thin.h5", size);
  const hsize_t z4[4] = {4, (hsize_t)size - 1, 8, 8};
  write_raw(path, "Nbody", 4, H5T_IEEE_F32LE, z4, NULL, NULL);
  b.path = path;
  b.layout = SLABFEED_LAYOUT_CF;
  b.crop[0] = 1;
  b.symmetries = SLABFEED_SYM_NONE;
  expect_fail("more ranks than planes", &b, SLABFEED_ERR_ARG, "z-planes");

  /* A truncated copy of a good file. */
  snprintf(path, sizeof path, "bad_np%d_trunc.h5", size);
  if (rank == 0) {
    FILE *in = fopen(good, "rb"), *out = fopen(path, "wb");
    char buf[4096];
    size_t n, total = 0;
    while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0 &&
           total < 8192) {
      fwrite(buf, 1, n, out);
      total += n;
    }
    if (in)
      fclose(in);
    if (out)
      fclose(out);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  b = c;
  b.path = path;
  expect_fail("truncated file", &b, SLABFEED_ERR_IO, path);

  /* Options. */
  b = c;
  b.crop[0] = b.crop[1] = b.crop[2] = 9;
  expect_fail("crop larger than box", &b, SLABFEED_ERR_ARG,
              "larger than the box");
  b = c;
  b.crop[2] = 3;
  expect_fail("non-cubic crop", &b, SLABFEED_ERR_ARG, "not cubic");
  b = c;
  b.batch = 0;
  expect_fail("batch 0", &b, SLABFEED_ERR_ARG, "batch");
  b = c;
  b.device = -1;
  b.residency = SLABFEED_RESIDENCY_DEVICE;
  expect_fail("residency device with host batches", &b, SLABFEED_ERR_ARG,
              "residency device holds the slabs in GPU memory and needs "
              "device batches");
  b = c;
  b.prefetch = 0;
  expect_fail("prefetch 0", &b, SLABFEED_ERR_ARG, "prefetch");
  b = c;
  b.n_input_vectors = 1;
  b.input_vectors[0][0] = 1, b.input_vectors[0][1] = 2,
  b.input_vectors[0][2] = 4;
  expect_fail("vector out of range", &b, SLABFEED_ERR_ARG, "channel 4");
  b.input_vectors[0][2] = 1;
  expect_fail("vector repeated", &b, SLABFEED_ERR_ARG, "used twice");
  b = c;
  b.seed = (uint64_t)rank;
  if (size > 1)
    expect_fail("options differ", &b, SLABFEED_ERR_ARG, "differ between ranks");
  b = c;
  b.halo = 13;
  expect_fail("halo too large", &b, SLABFEED_ERR_ARG, "halo");
  b = c;
  b.steps_per_epoch = (uint64_t)1 << 62;
  expect_fail("2^62 steps per epoch", &b, SLABFEED_ERR_ARG, "sample ids");
  /* SLABFEED_RANK_PER_NODE is read as strictly as the option. */
  const char *rpn[] = {"10", "1abc", "2", "auto"};
  for (int i = 0; i < 4; i++) {
    setenv("SLABFEED_RANK_PER_NODE", rpn[i], 1);
    expect_fail("SLABFEED_RANK_PER_NODE", &c, SLABFEED_ERR_ARG,
                "SLABFEED_RANK_PER_NODE");
  }
  unsetenv("SLABFEED_RANK_PER_NODE");

  /* The serial reference reader names what is wrong with its transform. */
  slabfeed_reader *rd = NULL;
  char rerr[512] = "";
  CHECK(slabfeed_reader_open(good, &rd, rerr, sizeof rerr) == SLABFEED_OK,
        "reader: %s", rerr);
  if (rd != NULL) {
    const int64_t o[3] = {0, 0, 0}, e4[3] = {4, 4, 4}, e2[3] = {4, 2, 4};
    const int bad[1][3] = {{1, 2, 9}};
    static float out[16 * 4 * 4 * 4];
    CHECK(slabfeed_reader_crop(rd, "Nbody", SLABFEED_LAYOUT_AUTO, o, e4, 0, 1,
                               bad, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW,
                               out) == SLABFEED_ERR_ARG &&
              strstr(slabfeed_reader_error(rd), "names channel 9") != NULL,
          "reader: a bad vector channel: '%s'", slabfeed_reader_error(rd));
    CHECK(slabfeed_reader_crop(rd, "Nbody", SLABFEED_LAYOUT_AUTO, o, e2, 5, 0,
                               NULL, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW,
                               out) == SLABFEED_ERR_ARG &&
              strstr(slabfeed_reader_error(rd), "cubic") != NULL,
          "reader: a symmetry of a non-cubic crop: '%s'",
          slabfeed_reader_error(rd));
    slabfeed_reader_close(rd);
  }

  /* And a good open still works after all that. */
  char err[1024];
  slabfeed_loader *l = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "good open: %s", err);
  slabfeed_close(l);
  return check_finish("mpi.badinput");
}
