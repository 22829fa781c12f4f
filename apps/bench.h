/* slabfeed-bench, shared between its parts: main and options (bench.c),
 * the ceilings (bench_ceilings.c), the runs (bench_run.c), the report
 * (bench_report.c) and the CUDA helpers (bench_gpu.cu). */
#ifndef SF_APPS_BENCH_H
#define SF_APPS_BENCH_H

#include "cli.h"
#include "read_ceiling.h"

/* One benchmark run's setting, the same on every rank. */
typedef struct bench_ctx {
  const char *prog;
  int rank, size;      /* in MPI_COMM_WORLD */
  slabfeed_config cfg; /* the loader options (cfg.device resolved) */
  void *stream;        /* consumer stream of GPU runs, or NULL */
  const char *label;   /* --label, copied into the JSON lines */
  char path[4200];     /* the file the ceilings and the baseline read: the
                          first volume of cfg.path (slabfeed_volume_info of
                          the open loader; the baseline's own expansion) */
  double t_open;       /* the loader's open, seconds (slowest rank) */
  double t_read_max;   /* its slab read (slabfeed_stats.t_read), slowest rank;
                          0 without a loader (the baseline) */
} bench_ctx;

/* Ceilings measured in the same run, GB/s; 0 or -1 where not measured
 * (no usable GPU: the device ceilings; one rank: mpi_get), printed as n/a
 * and written to JSON as null. Doubles only: broadcast as an array of
 * doubles. mpi_get: one-sided MPI_Get of 64 MiB between ranks 0 and 1, the
 * reference for the remote transfers whichever transport they use. */
typedef struct bench_ceilings {
  double pinned, pageable, d2d, memcpy1, memcpyN, mpi_get;
  /* one crop-channel pitched copy (crop rows out of volume rows), GB/s,
   * and the host time to enqueue one, us */
  double pitched, pitched_enqueue_us;
  /* every rank's pinned H2D at once (each on its own device, node-local
   * staging): the sum over the ranks and the slowest rank, GB/s */
  double h2d_all, h2d_all_min;
  /* rank 0: device 0 -> device 1 copy (2+ visible GPUs), GB/s, and 1
   * where peer access was on (NVLink or PCIe peer-to-peer) */
  double p2p, p2p_peer;
  /* The open's read ceiling (read_ceiling.h): plain parallel pread of the
   * bytes the open read (all ranks), GB/s, those bytes, and the open's own
   * rate for them (bytes / the slowest rank's slab read); 0: n/a */
  double read_pread, read_bytes, read_open;
  double read_pread_threads, read_threads; /* the same on the rank's cores */
} bench_ceilings;

/* What one rank measured in one run. Doubles only: gathered as an array
 * of doubles. */
typedef struct bench_result {
  double crops_s, gbs, wall_step_ms, exposed_ms, wait_ms;
  double t_plan, t_gather, t_h2d, t_transform; /* ms per step */
  double rss, device_mem;
  double gather_gbs; /* bytes gathered (own + node + remote) / gather s */
  double link_gbs;   /* float32 bytes gathered per second of the run: on the
                        GPU path, what crosses the host link */
  double anon, shmem, slab; /* private RSS, shared RSS, own slab (bytes) */
  double busy_ms;           /* measured length of the simulated step */
  double steady_ms;         /* GPU time per step after the pipeline filled */
  double remote_mb_step;    /* MB of pieces from other nodes per step */
  double remote_gets_step;  /* transfers per step: messages received (the
                               default transport), or MPI_Rget operations
                               with SLABFEED_REMOTE=get */
  double remote_run_kb;     /* mean transfer (contiguous run or message) */
  double remote_gbs;        /* remote bytes per second of the run, GB/s */
  double group_nodes;       /* G: nodes per replication group */
  double first_batch_s;     /* process start to the first slabfeed_next
                               returned (the first run only; 0: not taken) */
} bench_result;

/* Measures the ceilings (host memcpy and, with a device, the copy engines
 * on rank 0; with devices on every rank, their pinned H2D all at once; a
 * one-sided MPI_Get between ranks 0 and 1). Collective. */
void bench_ceilings_measure(const bench_ctx *b, bench_ceilings *c);

/* Prints the ceilings line(s) on rank 0. */
void bench_ceilings_print(const bench_ctx *b, const bench_ceilings *c);

/* S timed steps of loader l after W warm-up steps; with step_ms > 0 on a
 * device, a busy kernel of that length runs on the consumer stream after
 * every slabfeed_next. Collective (agreement points before and after the
 * timed part; a failure on any rank closes l and ends the run on all). */
void bench_run_loader(const bench_ctx *b, slabfeed_loader *l, int W, int S,
                      double step_ms, bench_result *r);

/* The original approach instead of the loader: every rank reads the whole
 * volume, crops and transforms on the host, copies to the GPU. A
 * throughput baseline with its own random crops; the first sample of a few
 * timed steps per rank is compared with the serial reference reader after
 * the clock stops. Returns the number of those samples (all ranks) that
 * differ. Collective; failures on any rank are agreed and end the run. */
uint64_t bench_run_fullcopy(const bench_ctx *b, int W, int S, bench_result *r);

/* Gathers every rank's result; rank 0 prints the table, the summary line
 * and the "JSON {...}" line. mode: "loader" or "fullcopy". Collective. */
void bench_report(const bench_ctx *b, const char *mode, const bench_ceilings *c,
                  double step_ms, const bench_result *r);

#endif
