/* Synthetic volumes written in parallel: each rank writes its z-slab with
 * collective hyperslab writes, in runs that bound its memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <hdf5.h>

#include "common/convert.h"
#include "common/errors.h"
#include "common/geometry.h"
#include "common/inject.h"
#include "common/progress.h"
#include "io/aside.h"
#include "io/h5.h"
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
  d.scale_factor = 1;
  d.coarsen_factor = 1;
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
static void field_eval(const field *f, int d, double z, double y, double x,
                       double out[5])
{
  double delta = 0, v[3] = {0, 0, 0};
  for (int m = 0; m < FIELD_MODES; m++) {
    const double arg =
        f->k[m][0] * z + f->k[m][1] * y + f->k[m][2] * x + f->phase[m];
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

/* One dataset the generator writes: channels [c0, c0 + C) of the input
 * (d 0) or the target (d 1), named `name`; 3-D (Z,Y,X) when ndim is 3 (a
 * field of one channel). */
typedef struct gen_item {
  int d;
  char name[256];
  int64_t c0, C;
  int ndim;
  int64_t s, q; /* its grid is s / q times the input's (a finer target:
                   scale_factor / 1; a coarser one: 1 / coarsen_factor) */
  int64_t n[3]; /* its grid: s / q x the box */
  int64_t cap;  /* planes per write run */
} gen_item;

#define SF_GEN_ITEMS 32

static hid_t create_dataset(hid_t file, const slabfeed_gen_config *cfg,
                            const gen_item *it)
{
  const char *name = it->name;
  const int64_t channels = it->C;
  const int cf = cfg->layout != SLABFEED_LAYOUT_CL && it->ndim == 4;
  hsize_t dims[4], chunk[4];
  for (int a = 0; a < 3; a++) {
    const int64_t ch = cfg->chunk[a] > 0 ? cfg->chunk[a] : 64;
    dims[cf ? a + 1 : a] = (hsize_t)it->n[a];
    chunk[cf ? a + 1 : a] = (hsize_t)(ch < it->n[a] ? ch : it->n[a]);
  }
  dims[cf ? 0 : 3] = (hsize_t)channels;
  chunk[cf ? 0 : 3] = cf ? 1 : (hsize_t)channels;
  const hid_t space = H5Screate_simple(it->ndim, dims, NULL);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  const hid_t type = sf__h5_file_type(cfg->float16);
  hid_t dset = H5I_INVALID_HID;
  if (space >= 0 && dcpl >= 0 && type >= 0 &&
      H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0 &&
      H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0 &&
      (!cfg->chunked || H5Pset_chunk(dcpl, it->ndim, chunk) >= 0))
    dset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (dset >= 0 && it->ndim == 4 && sf__h5_write_layout(dset, cf) < 0) {
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

/* Fills buf with planes [z, z+n) of item it in the file's layout; on a
 * grid s / q times the input's, cell (z,y,x) is the field at the input's
 * position (z q/s, y q/s, x q/s). */
static void fill_run(const slabfeed_gen_config *cfg, const field *f,
                     const gen_item *it, int64_t z, int64_t n, float *buf)
{
  const int d = it->d;
  const int64_t c0 = it->c0, channels = it->C;
  const int64_t Y = it->n[1], X = it->n[2];
  const double s = (double)it->s / (double)it->q;
  const int cf = cfg->layout != SLABFEED_LAYOUT_CL;
  for (int64_t k = 0; k < n; k++)
    for (int64_t y = 0; y < Y; y++)
      for (int64_t x = 0; x < X; x++) {
        double vals[5];
        if (cfg->content == SLABFEED_CONTENT_FIELD)
          field_eval(f, d, (double)(z + k) / s, (double)y / s, (double)x / s,
                     vals);
        for (int64_t c = 0; c < channels; c++) {
          const float v =
              cfg->content == SLABFEED_CONTENT_FIELD
                  ? field_channel(vals, (int)(c0 + c))
                  : slabfeed_index_value(d, (int)(c0 + c), z + k, y, x);
          const int64_t i = cf ? ((c * n + k) * Y + y) * X + x
                               : ((k * Y + y) * X + x) * channels + c;
          buf[i] = v;
        }
      }
}

/* Writes (or reads back) planes [z, z+n) of every channel of dset from buf
 * in memory type mtype; n == 0 is an empty transfer that still takes part
 * in the collective call. */
static herr_t transfer_run(hid_t dset, const slabfeed_gen_config *cfg,
                           int64_t z, int64_t n, hid_t dxpl, hid_t mtype,
                           int write, float *buf)
{
  return sf__h5_transfer_planes(dset, cfg->layout != SLABFEED_LAYOUT_CL, z, n,
                                dxpl, mtype, write, buf);
}

/* The chunk count of one dataset of `channels` channels on a grid s / q
 * times the box's (0 when contiguous) and the elements of one chunk. */
static int64_t chunk_count(const slabfeed_gen_config *cfg, int64_t channels,
                           int64_t s, int64_t q, int64_t *chunk_elems)
{
  const int cf = cfg->layout != SLABFEED_LAYOUT_CL;
  int64_t n = cf ? channels : 1, elems = cf ? 1 : channels;
  for (int a = 0; a < 3; a++) {
    const int64_t ext = s * cfg->shape[a] / q;
    int64_t ch = cfg->chunk[a] > 0 ? cfg->chunk[a] : 64;
    ch = ch < ext ? ch : ext;
    n *= (ext + ch - 1) / ch;
    elems *= ch;
  }
  if (chunk_elems != NULL)
    *chunk_elems = elems;
  return cfg->chunked ? n : 0;
}

/* Entry k of attrs ("NAME=VALUE,..."), starting at *p: its name into
 * name[len] and its value into *v; *p moves past it. Fails naming the
 * entry. */
static slabfeed_status next_attr(const char **p, char *name, size_t len,
                                 double *v, sf__err *e)
{
  const char *s = *p;
  const size_t n = strcspn(s, ","), eq = strcspn(s, "=");
  char num[64];
  name[0] = '\0';
  char *end = num;
  if (eq < n && eq > 0 && eq < len && n - eq - 1 > 0 &&
      n - eq - 1 < sizeof num) {
    memcpy(name, s, eq);
    name[eq] = '\0';
    memcpy(num, s + eq + 1, n - eq - 1);
    num[n - eq - 1] = '\0';
    *v = strtod(num, &end);
  }
  if (end == num || *end != '\0' || strpbrk(name, "/ \t") != NULL ||
      !(*v >= -1e308 && *v <= 1e308))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "generator: attrs: '%.*s' is not NAME=NUMBER (a name "
                    "without '/' or blanks, a finite number)",
                    (int)n, s);
  *p = s[n] == ',' ? s + n + 1 : s + n;
  return SLABFEED_OK;
}

/* The attributes of cfg->attrs on the root group of file (collective
 * over the writers under parallel HDF5: every one writes the same). */
static slabfeed_status write_attrs(hid_t file, const slabfeed_gen_config *cfg,
                                   const char *tmp, sf__err *e)
{
  for (const char *p = cfg->attrs; p != NULL && *p != '\0';) {
    char name[256];
    double v = 0;
    if (next_attr(&p, name, sizeof name, &v, e) != SLABFEED_OK)
      return e->status;
    const hid_t sp = H5Screate(H5S_SCALAR);
    const hid_t a = sp >= 0 ? H5Acreate2(file, name, H5T_IEEE_F64LE, sp,
                                         H5P_DEFAULT, H5P_DEFAULT)
                            : H5I_INVALID_HID;
    const herr_t rc = a >= 0 ? H5Awrite(a, H5T_NATIVE_DOUBLE, &v) : -1;
    if (a >= 0)
      H5Aclose(a);
    if (sp >= 0)
      H5Sclose(sp);
    if (rc < 0) {
      sf__fail(e, SLABFEED_ERR_IO,
               "generator: cannot write attribute '%s' of '%s'", name, tmp);
      sf__h5_detail(e);
      return e->status;
    }
  }
  return SLABFEED_OK;
}

/* The datasets to write: the input and the target, each one dataset or
 * the fields of cfg->*_fields ("NAME:C,..." whose C sum to its channels;
 * one channel: a 3-D dataset). */
static slabfeed_status make_items(const slabfeed_gen_config *cfg,
                                  gen_item *items, int *n, sf__err *e)
{
  *n = 0;
  for (int d = 0; d < (cfg->target != NULL ? 2 : 1); d++) {
    const char *fields = d == 0 ? cfg->input_fields : cfg->target_fields;
    const int64_t C = d == 0 ? cfg->input_channels : cfg->target_channels;
    const char *what = d == 0 ? "input_fields" : "target_fields";
    if (fields == NULL || fields[0] == '\0') {
      gen_item *it = &items[(*n)++];
      *it = (gen_item){.d = d, .c0 = 0, .C = C, .ndim = 4};
      snprintf(it->name, sizeof it->name, "%s",
               d == 0 ? cfg->input : cfg->target);
      continue;
    }
    int64_t c0 = 0;
    for (const char *p = fields; *p != '\0';) {
      const size_t len = strcspn(p, ","), colon = strcspn(p, ":");
      char *end = NULL;
      const long k = colon < len ? strtol(p + colon + 1, &end, 10) : 0;
      if (colon == 0 || colon >= len || colon >= 256 || end == p + colon + 1 ||
          end != p + len || k < 1 || c0 + k > C || *n >= SF_GEN_ITEMS)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "generator: %s '%s': '%.*s' is not NAME:CHANNELS "
                        "within the %lld channels",
                        what, fields, (int)len, p, (long long)C);
      gen_item *it = &items[(*n)++];
      *it = (gen_item){.d = d, .c0 = c0, .C = k, .ndim = k == 1 ? 3 : 4};
      memcpy(it->name, p, colon);
      it->name[colon] = '\0';
      c0 += k;
      p += len + (p[len] == ',');
    }
    if (c0 != C)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "generator: %s '%s' holds %lld channels of the %lld",
                      what, fields, (long long)c0, (long long)C);
  }
  for (int k = 0; k < *n; k++) {
    gen_item *it = &items[k];
    it->s = it->d == 1 ? cfg->scale_factor : 1;
    it->q = it->d == 1 ? cfg->coarsen_factor : 1;
    for (int a = 0; a < 3; a++)
      it->n[a] = it->s * cfg->shape[a] / it->q;
  }
  return SLABFEED_OK;
}

static slabfeed_status check_gen_config(const slabfeed_gen_config *cfg,
                                        int size, sf__err *e)
{
  for (const char *p = cfg->attrs; p != NULL && *p != '\0';) {
    char name[256];
    double v = 0;
    if (next_attr(&p, name, sizeof name, &v, e) != SLABFEED_OK)
      return e->status;
  }
  if (cfg->path == NULL || cfg->input == NULL)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "generator: path and input are required");
  if (cfg->scale_factor < 1 || cfg->scale_factor > 16 ||
      (cfg->scale_factor > 1 && cfg->target == NULL))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "generator: scale_factor %d: must be 1..16, and above 1 "
                    "only with a target (the finer grid's dataset)",
                    cfg->scale_factor);
  if (cfg->coarsen_factor < 1 || cfg->coarsen_factor > 16 ||
      (cfg->coarsen_factor > 1 &&
       (cfg->target == NULL || cfg->scale_factor > 1)))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "generator: coarsen_factor %d: must be 1..16, and above "
                    "1 only with a target (the coarser grid's dataset) and "
                    "without scale_factor",
                    cfg->coarsen_factor);
  for (int a = 0; a < 3; a++)
    if (cfg->coarsen_factor > 1 && cfg->shape[a] % cfg->coarsen_factor != 0)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "generator: box extent %lld on axis %d is not a "
                      "multiple of coarsen_factor %d",
                      (long long)cfg->shape[a], a, cfg->coarsen_factor);
  for (int a = 0; a < 3; a++)
    if (cfg->shape[a] < 1 || cfg->shape[a] > 65535 ||
        cfg->shape[a] * cfg->scale_factor > 65535)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "generator: box extent %lld on axis %d not in [1,65535] "
                      "(the target's, %d times it, too)",
                      (long long)cfg->shape[a], a, cfg->scale_factor);
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
  for (int a = 0; cfg->chunked && a < 3; a++)
    if (cfg->chunk[a] < 0 || cfg->chunk[a] > 65535)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "generator: chunk edge %lld on axis %d not in [1,65535] "
                      "(0: min(64, shape))",
                      (long long)cfg->chunk[a], a);
  int64_t elems = 0, target_elems = 0;
  chunk_count(cfg, cfg->input_channels, 1, 1, &elems);
  if (cfg->target != NULL)
    chunk_count(cfg, cfg->target_channels, cfg->scale_factor,
                cfg->coarsen_factor, &target_elems);
  elems = target_elems > elems ? target_elems : elems;
  if (cfg->chunked && elems * (cfg->float16 ? 2 : 4) >= ((int64_t)1 << 32))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "generator: a chunk of %lld elements is 4 GiB or more "
                    "(HDF5's limit): use a smaller chunk edge",
                    (long long)elems);
  return SLABFEED_OK;
}

/* What the writes and their read-back share on one rank. */
typedef struct gen_run {
  MPI_Comm comm;
  const slabfeed_gen_config *cfg;
  const field *f;
  int rank, size, writer;
  float *buf;  /* one run of the largest dataset, as float32 */
  hid_t ftype; /* the stored element type */
  size_t tsize;
  gen_item item[SF_GEN_ITEMS]; /* the datasets written */
  int nitems;
  uint64_t sum[SF_GEN_ITEMS]; /* of the bytes this rank wrote, per dataset */
  double total;               /* bytes of all ranks */
  sf__progress pg;            /* of the writes, then of the read-back */
} gen_run;

/* Run i of this rank's planes of item it: [*z, *z + *n) (n may be 0). */
static void run_of(const gen_run *g, const gen_item *it, int64_t i, int64_t *z,
                   int64_t *n)
{
  const int64_t Z = it->n[0];
  const int64_t z1 = sf__split_begin(Z, g->size, g->rank + 1);
  *z = sf__split_begin(Z, g->size, g->rank) + i * it->cap;
  *n = *z >= z1 ? 0 : (z1 - *z < it->cap ? z1 - *z : it->cap);
}

/* Runs every rank makes: those of rank 0, which has the most planes. */
static int64_t run_count(const gen_run *g, const gen_item *it)
{
  const int64_t most = sf__split_begin(it->n[0], g->size, 1);
  return (most + it->cap - 1) / it->cap;
}

static hid_t collective_dxpl(sf__err *e)
{
  const hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  if (dxpl < 0)
    sf__fail(e, SLABFEED_ERR_IO, "generator: H5Pcreate(DATASET_XFER) failed");
#ifdef H5_HAVE_PARALLEL
  else if (H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE) < 0)
    sf__fail(e, SLABFEED_ERR_IO, "generator: cannot request collective I/O");
#endif
  return dxpl;
}

/* Writes dataset d (created, its space allocated): runs of at most `cap`
 * planes, padded with empty writes to the count of the rank with the most
 * runs (collective writes). Every rank makes every write, also after a
 * local failure (then with nothing to write), so collective calls match.
 * Each run is converted to the stored type here (HDF5 converts nothing)
 * and summed as stored, for the read-back. */
static slabfeed_status write_dataset(gen_run *g, hid_t dset, int k, sf__err *e)
{
  const slabfeed_gen_config *cfg = g->cfg;
  const gen_item *it = &g->item[k];
  const char *name = it->name;
  const int64_t plane = it->C * it->n[1] * it->n[2];
  const int64_t runs = run_count(g, it);
  const hid_t dxpl = collective_dxpl(e);
  for (int64_t i = 0; i < runs && dxpl >= 0; i++) {
    if (k == 0 && i == 0 && sf__inject("gen.write", g->rank))
      sf__fail(e, SLABFEED_ERR_IO, "injected failure at stage 'gen.write'");
    int64_t z, n;
    run_of(g, it, i, &z, &n);
    n = e->status == SLABFEED_OK ? n : 0;
    if (n > 0) {
      fill_run(cfg, g->f, it, z, n, g->buf);
      if (cfg->float16)
        sf__f32_to_f16_n(g->buf, (size_t)(n * plane));
    }
    if (transfer_run(dset, cfg, z, n, dxpl, g->ftype, 1, g->buf) < 0 &&
        e->status == SLABFEED_OK) {
      sf__fail(e, SLABFEED_ERR_IO,
               "generator: writing planes [%lld,%lld) of '%s' failed",
               (long long)z, (long long)(z + n), name);
      sf__h5_detail(e);
    } else if (n > 0) {
      const size_t bytes = (size_t)(n * plane) * g->tsize;
      g->sum[k] += sf__aside_sum(g->buf, bytes,
                                 (uint64_t)(i * it->cap * plane) * g->tsize);
      sf__progress_add(&g->pg, (double)bytes);
    }
  }
  if (dxpl >= 0)
    H5Pclose(dxpl);
  return e->status;
}

/* Reads dataset d back in the runs it was written in, as stored, and
 * compares the sum with that of the writes: a write that MPI-IO reported
 * as done but that did not land (Open MPI 4.1's collective write on a full
 * disk reads back as zeros) fails here. Collective like the writes. */
static slabfeed_status verify_dataset(gen_run *g, hid_t file, int k,
                                      const char *tmp, sf__err *e)
{
  const gen_item *it = &g->item[k];
  const char *name = it->name;
  const int64_t plane = it->C * it->n[1] * it->n[2];
  const int64_t runs = run_count(g, it);
  const hid_t dset = H5Dopen2(file, name, H5P_DEFAULT);
  const hid_t dxpl = collective_dxpl(e);
  if (dset < 0)
    sf__fail(e, SLABFEED_ERR_IO,
             "generator: cannot open '%s' in '%s' to read it back", name, tmp);
  uint64_t sum = 0;
  const int64_t z0 = sf__split_begin(it->n[0], g->size, g->rank),
                z1 = sf__split_begin(it->n[0], g->size, g->rank + 1);
  for (int64_t i = 0; i < runs && dset >= 0 && dxpl >= 0; i++) {
    int64_t z, n;
    run_of(g, it, i, &z, &n);
    n = e->status == SLABFEED_OK ? n : 0;
    if (transfer_run(dset, g->cfg, z, n, dxpl, g->ftype, 0, g->buf) < 0 &&
        e->status == SLABFEED_OK) {
      sf__fail(e, SLABFEED_ERR_IO,
               "generator: reading back planes [%lld,%lld) of '%s' from '%s' "
               "failed",
               (long long)z, (long long)(z + n), name, tmp);
      sf__h5_detail(e);
    } else if (n > 0) {
      sum += sf__aside_sum(g->buf, (size_t)(n * plane) * g->tsize,
                           (uint64_t)(i * it->cap * plane) * g->tsize);
      sf__progress_add(&g->pg, (double)(n * plane) * (double)g->tsize);
    }
  }
  if (e->status == SLABFEED_OK && sum != g->sum[k])
    sf__fail(e, SLABFEED_ERR_IO,
             "generator: '%s' planes [%lld,%lld) read back from '%s' differ "
             "from what was written: a write that MPI-IO reported as done "
             "did not land (a full disk?)",
             name, (long long)z0, (long long)z1, tmp);
  if (dxpl >= 0)
    H5Pclose(dxpl);
  if (dset >= 0)
    H5Dclose(dset);
  return e->status;
}

/* The progress of a pass over this rank's planes of every dataset (the
 * writes, the read-back): rank 0 reports as cfg->progress says. */
static void progress_begin(gen_run *g, const char *what)
{
  double mine = 0;
  for (int k = 0; k < g->nitems; k++) {
    const gen_item *it = &g->item[k];
    const int64_t Z = it->n[0];
    mine += (double)(sf__split_begin(Z, g->size, g->rank + 1) -
                     sf__split_begin(Z, g->size, g->rank)) *
            (double)(it->C * it->n[1] * it->n[2]) * (double)g->tsize;
  }
  const int mode = g->cfg->progress == 2   ? SLABFEED_PROGRESS_ON
                   : g->cfg->progress == 1 ? SLABFEED_PROGRESS_AUTO
                                           : SLABFEED_PROGRESS_OFF;
  sf__progress_begin(&g->pg, mode, g->rank, what, mine,
                     mine > 0 ? g->total / mine : 1);
}

/* The read-back of sf__aside_commit (aside.h): after every rank synced the
 * closed file, each writing rank reads back its own planes. */
static slabfeed_status verify_file(void *ctx, const char *tmp, sf__err *e)
{
  gen_run *g = ctx;
  if (!g->writer)
    return SLABFEED_OK;
  progress_begin(g, "reading the volume back");
  hid_t file = H5I_INVALID_HID;
  if (sf__h5_open(g->comm, tmp, &file, e) == SLABFEED_OK) {
    for (int k = 0; k < g->nitems; k++)
      verify_dataset(g, file, k, tmp, e);
  }
  if (file >= 0)
    H5Fclose(file);
  sf__progress_end(&g->pg, e->status == SLABFEED_OK);
  return e->status;
}

/* Sets each item's planes per write run (a run holds ~64 MiB, and no more
 * planes than a rank has) and returns the elements of the largest run. */
static int64_t run_planes(gen_item *items, int nitems, int size)
{
  int64_t most_elems = 0;
  for (int k = 0; k < nitems; k++) {
    gen_item *it = &items[k];
    const int64_t plane = it->C * it->n[1] * it->n[2];
    const int64_t most = (it->n[0] + size - 1) / size; /* planes of rank 0 */
    int64_t cap = ((int64_t)64 << 20) / plane;
    cap = cap < most ? cap : most;
    it->cap = cap < 1 ? 1 : cap;
    most_elems = it->cap * plane > most_elems ? it->cap * plane : most_elems;
  }
  return most_elems;
}

/* Bytes of the datasets' elements. */
static uint64_t data_bytes(const slabfeed_gen_config *cfg)
{
  const uint64_t vox = (uint64_t)cfg->shape[0] * (uint64_t)cfg->shape[1] *
                       (uint64_t)cfg->shape[2];
  const uint64_t s = (uint64_t)cfg->scale_factor;
  const uint64_t q = (uint64_t)cfg->coarsen_factor;
  const uint64_t ch =
      (uint64_t)cfg->input_channels * q * q * q +
      (cfg->target != NULL ? (uint64_t)cfg->target_channels * s * s * s : 0);
  /* vox / q^3 is whole: a coarser target's box divides by q. */
  return vox / (q * q * q) * ch * (cfg->float16 ? 2 : 4);
}

/* What the file takes: the data, and a generous estimate of HDF5's
 * metadata (superblock, groups, object headers: well under 64 KiB; a chunk
 * index entry takes under 100 bytes). Blocks reserved past the real end
 * are released at the commit. */
static uint64_t file_bytes(const slabfeed_gen_config *cfg)
{
  uint64_t chunks = (uint64_t)chunk_count(cfg, cfg->input_channels, 1, 1, NULL);
  if (cfg->target != NULL)
    chunks +=
        (uint64_t)chunk_count(cfg, cfg->target_channels, cfg->scale_factor,
                              cfg->coarsen_factor, NULL);
  return data_bytes(cfg) + ((uint64_t)256 << 10) + 256 * chunks;
}

/* Creates the datasets (their space allocated at once, never filled),
 * then closes and reopens the file: the close writes all metadata now, so
 * that the final close has nothing left to write and a disk that fills
 * during the bulk write cannot make it fail on one rank and hang the
 * others (HDF5 1.10's collective metadata flush), nor crash the process
 * at exit (HDF5 1.10 after a failed close). Not H5Fflush: under Open MPI
 * it calls MPI_File_sync, which fails on a rank (before its barrier: the
 * others hang) for the rest of the process once a collective write has
 * failed there (OMPIO keeps the failed write's request pending). */
static slabfeed_status create_datasets(hid_t *file, const char *tmp, hid_t fapl,
                                       const slabfeed_gen_config *cfg,
                                       const gen_item *items, int nd,
                                       hid_t *dset, sf__err *e)
{
  for (int d = 0; d < nd; d++) {
    dset[d] = create_dataset(*file, cfg, &items[d]);
    if (dset[d] < 0 && e->status == SLABFEED_OK) {
      sf__fail(e, SLABFEED_ERR_IO,
               "generator: cannot create dataset '%s' in '%s'", items[d].name,
               tmp);
      sf__h5_detail(e);
    }
  }
  if (e->status == SLABFEED_OK)
    write_attrs(*file, cfg, tmp, e);
  if (e->status != SLABFEED_OK)
    return e->status; /* the caller closes what is open */
  for (int d = 0; d < nd; d++) {
    H5Dclose(dset[d]);
    dset[d] = H5I_INVALID_HID;
  }
  const herr_t rc = H5Fclose(*file);
  *file = H5I_INVALID_HID;
  if (rc < 0) {
    sf__fail(e, SLABFEED_ERR_IO,
             "generator: writing the metadata of '%s' failed", tmp);
    sf__h5_detail(e);
    return e->status;
  }
  *file = H5Fopen(tmp, H5F_ACC_RDWR, fapl);
  int opened = *file >= 0;
  for (int d = 0; d < nd && *file >= 0; d++)
    opened &= (dset[d] = H5Dopen2(*file, items[d].name, H5P_DEFAULT)) >= 0;
  if (!opened) {
    sf__fail(e, SLABFEED_ERR_IO, "generator: cannot reopen '%s' to write it",
             tmp);
    sf__h5_detail(e);
  }
  return e->status;
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
  if (e.status == SLABFEED_OK)
    check_gen_config(cfg, size, &e);
  /* Nothing a user wrote is replaced unless asked (the writer's rule). */
  struct stat st;
  if (e.status == SLABFEED_OK && !cfg->overwrite && stat(cfg->path, &st) == 0)
    sf__fail(&e, SLABFEED_ERR_IO,
             "generator: '%s' exists; pass overwrite (slabfeed-gen "
             "--overwrite) to replace it",
             cfg->path);
  /* Memory first: a rank that cannot allocate fails before any file is
   * touched (an existing file of that name is left as it was). */
  gen_run g;
  memset(&g, 0, sizeof g);
  g.comm = comm;
  g.cfg = cfg;
  g.rank = rank;
  g.writer = sf__h5_is_parallel() || rank == 0;
  if (e.status == SLABFEED_OK)
    make_items(cfg, g.item, &g.nitems, &e);
  const int64_t run_elems =
      e.status == SLABFEED_OK ? run_planes(g.item, g.nitems, size) : 0;
  g.ftype = H5I_INVALID_HID;
  if (e.status == SLABFEED_OK && g.writer) {
    const size_t bytes = (size_t)run_elems * sizeof *g.buf;
    g.buf = sf__inject("gen.alloc", rank) ? NULL : malloc(bytes);
    if (g.buf == NULL)
      sf__fail(&e, SLABFEED_ERR_NOMEM,
               "generator: cannot allocate %zu bytes of write buffer", bytes);
  }
  /* The file is written aside (io/aside.h): agreed checks of the path and
   * an empty temporary file; any failure from here on goes through the
   * commit, which removes it. */
  sf__aside as;
  if (sf__agree(comm, &e) != SLABFEED_OK ||
      sf__aside_begin(&as, comm, cfg->path, g.writer, &e) != SLABFEED_OK) {
    free(g.buf);
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  sf__h5_preflight(as.tmp, 1, &e); /* MPI-IO opens the temporary name */
  sf__h5_quiet q;
  sf__h5_quiet_begin(&q);
  field f;
  field_init(&f, cfg->shape, cfg->seed);
  g.f = &f;
  g.ftype = sf__h5_file_type(cfg->float16);
  g.tsize = g.ftype >= 0 ? H5Tget_size(g.ftype) : 0;
  if (g.ftype < 0)
    sf__fail(&e, SLABFEED_ERR_IO, "generator: cannot make the file type");
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  hid_t file = H5I_INVALID_HID;
#ifdef H5_HAVE_PARALLEL
  if (fapl < 0 || sf__h5_set_mpio(fapl, comm) < 0 ||
      H5Pset_coll_metadata_write(fapl, 1) < 0)
    sf__fail(&e, SLABFEED_ERR_IO, "generator: cannot set the MPI-IO driver");
  g.size = size;
#else
  g.size = 1; /* serial HDF5: rank 0 writes everything, the others wait */
#endif
  if (sf__agree(comm, &e) == SLABFEED_OK && g.writer) {
    file = H5Fcreate(as.tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (file < 0) {
      sf__fail(&e, SLABFEED_ERR_IO, "generator: cannot create '%s'", as.tmp);
      sf__h5_detail(&e);
    }
  }
  if (sf__inject("gen.create", rank))
    sf__fail(&e, SLABFEED_ERR_IO, "injected failure at stage 'gen.create'");
  /* The space before anything is written (the truncating create would
   * have released blocks reserved earlier), agreed. */
  g.total = (double)data_bytes(cfg);
  if (sf__agree(comm, &e) == SLABFEED_OK)
    sf__aside_reserve(&as, file_bytes(cfg), &e);
  hid_t dset[SF_GEN_ITEMS];
  for (int k = 0; k < SF_GEN_ITEMS; k++)
    dset[k] = H5I_INVALID_HID;
  if (sf__agree(comm, &e) == SLABFEED_OK && g.writer)
    create_datasets(&file, as.tmp, fapl, cfg, g.item, g.nitems, dset, &e);
  /* Ranks that have the file open write (or, after a local failure, make
   * the same collective calls with nothing to write). */
  if (sf__agree(comm, &e) == SLABFEED_OK && g.writer) {
    progress_begin(&g, "writing the volume");
    for (int k = 0; k < g.nitems; k++)
      write_dataset(&g, dset[k], k, &e);
    sf__progress_end(&g.pg, e.status == SLABFEED_OK);
  }
  for (int d = 0; d < SF_GEN_ITEMS; d++)
    if (dset[d] >= 0 && H5Dclose(dset[d]) < 0)
      sf__fail(&e, SLABFEED_ERR_IO,
               "generator: closing a dataset of '%s' failed", as.tmp);
  /* Every rank that has the file open closes it (collective), whatever
   * happened before. */
  if (file >= 0 && H5Fclose(file) < 0) {
    sf__fail(&e, SLABFEED_ERR_IO, "generator: closing '%s' failed", as.tmp);
    sf__h5_detail(&e);
  }
  if (fapl >= 0)
    H5Pclose(fapl);
  /* Synced, read back, renamed over the final name; or removed. */
  sf__aside_commit(&as, verify_file, &g, &e);
  if (g.ftype >= 0)
    H5Tclose(g.ftype);
  sf__h5_quiet_end(&q);
  free(g.buf);
  sf__err_copy(&e, errbuf, errlen);
  return e.status;
}
