#include "plan/batch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/geometry.h"

int sf__batch_max_zruns(const sf__batch_plan *b)
{
  /* Each of a crop's (at most 2) periodic z-runs is cut at every core
   * boundary of the group it crosses and where it enters one of the 3
   * segments of its node (node_holders). */
  const sf__placement *L = &b->store->L;
  int gs = 1;
  for (int g = 0; g < L->ng; g++)
    if (L->gfirst[g + 1] - L->gfirst[g] > gs)
      gs = L->gfirst[g + 1] - L->gfirst[g];
  return 2 * (gs + 1 + 3) + 2;
}

int sf__batch_max_pieces(const sf__batch_plan *b)
{
  return sf__batch_max_zruns(b) * 4;
}

slabfeed_status sf__batch_volume_weights(const sf__config *c,
                                         const sf__suite *s, uint64_t *w,
                                         sf__err *e)
{
  const char *how = c->weights;
  const int n = s->n;
  if (how[0] == '\0' || strcmp(how, "voxels") == 0) {
    for (int i = 0; i < n; i++)
      w[i] = (uint64_t)(s->shape[i][0] * s->shape[i][1] * s->shape[i][2]);
  } else if (strcmp(how, "equal") == 0) {
    for (int i = 0; i < n; i++)
      w[i] = 1;
  } else {
    /* Weights as given, scaled to integers below 2^62 / n in total. */
    double max = 0;
    const char *p = how;
    double *x = malloc((size_t)n * sizeof *x);
    if (x == NULL)
      return sf__fail(e, SLABFEED_ERR_NOMEM, "volume weights");
    int k = 0;
    for (; *p != '\0' && e->status == SLABFEED_OK; k++) {
      char *end;
      const double d = strtod(p, &end);
      if (end == p || !(d >= 0) || d > 1e300 || (*end != ',' && *end != '\0'))
        sf__fail(e, SLABFEED_ERR_ARG,
                 "config: volume_weights '%s': entry %d is not a "
                 "non-negative number (voxels, equal, or W0,W1,...)",
                 how, k);
      else if (k >= n)
        sf__fail(e, SLABFEED_ERR_ARG,
                 "config: volume_weights '%s' has more entries than the %d "
                 "volumes of the dataset",
                 how, n);
      else {
        x[k] = d;
        max = d > max ? d : max;
      }
      p = *end == ',' ? end + 1 : end;
    }
    if (e->status == SLABFEED_OK && k != n)
      sf__fail(e, SLABFEED_ERR_ARG,
               "config: volume_weights '%s' has %d entries for %d volumes", how,
               k, n);
    for (int i = 0; e->status == SLABFEED_OK && i < n; i++)
      w[i] = max > 0 ? (uint64_t)(x[i] / max * 1099511627776.0 + 0.5) : 0;
    free(x);
    if (e->status != SLABFEED_OK)
      return e->status;
  }
  /* Held-out volumes: "3,7,10-12", or entries naming a volume's path. */
  for (const char *p = c->holdout_volumes; *p != '\0';) {
    char *end;
    const size_t len = strcspn(p, ",");
    if (*p < '0' || *p > '9') {
      int hit = -1;
      for (int i = 0; i < n && hit < 0; i++)
        if (strlen(s->path[i]) == len && strncmp(s->path[i], p, len) == 0)
          hit = i;
      if (hit < 0)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: holdout_volumes: '%.*s' is not the path of "
                        "a volume of the dataset (nor an index 0..%d)",
                        (int)len, p, n - 1);
      w[hit] = 0;
      p += len + (p[len] == ',');
      continue;
    }
    const long a = strtol(p, &end, 10);
    long z = a;
    if (end != p && *end == '-') {
      const char *q = end + 1;
      z = strtol(q, &end, 10);
      if (end == q)
        z = -1;
    }
    if (end == p || a < 0 || z < a || z >= n || (*end != ',' && *end != '\0'))
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: holdout_volumes '%s': '%.*s' is not a volume "
                      "index or range I-J of the %d volumes (0..%d)",
                      c->holdout_volumes, (int)strcspn(p, ","), p, n, n - 1);
    for (long i = a; i <= z; i++)
      w[i] = 0;
    p = *end == ',' ? end + 1 : end;
  }
  uint64_t any = 0;
  for (int i = 0; i < n; i++)
    any |= w[i];
  if (any == 0)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: every volume of the dataset is held out (or "
                    "weighs 0): no volume is left to draw training crops "
                    "from");
  return SLABFEED_OK;
}

/* A dataset of several volumes: the volume table of the sampler, after
 * the checks that involve the volumes. */
static slabfeed_status init_volumes(sf__batch_plan *b, const sf__config *c,
                                    sf__err *e)
{
  const sf__suite *s = b->suite;
  const slabfeed_config *p = &c->pub;
  if (s == NULL || s->n < 2) {
    if (c->holdout_volumes[0] != '\0' ||
        (c->weights[0] != '\0' && strcmp(c->weights, "voxels") != 0 &&
         strcmp(c->weights, "equal") != 0 && strcmp(c->weights, "1") != 0))
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: volume_weights/holdout_volumes name volumes, "
                      "but '%s' is one volume",
                      c->path);
    return SLABFEED_OK;
  }
  /* The suite's boxes are on the planes' grid; the caller's (the
   * input's) are g x. */
  const int64_t g = sf__config_coarsen(c);
  if (p->n_holdout > 0)
    for (int i = 1; i < s->n; i++)
      if (memcmp(s->shape[i], s->shape[0], sizeof s->shape[0]) != 0)
        return sf__fail(
            e, SLABFEED_ERR_ARG,
            "config: held-out regions apply inside every volume, "
            "which needs volumes of one shape; volume %d '%s' is "
            "%lldx%lldx%lld, volume 0 '%s' %lldx%lldx%lld",
            i, s->path[i], (long long)(g * s->shape[i][0]),
            (long long)(g * s->shape[i][1]), (long long)(g * s->shape[i][2]),
            s->path[0], (long long)(g * s->shape[0][0]),
            (long long)(g * s->shape[0][1]), (long long)(g * s->shape[0][2]));
  uint64_t *w = malloc((size_t)s->n * sizeof *w);
  if (w == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "volume weights");
  if (sf__batch_volume_weights(c, s, w, e) == SLABFEED_OK)
    sf__sampler_volumes(&b->sampler, s->n, s->z0, (const int64_t(*)[3])s->shape,
                        w, e);
  free(w);
  return e->status;
}

/* The held-out regions (options in input voxels) for volumes of planes'
 * box vshape, on the planes' grid: with a coarser target each box grows
 * out to whole planes' voxels, so no crop that reaches into it is drawn. */
static void holdout_planes(const sf__config *c, const int64_t vshape[3],
                           int64_t boxes[][6])
{
  const int64_t g = sf__config_coarsen(c);
  const int64_t in[3] = {g * vshape[0], g * vshape[1], g * vshape[2]};
  sf__config_holdout(c, in, boxes);
  for (int r = 0; g > 1 && r < c->pub.n_holdout; r++)
    for (int a = 0; a < 3; a++) {
      const int64_t lo = boxes[r][a] / g;
      const int64_t hi = (boxes[r][a] + boxes[r][3 + a] + g - 1) / g;
      boxes[r][a] = lo;
      boxes[r][3 + a] = hi - lo < vshape[a] ? hi - lo : vshape[a];
    }
}

/* The deviations of the amplitude augmentation per channel, and the
 * draws of each channel's normals: channel c of dataset d draws through
 * its key channel kc (the first of its vector group, else c itself) in
 * slot kc for the input and for a shared target channel below the input's
 * channel count, else 64 d + kc; the offset's normal takes draws 16 + 2
 * slot and 17 + 2 slot, the factor's 272 + 2 slot and 273 + 2 slot. */
static void init_aug(sf__batch_plan *b, const sf__config *c)
{
  const slabfeed_config *p = &c->pub;
  b->aug = c->aug; /* refused in a pass (config) */
  for (int d = 0; d < b->ndsets; d++) {
    const sf__xform *x = &b->xf[d];
    for (int ch = 0; ch < x->channels; ch++) {
      int kc = ch;
      for (int v = 0; v < x->ngroups; v++)
        for (int a = 0; a < 3; a++)
          if (x->groups[v][a] == ch)
            kc = x->groups[v][0];
      const int slot =
          d == 1 && p->aug_share && kc < b->xf[0].channels ? kc : 64 * d + kc;
      for (int j = 0; j < 2; j++) {
        b->sigma[d][j][ch] = sf__config_aug_sigma(c, d, j, ch);
        b->aug_draw[d][j][ch] = (uint32_t)(16 + 256 * j + 2 * slot);
      }
    }
  }
}

/* The factors and offsets of sample k (epoch `epoch`) of dataset d into
 * f[2][C]: m = exp(sigma_mul n) and a = sigma_add n' rounded to float,
 * 1 and -0 (the identities) where a deviation is 0. */
static void draw_aug(const sf__batch_plan *b, int d, uint64_t epoch, uint64_t k,
                     float *f)
{
  const int C = b->xf[d].channels;
  for (int ch = 0; ch < C; ch++) {
    const float sa = b->sigma[d][0][ch], sm = b->sigma[d][1][ch];
    const uint64_t seed = b->sampler.seed;
    f[ch] = sm > 0 ? (float)exp((double)sm * sf__normal(seed, epoch, k,
                                                        b->aug_draw[d][1][ch]))
                   : 1.0f;
    f[C + ch] = sa > 0 ? (float)((double)sa * sf__normal(seed, epoch, k,
                                                         b->aug_draw[d][0][ch]))
                       : -0.0f;
  }
}

/* The factors of dataset d of ring entry k (slot * B + i), or NULL. */
static float *aug_at(const sf__batch_plan *b, size_t k, int d)
{
  return b->aug && d < b->ndsets
             ? b->aug_f[d] + k * 2 * (size_t)b->xf[d].channels
             : NULL;
}

const float *sf__batch_aug(const sf__batch_plan *b, int slot, int i, int d)
{
  return aug_at(b, (size_t)slot * (size_t)b->B + (size_t)i, d);
}

slabfeed_status sf__batch_init(sf__batch_plan *b, const sf__config *c,
                               const slabfeed_dataset_info info[],
                               const sf__suite *suite, const sf__store *store,
                               sf__err *e)
{
  const slabfeed_config *p = &c->pub;
  memset(b, 0, sizeof *b);
  b->suite = suite;
  b->store = store;
  b->rank = store->rank;
  b->size = store->size;
  b->K = p->prefetch;
  b->B = p->batch;
  b->ndsets = c->ndsets;
  b->device = p->device;
  /* The crop gathered on the planes' grid (the input's, or a coarser
   * target's: sf__config_planes_crop), with its pad there. */
  sf__config_planes_crop(c, b->crop);
  const int64_t g = sf__config_coarsen(c), P = sf__config_planes_pad(c);
  b->in_shift = g * P - p->pad;
  for (int d = 0; d < b->ndsets; d++) {
    sf__xform *x = &b->xf[d];
    x->channels = (int)info[d].channels;
    x->ngroups = d == 0 ? p->n_input_vectors : p->n_target_vectors;
    memcpy(x->groups, d == 0 ? p->input_vectors : p->target_vectors,
           sizeof x->groups);
    x->dtype = p->dtype;
    x->layout = p->out_layout;
    /* Dataset d's grid over the planes': a finer target's f, a coarser
     * target's input g, else 1. */
    b->scale[d] = d == 1 ? (p->scale_factor > 1 ? p->scale_factor : 1) : g;
    const int64_t s = b->scale[d];
    for (int a = 0; a < 3; a++)
      x->ext[a] = s * b->crop[a];
    /* A pass's target is the tile itself unless asked padded (on its own
     * grid: s x the pad on the planes' grid). */
    x->trim = d == 1 && p->tile > 0 && !p->target_pad ? s * P : 0;
    /* Training pads: the target gathers its core only (s x the core on
     * the planes' grid, s x their pad in). The input of a coarser target
     * gathers its crop, core + 2 pad, out of the planes' crop, g x P - pad
     * in on every side. */
    b->sub[d] = (d == 1 && c->target_core) || (d == 0 && b->in_shift > 0);
    for (int a = 0; b->sub[d] && a < 3; a++) {
      b->sub_lo[d][a] = d == 1 ? s * P : b->in_shift;
      x->ext[a] = d == 1 ? s * (c->core[a] / g) : p->crop[a];
    }
  }
  init_aug(b, c);
  sf__sampler_init(&b->sampler, info[0].shape, p->seed, p->symmetries);
  if (init_volumes(b, c, e) != SLABFEED_OK)
    return e->status;
  /* Held-out regions in the volume's own coordinates: those of every
   * volume of a dataset of several (of one shape: init_volumes). */
  const int many = suite != NULL && suite->n > 1;
  const int64_t *vshape = many ? suite->shape[0] : info[0].shape;
  int64_t boxes[SLABFEED_MAX_REGIONS][6];
  holdout_planes(c, vshape, boxes);
  /* A pass draws no random origins: its hold-out (the training
   * loader's options, often passed on unchanged) has nothing to keep out. */
  b->sampler.shape[0] = vshape[0];
  const slabfeed_status hs =
      p->tile == 0 ? sf__sampler_holdout(&b->sampler, b->crop, p->n_holdout,
                                         (const int64_t(*)[6])boxes, e)
                   : SLABFEED_OK;
  b->sampler.shape[0] = info[0].shape[0];
  if (hs == SLABFEED_ERR_ARG && g > 1) {
    /* No origin left (the sampler's one refusal), said on the planes'
     * grid: say it in the caller's input voxels. */
    sf__err_clear(e);
    sf__fail(e, SLABFEED_ERR_ARG,
             "holdout: the %d held-out region%s leave%s no crop origin: "
             "every %lldx%lldx%lld crop of the %lldx%lldx%lld box would "
             "contain a held-out voxel (each region widened to whole voxels "
             "of the target's grid, coarsen_factor %lld; smaller regions or "
             "crop)",
             p->n_holdout, p->n_holdout == 1 ? "" : "s",
             p->n_holdout == 1 ? "s" : "", (long long)p->crop[0],
             (long long)p->crop[1], (long long)p->crop[2],
             (long long)(g * vshape[0]), (long long)(g * vshape[1]),
             (long long)(g * vshape[2]), (long long)g);
  }
  if (hs != SLABFEED_OK)
    return e->status;
  /* Locality mode draws z origins in the z-range of the rank's node. */
  b->locality = p->locality;
  b->remote_get = c->remote_get;
  b->steps_per_epoch = p->steps_per_epoch;
  b->pass = p->tile > 0;
  if (b->pass) {
    /* One epoch is one pass: every tile once, in global batches. */
    int64_t R[6], in[3];
    for (int a = 0; a < 3; a++)
      in[a] = g * info[0].shape[a];
    sf__config_region(c, in, R);
    for (int a = 0; a < 6; a++)
      R[a] /= g; /* whole target voxels (config) */
    sf__tiles_init(&b->tiles, info[0].shape, R, p->tile / g, P);
    b->pass_symmetry = p->pass_symmetry;
    const uint64_t per = (uint64_t)b->size * (uint64_t)b->B;
    b->steps_per_epoch = (b->tiles.count + per - 1) / per;
  } else if (b->steps_per_epoch == 0) {
    /* The voxels of the training volumes (not of the stacked planes,
     * which pad volumes of smaller y, x; held-out volumes have none). */
    double box = 0;
    for (int v = 0; v < (many ? suite->n : 1); v++) {
      const int64_t *n = many ? suite->shape[v] : info[0].shape;
      if (!many || suite->z0[v + 1] > suite->z0[v])
        box += (double)n[0] * (double)n[1] * (double)n[2];
    }
    /* Crops of the core (the crop asked for, without its pad). */
    const double per_step = (double)(c->core[0] / g) *
                            (double)(c->core[1] / g) *
                            (double)(c->core[2] / g) * b->size * b->B;
    const double s = box / per_step;
    b->steps_per_epoch = s < 1.0 ? 1 : (uint64_t)(s + 0.999999);
  }
  /* Sample ids of an epoch (int64, and the sampler's counter) stay below
   * 2^62: steps x ranks x batch. */
  const uint64_t per_step = (uint64_t)b->size * (uint64_t)b->B;
  if (b->steps_per_epoch > ((uint64_t)1 << 62) / per_step)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: steps_per_epoch %llu x %d ranks x batch %d is "
                    "more than 2^62 samples per epoch (sample ids overflow): "
                    "at most %llu steps",
                    (unsigned long long)b->steps_per_epoch, b->size, b->B,
                    (unsigned long long)(((uint64_t)1 << 62) / per_step));
  const size_t KB = (size_t)b->K * (size_t)b->B;
  b->origin = malloc(KB * 3 * sizeof *b->origin);
  b->origin_out = malloc(KB * 3 * sizeof *b->origin_out);
  b->volume = malloc(KB * sizeof *b->volume);
  for (int d = 0; b->aug && d < b->ndsets; d++)
    if ((b->aug_f[d] = malloc(KB * 2 * (size_t)b->xf[d].channels *
                              sizeof *b->aug_f[d])) == NULL)
      return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the batch plan");
  b->nparams = suite != NULL ? suite->nparam : 0;
  if (b->nparams > 0 &&
      (b->params = malloc(KB * (size_t)b->nparams * sizeof *b->params)) == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the batch plan");
  b->sym = malloc(KB * sizeof *b->sym);
  b->sample = malloc(KB * sizeof *b->sample);
  b->valid = malloc((size_t)b->K * sizeof *b->valid);
  if (b->pass && (b->tile = malloc(KB * 9 * sizeof *b->tile)) == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the batch plan");
  b->pieces = malloc((size_t)sf__batch_max_pieces(b) * sizeof *b->pieces);
  b->zruns = malloc((size_t)sf__batch_max_zruns(b) * sizeof *b->zruns);
  if (!b->origin || !b->origin_out || !b->volume || !b->sym || !b->sample ||
      !b->valid || !b->pieces || !b->zruns)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the batch plan");
  return SLABFEED_OK;
}

void sf__batch_free(sf__batch_plan *b)
{
  sf__sampler_free(&b->sampler);
  free(b->origin);
  free(b->origin_out);
  free(b->volume);
  free(b->params);
  for (int d = 0; d < SF_MAX_DSETS; d++)
    free(b->aug_f[d]);
  free(b->sym);
  free(b->sample);
  free(b->tile);
  free(b->valid);
  free(b->pieces);
  free(b->zruns);
  memset(b, 0, sizeof *b);
}

void sf__batch_draw(const sf__batch_plan *b, int rank, uint64_t epoch,
                    uint64_t step, int i, int64_t origin[3], int32_t *sym)
{
  const uint64_t B = (uint64_t)b->B;
  const uint64_t k = step * (uint64_t)b->size * B + (uint64_t)rank * B + i;
  if (b->pass) {
    /* Slots past the last tile repeat it (they are marked, not read). */
    const uint64_t g = k < b->tiles.count ? k : b->tiles.count - 1;
    sf__tiles_input_origin(&b->tiles, g, origin);
    *sym = b->pass_symmetry;
    return;
  }
  if (!b->locality) {
    sf__sampler_draw(&b->sampler, epoch, k, origin, sym);
    return;
  }
  /* Locality: origins in the z-range of the rank's node; over several
   * volumes, the whole volumes of that range, by their weights. */
  const int64_t a = b->store->L.reach0[rank], n = b->store->L.reach[rank];
  if (b->sampler.nvol > 1)
    sf__sampler_draw_among(&b->sampler, epoch, k, sf__suite_of(b->suite, a),
                           sf__suite_of(b->suite, a + n - 1) + 1, origin, sym);
  else
    sf__sampler_draw_in(&b->sampler, epoch, k, a, n, origin, sym);
}

void sf__batch_plan_slot(sf__batch_plan *b, int slot, uint64_t epoch,
                         uint64_t step)
{
  const uint64_t B = (uint64_t)b->B;
  const uint64_t first = step * (uint64_t)b->size * B + (uint64_t)b->rank * B;
  const int64_t in_g = b->scale[0]; /* the input's grid over the planes' */
  b->valid[slot] = b->B;
  for (int i = 0; i < b->B; i++) {
    const size_t k = (size_t)slot * (size_t)b->B + (size_t)i;
    const uint64_t g = first + (uint64_t)i;
    b->sample[k] = (int64_t)g;
    sf__batch_draw(b, b->rank, epoch, step, i, &b->origin[3 * k], &b->sym[k]);
    const int v = b->suite != NULL && b->suite->n > 1
                      ? sf__suite_of(b->suite, b->origin[3 * k])
                      : 0;
    b->volume[k] = v;
    for (int d = 0; b->aug && d < b->ndsets; d++)
      draw_aug(b, d, epoch, g, aug_at(b, k, d));
    if (b->nparams > 0)
      memcpy(&b->params[k * (size_t)b->nparams],
             &b->suite->param[(size_t)v * (size_t)b->nparams],
             (size_t)b->nparams * sizeof *b->params);
    memcpy(&b->origin_out[3 * k], &b->origin[3 * k], 3 * sizeof *b->origin);
    if (v > 0)
      b->origin_out[3 * k] -= b->suite->z0[v];
    /* On the input's grid: the planes' crop starts in_shift input voxels
     * before the input crop (within [0, N): in_shift < in_g). */
    for (int a = 0; in_g > 1 && a < 3; a++)
      b->origin_out[3 * k + a] = in_g * b->origin_out[3 * k + a] + b->in_shift;
    if (!b->pass)
      continue;
    const int real = g < b->tiles.count;
    sf__tiles_at(&b->tiles, real ? g : b->tiles.count - 1, &b->tile[9 * k]);
    for (int a = 0; in_g > 1 && a < 9; a++)
      b->tile[9 * k + a] *= in_g;
    if (!real) {
      b->sample[k] = -1;
      b->valid[slot]--;
    }
  }
}

/* The ranks whose segments viewer v reads before asking its group: itself,
 * then the last and the first rank of its node in its group (which keep
 * the planes just above and below the node's range: halos, and locality's
 * crop - 1 planes above). */
static void node_holders(const sf__placement *L, int v, int h[3])
{
  int64_t end;
  const int g = L->groupof[v];
  h[0] = v;
  h[1] = sf__placement_owner(L, g, L->reach0[v] + L->reach[v] - 1, &end);
  h[2] = sf__placement_owner(L, g, L->reach0[v], &end);
}

/* Splits the z-run [z, z+len) (inside [0,Z)) by source as rank v sees
 * it: a segment of v's node that holds the plane (v's own first), else
 * the rank of v's group whose core holds it; appends to zr[]. */
static int split_z(const sf__store *s, int v, int64_t z, int64_t len,
                   int64_t off, sf__zrun *zr)
{
  const sf__placement *L = &s->L;
  const int64_t Z = s->shape[0];
  int h[3];
  node_holders(L, v, h);
  int n = 0;
  while (len > 0) {
    int src = -1;
    int64_t q = 0, run = len;
    for (int i = 0; i < 3 && src < 0; i++) {
      const int64_t p = sf__pmod(z - sf__placement_first(L, h[i]), Z);
      const int64_t held = sf__store_planes(s, h[i]);
      if (p < held) {
        src = h[i];
        q = p;
        run = len < held - p ? len : held - p;
      }
    }
    if (src < 0) {
      int64_t end;
      src = sf__placement_owner(L, L->groupof[v], z, &end);
      q = z - L->core0[src] + L->lo[src];
      run = len < end - z ? len : end - z;
      /* up to where a segment of the node takes over */
      for (int i = 0; i < 3; i++) {
        const int64_t ahead = sf__pmod(sf__placement_first(L, h[i]) - z, Z);
        if (ahead > 0 && ahead < run)
          run = ahead;
      }
    }
    zr[n++] = (sf__zrun){src, q, run, off};
    z += run;
    off += run;
    len -= run;
  }
  return n;
}

int sf__batch_split(const sf__batch_plan *b, int viewer,
                    const int64_t origin[3], sf__piece *pieces, sf__zrun *zruns)
{
  const sf__store *s = b->store;
  sf__run zs[2], ys[2], xs[2];
  /* z wraps inside the volume of the origin (the stacked box's planes
   * [zb, zb + zn)). */
  int64_t zb = 0, zn = s->shape[0], yn = s->shape[1], xn = s->shape[2];
  if (b->suite != NULL && b->suite->n > 1) {
    const int v = sf__suite_of(b->suite, origin[0]);
    zb = b->suite->z0[v];
    zn = b->suite->z0[v + 1] - zb;
    yn = b->suite->shape[v][1];
    xn = b->suite->shape[v][2];
  }
  const int nz = sf__periodic_split(origin[0] - zb, b->crop[0], zn, zs);
  for (int k = 0; k < nz; k++)
    zs[k].begin += zb;
  const int ny = sf__periodic_split(origin[1], b->crop[1], yn, ys);
  const int nx = sf__periodic_split(origin[2], b->crop[2], xn, xs);
  int nzr = 0;
  for (int k = 0; k < nz; k++)
    nzr +=
        split_z(s, viewer, zs[k].begin, zs[k].len, zs[k].crop_off, zruns + nzr);
  int n = 0;
  for (int k = 0; k < nzr; k++) {
    const sf__zrun *r = &zruns[k];
    for (int j = 0; j < ny; j++)
      for (int m = 0; m < nx; m++)
        pieces[n++] = (sf__piece){r->src,
                                  r->q,
                                  ys[j].begin,
                                  xs[m].begin,
                                  {r->len, ys[j].len, xs[m].len},
                                  {r->off, ys[j].crop_off, xs[m].crop_off}};
  }
  return n;
}

int sf__batch_pieces(sf__batch_plan *b, int slot, int i)
{
  const int64_t *origin = &b->origin[3 * ((size_t)slot * (size_t)b->B + i)];
  return sf__batch_split(b, b->rank, origin, b->pieces, b->zruns);
}

int sf__batch_piece_of(const sf__batch_plan *b, int d, const sf__piece *p,
                       sf__piece *out, int64_t skip[3])
{
  const sf__piece sp = sf__piece_scale(p, b->scale[d]);
  if (!b->sub[d]) {
    *out = sp;
    skip[0] = skip[1] = skip[2] = 0;
    return 1;
  }
  return sf__piece_clip(&sp, b->sub_lo[d], b->xf[d].ext, out, skip);
}

int32_t sf__batch_symmetry(const sf__batch_plan *b, int slot, int i)
{
  return b->sym[(size_t)slot * (size_t)b->B + (size_t)i];
}

int64_t sf__batch_sample_elems(const sf__batch_plan *b, int d)
{
  return sf__xform_elems(&b->xf[d]);
}

int64_t sf__batch_stage_elems(const sf__batch_plan *b, int d)
{
  const sf__xform *x = &b->xf[d];
  return (int64_t)x->channels * x->ext[0] * x->ext[1] * x->ext[2];
}

int64_t sf__batch_sample_bytes(const sf__batch_plan *b, int d)
{
  return sf__batch_sample_elems(b, d) *
         (int64_t)slabfeed_dtype_size(b->xf[d].dtype);
}

void sf__batch_position(const sf__batch_plan *b, uint64_t epoch0,
                        uint64_t step0, uint64_t n, uint64_t *epoch,
                        uint64_t *step)
{
  const uint64_t s = step0 + n;
  *epoch = epoch0 + s / b->steps_per_epoch;
  *step = s % b->steps_per_epoch;
}

void sf__batch_describe(const sf__batch_plan *b, int slot, void *const data[],
                        uint64_t epoch, uint64_t step, slabfeed_batch *out)
{
  memset(out, 0, sizeof *out);
  out->size = sizeof *out;
  for (int d = 0; d < b->ndsets; d++) {
    slabfeed_tensor *t = d == 0 ? &out->input : &out->target;
    const sf__xform *x = &b->xf[d];
    const int64_t C = x->channels, D = x->ext[0] - 2 * x->trim,
                  H = x->ext[1] - 2 * x->trim, W = x->ext[2] - 2 * x->trim;
    const int64_t sample = C * D * H * W;
    t->data = data[d];
    t->ndim = 5;
    t->dtype = x->dtype;
    if (x->layout == SLABFEED_OUT_NCDHW) {
      const int64_t shape[5] = {b->B, C, D, H, W};
      const int64_t strides[5] = {sample, D * H * W, H * W, W, 1};
      memcpy(t->shape, shape, sizeof shape);
      memcpy(t->strides, strides, sizeof strides);
    } else {
      const int64_t shape[5] = {b->B, D, H, W, C};
      const int64_t strides[5] = {sample, H * W * C, W * C, C, 1};
      memcpy(t->shape, shape, sizeof shape);
      memcpy(t->strides, strides, sizeof strides);
    }
  }
  const size_t k = (size_t)slot * (size_t)b->B;
  out->device = b->device;
  out->epoch = epoch;
  out->step = step;
  out->origin = &b->origin_out[3 * k];
  out->symmetry = &b->sym[k];
  out->sample = &b->sample[k];
  out->valid = b->valid[slot];
  out->tile = b->pass ? &b->tile[9 * k] : NULL;
  out->volume = &b->volume[k];
  out->input_aug = aug_at(b, k, 0);
  out->target_aug = aug_at(b, k, 1);
  out->n_params = b->nparams;
  out->params = b->nparams > 0 ? &b->params[k * (size_t)b->nparams] : NULL;
}
