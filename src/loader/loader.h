/* The loader facade: the handle behind slabfeed_open/next/seek/close and
 * the fork registry. It owns the options, the store, the batch plan and the
 * statistics, and drives one back end through backend.h. */
#ifndef SF_LOADER_H
#define SF_LOADER_H

#include "backend/backend.h"

struct slabfeed_loader {
  sf__config cfg;
  MPI_Comm comm; /* duplicate of the caller's */
  int rank, thread_level;
  sf__store store;
  sf__suite suite; /* the volumes of the dataset (io/suite.h) */
  sf__batch_plan plan;
  sf__stats stats;
  const sf__backend_ops *ops;
  sf__backend *backend;
  uint64_t epoch, step; /* position of the next batch */
  volatile int forked;
  char last_error[SF_ERRLEN];
  char read_how[480]; /* how the open's slab reads went (io/volume.h) */
  char huge_how[160]; /* what the segment's pages are (sf__huge_report) */
  int as_file;        /* the open's read wrote the segment as its file (0.12) */
  int file_mpiio;     /* segment files: fields MPI-IO read into them */
  int mpiio_populated;  /* what MPI-IO wrote into segment files was populated
                           first (those fields, or the whole segment) */
  char reside_how[512]; /* device batches: where crops are read from
                           (as long as sf__resident.how) */
  void *early;          /* what the back end's prepare made (backend.h) */
  struct slabfeed_loader *next_live; /* registry for the fork handler */
};

#endif
