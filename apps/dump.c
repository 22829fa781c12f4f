/* slabfeed-dump: run the loader for K steps on P ranks and write every
 * rank's samples, in global sample order, to one HDF5 file (rank 0 writes
 * what the others send it). */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *prog = "slabfeed-dump";

/* The output file and its six datasets (input, target, origin, symmetry,
 * sample, sample_epoch); -1 where not open. */
typedef struct out_file {
  hid_t file, dset[6];
} out_file;

/* Creates dataset `name` of the given type and shape in file. */
static hid_t make_dset(hid_t file, const char *name, hid_t type, int rank,
                       const hsize_t *dims)
{
  const hid_t s = H5Screate_simple(rank, dims, NULL);
  const hid_t d =
      H5Dcreate2(file, name, type, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
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

/* Writes rows [row, row+n) of dataset d from buf (memory type mtype). */
static int write_rows(hid_t d, hid_t mtype, hsize_t row, hsize_t n,
                      const void *buf)
{
  const hid_t fs = H5Dget_space(d);
  hsize_t dims[6], start[6] = {0}, count[6];
  const int rank = H5Sget_simple_extent_dims(fs, dims, NULL);
  for (int a = 0; a < rank; a++)
    count[a] = dims[a];
  start[0] = row;
  count[0] = n;
  const hid_t ms = H5Screate_simple(rank, count, NULL);
  int rc =
      H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
      H5Dwrite(d, mtype, ms, fs, H5P_DEFAULT, buf) < 0;
  H5Sclose(ms);
  H5Sclose(fs);
  return rc;
}

/* Writes a scalar uint64 attribute on the file. */
static void attr_u64(hid_t file, const char *name, uint64_t v)
{
  const hid_t s = H5Screate(H5S_SCALAR);
  const hid_t a =
      H5Acreate2(file, name, H5T_STD_U64LE, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_UINT64, &v);
  H5Aclose(a);
  H5Sclose(s);
}

/* Writes a fixed-length string attribute on the file. */
static void attr_str(hid_t file, const char *name, const char *v)
{
  const hid_t s = H5Screate(H5S_SCALAR);
  const hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, strlen(v) + 1);
  const hid_t a = H5Acreate2(file, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, t, v);
  H5Aclose(a);
  H5Tclose(t);
  H5Sclose(s);
}

/* What the dump's own options fill. */
typedef struct dump_args {
  int64_t steps;
  uint64_t epoch;
  const char *out;
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
                                      .help = "the HDF5 file to write",
                                      .flags = CLI_REQUIRED},
                                     {.name = NULL}};

/* Parses the options, runs the loader for K steps and has rank 0 write
 * every rank's samples in global order. */
int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  slabfeed_config cfg;
  slabfeed_config_init(&cfg);
  dump_args a = {0, 0, NULL};
  const cli_app app = {
      prog,
      "Runs the loader for K steps and writes every rank's samples, in "
      "global sample order, to one HDF5 file (input, target, origin, "
      "symmetry, sample, sample_epoch).",
      {{"loader options", cli_loader_options, &cfg},
       {"dump options", options, &a}}};
  cli_parse(&app, argc, argv);
  const int64_t steps = a.steps;
  const uint64_t epoch = a.epoch;
  const char *out = a.out;

  char err[1024];
  slabfeed_loader *l = NULL;
  slabfeed_status st = slabfeed_open(MPI_COMM_WORLD, &cfg, &l, err, sizeof err);
  if (st != SLABFEED_OK)
    cli_fail(prog, st, err);
  if ((st = slabfeed_seek(l, epoch, 0)) != SLABFEED_OK)
    cli_fail(prog, st, slabfeed_last_error(l));

  const int nd = cfg.target ? 2 : 1;
  const hsize_t S = (hsize_t)steps * (hsize_t)size * (hsize_t)cfg.batch;
  const size_t es = slabfeed_dtype_size(cfg.dtype);
  size_t sample_elems[2] = {0, 0};
  out_file of = {-1, {-1, -1, -1, -1, -1, -1}};
  void *buf[2] = {NULL, NULL}, *all[2] = {NULL, NULL};
  int64_t *meta = malloc((size_t)cfg.batch * 5 * sizeof *meta);
  int64_t *meta_all =
      rank == 0
          ? malloc((size_t)cfg.batch * 5 * (size_t)size * sizeof *meta_all)
          : NULL;
  int64_t *epochs = malloc((size_t)S * sizeof *epochs);
  int failed = 0;
  for (int64_t s = 0; s < steps && !failed; s++) {
    slabfeed_batch b = SLABFEED_BATCH_INIT;
    if ((st = slabfeed_next(l, &b, NULL)) != SLABFEED_OK)
      cli_fail(prog, st, slabfeed_last_error(l));
    for (int d = 0; d < nd; d++) {
      const slabfeed_tensor *t = d == 0 ? &b.input : &b.target;
      const size_t n = (size_t)t->strides[0] * (size_t)cfg.batch;
      if (buf[d] == NULL) {
        sample_elems[d] = (size_t)t->strides[0];
        buf[d] = malloc(n * es);
        all[d] = rank == 0 ? malloc(n * es * (size_t)size) : NULL;
      }
      if ((st = slabfeed_copy_to_host(l, t, buf[d])) != SLABFEED_OK)
        cli_fail(prog, st, slabfeed_last_error(l));
      MPI_Gather(buf[d], (int)(n * es), MPI_BYTE, all[d], (int)(n * es),
                 MPI_BYTE, 0, MPI_COMM_WORLD);
    }
    for (int i = 0; i < cfg.batch; i++) {
      memcpy(&meta[5 * i], &b.origin[3 * i], 3 * sizeof *meta);
      meta[5 * i + 3] = b.symmetry[i];
      meta[5 * i + 4] = b.sample[i];
    }
    MPI_Gather(meta, cfg.batch * 5, MPI_INT64_T, meta_all, cfg.batch * 5,
               MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (rank != 0)
      continue;
    if (of.file <
        0) { /* create on the first step: shapes come from the batch */
      H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
      of.file = H5Fcreate(out, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
      for (int d = 0; d < nd && of.file >= 0; d++) {
        const slabfeed_tensor *t = d == 0 ? &b.input : &b.target;
        hsize_t dims[5] = {S, (hsize_t)t->shape[1], (hsize_t)t->shape[2],
                           (hsize_t)t->shape[3], (hsize_t)t->shape[4]};
        const hid_t ty = out_type(cfg.dtype);
        of.dset[d] =
            make_dset(of.file, d == 0 ? "input" : "target", ty, 5, dims);
        H5Tclose(ty);
      }
      const hsize_t o2[2] = {S, 3};
      of.dset[2] = make_dset(of.file, "origin", H5T_STD_I64LE, 2, o2);
      of.dset[3] = make_dset(of.file, "symmetry", H5T_STD_I32LE, 1, &S);
      of.dset[4] = make_dset(of.file, "sample", H5T_STD_I64LE, 1, &S);
      of.dset[5] = make_dset(of.file, "sample_epoch", H5T_STD_I64LE, 1, &S);
      if (of.file >= 0) {
        attr_u64(of.file, "seed", cfg.seed);
        attr_u64(of.file, "epoch", epoch);
        attr_u64(of.file, "first_step", 0);
        attr_str(of.file, "dtype", cli_dtype_name(cfg.dtype));
        attr_str(of.file, "layout",
                 cfg.out_layout == SLABFEED_OUT_NDHWC ? "ndhwc" : "ncdhw");
      }
    }
    const hsize_t row = (hsize_t)s * (hsize_t)size * (hsize_t)cfg.batch;
    const hsize_t n = (hsize_t)size * (hsize_t)cfg.batch;
    for (hsize_t i = 0; i < n; i++)
      epochs[row + i] = (int64_t)b.epoch;
    const hid_t mt =
        cfg.dtype == SLABFEED_DTYPE_F32 ? H5T_NATIVE_FLOAT : H5T_NATIVE_UINT16;
    const hid_t mtf16 = out_type(SLABFEED_DTYPE_F16);
    for (int d = 0; d < nd; d++)
      failed |=
          of.dset[d] < 0 ||
          write_rows(of.dset[d], cfg.dtype == SLABFEED_DTYPE_F16 ? mtf16 : mt,
                     row, n, all[d]);
    H5Tclose(mtf16);
    int64_t *org = malloc(n * 3 * sizeof *org), *smp = malloc(n * sizeof *smp);
    int32_t *sym = malloc(n * sizeof *sym);
    for (hsize_t i = 0; i < n; i++) {
      memcpy(&org[3 * i], &meta_all[5 * i], 3 * sizeof *org);
      sym[i] = (int32_t)meta_all[5 * i + 3];
      smp[i] = meta_all[5 * i + 4];
    }
    failed |= write_rows(of.dset[2], H5T_NATIVE_INT64, row, n, org) ||
              write_rows(of.dset[3], H5T_NATIVE_INT32, row, n, sym) ||
              write_rows(of.dset[4], H5T_NATIVE_INT64, row, n, smp);
    free(org);
    free(smp);
    free(sym);
  }
  if (rank == 0) {
    failed |= of.dset[5] < 0 ||
              write_rows(of.dset[5], H5T_NATIVE_INT64, 0, S, epochs);
    for (int d = 0; d < 6; d++)
      if (of.dset[d] >= 0)
        H5Dclose(of.dset[d]);
    failed |= of.file < 0 || H5Fclose(of.file) < 0;
    if (failed)
      fprintf(stderr, "%s: cannot write '%s'\n", prog, out);
    else
      printf("%s: wrote %llu samples (%zu + %zu values each) of %lld steps to "
             "%s\n",
             prog, (unsigned long long)S, sample_elems[0], sample_elems[1],
             (long long)steps, out);
  }
  MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (int d = 0; d < 2; d++) {
    free(buf[d]);
    free(all[d]);
  }
  free(meta);
  free(meta_all);
  free(epochs);
  slabfeed_close(l);
  MPI_Finalize();
  return failed ? 1 : 0;
}
