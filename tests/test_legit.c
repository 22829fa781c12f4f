/* Legitimate files that used to break the loader, and requests that must
 * fail at open instead of later:
 *  - a chunked dataset whose chunks are partly unwritten (they read as the
 *    fill value) works on any rank count: every sample equals the serial
 *    reference reader's;
 *  - a channels-last file with Z < C: slabfeed-gen's output (with its
 *    layout attribute) is read right under layout auto; the same shape
 *    without the attribute is refused as ambiguous;
 *  - a path of 245+ bytes with Open MPI: a clear message naming the cause
 *    and the workaround, never an abort (mpi.legit.longpath runs the same
 *    path with the workaround set and must open it);
 *  - a file that shrinks after it was opened: an error, never zeros;
 *  - a float64 volume read directly where it can be: HDF5 converts it,
 *    and shared_window auto keeps MPI windows (0.13: files only where
 *    pread writes them);
 *  - host batches larger than the node's memory: SLABFEED_ERR_NOMEM at
 *    open. */
#include <sys/stat.h>
#include <unistd.h>

#include "io/h5.h"
#include "testutil.h"

static int rank, size;

/* Every sample of `steps` batches equals the serial reference's crop. */
static void compare_reader(const slabfeed_config *c, int steps,
                           const char *what)
{
  slabfeed_loader *l = NULL;
  char err[1024] = "";
  CHECK(slabfeed_open(MPI_COMM_WORLD, c, &l, err, sizeof err) == SLABFEED_OK,
        "%s: open: %s", what, err);
  slabfeed_reader *r = NULL;
  CHECK(slabfeed_reader_open(c->path, &r, err, sizeof err) == SLABFEED_OK,
        "%s: reader: %s", what, err);
  if (l == NULL || r == NULL) {
    slabfeed_reader_close(r);
    slabfeed_close(l);
    return;
  }
  const int64_t n = c->crop[0] * c->crop[1] * c->crop[2] * 16;
  float *want = malloc((size_t)n * sizeof *want);
  int64_t bad = 0, checked = 0;
  for (int s = 0; s < steps; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(l, &b, NULL) == SLABFEED_OK, "%s: next: %s", what,
          slabfeed_last_error(l));
    /* The input, and the target where there is one (same grid). */
    for (int t = 0; t < (c->target != NULL ? 2 : 1); t++) {
      const slabfeed_tensor *got = t == 0 ? &b.input : &b.target;
      const int64_t per = got->strides[0];
      for (int i = 0; i < c->batch; i++) {
        CHECK(slabfeed_reader_crop(r, t == 0 ? c->input : c->target, c->layout,
                                   &b.origin[3 * i], c->crop, b.symmetry[i], 0,
                                   NULL, SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW,
                                   want) == SLABFEED_OK,
              "%s: reference crop: %s", what, slabfeed_reader_error(r));
        bad += memcmp(want, (const float *)got->data + i * per,
                      (size_t)per * sizeof(float)) != 0;
        checked++;
      }
    }
  }
  CHECK(bad == 0, "%s: %lld of %lld samples differ from the serial reader",
        what, (long long)bad, (long long)checked);
  if (rank == 0 && bad == 0)
    printf("  %s: %lld samples per rank equal the serial reader\n", what,
           (long long)checked);
  free(want);
  slabfeed_reader_close(r);
  slabfeed_close(l);
}

/* A loader of path's channels-first "Nbody" alone: crops of edge `crop`,
 * `batch` a step, halo 2. */
static slabfeed_config nbody_config(const char *path, int64_t crop, int batch)
{
  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = path;
  c.input = "Nbody";
  c.layout = SLABFEED_LAYOUT_CF;
  c.crop[0] = c.crop[1] = c.crop[2] = crop;
  c.batch = batch;
  c.halo = 2;
  return c;
}

/* The placement line of a loader opened with c into how[len] (empty
 * where the open fails, which is a failure of the test). */
static void placement_of(const slabfeed_config *c, const char *what, char *how,
                         size_t len)
{
  slabfeed_loader *l = NULL;
  char err[1024] = "";
  how[0] = '\0';
  CHECK(slabfeed_open(MPI_COMM_WORLD, c, &l, err, sizeof err) == SLABFEED_OK &&
            slabfeed_placement(l, how, len) == SLABFEED_OK,
        "%s: open: %s", what, err);
  slabfeed_close(l);
}

/* (4,16,12,10) channels-first, chunks (1,4,12,10), fill value 7.5, only
 * planes z < 8 written: the chunks of z >= 8 are never allocated. */
static void partly_written(const char *path)
{
  if (rank == 0) {
    const hsize_t dims[4] = {4, 16, 12, 10}, chunk[4] = {1, 4, 12, 10};
    const hsize_t half[4] = {4, 8, 12, 10};
    const float fill = 7.5f;
    float *v = malloc(4 * 8 * 12 * 10 * sizeof *v);
    for (int c = 0; c < 4; c++)
      for (int z = 0; z < 8; z++)
        for (int y = 0; y < 12; y++)
          for (int x = 0; x < 10; x++)
            v[((c * 8 + z) * 12 + y) * 10 + x] =
                slabfeed_index_value(0, c, z, y, x);
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t sp = H5Screate_simple(4, dims, NULL);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 4, chunk);
    H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &fill);
    const hid_t d = H5Dcreate2(f, "Nbody", H5T_IEEE_F32LE, sp, H5P_DEFAULT,
                               dcpl, H5P_DEFAULT);
    /* "Dense": contiguous, every plane written (planes z >= 8 repeat the
     * first eight): read directly beside "Nbody". */
    const hid_t dense = H5Dcreate2(f, "Dense", H5T_IEEE_F32LE, sp, H5P_DEFAULT,
                                   H5P_DEFAULT, H5P_DEFAULT);
    const hid_t mem = H5Screate_simple(4, half, NULL);
    for (hsize_t z = 0; z < 16; z += 8) {
      const hsize_t start[4] = {0, z, 0, 0};
      H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, half, NULL);
      CHECK((z > 0 ||
             H5Dwrite(d, H5T_NATIVE_FLOAT, mem, sp, H5P_DEFAULT, v) >= 0) &&
                H5Dwrite(dense, H5T_NATIVE_FLOAT, mem, sp, H5P_DEFAULT, v) >= 0,
            "write planes from %llu", (unsigned long long)z);
    }
    H5Sclose(mem);
    H5Dclose(dense);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Fclose(f);
    free(v);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  slabfeed_config c = nbody_config(path, 8, 3);
  compare_reader(&c, 4, "partly written chunked dataset (fill 7.5)");
  /* Read directly on two threads a rank beside "Dense": on several ranks
   * of a node with room in /dev/shm the slabs are files (auto), "Dense"
   * written into them by pread and "Nbody" (pread cannot read unwritten
   * chunks) through MPI-IO into its channels' pages, populated first. */
  c.target = "Dense";
  c.read_mode = SLABFEED_READ_DIRECT;
  c.touch_threads = 2;
  compare_reader(&c, 4, "partly written Nbody beside contiguous Dense, direct");
  char how[4096];
  placement_of(&c, "partly written, direct", how, sizeof how);
  CHECK(strstr(how, "files of each rank's own") == NULL ||
            strstr(how, "; read through MPI-IO (1 field), into pages "
                        "populated first)") != NULL,
        "partly written, direct, on %d ranks: files, one field populated "
        "first: %s",
        size, how);
  const char *mem = strstr(how, "shared memory");
  if (rank == 0)
    printf("  partly written, direct: %s\n", mem != NULL ? mem : how);
  /* That populate refused on one rank alone (no room in /dev/shm, here
   * injected on the last rank): every rank gets its error, naming the
   * rank and the field, instead of a SIGBUS in MPI-IO's copy. */
  int populated = strstr(how, "into pages populated first") != NULL;
  MPI_Allreduce(MPI_IN_PLACE, &populated, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (populated) {
    char victim[64], who[32];
    snprintf(victim, sizeof victim, "read.populate@%d", size - 1);
    snprintf(who, sizeof who, "rank %d:", size - 1);
    setenv("SLABFEED_TEST_FAIL", victim, 1);
    expect_refused(&c, who, "slab files for 'Nbody'",
                   "populate refused on one rank");
    unsetenv("SLABFEED_TEST_FAIL");
  }
}

/* (4,12,10,8) channels-first float64, contiguous, the index function's
 * values (exact in float32). Opened with read_mode direct: the crops
 * equal the serial reader's, and on several ranks of one node the slabs
 * are a window per rank, not files (pread cannot take float64). */
static void float64_volume(const char *path)
{
  if (rank == 0) {
    const hsize_t dims[4] = {4, 12, 10, 8};
    double *v = malloc(4 * 12 * 10 * 8 * sizeof *v);
    for (int c = 0; c < 4; c++)
      for (int z = 0; z < 12; z++)
        for (int y = 0; y < 10; y++)
          for (int x = 0; x < 8; x++)
            v[((c * 12 + z) * 10 + y) * 8 + x] =
                slabfeed_index_value(0, c, z, y, x);
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t sp = H5Screate_simple(4, dims, NULL);
    const hid_t d = H5Dcreate2(f, "Nbody", H5T_IEEE_F64LE, sp, H5P_DEFAULT,
                               H5P_DEFAULT, H5P_DEFAULT);
    CHECK(v != NULL && d >= 0 &&
              H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                       v) >= 0,
          "write %s", path);
    H5Dclose(d);
    H5Sclose(sp);
    H5Fclose(f);
    free(v);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  slabfeed_config c = nbody_config(path, 6, 2);
  c.read_mode = SLABFEED_READ_DIRECT;
  compare_reader(&c, 3, "float64 volume, read_mode direct");
  char how[4096];
  placement_of(&c, "float64", how, sizeof how);
  CHECK(strstr(how, "files of each rank's own") == NULL &&
            (size == 1 || getenv("SLABFEED_RANK_PER_NODE") != NULL ||
             strstr(how, "shared memory: a window per rank") != NULL),
        "float64 on %d ranks: the slabs in windows, not files: %s", size, how);
}

/* Channels-last with Z = 3 < C = 4. */
static void thin_channels_last(const char *path, const char *raw)
{
  slabfeed_gen_config g;
  slabfeed_gen_config_init(&g);
  g.overwrite = 1; /* a rerun regenerates */
  g.path = path;
  g.target = NULL;
  g.shape[0] = 3, g.shape[1] = 16, g.shape[2] = 16;
  g.layout = SLABFEED_LAYOUT_CL;
  char err[1024] = "";
  CHECK(slabfeed_generate(MPI_COMM_WORLD, &g, err, sizeof err) == SLABFEED_OK,
        "generate: %s", err);
  slabfeed_dataset_info info = SLABFEED_DATASET_INFO_INIT;
  CHECK(slabfeed_describe(path, "Nbody", SLABFEED_LAYOUT_AUTO, &info, err,
                          sizeof err) == SLABFEED_OK &&
            info.layout == SLABFEED_LAYOUT_CL && info.channels == 4 &&
            info.shape[0] == 3,
        "auto follows the recorded layout: layout %d, %lld channels, Z %lld "
        "(%s)",
        (int)info.layout, (long long)info.channels, (long long)info.shape[0],
        err);
  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = path;
  c.input = "Nbody";
  c.crop[0] = 3, c.crop[1] = 8, c.crop[2] = 8;
  c.symmetries = SLABFEED_SYM_NONE;
  c.batch = 2;
  compare_reader(&c, 3, "channels-last Z=3 < C=4 from slabfeed-gen");

  /* The same shape without the attribute: ambiguous, refused. */
  if (rank == 0) {
    const hsize_t dims[4] = {3, 16, 16, 4};
    const hid_t f = H5Fcreate(raw, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t sp = H5Screate_simple(4, dims, NULL);
    const hid_t d = H5Dcreate2(f, "Nbody", H5T_IEEE_F32LE, sp, H5P_DEFAULT,
                               H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d);
    H5Sclose(sp);
    H5Fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  c.path = raw;
  slabfeed_loader *l = NULL;
  const slabfeed_status st =
      slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err);
  CHECK(st == SLABFEED_ERR_FORMAT && strstr(err, "layout auto") != NULL,
        "(3,16,16,4) without a layout attribute must be refused: %s", err);
  slabfeed_close(l);
}

/* A file path of 250 bytes (nested directories). */
static void long_path(char *path, size_t len)
{
  char dir[300] = "longpath";
  if (rank == 0)
    mkdir(dir, 0755);
  while (strlen(dir) < 230) {
    strcat(dir, "/directory_with_a_long_name_");
    if (rank == 0)
      mkdir(dir, 0755);
  }
  snprintf(path, len, "%s/vol_np%d.h5", dir, size);
  MPI_Barrier(MPI_COMM_WORLD);
}

/* Independent of the library's own test: the version string of the MPI. */
static int is_open_mpi(void)
{
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int n = 0;
  MPI_Get_library_version(v, &n);
  return strstr(v, "Open MPI") != NULL;
}

static void long_path_case(int expect_ok)
{
  char path[400];
  long_path(path, sizeof path);
  slabfeed_gen_config g;
  slabfeed_gen_config_init(&g);
  g.overwrite = 1; /* a rerun regenerates */
  g.path = path;
  g.shape[0] = 8, g.shape[1] = 8, g.shape[2] = 8;
  char err[1024] = "";
  const slabfeed_status st =
      slabfeed_generate(MPI_COMM_WORLD, &g, err, sizeof err);
  if (expect_ok) {
    CHECK(st == SLABFEED_OK, "a %zu-byte path with the workaround: %s",
          strlen(path), err);
    slabfeed_config c;
    slabfeed_config_init(&c);
    c.path = path;
    c.input = "Nbody";
    c.crop[0] = c.crop[1] = c.crop[2] = 4;
    compare_reader(&c, 2,
                   is_open_mpi()
                       ? "250-byte path (OMPI_MCA_sharedfp=^lockedfile)"
                       : "250-byte path");
  } else {
    CHECK(st == SLABFEED_ERR_ARG && strstr(err, "OMPI_MCA_sharedfp") != NULL,
          "a %zu-byte path: a clear message with the workaround, got %s",
          strlen(path), err);
    if (rank == 0 && st == SLABFEED_ERR_ARG)
      printf("  %zu-byte path: %s\n", strlen(path), err);
  }
}

/* A new file at path (chunked or not) opened collectively, its dataset
 * "Hydro" into *d and *info; a failure in *e. */
static void open_hydro(const char *path, int chunked, hid_t *f, hid_t *d,
                       slabfeed_dataset_info *info, sf__err *e)
{
  make_file(path, 12, 8, 8, SLABFEED_LAYOUT_CF, chunked, 0, 1);
  sf__err_clear(e);
  *f = *d = H5I_INVALID_HID;
  sf__h5_open(MPI_COMM_WORLD, path, f, e);
  sf__h5_dataset(*f, path, "Hydro", SLABFEED_LAYOUT_AUTO, d, info, e);
}

/* A file truncated after it was opened: the size check finds it. */
static void shrinking(const char *path)
{
  sf__err e;
  hid_t f, d;
  slabfeed_dataset_info info;
  open_hydro(path, 0, &f, &d, &info, &e);
  CHECK(e.status == SLABFEED_OK &&
            sf__h5_check_size(d, path, "Hydro", 0, &e) == SLABFEED_OK,
        "intact file: %s", e.msg);
  const uint64_t before = sf__h5_file_bytes(path);
  MPI_Barrier(MPI_COMM_WORLD);
  struct stat st;
  if (rank == 0 && stat(path, &st) == 0)
    CHECK(truncate(path, st.st_size / 2) == 0, "truncate");
  MPI_Barrier(MPI_COMM_WORLD);
  sf__err shrank;
  sf__err_clear(&shrank);
  CHECK(sf__h5_check_size(d, path, "Hydro", before, &shrank) ==
                SLABFEED_ERR_IO &&
            strstr(shrank.msg, "shrank") != NULL,
        "a file that shrank during the read must be an error: %s", shrank.msg);
  CHECK(sf__h5_check_size(d, path, "Hydro", 0, &e) == SLABFEED_ERR_IO &&
            strstr(e.msg, "truncated") != NULL,
        "a file that ends before its data must be an error: %s", e.msg);
  if (rank == 0 && e.status == SLABFEED_ERR_IO)
    printf("  file truncated after open: %s\n", e.msg);
  if (d >= 0)
    H5Dclose(d);
  if (f >= 0)
    H5Fclose(f);
}

/* A chunked file truncated after it was opened, read directly (pread of
 * its chunks, 0.10): the read fails on every rank, naming the dataset,
 * the file and that it ends before the data (HDF5 finds it first, at the
 * rank's own open of the file to look up the chunks: "truncated file"). */
static void shrinking_chunks(const char *path)
{
  sf__err e;
  hid_t f, d;
  slabfeed_dataset_info info;
  open_hydro(path, 1, &f, &d, &info, &e);
  CHECK(e.status == SLABFEED_OK && sf__h5_direct_ok(d, &info),
        "chunks without filters are read directly: %s", e.msg);
  MPI_Barrier(MPI_COMM_WORLD);
  struct stat st;
  if (rank == 0 && stat(path, &st) == 0)
    CHECK(truncate(path, st.st_size / 2) == 0, "truncate");
  MPI_Barrier(MPI_COMM_WORLD);
  /* Every rank reads the whole box: each meets the end. */
  const int64_t n = info.shape[0], cube = n * info.shape[1] * info.shape[2];
  float *buf = malloc((size_t)(info.channels * cube) * sizeof *buf);
  const sf__h5_run run = {0, n, 0};
  if (e.status == SLABFEED_OK && buf != NULL)
    sf__h5_read(d, path, "Hydro", &info, &run, 1, buf, cube,
                SF_H5_DIRECT | SF_H5_INDEPENDENT, 2, NULL, NULL, &e);
  CHECK(e.status == SLABFEED_ERR_IO &&
            (strstr(e.msg, "ends before") || strstr(e.msg, "truncated")) &&
            strstr(e.msg, "Hydro") && strstr(e.msg, path),
        "a chunked file that ends before its chunks: %s", e.msg);
  if (rank == 0 && e.status == SLABFEED_ERR_IO)
    printf("  chunked file truncated after open: %s\n", e.msg);
  free(buf);
  if (d >= 0)
    H5Dclose(d);
  if (f >= 0)
    H5Fclose(f);
}

/* MemAvailable of this node, bytes (0 when unknown). */
static uint64_t mem_available(void)
{
  FILE *f = fopen("/proc/meminfo", "r");
  char line[256];
  unsigned long long kb = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
      break;
  if (f != NULL)
    fclose(f);
  return (uint64_t)kb * 1024;
}

/* Host batches that cannot fit: NOMEM at open on every rank. The batch is
 * sized from the node's available memory: the ring of every rank alone
 * (prefetch 2, 9 channels of 8^3 f32 per sample) asks for 1.5 times it. */
static void too_big(const char *path)
{
  /* Rank 0's reading for all: MemAvailable moves while other tests run,
   * and ranks must pass the same batch. */
  uint64_t avail = mem_available();
  MPI_Bcast(&avail, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  const uint64_t per_sample = 2 * 9 * 512 * 4;
  const uint64_t b = avail / per_sample * 3 / 2 + 1;
  if (avail == 0 || b > 2000000000) {
    if (rank == 0)
      printf("  (no /proc/meminfo or too much memory: impossible batch not "
             "tried)\n");
    return;
  }
  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = path;
  c.input = "Nbody";
  c.target = "Hydro";
  c.layout = SLABFEED_LAYOUT_CF;
  c.crop[0] = c.crop[1] = c.crop[2] = 8;
  c.batch = (int)b;
  slabfeed_loader *l = NULL;
  char err[1024] = "";
  const slabfeed_status st =
      slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err);
  CHECK(st == SLABFEED_ERR_NOMEM && strstr(err, "host memory") != NULL,
        "an impossible batch must fail at open with NOMEM: %s (%s)",
        slabfeed_status_name(st), err);
  if (rank == 0 && st == SLABFEED_ERR_NOMEM)
    printf("  batch of %d crops: %s\n", c.batch, err);
  slabfeed_close(l);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && strcmp(argv[1], "longpath") == 0) {
    long_path_case(1);
    return check_finish("legit.longpath");
  }
  char a[64], b[64], c[64];
  snprintf(a, sizeof a, "legit_np%d_partial.h5", size);
  partly_written(a);
  snprintf(a, sizeof a, "legit_np%d_f64.h5", size);
  float64_volume(a);
  snprintf(a, sizeof a, "legit_np%d_thin.h5", size);
  snprintf(b, sizeof b, "legit_np%d_thinraw.h5", size);
  thin_channels_last(a, b);
  /* The long-path guard is for Open MPI's sharedfp/lockedfile only: under
   * another MPI (MPICH's ROMIO) the same path must simply work. */
  const char *fp = getenv("OMPI_MCA_sharedfp");
  if (sf__h5_is_parallel() && !is_open_mpi())
    long_path_case(1);
  else if (sf__h5_is_parallel() && fp == NULL)
    long_path_case(0);
  snprintf(c, sizeof c, "legit_np%d_shrink.h5", size);
  shrinking(c);
  snprintf(c, sizeof c, "legit_np%d_shrinkc.h5", size);
  shrinking_chunks(c);
  snprintf(c, sizeof c, "legit_np%d_big.h5", size);
  make_file(c, 12, 8, 8, SLABFEED_LAYOUT_CF, 0, 0, 1);
  too_big(c);
  return check_finish("legit");
}
