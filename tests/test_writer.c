/* mpi.writer: the distributed writer of a tiled pass.
 *  - The identity "model" (its output is the input crop, whole or its
 *    centre T^3) through a pass and the writer gives back the region of the
 *    input bit for bit (f32), read independently with plain HDF5: for
 *    several T and P, regions (the box, a band that wraps), symmetries
 *    with vector channels (the writer undoes both), NCDHW and NDHWC
 *    outputs, f16 outputs, file layouts CF and CL, f16 files, chunked
 *    files, on any rank count, one node or every rank its own node
 *    (MPI_Put between "nodes"); with a normalisation the writer inverts
 *    (bit for bit with power-of-two scales, within 4e-3 through a log).
 *  - A non-identity model (2x + 1 on channel 0, like none) against the
 *    formula.
 *  - Bad input: output of the wrong shape, channels, device; a batch of
 *    another pass; a random-crop loader; the input file as output; an
 *    existing file without overwrite; a missing directory; a rank that
 *    stops putting, one that puts a batch twice, a put that fails on one
 *    rank, an injected failure at every collective stage: the same error
 *    on every rank, no hang, and no file (or the earlier file untouched)
 *    under the name. */
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/convert.h"
#include "io/h5.h"
#include "testutil.h"

static int rank, size;
static char tag[128], input[600];
/* Where the outputs go: "" (the working directory), or "/dev/shm/" for
 * the cases of planes of whole pages, where it is a tmpfs. */
static char outdir[64] = "";

/* Bytes of storage the file written aside for `out` holds (the largest
 * "<out>.slabfeed-partial.*"), 0 where there is none. */
static uint64_t aside_allocated(const char *out)
{
  char dir[800];
  snprintf(dir, sizeof dir, "%s", out);
  char *slash = strrchr(dir, '/');
  const char *base = slash != NULL ? slash + 1 : out;
  if (slash != NULL)
    *slash = '\0';
  char prefix[900];
  snprintf(prefix, sizeof prefix, "%s.slabfeed-partial.",
           slash != NULL ? strrchr(out, '/') + 1 : base);
  DIR *d = opendir(slash != NULL ? dir : ".");
  uint64_t most = 0;
  for (struct dirent *de = d != NULL ? readdir(d) : NULL; de != NULL;
       de = readdir(d)) {
    char path[1800];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", slash != NULL ? dir : ".", de->d_name);
    if (strncmp(de->d_name, prefix, strlen(prefix)) == 0 &&
        stat(path, &st) == 0 && (uint64_t)st.st_blocks * 512 > most)
      most = (uint64_t)st.st_blocks * 512;
  }
  if (d != NULL)
    closedir(d);
  return most;
}

/* Whether the outputs may be mapped where they go: a tmpfs (write_map). */
static int maps_here(void)
{
  char fs[64];
  sf__h5_local_fs(outdir[0] != '\0' ? "/dev/shm" : ".", fs, sizeof fs);
  return strcmp(fs, "tmpfs") == 0;
}

static int exists(const char *p)
{
  struct stat st;
  return stat(p, &st) == 0;
}

/* Every rank got status st (the same everywhere); prints the message. */
static void expect_all(slabfeed_status st, slabfeed_status want,
                       const char *err, const char *needle, const char *what)
{
  int lo = st, hi = st;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(st == want && lo == hi && strstr(err, needle) != NULL,
        "%s: status %s, message '%s' (want %s with '%s' on every rank)", what,
        slabfeed_status_name(st), err, slabfeed_status_name(want), needle);
  if (rank == 0)
    printf("  %-28s -> %s\n", what, err);
}

typedef struct pass_case {
  const char *name;
  int64_t T, P;
  int n_region;
  int64_t region[6];
  int symmetry;
  slabfeed_dtype dtype;    /* of the loader's batches (= the outputs) */
  slabfeed_out_layout out; /* of the loader's batches */
  int centre;              /* put the T^3 centre instead of the crop */
  slabfeed_file_layout file_layout;
  slabfeed_dtype file_dtype;
  int chunked; /* 1: chunks of 3 x 4 x 5, 2: of 2 whole planes */
  int mode;    /* 1 + the read_mode (and write mode); 0: by the case */
  int batch;
  int norm;      /* 1: an exact normalisation (power-of-two scales), 2: a log */
  int nomap;     /* write_map off (0.11) */
  int overwrite; /* the writer's overwrite */
  int noreserve; /* SLABFEED_TEST_NO_RESERVE=1: planned to map, not mapped */
  int nopopulate; /* SLABFEED_TEST_NO_POPULATE=1: mapped pages reserved
                     with fallocate (a kernel without MADV_POPULATE_WRITE) */
} pass_case;

static void pass_config(slabfeed_config *c, const pass_case *k)
{
  /* The cases go through the reads and writes of every read_mode, both
   * shared windows, page faults on 1 or 3 threads (0.7) and huge pages
   * asked for or not (0.11): the file must
   * be the same bit for bit every way. */
  static int ncase;
  const int i = ncase++;
  slabfeed_config_init(c);
  c->read_mode =
      (slabfeed_read_mode)(k->mode > 0 ? k->mode - 1 : (i + i / 4) % 4);
  c->shared_window = i % 2 ? SLABFEED_WINDOW_ONE : SLABFEED_WINDOW_PER_RANK;
  c->touch_threads = i % 4 < 2 ? 3 : 1;
  c->huge_pages = i / 2 % 2 ? SLABFEED_HUGE_OFF : SLABFEED_HUGE_AUTO;
  c->write_map = k->nomap ? SLABFEED_WRITE_MAP_OFF : SLABFEED_WRITE_MAP_AUTO;
  c->path = input;
  c->input = "Nbody";
  c->target = NULL;
  c->batch = k->batch;
  c->tile = (int)k->T;
  c->pad = (int)k->P;
  c->n_region = k->n_region;
  memcpy(c->region[0], k->region, sizeof k->region);
  c->pass_symmetry = k->symmetry;
  c->dtype = k->dtype;
  c->out_layout = k->out;
  c->n_input_vectors = 1;
  c->input_vectors[0][0] = 1, c->input_vectors[0][1] = 2,
  c->input_vectors[0][2] = 3;
  if (k->norm) {
    /* Channel 0: (x - 3) / 4, or log(x + 1100) (the values are in
     * [-1024, 1023]); the vector group shares scale 2. */
    c->n_input_norm = 4;
    c->input_norm[0] = k->norm == 1 ? (slabfeed_norm){0, 0.0f, 3.0f, 4.0f}
                                    : (slabfeed_norm){1, 1100.0f, 7.0f, 0.5f};
    for (int ch = 1; ch < 4; ch++)
      c->input_norm[ch] = (slabfeed_norm){0, 0.0f, 0.0f, 2.0f};
  }
}

/* The centre T^3 of every slot of a batch tensor, NCDHW, same dtype. */
static void *centre_of(const slabfeed_tensor *t, slabfeed_out_layout lay,
                       int64_t T, int64_t P, slabfeed_tensor *out)
{
  const size_t es = slabfeed_dtype_size(t->dtype);
  const int nc = lay == SLABFEED_OUT_NCDHW;
  const int64_t B = t->shape[0], C = t->shape[nc ? 1 : 4];
  char *buf = malloc((size_t)(B * C * T * T * T) * es);
  const char *src = t->data;
  size_t o = 0;
  for (int64_t b = 0; b < B; b++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t z = 0; z < T; z++)
        for (int64_t y = 0; y < T; y++)
          for (int64_t x = 0; x < T; x++, o++) {
            const int64_t i[3] = {z + P, y + P, x + P};
            const int64_t at = b * t->strides[0] + c * t->strides[nc ? 1 : 4] +
                               i[0] * t->strides[nc ? 2 : 1] +
                               i[1] * t->strides[nc ? 3 : 2] +
                               i[2] * t->strides[nc ? 4 : 3];
            memcpy(buf + o * es, src + (size_t)at * es, es);
          }
  *out = *t;
  out->data = buf;
  out->shape[0] = B, out->shape[1] = C;
  out->shape[2] = out->shape[3] = out->shape[4] = T;
  out->strides[4] = 1, out->strides[3] = T, out->strides[2] = T * T;
  out->strides[1] = T * T * T, out->strides[0] = C * T * T * T;
  return buf;
}

/* Opens the pass and its writer; NULL loader on failure (checked). */
static slabfeed_loader *open_pass(const pass_case *k, slabfeed_config *c)
{
  pass_config(c, k);
  char err[1024] = "";
  slabfeed_loader *l = NULL;
  const slabfeed_status st =
      slabfeed_open(MPI_COMM_WORLD, c, &l, err, sizeof err);
  CHECK(st == SLABFEED_OK, "%s: open: %s", k->name, err);
  return l;
}

static void writer_config(slabfeed_writer_config *wc, const char *path,
                          const pass_case *k, slabfeed_like like)
{
  slabfeed_writer_config_init(wc);
  wc->path = path;
  wc->layout = k->file_layout;
  wc->dtype = k->file_dtype;
  wc->like = like;
  wc->overwrite = k->overwrite;
  if (k->chunked == 1)
    wc->chunk[0] = 3, wc->chunk[1] = 4, wc->chunk[2] = 5;
  if (k->chunked == 2) /* whole planes, two ranks' planes in one chunk */
    wc->chunk[0] = 2, wc->chunk[1] = k->n_region ? k->region[4] : 18,
    wc->chunk[2] = k->n_region ? k->region[5] : 16;
}

/* The model: the identity, or (like none) 2x + 1 on channel 0 of the f32
 * batch in place. */
static void model(slabfeed_tensor *t, int affine)
{
  if (!affine)
    return;
  float *v = t->data;
  for (int64_t b = 0; b < t->shape[0]; b++)
    for (int64_t i = 0; i < t->shape[2] * t->shape[3] * t->shape[4]; i++) {
      float *p = v + b * t->strides[0] + i;
      *p = 2.0f * *p + 1.0f;
    }
}

/* Runs the pass through the writer and compares the file with the input's
 * region (affine: channel 0 is 2x + 1, the others x, no vector groups). */
static void round_trip(const pass_case *k, int affine)
{
  char out[800];
  snprintf(out, sizeof out, "%s%s_%s.h5", outdir, tag, k->name);
  if (k->noreserve)
    setenv("SLABFEED_TEST_NO_RESERVE", "1", 1);
  if (k->nopopulate)
    setenv("SLABFEED_TEST_NO_POPULATE", "1", 1);
  slabfeed_config c;
  slabfeed_loader *l = open_pass(k, &c);
  if (l == NULL) {
    unsetenv("SLABFEED_TEST_NO_RESERVE");
    unsetenv("SLABFEED_TEST_NO_POPULATE");
    return;
  }
  slabfeed_writer_config wc;
  writer_config(&wc, out, k, affine ? SLABFEED_LIKE_NONE : SLABFEED_LIKE_INPUT);
  char err[1024] = "";
  slabfeed_writer *w = NULL;
  slabfeed_status st = slabfeed_writer_open(l, &wc, &w, err, sizeof err);
  CHECK(st == SLABFEED_OK, "%s: writer open: %s", k->name, err);
  /* The storage of the file aside after open, before any put: a mapped
   * slab's pages are all allocated by then (write_map). */
  const uint64_t at_open = rank == 0 ? aside_allocated(out) : 0;
  const uint64_t steps = slabfeed_steps_per_epoch(l);
  for (uint64_t s = 0; s < steps && w != NULL; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    st = slabfeed_next(l, &b, NULL);
    CHECK(st == SLABFEED_OK, "%s: next: %s", k->name, slabfeed_last_error(l));
    if (st != SLABFEED_OK)
      break;
    slabfeed_tensor t = b.input, centre;
    void *buf = NULL;
    if (k->centre)
      buf = centre_of(&b.input, k->out, k->T, k->P, &centre), t = centre;
    model(&t, affine);
    st = slabfeed_writer_put(w, &b, &t, k->centre ? SLABFEED_OUT_NCDHW : k->out,
                             -1, NULL);
    CHECK(st == SLABFEED_OK, "%s: put: %s", k->name,
          slabfeed_writer_last_error(w));
    free(buf);
  }
  if (w != NULL) {
    int64_t shape[4], z0, z1;
    slabfeed_writer_shape(w, shape, &z0, &z1);
    /* The write mode follows read_mode: direct pwrite (0.9; of chunks,
     * 0.10) where named, and with auto where the output's filesystem is
     * local (statfs, as rank 0 decides it); collective for chunked
     * outputs where independent is named. */
    const char *how = slabfeed_writer_io(w);
    char fs[64];
    const int local = sf__h5_local_fs(outdir[0] != '\0' ? "/dev/shm" : ".", fs,
                                      sizeof fs); /* where out goes */
    int direct = c.read_mode == SLABFEED_READ_DIRECT ||
                 (c.read_mode == SLABFEED_READ_AUTO && local);
#if !H5_VERSION_GE(1, 10, 5)
    direct = direct && !k->chunked; /* no chunk lookup before 1.10.5 */
#endif
    const int ind = !k->chunked && c.read_mode == SLABFEED_READ_INDEPENDENT;
    /* write_map (0.11): the slab is the file's pages where close writes
     * directly, on one node, for a contiguous float32 output of planes of
     * whole pages (the 32 x 32 input's). */
    const int cl = k->file_layout == SLABFEED_LAYOUT_CL;
    const long page = sysconf(_SC_PAGESIZE);
    const int64_t pb =
        (cl ? shape[1] * shape[2] * shape[3] : shape[2] * shape[3]) *
        4; /* bytes of a plane (of a channel) */
    const int nodes1 = size == 1 || getenv(SLABFEED_ENV_RANK_PER_NODE) == NULL;
    const int planned = direct && !k->nomap && nodes1 && !k->chunked &&
                        k->file_dtype != SLABFEED_DTYPE_F16 && pb % page == 0 &&
                        maps_here();
    const int mapped = planned && !k->noreserve;
    /* Mapped: every page of the data allocated at open (populated, or
     * with fallocate where the kernel cannot), and said which. */
    if (mapped && rank == 0) {
      const uint64_t data =
          (uint64_t)(shape[0] * shape[1] * shape[2] * shape[3] * 4);
      CHECK(at_open >= data &&
                strstr(how, k->nopopulate ? "GB by fallocate in"
                                          : "GB populated in") != NULL,
            "%s: %llu bytes allocated at open for %llu of data; writer io "
            "'%s'",
            k->name, (unsigned long long)at_open, (unsigned long long)data,
            how);
    }
    /* Planned but the space not reserved: written, not mapped, and why. */
    if (planned && !mapped && rank == 0)
      CHECK(strstr(how, "not mapped: its space is not reserved") != NULL,
            "%s: writer io '%s'", k->name, how);
    CHECK(strstr(how, mapped   ? "the file's own pages, mapped"
                      : direct ? "direct pwrite on "
                      : ind    ? "independent MPI-IO"
                               : "collective MPI-IO") != NULL,
          "%s: read_mode %d, %s output: writer io '%s'", k->name,
          (int)c.read_mode, k->chunked ? "chunked" : "contiguous", how);
    /* The output slab's pages as asked (0.11); mapped: the file's. */
    const char *huge = strstr(how, "(huge pages: ");
    CHECK(mapped ? huge == NULL
                 : huge != NULL &&
                       (c.huge_pages == SLABFEED_HUGE_OFF) ==
                           (strncmp(huge, "(huge pages: off)", 17) == 0),
          "%s: huge_pages %s: writer io '%s'", k->name,
          c.huge_pages == SLABFEED_HUGE_OFF ? "off" : "auto", how);
    if (rank == 0)
      printf("  %-28s %s, touch_threads %d, %s window\n", k->name, how,
             c.touch_threads,
             c.shared_window == SLABFEED_WINDOW_ONE ? "one" : "per-rank");
    st = slabfeed_writer_close(w, err, sizeof err);
    CHECK(st == SLABFEED_OK, "%s: writer close: %s", k->name, err);
  }
  unsetenv("SLABFEED_TEST_NO_RESERVE");
  unsetenv("SLABFEED_TEST_NO_POPULATE");
  slabfeed_close(l);
  if (rank == 0 && st == SLABFEED_OK) {
    whole in, got;
    const int cl = k->file_layout == SLABFEED_LAYOUT_CL;
    CHECK(whole_read(input, "Nbody", 0, &in) == 0, "read %s", input);
    CHECK(whole_read(out, "prediction", cl, &got) == 0, "read %s", out);
    int64_t R[6];
    for (int a = 0; a < 3; a++) {
      R[a] = k->n_region ? k->region[a] : 0;
      const int64_t d = k->n_region ? k->region[3 + a] : 0;
      R[3 + a] = d > 0 ? d : in.dims[1 + a];
    }
    const int64_t C = in.dims[0];
    CHECK(got.v != NULL && got.dims[cl ? 3 : 0] == C &&
              got.dims[cl ? 0 : 1] == R[3] && got.dims[cl ? 1 : 2] == R[4] &&
              got.dims[cl ? 2 : 3] == R[5],
          "%s: output shape", k->name);
    int64_t bad = 0;
    for (int64_t ch = 0; ch < C && got.v != NULL; ch++)
      for (int64_t z = 0; z < R[3]; z++)
        for (int64_t y = 0; y < R[4]; y++)
          for (int64_t x = 0; x < R[5]; x++) {
            float want =
                whole_at(&in, ch, (R[0] + z) % in.dims[1],
                         (R[1] + y) % in.dims[2], (R[2] + x) % in.dims[3]);
            if (affine && ch == 0)
              want = 2.0f * want + 1.0f;
            if (k->dtype == SLABFEED_DTYPE_BF16) { /* what the batch held */
              const uint32_t h = (uint32_t)sf__f32_to_bf16(want) << 16;
              memcpy(&want, &h, sizeof want);
            }
            const float v = whole_at(&got, ch, z, y, x);
            /* exp(log(x + a)) - a is not exact: within 4e-3 of x. */
            const int ok = k->norm == 2 && ch == 0
                               ? fabsf(v - want) <= 4e-3f
                               : memcmp(&v, &want, sizeof v) == 0;
            if (!ok && bad++ < 3)
              fprintf(stderr, "%s: c%lld (%lld,%lld,%lld): %g, want %g\n",
                      k->name, (long long)ch, (long long)z, (long long)y,
                      (long long)x, v, want);
          }
    CHECK_EQ(bad, (int64_t)0, "%s: voxels differing from the input region",
             k->name);
    printf("  %-28s %lldx%lldx%lld x %lld: %s\n", k->name, (long long)R[3],
           (long long)R[4], (long long)R[5], (long long)C,
           k->norm == 2 ? "bit for bit, channel 0 (log) within 4e-3"
                        : "bit for bit");
    whole_free(&in);
    whole_free(&got);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    unlink(out);
}

/* Runs a pass into a writer; rank skip_rank leaves out its last batch and
 * rank twice_rank puts its first batch twice. Returns the status of the
 * writer's open or close, and its message. */
static slabfeed_status partial_pass(const pass_case *k, const char *out,
                                    int skip_rank, int twice_rank, char *err,
                                    size_t len)
{
  slabfeed_config c;
  slabfeed_loader *l = open_pass(k, &c);
  slabfeed_writer_config wc;
  writer_config(&wc, out, k, SLABFEED_LIKE_INPUT);
  slabfeed_writer *w = NULL;
  slabfeed_status st = slabfeed_writer_open(l, &wc, &w, err, len);
  const uint64_t steps = slabfeed_steps_per_epoch(l);
  for (uint64_t s = 0; s < steps && st == SLABFEED_OK; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK)
      break;
    if (rank == skip_rank && s == steps - 1)
      continue;
    slabfeed_writer_put(w, &b, &b.input, k->out, -1, NULL);
    if (rank == twice_rank && s == 0)
      slabfeed_writer_put(w, &b, &b.input, k->out, -1, NULL);
  }
  st = w != NULL ? slabfeed_writer_close(w, err, len) : st;
  slabfeed_close(l);
  return st;
}

static void bad_input(void)
{
  const pass_case k = {.name = "bad", .T = 6, .P = 2, .batch = 2};
  char out[700], err[1024];
  snprintf(out, sizeof out, "%s_bad.h5", tag);
  slabfeed_config c;
  slabfeed_loader *l = open_pass(&k, &c);
  if (l == NULL)
    return;
  slabfeed_writer_config wc;
  writer_config(&wc, out, &k, SLABFEED_LIKE_INPUT);
  slabfeed_writer *w = NULL;

  /* The input file as output (even with overwrite). */
  wc.path = input;
  wc.overwrite = 1;
  expect_all(slabfeed_writer_open(l, &wc, &w, err, sizeof err),
             SLABFEED_ERR_ARG, err, "is the loader's input file",
             "output = input");
  /* A missing directory. */
  char missing[800];
  snprintf(missing, sizeof missing, "%s_no/such/dir/out.h5", tag);
  wc.path = missing;
  expect_all(slabfeed_writer_open(l, &wc, &w, err, sizeof err), SLABFEED_ERR_IO,
             err, "no/such/dir", "missing directory");
  /* An existing file without overwrite stays as it was. */
  if (rank == 0) {
    FILE *f = fopen(out, "w");
    fputs("earlier", f);
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  wc.path = out;
  wc.overwrite = 0;
  expect_all(slabfeed_writer_open(l, &wc, &w, err, sizeof err), SLABFEED_ERR_IO,
             err, "exists; pass overwrite (slabfeed-predict --overwrite",
             "existing output");
  /* Channels that are not the input's without like=none. */
  wc.overwrite = 1;
  wc.channels = 3;
  expect_all(slabfeed_writer_open(l, &wc, &w, err, sizeof err),
             SLABFEED_ERR_ARG, err, "like=none", "channels differ");
  wc.channels = 0;
  wc.dtype = SLABFEED_DTYPE_BF16;
  expect_all(slabfeed_writer_open(l, &wc, &w, err, sizeof err),
             SLABFEED_ERR_ARG, err, "bfloat16", "bf16 file");
  wc.dtype = SLABFEED_DTYPE_F32;

  /* Puts refused (not sticky), then a failed close: a failure injected
   * into one rank's put. */
  slabfeed_status st = slabfeed_writer_open(l, &wc, &w, err, sizeof err);
  CHECK(st == SLABFEED_OK, "writer open: %s", err);
  slabfeed_batch b = SLABFEED_BATCH_INIT;
  st = slabfeed_next(l, &b, NULL);
  CHECK(st == SLABFEED_OK, "next: %s", slabfeed_last_error(l));
  if (w != NULL && st == SLABFEED_OK) {
    slabfeed_tensor t = b.input;
    t.shape[2] = 7; /* neither T nor T + 2P */
    st = slabfeed_writer_put(w, &b, &t, SLABFEED_OUT_NCDHW, -1, NULL);
    CHECK(st == SLABFEED_ERR_ARG &&
              strstr(slabfeed_writer_last_error(w), "expected") != NULL,
          "wrong edge: %s", slabfeed_writer_last_error(w));
    t = b.input;
    t.shape[1] = 3;
    st = slabfeed_writer_put(w, &b, &t, SLABFEED_OUT_NCDHW, -1, NULL);
    CHECK(st == SLABFEED_ERR_ARG, "wrong channels: %s",
          slabfeed_writer_last_error(w));
    st = slabfeed_writer_put(w, &b, &b.input, SLABFEED_OUT_NCDHW, 0, NULL);
    CHECK(st == SLABFEED_ERR_ARG &&
              strstr(slabfeed_writer_last_error(w), "host batches") != NULL,
          "device output for a host loader: %s", slabfeed_writer_last_error(w));
    slabfeed_batch other = b;
    int64_t tile[2][9];
    memcpy(tile, b.tile, sizeof tile);
    tile[0][0] = (tile[0][0] + 1) % 20;
    other.tile = &tile[0][0];
    st = slabfeed_writer_put(w, &other, &b.input, SLABFEED_OUT_NCDHW, -1, NULL);
    CHECK(st == SLABFEED_ERR_ARG &&
              strstr(slabfeed_writer_last_error(w), "not a tile") != NULL,
          "batch of another pass: %s", slabfeed_writer_last_error(w));
    setenv("SLABFEED_TEST_FAIL", size > 1 ? "writer.put@1" : "writer.put@0", 1);
    st = slabfeed_writer_put(w, &b, &b.input, SLABFEED_OUT_NCDHW, -1, NULL);
    unsetenv("SLABFEED_TEST_FAIL");
    st = slabfeed_writer_close(w, err, sizeof err);
    expect_all(st, SLABFEED_ERR_IO, err, "writer.put", "failed put, one rank");
  }
  slabfeed_close(l);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    FILE *f = fopen(out, "r");
    char buf[16] = "";
    CHECK(f != NULL && fgets(buf, sizeof buf, f) != NULL &&
              strcmp(buf, "earlier") == 0,
          "the earlier file was not left as it was");
    if (f != NULL)
      fclose(f);
    unlink(out);
  }
  MPI_Barrier(MPI_COMM_WORLD);

  /* A random-crop loader has no pass. */
  slabfeed_config rc;
  base_config(&rc, input, 6);
  rc.target = NULL;
  slabfeed_loader *r = NULL;
  st = slabfeed_open(MPI_COMM_WORLD, &rc, &r, err, sizeof err);
  CHECK(st == SLABFEED_OK, "random open: %s", err);
  if (r != NULL)
    expect_all(slabfeed_writer_open(r, &wc, &w, err, sizeof err),
               SLABFEED_ERR_ARG, err, "tiled pass", "random-crop loader");
  slabfeed_close(r);

  /* Coverage: rank 0 skips its last batch (it has real tiles in every
   * step); the last rank puts its first batch twice. */
  st = partial_pass(&k, out, 0, -1, err, sizeof err);
  expect_all(st, SLABFEED_ERR_STATE, err, "exactly once", "a rank stops");
  CHECK(!exists(out), "a file was left after a failed close");
  st = partial_pass(&k, out, -1, size - 1, err, sizeof err);
  expect_all(st, SLABFEED_ERR_STATE, err, "exactly once", "a batch twice");
  CHECK(!exists(out), "a file was left after a failed close");

  /* An injected failure at each collective stage, on the last rank. */
  /* writer.direct: the direct write (pwrite, no collective call), of a
   * chunked output (0.10). */
  const char *stages[] = {"writer.alloc", "writer.create", "writer.write",
                          "writer.direct", "writer.selfcheck"};
  const pass_case kc = {.name = "bad_chunks",
                        .T = 6,
                        .P = 2,
                        .batch = 2,
                        .chunked = 1,
                        .mode = 1 + SLABFEED_READ_DIRECT};
  /* The self-check of MPI_Put runs only between nodes. */
  const char *rpn = getenv("SLABFEED_RANK_PER_NODE");
  const int nstages = rpn != NULL && strcmp(rpn, "1") == 0 && size > 1 ? 5 : 4;
  for (int i = 0; i < nstages; i++) {
    char spec[64];
    snprintf(spec, sizeof spec, "%s@%d", stages[i], size - 1);
    setenv("SLABFEED_TEST_FAIL", spec, 1);
    st = partial_pass(i == 3 ? &kc : &k, out, -1, -1, err, sizeof err);
    unsetenv("SLABFEED_TEST_FAIL");
    int lo = st, hi = st;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(st != SLABFEED_OK && lo == hi, "stage %s: status %s on rank %d",
          stages[i], slabfeed_status_name(st), rank);
    CHECK(!exists(out), "stage %s: a file was left", stages[i]);
    if (rank == 0)
      printf("  injected %-19s -> %s\n", stages[i], err);
  }
}

/* The mapped slab (write_map, 0.11), failing on the last rank alone: at
 * the open's mapping of the file (writer.map), at the reservation of its
 * pages (writer.reserve: a full tmpfs) and at the close
 * (writer.direct, where nothing is left to write): the same error on
 * every rank, and an earlier file of the name byte for byte as it was. */
static void bad_mapped(void)
{
  const pass_case k = {.name = "bad_mapped",
                       .T = 8,
                       .P = 2,
                       .batch = 2,
                       .mode = 1 + SLABFEED_READ_DIRECT,
                       .overwrite = 1};
  char out[800], err[1024] = "";
  snprintf(out, sizeof out, "%s%s_bad_mapped.h5", outdir, tag);
  const char earlier[] = "an earlier file of the name";
  if (rank == 0) {
    FILE *f = fopen(out, "w");
    if (f != NULL) {
      fputs(earlier, f);
      fclose(f);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const char *stages[] = {"writer.map", "writer.reserve", "writer.direct"};
  /* writer.reserve stands for a full tmpfs: ENOSPC, said as such. */
  const char *needles[] = {"writer.map", "has no room for them",
                           "writer.direct"};
  for (int i = 0; i < 3; i++) {
    char spec[64];
    snprintf(spec, sizeof spec, "%s@%d", stages[i], size - 1);
    setenv("SLABFEED_TEST_FAIL", spec, 1);
    const slabfeed_status st = partial_pass(&k, out, -1, -1, err, sizeof err);
    unsetenv("SLABFEED_TEST_FAIL");
    int lo = st, hi = st;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(st == SLABFEED_ERR_IO && lo == hi && strstr(err, needles[i]) != NULL,
          "stage %s: status %s on rank %d: %s", stages[i],
          slabfeed_status_name(st), rank, err);
    char got[64] = "";
    FILE *f = fopen(out, "r");
    if (f != NULL) {
      if (fgets(got, sizeof got, f) == NULL)
        got[0] = '\0';
      fclose(f);
    }
    CHECK(strcmp(got, earlier) == 0, "stage %s: the earlier file reads '%s'",
          stages[i], got);
    if (rank == 0)
      printf("  injected %-19s -> %s\n", stages[i], err);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    unlink(out);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  snprintf(tag, sizeof tag, "%s", argc > 1 ? argv[1] : "writer");
  snprintf(input, sizeof input, "%s_in.h5", tag);
  make_file(input, 20, 18, 16, SLABFEED_LAYOUT_CF, 0, 0, 0);

  const pass_case cases[] = {
      {.name = "box_T6_P2", .T = 6, .P = 2, .batch = 2},
      {.name = "band_wrap_T4_P1_g17_centre",
       .T = 4,
       .P = 1,
       .n_region = 1,
       .region = {14, 0, 0, 9, 0, 0},
       .symmetry = 17,
       .centre = 1,
       .file_layout = SLABFEED_LAYOUT_CL,
       .batch = 3},
      {.name = "region_T5_P3_g35_ndhwc",
       .T = 5,
       .P = 3,
       .n_region = 1,
       .region = {3, 15, 2, 11, 7, 13},
       .symmetry = 35,
       .out = SLABFEED_OUT_NDHWC,
       .chunked = 1,
       .batch = 2},
      {.name = "box_T7_P0_g47_f16",
       .T = 7,
       .P = 0,
       .symmetry = 47,
       .dtype = SLABFEED_DTYPE_F16,
       .file_dtype = SLABFEED_DTYPE_F16,
       .batch = 4},
      {.name = "norm_exact_T6_P2_g31",
       .T = 6,
       .P = 2,
       .symmetry = 31,
       .batch = 2,
       .norm = 1},
      {.name = "norm_log_T5_P1_g4_centre",
       .T = 5,
       .P = 1,
       .symmetry = 4,
       .centre = 1,
       .batch = 2,
       .norm = 2},
      {.name = "box_T8_P4_g9_bf16_centre",
       .T = 8,
       .P = 4,
       .symmetry = 9,
       .dtype = SLABFEED_DTYPE_BF16,
       .centre = 1,
       .batch = 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    round_trip(&cases[i], 0);
  /* Chunked outputs written directly (0.10): chunks cut at every edge
   * (rows gathered through a buffer) and chunks of two whole planes that
   * two ranks share (float32 channels first: straight from the slab;
   * float16 or channels last: through the buffer), each layout and file
   * dtype; the last case by auto (direct on a local filesystem) with the
   * region's wrap. */
  const int D = 1 + SLABFEED_READ_DIRECT;
  const pass_case chunked[] = {
      /* Contiguous channels last, direct: one range per rank, split over
       * the rank's threads where it has more than one. */
      {.name = "contig_cl_T5_P1_g7",
       .T = 5,
       .P = 1,
       .symmetry = 7,
       .file_layout = SLABFEED_LAYOUT_CL,
       .mode = D,
       .batch = 2},
      {.name = "chunks_cf_T6_P2_g13",
       .T = 6,
       .P = 2,
       .symmetry = 13,
       .chunked = 1,
       .mode = D,
       .batch = 2},
      {.name = "chunks_cf_f16_T5_P1_g40",
       .T = 5,
       .P = 1,
       .symmetry = 40,
       .file_dtype = SLABFEED_DTYPE_F16,
       .dtype = SLABFEED_DTYPE_F16,
       .chunked = 1,
       .mode = D,
       .batch = 2},
      {.name = "chunks_cl_T4_P2_g29",
       .T = 4,
       .P = 2,
       .symmetry = 29,
       .file_layout = SLABFEED_LAYOUT_CL,
       .chunked = 1,
       .mode = D,
       .batch = 3},
      {.name = "chunks_planes_f16_T6_P1_g2",
       .T = 6,
       .P = 1,
       .symmetry = 2,
       .file_dtype = SLABFEED_DTYPE_F16,
       .dtype = SLABFEED_DTYPE_F16,
       .chunked = 2,
       .mode = D,
       .batch = 2},
      {.name = "chunks_planes_cl_T5_P2_g44",
       .T = 5,
       .P = 2,
       .symmetry = 44,
       .file_layout = SLABFEED_LAYOUT_CL,
       .chunked = 2,
       .mode = D,
       .batch = 2},
      {.name = "chunks_cl_f16_T5_P1_g21",
       .T = 5,
       .P = 1,
       .symmetry = 21,
       .file_layout = SLABFEED_LAYOUT_CL,
       .file_dtype = SLABFEED_DTYPE_F16,
       .dtype = SLABFEED_DTYPE_F16,
       .chunked = 1,
       .mode = D,
       .batch = 3},
      {.name = "chunks_planes_T4_P2_g6",
       .T = 4,
       .P = 2,
       .n_region = 1,
       .region = {12, 5, 3, 13, 11, 14},
       .symmetry = 6,
       .chunked = 2,
       .mode = 1 + SLABFEED_READ_AUTO,
       .batch = 2},
  };
  for (size_t i = 0; i < sizeof chunked / sizeof chunked[0]; i++)
    round_trip(&chunked[i], 0);
  const pass_case affine = {
      .name = "affine_like_none", .T = 6, .P = 1, .symmetry = 0, .batch = 2};
  round_trip(&affine, 1);
  bad_input();
  /* Planes of whole pages (32 x 32 floats, 4 KiB): the slab is the
   * file's pages where close writes directly (write_map auto), also of
   * channels last, with a symmetry, a normalisation and a band that
   * wraps; and not with write_map off, a float16 output or collective
   * writes. */
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    unlink(input);
  snprintf(input, sizeof input, "%s_in32.h5", tag);
  make_file(input, 13, 32, 32, SLABFEED_LAYOUT_CF, 0, 0, 0);
  /* Their outputs on a tmpfs where there is one (where write_map maps),
   * named by rank 0's process (runs of other builds beside this one). */
  char shm_fs[64];
  int pid = (int)getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  struct statvfs shm;
  int use_shm = sf__h5_local_fs("/dev/shm", shm_fs, sizeof shm_fs) &&
                strcmp(shm_fs, "tmpfs") == 0 && access("/dev/shm", W_OK) == 0 &&
                statvfs("/dev/shm", &shm) == 0 &&
                (uint64_t)shm.f_bavail * shm.f_frsize >= ((uint64_t)16 << 20);
  MPI_Bcast(&use_shm, 1, MPI_INT, 0, MPI_COMM_WORLD); /* rank 0's */
  if (use_shm)
    snprintf(outdir, sizeof outdir, "/dev/shm/sf%d_", pid);
  else if (rank == 0)
    printf("  (no writable tmpfs with 16 MB free at /dev/shm: the outputs "
           "stay here, not mapped)\n");
  const pass_case paged[] = {
      {.name = "map_box_T8_P2_g5",
       .T = 8,
       .P = 2,
       .symmetry = 5,
       .mode = 1 + SLABFEED_READ_DIRECT,
       .batch = 2},
      {.name = "map_cl_band_T4_P1_g30_centre",
       .T = 4,
       .P = 1,
       .n_region = 1,
       .region = {9, 0, 0, 7, 0, 0},
       .symmetry = 30,
       .centre = 1,
       .file_layout = SLABFEED_LAYOUT_CL,
       .mode = 1 + SLABFEED_READ_AUTO,
       .batch = 3},
      {.name = "map_norm_T8_P0_g11",
       .T = 8,
       .P = 0,
       .symmetry = 11,
       .norm = 1,
       .mode = 1 + SLABFEED_READ_AUTO,
       .batch = 2},
      {.name = "map_off_T8_P2",
       .T = 8,
       .P = 2,
       .nomap = 1,
       .mode = 1 + SLABFEED_READ_DIRECT,
       .batch = 2},
      {.name = "map_f16_T8_P1",
       .T = 8,
       .P = 1,
       .file_dtype = SLABFEED_DTYPE_F16,
       .mode = 1 + SLABFEED_READ_DIRECT,
       .batch = 2},
      {.name = "map_collective_T8_P1",
       .T = 8,
       .P = 1,
       .mode = 1 + SLABFEED_READ_COLLECTIVE,
       .batch = 2},
      {.name = "map_fallocate_cl_T8_P1_g3",
       .T = 8,
       .P = 1,
       .symmetry = 3,
       .file_layout = SLABFEED_LAYOUT_CL,
       .mode = 1 + SLABFEED_READ_DIRECT,
       .nopopulate = 1,
       .batch = 2},
      {.name = "map_noreserve_T8_P2",
       .T = 8,
       .P = 2,
       .mode = 1 + SLABFEED_READ_DIRECT,
       .noreserve = 1,
       .batch = 2},
  };
  for (size_t i = 0; i < sizeof paged / sizeof paged[0]; i++)
    round_trip(&paged[i], 0);
  const char *rpn = getenv(SLABFEED_ENV_RANK_PER_NODE);
  if ((size == 1 || rpn == NULL) && maps_here() &&
      32 * 32 * 4 % sysconf(_SC_PAGESIZE) == 0) /* one node: mapped */
    bad_mapped();
  else if (rank == 0)
    printf("  (no mapped slab here: the one-rank failures of a mapped slab "
           "not run)\n");
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    unlink(input);
  return check_finish("mpi.writer");
}
