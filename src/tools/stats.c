/* Field statistics for normalisation (slabfeed_field_stats): every rank
 * reads its z-slab of one dataset with parallel HDF5, in runs of planes
 * that bound its memory, and accumulates per channel the count, mean, sum
 * of squared deviations, minimum and maximum of the values and of their
 * logarithm, in double; the ranks' partial results are then merged by a
 * reduction and broadcast, so that every rank holds the same numbers.
 *
 * Numerics: each plane of a channel is summed pairwise in two passes (the
 * mean, then the squared deviations from it), and planes, runs and ranks
 * are merged with the pairwise update of Chan, Golub and LeVeque: n = na +
 * nb, d = mean_b - mean_a, mean = mean_a + d nb / n, M2 = M2a + M2b + d^2
 * na nb / n, exact in exact arithmetic and free of the cancellation of a
 * sum of squares. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "common/errors.h"
#include "common/geometry.h"
#include "common/normf.h"
#include "io/h5.h"

/* Bytes of one run of planes (all channels) read at a time. */
#define SF_STATS_RUN_BYTES ((int64_t)64 << 20)

/* A partial result: n values, their mean, M2 = sum of squared deviations
 * from the mean, minimum and maximum. n is a double (exact to 2^53). */
typedef struct acc {
  double n, mean, m2, min, max;
} acc;

#define ACC_FIELDS 5 /* doubles of an acc, as sent */

static void acc_clear(acc *a)
{
  a->n = a->mean = a->m2 = 0.0;
  a->min = INFINITY;
  a->max = -INFINITY;
}

/* a += b (Chan, Golub and LeVeque's pairwise update). */
static void acc_merge(acc *a, const acc *b)
{
  if (b->n == 0.0)
    return;
  if (a->n == 0.0) {
    *a = *b;
    return;
  }
  const double n = a->n + b->n, d = b->mean - a->mean;
  a->mean += d * (b->n / n);
  a->m2 += b->m2 + d * d * (a->n * (b->n / n));
  a->n = n;
  a->min = b->min < a->min ? b->min : a->min;
  a->max = b->max > a->max ? b->max : a->max;
}

/* Sum of v[0..n) in double, pairwise. */
static double pair_sum(const float *v, int64_t n)
{
  if (n <= 64) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
      s += v[i];
    return s;
  }
  const int64_t h = n / 2;
  return pair_sum(v, h) + pair_sum(v + h, n - h);
}

/* Sum of (v[i] - mean)^2 in double, pairwise. */
static double pair_dev(const float *v, int64_t n, double mean)
{
  if (n <= 64) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
      const double d = (double)v[i] - mean;
      s += d * d;
    }
    return s;
  }
  const int64_t h = n / 2;
  return pair_dev(v, h, mean) + pair_dev(v + h, n - h, mean);
}

/* The partial result of the n values v (all finite), two-pass. */
static void acc_block(acc *a, const float *v, int64_t n)
{
  acc b;
  acc_clear(&b);
  if (n > 0) {
    b.n = (double)n;
    b.mean = pair_sum(v, n) / b.n;
    b.m2 = pair_dev(v, n, b.mean);
    for (int64_t i = 0; i < n; i++) {
      b.min = v[i] < b.min ? v[i] : b.min;
      b.max = v[i] > b.max ? v[i] : b.max;
    }
  }
  acc_merge(a, &b);
}

/* What one rank accumulates for every channel. */
typedef struct stats_run {
  int64_t C, plane; /* channels, voxels of a plane */
  int with_log;
  slabfeed_norm log_f; /* f(x) = log(x + a) */
  acc *lin, *lg;       /* [C] */
  double *nonfinite;   /* [C] */
  float *vals, *logs;  /* one plane's finite values and finite logs */
  sf__progress pg;     /* of the read (rank 0) */
} stats_run;

/* Adds plane p of channel c (plane voxels of src) to the partial results. */
static void add_plane(stats_run *s, int64_t c, const float *src)
{
  int64_t nv = 0, nl = 0, bad = 0;
  for (int64_t i = 0; i < s->plane; i++) {
    const float x = src[i];
    if (!isfinite(x)) {
      bad++;
      continue;
    }
    s->vals[nv++] = x;
    if (s->with_log) {
      const float l = sf__norm_f(&s->log_f, x);
      if (isfinite(l))
        s->logs[nl++] = l;
    }
  }
  s->nonfinite[c] += (double)bad;
  acc_block(&s->lin[c], s->vals, nv);
  if (s->with_log)
    acc_block(&s->lg[c], s->logs, nl);
}

/* One channel's record as sent: the values' acc, the logs' acc, the count
 * of non-finite values. */
#define REC_DOUBLES (2 * ACC_FIELDS + 1)

static void acc_pack(const acc *a, double *out)
{
  out[0] = a->n, out[1] = a->mean, out[2] = a->m2;
  out[3] = a->min, out[4] = a->max;
}

static void acc_unpack(const double *in, acc *a)
{
  a->n = in[0], a->mean = in[1], a->m2 = in[2];
  a->min = in[3], a->max = in[4];
}

/* The reduction of records (MPI_Op, not commutative: in holds the lower
 * ranks): inout = in merged with inout. */
static void merge_op(void *in, void *inout, int *len, MPI_Datatype *type)
{
  (void)type;
  const double *a = in;
  double *b = inout;
  for (int i = 0; i < *len; i++, a += REC_DOUBLES, b += REC_DOUBLES) {
    for (int k = 0; k < 2; k++) {
      acc x, y;
      acc_unpack(a + k * ACC_FIELDS, &x);
      acc_unpack(b + k * ACC_FIELDS, &y);
      acc_merge(&x, &y);
      acc_pack(&x, b + k * ACC_FIELDS);
    }
    b[2 * ACC_FIELDS] += a[2 * ACC_FIELDS];
  }
}

/* The merged result of channel c into *o (NaN where there is no value). */
static void put_stat(const acc *lin, const acc *lg, double nonfinite,
                     int with_log, slabfeed_field_stat *o)
{
  memset(o, 0, sizeof *o);
  o->count = (uint64_t)lin->n;
  o->nonfinite = (uint64_t)nonfinite;
  o->mean = lin->n > 0 ? lin->mean : NAN;
  o->std = lin->n > 0 ? sqrt(lin->m2 / lin->n) : NAN;
  o->min = lin->n > 0 ? lin->min : NAN;
  o->max = lin->n > 0 ? lin->max : NAN;
  const int have = with_log && lg->n > 0;
  o->log_count = with_log ? (uint64_t)lg->n : 0;
  o->log_mean = have ? lg->mean : NAN;
  o->log_std = have ? sqrt(lg->m2 / lg->n) : NAN;
  o->log_min = have ? lg->min : NAN;
  o->log_max = have ? lg->max : NAN;
}

/* Reads this rank's slab [z0, z1) in runs of cp planes (nit runs on every
 * rank, empty ones past the slab) and accumulates it. Collective when
 * HDF5 is parallel; a rank that failed goes on with empty transfers. */
static void read_slab(stats_run *s, hid_t dset, const char *path,
                      const char *name, const slabfeed_dataset_info *info,
                      int64_t z0, int64_t z1, int64_t cp, int64_t nit,
                      float *buf, sf__err *e)
{
  for (int64_t it = 0; it < nit; it++) {
    const int64_t z = z0 + it * cp;
    const int64_t n = z < z1 ? (z1 - z < cp ? z1 - z : cp) : 0;
    const sf__h5_run run = {n > 0 ? z : 0, n, 0};
    sf__h5_read(dset, path, name, info, &run, 1, buf, cp * s->plane, 0, 0, NULL,
                &s->pg, e);
    if (e->status != SLABFEED_OK)
      continue;
    for (int64_t c = 0; c < s->C; c++)
      for (int64_t p = 0; p < n; p++)
        add_plane(s, c, buf + (c * cp + p) * s->plane);
  }
}

slabfeed_status slabfeed_field_stats(MPI_Comm comm, const char *path,
                                     const char *dataset,
                                     slabfeed_file_layout layout, float log_a,
                                     slabfeed_field_stat *out, int max_channels,
                                     int *channels, char *errbuf, size_t errlen)
{
  sf__err e;
  sf__err_clear(&e);
  int rank = 0, size = 1;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
      MPI_Comm_size(comm, &size) != MPI_SUCCESS) {
    sf__fail(&e, SLABFEED_ERR_MPI, "slabfeed_field_stats: invalid comm");
    sf__err_copy(&e, errbuf, errlen);
    return e.status; /* no agreement without a communicator */
  }
  if (path == NULL || dataset == NULL || out == NULL || channels == NULL)
    sf__fail(&e, SLABFEED_ERR_ARG,
             "slabfeed_field_stats: path, dataset, out and channels are "
             "required");
  else if ((unsigned)layout > SLABFEED_LAYOUT_CL)
    sf__fail(&e, SLABFEED_ERR_ARG, "slabfeed_field_stats: layout %d unknown",
             (int)layout);
  else if (isinf(log_a))
    sf__fail(&e, SLABFEED_ERR_ARG,
             "slabfeed_field_stats: log_a is %g; the log offset must be "
             "finite (or NaN: no log statistics)",
             (double)log_a);
  else
    sf__h5_preflight(path, 0, &e);
  if (sf__agree(comm, &e) != SLABFEED_OK) {
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  sf__h5_quiet q;
  sf__h5_quiet_begin(&q);
  hid_t file = H5I_INVALID_HID, dset = H5I_INVALID_HID;
  slabfeed_dataset_info info;
  memset(&info, 0, sizeof info);
  stats_run s;
  memset(&s, 0, sizeof s);
  float *buf = NULL;
  double *mine = NULL, *all = NULL;
  sf__h5_open(comm, path, &file, &e);
  if (sf__agree(comm, &e) != SLABFEED_OK)
    goto done;
  sf__h5_dataset(file, path, dataset, layout, &dset, &info, &e);
  if (e.status == SLABFEED_OK) {
    *channels = (int)info.channels;
    if (info.channels > max_channels)
      sf__fail(&e, SLABFEED_ERR_ARG,
               "slabfeed_field_stats: '%s' in '%s' has %lld channels; out "
               "has room for %d",
               dataset, path, (long long)info.channels, max_channels);
  }
  /* Memory (local), agreed before the collective reads. */
  const int64_t Z = info.shape[0];
  int64_t z0 = 0, z1 = 0, cp = 1, nit = 0;
  if (e.status == SLABFEED_OK) {
    s.C = info.channels;
    s.plane = info.shape[1] * info.shape[2];
    s.with_log = !isnan(log_a);
    s.log_f = (slabfeed_norm){1, log_a, 0.0f, 1.0f};
    z0 = rank < Z ? sf__split_begin(Z, size < Z ? size : (int)Z, rank) : Z;
    z1 = rank < Z ? sf__split_begin(Z, size < Z ? size : (int)Z, rank + 1) : Z;
    /* Every rank makes nit reads of cp planes: enough for the largest
     * slab (the first rank's). */
    const int64_t most = sf__split_begin(Z, size < Z ? size : (int)Z, 1);
    const int64_t plane_bytes = s.C * s.plane * (int64_t)sizeof(float);
    cp = SF_STATS_RUN_BYTES / plane_bytes;
    cp = cp < 1 ? 1 : cp > most ? most : cp;
    nit = (most + cp - 1) / cp;
    buf = malloc((size_t)(cp * s.C * s.plane) * sizeof *buf);
    s.vals = malloc((size_t)s.plane * sizeof *s.vals);
    s.logs = malloc((size_t)s.plane * sizeof *s.logs);
    s.lin = calloc((size_t)s.C, sizeof *s.lin);
    s.lg = calloc((size_t)s.C, sizeof *s.lg);
    s.nonfinite = calloc((size_t)s.C, sizeof *s.nonfinite);
    mine = malloc((size_t)s.C * REC_DOUBLES * sizeof *mine);
    all = malloc((size_t)s.C * REC_DOUBLES * sizeof *all);
    if (buf == NULL || s.vals == NULL || s.logs == NULL || s.lin == NULL ||
        s.lg == NULL || s.nonfinite == NULL || mine == NULL || all == NULL)
      sf__fail(&e, SLABFEED_ERR_NOMEM,
               "slabfeed_field_stats: cannot allocate %lld bytes for runs "
               "of %lld planes of '%s'",
               (long long)(cp * plane_bytes), (long long)cp, dataset);
    else
      for (int64_t c = 0; c < s.C; c++) {
        acc_clear(&s.lin[c]);
        acc_clear(&s.lg[c]);
      }
  }
  if (sf__agree(comm, &e) != SLABFEED_OK)
    goto done;
  char what[96];
  snprintf(what, sizeof what, "statistics of '%.60s'", dataset);
  sf__progress_begin(&s.pg, sf__progress_env(), rank, what,
                     (double)(z1 - z0) * (double)(s.C * s.plane) *
                         sizeof(float),
                     z1 > z0 ? (double)info.shape[0] / (double)(z1 - z0) : 1);
  read_slab(&s, dset, path, dataset, &info, z0, z1, cp, nit, buf, &e);
  const int read_ok = sf__agree(comm, &e) == SLABFEED_OK;
  sf__progress_end(&s.pg, read_ok);
  if (!read_ok)
    goto done;
  /* The ranks' records merged (a reduction whose operation is the
   * pairwise update) and sent to every rank: the same numbers everywhere. */
  for (int64_t c = 0; c < s.C; c++) {
    double *m = mine + c * REC_DOUBLES;
    acc_pack(&s.lin[c], m);
    acc_pack(&s.lg[c], m + ACC_FIELDS);
    m[2 * ACC_FIELDS] = s.nonfinite[c];
  }
  MPI_Datatype rec = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
  SF_MPI_GOTO(MPI_Type_contiguous(REC_DOUBLES, MPI_DOUBLE, &rec), &e, merged);
  SF_MPI_GOTO(MPI_Type_commit(&rec), &e, merged);
  SF_MPI_GOTO(MPI_Op_create(merge_op, 0, &op), &e, merged);
  SF_MPI_GOTO(MPI_Reduce(mine, all, (int)s.C, rec, op, 0, comm), &e, merged);
  SF_MPI_GOTO(MPI_Bcast(all, (int)s.C, rec, 0, comm), &e, merged);
  for (int64_t c = 0; c < s.C; c++) {
    const double *m = all + c * REC_DOUBLES;
    acc lin, lg;
    acc_unpack(m, &lin);
    acc_unpack(m + ACC_FIELDS, &lg);
    put_stat(&lin, &lg, m[2 * ACC_FIELDS], s.with_log, &out[c]);
  }
merged:
  if (op != MPI_OP_NULL)
    MPI_Op_free(&op);
  if (rec != MPI_DATATYPE_NULL)
    MPI_Type_free(&rec);
done:
  /* Every rank that opened them closes them (collective under MPI-IO),
   * then the outcome is agreed once more. */
  if (dset >= 0)
    H5Dclose(dset);
  if (file >= 0 && H5Fclose(file) < 0)
    sf__fail(&e, SLABFEED_ERR_IO, "slabfeed_field_stats: closing '%s' failed",
             path);
  sf__h5_quiet_end(&q);
  sf__agree(comm, &e);
  free(buf);
  free(s.vals);
  free(s.logs);
  free(s.lin);
  free(s.lg);
  free(s.nonfinite);
  free(mine);
  free(all);
  sf__err_copy(&e, errbuf, errlen);
  return e.status;
}
