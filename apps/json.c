/* The bench's JSON writer (see json.h). */
#include "json.h"

#include <math.h>

/* Starts an object (see json.h). */
void json_begin(json_writer *j, FILE *f)
{
  j->f = f;
  j->fields = 0;
  fputc('{', f);
}

/* Writes s as a JSON string: quotes, backslashes and control characters
 * escaped; other bytes (UTF-8 included) as they are. */
static void quoted(FILE *f, const char *s)
{
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
    switch (*p) {
    case '"':
      fputs("\\\"", f);
      break;
    case '\\':
      fputs("\\\\", f);
      break;
    case '\n':
      fputs("\\n", f);
      break;
    case '\r':
      fputs("\\r", f);
      break;
    case '\t':
      fputs("\\t", f);
      break;
    case '\b':
      fputs("\\b", f);
      break;
    case '\f':
      fputs("\\f", f);
      break;
    default:
      if (*p < 0x20)
        fprintf(f, "\\u%04x", *p);
      else
        fputc(*p, f);
    }
  }
  fputc('"', f);
}

/* The separator (a comma after the first field) and "key":. */
static void key(json_writer *j, const char *k)
{
  if (j->fields++ > 0)
    fputc(',', j->f);
  quoted(j->f, k);
  fputc(':', j->f);
}

/* A string field, escaped; NULL as null. */
void json_string(json_writer *j, const char *k, const char *value)
{
  key(j, k);
  if (value == NULL)
    fputs("null", j->f);
  else
    quoted(j->f, value);
}

/* A signed integer field. */
void json_int(json_writer *j, const char *k, long long value)
{
  key(j, k);
  fprintf(j->f, "%lld", value);
}

/* An unsigned 64-bit integer field. */
void json_u64(json_writer *j, const char *k, uint64_t value)
{
  key(j, k);
  fprintf(j->f, "%llu", (unsigned long long)value);
}

/* A fixed-decimals number field; non-finite values as null. */
void json_double(json_writer *j, const char *k, double value, int decimals)
{
  key(j, k);
  if (isfinite(value))
    fprintf(j->f, "%.*f", decimals, value);
  else
    fputs("null", j->f);
}

/* A true/false field. */
void json_bool(json_writer *j, const char *k, int value)
{
  key(j, k);
  fputs(value ? "true" : "false", j->f);
}

/* Ends the object and the line. */
void json_end(json_writer *j)
{
  fputs("}\n", j->f);
}
