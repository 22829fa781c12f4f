/* The global sample stream: the same for any rank count, DESIGN's batch
 * order, disjoint samples per rank, epochs, and exact resume by slabfeed_seek.
 */
#include "plan/sampler.h"
#include "testutil.h"

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char path[64];
  snprintf(path, sizeof path, "stream_np%d.h5", size);
  make_file(path, 16, 12, 12, SLABFEED_LAYOUT_CF, 0, 0, 0);
  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = path;
  c.input = "Nbody";
  c.crop[0] = c.crop[1] = c.crop[2] = 4;
  c.batch = 2;
  c.seed = 2024;
  c.steps_per_epoch = 3;
  char err[1024];
  slabfeed_loader *l = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open: %s", err);
  if (l == NULL)
    return check_finish("mpi.stream");
  CHECK_EQ(slabfeed_steps_per_epoch(l), 3, "steps per epoch from the config");

  /* The reference stream, computed here without the loader. */
  sf__sampler ref;
  const int64_t shape[3] = {16, 12, 12};
  sf__sampler_init(&ref, shape, c.seed, SLABFEED_SYM_ALL);

  const int steps = 7; /* crosses two epoch ends */
  const size_t bytes = (size_t)c.batch * 4 * 64 * sizeof(float);
  float *saved = malloc(bytes);
  int64_t my_first = -1;
  for (int s = 0; s < steps; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    CHECK(slabfeed_next(l, &b, NULL) == SLABFEED_OK, "next: %s",
          slabfeed_last_error(l));
    const uint64_t epoch = (uint64_t)s / 3, step = (uint64_t)s % 3;
    CHECK(b.epoch == epoch && b.step == step, "position (%llu,%llu)",
          (unsigned long long)b.epoch, (unsigned long long)b.step);
    for (int i = 0; i < c.batch; i++) {
      const uint64_t k = step * (uint64_t)size * (uint64_t)c.batch +
                         (uint64_t)rank * (uint64_t)c.batch + (uint64_t)i;
      CHECK_EQ(b.sample[i], (int64_t)k, "rank %d, sample %d of step %d", rank,
               i, s);
      int64_t o[3];
      int32_t g;
      sf__sampler_draw(&ref, epoch, k, o, &g);
      CHECK(memcmp(o, &b.origin[3 * i], sizeof o) == 0 && g == b.symmetry[i],
            "global sample %llu of epoch %llu is rank-count independent",
            (unsigned long long)k, (unsigned long long)epoch);
    }
    if (s == 4) {
      memcpy(saved, b.input.data, bytes);
      my_first = b.origin[0] * 1000000 + b.origin[1] * 1000 + b.origin[2];
    }
  }
  /* Resume: seek to (1, 1) (= loop step 4) and get the same bytes. */
  CHECK(slabfeed_seek(l, 1, 1) == SLABFEED_OK, "seek");
  slabfeed_batch b = SLABFEED_BATCH_INIT;
  CHECK(slabfeed_next(l, &b, NULL) == SLABFEED_OK, "next after seek");
  CHECK(b.epoch == 1 && b.step == 1 && memcmp(saved, b.input.data, bytes) == 0,
        "slabfeed_seek resumes the exact stream");
  CHECK(slabfeed_seek(l, 0, 3) == SLABFEED_ERR_ARG &&
            strstr(slabfeed_last_error(l), "past the end"),
        "seek past the epoch is refused");
  /* Different ranks get different crops. */
  int64_t *all = malloc((size_t)size * sizeof *all);
  MPI_Allgather(&my_first, 1, MPI_INT64_T, all, 1, MPI_INT64_T, MPI_COMM_WORLD);
  int dup = 0;
  for (int r = 0; r < size; r++)
    dup += r != rank && all[r] == my_first;
  CHECK(dup == 0, "ranks drew the same crop");
  free(all);
  free(saved);
  slabfeed_close(l);
  return check_finish("mpi.stream");
}
