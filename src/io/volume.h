/* The file access of a loader: the HDF5 file and the datasets it reads,
 * from the checks before the collective open to the slab reads and the
 * size check after them. The loader above sees only what the datasets are
 * (slabfeed_dataset_info) and a filled store: a dataset of many files is a
 * change of this module, not of the facade. */
#ifndef SF_VOLUME_H
#define SF_VOLUME_H

#include <hdf5.h>

#include "config/config.h"
#include "io/h5.h"
#include "store/store.h"

/* One opened volume. Fields are this module's; the caller reads info. */
typedef struct sf__volume {
  const sf__config *cfg;
  MPI_Comm comm;
  int rank;
  hid_t file;
  hid_t dsets[2];
  slabfeed_dataset_info info[2]; /* input, target: valid after open */
  sf__h5_quiet quiet;            /* HDF5's error stack, silenced while open */
} sf__volume;

/* Collective over comm. Checks the file locally (agreed, so that a file
 * missing on one rank is found before any collective HDF5 call), opens it
 * with MPI-IO and every dataset (every rank opens every dataset, failed
 * or not) and checks them against the options. Every rank returns the
 * same status; call sf__volume_close in any case. */
slabfeed_status sf__volume_open(sf__volume *v, MPI_Comm comm, int rank,
                                const sf__config *c, sf__err *e);

/* Collective over comm. Reads every dataset's slab into this rank's segment
 * of s (every rank takes part in every read, with empty transfers after a
 * local failure), then checks that the file did not shrink meanwhile.
 * Every rank returns the same status. */
slabfeed_status sf__volume_read(sf__volume *v, sf__store *s, sf__err *e);

/* Closes what open opened (any state; idempotent). Local. */
void sf__volume_close(sf__volume *v);

#endif
