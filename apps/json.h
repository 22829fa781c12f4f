/* A small streaming JSON writer for one flat object per line (the bench's
 * "JSON {...}" lines): keys and strings are escaped, commas go between
 * fields only, and numbers keep a fixed number of decimals so that the
 * output stays byte-for-byte stable for plots and diffs. */
#ifndef SF_APPS_JSON_H
#define SF_APPS_JSON_H

#include <stdint.h>
#include <stdio.h>

typedef struct json_writer {
  FILE *f;
  int fields; /* fields written since json_begin */
} json_writer;

/* Starts an object on f: writes "{". */
void json_begin(json_writer *j, FILE *f);
/* "key":"value" (NULL value: null). */
void json_string(json_writer *j, const char *key, const char *value);
/* "key":value for integers. */
void json_int(json_writer *j, const char *key, long long value);
void json_u64(json_writer *j, const char *key, uint64_t value);
/* "key":value with `decimals` digits after the point (printf "%.*f"); NaN
 * and infinities, which JSON cannot hold, are written as null. */
void json_double(json_writer *j, const char *key, double value, int decimals);
/* "key":true or "key":false. */
void json_bool(json_writer *j, const char *key, int value);
/* Ends the object: writes "}" and a newline. */
void json_end(json_writer *j);

#endif
