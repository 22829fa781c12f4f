#include "common/stats.h"

#include <string.h>

void sf__stats_init(sf__stats *s)
{
  pthread_mutex_init(&s->mu, NULL);
  memset(&s->total, 0, sizeof s->total);
  s->total.size = sizeof s->total;
}

void sf__stats_destroy(sf__stats *s)
{
  pthread_mutex_destroy(&s->mu);
}

void sf__stats_add(sf__stats *s, const slabfeed_stats *d)
{
  pthread_mutex_lock(&s->mu);
  slabfeed_stats *t = &s->total;
  t->batches += d->batches;
  t->samples += d->samples;
  t->bytes_own += d->bytes_own;
  t->bytes_node += d->bytes_node;
  t->bytes_remote += d->bytes_remote;
  t->bytes_out += d->bytes_out;
  t->t_read += d->t_read;
  t->t_plan += d->t_plan;
  t->t_gather += d->t_gather;
  t->t_h2d += d->t_h2d;
  t->t_transform += d->t_transform;
  t->t_wait += d->t_wait;
  t->slab_bytes += d->slab_bytes;
  t->staging_bytes += d->staging_bytes;
  t->remote_gets += d->remote_gets;
  t->remote_runs += d->remote_runs;
  t->device_slab_bytes += d->device_slab_bytes;
  t->slab_released_bytes += d->slab_released_bytes;
  t->t_open += d->t_open;
  t->t_open_context += d->t_open_context;
  t->t_open_backend += d->t_open_backend;
  t->t_open_register += d->t_open_register;
  if (d->loader_thread)
    t->loader_thread = d->loader_thread;
  /* The placement is set once, at open. */
  if (d->nodes > 0) {
    t->nodes = d->nodes;
    t->group_nodes = d->group_nodes;
    t->groups = d->groups;
    t->group = d->group;
    t->node_budget = d->node_budget;
    t->node_store_bytes = d->node_store_bytes;
    t->replica_bytes = d->replica_bytes;
  }
  pthread_mutex_unlock(&s->mu);
}

void sf__stats_read(sf__stats *s, slabfeed_stats *out)
{
  pthread_mutex_lock(&s->mu);
  *out = s->total;
  pthread_mutex_unlock(&s->mu);
}
