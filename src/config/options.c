#include "config/options.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Enum fields are read and written as int. */
_Static_assert(sizeof(slabfeed_file_layout) == sizeof(int), "enum size");
_Static_assert(sizeof(slabfeed_symmetries) == sizeof(int), "enum size");
_Static_assert(sizeof(slabfeed_dtype) == sizeof(int), "enum size");
_Static_assert(sizeof(slabfeed_out_layout) == sizeof(int), "enum size");

#define FIELD(f)                                                               \
  .at = offsetof(slabfeed_config, f), .width = sizeof(((slabfeed_config *)0)->f)

/* The table. A new option is one row here, a field in slabfeed_config
 * (at its end: sized structs) and the code that uses it. */
const sf__option sf__options[] = {
    {{.name = "path",
      .flag = "file",
      .kind = SLABFEED_OPTION_STRING,
      .default_value = "",
      .metavar = "F",
      .help = "the HDF5 file holding the volume; or several volumes: "
              "entries separated by newlines (the flag repeated), each a "
              "path, a glob pattern or @MANIFEST (paths, one per line, "
              "relative to the manifest's folder unless absolute)",
      .flags = SLABFEED_OPTION_REQUIRED},
     FIELD(path)},
    {{.name = "input",
      .flag = "input",
      .kind = SLABFEED_OPTION_STRING,
      .default_value = "",
      .metavar = "NAME",
      .help = "input dataset; or fields, their channels concatenated: "
              "datasets of the volume's file (3-D scalar or 4-D) or "
              "DATASET@FILES of files of their own (one per volume, a path, "
              "pattern or @manifest), separated by commas",
      .flags = SLABFEED_OPTION_REQUIRED},
     FIELD(input)},
    {{.name = "target",
      .flag = "target",
      .kind = SLABFEED_OPTION_STRING,
      .default_value = "",
      .metavar = "NAME",
      .help = "target dataset, or fields (as input); none when empty"},
     FIELD(target)},
    {{.name = "layout",
      .flag = "layout",
      .kind = SLABFEED_OPTION_CHOICE,
      .choices = "auto|cf|cl",
      .default_value = "auto",
      .metavar = "auto|cf|cl",
      .help = "file layout of both datasets: decided from the shape, "
              "channels-first (C,Z,Y,X) or channels-last (Z,Y,X,C)"},
     FIELD(layout)},
    {{.name = "crop",
      .flag = "crop",
      .kind = SLABFEED_OPTION_EDGE,
      .min = 1,
      .max = INT32_MAX,
      .default_value = "64",
      .metavar = "C|Z,Y,X",
      .help = "crop edge in voxels: one edge for a cube, or z,y,x"},
     FIELD(crop)},
    {{.name = "batch",
      .flag = "batch",
      .kind = SLABFEED_OPTION_INT,
      .min = 1,
      .max = INT32_MAX,
      .default_value = "1",
      .metavar = "B",
      .help = "samples per rank and step (the local batch)"},
     FIELD(batch)},
    {{.name = "seed",
      .flag = "seed",
      .kind = SLABFEED_OPTION_UINT64,
      .default_value = "0",
      .metavar = "S",
      .help = "seed of the sample stream"},
     FIELD(seed)},
    {{.name = "symmetries",
      .flag = "symmetries",
      .kind = SLABFEED_OPTION_CHOICE,
      .choices = "all|rotations|none",
      .default_value = "all",
      .metavar = "all|rotations|none",
      .help = "cube symmetries drawn: all 48, the 24 proper rotations, or "
              "the identity only"},
     FIELD(symmetries)},
    {{.name = "input_vectors",
      .flag = "input-vector",
      .kind = SLABFEED_OPTION_VECTORS,
      .max = SLABFEED_MAX_VECTORS,
      .default_value = "",
      .metavar = "K0,K1,K2",
      .help = "input channels of one vector (components along z,y,x), "
              "rotated as a vector; repeatable"},
     FIELD(input_vectors),
     .count_at = offsetof(slabfeed_config, n_input_vectors)},
    {{.name = "target_vectors",
      .flag = "target-vector",
      .kind = SLABFEED_OPTION_VECTORS,
      .max = SLABFEED_MAX_VECTORS,
      .default_value = "",
      .metavar = "K0,K1,K2",
      .help = "target channels of one vector; repeatable"},
     FIELD(target_vectors),
     .count_at = offsetof(slabfeed_config, n_target_vectors)},
    {{.name = "dtype",
      .flag = "dtype",
      .kind = SLABFEED_OPTION_CHOICE,
      .choices = "f32|f16|bf16",
      .aliases = "float32|float16|bfloat16",
      .default_value = "f32",
      .metavar = "f32|f16|bf16",
      .help = "element type of the batches (f16 and bf16 round to nearest "
              "even)"},
     FIELD(dtype)},
    {{.name = "out_layout",
      .flag = "out-layout",
      .kind = SLABFEED_OPTION_CHOICE,
      .choices = "ncdhw|ndhwc",
      .default_value = "ncdhw",
      .metavar = "ncdhw|ndhwc",
      .help = "memory layout of the batches"},
     FIELD(out_layout)},
    {{.name = "device",
      .flag = "device",
      .kind = SLABFEED_OPTION_INT,
      .min = -2,
      .max = INT32_MAX,
      .choices = "local=-2",
      .default_value = "-1",
      .metavar = "N|local",
      .help = "CUDA device of the batches, -1 for host batches, or local: "
              "the node-local rank modulo the visible GPUs"},
     FIELD(device)},
    {{.name = "prefetch",
      .flag = "prefetch",
      .kind = SLABFEED_OPTION_INT,
      .min = 1,
      .max = 64,
      .default_value = "2",
      .metavar = "K",
      .help = "batches in the ring (produced ahead)"},
     FIELD(prefetch)},
    {{.name = "halo",
      .flag = "halo",
      .kind = SLABFEED_OPTION_INT,
      .min = 0,
      .max = INT32_MAX,
      .default_value = "0",
      .metavar = "H",
      .help = "z-planes copied on each side of a rank's slab"},
     FIELD(halo)},
    {{.name = "rank_per_node",
      .flag = "rank-per-node",
      .kind = SLABFEED_OPTION_SWITCH,
      .min = -1,
      .max = 1,
      .default_value = "auto",
      .metavar = "auto|1|0",
      .help = "treat every rank as its own node, to test the transfers "
              "between nodes on one machine (with group_nodes -1, pieces of "
              "other ranks then move over MPI; auto: from the environment "
              "variable " SLABFEED_ENV_RANK_PER_NODE ")"},
     FIELD(rank_per_node)},
    {{.name = "steps_per_epoch",
      .flag = "steps-per-epoch",
      .kind = SLABFEED_OPTION_UINT64,
      .default_value = "0",
      .metavar = "N",
      .help = "steps of one epoch (0: enough crops to cover the box once)"},
     FIELD(steps_per_epoch)},
    {{.name = "group_nodes",
      .flag = "group-nodes",
      .kind = SLABFEED_OPTION_INT,
      .min = -1,
      .max = INT32_MAX,
      .default_value = "0",
      .metavar = "G",
      .help = "nodes per replication group: 0 the smallest group that fits "
              "the node memory budget (or " SLABFEED_ENV_GROUP_NODES
              " when set), -1 all nodes, or G"},
     FIELD(group_nodes)},
    {{.name = "node_memory",
      .flag = "node-memory",
      .kind = SLABFEED_OPTION_SIZE,
      .default_value = "0",
      .metavar = "BYTES",
      .help = "slab store one node may hold, e.g. 200G (0: half the node's "
              "memory less 2 GiB per rank)"},
     FIELD(node_memory)},
    {{.name = "locality",
      .flag = "locality",
      .kind = SLABFEED_OPTION_SWITCH,
      .min = 0,
      .max = 1,
      .default_value = "0",
      .metavar = "1|0",
      .help = "draw crop origins in the z-range of the rank's node: no crop "
              "byte crosses nodes"},
     FIELD(locality)},
    {{.name = "holdout",
      .flag = "holdout",
      .kind = SLABFEED_OPTION_REGIONS,
      .max = SLABFEED_MAX_REGIONS,
      .default_value = "",
      .metavar = "Z,Y,X,DZ,DY,DX",
      .help = "a box of voxels kept out of training (origin and extent; "
              "extent 0 is the whole axis; it may wrap): no crop contains "
              "one of its voxels; repeatable"},
     FIELD(holdout),
     .count_at = offsetof(slabfeed_config, n_holdout)},
    {{.name = "tile",
      .flag = "tile",
      .kind = SLABFEED_OPTION_INT,
      .min = 0,
      .max = INT32_MAX,
      .default_value = "0",
      .metavar = "T",
      .help = "0: random training crops; T > 0: a tiled pass over the region "
              "with output tiles of edge T (input crops of edge T + 2 pad)"},
     FIELD(tile)},
    {{.name = "pad",
      .flag = "pad",
      .kind = SLABFEED_OPTION_INT,
      .min = 0,
      .max = INT32_MAX,
      .default_value = "0",
      .metavar = "P",
      .help = "context voxels on every side of the input crop (periodic): "
              "a tiled pass's input crop is T + 2 pad; random crops' input "
              "crop is crop + 2 pad and their target the crop, concentric "
              "(valid convolutions)"},
     FIELD(pad)},
    {{.name = "region",
      .flag = "region",
      .kind = SLABFEED_OPTION_REGIONS,
      .max = 1,
      .default_value = "",
      .metavar = "Z,Y,X,DZ,DY,DX",
      .help = "tiled pass: the box it covers (extent 0 is the whole axis; "
              "it may wrap); none: the whole volume"},
     FIELD(region),
     .count_at = offsetof(slabfeed_config, n_region)},
    {{.name = "pass_symmetry",
      .flag = "pass-symmetry",
      .kind = SLABFEED_OPTION_INT,
      .min = 0,
      .max = 47,
      .default_value = "0",
      .metavar = "G",
      .help = "tiled pass: the symmetry id of every tile (test-time "
              "augmentation; 0 the identity)"},
     FIELD(pass_symmetry)},
    {{.name = "input_norm",
      .flag = "input-norm",
      .kind = SLABFEED_OPTION_NORMS,
      .max = SLABFEED_MAX_CHANNELS,
      .default_value = "",
      .metavar = "SHIFT,SCALE;...",
      .help = "normalisation of the input, one entry per channel (or one "
              "per field, for every channel of it): SHIFT,SCALE makes "
              "(x - SHIFT) / SCALE, log(A),SHIFT,SCALE makes "
              "(log(x + A) - SHIFT) / SCALE; none when empty"},
     FIELD(input_norm),
     .count_at = offsetof(slabfeed_config, n_input_norm)},
    {{.name = "target_norm",
      .flag = "target-norm",
      .kind = SLABFEED_OPTION_NORMS,
      .max = SLABFEED_MAX_CHANNELS,
      .default_value = "",
      .metavar = "SHIFT,SCALE;...",
      .help = "normalisation of the target, one entry per channel or per "
              "field (as input_norm); none when empty"},
     FIELD(target_norm),
     .count_at = offsetof(slabfeed_config, n_target_norm)},
    {{.name = "target_pad",
      .flag = "target-pad",
      .kind = SLABFEED_OPTION_SWITCH,
      .min = 0,
      .max = 1,
      .default_value = "0",
      .metavar = "1|0",
      .help = "the target crop padded like the input (edge T + 2 pad, or crop "
              "+ 2 pad) instead of the tile or the crop itself"},
     FIELD(target_pad)},
    {{.name = "volume_weights",
      .flag = "volume-weights",
      .kind = SLABFEED_OPTION_STRING,
      .default_value = "",
      .metavar = "voxels|equal|W,...",
      .help = "how each training sample picks its volume in a dataset of "
              "several: by voxel count (voxels, the default: every origin "
              "equally likely), equal, or one weight per volume"},
     FIELD(volume_weights)},
    {{.name = "holdout_volumes",
      .flag = "holdout-volumes",
      .kind = SLABFEED_OPTION_STRING,
      .default_value = "",
      .metavar = "I,J-K,...",
      .help = "volumes of the dataset kept out of training, by index "
              "(validate on them with a loader of their own path)"},
     FIELD(holdout_volumes)},
    {{.name = "params",
      .flag = "params",
      .kind = SLABFEED_OPTION_STRING,
      .default_value = "",
      .metavar = "NAME,...",
      .help = "per-volume parameters every batch carries: each a manifest "
              "column NAME=VALUE, else a numeric attribute of the volume's "
              "file (NAME on the root group, GROUP/NAME on a group or "
              "dataset); none when empty"},
     FIELD(params)},
    {{.name = "params_norm",
      .flag = "params-norm",
      .kind = SLABFEED_OPTION_NORMS,
      .max = SLABFEED_MAX_PARAMS,
      .default_value = "",
      .metavar = "SHIFT,SCALE;...",
      .help = "normalisation of the parameters, one entry per name of "
              "params (as input_norm); none when empty"},
     FIELD(params_norm),
     .count_at = offsetof(slabfeed_config, n_params_norm)},
    {{.name = "aug_add",
      .flag = "aug-add",
      .kind = SLABFEED_OPTION_STRING,
      .default_value = "",
      .metavar = "S|S0,S1,...",
      .help = "training: a normal offset of this standard deviation added "
              "to each input channel after its normalisation, drawn per "
              "sample (one number, or one per channel); none when empty"},
     FIELD(aug_add)},
    {{.name = "aug_mul",
      .flag = "aug-mul",
      .kind = SLABFEED_OPTION_STRING,
      .default_value = "",
      .metavar = "S|S0,S1,...",
      .help = "training: each input channel multiplied by a log-normal "
              "factor exp(S n), n standard normal, drawn per sample (one "
              "number, or one per channel); none when empty"},
     FIELD(aug_mul)},
    {{.name = "target_aug_add",
      .flag = "target-aug-add",
      .kind = SLABFEED_OPTION_STRING,
      .default_value = "",
      .metavar = "S|S0,S1,...",
      .help = "training: the normal offsets of the target (as aug_add)"},
     FIELD(target_aug_add)},
    {{.name = "target_aug_mul",
      .flag = "target-aug-mul",
      .kind = SLABFEED_OPTION_STRING,
      .default_value = "",
      .metavar = "S|S0,S1,...",
      .help = "training: the log-normal factors of the target (as aug_mul)"},
     FIELD(target_aug_mul)},
    {{.name = "aug_share",
      .flag = "aug-share",
      .kind = SLABFEED_OPTION_SWITCH,
      .min = 0,
      .max = 1,
      .default_value = "1",
      .metavar = "1|0",
      .help = "target channel c draws the same normals as input channel c "
              "(equal deviations give equal factors); 0: draws of its own"},
     FIELD(aug_share)},
    {{.name = "scale_factor",
      .flag = "scale-factor",
      .kind = SLABFEED_OPTION_INT,
      .min = 1,
      .max = 16,
      .default_value = "1",
      .metavar = "S",
      .help = "the target's grid is S times the input's on every axis "
              "(super-resolution): its crop is S x the input crop at S x "
              "its origin; a pass's writer writes on that grid"},
     FIELD(scale_factor)},
    {{.name = "input_vector_fields",
      .flag = "input-vector-fields",
      .kind = SLABFEED_OPTION_STRING,
      .default_value = "",
      .metavar = "FIELD,...",
      .help = "fields of the input that are vectors (3 channels along z,y,x), "
              "each rotated as a vector; with --input-vector, its groups "
              "come first"},
     FIELD(input_vector_fields)},
    {{.name = "target_vector_fields",
      .flag = "target-vector-fields",
      .kind = SLABFEED_OPTION_STRING,
      .default_value = "",
      .metavar = "FIELD,...",
      .help = "fields of the target that are vectors (as "
              "--input-vector-fields)"},
     FIELD(target_vector_fields)},
    {{.name = "progress",
      .flag = "progress",
      .kind = SLABFEED_OPTION_CHOICE,
      .choices = "auto|on|off",
      .default_value = "auto",
      .metavar = "auto|on|off",
      .help = "progress of the open's slab read and the writer's close on "
              "rank 0's stderr: auto for steps of 1 GB or more (updated in "
              "place on a terminal, else a final line), on for every step, "
              "off"},
     FIELD(progress)},
    {{.name = "read_mode",
      .flag = "read-mode",
      .kind = SLABFEED_OPTION_CHOICE,
      .choices = "auto|collective|independent|direct",
      .default_value = "auto",
      .metavar = "auto|collective|independent|direct",
      .help = "the open's slab reads: with auto, direct on node-local and "
              "memory filesystems (each rank preads its planes on several "
              "threads where the dataset is stored contiguously or in "
              "chunks without filters, float32 or float16; else "
              "independent MPI-IO) and collective (MPI-IO aggregation) on "
              "others; or as named; the writer's close writes likewise"},
     FIELD(read_mode)},
    {{.name = "shared_window",
      .flag = "shared-window",
      .kind = SLABFEED_OPTION_CHOICE,
      .choices = "auto|one|per-rank|file",
      .default_value = "auto",
      .metavar = "auto|one|per-rank|file",
      .help = "the node's slab memory: an MPI-3 shared window per rank "
              "(its pages faulted in parallel), one for the node, or "
              "(file, 0.12) /dev/shm files of each rank's own that the "
              "direct read writes as files, without a page fault per page; "
              "auto (0.13): files where the open's read is direct, the node "
              "has 2 to 64 ranks and /dev/shm the room, else a window per "
              "rank up to 64 ranks a node, else one"},
     FIELD(shared_window)},
    {{.name = "touch_threads",
      .flag = "touch-threads",
      .kind = SLABFEED_OPTION_INT,
      .min = 0,
      .max = 64,
      .default_value = "0",
      .metavar = "N",
      .help = "threads per rank that fault in its slab memory (the open's "
              "segment, the writer's output slab) before the first write: 0 "
              "auto (the node's cores over its ranks, at most 8), 1 none "
              "apart (the pages fault as the read writes them)"},
     FIELD(touch_threads)},
    {{.name = "residency",
      .flag = "residency",
      .kind = SLABFEED_OPTION_CHOICE,
      .choices = "auto|host|device",
      .default_value = "auto",
      .metavar = "auto|host|device",
      .help = "where the slabs live for device batches: device holds each "
              "rank's slab in its GPU's memory too (crops gathered there, the "
              "node's other slabs read over CUDA IPC), host in the node's "
              "shared memory; auto device when every slab fits its share of "
              "--device-memory and the node's GPUs have peer access (host for "
              "a tiled pass of one rank per node)"},
     FIELD(residency)},
    {{.name = "device_memory",
      .flag = "device-memory",
      .kind = SLABFEED_OPTION_SIZE,
      .default_value = "0",
      .metavar = "BYTES",
      .help = "GPU memory the slabs of the ranks on one GPU may take there, "
              "e.g. 40G (0: half of that GPU's free memory at open)"},
     FIELD(device_memory)},
    {{.name = "coarsen_factor",
      .flag = "coarsen-factor",
      .kind = SLABFEED_OPTION_INT,
      .min = 1,
      .max = 16,
      .default_value = "1",
      .metavar = "G",
      .help = "the input's grid is G times the target's on every axis (a "
              "coarser target): its crop is the input crop's core / G at "
              "(origin + pad) / G; crop, tile and region multiples of G"},
     FIELD(coarsen_factor)},
    {{.name = "huge_pages",
      .flag = "huge-pages",
      .kind = SLABFEED_OPTION_CHOICE,
      .choices = "auto|off",
      .default_value = "auto",
      .metavar = "auto|off",
      .help = "transparent huge pages for the slab memory (the open's "
              "segment, the writer's output slab): auto asks the kernel for "
              "them where its policy allows (one page fault per 2 MiB), off "
              "keeps 4 KiB pages; the open's report says what the kernel "
              "gave"},
     FIELD(huge_pages)},
    {{.name = "write_map",
      .flag = "write-map",
      .kind = SLABFEED_OPTION_CHOICE,
      .choices = "auto|off",
      .default_value = "auto",
      .metavar = "auto|off",
      .help = "the writer's output slab: auto maps the output file's own "
              "pages where it lies on a tmpfs and close would write directly "
              "(one node, contiguous float32, planes of whole pages, space "
              "reserved): puts land in the file and close writes nothing; "
              "off: memory of its own, written at close"},
     FIELD(write_map)},
    {{.name = "write_register",
      .flag = "write-register",
      .kind = SLABFEED_OPTION_CHOICE,
      .choices = "auto|own|node",
      .default_value = "auto",
      .metavar = "auto|own|node",
      .help = "the writer's CUDA registration for device batches: node "
              "registers every output slab of the node in each rank (puts "
              "copied straight into any of them; each rank pins the node's "
              "whole output), own only the rank's slab (the node's other "
              "ranks' parts copied on the CPU from pinned staging); auto: "
              "own where more than four ranks share the node"},
     FIELD(write_register)},
};

const int sf__option_count = (int)(sizeof sf__options / sizeof sf__options[0]);

const slabfeed_option *slabfeed_option_at(int i)
{
  return i >= 0 && i < sf__option_count ? &sf__options[i].pub : NULL;
}

static const sf__option *find(const char *name)
{
  if (name == NULL)
    return NULL;
  for (int i = 0; i < sf__option_count; i++)
    if (strcmp(sf__options[i].pub.name, name) == 0 ||
        strcmp(sf__options[i].pub.flag, name) == 0)
      return &sf__options[i];
  return NULL;
}

const slabfeed_option *slabfeed_option_find(const char *name)
{
  const sf__option *o = find(name);
  return o != NULL ? &o->pub : NULL;
}

/* ---- Text to values
 * ---------------------------------------------------------- Strict: the whole
 * text is the value, no spaces, no sign where none belongs, in range. Each
 * returns SLABFEED_OK or fails *e naming the option. */

static int all_digits(const char *s)
{
  if (*s == '\0')
    return 0;
  for (; *s != '\0'; s++)
    if (*s < '0' || *s > '9')
      return 0;
  return 1;
}

/* A named value of an INT row ("local=-2" in its choices); 1 when s is
 * one of the names. */
static int named_value(const sf__option *o, const char *s, int64_t *out)
{
  for (const char *c = o->pub.choices; c != NULL && *c != '\0';) {
    const size_t len = strcspn(c, "=");
    if (c[len] != '=')
      return 0;
    if (strlen(s) == len && strncmp(c, s, len) == 0) {
      *out = strtoll(c + len + 1, NULL, 10);
      return 1;
    }
    c += len + 1 + strcspn(c + len + 1, "|");
    if (*c == '|')
      c++;
  }
  return 0;
}

static slabfeed_status parse_i64(const sf__option *o, const char *s,
                                 int64_t *out, sf__err *e)
{
  const char *name = o->pub.name;
  if (o->pub.kind == SLABFEED_OPTION_INT && named_value(o, s, out))
    return SLABFEED_OK;
  if (!all_digits(s[0] == '-' ? s + 1 : s))
    return sf__fail(e, SLABFEED_ERR_ARG, "%s: '%s' is not an integer", name, s);
  errno = 0;
  const long long v = strtoll(s, NULL, 10);
  if (errno == ERANGE && v == LLONG_MAX)
    return sf__fail(e, SLABFEED_ERR_ARG, "%s: '%s' is above the maximum %lld",
                    name, s, (long long)o->pub.max);
  if (errno == ERANGE || v < o->pub.min)
    return sf__fail(e, SLABFEED_ERR_ARG, "%s: '%s' is below the minimum %lld",
                    name, s, (long long)o->pub.min);
  if (v > o->pub.max)
    return sf__fail(e, SLABFEED_ERR_ARG, "%s: '%s' is above the maximum %lld",
                    name, s, (long long)o->pub.max);
  *out = v;
  return SLABFEED_OK;
}

static slabfeed_status parse_u64(const sf__option *o, const char *s,
                                 uint64_t *out, sf__err *e)
{
  if (!all_digits(s))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "%s: '%s' is not a non-negative integer", o->pub.name, s);
  errno = 0;
  const unsigned long long v = strtoull(s, NULL, 10);
  if (errno == ERANGE || (o->pub.max > 0 && v > (uint64_t)o->pub.max))
    return sf__fail(e, SLABFEED_ERR_ARG, "%s: '%s' is above the maximum %llu",
                    o->pub.name, s,
                    o->pub.max > 0 ? (unsigned long long)o->pub.max
                                   : (unsigned long long)UINT64_MAX);
  *out = v;
  return SLABFEED_OK;
}

/* Digits, an optional fraction, an optional binary suffix; whole bytes. */
static slabfeed_status parse_size(const sf__option *o, const char *s,
                                  uint64_t *out, sf__err *e)
{
  const char *units = "KMGT";
  char num[64];
  const size_t n = strlen(s);
  int shift = 0;
  if (n > 0 && n < sizeof num) {
    memcpy(num, s, n + 1);
    const char *u = strchr(units, num[n - 1]);
    if (u != NULL && *u != '\0') {
      shift = 10 * (int)(u - units + 1);
      num[n - 1] = '\0';
    }
  }
  char *dot = n > 0 && n < sizeof num ? strchr(num, '.') : NULL;
  if (dot != NULL)
    *dot = '\0';
  const int ok = n > 0 && n < sizeof num && all_digits(num) &&
                 (dot == NULL || all_digits(dot + 1));
  if (!ok)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "%s: '%s' is not a size (bytes, or a number with K, M, G "
                    "or T)",
                    o->pub.name, s);
  /* Exact integer arithmetic: whole * 2^shift + frac * 2^shift / 10^k,
   * which must come out whole. */
  const char *frac = dot != NULL ? dot + 1 : "";
  const size_t k = strlen(frac);
  errno = 0;
  const unsigned long long whole = strtoull(num, NULL, 10);
  if (errno == ERANGE || k > 19)
    return sf__fail(e, SLABFEED_ERR_ARG, "%s: '%s' is out of range",
                    o->pub.name, s);
  unsigned __int128 pow10 = 1, f = 0;
  for (size_t d = 0; d < k; d++) {
    pow10 *= 10;
    f = f * 10 + (unsigned)(frac[d] - '0');
  }
  const unsigned __int128 scaled = f << shift;
  const unsigned __int128 v =
      ((unsigned __int128)whole << shift) + scaled / pow10;
  if (v > UINT64_MAX)
    return sf__fail(e, SLABFEED_ERR_ARG, "%s: '%s' is more than 2^64 bytes",
                    o->pub.name, s);
  if (scaled % pow10 != 0)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "%s: '%s' is not a whole number of bytes", o->pub.name, s);
  *out = (uint64_t)v;
  return SLABFEED_OK;
}

static slabfeed_status parse_switch(const sf__option *o, const char *s,
                                    int *out, sf__err *e)
{
  static const char *const on[] = {"1", "true", "yes", "on", NULL};
  static const char *const off[] = {"0", "false", "no", "off", NULL};
  for (int i = 0; on[i] != NULL; i++) {
    if (strcmp(s, on[i]) == 0)
      return *out = 1, SLABFEED_OK;
    if (strcmp(s, off[i]) == 0)
      return *out = 0, SLABFEED_OK;
  }
  if (o->pub.min == -1 && strcmp(s, "auto") == 0)
    return *out = -1, SLABFEED_OK;
  return sf__fail(e, SLABFEED_ERR_ARG,
                  "%s: '%s' is not 1, 0, true, false, "
                  "yes, no, on or off%s",
                  o->pub.name, s, o->pub.min == -1 ? " (or auto)" : "");
}

/* Index of `s` in a '|'-separated list, or -1. */
static int list_index(const char *list, const char *s)
{
  const size_t n = strlen(s);
  for (int i = 0; list != NULL && *list != '\0'; i++) {
    const char *bar = strchr(list, '|');
    const size_t len = bar != NULL ? (size_t)(bar - list) : strlen(list);
    if (len == n && n > 0 && strncmp(list, s, n) == 0)
      return i;
    if (bar == NULL)
      break;
    list = bar + 1;
  }
  return -1;
}

static slabfeed_status parse_choice(const sf__option *o, const char *s,
                                    int *out, sf__err *e)
{
  int i = list_index(o->pub.choices, s);
  if (i < 0)
    i = list_index(o->pub.aliases, s);
  if (i < 0)
    return sf__fail(e, SLABFEED_ERR_ARG, "%s: '%s' is not one of %s",
                    o->pub.name, s, o->pub.choices);
  *out = i;
  return SLABFEED_OK;
}

/* Up to max integers separated by any of seps, each in [lo, hi]. */
static slabfeed_status parse_ints(const sf__option *o, const char *s,
                                  const char *seps, int64_t lo, int64_t hi,
                                  int64_t *out, int max, int *n, sf__err *e)
{
  *n = 0;
  char piece[32];
  for (const char *p = s;; p++) {
    const size_t len = strcspn(p, seps);
    if (*n == max || len == 0 || len >= sizeof piece)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "%s: '%s' is not a list of at most "
                      "%d integers",
                      o->pub.name, s, max);
    memcpy(piece, p, len);
    piece[len] = '\0';
    if (!all_digits(piece[0] == '-' ? piece + 1 : piece))
      return sf__fail(e, SLABFEED_ERR_ARG, "%s: '%s' in '%s' is not an integer",
                      o->pub.name, piece, s);
    errno = 0;
    const long long v = strtoll(piece, NULL, 10);
    if (errno == ERANGE || v < lo || v > hi)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "%s: %s in '%s' is outside [%lld, "
                      "%lld]",
                      o->pub.name, piece, s, (long long)lo, (long long)hi);
    out[(*n)++] = v;
    p += len;
    if (*p == '\0')
      return SLABFEED_OK;
  }
}

static slabfeed_status parse_edge(const sf__option *o, const char *s,
                                  int64_t out[3], sf__err *e)
{
  int64_t v[3];
  int n;
  if (parse_ints(o, s, ",x", o->pub.min, o->pub.max, v, 3, &n, e))
    return e->status;
  if (n == 2)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "%s: '%s' has 2 edges; give one or "
                    "three (z,y,x)",
                    o->pub.name, s);
  for (int a = 0; a < 3; a++)
    out[a] = v[n == 1 ? 0 : a];
  return SLABFEED_OK;
}

/* Lists of groups, appended to what the field holds ("" clears; ";"
 * separates groups): vector groups are 3 ints (channels 0..63), regions 6
 * int64_t (0..2^31-1). Written straight into the field:
 * slabfeed_config_set parses into a copy, so a failure part-way leaves the
 * caller's struct as it was. */
static slabfeed_status parse_groups(const sf__option *o, const char *s,
                                    int *count, void *field, sf__err *e)
{
  const int regions = o->pub.kind == SLABFEED_OPTION_REGIONS;
  const int width = regions ? 6 : 3;
  if (*s == '\0') {
    *count = 0;
    return SLABFEED_OK;
  }
  char one[160];
  for (const char *p = s;; p++) {
    const size_t len = strcspn(p, ";");
    if (len >= sizeof one)
      return sf__fail(e, SLABFEED_ERR_ARG, "%s: '%s' is too long", o->pub.name,
                      s);
    memcpy(one, p, len);
    one[len] = '\0';
    int64_t v[6];
    int k;
    if (parse_ints(o, one, ",", 0, regions ? INT32_MAX : 63, v, width, &k, e))
      return e->status;
    if (k != width)
      return sf__fail(
          e, SLABFEED_ERR_ARG, "%s: '%s' is not %s", o->pub.name, one,
          regions ? "a box Z,Y,X,DZ,DY,DX" : "three channels K0,K1,K2");
    if (*count == o->pub.max)
      return sf__fail(e, SLABFEED_ERR_ARG, "%s: more than %lld %s", o->pub.name,
                      (long long)o->pub.max,
                      regions ? "regions" : "vector groups");
    for (int a = 0; a < width; a++)
      if (regions)
        ((int64_t(*)[6])field)[*count][a] = v[a];
      else
        ((int(*)[3])field)[*count][a] = (int)v[a];
    ++*count;
    p += len;
    if (*p == '\0')
      return SLABFEED_OK;
  }
}

/* The "C" locale for this thread while numbers of the NORMS text form are
 * read or written: a program's LC_NUMERIC (a decimal comma) must not
 * change the text form. Does nothing where no locale object can be made. */
typedef struct c_numeric {
  locale_t c, old;
} c_numeric;

static void c_numeric_begin(c_numeric *l)
{
  l->c = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  l->old = l->c != (locale_t)0 ? uselocale(l->c) : (locale_t)0;
}

static void c_numeric_end(c_numeric *l)
{
  if (l->c != (locale_t)0) {
    uselocale(l->old);
    freelocale(l->c);
  }
}

/* One number of a NORMS entry: the whole of s as strtod reads it in the
 * "C" locale (no leading space), rounded to float. */
static slabfeed_status parse_float(const sf__option *o, const char *s,
                                   const char *entry, float *out, sf__err *e)
{
  char *end = NULL;
  c_numeric loc;
  c_numeric_begin(&loc);
  const double v =
      s[0] != '\0' && !isspace((unsigned char)s[0]) ? strtod(s, &end) : 0.0;
  c_numeric_end(&loc);
  if (end == NULL || *end != '\0')
    return sf__fail(e, SLABFEED_ERR_ARG, "%s: '%s' in '%s' is not a number",
                    o->pub.name, s, entry);
  *out = (float)v;
  return SLABFEED_OK;
}

/* What is wrong with a normalisation entry, or NULL: scale finite and not
 * 0, shift and (for log) a finite. */
static const char *norm_problem(const slabfeed_norm *n)
{
  if (n->log != 0 && n->log != 1)
    return "log is neither 0 nor 1";
  if (!isfinite(n->scale) || n->scale == 0.0f)
    return "the scale must be finite and not 0";
  if (!isfinite(n->shift))
    return "the shift must be finite";
  if (n->log && !isfinite(n->a))
    return "the log offset A must be finite";
  return NULL;
}

/* A list of normalisations ("" clears; ";" separates channels; each entry
 * "SHIFT,SCALE" or "log(A),SHIFT,SCALE"). The value replaces the list;
 * the entries past it are zeroed. */
static slabfeed_status parse_norms(const sf__option *o, const char *s,
                                   int *count, slabfeed_norm *field, sf__err *e)
{
  const int max = (int)o->pub.max;
  memset(field, 0, sizeof(slabfeed_norm) * (size_t)max);
  *count = 0;
  if (*s == '\0')
    return SLABFEED_OK;
  int n = 0;
  for (const char *p = s;; p++) {
    const size_t len = strcspn(p, ";");
    char one[256];
    if (len >= sizeof one)
      return sf__fail(e, SLABFEED_ERR_ARG, "%s: entry %d of '%s' is too long",
                      o->pub.name, n, s);
    if (n == max)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "%s: more than %d entries (one per channel)", o->pub.name,
                      max);
    memcpy(one, p, len);
    one[len] = '\0';
    /* The parts between commas, cut in place (up to 4, to see a 4th). */
    char *part[4];
    int k = 0;
    for (char *q = one; k < 4;) {
      part[k++] = q;
      q = strchr(q, ',');
      if (q == NULL)
        break;
      *q++ = '\0';
    }
    const size_t l0 = strlen(part[0]);
    const int is_log = k == 3 && l0 > 5 && strncmp(part[0], "log(", 4) == 0 &&
                       part[0][l0 - 1] == ')';
    if (k != 2 && !is_log) {
      memcpy(one, p, len);
      one[len] = '\0';
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "%s: entry %d '%s' is not SHIFT,SCALE or "
                      "log(A),SHIFT,SCALE",
                      o->pub.name, n, one);
    }
    slabfeed_norm v = {0, 0.0f, 0.0f, 1.0f};
    if (is_log) {
      part[0][l0 - 1] = '\0';
      v.log = 1;
      if (parse_float(o, part[0] + 4, s, &v.a, e) != SLABFEED_OK)
        return e->status;
    }
    if (parse_float(o, part[is_log], s, &v.shift, e) != SLABFEED_OK ||
        parse_float(o, part[is_log + 1], s, &v.scale, e) != SLABFEED_OK)
      return e->status;
    const char *why = norm_problem(&v);
    if (why != NULL)
      return sf__fail(e, SLABFEED_ERR_ARG, "%s: channel %d of '%s': %s",
                      o->pub.name, n, s, why);
    field[n++] = v;
    *count = n;
    p += len;
    if (*p == '\0')
      return SLABFEED_OK;
  }
}

/* Parses s into the field of o in *cfg (a struct that holds the field);
 * *cfg is unchanged on failure. */
static slabfeed_status store(const sf__option *o, const char *s,
                             slabfeed_config *cfg, sf__err *e)
{
  char *f = (char *)cfg + o->at;
  int64_t i = 0;
  int v = 0;
  switch (o->pub.kind) {
  case SLABFEED_OPTION_STRING:
    *(const char **)f = s[0] != '\0' ? s : NULL;
    return SLABFEED_OK;
  case SLABFEED_OPTION_INT:
    if (parse_i64(o, s, &i, e) == SLABFEED_OK)
      *(int *)f = (int)i;
    return e->status;
  case SLABFEED_OPTION_UINT64:
    return parse_u64(o, s, (uint64_t *)f, e);
  case SLABFEED_OPTION_SIZE:
    return parse_size(o, s, (uint64_t *)f, e);
  case SLABFEED_OPTION_SWITCH:
    if (parse_switch(o, s, &v, e) == SLABFEED_OK)
      *(int *)f = v;
    return e->status;
  case SLABFEED_OPTION_CHOICE:
    if (parse_choice(o, s, &v, e) == SLABFEED_OK)
      *(int *)f = v;
    return e->status;
  case SLABFEED_OPTION_EDGE:
    return parse_edge(o, s, (int64_t *)f, e);
  case SLABFEED_OPTION_VECTORS:
  case SLABFEED_OPTION_REGIONS:
    return parse_groups(o, s, (int *)((char *)cfg + o->count_at), f, e);
  case SLABFEED_OPTION_NORMS:
    return parse_norms(o, s, (int *)((char *)cfg + o->count_at),
                       (slabfeed_norm *)f, e);
  }
  return sf__fail(e, SLABFEED_ERR_ARG, "%s: unknown kind", o->pub.name);
}

void sf__option_default(const sf__option *o, slabfeed_config *cfg)
{
  sf__err e;
  sf__err_clear(&e);
  const slabfeed_status s = store(o, o->pub.default_value, cfg, &e);
  assert(s == SLABFEED_OK); /* the table's defaults parse (unit.options) */
  (void)s;
}

/* Rows with a count beside the field (vector groups, regions, norms). */
static int is_list(const sf__option *o)
{
  return o->pub.kind == SLABFEED_OPTION_VECTORS ||
         o->pub.kind == SLABFEED_OPTION_REGIONS ||
         o->pub.kind == SLABFEED_OPTION_NORMS;
}

/* The part of *cfg a row needs lies inside the caller's struct. */
static int fits(const sf__option *o, const slabfeed_config *cfg)
{
  size_t end = o->at + o->width;
  if (is_list(o) && o->count_at + sizeof(int) > end)
    end = o->count_at + sizeof(int);
  return cfg->size >= end;
}

slabfeed_status slabfeed_config_set(slabfeed_config *cfg, const char *name,
                                    const char *value, char *errbuf,
                                    size_t errlen)
{
  sf__err e;
  sf__err_clear(&e);
  const sf__option *o = find(name);
  if (cfg == NULL || value == NULL)
    sf__fail(&e, SLABFEED_ERR_ARG,
             "slabfeed_config_set: cfg and value are "
             "required");
  else if (o == NULL)
    sf__fail(&e, SLABFEED_ERR_ARG, "unknown option '%s'",
             name != NULL ? name : "(null)");
  else if (!fits(o, cfg))
    sf__fail(&e, SLABFEED_ERR_UNSUPPORTED,
             "%s: the caller's slabfeed_config (%zu bytes) has no such field: "
             "rebuild against a newer slabfeed.h",
             o->pub.name, cfg->size);
  else {
    /* Parsed into a copy (a VECTORS value appends to what is there), so
     * that a bad value leaves *cfg as it was. */
    slabfeed_config c;
    memset(&c, 0, sizeof c);
    memcpy(&c, cfg, cfg->size < sizeof c ? cfg->size : sizeof c);
    if (store(o, value, &c, &e) == SLABFEED_OK) {
      memcpy((char *)cfg + o->at, (char *)&c + o->at, o->width);
      if (is_list(o))
        memcpy((char *)cfg + o->count_at, (char *)&c + o->count_at,
               sizeof(int));
    }
  }
  sf__err_copy(&e, errbuf, errlen);
  return e.status;
}

/* ---- Values to text ---------------------------------------------------------
 */

/* Appends to buf (len bytes, *used so far); 0 on success, -1 when full. */
static int put(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int put(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  const int n = vsnprintf(buf + *used, len - *used, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= len - *used) {
    *used = len - 1;
    return -1;
  }
  *used += (size_t)n;
  return 0;
}

/* The i-th name of a '|'-separated list into buf. */
static int put_choice(char *buf, size_t len, size_t *used, const char *list,
                      int i)
{
  for (int k = 0; k < i && list != NULL; k++) {
    list = strchr(list, '|');
    list = list != NULL ? list + 1 : NULL;
  }
  if (list == NULL)
    return put(buf, len, used, "%d", i);
  return put(buf, len, used, "%.*s", (int)strcspn(list, "|"), list);
}

slabfeed_status slabfeed_config_get(const slabfeed_config *cfg,
                                    const char *name, char *buf, size_t len)
{
  const sf__option *o = find(name);
  if (cfg == NULL || buf == NULL || len == 0 || o == NULL)
    return SLABFEED_ERR_ARG;
  buf[0] = '\0';
  if (!fits(o, cfg))
    return SLABFEED_ERR_UNSUPPORTED;
  const char *f = (const char *)cfg + o->at;
  size_t used = 0;
  int rc = 0;
  switch (o->pub.kind) {
  case SLABFEED_OPTION_STRING: {
    const char *s = *(const char *const *)f;
    rc = put(buf, len, &used, "%s", s != NULL ? s : "");
    break;
  }
  case SLABFEED_OPTION_INT: {
    /* A named value prints as its name. */
    const int v = *(const int *)f;
    const char *c = o->pub.choices;
    char want[32];
    snprintf(want, sizeof want, "=%d", v);
    const char *hit = c != NULL ? strstr(c, want) : NULL;
    const size_t wl = strlen(want);
    if (hit != NULL && (hit[wl] == '\0' || hit[wl] == '|')) {
      const char *first = hit;
      while (first > c && first[-1] != '|')
        first--;
      rc = put(buf, len, &used, "%.*s", (int)(hit - first), first);
    } else {
      rc = put(buf, len, &used, "%d", v);
    }
    break;
  }
  case SLABFEED_OPTION_UINT64:
  case SLABFEED_OPTION_SIZE:
    rc = put(buf, len, &used, "%" PRIu64, *(const uint64_t *)f);
    break;
  case SLABFEED_OPTION_SWITCH: {
    const int v = *(const int *)f;
    rc = put(buf, len, &used, "%s", v < 0 ? "auto" : v ? "1" : "0");
    break;
  }
  case SLABFEED_OPTION_CHOICE:
    rc = put_choice(buf, len, &used, o->pub.choices, *(const int *)f);
    break;
  case SLABFEED_OPTION_EDGE: {
    const int64_t *c = (const int64_t *)f;
    if (c[0] == c[1] && c[1] == c[2])
      rc = put(buf, len, &used, "%" PRId64, c[0]);
    else
      rc = put(buf, len, &used, "%" PRId64 ",%" PRId64 ",%" PRId64, c[0], c[1],
               c[2]);
    break;
  }
  case SLABFEED_OPTION_VECTORS: {
    const int n = *(const int *)((const char *)cfg + o->count_at);
    const int(*g)[3] = (const int(*)[3])f;
    for (int v = 0; v < n && v < o->pub.max && rc == 0; v++)
      rc = put(buf, len, &used, "%s%d,%d,%d", v ? ";" : "", g[v][0], g[v][1],
               g[v][2]);
    break;
  }
  case SLABFEED_OPTION_REGIONS: {
    const int n = *(const int *)((const char *)cfg + o->count_at);
    const int64_t(*b)[6] = (const int64_t(*)[6])f;
    for (int v = 0; v < n && v < o->pub.max && rc == 0; v++)
      rc = put(buf, len, &used,
               "%s%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
               ",%" PRId64,
               v ? ";" : "", b[v][0], b[v][1], b[v][2], b[v][3], b[v][4],
               b[v][5]);
    break;
  }
  case SLABFEED_OPTION_NORMS: {
    /* %.9g: enough digits for strtod to give back the same float */
    const int n = *(const int *)((const char *)cfg + o->count_at);
    const slabfeed_norm *g = (const slabfeed_norm *)f;
    c_numeric loc;
    c_numeric_begin(&loc);
    for (int v = 0; v < n && v < o->pub.max && rc == 0; v++) {
      rc = put(buf, len, &used, "%s", v ? ";" : "");
      if (rc == 0 && g[v].log)
        rc = put(buf, len, &used, "log(%.9g),", (double)g[v].a);
      if (rc == 0)
        rc = put(buf, len, &used, "%.9g,%.9g", (double)g[v].shift,
                 (double)g[v].scale);
    }
    c_numeric_end(&loc);
    break;
  }
  }
  return rc == 0 ? SLABFEED_OK : SLABFEED_ERR_NOMEM;
}

/* ---- Checks of a filled struct ----------------------------------------------
 */

slabfeed_status sf__option_check(const sf__option *o,
                                 const slabfeed_config *cfg, sf__err *e)
{
  const char *f = (const char *)cfg + o->at;
  const slabfeed_option *p = &o->pub;
  switch (p->kind) {
  case SLABFEED_OPTION_STRING:
    if ((p->flags & SLABFEED_OPTION_REQUIRED) &&
        (*(const char *const *)f == NULL || **(const char *const *)f == '\0'))
      return sf__fail(e, SLABFEED_ERR_ARG, "config: %s is required (%s)",
                      p->name, p->help);
    return SLABFEED_OK;
  case SLABFEED_OPTION_INT:
  case SLABFEED_OPTION_SWITCH: {
    const int v = *(const int *)f;
    if (v < p->min || v > p->max)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: %s is %d; it must be in %lld..%lld", p->name, v,
                      (long long)p->min, (long long)p->max);
    return SLABFEED_OK;
  }
  case SLABFEED_OPTION_UINT64:
  case SLABFEED_OPTION_SIZE: {
    const uint64_t v = *(const uint64_t *)f;
    if (p->max > 0 && v > (uint64_t)p->max)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: %s is %" PRIu64 "; at most %lld", p->name, v,
                      (long long)p->max);
    return SLABFEED_OK;
  }
  case SLABFEED_OPTION_CHOICE: {
    const int v = *(const int *)f;
    size_t names = 1;
    for (const char *c = p->choices; *c != '\0'; c++)
      names += *c == '|';
    if (v < 0 || (size_t)v >= names)
      return sf__fail(e, SLABFEED_ERR_ARG, "config: %s %d is not one of %s",
                      p->name, v, p->choices);
    return SLABFEED_OK;
  }
  case SLABFEED_OPTION_EDGE: {
    const int64_t *c = (const int64_t *)f;
    for (int a = 0; a < 3; a++)
      if (c[a] < p->min || c[a] > p->max)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: %s extent %lld on axis %d must be in "
                        "%lld..%lld",
                        p->name, (long long)c[a], a, (long long)p->min,
                        (long long)p->max);
    return SLABFEED_OK;
  }
  case SLABFEED_OPTION_VECTORS: {
    const int n = *(const int *)((const char *)cfg + o->count_at);
    if (n < 0 || n > p->max)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: %s: %d groups; at most %lld", p->name, n,
                      (long long)p->max);
    return SLABFEED_OK; /* channels are checked against the file */
  }
  case SLABFEED_OPTION_REGIONS: {
    const int n = *(const int *)((const char *)cfg + o->count_at);
    if (n < 0 || n > p->max)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: %s: %d regions; at most %lld", p->name, n,
                      (long long)p->max);
    const int64_t(*b)[6] = (const int64_t(*)[6])f;
    for (int v = 0; v < n; v++)
      for (int a = 0; a < 6; a++)
        if (b[v][a] < 0 || b[v][a] > INT32_MAX)
          return sf__fail(e, SLABFEED_ERR_ARG,
                          "config: %s region %d: %lld is not in 0..2^31-1",
                          p->name, v, (long long)b[v][a]);
    return SLABFEED_OK; /* against the box at open */
  }
  case SLABFEED_OPTION_NORMS: {
    const int n = *(const int *)((const char *)cfg + o->count_at);
    if (n < 0 || n > p->max)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "config: %s: %d entries; at most %lld (one per channel)",
                      p->name, n, (long long)p->max);
    const slabfeed_norm *g = (const slabfeed_norm *)f;
    for (int v = 0; v < n; v++) {
      const char *why = norm_problem(&g[v]);
      if (why != NULL)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "config: %s channel %d {log %d, a %g, shift %g, "
                        "scale %g}: %s",
                        p->name, v, g[v].log, (double)g[v].a,
                        (double)g[v].shift, (double)g[v].scale, why);
    }
    return SLABFEED_OK; /* the count against the dataset at open */
  }
  }
  return sf__fail(e, SLABFEED_ERR_ARG, "config: %s: unknown kind", p->name);
}
