/* Loader options: defaults, the import of a caller's (sized) struct, the
 * checks of the options alone and against the file's datasets, and the
 * agreement of all ranks on everything that shapes the sequence of
 * collective calls. */
#ifndef SF_CONFIG_H
#define SF_CONFIG_H

#include <string.h>

#include "common/errors.h"
#include "slabfeed_tools.h"

#define SF_PATH_MAX 65536 /* the path spec: one path, or many volumes */
#define SF_LIST_MAX 4096  /* volume_weights, holdout_volumes */
#define SF_NAME_MAX 256
#define SF_MAX_CHANNELS 64

#define SF_MAX_FIELDS 16 /* fields (datasets) of the input or the target */

/* One field of the input or the target (0.7): a dataset of the volume's
 * own file, or of files of its own (spec: a path spec as `path`, one file
 * per volume in the same order). */
typedef struct sf__field {
  char name[SF_NAME_MAX]; /* the dataset */
  char spec[SF_LIST_MAX]; /* its files; "" the volume's own */
} sf__field;

/* The options of one loader, owned by it. */
typedef struct sf__config {
  slabfeed_config pub; /* this library's full struct; strings point below */
  char path[SF_PATH_MAX], input[SF_LIST_MAX], target[SF_LIST_MAX];
  /* input and target as lists of fields, their channels concatenated in
   * order: "density,velocity", "velocity@/data/vel_*.h5" */
  int nfields[2];
  sf__field field[2][SF_MAX_FIELDS];
  /* input_vector_fields, target_vector_fields: the text, and the fields
   * named (indices into field[d]) until sf__config_resolve_fields makes
   * them vector groups (nvec 0 after it). */
  char vec_text[2][SF_LIST_MAX];
  int nvec[2];
  int vec_field[2][SF_MAX_FIELDS];
  char weights[SF_LIST_MAX], holdout_volumes[SF_LIST_MAX];
  char params[SF_LIST_MAX];
  int nparams; /* K: the names of params, parsed */
  char param_name[SLABFEED_MAX_PARAMS][SF_NAME_MAX];
  /* Amplitude augmentation, parsed: aug_text holds aug_add, aug_mul,
   * target_aug_add, target_aug_mul; naug[d][j] the entries given for
   * dataset d (0 input, 1 target) and j (0 add, 1 mul): 0, 1 (every
   * channel) or one per channel, in aug_sigma[d][j]. */
  char aug_text[4][SF_LIST_MAX];
  int naug[2][2];
  float aug_sigma[2][2][SF_MAX_CHANNELS];
  int aug; /* any deviation given */
  /* Training pads (0.7): random crops with pad P > 0 gather the input crop
   * of edge crop + 2P (pub.crop holds it, as for a tiled pass) and, unless
   * target_pad, the target's core of edge `core` (the crop asked for) at
   * offset P inside it. */
  int64_t core[3];
  int target_core;   /* the target is the core (random crops, pad, target) */
  int ndsets;        /* 1, or 2 with a target */
  int rank_per_node; /* resolved: the option, else the environment */
  int group_nodes;   /* resolved: the option when not 0, else the
                        environment (SLABFEED_GROUP_NODES), else 0 */
  int remote_get;    /* resolved SLABFEED_REMOTE: 1 "get" (MPI_Rget per
                        piece), 0 "send" (default; fetch.h) */
} sf__config;

/* The entry of a comma-separated list that starts at p: its length up to
 * the comma (or the end) into *len and its text without the blanks around
 * it as [*a, *b) (offsets from p). */
static inline void sf__list_entry(const char *p, size_t *len, size_t *a,
                                  size_t *b)
{
  *len = strcspn(p, ",");
  *a = 0;
  *b = *len;
  while (*a < *b && (p[*a] == ' ' || p[*a] == '\t'))
    (*a)++;
  while (*b > *a && (p[*b - 1] == ' ' || p[*b - 1] == '\t'))
    (*b)--;
}

/* Copies the caller's struct (its size first; missing fields take their
 * defaults) into *c and checks the options alone (no file needed). */
slabfeed_status sf__config_import(sf__config *c, const slabfeed_config *user,
                                  sf__err *e);

/* Collective over comm. Fails on every rank unless all ranks hold the same
 * options (device aside), rank_per_node as resolved from the environment
 * included: it decides which communicators the store creates. */
slabfeed_status sf__config_agree(MPI_Comm comm, const sf__config *c,
                                 sf__err *e);

/* Checks the options against the datasets found in the file (info[0] the
 * input, info[1] the target): same box, channel count, crop inside the
 * box, vector groups naming distinct channels, normalisations of one entry
 * per channel whose vector groups share a scale and have no shift and no
 * log. Local. */
slabfeed_status sf__config_check_data(const sf__config *c,
                                      const slabfeed_dataset_info info[],
                                      sf__err *e);

/* Local. The options given by field, made options by channel once the
 * fields' channel counts are known (channels[d][f]: field f of dataset d,
 * 0 input, 1 target): each field of *_vector_fields (3 channels, else
 * refused naming it) becomes the vector group of its channels, after the
 * groups given by channel; a normalisation of one entry per field (when
 * that is not also one per channel) becomes the entry of each channel of
 * its field (only for a list of fields: one entry for a dataset of several
 * channels is refused later). where[d][f] (where not NULL): the file of
 * field f, for the messages. Idempotent: afterwards the options are by
 * channel only. */
slabfeed_status sf__config_resolve_fields(
    sf__config *c, const int64_t channels[2][SF_MAX_FIELDS],
    const char *const (*where)[SF_MAX_FIELDS], sf__err *e);

/* The held-out regions with their extents resolved for a box of `shape`
 * (an extent of 0 is the whole axis) into boxes[n_holdout][6]. */
void sf__config_holdout(const sf__config *c, const int64_t shape[3],
                        int64_t boxes[][6]);

/* Grids of different resolution. The placement's planes are on the
 * coarsest grid: the input's, or with a coarser target (coarsen_factor
 * g > 1) the target's, g times coarser than the input's. The factor g (1
 * without a coarser target); the context pad on the planes' grid,
 * ceil(pad / g); and the crop the store gathers on the planes' grid: the
 * input crop itself at g 1, else the core / g with that pad on each side
 * (the input crop is g x it, cut down to core + 2 pad around its centre). */
int64_t sf__config_coarsen(const sf__config *c);
int64_t sf__config_planes_pad(const sf__config *c);
void sf__config_planes_crop(const sf__config *c, int64_t crop[3]);

/* The region of a tiled pass, resolved (the whole box when none). */
void sf__config_region(const sf__config *c, const int64_t shape[3],
                       int64_t box[6]);

/* The deviation of augmentation j (0 add, 1 mul) of channel c of dataset
 * d: 0 when none is given. */
float sf__config_aug_sigma(const sf__config *c, int d, int j, int ch);

/* Name of dataset d (0 input, 1 target). */
const char *sf__config_dataset(const sf__config *c, int d);

/* The normalisation of dataset d (0 input, 1 target): *n entries, 0 (none)
 * or the dataset's channel count once sf__config_check_data passed. */
const slabfeed_norm *sf__config_norm(const sf__config *c, int d, int *n);

#endif
