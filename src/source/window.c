/* The sources of the node's slabs, read in place: the rank's own segment
 * and the other segments of its node, in the node's shared-memory window
 * (host memory, registered with CUDA by the GPU back end) or, with
 * residency device, in GPU memory (the rank's own copy, the node's other
 * copies mapped over CUDA IPC: store.h's dpeer). */
#include "source/source.h"

/* The device copy of rank r's segment in this process, NULL when none. */
static const char *device_segment(const sf__store *s, int r)
{
  return s->dpeer != NULL ? s->dpeer[r] : NULL;
}

static int serves_dev_own(const sf__store *s, const sf__piece *p)
{
  return p->src == s->rank && device_segment(s, p->src) != NULL;
}

static int serves_dev_node(const sf__store *s, const sf__piece *p)
{
  return device_segment(s, p->src) != NULL;
}

static int serves_own(const sf__store *s, const sf__piece *p)
{
  return p->src == s->rank && sf__store_segment(s, p->src, 0) != NULL;
}

static int serves_node(const sf__store *s, const sf__piece *p)
{
  return sf__store_segment(s, p->src, 0) != NULL;
}

/* Dataset d's segment of the holder from the piece's first plane (q) on,
 * in the plane size of the piece's volume (store.h), the piece at its
 * first row and column in that volume. */
static void window_view(const sf__store *s, int d, const sf__piece *p,
                        const float *landed, sf__view *v)
{
  (void)landed;
  int64_t yx[2];
  sf__store_pitch(s, p->src, p->q, yx);
  /* A dataset of scale f: f x the rows and columns, f^3 x the offsets;
   * the view is of the piece scaled (sf__piece_scale). */
  const int64_t f = s->scale[d], k = s->cube[d];
  *v = (sf__view){sf__store_segment(s, p->src, d) +
                      k * sf__store_at(s, p->src, p->q),
                  SF__MEM_HOST,
                  k * sf__store_chan(s, p->src),
                  f * yx[0],
                  f * yx[1],
                  {0, f * p->y, f * p->x}};
}

/* The same piece in the holder's device copy, whose layout is its host
 * segment's: the window's view moved to the device address. */
static void device_view(const sf__store *s, int d, const sf__piece *p,
                        const float *landed, sf__view *v)
{
  window_view(s, d, p, landed, v);
  const char *host = s->peer[p->src];
  v->base = (const float *)(device_segment(s, p->src) +
                            ((const char *)v->base - host));
  v->mem = SF__MEM_DEVICE;
}

const sf__source sf__source_dev_own = {"device own", 0,
                                       offsetof(slabfeed_stats, bytes_own),
                                       serves_dev_own, device_view};

const sf__source sf__source_dev_node = {"device node", 0,
                                        offsetof(slabfeed_stats, bytes_node),
                                        serves_dev_node, device_view};

const sf__source sf__source_own = {
    "own", 0, offsetof(slabfeed_stats, bytes_own), serves_own, window_view};

const sf__source sf__source_node = {
    "node", 0, offsetof(slabfeed_stats, bytes_node), serves_node, window_view};
