/* The option table: one row per field of slabfeed_config (name, kind,
 * range, default, help; slabfeed.h has the public part of a row) plus where
 * the field lies in the struct. Defaults, range checks, the text form of
 * every value and the lookups by name are all made from it; config.c adds
 * only the checks that involve several options. */
#ifndef SF_OPTIONS_H
#define SF_OPTIONS_H

#include "common/errors.h"

/* A row: the public description and the field it writes. */
typedef struct sf__option {
  slabfeed_option pub;
  size_t at;       /* offsetof the field in slabfeed_config */
  size_t width;    /* bytes of the field (all of it must be in cfg->size) */
  size_t count_at; /* VECTORS: offsetof the group count */
} sf__option;

/* The rows, in the order of slabfeed_config; sf__option_count of them. */
extern const sf__option sf__options[];
extern const int sf__option_count;

/* Stores the option's default into *cfg (a full struct of this library). */
void sf__option_default(const sf__option *o, slabfeed_config *cfg);

/* Checks the value *cfg holds for option o against the row's range (the
 * check slabfeed_config_set makes on text, made on a struct the caller
 * filled by hand). */
slabfeed_status sf__option_check(const sf__option *o,
                                 const slabfeed_config *cfg, sf__err *e);

#endif
