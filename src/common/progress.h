/* Progress of a long step (the open's slab read, the statistics pass, the
 * writer's close, the generator), printed by rank 0 alone on stderr: on a
 * terminal one line updated in place at most every half second, else
 * nothing until the step ends and one final line. A step counts bytes of
 * this rank's share (the ranks move through a collective step together,
 * so rank 0's share stands for all). */
#ifndef SF_PROGRESS_H
#define SF_PROGRESS_H

#include "slabfeed.h"

typedef struct sf__progress {
  int on;        /* this rank reports (rank 0, mode and size allow it) */
  int tty;       /* stderr is a terminal: the line is updated in place */
  char what[96]; /* "reading 'Nbody' and 'Hydro'" */
  double total;  /* bytes of this rank's share */
  double done;   /* of them, so far */
  double t0;     /* seconds (sf__now) at the start */
  double shown;  /* when the line was last written */
  double scale;  /* bytes of all ranks per byte of this rank's, for the
                    figures printed (1: this rank's only) */
} sf__progress;

/* Steps smaller than this (bytes of all ranks) are not reported in the
 * automatic mode. */
#define SF_PROGRESS_MIN 1e9

/* The mode of the functions that take no option (slabfeed_field_stats):
 * the environment's SLABFEED_PROGRESS, "auto" (the default), "on" or
 * "off" (anything else is "auto"). */
int sf__progress_env(void);

/* Starts a step of `total` bytes of this rank's share, `scale` x that of
 * all ranks. mode: the option (SLABFEED_PROGRESS_AUTO: rank 0, steps of
 * at least SF_PROGRESS_MIN bytes; _ON: rank 0, any step; _OFF: none).
 * Local; p is zeroed (off) for every rank but the reporting one. */
void sf__progress_begin(sf__progress *p, int mode, int rank, const char *what,
                        double total, double scale);

/* n more bytes done: on a terminal, the line is redrawn when half a second
 * has passed since the last. Local; a no-op when p is off. */
void sf__progress_add(sf__progress *p, double n);

/* Ends the step: the final line ("... done: X GB in T s (R GB/s)", or
 * "... failed" when ok is 0), replacing the updated one on a terminal.
 * Local; a no-op when p is off. */
void sf__progress_end(sf__progress *p, int ok);

#endif
