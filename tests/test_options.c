/* unit.options: the option table is the one description of every loader
 * option, and each consumer in C agrees with it:
 *  - slabfeed_config_init's defaults are the rows' default texts;
 *  - slabfeed_config_set takes every value a row allows and refuses the
 *    values just outside its range, naming the option; get/set round-trip;
 *  - slabfeed_open refuses the same out-of-range values written straight
 *    into the struct (validation is made from the table);
 *  - the command-line parser of the apps (cli_loader_options) has one flag
 *    per row and stores what slabfeed_config_set stores;
 *  - a field past the caller's struct size is refused, not written.
 * The Python module and docs/OPTIONS.md have their own tests against the
 * same table (python/tests/test_options.py, docs.options). */
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cli.h"
#include "slabfeed.h"

static slabfeed_config defaults(void)
{
  slabfeed_config c;
  slabfeed_config_init(&c);
  return c;
}

/* A value of row o other than its default, valid for the row. */
static const char *other_value(const slabfeed_option *o, char *buf, size_t n)
{
  switch (o->kind) {
  case SLABFEED_OPTION_STRING:
    return "some_name";
  case SLABFEED_OPTION_INT:
    snprintf(buf, n, "%lld", (long long)o->max);
    if (strcmp(buf, o->default_value) == 0)
      snprintf(buf, n, "%lld", (long long)o->min);
    return buf;
  case SLABFEED_OPTION_UINT64:
    return "7";
  case SLABFEED_OPTION_SIZE:
    return "3K";
  case SLABFEED_OPTION_SWITCH:
    return strcmp(o->default_value, "1") == 0 ? "0" : "1";
  case SLABFEED_OPTION_CHOICE: {
    const char *last = strrchr(o->choices, '|');
    return last != NULL ? last + 1 : o->choices;
  }
  case SLABFEED_OPTION_EDGE:
    return "3,4,5";
  case SLABFEED_OPTION_VECTORS:
    return "0,1,2";
  case SLABFEED_OPTION_REGIONS:
    return "56,0,0,8,0,0";
  case SLABFEED_OPTION_NORMS:
    return "1.5,2;log(1),-0.25,3";
  }
  return "";
}

static void check_defaults_and_round_trip(const slabfeed_option *o)
{
  slabfeed_config init = defaults(), c = defaults();
  char err[256], got[256], buf[64];
  CHECK(slabfeed_config_set(&c, o->name, o->default_value, err, sizeof err) ==
            SLABFEED_OK,
        "%s: its default '%s' is refused: %s", o->name, o->default_value, err);
  CHECK(memcmp(&c, &init, sizeof c) == 0,
        "%s: setting the default '%s' changes an init'd config", o->name,
        o->default_value);
  CHECK(slabfeed_config_get(&init, o->name, got, sizeof got) == SLABFEED_OK,
        "%s: get failed", o->name);
  CHECK(strcmp(got, o->default_value) == 0,
        "%s: slabfeed_config_init gives '%s', the table says '%s'", o->name,
        got, o->default_value);
  /* Another value: set, get, set again gives the same struct. */
  const char *v = other_value(o, buf, sizeof buf);
  slabfeed_config a = defaults(), b = defaults();
  CHECK(slabfeed_config_set(&a, o->name, v, err, sizeof err) == SLABFEED_OK,
        "%s: '%s' refused: %s", o->name, v, err);
  CHECK(memcmp(&a, &init, sizeof a) != 0, "%s: '%s' changed nothing", o->name,
        v);
  CHECK(slabfeed_config_get(&a, o->name, got, sizeof got) == SLABFEED_OK,
        "%s: get failed", o->name);
  char again[256];
  CHECK(
      slabfeed_config_set(&b, o->name, got, err, sizeof err) == SLABFEED_OK &&
          slabfeed_config_get(&b, o->name, again, sizeof again) ==
              SLABFEED_OK &&
          strcmp(got, again) == 0 &&
          (o->kind == SLABFEED_OPTION_STRING || memcmp(&a, &b, sizeof a) == 0),
      "%s: '%s' does not round-trip (get gave '%s')", o->name, v, got);
}

/* Integer-valued rows: the ends of the range are taken, one past them is
 * refused by set (naming the option) and by slabfeed_open. */
static void check_range(const slabfeed_option *o)
{
  const int is_int = o->kind == SLABFEED_OPTION_INT ||
                     o->kind == SLABFEED_OPTION_SWITCH ||
                     o->kind == SLABFEED_OPTION_EDGE;
  if (!is_int)
    return;
  char in[2][32], out[2][32], err[256];
  snprintf(in[0], sizeof in[0], "%lld", (long long)o->min);
  snprintf(in[1], sizeof in[1], "%lld", (long long)o->max);
  snprintf(out[0], sizeof out[0], "%lld", (long long)o->min - 1);
  snprintf(out[1], sizeof out[1], "%lld", (long long)o->max + 1);
  if (o->kind == SLABFEED_OPTION_SWITCH && o->min < 0)
    snprintf(in[0], sizeof in[0], "auto");
  for (int k = 0; k < 2; k++) {
    slabfeed_config c = defaults();
    CHECK(slabfeed_config_set(&c, o->name, in[k], err, sizeof err) ==
              SLABFEED_OK,
          "%s: '%s' (an end of its range) refused: %s", o->name, in[k], err);
    const slabfeed_status s =
        slabfeed_config_set(&c, o->name, out[k], err, sizeof err);
    CHECK(s == SLABFEED_ERR_ARG && strncmp(err, o->name, strlen(o->name)) == 0,
          "%s: '%s' (outside its range) gave %s '%s'", o->name, out[k],
          slabfeed_status_name(s), err);
  }
  if (o->kind == SLABFEED_OPTION_EDGE)
    return; /* the edge's own check is below, with the struct */
  /* The same value written into the struct is refused at open, before
   * any file is touched, with the option's name in the message. */
  const slabfeed_option *field = o;
  slabfeed_config c = defaults();
  c.path = "/nonexistent/options.h5";
  c.input = "x";
  int *p = NULL;
#define INT_FIELD(f)                                                           \
  if (strcmp(field->name, #f) == 0)                                            \
  p = &c.f
  INT_FIELD(batch);
  INT_FIELD(device);
  INT_FIELD(prefetch);
  INT_FIELD(halo);
  INT_FIELD(rank_per_node);
  INT_FIELD(group_nodes);
  INT_FIELD(locality);
  INT_FIELD(tile);
  INT_FIELD(pad);
  INT_FIELD(pass_symmetry);
  INT_FIELD(target_pad);
  INT_FIELD(aug_share);
  INT_FIELD(scale_factor);
  INT_FIELD(coarsen_factor);
  INT_FIELD(touch_threads);
#undef INT_FIELD
  CHECK(p != NULL, "%s: an integer row this test does not know", o->name);
  if (p == NULL)
    return;
  for (int k = 0; k < 2; k++) {
    const long long bad = k == 0 ? o->min - 1 : o->max + 1;
    if (bad < INT_MIN || bad > INT_MAX)
      continue;
    *p = (int)bad;
    slabfeed_loader *l = NULL;
    const slabfeed_status s =
        slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err);
    CHECK(s == SLABFEED_ERR_ARG && strstr(err, o->name) != NULL,
          "%s = %lld in the struct: open gave %s '%s'", o->name, bad,
          slabfeed_status_name(s), err);
    slabfeed_close(l);
  }
}

static void check_choices(const slabfeed_option *o)
{
  if (o->kind != SLABFEED_OPTION_CHOICE)
    return;
  const char *lists[2] = {o->choices, o->aliases};
  for (int l = 0; l < 2; l++) {
    const char *p = lists[l];
    for (int i = 0; p != NULL && *p != '\0'; i++) {
      char name[64];
      const size_t n = strcspn(p, "|");
      snprintf(name, sizeof name, "%.*s", (int)n, p);
      slabfeed_config c = defaults();
      char err[256], got[64];
      CHECK(slabfeed_config_set(&c, o->name, name, err, sizeof err) ==
                SLABFEED_OK,
            "%s: '%s' refused: %s", o->name, name, err);
      slabfeed_config_get(&c, o->name, got, sizeof got);
      char canon[64];
      const char *q = o->choices;
      for (int k = 0; k < i; k++)
        q = strchr(q, '|') + 1;
      snprintf(canon, sizeof canon, "%.*s", (int)strcspn(q, "|"), q);
      CHECK(strcmp(got, canon) == 0, "%s: '%s' reads back as '%s', not '%s'",
            o->name, name, got, canon);
      p += n + (p[n] == '|');
    }
  }
  slabfeed_config c = defaults();
  char err[256];
  CHECK(slabfeed_config_set(&c, o->name, "bogus", err, sizeof err) ==
                SLABFEED_ERR_ARG &&
            strstr(err, o->choices) != NULL,
        "%s: 'bogus' gave '%s' (the message should list %s)", o->name, err,
        o->choices);
}

/* A float from its bits. */
static float float_of(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Normalisations: the text form parses to the floats strtod gives (rounded
 * to float), get writes text that set reads back to the same bits (every
 * field of every entry, random bit patterns included), a value replaces
 * the list, and bad entries are refused naming the option; open refuses
 * the same bad values written into the struct. */
static void check_norms(void)
{
  char err[256], got[4096];
  slabfeed_config c = defaults();
  CHECK(slabfeed_config_set(&c, "input_norm",
                            "0.1,3;log(1e-3),-0.5,0.25;-0,1;0x1p-3,-7.5e-41",
                            err, sizeof err) == SLABFEED_OK,
        "input_norm: %s", err);
  const slabfeed_norm want[4] = {{0, 0.0f, (float)0.1, 3.0f},
                                 {1, (float)1e-3, -0.5f, 0.25f},
                                 {0, 0.0f, -0.0f, 1.0f},
                                 {0, 0.0f, 0.125f, (float)-7.5e-41}};
  CHECK_EQ(c.n_input_norm, 4, "entries");
  CHECK(memcmp(c.input_norm, want, sizeof want) == 0,
        "parsed values: %g %g %g / %d %g %g %g", (double)c.input_norm[0].shift,
        (double)c.input_norm[0].scale, (double)c.input_norm[1].a,
        c.input_norm[1].log, (double)c.input_norm[1].shift,
        (double)c.input_norm[3].shift, (double)c.input_norm[3].scale);
  CHECK(slabfeed_config_get(&c, "input_norm", got, sizeof got) == SLABFEED_OK &&
            strcmp(got, "0.100000001,3;log(0.00100000005),-0.5,0.25;-0,1;"
                        "0.125,-7.50002964e-41") == 0,
        "get gives '%s'", got);
  /* Replaced, not appended; "" clears and zeroes. */
  CHECK(slabfeed_config_set(&c, "input-norm", "2,4", err, sizeof err) ==
                SLABFEED_OK &&
            c.n_input_norm == 1 && c.input_norm[0].shift == 2.0f &&
            c.input_norm[1].scale == 0.0f,
        "a value replaces the list: %s", err);
  CHECK(slabfeed_config_set(&c, "input_norm", "", err, sizeof err) ==
                SLABFEED_OK &&
            c.n_input_norm == 0 && c.input_norm[0].shift == 0.0f,
        "'' clears the list");
  /* Round trip of random finite bit patterns, 64 entries. */
  uint64_t h = 0x9e3779b97f4a7c15ull;
  int bad = 0;
  for (int round = 0; round < 50; round++) {
    slabfeed_config a = defaults(), b = defaults();
    a.n_target_norm = SLABFEED_MAX_CHANNELS;
    for (int k = 0; k < SLABFEED_MAX_CHANNELS; k++) {
      float v[3];
      for (int i = 0; i < 3; i++) {
        do {
          h ^= h << 13, h ^= h >> 7, h ^= h << 17;
          v[i] = float_of((uint32_t)(h >> 16));
        } while (!isfinite(v[i]) || (i == 2 && v[i] == 0.0f));
      }
      a.target_norm[k] =
          (slabfeed_norm){(int)(h & 1), (h & 1) ? v[0] : 0.0f, v[1], v[2]};
    }
    char text[SLABFEED_MAX_CHANNELS * 64];
    CHECK(slabfeed_config_get(&a, "target_norm", text, sizeof text) ==
                  SLABFEED_OK &&
              slabfeed_config_set(&b, "target_norm", text, err, sizeof err) ==
                  SLABFEED_OK,
          "round %d: %s", round, err);
    bad += memcmp(a.target_norm, b.target_norm, sizeof a.target_norm) != 0 ||
           b.n_target_norm != SLABFEED_MAX_CHANNELS;
  }
  CHECK_EQ(bad, 0, "random normalisations that do not round-trip");
  /* A decimal-comma locale (where one is installed) changes nothing. */
  const char *commas[] = {"de_DE.UTF-8", "fr_FR.UTF-8", "de_DE", "fr_FR"};
  for (size_t i = 0; i < sizeof commas / sizeof *commas; i++)
    if (setlocale(LC_NUMERIC, commas[i]) != NULL) {
      slabfeed_config lc = defaults();
      CHECK(slabfeed_config_set(&lc, "input_norm", "0.5,2.25", err,
                                sizeof err) == SLABFEED_OK &&
                lc.input_norm[0].shift == 0.5f &&
                slabfeed_config_get(&lc, "input_norm", got, sizeof got) ==
                    SLABFEED_OK &&
                strcmp(got, "0.5,2.25") == 0,
            "locale %s: '%s' / '%s'", commas[i], err, got);
      setlocale(LC_NUMERIC, "C");
      break;
    }
  /* A buffer too small: NOMEM, a truncated value. */
  slabfeed_config t = defaults();
  slabfeed_config_set(&t, "input_norm", "1,2;3,4", err, sizeof err);
  CHECK(slabfeed_config_get(&t, "input_norm", got, 5) == SLABFEED_ERR_NOMEM,
        "get into 5 bytes");
  /* Bad values: refused with the option's name, nothing changed. */
  const char *bad_text[] = {
      "1,0",       "0,-0",      "inf,1",        "0,nan",
      "0,1e39",    "0,1e-46",   "log(inf),0,1", "log(nan),0,1",
      "1",         "1,2,3",     "1,2,3,4",      "log(1),2",
      "log(),1,2", "log(1,1,2", "lg(1),1,2",    " 1,2",
      "1 ,2",      "1,2x",      "1,2;",         ";1,2",
      "1,2;;3,4",  ","};
  slabfeed_config_set(&t, "input_norm", "5,6", err, sizeof err);
  const slabfeed_config before = t;
  for (size_t i = 0; i < sizeof bad_text / sizeof *bad_text; i++) {
    const slabfeed_status st =
        slabfeed_config_set(&t, "input_norm", bad_text[i], err, sizeof err);
    CHECK(st == SLABFEED_ERR_ARG && strncmp(err, "input_norm: ", 12) == 0 &&
              memcmp(&t, &before, sizeof t) == 0,
          "'%s' gave %s '%s'", bad_text[i], slabfeed_status_name(st), err);
  }
  char many[65 * 4 + 1] = "";
  for (int k = 0; k < 65; k++)
    strcat(many, k ? ";0,1" : "0,1");
  CHECK(slabfeed_config_set(&t, "input_norm", many, err, sizeof err) ==
                SLABFEED_ERR_ARG &&
            strstr(err, "more than 64") != NULL,
        "65 entries: %s", err);
  CHECK(slabfeed_config_set(&t, "input_norm", many + 4, err, sizeof err) ==
                SLABFEED_OK &&
            t.n_input_norm == 64,
        "64 entries: %s", err);
  /* The same values in the struct: refused at open, before the file. */
  const slabfeed_norm wrong[] = {{0, 0.0f, 0.0f, 0.0f},
                                 {0, 0.0f, INFINITY, 1.0f},
                                 {1, NAN, 0.0f, 1.0f},
                                 {2, 0.0f, 0.0f, 1.0f}};
  for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
    slabfeed_config o = defaults();
    o.path = "/nonexistent/options.h5";
    o.input = "x";
    o.n_input_norm = 2;
    o.input_norm[0] = (slabfeed_norm){0, 0.0f, 0.0f, 1.0f};
    o.input_norm[1] = wrong[i];
    slabfeed_loader *l = NULL;
    const slabfeed_status st =
        slabfeed_open(MPI_COMM_WORLD, &o, &l, err, sizeof err);
    CHECK(st == SLABFEED_ERR_ARG && strstr(err, "input_norm channel 1") != NULL,
          "struct entry %zu: open gave %s '%s'", i, slabfeed_status_name(st),
          err);
    slabfeed_close(l);
  }
  slabfeed_config o = defaults();
  o.path = "/nonexistent/options.h5";
  o.input = "x";
  o.n_input_norm = 65;
  slabfeed_loader *l = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &o, &l, err, sizeof err) ==
                SLABFEED_ERR_ARG &&
            strstr(err, "input_norm: 65 entries") != NULL,
        "65 entries in the struct: '%s'", err);
  o.n_input_norm = 0;
  o.n_target_norm = 1;
  o.target_norm[0] = (slabfeed_norm){0, 0.0f, 0.0f, 1.0f};
  CHECK(slabfeed_open(MPI_COMM_WORLD, &o, &l, err, sizeof err) ==
                SLABFEED_ERR_ARG &&
            strstr(err, "target_norm (1 entries) without a target") != NULL,
        "target_norm without a target: '%s'", err);
}

/* The apps' parser: "--flag value" stores what slabfeed_config_set does. */
static void check_cli(void)
{
  const cli_option *t = cli_loader_options();
  int rows = 0;
  for (; t[rows].name != NULL; rows++) {
    const slabfeed_option *o = slabfeed_option_at(rows);
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", o != NULL ? o->flag : "?");
    CHECK(o != NULL && strcmp(t[rows].name, flag) == 0 &&
              strcmp(t[rows].help, o->help) == 0,
          "CLI row %d is %s, the table's is %s", rows, t[rows].name, flag);
    if (o == NULL)
      continue;
    char buf[64];
    const char *v = other_value(o, buf, sizeof buf);
    if (o->kind == SLABFEED_OPTION_STRING)
      v = "some_name";
    slabfeed_config want = defaults(), got = defaults();
    want.path = got.path = NULL;
    char err[256];
    slabfeed_config_set(&want, "path", "f.h5", err, sizeof err);
    slabfeed_config_set(&want, "input", "in", err, sizeof err);
    /* --file given twice: the entries of a dataset of several volumes,
     * one per line. */
    slabfeed_config_set(&want, o->name,
                        strcmp(o->name, "path") == 0 ? "f.h5\nsome_name" : v,
                        err, sizeof err);
    /* A switch flag alone sets 1; 0 is given inline (--flag=0). */
    char inline_flag[96];
    const int sw = o->kind == SLABFEED_OPTION_SWITCH;
    snprintf(inline_flag, sizeof inline_flag, "%s=%s", flag, v);
    char *argv[] = {
        "prog",    "--file",
        "f.h5",    "--input",
        "in",      sw && strcmp(v, "1") != 0 ? inline_flag : (char *)flag,
        (char *)v, NULL};
    const int argc = sw ? 6 : 7;
    const cli_app app = {.prog = "prog",
                         .summary = "test",
                         .groups = {{"loader options", t, &got}}};
    cli_result res;
    const cli_action a = cli_scan(&app, argc, argv, &res);
    CHECK(a == CLI_RUN, "%s %s: %s", flag, v, res.error);
    /* Strings point into argv or the literals: compare the text. */
    CHECK(strcmp(got.path, want.path) == 0 &&
              strcmp(got.input, want.input) == 0,
          "%s: path/input differ", flag);
    want.path = got.path;
    want.input = got.input;
    if (o->kind == SLABFEED_OPTION_STRING && strcmp(o->name, "path") != 0 &&
        strcmp(o->name, "input") != 0) {
      char stored[256] = "";
      slabfeed_config_get(&got, o->name, stored, sizeof stored);
      CHECK(strcmp(stored, v) == 0, "%s: not stored", flag);
    }
    CHECK(memcmp(&want, &got, sizeof want) == 0,
          "%s %s: the CLI stored something else than slabfeed_config_set", flag,
          v);
  }
  CHECK(slabfeed_option_at(rows) == NULL, "the CLI has %d rows, the table more",
        rows);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rows = 0;
  for (const slabfeed_option *o; (o = slabfeed_option_at(rows)) != NULL;
       rows++) {
    CHECK(slabfeed_option_find(o->name) == o &&
              slabfeed_option_find(o->flag) == o,
          "row %d (%s/%s) is not found by its name and flag", rows, o->name,
          o->flag);
    CHECK(o->help != NULL && o->help[0] != '\0' && o->metavar != NULL &&
              o->default_value != NULL,
          "%s: help, metavar and default are required", o->name);
    check_defaults_and_round_trip(o);
    check_range(o);
    check_choices(o);
  }
  CHECK(rows >= 20, "only %d rows", rows);
  CHECK(slabfeed_option_at(-1) == NULL && slabfeed_option_find("bogus") == NULL,
        "lookups past the table");

  /* A caller with an older, shorter struct: a field it lacks is refused
   * and nothing past its size is written. */
  unsigned char raw[sizeof(slabfeed_config) + 16];
  memset(raw, 0xab, sizeof raw);
  slabfeed_config *old = (slabfeed_config *)raw;
  const size_t old_size = offsetof(slabfeed_config, group_nodes);
  slabfeed_config_init_sized(old, old_size);
  char err[256];
  CHECK(slabfeed_config_set(old, "locality", "1", err, sizeof err) ==
            SLABFEED_ERR_UNSUPPORTED,
        "a field past the caller's size: %s", err);
  CHECK(slabfeed_config_set(old, "batch", "4", err, sizeof err) ==
                SLABFEED_OK &&
            old->batch == 4,
        "a field inside the caller's size: %s", err);
  int untouched = 1;
  for (size_t i = old_size; i < sizeof raw; i++)
    untouched &= raw[i] == 0xab;
  CHECK(untouched, "bytes past the caller's struct were written");

  /* Vector groups append; "" clears; more than the maximum is refused. */
  slabfeed_config c = defaults();
  char got[64] = "";
  CHECK(slabfeed_config_set(&c, "input_vectors", "1,2,3", err, sizeof err) ==
                SLABFEED_OK &&
            slabfeed_config_set(&c, "input-vector", "4,5,6;7,8,9", err,
                                sizeof err) == SLABFEED_OK &&
            c.n_input_vectors == 3 && c.input_vectors[2][2] == 9,
        "vector groups append: %s", err);
  CHECK(slabfeed_config_set(&c, "input_vectors", "10,11,12;13,14,15", err,
                            sizeof err) == SLABFEED_ERR_ARG &&
            c.n_input_vectors == 3,
        "a fifth group is refused and nothing changes: %s", err);
  CHECK(slabfeed_config_set(&c, "input_vectors", "", err, sizeof err) ==
                SLABFEED_OK &&
            c.n_input_vectors == 0,
        "'' clears the groups");
  CHECK(slabfeed_config_set(&c, "node_memory", "1.5G", err, sizeof err) ==
                SLABFEED_OK &&
            c.node_memory == 3ull << 29,
        "sizes take fractions and binary suffixes: %s", err);
  CHECK(slabfeed_config_set(&c, "node_memory", "0.4375K", err, sizeof err) ==
                SLABFEED_OK &&
            c.node_memory == 448,
        "an exact binary fraction is whole bytes: %s", err);
  CHECK(slabfeed_config_set(&c, "node_memory", "1.5", err, sizeof err) ==
            SLABFEED_ERR_ARG,
        "half a byte is refused");
  CHECK(slabfeed_config_set(&c, "node_memory", "16777216T", err, sizeof err) ==
            SLABFEED_ERR_ARG,
        "2^64 bytes is refused");
  CHECK(slabfeed_config_set(&c, "batch", "1000000000000000000000000000000", err,
                            sizeof err) == SLABFEED_ERR_ARG &&
            strstr(err, "above the maximum") != NULL,
        "a huge value is above the maximum: %s", err);
  CHECK(slabfeed_config_set(&c, "device", "local", err, sizeof err) ==
                SLABFEED_OK &&
            c.device == SLABFEED_DEVICE_LOCAL &&
            slabfeed_config_get(&c, "device", got, sizeof got) == SLABFEED_OK &&
            strcmp(got, "local") == 0,
        "device 'local' is a named value: %s / '%s'", err, got);
  CHECK(slabfeed_config_set(&c, "crop", "8,8", err, sizeof err) ==
            SLABFEED_ERR_ARG,
        "two edges are refused");
  CHECK(slabfeed_config_set(&c, "batch", " 4", err, sizeof err) ==
                SLABFEED_ERR_ARG &&
            slabfeed_config_set(&c, "batch", "4x", err, sizeof err) ==
                SLABFEED_ERR_ARG,
        "numbers are strict");
  check_norms();
  check_cli();
  return check_finish("unit.options");
}
