#include "io/slab.h"

#include <stdlib.h>
#include <unistd.h>

#include "common/geometry.h"
#include "common/sys.h"
#include "io/h5.h"

/* The planes of rank r's core that it reads itself (placement.h) inside
 * the volume of stacked planes [z0, z0 + nz), in runs cut every `cap`
 * planes, z counted in the volume, placed at their float offset inside a
 * channel of r's segment (sf__store_at). Writes up to max runs into runs
 * (when not NULL); returns the count. */
static int store_runs(const sf__store *s, int r, int64_t cap, int64_t z0,
                      int64_t nz, int64_t f, sf__h5_run *runs, int max)
{
  const sf__placement *L = &s->L;
  const int64_t lo = L->core0[r] > z0 ? L->core0[r] : z0;
  const int64_t hi = L->core1[r] < z0 + nz ? L->core1[r] : z0 + nz;
  int n = 0;
  for (int64_t z = lo; z < hi;) {
    int64_t end;
    const int reader = sf__placement_reader(L, z, &end);
    if (end > hi)
      end = hi;
    for (int64_t a = z; reader == r && a < end; a += cap) {
      const int64_t len = end - a < cap ? end - a : cap;
      if (runs != NULL && n < max)
        runs[n] = (sf__h5_run){
            f * (a - z0), f * len,
            f * f * f * sf__store_at(s, r, a - L->core0[r] + L->lo[r])};
      n++;
    }
    z = end;
  }
  return n;
}

double sf__slab_bytes(const sf__store *s, int d, int64_t channels,
                      const int64_t yx[2], int64_t z0, int64_t nz)
{
  const int64_t f = s->scale[d];
  const int n = store_runs(s, s->rank, (int64_t)1 << 40, z0, nz, f, NULL, 0);
  sf__h5_run *runs = n > 0 ? calloc((size_t)n, sizeof *runs) : NULL;
  double planes = 0;
  if (runs != NULL) {
    store_runs(s, s->rank, (int64_t)1 << 40, z0, nz, f, runs, n);
    for (int i = 0; i < n; i++)
      planes += (double)runs[i].n;
  }
  free(runs);
  return planes * (double)yx[0] * (double)yx[1] * (double)channels *
         sizeof(float);
}

slabfeed_status sf__slab_read(sf__store *s, int d, int64_t c0, hid_t dset,
                              const char *path, const char *name,
                              const slabfeed_dataset_info *info, int64_t z0,
                              int64_t nz, int mode, sf__sink *sink,
                              sf__progress *pg, sf__err *e)
{
  /* One channel's read stays below 1 GiB: large MPI-IO requests overflow
   * int counts in some MPI-IO stacks; with a sink, within its buffer. */
  /* A dataset of scale f (its file f x the planes' grid): runs of base
   * planes read as f x the file's planes, at f^3 x the offsets. */
  const int64_t f = s->scale[d];
  const int64_t plane = info->shape[1] * info->shape[2] * f;
  int64_t cap = ((int64_t)1 << 30) / (plane * (int64_t)sizeof(float));
  if (sink != NULL && sink->floats / plane < cap)
    cap = sink->floats / plane;
  if (cap < 1)
    cap = 1;
  int max_runs = 0;
  for (int r = 0; r < s->size; r++) {
    const int n = store_runs(s, r, cap, z0, nz, f, NULL, 0);
    max_runs = n > max_runs ? n : max_runs;
  }
  /* Without a plan (no memory) this rank still makes its collective calls,
   * with nothing to transfer. */
  sf__h5_run *runs = calloc((size_t)max_runs + 1, sizeof *runs);
  if (runs == NULL)
    sf__fail(e, SLABFEED_ERR_NOMEM, "cannot allocate the read plan");
  else
    store_runs(s, s->rank, cap, z0, nz, f, runs,
               max_runs); /* the rest stay empty */
  float *dst = sf__store_channel(s, d, c0);
  sf__h5_read(dset, path, name, info, runs, max_runs, dst,
              s->cube[d] * sf__store_chan(s, s->rank), mode,
              sf__core_share(s->node_size), sink, pg, e);
  free(runs);
  return e->status;
}
