/* slabfeed-dump: run the loader for K steps on P ranks and write every
 * rank's samples, in global sample order, to one HDF5 file.
 *
 * Rank 0 writes. At each step it writes its own batch, then receives each
 * other rank's batch in turn (MPI_Send/MPI_Recv of MPI_BYTE in pieces of
 * at most 1 GiB: MPI counts are int) into the same buffers and writes it:
 * it holds one batch per dataset, never P of them.
 *
 * Failures stay collective: once per step, before the step's transfer,
 * every rank meets the others at an agreement point (cli_agree) that
 * carries this step's loader status of every rank and rank 0's write
 * status of the step before; one more point follows the rename. A rank
 * that fails goes straight to the next point without any other collective
 * call; there all ranks leave together with the first failing rank's
 * message.
 *
 * Data is never lost: --out may not be an input (the same name, or the
 * same file by device and inode, as any volume of the path spec: rank 0
 * expands it as the loader does), a usage error on every rank; after the
 * open, rank 0 checks again against the loader's own list of volumes. A
 * glob pattern of --file that would match the partial file is refused
 * too (the loader would take it for a volume). An existing --out (not a
 * directory: the aside refuses that with its own message) is replaced only
 * with --overwrite, the rule of slabfeed-gen and slabfeed-predict: rank 0
 * checks and every rank agrees before anything is created. The file is
 * written aside with the library's slabfeed_aside_* (what
 * slabfeed_generate uses): before the loader runs, every rank agrees that
 * --out can be replaced and rank 0 creates
 * <out>.slabfeed-partial.<pid of rank 0>; at step 0, when the size is
 * known, rank 0 reserves the space (file size limit, free space, the
 * blocks); the file is renamed over <out> only when every row is written
 * and the file is closed and synced. On any failure, and on SIGINT,
 * SIGTERM or SIGHUP, the partial file is removed and an earlier <out>
 * stays as it was.
 *
 * Per sample the file holds its origin (in its volume's coordinates),
 * symmetry, sample index, epoch and volume (index into the dataset
 * `volume_path`, the loader's list of files: one entry for one file).
 *
 * Test knob: SLABFEED_DUMP_CHUNK_BYTES (rank 0's value, broadcast), the
 * piece size of the transfer in bytes (1 .. 2^30, default 2^30), lets a
 * test cut every batch into many pieces. */
#include <errno.h>
#include <hdf5.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "slabfeed_tools.h"
#include "spec.h"

static const char *prog = "slabfeed-dump";

#define PIECE_ENV "SLABFEED_DUMP_CHUNK_BYTES"
#define PIECE_MAX ((int64_t)1 << 30)

enum {
  N_META = 7,   /* per sample: origin z,y,x, symmetry, sample, epoch, volume */
  TAG_META = 2, /* tags 0 and 1 carry the input and the target */
  N_DSET = 7    /* datasets written per row (volume_path is apart) */
};

/* The output file: the aside it is written through (every rank), and on
 * rank 0 the file and its datasets of one row per sample (input, target,
 * origin, symmetry, sample, sample_epoch, volume); -1 where not open. */
typedef struct out_file {
  const char *out;                 /* --out */
  slabfeed_aside *aside;           /* until committed or aborted */
  const char *partial;             /* the name written: slabfeed_aside_name */
  hid_t file, dset[N_DSET], mtype; /* mtype: memory type of batch elements */
  int64_t *org, *smp, *ep;         /* one step's metadata columns */
  int32_t *sym, *vol;
} out_file;

/* Everything a step needs. */
typedef struct dump_state {
  int rank, size, nd;
  slabfeed_config cfg;
  slabfeed_loader *l;
  uint64_t epoch;
  hsize_t rows;           /* all samples of the run: steps * P * B */
  size_t piece;           /* bytes per message of the transfer */
  size_t es;              /* bytes per element */
  size_t sample_elems[2]; /* elements of one sample of input and target */
  size_t bytes[2];        /* bytes of one batch of input and target */
  void *buf[2];           /* this rank's batch (rank 0: any rank's) */
  int64_t *meta;          /* [B][N_META]; rank 0: [P][B][N_META] */
  uint64_t paths_bytes;   /* of the dataset volume_path */
  out_file of;
} dump_state;

/* ---- HDF5 helpers ---------------------------------------------------------
 */

/* Creates dataset `name` of the given type and shape in file. `early`:
 * its space is taken at once (without writing fill values), so that the
 * small metadata datasets lie before the batches and the file fills in
 * row order; the batches' space is taken at their first write. */
static hid_t make_dset(hid_t file, const char *name, hid_t type, int rank,
                       const hsize_t *dims, int early)
{
  const hid_t s = H5Screate_simple(rank, dims, NULL);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  hid_t d = -1;
  if (s >= 0 && dcpl >= 0 &&
      (!early || (H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) >= 0 &&
                  H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0)))
    d = H5Dcreate2(file, name, type, s, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  if (dcpl >= 0)
    H5Pclose(dcpl);
  if (s >= 0)
    H5Sclose(s);
  return d;
}

/* The file type of a batch element: float32, IEEE half, or bf16 bits
 * stored as uint16 (HDF5 has no bf16). */
static hid_t out_type(slabfeed_dtype d)
{
  if (d == SLABFEED_DTYPE_F32)
    return H5Tcopy(H5T_IEEE_F32LE);
  if (d == SLABFEED_DTYPE_BF16)
    return H5Tcopy(H5T_STD_U16LE); /* bf16 bits */
  const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, 10, 5, 0, 10);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, 15);
  return t;
}

/* The file attribute `element_type`: how input and target elements are
 * stored, for readers that see only HDF5 types (bf16 looks like uint16). */
static const char *element_type(slabfeed_dtype d)
{
  if (d == SLABFEED_DTYPE_BF16)
    return "bf16 bits in uint16 (the upper half of a float32: widen with "
           "bits << 16)";
  return d == SLABFEED_DTYPE_F16 ? "float16 (IEEE half)" : "float32";
}

/* Writes rows [row, row+n) of dataset d from buf (memory type mtype);
 * 0 or -1. */
static int write_rows(hid_t d, hid_t mtype, hsize_t row, hsize_t n,
                      const void *buf)
{
  const hid_t fs = H5Dget_space(d);
  if (fs < 0)
    return -1;
  hsize_t dims[6], start[6] = {0}, count[6];
  const int rank = H5Sget_simple_extent_dims(fs, dims, NULL);
  for (int a = 0; a < rank; a++)
    count[a] = dims[a];
  start[0] = row;
  count[0] = n;
  const hid_t ms = rank < 1 ? -1 : H5Screate_simple(rank, count, NULL);
  const int rc = ms < 0 ||
                         H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL,
                                             count, NULL) < 0 ||
                         H5Dwrite(d, mtype, ms, fs, H5P_DEFAULT, buf) < 0
                     ? -1
                     : 0;
  if (ms >= 0)
    H5Sclose(ms);
  H5Sclose(fs);
  return rc;
}

/* Writes a scalar uint64 attribute on the file; 0 or -1. */
static int attr_u64(hid_t file, const char *name, uint64_t v)
{
  const hid_t s = H5Screate(H5S_SCALAR);
  const hid_t a =
      H5Acreate2(file, name, H5T_STD_U64LE, s, H5P_DEFAULT, H5P_DEFAULT);
  const int rc = a < 0 || H5Awrite(a, H5T_NATIVE_UINT64, &v) < 0 ? -1 : 0;
  if (a >= 0)
    H5Aclose(a);
  H5Sclose(s);
  return rc;
}

/* Writes a fixed-length string attribute on the file; 0 or -1. */
static int attr_str(hid_t file, const char *name, const char *v)
{
  const hid_t s = H5Screate(H5S_SCALAR);
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, strlen(v) + 1);
  const hid_t a = H5Acreate2(file, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  const int rc = a < 0 || H5Awrite(a, t, v) < 0 ? -1 : 0;
  if (a >= 0)
    H5Aclose(a);
  H5Tclose(t);
  H5Sclose(s);
  return rc;
}

/* The cause of the last failed write, for messages: errno when the failed
 * call set it (HDF5's POSIX driver leaves it from write(2)), else a
 * general hint. Call with errno cleared before the failing call. */
static const char *write_cause(void)
{
  return errno != 0 ? strerror(errno) : "HDF5 write error";
}

/* ---- The output file (rank 0) --------------------------------------------
 */

/* Why writing out would overwrite the volume `in` (volume v of n): the
 * same name, or the same file by device and inode (a link, another
 * spelling of the path). "" when it would not. */
static void overwrites_input(const char *in, int v, int n, const char *out,
                             char *why, size_t len)
{
  struct stat a, b;
  why[0] = '\0';
  const int same = strcmp(in, out) == 0;
  if (!same && !(stat(in, &a) == 0 && stat(out, &b) == 0 &&
                 a.st_dev == b.st_dev && a.st_ino == b.st_ino))
    return;
  if (n > 1)
    snprintf(why, len,
             "--out '%s' %s volume %d of %d of --file ('%s'): the dump "
             "would overwrite a volume it reads",
             out, same ? "is" : "is the same file as", v, n, in);
  else if (same)
    snprintf(why, len,
             "--out '%s' is the input file (--file): the dump would "
             "overwrite the volume it reads",
             out);
  else
    snprintf(why, len,
             "--out '%s' is the same file as --file '%s': the dump would "
             "overwrite the volume it reads",
             out, in);
}

/* Rank 0, before the loader runs: creates the HDF5 file under the name
 * the aside chose (its checks of --out are done). */
static void create_output(out_file *of, slabfeed_status *st, char *msg,
                          size_t len)
{
  of->partial = slabfeed_aside_name(of->aside);
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS); /* sec2: see detach_file */
  errno = 0;
  if (fapl >= 0 && H5Pset_fapl_sec2(fapl) >= 0)
    of->file = H5Fcreate(of->partial, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  if (fapl >= 0)
    H5Pclose(fapl);
  if (of->file < 0)
    cli_note(st, msg, len, SLABFEED_ERR_IO,
             "cannot write '%s': creating '%s': %s", of->out, of->partial,
             write_cause());
}

/* Rank 0 at step 0: the dataset volume_path, the loader's list of files
 * (slabfeed_volume_info) as fixed-length strings, one per volume: what the
 * dataset `volume` indexes. 0 or -1. */
static int write_volume_paths(dump_state *D)
{
  const int n = slabfeed_volume_count(D->l);
  size_t longest = 1;
  char path[CLI_PATH_MAX];
  for (int v = 0; v < n; v++)
    if (slabfeed_volume_info(D->l, v, path, sizeof path, NULL) == SLABFEED_OK &&
        strlen(path) + 1 > longest)
      longest = strlen(path) + 1;
  char *all = n > 0 ? calloc((size_t)n, longest) : NULL;
  if (all == NULL)
    return -1;
  D->paths_bytes = (uint64_t)n * longest;
  for (int v = 0; v < n; v++)
    slabfeed_volume_info(D->l, v, all + (size_t)v * longest, longest, NULL);
  const hid_t t = H5Tcopy(H5T_C_S1);
  const hsize_t dims = (hsize_t)n;
  int rc = t < 0 || H5Tset_size(t, longest) < 0 ||
           H5Tset_strpad(t, H5T_STR_NULLTERM) < 0;
  const hid_t d =
      rc ? -1 : make_dset(D->of.file, "volume_path", t, 1, &dims, 0);
  rc = rc || d < 0 || H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) < 0;
  if (d >= 0)
    rc |= H5Dclose(d) < 0;
  if (t >= 0)
    H5Tclose(t);
  free(all);
  return rc ? -1 : 0;
}

/* Rank 0 at step 0: the datasets with the shapes of batch b and rows
 * D->rows, the file's attributes, the memory type and the metadata
 * columns of one step. */
static void create_datasets(dump_state *D, const slabfeed_batch *b,
                            slabfeed_status *st, char *msg, size_t len)
{
  out_file *of = &D->of;
  const slabfeed_config *cfg = &D->cfg;
  for (int d = 0; d < D->nd; d++) {
    const slabfeed_tensor *t = d == 0 ? &b->input : &b->target;
    const hsize_t sample_bytes = (hsize_t)D->sample_elems[d] * D->es;
    if (sample_bytes != 0 && D->rows > (hsize_t)INT64_MAX / sample_bytes) {
      cli_note(st, msg, len, SLABFEED_ERR_ARG,
               "cannot write '%s': %llu samples of %llu bytes are more than "
               "a file can hold",
               of->out, (unsigned long long)D->rows,
               (unsigned long long)sample_bytes);
      return;
    }
    const hsize_t dims[5] = {D->rows, (hsize_t)t->shape[1],
                             (hsize_t)t->shape[2], (hsize_t)t->shape[3],
                             (hsize_t)t->shape[4]};
    const hid_t ty = out_type(cfg->dtype);
    of->dset[d] =
        make_dset(of->file, d == 0 ? "input" : "target", ty, 5, dims, 0);
    H5Tclose(ty);
  }
  const hsize_t o2[2] = {D->rows, 3};
  of->dset[2] = make_dset(of->file, "origin", H5T_STD_I64LE, 2, o2, 1);
  of->dset[3] = make_dset(of->file, "symmetry", H5T_STD_I32LE, 1, &D->rows, 1);
  of->dset[4] = make_dset(of->file, "sample", H5T_STD_I64LE, 1, &D->rows, 1);
  of->dset[5] =
      make_dset(of->file, "sample_epoch", H5T_STD_I64LE, 1, &D->rows, 1);
  of->dset[6] = make_dset(of->file, "volume", H5T_STD_I32LE, 1, &D->rows, 1);
  of->mtype = cfg->dtype == SLABFEED_DTYPE_F16    ? out_type(SLABFEED_DTYPE_F16)
              : cfg->dtype == SLABFEED_DTYPE_BF16 ? H5Tcopy(H5T_NATIVE_UINT16)
                                                  : H5Tcopy(H5T_NATIVE_FLOAT);
  int bad = of->mtype < 0;
  for (int d = 0; d < N_DSET; d++)
    bad |= (d < D->nd || d >= 2) && of->dset[d] < 0;
  errno = 0;
  if (bad || write_volume_paths(D) != 0 ||
      attr_u64(of->file, "seed", cfg->seed) != 0 ||
      attr_u64(of->file, "epoch", D->epoch) != 0 ||
      attr_u64(of->file, "first_step", 0) != 0 ||
      attr_str(of->file, "dtype", cli_dtype_name(cfg->dtype)) != 0 ||
      attr_str(of->file, "element_type", element_type(cfg->dtype)) != 0 ||
      attr_str(of->file, "layout",
               cfg->out_layout == SLABFEED_OUT_NDHWC ? "ndhwc" : "ncdhw") !=
          0) {
    cli_note(st, msg, len, SLABFEED_ERR_IO,
             "cannot write '%s': creating the datasets of %llu samples in "
             "'%s' failed: %s",
             of->out, (unsigned long long)D->rows, of->partial, write_cause());
    return;
  }
  const size_t n = (size_t)D->size * (size_t)cfg->batch;
  of->org = malloc(n * 3 * sizeof *of->org);
  of->smp = malloc(n * sizeof *of->smp);
  of->ep = malloc(n * sizeof *of->ep);
  of->sym = malloc(n * sizeof *of->sym);
  of->vol = malloc(n * sizeof *of->vol);
  if (of->org == NULL || of->smp == NULL || of->ep == NULL || of->sym == NULL ||
      of->vol == NULL)
    cli_note(st, msg, len, SLABFEED_ERR_NOMEM,
             "cannot allocate the metadata of %zu samples", n);
  /* The whole file's space before the first row is written: the batches,
   * the metadata columns, and HDF5's own metadata (well under 256 KiB). */
  const uint64_t bytes =
      (uint64_t)D->rows *
          ((uint64_t)(D->sample_elems[0] + D->sample_elems[1]) * D->es + 3 * 8 +
           4 + 8 + 8 + 4) +
      D->paths_bytes + ((uint64_t)256 << 10);
  char why[CLI_ERRLEN];
  if (*st == SLABFEED_OK &&
      slabfeed_aside_reserve(of->aside, bytes, why, sizeof why) != SLABFEED_OK)
    cli_note(st, msg, len, SLABFEED_ERR_IO, "%s", why);
}

/* Rank 0: closes whatever of the output is open; 0, or -1 when a close
 * failed (data may not have reached the file). */
static int close_output(out_file *of)
{
  int rc = 0;
  for (int d = 0; d < N_DSET; d++)
    if (of->dset[d] >= 0) {
      rc |= H5Dclose(of->dset[d]) < 0 ? -1 : 0;
      of->dset[d] = -1;
    }
  if (of->mtype >= 0) {
    H5Tclose(of->mtype);
    of->mtype = -1;
  }
  if (of->file >= 0) {
    rc |= H5Fclose(of->file) < 0 ? -1 : 0;
    of->file = -1;
  }
  free(of->org);
  free(of->smp);
  free(of->ep);
  free(of->sym);
  free(of->vol);
  of->org = of->smp = of->ep = NULL;
  of->sym = of->vol = NULL;
  return rc;
}

/* Makes closing HDF5 file `file` (open with the sec2 driver) unable to
 * fail, for when its contents no longer matter: HDF5 1.10 crashes at exit
 * (inside MPI_Finalize) after an H5Fclose that failed, and the close's
 * last metadata writes fail on a full disk or past a file size limit. So
 * the file's descriptor is pointed at an unlinked scratch file (where the
 * close writes sparse metadata) and a file size limit is lifted to its
 * hard value. Best effort: where this fails, the close may still fail. */
static void detach_file(hid_t file)
{
  void *handle = NULL;
  if (H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || handle == NULL)
    return;
  const int fd = *(const int *)handle; /* sec2: a POSIX descriptor */
  const char *tmp = getenv("TMPDIR");
  const char *dirs[3] = {"/dev/shm", tmp != NULL ? tmp : "/tmp", "/tmp"};
  for (int i = 0; i < 3; i++) {
    char name[PATH_MAX];
    if (snprintf(name, sizeof name, "%s/slabfeed-dump.XXXXXX", dirs[i]) >=
        (int)sizeof name)
      continue;
    const int scratch = mkstemp(name);
    if (scratch < 0)
      continue;
    unlink(name);
    const int ok = dup2(scratch, fd) == fd;
    close(scratch);
    if (ok)
      break;
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_FSIZE, &rl);
  }
}

/* After a failure every rank knows of: rank 0 closes the output, and
 * the aside removes the partial file (rank 0); an earlier file named
 * --out is not touched. */
static void discard_output(out_file *of)
{
  if (of->file >= 0)
    detach_file(of->file);
  close_output(of);
  slabfeed_aside_abort(of->aside);
  of->aside = NULL;
}

/* Rank 0 after the last step: flushes and closes the file. The commit on
 * every rank then syncs it and renames it over --out - the only moment
 * --out changes. */
static void complete_output(out_file *of, slabfeed_status *st, char *msg,
                            size_t len)
{
  errno = 0; /* flush first: a file whose flush failed can still be closed
                cleanly by discard_output (a failed close cannot) */
  if (H5Fflush(of->file, H5F_SCOPE_LOCAL) < 0) {
    cli_note(st, msg, len, SLABFEED_ERR_IO,
             "cannot write '%s': flushing '%s' failed: %s", of->out,
             of->partial, write_cause());
    return;
  }
  if (close_output(of) != 0) {
    cli_note(st, msg, len, SLABFEED_ERR_IO,
             "cannot write '%s': closing '%s' failed: %s", of->out, of->partial,
             write_cause());
    return;
  }
}

/* ---- One step --------------------------------------------------------------
 */

/* This rank's batch of the step: slabfeed_next, copied to host into the
 * batch buffers (allocated at the first step), and its metadata. */
static void load_step(dump_state *D, slabfeed_batch *b, slabfeed_status *st,
                      char *msg, size_t len)
{
  const int B = D->cfg.batch;
  slabfeed_status s = slabfeed_next(D->l, b, NULL);
  if (s != SLABFEED_OK) {
    cli_note(st, msg, len, s, "%s", slabfeed_last_error(D->l));
    return;
  }
  if (D->meta == NULL) {
    const size_t rows = (size_t)B * (D->rank == 0 ? (size_t)D->size : 1);
    D->meta = malloc(rows * N_META * sizeof *D->meta);
    if (D->meta == NULL) {
      cli_note(st, msg, len, SLABFEED_ERR_NOMEM,
               "cannot allocate the metadata of %zu samples", rows);
      return;
    }
  }
  for (int d = 0; d < D->nd; d++) {
    const slabfeed_tensor *t = d == 0 ? &b->input : &b->target;
    if (D->buf[d] == NULL) {
      D->sample_elems[d] = (size_t)t->strides[0];
      D->bytes[d] = D->sample_elems[d] * (size_t)B * D->es;
      if ((D->buf[d] = malloc(D->bytes[d])) == NULL) {
        cli_note(st, msg, len, SLABFEED_ERR_NOMEM,
                 "cannot allocate %zu bytes for a batch of '%s'", D->bytes[d],
                 d == 0 ? D->cfg.input : D->cfg.target);
        return;
      }
    }
    if ((s = slabfeed_copy_to_host(D->l, t, D->buf[d])) != SLABFEED_OK) {
      cli_note(st, msg, len, s, "%s", slabfeed_last_error(D->l));
      return;
    }
  }
  for (int i = 0; i < B; i++) {
    int64_t *m = &D->meta[N_META * i];
    memcpy(m, &b->origin[3 * i], 3 * sizeof *m);
    m[3] = b->symmetry[i];
    m[4] = b->sample[i];
    m[5] = (int64_t)b->epoch;
    m[6] = b->volume != NULL ? b->volume[i] : 0;
  }
}

/* Sends n bytes of buf to rank 0 in messages of at most `piece` bytes. */
static void send_bytes(const void *buf, size_t n, size_t piece, int tag)
{
  for (size_t off = 0; off < n; off += piece) {
    const size_t k = n - off < piece ? n - off : piece;
    MPI_Send((const char *)buf + off, (int)k, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
  }
}

/* Receives into buf what send_bytes sent from rank src. */
static void recv_bytes(void *buf, size_t n, size_t piece, int src, int tag)
{
  for (size_t off = 0; off < n; off += piece) {
    const size_t k = n - off < piece ? n - off : piece;
    MPI_Recv((char *)buf + off, (int)k, MPI_BYTE, src, tag, MPI_COMM_WORLD,
             MPI_STATUS_IGNORE);
  }
}

/* A rank other than 0: its batch and metadata of the step go to rank 0. */
static void send_step(const dump_state *D)
{
  for (int d = 0; d < D->nd; d++)
    send_bytes(D->buf[d], D->bytes[d], D->piece, d);
  send_bytes(D->meta, (size_t)D->cfg.batch * N_META * sizeof *D->meta, D->piece,
             TAG_META);
}

/* Rank 0's part of step s: writes its own batch, then every other rank's,
 * received in turn into the same buffers, then the step's metadata. After
 * a failure it still receives all the others send (they are sending
 * already) but writes nothing more; the next agreement point ends the
 * run. */
static void write_step(dump_state *D, int64_t s, slabfeed_status *st, char *msg,
                       size_t len)
{
  out_file *of = &D->of;
  const hsize_t B = (hsize_t)D->cfg.batch;
  const hsize_t row0 = (hsize_t)s * (hsize_t)D->size * B;
  const size_t meta_bytes = (size_t)B * N_META * sizeof *D->meta;
  for (int r = 0; r < D->size; r++) {
    if (r > 0) {
      for (int d = 0; d < D->nd; d++)
        recv_bytes(D->buf[d], D->bytes[d], D->piece, r, d);
      recv_bytes(D->meta + (size_t)r * B * N_META, meta_bytes, D->piece, r,
                 TAG_META);
    }
    for (int d = 0; d < D->nd && *st == SLABFEED_OK; d++) {
      errno = 0;
      if (write_rows(of->dset[d], of->mtype, row0 + (hsize_t)r * B, B,
                     D->buf[d]) != 0)
        cli_note(st, msg, len, SLABFEED_ERR_IO,
                 "cannot write '%s': writing samples %llu..%llu of '%s' to "
                 "'%s' failed: %s",
                 of->out, (unsigned long long)(row0 + (hsize_t)r * B),
                 (unsigned long long)(row0 + (hsize_t)(r + 1) * B - 1),
                 d == 0 ? "input" : "target", of->partial, write_cause());
    }
  }
  if (*st != SLABFEED_OK)
    return;
  const hsize_t n = (hsize_t)D->size * B;
  for (hsize_t i = 0; i < n; i++) {
    const int64_t *m = &D->meta[N_META * i];
    memcpy(&of->org[3 * i], m, 3 * sizeof *of->org);
    of->sym[i] = (int32_t)m[3];
    of->smp[i] = m[4];
    of->ep[i] = m[5];
    of->vol[i] = (int32_t)m[6];
  }
  errno = 0;
  if (write_rows(of->dset[2], H5T_NATIVE_INT64, row0, n, of->org) != 0 ||
      write_rows(of->dset[3], H5T_NATIVE_INT32, row0, n, of->sym) != 0 ||
      write_rows(of->dset[4], H5T_NATIVE_INT64, row0, n, of->smp) != 0 ||
      write_rows(of->dset[5], H5T_NATIVE_INT64, row0, n, of->ep) != 0 ||
      write_rows(of->dset[6], H5T_NATIVE_INT32, row0, n, of->vol) != 0)
    cli_note(st, msg, len, SLABFEED_ERR_IO,
             "cannot write '%s': writing the metadata of samples %llu..%llu "
             "to '%s' failed: %s",
             of->out, (unsigned long long)row0,
             (unsigned long long)(row0 + n - 1), of->partial, write_cause());
}

/* Frees this rank's buffers. */
static void free_state(dump_state *D)
{
  free(D->buf[0]);
  free(D->buf[1]);
  free(D->meta);
  D->buf[0] = D->buf[1] = NULL;
  D->meta = NULL;
}

/* Leaves after an agreed failure: rank 0 removes the partial file, every
 * rank closes the loader (collective: every rank is here) and all exit 1
 * with the agreed message. */
__attribute__((noreturn)) static void
leave_failed(dump_state *D, slabfeed_status st, const char *msg)
{
  discard_output(&D->of);
  free_state(D);
  slabfeed_close(D->l);
  cli_fail_agreed(prog, st, msg);
}

/* ---- Options and main ------------------------------------------------------
 */

/* What the dump's own options fill. */
typedef struct dump_args {
  int64_t steps;
  uint64_t epoch;
  const char *out;
  int overwrite;
} dump_args;

static const cli_option options[] = {{.name = "--steps",
                                      .kind = CLI_INT64,
                                      .at = offsetof(dump_args, steps),
                                      .min = 1,
                                      .max = INT64_MAX,
                                      .metavar = "K",
                                      .help = "steps to run and dump",
                                      .flags = CLI_REQUIRED},
                                     {.name = "--epoch",
                                      .kind = CLI_U64,
                                      .at = offsetof(dump_args, epoch),
                                      .metavar = "E",
                                      .help = "epoch to start at (step 0)"},
                                     {.name = "--out",
                                      .kind = CLI_STRING,
                                      .at = offsetof(dump_args, out),
                                      .metavar = "DUMP.h5",
                                      .help = "the HDF5 file to write "
                                              "(replaced only once complete; "
                                              "never the input)",
                                      .flags = CLI_REQUIRED},
                                     {.name = "--overwrite",
                                      .kind = CLI_FLAG,
                                      .at = offsetof(dump_args, overwrite),
                                      .help = "replace an existing --out "
                                              "(once the new one is "
                                              "complete); without it an "
                                              "existing file is refused and "
                                              "left as it was"},
                                     {.name = NULL}};

/* What rank 0 decides before anything runs, broadcast so that every rank
 * acts alike: a usage error (or "") and the transfer's piece size. */
typedef struct dump_plan {
  int64_t piece;
  char usage[768];
} dump_plan;

/* Rank 0's plan: --out must not be an input (any volume of the spec, as
 * the loader will expand it; a spec that does not expand is left to the
 * loader, which says why at open); the piece size from
 * SLABFEED_DUMP_CHUNK_BYTES when set. */
static void make_plan(const slabfeed_config *cfg, const char *out, dump_plan *p)
{
  p->piece = PIECE_MAX;
  cli_spec vols;
  char err[CLI_ERRLEN];
  if (cli_spec_expand(cfg->path, &vols, err, sizeof err) == 0) {
    for (int v = 0; v < vols.n && p->usage[0] == '\0'; v++)
      overwrites_input(vols.path[v], v, vols.n, out, p->usage, sizeof p->usage);
    cli_spec_free(&vols);
  }
  const char *env = getenv(PIECE_ENV);
  char why[256];
  if (p->usage[0] == '\0' && env != NULL &&
      cli_parse_int(env, 1, PIECE_MAX, &p->piece, why, sizeof why) != 0)
    snprintf(p->usage, sizeof p->usage, "%s: %s", PIECE_ENV, why);
}

/* Parses the options, checks the output, runs the loader for K steps and
 * has rank 0 write every rank's samples in global order. */
int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  dump_state D;
  memset(&D, 0, sizeof D);
  MPI_Comm_rank(MPI_COMM_WORLD, &D.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &D.size);
  slabfeed_config_init(&D.cfg);
  dump_args a = {0, 0, NULL, 0};
  const cli_app app = {
      prog,
      "Runs the loader for K steps and writes every rank's samples, in "
      "global sample order, to one HDF5 file (input, target, origin, "
      "symmetry, sample, sample_epoch, volume; volume_path lists the files "
      "that volume indexes). f32 and f16 batches are stored as "
      "float32 and IEEE half; bf16 as uint16 holding the bf16 bits (HDF5 "
      "has no bf16 type: widen with bits << 16 to float32), as the file's "
      "attribute element_type says.",
      {{"loader options", cli_loader_options(), &D.cfg},
       {"dump options", options, &a}}};
  cli_parse(&app, argc, argv);
  slabfeed_config *cfg = &D.cfg;
  D.epoch = a.epoch;
  D.nd = cfg->target ? 2 : 1;
  D.es = slabfeed_dtype_size(cfg->dtype);
  D.of.out = a.out;
  D.of.file = D.of.mtype = -1;
  for (int d = 0; d < N_DSET; d++)
    D.of.dset[d] = -1;

  /* Usage: decided by rank 0 (the writer), the same exit on every rank. */
  dump_plan plan;
  memset(&plan, 0, sizeof plan);
  if (D.rank == 0)
    make_plan(cfg, a.out, &plan);
  MPI_Bcast(&plan, (int)sizeof plan, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (plan.usage[0] != '\0')
    cli_usage_fail(&app, "%s", plan.usage);
  D.piece = (size_t)plan.piece;
  const int64_t per_step = (int64_t)D.size * (cfg->batch > 0 ? cfg->batch : 1);
  if (a.steps > INT64_MAX / per_step)
    cli_usage_fail(&app, "--steps %lld: more than %lld samples in one file",
                   (long long)a.steps, (long long)INT64_MAX);
  D.rows = (hsize_t)a.steps * (hsize_t)per_step;

  /* The output can be replaced: checked before the loader runs (agreed),
   * and the partial file created. */
  slabfeed_status st = SLABFEED_OK;
  char msg[CLI_ERRLEN] = "";
  char err[CLI_ERRLEN];
  if (D.rank == 0) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our messages name the file */
    signal(SIGXFSZ, SIG_IGN); /* a file size limit: EFBIG, not death */
  }
  /* An existing file is replaced only when asked (slabfeed-gen's and
   * slabfeed-predict's rule); a directory is left to the aside's check. */
  struct stat os;
  if (D.rank == 0 && !a.overwrite && stat(a.out, &os) == 0 &&
      !S_ISDIR(os.st_mode))
    cli_note(&st, msg, sizeof msg, SLABFEED_ERR_IO,
             "--out '%s' exists; pass --overwrite to replace it", a.out);
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    leave_failed(&D, st, msg);
  st = slabfeed_aside_begin(MPI_COMM_WORLD, a.out, D.rank == 0, &D.of.aside,
                            err, sizeof err);
  if (st != SLABFEED_OK) /* agreed */
    leave_failed(&D, st, err);
  if (D.rank == 0)
    create_output(&D.of, &st, msg, sizeof msg);
  /* A pattern of --file that matches the partial file would make the
   * loader read it as a volume. */
  char pat[CLI_PATH_MAX];
  if (D.rank == 0 && st == SLABFEED_OK &&
      cli_spec_pattern_matches(cfg->path, D.of.partial, pat, sizeof pat))
    cli_note(&st, msg, sizeof msg, SLABFEED_ERR_ARG,
             "--out '%s': its partial file '%s' matches the --file pattern "
             "'%s', which would read it as a volume; write --out where the "
             "pattern does not reach",
             a.out, D.of.partial, pat);
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    leave_failed(&D, st, msg);

  st = slabfeed_open(MPI_COMM_WORLD, cfg, &D.l, err, sizeof err);
  if (st != SLABFEED_OK) /* agreed by slabfeed_open */
    leave_failed(&D, st, err);
  slabfeed_status s = slabfeed_seek(D.l, D.epoch, 0);
  if (s != SLABFEED_OK) /* reported at step 0's agreement */
    cli_note(&st, msg, sizeof msg, s, "%s", slabfeed_last_error(D.l));
  /* --out against the loader's own list of volumes (what it opened), in
   * case the files changed since the plan; reported at step 0's
   * agreement. */
  const int nvol = slabfeed_volume_count(D.l);
  for (int v = 0; D.rank == 0 && st == SLABFEED_OK && v < nvol; v++) {
    char path[CLI_PATH_MAX], why[768];
    if (slabfeed_volume_info(D.l, v, path, sizeof path, NULL) != SLABFEED_OK)
      continue;
    overwrites_input(path, v, nvol, a.out, why, sizeof why);
    if (why[0] != '\0')
      cli_note(&st, msg, sizeof msg, SLABFEED_ERR_ARG, "%s", why);
  }

  int failed = 0;
  for (int64_t step = 0; step < a.steps && !failed; step++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if (st == SLABFEED_OK)
      load_step(&D, &b, &st, msg, sizeof msg);
    /* Every rank's batch of this step, and rank 0's writes of the last. */
    if ((failed = cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg)) != 0)
      break;
    if (D.rank != 0) {
      send_step(&D);
      continue;
    }
    if (step == 0)
      create_datasets(&D, &b, &st, msg, sizeof msg);
    write_step(&D, step, &st, msg, sizeof msg);
  }
  if (!failed) {
    if (D.rank == 0 && st == SLABFEED_OK)
      complete_output(&D.of, &st, msg, sizeof msg);
    /* Agreed: synced and renamed, or removed (then the file is closed). */
    st = slabfeed_aside_commit(D.of.aside, st, msg, err, sizeof err);
    D.of.aside = NULL;
    if ((failed = st != SLABFEED_OK) != 0)
      snprintf(msg, sizeof msg, "%s", err);
  }
  if (failed)
    leave_failed(&D, st, msg);
  if (D.rank == 0)
    printf("%s: wrote %llu samples (%zu + %zu values each) of %lld steps to "
           "%s\n",
           prog, (unsigned long long)D.rows, D.sample_elems[0],
           D.sample_elems[1], (long long)a.steps, a.out);
  free_state(&D);
  slabfeed_close(D.l);
  MPI_Finalize();
  return 0;
}
