/*
 * The tools of slabfeed_tools.h for Python: the parallel generator, the
 * dataset description, the field statistics and the independent serial
 * reference reader (what the tests compare every batch with). The GIL is
 * held across their HDF5 calls (see below).
 */
#include "py_tools.h"

#include "py_args.h"
#include "py_errors.h"
#include "py_mpi.h"

#include <math.h>
#include <string.h>

/* The GIL stays held across every HDF5 call of these tools (generate,
 * describe, the Reader): HDF5 is not thread safe, and the GIL is what
 * serialises the calls of the Python threads of a process. generate is
 * collective over its communicator: it blocks the other Python threads of
 * this process until it returns (every rank must call it anyway). */

static const char *const content_names[] = {"index", "field", NULL};

/* generate(comm_f2c, path, *, input='Nbody', target='Hydro', shape=64,
 * input_channels=4, target_channels=5, layout='cf', chunked=False,
 * chunk=None, float16=False, content='index', seed=0, progress=False,
 * attrs=None ("NAME=VALUE,..."), overwrite=False, input_fields=None,
 * target_fields=None, scale_factor=1, coarsen_factor=1):
 * slabfeed_generate, collective over the communicator, GIL released.
 * target=None writes no target (an empty string is the library default). */
PyObject *sfpy_generate(PyObject *module, PyObject *args, PyObject *kw)
{
  static char *kwlist[] = {"comm",
                           "path",
                           "input",
                           "target",
                           "shape",
                           "input_channels",
                           "target_channels",
                           "layout",
                           "chunked",
                           "chunk",
                           "float16",
                           "content",
                           "seed",
                           "progress",
                           "attrs",
                           "overwrite",
                           "input_fields",
                           "target_fields",
                           "scale_factor",
                           "coarsen_factor",
                           NULL};
  sfpy_state *st = PyModule_GetState(module);
  PyObject *comm_o, *path = NULL, *input = NULL, *target = NULL;
  PyObject *shape = NULL, *ic = NULL, *tc = NULL, *layout = NULL;
  PyObject *chunk = NULL, *content = NULL, *seed = NULL, *attrs = NULL;
  const char *in_fields = NULL, *tg_fields = NULL;
  int chunked = 0, f16 = 0, progress = 0, overwrite = 0, scale = 1;
  int coarsen = 1;
  if (!PyArg_ParseTupleAndKeywords(
          args, kw, "OO&|$UOOOOOpOpOOpOpzzii:generate", kwlist, &comm_o,
          PyUnicode_FSConverter, &path, &input, &target, &shape, &ic, &tc,
          &layout, &chunked, &chunk, &f16, &content, &seed, &progress, &attrs,
          &overwrite, &in_fields, &tg_fields, &scale, &coarsen))
    return NULL;
  PyObject *ret = NULL;
  slabfeed_gen_config g;
  slabfeed_gen_config_init(&g);
  g.path = PyBytes_AsString(path);
  if (g.path == NULL)
    goto out;
  Py_ssize_t len = 0;
  if (input != NULL) {
    if ((g.input = PyUnicode_AsUTF8AndSize(input, &len)) == NULL)
      goto out;
    if ((size_t)len != strlen(g.input)) {
      PyErr_SetString(PyExc_ValueError,
                      "slabfeed: embedded null character in input");
      goto out;
    }
  }
  if (target == Py_None) {
    g.target = NULL;
  } else if (target != NULL) {
    if (!PyUnicode_Check(target)) {
      PyErr_SetString(PyExc_TypeError,
                      "slabfeed: target must be a str or None");
      goto out;
    }
    if ((g.target = PyUnicode_AsUTF8AndSize(target, &len)) == NULL)
      goto out;
    if ((size_t)len != strlen(g.target)) {
      PyErr_SetString(PyExc_ValueError,
                      "slabfeed: embedded null character in target");
      goto out;
    }
  }
  if (attrs != NULL && attrs != Py_None) {
    if (!PyUnicode_Check(attrs)) {
      PyErr_SetString(PyExc_TypeError,
                      "slabfeed: attrs must be a str 'NAME=VALUE,...' or None");
      goto out;
    }
    if ((g.attrs = PyUnicode_AsUTF8AndSize(attrs, &len)) == NULL)
      goto out;
    if ((size_t)len != strlen(g.attrs)) {
      PyErr_SetString(PyExc_ValueError,
                      "slabfeed: embedded null character in attrs");
      goto out;
    }
  }
  long long in_ch = g.input_channels, tg_ch = g.target_channels;
  int lay = (int)g.layout, cont = (int)g.content;
  if (sfpy_triple(shape, "shape", g.shape) < 0 ||
      sfpy_int(ic, "input_channels", 1, INT32_MAX, &in_ch) < 0 ||
      sfpy_int(tc, "target_channels", 1, INT32_MAX, &tg_ch) < 0 ||
      sfpy_choice(layout, "layout", sfpy_file_layouts, NULL, &lay) < 0 ||
      sfpy_triple(chunk, "chunk", g.chunk) < 0 ||
      sfpy_choice(content, "content", content_names, NULL, &cont) < 0 ||
      sfpy_u64(seed, "seed", &g.seed) < 0)
    goto out;
  g.input_channels = (int)in_ch;
  g.target_channels = (int)tg_ch;
  g.layout = (slabfeed_file_layout)lay;
  g.content = (slabfeed_content)cont;
  g.chunked = chunked;
  g.float16 = f16;
  g.progress = progress;
  g.overwrite = overwrite;
  g.input_fields = in_fields;
  g.target_fields = tg_fields;
  g.scale_factor = scale;
  g.coarsen_factor = coarsen;
  MPI_Comm comm;
  if (sfpy_comm_from_fint(st, comm_o, &comm) < 0)
    goto out;
  char err[2048] = "";
  const slabfeed_status s = slabfeed_generate(comm, &g, err, sizeof err);
  if (s != SLABFEED_OK) {
    sfpy_raise(st, s, err);
    goto out;
  }
  ret = Py_NewRef(Py_None);
out:
  Py_XDECREF(path);
  return ret;
}

/* describe(path, dataset, layout='auto') -> dict: slabfeed_describe. */
PyObject *sfpy_describe(PyObject *module, PyObject *args, PyObject *kw)
{
  static char *kwlist[] = {"path", "dataset", "layout", NULL};
  sfpy_state *st = PyModule_GetState(module);
  PyObject *path = NULL, *layout = NULL;
  const char *dataset;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&s|O:describe", kwlist,
                                   PyUnicode_FSConverter, &path, &dataset,
                                   &layout))
    return NULL;
  PyObject *ret = NULL;
  int lay = 0;
  if (sfpy_choice(layout, "layout", sfpy_file_layouts, NULL, &lay) < 0)
    goto out;
  const char *p = PyBytes_AsString(path);
  if (p == NULL)
    goto out;
  slabfeed_dataset_info info = SLABFEED_DATASET_INFO_INIT;
  char err[2048] = "";
  const slabfeed_status s = slabfeed_describe(
      p, dataset, (slabfeed_file_layout)lay, &info, err, sizeof err);
  if (s != SLABFEED_OK) {
    sfpy_raise(st, s, err);
    goto out;
  }
  ret = Py_BuildValue(
      "{s:(LLLL),s:L,s:(LLL),s:s,s:i,s:O,s:(LLLL)}", "dims",
      (long long)info.dims[0], (long long)info.dims[1], (long long)info.dims[2],
      (long long)info.dims[3], "channels", (long long)info.channels, "shape",
      (long long)info.shape[0], (long long)info.shape[1],
      (long long)info.shape[2], "layout", sfpy_file_layouts[info.layout],
      "type_bits", info.type_bits, "chunked", info.chunked ? Py_True : Py_False,
      "chunk", (long long)info.chunk[0], (long long)info.chunk[1],
      (long long)info.chunk[2], (long long)info.chunk[3]);
out:
  Py_XDECREF(path);
  return ret;
}

/* field_stats(comm_f2c, path, dataset, layout='auto', log_a=None) -> list:
 * slabfeed_field_stats, collective over the communicator (GIL held, as
 * for every HDF5 call here). One dict per channel: count, nonfinite,
 * mean, std, min, max, and log_count, log_mean, log_std, log_min,
 * log_max (None when log_a is None; NaN where no value is described). */
PyObject *sfpy_field_stats(PyObject *module, PyObject *args, PyObject *kw)
{
  static char *kwlist[] = {"comm", "path", "dataset", "layout", "log_a", NULL};
  sfpy_state *st = PyModule_GetState(module);
  PyObject *comm_o, *path = NULL, *layout = NULL, *log_o = NULL;
  const char *dataset;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OO&s|OO:field_stats", kwlist,
                                   &comm_o, PyUnicode_FSConverter, &path,
                                   &dataset, &layout, &log_o))
    return NULL;
  PyObject *ret = NULL;
  slabfeed_field_stat small[SLABFEED_MAX_CHANNELS], *res = small;
  int lay = 0;
  double log_a = NAN;
  if (sfpy_choice(layout, "layout", sfpy_file_layouts, NULL, &lay) < 0)
    goto out;
  if (log_o != NULL && log_o != Py_None) {
    if (PyBool_Check(log_o) || !PyNumber_Check(log_o) ||
        PyUnicode_Check(log_o)) {
      PyErr_Format(PyExc_TypeError,
                   "slabfeed: log_a must be a number or None, not %R", log_o);
      goto out;
    }
    log_a = PyFloat_AsDouble(log_o);
    if (log_a == -1.0 && PyErr_Occurred())
      goto out;
    if (isnan(log_a)) {
      PyErr_SetString(PyExc_ValueError,
                      "slabfeed: log_a is NaN; give None for no log "
                      "statistics");
      goto out;
    }
  }
  const char *p = PyBytes_AsString(path);
  MPI_Comm comm;
  if (p == NULL || sfpy_comm_from_fint(st, comm_o, &comm) < 0)
    goto out;
  char err[2048] = "";
  int channels = 0;
  slabfeed_status s = slabfeed_field_stats(
      comm, p, dataset, (slabfeed_file_layout)lay, (float)log_a, res,
      SLABFEED_MAX_CHANNELS, &channels, err, sizeof err);
  /* More channels than `small` holds: again with room for them (every
   * rank got the same answer, so every rank calls again). */
  if (s == SLABFEED_ERR_ARG && channels > SLABFEED_MAX_CHANNELS) {
    res = PyMem_Calloc((size_t)channels, sizeof *res);
    if (res == NULL) {
      PyErr_NoMemory();
      goto out;
    }
    s = slabfeed_field_stats(comm, p, dataset, (slabfeed_file_layout)lay,
                             (float)log_a, res, channels, &channels, err,
                             sizeof err);
  }
  if (s != SLABFEED_OK) {
    sfpy_raise(st, s, err);
    goto out;
  }
  const int with_log = !isnan(log_a);
  PyObject *list = PyList_New(0);
  for (int c = 0; list != NULL && c < channels; c++) {
    const slabfeed_field_stat *f = &res[c];
    PyObject *d = Py_BuildValue(
        "{s:K,s:K,s:d,s:d,s:d,s:d}", "count", (unsigned long long)f->count,
        "nonfinite", (unsigned long long)f->nonfinite, "mean", f->mean, "std",
        f->std, "min", f->min, "max", f->max);
    PyObject *lg =
        d == NULL ? NULL
        : with_log
            ? Py_BuildValue("{s:K,s:d,s:d,s:d,s:d}", "log_count",
                            (unsigned long long)f->log_count, "log_mean",
                            f->log_mean, "log_std", f->log_std, "log_min",
                            f->log_min, "log_max", f->log_max)
            : Py_BuildValue("{s:O,s:O,s:O,s:O,s:O}", "log_count", Py_None,
                            "log_mean", Py_None, "log_std", Py_None, "log_min",
                            Py_None, "log_max", Py_None);
    if (lg == NULL || PyDict_Update(d, lg) < 0 || PyList_Append(list, d) < 0) {
      Py_XDECREF(lg);
      Py_XDECREF(d);
      Py_CLEAR(list);
      break;
    }
    Py_DECREF(lg);
    Py_DECREF(d);
  }
  ret = list;
out:
  if (res != small)
    PyMem_Free(res);
  Py_XDECREF(path);
  return ret;
}

/* ---- Reader
 * ------------------------------------------------------------------
 */

typedef struct {
  PyObject_HEAD slabfeed_reader *r;
  PyObject *path; /* bytes */
  int busy;       /* inside crop: close (from Python code it ran) refused */
} sfpy_reader;

static int reader_init(sfpy_reader *self, PyObject *args, PyObject *kw)
{
  static char *kwlist[] = {"path", NULL};
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  PyObject *path = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O&:Reader", kwlist,
                                   PyUnicode_FSConverter, &path))
    return -1;
  if (self->r != NULL || self->busy) {
    Py_DECREF(path);
    sfpy_raise(st, SLABFEED_ERR_STATE, "slabfeed: the reader is already open");
    return -1;
  }
  const char *p = PyBytes_AsString(path);
  char err[2048] = "";
  slabfeed_status s = SLABFEED_ERR_ARG;
  if (p != NULL)
    s = slabfeed_reader_open(p, &self->r, err, sizeof err);
  if (s != SLABFEED_OK) {
    Py_DECREF(path);
    if (p != NULL)
      sfpy_raise(st, s, err);
    return -1;
  }
  Py_XDECREF(self->path);
  self->path = path;
  return 0;
}

static void reader_dealloc(sfpy_reader *self)
{
  PyTypeObject *tp = Py_TYPE(self);
  slabfeed_reader_close(self->r);
  Py_XDECREF(self->path);
  freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  f(self);
  Py_DECREF(tp);
}

/* crop(dataset, origin, crop, *, symmetry=0, vectors=(), dtype='f32',
 * out_layout='ncdhw', layout='auto') -> bytes: one sample formed straight
 * from the file (slabfeed_reader_crop), C order. */
static PyObject *reader_crop(sfpy_reader *self, PyObject *args, PyObject *kw)
{
  static char *kwlist[] = {"dataset",    "origin",  "crop",
                           "symmetry",   "vectors", "dtype",
                           "out_layout", "layout",  NULL};
  sfpy_state *st = sfpy_state_of(Py_TYPE(self));
  const char *dataset;
  PyObject *origin_o, *crop_o, *sym_o = NULL, *vec_o = NULL, *dt_o = NULL;
  PyObject *ol_o = NULL, *lay_o = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "sOO|$OOOOO:crop", kwlist,
                                   &dataset, &origin_o, &crop_o, &sym_o, &vec_o,
                                   &dt_o, &ol_o, &lay_o))
    return NULL;
  int64_t origin[3], crop[3];
  int groups[SLABFEED_MAX_VECTORS][3];
  int ngroups = 0, dtype = 0, out_layout = 0, layout = 0;
  long long sym = 0;
  PyObject *o = PyTuple_Check(origin_o) ? origin_o : NULL;
  if (o == NULL || PyTuple_Size(o) != 3) {
    PyErr_SetString(PyExc_TypeError, "slabfeed: origin must be (z, y, x)");
    return NULL;
  }
  for (int a = 0; a < 3; a++) {
    long long v = 0;
    if (sfpy_int(PyTuple_GetItem(o, a), "origin", 0, INT64_MAX, &v) < 0)
      return NULL;
    origin[a] = (int64_t)v;
  }
  if (sfpy_triple(crop_o, "crop", crop) < 0 ||
      sfpy_int(sym_o, "symmetry", 0, 47, &sym) < 0 ||
      sfpy_vectors(vec_o, "vectors", groups, &ngroups) < 0 ||
      sfpy_choice(dt_o, "dtype", sfpy_dtype_names, sfpy_dtype_aliases, &dtype) <
          0 ||
      sfpy_choice(ol_o, "out_layout", sfpy_out_layouts, NULL, &out_layout) <
          0 ||
      sfpy_choice(lay_o, "layout", sfpy_file_layouts, NULL, &layout) < 0)
    return NULL;
  /* After the conversions (which may run Python code, close() included). */
  if (self->r == NULL)
    return sfpy_raise(st, SLABFEED_ERR_STATE, "slabfeed: the reader is closed");
  if (self->busy)
    return sfpy_raise(st, SLABFEED_ERR_STATE,
                      "slabfeed: the reader is in use (crop)");
  /* The channel count sizes the output. */
  slabfeed_dataset_info info = SLABFEED_DATASET_INFO_INIT;
  char err[2048] = "";
  slabfeed_status s =
      slabfeed_describe(PyBytes_AsString(self->path), dataset,
                        (slabfeed_file_layout)layout, &info, err, sizeof err);
  if (s != SLABFEED_OK)
    return sfpy_raise(st, s, err);
  const size_t n = (size_t)info.channels * (size_t)crop[0] * (size_t)crop[1] *
                   (size_t)crop[2] * slabfeed_dtype_size(dtype);
  PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
  if (out == NULL)
    return NULL;
  char *dst = PyBytes_AsString(out);
  /* The allocation may have run Python code (a collection): again. */
  if (dst == NULL || self->r == NULL) {
    Py_DECREF(out);
    return dst == NULL ? NULL
                       : sfpy_raise(st, SLABFEED_ERR_STATE,
                                    "slabfeed: the reader is closed");
  }
  self->busy = 1;
  s = slabfeed_reader_crop(self->r, dataset, (slabfeed_file_layout)layout,
                           origin, crop, (int)sym, ngroups,
                           (const int(*)[3])groups, (slabfeed_dtype)dtype,
                           (slabfeed_out_layout)out_layout, dst);
  self->busy = 0;
  if (s != SLABFEED_OK) {
    Py_DECREF(out);
    return sfpy_raise(st, s, slabfeed_reader_error(self->r));
  }
  return out;
}

static PyObject *reader_close(sfpy_reader *self, PyObject *noargs)
{
  (void)noargs;
  if (self->busy)
    return sfpy_raise(sfpy_state_of(Py_TYPE(self)), SLABFEED_ERR_STATE,
                      "slabfeed: the reader is in use (crop)");
  slabfeed_reader_close(self->r);
  self->r = NULL;
  Py_RETURN_NONE;
}

static PyMethodDef reader_methods[] = {
    {"crop", (PyCFunction)(void (*)(void))reader_crop,
     METH_VARARGS | METH_KEYWORDS,
     "crop(dataset, origin, crop, *, symmetry=0, vectors=(), dtype='f32', "
     "out_layout='ncdhw', layout='auto') -> bytes\n\nOne sample read "
     "straight from the file with serial HDF5 and the reference transform "
     "(slabfeed_reader_crop)."},
    {"close", (PyCFunction)reader_close, METH_NOARGS,
     "close()\n\nCloses the file; idempotent."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot reader_slots[] = {
    {Py_tp_doc, "Reader(path)\n\nThe independent serial reference reader "
                "(slabfeed_reader_*); use slabfeed.tools.Reader."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, reader_init},
    {Py_tp_dealloc, reader_dealloc},
    {Py_tp_methods, reader_methods},
    {0, NULL},
};

PyType_Spec sfpy_reader_spec = {
    .name = "slabfeed._slabfeed.Reader",
    .basicsize = sizeof(sfpy_reader),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = reader_slots,
};
