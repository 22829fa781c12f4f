/* mpi.norm: per-channel normalisation through the loader, refusals at
 * open, and the field statistics, on 2-3 ranks.
 *  - Loaders with input_norm and target_norm on a generated file: every
 *    voxel of every batch against an independent serial read of the file,
 *    the symmetry written out here and (f(x) - shift) / scale computed
 *    here: bit for bit for the identity f (plain C arithmetic) and for the
 *    log (with the library's sf__logf); the log channels also within a few
 *    ulp of libm's logf. Random crops (f32 NCDHW, all symmetries; bf16
 *    NDHWC, rotations) and a tiled pass (f16, pad, a pass symmetry).
 *  - Refused at open on every rank with the same message: a wrong entry
 *    count (input and target), a vector group with another scale, a shift
 *    or a log, a scale of 0 written into the struct.
 *  - slabfeed_field_stats against a serial computation here (count,
 *    nonfinite, mean, std, min, max of x and of log(x + a)) on a generated
 *    field, on a file with NaN, inf and negative values written here, and
 *    with more ranks than planes; the same bits on every rank; a missing
 *    file or dataset and too small an output refused on every rank alike. */
#include <math.h>

#include "common/convert.h"
#include "common/normf.h"
#include "testutil.h"

static int rank, size;

static uint32_t bits(float v)
{
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

static uint32_t conv(float v, slabfeed_dtype d)
{
  return d == SLABFEED_DTYPE_F32   ? bits(v)
         : d == SLABFEED_DTYPE_F16 ? sf__f32_to_f16(v)
                                   : sf__f32_to_bf16(v);
}

static uint32_t value_at(const slabfeed_tensor *t, int64_t i)
{
  if (t->dtype == SLABFEED_DTYPE_F32)
    return ((const uint32_t *)t->data)[i];
  return ((const uint16_t *)t->data)[i];
}

/* The quiet NaN the library makes (0x7fc00000). */
static float from_qnan(void)
{
  const uint32_t u = 0x7fc00000u;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* The formula, written out: a NaN x passes, another NaN is 0x7fc00000. */
static float normalised(const slabfeed_norm *n, float x)
{
  if (isnan(x))
    return x;
  const float fx = n->log ? sf__logf(x + n->a) : x;
  const float y = (fx - n->shift) / n->scale;
  return isnan(y) ? from_qnan() : y;
}

/* ulp of the float v. */
static double ulp_of(float v)
{
  int e;
  frexp(fabs((double)v), &e);
  return ldexp(1.0, e - 24 < -149 ? -149 : e - 24);
}

typedef struct ncase {
  const char *tag;
  slabfeed_dtype dtype;
  slabfeed_out_layout out;
  slabfeed_symmetries sym;
  int tile, pad, pass_symmetry;
  int steps;
} ncase;

static const int vin[1][3] = {{1, 2, 3}}, vtg[1][3] = {{3, 1, 2}};

/* Input: a log whose a is minus the second smallest value of channel 0,
 * so that the smallest gives NaN and the second -inf; one scale for the
 * vector group. Target: shifts, a negative scale, a log. */
static void set_norms(slabfeed_config *c, const whole *in)
{
  float m1 = INFINITY, m2 = INFINITY;
  for (int64_t z = 0; z < in->dims[1]; z++)
    for (int64_t y = 0; y < in->dims[2]; y++)
      for (int64_t x = 0; x < in->dims[3]; x++)
        m1 = fminf(m1, whole_at(in, 0, z, y, x));
  for (int64_t z = 0; z < in->dims[1]; z++)
    for (int64_t y = 0; y < in->dims[2]; y++)
      for (int64_t x = 0; x < in->dims[3]; x++) {
        const float v = whole_at(in, 0, z, y, x);
        m2 = v > m1 ? fminf(m2, v) : m2;
      }
  char err[256], text[128];
  snprintf(text, sizeof text, "log(%.9g),6.5,0.75;0,3.5;0,3.5;0,3.5",
           -(double)m2);
  CHECK(slabfeed_config_set(c, "input_norm", text, err, sizeof err) ==
            SLABFEED_OK,
        "input_norm: %s", err);
  CHECK(slabfeed_config_set(c, "target_norm",
                            "7,0.3;0,-2;0,-2;0,-2;log(2000.5),7.2,0.5", err,
                            sizeof err) == SLABFEED_OK,
        "target_norm: %s", err);
}

static void run_case(const char *path, const int64_t N[3], const whole w[2],
                     const ncase *t)
{
  slabfeed_config c;
  base_config(&c, path, 6);
  c.batch = 3;
  c.seed = 7;
  c.dtype = t->dtype;
  c.out_layout = t->out;
  c.symmetries = t->sym;
  c.n_input_vectors = c.n_target_vectors = 1;
  memcpy(c.input_vectors, vin, sizeof vin);
  memcpy(c.target_vectors, vtg, sizeof vtg);
  c.tile = t->tile;
  c.pad = t->pad;
  c.pass_symmetry = t->pass_symmetry;
  set_norms(&c, &w[0]);
  char err[1024];
  slabfeed_loader *l = NULL;
  const slabfeed_status st =
      slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err);
  CHECK(st == SLABFEED_OK, "%s: open: %s", t->tag, err);
  if (st != SLABFEED_OK)
    return;
  const int64_t *crop = c.crop;
  int64_t edge[3] = {crop[0], crop[1], crop[2]};
  if (t->tile > 0)
    edge[0] = edge[1] = edge[2] = t->tile + 2 * t->pad;
  /* A pass's target is the tile itself: edge T at the tile's origin. */
  int64_t tedge[3] = {edge[0], edge[1], edge[2]};
  if (t->tile > 0)
    tedge[0] = tedge[1] = tedge[2] = t->tile;
  int64_t bad = 0, checked = 0, logs = 0, nans = 0, infs = 0, libm_bad = 0;
  const int steps = t->tile > 0 ? (int)slabfeed_steps_per_epoch(l) : t->steps;
  for (int s = 0; s < steps; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK) {
      CHECK(0, "%s: next: %s", t->tag, slabfeed_last_error(l));
      break;
    }
    for (int d = 0; d < 2; d++) {
      const slabfeed_tensor *ten = d == 0 ? &b.input : &b.target;
      const int C = d == 0 ? 4 : 5;
      const slabfeed_norm *norm = d == 0 ? c.input_norm : c.target_norm;
      const int ncdhw = t->out == SLABFEED_OUT_NCDHW;
      for (int bi = 0; bi < b.valid; bi++) {
        const int trimmed = d == 1 && t->tile > 0;
        const int64_t *o = trimmed ? &b.tile[9 * bi] : &b.origin[3 * bi];
        const int64_t *ed = trimmed ? tedge : edge;
        const int g = b.symmetry[bi];
        int64_t e[3];
        for (int a = 0; a < 3; a++)
          e[a] = ed[sym_perms[g % 6][a]];
        for (int k = 0; k < C; k++)
          for (int64_t i0 = 0; i0 < e[0]; i0++)
            for (int64_t i1 = 0; i1 < e[1]; i1++)
              for (int64_t i2 = 0; i2 < e[2]; i2++) {
                const int64_t i[3] = {i0, i1, i2};
                int src;
                const float x = sym_value(&w[d], N, ed, d == 0 ? vin : vtg, 1,
                                          k, i, o, g, &src);
                const slabfeed_norm *n = &norm[src];
                const float y = normalised(n, x);
                const int64_t at =
                    bi * ten->strides[0] +
                    (ncdhw ? k * ten->strides[1] + i0 * ten->strides[2] +
                                 i1 * ten->strides[3] + i2 * ten->strides[4]
                           : i0 * ten->strides[1] + i1 * ten->strides[2] +
                                 i2 * ten->strides[3] + k * ten->strides[4]);
                const uint32_t got = value_at(ten, at);
                const int ok = got == conv(y, t->dtype);
                if (!ok && bad < 3)
                  fprintf(stderr,
                          "[rank %d] %s: d%d b%d k%d i(%lld,%lld,%lld) g%d: "
                          "x %g: got %08x, want %08x\n",
                          rank, t->tag, d, bi, k, (long long)i0, (long long)i1,
                          (long long)i2, g, (double)x, got, conv(y, t->dtype));
                bad += !ok;
                checked++;
                if (n->log) {
                  logs++;
                  nans += isnan(y) != 0;
                  infs += isinf(y) != 0;
                  /* libm's logf: the same to a few ulp (f32 output) */
                  const float yl = (logf(x + n->a) - n->shift) / n->scale;
                  if (t->dtype == SLABFEED_DTYPE_F32 && isfinite(y)) {
                    const float fx = sf__logf(x + n->a);
                    const double tol =
                        (2.0 * ulp_of(fx) + ulp_of(fx - n->shift)) /
                            fabs((double)n->scale) +
                        2.0 * ulp_of(y);
                    float gy;
                    memcpy(&gy, &got, sizeof gy);
                    libm_bad += !(fabs((double)gy - (double)yl) <= tol);
                  }
                }
              }
      }
    }
  }
  CHECK(bad == 0, "%s: %lld of %lld values differ from the formula", t->tag,
        (long long)bad, (long long)checked);
  CHECK_EQ(libm_bad, 0ll, "%s: log values more than 2 ulp from libm logf",
           t->tag);
  int64_t sums[3] = {logs, nans, infs};
  MPI_Allreduce(MPI_IN_PLACE, sums, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  CHECK(sums[0] > 0 && sums[1] > 0 && sums[2] > 0,
        "%s: log values %lld, NaN %lld, -inf %lld", t->tag, (long long)sums[0],
        (long long)sums[1], (long long)sums[2]);
  if (rank == 0)
    printf("  %-8s %lld values per rank equal the formula (log values %lld, "
           "of them NaN %lld, -inf %lld, all ranks)\n",
           t->tag, (long long)checked, (long long)sums[0], (long long)sums[1],
           (long long)sums[2]);
  slabfeed_close(l);
}

/* The same message on every rank (and refused with ERR_ARG). */
static void refused(const slabfeed_config *c, const char *needle,
                    const char *what)
{
  expect_open_refused(c, needle, what);
  char err[1024] = "", first[1024] = "";
  slabfeed_loader *l = NULL;
  slabfeed_open(MPI_COMM_WORLD, c, &l, err, sizeof err);
  slabfeed_close(l);
  if (rank == 0)
    memcpy(first, err, sizeof first);
  MPI_Bcast(first, (int)sizeof first, MPI_CHAR, 0, MPI_COMM_WORLD);
  CHECK(strcmp(first, err) == 0, "%s: rank %d says '%s', rank 0 '%s'", what,
        rank, err, first);
}

static void refusals(const char *path)
{
  slabfeed_config c;
  base_config(&c, path, 6);
  c.n_input_vectors = 1;
  memcpy(c.input_vectors, vin, sizeof vin);
  char err[256];
  slabfeed_config_set(&c, "input_norm", "0,1;0,2;0,2", err, sizeof err);
  refused(&c,
          "input_norm has 3 entries but input dataset 'Nbody' has 4 "
          "channels",
          "three entries of four");
  slabfeed_config_set(&c, "input_norm", "", err, sizeof err);
  slabfeed_config_set(&c, "target_norm", "0,1;0,1;0,1;0,1", err, sizeof err);
  refused(&c,
          "target_norm has 4 entries but target dataset 'Hydro' has 5 "
          "channels",
          "four entries of five");
  slabfeed_config_set(&c, "target_norm", "", err, sizeof err);
  slabfeed_config_set(&c, "input_norm", "0,1;0,2;0,2.5;0,2", err, sizeof err);
  refused(&c,
          "input_norm: channel 2 of input vector group 0 (1,2,3) has scale "
          "2.5 but channel 1 has 2; the channels of a vector group need one "
          "scale, shift 0 and no log (rotation would not commute",
          "vector group, another scale");
  slabfeed_config_set(&c, "input_norm", "0,1;0,2;0,2;1,2", err, sizeof err);
  refused(&c, "channel 3 of input vector group 0 (1,2,3) has shift 1",
          "vector group with a shift");
  slabfeed_config_set(&c, "input_norm", "0,1;log(1),0,2;0,2;0,2", err,
                      sizeof err);
  refused(&c, "channel 1 of input vector group 0 (1,2,3) has a log",
          "vector group with a log");
  slabfeed_config_set(&c, "input_norm", "", err, sizeof err);
  c.n_input_norm = 4;
  for (int k = 0; k < 4; k++)
    c.input_norm[k] = (slabfeed_norm){0, 0.0f, 0.0f, k == 1 ? 0.0f : 1.0f};
  refused(&c, "input_norm channel 1", "scale 0 in the struct");
  /* The target's groups too, and the counts are per dataset. */
  c.n_input_norm = 0;
  c.n_target_vectors = 1;
  memcpy(c.target_vectors, vtg, sizeof vtg);
  slabfeed_config_set(&c, "target_norm", "0,1;0,1;0,1;0,3;0,1", err,
                      sizeof err);
  refused(&c,
          "channel 1 of target vector group 0 (3,1,2) has scale 1 but "
          "channel 3 has 3",
          "target vector group");
}

/* ---- Field statistics ------------------------------------------------- */

/* The serial statistics of channel c of w: count, nonfinite, mean, std,
 * min, max of x and of sf__logf(x + a), in long double. */
static void serial_stats(const whole *w, int64_t c, float a,
                         slabfeed_field_stat *o)
{
  const int64_t *d = w->dims;
  const int64_t Z = w->cl ? d[0] : d[1], Y = w->cl ? d[1] : d[2],
                X = w->cl ? d[2] : d[3];
  long double s[2] = {0, 0}, q[2] = {0, 0};
  uint64_t cnt[2] = {0, 0}, bad = 0;
  double mn[2] = {INFINITY, INFINITY}, mx[2] = {-INFINITY, -INFINITY};
  for (int pass = 0; pass < 2; pass++)
    for (int64_t z = 0; z < Z; z++)
      for (int64_t y = 0; y < Y; y++)
        for (int64_t x = 0; x < X; x++) {
          const float v = whole_at(w, c, z, y, x);
          if (!isfinite(v)) {
            bad += pass == 0;
            continue;
          }
          const slabfeed_norm f = {1, a, 0.0f, 1.0f};
          const float l = sf__norm_f(&f, v);
          const float val[2] = {v, l};
          for (int k = 0; k < 2; k++) {
            if (!isfinite(val[k]) || (k == 1 && isnan(a)))
              continue;
            if (pass == 0) {
              s[k] += val[k];
              cnt[k]++;
              mn[k] = fmin(mn[k], val[k]);
              mx[k] = fmax(mx[k], val[k]);
            } else {
              const long double dv = val[k] - s[k] / cnt[k];
              q[k] += dv * dv;
            }
          }
        }
  memset(o, 0, sizeof *o);
  o->count = cnt[0];
  o->nonfinite = bad;
  o->mean = (double)(s[0] / cnt[0]);
  o->std = (double)sqrtl(q[0] / cnt[0]);
  o->min = mn[0];
  o->max = mx[0];
  o->log_count = cnt[1];
  o->log_mean = cnt[1] ? (double)(s[1] / cnt[1]) : NAN;
  o->log_std = cnt[1] ? (double)sqrtl(q[1] / cnt[1]) : NAN;
  o->log_min = cnt[1] ? mn[1] : NAN;
  o->log_max = cnt[1] ? mx[1] : NAN;
}

static int close_to(double a, double b, double rel)
{
  if (isnan(a) || isnan(b))
    return isnan(a) && isnan(b);
  return fabs(a - b) <= rel * fmax(fabs(b), 1e-300) + 1e-300;
}

/* The library's statistics of every channel against the serial ones, and
 * the same bits on every rank. */
static void compare_stats(const char *path, const char *name,
                          slabfeed_file_layout layout, int cl, float a,
                          const char *tag)
{
  slabfeed_field_stat st[SLABFEED_MAX_CHANNELS];
  int C = 0;
  char err[1024];
  const slabfeed_status s =
      slabfeed_field_stats(MPI_COMM_WORLD, path, name, layout, a, st,
                           SLABFEED_MAX_CHANNELS, &C, err, sizeof err);
  CHECK(s == SLABFEED_OK, "%s: stats: %s", tag, err);
  if (s != SLABFEED_OK)
    return;
  whole w;
  CHECK(whole_read(path, name, cl, &w) == 0, "%s: serial read", tag);
  CHECK_EQ((int64_t)C, cl ? w.dims[3] : w.dims[0], "%s: channels", tag);
  for (int c = 0; c < C; c++) {
    slabfeed_field_stat want;
    serial_stats(&w, c, a, &want);
    const slabfeed_field_stat *g = &st[c];
    CHECK(g->count == want.count && g->nonfinite == want.nonfinite &&
              g->log_count == want.log_count,
          "%s ch %d: counts %llu/%llu/%llu, want %llu/%llu/%llu", tag, c,
          (unsigned long long)g->count, (unsigned long long)g->nonfinite,
          (unsigned long long)g->log_count, (unsigned long long)want.count,
          (unsigned long long)want.nonfinite,
          (unsigned long long)want.log_count);
    CHECK(close_to(g->mean, want.mean, 1e-12) &&
              close_to(g->std, want.std, 1e-12) &&
              bits((float)g->min) == bits((float)want.min) &&
              bits((float)g->max) == bits((float)want.max),
          "%s ch %d: mean %.17g std %.17g min %g max %g, want %.17g %.17g "
          "%g %g",
          tag, c, g->mean, g->std, g->min, g->max, want.mean, want.std,
          want.min, want.max);
    CHECK(close_to(g->log_mean, want.log_mean, 1e-12) &&
              close_to(g->log_std, want.log_std, 1e-11) &&
              close_to(g->log_min, want.log_min, 0) &&
              close_to(g->log_max, want.log_max, 0),
          "%s ch %d: log mean %.17g std %.17g min %g max %g, want %.17g "
          "%.17g %g %g",
          tag, c, g->log_mean, g->log_std, g->log_min, g->log_max,
          want.log_mean, want.log_std, want.log_min, want.log_max);
  }
  /* Every rank holds the same bits. */
  unsigned char mine[sizeof st], first[sizeof st];
  memcpy(mine, st, sizeof st);
  memcpy(first, st, sizeof st);
  MPI_Bcast(first, (int)(sizeof(slabfeed_field_stat) * (size_t)C), MPI_BYTE, 0,
            MPI_COMM_WORLD);
  CHECK(memcmp(first, mine, sizeof(slabfeed_field_stat) * (size_t)C) == 0,
        "%s: rank %d's statistics differ from rank 0's", tag, rank);
  if (rank == 0)
    printf("  stats %-10s %d channels: ch0 count %llu mean %.6g std %.6g, "
           "log count %llu mean %.6g\n",
           tag, C, (unsigned long long)st[0].count, st[0].mean, st[0].std,
           (unsigned long long)st[0].log_count, st[0].log_mean);
  whole_free(&w);
}

/* A small CF file (3, Z, 7, 5) with NaN, +-inf, zeros and negatives,
 * written serially here by rank 0. */
static void write_odd(const char *path, int64_t Z)
{
  if (rank == 0) {
    const hsize_t dims[4] = {3, (hsize_t)Z, 7, 5};
    const size_t n = 3 * (size_t)Z * 7 * 5;
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
      const uint64_t h = (i * 0x9e3779b97f4a7c15ull) >> 40;
      v[i] = (float)((int64_t)(h % 2001) - 1000) / 8.0f;
      if (i % 17 == 3)
        v[i] = NAN;
      if (i % 29 == 5)
        v[i] = i % 2 ? INFINITY : -INFINITY;
      if (i % 31 == 7)
        v[i] = -2.0f; /* x + a = 0 for a = 2: -inf, left out */
    }
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t s = H5Screate_simple(4, dims, NULL);
    const hid_t d = H5Dcreate2(f, "odd", H5T_NATIVE_FLOAT, s, H5P_DEFAULT,
                               H5P_DEFAULT, H5P_DEFAULT);
    CHECK(f >= 0 && s >= 0 && d >= 0 &&
              H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >=
                  0,
          "writing %s", path);
    H5Dclose(d);
    H5Sclose(s);
    H5Fclose(f);
    free(v);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

static void stats_refused(const char *path, const char *dataset, int max,
                          const char *needle, slabfeed_status want,
                          const char *what)
{
  slabfeed_field_stat st[SLABFEED_MAX_CHANNELS];
  int C = -1;
  char err[1024] = "", first[1024];
  const slabfeed_status s =
      slabfeed_field_stats(MPI_COMM_WORLD, path, dataset, SLABFEED_LAYOUT_AUTO,
                           1.0f, st, max, &C, err, sizeof err);
  memcpy(first, err, sizeof first);
  MPI_Bcast(first, (int)sizeof first, MPI_CHAR, 0, MPI_COMM_WORLD);
  CHECK(s == want && strstr(err, needle) != NULL && strcmp(first, err) == 0,
        "%s: %s '%s' (want %s, '%s', the same on every rank)", what,
        slabfeed_status_name(s), err, slabfeed_status_name(want), needle);
  if (rank == 0)
    printf("  %-24s -> %s\n", what, err);
  if (want == SLABFEED_ERR_ARG && max < 4)
    CHECK_EQ(C, 4, "%s: *channels is set", what);
}

static void stats_cases(void)
{
  char path[64];
  snprintf(path, sizeof path, "norm_field_np%d.h5", size);
  slabfeed_gen_config g;
  slabfeed_gen_config_init(&g);
  g.overwrite = 1; /* a rerun regenerates */
  g.path = path;
  g.shape[0] = 17, g.shape[1] = 12, g.shape[2] = 10;
  g.content = SLABFEED_CONTENT_FIELD;
  g.layout = SLABFEED_LAYOUT_CL;
  g.seed = 3;
  char err[1024];
  CHECK(slabfeed_generate(MPI_COMM_WORLD, &g, err, sizeof err) == SLABFEED_OK,
        "generate: %s", err);
  compare_stats(path, "Nbody", SLABFEED_LAYOUT_AUTO, 1, 1.0f, "field in");
  compare_stats(path, "Hydro", SLABFEED_LAYOUT_CL, 1, 0.5f, "field tg");
  compare_stats(path, "Hydro", SLABFEED_LAYOUT_AUTO, 1, NAN, "no log");
  snprintf(path, sizeof path, "norm_odd_np%d.h5", size);
  write_odd(path, 9);
  compare_stats(path, "odd", SLABFEED_LAYOUT_CF, 0, 2.0f, "odd values");
  snprintf(path, sizeof path, "norm_thin_np%d.h5", size);
  write_odd(path, 2); /* fewer planes than ranks on 3 */
  compare_stats(path, "odd", SLABFEED_LAYOUT_CF, 0, 2.0f, "2 planes");
  snprintf(path, sizeof path, "norm_field_np%d.h5", size);
  stats_refused("no_such_file.h5", "Nbody", SLABFEED_MAX_CHANNELS,
                "no_such_file.h5", SLABFEED_ERR_IO, "missing file");
  stats_refused(path, "Bogus", SLABFEED_MAX_CHANNELS, "no dataset 'Bogus'",
                SLABFEED_ERR_FORMAT, "missing dataset");
  stats_refused(path, "Nbody", 2, "has 4 channels; out has room for 2",
                SLABFEED_ERR_ARG, "too small an output");
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int64_t N[3] = {13, 11, 9};
  char path[64];
  snprintf(path, sizeof path, "norm_np%d.h5", size);
  if (make_file(path, N[0], N[1], N[2], SLABFEED_LAYOUT_CF, 0, 0, 1) == 0) {
    whole w[2];
    const int a = whole_read(path, "Nbody", 0, &w[0]);
    const int b = whole_read(path, "Hydro", 0, &w[1]);
    CHECK(a == 0 && b == 0, "independent read of %s", path);
    const ncase cases[] = {
        {"f32_all", SLABFEED_DTYPE_F32, SLABFEED_OUT_NCDHW, SLABFEED_SYM_ALL, 0,
         0, 0, 12},
        {"bf16_rot", SLABFEED_DTYPE_BF16, SLABFEED_OUT_NDHWC,
         SLABFEED_SYM_ROTATIONS, 0, 0, 0, 6},
        {"f16_pass", SLABFEED_DTYPE_F16, SLABFEED_OUT_NCDHW, SLABFEED_SYM_ALL,
         4, 1, 29, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
      run_case(path, N, w, &cases[i]);
    whole_free(&w[0]);
    whole_free(&w[1]);
    refusals(path);
  }
  stats_cases();
  return check_finish("mpi.norm");
}
