/* mpi.coarse_more: a target on a coarser grid (coarsen_factor g) on the
 * paths mpi.coarse leaves out, on 1-3 ranks and rank-per-node; every file
 * written here with plain HDF5.
 *  - Suites: datasets of several volumes of different shapes on every
 *    axis (multiples of g), each an input file with its coarse target in
 *    a file of its own ("coarse@...co_*.h5", g = 2, the volumes named by a
 *    list) or inside the volume's file (g = 3, a glob pattern). Every
 *    voxel of every sample's input and target crop against the files of
 *    its volume (slabfeed_batch.volume, .origin in that volume's input
 *    voxels, o + pad a multiple of g); pads that are and are not
 *    multiples of g, a padded target, a non-cubic crop; every volume
 *    drawn; slabfeed_volume_info gives the input's box; the stores hold
 *    exactly the volumes' input + target bytes (a held-out volume none);
 *    the default steps per epoch cover the volumes' input voxels once.
 *  - Hold-out regions (input voxels, extents not multiples of g, a box
 *    that wraps, an extent of 0): no input crop holds a held-out voxel
 *    (periodic, voxel by voxel), the origins are exactly the documented
 *    allowed ones (the coarse cover [q - Pg, q + c/g + Pg) clear of the
 *    region widened to whole coarse voxels) and every allowed one is
 *    drawn; in one volume and in a suite of volumes of one shape.
 *  - Locality (crops drawn in the node's z-range): the crops against the
 *    files, the planes' z origin in the node's coarse z-range, no byte
 *    from another node, and over a suite every rank's samples from its
 *    node's volume (rank-per-node: one volume per node, as
 *    slabfeed_placement says). A halo (in input voxels) changes nothing.
 *  - Resume and rank-count independence: slabfeed_seek gives the same
 *    batches (epoch, step, sample ids, volumes, origins, symmetries, the
 *    bits of both tensors) as the uninterrupted stream, across epoch
 *    ends; a loader of one rank with batch P x B (MPI_COMM_SELF) gives
 *    global sample s P B + r B + i the same origin, symmetry, volume and
 *    bits as rank r's sample i.
 *  - The documented stream: the origin is (g q - P) mod N with
 *    q = p + ceil(P / g), p the coarse cover's first voxel the
 *    counter-based stream draws on each axis (docs/CONVENTIONS.md, "A
 *    target on a coarser grid").
 *  - Refused alike on every rank, in the caller's input voxels: a suite
 *    whose volume 1 has a coarse target of another shape (a manifest of
 *    target files); hold-out regions over volumes of different shapes
 *    (both boxes named as the input's); a coarse cover past one volume of
 *    a suite (that volume named); a hold-out that leaves no origin (the
 *    input crop and box named, not the coarse grid's). */
#include "plan/sampler.h"
#include "testutil.h"

static int rank, size, rpn;
static char pre[128]; /* file name prefix of this run */
static const int vg[1][3] = {{1, 2, 3}};

#define MAXB 16 /* samples of the largest batch recorded */

/* One volume: its input file ("fine", box N), the file of its coarse
 * target ("coarse", box N / g; the same file or one of its own), both
 * read whole with plain HDF5. */
typedef struct vol {
  char in[256], co[256];
  int64_t N[3];
  whole w[2];
} vol;

/* Rank 0 writes volume v (seed k); call vol_read on every rank after a
 * barrier. */
static void vol_write(vol *v, const char *in, const char *co,
                      const int64_t N[3], int g, int k)
{
  snprintf(v->in, sizeof v->in, "%s", in);
  snprintf(v->co, sizeof v->co, "%s", co != NULL ? co : in);
  memcpy(v->N, N, sizeof v->N);
  if (rank != 0)
    return;
  const int64_t C[3] = {N[0] / g, N[1] / g, N[2] / g};
  hid_t f = H5Fcreate(v->in, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  CHECK(f >= 0, "create %s", v->in);
  put_f32x4(f, "fine", N, k, 0.25f);
  if (co == NULL)
    put_f32x4(f, "coarse", C, 50 + k, 0.25f);
  H5Fclose(f);
  if (co == NULL)
    return;
  f = H5Fcreate(v->co, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  CHECK(f >= 0, "create %s", v->co);
  put_f32x4(f, "coarse", C, 50 + k, 0.25f);
  H5Fclose(f);
}

static void vol_read(vol *v)
{
  CHECK(whole_read(v->in, "fine", 0, &v->w[0]) == 0 &&
            whole_read(v->co, "coarse", 0, &v->w[1]) == 0,
        "read %s %s", v->in, v->co);
}

static void config(slabfeed_config *c, const char *path, const char *target,
                   int g, int crop, int pad)
{
  pair_config(c, path, "fine", target, 1, g, crop, pad, 3, 23);
}

static int64_t pmod(int64_t a, int64_t n)
{
  return (a % n + n) % n;
}

/* 1 when the periodic interval [s, s + len) of an axis of n meets
 * [r, r + d) (d <= n). */
static int meets(int64_t s, int64_t len, int64_t r, int64_t d, int64_t n)
{
  for (int64_t t = 0; t < len && t < n; t++)
    if (pmod(s + t - r, n) < d)
      return 1;
  return 0;
}

/* Held-out boxes {z,y,x,dz,dy,dx} in input voxels of box N (extent 0:
 * the whole axis), resolved. */
static void resolve(int n, const int64_t (*b)[6], const int64_t N[3],
                    int64_t (*out)[6])
{
  for (int r = 0; r < n; r++)
    for (int a = 0; a < 3; a++) {
      out[r][a] = b[r][a];
      out[r][3 + a] = b[r][3 + a] == 0 ? N[a] : b[r][3 + a];
    }
}

/* Whether the input crop of edge e at o holds a voxel of a box (voxel by
 * voxel, periodic in N). */
static int crop_hits(const int64_t N[3], const int64_t e[3], const int64_t o[3],
                     int n, const int64_t (*b)[6])
{
  for (int r = 0; r < n; r++) {
    int all = 1;
    for (int a = 0; a < 3 && all; a++)
      all = meets(o[a], e[a], b[r][a], b[r][3 + a], N[a]);
    if (all)
      return 1;
  }
  return 0;
}

/* The documented rule: the crop of core start q (coarse voxels) is kept
 * out when, for some box, its coarse cover [q - Pg, q + c/g + Pg) meets
 * the box widened to whole coarse voxels on all three axes. */
static int doc_kept_out(const int64_t N[3], int g, const int64_t crop[3],
                        int pad, const int64_t q[3], int n,
                        const int64_t (*b)[6])
{
  const int64_t Pg = (pad + g - 1) / g;
  for (int r = 0; r < n; r++) {
    int all = 1;
    for (int a = 0; a < 3 && all; a++) {
      const int64_t NC = N[a] / g, lo = b[r][a] / g,
                    hi = (b[r][a] + b[r][3 + a] + g - 1) / g;
      const int64_t d = hi - lo < NC ? hi - lo : NC;
      all = meets(q[a] - Pg, crop[a] / g + 2 * Pg, lo, d, NC);
    }
    if (all)
      return 1;
  }
  return 0;
}

/* What a run of random crops must also satisfy. */
typedef struct expect {
  int vlo, vhi;    /* this rank's samples come from volumes [vlo, vhi) */
  const int *held; /* [nv] volumes never drawn (NULL: none) */
  int nhold;       /* held-out boxes, resolved, in input voxels */
  const int64_t (*hold)[6];
  int *reached;          /* [NCz*NCy*NCx] core starts q drawn (NULL: none) */
  int64_t zlo, zhi;      /* locality: the planes' z origin in [zlo, zhi) */
  int store;             /* the stores hold exactly the volumes drawn from */
  int local;             /* no byte from another node */
  const char *placement; /* in slabfeed_placement's line (NULL: none) */
  int voxel_steps;       /* voxels compared in the first steps only (0: all) */
} expect;

/* Random crops of loader config c over the volumes V[0..nv) for `steps`
 * steps: every voxel of every sample against its volume's files, and
 * what x asks. */
static void run_crops(const slabfeed_config *c, vol *V, int nv, int steps,
                      const expect *x, const char *what)
{
  slabfeed_loader *l = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, c, &l, err, sizeof err) == SLABFEED_OK,
        "%s: open: %s", what, err);
  if (l == NULL)
    return;
  const int g = c->coarsen_factor, P = c->pad;
  const int64_t Pg = (P + g - 1) / g;
  CHECK_EQ(slabfeed_volume_count(l), nv, "%s: volumes", what);
  if (x->placement != NULL) {
    char line[2048] = "";
    slabfeed_placement(l, line, sizeof line);
    CHECK(strstr(line, x->placement) != NULL,
          "%s: placement '%s', want '%s' in it", what, line, x->placement);
  }
  /* volume_info: the path as named, the input's box. */
  double voxels = 0;
  for (int v = 0; v < nv; v++) {
    char path[512] = "";
    int64_t shape[3] = {0, 0, 0};
    CHECK(slabfeed_volume_info(l, v, path, sizeof path, shape) == SLABFEED_OK,
          "%s: volume_info %d", what, v);
    CHECK(strcmp(path, V[v].in) == 0, "%s: volume %d is '%s', want '%s'", what,
          v, path, V[v].in);
    CHECK(memcmp(shape, V[v].N, sizeof shape) == 0,
          "%s: volume %d box %lldx%lldx%lld, want the input's %lldx%lldx%lld",
          what, v, (long long)shape[0], (long long)shape[1],
          (long long)shape[2], (long long)V[v].N[0], (long long)V[v].N[1],
          (long long)V[v].N[2]);
    if (x->held == NULL || !x->held[v])
      voxels += (double)V[v].N[0] * (double)V[v].N[1] * (double)V[v].N[2];
  }
  /* The default steps per epoch: the input voxels of the training
   * volumes once, in crops of the core. */
  if (c->steps_per_epoch == 0) {
    const double per = (double)c->crop[0] * (double)c->crop[1] *
                       (double)c->crop[2] * size * c->batch;
    const uint64_t want = (uint64_t)((voxels + per - 1) / per);
    CHECK_EQ(slabfeed_steps_per_epoch(l), want < 1 ? 1 : want,
             "%s: steps per epoch", what);
  }
  const int64_t e_in[3] = {c->crop[0] + 2 * P, c->crop[1] + 2 * P,
                           c->crop[2] + 2 * P};
  int64_t e_tg[3];
  for (int a = 0; a < 3; a++)
    e_tg[a] = c->target_pad ? e_in[a] / g : c->crop[a] / g;
  uint64_t count[64] = {0};
  int64_t bad = 0, checked = 0, wraps = 0, hits = 0, doc = 0, outside = 0;
  for (int s = 0; s < steps; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK) {
      CHECK(0, "%s: next: %s", what, slabfeed_last_error(l));
      break;
    }
    for (int d = 0; d < 2; d++) {
      const slabfeed_tensor *t = d == 0 ? &b.input : &b.target;
      const int64_t *ed = d == 0 ? e_in : e_tg;
      CHECK(t->shape[2] == ed[0] && t->shape[3] == ed[1] &&
                t->shape[4] == ed[2],
            "%s d%d: crop %lldx%lldx%lld, want %lldx%lldx%lld", what, d,
            (long long)t->shape[2], (long long)t->shape[3],
            (long long)t->shape[4], (long long)ed[0], (long long)ed[1],
            (long long)ed[2]);
    }
    for (int i = 0; i < c->batch; i++) {
      const int v = b.volume[i];
      CHECK(v >= x->vlo && v < x->vhi,
            "%s step %d: sample %d from volume %d, want one of [%d, %d)", what,
            s, i, v, x->vlo, x->vhi);
      if (v < 0 || v >= nv)
        continue;
      CHECK(x->held == NULL || !x->held[v],
            "%s: sample from held-out volume %d", what, v);
      count[v]++;
      const int64_t *N = V[v].N, *o = &b.origin[3 * i];
      const int64_t NC[3] = {N[0] / g, N[1] / g, N[2] / g};
      int64_t ot[3], q[3];
      int inside = 1;
      for (int a = 0; a < 3; a++) {
        inside &= o[a] >= 0 && o[a] < N[a] && (o[a] + P) % g == 0;
        q[a] = pmod(o[a] + P, N[a]) / g;
        ot[a] = c->target_pad ? o[a] / g : q[a];
        wraps += o[a] + e_in[a] > N[a];
      }
      CHECK(inside,
            "%s: origin %lld,%lld,%lld of volume %d (%lldx%lldx%lld): want "
            "inside the volume with o + pad (%d) a multiple of %d",
            what, (long long)o[0], (long long)o[1], (long long)o[2], v,
            (long long)N[0], (long long)N[1], (long long)N[2], P, g);
      if (!inside)
        continue;
      for (int d = 0; d < 2 && (x->voxel_steps == 0 || s < x->voxel_steps);
           d++) {
        char why[256] = "";
        const int64_t n = crop_mismatches(
            d == 0 ? &b.input : &b.target, i, 4, &V[v].w[d], d == 0 ? N : NC,
            d == 0 ? e_in : e_tg, vg, 1, d == 0 ? o : ot, b.symmetry[i],
            &checked, why, sizeof why);
        CHECK(n == 0, "%s step %d volume %d d%d: %lld voxels differ, first %s",
              what, s, v, d, (long long)n, why);
        bad += n;
      }
      if (x->nhold > 0) {
        hits += crop_hits(N, e_in, o, x->nhold, x->hold);
        doc += doc_kept_out(N, g, c->crop, P, q, x->nhold, x->hold);
      }
      if (x->reached != NULL)
        x->reached[(q[0] * NC[1] + q[1]) * NC[2] + q[2]] = 1;
      if (x->zhi > 0) {
        const int64_t z = pmod(q[0] - Pg, NC[0]);
        outside += z < x->zlo || z >= x->zhi;
      }
    }
  }
  CHECK(hits == 0, "%s: %lld input crops hold a held-out voxel", what,
        (long long)hits);
  CHECK(doc == 0,
        "%s: %lld crops whose coarse cover meets a widened held-out box "
        "(docs: kept out)",
        what, (long long)doc);
  CHECK(outside == 0,
        "%s: %lld planes' z origins of rank %d outside its node's coarse "
        "range [%lld, %lld)",
        what, (long long)outside, rank, (long long)x->zlo, (long long)x->zhi);
  slabfeed_stats st = SLABFEED_STATS_INIT;
  slabfeed_stats_get(l, &st);
  if (x->local)
    CHECK(st.bytes_remote == 0, "%s: %llu bytes from other nodes with locality",
          what, (unsigned long long)st.bytes_remote);
  uint64_t slab = st.slab_bytes, want_slab = 0;
  MPI_Allreduce(MPI_IN_PLACE, &slab, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  for (int v = 0; v < nv; v++)
    if (x->held == NULL || !x->held[v]) {
      const int64_t n = V[v].N[0] * V[v].N[1] * V[v].N[2];
      want_slab += (uint64_t)(n + n / ((int64_t)g * g * g)) * 4 * 4;
    }
  if (x->store)
    CHECK(slab == want_slab,
          "%s: the stores hold %llu bytes, the volumes' input + target %llu",
          what, (unsigned long long)slab, (unsigned long long)want_slab);
  MPI_Allreduce(MPI_IN_PLACE, count, 64, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &wraps, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  for (int v = 0; v < nv; v++)
    if (x->held == NULL || !x->held[v])
      CHECK(count[v] > 0, "%s: volume %d never drawn in %d steps", what, v,
            steps);
  /* With o + pad a multiple of g, an input crop wraps only when it is
   * longer than g on some axis. */
  if (e_in[0] > g || e_in[1] > g || e_in[2] > g)
    CHECK(wraps > 0, "%s: no crop wrapped around its volume", what);
  if (rank == 0) {
    printf("  %-34s samples per volume", what);
    for (int v = 0; v < nv; v++)
      printf(" %llu", (unsigned long long)count[v]);
    printf(", %lld voxels checked on rank 0, %lld differ, stores %llu "
           "bytes\n",
           (long long)checked, (long long)bad, (unsigned long long)slab);
  }
  slabfeed_close(l);
}

/* ---- Suites --------------------------------------------------------- */

#define NV 3

static void suites(vol *A, const char *a_path, const char *a_target, vol *B,
                   const char *b_path)
{
  slabfeed_config c;
  expect x = {0, NV, NULL, 0, NULL, NULL, 0, 0, 1, 0, NULL, 0};
  /* g 2, coarse targets in files of their own. */
  config(&c, a_path, a_target, 2, 2, 0);
  run_crops(&c, A, NV, 20, &x, "suite g2 crop 2");
  config(&c, a_path, a_target, 2, 4, 1);
  run_crops(&c, A, NV, 20, &x, "suite g2 crop 4 pad 1");
  config(&c, a_path, a_target, 2, 2, 2);
  c.target_pad = 1;
  run_crops(&c, A, NV, 20, &x, "suite g2 crop 2 pad 2 target_pad");
  config(&c, a_path, a_target, 2, 2, 1);
  c.crop[2] = 4;
  c.symmetries = SLABFEED_SYM_NONE;
  run_crops(&c, A, NV, 20, &x, "suite g2 crop 2x2x4 pad 1");
  /* Volume 1 held out: never drawn, not stored. */
  const int held[NV] = {0, 1, 0};
  expect xh = x;
  xh.held = held;
  config(&c, a_path, a_target, 2, 4, 1);
  c.holdout_volumes = "1";
  run_crops(&c, A, NV, 20, &xh, "suite g2 volume 1 held out");
  /* g 3, the coarse target in each volume's file, a glob. */
  config(&c, b_path, "coarse", 3, 3, 0);
  run_crops(&c, B, NV, 20, &x, "suite g3 crop 3");
  config(&c, b_path, "coarse", 3, 3, 1);
  run_crops(&c, B, NV, 20, &x, "suite g3 crop 3 pad 1");
  config(&c, b_path, "coarse", 3, 3, 2);
  run_crops(&c, B, NV, 20, &x, "suite g3 crop 3 pad 2");
  config(&c, b_path, "coarse", 3, 6, 0);
  c.volume_weights = "equal";
  c.halo = 4; /* 2 coarse planes: the stores hold more */
  expect xo = x;
  xo.store = 0;
  run_crops(&c, B, NV, 20, &xo, "suite g3 crop 6 equal weights halo 4");
}

/* ---- Hold-out regions ----------------------------------------------- */

/* Random crops of volumes V[0..nv) (of one shape, named by path) with
 * the held-out boxes b (input voxels) for about `samples` samples over
 * the ranks (batch 3): every crop clear of them (voxel by voxel), every
 * origin allowed by the documented rule, and every allowed one drawn. */
static void holdout_case(vol *V, int nv, const char *path, int g, int crop,
                         int pad, int nbox, const int64_t (*b)[6], int samples)
{
  const int64_t *N = V[0].N;
  int64_t res[SLABFEED_MAX_REGIONS][6];
  resolve(nbox, b, N, res);
  const int64_t NC[3] = {N[0] / g, N[1] / g, N[2] / g};
  const int64_t ncq = NC[0] * NC[1] * NC[2];
  int *reached = calloc((size_t)ncq, sizeof *reached);
  slabfeed_config c;
  config(&c, path, "coarse", g, crop, pad);
  c.n_holdout = nbox;
  memcpy(c.holdout, b, (size_t)nbox * sizeof *b);
  c.steps_per_epoch = 50;
  /* Every voxel of the first 40 steps' crops; then the origins only. */
  expect x = {0, nv, NULL, nbox, (const int64_t(*)[6])res, reached, 0, 0,
              1, 0,  NULL, 40};
  char what[96];
  snprintf(what, sizeof what, "holdout%s g%d crop %d pad %d",
           nv > 1 ? " suite" : "", g, crop, pad);
  run_crops(&c, V, nv, samples / 3 / size, &x, what);
  MPI_Allreduce(MPI_IN_PLACE, reached, (int)ncq, MPI_INT, MPI_MAX,
                MPI_COMM_WORLD);
  int64_t allowed = 0, missing = 0;
  for (int64_t z = 0; z < NC[0]; z++)
    for (int64_t y = 0; y < NC[1]; y++)
      for (int64_t xx = 0; xx < NC[2]; xx++) {
        const int64_t q[3] = {z, y, xx};
        if (doc_kept_out(N, g, c.crop, c.pad, q, nbox,
                         (const int64_t(*)[6])res))
          continue;
        allowed++;
        missing += !reached[(z * NC[1] + y) * NC[2] + xx];
      }
  CHECK(allowed > 0 && missing == 0,
        "%s: %lld of the %lld allowed core starts never drawn", what,
        (long long)missing, (long long)allowed);
  if (rank == 0)
    printf("  %-34s %lld of %lld coarse core starts allowed, %lld never "
           "drawn\n",
           what, (long long)allowed, (long long)ncq, (long long)missing);
  free(reached);
}

static void holdout(vol *H, const char *two, vol *B)
{
  /* g 2, input voxels, extents not multiples of g: z 22, 23, 0 (wraps),
   * y 3..5, x 9, 0 (wraps); z 5, every y (extent 0), x 2..4. In one
   * volume and in each of two of one shape. */
  const int64_t boxes[2][6] = {{22, 3, 9, 3, 3, 2}, {5, 0, 2, 1, 0, 3}};
  const int pads[3] = {1, 0, 2};
  for (int k = 0; k < 3; k++) {
    holdout_case(H, 1, H[0].in, 2, 4, pads[k], 2, boxes, 2400);
    holdout_case(H, 2, two, 2, 4, pads[k], 2, boxes, 2400);
  }
  /* g 3 (box 12x9x15): z 10, y 4, x 13, 14, 0, 1 (wraps). */
  const int64_t b3[1][6] = {{10, 4, 13, 1, 1, 4}};
  holdout_case(B, 1, B[0].in, 3, 3, 1, 1, b3, 600);
  holdout_case(B, 1, B[0].in, 3, 3, 3, 1, b3, 600);
}

/* ---- Locality ------------------------------------------------------- */

/* The coarse z-range [lo, hi) of this rank's node (one group): the whole
 * box on one node, the rank's own slab with every rank its own node. */
static void node_range(int64_t Zc, int64_t *lo, int64_t *hi)
{
  *lo = 0;
  *hi = Zc;
  if (rpn && size > 1)
    slabfeed_slab_plan(Zc, size, rank, lo, hi);
}

static void locality(vol *A, const char *a_path, const char *a_target, vol *B,
                     const char *b_path, vol *H)
{
  slabfeed_config c;
  /* One volume. */
  struct {
    vol *v;
    int g, crop, pad;
  } one[4] = {{H, 2, 4, 1}, {H, 2, 2, 2}, {B, 3, 3, 2}, {B, 3, 3, 0}};
  for (int k = 0; k < 4; k++) {
    const vol *v = one[k].v;
    config(&c, v->in, "coarse", one[k].g, one[k].crop, one[k].pad);
    c.locality = 1;
    expect x = {0, 1, NULL, 0, NULL, NULL, 0, 0, 0, 1, NULL, 0};
    node_range(v->N[0] / one[k].g, &x.zlo, &x.zhi);
    char what[96];
    snprintf(what, sizeof what, "locality g%d crop %d pad %d", one[k].g,
             one[k].crop, one[k].pad);
    run_crops(&c, one[k].v, 1, 20, &x, what);
  }
  /* Suites: with every rank its own node (3 volumes, 3 nodes), node r
   * holds volume r alone; on one node, all of them. */
  expect x = {0, NV, NULL, 0, NULL, NULL, 0, 0, 0, 1, NULL, 0};
  if (rpn && size > 1) {
    x.vlo = rank;
    x.vhi = rank + 1;
  }
  char holds[64];
  snprintf(holds, sizeof holds, "this rank's node holds volumes %d..%d of 3",
           x.vlo, x.vhi - 1);
  x.placement = holds;
  config(&c, a_path, a_target, 2, 4, 1);
  c.locality = 1;
  run_crops(&c, A, NV, 20, &x, "locality suite g2 crop 4 pad 1");
  config(&c, b_path, "coarse", 3, 3, 1);
  c.locality = 1;
  run_crops(&c, B, NV, 20, &x, "locality suite g3 crop 3 pad 1");
}

/* ---- Resume and rank-count independence ---------------------------- */

typedef struct rec {
  uint64_t epoch, step;
  int64_t origin[3 * MAXB], sample[MAXB];
  int32_t sym[MAXB], vol[MAXB];
  uint64_t h[2][MAXB]; /* the bits of each sample's input and target */
} rec;

static uint64_t fnv(const void *p, size_t n)
{
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* n batches of l (batch B) into r[0..n). */
static int record(slabfeed_loader *l, int B, int n, rec *r, const char *what)
{
  for (int k = 0; k < n; k++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK) {
      CHECK(0, "%s: next: %s", what, slabfeed_last_error(l));
      return -1;
    }
    r[k].epoch = b.epoch;
    r[k].step = b.step;
    for (int i = 0; i < B; i++) {
      memcpy(&r[k].origin[3 * i], &b.origin[3 * i], 3 * sizeof *b.origin);
      r[k].sample[i] = b.sample[i];
      r[k].sym[i] = b.symmetry[i];
      r[k].vol[i] = b.volume[i];
      for (int d = 0; d < 2; d++) {
        const slabfeed_tensor *t = d == 0 ? &b.input : &b.target;
        const size_t es = slabfeed_dtype_size(t->dtype);
        r[k].h[d][i] =
            fnv((const char *)t->data + (size_t)i * es * (size_t)t->strides[0],
                (size_t)t->strides[0] * es);
      }
    }
  }
  return 0;
}

/* Sample i of a and sample j of b: the same origin, symmetry, volume,
 * sample id and bits. */
static int same(const rec *a, int i, const rec *b, int j)
{
  return memcmp(&a->origin[3 * i], &b->origin[3 * j], 3 * sizeof(int64_t)) ==
             0 &&
         a->sym[i] == b->sym[j] && a->vol[i] == b->vol[j] &&
         a->sample[i] == b->sample[j] && a->h[0][i] == b->h[0][j] &&
         a->h[1][i] == b->h[1][j];
}

static void describe(const rec *r, int i, char *buf, size_t len)
{
  snprintf(buf, len,
           "epoch %llu step %llu sample %lld volume %d origin %lld,%lld,%lld "
           "symmetry %d",
           (unsigned long long)r->epoch, (unsigned long long)r->step,
           (long long)r->sample[i], r->vol[i], (long long)r->origin[3 * i],
           (long long)r->origin[3 * i + 1], (long long)r->origin[3 * i + 2],
           r->sym[i]);
}

/* Seeks give the uninterrupted stream; with `ranks`, a loader of one rank
 * with batch P B gives the same global samples. */
static void resume(slabfeed_config c, const char *what, int ranks)
{
  enum { NREC = 10 };
  const int B = c.batch;
  c.steps_per_epoch = 4;
  slabfeed_loader *l = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "%s: open: %s", what, err);
  if (l == NULL)
    return;
  rec *r = calloc(NREC, sizeof *r), *s = calloc(NREC, sizeof *s);
  record(l, B, NREC, r, what);
  int order = 0;
  for (int k = 0; k < NREC; k++) {
    order += r[k].epoch != (uint64_t)k / 4 || r[k].step != (uint64_t)k % 4;
    for (int i = 0; i < B; i++)
      order += r[k].sample[i] != (int64_t)(r[k].step * (uint64_t)size * B +
                                           (uint64_t)rank * B + (uint64_t)i);
  }
  CHECK(order == 0, "%s: %d batches off the documented global order", what,
        order);
  /* Seeks: into the second epoch, to the last recorded step, back to the
   * start. */
  const uint64_t at[3][2] = {{1, 1}, {2, 1}, {0, 0}};
  const int from[3] = {5, 9, 0}, n[3] = {5, 1, 3};
  for (int k = 0; k < 3; k++) {
    CHECK(slabfeed_seek(l, at[k][0], at[k][1]) == SLABFEED_OK,
          "%s: seek(%llu, %llu): %s", what, (unsigned long long)at[k][0],
          (unsigned long long)at[k][1], slabfeed_last_error(l));
    uint64_t te = 99, ts = 99;
    slabfeed_tell(l, &te, &ts);
    CHECK(te == at[k][0] && ts == at[k][1], "%s: tell after seek %llu,%llu",
          what, (unsigned long long)te, (unsigned long long)ts);
    if (record(l, B, n[k], s, what) != 0)
      break;
    for (int j = 0; j < n[k]; j++) {
      const rec *a = &r[from[k] + j], *b = &s[j];
      for (int i = 0; i < B; i++) {
        char wa[160], wb[160];
        describe(a, i, wa, sizeof wa);
        describe(b, i, wb, sizeof wb);
        CHECK(a->epoch == b->epoch && a->step == b->step && same(a, i, b, i),
              "%s: after seek(%llu, %llu) batch %d sample %d: %s, "
              "uninterrupted %s (input bits %s, target bits %s)",
              what, (unsigned long long)at[k][0], (unsigned long long)at[k][1],
              j, i, wb, wa, a->h[0][i] == b->h[0][i] ? "same" : "differ",
              a->h[1][i] == b->h[1][i] ? "same" : "differ");
      }
    }
  }
  CHECK(slabfeed_seek(l, 0, 4) == SLABFEED_ERR_ARG,
        "%s: seek past the epoch's end accepted", what);
  slabfeed_close(l);
  if (ranks) {
    /* One rank, batch P B: its sample r B + i of step s is global sample
     * s P B + r B + i, rank r's sample i. */
    slabfeed_config one = c;
    one.batch = size * B;
    slabfeed_loader *m = NULL;
    CHECK(slabfeed_open(MPI_COMM_SELF, &one, &m, err, sizeof err) ==
              SLABFEED_OK,
          "%s: open on one rank: %s", what, err);
    int differ = 0;
    if (m != NULL && size * B <= MAXB &&
        record(m, size * B, NREC, s, what) == 0)
      for (int k = 0; k < NREC; k++)
        for (int i = 0; i < B; i++) {
          const int j = rank * B + i;
          if (r[k].epoch == s[k].epoch && r[k].step == s[k].step &&
              same(&r[k], i, &s[k], j))
            continue;
          char wa[160], wb[160];
          describe(&r[k], i, wa, sizeof wa);
          describe(&s[k], j, wb, sizeof wb);
          if (differ++ < 3)
            CHECK(0, "%s: %d ranks: %s; one rank: %s", what, size, wa, wb);
        }
    CHECK(differ == 0, "%s: %d samples differ between %d ranks and one", what,
          differ, size);
    slabfeed_close(m);
  }
  if (rank == 0)
    printf("  %-34s seeks give the stream%s\n", what,
           ranks ? "; one rank gives the same global samples" : "");
  free(r);
  free(s);
}

/* The documented stream of one volume without hold-out (CONVENTIONS.md,
 * "A target on a coarser grid", Origins; the draws of src/plan/sampler.h):
 * sample k draws a coarse voxel q_a = uniform(hash(seed, e, k, a),
 * N_a / g) on each axis and its origin is (g q_a - P) mod N_a; the
 * symmetry is draw 3. */
static void doc_stream(const vol *H, int g, int crop, int pad)
{
  slabfeed_config c;
  config(&c, H->in, "coarse", g, crop, pad);
  slabfeed_loader *l = NULL;
  char err[1024];
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "doc stream: open: %s", err);
  if (l == NULL)
    return;
  int64_t off = 0, sym = 0, n = 0;
  char first[256] = "";
  for (int s = 0; s < 10; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (slabfeed_next(l, &b, NULL) != SLABFEED_OK)
      break;
    for (int i = 0; i < c.batch; i++, n++) {
      const uint64_t k = (uint64_t)b.sample[i];
      int64_t want[3];
      for (int a = 0; a < 3; a++) {
        /* The cover's first coarse voxel p, the core's q = p + Pg. */
        const int64_t p = (int64_t)sf__uniform(
            sf__hash(c.seed, b.epoch, k, (uint32_t)a), (uint64_t)(H->N[a] / g));
        const int64_t q = (p + (pad + g - 1) / g) % (H->N[a] / g);
        want[a] = pmod(g * q - pad, H->N[a]);
      }
      const int32_t ws =
          (int32_t)sf__uniform(sf__hash(c.seed, b.epoch, k, 3), 48);
      if (memcmp(want, &b.origin[3 * i], sizeof want) != 0 && off++ == 0)
        snprintf(first, sizeof first,
                 "sample %llu: origin %lld,%lld,%lld, documented %lld,%lld,"
                 "%lld",
                 (unsigned long long)k, (long long)b.origin[3 * i],
                 (long long)b.origin[3 * i + 1], (long long)b.origin[3 * i + 2],
                 (long long)want[0], (long long)want[1], (long long)want[2]);
      sym += ws != b.symmetry[i];
    }
  }
  CHECK(off == 0,
        "doc stream g %d pad %d: %lld of %lld origins are not (g q - P) mod N "
        "of q = p + ceil(P / g), p drawn, first %s",
        g, pad, (long long)off, (long long)n, first);
  CHECK(sym == 0, "doc stream g %d pad %d: %lld symmetries off draw 3", g, pad,
        (long long)sym);
  if (rank == 0)
    printf("  doc stream g %d crop %d pad %d: %lld of %lld origins off the "
           "documented formula\n",
           g, crop, pad, (long long)off, (long long)n);
  slabfeed_close(l);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  rpn = getenv("SLABFEED_RANK_PER_NODE") != NULL;
  const char *tag = argc > 1 ? argv[1] : "t";
  snprintf(pre, sizeof pre, "cmore_%s_%d", tag, size);
  /* Suite A (g 2): shapes differ on every axis, targets in files of their
   * own. Suite B (g 3): the target in each volume's file. H (g 2): two
   * volumes of one shape, the target in the file. */
  const int64_t NA[NV][3] = {{12, 10, 8}, {8, 12, 10}, {10, 8, 12}};
  const int64_t NB[NV][3] = {{12, 9, 15}, {15, 12, 9}, {9, 15, 12}};
  const int64_t NH[3] = {24, 12, 10};
  vol A[NV], B[NV], H[2];
  memset(A, 0, sizeof A);
  memset(B, 0, sizeof B);
  memset(H, 0, sizeof H);
  char a_path[1024] = "", a_target[300], b_path[300], h_two[600];
  for (int v = 0; v < NV; v++) {
    char in[256], co[256];
    snprintf(in, sizeof in, "%s_a_in_%d.h5", pre, v);
    snprintf(co, sizeof co, "%s_a_co_%d.h5", pre, v);
    vol_write(&A[v], in, co, NA[v], 2, 1 + v);
    snprintf(a_path + strlen(a_path), sizeof a_path - strlen(a_path), "%s%s",
             v > 0 ? "\n" : "", in);
    snprintf(in, sizeof in, "%s_b_%d.h5", pre, v);
    vol_write(&B[v], in, NULL, NB[v], 3, 10 + v);
  }
  for (int v = 0; v < 2; v++) {
    char in[256];
    snprintf(in, sizeof in, "%s_h_%d.h5", pre, v);
    vol_write(&H[v], in, NULL, NH, 2, 20 + v);
  }
  snprintf(a_target, sizeof a_target, "coarse@%s_a_co_*.h5", pre);
  snprintf(b_path, sizeof b_path, "%s_b_*.h5", pre);
  snprintf(h_two, sizeof h_two, "%s\n%s", H[0].in, H[1].in);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int v = 0; v < NV; v++) {
    vol_read(&A[v]);
    vol_read(&B[v]);
  }
  vol_read(&H[0]);
  vol_read(&H[1]);

  suites(A, a_path, a_target, B, b_path);
  holdout(H, h_two, B);
  locality(A, a_path, a_target, B, b_path, H);

  /* Resume and rank-count independence. */
  slabfeed_config c;
  config(&c, a_path, a_target, 2, 4, 1);
  c.batch = 2;
  resume(c, "resume suite g2 crop 4 pad 1", 1);
  config(&c, b_path, "coarse", 3, 3, 2);
  c.batch = 2;
  c.dtype = SLABFEED_DTYPE_BF16;
  resume(c, "resume suite g3 crop 3 pad 2 bf16", 1);
  config(&c, H[0].in, "coarse", 2, 4, 1);
  c.batch = 2;
  c.n_holdout = 1;
  const int64_t box[6] = {22, 3, 9, 3, 3, 2};
  memcpy(c.holdout[0], box, sizeof box);
  resume(c, "resume holdout g2 crop 4 pad 1", 1);
  config(&c, a_path, a_target, 2, 4, 1);
  c.batch = 2;
  c.locality = 1;
  resume(c, "resume locality suite g2", 0);

  /* The documented origin formula: without a pad, and with pads that are
   * and are not multiples of g. */
  doc_stream(&H[0], 2, 4, 0);
  doc_stream(&H[0], 2, 4, 1);
  doc_stream(&H[0], 2, 4, 2);
  doc_stream(&B[0], 3, 3, 1);

  /* Refusals. */
  /* Volume 1 (8x12x10) paired with volume 2's coarse target (5x4x6). */
  char bad[600], list[900];
  snprintf(bad, sizeof bad, "%s_swap.txt", pre);
  snprintf(list, sizeof list, "%s\n%s\n%s\n", A[0].co, A[2].co, A[1].co);
  write_text(bad, list);
  char spec[700];
  snprintf(spec, sizeof spec, "coarse@@%s", bad);
  config(&c, a_path, spec, 2, 2, 0);
  expect_refused(&c, "has box 8x12x10 but target",
                 "coarsen_factor 2 needs a target of 4x6x5",
                 "suite: volume 1's target");
  config(&c, b_path, "coarse", 3, 3, 0);
  c.n_holdout = 1;
  const int64_t hb[6] = {0, 0, 0, 3, 3, 3};
  memcpy(c.holdout[0], hb, sizeof hb);
  /* The volumes named with their boxes, the input's (not the planes'). */
  char boxes_msg[600];
  snprintf(boxes_msg, sizeof boxes_msg,
           "volume 1 '%s' is 15x12x9, volume 0 '%s' 12x9x15", B[1].in, B[0].in);
  expect_refused(&c, "held-out regions apply inside every volume", boxes_msg,
                 "suite: holdout, shapes differ");
  /* The input crop (8) fits every volume, its coarse cover (1 + 2 x 2
   * coarse voxels) not volume 0's x (4): that volume named. */
  config(&c, a_path, a_target, 2, 2, 3);
  snprintf(spec, sizeof spec, "more than the box's 4 in '%s'", A[0].in);
  expect_refused(&c, "on axis x needs 5 voxels of the target's grid", spec,
                 "suite: coarse cover past a volume");
  /* A hold-out that leaves no origin: the message gives the caller's crop
   * and box (input voxels), not the planes'. */
  config(&c, H[0].in, "coarse", 2, 4, 1);
  c.n_holdout = 1;
  const int64_t nb[6] = {0, 0, 0, 0, 0, 5};
  memcpy(c.holdout[0], nb, sizeof nb);
  expect_refused(&c, "no crop origin", "6x6x6 crop of the 24x12x10 box",
                 "holdout: nothing left");
  for (int v = 0; v < NV; v++)
    for (int d = 0; d < 2; d++) {
      whole_free(&A[v].w[d]);
      whole_free(&B[v].w[d]);
    }
  for (int d = 0; d < 2; d++) {
    whole_free(&H[0].w[d]);
    whole_free(&H[1].w[d]);
  }
  return check_finish("mpi.coarse_more");
}
