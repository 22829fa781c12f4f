#include "plan/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/symmetry.h"

#define SF_GOLDEN 0x9e3779b97f4a7c15ULL
#define SF_MULT 0xd1b54a32d192ed03ULL

uint64_t sf__hash(uint64_t seed, uint64_t epoch, uint64_t k, uint32_t draw)
{
  uint64_t h = sf__fmix64(seed ^ SF_GOLDEN);
  h = sf__fmix64(h + SF_GOLDEN * (epoch + 1));
  return sf__fmix64(h ^ (SF_MULT * k + draw));
}

double sf__normal(uint64_t seed, uint64_t epoch, uint64_t k, uint32_t j)
{
  const double u1 = (double)((sf__hash(seed, epoch, k, j) >> 11) + 1) * 0x1p-53;
  const double u2 = (double)(sf__hash(seed, epoch, k, j + 1) >> 11) * 0x1p-53;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void sf__sampler_init(sf__sampler *s, const int64_t shape[3], uint64_t seed,
                      slabfeed_symmetries set)
{
  for (int a = 0; a < 3; a++)
    s->shape[a] = shape[a];
  s->seed = seed;
  s->hold = NULL;
  s->nvol = 0;
  s->z0 = NULL;
  s->yx = NULL;
  s->cum = NULL;
  s->nsym = 0;
  for (int g = 0; g < SF_NSYM; g++) {
    const int keep = set == SLABFEED_SYM_ALL ||
                     (set == SLABFEED_SYM_ROTATIONS && sf__sym_det(g) > 0) ||
                     (set == SLABFEED_SYM_NONE && g == 0);
    if (keep)
      s->sym[s->nsym++] = g;
  }
}

/* ---- Held-out regions ------------------------------------------------------
 * The origins o whose crop [o, o + c) meets region [r, r + d) on an axis of
 * length N form the periodic interval [r - c + 1, r + d) of length
 * min(d + c - 1, N); a crop meets the region when that holds on all three
 * axes. */

/* 1 when p lies in the periodic interval of length len from `start`. */
static int in_interval(int64_t p, int64_t start, int64_t len, int64_t N)
{
  return ((p - start) % N + N) % N < len;
}

static int64_t forbidden_start(int64_t r, int64_t c, int64_t N)
{
  return ((r - c + 1) % N + N) % N;
}

static int64_t forbidden_len(int64_t d, int64_t c, int64_t N)
{
  return d + c - 1 < N ? d + c - 1 : N;
}

int sf__box_hits(const int64_t shape[3], const int64_t crop[3],
                 const int64_t o[3], const int64_t b[6])
{
  for (int a = 0; a < 3; a++)
    if (!in_interval(o[a], forbidden_start(b[a], crop[a], shape[a]),
                     forbidden_len(b[3 + a], crop[a], shape[a]), shape[a]))
      return 0;
  return 1;
}

static int cmp_i64(const void *x, const void *y)
{
  const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

slabfeed_status sf__sampler_holdout(sf__sampler *s, const int64_t crop[3],
                                    int n, const int64_t (*boxes)[6],
                                    sf__err *e)
{
  if (n == 0)
    return SLABFEED_OK;
  sf__holdout *h = calloc(1, sizeof *h);
  if (h == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the hold-out");
  s->hold = h;
  /* Cell starts per axis: 0 and both ends of every forbidden interval. */
  for (int a = 0; a < 3; a++) {
    const int64_t N = s->shape[a];
    int64_t *bp = h->bp[a];
    int m = 0;
    bp[m++] = 0;
    for (int i = 0; i < n; i++) {
      const int64_t st = forbidden_start(boxes[i][a], crop[a], N);
      const int64_t len = forbidden_len(boxes[i][3 + a], crop[a], N);
      bp[m++] = st;
      bp[m++] = (st + len) % N;
    }
    qsort(bp, (size_t)m, sizeof *bp, cmp_i64);
    int u = 0;
    for (int i = 0; i < m; i++)
      if (u == 0 || bp[i] != bp[u - 1])
        bp[u++] = bp[i];
    h->nb[a] = u;
    bp[u] = N; /* the end of the last cell */
  }
  const size_t most = (size_t)h->nb[0] * (size_t)h->nb[1] * (size_t)h->nb[2];
  h->cell = malloc(most * sizeof *h->cell);
  h->cum = malloc(most * sizeof *h->cum);
  if (h->cell == NULL || h->cum == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the hold-out");
  /* A cell lies wholly inside or outside every forbidden set (the sets'
   * ends are cell starts), so its first origin decides for all of it. */
  uint64_t total = 0;
  for (int i = 0; i < h->nb[0]; i++)
    for (int j = 0; j < h->nb[1]; j++)
      for (int k = 0; k < h->nb[2]; k++) {
        const int64_t o[3] = {h->bp[0][i], h->bp[1][j], h->bp[2][k]};
        int hit = 0;
        for (int r = 0; r < n && !hit; r++)
          hit = sf__box_hits(s->shape, crop, o, boxes[r]);
        if (hit)
          continue;
        total += (uint64_t)(h->bp[0][i + 1] - o[0]) *
                 (uint64_t)(h->bp[1][j + 1] - o[1]) *
                 (uint64_t)(h->bp[2][k + 1] - o[2]);
        h->cell[h->ncells][0] = i;
        h->cell[h->ncells][1] = j;
        h->cell[h->ncells][2] = k;
        h->cum[h->ncells++] = total;
      }
  h->allowed = total;
  if (total == 0)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "holdout: the %d held-out region%s leave%s no crop "
                    "origin: every %lldx%lldx%lld crop of the %lldx%lldx%lld "
                    "box would contain a held-out voxel (smaller regions or "
                    "crop)",
                    n, n == 1 ? "" : "s", n == 1 ? "s" : "", (long long)crop[0],
                    (long long)crop[1], (long long)crop[2],
                    (long long)s->shape[0], (long long)s->shape[1],
                    (long long)s->shape[2]);
  return SLABFEED_OK;
}

void sf__sampler_free(sf__sampler *s)
{
  if (s->hold != NULL) {
    free(s->hold->cell);
    free(s->hold->cum);
    free(s->hold);
    s->hold = NULL;
  }
  free(s->z0);
  free(s->yx);
  free(s->cum);
  s->z0 = NULL;
  s->yx = NULL;
  s->cum = NULL;
  s->nvol = 0;
}

/* Origin number u (in [0, allowed)) of the allowed cells, z-major inside
 * each cell. */
static void holdout_origin(const sf__holdout *h, uint64_t u, int64_t o[3])
{
  int lo = 0, hi = h->ncells - 1; /* the first cell with cum > u */
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (h->cum[mid] > u)
      hi = mid;
    else
      lo = mid + 1;
  }
  uint64_t off = u - (lo > 0 ? h->cum[lo - 1] : 0);
  int64_t w[3];
  for (int a = 0; a < 3; a++)
    w[a] = h->bp[a][h->cell[lo][a] + 1] - h->bp[a][h->cell[lo][a]];
  o[2] = h->bp[2][h->cell[lo][2]] + (int64_t)(off % (uint64_t)w[2]);
  off /= (uint64_t)w[2];
  o[1] = h->bp[1][h->cell[lo][1]] + (int64_t)(off % (uint64_t)w[1]);
  o[0] = h->bp[0][h->cell[lo][0]] + (int64_t)(off / (uint64_t)w[1]);
}

slabfeed_status sf__sampler_volumes(sf__sampler *s, int n, const int64_t *z0,
                                    const int64_t (*vshape)[3],
                                    const uint64_t *w, sf__err *e)
{
  s->z0 = malloc(((size_t)n + 1) * sizeof *s->z0);
  s->yx = malloc((size_t)n * sizeof *s->yx);
  s->cum = malloc((size_t)n * sizeof *s->cum);
  if (s->z0 == NULL || s->yx == NULL || s->cum == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "sampler: volume table");
  memcpy(s->z0, z0, ((size_t)n + 1) * sizeof *s->z0);
  uint64_t sum = 0;
  for (int i = 0; i < n; i++) {
    s->yx[i][0] = vshape[i][1];
    s->yx[i][1] = vshape[i][2];
    s->cum[i] = sum += w[i];
  }
  s->nvol = n;
  return SLABFEED_OK;
}

/* Volume of sample k among volumes [lo, hi): the first whose running
 * weight exceeds draw 4, scaled to their weights (all volumes: the
 * dataset's choice). */
static int pick_volume(const sf__sampler *s, uint64_t epoch, uint64_t k, int lo,
                       int hi)
{
  const uint64_t below = lo > 0 ? s->cum[lo - 1] : 0;
  const uint64_t u = below + sf__uniform(sf__hash(s->seed, epoch, k, 4),
                                         s->cum[hi - 1] - below);
  hi--;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (s->cum[mid] > u)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* The origin of sample k drawn from z in [z0, z0 + nz) (mod Z), y in
 * [0, ny), x in [0, nx), and its symmetry. */
static void draw_box(const sf__sampler *s, uint64_t epoch, uint64_t k,
                     int64_t z0, int64_t nz, const int64_t n[3],
                     int64_t origin[3], int32_t *sym)
{
  origin[0] = (z0 + (int64_t)sf__uniform(sf__hash(s->seed, epoch, k, 0),
                                         (uint64_t)nz)) %
              s->shape[0];
  for (int a = 1; a < 3; a++)
    origin[a] = (int64_t)sf__uniform(sf__hash(s->seed, epoch, k, (uint32_t)a),
                                     (uint64_t)n[a]);
  *sym = s->sym[sf__uniform(sf__hash(s->seed, epoch, k, 3), (uint64_t)s->nsym)];
}

/* The origin of sample k inside the volume of planes [zb, zb + n[0]) and
 * extents n[1], n[2] (uniform, or among the origins the hold-out allows),
 * and its symmetry. */
static void draw_in_volume(const sf__sampler *s, uint64_t epoch, uint64_t k,
                           int64_t zb, const int64_t n[3], int64_t origin[3],
                           int32_t *sym)
{
  if (s->hold == NULL) {
    draw_box(s, epoch, k, zb, n[0], n, origin, sym);
    return;
  }
  holdout_origin(s->hold,
                 sf__uniform(sf__hash(s->seed, epoch, k, 0), s->hold->allowed),
                 origin);
  origin[0] += zb;
  *sym = s->sym[sf__uniform(sf__hash(s->seed, epoch, k, 3), (uint64_t)s->nsym)];
}

void sf__sampler_draw(const sf__sampler *s, uint64_t epoch, uint64_t k,
                      int64_t origin[3], int32_t *sym)
{
  if (s->nvol > 1)
    sf__sampler_draw_among(s, epoch, k, 0, s->nvol, origin, sym);
  else
    draw_in_volume(s, epoch, k, 0, s->shape, origin, sym);
}

void sf__sampler_draw_among(const sf__sampler *s, uint64_t epoch, uint64_t k,
                            int vlo, int vhi, int64_t origin[3], int32_t *sym)
{
  const int v = pick_volume(s, epoch, k, vlo, vhi);
  const int64_t n[3] = {s->z0[v + 1] - s->z0[v], s->yx[v][0], s->yx[v][1]};
  draw_in_volume(s, epoch, k, s->z0[v], n, origin, sym);
}

void sf__sampler_draw_in(const sf__sampler *s, uint64_t epoch, uint64_t k,
                         int64_t z0, int64_t nz, int64_t origin[3],
                         int32_t *sym)
{
  draw_box(s, epoch, k, z0, nz, s->shape, origin, sym);
}
