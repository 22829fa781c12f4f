/*
 * The exception classes of slabfeed (py_errors.c): slabfeed.Error, one
 * subclass per status (also deriving from the matching built-in) and
 * StaleBatchError; the raising of a status; the kind of an exception as
 * the ranks agree on it before a collective call (Loader and Writer).
 */
#ifndef SFPY_ERRORS_H
#define SFPY_ERRORS_H

#include "py_state.h"

/* sfpy_errors_init - creates the exception classes into st and adds them
 * to module m. Returns 0, or -1 with an exception. */
int sfpy_errors_init(PyObject *m, sfpy_state *st);

/* sfpy_raise - sets the exception of status s (the slabfeed.Error
 * subclass, which also derives from the matching built-in; slabfeed.Error
 * itself for SLABFEED_OK or an unknown status) with `message` (NULL or "":
 * the status's text); returns NULL. */
PyObject *sfpy_raise(sfpy_state *st, slabfeed_status s, const char *message);

/* sfpy_raise_stale - sets slabfeed.StaleBatchError with `message`; returns
 * NULL. */
PyObject *sfpy_raise_stale(sfpy_state *st, const char *message);

/* An exception as the ranks agree on it before a collective call (Loader
 * and Writer): a slabfeed status, a TypeError, or anything else, and its
 * message. */
enum { AGREE_STATUS = 1, AGREE_TYPE = 2, AGREE_OTHER = 3 };
typedef struct {
  int kind;   /* AGREE_*: a slabfeed status, a TypeError, anything else */
  int status; /* AGREE_STATUS: the slabfeed_status */
  char msg[1024];
} agree_pkt;

/* sfpy_agree_classify - sets p->kind and p->status from the exception type
 * et (NULL: other): a slabfeed error by its status, ValueError as
 * SLABFEED_ERR_ARG, MemoryError as SLABFEED_ERR_NOMEM, TypeError as
 * itself; p->msg is left to the caller. */
void sfpy_agree_classify(sfpy_state *st, PyObject *et, agree_pkt *p);

#endif /* SFPY_ERRORS_H */
