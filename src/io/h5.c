#include "io/h5.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <stdio.h>
#include <string.h>

#include "common/convert.h"
#include "common/geometry.h"
#include "common/inject.h"
#include "common/mpilib.h"
#include "common/sys.h"

int sf__h5_is_parallel(void)
{
#ifdef H5_HAVE_PARALLEL
  return 1;
#else
  return 0;
#endif
}

void sf__h5_quiet_begin(sf__h5_quiet *q)
{
  if (H5Eget_auto2(H5E_DEFAULT, &q->func, &q->data) < 0) {
    q->func = NULL;
    q->data = NULL;
  }
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void sf__h5_quiet_end(const sf__h5_quiet *q)
{
  H5Eset_auto2(H5E_DEFAULT, q->func, q->data);
}

/* Walk callback: keep the innermost description (the first one upward). */
static herr_t innermost(unsigned n, const H5E_error2_t *err, void *data)
{
  if (n == 0 && err->desc != NULL)
    snprintf((char *)data, 256, "%s", err->desc);
  return 0;
}

void sf__h5_detail(sf__err *e)
{
  char desc[256] = "";
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, desc);
  H5Eclear2(H5E_DEFAULT);
  const size_t used = strlen(e->msg);
  if (desc[0] != '\0' && used + 16 < sizeof e->msg)
    snprintf(e->msg + used, sizeof e->msg - used, " (HDF5: %s)", desc);
}

/* Open MPI 4.1's sharedfp/lockedfile component formats the file name and
 * a suffix into a 256-byte buffer and aborts the process ("buffer overflow
 * detected") for long paths; HDF5's MPI-IO open reaches it. The suffix
 * length varies with the job (the abort was seen from 228 bytes here, 245
 * elsewhere), so paths from 200 bytes on are refused unless the component
 * is excluded. */
#define SF_OMPI_PATH_LIMIT 200

static slabfeed_status check_path_length(const char *path, sf__err *e)
{
  if (!sf__h5_is_parallel() || strlen(path) < SF_OMPI_PATH_LIMIT ||
      sf__mpilib() != SF__MPILIB_OPEN_MPI)
    return SLABFEED_OK;
  const char *fp = getenv("OMPI_MCA_sharedfp");
  if (fp != NULL && strstr(fp, "^") == fp && strstr(fp, "lockedfile") != NULL)
    return SLABFEED_OK;
  return sf__fail(e, SLABFEED_ERR_ARG,
                  "path of %zu bytes: Open MPI's sharedfp/lockedfile "
                  "component aborts the process for MPI-IO paths of %d bytes "
                  "and more (a fixed-size buffer); set "
                  "OMPI_MCA_sharedfp=^lockedfile in the "
                  "environment (slabfeed does not use shared file pointers), "
                  "or use a shorter path: '%.60s...'",
                  strlen(path), SF_OMPI_PATH_LIMIT, path);
}

slabfeed_status sf__h5_preflight(const char *path, int for_write, sf__err *e)
{
  if (check_path_length(path, e) != SLABFEED_OK)
    return e->status;
  struct stat st;
  if (!for_write) {
    if (stat(path, &st) != 0)
      return sf__fail(e, SLABFEED_ERR_IO, "cannot open HDF5 file '%s': %s",
                      path, strerror(errno));
    if (!S_ISREG(st.st_mode))
      return sf__fail(e, SLABFEED_ERR_IO,
                      "'%s' is not a regular file (an HDF5 file is needed)",
                      path);
    if (access(path, R_OK) != 0)
      return sf__fail(e, SLABFEED_ERR_IO, "cannot read '%s': %s", path,
                      strerror(errno));
    return SLABFEED_OK;
  }
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return sf__fail(e, SLABFEED_ERR_IO,
                    "'%s' is a directory; give a file name to write", path);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash == NULL)
    snprintf(dir, sizeof dir, ".");
  else if (slash == dir)
    dir[1] = '\0';
  else
    *slash = '\0';
  if (access(dir, W_OK | X_OK) != 0)
    return sf__fail(e, SLABFEED_ERR_IO, "cannot write into directory '%s': %s",
                    dir, strerror(errno));
  return SLABFEED_OK;
}

uint64_t sf__h5_file_bytes(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

slabfeed_status sf__h5_check_size(hid_t dset, const char *path,
                                  const char *name, uint64_t before, sf__err *e)
{
  struct stat st;
  if (stat(path, &st) != 0)
    return sf__fail(e, SLABFEED_ERR_IO,
                    "'%s' disappeared while it was read: %s", path,
                    strerror(errno));
  const uint64_t now = (uint64_t)st.st_size;
  if (before > 0 && now < before)
    return sf__fail(e, SLABFEED_ERR_IO,
                    "'%s' shrank from %llu to %llu bytes while it was read "
                    "(truncated or being rewritten; the missing part would "
                    "read as zeros)",
                    path, (unsigned long long)before, (unsigned long long)now);
  /* Contiguous storage: where the data ends is one metadata query. */
  const haddr_t off = H5Dget_offset(dset);
  if (off == HADDR_UNDEF) {
    H5Eclear2(H5E_DEFAULT);
    return SLABFEED_OK;
  }
  const uint64_t end = (uint64_t)off + (uint64_t)H5Dget_storage_size(dset);
  if (now < end)
    return sf__fail(e, SLABFEED_ERR_IO,
                    "'%s' is %llu bytes but the data of '%s' ends at byte "
                    "%llu: the file was truncated or is still being written "
                    "(the missing part would read as zeros)",
                    path, (unsigned long long)now, name,
                    (unsigned long long)end);
  return SLABFEED_OK;
}

#ifdef H5_HAVE_PARALLEL
herr_t sf__h5_set_mpio(hid_t fapl, MPI_Comm comm)
{
  /* Users who give ROMIO hints of their own (a hints file, Cray's
   * variable) get exactly theirs: an info key would take precedence. */
  if (getenv("ROMIO_HINTS") != NULL || getenv("MPICH_MPIIO_HINTS") != NULL)
    return H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
  MPI_Info info = MPI_INFO_NULL;
  if (MPI_Info_create(&info) != MPI_SUCCESS)
    return -1;
  /* slabfeed reads and writes runs of whole planes, contiguous per
   * channel: ROMIO's data sieving only adds a staging buffer (on one
   * H200 node under MPICH 4.0 a 512^3 x 9 open did not finish in 75 s
   * with it; 604 MB on the 2-core machine: 5.9 s with it, 0.37 s without,
   * as fast as Open MPI). OMPIO ignores these keys. */
  herr_t rc =
      MPI_Info_set(info, "romio_ds_read", "disable") == MPI_SUCCESS &&
              MPI_Info_set(info, "romio_ds_write", "disable") == MPI_SUCCESS
          ? H5Pset_fapl_mpio(fapl, comm, info)
          : -1;
  MPI_Info_free(&info);
  return rc;
}
#endif

slabfeed_status sf__h5_open(MPI_Comm comm, const char *path, hid_t *file,
                            sf__err *e)
{
  *file = H5I_INVALID_HID;
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  if (fapl < 0)
    return sf__fail(e, SLABFEED_ERR_IO, "H5Pcreate(FILE_ACCESS) failed");
#ifdef H5_HAVE_PARALLEL
  if (sf__h5_set_mpio(fapl, comm) < 0 ||
      H5Pset_all_coll_metadata_ops(fapl, 1) < 0) {
    H5Pclose(fapl);
    return sf__fail(e, SLABFEED_ERR_IO, "cannot set the MPI-IO driver for '%s'",
                    path);
  }
#else
  (void)comm;
#endif
  *file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
  if (*file < 0) { /* read the error stack before any other HDF5 call */
    sf__fail(e, SLABFEED_ERR_IO, "cannot open HDF5 file '%s'", path);
    sf__h5_detail(e);
  }
  H5Pclose(fapl);
  return e->status;
}

/* Decides the layout of dims: channels-first when dims[0] is smaller than
 * every other extent and dims[3] is not smaller than both middle ones;
 * channels-last the other way round. When both ends are smaller than the
 * middle extents ((3,16,16,4): 3 channels of 16x16x4, or 4 channels of
 * 3x16x16?) or neither is, it is ambiguous. */
static slabfeed_file_layout guess_layout(const int64_t d[4])
{
  const int64_t mid = d[1] < d[2] ? d[1] : d[2];
  const int first = d[0] < mid && d[0] < d[3];
  const int last = d[3] < mid && d[3] < d[0];
  const int first_small = d[0] < mid, last_small = d[3] < mid;
  if (first_small && last_small)
    return SLABFEED_LAYOUT_AUTO;
  if (first && !last)
    return SLABFEED_LAYOUT_CF;
  if (last && !first)
    return SLABFEED_LAYOUT_CL;
  return SLABFEED_LAYOUT_AUTO;
}

/* The layout recorded in the dataset's "layout" attribute ("cf" or "cl",
 * written by slabfeed-gen), or AUTO when there is none. */
static slabfeed_file_layout recorded_layout(hid_t dset)
{
  slabfeed_file_layout lay = SLABFEED_LAYOUT_AUTO;
  if (H5Aexists(dset, SF_LAYOUT_ATTR) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return lay;
  }
  const hid_t a = H5Aopen(dset, SF_LAYOUT_ATTR, H5P_DEFAULT);
  const hid_t t = H5Tcopy(H5T_C_S1);
  char v[8] = "";
  if (a >= 0 && t >= 0 && H5Tset_size(t, sizeof v - 1) >= 0 &&
      H5Aread(a, t, v) >= 0) {
    if (strncmp(v, "cf", 2) == 0)
      lay = SLABFEED_LAYOUT_CF;
    else if (strncmp(v, "cl", 2) == 0)
      lay = SLABFEED_LAYOUT_CL;
  }
  if (t >= 0)
    H5Tclose(t);
  if (a >= 0)
    H5Aclose(a);
  H5Eclear2(H5E_DEFAULT);
  return lay;
}

static slabfeed_status describe(hid_t dset, const char *path, const char *name,
                                slabfeed_file_layout want,
                                slabfeed_dataset_info *info, sf__err *e)
{
  memset(info, 0, sizeof *info);
  info->size = sizeof *info;
  const hid_t type = H5Dget_type(dset);
  const H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
  const size_t tsize = type >= 0 ? H5Tget_size(type) : 0;
  if (type >= 0)
    H5Tclose(type);
  if (cls != H5T_FLOAT)
    return sf__fail(e, SLABFEED_ERR_FORMAT,
                    "dataset '%s' in '%s' is not floating point (HDF5 type "
                    "class %d); slabfeed reads float16/32/64 data only",
                    name, path, (int)cls);
  info->type_bits = (int)(tsize * 8);

  const hid_t space = H5Dget_space(dset);
  const int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
  /* A scalar field (Z,Y,X) is one channel stored channels-last: its
   * selections are the first three entries of the (Z,Y,X,C) ones. */
  hsize_t dims[4] = {0, 0, 0, 1};
  if (rank == 4 || rank == 3)
    H5Sget_simple_extent_dims(space, dims, NULL);
  if (space >= 0)
    H5Sclose(space);
  if (rank != 4 && rank != 3)
    return sf__fail(e, SLABFEED_ERR_FORMAT,
                    "dataset '%s' in '%s' has rank %d; expected rank 4, "
                    "(C,Z,Y,X) or (Z,Y,X,C), or rank 3, (Z,Y,X) (one "
                    "channel)",
                    name, path, rank);
  info->ndim = rank;
  for (int a = 0; a < 4; a++)
    info->dims[a] = (int64_t)dims[a];
  for (int a = 0; a < 4; a++)
    if (info->dims[a] < 1 || info->dims[a] > 65535)
      return sf__fail(e, SLABFEED_ERR_FORMAT,
                      "dataset '%s' in '%s' has extent %lld on axis %d; "
                      "every extent must be in [1, 65535]",
                      name, path, (long long)info->dims[a], a);

  slabfeed_file_layout lay = rank == 3 ? SLABFEED_LAYOUT_CL : want;
  if (lay == SLABFEED_LAYOUT_AUTO)
    lay = recorded_layout(dset);
  if (lay == SLABFEED_LAYOUT_AUTO)
    lay = guess_layout(info->dims);
  if (lay == SLABFEED_LAYOUT_AUTO)
    return sf__fail(e, SLABFEED_ERR_FORMAT,
                    "dataset '%s' in '%s' has shape (%lld,%lld,%lld,%lld): "
                    "layout auto cannot tell channels-first from "
                    "channels-last; set the layout (cf or cl)",
                    name, path, (long long)dims[0], (long long)dims[1],
                    (long long)dims[2], (long long)dims[3]);
  info->layout = lay;
  const int c_axis = lay == SLABFEED_LAYOUT_CF ? 0 : 3;
  const int s0 = lay == SLABFEED_LAYOUT_CF ? 1 : 0;
  info->channels = info->dims[c_axis];
  for (int a = 0; a < 3; a++)
    info->shape[a] = info->dims[s0 + a];

  const hid_t dcpl = H5Dget_create_plist(dset);
  if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
    hsize_t ch[4] = {1, 1, 1, 1};
    if (H5Pget_chunk(dcpl, 4, ch) == rank) {
      info->chunked = 1;
      for (int a = 0; a < 4; a++)
        info->chunk[a] = (int64_t)ch[a];
    }
  }
  if (dcpl >= 0)
    H5Pclose(dcpl);
  return SLABFEED_OK;
}

/* What H5Ovisit passes on: the datasets' names so far, comma-separated. */
typedef struct names_buf {
  char *buf;
  size_t len, at;
  int n;
} names_buf;

#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t sf__h5_oinfo;
#else
typedef H5O_info_t sf__h5_oinfo;
#endif

static herr_t add_dataset_name(hid_t obj, const char *name,
                               const sf__h5_oinfo *info, void *arg)
{
  (void)obj;
  names_buf *b = arg;
  if (info->type != H5O_TYPE_DATASET)
    return 0;
  if (b->n < 12 && b->at < b->len) {
    const int k = snprintf(b->buf + b->at, b->len - b->at, "%s'%s'",
                           b->n > 0 ? ", " : "", name);
    b->at += k > 0 ? (size_t)k : 0;
  }
  b->n++;
  return 0;
}

/* The datasets of `file` (every group, the first 12 by name, then how many
 * more) into buf, for a message: "'a', 'g/b', ... and 3 more", or "none". */
static void list_datasets(hid_t file, char *buf, size_t len)
{
  names_buf b = {buf, len, 0, 0};
  buf[0] = '\0';
#if H5_VERSION_GE(1, 12, 0)
  const herr_t rc = H5Ovisit3(file, H5_INDEX_NAME, H5_ITER_INC,
                              add_dataset_name, &b, H5O_INFO_BASIC);
#else
  const herr_t rc =
      H5Ovisit(file, H5_INDEX_NAME, H5_ITER_INC, add_dataset_name, &b);
#endif
  if (rc < 0)
    H5Eclear2(H5E_DEFAULT);
  if (b.n == 0)
    snprintf(buf, len, "none");
  else if (b.n > 12 && b.at < len)
    snprintf(buf + b.at, len - b.at, " and %d more", b.n - 12);
}

slabfeed_status sf__h5_dataset(hid_t file, const char *path, const char *name,
                               slabfeed_file_layout want, hid_t *dset,
                               slabfeed_dataset_info *info, sf__err *e)
{
  *dset = H5I_INVALID_HID;
  if (H5Lexists(file, name, H5P_DEFAULT) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    char have[512];
    list_datasets(file, have, sizeof have);
    return sf__fail(e, SLABFEED_ERR_FORMAT,
                    "no dataset '%s' in '%s' (its datasets: %s)", name, path,
                    have);
  }
  *dset = H5Dopen2(file, name, H5P_DEFAULT);
  if (*dset < 0) {
    sf__fail(e, SLABFEED_ERR_FORMAT, "'%s' in '%s' is not a readable dataset",
             name, path);
    sf__h5_detail(e);
    return e->status;
  }
  return describe(*dset, path, name, want, info, e);
}

/* File selection of planes [z, z+n) of channel c. */
static herr_t select_file(hid_t space, const slabfeed_dataset_info *in,
                          int64_t c, int64_t z, int64_t n)
{
  if (n == 0)
    return H5Sselect_none(space);
  hsize_t start[4], count[4];
  if (in->layout == SLABFEED_LAYOUT_CF) {
    const hsize_t s[4] = {(hsize_t)c, (hsize_t)z, 0, 0};
    const hsize_t k[4] = {1, (hsize_t)n, (hsize_t)in->shape[1],
                          (hsize_t)in->shape[2]};
    memcpy(start, s, sizeof s);
    memcpy(count, k, sizeof k);
  } else {
    const hsize_t s[4] = {(hsize_t)z, 0, 0, (hsize_t)c};
    const hsize_t k[4] = {(hsize_t)n, (hsize_t)in->shape[1],
                          (hsize_t)in->shape[2], 1};
    memcpy(start, s, sizeof s);
    memcpy(count, k, sizeof k);
  }
  return H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL);
}

int sf__h5_is_virtual(hid_t dset)
{
  const hid_t p = H5Dget_create_plist(dset);
  const int v = p >= 0 && H5Pget_layout(p) == H5D_VIRTUAL;
  if (p >= 0)
    H5Pclose(p);
  return v;
}

int sf__h5_local_fs(const char *path, char *fs, size_t len)
{
  static const struct {
    unsigned long magic;
    const char *name;
  } local[] = {{0x01021994UL, "tmpfs"}, {0x858458f6UL, "ramfs"},
               {0xEF53UL, "ext4"},      {0x58465342UL, "xfs"},
               {0x9123683EUL, "btrfs"}, {0x794c7630UL, "overlay"},
               {0x2fc12fc1UL, "zfs"},   {0xF2F52010UL, "f2fs"}};
  static const struct {
    unsigned long magic;
    const char *name;
  } shared[] = {{0x0BD00BD0UL, "lustre"}, {0x47504653UL, "gpfs"},
                {0x6969UL, "nfs"},        {0x19830326UL, "beegfs"},
                {0x00c36400UL, "ceph"},   {0x65735546UL, "fuse"}};
  struct statfs st;
  if (statfs(path, &st) != 0) {
    snprintf(fs, len, "unknown");
    return 0;
  }
  const unsigned long m = (unsigned long)st.f_type & 0xffffffffUL;
  for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
    if (m == local[i].magic) {
      snprintf(fs, len, "%s", local[i].name);
      return 1;
    }
  for (size_t i = 0; i < sizeof shared / sizeof shared[0]; i++)
    if (m == shared[i].magic) {
      snprintf(fs, len, "%s", shared[i].name);
      return 0;
    }
  snprintf(fs, len, "filesystem 0x%lx", m);
  return 0;
}

/* Independent I/O for datasets whose storage is not fully allocated
 * (HDF5 1.10's collective read of unwritten chunks fails with MPI_ERR_TYPE
 * on one rank and hangs on several) and for virtual datasets. */
static int fully_allocated(hid_t dset)
{
  /* A virtual dataset is read without MPI-IO (io/volume.c): independent. */
  if (sf__h5_is_virtual(dset))
    return 0;
  /* Chunked: every chunk of the grid in the file. (HDF5 1.10's space
   * status says "partly allocated" where the grid's chunks reach past the
   * dataset's upper edges, though every one is written.) */
  const hid_t dcpl = H5Dget_create_plist(dset);
  const int chunked = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED;
  hsize_t edge[H5S_MAX_RANK], dims[H5S_MAX_RANK];
  const int rank = chunked ? H5Pget_chunk(dcpl, H5S_MAX_RANK, edge) : 0;
  if (dcpl >= 0)
    H5Pclose(dcpl);
#if H5_VERSION_GE(1, 10, 5)
  const hid_t space = chunked ? H5Dget_space(dset) : H5I_INVALID_HID;
  hsize_t want = 1, have = 0;
  int ok = space >= 0 && rank > 0 &&
           H5Sget_simple_extent_dims(space, dims, NULL) == rank &&
           H5Dget_num_chunks(dset, space, &have) >= 0;
  for (int a = 0; a < rank && ok; a++)
    want *= (dims[a] + edge[a] - 1) / edge[a];
  if (space >= 0)
    H5Sclose(space);
  if (chunked) {
    H5Eclear2(H5E_DEFAULT);
    return ok && have == want;
  }
#else
  (void)rank;
  (void)dims;
#endif
  H5D_space_status_t st = H5D_SPACE_STATUS_ERROR;
  if (H5Dget_space_status(dset, &st) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return 0;
  }
  return st == H5D_SPACE_STATUS_ALLOCATED;
}

/* Selects the low y x x corner of planes [off, off+n) of channel c of the
 * memory buffer, or nothing when n == 0. */
/* The n planes of y x x floats of channel c in a buffer whose channels are
 * cstride floats apart, from float `off` of the channel on. */
static herr_t select_mem(hid_t space, int64_t cstride, int64_t c, int64_t off,
                         int64_t n, int64_t y, int64_t x)
{
  if (n == 0)
    return H5Sselect_none(space);
  const hsize_t start = (hsize_t)(c * cstride + off),
                count = (hsize_t)(n * y * x);
  return H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, NULL, &count, NULL);
}

/* The dataset's element type when it is IEEE binary16 little endian (the
 * halves slabfeed reads itself), else H5I_INVALID_HID. */
static hid_t half_type(hid_t dset)
{
  const hid_t t = H5Dget_type(dset);
  size_t spos, epos, esize, mpos, msize;
  const int half = t >= 0 && H5Tget_class(t) == H5T_FLOAT &&
                   H5Tget_size(t) == 2 && H5Tget_order(t) == H5T_ORDER_LE &&
                   H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) >= 0 &&
                   spos == 15 && epos == 10 && esize == 5 && mpos == 0 &&
                   msize == 10 && H5Tget_ebias(t) == 15;
  if (!half && t >= 0)
    H5Tclose(t);
  return half ? t : H5I_INVALID_HID;
}

/* Floats [a, b) of buf from the halves at its start. */
typedef struct widen_job {
  float *buf;
  size_t a, b;
} widen_job;

static void *widen_range(void *p)
{
  const widen_job *j = p;
  const unsigned char *h = (const unsigned char *)j->buf;
  for (size_t i = j->b; i-- > j->a;) {
    uint16_t x;
    memcpy(&x, h + 2 * i, sizeof x);
    j->buf[i] = sf__f16_to_f32(x);
  }
  return NULL;
}

/* Phases of at least this many floats are widened by several threads. */
#define SF_WIDEN_PARALLEL ((size_t)1 << 16)
#define SF_WIDEN_THREADS 8

/* n halves at the start of buf widened in place to floats. In phases from
 * the end: floats [lo, hi) with lo = ceil(hi / 2) are written at bytes
 * [4 lo, 4 hi), at or past the bytes [2 lo, 2 hi) of their halves and of
 * every half not read yet (below 2 lo), so a phase's floats are
 * independent and large phases go to up to SF_WIDEN_THREADS threads (a
 * thread that cannot start leaves its part to this one). */
static void widen_halves(float *buf, size_t n, int threads)
{
  const long cores = threads > 0 ? threads : sf__core_share(1);
  const int T = cores < 2                  ? 1
                : cores < SF_WIDEN_THREADS ? (int)cores
                                           : SF_WIDEN_THREADS;
  size_t hi = n;
  while (hi - (hi + 1) / 2 >= SF_WIDEN_PARALLEL && T > 1) {
    const size_t lo = (hi + 1) / 2,
                 part = (hi - lo + (size_t)T - 1) / (size_t)T;
    widen_job job[SF_WIDEN_THREADS];
    for (int t = 0; t < T; t++) {
      const size_t a = lo + (size_t)t * part;
      job[t] = (widen_job){buf, a < hi ? a : hi, a + part < hi ? a + part : hi};
    }
    sf__run_jobs(widen_range, job, sizeof job[0], T);
    hi = lo;
  }
  const widen_job rest = {buf, 0, hi};
  widen_range((void *)&rest);
}

/* ---- Direct reads: plain pread where the values lie (0.9, 0.10) ------- */

/* Where a dataset's values lie in its file (stored_of). The storage is a
 * grid of boxes of edge[] values (channels, z, y, x), each box's values
 * row-major in the dataset's own axis order at one offset: channels,
 * z, y, x when cf, else z, y, x, channels. HDF5 keeps the chunks at the
 * dataset's upper edges as large as the others (their values past the
 * edge unused), so every box has the same bytes. Contiguous storage is
 * one box, the whole dataset, at `off`; chunked storage without filters
 * has a box per chunk, whose offset is looked up (box_at). */
typedef struct stored {
  int chunked;
  int64_t off;     /* contiguous: the offset of the first value */
  int64_t edge[4]; /* a box's extents: channels, z, y, x */
  int64_t esize;   /* bytes per value as stored */
  int half;        /* IEEE binary16 little endian (widened by slabfeed) */
  int cf;          /* channel axis first in the file (else last) */
} stored;

/* 1 with *s filled where the values of dset lie at offsets known without
 * reading them through HDF5: stored in the file itself (not virtual, no
 * external files), all of it allocated, contiguous or chunked without
 * filters, elements of a fixed size. 0 for any other. Local; the chunked
 * case counts the chunks in the file (fully_allocated), which collective
 * metadata reads need every rank to do alike. */
static int stored_of(hid_t dset, const slabfeed_dataset_info *info, stored *s)
{
  memset(s, 0, sizeof *s);
  if (sf__h5_is_virtual(dset))
    return 0;
#if !H5_VERSION_GE(1, 10, 5)
  if (info->chunked) /* no chunk lookup before HDF5 1.10.5 */
    return 0;
#endif
  const hid_t dcpl = H5Dget_create_plist(dset);
  const H5D_layout_t lay = dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_LAYOUT_ERROR;
  int ok = dcpl >= 0 && H5Pget_external_count(dcpl) == 0 &&
           (lay == H5D_CONTIGUOUS ||
            (lay == H5D_CHUNKED && H5Pget_nfilters(dcpl) == 0));
  if (dcpl >= 0)
    H5Pclose(dcpl);
  const hid_t t = ok ? H5Dget_type(dset) : H5I_INVALID_HID;
  s->esize = t >= 0 ? (int64_t)H5Tget_size(t) : 0;
  if (t >= 0)
    H5Tclose(t);
  const hid_t h = ok ? half_type(dset) : H5I_INVALID_HID;
  s->half = h >= 0;
  if (h >= 0)
    H5Tclose(h);
  s->cf = info->ndim == 4 && info->layout == SLABFEED_LAYOUT_CF;
  s->chunked = lay == H5D_CHUNKED;
  const int64_t values =
      info->channels * info->shape[0] * info->shape[1] * info->shape[2];
  if (ok && !s->chunked) {
    const haddr_t off = H5Dget_offset(dset);
    s->off = off == HADDR_UNDEF ? -1 : (int64_t)off;
    ok = off != HADDR_UNDEF &&
         (int64_t)H5Dget_storage_size(dset) == values * s->esize;
    s->edge[0] = info->channels;
    for (int a = 0; a < 3; a++)
      s->edge[1 + a] = info->shape[a];
  } else if (ok) {
    /* info->chunk is in the file's axis order (a 3-D dataset's as
     * z, y, x, 1). */
    s->off = -1;
    s->edge[0] = info->chunk[s->cf ? 0 : 3];
    for (int a = 0; a < 3; a++)
      s->edge[1 + a] = info->chunk[s->cf ? a + 1 : a];
    ok = info->chunked && fully_allocated(dset);
  }
  H5Eclear2(H5E_DEFAULT);
  return ok && s->esize > 0;
}

/* The values of planes [z, z + nz) in one box, as one range of the
 * file: the box's rows of those planes for channel c, or (pieces of
 * every channel) for all the box's channels, c then the first of them. */
typedef struct piece {
  int64_t at, bytes; /* the range of the file */
  int64_t c, z, nz;  /* channel (all of the box's: its first), planes */
  int64_t y, x;      /* the box's origin in the plane */
} piece;

/* Whether the pieces of channel c (c < 0: all) have rows of whole planes
 * of one channel: read straight into place, with no buffer. */
static int rows_whole(const stored *s, const slabfeed_dataset_info *info,
                      int64_t c)
{
  return s->edge[2] == info->shape[1] && s->edge[3] == info->shape[2] &&
         (c >= 0 || s->edge[0] == 1);
}

typedef struct pieces {
  piece *p;
  int64_t n, cap;
} pieces;

static int pieces_add(pieces *ps, piece p)
{
  if (ps->n == ps->cap) {
    const int64_t cap = ps->cap > 0 ? 2 * ps->cap : 64;
    piece *q = realloc(ps->p, (size_t)cap * sizeof *q);
    if (q == NULL)
      return -1;
    ps->p = q;
    ps->cap = cap;
  }
  ps->p[ps->n++] = p;
  return 0;
}

/* Pieces other than whole planes go through a thread's buffer of at most
 * this many bytes (a box's plane more where one plane is larger). */
#define SF_PIECE_BYTES ((int64_t)8 << 20)
/* Channels last read through a sink: the planes of every channel sorted
 * out in groups of at most this many bytes (one plane more where one is
 * larger). */
#define SF_GROUP_BYTES ((int64_t)64 << 20)

/* The offset of the box of dset at origin (c, z, y, x) (look: the dataset
 * in a handle of the file of this rank alone), checked to hold a whole
 * box without filters; -1 with a failure in *e naming the chunk. */
static int64_t box_at(const stored *s, hid_t look, const int64_t o[4],
                      const char *path, const char *name, sf__err *e)
{
  if (!s->chunked)
    return s->off;
  /* The chunk's origin in the file's axis order (3-D: z, y, x). */
  hsize_t at[4];
  for (int a = 0; a < 4; a++)
    at[a] = (hsize_t)(s->cf ? o[a] : o[(a + 1) % 4]);
  const int64_t want =
      s->edge[0] * s->edge[1] * s->edge[2] * s->edge[3] * s->esize;
  unsigned mask = 0;
  haddr_t addr = HADDR_UNDEF;
  hsize_t size = 0;
  herr_t rc = -1;
#if H5_VERSION_GE(1, 10, 5)
  rc = H5Dget_chunk_info_by_coord(look, at, &mask, &addr, &size);
#else
  (void)look;
#endif
  if (rc >= 0 && addr != HADDR_UNDEF && mask == 0 && (int64_t)size == want)
    return (int64_t)addr;
  sf__fail(e, SLABFEED_ERR_IO,
           "the chunk at (%lld, %lld, %lld, %lld) of '%s' in '%s' %s",
           (long long)o[0], (long long)o[1], (long long)o[2], (long long)o[3],
           name, path,
           rc < 0 || addr == HADDR_UNDEF
               ? "cannot be found in the file"
               : "is not stored as a whole chunk without filters");
  if (rc < 0)
    sf__h5_detail(e);
  return -1;
}

/* The offsets of the boxes holding planes [z0, z1) of a dataset: every
 * channel box and every y and x box of the z boxes from kz0 on, looked up
 * once (H5Dget_chunk_info_by_coord walks HDF5 1.10's chunk index from its
 * start, so a lookup costs in proportion to the chunk's place in it:
 * about 20 ns a chunk passed, docs/PERFORMANCE.md). Contiguous storage
 * has no map (at NULL). */
typedef struct box_map {
  int64_t kz0, n[4]; /* boxes along channels, z (from kz0), y, x */
  int64_t *at;
} box_map;

static slabfeed_status map_boxes(const stored *s, hid_t look,
                                 const slabfeed_dataset_info *info, int64_t z0,
                                 int64_t z1, box_map *m, const char *path,
                                 const char *name, sf__err *e)
{
  memset(m, 0, sizeof *m);
  if (!s->chunked || z1 <= z0 || e->status != SLABFEED_OK)
    return e->status;
  const int64_t *E = s->edge;
  m->kz0 = z0 / E[1];
  m->n[0] = (info->channels + E[0] - 1) / E[0];
  m->n[1] = (z1 - 1) / E[1] - m->kz0 + 1;
  m->n[2] = (info->shape[1] + E[2] - 1) / E[2];
  m->n[3] = (info->shape[2] + E[3] - 1) / E[3];
  const int64_t boxes = m->n[0] * m->n[1] * m->n[2] * m->n[3];
  m->at = malloc((size_t)boxes * sizeof *m->at);
  if (m->at == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM,
                    "cannot hold the offsets of %lld chunks of '%s' in '%s'",
                    (long long)boxes, name, path);
  for (int64_t i = 0; i < boxes; i++) {
    const int64_t kx = i % m->n[3], ky = i / m->n[3] % m->n[2],
                  kz = i / (m->n[3] * m->n[2]) % m->n[1],
                  kc = i / (m->n[3] * m->n[2] * m->n[1]);
    const int64_t o[4] = {kc * E[0], (m->kz0 + kz) * E[1], ky * E[2],
                          kx * E[3]};
    if ((m->at[i] = box_at(s, look, o, path, name, e)) < 0)
      break;
  }
  return e->status;
}

/* The offset of the box at origin o (in the map's range). */
static int64_t box_of(const stored *s, const box_map *m, const int64_t o[4])
{
  if (m->at == NULL)
    return s->off;
  const int64_t *E = s->edge;
  return m->at[((o[0] / E[0] * m->n[1] + o[1] / E[1] - m->kz0) * m->n[2] +
                o[2] / E[2]) *
                   m->n[3] +
               o[3] / E[3]];
}

/* Appends the pieces of planes [z, z + n) of channel c (c < 0: every
 * channel, whole boxes of channels: the ranges of the read ceiling) of
 * the dataset to *ps, box by box in z, y, x order (and channel order
 * where c < 0), their offsets from m (which covers those planes). Unless
 * whole (the pieces move straight between the file and the planes, with
 * no buffer: rows_whole, as the caller uses them), pieces are cut into
 * plane groups of at most SF_PIECE_BYTES. Local; a failure in *e. */
static slabfeed_status pieces_of(const stored *s, const box_map *m,
                                 const slabfeed_dataset_info *info, int64_t c,
                                 int64_t z, int64_t n, int whole, pieces *ps,
                                 const char *path, const char *name, sf__err *e)
{
  const int64_t *E = s->edge, C = info->channels, Y = info->shape[1],
                X = info->shape[2];
  const int64_t cs = c < 0 ? E[0] : 1; /* channels per piece */
  /* Bytes of one plane of a piece, its planes per piece. */
  const int64_t pb = cs * E[2] * E[3] * s->esize;
  const int64_t step = whole                     ? E[1]
                       : SF_PIECE_BYTES / pb > 1 ? SF_PIECE_BYTES / pb
                                                 : 1;
  for (int64_t kc = c < 0 ? 0 : c / E[0]; kc * E[0] < (c < 0 ? C : c + 1); kc++)
    for (int64_t kz = z / E[1]; kz * E[1] < z + n; kz++)
      for (int64_t y = 0; y < Y; y += E[2])
        for (int64_t x = 0; x < X; x += E[3]) {
          const int64_t o[4] = {kc * E[0], kz * E[1], y, x};
          const int64_t at = box_of(s, m, o);
          const int64_t za = z > o[1] ? z : o[1],
                        zb = z + n < o[1] + E[1] ? z + n : o[1] + E[1];
          for (int64_t q = za; q < zb; q += step) {
            const int64_t nq = zb - q < step ? zb - q : step;
            /* The first value's place in the box (x = y = 0 of plane q). */
            const int64_t first =
                s->cf ? ((c < 0 ? 0 : c - o[0]) * E[1] + q - o[1]) * E[2] * E[3]
                      : (q - o[1]) * E[2] * E[3] * E[0];
            const piece p = {
                at + first * s->esize, nq * pb, c < 0 ? o[0] : c, q, nq, y, x};
            if (pieces_add(ps, p) != 0)
              return sf__fail(e, SLABFEED_ERR_NOMEM,
                              "cannot list the pieces of '%s' in '%s' to "
                              "read",
                              name, path);
          }
        }
  return SLABFEED_OK;
}

/* One thread's pieces [a, b) of planes from z0 on, read into dst (dense
 * planes of y x x floats from plane z0; with every channel (all), channel
 * k's kstride floats after channel 0's), through buf where a piece's rows
 * are not whole planes of one channel, neighbours in the file with one
 * pread; or written from src (write_piece_range). */
typedef struct piece_job {
  int fd, all, whole;
  const stored *s;
  const piece *p;
  int64_t a, b, z0, Y, X, C, kstride;
  float *dst;       /* reads: where the planes go */
  const float *src; /* writes: where they come from */
  int err;          /* errno, or -1: the file ends first */
  int64_t bad;      /* the piece that failed */
} piece_job;

/* Value i of a row of stored values (float32, or binary16 widened). */
static inline float stored_value(const unsigned char *row, int64_t i, int half)
{
  if (half) {
    uint16_t h;
    memcpy(&h, row + 2 * i, sizeof h);
    return sf__f16_to_f32(h);
  }
  float v;
  memcpy(&v, row + 4 * i, sizeof v);
  return v;
}

/* A thread's buffer of *cap bytes: none where its pieces move straight
 * (whole), else its largest piece and at least SF_PIECE_BYTES (groups of
 * neighbours). NULL with j->err ENOMEM where it cannot be had. */
static unsigned char *job_buffer(piece_job *j, int64_t *cap)
{
  *cap = 0;
  for (int64_t i = j->a; i < j->b && !j->whole; i++)
    *cap = j->p[i].bytes > *cap ? j->p[i].bytes : *cap;
  *cap = *cap > 0 && *cap < SF_PIECE_BYTES ? SF_PIECE_BYTES : *cap;
  unsigned char *buf = *cap > 0 ? malloc((size_t)*cap) : NULL;
  if (*cap > 0 && buf == NULL)
    j->err = ENOMEM, j->bad = j->a;
  return buf;
}

/* The end of the group of pieces from i on (before b) that lie one after
 * the other in the file and fit cap bytes together: read or written with
 * one call (chunks allocated one after the other are neighbours). */
static int64_t group_end(const piece *p, int64_t i, int64_t b, int64_t cap)
{
  int64_t g = i + 1, bytes = p[i].bytes;
  while (g < b && p[g].at == p[g - 1].at + p[g - 1].bytes &&
         bytes + p[g].bytes <= cap)
    bytes += p[g++].bytes;
  return g;
}

/* The rows of piece p, read into buf, sorted out to their planes. */
static void scatter_piece(const piece_job *j, const piece *p,
                          const unsigned char *buf)
{
  const stored *s = j->s;
  const int64_t vc = j->all ? s->edge[0] : 1;
  float *at =
      j->dst + (j->all ? p->c * j->kstride : 0) + (p->z - j->z0) * j->Y * j->X;
  const int64_t ny = j->Y - p->y < s->edge[2] ? j->Y - p->y : s->edge[2],
                nx = j->X - p->x < s->edge[3] ? j->X - p->x : s->edge[3];
  /* The box's channels past the dataset's last are not kept. */
  const int64_t nk = j->all && j->C - p->c < vc ? j->C - p->c : vc;
  for (int64_t q = 0; q < p->nz; q++)
    for (int64_t y = 0; y < ny; y++) {
      const unsigned char *from =
          buf + ((q * s->edge[2] + y) * s->edge[3]) * vc * s->esize;
      float *to = at + (q * j->Y + p->y + y) * j->X + p->x;
      if (vc == 1 && !s->half)
        memcpy(to, from, (size_t)nx * sizeof(float));
      else /* channels side by side in the file: one to each plane */
        for (int64_t k = 0; k < nk; k++)
          for (int64_t x = 0; x < nx; x++)
            to[k * j->kstride + x] = stored_value(from, x * vc + k, s->half);
    }
}

static void *read_piece_range(void *arg)
{
  piece_job *j = arg;
  const stored *s = j->s;
  const int whole = j->whole;
  int64_t cap = 0;
  unsigned char *buf = job_buffer(j, &cap);
  for (int64_t i = j->a; i < j->b && j->err == 0;) {
    const piece *p = &j->p[i];
    if (whole) { /* rows are whole planes: straight into place */
      float *at = j->dst + (j->all ? p->c * j->kstride : 0) +
                  (p->z - j->z0) * j->Y * j->X;
      j->err = sf__pio(j->fd, (char *)at, (size_t)p->bytes, (off_t)p->at, 1, 0);
      const widen_job w = {at, 0, (size_t)(p->bytes / s->esize)};
      if (j->err == 0 && s->half)
        widen_range((void *)&w);
      j->bad = i++;
      continue;
    }
    const int64_t g = group_end(j->p, i, j->b, cap);
    const int64_t bytes = j->p[g - 1].at + j->p[g - 1].bytes - p->at;
    j->err = sf__pio(j->fd, (char *)buf, (size_t)bytes, (off_t)p->at, 1, 0);
    for (int64_t k = i; k < g && j->err == 0; k++)
      scatter_piece(j, &j->p[k], buf + (j->p[k].at - p->at));
    j->bad = i;
    i = g;
  }
  free(buf);
  return NULL;
}

/* A job over the pieces of ps (its range and dst or src set later). */
static piece_job job_of(int fd, const stored *s, const pieces *ps,
                        const slabfeed_dataset_info *info, int all, int whole,
                        int64_t z0, int64_t kstride)
{
  return (piece_job){.fd = fd,
                     .all = all,
                     .whole = whole,
                     .s = s,
                     .p = ps->p,
                     .z0 = z0,
                     .Y = info->shape[1],
                     .X = info->shape[2],
                     .C = info->channels,
                     .kstride = kstride};
}

/* Pieces [0, n) by up to `threads` threads, each a run of neighbours as
 * fn's job (proto with its range [a, b) set); the first error, and the
 * piece that failed into *bad. */
static int pieces_run(void *(*fn)(void *), const piece_job *proto, int64_t n,
                      int threads, int64_t *bad)
{
  enum { T_MAX = 64 };
  const int64_t T = threads < 1       ? 1
                    : threads > T_MAX ? T_MAX
                    : threads > n     ? n
                                      : threads;
  piece_job job[T_MAX];
  for (int64_t t = 0; t < T; t++) {
    job[t] = *proto;
    job[t].a = n * t / T;
    job[t].b = n * (t + 1) / T;
  }
  sf__run_jobs(fn, job, sizeof job[0], (int)T);
  for (int64_t t = 0; t < T; t++)
    if (job[t].err != 0) {
      *bad = job[t].bad;
      return job[t].err;
    }
  return 0;
}

/* Planes [z, z + n) of channel c, read with pread from fd into dst (dense
 * planes of the dataset's y x x floats), on up to `threads` threads; c <
 * 0: of every channel, channel k's planes kstride floats after channel
 * 0's (channels last in the file: each voxel's values sorted out to its
 * channels' planes). */
static slabfeed_status read_planes(int fd, const stored *s, const box_map *m,
                                   const slabfeed_dataset_info *info, int64_t c,
                                   int64_t z, int64_t n, float *dst,
                                   int64_t kstride, int threads,
                                   const char *path, const char *name,
                                   sf__err *e)
{
  pieces ps = {NULL, 0, 0};
  if (n <= 0)
    return e->status;
  if (pieces_of(s, m, info, c, z, n, rows_whole(s, info, c), &ps, path, name,
                e) != SLABFEED_OK) {
    free(ps.p);
    return e->status;
  }
  const int64_t plane = info->shape[1] * info->shape[2];
  int err = 0;
  int64_t bad = 0;
  const int whole = rows_whole(s, info, c);
  if (whole && ps.n < threads) {
    /* Fewer pieces of whole planes than threads (contiguous storage, or
     * chunks of whole planes): each split over the threads in turn. */
    for (int64_t i = 0; i < ps.n && err == 0; i++) {
      const piece *p = &ps.p[i];
      float *at = dst + (p->z - z) * plane;
      err = sf__pio(fd, (char *)at, (size_t)p->bytes, (off_t)p->at, threads, 0);
      if (err == 0 && s->half)
        widen_halves(at, (size_t)(p->nz * plane), threads);
      bad = i;
    }
  } else {
    piece_job proto = job_of(fd, s, &ps, info, c < 0, whole, z, kstride);
    proto.dst = dst;
    err = pieces_run(read_piece_range, &proto, ps.n, threads, &bad);
  }
  if (err != 0) {
    const piece *p = &ps.p[bad];
    char where[96] = "";
    if (s->chunked)
      snprintf(where, sizeof where, " (the chunk's rows at y %lld, x %lld)",
               (long long)p->y, (long long)p->x);
    /* Into a slab that is files (shared_window file, or auto's), the
     * failure may be the write of those files: say so. */
    const char *into = sf__fileback_has(dst) && (err == ENOSPC || err == EFBIG)
                           ? " (copying into the slab's /dev/shm files, "
                             "shared_window auto or file: /dev/shm full; "
                             "shared_window per-rank keeps MPI windows)"
                           : "";
    sf__fail(e, err == ENOMEM ? SLABFEED_ERR_NOMEM : SLABFEED_ERR_IO,
             "reading planes [%lld, %lld) of channel%s %lld of '%s' in '%s' "
             "with pread failed%s%s: %s",
             (long long)p->z, (long long)(p->z + p->nz), c < 0 ? "s from" : "",
             (long long)p->c, name, path, where, into,
             err < 0 ? "the file ends before the data" : strerror(err));
  }
  free(ps.p);
  return e->status;
}

/* A handle of the file of path for this rank alone, to find the chunks
 * of dset in (H5Dget_chunk_info_by_coord reads the chunk index, and the
 * loader's handle reads metadata collectively: every rank would have to
 * ask for the same chunks). *file and the returned dataset are closed by
 * the caller; H5I_INVALID_HID with a failure in *e. */
static hid_t look_open(hid_t dset, const char *path, const char *name,
                       hid_t *file, sf__err *e)
{
  char in[1024];
  const hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  int ok = fapl >= 0 && H5Pset_fapl_sec2(fapl) >= 0 &&
           H5Iget_name(dset, in, sizeof in) > 0;
#if H5_VERSION_GE(1, 10, 7)
  /* Read only, beside the loader's own open: no lock to take. */
  ok = ok && H5Pset_file_locking(fapl, 0, 1) >= 0;
#endif
  *file = ok ? H5Fopen(path, H5F_ACC_RDONLY, fapl) : H5I_INVALID_HID;
  const hid_t d =
      *file >= 0 ? H5Dopen2(*file, in, H5P_DEFAULT) : H5I_INVALID_HID;
  if (d < 0) { /* HDF5's reason first: the next call clears it */
    sf__fail(e, SLABFEED_ERR_IO,
             "cannot open '%s' in '%s' on this rank alone to find its "
             "chunks",
             name, path);
    sf__h5_detail(e);
  }
  if (fapl >= 0)
    H5Pclose(fapl);
  return d;
}

/* The runs of dataset dset (stored as *s) read with pread from path. */
static slabfeed_status
read_direct(hid_t dset, const char *path, const char *name,
            const slabfeed_dataset_info *info, const stored *s,
            const sf__h5_run *runs, int n_runs, float *dst, int64_t cstride,
            int threads, sf__sink *sink, sf__progress *pg, sf__err *e)
{
  if (e->status != SLABFEED_OK || runs == NULL)
    return e->status;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return sf__fail(e, SLABFEED_ERR_IO, "cannot open '%s' to read '%s': %s",
                    path, name, strerror(errno));
  /* The chunks of the planes of all runs, looked up once. */
  int64_t z0 = INT64_MAX, z1 = 0;
  for (int i = 0; i < n_runs; i++)
    if (runs[i].n > 0) {
      z0 = runs[i].z < z0 ? runs[i].z : z0;
      z1 = runs[i].z + runs[i].n > z1 ? runs[i].z + runs[i].n : z1;
    }
  hid_t lf = H5I_INVALID_HID, look = s->chunked && z1 > z0
                                         ? look_open(dset, path, name, &lf, e)
                                         : H5I_INVALID_HID;
  box_map map;
  map_boxes(s, look, info, z0, z1, &map, path, name, e);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (sf__inject("read.direct", rank)) /* a failure of this rank alone */
    sf__fail(e, SLABFEED_ERR_IO,
             "injected failure at stage 'read.direct' of '%s' in '%s'", name,
             path);
  const box_map *bm = &map;
  const int64_t plane = info->shape[1] * info->shape[2], C = info->channels;
  /* Boxes that hold several channels side by side (channels last): each
   * run's planes are read once for all channels, straight into the
   * channels' planes; with a sink, through a buffer of a group of planes
   * of every channel, handed over one channel at a time. */
  const int sides = !s->cf && s->edge[0] > 1;
  int64_t gm = 0; /* planes per group */
  float *group = NULL;
  if (sides && sink != NULL && e->status == SLABFEED_OK) {
    gm = SF_GROUP_BYTES / (plane * C * (int64_t)sizeof(float));
    gm = gm > sink->floats / plane ? sink->floats / plane : gm;
    gm = gm < 1 ? 1 : gm; /* (the slab read's runs fit the sink's buffer) */
    group = malloc((size_t)(gm * plane * C) * sizeof *group);
    if (group == NULL)
      sf__fail(e, SLABFEED_ERR_NOMEM,
               "cannot allocate %lld MB to sort the channels of '%s' in '%s' "
               "out",
               (long long)(gm * plane * C * 4 >> 20), name, path);
  }
  for (int i = 0; i < n_runs && sides && e->status == SLABFEED_OK; i++) {
    const sf__h5_run *r = &runs[i];
    if (sink == NULL) {
      if (r->n > 0 &&
          read_planes(fd, s, bm, info, -1, r->z, r->n, dst + r->off, cstride,
                      threads, path, name, e) == SLABFEED_OK &&
          pg != NULL)
        sf__progress_add(pg, (double)(r->n * plane * C) * sizeof(float));
      continue;
    }
    for (int64_t q = r->z; q < r->z + r->n && e->status == SLABFEED_OK;
         q += gm) {
      const int64_t m = r->z + r->n - q < gm ? r->z + r->n - q : gm;
      if (read_planes(fd, s, bm, info, -1, q, m, group, m * plane, threads,
                      path, name, e) != SLABFEED_OK)
        break;
      for (int64_t c = 0; c < C && e->status == SLABFEED_OK; c++) {
        float *into = sink->buffer(sink, e);
        if (into == NULL)
          break;
        memcpy(into, group + c * m * plane, (size_t)(m * plane) * sizeof *into);
        sink->put(sink, into, dst + c * cstride + r->off + (q - r->z) * plane,
                  m * plane, e);
      }
      if (pg != NULL && e->status == SLABFEED_OK)
        sf__progress_add(pg, (double)(m * plane * C) * sizeof(float));
    }
  }
  free(group);
  for (int i = 0; i < n_runs && !sides && e->status == SLABFEED_OK; i++)
    for (int64_t c = 0; c < C && e->status == SLABFEED_OK; c++) {
      const sf__h5_run *r = &runs[i];
      if (r->n == 0)
        continue;
      float *const at = dst + c * cstride + r->off;
      float *into = sink != NULL ? sink->buffer(sink, e) : at;
      if (into == NULL || read_planes(fd, s, bm, info, c, r->z, r->n, into, 0,
                                      threads, path, name, e) != SLABFEED_OK)
        break;
      const int64_t count = r->n * plane;
      if (sink != NULL && sink->put(sink, into, at, count, e) != SLABFEED_OK)
        break;
      if (pg != NULL)
        sf__progress_add(pg, (double)count * sizeof(float));
    }
  free(map.at);
  if (look >= 0)
    H5Dclose(look);
  if (lf >= 0)
    H5Fclose(lf);
  close(fd);
  return e->status;
}

/* Whether pread reads dset (into *s): values at known offsets
 * (stored_of), of IEEE float32 little endian or the binary16 slabfeed
 * widens itself; channels first or last. */
static int direct_of(hid_t dset, const slabfeed_dataset_info *info, stored *s)
{
  if (!stored_of(dset, info, s))
    return 0;
  if (s->half)
    return 1;
  const hid_t t = H5Dget_type(dset);
  const int ok = t >= 0 && H5Tequal(t, H5T_IEEE_F32LE) > 0;
  if (t >= 0)
    H5Tclose(t);
  H5Eclear2(H5E_DEFAULT);
  return ok;
}

int sf__h5_direct_ok(hid_t dset, const slabfeed_dataset_info *info)
{
  stored s;
  return direct_of(dset, info, &s);
}

/* ---- Direct writes of chunks (0.10) ------------------------------------ */

/* Where piece p's first plane starts in the source (with all, channels
 * side by side: the box holds every channel, p->c is 0). */
static const float *piece_source(const piece_job *j, const piece *p)
{
  const int64_t vs = j->all ? j->C : 1;
  return j->src + (j->all ? 0 : p->c * j->kstride) +
         (p->z - j->z0) * j->Y * j->X * vs;
}

/* The rows of piece p gathered from src into out, in the stored type. */
static void gather_piece(const piece_job *j, const piece *p, unsigned char *out)
{
  const stored *s = j->s;
  const int64_t vc = j->all ? s->edge[0] : 1, E2 = s->edge[2], E3 = s->edge[3];
  const int64_t plane = j->Y * j->X, vs = j->all ? j->C : 1, es = s->esize;
  const float *from = piece_source(j, p);
  const int64_t ny = j->Y - p->y < E2 ? j->Y - p->y : E2,
                nx = j->X - p->x < E3 ? j->X - p->x : E3,
                nk = j->C - p->c < vc ? j->C - p->c : vc;
  /* Float32 rows whose values are the source's, one after the other. */
  const int plain = !s->half && nk == vc && (vc == 1 || vc == vs);
  for (int64_t q = 0; q < p->nz; q++)
    for (int64_t y = 0; y < E2; y++) {
      unsigned char *row = out + (q * E2 + y) * E3 * vc * es;
      const int64_t done = y < ny ? nx : 0; /* values past the edges: 0 */
      const float *r = from + (q * plane + (p->y + y) * j->X + p->x) * vs;
      if (done > 0 && plain)
        memcpy(row, r, (size_t)(nx * vc * es));
      else
        for (int64_t x = 0; x < done; x++)
          for (int64_t k = 0; k < vc; k++) {
            const float v = k < nk ? r[x * vs + k] : 0.0f;
            if (s->half) {
              const uint16_t h = sf__f32_to_f16(v);
              memcpy(row + (x * vc + k) * 2, &h, sizeof h);
            } else {
              memcpy(row + (x * vc + k) * 4, &v, sizeof v);
            }
          }
      memset(row + done * vc * es, 0, (size_t)((E3 - done) * vc * es));
    }
}

/* One thread's pieces [a, b) of planes from z0 on, from src (dense planes
 * of y x x floats: channel k's kstride floats after channel 0's; with
 * all, every voxel's C values side by side) into the boxes' rows in the
 * stored type (gather_piece), neighbours in the file with one pwrite;
 * the values of a box past the dataset's y and x edges are written as
 * zeros (planes past its last plane are not written). */
static void *write_piece_range(void *arg)
{
  piece_job *j = arg;
  int64_t cap = 0;
  unsigned char *buf = job_buffer(j, &cap);
  for (int64_t i = j->a; i < j->b && j->err == 0;) {
    const piece *p = &j->p[i];
    if (j->whole) { /* float32 rows of whole planes: straight out */
      j->err = sf__pio(j->fd, (char *)piece_source(j, p), (size_t)p->bytes,
                       (off_t)p->at, 1, 1);
      j->bad = i++;
      continue;
    }
    const int64_t g = group_end(j->p, i, j->b, cap);
    for (int64_t k = i; k < g; k++)
      gather_piece(j, &j->p[k], buf + (j->p[k].at - p->at));
    const int64_t bytes = j->p[g - 1].at + j->p[g - 1].bytes - p->at;
    j->err = sf__pio(j->fd, (char *)buf, (size_t)bytes, (off_t)p->at, 1, 1);
    j->bad = i;
    i = g;
  }
  free(buf);
  return NULL;
}

slabfeed_status sf__h5_write_direct(hid_t dset, const char *path,
                                    const char *name,
                                    const slabfeed_dataset_info *info,
                                    int64_t z, int64_t n, const float *src,
                                    int64_t cstride, int threads,
                                    sf__progress *pg, sf__err *e)
{
  stored s;
  if (!direct_of(dset, info, &s) || (!s.cf && s.edge[0] != info->channels))
    return sf__fail(e, SLABFEED_ERR_IO,
                    "'%s' in '%s' cannot be written directly: its values are "
                    "not at known offsets (contiguous and allocated, or in "
                    "allocated chunks without filters, of every channel "
                    "where channels are last)",
                    name, path);
  if (n <= 0)
    return e->status;
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return sf__fail(e, SLABFEED_ERR_IO, "cannot open '%s' to write '%s': %s",
                    path, name, strerror(errno));
  box_map map;
  pieces ps = {NULL, 0, 0};
  map_boxes(&s, dset, info, z, z + n, &map, path, name, e);
  /* Channels first: each channel's planes; channels last: the planes of
   * every channel at once (a box holds all channels). Float32 rows of
   * whole planes are the source's bytes (channels last: with every
   * channel, as the source holds them) and go straight out; the rest
   * through the buffer, in pieces of at most SF_PIECE_BYTES. */
  const int whole =
      s.edge[2] == info->shape[1] && s.edge[3] == info->shape[2] && !s.half;
  for (int64_t c = s.cf ? 0 : -1;
       c < (s.cf ? info->channels : 0) && e->status == SLABFEED_OK; c++)
    pieces_of(&s, &map, info, c, z, n, whole, &ps, path, name, e);
  piece_job proto = job_of(fd, &s, &ps, info, !s.cf, whole, z, cstride);
  proto.src = src;
  int64_t bad = 0;
  int err = 0;
  const int split = whole && ps.n < threads;
  for (int64_t i = 0; split && i < ps.n && err == 0; i++) {
    /* Fewer pieces of whole planes than threads (contiguous storage, or
     * chunks of whole planes): each split over the threads in turn. */
    const piece *p = &ps.p[i];
    err = sf__pio(fd, (char *)piece_source(&proto, p), (size_t)p->bytes,
                  (off_t)p->at, threads, 1);
    bad = i;
  }
  if (e->status == SLABFEED_OK && !split)
    err = pieces_run(write_piece_range, &proto, ps.n, threads, &bad);
  if (err != 0) {
    const piece *p = &ps.p[bad];
    char where[96] = "";
    if (s.chunked)
      snprintf(where, sizeof where, " (the chunk's rows at y %lld, x %lld)",
               (long long)p->y, (long long)p->x);
    sf__fail(e, err == ENOMEM ? SLABFEED_ERR_NOMEM : SLABFEED_ERR_IO,
             "writing planes [%lld, %lld) of channel%s %lld of '%s' in '%s' "
             "with pwrite failed%s: %s",
             (long long)p->z, (long long)(p->z + p->nz), s.cf ? "" : "s from",
             (long long)p->c, name, path, where,
             err == ENOMEM ? "no memory for a thread's buffer" : strerror(err));
  } else if (pg != NULL && e->status == SLABFEED_OK) {
    sf__progress_add(pg, (double)(n * info->shape[1] * info->shape[2] *
                                  info->channels * s.esize));
  }
  free(ps.p);
  free(map.at);
  if (close(fd) != 0 && e->status == SLABFEED_OK)
    sf__fail(e, SLABFEED_ERR_IO, "closing '%s' after writing '%s': %s", path,
             name, strerror(errno));
  return e->status;
}

slabfeed_status sf__h5_ranges(hid_t dset, const char *path, const char *name,
                              const slabfeed_dataset_info *info, int64_t z0,
                              int64_t z1, slabfeed_byte_range *out, int64_t cap,
                              int64_t *n, sf__err *e)
{
  *n = 0;
  stored s;
  if (!stored_of(dset, info, &s))
    return sf__fail(e, SLABFEED_ERR_FORMAT,
                    "the values of '%s' in '%s' are not at known offsets "
                    "of the file (virtual, external, filtered, not "
                    "allocated, or not of a fixed size)",
                    name, path);
  pieces ps = {NULL, 0, 0};
  box_map map;
  map_boxes(&s, dset, info, z0, z1, &map, path, name, e);
  /* Channels first: each channel's planes; channels last: the planes of
   * every channel at once. */
  for (int64_t c = s.cf ? 0 : -1;
       c < (s.cf ? info->channels : 0) && e->status == SLABFEED_OK && z1 > z0;
       c++)
    pieces_of(&s, &map, info, c, z0, z1 - z0, rows_whole(&s, info, c), &ps,
              path, name, e);
  free(map.at);
  /* Neighbouring pieces of the file as one range. */
  slabfeed_byte_range cur = {0, 0};
  for (int64_t i = 0; i <= ps.n && e->status == SLABFEED_OK; i++) {
    if (i < ps.n && cur.bytes > 0 && cur.offset + cur.bytes == ps.p[i].at) {
      cur.bytes += ps.p[i].bytes;
      continue;
    }
    if (cur.bytes > 0 && *n < cap)
      out[*n] = cur;
    *n += cur.bytes > 0;
    if (i < ps.n)
      cur = (slabfeed_byte_range){ps.p[i].at, ps.p[i].bytes};
  }
  free(ps.p);
  return e->status;
}

slabfeed_status sf__h5_read(hid_t dset, const char *path, const char *name,
                            const slabfeed_dataset_info *info,
                            const sf__h5_run *runs, int n_runs, float *dst,
                            int64_t cstride, int mode, int threads,
                            sf__sink *sink, sf__progress *pg, sf__err *e)
{
  stored s;
  if (mode & SF_H5_DIRECT && direct_of(dset, info, &s))
    return read_direct(dset, path, name, info, &s, runs, n_runs, dst, cstride,
                       threads, sink, pg, e);
  const int independent = (mode & SF_H5_INDEPENDENT) != 0;
  const hsize_t mdims = (hsize_t)(info->channels * cstride);
  const hid_t fspace = H5Dget_space(dset);
  const hid_t mspace = H5Screate_simple(1, &mdims, NULL);
  const hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  const int collective = !independent && fully_allocated(dset);
  if (fspace < 0 || mspace < 0 || dxpl < 0)
    sf__fail(e, SLABFEED_ERR_IO, "cannot set up the read of '%s' in '%s'", name,
             path);
#ifdef H5_HAVE_PARALLEL
  else if (H5Pset_dxpl_mpio(dxpl, collective ? H5FD_MPIO_COLLECTIVE
                                             : H5FD_MPIO_INDEPENDENT) < 0)
    sf__fail(e, SLABFEED_ERR_IO, "cannot set the transfer mode of '%s'", name);
#endif
  const int can_read = fspace >= 0 && mspace >= 0 && dxpl >= 0;
  const hid_t half = half_type(dset);
  /* Every rank makes n_runs * channels calls; after a local failure they
   * transfer nothing, so that collective calls keep matching. Independent
   * reads of a failed rank are simply skipped. */
  const sf__h5_run none = {0, 0, 0};
  for (int i = 0; i < n_runs && can_read; i++) {
    const sf__h5_run *r = runs != NULL ? &runs[i] : &none;
    for (int64_t c = 0; c < info->channels; c++) {
      int64_t n = e->status == SLABFEED_OK ? r->n : 0;
      /* Where the planes belong, and where they land: there, or in the
       * sink's buffer (a rank without one transfers nothing). */
      float *const at = dst + c * cstride + r->off;
      float *into = at;
      if (sink != NULL && n > 0 && (into = sink->buffer(sink, e)) == NULL)
        n = 0;
      if (n == 0 && !collective)
        continue;
      herr_t rc = select_file(fspace, info, c, r->z, n);
      const hsize_t cnt = (hsize_t)(n * info->shape[1] * info->shape[2]);
      if (half >= 0 || sink != NULL) {
        /* Dense floats of their own: the halves as stored into the start
         * of the planes' floats, then widened (HDF5 1.10's conversion of
         * a user-defined half type runs at about 30 MB/s), or floats into
         * the sink's buffer. */
        const hid_t hs = H5Screate_simple(1, &cnt, NULL);
        rc = rc < 0 || hs < 0 ? -1 : n == 0 ? H5Sselect_none(hs) : 0;
        if (rc >= 0)
          rc = H5Dread(dset, half >= 0 ? half : H5T_NATIVE_FLOAT, hs, fspace,
                       dxpl, into);
        if (rc >= 0 && half >= 0)
          widen_halves(into, (size_t)cnt, threads);
        if (hs >= 0)
          H5Sclose(hs);
      } else {
        rc = rc < 0 ? rc
                    : select_mem(mspace, cstride, c, r->off, n, info->shape[1],
                                 info->shape[2]);
        if (rc >= 0)
          rc = H5Dread(dset, H5T_NATIVE_FLOAT, mspace, fspace, dxpl, dst);
      }
      if (rc >= 0 && n > 0 && sink != NULL)
        sink->put(sink, into, at, (int64_t)cnt, e);
      if (rc >= 0 && n > 0 && pg != NULL)
        sf__progress_add(pg, (double)n * (double)info->shape[1] *
                                 (double)info->shape[2] * sizeof(float));
      if (rc < 0 && e->status == SLABFEED_OK) {
        sf__fail(e, SLABFEED_ERR_IO,
                 "reading planes [%lld, %lld) of channel %lld of '%s' in "
                 "'%s' failed",
                 (long long)r->z, (long long)(r->z + r->n), (long long)c, name,
                 path);
        sf__h5_detail(e);
      }
    }
  }
  if (half >= 0)
    H5Tclose(half);
  if (dxpl >= 0)
    H5Pclose(dxpl);
  if (mspace >= 0)
    H5Sclose(mspace);
  if (fspace >= 0)
    H5Sclose(fspace);
  return e->status;
}

herr_t sf__h5_write_layout(hid_t dset, int cf)
{
  const hid_t t = H5Tcopy(H5T_C_S1);
  const hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5I_INVALID_HID;
  herr_t rc = t < 0 || sp < 0 || H5Tset_size(t, 2) < 0 ? -1 : 0;
  if (rc >= 0)
    a = H5Acreate2(dset, SF_LAYOUT_ATTR, t, sp, H5P_DEFAULT, H5P_DEFAULT);
  rc = a < 0 ? -1 : H5Awrite(a, t, cf ? "cf" : "cl");
  if (a >= 0)
    H5Aclose(a);
  if (sp >= 0)
    H5Sclose(sp);
  if (t >= 0)
    H5Tclose(t);
  return rc;
}

hid_t sf__h5_file_type(int float16)
{
  const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  if (t < 0 || !float16)
    return t;
  if (H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_size(t, 2) < 0 ||
      H5Tset_ebias(t, 15) < 0) {
    H5Tclose(t);
    return H5I_INVALID_HID;
  }
  return t;
}

herr_t sf__h5_transfer_planes_in(hid_t dset, int cf, int64_t z, int64_t n,
                                 int64_t mz, int64_t mq, hid_t dxpl,
                                 hid_t mtype, int write, void *buf)
{
  const hid_t fspace = H5Dget_space(dset);
  hid_t mspace = H5I_INVALID_HID;
  hsize_t start[4] = {0, 0, 0, 0}, count[4], mdims[4];
  /* Rank 4, or 3 (Z,Y,X): one channel, z first as channels-last. */
  const int nd = fspace >= 0 ? H5Sget_simple_extent_ndims(fspace) : -1;
  herr_t rc = (nd != 4 && nd != 3) ||
                      H5Sget_simple_extent_dims(fspace, count, NULL) != nd
                  ? -1
                  : 0;
  if (nd == 3)
    cf = 0;
  if (rc >= 0 && n == 0) {
    const hsize_t one = 1;
    mspace = H5Screate_simple(1, &one, NULL);
    rc = mspace < 0 || H5Sselect_none(mspace) < 0 || H5Sselect_none(fspace) < 0
             ? -1
             : 0;
  } else if (rc >= 0) {
    const int za = cf ? 1 : 0;
    start[za] = (hsize_t)z;
    count[za] = (hsize_t)n;
    memcpy(mdims, count, sizeof mdims);
    mdims[za] = (hsize_t)mz;
    mspace = H5Screate_simple(nd, mdims, NULL);
    rc = mspace < 0 ? -1
                    : H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL,
                                          count, NULL);
    if (rc >= 0 && mz != n) {
      hsize_t mstart[4] = {0, 0, 0, 0};
      mstart[za] = (hsize_t)mq;
      rc = H5Sselect_hyperslab(mspace, H5S_SELECT_SET, mstart, NULL, count,
                               NULL);
    }
  }
  if (rc >= 0)
    rc = write ? H5Dwrite(dset, mtype, mspace, fspace, dxpl, buf)
               : H5Dread(dset, mtype, mspace, fspace, dxpl, buf);
  if (mspace >= 0)
    H5Sclose(mspace);
  if (fspace >= 0)
    H5Sclose(fspace);
  return rc;
}

herr_t sf__h5_transfer_planes(hid_t dset, int cf, int64_t z, int64_t n,
                              hid_t dxpl, hid_t mtype, int write, void *buf)
{
  return sf__h5_transfer_planes_in(dset, cf, z, n, n, 0, dxpl, mtype, write,
                                   buf);
}

int sf__h5_number_attr(hid_t file, const char *path, const char *name,
                       double *value, sf__err *e)
{
  /* "OBJ/ATTR": the object is the part before the last '/'. */
  char obj[512] = "/";
  const char *slash = strrchr(name, '/'), *attr = name;
  if (slash != NULL) {
    const size_t n = (size_t)(slash - name);
    if (n + 1 >= sizeof obj)
      return 0;
    if (n > 0) { /* "/ATTR" is the root's */
      memcpy(obj, name, n);
      obj[n] = '\0';
    }
    attr = slash + 1;
  }
  /* The object: each link of its path must exist (H5Oopen of a missing
   * path is an error, not an answer). */
  if (strcmp(obj, "/") != 0) {
    char part[512];
    for (const char *p = obj; *p != '\0';) {
      const char *q = strchr(p + (*p == '/'), '/');
      const size_t n = q != NULL ? (size_t)(q - obj) : strlen(obj);
      memcpy(part, obj, n);
      part[n] = '\0';
      const htri_t there = H5Lexists(file, part, H5P_DEFAULT);
      if (there <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
      }
      if (q == NULL)
        break;
      p = q;
    }
  }
  const hid_t o = H5Oopen(file, obj, H5P_DEFAULT);
  if (o < 0) {
    H5Eclear2(H5E_DEFAULT);
    return 0;
  }
  int found = 0;
  const htri_t has = H5Aexists(o, attr);
  if (has > 0) {
    const hid_t a = H5Aopen(o, attr, H5P_DEFAULT);
    const hid_t t = a >= 0 ? H5Aget_type(a) : H5I_INVALID_HID;
    const hid_t sp = a >= 0 ? H5Aget_space(a) : H5I_INVALID_HID;
    const H5T_class_t k = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    const hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    if (a < 0 || t < 0 || sp < 0) {
      sf__fail(e, SLABFEED_ERR_FORMAT,
               "parameter '%s' of '%s': the attribute cannot be read", name,
               path);
      sf__h5_detail(e);
      found = -1;
    } else if ((k != H5T_INTEGER && k != H5T_FLOAT) || np != 1) {
      sf__fail(e, SLABFEED_ERR_FORMAT,
               "parameter '%s' of '%s': the attribute is %s, not one number",
               name, path,
               k != H5T_INTEGER && k != H5T_FLOAT
                   ? (k == H5T_STRING ? "a string" : "not numeric")
                   : "an array of several values");
      found = -1;
    } else if (H5Aread(a, H5T_NATIVE_DOUBLE, value) < 0) {
      sf__fail(e, SLABFEED_ERR_FORMAT,
               "parameter '%s' of '%s': reading the attribute failed", name,
               path);
      sf__h5_detail(e);
      found = -1;
    } else {
      found = 1;
    }
    if (sp >= 0)
      H5Sclose(sp);
    if (t >= 0)
      H5Tclose(t);
    if (a >= 0)
      H5Aclose(a);
  } else {
    H5Eclear2(H5E_DEFAULT);
  }
  H5Oclose(o);
  return found;
}
