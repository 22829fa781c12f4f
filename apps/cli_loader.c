/* The loader options of dump, check and bench, made from the library's
 * option table (slabfeed_option_at): the flags, kinds, ranges, defaults and
 * help all come from the one row of each option, and the values are parsed
 * by slabfeed_config_set, so an app cannot disagree with the library or
 * the Python module about an option. */
#include "cli.h"

#include <stdio.h>

/* Rows of the library's table; a new row needs no change here. */
enum { MAX_OPTIONS = 64, MAX_FLAG = 48 };

const cli_option *cli_loader_options(void)
{
  static cli_option table[MAX_OPTIONS + 1];
  static char names[MAX_OPTIONS][MAX_FLAG];
  if (table[0].name != NULL)
    return table;
  int n = 0;
  for (const slabfeed_option *o;
       n < MAX_OPTIONS && (o = slabfeed_option_at(n)) != NULL; n++) {
    snprintf(names[n], sizeof names[n], "--%s", o->flag);
    table[n] = (cli_option){
        .name = names[n],
        .kind = CLI_OPTION,
        .option = o,
        .metavar = o->kind == SLABFEED_OPTION_SWITCH ? NULL : o->metavar,
        .help = o->help,
        .flags = (o->flags & SLABFEED_OPTION_REQUIRED) ? CLI_REQUIRED : 0u};
  }
  table[n] = (cli_option){.name = NULL};
  return table;
}

/* The kind of a row as a reader of the docs would say it. */
static const char *kind_name(slabfeed_option_kind k)
{
  switch (k) {
  case SLABFEED_OPTION_STRING:
    return "string";
  case SLABFEED_OPTION_INT:
    return "integer";
  case SLABFEED_OPTION_UINT64:
    return "unsigned 64-bit";
  case SLABFEED_OPTION_SIZE:
    return "size (K/M/G/T)";
  case SLABFEED_OPTION_SWITCH:
    return "switch";
  case SLABFEED_OPTION_CHOICE:
    return "choice";
  case SLABFEED_OPTION_EDGE:
    return "edge C or Z,Y,X";
  case SLABFEED_OPTION_VECTORS:
    return "vector groups";
  case SLABFEED_OPTION_REGIONS:
    return "boxes";
  case SLABFEED_OPTION_NORMS:
    return "normalisations";
  }
  return "?";
}

/* The range column: what values the row accepts. */
static void range_text(const slabfeed_option *o, char *buf, size_t n)
{
  buf[0] = '\0';
  switch (o->kind) {
  case SLABFEED_OPTION_INT:
  case SLABFEED_OPTION_EDGE:
    snprintf(buf, n, "%lld..%lld%s%s", (long long)o->min, (long long)o->max,
             o->choices != NULL ? "; names: " : "",
             o->choices != NULL ? o->choices : "");
    break;
  case SLABFEED_OPTION_UINT64:
  case SLABFEED_OPTION_SIZE:
    if (o->max > 0)
      snprintf(buf, n, "%lld..%lld", (long long)o->min, (long long)o->max);
    else
      snprintf(buf, n, ">= %lld", (long long)o->min);
    break;
  case SLABFEED_OPTION_SWITCH:
    snprintf(buf, n, o->min < 0 ? "auto, 0, 1" : "0, 1");
    break;
  case SLABFEED_OPTION_CHOICE:
    snprintf(buf, n, "%s%s%s", o->choices, o->aliases ? "; also " : "",
             o->aliases ? o->aliases : "");
    break;
  case SLABFEED_OPTION_VECTORS:
    snprintf(buf, n, "up to %lld groups K0,K1,K2", (long long)o->max);
    break;
  case SLABFEED_OPTION_REGIONS:
    snprintf(buf, n, "up to %lld boxes Z,Y,X,DZ,DY,DX", (long long)o->max);
    break;
  case SLABFEED_OPTION_NORMS:
    snprintf(buf, n,
             "none, or one entry per channel (up to %lld): SHIFT,SCALE or "
             "log(A),SHIFT,SCALE",
             (long long)o->max);
    break;
  case SLABFEED_OPTION_STRING:
    snprintf(buf, n, "%s",
             (o->flags & SLABFEED_OPTION_REQUIRED) ? "required" : "");
    break;
  }
  /* A '|' would split the Markdown cell. */
  for (char *c = buf; *c != '\0'; c++)
    if (*c == '|')
      *c = '/';
}

void cli_print_option_table(FILE *f)
{
  fprintf(f, "| option | command line | kind | range | default | what it "
             "does |\n");
  fprintf(f, "| --- | --- | --- | --- | --- | --- |\n");
  const slabfeed_option *o;
  for (int i = 0; (o = slabfeed_option_at(i)) != NULL; i++) {
    char range[160];
    range_text(o, range, sizeof range);
    fprintf(f, "| `%s` | `--%s` | %s | %s | %s%s%s | %s |\n", o->name, o->flag,
            kind_name(o->kind), range, o->default_value[0] ? "`" : "",
            o->default_value, o->default_value[0] ? "`" : "", o->help);
  }
}
