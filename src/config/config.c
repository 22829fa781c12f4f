#include "config/config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/options.h"

/* A caller's struct must reach at least the required fields. */
#define SF_CONFIG_MIN (offsetof(slabfeed_config, input) + sizeof(const char *))

void slabfeed_config_init_sized(slabfeed_config *cfg, size_t size)
{
  if (cfg == NULL || size < sizeof(size_t))
    return;
  slabfeed_config d;
  memset(&d, 0, sizeof d);
  d.size = size;
  for (int i = 0; i < sf__option_count; i++)
    sf__option_default(&sf__options[i], &d);
  sf__sized_init(cfg, size, &d, sizeof d);
}

/* The options of a target on a coarser grid (coarsen_factor g > 1): a
 * target, no scale_factor, and the geometry in whole target voxels (the
 * crop's core or the tile a multiple of g; a padded target's pad too). */
static slabfeed_status check_coarsen(const slabfeed_config *c, sf__err *e)
{
  const int g = c->coarsen_factor;
  if (c->target == NULL)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: coarsen_factor %d without a target dataset", g);
  if (c->scale_factor > 1)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: scale_factor %d (a finer target) and "
                    "coarsen_factor %d (a coarser one) together",
                    c->scale_factor, g);
  if (c->tile > 0 && c->tile % g != 0)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: tile %d is not a multiple of coarsen_factor %d "
                    "(a tile's target is tile / %d voxels of the target's "
                    "grid)",
                    c->tile, g, g);
  for (int a = 0; c->tile == 0 && a < 3; a++)
    if (c->crop[a] % g != 0)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: crop %lldx%lldx%lld is not a multiple of "
                      "coarsen_factor %d on every axis (the target's crop is "
                      "the crop / %d on the target's grid)",
                      (long long)c->crop[0], (long long)c->crop[1],
                      (long long)c->crop[2], g, g);
  if (c->target_pad && c->pad % g != 0)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: target_pad with pad %d, not a multiple of "
                    "coarsen_factor %d: the padded target would not be whole "
                    "voxels of the target's grid",
                    c->pad, g);
  return SLABFEED_OK;
}

/* Checks of the options alone: each against its row of the table, then
 * what involves several options or the library's limits. */
static slabfeed_status check_options(const slabfeed_config *c, sf__err *e)
{
  for (int i = 0; i < sf__option_count; i++)
    if (sf__option_check(&sf__options[i], c, e) != SLABFEED_OK)
      return e->status;
  if (strlen(c->path) >= SF_PATH_MAX)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: path is longer than %d bytes (for many volumes "
                    "give a glob pattern or an @manifest)",
                    SF_PATH_MAX - 1);
  if ((c->volume_weights != NULL && strlen(c->volume_weights) >= SF_LIST_MAX) ||
      (c->holdout_volumes != NULL && strlen(c->holdout_volumes) >= SF_LIST_MAX))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: volume_weights and holdout_volumes are limited "
                    "to %d bytes",
                    SF_LIST_MAX - 1);
  if ((c->input_vector_fields != NULL &&
       strlen(c->input_vector_fields) >= SF_LIST_MAX) ||
      (c->target_vector_fields != NULL &&
       strlen(c->target_vector_fields) >= SF_LIST_MAX))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: input_vector_fields and target_vector_fields "
                    "are limited to %d bytes",
                    SF_LIST_MAX - 1);
  if (c->params != NULL && strlen(c->params) >= SF_LIST_MAX)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: params is limited to %d bytes", SF_LIST_MAX - 1);
  if (strlen(c->input) >= SF_LIST_MAX ||
      (c->target != NULL && strlen(c->target) >= SF_LIST_MAX))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: input and target are limited to %d bytes",
                    SF_LIST_MAX - 1);
  if (c->symmetries != SLABFEED_SYM_NONE &&
      (c->crop[0] != c->crop[1] || c->crop[0] != c->crop[2]))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: crop %lldx%lldx%lld is not cubic; symmetries "
                    "other than 'none' need a cubic crop",
                    (long long)c->crop[0], (long long)c->crop[1],
                    (long long)c->crop[2]);
  if (c->n_target_vectors > 0 && c->target == NULL)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: target vector groups without a target dataset");
  if (c->n_target_norm > 0 && c->target == NULL)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: target_norm (%d entries) without a target "
                    "dataset",
                    c->n_target_norm);
  if (c->scale_factor > 1 && c->target == NULL)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: scale_factor %d without a target dataset",
                    c->scale_factor);
  if (c->coarsen_factor > 1 && check_coarsen(c, e) != SLABFEED_OK)
    return e->status;
  if (c->tile > 0 && c->locality)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: a tiled pass (tile %d) and locality together "
                    "are not supported: a pass reads its tiles wherever they "
                    "lie, not in the rank's node's z-range",
                    c->tile);
  if (c->residency == SLABFEED_RESIDENCY_DEVICE && c->device == -1)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: residency device holds the slabs in GPU memory "
                    "and needs device batches (device >= 0 or local); host "
                    "batches read the node's shared memory");
  if (c->n_holdout > 0 && c->locality)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: holdout and locality together are not supported "
                    "(locality draws each rank's origins in its node's "
                    "z-range; a hold-out would make those ranges unequal)");
  return SLABFEED_OK;
}

/* The fields of dataset d ("NAME" or "NAME@FILES", separated by commas;
 * blanks around an entry are dropped) into c->field[d]. */
static slabfeed_status parse_fields(sf__config *c, int d, sf__err *e)
{
  const char *what = d == 0 ? "input" : "target";
  const char *p = d == 0 ? c->input : c->target;
  c->nfields[d] = 0;
  for (int k = 0;; k++) {
    size_t len, a, b;
    sf__list_entry(p, &len, &a, &b);
    if (k >= SF_MAX_FIELDS)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: %s '%s' names more than %d fields", what,
                      d == 0 ? c->input : c->target, SF_MAX_FIELDS);
    const char *at = memchr(p + a, '@', b - a);
    const size_t nlen = at != NULL ? (size_t)(at - (p + a)) : b - a;
    if (nlen == 0 || (at != NULL && at + 1 == p + b))
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: %s '%s': field %d is empty (fields: DATASET or "
                      "DATASET@FILES, separated by commas)",
                      what, d == 0 ? c->input : c->target, k);
    if (nlen >= SF_NAME_MAX)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: %s: a dataset name is limited to %d bytes", what,
                      SF_NAME_MAX - 1);
    sf__field *f = &c->field[d][k];
    memcpy(f->name, p + a, nlen);
    f->name[nlen] = '\0';
    const size_t slen = at != NULL ? (size_t)(p + b - (at + 1)) : 0;
    memcpy(f->spec, at != NULL ? at + 1 : "", slen);
    f->spec[slen] = '\0';
    c->nfields[d] = k + 1;
    if (p[len] == '\0')
      break;
    p += len + 1;
  }
  return SLABFEED_OK;
}

/* The fields of *_vector_fields of dataset d into c->vec_field[d]: each
 * one of the dataset's fields, none twice. */
static slabfeed_status parse_vector_fields(sf__config *c, int d, sf__err *e)
{
  const char *what = d == 0 ? "input" : "target";
  const char *p = c->vec_text[d];
  c->nvec[d] = 0;
  if (p[0] != '\0' && d >= c->ndsets)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: target_vector_fields '%s' without a target", p);
  for (int k = 0; p[0] != '\0'; k++) {
    size_t len, a, b;
    sf__list_entry(p, &len, &a, &b);
    int f = 0;
    while (f < c->nfields[d] && (strlen(c->field[d][f].name) != b - a ||
                                 memcmp(c->field[d][f].name, p + a, b - a)))
      f++;
    if (f == c->nfields[d])
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: %s_vector_fields names '%.*s', which is not "
                      "a field of the %s '%s'",
                      what, (int)(b - a), p + a, what,
                      d == 0 ? c->input : c->target);
    for (int j = 0; j < k; j++)
      if (c->vec_field[d][j] == f)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: %s_vector_fields names '%s' twice", what,
                        c->field[d][f].name);
    c->vec_field[d][k] = f;
    c->nvec[d] = k + 1;
    if (p[len] == '\0')
      break;
    p += len + 1;
  }
  return SLABFEED_OK;
}

slabfeed_status
sf__config_resolve_fields(sf__config *c,
                          const int64_t channels[2][SF_MAX_FIELDS],
                          const char *const (*where)[SF_MAX_FIELDS], sf__err *e)
{
  for (int d = 0; d < c->ndsets; d++) {
    const char *what = d == 0 ? "input" : "target";
    int64_t c0[SF_MAX_FIELDS + 1] = {0};
    for (int f = 0; f < c->nfields[d]; f++)
      c0[f + 1] = c0[f] + channels[d][f];
    const int64_t C = c0[c->nfields[d]];
    int *ng = d == 0 ? &c->pub.n_input_vectors : &c->pub.n_target_vectors;
    int(*g)[3] = d == 0 ? c->pub.input_vectors : c->pub.target_vectors;
    for (int k = 0; k < c->nvec[d]; k++) {
      const int f = c->vec_field[d][k];
      if (channels[d][f] != 3)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: %s_vector_fields: field '%s' of '%s' has "
                        "%lld channels; a vector field has 3 (along z,y,x)",
                        what, c->field[d][f].name,
                        where != NULL && where[d][f] != NULL ? where[d][f]
                                                             : c->path,
                        (long long)channels[d][f]);
      if (*ng >= SLABFEED_MAX_VECTORS)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: %s: more than %d vector groups with those "
                        "of %s_vector_fields",
                        what, SLABFEED_MAX_VECTORS, what);
      for (int a = 0; a < 3; a++)
        g[*ng][a] = (int)c0[f] + a;
      (*ng)++;
    }
    c->nvec[d] = 0;
    int *nn = d == 0 ? &c->pub.n_input_norm : &c->pub.n_target_norm;
    slabfeed_norm *norm = d == 0 ? c->pub.input_norm : c->pub.target_norm;
    /* By field only for a list of fields: one entry for a dataset of
     * several channels stays refused (check_norms). */
    if (*nn > 0 && c->nfields[d] > 1 && *nn == c->nfields[d] && *nn != C &&
        C <= SF_MAX_CHANNELS) {
      slabfeed_norm by_field[SF_MAX_FIELDS];
      memcpy(by_field, norm, sizeof(slabfeed_norm) * (size_t)*nn);
      for (int f = 0; f < c->nfields[d]; f++)
        for (int64_t k = c0[f]; k < c0[f + 1]; k++)
          norm[k] = by_field[f];
      *nn = (int)C;
    }
  }
  c->vec_text[0][0] = c->vec_text[1][0] = '\0';
  return SLABFEED_OK;
}

/* The names of params ("a,b , c": blanks around a name are dropped) into
 * c->param_name; refuses an empty name, a repeated one and too many, and a
 * params_norm of another count. */
static slabfeed_status parse_params(sf__config *c, sf__err *e)
{
  c->nparams = 0;
  const char *p = c->params;
  while (*p == ' ' || *p == '\t')
    p++;
  if (*p == '\0') {
    if (c->pub.n_params_norm > 0)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: params_norm (%d entries) without params",
                      c->pub.n_params_norm);
    return SLABFEED_OK;
  }
  for (int k = 0;; k++) {
    size_t len, a, b;
    sf__list_entry(p, &len, &a, &b);
    if (b == a)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: params '%s': name %d is empty (names separated "
                      "by commas)",
                      c->params, k);
    if (k >= SLABFEED_MAX_PARAMS)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: params '%s' names more than %d parameters",
                      c->params, SLABFEED_MAX_PARAMS);
    if (b - a >= SF_NAME_MAX || p[b - 1] == '/')
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: params: '%.*s' is not a parameter name (NAME "
                      "or GROUP/NAME, below %d bytes)",
                      (int)(b - a), p + a, SF_NAME_MAX);
    memcpy(c->param_name[k], p + a, b - a);
    c->param_name[k][b - a] = '\0';
    for (int j = 0; j < k; j++)
      if (strcmp(c->param_name[j], c->param_name[k]) == 0)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: params '%s' names '%s' twice", c->params,
                        c->param_name[k]);
    c->nparams = k + 1;
    if (p[len] == '\0')
      break;
    p += len + 1;
  }
  if (c->pub.n_params_norm != 0 && c->pub.n_params_norm != c->nparams)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: params_norm has %d entries for the %d "
                    "parameters of params '%s' (one per parameter, or none)",
                    c->pub.n_params_norm, c->nparams, c->params);
  return SLABFEED_OK;
}

/* The four deviation lists of the amplitude augmentation ("", "S" or
 * "S0,S1,..."; finite, >= 0) into c->naug and c->aug_sigma. */
static slabfeed_status parse_aug(sf__config *c, sf__err *e)
{
  static const char *const names[4] = {"aug_add", "aug_mul", "target_aug_add",
                                       "target_aug_mul"};
  const char *given[4] = {c->pub.aug_add, c->pub.aug_mul, c->pub.target_aug_add,
                          c->pub.target_aug_mul};
  c->aug = 0;
  for (int t = 0; t < 4; t++) {
    const int d = t / 2, j = t % 2;
    if (given[t] != NULL && strlen(given[t]) >= SF_LIST_MAX)
      return sf__fail(e, SLABFEED_ERR_ARG, "config: %s is limited to %d bytes",
                      names[t], SF_LIST_MAX - 1);
    snprintf(c->aug_text[t], sizeof c->aug_text[t], "%s",
             given[t] != NULL ? given[t] : "");
    c->naug[d][j] = 0;
    for (const char *p = c->aug_text[t]; *p != '\0';) {
      char *end;
      const double v = strtod(p, &end);
      if (end == p || (*end != ',' && *end != '\0') || !(v >= 0) || v > 1e30)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: %s '%s': entry %d is not a finite standard "
                        "deviation >= 0 (one number, or one per channel "
                        "separated by commas)",
                        names[t], c->aug_text[t], c->naug[d][j]);
      if (c->naug[d][j] >= SF_MAX_CHANNELS)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: %s has more than %d entries", names[t],
                        SF_MAX_CHANNELS);
      c->aug_sigma[d][j][c->naug[d][j]++] = (float)v;
      c->aug |= v > 0;
      p = *end == ',' ? end + 1 : end;
    }
  }
  if (c->aug && c->pub.tile > 0)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: amplitude augmentation (aug_add, aug_mul, "
                    "target_aug_*) is for training crops; a tiled pass (tile "
                    "%d) takes none",
                    c->pub.tile);
  if ((c->naug[1][0] > 0 || c->naug[1][1] > 0) && c->pub.target == NULL)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: target_aug_add/target_aug_mul without a target "
                    "dataset");
  return SLABFEED_OK;
}

float sf__config_aug_sigma(const sf__config *c, int d, int j, int ch)
{
  const int n = c->naug[d][j];
  return n == 0 ? 0.0f : c->aug_sigma[d][j][n == 1 ? 0 : ch];
}

slabfeed_status sf__config_import(sf__config *c, const slabfeed_config *user,
                                  sf__err *e)
{
  memset(c, 0, sizeof *c);
  if (user->size < SF_CONFIG_MIN)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: size %zu is too small (at least %zu): initialise "
                    "the struct with slabfeed_config_init",
                    user->size, (size_t)SF_CONFIG_MIN);
  slabfeed_config_init(&c->pub);
  const size_t n = user->size < sizeof c->pub ? user->size : sizeof c->pub;
  memcpy(&c->pub, user, n);
  c->pub.size = sizeof c->pub;
  /* A tiled pass reads crops of edge T + 2P (the tile and its context). */
  if (c->pub.tile > 0 &&
      (int64_t)c->pub.tile + 2 * (int64_t)c->pub.pad <= INT32_MAX)
    c->pub.crop[0] = c->pub.crop[1] = c->pub.crop[2] =
        (int64_t)c->pub.tile + 2 * (int64_t)c->pub.pad;
  if (check_options(&c->pub, e) != SLABFEED_OK)
    return e->status;
  /* Random crops with a pad: the input crop is the crop asked for (the
   * core) with P voxels of context on every side; the target is the core
   * unless padded too (target_pad). */
  memcpy(c->core, c->pub.crop, sizeof c->core);
  if (c->pub.tile == 0 && c->pub.pad > 0) {
    for (int a = 0; a < 3; a++)
      if (c->pub.crop[a] + 2 * (int64_t)c->pub.pad > INT32_MAX)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: crop %lld + 2 x pad %d is above 2^31",
                        (long long)c->pub.crop[a], c->pub.pad);
    for (int a = 0; a < 3; a++)
      c->pub.crop[a] += 2 * (int64_t)c->pub.pad;
    c->target_core = c->pub.target != NULL && !c->pub.target_pad;
  }
  snprintf(c->path, sizeof c->path, "%s", c->pub.path);
  snprintf(c->input, sizeof c->input, "%s", c->pub.input);
  c->pub.path = c->path;
  c->pub.input = c->input;
  if (c->pub.target != NULL) {
    snprintf(c->target, sizeof c->target, "%s", c->pub.target);
    c->pub.target = c->target;
  }
  snprintf(c->weights, sizeof c->weights, "%s",
           c->pub.volume_weights != NULL ? c->pub.volume_weights : "");
  snprintf(c->holdout_volumes, sizeof c->holdout_volumes, "%s",
           c->pub.holdout_volumes != NULL ? c->pub.holdout_volumes : "");
  c->pub.volume_weights = c->weights;
  c->pub.holdout_volumes = c->holdout_volumes;
  snprintf(c->params, sizeof c->params, "%s",
           c->pub.params != NULL ? c->pub.params : "");
  c->pub.params = c->params;
  if (parse_params(c, e) != SLABFEED_OK || parse_aug(c, e) != SLABFEED_OK)
    return e->status;
  c->pub.aug_add = c->aug_text[0];
  c->pub.aug_mul = c->aug_text[1];
  c->pub.target_aug_add = c->aug_text[2];
  c->pub.target_aug_mul = c->aug_text[3];
  c->ndsets = c->pub.target != NULL ? 2 : 1;
  for (int d = 0; d < c->ndsets; d++)
    if (parse_fields(c, d, e) != SLABFEED_OK)
      return e->status;
  for (int d = 0; d < 2; d++) {
    const char *t =
        d == 0 ? c->pub.input_vector_fields : c->pub.target_vector_fields;
    snprintf(c->vec_text[d], sizeof c->vec_text[d], "%s", t ? t : "");
    if (parse_vector_fields(c, d, e) != SLABFEED_OK)
      return e->status;
  }
  c->pub.input_vector_fields = c->vec_text[0];
  c->pub.target_vector_fields = c->vec_text[1];
  c->rank_per_node = c->pub.rank_per_node;
  if (c->rank_per_node < 0) {
    /* The environment takes the option's own text form (1/0, yes/no,
     * true/false, on/off), checked as strictly. */
    const char *env = getenv(SLABFEED_ENV_RANK_PER_NODE);
    slabfeed_config t;
    slabfeed_config_init(&t);
    char why[256];
    if (env != NULL && env[0] != '\0' &&
        (slabfeed_config_set(&t, "rank_per_node", env, why, sizeof why) !=
             SLABFEED_OK ||
         t.rank_per_node < 0))
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "%s='%s' is not 1 or 0 (also yes/no, true/false, "
                      "on/off)",
                      SLABFEED_ENV_RANK_PER_NODE, env);
    c->rank_per_node = env != NULL && env[0] != '\0' && t.rank_per_node == 1;
  }
  c->group_nodes = c->pub.group_nodes;
  const char *g = getenv(SLABFEED_ENV_GROUP_NODES);
  if (c->group_nodes == 0 && g != NULL && g[0] != '\0') {
    char *end;
    const long v = strtol(g, &end, 10);
    if (*end != '\0' || v < -1 || v > INT_MAX)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "%s='%s' is not -1, 0 or a node count",
                      SLABFEED_ENV_GROUP_NODES, g);
    c->group_nodes = (int)v;
  }
  const char *how = getenv("SLABFEED_REMOTE");
  if (how != NULL && how[0] != '\0' && strcmp(how, "get") != 0 &&
      strcmp(how, "send") != 0)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "SLABFEED_REMOTE='%s' is not 'send' or 'get'", how);
  c->remote_get = how != NULL && strcmp(how, "get") == 0;
  return SLABFEED_OK;
}

/* Boxes with their extents resolved (0: the whole axis). */
static void resolve_boxes(int n, const int64_t (*in)[6], const int64_t shape[3],
                          int64_t out[][6])
{
  for (int r = 0; r < n; r++)
    for (int a = 0; a < 3; a++) {
      out[r][a] = in[r][a];
      out[r][3 + a] = in[r][3 + a] == 0 ? shape[a] : in[r][3 + a];
    }
}

void sf__config_holdout(const sf__config *c, const int64_t shape[3],
                        int64_t boxes[][6])
{
  resolve_boxes(c->pub.n_holdout, (const int64_t(*)[6])c->pub.holdout, shape,
                boxes);
}

void sf__config_region(const sf__config *c, const int64_t shape[3],
                       int64_t box[6])
{
  const int64_t whole[1][6] = {{0, 0, 0, 0, 0, 0}};
  int64_t out[1][6];
  resolve_boxes(
      1, c->pub.n_region > 0 ? (const int64_t(*)[6])c->pub.region : whole,
      shape, out);
  memcpy(box, out[0], sizeof out[0]);
}

int64_t sf__config_coarsen(const sf__config *c)
{
  return c->pub.coarsen_factor > 1 ? c->pub.coarsen_factor : 1;
}

int64_t sf__config_planes_pad(const sf__config *c)
{
  const int64_t g = sf__config_coarsen(c);
  return ((int64_t)c->pub.pad + g - 1) / g;
}

void sf__config_planes_crop(const sf__config *c, int64_t crop[3])
{
  const int64_t g = sf__config_coarsen(c);
  /* A pass's core is the tile (its crop, tile + 2 pad, was set at
   * resolve); random crops keep their core in c->core. */
  for (int a = 0; a < 3; a++) {
    const int64_t core = c->pub.tile > 0 ? c->pub.tile : c->core[a];
    crop[a] = g == 1 ? c->pub.crop[a] : core / g + 2 * sf__config_planes_pad(c);
  }
}

const char *sf__config_dataset(const sf__config *c, int d)
{
  return d == 0 ? c->input : c->target;
}

/* FNV-1a over the options, so that ranks can compare them. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

static uint64_t config_hash(const sf__config *cc)
{
  const slabfeed_config *c = &cc->pub;
  uint64_t h = 0xcbf29ce484222325ULL;
  h = fnv(h, cc->path, strlen(cc->path) + 1);
  h = fnv(h, cc->input, strlen(cc->input) + 1);
  h = fnv(h, cc->ndsets == 2 ? cc->target : "", strlen(cc->target) + 1);
  h = fnv(h, cc->weights, strlen(cc->weights) + 1);
  h = fnv(h, cc->holdout_volumes, strlen(cc->holdout_volumes) + 1);
  const int64_t nums[] = {c->layout,
                          c->crop[0],
                          c->crop[1],
                          c->crop[2],
                          c->batch,
                          (int64_t)c->seed,
                          c->symmetries,
                          c->dtype,
                          c->out_layout,
                          c->prefetch,
                          c->halo,
                          c->n_input_vectors,
                          c->n_target_vectors,
                          (int64_t)c->steps_per_epoch,
                          c->device == -1 ? -1 : 0,
                          cc->rank_per_node,
                          cc->ndsets,
                          cc->group_nodes,
                          (int64_t)c->node_memory,
                          c->locality,
                          cc->remote_get};
  h = fnv(h, nums, sizeof nums);
  const int pass[] = {c->tile, c->pad, c->n_region, c->pass_symmetry,
                      c->scale_factor};
  h = fnv(h, pass, sizeof pass);
  h = fnv(h, c->region, sizeof(int64_t) * 6 * (size_t)c->n_region);
  h = fnv(h, &c->n_holdout, sizeof c->n_holdout);
  h = fnv(h, c->holdout, sizeof(int64_t) * 6 * (size_t)c->n_holdout);
  h = fnv(h, c->input_vectors, sizeof(int) * 3 * (size_t)c->n_input_vectors);
  h = fnv(h, c->target_vectors, sizeof(int) * 3 * (size_t)c->n_target_vectors);
  /* Normalisations: every field of every entry, bit for bit. */
  const int norms[] = {c->n_input_norm, c->n_target_norm};
  h = fnv(h, norms, sizeof norms);
  h = fnv(h, c->input_norm, sizeof(slabfeed_norm) * (size_t)c->n_input_norm);
  h = fnv(h, c->target_norm, sizeof(slabfeed_norm) * (size_t)c->n_target_norm);
  h = fnv(h, cc->params, strlen(cc->params) + 1);
  h = fnv(h, &c->n_params_norm, sizeof c->n_params_norm);
  for (int t = 0; t < 4; t++)
    h = fnv(h, cc->aug_text[t], strlen(cc->aug_text[t]) + 1);
  h = fnv(h, &c->aug_share, sizeof c->aug_share);
  for (int t = 0; t < 2; t++)
    h = fnv(h, cc->vec_text[t], strlen(cc->vec_text[t]) + 1);
  return fnv(h, c->params_norm,
             sizeof(slabfeed_norm) * (size_t)c->n_params_norm);
}

slabfeed_status sf__config_agree(MPI_Comm comm, const sf__config *c, sf__err *e)
{
  /* A failure found earlier (say, a bad option on one rank) is reported as
   * it is, not as a difference of options. */
  if (sf__agree(comm, e) != SLABFEED_OK)
    return e->status;
  /* One reduction gives the minimum and the maximum of the hashes. */
  const uint64_t h = config_hash(c);
  uint64_t both[2] = {h, ~h}, ext[2];
  SF_MPI_GOTO(MPI_Allreduce(both, ext, 2, MPI_UINT64_T, MPI_MIN, comm), e, out);
  if (ext[0] != h || ~ext[1] != h)
    sf__fail(
        e, SLABFEED_ERR_ARG,
        "config: the options differ between ranks (all ranks must pass "
        "the same slabfeed_config, device aside, and see the same %s, %s and "
        "SLABFEED_REMOTE)",
        SLABFEED_ENV_RANK_PER_NODE, SLABFEED_ENV_GROUP_NODES);
out:
  return sf__agree(comm, e);
}

/* Vector groups of a dataset must name distinct channels in [0, C). */
static slabfeed_status check_vectors(const char *what, int n, const int (*g)[3],
                                     int64_t C, sf__err *e)
{
  int used[SF_MAX_CHANNELS] = {0};
  for (int v = 0; v < n; v++)
    for (int a = 0; a < 3; a++) {
      const int k = g[v][a];
      if (k < 0 || k >= C)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: %s vector group %d names channel %d, but the "
                        "dataset has channels 0..%lld",
                        what, v, k, (long long)C - 1);
      if (used[k]++)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: %s vector channel %d is used twice", what, k);
    }
  return SLABFEED_OK;
}

/* A dataset's normalisation: none, or one entry per channel; the channels
 * of a vector group share one scale and have no shift and no log (the
 * vector is rotated after the normalisation, which must commute with it:
 * (R v) / s = R (v / s) holds for one s and no offset only). */
static slabfeed_status check_norms(const char *what, const char *option,
                                   const char *dataset, int n,
                                   const slabfeed_norm *norm, int64_t C,
                                   int ngroups, const int (*g)[3], sf__err *e)
{
  if (n == 0)
    return SLABFEED_OK;
  if (n != C)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "config: %s has %d entries but %s dataset '%s' has %lld "
                    "channels: give one entry per channel (or one per field "
                    "of a list of fields, or none)",
                    option, n, what, dataset, (long long)C);
  for (int v = 0; v < ngroups; v++)
    for (int a = 0; a < 3; a++) {
      const int k = g[v][a];
      const slabfeed_norm *x = &norm[k], *first = &norm[g[v][0]];
      char why[96] = "";
      if (x->log)
        snprintf(why, sizeof why, "a log");
      else if (x->shift != 0.0f)
        snprintf(why, sizeof why, "shift %g", (double)x->shift);
      else if (x->scale != first->scale)
        snprintf(why, sizeof why, "scale %g but channel %d has %g",
                 (double)x->scale, g[v][0], (double)first->scale);
      if (why[0] != '\0')
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: %s: channel %d of %s vector group %d "
                        "(%d,%d,%d) has %s; the channels of a vector group "
                        "need one scale, shift 0 and no log (rotation would "
                        "not commute with normalisation)",
                        option, k, what, v, g[v][0], g[v][1], g[v][2], why);
    }
  return SLABFEED_OK;
}

static const char axis_name[] = "zyx";

/* A box of the options (holdout or pass region) against the volume. */
static slabfeed_status check_box(const sf__config *c, const char *what, int r,
                                 const int64_t b[6], const int64_t shape[3],
                                 sf__err *e)
{
  for (int a = 0; a < 3; a++)
    if (b[a] >= shape[a] || b[3 + a] > shape[a])
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "%s %d (%lld,%lld,%lld extent %lld,%lld,%lld) is "
                      "outside the %lldx%lldx%lld box of '%s' on axis %c: "
                      "origins lie in [0, N), extents in [1, N] (0: the "
                      "whole axis)",
                      what, r, (long long)b[0], (long long)b[1],
                      (long long)b[2], (long long)b[3], (long long)b[4],
                      (long long)b[5], (long long)shape[0], (long long)shape[1],
                      (long long)shape[2], c->path, axis_name[a]);
  return SLABFEED_OK;
}

/* A tiled pass: tiles no larger than the region, input crops no larger
 * than the box. */
static slabfeed_status check_tiles(const sf__config *c, const int64_t shape[3],
                                   sf__err *e)
{
  const slabfeed_config *p = &c->pub;
  int64_t R[6];
  sf__config_region(c, shape, R);
  for (int a = 0; a < 3; a++) {
    if (p->tile > R[3 + a])
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "tile %d is larger than the pass region's extent %lld "
                      "on axis %c (use a smaller tile or a larger region)",
                      p->tile, (long long)R[3 + a], axis_name[a]);
    if ((int64_t)p->tile + 2 * (int64_t)p->pad > shape[a])
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "tile %d + 2 x pad %d = %lld is larger than the box's "
                      "%lld voxels on axis %c of '%s'",
                      p->tile, p->pad,
                      (long long)p->tile + 2 * (long long)p->pad,
                      (long long)shape[a], axis_name[a], c->path);
  }
  return SLABFEED_OK;
}

/* A coarser target (coarsen_factor g > 1) over an input box `shape`: the
 * pass region in whole target voxels, and the crop on the target's grid
 * (the core / g with ceil(pad / g) target voxels of context on each side:
 * the planes the store gathers, sf__config_planes) inside the box. */
static slabfeed_status check_coarse_geometry(const sf__config *c,
                                             const int64_t shape[3], sf__err *e)
{
  const slabfeed_config *p = &c->pub;
  const int64_t g = p->coarsen_factor;
  int64_t R[6], pc[3];
  sf__config_region(c, shape, R);
  for (int a = 0; p->tile > 0 && a < 6; a++)
    if (R[a] % g != 0)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: pass region %lld,%lld,%lld+%lldx%lldx%lld is "
                      "not in whole voxels of the target's grid: its origin "
                      "and extents must be multiples of coarsen_factor %lld",
                      (long long)R[0], (long long)R[1], (long long)R[2],
                      (long long)R[3], (long long)R[4], (long long)R[5],
                      (long long)g);
  sf__config_planes_crop(c, pc);
  for (int a = 0; a < 3; a++)
    if (pc[a] * g > shape[a])
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: crop %lld + 2 x pad %d on axis %c needs %lld "
                      "voxels of the target's grid (the core / %lld and "
                      "ceil(pad / %lld) on each side), more than the box's "
                      "%lld in '%s'",
                      (long long)(p->tile > 0 ? p->tile : c->core[a]), p->pad,
                      axis_name[a], (long long)pc[a], (long long)g,
                      (long long)g, (long long)(shape[a] / g), c->path);
  return SLABFEED_OK;
}

/* Dataset d's augmentation lists against its C channels: one entry or C;
 * the channels of a vector group take no offset and one factor's
 * deviation (a scalar times a vector commutes with rotation, an offset
 * does not). */
static slabfeed_status check_aug(const sf__config *c, int d, int64_t C,
                                 int ngroups, const int (*g)[3], sf__err *e)
{
  static const char *const names[2][2] = {{"aug_add", "aug_mul"},
                                          {"target_aug_add", "target_aug_mul"}};
  for (int j = 0; j < 2; j++) {
    const int n = c->naug[d][j];
    if (n > 1 && n != C)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: %s has %d entries but %s dataset '%s' has "
                      "%lld channels: give one number, or one per channel",
                      names[d][j], n, d == 0 ? "input" : "target",
                      sf__config_dataset(c, d), (long long)C);
  }
  for (int v = 0; v < ngroups; v++)
    for (int a = 0; a < 3; a++) {
      const int k = g[v][a];
      const float add = sf__config_aug_sigma(c, d, 0, k);
      const float mul = sf__config_aug_sigma(c, d, 1, k);
      const float first = sf__config_aug_sigma(c, d, 1, g[v][0]);
      if (add != 0.0f || mul != first)
        return sf__fail(
            e, SLABFEED_ERR_ARG,
            "config: channel %d of %s vector group %d (%d,%d,%d) has %s; the "
            "channels of a vector group take no offset and one factor "
            "(%s 0 on them, %s equal)",
            k, d == 0 ? "input" : "target", v, g[v][0], g[v][1], g[v][2],
            add != 0.0f ? "an offset" : "another factor's deviation",
            names[d][0], names[d][1]);
    }
  return SLABFEED_OK;
}

slabfeed_status sf__config_check_data(const sf__config *c,
                                      const slabfeed_dataset_info info[],
                                      sf__err *e)
{
  const slabfeed_config *p = &c->pub;
  const int64_t f = p->scale_factor > 1 ? p->scale_factor : 1;
  const int64_t g = p->coarsen_factor > 1 ? p->coarsen_factor : 1;
  if (c->ndsets == 2)
    for (int a = 0; a < 3; a++)
      if (f * info[0].shape[a] != g * info[1].shape[a]) {
        char want[200] = "both must cover the same box";
        const int64_t r = info[1].shape[0] / info[0].shape[0];
        const int64_t q = info[0].shape[0] / info[1].shape[0];
        if (f == 1 && g == 1 && r > 1 && r <= 16 &&
            r * info[0].shape[0] == info[1].shape[0] &&
            r * info[0].shape[1] == info[1].shape[1] &&
            r * info[0].shape[2] == info[1].shape[2])
          snprintf(want, sizeof want,
                   "both must cover the same box (the target is %lld x the "
                   "input's on every axis: for a super-resolution pair set "
                   "scale_factor %lld, --scale-factor %lld)",
                   (long long)r, (long long)r, (long long)r);
        else if (f == 1 && g == 1 && q > 1 && q <= 16 &&
                 q * info[1].shape[0] == info[0].shape[0] &&
                 q * info[1].shape[1] == info[0].shape[1] &&
                 q * info[1].shape[2] == info[0].shape[2])
          snprintf(want, sizeof want,
                   "both must cover the same box (the input is %lld x the "
                   "target's on every axis: for a coarser target set "
                   "coarsen_factor %lld, --coarsen-factor %lld)",
                   (long long)q, (long long)q, (long long)q);
        else if (f > 1)
          snprintf(want, sizeof want,
                   "scale_factor %lld needs a target of %lldx%lldx%lld",
                   (long long)f, (long long)(f * info[0].shape[0]),
                   (long long)(f * info[0].shape[1]),
                   (long long)(f * info[0].shape[2]));
        else if (g > 1 &&
                 (info[0].shape[0] % g != 0 || info[0].shape[1] % g != 0 ||
                  info[0].shape[2] % g != 0))
          snprintf(want, sizeof want,
                   "coarsen_factor %lld needs an input box that is a "
                   "multiple of %lld on every axis",
                   (long long)g, (long long)g);
        else if (g > 1)
          snprintf(want, sizeof want,
                   "coarsen_factor %lld needs a target of %lldx%lldx%lld",
                   (long long)g, (long long)(info[0].shape[0] / g),
                   (long long)(info[0].shape[1] / g),
                   (long long)(info[0].shape[2] / g));
        return sf__fail(
            e, SLABFEED_ERR_FORMAT,
            "input '%s' has box %lldx%lldx%lld but target '%s' has "
            "%lldx%lldx%lld in '%s': %s",
            c->input, (long long)info[0].shape[0], (long long)info[0].shape[1],
            (long long)info[0].shape[2], c->target, (long long)info[1].shape[0],
            (long long)info[1].shape[1], (long long)info[1].shape[2], c->path,
            want);
      }
  for (int d = 0; d < c->ndsets; d++)
    if (info[d].channels > SF_MAX_CHANNELS)
      return sf__fail(e, SLABFEED_ERR_FORMAT,
                      "dataset '%s' has %lld channels; at most %d",
                      sf__config_dataset(c, d), (long long)info[d].channels,
                      SF_MAX_CHANNELS);
  if (p->n_region > 0 &&
      check_box(c, "pass region", 0, p->region[0], info[0].shape, e))
    return e->status;
  if (p->tile > 0 && check_tiles(c, info[0].shape, e) != SLABFEED_OK)
    return e->status;
  for (int a = 0; a < 3; a++)
    if (p->tile == 0 && p->pad > 0 && p->crop[a] > info[0].shape[a])
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: crop %lld + 2 x pad %d = %lld (the input crop) "
                      "is larger than the box's %lld voxels on axis %c of "
                      "'%s' in '%s'",
                      (long long)c->core[a], p->pad, (long long)p->crop[a],
                      (long long)info[0].shape[a], axis_name[a], c->input,
                      c->path);
  for (int a = 0; a < 3; a++)
    if (p->crop[a] > info[0].shape[a])
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: crop %lldx%lldx%lld is larger than the box "
                      "%lldx%lldx%lld of '%s' in '%s'",
                      (long long)p->crop[0], (long long)p->crop[1],
                      (long long)p->crop[2], (long long)info[0].shape[0],
                      (long long)info[0].shape[1], (long long)info[0].shape[2],
                      c->input, c->path);
  for (int r = 0; r < p->n_holdout; r++)
    if (check_box(c, "holdout region", r, p->holdout[r], info[0].shape, e))
      return e->status;
  if (g > 1 && check_coarse_geometry(c, info[0].shape, e) != SLABFEED_OK)
    return e->status;
  if (check_vectors("input", p->n_input_vectors,
                    (const int(*)[3])p->input_vectors, info[0].channels,
                    e) != SLABFEED_OK ||
      check_norms("input", "input_norm", c->input, p->n_input_norm,
                  p->input_norm, info[0].channels, p->n_input_vectors,
                  (const int(*)[3])p->input_vectors, e) != SLABFEED_OK)
    return e->status;
  if (check_aug(c, 0, info[0].channels, p->n_input_vectors,
                (const int(*)[3])p->input_vectors, e) != SLABFEED_OK)
    return e->status;
  if (c->ndsets == 2 &&
      check_vectors("target", p->n_target_vectors,
                    (const int(*)[3])p->target_vectors, info[1].channels,
                    e) == SLABFEED_OK &&
      check_norms("target", "target_norm", c->target, p->n_target_norm,
                  p->target_norm, info[1].channels, p->n_target_vectors,
                  (const int(*)[3])p->target_vectors, e) == SLABFEED_OK)
    check_aug(c, 1, info[1].channels, p->n_target_vectors,
              (const int(*)[3])p->target_vectors, e);
  return e->status;
}

const slabfeed_norm *sf__config_norm(const sf__config *c, int d, int *n)
{
  *n = d == 0 ? c->pub.n_input_norm : c->pub.n_target_norm;
  return d == 0 ? c->pub.input_norm : c->pub.target_norm;
}
