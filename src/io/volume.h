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
#include "io/suite.h"
#include "store/store.h"

/* The opened dataset: the list of its volumes and the stacked box. Fields
 * are this module's; the caller reads info and suite. */
typedef struct sf__volume {
  const sf__config *cfg;
  MPI_Comm comm;
  int rank;
  sf__suite suite;                     /* the volumes, stacked along z */
  sf__suite fsuite[2][SF_MAX_FIELDS];  /* the files of fields with files of
                                          their own (n 0: the volume's) */
  slabfeed_dataset_info info[2];       /* input, target of the stacked box (z:
                                          the sum of the volumes' planes), valid
                                          after open */
  int64_t fchannels[2][SF_MAX_FIELDS]; /* channels of each field, alike in
                                          every volume (checked) */
  sf__h5_quiet quiet; /* HDF5's error stack, silenced while open */
  char read_how[448]; /* after the read: "independent MPI-IO (read_mode
                         auto, tmpfs)" (rank 0 names the filesystem) */
  int read_flags;     /* the first file's SF_H5_* read flags */
  int read_direct;    /* after the read: datasets read with pread, */
  int read_other;     /* and read otherwise (MPI-IO) */
  int populate_mpiio; /* in: threads that populate a field's pages before
                         MPI-IO writes them, where the caller left the
                         segment unfaulted for direct reads (0 or 1: none) */
  int read_mpiio;     /* fields read through MPI-IO in some volume, for
                         any reason (each field counted once) */
  int read_populated; /* of those, fields populated first (populate_mpiio) */
} sf__volume;

/* Collective over comm. Expands the path spec (io/suite.h) on rank 0 and
 * shares the list; then, for every volume in turn, checks the file
 * locally (agreed, so that a file missing on one rank is found before any
 * collective HDF5 call), opens it with MPI-IO and every dataset, checks
 * them against the options and against the first volume (channels,
 * element type and layout; the shapes may differ), and closes it.
 * Every rank returns the same status, naming the file; call
 * sf__volume_close in any case. */
slabfeed_status sf__volume_open(sf__volume *v, MPI_Comm comm, int rank,
                                const sf__config *c, sf__err *e);

/* Local. Stacks the volumes along z (suite.z0) and sets the stacked box
 * (info): volume i's planes follow volume i-1's, in planes of the largest
 * y, x extents of the stacked volumes; with w, a volume of weight w[i] 0
 * takes no planes (held out: never read, nothing of it in memory). Open
 * stacks every volume; the loader stacks again once the weights are
 * known, before the store is sized. */
void sf__volume_stack(sf__volume *v, const uint64_t *w);

/* Local. 1 when the open's read of path is to be direct (pread where the
 * values lie): read_mode direct, or auto on a node-local or memory
 * filesystem, whose name goes into fs (len bytes; "" where not asked).
 * The rule sf__volume_read applies, rank 0's answer for all; a rank may
 * ask it for work of its own before the read. */
int sf__volume_direct_wanted(const sf__volume *v, const char *path, char *fs,
                             size_t len);

/* Collective over comm. Reads every dataset's slab into this rank's segment
 * of s, volume by volume (every rank opens every file and takes part in
 * every read, with empty transfers after a local failure), then checks
 * that no file shrank meanwhile. Every rank returns the same status.
 * With a sink (every rank one, or none) the slabs go through it instead
 * of into the segments (sf__slab_read). */
slabfeed_status sf__volume_read(sf__volume *v, sf__store *s, sf__sink *sink,
                                sf__err *e);

/* Closes what open opened (any state; idempotent). Local. */
void sf__volume_close(sf__volume *v);

#endif
