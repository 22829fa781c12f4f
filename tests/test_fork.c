/* A forked child cannot use a loader of its parent: every call returns
 * SLABFEED_ERR_FORKED with a message saying why; the parent goes on. */
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  make_file("fork.h5", 8, 8, 8, SLABFEED_LAYOUT_CF, 0, 0, 0);
  slabfeed_config c;
  slabfeed_config_init(&c);
  c.path = "fork.h5";
  c.input = "Nbody";
  c.crop[0] = c.crop[1] = c.crop[2] = 4;
  char err[1024];
  slabfeed_loader *l = NULL;
  CHECK(slabfeed_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SLABFEED_OK,
        "open: %s", err);
  slabfeed_batch b = SLABFEED_BATCH_INIT;
  CHECK(slabfeed_next(l, &b, NULL) == SLABFEED_OK, "next before fork");
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    /* Child: no MPI here. Exit code bits name the failed checks. */
    int bad = 0;
    slabfeed_stats st = SLABFEED_STATS_INIT;
    bad |= (slabfeed_next(l, &b, NULL) != SLABFEED_ERR_FORKED) << 0;
    bad |= (strstr(slabfeed_last_error(l), "fork") == NULL) << 1;
    bad |= (slabfeed_seek(l, 0, 0) != SLABFEED_ERR_FORKED) << 2;
    bad |= (slabfeed_stats_get(l, &st) != SLABFEED_ERR_FORKED) << 3;
    slabfeed_close(l); /* must not touch MPI: a no-op in the child */
    if (bad == 0)
      printf("child: slabfeed_next -> %s: %s\n",
             slabfeed_strerror(SLABFEED_ERR_FORKED), slabfeed_last_error(l));
    fflush(stdout);
    _exit(bad);
  }
  CHECK(pid > 0, "fork failed");
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "child checks failed: 0x%x",
        WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  for (int i = 0; i < 3; i++)
    CHECK(slabfeed_next(l, &b, NULL) == SLABFEED_OK, "parent goes on: %s",
          slabfeed_last_error(l));
  slabfeed_close(l);
  return check_finish("mpi.fork");
}
