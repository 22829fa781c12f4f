/* slabfeed-bench: the report of one run. Every rank's figures in a table
 * for people, one summary line with the ratios to the ceilings, and one
 * "JSON {...}" line for bench/plot.py and docs/results (keys are stable). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "json.h"

/* x as a fraction of its ceiling; NaN where the ceiling was not measured
 * (the JSON writer makes it null). */
/* The edge of the input crops: the crop, or a tiled pass's tile + 2 pad. */
static int64_t input_edge(const slabfeed_config *cfg)
{
  return cfg->tile > 0 ? (int64_t)cfg->tile + 2 * (int64_t)cfg->pad
                       : cfg->crop[0];
}

static double ratio(double x, double ceiling)
{
  return ceiling > 0 ? x / ceiling : NAN;
}

/* A ceiling for the JSON line: NaN (null) where it was not measured. */
static double measured(double ceiling)
{
  return ceiling > 0 ? ceiling : NAN;
}

/* "= R x NAME (C GB/s)" where the ceiling was measured, else "(NAME: n/a)". */
static void print_ratio(double x, double ceiling, const char *name)
{
  if (ceiling > 0)
    printf(" = %.3f x %s (%.1f GB/s)", ratio(x, ceiling), name, ceiling);
  else
    printf(" (%s: n/a)", name);
}

/* Totals over the ranks: sums of throughput, maxima of memory and wait. */
typedef struct totals {
  double crops, gbs, rss, exposed, link, anon, slab;
} totals;

/* Prints the per-rank table (rank 0 only) and adds up the totals. */
static void print_table(const bench_ctx *b, const char *mode, double step_ms,
                        const bench_result *all, totals *t)
{
  const slabfeed_config *cfg = &b->cfg;
  *t = (totals){0, 0, 0, 0, 0, 0, 0};
  printf("\n%s  %s  ranks %d  crop %lld%s  batch %d  %s  device %d  step %.0f "
         "ms\n",
         mode, b->label, b->size, (long long)input_edge(cfg),
         cfg->tile > 0 ? " (tiled pass)" : "", cfg->batch,
         cli_dtype_name(cfg->dtype), cfg->device, step_ms);
  printf("%4s %9s %8s %8s %9s %9s %7s %7s %7s %7s %9s\n", "rank", "crops/s",
         "GB/s", "step ms", "exposed", "wait ms", "plan", "gather", "h2d",
         "xform", "RSS MB");
  for (int i = 0; i < b->size; i++) {
    const bench_result *x = &all[i];
    printf("%4d %9.2f %8.2f %8.2f %9.3f %9.3f %7.3f %7.3f %7.3f %7.3f %9.0f\n",
           i, x->crops_s, x->gbs, x->wall_step_ms, x->exposed_ms, x->wait_ms,
           x->t_plan, x->t_gather, x->t_h2d, x->t_transform, x->rss / 1e6);
    t->crops += x->crops_s;
    t->gbs += x->gbs;
    t->rss = x->rss > t->rss ? x->rss : t->rss;
    t->exposed = x->exposed_ms > t->exposed ? x->exposed_ms : t->exposed;
    t->link += x->link_gbs;
    t->anon = x->anon > t->anon ? x->anon : t->anon;
    t->slab = x->slab > t->slab ? x->slab : t->slab;
  }
}

/* The "total ..." line: throughput as ratios to the ceilings, the exposed
 * wait with a simulated step, memory per rank, the host gather rate. */
static void print_summary(const bench_ceilings *c, double step_ms,
                          const bench_result *r0, const totals *t)
{
  printf("total %8.2f crops/s %8.2f GB/s", t->crops, t->gbs);
  if (c->pinned > 0) /* GPU runs: the link is the ceiling */
    print_ratio(t->gbs, c->pinned, "pinned H2D");
  print_ratio(t->gbs, c->memcpy1, "1-thread memcpy");
  if (t->link > 0 && c->pinned > 0) {
    printf("; float32 gathered %.2f GB/s = %.3f x pinned H2D", t->link,
           ratio(t->link, c->pinned));
    if (c->pitched > 0)
      printf(" = %.3f x the crop's copy shape", ratio(t->link, c->pitched));
    /* Slabs resident on the device (0.8): the gathered bytes move
     * device to device, whose ceiling is the device copy. */
    if (c->d2d > 0)
      printf(" = %.3f x device copy (%.1f GB/s)", ratio(t->link, c->d2d),
             c->d2d);
  }
  if (step_ms > 0)
    printf("; exposed %.3f ms per step of %.2f ms measured (%.2f%%) in "
           "steady state (%.2f ms per step over the whole run, pipeline fill "
           "included)",
           t->exposed, r0->busy_ms, 100.0 * t->exposed / r0->busy_ms,
           r0->wall_step_ms - r0->busy_ms);
  printf("; per rank: own slab in host memory %.0f MB + private RSS %.0f MB "
         "(peak RSS %.0f "
         "MB counts the node window's shared pages)",
         t->slab / 1e6, t->anon / 1e6, t->rss / 1e6);
  printf("; G %.0f node(s) per group; from other nodes %.2f MB per step per "
         "rank = %.3f GB/s",
         r0->group_nodes, r0->remote_mb_step, r0->remote_gbs);
  print_ratio(r0->remote_gbs, c->mpi_get, "MPI_Get ceiling");
  printf(", in %.1f transfers per step (the placement line names the "
         "transport), mean transfer %.2f KB on the wire (rank 0)",
         r0->remote_gets_step, r0->remote_run_kb);
  if (r0->gather_gbs > 0) {
    printf("; host gather %.2f GB/s per rank", r0->gather_gbs);
    print_ratio(r0->gather_gbs, c->memcpy1, "1-thread memcpy");
  }
  printf("\n");
}

/* The "JSON {...}" line; the keys and their decimals are what
 * bench/plot.py and the files in docs/results use. */
static void print_json(const bench_ctx *b, const char *mode,
                       const bench_ceilings *c, double step_ms,
                       const bench_result *r0, const totals *t)
{
  const slabfeed_config *cfg = &b->cfg;
  json_writer j;
  fputs("JSON ", stdout);
  json_begin(&j, stdout);
  json_string(&j, "bench", mode);
  json_string(&j, "label", b->label);
  json_int(&j, "ranks", b->size);
  json_int(&j, "crop", (long long)input_edge(cfg));
  json_int(&j, "tile", cfg->tile);
  json_int(&j, "pad", cfg->pad);
  json_int(&j, "batch", cfg->batch);
  json_string(&j, "dtype", cli_dtype_name(cfg->dtype));
  json_int(&j, "device", cfg->device);
  json_double(&j, "step_ms", step_ms, 1);
  json_double(&j, "crops_s", t->crops, 3);
  json_double(&j, "gbs", t->gbs, 3);
  json_double(&j, "exposed_ms", t->exposed, 4);
  json_double(&j, "wait_ms", r0->wait_ms, 4);
  json_double(&j, "plan_ms", r0->t_plan, 4);
  json_double(&j, "gather_ms", r0->t_gather, 4);
  json_double(&j, "h2d_ms", r0->t_h2d, 4);
  json_double(&j, "transform_ms", r0->t_transform, 4);
  json_double(&j, "peak_rss", t->rss, 0);
  json_double(&j, "device_mem", r0->device_mem, 0);
  /* Ceilings not measured (no GPU, one rank) and ratios to them: null. */
  json_double(&j, "ceil_pinned", measured(c->pinned), 2);
  json_double(&j, "ceil_pageable", measured(c->pageable), 2);
  json_double(&j, "ceil_d2d", measured(c->d2d), 1);
  json_double(&j, "ceil_memcpy1", measured(c->memcpy1), 2);
  json_double(&j, "ceil_memcpyN", measured(c->memcpyN), 2);
  json_double(&j, "ceil_mpi_get", measured(c->mpi_get), 2);
  json_double(&j, "ceil_pitched", measured(c->pitched), 2);
  json_double(&j, "pitched_enqueue_us",
              c->pitched > 0 ? c->pitched_enqueue_us : NAN, 2);
  json_double(&j, "ceil_h2d_all", measured(c->h2d_all), 2);
  json_double(&j, "ceil_h2d_all_min", measured(c->h2d_all_min), 2);
  json_double(&j, "ceil_p2p", measured(c->p2p), 2);
  json_double(&j, "ratio_pinned", ratio(t->gbs, c->pinned), 4);
  json_double(&j, "ratio_memcpy1", ratio(t->gbs, c->memcpy1), 4);
  json_double(&j, "gather_gbs", r0->gather_gbs, 3);
  json_double(&j, "link_gbs", t->link, 3);
  json_double(&j, "ratio_link_d2d", ratio(t->link, c->d2d), 4);
  json_double(&j, "busy_ms", r0->busy_ms, 3);
  json_double(&j, "private_rss", t->anon, 0);
  json_double(&j, "slab", t->slab, 0);
  json_double(&j, "wall_exposed_ms", r0->wall_step_ms - r0->busy_ms, 4);
  json_double(&j, "remote_mb_step", r0->remote_mb_step, 3);
  json_double(&j, "remote_gets_step", r0->remote_gets_step, 1);
  json_double(&j, "remote_run_kb", r0->remote_run_kb, 3);
  json_double(&j, "remote_gbs", r0->remote_gbs, 4);
  json_int(&j, "group_nodes", (long long)r0->group_nodes);
  /* The open against its read ceiling, and the start-up (0.7). */
  json_double(&j, "open_s", b->t_open > 0 ? b->t_open : NAN, 3);
  json_double(&j, "open_read_s", b->t_read_max > 0 ? b->t_read_max : NAN, 3);
  json_double(&j, "read_bytes", measured(c->read_bytes), 0);
  json_double(&j, "open_read_gbs", measured(c->read_open), 3);
  json_double(&j, "ceil_read_pread", measured(c->read_pread), 3);
  json_double(&j, "ratio_read", ratio(c->read_open, c->read_pread), 4);
  json_double(&j, "ceil_read_pread_threads", measured(c->read_pread_threads),
              3);
  json_double(&j, "read_threads", measured(c->read_threads), 0);
  json_double(&j, "ratio_read_threads",
              ratio(c->read_open, c->read_pread_threads), 4);
  json_double(&j, "first_batch_s", measured(r0->first_batch_s), 3);
  json_end(&j);
}

/* Gathers the results as doubles, then rank 0 prints table, summary and
 * JSON (see bench.h). */
void bench_report(const bench_ctx *b, const char *mode, const bench_ceilings *c,
                  double step_ms, const bench_result *r)
{
  bench_result *all = b->rank == 0 ? malloc(sizeof *r * (size_t)b->size) : NULL;
  slabfeed_status st = SLABFEED_OK;
  char msg[CLI_ERRLEN] = "";
  if (b->rank == 0 && all == NULL)
    cli_note(&st, msg, sizeof msg, SLABFEED_ERR_NOMEM,
             "cannot allocate the results of %d ranks", b->size);
  if (cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg))
    cli_fail_agreed(b->prog, st, msg);
  MPI_Gather(r, sizeof *r / sizeof(double), MPI_DOUBLE, all,
             sizeof *r / sizeof(double), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (b->rank != 0)
    return;
  totals t;
  print_table(b, mode, step_ms, all, &t);
  print_summary(c, step_ms, &all[0], &t);
  print_json(b, mode, c, step_ms, &all[0], &t);
  fflush(stdout);
  free(all);
}
