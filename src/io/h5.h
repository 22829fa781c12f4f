/* Parallel HDF5: open a file on all ranks, validate 4-D float datasets,
 * read runs of z-planes of every channel into a channels-first buffer. */
#ifndef SF_H5_H
#define SF_H5_H

#include <hdf5.h>

#include "common/errors.h"
#include "common/progress.h"
#include "io/sink.h"

/* True when this build reads with parallel HDF5 (MPI-IO, collective). */
int sf__h5_is_parallel(void);

/* HDF5's automatic error printing, switched off for the library's calls. */
typedef struct sf__h5_quiet {
  H5E_auto2_t func;
  void *data;
} sf__h5_quiet;
void sf__h5_quiet_begin(sf__h5_quiet *q);
void sf__h5_quiet_end(const sf__h5_quiet *q);

/* Local checks of a file about to be opened collectively, so that a
 * failure on one rank (missing on a node-local path, no permission, not a
 * regular file, a path that Open MPI's lockedfile component cannot take)
 * is found before any collective HDF5 call. `for_write`: the file will be
 * created (its directory must be writable). */
slabfeed_status sf__h5_preflight(const char *path, int for_write, sf__err *e);

/* Size of the file at path in bytes (0 when it cannot be read). */
uint64_t sf__h5_file_bytes(const char *path);

/* Fails when the file shrank below `before` bytes (its size before the
 * read; 0: not known) or, for contiguous storage, ends before the data of
 * dataset dset (`name`): a file truncated, or still being written, would
 * otherwise read zeros. Local; call after the slabs are read. */
slabfeed_status sf__h5_check_size(hid_t dset, const char *path,
                                  const char *name, uint64_t before,
                                  sf__err *e);

/* Collective over comm when HDF5 is parallel (MPI-IO driver, collective
 * metadata reads); otherwise every rank opens the file on its own. Opens
 * `path` read-only into *file. */
slabfeed_status sf__h5_open(MPI_Comm comm, const char *path, hid_t *file,
                            sf__err *e);

/* Name and values of the attribute that records a dataset's layout
 * (written by slabfeed-gen; AUTO follows it instead of the shape). */
#define SF_LAYOUT_ATTR "layout"

/* Writes the layout attribute ("cf" or "cl") of a dataset just created. */
herr_t sf__h5_write_layout(hid_t dset, int cf);

/* The element type slabfeed writes: IEEE float32, or (float16) IEEE
 * binary16 little endian, which HDF5 1.10 has no predefined type for. The
 * caller closes it. */
hid_t sf__h5_file_type(int float16);

/* Whether dset is an HDF5 virtual dataset (stitched from other files),
 * which HDF5 1.10 reads without MPI-IO only. */
int sf__h5_is_virtual(hid_t dset);

#ifdef H5_HAVE_PARALLEL
/* H5Pset_fapl_mpio on fapl over comm with slabfeed's MPI-IO hints: ROMIO's
 * data sieving off for reads and writes (unless the user gives ROMIO
 * hints through ROMIO_HINTS or MPICH_MPIIO_HINTS). Every file slabfeed
 * opens or creates goes through it. */
herr_t sf__h5_set_mpio(hid_t fapl, MPI_Comm comm);
#endif

/* Writes (or reads) planes [z, z + n) of every channel of the 4-D dataset
 * dset (channels-first when cf, else channels-last; a rank-3 dataset
 * (Z,Y,X) is one channel, cf ignored) from (into) buf, laid
 * out contiguously as in the file, elements of type mtype. n == 0 is an
 * empty transfer that still takes part in a collective one. Returns the
 * HDF5 status. */
herr_t sf__h5_transfer_planes(hid_t dset, int cf, int64_t z, int64_t n,
                              hid_t dxpl, hid_t mtype, int write, void *buf);

/* The same with a buffer that holds mz planes in the file's layout
 * (channels-first: [C][mz][Y][X]) of which the transfer takes planes
 * [mq, mq + n): a rank's whole slab, written run by run in place. */
herr_t sf__h5_transfer_planes_in(hid_t dset, int cf, int64_t z, int64_t n,
                                 int64_t mz, int64_t mq, hid_t dxpl,
                                 hid_t mtype, int write, void *buf);

/* Opens dataset `name` of `file` and checks it: rank 4, floating point,
 * layout resolved from `want` (AUTO follows the "layout" attribute, else
 * decides from the shape and refuses ambiguous shapes). On success *dset
 * is open and *info filled. When the dataset exists, *dset stays open even
 * if a check fails, so that collective calls keep matching; the caller
 * closes it. */
slabfeed_status sf__h5_dataset(hid_t file, const char *path, const char *name,
                               slabfeed_file_layout want, hid_t *dset,
                               slabfeed_dataset_info *info, sf__err *e);

/* A transfer of planes [z, z+n) of the box (no wrap) of every channel into
 * dst, each channel's n dense planes (the dataset's own y and x) from its
 * float `off` on. n == 0 is an empty transfer, still taking part in
 * collective reads. */
typedef struct sf__h5_run {
  int64_t z, n, off;
} sf__h5_run;

/* How sf__h5_read reads (flags; 0: collective MPI-IO). */
#define SF_H5_INDEPENDENT 1 /* independent MPI-IO */
#define SF_H5_DIRECT 2      /* pread where direct_ok, else as the rest says */

/* Local (metadata; the same calls on every rank for a chunked dataset,
 * whose chunks it counts). 1 when dataset dset can be read with plain
 * pread where its values lie: stored in the file itself and all
 * allocated, contiguously or in chunks without filters, IEEE float32 or
 * binary16 little endian, channels first or last. */
int sf__h5_direct_ok(hid_t dset, const slabfeed_dataset_info *info);

/* Local: dset must be of a handle of the file opened by this rank alone
 * (serial HDF5), as chunk lookups differ from rank to rank. The ranges of
 * bytes of path holding planes [z0, z1) of every channel of dset
 * (slabfeed_stored_ranges: the same rule), the first cap of them into
 * out, their count into *n. SLABFEED_ERR_FORMAT in *e where the values
 * are not at known offsets. */
slabfeed_status sf__h5_ranges(hid_t dset, const char *path, const char *name,
                              const slabfeed_dataset_info *info, int64_t z0,
                              int64_t z1, slabfeed_byte_range *out, int64_t cap,
                              int64_t *n, sf__err *e);

/* Local: no collective call (dset's handle must allow this rank's own
 * metadata reads: not collective metadata reads). Writes planes
 * [z, z + n) of every channel of dataset dset, stored where
 * sf__h5_direct_ok reads it (contiguous, or in allocated chunks without
 * filters; channels last: chunks of every channel), IEEE float32 or
 * binary16 little endian, with pwrite on up to `threads` threads into
 * path where the values lie (the writer's direct writes: contiguous
 * outputs since 0.9, chunked ones since 0.10). The values come from src:
 * channels first, channel k's n dense planes (y x x) cstride floats after
 * channel 0's; channels last, n planes of every voxel's C values side by
 * side. Each plane's rows of a chunk are one range of the file, so ranks
 * writing different planes of one chunk write disjoint bytes; a chunk's
 * values past the dataset's y and x edges are written as zeros, its
 * planes past the last plane are left as they are (HDF5 never returns
 * them). The bytes
 * written count in pg (NULL: none). A failure in *e names the planes,
 * the chunk, the dataset and the file. */
slabfeed_status sf__h5_write_direct(hid_t dset, const char *path,
                                    const char *name,
                                    const slabfeed_dataset_info *info,
                                    int64_t z, int64_t n, const float *src,
                                    int64_t cstride, int threads,
                                    sf__progress *pg, sf__err *e);

/* Collective when HDF5 is parallel and mode has no SF_H5_DIRECT that the
 * dataset allows (then each rank reads alone): every rank calls it with
 * the same n_runs (pad with n == 0 runs) and mode. Reads the runs of
 * dataset dset. A rank
 * whose *e already holds a failure, or that fails on the way, goes on with
 * empty transfers so that every rank makes the same collective calls.
 * Datasets whose storage is not fully allocated (chunks never written,
 * read as the fill value) are read with independent I/O: collective reads
 * of them hang or fail in HDF5 1.10. runs == NULL: n_runs empty runs.
 * dst's channels are cstride floats apart. mode SF_H5_INDEPENDENT:
 * independent I/O even for a fully allocated dataset; SF_H5_DIRECT: pread
 * on up to `threads` threads where its values lie, where
 * sf__h5_direct_ok (every rank must pass the same; chunks are found
 * through a handle of the file of this rank alone).
 * Each run read counts its bytes (as float32) in pg (NULL: no progress).
 * A float16 dataset is widened to float32 on up to `threads` threads of
 * this rank (0: up to 8, the cores permitting; the caller passes the
 * node's cores over its ranks so that a node's ranks do not oversubscribe
 * its cores). With a sink (NULL: none), every transfer of a run's channel
 * lands in the sink's buffer instead and is handed to it with its place
 * in dst (io/sink.h; the caller keeps each transfer within sink->floats):
 * dst is then only the layout, never written. */
slabfeed_status sf__h5_read(hid_t dset, const char *path, const char *name,
                            const slabfeed_dataset_info *info,
                            const sf__h5_run *runs, int n_runs, float *dst,
                            int64_t cstride, int mode, int threads,
                            sf__sink *sink, sf__progress *pg, sf__err *e);

/* Local. Whether path lies on a node-local or memory filesystem (statfs:
 * tmpfs, ramfs, ext2/3/4, xfs, btrfs, overlay, zfs, f2fs), where
 * independent reads beat MPI-IO's aggregation; its name into fs (len
 * bytes; "unknown" when statfs fails). */
int sf__h5_local_fs(const char *path, char *fs, size_t len);

/* Local (metadata only). The numeric attribute `name` of `file` (path
 * for messages): "ATTR" on the root group, "OBJ/ATTR" on the group or
 * dataset OBJ. Into *value: 1 when found, 0 when there is no such object
 * or attribute (nothing in *e), -1 when it is there but not one integer
 * or floating-point number (a failure in *e naming file and name). */
int sf__h5_number_attr(hid_t file, const char *path, const char *name,
                       double *value, sf__err *e);

/* Appends HDF5's innermost error description (if any) to *e's message. */
void sf__h5_detail(sf__err *e);

#endif
