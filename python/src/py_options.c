/*
 * The loader options for Python, made from the library's option table
 * (slabfeed_option_at): the keywords of Loader, each converted by the kind
 * of its row to the text that slabfeed_config_set parses (which checks the
 * range and names the option), and back from slabfeed_config_get to
 * Python values (options(), config_defaults(), Loader.options). No option
 * is named here: a row added to the table is a keyword at once.
 *
 * Python values by kind (None is "not given": the library default):
 *   string   str, bytes or os.PathLike (PyUnicode_FSConverter); "" is none
 *   int      int (operator.index; bool refused)
 *   uint64   int (bool refused)
 *   size     int (bool refused) or str with a suffix: "200G"
 *   switch   bool, or an int 0/1 (-1 where the row allows auto), or the
 *            text ("on", "auto"...); back: True, False, None for auto
 *   choice   str: a name or alias of the row
 *   edge     int (all three axes) or a sequence of 3 ints (z, y, x);
 *            back: a tuple of 3
 *   vectors  a sequence of (k0, k1, k2) channel triples (or one flat
 *            triple); back: a tuple of tuples
 *   regions  a sequence of (z, y, x, dz, dy, dx) boxes; back: a tuple of
 *            tuples
 *   norms    the text form ("0,2;log(1),0.5,3"), or a sequence of one
 *            entry per channel, (shift, scale) or ("log", a, shift,
 *            scale), numbers int or float (each written as repr(float(v)),
 *            which the library reads back to the same double and rounds
 *            to float32); back: a tuple of such tuples of floats, each the
 *            float32 value exactly
 */
#include "py_options.h"

#include "py_errors.h"

#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {
    "string", "int",  "uint64",  "size",    "switch",
    "choice", "edge", "vectors", "regions", "norms"};

static const char *kind_name(slabfeed_option_kind k)
{
  return (unsigned)k < sizeof kind_names / sizeof kind_names[0] ? kind_names[k]
                                                                : "unknown";
}

/* ---- Python values to text ------------------------------------------------
 */

/* str(operator.index(o)) for an element of option `name`; a bool or a
 * non-integer is a TypeError saying what `name` takes (`takes`). */
static PyObject *int_text(PyObject *o, const char *name, const char *takes)
{
  if (PyBool_Check(o) || !PyIndex_Check(o)) {
    PyErr_Format(PyExc_TypeError, "slabfeed: %s must be %s, not %R", name,
                 takes, o);
    return NULL;
  }
  PyObject *i = PyNumber_Index(o);
  if (i == NULL)
    return NULL;
  PyObject *s = PyObject_Str(i);
  Py_DECREF(i);
  return s;
}

/* A sequence that is not text. */
static int is_sequence(PyObject *o)
{
  return !PyUnicode_Check(o) && !PyBytes_Check(o) && !PyByteArray_Check(o) &&
         PySequence_Check(o);
}

/* The int texts of the items of sequence o joined by `sep`. */
static PyObject *join_ints(PyObject *o, const char *sep, const char *name,
                           const char *takes)
{
  PyObject *t = PySequence_Tuple(o);
  if (t == NULL)
    return NULL;
  const Py_ssize_t n = PyTuple_Size(t);
  PyObject *parts = PyList_New(0), *out = NULL;
  if (parts == NULL)
    goto done;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *s = int_text(PyTuple_GetItem(t, i), name, takes);
    if (s == NULL || PyList_Append(parts, s) < 0) {
      Py_XDECREF(s);
      goto done;
    }
    Py_DECREF(s);
  }
  PyObject *sep_o = PyUnicode_FromString(sep);
  if (sep_o != NULL)
    out = PyUnicode_Join(sep_o, parts);
  Py_XDECREF(sep_o);
done:
  Py_XDECREF(parts);
  Py_DECREF(t);
  return out;
}

/* VECTORS and REGIONS: "a,b,c;d,e,f" from a sequence of int sequences (or
 * one flat int sequence for a single group), "" from an empty sequence.
 * Lengths and ranges are the library's to check. */
static PyObject *groups_text(PyObject *o, const char *name, const char *takes)
{
  if (!is_sequence(o)) {
    PyErr_Format(PyExc_TypeError, "slabfeed: %s must be %s, not %R", name,
                 takes, o);
    return NULL;
  }
  PyObject *t = PySequence_Tuple(o);
  if (t == NULL)
    return NULL;
  const Py_ssize_t n = PyTuple_Size(t);
  if (n > 0 && PyIndex_Check(PyTuple_GetItem(t, 0))) { /* one flat triple */
    PyObject *s = join_ints(t, ",", name, takes);
    Py_DECREF(t);
    return s;
  }
  PyObject *parts = PyList_New(0), *out = NULL;
  if (parts == NULL)
    goto done;
  for (Py_ssize_t g = 0; g < n; g++) {
    PyObject *grp = PyTuple_GetItem(t, g);
    if (!is_sequence(grp)) {
      PyErr_Format(PyExc_TypeError, "slabfeed: %s must be %s, not %R", name,
                   takes, o);
      goto done;
    }
    PyObject *s = join_ints(grp, ",", name, takes);
    if (s == NULL || PyList_Append(parts, s) < 0) {
      Py_XDECREF(s);
      goto done;
    }
    Py_DECREF(s);
  }
  PyObject *sep = PyUnicode_FromString(";");
  if (sep != NULL)
    out = PyUnicode_Join(sep, parts);
  Py_XDECREF(sep);
done:
  Py_XDECREF(parts);
  Py_DECREF(t);
  return out;
}

/* A number of a normalisation entry as text: repr(float(o)), which
 * strtod reads back to the same double; a bool, text or a non-number is
 * a TypeError saying what `name` takes. */
static PyObject *float_text(PyObject *o, const char *name, const char *takes)
{
  if (PyBool_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o) ||
      !PyNumber_Check(o)) {
    PyErr_Format(PyExc_TypeError, "slabfeed: %s must be %s, not %R", name,
                 takes, o);
    return NULL;
  }
  PyObject *f = PyNumber_Float(o);
  if (f == NULL) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "slabfeed: %s must be %s, not %R", name,
                   takes, o);
    }
    return NULL;
  }
  PyObject *r = PyObject_Repr(f);
  Py_DECREF(f);
  return r;
}

/* NORMS: the text form from a sequence of entries, (shift, scale) or
 * ("log", a, shift, scale), joined by ";" (a str is the text form
 * itself). An entry of another length becomes the text of its numbers,
 * for the library to refuse naming the option. */
static PyObject *norms_text(sfpy_state *st, PyObject *o, const char *name)
{
  static const char takes[] =
      "a str or a sequence of (shift, scale) or ('log', a, shift, scale) "
      "entries, one per channel";
  if (PyUnicode_Check(o))
    return Py_NewRef(o);
  if (!is_sequence(o)) {
    PyErr_Format(PyExc_TypeError, "slabfeed: %s must be %s, not %R", name,
                 takes, o);
    return NULL;
  }
  PyObject *t = PySequence_Tuple(o);
  if (t == NULL)
    return NULL;
  PyObject *entries = PyList_New(0), *out = NULL;
  if (entries == NULL)
    goto done;
  for (Py_ssize_t i = 0; i < PyTuple_Size(t); i++) {
    PyObject *item = PyTuple_GetItem(t, i);
    if (!is_sequence(item)) {
      PyErr_Format(PyExc_TypeError, "slabfeed: %s must be %s, not %R", name,
                   takes, o);
      goto done;
    }
    PyObject *ent = PySequence_Tuple(item);
    if (ent == NULL)
      goto done;
    const Py_ssize_t n = PyTuple_Size(ent);
    if (n == 0) { /* would read as "" (none): refused here */
      char m[256];
      snprintf(m, sizeof m,
               "%s: entry %zd is empty; give (shift, scale) or ('log', a, "
               "shift, scale)",
               name, i);
      sfpy_raise(st, SLABFEED_ERR_ARG, m);
      Py_DECREF(ent);
      goto done;
    }
    PyObject *first = PyTuple_GetItem(ent, 0);
    int is_log = 0;
    if (first != NULL && PyUnicode_Check(first)) {
      const char *w = PyUnicode_AsUTF8AndSize(first, NULL);
      is_log = w != NULL && strcmp(w, "log") == 0;
      if (!is_log) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "slabfeed: %s must be %s, not %R (an entry starts with "
                     "a number or 'log')",
                     name, takes, o);
        Py_DECREF(ent);
        goto done;
      }
    }
    PyObject *parts = PyList_New(0);
    int bad = parts == NULL;
    for (Py_ssize_t k = is_log; k < n && !bad; k++) {
      PyObject *v = float_text(PyTuple_GetItem(ent, k), name, takes);
      if (v != NULL && k == 1 && is_log) { /* "log(A)" */
        PyObject *w = PyUnicode_FromFormat("log(%U)", v);
        Py_DECREF(v);
        v = w;
      }
      bad = v == NULL || PyList_Append(parts, v) < 0;
      Py_XDECREF(v);
    }
    Py_DECREF(ent);
    PyObject *comma = bad ? NULL : PyUnicode_FromString(",");
    PyObject *joined = comma != NULL ? PyUnicode_Join(comma, parts) : NULL;
    Py_XDECREF(comma);
    Py_XDECREF(parts);
    if (joined == NULL || PyList_Append(entries, joined) < 0) {
      Py_XDECREF(joined);
      goto done;
    }
    Py_DECREF(joined);
  }
  PyObject *sep = PyUnicode_FromString(";");
  if (sep != NULL)
    out = PyUnicode_Join(sep, entries);
  Py_XDECREF(sep);
done:
  Py_XDECREF(entries);
  Py_DECREF(t);
  return out;
}

/* A list or tuple given for a string option: for path, the volumes of a
 * dataset (each a path, a pattern or "@manifest"), one per line; for
 * params, input and target, the names (fields) joined with commas; for
 * volume_weights and
 * holdout_volumes, the numbers joined with commas. A new bytes object, or
 * NULL with an exception. */
static PyObject *list_text(const slabfeed_option *opt, PyObject *o)
{
  const int paths = strcmp(opt->name, "path") == 0;
  const int names = strcmp(opt->name, "params") == 0 ||
                    strcmp(opt->name, "input") == 0 ||
                    strcmp(opt->name, "target") == 0;
  const Py_ssize_t n = PySequence_Size(o);
  if (n == 0) {
    PyErr_Format(PyExc_ValueError, "slabfeed: %s is an empty list", opt->name);
    return NULL;
  }
  PyObject *parts = PyList_New(n);
  if (parts == NULL)
    return NULL;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *x = PySequence_GetItem(o, i), *b = NULL;
    if (x == NULL) {
      Py_DECREF(parts);
      return NULL;
    }
    if (paths) {
      if (!PyUnicode_FSConverter(x, &b))
        b = NULL;
    } else if (names) {
      if (!PyUnicode_Check(x))
        PyErr_Format(PyExc_TypeError,
                     "slabfeed: %s entries must be names (str), not %R",
                     opt->name, x);
      else
        b = PyUnicode_AsUTF8String(x);
    } else if (!PyLong_Check(x) && !PyFloat_Check(x)) {
      PyErr_Format(PyExc_TypeError,
                   "slabfeed: %s entries must be numbers, not %R", opt->name,
                   x);
    } else {
      PyObject *t = PyObject_Str(x);
      b = t != NULL ? PyUnicode_AsUTF8String(t) : NULL;
      Py_XDECREF(t);
    }
    Py_DECREF(x);
    if (b == NULL || PyList_SetItem(parts, i, b) < 0) {
      Py_DECREF(parts);
      return NULL;
    }
  }
  PyObject *sep = PyBytes_FromString(paths ? "\n" : ",");
  PyObject *out =
      sep != NULL ? PyObject_CallMethod(sep, "join", "O", parts) : NULL;
  Py_XDECREF(sep);
  Py_DECREF(parts);
  return out;
}

/* The text form of value o (not None) of option `opt`, as a new str or
 * bytes object; NULL with an exception naming the option. */
static PyObject *to_text(sfpy_state *st, const slabfeed_option *opt,
                         PyObject *o)
{
  const char *name = opt->name;
  switch (opt->kind) {
  case SLABFEED_OPTION_STRING: {
    PyObject *b = NULL;
    if (PyList_Check(o) || PyTuple_Check(o))
      return list_text(opt, o);
    /* One number for the deviations of the augmentation (every
     * channel). */
    if ((PyLong_Check(o) || PyFloat_Check(o)) && !PyBool_Check(o) &&
        (strncmp(name, "aug_", 4) == 0 ||
         strncmp(name, "target_aug_", 11) == 0)) {
      PyObject *t = PyObject_Str(o);
      b = t != NULL ? PyUnicode_AsUTF8String(t) : NULL;
      Py_XDECREF(t);
      return b;
    }
    if (PyUnicode_FSConverter(o, &b))
      return b;
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "slabfeed: %s must be a str, bytes or os.PathLike, not %R",
                   name, o);
    } else if (PyErr_ExceptionMatches(PyExc_ValueError)) {
      PyErr_Clear();
      char m[256];
      snprintf(m, sizeof m,
               "%s: the value has an embedded null character or cannot be "
               "encoded",
               name);
      sfpy_raise(st, SLABFEED_ERR_ARG, m);
    }
    return NULL;
  }
  case SLABFEED_OPTION_INT:
    /* Rows with named values (device "local") take the name too. */
    if (opt->choices != NULL && PyUnicode_Check(o))
      return Py_NewRef(o);
    return int_text(o, name, "an integer");
  case SLABFEED_OPTION_UINT64:
    return int_text(o, name, "an integer");
  case SLABFEED_OPTION_SIZE:
    if (PyUnicode_Check(o))
      return Py_NewRef(o);
    return int_text(o, name, "an integer (bytes) or a str such as '200G'");
  case SLABFEED_OPTION_SWITCH:
    if (PyBool_Check(o))
      return PyUnicode_FromString(o == Py_True ? "1" : "0");
    if (PyUnicode_Check(o))
      return Py_NewRef(o);
    if (PyIndex_Check(o)) {
      PyObject *i = PyNumber_Index(o);
      if (i == NULL)
        return NULL;
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
      if (v == -1 && !overflow && PyErr_Occurred()) {
        Py_DECREF(i);
        return NULL;
      }
      PyObject *s = (v == -1 && !overflow && opt->min == -1)
                        ? PyUnicode_FromString("auto")
                        : PyObject_Str(i);
      Py_DECREF(i);
      return s;
    }
    PyErr_Format(PyExc_TypeError, "slabfeed: %s must be a bool%s, not %R", name,
                 opt->min == -1 ? " or None (auto)" : "", o);
    return NULL;
  case SLABFEED_OPTION_CHOICE:
    if (PyUnicode_Check(o))
      return Py_NewRef(o);
    PyErr_Format(PyExc_TypeError, "slabfeed: %s must be a str (%s), not %R",
                 name, opt->choices, o);
    return NULL;
  case SLABFEED_OPTION_EDGE: {
    static const char takes[] = "an int or a sequence of 3 ints (z, y, x)";
    if (is_sequence(o))
      return join_ints(o, ",", name, takes);
    return int_text(o, name, takes);
  }
  case SLABFEED_OPTION_VECTORS:
    return groups_text(
        o, name,
        "a sequence of (k0, k1, k2) channel triples, e.g. [(1, 2, 3)]");
  case SLABFEED_OPTION_REGIONS:
    return groups_text(o, name,
                       "a sequence of (z, y, x, dz, dy, dx) boxes, e.g. "
                       "[(56, 0, 0, 8, 0, 0)]");
  case SLABFEED_OPTION_NORMS:
    return norms_text(st, o, name);
  }
  PyErr_Format(PyExc_SystemError, "slabfeed: option %s has an unknown kind",
               name);
  return NULL;
}

/* The UTF-8 text of str or bytes object t, NUL-terminated and owned by t;
 * NULL with ArgumentError naming the option. */
static const char *text_of(sfpy_state *st, const char *name, PyObject *t)
{
  Py_ssize_t len = 0;
  const char *s = NULL;
  if (PyBytes_Check(t)) {
    s = PyBytes_AsString(t);
    len = PyBytes_Size(t);
  } else {
    s = PyUnicode_AsUTF8AndSize(t, &len);
  }
  if (s == NULL || (size_t)len != strlen(s)) {
    PyErr_Clear();
    char m[256];
    snprintf(m, sizeof m,
             "%s: the value has an embedded null character or is not valid "
             "text",
             name);
    sfpy_raise(st, SLABFEED_ERR_ARG, m);
    return NULL;
  }
  return s;
}

/* The row of keyword k, or NULL with the TypeError Python gives for an
 * unexpected keyword (a row's flag, "file" for "path", is not a keyword). */
static const slabfeed_option *row_of(PyObject *k, const char *caller, int *at)
{
  const char *name =
      PyUnicode_Check(k) ? PyUnicode_AsUTF8AndSize(k, NULL) : NULL;
  if (name == NULL) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s() keywords must be strings", caller);
    return NULL;
  }
  for (int i = 0; slabfeed_option_at(i) != NULL; i++)
    if (strcmp(slabfeed_option_at(i)->name, name) == 0) {
      *at = i;
      return slabfeed_option_at(i);
    }
  const slabfeed_option *o = slabfeed_option_find(name);
  if (o != NULL)
    PyErr_Format(PyExc_TypeError,
                 "%s() got an unexpected keyword argument '%s' (the option "
                 "is '%s')",
                 caller, name, o->name);
  else
    PyErr_Format(PyExc_TypeError,
                 "%s() got an unexpected keyword argument '%s'", caller, name);
  return NULL;
}

#define SFPY_MAX_OPTIONS 64 /* rows of the table, checked at init */

int sfpy_options_apply(sfpy_state *st, PyObject *kw, slabfeed_config *cfg,
                       PyObject *keep, const char *caller, int require)
{
  char given[SFPY_MAX_OPTIONS] = {0};
  if (kw != NULL) {
    /* A copy of the items: converting a value may run Python code. */
    PyObject *items = PyDict_Items(kw);
    if (items == NULL)
      return -1;
    const Py_ssize_t n = PyList_Size(items);
    for (Py_ssize_t i = 0; i < n; i++) {
      PyObject *kv = PyList_GetItem(items, i);
      PyObject *v = PyTuple_GetItem(kv, 1);
      int at = 0;
      const slabfeed_option *opt = row_of(PyTuple_GetItem(kv, 0), caller, &at);
      if (opt == NULL) {
        Py_DECREF(items);
        return -1;
      }
      if (v == Py_None)
        continue; /* not given: the library default */
      PyObject *t = to_text(st, opt, v);
      const char *text = t != NULL ? text_of(st, opt->name, t) : NULL;
      if (text == NULL || PyList_Append(keep, t) < 0) {
        Py_XDECREF(t);
        Py_DECREF(items);
        return -1;
      }
      Py_DECREF(t); /* kept alive by `keep` */
      char err[1024] = "";
      slabfeed_status s = SLABFEED_OK;
      /* Groups are appended: a value replaces what is there. */
      if (opt->kind == SLABFEED_OPTION_VECTORS ||
          opt->kind == SLABFEED_OPTION_REGIONS)
        s = slabfeed_config_set(cfg, opt->name, "", err, sizeof err);
      if (s == SLABFEED_OK)
        s = slabfeed_config_set(cfg, opt->name, text, err, sizeof err);
      if (s != SLABFEED_OK) {
        sfpy_raise(st, s, err);
        Py_DECREF(items);
        return -1;
      }
      given[at] = 1;
    }
    Py_DECREF(items);
  }
  if (!require)
    return 0;
  char missing[1024] = "";
  int nmissing = 0;
  for (int i = 0; slabfeed_option_at(i) != NULL; i++) {
    const slabfeed_option *o = slabfeed_option_at(i);
    if ((o->flags & SLABFEED_OPTION_REQUIRED) && !given[i]) {
      const size_t used = strlen(missing);
      snprintf(missing + used, sizeof missing - used, "%s'%s' (%s)",
               nmissing ? ", " : "", o->name, o->help);
      nmissing++;
    }
  }
  if (nmissing > 0) {
    PyErr_Format(PyExc_TypeError,
                 "%s() missing required keyword argument%s: %s", caller,
                 nmissing > 1 ? "s" : "", missing);
    return -1;
  }
  return 0;
}

/* ---- Text to Python values ------------------------------------------------
 */

/* The ints of "a,b,c" (n bytes of s) as a tuple. */
static PyObject *ints_of(const char *s, size_t n)
{
  PyObject *parts = PyList_New(0);
  if (parts == NULL)
    return NULL;
  char piece[32];
  for (size_t i = 0; i < n;) {
    size_t len = 0;
    while (i + len < n && s[i + len] != ',')
      len++;
    if (len >= sizeof piece)
      len = sizeof piece - 1;
    memcpy(piece, s + i, len);
    piece[len] = '\0';
    PyObject *v = PyLong_FromString(piece, NULL, 10);
    if (v == NULL || PyList_Append(parts, v) < 0) {
      Py_XDECREF(v);
      Py_DECREF(parts);
      return NULL;
    }
    Py_DECREF(v);
    i += len + 1;
  }
  PyObject *t = PyList_AsTuple(parts);
  Py_DECREF(parts);
  return t;
}

/* The float32 value of the number at s (slabfeed_config_get's %.9g) as a
 * Python float, exactly; *end past it. Python's own parser: the program's
 * LC_NUMERIC does not matter. */
static PyObject *float32_of(const char *s, const char **end)
{
  char *e = NULL;
  const double d = PyOS_string_to_double(s, &e, NULL);
  if (d == -1.0 && PyErr_Occurred())
    return NULL;
  *end = e;
  return PyFloat_FromDouble((double)(float)d);
}

/* NORMS from slabfeed_config_get's text: a tuple of (shift, scale) and
 * ("log", a, shift, scale) tuples. */
static PyObject *norms_of(const char *s)
{
  PyObject *list = PyList_New(0);
  if (list == NULL)
    return NULL;
  for (const char *p = s; *p != '\0';) {
    const char *start = p;
    PyObject *v[4] = {NULL, NULL, NULL, NULL};
    int n = 0, bad = 0;
    if (strncmp(p, "log(", 4) == 0) {
      v[n++] = PyUnicode_FromString("log");
      v[n++] = float32_of(p + 4, &p);
      p += *p == ')';
      p += *p == ',';
    }
    v[n++] = float32_of(p, &p);
    p += *p == ',';
    v[n++] = float32_of(p, &p);
    p += *p == ';';
    PyObject *t = PyTuple_New(n);
    for (int k = 0; k < n; k++) {
      if (v[k] == NULL || t == NULL) {
        bad = 1;
        Py_XDECREF(v[k]);
      } else {
        PyTuple_SetItem(t, k, v[k]); /* steals */
      }
    }
    if (bad || PyList_Append(list, t) < 0) {
      Py_XDECREF(t);
      Py_DECREF(list);
      return NULL;
    }
    Py_DECREF(t);
    if (p == start) /* not the library's text: stop rather than loop */
      break;
  }
  PyObject *out = PyList_AsTuple(list);
  Py_DECREF(list);
  return out;
}

/* The Python value of option `opt` from its text (slabfeed_config_get's). */
static PyObject *from_text(const slabfeed_option *opt, const char *s)
{
  switch (opt->kind) {
  case SLABFEED_OPTION_STRING:
    if (s[0] == '\0')
      Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(s);
  case SLABFEED_OPTION_INT:
    if (opt->choices != NULL && (s[0] < '0' || s[0] > '9') && s[0] != '-')
      return PyUnicode_FromString(s); /* a named value */
    return PyLong_FromString(s, NULL, 10);
  case SLABFEED_OPTION_UINT64:
  case SLABFEED_OPTION_SIZE:
    return PyLong_FromString(s, NULL, 10);
  case SLABFEED_OPTION_SWITCH:
    if (strcmp(s, "auto") == 0)
      Py_RETURN_NONE;
    return PyBool_FromLong(strcmp(s, "0") != 0);
  case SLABFEED_OPTION_CHOICE:
    return PyUnicode_FromString(s);
  case SLABFEED_OPTION_EDGE: {
    PyObject *t = ints_of(s, strlen(s));
    if (t != NULL && PyTuple_Size(t) == 1) { /* one edge: a cube */
      PyObject *c = PyTuple_GetItem(t, 0);
      PyObject *cube = PyTuple_Pack(3, c, c, c);
      Py_DECREF(t);
      return cube;
    }
    return t;
  }
  case SLABFEED_OPTION_VECTORS:
  case SLABFEED_OPTION_REGIONS: {
    PyObject *groups = PyList_New(0);
    if (groups == NULL)
      return NULL;
    for (const char *p = s; *p != '\0';) {
      const size_t len = strcspn(p, ";");
      PyObject *g = ints_of(p, len);
      if (g == NULL || PyList_Append(groups, g) < 0) {
        Py_XDECREF(g);
        Py_DECREF(groups);
        return NULL;
      }
      Py_DECREF(g);
      p += len;
      if (*p == ';')
        p++;
    }
    PyObject *t = PyList_AsTuple(groups);
    Py_DECREF(groups);
    return t;
  }
  case SLABFEED_OPTION_NORMS:
    return norms_of(s);
  }
  PyErr_Format(PyExc_SystemError, "slabfeed: option %s has an unknown kind",
               opt->name);
  return NULL;
}

/* The value of option `opt` in *cfg as a Python value. */
static PyObject *value_of(const slabfeed_config *cfg,
                          const slabfeed_option *opt)
{
  char small[256];
  char *buf = small;
  size_t len = sizeof small;
  slabfeed_status s;
  while ((s = slabfeed_config_get(cfg, opt->name, buf, len)) ==
             SLABFEED_ERR_NOMEM &&
         len < ((size_t)1 << 24)) {
    if (buf != small)
      PyMem_Free(buf);
    len *= 4;
    if ((buf = PyMem_Malloc(len)) == NULL)
      return PyErr_NoMemory();
  }
  PyObject *v = s == SLABFEED_OK ? from_text(opt, buf) : NULL;
  if (s != SLABFEED_OK)
    PyErr_Format(PyExc_SystemError,
                 "slabfeed: slabfeed_config_get(%s) failed: %s", opt->name,
                 slabfeed_status_name(s));
  if (buf != small)
    PyMem_Free(buf);
  return v;
}

PyObject *sfpy_options_values(const slabfeed_config *cfg)
{
  PyObject *d = PyDict_New();
  if (d == NULL)
    return NULL;
  for (int i = 0; slabfeed_option_at(i) != NULL; i++) {
    const slabfeed_option *o = slabfeed_option_at(i);
    PyObject *v = value_of(cfg, o);
    if (v == NULL || PyDict_SetItemString(d, o->name, v) < 0) {
      Py_XDECREF(v);
      Py_DECREF(d);
      return NULL;
    }
    Py_DECREF(v);
  }
  return d;
}

/* ---- The table: slabfeed.Option -------------------------------------------
 */

static PyStructSequence_Field option_fields[] = {
    {"name", "the field of slabfeed_config and the keyword of Loader"},
    {"flag", "the command-line flag of the tools, without '--'"},
    {"kind", "how the value is written: string, int, uint64, size, switch, "
             "choice, edge, vectors, regions or norms"},
    {"min", "the smallest number (of each edge; of a switch, -1 allows "
            "auto), or None"},
    {"max", "the largest number (of each edge; the number of vector "
            "groups), or None where unbounded"},
    {"choices", "a choice's names (tuple), or None"},
    {"aliases", "a choice's other names, in the same order, or None"},
    {"default", "the default as a Python value (what Loader.options holds "
                "when the keyword is not given)"},
    {"metavar", "the value in a usage line"},
    {"help", "one line of help"},
    {"required", "True when slabfeed_open refuses the option unset"},
    {NULL, NULL},
};

static PyStructSequence_Desc option_desc = {
    "slabfeed.Option",
    "Option: one row of the library's option table (slabfeed_option_at): "
    "name, flag, kind, min, max, choices, aliases, default, metavar, help, "
    "required.",
    option_fields,
    11,
};

/* A tuple of the names of a '|'-separated list, or None for NULL. */
static PyObject *names_of(const char *list)
{
  if (list == NULL)
    Py_RETURN_NONE;
  PyObject *l = PyList_New(0);
  if (l == NULL)
    return NULL;
  for (const char *p = list;;) {
    const size_t len = strcspn(p, "|");
    PyObject *s = PyUnicode_FromStringAndSize(p, (Py_ssize_t)len);
    if (s == NULL || PyList_Append(l, s) < 0) {
      Py_XDECREF(s);
      Py_DECREF(l);
      return NULL;
    }
    Py_DECREF(s);
    p += len;
    if (*p == '\0')
      break;
    p++;
  }
  PyObject *t = PyList_AsTuple(l);
  Py_DECREF(l);
  return t;
}

/* min and max as Python: None where the kind has no range (string,
 * choice) and for an unbounded maximum (uint64 and size: max 0). */
static PyObject *bound_of(const slabfeed_option *o, int is_max)
{
  if (o->kind == SLABFEED_OPTION_STRING || o->kind == SLABFEED_OPTION_CHOICE)
    Py_RETURN_NONE;
  if (is_max && o->max == 0 &&
      (o->kind == SLABFEED_OPTION_UINT64 || o->kind == SLABFEED_OPTION_SIZE))
    Py_RETURN_NONE;
  return PyLong_FromLongLong((long long)(is_max ? o->max : o->min));
}

static PyObject *option_row(sfpy_state *st, const slabfeed_option *o,
                            const slabfeed_config *defaults)
{
  PyObject *r = PyStructSequence_New(st->option_type);
  if (r == NULL)
    return NULL;
  PyObject *v[11] = {
      PyUnicode_FromString(o->name),
      PyUnicode_FromString(o->flag),
      PyUnicode_FromString(kind_name(o->kind)),
      bound_of(o, 0),
      bound_of(o, 1),
      names_of(o->choices),
      names_of(o->aliases),
      value_of(defaults, o),
      PyUnicode_FromString(o->metavar != NULL ? o->metavar : ""),
      PyUnicode_FromString(o->help != NULL ? o->help : ""),
      PyBool_FromLong((o->flags & SLABFEED_OPTION_REQUIRED) != 0),
  };
  int bad = 0;
  for (int i = 0; i < 11; i++) {
    if (v[i] == NULL)
      bad = 1;
    else
      PyStructSequence_SetItem(r, i, v[i]); /* steals */
  }
  if (bad) {
    /* Unset items must not stay NULL in the tuple: fill, then drop it. */
    for (int i = 0; i < 11; i++)
      if (v[i] == NULL)
        PyStructSequence_SetItem(r, i, Py_NewRef(Py_None));
    Py_DECREF(r);
    return NULL;
  }
  return r;
}

int sfpy_options_init(PyObject *m, sfpy_state *st)
{
  int n = 0;
  while (slabfeed_option_at(n) != NULL)
    n++;
  if (n > SFPY_MAX_OPTIONS) {
    PyErr_Format(PyExc_SystemError,
                 "slabfeed: the option table has %d rows; the extension "
                 "handles %d",
                 n, SFPY_MAX_OPTIONS);
    return -1;
  }
  st->option_type = PyStructSequence_NewType(&option_desc);
  if (st->option_type == NULL ||
      PyModule_AddObjectRef(m, "Option", (PyObject *)st->option_type) < 0)
    return -1;
  slabfeed_config c;
  slabfeed_config_init(&c);
  PyObject *t = PyTuple_New(n);
  if (t == NULL)
    return -1;
  for (int i = 0; i < n; i++) {
    PyObject *r = option_row(st, slabfeed_option_at(i), &c);
    if (r == NULL || PyTuple_SetItem(t, i, r) < 0) {
      Py_DECREF(t);
      return -1;
    }
  }
  st->options = t;
  return 0;
}

/* ---- Module functions ------------------------------------------------------
 */

PyObject *sfpy_options_list(PyObject *module, PyObject *noargs)
{
  (void)noargs;
  sfpy_state *st = PyModule_GetState(module);
  return Py_NewRef(st->options);
}

PyObject *sfpy_config_defaults(PyObject *module, PyObject *noargs)
{
  (void)noargs;
  sfpy_state *st = PyModule_GetState(module);
  PyObject *d = PyDict_New();
  if (d == NULL)
    return NULL;
  const Py_ssize_t n = PyTuple_Size(st->options);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *r = PyTuple_GetItem(st->options, i);
    if (PyDict_SetItem(d, PyStructSequence_GetItem(r, 0),
                       PyStructSequence_GetItem(r, 7)) < 0) {
      Py_DECREF(d);
      return NULL;
    }
  }
  return d;
}

PyObject *sfpy_resolve_options(PyObject *module, PyObject *args, PyObject *kw)
{
  sfpy_state *st = PyModule_GetState(module);
  if (PyTuple_Size(args) != 0) {
    PyErr_SetString(PyExc_TypeError,
                    "resolve_options() takes keyword arguments only");
    return NULL;
  }
  PyObject *keep = PyList_New(0);
  if (keep == NULL)
    return NULL;
  slabfeed_config c;
  slabfeed_config_init(&c);
  PyObject *d = NULL;
  if (sfpy_options_apply(st, kw, &c, keep, "resolve_options", 0) == 0)
    d = sfpy_options_values(&c);
  Py_DECREF(keep);
  return d;
}
