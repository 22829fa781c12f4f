/* Sized structs: a caller built against an older, shorter header and one
 * built against a newer, longer header both work with this library, which
 * reads and writes only the bytes the caller's struct has.
 *
 * The "older header" is written out here by hand: the leading members of
 * today's structs, with the last ones missing, exactly as an older
 * slabfeed.h would have declared them. Each struct is followed by canary
 * bytes that the library must not touch. */
#include <stddef.h>

#include "testutil.h"

/* slabfeed_config without its last member (steps_per_epoch). */
typedef struct old_config {
  size_t size;
  const char *path, *input, *target;
  slabfeed_file_layout layout;
  int64_t crop[3];
  int batch;
  uint64_t seed;
  slabfeed_symmetries symmetries;
  int n_input_vectors;
  int input_vectors[SLABFEED_MAX_VECTORS][3];
  int n_target_vectors;
  int target_vectors[SLABFEED_MAX_VECTORS][3];
  slabfeed_dtype dtype;
  slabfeed_out_layout out_layout;
  int device, prefetch, halo, rank_per_node;
} old_config;

/* slabfeed_batch without sample and ready_event. */
typedef struct old_batch {
  size_t size;
  slabfeed_tensor input, target;
  int device;
  uint64_t epoch, step;
  const int64_t *origin;
  const int32_t *symmetry;
} old_batch;

/* slabfeed_stats up to bytes_out. */
typedef struct old_stats {
  size_t size;
  uint64_t batches, samples, bytes_own, bytes_node, bytes_remote, bytes_out;
} old_stats;

/* slabfeed_dataset_info up to layout. */
typedef struct old_info {
  size_t size;
  int64_t dims[4];
  int64_t channels;
  int64_t shape[3];
  slabfeed_file_layout layout;
} old_info;

#define CANARY 0xA5
#define GUARDED(T)                                                             \
  struct {                                                                     \
    T v;                                                                       \
    unsigned char canary[4096]; /* more than any struct grew */                \
  }

static int canary_intact(const unsigned char *c, size_t n)
{
  for (size_t i = 0; i < n; i++)
    if (c[i] != CANARY)
      return 0;
  return 1;
}

/* The prefixes of today's structs must be laid out like the old ones. */
_Static_assert(offsetof(old_config, rank_per_node) ==
                   offsetof(slabfeed_config, rank_per_node),
               "old_config mirrors slabfeed_config");
_Static_assert(offsetof(old_batch, symmetry) ==
                   offsetof(slabfeed_batch, symmetry),
               "old_batch mirrors slabfeed_batch");
_Static_assert(offsetof(old_stats, bytes_out) ==
                   offsetof(slabfeed_stats, bytes_out),
               "old_stats mirrors slabfeed_stats");
_Static_assert(offsetof(old_info, layout) ==
                   offsetof(slabfeed_dataset_info, layout),
               "old_info mirrors slabfeed_dataset_info");

static void fill_options(slabfeed_config *c, const char *path)
{
  c->path = path;
  c->input = "Nbody";
  c->target = "Hydro";
  c->crop[0] = c->crop[1] = c->crop[2] = 6;
  c->batch = 2;
  c->seed = 11;
  c->n_input_vectors = 1;
  c->input_vectors[0][0] = 1, c->input_vectors[0][1] = 2;
  c->input_vectors[0][2] = 3;
}

/* An older caller: shorter config, batch, stats and dataset info. */
static void older_caller(const char *path, const slabfeed_batch *want,
                         uint64_t want_steps)
{
  GUARDED(old_config) oc;
  memset(&oc, CANARY, sizeof oc);
  slabfeed_config_init_sized((slabfeed_config *)&oc.v, sizeof oc.v);
  CHECK_EQ(oc.v.size, sizeof oc.v, "init sets the caller's size");
  CHECK(canary_intact(oc.canary, sizeof oc.canary),
        "config init writes past a shorter struct");
  CHECK(oc.v.crop[0] == 64 && oc.v.batch == 1 && oc.v.device == -1 &&
            oc.v.prefetch == 2 && oc.v.rank_per_node == -1,
        "defaults in the shorter struct");
  fill_options((slabfeed_config *)&oc.v, path);

  slabfeed_loader *l = NULL;
  char err[1024] = "";
  const slabfeed_status st = slabfeed_open(
      MPI_COMM_WORLD, (const slabfeed_config *)&oc.v, &l, err, sizeof err);
  CHECK(st == SLABFEED_OK, "open with a shorter config: %s", err);
  if (st != SLABFEED_OK)
    return;
  CHECK_EQ(slabfeed_steps_per_epoch(l), want_steps,
           "the missing steps_per_epoch takes its default");

  GUARDED(old_batch) ob;
  memset(&ob, CANARY, sizeof ob);
  ob.v.size = sizeof ob.v;
  CHECK(slabfeed_next(l, (slabfeed_batch *)&ob.v, NULL) == SLABFEED_OK,
        "next with a shorter batch: %s", slabfeed_last_error(l));
  CHECK(canary_intact(ob.canary, sizeof ob.canary),
        "next writes past a shorter batch");
  CHECK_EQ(ob.v.size, sizeof ob.v, "the caller's size is kept");
  const size_t bytes = (size_t)(want->input.shape[0] * want->input.strides[0]) *
                       slabfeed_dtype_size(want->input.dtype);
  CHECK(ob.v.input.ndim == 5 && ob.v.epoch == want->epoch &&
            ob.v.step == want->step &&
            memcmp(ob.v.input.shape, want->input.shape,
                   sizeof want->input.shape) == 0 &&
            memcmp(ob.v.input.data, want->input.data, bytes) == 0 &&
            memcmp(ob.v.origin, want->origin, 2 * 3 * sizeof(int64_t)) == 0,
        "the shorter batch holds the same batch as a full one");

  GUARDED(old_stats) os;
  memset(&os, CANARY, sizeof os);
  os.v.size = sizeof os.v;
  CHECK(slabfeed_stats_get(l, (slabfeed_stats *)&os.v) == SLABFEED_OK,
        "stats into a shorter struct");
  CHECK(canary_intact(os.canary, sizeof os.canary),
        "stats write past a shorter struct");
  CHECK(os.v.batches == 1 && os.v.samples == 2 && os.v.bytes_out > 0,
        "shorter stats hold the counters (%llu batches)",
        (unsigned long long)os.v.batches);
  slabfeed_close(l);

  GUARDED(old_info) oi;
  memset(&oi, CANARY, sizeof oi);
  oi.v.size = sizeof oi.v;
  CHECK(slabfeed_describe(path, "Hydro", SLABFEED_LAYOUT_AUTO,
                          (slabfeed_dataset_info *)&oi.v, err,
                          sizeof err) == SLABFEED_OK,
        "describe into a shorter struct: %s", err);
  CHECK(canary_intact(oi.canary, sizeof oi.canary) && oi.v.channels == 5 &&
            oi.v.layout == SLABFEED_LAYOUT_CF,
        "describe writes only the shorter struct");
}

/* A newer caller: longer structs. Unknown trailing config fields are
 * ignored; trailing output fields the library does not know are zeroed. */
static void newer_caller(const char *path, const slabfeed_batch *want)
{
  struct {
    slabfeed_config c;
    uint64_t future[4];
  } nc;
  slabfeed_config_init_sized(&nc.c, sizeof nc);
  CHECK(nc.c.size == sizeof nc && nc.future[0] == 0 && nc.future[3] == 0,
        "init zeroes fields it does not know");
  fill_options(&nc.c, path);
  nc.future[0] = 12345;
  slabfeed_loader *l = NULL;
  char err[1024] = "";
  CHECK(slabfeed_open(MPI_COMM_WORLD, &nc.c, &l, err, sizeof err) ==
            SLABFEED_OK,
        "open with a longer config: %s", err);
  if (l == NULL)
    return;
  struct {
    slabfeed_batch b;
    uint64_t future[4];
  } nb;
  memset(&nb, 0xFF, sizeof nb);
  nb.b.size = sizeof nb;
  CHECK(slabfeed_next(l, &nb.b, NULL) == SLABFEED_OK, "next, longer batch: %s",
        slabfeed_last_error(l));
  CHECK(nb.b.size == sizeof nb && nb.future[0] == 0 && nb.future[3] == 0,
        "bytes past the library's batch are zeroed, size kept");
  CHECK(nb.b.sample != NULL && nb.b.sample[0] == want->sample[0],
        "the longer batch holds the batch");
  slabfeed_close(l);
}

/* A caller that forgot the size gets a clear error, not a write. */
static void unsized_caller(const char *path)
{
  slabfeed_config c;
  slabfeed_config_init(&c);
  fill_options(&c, path);
  slabfeed_loader *l = NULL;
  char err[1024] = "";
  if (slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) != SLABFEED_OK)
    return;
  slabfeed_batch b;
  memset(&b, 0, sizeof b);
  CHECK(slabfeed_next(l, &b, NULL) == SLABFEED_ERR_ARG &&
            strstr(slabfeed_last_error(l), "SLABFEED_BATCH_INIT") != NULL,
        "an unsized batch is refused: %s", slabfeed_last_error(l));
  slabfeed_stats s;
  memset(&s, 0, sizeof s);
  CHECK(slabfeed_stats_get(l, &s) == SLABFEED_ERR_ARG,
        "unsized stats are refused");
  c.size = 4;
  slabfeed_loader *l2 = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l2, err, sizeof err) ==
                SLABFEED_ERR_ARG &&
            strstr(err, "slabfeed_config_init") != NULL,
        "a config of size 4 is refused on every rank: %s", err);
  slabfeed_close(l);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char path[64];
  snprintf(path, sizeof path, "abi_np%d.h5", size);
  if (make_file(path, 16, 10, 9, SLABFEED_LAYOUT_CF, 0, 0, 1) == 0) {
    /* The reference: today's full structs. */
    slabfeed_config c;
    slabfeed_config_init(&c);
    fill_options(&c, path);
    slabfeed_loader *l = NULL;
    char err[1024] = "";
    CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
          "open: %s", err);
    slabfeed_batch want = SLABFEED_BATCH_INIT;
    if (l != NULL && slabfeed_next(l, &want, NULL) == SLABFEED_OK) {
      older_caller(path, &want, slabfeed_steps_per_epoch(l));
      newer_caller(path, &want);
      unsized_caller(path);
    }
    slabfeed_close(l);
  }
  return check_finish("abi");
}
