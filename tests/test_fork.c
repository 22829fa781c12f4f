/* A forked child cannot use a loader of its parent: every call returns
 * SF_ERR_FORKED with a message saying why; the parent goes on. */
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  make_file("fork.h5", 8, 8, 8, SF_LAYOUT_CF, 0, 0, 0);
  sf_config c;
  sf_config_init(&c);
  c.path = "fork.h5";
  c.input = "Nbody";
  c.crop[0] = c.crop[1] = c.crop[2] = 4;
  char err[1024];
  sf_loader *l = NULL;
  CHECK(sf_open(MPI_COMM_WORLD, &c, &l, err, sizeof err) == SF_OK, "open: %s",
        err);
  sf_batch b;
  CHECK(sf_next(l, &b, NULL) == SF_OK, "next before fork");
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    /* Child: no MPI here. Exit code bits name the failed checks. */
    int bad = 0;
    sf_stats st;
    bad |= (sf_next(l, &b, NULL) != SF_ERR_FORKED) << 0;
    bad |= (strstr(sf_last_error(l), "fork") == NULL) << 1;
    bad |= (sf_seek(l, 0, 0) != SF_ERR_FORKED) << 2;
    bad |= (sf_stats_get(l, &st) != SF_ERR_FORKED) << 3;
    sf_close(l); /* must not touch MPI: a no-op in the child */
    if (bad == 0)
      printf("child: sf_next -> %s: %s\n", sf_strerror(SF_ERR_FORKED),
             sf_last_error(l));
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
    CHECK(sf_next(l, &b, NULL) == SF_OK, "parent goes on: %s",
          sf_last_error(l));
  sf_close(l);
  return check_finish("mpi.fork");
}
