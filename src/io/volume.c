#include "io/volume.h"

#include <string.h>

#include "common/inject.h"
#include "common/nvtx.h"
#include "io/slab.h"

/* A local failure injected for tests at `stage` (inject.h). */
static void injected(const sf__volume *v, const char *stage, sf__err *e)
{
  if (sf__inject(stage, v->rank))
    sf__fail(e, SLABFEED_ERR_IO, "injected failure at stage '%s' (test)",
             stage);
}

slabfeed_status sf__volume_open(sf__volume *v, MPI_Comm comm, int rank,
                                const sf__config *c, sf__err *e)
{
  memset(v, 0, sizeof *v);
  v->cfg = c;
  v->comm = comm;
  v->rank = rank;
  v->file = H5I_INVALID_HID;
  v->dsets[0] = v->dsets[1] = H5I_INVALID_HID;
  sf__h5_quiet_begin(&v->quiet);
  sf__h5_preflight(c->path, 0, e);
  if (sf__agree(comm, e) != SLABFEED_OK)
    return e->status;
  sf__h5_open(comm, c->path, &v->file, e);
  injected(v, "open", e);
  if (sf__agree(comm, e) != SLABFEED_OK)
    return e->status;
  for (int d = 0; d < c->ndsets; d++)
    sf__h5_dataset(v->file, c->path, sf__config_dataset(c, d), c->pub.layout,
                   &v->dsets[d], &v->info[d], e);
  injected(v, "dataset", e);
  if (e->status == SLABFEED_OK)
    sf__config_check_data(c, v->info, e);
  return sf__agree(comm, e);
}

slabfeed_status sf__volume_read(sf__volume *v, sf__store *s, sf__err *e)
{
  const sf__config *c = v->cfg;
  SF_RANGE_PUSH("read");
  const uint64_t before = sf__h5_file_bytes(c->path);
  for (int d = 0; d < c->ndsets; d++) {
    injected(v, d == 0 ? "read.input" : "read.target", e);
    sf__slab_read(s, d, v->dsets[d], c->path, sf__config_dataset(c, d),
                  &v->info[d], e);
  }
  for (int d = 0; d < c->ndsets && e->status == SLABFEED_OK; d++)
    sf__h5_check_size(v->dsets[d], c->path, sf__config_dataset(c, d), before,
                      e);
  SF_RANGE_POP();
  return sf__agree(v->comm, e);
}

void sf__volume_close(sf__volume *v)
{
  if (v->cfg == NULL)
    return;
  for (int d = 0; d < 2; d++)
    if (v->dsets[d] >= 0)
      H5Dclose(v->dsets[d]);
  if (v->file >= 0)
    H5Fclose(v->file);
  v->dsets[0] = v->dsets[1] = v->file = H5I_INVALID_HID;
  sf__h5_quiet_end(&v->quiet);
  v->cfg = NULL;
}
