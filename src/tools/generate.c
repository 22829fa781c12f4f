/* Synthetic volumes written in parallel: each rank writes its z-slab with
 * collective hyperslab writes, in runs that bound its memory. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "common/errors.h"
#include "common/geometry.h"
#include "io/h5.h"
#include "common/inject.h"
#include "plan/sampler.h"

void slabfeed_gen_config_init_sized(slabfeed_gen_config *cfg, size_t size)
{
  if (cfg == NULL || size < sizeof(size_t))
    return;
  slabfeed_gen_config d;
  memset(&d, 0, sizeof d);
  d.size = size;
  d.input = "Nbody";
  d.target = "Hydro";
  d.shape[0] = d.shape[1] = d.shape[2] = 64;
  d.input_channels = 4;
  d.target_channels = 5;
  d.layout = SLABFEED_LAYOUT_CF;
  d.content = SLABFEED_CONTENT_INDEX;
  sf__sized_init(cfg, size, &d, sizeof d);
}

float slabfeed_index_value(int dataset, int c, int64_t z, int64_t y, int64_t x)
{
  const uint64_t key = (((uint64_t)dataset * 64 + (uint64_t)c) << 48) ^
                       ((uint64_t)z << 32) ^ ((uint64_t)y << 16) ^ (uint64_t)x;
  return (float)((int64_t)(sf__fmix64(key) % 2048) - 1024);
}

/* ---- Smooth periodic field ---------------------------------------------- */

#define FIELD_LONG 12  /* modes of wave number <= 3 per axis (the box scale) */
#define FIELD_SHORT 12 /* modes of wave number <= N/16 per axis (cells) */
#define FIELD_MODES (FIELD_LONG + FIELD_SHORT)
#define FIELD_SIGMA 2.0 /* Gaussian smoothing of the target, in cells */
#define SF_TWO_PI 6.283185307179586

/* A sum of plane waves with integer wave vectors, long and short ones. The
 * input ("N-body") is density exp(delta) and velocity -grad(phi) of two
 * such sums. The target ("hydro") is a deterministic, non-local and
 * non-linear function of the same field, so that a network has something
 * to learn: density exp(delta_s) and velocity of the sums smoothed with a
 * Gaussian of FIELD_SIGMA cells (each mode damped by exp(-k^2 sigma^2/2),
 * exact for plane waves), and a temperature exp(delta_s)^(2/3) heated by
 * the smoothed kinetic energy. */
typedef struct field {
  int64_t n[3];
  double k[FIELD_MODES][3]; /* 2*pi*m/N per axis */
  double amp_d[FIELD_MODES], amp_p[FIELD_MODES], phase[FIELD_MODES];
  double damp[FIELD_MODES]; /* exp(-|k|^2 sigma^2 / 2) */
} field;

static void field_init(field *f, const int64_t n[3], uint64_t seed)
{
  memcpy(f->n, n, sizeof f->n);
  for (int m = 0; m < FIELD_MODES; m++) {
    double k2 = 0;
    for (int a = 0; a < 3; a++) {
      int64_t top = m < FIELD_LONG ? 3 : n[a] / 16;
      top = top < 1 ? 1 : top;
      const int64_t w =
          (int64_t)sf__uniform(sf__hash(seed, 1, (uint64_t)m, (uint32_t)a),
                               (uint64_t)(2 * top + 1)) -
          top;
      f->k[m][a] = SF_TWO_PI * (double)w / (double)n[a];
      k2 += f->k[m][a] * f->k[m][a];
    }
    const double u =
        (double)sf__hash(seed, 2, (uint64_t)m, 0) / 18446744073709551616.0;
    const double v =
        (double)sf__hash(seed, 2, (uint64_t)m, 1) / 18446744073709551616.0;
    const double t =
        (double)sf__hash(seed, 2, (uint64_t)m, 2) / 18446744073709551616.0;
    const double scale = m < FIELD_LONG ? 1.0 : 0.5;
    f->amp_d[m] = 0.5 * scale * (u - 0.5);
    f->amp_p[m] = 4.0 * scale * (v - 0.5);
    f->phase[m] = SF_TWO_PI * t;
    f->damp[m] = exp(-0.5 * k2 * FIELD_SIGMA * FIELD_SIGMA);
  }
}

/* Channel values at one point of dataset d (0 input, 1 target): out[0]
 * density, out[1..3] velocity (z,y,x), out[4] temperature (target; the
 * input's fifth channel, if any, is its own density squared). */
static void field_eval(const field *f, int d, int64_t z, int64_t y, int64_t x,
                       double out[5])
{
  double delta = 0, v[3] = {0, 0, 0};
  for (int m = 0; m < FIELD_MODES; m++) {
    const double arg = f->k[m][0] * (double)z + f->k[m][1] * (double)y +
                       f->k[m][2] * (double)x + f->phase[m];
    const double g = d == 0 ? 1.0 : f->damp[m];
    const double s = sin(arg), c = cos(arg);
    delta += g * f->amp_d[m] * c;
    for (int a = 0; a < 3; a++)
      v[a] += g * f->amp_p[m] * f->k[m][a] * s * (double)f->n[a] / 8.0;
  }
  out[0] = exp(delta);
  out[1] = v[0];
  out[2] = v[1];
  out[3] = v[2];
  const double kinetic = 0.5 * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  out[4] =
      d == 0 ? out[0] * out[0] : pow(out[0], 2.0 / 3.0) * (1.0 + 0.1 * kinetic);
}

static float field_channel(const double vals[5], int c)
{
  return (float)(c < 5 ? vals[c] : vals[0] * (double)(c - 3));
}

/* ---- Writing ------------------------------------------------------------- */

static hid_t make_file_type(int float16)
{
  const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  if (t < 0 || !float16)
    return t;
  if (H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_size(t, 2) < 0 ||
      H5Tset_ebias(t, 15) < 0) {
    H5Tclose(t);
    return H5I_INVALID_HID;
  }
  return t;
}

/* Records the layout ("cf" or "cl") as a string attribute, so that layout
 * auto never has to guess from the shape for the generator's output. */
static herr_t write_layout(hid_t dset, int cf)
{
  const hid_t t = H5Tcopy(H5T_C_S1);
  const hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5I_INVALID_HID;
  herr_t rc = t < 0 || sp < 0 || H5Tset_size(t, 2) < 0 ? -1 : 0;
  if (rc >= 0)
    a = H5Acreate2(dset, SF_LAYOUT_ATTR, t, sp, H5P_DEFAULT, H5P_DEFAULT);
  rc = a < 0 ? -1 : H5Awrite(a, t, cf ? "cf" : "cl");
  if (a >= 0)
    H5Aclose(a);
  if (sp >= 0)
    H5Sclose(sp);
  if (t >= 0)
    H5Tclose(t);
  return rc;
}

static hid_t create_dataset(hid_t file, const slabfeed_gen_config *cfg,
                            const char *name, int64_t channels)
{
  const int cf = cfg->layout != SLABFEED_LAYOUT_CL;
  hsize_t dims[4], chunk[4];
  for (int a = 0; a < 3; a++) {
    const int64_t ch = cfg->chunk[a] > 0    ? cfg->chunk[a]
                       : cfg->shape[a] < 64 ? cfg->shape[a]
                                            : 64;
    dims[cf ? a + 1 : a] = (hsize_t)cfg->shape[a];
    chunk[cf ? a + 1 : a] = (hsize_t)(ch < cfg->shape[a] ? ch : cfg->shape[a]);
  }
  dims[cf ? 0 : 3] = (hsize_t)channels;
  chunk[cf ? 0 : 3] = cf ? 1 : (hsize_t)channels;
  const hid_t space = H5Screate_simple(4, dims, NULL);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  const hid_t type = make_file_type(cfg->float16);
  hid_t dset = H5I_INVALID_HID;
  if (space >= 0 && dcpl >= 0 && type >= 0 &&
      H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0 &&
      H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0 &&
      (!cfg->chunked || H5Pset_chunk(dcpl, 4, chunk) >= 0))
    dset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (dset >= 0 && write_layout(dset, cf) < 0) {
    H5Dclose(dset);
    dset = H5I_INVALID_HID;
  }
  if (type >= 0)
    H5Tclose(type);
  if (dcpl >= 0)
    H5Pclose(dcpl);
  if (space >= 0)
    H5Sclose(space);
  return dset;
}

/* Fills buf with planes [z, z+n) of dataset d in the file's layout. */
static void fill_run(const slabfeed_gen_config *cfg, const field *f, int d,
                     int64_t channels, int64_t z, int64_t n, float *buf)
{
  const int64_t Y = cfg->shape[1], X = cfg->shape[2];
  const int cf = cfg->layout != SLABFEED_LAYOUT_CL;
  for (int64_t k = 0; k < n; k++)
    for (int64_t y = 0; y < Y; y++)
      for (int64_t x = 0; x < X; x++) {
        double vals[5];
        if (cfg->content == SLABFEED_CONTENT_FIELD)
          field_eval(f, d, z + k, y, x, vals);
        for (int64_t c = 0; c < channels; c++) {
          const float v = cfg->content == SLABFEED_CONTENT_FIELD
                              ? field_channel(vals, (int)c)
                              : slabfeed_index_value(d, (int)c, z + k, y, x);
          const int64_t i = cf ? ((c * n + k) * Y + y) * X + x
                               : ((k * Y + y) * X + x) * channels + c;
          buf[i] = v;
        }
      }
}

static herr_t write_run(hid_t dset, const slabfeed_gen_config *cfg,
                        int64_t channels, int64_t z, int64_t n, hid_t dxpl,
                        const float *buf)
{
  const int cf = cfg->layout != SLABFEED_LAYOUT_CL;
  const hid_t fspace = H5Dget_space(dset);
  hsize_t start[4] = {0, 0, 0, 0}, count[4];
  start[cf ? 1 : 0] = (hsize_t)z;
  count[cf ? 0 : 3] = (hsize_t)channels;
  count[cf ? 1 : 0] = (hsize_t)n;
  count[cf ? 2 : 1] = (hsize_t)cfg->shape[1];
  count[cf ? 3 : 2] = (hsize_t)cfg->shape[2];
  hid_t mspace = H5I_INVALID_HID;
  herr_t rc = fspace < 0 ? -1 : 0;
  if (rc >= 0 && n == 0) {
    const hsize_t one = 1;
    mspace = H5Screate_simple(1, &one, NULL);
    rc = mspace < 0 || H5Sselect_none(mspace) < 0 || H5Sselect_none(fspace) < 0
             ? -1
             : 0;
  } else if (rc >= 0) {
    mspace = H5Screate_simple(4, count, NULL);
    rc = mspace < 0 ? -1
                    : H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL,
                                          count, NULL);
  }
  if (rc >= 0)
    rc = H5Dwrite(dset, H5T_NATIVE_FLOAT, mspace, fspace, dxpl, buf);
  if (mspace >= 0)
    H5Sclose(mspace);
  if (fspace >= 0)
    H5Sclose(fspace);
  return rc;
}

static slabfeed_status check_gen_config(const slabfeed_gen_config *cfg,
                                        int size, sf__err *e)
{
  if (cfg->path == NULL || cfg->input == NULL)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "generator: path and input are required");
  for (int a = 0; a < 3; a++)
    if (cfg->shape[a] < 1 || cfg->shape[a] > 65535)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "generator: box extent %lld on axis %d not in [1,65535]",
                      (long long)cfg->shape[a], a);
  if (cfg->input_channels < 1 || cfg->input_channels > 64 ||
      (cfg->target != NULL &&
       (cfg->target_channels < 1 || cfg->target_channels > 64)))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "generator: channel counts must be 1..64");
  if ((int64_t)size > cfg->shape[0])
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "generator: %d ranks but only %lld z-planes", size,
                    (long long)cfg->shape[0]);
  if (cfg->layout != SLABFEED_LAYOUT_CF && cfg->layout != SLABFEED_LAYOUT_CL)
    return sf__fail(e, SLABFEED_ERR_ARG, "generator: layout must be cf or cl");
  return SLABFEED_OK;
}

/* Writes one dataset: runs of planes sized so that one run of the file
 * layout holds at most ~64 MiB (buf, `cap` planes), padded with empty
 * writes to the count of the rank with the most runs (collective writes).
 * Every rank creates the dataset and makes every write, also after a
 * local failure (then with nothing to write), so collective calls match. */
static slabfeed_status write_dataset(hid_t file, const slabfeed_gen_config *cfg,
                                     const field *f, int d, const char *name,
                                     int64_t channels, float *buf, int64_t cap,
                                     int rank, int size, double *done,
                                     double total, sf__err *e)
{
  const int64_t Z = cfg->shape[0];
  const int64_t plane = channels * cfg->shape[1] * cfg->shape[2];
  const int64_t z0 = sf__split_begin(Z, size, rank),
                z1 = sf__split_begin(Z, size, rank + 1);
  const int64_t most = sf__split_begin(Z, size, 1); /* rank 0 has the most */
  const int64_t runs = (most + cap - 1) / cap;
  const double base = *done, elem = cfg->float16 ? 2 : 4;
  const hid_t dset = create_dataset(file, cfg, name, channels);
  const hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  if (dset < 0 || dxpl < 0)
    sf__fail(e, SLABFEED_ERR_IO,
             "generator: cannot create dataset '%s' in '%s'", name, cfg->path);
#ifdef H5_HAVE_PARALLEL
  else if (H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE) < 0)
    sf__fail(e, SLABFEED_ERR_IO, "generator: cannot request collective writes");
#endif
  for (int64_t i = 0; i < runs && dset >= 0 && dxpl >= 0; i++) {
    if (d == 0 && i == 0 && sf__inject("gen.write", rank))
      sf__fail(e, SLABFEED_ERR_IO, "injected failure at stage 'gen.write'");
    const int64_t z = z0 + i * cap;
    int64_t n = z >= z1 ? 0 : (z1 - z < cap ? z1 - z : cap);
    n = e->status == SLABFEED_OK ? n : 0;
    if (n > 0)
      fill_run(cfg, f, d, channels, z, n, buf);
    if (write_run(dset, cfg, channels, z, n, dxpl, buf) < 0 &&
        e->status == SLABFEED_OK) {
      sf__fail(e, SLABFEED_ERR_IO,
               "generator: writing planes [%lld,%lld) of '%s' failed",
               (long long)z, (long long)(z + n), name);
      sf__h5_detail(e);
    }
    /* What all ranks have written after this run: rank r's first
     * min(its planes, (i + 1) * cap) planes (ranks with fewer planes than
     * rank 0 finish earlier and then write nothing). */
    double written = 0;
    for (int r = 0; r < size; r++) {
      const int64_t have =
          sf__split_begin(Z, size, r + 1) - sf__split_begin(Z, size, r);
      written += (double)(have < (i + 1) * cap ? have : (i + 1) * cap);
    }
    const double now = base + written * (double)plane * elem;
    if (cfg->progress && rank == 0 && total > 1e9 && now > *done)
      printf("slabfeed-gen: %s %5.1f%% of %.2f GB\n", name,
             100.0 * (now < total ? now : total) / total, total / 1e9),
          fflush(stdout);
    *done = now;
  }
  if (dxpl >= 0)
    H5Pclose(dxpl);
  if (dset >= 0 && H5Dclose(dset) < 0)
    sf__fail(e, SLABFEED_ERR_IO, "generator: closing '%s' failed", name);
  return e->status;
}

/* The name the generator writes to, renamed to the final path only when
 * every rank has written everything: the path with rank 0's process id
 * (broadcast), so that two jobs writing one path do not share it. */
static slabfeed_status temp_name(MPI_Comm comm, const char *path, char *out,
                                 size_t len, sf__err *e)
{
  long pid = (long)getpid();
  SF_MPI_GOTO(MPI_Bcast(&pid, 1, MPI_LONG, 0, comm), e, out);
  snprintf(out, len, "%s.slabfeed-partial.%ld", path, pid);
out:
  return e->status;
}

/* Planes per write run: one run of the larger dataset holds ~64 MiB, and
 * no more planes than a rank has. */
static int64_t run_planes(const slabfeed_gen_config *cfg, int size)
{
  int64_t ch = cfg->input_channels;
  if (cfg->target != NULL && cfg->target_channels > ch)
    ch = cfg->target_channels;
  const int64_t plane = ch * cfg->shape[1] * cfg->shape[2];
  const int64_t most = (cfg->shape[0] + size - 1) / size; /* planes of rank 0 */
  int64_t cap = ((int64_t)64 << 20) / plane;
  cap = cap < most ? cap : most;
  return cap < 1 ? 1 : cap;
}

slabfeed_status slabfeed_generate(MPI_Comm comm,
                                  const slabfeed_gen_config *user, char *errbuf,
                                  size_t errlen)
{
  sf__err e;
  sf__err_clear(&e);
  /* The caller's struct may be shorter (older) than ours: missing fields
   * take their defaults. */
  slabfeed_gen_config own;
  slabfeed_gen_config_init(&own);
  const slabfeed_gen_config *cfg = &own;
  if (user == NULL ||
      user->size < offsetof(slabfeed_gen_config, path) + sizeof(const char *))
    sf__fail(&e, SLABFEED_ERR_ARG,
             "generator: the config is NULL or its size is too small "
             "(initialise it with slabfeed_gen_config_init)");
  else
    memcpy(&own, user, user->size < sizeof own ? user->size : sizeof own);
  own.size = sizeof own;
  int rank = 0, size = 1;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
      MPI_Comm_size(comm, &size) != MPI_SUCCESS)
    sf__fail(&e, SLABFEED_ERR_MPI, "generator: MPI_Comm_rank/size failed");
  if (e.status == SLABFEED_OK && check_gen_config(cfg, size, &e) == SLABFEED_OK)
    sf__h5_preflight(cfg->path, 1, &e);
  /* Memory first: a rank that cannot allocate fails before any file is
   * touched (an existing file of that name is left as it was). */
  const int writer = sf__h5_is_parallel() || rank == 0;
  const int64_t cap = e.status == SLABFEED_OK ? run_planes(cfg, size) : 0;
  float *buf = NULL;
  if (e.status == SLABFEED_OK && writer) {
    const int64_t ch =
        cfg->target != NULL && cfg->target_channels > cfg->input_channels
            ? cfg->target_channels
            : cfg->input_channels;
    const size_t bytes =
        (size_t)(cap * ch * cfg->shape[1] * cfg->shape[2]) * sizeof *buf;
    buf = sf__inject("gen.alloc", rank) ? NULL : malloc(bytes);
    if (buf == NULL)
      sf__fail(&e, SLABFEED_ERR_NOMEM,
               "generator: cannot allocate %zu bytes of write buffer", bytes);
  }
  if (sf__agree(comm, &e) != SLABFEED_OK) {
    free(buf);
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  char tmp[4200];
  if (temp_name(comm, cfg->path, tmp, sizeof tmp, &e) != SLABFEED_OK) {
    free(buf);
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  sf__h5_quiet q;
  sf__h5_quiet_begin(&q);
  field f;
  field_init(&f, cfg->shape, cfg->seed);
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#ifdef H5_HAVE_PARALLEL
  if (fapl >= 0 && (H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) < 0 ||
                    H5Pset_coll_metadata_write(fapl, 1) < 0))
    sf__fail(&e, SLABFEED_ERR_IO, "generator: cannot set the MPI-IO driver");
  hid_t file = e.status == SLABFEED_OK
                   ? H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)
                   : H5I_INVALID_HID;
#else
  /* Serial HDF5: rank 0 writes everything, the others wait. */
  hid_t file = rank == 0 ? H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl) : 0;
  size = 1; /* the writer (rank 0) covers the whole box */
#endif
  if (e.status == SLABFEED_OK && file < 0) {
    sf__fail(&e, SLABFEED_ERR_IO, "generator: cannot create '%s'", tmp);
    sf__h5_detail(&e);
  }
  if (sf__inject("gen.create", rank))
    sf__fail(&e, SLABFEED_ERR_IO, "injected failure at stage 'gen.create'");
  /* Ranks that have the file open write (or, after a local failure, make
   * the same collective calls with nothing to write). */
  if (sf__agree(comm, &e) == SLABFEED_OK) {
    const int64_t vox = cfg->shape[0] * cfg->shape[1] * cfg->shape[2];
    const double total =
        (double)vox * (cfg->float16 ? 2.0 : 4.0) *
        (cfg->input_channels + (cfg->target ? cfg->target_channels : 0));
    double done = 0;
    if (writer)
      write_dataset(file, cfg, &f, 0, cfg->input, cfg->input_channels, buf, cap,
                    rank, size, &done, total, &e);
    if (writer && cfg->target != NULL)
      write_dataset(file, cfg, &f, 1, cfg->target, cfg->target_channels, buf,
                    cap, rank, size, &done, total, &e);
  }
  if (file > 0 && writer && H5Fclose(file) < 0)
    sf__fail(&e, SLABFEED_ERR_IO, "generator: closing '%s' failed", tmp);
  if (fapl >= 0)
    H5Pclose(fapl);
  sf__h5_quiet_end(&q);
  free(buf);
  /* Complete everywhere: the partial file takes the final name. Else it
   * goes, and any earlier file of that name stays intact. */
  if (sf__agree(comm, &e) == SLABFEED_OK && rank == 0 &&
      rename(tmp, cfg->path) != 0)
    sf__fail(&e, SLABFEED_ERR_IO, "generator: cannot rename '%s' to '%s': %s",
             tmp, cfg->path, strerror(errno));
  if (e.status != SLABFEED_OK && rank == 0)
    remove(tmp);
  sf__agree(comm, &e);
  sf__err_copy(&e, errbuf, errlen);
  return e.status;
}
