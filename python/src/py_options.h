/*
 * The loader options (py_options.c), made from the library's option table
 * (slabfeed_option_at): every row is a keyword of Loader. A value goes to
 * the library as the text that slabfeed_config_set parses, and comes back
 * from slabfeed_config_get.
 */
#ifndef SFPY_OPTIONS_H
#define SFPY_OPTIONS_H

#include "py_state.h"

/* sfpy_options_init - makes slabfeed.Option and the tuple of the table's
 * rows (with their defaults as Python values) into st, and adds Option to
 * module m. Returns 0, or -1 with an exception. */
int sfpy_options_init(PyObject *m, sfpy_state *st);

/* sfpy_options_apply - sets the options given as keywords in `kw` (a dict
 * or NULL) on *cfg (initialised by the caller): each keyword is looked up
 * in the table (unknown: TypeError naming it, as Python does), converted
 * by its kind to text and stored with slabfeed_config_set; None leaves the
 * option at the library default. The objects that own the texts are
 * appended to the list `keep`: the strings *cfg points to live as long as
 * they do. With `require`, an option flagged SLABFEED_OPTION_REQUIRED that
 * was not given is a TypeError; `caller` names the call in messages.
 * Returns 0, or -1 with an exception naming the option (TypeError for a
 * value of the wrong type, ArgumentError with the library's message for a
 * bad value). */
int sfpy_options_apply(sfpy_state *st, PyObject *kw, slabfeed_config *cfg,
                       PyObject *keep, const char *caller, int require);

/* sfpy_options_values - every option's value in *cfg as a dict of Python
 * values, by name (what options() gives as defaults). NULL with an
 * exception. */
PyObject *sfpy_options_values(const slabfeed_config *cfg);

/* Module-level functions: options(), config_defaults(), resolve_options(). */
PyObject *sfpy_options_list(PyObject *module, PyObject *noargs);
PyObject *sfpy_config_defaults(PyObject *module, PyObject *noargs);
PyObject *sfpy_resolve_options(PyObject *module, PyObject *args, PyObject *kw);

#endif /* SFPY_OPTIONS_H */
