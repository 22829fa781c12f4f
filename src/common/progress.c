#include "common/progress.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Seconds of the monotonic clock. */
static double now(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int sf__progress_env(void)
{
  const char *v = getenv("SLABFEED_PROGRESS");
  if (v != NULL && strcmp(v, "on") == 0)
    return SLABFEED_PROGRESS_ON;
  if (v != NULL && strcmp(v, "off") == 0)
    return SLABFEED_PROGRESS_OFF;
  return SLABFEED_PROGRESS_AUTO;
}

void sf__progress_begin(sf__progress *p, int mode, int rank, const char *what,
                        double total, double scale)
{
  memset(p, 0, sizeof *p);
  const double all = total * (scale > 0 ? scale : 1);
  if (rank != 0 || mode == SLABFEED_PROGRESS_OFF || total <= 0 ||
      (mode != SLABFEED_PROGRESS_ON && all < SF_PROGRESS_MIN))
    return;
  p->on = 1;
  p->tty = isatty(STDERR_FILENO);
  snprintf(p->what, sizeof p->what, "%s", what);
  p->total = total;
  p->scale = scale > 0 ? scale : 1;
  p->t0 = p->shown = now();
}

void sf__progress_add(sf__progress *p, double n)
{
  if (!p->on)
    return;
  p->done += n;
  const double t = now();
  if (!p->tty || t - p->shown < 0.5)
    return;
  p->shown = t;
  const double gb = p->scale / 1e9, f = p->done / p->total;
  fprintf(stderr, "\rslabfeed: %s: %3.0f%% (%.2f of %.2f GB, %.2f GB/s)   ",
          p->what, 100 * (f < 1 ? f : 1), p->done * gb, p->total * gb,
          t > p->t0 ? p->done * gb / (t - p->t0) : 0.0);
  fflush(stderr);
}

void sf__progress_end(sf__progress *p, int ok)
{
  if (!p->on)
    return;
  const double dt = now() - p->t0, gb = p->scale / 1e9;
  if (ok)
    fprintf(stderr, "%sslabfeed: %s: done, %.2f GB in %.1f s (%.2f GB/s)%s\n",
            p->tty ? "\r" : "", p->what, p->total * gb, dt,
            dt > 0 ? p->total * gb / dt : 0.0, p->tty ? "        " : "");
  else
    fprintf(stderr, "%sslabfeed: %s: failed after %.1f s%s\n",
            p->tty ? "\r" : "", p->what, dt, p->tty ? "                " : "");
  fflush(stderr);
  p->on = 0;
}
