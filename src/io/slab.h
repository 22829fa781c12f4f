/* The parallel HDF5 read of this rank's slab (core planes plus halo) of one
 * dataset into its segment of the store. Sits between the store (where the
 * bytes go) and the h5 layer (how they are read). */
#ifndef SF_SLAB_H
#define SF_SLAB_H

#include <hdf5.h>

#include "common/progress.h"
#include "io/sink.h"
#include "store/store.h"

/* Collective over the store's communicator (every rank makes the same
 * number of collective H5Dread calls, empty ones included). Reads a field
 * of dataset d (opened as dset, described by *info) into its channels from
 * c0 on (0 for a dataset of one field) of this rank's segment, in runs of
 * at most ~1 GiB per call. The file is the volume that holds planes
 * [z0, z0 + nz) of the stacked box (io/suite.h; 0 and Z for one volume):
 * only the planes of this rank inside it are read, at the volume's own
 * plane size (store.h). A rank whose *e
 * already holds a failure takes part with empty transfers. With a sink
 * (io/sink.h; the same on every rank, or NULL on every rank) the planes
 * go through it, in runs of at most sink->floats, and the segment is not
 * written; its buffer must hold one plane of the dataset's grid (f^3 x
 * a plane of the planes' grid). mode: sf__h5_read's (SF_H5_*). */
/* Local. The bytes (as float32) this rank reads of a field of dataset d
 * with `channels` channels in the volume of planes [z0, z0 + nz) (the
 * input's grid), whose file planes have yx[0] x yx[1] elements (the
 * dataset's own grid: a dataset of scale f has f file planes per plane). */
double sf__slab_bytes(const sf__store *s, int d, int64_t channels,
                      const int64_t yx[2], int64_t z0, int64_t nz);

slabfeed_status sf__slab_read(sf__store *s, int d, int64_t c0, hid_t dset,
                              const char *path, const char *name,
                              const slabfeed_dataset_info *info, int64_t z0,
                              int64_t nz, int mode, sf__sink *sink,
                              sf__progress *pg, sf__err *e);

#endif
