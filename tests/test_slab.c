/* Parallel slab read: every voxel of every rank's slab and halo equals the
 * index function, for uneven splits, both layouts, float16 and chunking,
 * and for replication groups (every rank its own node, groups of 1 and 2
 * nodes, locality's extra planes): the file is read once in total and the
 * replicas arrive over MPI. Each case is read first through a sink (the
 * path of the staged fill into GPU memory), whose copy, completed by
 * sf__store_each_copy, must equal the published segment. */
#define _DEFAULT_SOURCE /* mincore */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/geometry.h"
#include "common/sys.h"
#include "io/h5.h"
#include "testutil.h"
#include "io/slab.h"

/* A sink into host memory, as the GPU back end's staged fill is into
 * device memory (backend/resident.c): every transfer lands in one of two
 * small buffers and is copied from there to its place in a copy of the
 * segment. */
typedef struct host_sink {
  sf__sink k;
  float *buf[2];
  int next;
  char *copy;       /* laid out as the segment */
  const char *base; /* the segment: the layout, never written */
  int64_t bytes, floats_put, outside;
} host_sink;

static float *hs_buffer(sf__sink *k, sf__err *e)
{
  (void)e;
  host_sink *h = (host_sink *)k;
  h->next ^= 1;
  return h->buf[h->next];
}

static slabfeed_status hs_put(sf__sink *k, float *buf, const float *at,
                              int64_t n, sf__err *e)
{
  host_sink *h = (host_sink *)k;
  const int64_t off = (const char *)at - h->base;
  if (off < 0 || off + n * 4 > h->bytes || n > k->floats ||
      (buf != h->buf[0] && buf != h->buf[1])) {
    h->outside++;
    return e->status;
  }
  memcpy(h->copy + off, buf, (size_t)n * 4);
  h->floats_put += n;
  return e->status;
}

/* The rest of the sink's copy (sf__store_each_copy) from the published
 * segments of the node, as the GPU back end copies it between devices. */
static slabfeed_status rest_from_peers(sf__store *s, int r, int64_t from,
                                       int64_t to, int64_t bytes, void *arg,
                                       sf__err *e)
{
  host_sink *h = arg;
  if (s->peer[r] == NULL || to < 0 || to + bytes > h->bytes)
    h->outside++;
  else
    memcpy(h->copy + to, s->peer[r] + from, (size_t)bytes);
  return e->status;
}

/* The read through a sink (io/sink.h): the segment stays unwritten, every
 * plane this rank reads lands at its place in the sink's copy through
 * buffers of two planes, nothing else does; whether every plane of the
 * segment is read on the node (sf__store_node_read) against the
 * placement. Returns the sink (its copy to be completed after the
 * publish), or one with copy NULL where it could not run. */
static host_sink read_through_sink(sf__store *s, hid_t d[2], const char *path,
                                   const char *const names[2],
                                   const slabfeed_dataset_info info[2],
                                   int independent, sf__err *e)
{
  host_sink h = {{2 * s->shape[1] * s->shape[2], hs_buffer, hs_put},
                 {NULL, NULL},
                 0,
                 NULL,
                 s->base,
                 s->bytes,
                 0,
                 0};
  const size_t bb = (size_t)h.k.floats * 4;
  h.buf[0] = malloc(bb);
  h.buf[1] = malloc(bb);
  h.copy = malloc((size_t)s->bytes + 1);
  if (h.buf[0] == NULL || h.buf[1] == NULL || h.copy == NULL) {
    free(h.copy);
    h.copy = NULL;
  } else {
    memset(h.copy, 0xA5, (size_t)s->bytes);
    memset(s->base, 0xA5, (size_t)s->bytes);
  }
  /* Every rank makes the calls (a rank without memory reads nothing). */
  double want = 0;
  for (int k = 0; k < 2; k++) {
    sf__slab_read(s, k, 0, d[k], path, names[k], &info[k], 0, info[k].shape[0],
                  independent, h.copy != NULL ? &h.k : NULL, NULL, e);
    want += sf__slab_bytes(s, k, info[k].channels, &info[k].shape[1], 0,
                           info[k].shape[0]) /
            4;
  }
  free(h.buf[0]);
  free(h.buf[1]);
  if (h.copy == NULL || e->status != SLABFEED_OK)
    return h;
  int64_t written = 0, bad = 0, extra = 0;
  for (int64_t i = 0; i < s->bytes; i++)
    written += (unsigned char)s->base[i] != 0xA5;
  CHECK(written == 0 && h.outside == 0 && h.floats_put == (int64_t)want,
        "read through a sink: %lld segment bytes written, %lld transfers "
        "out of place, %lld of %.0f floats put",
        (long long)written, (long long)h.outside, (long long)h.floats_put,
        want);
  /* Planes this rank read hold the index function, the rest the fill. */
  const int64_t Z = s->shape[0], Y = s->shape[1], X = s->shape[2];
  const int64_t planes = sf__store_planes(s, s->rank);
  const int64_t first = sf__placement_first(&s->L, s->rank);
  int here = 1;
  for (int k = 0; k < 2; k++) {
    const float *seg =
        (const float *)(h.copy + sf__store_offset(s, s->rank, k));
    for (int64_t c = 0; c < info[k].channels; c++)
      for (int64_t p = 0; p < planes; p++) {
        const int64_t z = sf__pmod(first + p, Z);
        int64_t end;
        const int r = sf__placement_reader(&s->L, z, &end);
        const int mine = r == s->rank && z - s->L.core0[r] + s->L.lo[r] == p;
        here &= s->L.nodeof[r] == s->L.nodeof[s->rank];
        for (int64_t i = 0; i < Y * X; i++) {
          const float got = seg[(c * planes + p) * Y * X + i];
          if (mine)
            bad += got != slabfeed_index_value(k, (int)c, z, i / X, i % X);
          else {
            uint32_t u;
            memcpy(&u, &got, 4);
            extra += u != 0xA5A5A5A5u;
          }
        }
      }
  }
  CHECK(bad == 0 && extra == 0,
        "read through a sink: %lld floats read differ, %lld floats of planes "
        "read by others written",
        (long long)bad, (long long)extra);
  CHECK(sf__store_node_read(s) == here,
        "every plane of rank %d's segment read on its node: %d, placement "
        "says %d",
        s->rank, sf__store_node_read(s), here);
  return h;
}

/* slabfeed_stored_ranges of both datasets of a generated file, for the
 * planes of this rank's slab: ranges inside the file, in order, none
 * overlapping, and exactly the bytes that hold those planes (chunked: of
 * every chunk they cross, whole chunk rows up to the chunks' grid); for
 * contiguous channels-first storage, the bytes read back are the values. */
static void check_ranges(const char *path, const char *names[2],
                         const slabfeed_dataset_info info[2], int chunked,
                         int f16)
{
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int64_t file_bytes = (int64_t)sf__h5_file_bytes(path);
  for (int k = 0; k < 2; k++) {
    const slabfeed_dataset_info *in = &info[k];
    int64_t z0 = 0, z1 = 0;
    slabfeed_slab_plan(in->shape[0], size, rank, &z0, &z1);
    char err[512];
    int64_t n = -1;
    CHECK(slabfeed_stored_ranges(path, names[k], in->layout, z0, z1, NULL, 0,
                                 &n, err, sizeof err) == SLABFEED_OK &&
              n >= (z1 > z0),
          "%s: count the ranges of %s: %s", path, names[k], err);
    slabfeed_byte_range *r = calloc((size_t)(n > 0 ? n : 1), sizeof *r);
    int64_t again = -1;
    CHECK(r != NULL &&
              slabfeed_stored_ranges(path, names[k], in->layout, z0, z1, r, n,
                                     &again, err, sizeof err) == SLABFEED_OK &&
              again == n,
          "%s: the ranges of %s: %s", path, names[k], err);
    if (r == NULL || again != n) {
      free(r);
      continue;
    }
    const int64_t es = f16 ? 2 : 4;
    int64_t ey = in->shape[1], ex = in->shape[2];
    if (chunked) { /* the chunks' grid: whole chunks at the edges */
      const int cf = in->layout == SLABFEED_LAYOUT_CF;
      const int64_t cy = in->chunk[cf ? 2 : 1], cx = in->chunk[cf ? 3 : 2];
      ey = (ey + cy - 1) / cy * cy;
      ex = (ex + cx - 1) / cx * cx;
    }
    int64_t total = 0, bad = 0;
    for (int64_t i = 0; i < n; i++) {
      total += r[i].bytes;
      bad += r[i].bytes <= 0 || r[i].offset < 0 ||
             r[i].offset + r[i].bytes > file_bytes;
    }
    /* No two ranges overlap (the generator's chunks hold one channel, or
     * every channel where channels are last). */
    for (int64_t i = 1; i < n; i++)
      for (int64_t j = 0; j < i; j++)
        bad += r[j].offset < r[i].offset + r[i].bytes &&
               r[i].offset < r[j].offset + r[j].bytes;
    CHECK(bad == 0 && total == in->channels * (z1 - z0) * ey * ex * es,
          "%s %s: %lld ranges, %lld bad, %lld bytes for planes [%lld, %lld) "
          "(want %lld)",
          path, names[k], (long long)n, (long long)bad, (long long)total,
          (long long)z0, (long long)z1,
          (long long)(in->channels * (z1 - z0) * ey * ex * es));
    if (!chunked && !f16 && in->layout == SLABFEED_LAYOUT_CF && n > 0) {
      /* The values themselves: the last channel's planes, at the end of
       * the last range (channels whose planes follow each other in the
       * file, one rank's whole box, are one range). */
      const int64_t plane = in->shape[1] * in->shape[2];
      const int64_t cnt = (z1 - z0) * plane;
      float *v = malloc((size_t)cnt * 4);
      FILE *f = fopen(path, "rb");
      int64_t wrong =
          v == NULL || f == NULL || r[n - 1].bytes < cnt * 4 ||
          fseeko(f, (off_t)(r[n - 1].offset + r[n - 1].bytes - cnt * 4),
                 SEEK_SET) != 0 ||
          fread(v, 4, (size_t)cnt, f) != (size_t)cnt;
      for (int64_t i = 0; i < cnt && !wrong; i++)
        wrong += v[i] != slabfeed_index_value(
                             k, (int)in->channels - 1, z0 + i / plane,
                             i % plane / in->shape[2], i % in->shape[2]);
      CHECK(wrong == 0,
            "%s %s: the bytes of the last range are channel "
            "%lld's planes",
            path, names[k], (long long)in->channels - 1);
      if (f != NULL)
        fclose(f);
      free(v);
    }
    free(r);
  }
}

/* Serial HDF5 (rank 0 alone): a float32 dataset `name` of dims, in
 * chunks of chunk, compressed with deflate where asked, into path
 * (created, or added to); only the first `written` entries of the first
 * axis are written (the other chunks never are). 0 on success. */
static int write_dataset(const char *path, int create, const char *name,
                         const hsize_t dims[4], const hsize_t chunk[4],
                         int deflate, hsize_t written, const float *v)
{
  const hid_t f = create
                      ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)
                      : H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
  const hsize_t start[4] = {0, 0, 0, 0},
                part[4] = {written, dims[1], dims[2], dims[3]};
  /* An axis whose chunk edge is larger than its extent is extendible
   * (HDF5 allows no such chunk otherwise). */
  hsize_t most[4];
  for (int a = 0; a < 4; a++)
    most[a] = chunk[a] > dims[a] ? H5S_UNLIMITED : dims[a];
  const hid_t sp = H5Screate_simple(4, dims, most);
  const hid_t ms = H5Screate_simple(4, part, NULL);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  int ok = f >= 0 && sp >= 0 && ms >= 0 && dcpl >= 0 &&
           H5Pset_chunk(dcpl, 4, chunk) >= 0 &&
           (!deflate || H5Pset_deflate(dcpl, 4) >= 0);
  const hid_t d = ok ? H5Dcreate2(f, name, H5T_IEEE_F32LE, sp, H5P_DEFAULT,
                                  dcpl, H5P_DEFAULT)
                     : H5I_INVALID_HID;
  ok = d >= 0 &&
       H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, part, NULL) >= 0 &&
       H5Dwrite(d, H5T_NATIVE_FLOAT, ms, sp, H5P_DEFAULT, v) >= 0;
  if (d >= 0)
    H5Dclose(d);
  if (dcpl >= 0)
    H5Pclose(dcpl);
  if (ms >= 0)
    H5Sclose(ms);
  if (sp >= 0)
    H5Sclose(sp);
  if (f >= 0 && H5Fclose(f) < 0)
    ok = 0;
  return ok ? 0 : -1;
}

/* Storage whose values pread cannot find: chunks compressed with
 * deflate, and chunks never written (not allocated, read as the fill
 * value). Direct reads refuse both and read them through HDF5
 * (independent MPI-IO), value for value; slabfeed_stored_ranges refuses
 * them with SLABFEED_ERR_FORMAT. */
static void check_filtered(int size)
{
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  enum { C = 2, Z = 9, Y = 6, X = 5 };
  char path[64];
  snprintf(path, sizeof path, "slab_np%d_filtered.h5", size);
  const int deflate = H5Zfilter_avail(H5Z_FILTER_DEFLATE) > 0;
  if (rank == 0) {
    const hsize_t dims[4] = {C, Z, Y, X}, chunk[4] = {1, 4, 3, 5};
    float v[C * Z * Y * X];
    for (int i = 0; i < C * Z * Y * X; i++)
      v[i] = slabfeed_index_value(0, i / (Z * Y * X), i / (Y * X) % Z,
                                  i / X % Y, i % X);
    /* "Partial": only the first channel's chunks are written. */
    CHECK(write_dataset(path, 1, "Nbody", dims, chunk, deflate, C, v) == 0 &&
              write_dataset(path, 0, "Partial", dims, chunk, 0, 1, v) == 0,
          "write %s", path);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  sf__err e;
  sf__err_clear(&e);
  hid_t file = -1;
  sf__h5_quiet q;
  sf__h5_quiet_begin(&q);
  sf__h5_open(MPI_COMM_WORLD, path, &file, &e);
  for (int k = 0; k < 2 && e.status == SLABFEED_OK; k++) {
    const char *name = k == 0 ? "Nbody" : "Partial";
    hid_t d = -1;
    slabfeed_dataset_info in;
    sf__h5_dataset(file, path, name, SLABFEED_LAYOUT_CF, &d, &in, &e);
    CHECK(e.status == SLABFEED_OK && !sf__h5_direct_ok(d, &in),
          "%s in %s (%s): direct reads refused: %s", name, path,
          k == 0 ? (deflate ? "deflate" : "chunked, no deflate filter here")
                 : "chunks never written",
          e.msg);
    int64_t z0 = 0, z1 = 0;
    slabfeed_slab_plan(Z, size, rank, &z0, &z1);
    const int64_t n = z1 - z0;
    float *got = calloc((size_t)(C * (n > 0 ? n : 1) * Y * X), sizeof *got);
    const sf__h5_run run = {z0, n, 0};
    if (e.status == SLABFEED_OK && got != NULL)
      sf__h5_read(d, path, name, &in, &run, 1, got, n * Y * X,
                  SF_H5_DIRECT | SF_H5_INDEPENDENT, 2, NULL, NULL, &e);
    int64_t wrong = got == NULL;
    for (int64_t i = 0;
         got != NULL && e.status == SLABFEED_OK && i < C * n * Y * X; i++) {
      const int c = (int)(i / (n * Y * X));
      const float want = k == 1 && c == 1
                             ? 0.0f
                             : slabfeed_index_value(0, c, z0 + i / (Y * X) % n,
                                                    i / X % Y, i % X);
      wrong += got[i] != want;
    }
    CHECK(e.status == SLABFEED_OK && wrong == 0,
          "%s in %s read through HDF5: %lld values differ (%s)", name, path,
          (long long)wrong, e.msg);
    free(got);
    if (d >= 0)
      H5Dclose(d);
    int64_t nr = -1;
    char err[512] = "";
    CHECK(slabfeed_stored_ranges(path, name, SLABFEED_LAYOUT_CF, 0, Z, NULL, 0,
                                 &nr, err, sizeof err) ==
                  (k == 0 && !deflate ? SLABFEED_OK : SLABFEED_ERR_FORMAT) &&
              (k == 0 && !deflate ? nr > 0 : nr == 0 && strstr(err, name)),
          "%s: stored ranges %lld (%s)", name, (long long)nr, err);
  }
  if (file >= 0)
    H5Fclose(file);
  sf__h5_quiet_end(&q);
}

/* Channels last in chunks that split the channels (2 + 2 + 1 of 5, the
 * last chunk reaching past the last channel) and cut y and x at their
 * edges: read directly (0.10), through a sink too (groups of planes of
 * every channel handed over one channel at a time), value for value
 * against the index function. */
static void check_split_channels(int size)
{
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  enum { C = 5, Z = 10, Y = 7, X = 5 };
  char path[64];
  snprintf(path, sizeof path, "slab_np%d_split.h5", size);
  if (rank == 0) {
    const hsize_t dims[4] = {Z, Y, X, C}, chunk[4] = {4, 3, 2, 2};
    /* "One": a single channel in chunks of two (its last axis
     * extendible), so every voxel's value sits beside an unused one. */
    const hsize_t one[4] = {Z, Y, X, 1};
    float v[Z * Y * X * C], w[Z * Y * X];
    for (int i = 0; i < Z * Y * X * C; i++)
      v[i] = slabfeed_index_value(0, i % C, i / (Y * X * C), i / (X * C) % Y,
                                  i / C % X);
    for (int i = 0; i < Z * Y * X; i++)
      w[i] = slabfeed_index_value(0, 0, i / (Y * X), i / X % Y, i % X);
    CHECK(write_dataset(path, 1, "Split", dims, chunk, 0, Z, v) == 0 &&
              write_dataset(path, 0, "One", one, chunk, 0, Z, w) == 0,
          "write %s", path);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  sf__err e;
  sf__err_clear(&e);
  hid_t file = -1;
  sf__h5_quiet q;
  sf__h5_quiet_begin(&q);
  sf__h5_open(MPI_COMM_WORLD, path, &file, &e);
  int64_t z0 = 0, z1 = 0;
  slabfeed_slab_plan(Z, size, rank, &z0, &z1);
  const int64_t n = z1 - z0, cube = (n > 0 ? n : 1) * Y * X;
  float *got = calloc((size_t)(C * cube), sizeof *got);
  for (int k = 0; k < 2 && e.status == SLABFEED_OK; k++) {
    const char *name = k == 0 ? "Split" : "One";
    const int64_t nc = k == 0 ? C : 1;
    hid_t d = -1;
    slabfeed_dataset_info in;
    sf__h5_dataset(file, path, name, SLABFEED_LAYOUT_CL, &d, &in, &e);
    CHECK(e.status == SLABFEED_OK && sf__h5_direct_ok(d, &in),
          "%s: %s, channels last in chunks of 2 channels, read directly: %s",
          path, name, e.msg);
    for (int way = 0; way < 2 && got != NULL && e.status == SLABFEED_OK;
         way++) {
      memset(got, 0, (size_t)(C * cube) * sizeof *got);
      /* A sink of two planes a buffer: groups of 2 planes of every
       * channel. */
      host_sink h = {{2 * Y * X, hs_buffer, hs_put},
                     {NULL, NULL},
                     0,
                     NULL,
                     (const char *)got,
                     nc * cube * 4,
                     0,
                     0};
      if (way == 1) {
        h.buf[0] = malloc((size_t)(2 * Y * X) * sizeof(float));
        h.buf[1] = malloc((size_t)(2 * Y * X) * sizeof(float));
        h.copy = calloc((size_t)(C * cube), sizeof(float));
      }
      /* Runs of at most two planes with a sink (the slab read cuts runs
       * to the sink's buffer), one run without. */
      sf__h5_run run[8];
      int nr = 0;
      for (int64_t z = z0; z < z1; z += way == 1 ? 2 : n)
        run[nr] = (sf__h5_run){z, z1 - z < 2 || way == 0 ? z1 - z : 2,
                               (z - z0) * Y * X},
        nr++;
      sf__h5_read(d, path, name, &in, run, nr, got, cube,
                  SF_H5_DIRECT | SF_H5_INDEPENDENT, 2, way == 1 ? &h.k : NULL,
                  NULL, &e);
      const float *v = way == 1 ? (const float *)h.copy : got;
      int64_t wrong = v == NULL || h.outside != 0;
      for (int64_t i = 0;
           v != NULL && e.status == SLABFEED_OK && i < nc * n * Y * X; i++)
        wrong += v[i] != slabfeed_index_value(0, (int)(i / (n * Y * X)),
                                              z0 + i / (Y * X) % n, i / X % Y,
                                              i % X);
      CHECK(e.status == SLABFEED_OK && wrong == 0,
            "%s: %s read directly%s: %lld values differ (%s)", path, name,
            way == 1 ? " through a sink" : "", (long long)wrong, e.msg);
      free(h.buf[0]);
      free(h.buf[1]);
      free(h.copy);
    }
    if (d >= 0)
      H5Dclose(d);
  }
  free(got);
  if (file >= 0)
    H5Fclose(file);
  sf__h5_quiet_end(&q);
}

/* sf__pio into memory that maps several files one after the other
 * (sf__fileback_add, the segment files of 0.13): from a file of dir (on
 * /dev/shm: copy_file_range; elsewhere, or with the test switch, through
 * a buffer), at offsets that cross the files' edges, on 1 to 5 threads;
 * every file then holds the source's bytes at its place, read back with
 * pread (not through the mapping), and the rest of it untouched. Local. */
static void check_file_parts(const char *dir, int rank)
{
  const size_t pg = 4096, part = 3 * pg, bytes = 10 * pg + 123;
  const int n = (int)((bytes + part - 1) / part);
  char src[128], name[8][128];
  snprintf(src, sizeof src, "%s/sf_test_parts_%d_%ld.src", dir, rank,
           (long)getpid());
  unsigned char *want = malloc(bytes + 4 * pg), *got = malloc(part);
  int fds[8], in = open(src, O_RDWR | O_CREAT | O_TRUNC, 0600);
  CHECK(want != NULL && got != NULL && in >= 0, "source %s", src);
  if (want == NULL || got == NULL || in < 0)
    goto out_src;
  for (size_t i = 0; i < bytes + 4 * pg; i++)
    want[i] = (unsigned char)(i * 7 + i / 251);
  CHECK(pwrite(in, want, bytes + 4 * pg, 0) == (ssize_t)(bytes + 4 * pg),
        "write %s", src);
  char *r = mmap(NULL, bytes, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  CHECK(r != MAP_FAILED, "reserve %zu bytes", bytes);
  for (int j = 0; j < n; j++) {
    const size_t a = (size_t)j * part,
                 len = bytes - a < part ? bytes - a : part;
    snprintf(name[j], sizeof name[j], "/dev/shm/sf_test_parts_%d_%ld.%d", rank,
             (long)getpid(), j);
    fds[j] = open(name[j], O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fds[j] >= 0 && ftruncate(fds[j], (off_t)len) == 0 &&
              mmap(r + (size_t)j * part, len, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_FIXED, fds[j], 0) != MAP_FAILED,
          "part %d of %zu bytes", j, len);
  }
  const int h = sf__fileback_add(r, bytes, part, fds, n);
  CHECK(h >= 0 && sf__fileback_has(r + bytes - 1) && !sf__fileback_has(r - 1),
        "the parts named as file-backed memory");
  /* (offset in the memory, length, offset in the source, threads) */
  const size_t cases[][4] = {{0, bytes, 0, 1},        {5, 2 * part, 17, 2},
                             {part - 1, 2, 3, 3},     {pg, bytes - pg, 9, 4},
                             {part, part, 2 * pg, 5}, {100, bytes - 100, 1, 3},
                             {3, bytes - 3, 2, 2},    {0, bytes, pg + 1, 5}};
  for (int bounce = 0; bounce < 2; bounce++) {
    if (bounce)
      setenv("SLABFEED_TEST_NO_COPY_RANGE", "1", 1);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      const size_t at = cases[c][0], len = cases[c][1], from = cases[c][2];
      /* The files emptied (zeros) first. */
      for (int j = 0; j < n; j++) {
        const size_t a = (size_t)j * part,
                     m = bytes - a < part ? bytes - a : part;
        CHECK(ftruncate(fds[j], 0) == 0 && ftruncate(fds[j], (off_t)m) == 0,
              "empty part %d", j);
      }
      const int err =
          sf__pio(in, r + at, len, (off_t)from, (int)cases[c][3], 0);
      CHECK(err == 0, "%s: case %zu: %s", dir, c, strerror(err > 0 ? err : 0));
      /* Every file against what it must hold: [at, at + len) from the
       * source, zeros elsewhere. */
      long long bad = 0;
      for (int j = 0; j < n; j++) {
        const size_t a = (size_t)j * part,
                     m = bytes - a < part ? bytes - a : part;
        CHECK(pread(fds[j], got, m, 0) == (ssize_t)m, "read part %d", j);
        for (size_t i = 0; i < m; i++) {
          const size_t p = a + i;
          bad += got[i] != (p >= at && p < at + len ? want[p - at + from] : 0);
        }
      }
      CHECK(bad == 0,
            "%s%s: case %zu (%zu bytes at %zu from %zu on %d threads): %lld "
            "bytes of the files differ",
            dir, bounce ? " (buffer)" : "", c, len, at, from, (int)cases[c][3],
            bad);
    }
    unsetenv("SLABFEED_TEST_NO_COPY_RANGE");
  }
  /* A read past the source's end: its error, not a short copy. */
  CHECK(sf__pio(in, r, bytes, (off_t)(5 * pg), 3, 0) != 0,
        "a read past the end of %s fails", src);
  sf__fileback_remove(h);
  CHECK(!sf__fileback_has(r), "removed");
  if (r != MAP_FAILED)
    munmap(r, bytes);
  for (int j = 0; j < n; j++) {
    if (fds[j] >= 0)
      close(fds[j]);
    unlink(name[j]);
  }
out_src:
  if (in >= 0)
    close(in);
  unlink(src);
  free(want);
  free(got);
}

/* A shared_window for the next check_case calls (0: they alternate), and
 * the store's word that the read is direct (auto then takes files). */
static int force_window, file_read;

static void check_case(const char *path, int64_t Z, int64_t Y, int64_t X,
                       slabfeed_file_layout layout, int chunked, int f16,
                       int64_t halo, int rank_per_node, int group_nodes,
                       int locality, int direct)
{
  /* The cases alternate collective and independent reads (read_mode) and,
   * pair by pair, one window for the node, one per rank and a file per
   * rank (shared_window, file since 0.12: direct reads write it as a file)
   * : every voxel is checked every way. direct: pread where the storage
   * allows (0.9), else independent. */
  static int ncase;
  const int independent = direct      ? SF_H5_DIRECT | SF_H5_INDEPENDENT
                          : ncase % 2 ? SF_H5_INDEPENDENT
                                      : 0;
  const int windows[3] = {SLABFEED_WINDOW_PER_RANK, SLABFEED_WINDOW_ONE,
                          SLABFEED_WINDOW_FILE};
  const int window = file_read      ? SLABFEED_WINDOW_AUTO
                     : force_window ? force_window
                                    : windows[(ncase / 2) % 3];
  ncase++;
  if (make_file(path, Z, Y, X, layout, chunked, f16, 1) != 0)
    return;
  sf__err e;
  sf__err_clear(&e);
  hid_t file = -1, d[2] = {-1, -1};
  slabfeed_dataset_info info[2];
  const char *names[2] = {"Nbody", "Hydro"};
  sf__store s;
  memset(&s, 0, sizeof s);
  sf__h5_quiet q;
  sf__h5_quiet_begin(&q);
  sf__h5_open(MPI_COMM_WORLD, path, &file, &e);
  for (int k = 0; k < 2 && e.status == SLABFEED_OK; k++)
    sf__h5_dataset(file, path, names[k], SLABFEED_LAYOUT_AUTO, &d[k], &info[k],
                   &e);
  CHECK(e.status == SLABFEED_OK, "open %s: %s", path, e.msg);
  if (e.status != SLABFEED_OK)
    return;
  CHECK(info[0].layout == layout && info[0].channels == 4 &&
            info[1].channels == 5,
        "layout and channels resolved from the shape");
  /* pread serves both layouts, contiguous or in chunks without filters
   * (0.10). */
  for (int k = 0; k < 2; k++)
    CHECK(sf__h5_direct_ok(d[k], &info[k]),
          "%s: direct reads %s for layout %s, %s", path,
          sf__h5_direct_ok(d[k], &info[k]) ? "taken" : "refused",
          layout == SLABFEED_LAYOUT_CF ? "cf" : "cl",
          chunked ? "chunked" : "contiguous");
  check_ranges(path, names, info, chunked, f16);
  const int64_t ch[2] = {4, 5};
  const sf__store_opts o = {.rank_per_node = rank_per_node,
                            .group_nodes = group_nodes,
                            .locality = locality,
                            .halo = halo,
                            .crop_z = 3,
                            .shared_window = window,
                            .file_read = file_read};
  CHECK(sf__store_open(&s, MPI_COMM_WORLD, 2, ch, info[0].shape, &o, &e) ==
            SLABFEED_OK,
        "store: %s", e.msg);
  /* auto with a direct read: files where the node has several ranks and
   * /dev/shm the room (0.13), else windows and why. */
  if (e.status == SLABFEED_OK && window == SLABFEED_WINDOW_AUTO && file_read)
    CHECK(s.files == (s.node_size > 1 && s.files_need <= s.files_have) &&
              (s.files || s.n_shm > 0),
          "auto over %d node ranks, %.6f GB wanted of /dev/shm with %.6f "
          "free: files %d",
          s.node_size, s.files_need, s.files_have, s.files);
  /* Files of a forced part size (a test switch) are several per segment. */
  const char *forced = getenv("SLABFEED_TEST_PART_BYTES");
  if (e.status == SLABFEED_OK && s.files && forced != NULL)
    CHECK(s.part == (atoll(forced) + 4095) / 4096 * 4096 &&
              s.n_parts == (s.bytes + s.part - 1) / s.part && s.n_parts > 1,
          "%lld bytes in %d files of %lld", (long long)s.bytes, s.n_parts,
          (long long)s.part);
  /* The progress of the read counts exactly this rank's planes. */
  double want_bytes = 0;
  for (int k = 0; k < 2 && e.status == SLABFEED_OK; k++)
    want_bytes += sf__slab_bytes(&s, k, info[k].channels, &info[k].shape[1], 0,
                                 info[k].shape[0]);
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  host_sink sunk = {{0, NULL, NULL}, {NULL, NULL}, 0, NULL, NULL, 0, 0, 0};
  if (e.status == SLABFEED_OK)
    sunk = read_through_sink(&s, d, path, names, info, independent, &e);
  sf__progress pg;
  sf__progress_begin(&pg, SLABFEED_PROGRESS_ON, 0, "test_slab", want_bytes, 1);
  for (int k = 0; k < 2 && e.status == SLABFEED_OK; k++)
    sf__slab_read(&s, k, 0, d[k], path, names[k], &info[k], 0, info[k].shape[0],
                  independent, NULL, &pg, &e);
  CHECK(sf__agree(MPI_COMM_WORLD, &e) == SLABFEED_OK, "read: %s", e.msg);
  CHECK(want_bytes == 0 || pg.done == want_bytes,
        "rank %d: progress counted %.0f bytes of the %.0f read", me, pg.done,
        want_bytes);
  if (me != 0)
    pg.on = 0; /* one final line per case */
  sf__progress_end(&pg, 1);
  if (e.status == SLABFEED_OK)
    sf__store_publish(&s, 1, &e);
  H5Dclose(d[0]);
  H5Dclose(d[1]);
  H5Fclose(file);
  sf__h5_quiet_end(&q);

  if (e.status != SLABFEED_OK) {
    free(sunk.copy);
    return;
  }
  /* The sink's copy completed as the GPU back end completes its own: the
   * same bytes as the published segment. */
  if (sunk.copy != NULL && sf__store_node_read(&s)) {
    sf__store_each_copy(&s, rest_from_peers, &sunk, &e);
    CHECK(e.status == SLABFEED_OK && sunk.outside == 0 &&
              memcmp(sunk.copy, s.base, (size_t)s.bytes) == 0,
          "the sink's copy and its rest equal the published segment");
  }
  free(sunk.copy);
  /* The placement: groups of the requested size, each holding the box. */
  const int nodes = rank_per_node ? s.size : 1;
  const int G = group_nodes > 0 ? group_nodes : nodes;
  CHECK(s.nodes == nodes && s.L.ng == (nodes / G > 1 ? nodes / G : 1),
        "%d nodes in %d groups (G %d)", s.nodes, s.L.ng, G);
  int64_t held = 0;
  for (int r = 0; r < s.size; r++)
    if (s.L.groupof[r] == s.L.groupof[s.rank])
      held += s.L.core1[r] - s.L.core0[r];
  CHECK_EQ(held, Z, "the cores of group %d cover the box", s.L.groupof[s.rank]);
  /* Every plane is read once in total. */
  int64_t read_here = 0, read_all = 0;
  for (int64_t z = 0; z < Z;) {
    int64_t end;
    const int r = sf__placement_reader(&s.L, z, &end);
    CHECK(end > z && z >= s.L.core0[r] && end <= s.L.core1[r],
          "plane %lld read by a rank holding it", (long long)z);
    if (r == s.rank)
      read_here += end - z;
    z = end;
  }
  MPI_Allreduce(&read_here, &read_all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  CHECK_EQ(read_all, Z, "planes read in total");
  /* Every voxel, core and halo, both datasets. */
  int64_t bad = 0;
  const int64_t planes = sf__store_planes(&s, s.rank);
  const int64_t first = sf__placement_first(&s.L, s.rank);
  const int64_t extra = locality && s.L.hi[s.rank] > halo ? 3 - 1 - halo : 0;
  CHECK_EQ(planes, s.L.core1[s.rank] - s.L.core0[s.rank] + 2 * halo + extra,
           "planes held");
  CHECK_EQ(s.bytes, (4 + 5) * planes * Y * X * 4,
           "segment holds slab + halo only");
  const int64_t zr = locality ? s.L.reach0[s.rank] : 0;
  const int64_t nr = locality ? s.L.reach[s.rank] : Z;
  if (locality) /* a crop from the node's range fits in the node */
    for (int r = 0; r < s.size; r++)
      if (s.L.nodeof[r] == s.L.nodeof[s.rank] &&
          s.L.groupof[r] == s.L.groupof[s.rank] && s.L.core1[r] == zr + nr)
        CHECK(s.L.hi[r] >= 2, "rank %d keeps crop - 1 planes above", r);
  for (int k = 0; k < 2 && e.status == SLABFEED_OK; k++) {
    const float *seg =
        (const float *)(s.base + sf__store_offset(&s, s.rank, k));
    for (int64_t c = 0; c < ch[k]; c++)
      for (int64_t p = 0; p < planes; p++)
        for (int64_t y = 0; y < Y; y++)
          for (int64_t x = 0; x < X; x++) {
            const int64_t z = sf__pmod(first + p, Z);
            const float want = slabfeed_index_value(k, (int)c, z, y, x);
            const float got = seg[((c * planes + p) * Y + y) * X + x];
            bad += got != want;
          }
  }
  CHECK(bad == 0, "%s: %lld voxels differ from the index function", path,
        (long long)bad);
  /* Peers of the node are mapped and see the same bytes. */
  for (int r = 0; r < s.size; r++)
    if (s.peer[r] != NULL && r != s.rank) {
      const float *seg = (const float *)s.peer[r];
      CHECK(seg[0] ==
                slabfeed_index_value(0, 0, sf__placement_first(&s.L, r), 0, 0),
            "peer %d segment readable", r);
    }
  sf__store_close(&s);
}

/* The store's windows take no memory until written: the pages of a
 * fresh segment are not resident (mincore), whatever the window kind.
 * The staged fill into GPU memory (residency device) never writes the
 * host segment, so it relies on this of the MPI library. */
static void check_untouched(int window)
{
  sf__err e;
  sf__err_clear(&e);
  sf__store s;
  memset(&s, 0, sizeof s);
  const int64_t ch[2] = {4, 5}, shape[3] = {64, 256, 256};
  const sf__store_opts o = {.halo = 2, .crop_z = 3, .shared_window = window};
  CHECK(sf__store_open(&s, MPI_COMM_WORLD, 2, ch, shape, &o, &e) == SLABFEED_OK,
        "store: %s", e.msg);
  if (e.status != SLABFEED_OK)
    return;
  const long pg = sysconf(_SC_PAGESIZE);
  char *lo = (char *)((uintptr_t)s.base & ~(uintptr_t)(pg - 1));
  const size_t len = (size_t)(s.base + s.bytes - lo);
  const size_t pages = (len + (size_t)pg - 1) / (size_t)pg;
  unsigned char *vec = malloc(pages);
  size_t resident = 0;
  if (vec != NULL && mincore(lo, len, vec) == 0)
    for (size_t i = 0; i < pages; i++)
      resident += vec[i] & 1;
  else
    resident = pages;
  CHECK(resident <= 2,
        "a fresh segment of %.1f MB (window %s) has %zu of %zu pages "
        "resident",
        (double)s.bytes / 1e6,
        window == SLABFEED_WINDOW_ONE    ? "one"
        : window == SLABFEED_WINDOW_FILE ? "file"
                                         : "per rank",
        resident, pages);
  free(vec);
  sf__store_close(&s);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  check_untouched(SLABFEED_WINDOW_ONE);
  check_untouched(SLABFEED_WINDOW_PER_RANK);
  check_untouched(SLABFEED_WINDOW_FILE);
  char path[64];
  snprintf(path, sizeof path, "slab_np%d_a.h5", size);
  /* uneven split */
  check_case(path, 13, 7, 6, SLABFEED_LAYOUT_CF, 0, 0, 0, 0, 0, 0, 0);
  snprintf(path, sizeof path, "slab_np%d_b.h5", size);
  /* cl, chunked f16, halo */
  check_case(path, 11, 7, 6, SLABFEED_LAYOUT_CL, 1, 1, 2, 0, 0, 0, 0);
  snprintf(path, sizeof path, "slab_np%d_c.h5", size);
  /* halo = Z, own nodes, one group */
  check_case(path, 9, 8, 7, SLABFEED_LAYOUT_CF, 1, 0, 9, 1, -1, 0, 0);
  /* own nodes, groups of 1 node (every rank a full replica) and of 2,
   * with and without halo and locality planes */
  snprintf(path, sizeof path, "slab_np%d_d.h5", size);
  check_case(path, 13, 5, 6, SLABFEED_LAYOUT_CF, 1, 0, 0, 1, 1, 0, 0);
  snprintf(path, sizeof path, "slab_np%d_e.h5", size);
  check_case(path, 13, 5, 6, SLABFEED_LAYOUT_CL, 0, 0, 1, 1, 1, 1, 0);
  if (size >= 2) {
    snprintf(path, sizeof path, "slab_np%d_f.h5", size);
    check_case(path, 14, 5, 6, SLABFEED_LAYOUT_CF, 1, 1, 1, 1, 2, 1, 0);
    snprintf(path, sizeof path, "slab_np%d_g.h5", size);
    check_case(path, 17, 4, 5, SLABFEED_LAYOUT_CF, 0, 0, 0, 1, 2, 0, 0);
  }
  /* Direct reads (pread at the dataset's offset): float32 and float16,
   * halos, every rank its node in groups of one (replicas over MPI), and
   * channels last (each voxel's values sorted out to its channels, 0.10),
   * contiguous and chunked. */
  snprintf(path, sizeof path, "slab_np%d_h.h5", size);
  check_case(path, 13, 7, 6, SLABFEED_LAYOUT_CF, 0, 0, 2, 0, 0, 0, 1);
  snprintf(path, sizeof path, "slab_np%d_i.h5", size);
  check_case(path, 11, 6, 5, SLABFEED_LAYOUT_CF, 0, 1, 1, 0, 0, 0, 1);
  snprintf(path, sizeof path, "slab_np%d_j.h5", size);
  check_case(path, 13, 5, 6, SLABFEED_LAYOUT_CF, 0, 0, 1, 1, 1, 0, 1);
  snprintf(path, sizeof path, "slab_np%d_k.h5", size);
  check_case(path, 11, 7, 6, SLABFEED_LAYOUT_CL, 1, 1, 2, 0, 0, 0, 1);
  snprintf(path, sizeof path, "slab_np%d_l.h5", size);
  check_case(path, 12, 7, 6, SLABFEED_LAYOUT_CL, 0, 0, 0, 0, 0, 0, 1);
  /* Chunks without filters (0.10): cut at the edges of y and x (each
   * plane gathered from chunk rows), float32 and float16, halos and
   * replicas over MPI; and chunks of whole planes, read in place. */
  snprintf(path, sizeof path, "slab_np%d_n.h5", size);
  check_case(path, 13, 7, 6, SLABFEED_LAYOUT_CF, 1, 0, 2, 0, 0, 0, 1);
  snprintf(path, sizeof path, "slab_np%d_o.h5", size);
  check_case(path, 11, 6, 5, SLABFEED_LAYOUT_CF, 1, 1, 1, 1, 1, 0, 1);
  snprintf(path, sizeof path, "slab_np%d_p.h5", size);
  check_case(path, 14, 7, 6, SLABFEED_LAYOUT_CF, 2, 0, 1, 0, 0, 0, 1);
  snprintf(path, sizeof path, "slab_np%d_q.h5", size);
  check_case(path, 10, 5, 4, SLABFEED_LAYOUT_CF, 2, 1, 0, 1, 1, 0, 1);
  /* A file per rank (shared_window file, 0.12), written as a file by the
   * direct read: from a file of another filesystem (pread and pwrite
   * through a buffer) and from one in /dev/shm (copy_file_range), float32
   * and float16 (widened in place in the mapping), with halos. */
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  force_window = SLABFEED_WINDOW_FILE;
  snprintf(path, sizeof path, "slab_np%d_r.h5", size);
  check_case(path, 13, 7, 6, SLABFEED_LAYOUT_CF, 0, 0, 2, 0, 0, 0, 1);
  long pid = (long)getpid();
  MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  char shm[2][96];
  for (int f16 = 0; f16 < 2; f16++) {
    snprintf(shm[f16], sizeof shm[f16], "/dev/shm/sf_test_slab_np%d_%ld_%d.h5",
             size, pid, f16);
    check_case(shm[f16], 11, 6, 5, SLABFEED_LAYOUT_CF, 0, f16, 1, 0, 0, 0, 1);
  }
  /* The buffer's way forced (test switch) from a file copy_file_range
   * could copy. */
  setenv("SLABFEED_TEST_NO_COPY_RANGE", "1", 1);
  check_case(shm[0], 11, 6, 5, SLABFEED_LAYOUT_CF, 0, 0, 1, 0, 0, 0, 1);
  unsetenv("SLABFEED_TEST_NO_COPY_RANGE");
  /* Segments of several files (0.13; files of one page forced): from
   * both filesystems, float16, chunks cut at the edges (pieces on
   * threads of their own), replicas over MPI. */
  setenv("SLABFEED_TEST_PART_BYTES", "4096", 1);
  check_case(shm[0], 11, 6, 5, SLABFEED_LAYOUT_CF, 0, 0, 1, 0, 0, 0, 1);
  check_case(shm[1], 11, 6, 5, SLABFEED_LAYOUT_CF, 0, 1, 1, 0, 0, 0, 1);
  snprintf(path, sizeof path, "slab_np%d_s.h5", size);
  check_case(path, 13, 7, 6, SLABFEED_LAYOUT_CF, 1, 0, 2, 0, 0, 0, 1);
  snprintf(path, sizeof path, "slab_np%d_t.h5", size);
  check_case(path, 13, 5, 6, SLABFEED_LAYOUT_CF, 0, 0, 1, 1, 1, 0, 1);
  /* auto with a direct read (0.13): files where the node has several
   * ranks, else windows. */
  file_read = 1;
  check_case(shm[0], 11, 6, 5, SLABFEED_LAYOUT_CF, 0, 0, 2, 0, 0, 0, 1);
  snprintf(path, sizeof path, "slab_np%d_u.h5", size);
  check_case(path, 12, 7, 6, SLABFEED_LAYOUT_CL, 0, 1, 1, 0, 0, 0, 1);
  unsetenv("SLABFEED_TEST_PART_BYTES");
  file_read = 0;
  force_window = 0;
  check_file_parts("/dev/shm", me);
  check_file_parts(".", me);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int f16 = 0; f16 < 2 && me == 0; f16++)
    unlink(shm[f16]);
  check_filtered(size);
  check_split_channels(size);
  /* One rank: channels of 8 MiB, so that each pread is split over the
   * node's cores (threads of parts of at least 4 MiB). */
  if (size == 1)
    check_case("slab_np1_m.h5", 32, 256, 256, SLABFEED_LAYOUT_CF, 0, 0, 1, 0, 0,
               0, 1);
  return check_finish("mpi.slab");
}
