#include "common/sys.h"
#include "io/volume.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/inject.h"
#include "common/normf.h"
#include "common/nvtx.h"
#include "io/slab.h"

/* A local failure injected for tests at `stage` (inject.h). */
static void injected(const sf__volume *v, const char *stage, sf__err *e)
{
  if (sf__inject(stage, v->rank))
    sf__fail(e, SLABFEED_ERR_IO, "injected failure at stage '%s' (test)",
             stage);
}

/* One volume's files and datasets: its own file, and the files of the
 * fields that have files of their own (H5I_INVALID_HID where a field is
 * in the volume's file); every field's dataset and what it is, and the
 * input and the target as their fields' channels concatenated. */
typedef struct one {
  hid_t file;
  hid_t ffile[2][SF_MAX_FIELDS];
  hid_t dset[2][SF_MAX_FIELDS];
  slabfeed_dataset_info finfo[2][SF_MAX_FIELDS];
  slabfeed_dataset_info info[2];
} one;

static void one_reset(one *o)
{
  o->file = H5I_INVALID_HID;
  for (int d = 0; d < 2; d++)
    for (int f = 0; f < SF_MAX_FIELDS; f++)
      o->ffile[d][f] = o->dset[d][f] = H5I_INVALID_HID;
}

static void one_close(one *o)
{
  for (int d = 0; d < 2; d++)
    for (int f = 0; f < SF_MAX_FIELDS; f++) {
      if (o->dset[d][f] >= 0)
        H5Dclose(o->dset[d][f]);
      if (o->ffile[d][f] >= 0)
        H5Fclose(o->ffile[d][f]);
    }
  if (o->file >= 0)
    H5Fclose(o->file);
  one_reset(o);
}

/* The file of field f of dataset d of volume i: its own, or the
 * volume's. */
static const char *field_path(const sf__volume *v, int d, int f, int i)
{
  const sf__suite *fs = &v->fsuite[d][f];
  return fs->n > 0 ? fs->path[i] : v->suite.path[i];
}

/* Opens (collectively with MPI-IO, or each rank on its own when mpio is
 * 0) volume i's file and the fields' own files, then every field's
 * dataset; combines the fields of each dataset into o->info. Local checks
 * only after the opens: the caller agrees. */
static slabfeed_status open_files(sf__volume *v, int i, one *o, int mpio,
                                  sf__err *e)
{
  const sf__config *c = v->cfg;
  const char *path = v->suite.path[i];
  if (mpio)
    sf__h5_open(v->comm, path, &o->file, e);
  else if ((o->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0)
    sf__fail(e, SLABFEED_ERR_IO,
             "cannot open '%s' (a virtual dataset) without MPI-IO", path);
  for (int d = 0; d < c->ndsets; d++)
    for (int f = 0; f < c->nfields[d]; f++) {
      if (v->fsuite[d][f].n == 0)
        continue;
      const char *fp = field_path(v, d, f, i);
      if (mpio) /* collective: every rank opens, failed or not */
        sf__h5_open(v->comm, fp, &o->ffile[d][f], e);
      else if ((o->ffile[d][f] = H5Fopen(fp, H5F_ACC_RDONLY, H5P_DEFAULT)) <
                   0 &&
               e->status == SLABFEED_OK)
        sf__fail(e, SLABFEED_ERR_IO,
                 "cannot open '%s' (a virtual dataset) without MPI-IO", fp);
    }
  injected(v, "open", e);
  if (e->status != SLABFEED_OK)
    return e->status;
  for (int d = 0; d < c->ndsets && e->status == SLABFEED_OK; d++) {
    for (int f = 0; f < c->nfields[d] && e->status == SLABFEED_OK; f++) {
      const hid_t file = o->ffile[d][f] >= 0 ? o->ffile[d][f] : o->file;
      sf__h5_dataset(file, field_path(v, d, f, i), c->field[d][f].name,
                     c->pub.layout, &o->dset[d][f], &o->finfo[d][f], e);
    }
    /* The fields of one grid, their channels one after the other. */
    const slabfeed_dataset_info *f0 = &o->finfo[d][0];
    slabfeed_dataset_info *in = &o->info[d];
    *in = *f0;
    for (int f = 1; f < c->nfields[d] && e->status == SLABFEED_OK; f++) {
      const slabfeed_dataset_info *x = &o->finfo[d][f];
      if (memcmp(x->shape, f0->shape, sizeof x->shape) != 0)
        sf__fail(e, SLABFEED_ERR_FORMAT,
                 "%s field '%s' in '%s' is %lldx%lldx%lld but field '%s' in "
                 "'%s' is %lldx%lldx%lld: the fields of the %s must cover "
                 "one grid",
                 d == 0 ? "input" : "target", c->field[d][f].name,
                 field_path(v, d, f, i), (long long)x->shape[0],
                 (long long)x->shape[1], (long long)x->shape[2],
                 c->field[d][0].name, field_path(v, d, 0, i),
                 (long long)f0->shape[0], (long long)f0->shape[1],
                 (long long)f0->shape[2], d == 0 ? "input" : "target");
      in->channels += x->channels;
      in->type_bits =
          x->type_bits > in->type_bits ? x->type_bits : in->type_bits;
    }
    if (c->nfields[d] > 1) { /* the concatenation, as one channels-first */
      in->ndim = 4;
      in->layout = SLABFEED_LAYOUT_CF;
      in->dims[0] = in->channels;
      for (int a = 0; a < 3; a++)
        in->dims[a + 1] = in->shape[a];
      in->chunked = 0;
    }
  }
  injected(v, "dataset", e);
  return e->status;
}

/* Collective: opens volume i's files and datasets into *o (checked
 * locally first, agreed before the collective open). */
static slabfeed_status one_open(sf__volume *v, int i, one *o, sf__err *e)
{
  const sf__config *c = v->cfg;
  const char *path = v->suite.path[i];
  memset(o, 0, sizeof *o);
  one_reset(o);
  sf__h5_preflight(path, 0, e);
  for (int d = 0; d < c->ndsets; d++)
    for (int f = 0; f < c->nfields[d] && e->status == SLABFEED_OK; f++)
      if (v->fsuite[d][f].n > 0) {
        sf__h5_preflight(field_path(v, d, f, i), 0, e);
        if (e->status == SLABFEED_OK && sf__inject("field.missing", v->rank))
          sf__fail(e, SLABFEED_ERR_IO,
                   "cannot open HDF5 file '%s': No such file or directory "
                   "(injected: a field's file missing on this rank only)",
                   field_path(v, d, f, i));
      }
  if (e->status == SLABFEED_OK && sf__inject("volume.missing", v->rank))
    sf__fail(e, SLABFEED_ERR_IO,
             "cannot open HDF5 file '%s': No such file or directory "
             "(injected: the volume missing on this rank only)",
             path);
  if (sf__agree(v->comm, e) != SLABFEED_OK)
    return e->status;
  open_files(v, i, o, 1, e);
  if (sf__agree(v->comm, e) != SLABFEED_OK)
    return e->status;
  /* HDF5 1.10 refuses parallel reads of virtual datasets: such a volume's
   * files are opened again without MPI-IO on every rank, and each rank
   * reads its own planes (HDF5 resolving the mapping to the source files).
   * Decided for all ranks alike: the close is collective. */
  int virt = 0;
  for (int d = 0; d < c->ndsets; d++)
    for (int f = 0; f < c->nfields[d]; f++)
      virt |= o->dset[d][f] >= 0 && sf__h5_is_virtual(o->dset[d][f]);
  int any = virt;
  const int rc = MPI_Allreduce(&virt, &any, 1, MPI_INT, MPI_MAX, v->comm);
  if (rc != MPI_SUCCESS)
    return sf__fail_mpi(e, rc, "MPI_Allreduce (virtual dataset)");
  if (!any)
    return e->status;
  one_close(o);
  return open_files(v, i, o, 0, e);
}

/* The channels of each field of o. */
static void field_channels(const sf__config *c, const one *o,
                           int64_t ch[2][SF_MAX_FIELDS])
{
  memset(ch, 0, sizeof(int64_t) * 2 * SF_MAX_FIELDS);
  for (int d = 0; d < c->ndsets; d++)
    for (int f = 0; f < c->nfields[d]; f++)
      ch[d][f] = o->finfo[d][f].channels;
}

/* Volume i against the options (with its own path in the messages) and
 * against volume 0. Local. */
static slabfeed_status one_check(const sf__volume *v, int i, const one *o,
                                 sf__err *e)
{
  const sf__config *c = v->cfg;
  sf__config *named = malloc(sizeof *named); /* big: not on the stack */
  if (named == NULL)
    return sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: checking volume %d", i);
  *named = *c;
  snprintf(named->path, sizeof named->path, "%s", v->suite.path[i]);
  named->pub.path = named->path;
  int64_t ch[2][SF_MAX_FIELDS];
  field_channels(c, o, ch);
  const char *where[2][SF_MAX_FIELDS] = {{NULL}};
  for (int d = 0; d < c->ndsets; d++)
    for (int f = 0; f < c->nfields[d]; f++)
      where[d][f] = field_path(v, d, f, i);
  if (sf__config_resolve_fields(named, (const int64_t(*)[SF_MAX_FIELDS])ch,
                                (const char *const(*)[SF_MAX_FIELDS])where,
                                e) == SLABFEED_OK)
    sf__config_check_data(named, o->info, e);
  free(named);
  if (e->status != SLABFEED_OK || i == 0)
    return e->status;
  for (int d = 0; d < c->ndsets; d++) {
    const slabfeed_dataset_info *a = &v->info[d], *b = &o->info[d];
    char how[160] = "";
    if (b->channels != a->channels)
      snprintf(how, sizeof how, "%lld channels, not %lld",
               (long long)b->channels, (long long)a->channels);
    else if (b->type_bits != a->type_bits)
      snprintf(how, sizeof how, "%d-bit floats, not %d-bit", b->type_bits,
               a->type_bits);
    else if (b->layout != a->layout)
      snprintf(
          how, sizeof how, "layout %s, not %s",
          b->layout == SLABFEED_LAYOUT_CL ? "channels-last" : "channels-first",
          a->layout == SLABFEED_LAYOUT_CL ? "channels-last" : "channels-first");
    if (how[0] != '\0')
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "dataset: volume %d '%s' differs from volume 0 '%s': "
                      "'%s' has %s",
                      i, v->suite.path[i], v->suite.path[0],
                      sf__config_dataset(c, d), how);
  }
  /* The same channels in all, but split otherwise over the fields. */
  for (int d = 0; d < c->ndsets; d++)
    for (int f = 0; f < c->nfields[d]; f++)
      if (ch[d][f] != v->fchannels[d][f])
        return sf__fail(e, SLABFEED_ERR_FORMAT,
                        "dataset: field '%s' has %lld channels in '%s' but "
                        "%lld in volume 0's '%s'",
                        c->field[d][f].name, (long long)ch[d][f],
                        field_path(v, d, f, i), (long long)v->fchannels[d][f],
                        field_path(v, d, f, 0));
  return SLABFEED_OK;
}

/* The parameters of volume i (its file open in *o) into its row of
 * suite.param: each name's manifest column, else its file's attribute,
 * rounded to float and normalised. Local. */
static slabfeed_status one_params(sf__volume *v, int i, const one *o,
                                  sf__err *e)
{
  const sf__config *c = v->cfg;
  const char *path = v->suite.path[i];
  float *row = v->suite.param + (size_t)i * (size_t)c->nparams;
  for (int k = 0; k < c->nparams && e->status == SLABFEED_OK; k++) {
    const char *name = c->param_name[k];
    double x = 0;
    const int col = sf__suite_column(&v->suite, i, name, &x);
    if (col < 0) {
      sf__fail(e, SLABFEED_ERR_FORMAT,
               "dataset: volume %d '%s': manifest column '%s' (params) is "
               "not a number",
               i, path, name);
      break;
    }
    const int found =
        col > 0 ? 1 : sf__h5_number_attr(o->file, path, name, &x, e);
    const char *slash = strrchr(name, '/');
    if (found == 0)
      sf__fail(e, SLABFEED_ERR_FORMAT,
               "dataset: volume %d '%s' has no parameter '%s' (params): "
               "neither a manifest column %s=VALUE nor a numeric attribute "
               "'%s' of %s%.*s%s",
               i, path, name, name, slash != NULL ? slash + 1 : name,
               slash != NULL && slash > name ? "'" : "the root group",
               slash != NULL ? (int)(slash - name) : 0, name,
               slash != NULL && slash > name ? "'" : "");
    else if (found > 0 && !(x >= -3.4e38 && x <= 3.4e38))
      sf__fail(e, SLABFEED_ERR_FORMAT,
               "dataset: volume %d '%s': parameter '%s' is %g, not a finite "
               "float",
               i, path, name, x);
    else if (found > 0)
      row[k] = c->pub.n_params_norm > 0
                   ? sf__norm_apply(&c->pub.params_norm[k], (float)x)
                   : (float)x;
  }
  injected(v, "params", e);
  return e->status;
}

slabfeed_status sf__volume_open(sf__volume *v, MPI_Comm comm, int rank,
                                const sf__config *c, sf__err *e)
{
  memset(v, 0, sizeof *v);
  v->cfg = c;
  v->comm = comm;
  v->rank = rank;
  sf__h5_quiet_begin(&v->quiet);
  if (rank == 0)
    sf__suite_expand(c->path, &v->suite, e);
  if (sf__suite_bcast(&v->suite, comm, 0, e) != SLABFEED_OK)
    return e->status;
  /* Fields with files of their own: one file per volume, in order. */
  for (int d = 0; d < c->ndsets && e->status == SLABFEED_OK; d++)
    for (int f = 0; f < c->nfields[d] && e->status == SLABFEED_OK; f++) {
      const sf__field *fd = &c->field[d][f];
      if (fd->spec[0] == '\0')
        continue;
      /* DATASET@{NAME}: each volume's manifest column NAME names the
       * file (0.7); else a path spec of files in the volumes' order. */
      const size_t sl = strlen(fd->spec);
      char col[SF_NAME_MAX];
      if (fd->spec[0] == '{' && sl > 2 && fd->spec[sl - 1] == '}' &&
          sl - 2 < sizeof col) {
        char what[SF_NAME_MAX + 64];
        snprintf(col, sizeof col, "%.*s", (int)(sl - 2), fd->spec + 1);
        snprintf(what, sizeof what, "%s field '%s'",
                 d == 0 ? "input" : "target", fd->name);
        if (rank == 0)
          sf__suite_from_column(&v->suite, col, what, &v->fsuite[d][f], e);
      } else if (rank == 0)
        sf__suite_expand(fd->spec, &v->fsuite[d][f], e);
      if (sf__suite_bcast(&v->fsuite[d][f], comm, 0, e) != SLABFEED_OK)
        return e->status;
      if (v->fsuite[d][f].n != v->suite.n)
        sf__fail(e, SLABFEED_ERR_ARG,
                 "dataset: %s field '%s' names %d file%s ('%s', first '%s') "
                 "for the %d volume%s of path (first '%s'): one file per "
                 "volume, in the same order",
                 d == 0 ? "input" : "target", fd->name, v->fsuite[d][f].n,
                 v->fsuite[d][f].n == 1 ? "" : "s", fd->spec,
                 v->fsuite[d][f].path[0], v->suite.n,
                 v->suite.n == 1 ? "" : "s", v->suite.path[0]);
    }
  if (sf__agree(comm, e) != SLABFEED_OK)
    return e->status;
  if (v->suite.n > 1 && c->pub.tile > 0)
    sf__fail(e, SLABFEED_ERR_ARG,
             "dataset: a tiled pass runs over one volume; '%s' names %d "
             "(open the pass with the path of the volume to pass over)",
             v->suite.path[0], v->suite.n);
  v->suite.nparam = c->nparams;
  if (e->status == SLABFEED_OK && c->nparams > 0 &&
      (v->suite.param = calloc((size_t)v->suite.n * (size_t)c->nparams,
                               sizeof *v->suite.param)) == NULL)
    sf__fail(e, SLABFEED_ERR_NOMEM, "dataset: parameters of %d volumes",
             v->suite.n);
  if (sf__agree(comm, e) != SLABFEED_OK)
    return e->status;
  for (int i = 0; i < v->suite.n && e->status == SLABFEED_OK; i++) {
    one o;
    if (one_open(v, i, &o, e) == SLABFEED_OK &&
        one_check(v, i, &o, e) == SLABFEED_OK &&
        one_params(v, i, &o, e) == SLABFEED_OK && i == 0) {
      memcpy(v->info, o.info, sizeof v->info);
      field_channels(v->cfg, &o, v->fchannels);
    }
    one_close(&o);
    if (sf__agree(comm, e) != SLABFEED_OK)
      break;
    /* The suite's boxes are on the planes' grid (sf__config_planes_crop):
     * the input's, or a coarser target's (the input's / g, whole: checked
     * with the data). */
    const int64_t g = sf__config_coarsen(c);
    for (int a = 0; a < 3; a++)
      v->suite.shape[i][a] = o.info[0].shape[a] / g;
  }
  if (e->status == SLABFEED_OK)
    sf__volume_stack(v, NULL);
  return e->status;
}

void sf__volume_stack(sf__volume *v, const uint64_t *w)
{
  const sf__config *c = v->cfg;
  /* The stacked box: every kept volume's planes, one after the other; its
   * y and x are the largest of them (each volume is stored at its own:
   * the store's plane table). A volume of weight 0 takes no planes: it is
   * never read. */
  int64_t z = 0, yx[2] = {0, 0};
  for (int i = 0; i < v->suite.n; i++) {
    v->suite.z0[i] = z;
    if (w != NULL && w[i] == 0)
      continue;
    z += v->suite.shape[i][0];
    for (int a = 0; a < 2; a++)
      if (v->suite.shape[i][1 + a] > yx[a])
        yx[a] = v->suite.shape[i][1 + a];
  }
  v->suite.z0[v->suite.n] = z;
  for (int d = 0; d < c->ndsets; d++) {
    slabfeed_dataset_info *in = &v->info[d];
    const int cl = in->layout == SLABFEED_LAYOUT_CL;
    in->shape[0] = z;
    in->shape[1] = yx[0];
    in->shape[2] = yx[1];
    for (int a = 0; a < 3; a++)
      in->dims[cl ? a : a + 1] = in->shape[a];
  }
}

/* Collective: how the reads of path go (SF_H5_* flags, read_mode; for
 * auto, direct where rank 0 finds it on a node-local or memory
 * filesystem, falling back to independent reads on more than one rank
 * and collective on one, else collective), rank 0's answer for all; the
 * first file's choice, with its reason, goes into v->read_how (made whole
 * by said_how after the read). */
int sf__volume_direct_wanted(const sf__volume *v, const char *path, char *fs,
                             size_t len)
{
  const slabfeed_read_mode mode = v->cfg->pub.read_mode;
  if (len > 0)
    fs[0] = '\0';
  return mode == SLABFEED_READ_DIRECT ||
         (mode == SLABFEED_READ_AUTO && sf__h5_local_fs(path, fs, len));
}

static int read_mode(sf__volume *v, const char *path, sf__err *e)
{
  const slabfeed_read_mode mode = v->cfg->pub.read_mode;
  char fs[64] = "";
  int size = 1;
  MPI_Comm_size(v->comm, &size);
  int how = mode == SLABFEED_READ_INDEPENDENT ? SF_H5_INDEPENDENT
            : mode == SLABFEED_READ_DIRECT    ? SF_H5_DIRECT | SF_H5_INDEPENDENT
                                              : 0;
  /* auto: direct where the file is local; what pread cannot read falls
   * back to collective reads on one rank (its collective read is its own
   * read, without the independent path's cost: measured 0.81 against
   * 1.04 x the read ceiling) and to independent reads on more. */
  if (v->rank == 0 && mode == SLABFEED_READ_AUTO &&
      sf__volume_direct_wanted(v, path, fs, sizeof fs))
    how = SF_H5_DIRECT | (size > 1 ? SF_H5_INDEPENDENT : 0);
  const int rc = MPI_Bcast(&how, 1, MPI_INT, 0, v->comm);
  if (rc != MPI_SUCCESS && e->status == SLABFEED_OK)
    sf__fail_mpi(e, rc, "MPI_Bcast (read mode)");
  static const char *const modes[] = {"auto", "collective", "independent",
                                      "direct"};
  if (v->read_how[0] == '\0') {
    v->read_flags = how;
    snprintf(v->read_how, sizeof v->read_how, "read_mode %s%s%s",
             modes[(int)mode % 4], fs[0] != '\0' ? ": " : "", fs);
  }
  return how;
}

/* v->read_how whole: what ran, then why ("read_mode ..." from
 * read_mode). direct[1] datasets read with pread, direct[0] that could
 * not be (the same on every rank: a dataset's metadata decides). */
static void said_how(sf__volume *v, const int direct[2], int node_ranks)
{
  v->read_direct = direct[1];
  v->read_other = direct[0];
  if (v->read_how[0] == '\0')
    return; /* nothing was read */
  char why[96];
  snprintf(why, sizeof why, "%.80s", v->read_how);
  const char *rest = v->read_flags & SF_H5_INDEPENDENT ? "independent MPI-IO"
                                                       : "collective MPI-IO";
  const int threads = sf__core_share(node_ranks);
  char pread[48] = "", bound[160] = "";
  if (direct[1] > 0) {
    snprintf(pread, sizeof pread, "direct pread on %d thread%s", threads,
             threads == 1 ? "" : "s");
    sf__core_note(node_ranks, bound, sizeof bound);
  }
  if (direct[1] > 0 && direct[0] > 0)
    snprintf(v->read_how, sizeof v->read_how,
             "%.40s (%d dataset%s), %s (%d: not float32/float16 stored "
             "contiguously or in chunks without filters) (%.80s)%s",
             pread, direct[1], direct[1] == 1 ? "" : "s", rest, direct[0], why,
             bound);
  else
    snprintf(v->read_how, sizeof v->read_how, "%.40s (%.80s)%s",
             direct[1] > 0 ? pread : rest, why, bound);
}

/* A field that MPI-IO reads into memory the caller left unfaulted (segment
 * files that direct reads write as files) would take one page fault per
 * page on the reading thread, and a page the filesystem cannot back would
 * be a SIGBUS there. Its channels' pages of this rank's segment are
 * populated first on v->populate_mpiio threads; a refusal (no room in
 * /dev/shm) is this rank's error, naming the field. Returns 1 where it
 * populated, 0 where there was nothing to do or the kernel lacks
 * MADV_POPULATE_WRITE (the read then faults the pages). Local. */
static int populate_field(const sf__volume *v, const sf__store *s, int d,
                          int64_t c0, int64_t channels, const char *path,
                          const char *name, sf__err *e)
{
  if (v->populate_mpiio < 2 || s->base == NULL)
    return 0;
  const size_t bytes =
      (size_t)(channels * s->cube[d] * sf__store_chan(s, s->rank)) *
      sizeof(float);
  const int err = sf__inject("read.populate", v->rank)
                      ? ENOSPC
                      : sf__populate_strict(sf__store_channel(s, d, c0), bytes,
                                            v->populate_mpiio);
  if (err != 0 && err != EINVAL)
    sf__fail(e, SLABFEED_ERR_NOMEM,
             "cannot populate %.2f MB of this rank's slab files for '%s' of "
             "'%s' (read through MPI-IO): %s",
             (double)bytes / 1e6, name, path,
             err == EFAULT || err == ENOSPC
                 ? "the filesystem has no room for them"
                 : strerror(err));
  return err == 0;
}

slabfeed_status sf__volume_read(sf__volume *v, sf__store *s, sf__sink *sink,
                                sf__err *e)
{
  const sf__config *c = v->cfg;
  SF_RANGE_PUSH("read");
  /* Progress: this rank's bytes, and all ranks' (one reduction, made by
   * every rank before any read). */
  double mine = 0, all = 0;
  for (int i = 0; i < v->suite.n; i++)
    for (int d = 0; d < c->ndsets; d++)
      for (int f = 0; f < c->nfields[d]; f++) {
        const int64_t yx[2] = {s->scale[d] * v->suite.shape[i][1],
                               s->scale[d] * v->suite.shape[i][2]};
        mine += sf__slab_bytes(s, d, v->fchannels[d][f], yx, v->suite.z0[i],
                               v->suite.z0[i + 1] - v->suite.z0[i]);
      }
  const int rc = MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, v->comm);
  if (rc != MPI_SUCCESS && e->status == SLABFEED_OK)
    sf__fail_mpi(e, rc, "MPI_Allreduce (bytes to read)");
  sf__progress pg;
  sf__progress_begin(&pg, c->pub.progress, v->rank, "reading the slabs", mine,
                     mine > 0 ? all / mine : 1);
  int direct[2] = {0, 0}; /* datasets read with MPI-IO, with pread */
  v->read_mpiio = v->read_populated = 0;
  /* Fields read through MPI-IO in any volume (each counted, and its
   * channels' pages populated, once: they span every volume's planes). */
  int via_mpiio[2][SF_MAX_FIELDS] = {{0}};
  for (int i = 0; i < v->suite.n; i++) {
    const char *path = v->suite.path[i];
    if (v->suite.z0[i + 1] == v->suite.z0[i])
      continue; /* held out of the stack: not read */
    const uint64_t before = sf__h5_file_bytes(path);
    one o;
    one_open(v, i, &o, e);
    if (sf__agree(v->comm, e) != SLABFEED_OK) {
      one_close(&o);
      break;
    }
    const int64_t z0 = v->suite.z0[i], nz = v->suite.z0[i + 1] - z0;
    uint64_t fbefore[2][SF_MAX_FIELDS];
    for (int d = 0; d < c->ndsets; d++)
      for (int f = 0; f < c->nfields[d]; f++)
        fbefore[d][f] = v->fsuite[d][f].n > 0
                            ? sf__h5_file_bytes(field_path(v, d, f, i))
                            : before;
    for (int d = 0; d < c->ndsets; d++) {
      injected(v, d == 0 ? "read.input" : "read.target", e);
      /* Field by field into its channels of the dataset. */
      int64_t c0 = 0;
      for (int f = 0; f < c->nfields[d]; f++) {
        const int how = read_mode(v, field_path(v, d, f, i), e);
        const int by_pread = (how & SF_H5_DIRECT) &&
                             sf__h5_direct_ok(o.dset[d][f], &o.finfo[d][f]);
        if (how & SF_H5_DIRECT)
          direct[by_pread]++;
        if (!by_pread && !via_mpiio[d][f] && e->status == SLABFEED_OK) {
          via_mpiio[d][f] = 1;
          v->read_mpiio++;
          v->read_populated +=
              populate_field(v, s, d, c0, o.finfo[d][f].channels,
                             field_path(v, d, f, i), c->field[d][f].name, e);
        }
        sf__slab_read(s, d, c0, o.dset[d][f], field_path(v, d, f, i),
                      c->field[d][f].name, &o.finfo[d][f], z0, nz, how, sink,
                      &pg, e);
        c0 += o.finfo[d][f].channels;
      }
    }
    for (int d = 0; d < c->ndsets && e->status == SLABFEED_OK; d++)
      for (int f = 0; f < c->nfields[d] && e->status == SLABFEED_OK; f++)
        sf__h5_check_size(o.dset[d][f], field_path(v, d, f, i),
                          c->field[d][f].name, fbefore[d][f], e);
    one_close(&o);
    if (sf__agree(v->comm, e) != SLABFEED_OK)
      break;
  }
  sf__progress_end(&pg, e->status == SLABFEED_OK);
  said_how(v, direct, s->node_size);
  SF_RANGE_POP();
  return e->status;
}

void sf__volume_close(sf__volume *v)
{
  if (v->cfg == NULL)
    return;
  sf__suite_free(&v->suite);
  for (int d = 0; d < 2; d++)
    for (int f = 0; f < SF_MAX_FIELDS; f++)
      sf__suite_free(&v->fsuite[d][f]);
  sf__h5_quiet_end(&v->quiet);
  v->cfg = NULL;
}

/* ---- Public: the description of a dataset or of fields ------------------ */

slabfeed_status slabfeed_describe(const char *path, const char *dataset,
                                  slabfeed_file_layout layout,
                                  slabfeed_dataset_info *out, char *errbuf,
                                  size_t errlen)
{
  sf__err e;
  sf__err_clear(&e);
  const size_t min =
      offsetof(slabfeed_dataset_info, shape) + 3 * sizeof(int64_t);
  if (path == NULL || dataset == NULL || out == NULL) {
    sf__fail(&e, SLABFEED_ERR_ARG,
             "slabfeed_describe: path, dataset and out are required");
  } else if (out->size < min) {
    sf__fail(&e, SLABFEED_ERR_ARG,
             "slabfeed_describe: out->size %zu is too small (at least %zu): "
             "declare it with SLABFEED_DATASET_INFO_INIT",
             out->size, min);
  }
  if (e.status != SLABFEED_OK) {
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  sf__h5_quiet q;
  sf__h5_quiet_begin(&q);
  /* One dataset, or a list of fields (the loader's `input`): their
   * channels concatenated, the first's grid; a field with files of its
   * own is described from the first of them. */
  slabfeed_dataset_info info, all;
  memset(&all, 0, sizeof all);
  int nf = 0;
  for (const char *p = dataset; e.status == SLABFEED_OK; nf++) {
    size_t len, a, b;
    sf__list_entry(p, &len, &a, &b);
    char name[256], spec[4096];
    const char *at = memchr(p + a, '@', b - a);
    const size_t nlen = at != NULL ? (size_t)(at - (p + a)) : b - a;
    const size_t slen = at != NULL ? (size_t)(p + b - at - 1) : 0;
    if (nlen == 0 || nlen >= sizeof name || slen >= sizeof spec) {
      sf__fail(&e, SLABFEED_ERR_ARG, "'%s': field %d is empty or too long",
               dataset, nf);
      break;
    }
    memcpy(name, p + a, nlen);
    name[nlen] = '\0';
    memcpy(spec, at != NULL ? at + 1 : "", slen);
    spec[slen] = '\0';
    sf__suite own;
    memset(&own, 0, sizeof own);
    if (slen > 0)
      sf__suite_expand(spec, &own, &e);
    const char *fp = slen > 0 && e.status == SLABFEED_OK ? own.path[0] : path;
    const hid_t file =
        e.status == SLABFEED_OK ? H5Fopen(fp, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    if (e.status == SLABFEED_OK && file < 0) {
      sf__fail(&e, SLABFEED_ERR_IO, "cannot open HDF5 file '%s'", fp);
      sf__h5_detail(&e);
    } else if (file >= 0) {
      hid_t dset;
      if (sf__h5_dataset(file, fp, name, layout, &dset, &info, &e) ==
          SLABFEED_OK) {
        H5Dclose(dset);
        if (nf == 0)
          all = info;
        else if (memcmp(info.shape, all.shape, sizeof all.shape) != 0)
          sf__fail(&e, SLABFEED_ERR_FORMAT,
                   "field '%s' in '%s' is not on the grid of the first field",
                   name, fp);
        else {
          all.channels += info.channels;
          all.ndim = 4;
          all.layout = SLABFEED_LAYOUT_CF;
          all.dims[0] = all.channels;
          for (int k = 0; k < 3; k++)
            all.dims[k + 1] = all.shape[k];
          all.chunked = 0;
        }
      }
      H5Fclose(file);
    }
    sf__suite_free(&own);
    if (p[len] == '\0')
      break;
    p += len + 1;
  }
  if (e.status == SLABFEED_OK)
    sf__sized_write(out, &all, sizeof all, min);
  sf__h5_quiet_end(&q);
  sf__err_copy(&e, errbuf, errlen);
  return e.status;
}

slabfeed_status slabfeed_stored_ranges(const char *path, const char *dataset,
                                       slabfeed_file_layout layout, int64_t z0,
                                       int64_t z1, slabfeed_byte_range *out,
                                       int64_t cap, int64_t *n, char *errbuf,
                                       size_t errlen)
{
  sf__err e;
  sf__err_clear(&e);
  if (n != NULL)
    *n = 0;
  if (path == NULL || dataset == NULL || n == NULL || cap < 0 ||
      (out == NULL && cap > 0)) {
    sf__fail(&e, SLABFEED_ERR_ARG,
             "slabfeed_stored_ranges: path, dataset and n are required, and "
             "out where cap > 0");
    sf__err_copy(&e, errbuf, errlen);
    return e.status;
  }
  sf__h5_quiet q;
  sf__h5_quiet_begin(&q);
  const hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t dset = H5I_INVALID_HID;
  slabfeed_dataset_info info;
  memset(&info, 0, sizeof info);
  if (file < 0) {
    sf__fail(&e, SLABFEED_ERR_IO, "cannot open HDF5 file '%s'", path);
    sf__h5_detail(&e);
  } else if (sf__h5_dataset(file, path, dataset, layout, &dset, &info, &e) ==
                 SLABFEED_OK &&
             (z0 < 0 || z1 < z0 || z1 > info.shape[0]))
    sf__fail(&e, SLABFEED_ERR_ARG,
             "slabfeed_stored_ranges: planes [%lld, %lld) of '%s' in '%s', "
             "which has %lld",
             (long long)z0, (long long)z1, dataset, path,
             (long long)info.shape[0]);
  if (e.status == SLABFEED_OK)
    sf__h5_ranges(dset, path, dataset, &info, z0, z1, out, cap, n, &e);
  if (e.status != SLABFEED_OK)
    *n = 0;
  if (dset >= 0)
    H5Dclose(dset);
  if (file >= 0)
    H5Fclose(file);
  sf__h5_quiet_end(&q);
  sf__err_copy(&e, errbuf, errlen);
  return e.status;
}
