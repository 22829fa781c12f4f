/* Slabs resident in GPU memory: the choice, the fill, the IPC mappings
 * (resident.h). Every collective below is reached by every rank whatever
 * happened before it on that rank: a local failure is carried to the
 * next agreement, never past a collective. */
#include "backend/resident.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/inject.h"
#include "common/sys.h"
#include "cuda/cudart.h"
#include "plan/residency.h"

/* What each rank of the node tells the others after the fill. */
typedef struct ipc_info {
  int has; /* a device copy of a non-empty segment */
  int device;
  cudaIpcMemHandle_t h;
} ipc_info;

/* This rank's verdict: 1 when its slab (with the node's other slabs on
 * its GPU) fits that GPU's budget and its GPU reaches every other GPU of
 * the node; else 0 with the reason in why. Fills the node table. */
static int local_verdict(const sf__config *cfg, const sf__store *s, int device,
                         sf__gpu_share *all, char *why, size_t len, char *fit,
                         size_t flen, sf__err *e)
{
  size_t free_b = 0, total = 0;
  sf__err q;
  sf__err_clear(&q);
  sf__cudart_mem_info(&free_b, &total, &q);
  sf__gpu_share me = {s->rank, device, s->bytes, (uint64_t)free_b};
  const int rc = MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all,
                               (int)sizeof me, MPI_BYTE, s->node);
  if (rc != MPI_SUCCESS) {
    sf__fail_mpi(e, rc, "MPI_Allgather (residency: the node's GPUs)");
    return 0;
  }
  uint64_t share = 0, budget = 0;
  int sharing = 0;
  const int fits =
      sf__residency_fits(all, s->node_size, device, cfg->pub.device_memory,
                         &share, &sharing, &budget);
  snprintf(fit, flen,
           "GPU %d holds %.2f GB of slabs of %d rank%s, budget %.2f GB (%s)",
           device, (double)share / 1e9, sharing, sharing == 1 ? "" : "s",
           (double)budget / 1e9,
           cfg->pub.device_memory > 0 ? "device_memory"
                                      : "half of its free memory");
  if (q.status != SLABFEED_OK) {
    snprintf(why, len, "rank %d cannot read GPU %d's free memory: %.96s",
             s->rank, device, q.msg);
    return 0;
  }
  if (!fits) {
    snprintf(why, len,
             "rank %d: GPU %d would hold %.2f GB of slabs (%d rank%s), over "
             "its budget of %.2f GB (%s; --device-memory sets it)",
             s->rank, device, (double)share / 1e9, sharing,
             sharing == 1 ? "" : "s", (double)budget / 1e9,
             cfg->pub.device_memory > 0 ? "device_memory"
                                        : "half of its free memory");
    return 0;
  }
  for (int k = 0; k < s->node_size; k++)
    if (!sf__cudart_can_access_peer(device, all[k].device)) {
      snprintf(why, len,
               "rank %d: GPU %d has no peer access to GPU %d of rank %d on "
               "the same node (crops would need a bounce through host "
               "memory)",
               s->rank, device, all[k].device, all[k].rank);
      return 0;
    }
  return 1;
}

/* Every rank's verdict: 1 when all are 1; else 0, and the first refusing
 * rank's reason in why on every rank. */
static int agree_verdict(const sf__store *s, int ok, char *why, size_t len,
                         sf__err *e)
{
  struct {
    int ok, rank;
  } in = {ok, s->rank}, out = {1, 0};
  int rc = MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MINLOC, s->comm);
  if (rc == MPI_SUCCESS && !out.ok)
    rc = MPI_Bcast(why, (int)len, MPI_CHAR, out.rank, s->comm);
  if (rc != MPI_SUCCESS) {
    sf__fail_mpi(e, rc, "residency: the ranks' verdicts");
    return 0;
  }
  return out.ok;
}

/* Copies this rank's segment into device memory (own), through the copy
 * stream from the segment registered for the copy (a pageable copy where
 * registration fails). */
static slabfeed_status fill(sf__resident *r, const sf__store *s,
                            cudaStream_t copy, sf__err *e)
{
  r->bytes = (uint64_t)s->bytes;
  if (r->bytes == 0)
    return SLABFEED_OK;
  const double t0 = sf__now();
  if (sf__cudart_malloc((void **)&r->own, (size_t)r->bytes, e))
    return e->status;
  sf__err reg;
  sf__err_clear(&reg);
  const int pinned =
      sf__cudart_host_register(s->base, (size_t)r->bytes, &reg) == SLABFEED_OK;
  if (sf__cudart_copy(r->own, s->base, (size_t)r->bytes, cudaMemcpyHostToDevice,
                      copy, e) == SLABFEED_OK)
    sf__cudart_stream_sync(copy, e);
  if (pinned)
    sf__cudart_host_unregister(s->base);
  r->fill_s = sf__now() - t0;
  if (e->status == SLABFEED_OK && sf__inject("device.fill", s->rank))
    sf__fail(e, SLABFEED_ERR_CUDA, "injected failure at stage 'device.fill'");
  return e->status;
}

/* ---- The staged fill: the file to GPU memory through pinned staging ---- */

static sf__resident *of_sink(sf__sink *k)
{
  return (sf__resident *)((char *)k - offsetof(sf__resident, sink));
}

/* The next staging buffer, once its last copy is done. */
static float *stage_buffer(sf__sink *k, sf__err *e)
{
  sf__resident *r = of_sink(k);
  return sf__cudart_event_sync(r->done[r->next], e) == SLABFEED_OK
             ? r->stage[r->next]
             : NULL;
}

/* Its transfer on the way to its place in own; the other buffer next. */
static slabfeed_status stage_put(sf__sink *k, float *buf, const float *at,
                                 int64_t n, sf__err *e)
{
  sf__resident *r = of_sink(k);
  const int i = buf == r->stage[1];
  const int64_t off = (const char *)at - r->base;
  int caller = 0;
  if (off < 0 || off + n * (int64_t)sizeof(float) > (int64_t)r->bytes)
    return sf__fail(e, SLABFEED_ERR_STATE,
                    "staged fill: %lld floats at byte %lld outside the "
                    "segment of %llu bytes",
                    (long long)n, (long long)off, (unsigned long long)r->bytes);
  /* The test's failure comes mid-read, after a first transfer. */
  if (r->puts > 0 && sf__inject("device.put", r->rank))
    return sf__fail(e, SLABFEED_ERR_CUDA,
                    "injected failure at stage 'device.put' (test)");
  if (sf__cudart_get_device(&caller, e) || sf__cudart_set_device(r->device, e))
    return e->status;
  if (sf__cudart_copy(r->own + off, buf, (size_t)n * sizeof(float),
                      cudaMemcpyHostToDevice, r->stream, e) == SLABFEED_OK)
    sf__cudart_record(r->done[i], r->stream, e);
  sf__err restore;
  sf__err_clear(&restore);
  sf__cudart_set_device(caller, e->status == SLABFEED_OK ? e : &restore);
  r->next = !i;
  r->puts++;
  return e->status;
}

slabfeed_status sf__resident_stage(sf__resident *r, sf__store *s, int device,
                                   sf__sink **sink, sf__err *e)
{
  *sink = NULL;
  r->t0 = sf__now();
  r->device = device;
  r->rank = s->rank;
  r->base = s->base;
  r->bytes = (uint64_t)s->bytes;
  /* One plane of every dataset's grid fits a buffer; the same size on
   * every rank (the read's collective calls are counted with it). */
  int64_t floats = SF_RESIDENT_STAGE_BYTES / (int64_t)sizeof(float);
  for (int d = 0; d < s->ndsets; d++)
    if (s->cube[d] * s->shape[1] * s->shape[2] > floats)
      floats = s->cube[d] * s->shape[1] * s->shape[2];
  r->sink = (sf__sink){floats, stage_buffer, stage_put};
  if (r->bytes > 0 && sf__cudart_malloc((void **)&r->own, r->bytes, e))
    return e->status;
  if (sf__cudart_stream_create(&r->stream, e))
    return e->status;
  for (int i = 0; i < 2; i++)
    if (sf__cudart_host_alloc((void **)&r->stage[i],
                              (size_t)floats * sizeof(float), e) ||
        sf__cudart_event_create(&r->done[i], e))
      return e->status;
  if (sf__inject("device.stage", s->rank))
    return sf__fail(e, SLABFEED_ERR_CUDA,
                    "injected failure at stage 'device.stage' (test)");
  r->staged = 1;
  *sink = &r->sink;
  return SLABFEED_OK;
}

slabfeed_status sf__resident_stage_end(sf__resident *r, sf__err *e)
{
  sf__err local;
  sf__err_clear(&local);
  if (r->stream != NULL)
    sf__cudart_stream_sync(r->stream, e->status == SLABFEED_OK ? e : &local);
  for (int i = 0; i < 2; i++) {
    sf__cudart_free_host(r->stage[i]);
    sf__cudart_event_destroy(r->done[i]);
    r->stage[i] = NULL;
    r->done[i] = NULL;
  }
  sf__cudart_stream_destroy(r->stream);
  r->stream = NULL;
  r->fill_s = sf__now() - r->t0;
  return e->status;
}

/* Where the rest of a staged copy is copied. */
typedef struct rest_to {
  const sf__resident *r;
  cudaStream_t stream;
} rest_to;

/* A staged copy's planes that other ranks read (halos, replicas), from
 * their copies in GPU memory (own or over IPC). */
static slabfeed_status rest_copy(sf__store *s, int r, int64_t from, int64_t to,
                                 int64_t bytes, void *arg, sf__err *e)
{
  const rest_to *t = arg;
  const char *src = t->r->dpeer[r];
  if (src == NULL)
    return sf__fail(e, SLABFEED_ERR_STATE,
                    "staged fill: rank %d's copy is not mapped on rank %d", r,
                    s->rank);
  return sf__cudart_copy(t->r->own + to, src + from, (size_t)bytes,
                         cudaMemcpyDeviceToDevice, t->stream, e);
}

/* Fills the rest of a staged copy once the node's copies are mapped:
 * every rank's staged part is complete (agreed before). */
static slabfeed_status fill_rest(sf__resident *r, sf__store *s,
                                 cudaStream_t copy, sf__err *e)
{
  const double t0 = sf__now();
  const rest_to t = {r, copy};
  if (sf__store_each_copy(s, rest_copy, (void *)&t, e) == SLABFEED_OK)
    sf__cudart_stream_sync(copy, e);
  r->rest_s = sf__now() - t0;
  if (e->status == SLABFEED_OK && sf__inject("device.rest", s->rank))
    sf__fail(e, SLABFEED_ERR_CUDA, "injected failure at stage 'device.rest'");
  return e->status;
}

/* Exchanges the node's IPC handles and opens the others' copies (all:
 * [node_size] exchange buffer, ranks: [node_size]). */
static slabfeed_status map_node(sf__resident *r, sf__store *s, int device,
                                ipc_info *all, int *ranks, sf__err *e)
{
  ipc_info me;
  memset(&me, 0, sizeof me);
  me.device = device;
  if (r->own != NULL && sf__cudart_ipc_get(&me.h, r->own, e) == SLABFEED_OK)
    me.has = 1;
  /* Both exchanges run on every rank; a rank that failed sends has 0. */
  int rc = MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me,
                         MPI_BYTE, s->node);
  if (rc == MPI_SUCCESS)
    rc = MPI_Allgather(&s->rank, 1, MPI_INT, ranks, 1, MPI_INT, s->node);
  if (rc != MPI_SUCCESS && e->status == SLABFEED_OK)
    sf__fail_mpi(e, rc, "MPI_Allgather (residency: IPC handles)");
  for (int k = 0; k < s->node_size && e->status == SLABFEED_OK; k++) {
    if (k == s->node_rank || !all[k].has)
      continue;
    if (sf__cudart_enable_peer(all[k].device, e) ||
        sf__cudart_ipc_open(&r->mapped[k], all[k].h, e))
      break;
    r->nmapped++;
    r->dpeer[ranks[k]] = r->mapped[k];
  }
  if (e->status == SLABFEED_OK && sf__inject("device.ipc", s->rank))
    sf__fail(e, SLABFEED_ERR_CUDA, "injected failure at stage 'device.ipc'");
  if (e->status != SLABFEED_OK) {
    char cause[SF_ERRLEN];
    snprintf(cause, sizeof cause, "%s", e->msg);
    sf__fail(e, e->status,
             "rank %d: mapping the node's slabs in GPU memory over CUDA "
             "IPC: %s",
             s->rank, cause);
  }
  return e->status;
}

int sf__resident_may_choose_device(const sf__config *cfg, const sf__store *s)
{
  /* A tiled pass reads each voxel about once (((T + 2P) / T)^3 times):
   * for one rank on its node, host memory costs less than the fill. Where
   * several ranks share one node, each would register the node's whole
   * window with CUDA (and unregister it at close), while the staged fill
   * takes every slab from the file straight to its GPU with no window at
   * all (docs/DECISIONS.md, "Device residency for passes of several
   * ranks"). The same on every rank. */
  const slabfeed_residency want = cfg->pub.residency;
  return want == SLABFEED_RESIDENCY_DEVICE ||
         (want == SLABFEED_RESIDENCY_AUTO &&
          (cfg->pub.tile == 0 || (s->nodes == 1 && s->node_size > 1)));
}

slabfeed_status sf__resident_choose(sf__resident *r, const sf__config *cfg,
                                    sf__store *s, int device, sf__err *e)
{
  r->resided = 1;
  const slabfeed_residency want = cfg->pub.residency;
  r->name = want == SLABFEED_RESIDENCY_DEVICE ? "device" : "auto";
  if (!sf__resident_may_choose_device(cfg, s)) {
    snprintf(r->how, sizeof r->how, "%s",
             want == SLABFEED_RESIDENCY_HOST
                 ? "host shared memory (residency host), crops over the "
                   "host-to-device link"
                 : "host shared memory (residency auto: a tiled pass of "
                   "one rank per node reads each voxel about once, so "
                   "copying the slabs to the GPU first would cost more than "
                   "it saves; --residency device forces it)");
    return SLABFEED_OK;
  }
  sf__gpu_share *all = calloc((size_t)s->node_size, sizeof *all);
  if (all == NULL)
    sf__fail(e, SLABFEED_ERR_NOMEM, "residency: the node's GPU table");
  if (sf__agree(s->comm, e) != SLABFEED_OK) {
    free(all);
    return e->status;
  }
  char why[224] = "";
  const int ok = local_verdict(cfg, s, device, all, why, sizeof why, r->fit,
                               sizeof r->fit, e);
  free(all);
  if (sf__agree(s->comm, e) != SLABFEED_OK)
    return e->status;
  if (!agree_verdict(s, ok, why, sizeof why, e)) {
    if (e->status != SLABFEED_OK)
      return e->status;
    if (want == SLABFEED_RESIDENCY_DEVICE)
      return sf__fail(e, SLABFEED_ERR_ARG,
                      "residency device: the slabs cannot be held in GPU "
                      "memory: %s",
                      why);
    snprintf(r->how, sizeof r->how, "host shared memory (residency auto: %s)",
             why);
    return SLABFEED_OK;
  }
  /* Device, on every rank (close is collective over the node from here
   * on). */
  r->chosen = 1;
  return SLABFEED_OK;
}

slabfeed_status sf__resident_open(sf__resident *r, sf__store *s, int device,
                                  cudaStream_t copy, int host_unread,
                                  sf__err *e)
{
  if (!r->chosen)
    return SLABFEED_OK;
  /* The copy (unless staged), then the node's mappings, then a staged
   * copy's rest, each agreed. */
  const size_t n = (size_t)s->node_size;
  r->dpeer = calloc((size_t)s->size, sizeof *r->dpeer);
  r->mapped = calloc(n, sizeof *r->mapped);
  ipc_info *ipc = calloc(n, sizeof *ipc);
  int *ranks = calloc(n, sizeof *ranks);
  if (r->dpeer == NULL || r->mapped == NULL || ipc == NULL || ranks == NULL)
    sf__fail(e, SLABFEED_ERR_NOMEM, "residency: the device segment tables");
  else if (e->status == SLABFEED_OK && !r->staged)
    fill(r, s, copy, e);
  if (sf__agree(s->comm, e) == SLABFEED_OK) {
    r->dpeer[s->rank] = r->own;
    if (s->node_size > 1)
      map_node(r, s, device, ipc, ranks, e);
    if (sf__agree(s->comm, e) == SLABFEED_OK && r->staged) {
      fill_rest(r, s, copy, e);
      sf__agree(s->comm, e);
    }
  }
  free(ipc);
  free(ranks);
  if (e->status != SLABFEED_OK)
    return e->status;
  s->dpeer = r->dpeer;
  r->on = 1;
  /* Every piece of the node is read from device memory now (the device
   * sources come first: source.h), and no other node reads this segment:
   * its host pages go back to the system. Each rank its own; the copies
   * were agreed above, so no rank reads a host segment any more. A staged
   * copy never had host pages. */
  const double gb = (double)r->bytes / 1e9;
  char host[160] = "; host copy kept: other nodes read it over MPI";
  if (r->staged) {
    r->released = r->bytes;
    snprintf(host, sizeof host,
             "; read from the file through 2 x %.0f MB of pinned staging, no "
             "host copy; the planes read by other ranks copied GPU to GPU "
             "in %.3f s",
             (double)r->sink.floats * sizeof(float) / 1e6, r->rest_s);
  } else if (host_unread) {
    r->released = sf__release_pages(s->base, (uint64_t)s->bytes);
    snprintf(host, sizeof host, "; host copy given back: %.2f GB",
             (double)r->released / 1e9);
  }
  snprintf(r->how, sizeof r->how,
           "GPU memory (residency %s: %s; this rank's %.2f GB filled in "
           "%.2f s = %.2f GB/s; %d of the node's other slabs mapped over "
           "CUDA IPC%s)",
           r->name, r->fit, gb, r->fill_s, r->fill_s > 0 ? gb / r->fill_s : 0.0,
           r->nmapped, host);
  return SLABFEED_OK;
}

void sf__resident_close(sf__resident *r, sf__store *s)
{
  if (!r->resided)
    return;
  if (s->dpeer == r->dpeer)
    s->dpeer = NULL;
  for (int k = 0; r->mapped != NULL && k < s->node_size; k++)
    sf__cudart_ipc_close(r->mapped[k]);
  /* The node's ranks may read this rank's copy until they have closed
   * theirs: every rank's streams drained before it came here. */
  if (r->chosen && s->node_size > 1)
    MPI_Barrier(s->node);
  sf__err ignored;
  sf__err_clear(&ignored);
  if (r->stream != NULL) /* a staged fill left before its end */
    sf__resident_stage_end(r, &ignored);
  sf__cudart_free(r->own);
  free(r->mapped);
  free(r->dpeer);
  memset(r, 0, sizeof *r);
}
