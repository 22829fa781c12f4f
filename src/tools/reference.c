/* The independent serial reference: a crop read straight from the file with
 * serial HDF5 (no slabs, no windows), then the reference transform. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "common/errors.h"
#include "common/geometry.h"
#include "io/h5.h"
#include "transform/transform.h"

struct slabfeed_reader {
  hid_t file;
  char path[4096];
  float *stage;
  size_t stage_elems;
  char error[SF_ERRLEN];
};

slabfeed_status slabfeed_reader_open(const char *path, slabfeed_reader **out,
                                     char *errbuf, size_t errlen)
{
  sf__err e;
  sf__err_clear(&e);
  *out = NULL;
  slabfeed_reader *r = calloc(1, sizeof *r);
  if (r == NULL)
    sf__fail(&e, SLABFEED_ERR_NOMEM, "cannot allocate a reader");
  else if (path == NULL || strlen(path) >= sizeof r->path)
    sf__fail(&e, SLABFEED_ERR_ARG, "reader: bad path");
  if (e.status == SLABFEED_OK) {
    snprintf(r->path, sizeof r->path, "%s", path);
    sf__h5_quiet q;
    sf__h5_quiet_begin(&q);
    r->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (r->file < 0) {
      sf__fail(&e, SLABFEED_ERR_IO, "cannot open HDF5 file '%s'", path);
      sf__h5_detail(&e);
    }
    sf__h5_quiet_end(&q);
  }
  if (e.status != SLABFEED_OK) {
    free(r);
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  *out = r;
  return SLABFEED_OK;
}

/* Reads box [o, o+n) of channel c (no wrap) into the staged crop at d. */
static herr_t read_box(hid_t dset, const slabfeed_dataset_info *in, int64_t c,
                       const int64_t o[3], const int64_t n[3],
                       const int64_t d[3], const int64_t crop[3], float *stage)
{
  const int cf = in->layout == SLABFEED_LAYOUT_CF;
  hsize_t fstart[4], fcount[4];
  fstart[cf ? 0 : 3] = (hsize_t)c;
  fcount[cf ? 0 : 3] = 1;
  for (int a = 0; a < 3; a++) {
    fstart[cf ? a + 1 : a] = (hsize_t)o[a];
    fcount[cf ? a + 1 : a] = (hsize_t)n[a];
  }
  const hsize_t mdims[3] = {(hsize_t)crop[0], (hsize_t)crop[1],
                            (hsize_t)crop[2]};
  const hsize_t mstart[3] = {(hsize_t)d[0], (hsize_t)d[1], (hsize_t)d[2]};
  const hsize_t mcount[3] = {(hsize_t)n[0], (hsize_t)n[1], (hsize_t)n[2]};
  const hid_t fs = H5Dget_space(dset), ms = H5Screate_simple(3, mdims, NULL);
  herr_t rc = fs < 0 || ms < 0 ? -1 : 0;
  if (rc >= 0)
    rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, fstart, NULL, fcount, NULL);
  if (rc >= 0)
    rc = H5Sselect_hyperslab(ms, H5S_SELECT_SET, mstart, NULL, mcount, NULL);
  if (rc >= 0)
    rc = H5Dread(dset, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT,
                 stage + c * crop[0] * crop[1] * crop[2]);
  if (ms >= 0)
    H5Sclose(ms);
  if (fs >= 0)
    H5Sclose(fs);
  return rc;
}

/* The transform's arguments, each refused with what is wrong about it. */
static slabfeed_status check_transform(int symmetry, const int64_t crop[3],
                                       int ngroups, const int (*groups)[3],
                                       slabfeed_dtype dtype,
                                       slabfeed_out_layout out_layout,
                                       const char *dataset, int64_t channels,
                                       sf__err *e)
{
  if (symmetry < 0 || symmetry >= 48)
    return sf__fail(e, SLABFEED_ERR_ARG, "reader: symmetry %d is not in 0..47",
                    symmetry);
  if (symmetry != 0 && (crop[0] != crop[1] || crop[0] != crop[2]))
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "reader: symmetry %d needs a cubic crop, not "
                    "%lldx%lldx%lld",
                    symmetry, (long long)crop[0], (long long)crop[1],
                    (long long)crop[2]);
  if (ngroups < 0 || ngroups > SLABFEED_MAX_VECTORS)
    return sf__fail(e, SLABFEED_ERR_ARG, "reader: %d vector groups; at most %d",
                    ngroups, SLABFEED_MAX_VECTORS);
  for (int v = 0; v < ngroups; v++)
    for (int a = 0; a < 3; a++)
      if (groups[v][a] < 0 || groups[v][a] >= channels)
        return sf__fail(e, SLABFEED_ERR_ARG,
                        "reader: vector group %d names channel %d, but '%s' "
                        "has channels 0..%lld",
                        v, groups[v][a], dataset, (long long)channels - 1);
  if ((unsigned)dtype > SLABFEED_DTYPE_BF16 ||
      (unsigned)out_layout > SLABFEED_OUT_NDHWC)
    return sf__fail(e, SLABFEED_ERR_ARG,
                    "reader: dtype %d or output layout %d is unknown",
                    (int)dtype, (int)out_layout);
  return SLABFEED_OK;
}

slabfeed_status slabfeed_reader_crop(slabfeed_reader *r, const char *dataset,
                                     slabfeed_file_layout layout,
                                     const int64_t origin[3],
                                     const int64_t crop[3], int symmetry,
                                     int ngroups, const int (*groups)[3],
                                     slabfeed_dtype dtype,
                                     slabfeed_out_layout out_layout, void *out)
{
  return slabfeed_reader_crop_values(r, dataset, layout, origin, crop, symmetry,
                                     ngroups, groups, 0, NULL, NULL, dtype,
                                     out_layout, out);
}

slabfeed_status slabfeed_reader_crop_values(
    slabfeed_reader *r, const char *dataset, slabfeed_file_layout layout,
    const int64_t origin[3], const int64_t crop[3], int symmetry, int ngroups,
    const int (*groups)[3], int nnorm, const slabfeed_norm *norm,
    const float *aug, slabfeed_dtype dtype, slabfeed_out_layout out_layout,
    void *out)
{
  sf__err e;
  sf__err_clear(&e);
  sf__h5_quiet q;
  sf__h5_quiet_begin(&q);
  /* `dataset` may be a list of fields of this file ("density,velocity"):
   * their channels one after the other, as the loader concatenates them. */
  enum { MAXF = 16 };
  hid_t dset[MAXF];
  slabfeed_dataset_info fi[MAXF], in;
  memset(&in, 0, sizeof in);
  int nf = 0;
  char name[256];
  for (const char *p = dataset; e.status == SLABFEED_OK;) {
    const size_t len = strcspn(p, ",");
    size_t a = 0, b = len;
    while (a < b && p[a] == ' ')
      a++;
    while (b > a && p[b - 1] == ' ')
      b--;
    if (nf >= MAXF || b == a || b - a >= sizeof name ||
        memchr(p + a, '@', b - a) != NULL) {
      sf__fail(&e, SLABFEED_ERR_ARG,
               "reader: '%s': the reader reads up to %d datasets of its own "
               "file, separated by commas (not fields of other files)",
               dataset, MAXF);
      break;
    }
    memcpy(name, p + a, b - a);
    name[b - a] = '\0';
    dset[nf] = H5I_INVALID_HID;
    if (sf__h5_dataset(r->file, r->path, name, layout, &dset[nf], &fi[nf],
                       &e) == SLABFEED_OK &&
        nf > 0 && memcmp(fi[nf].shape, fi[0].shape, sizeof fi[0].shape) != 0)
      sf__fail(&e, SLABFEED_ERR_FORMAT,
               "reader: field '%s' of '%s' is not on the grid of the first",
               name, r->path);
    nf++;
    if (p[len] == '\0')
      break;
    p += len + 1;
  }
  if (e.status == SLABFEED_OK) {
    in = fi[0];
    for (int f = 1; f < nf; f++)
      in.channels += fi[f].channels;
    for (int a = 0; a < 3; a++)
      if (origin[a] < 0 || origin[a] >= in.shape[a] || crop[a] < 1 ||
          crop[a] > in.shape[a])
        sf__fail(&e, SLABFEED_ERR_ARG,
                 "reader: origin/crop outside the box on axis %d", a);
    if (in.channels > 64)
      sf__fail(&e, SLABFEED_ERR_ARG, "reader: '%s' has more than 64 channels",
               dataset);
  }
  const size_t elems = (size_t)(in.channels * crop[0] * crop[1] * crop[2]);
  if (e.status == SLABFEED_OK && elems > r->stage_elems) {
    float *p = realloc(r->stage, elems * sizeof *p);
    if (p == NULL)
      sf__fail(&e, SLABFEED_ERR_NOMEM, "reader: cannot allocate the crop");
    else
      r->stage = p, r->stage_elems = elems;
  }
  if (e.status == SLABFEED_OK) {
    sf__run runs[3][2];
    int nr[3];
    for (int a = 0; a < 3; a++)
      nr[a] = sf__periodic_split(origin[a], crop[a], in.shape[a], runs[a]);
    const int64_t vol = crop[0] * crop[1] * crop[2];
    int64_t c0 = 0;
    for (int f = 0; f < nf; c0 += fi[f].channels, f++)
      for (int64_t c = 0; c < fi[f].channels && e.status == SLABFEED_OK; c++)
        for (int i = 0; i < nr[0]; i++)
          for (int j = 0; j < nr[1]; j++)
            for (int k = 0; k < nr[2]; k++) {
              const int64_t o[3] = {runs[0][i].begin, runs[1][j].begin,
                                    runs[2][k].begin};
              const int64_t n[3] = {runs[0][i].len, runs[1][j].len,
                                    runs[2][k].len};
              const int64_t d[3] = {runs[0][i].crop_off, runs[1][j].crop_off,
                                    runs[2][k].crop_off};
              if (read_box(dset[f], &fi[f], c, o, n, d, crop,
                           r->stage + c0 * vol) < 0) {
                sf__fail(&e, SLABFEED_ERR_IO, "reader: reading '%s' failed",
                         dataset);
                sf__h5_detail(&e);
              }
            }
  }
  for (int f = 0; f < nf; f++)
    if (dset[f] >= 0)
      H5Dclose(dset[f]);
  sf__h5_quiet_end(&q);
  if (e.status == SLABFEED_OK)
    check_transform(symmetry, crop, ngroups, groups, dtype, out_layout, dataset,
                    in.channels, &e);
  if (e.status == SLABFEED_OK && nnorm != 0 &&
      (nnorm != in.channels || norm == NULL))
    sf__fail(&e, SLABFEED_ERR_ARG,
             "reader: %d normalisation entries for '%s', which has %lld "
             "channels",
             nnorm, dataset, (long long)in.channels);
  if (e.status == SLABFEED_OK) {
    /* The loader's host transform: symmetry, vectors, normalisation,
     * augmentation, dtype, in the documented order. */
    sf__xform x = {.trim = 0};
    memcpy(x.ext, crop, sizeof x.ext);
    x.channels = (int)in.channels;
    x.ngroups = ngroups;
    for (int v = 0; v < ngroups; v++)
      memcpy(x.groups[v], groups[v], sizeof x.groups[v]);
    x.dtype = dtype;
    x.layout = out_layout;
    sf__xform_set_norm(&x, nnorm, norm);
    sf__transform_aug(&x, symmetry, aug, r->stage, out);
  }
  snprintf(r->error, sizeof r->error, "%s", e.msg);
  return e.status;
}

const char *slabfeed_reader_error(const slabfeed_reader *r)
{
  return r ? r->error : "";
}

void slabfeed_reader_close(slabfeed_reader *r)
{
  if (r == NULL)
    return;
  if (r->file >= 0)
    H5Fclose(r->file);
  free(r->stage);
  free(r);
}
