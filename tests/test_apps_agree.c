/* The apps' agreement point (apps/cli.c, cli_agree and cli_note) on P
 * ranks: nobody failed (nothing changes), each single rank failing, two
 * ranks failing with different statuses (the lowest rank wins), a long
 * message and a short buffer (truncated, terminated), and cli_note keeping
 * the first failure. Every rank checks what it got (check.h); rank 0
 * prints "apps.agree: PASS" when all ranks passed. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cli.h"

/* Runs one agreement where ranks in `failing` (a bit mask) fail with
 * status SLABFEED_ERR_IO + rank; checks every rank got the lowest one. */
static void one_round(int rank, int size, unsigned failing)
{
  slabfeed_status st = SLABFEED_OK;
  char msg[CLI_ERRLEN] = "untouched";
  if (failing >> rank & 1u) {
    st = (slabfeed_status)(SLABFEED_ERR_IO + rank % 8);
    snprintf(msg, sizeof msg, "boom on %d", rank);
  }
  const int got = cli_agree(MPI_COMM_WORLD, &st, msg, sizeof msg);
  int first = -1;
  for (int r = size - 1; r >= 0; r--)
    if (failing >> r & 1u)
      first = r;
  char want[64];
  if (first < 0) {
    CHECK_EQ(got, 0, "no failure: returns 0");
    CHECK_EQ(st, SLABFEED_OK, "no failure: status unchanged");
    CHECK(strcmp(msg, "untouched") == 0, "no failure: msg unchanged: '%s'",
          msg);
    return;
  }
  snprintf(want, sizeof want, "rank %d: boom on %d", first, first);
  CHECK_EQ(got, 1, "a failure: returns 1");
  CHECK_EQ(st, (slabfeed_status)(SLABFEED_ERR_IO + first % 8),
           "the lowest failing rank's status");
  CHECK(strcmp(msg, want) == 0, "the lowest failing rank's message: '%s'", msg);
}

/* Runs the cases on MPI_COMM_WORLD. */
int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  one_round(rank, size, 0);
  for (int r = 0; r < size && r < 16; r++)
    one_round(rank, size, 1u << r);
  if (size >= 2)
    one_round(rank, size, 1u << (size - 1) | 1u << (size - 2));
  one_round(rank, size, (1u << (size < 16 ? size : 16)) - 1);

  /* A long message into a short buffer on every rank: cut, terminated. */
  slabfeed_status st = SLABFEED_OK;
  char small[12];
  char longer[CLI_ERRLEN];
  memset(longer, 'x', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  if (rank == size - 1) {
    cli_note(&st, small, sizeof small, SLABFEED_ERR_NOMEM, "%s", longer);
    CHECK_EQ(strlen(small), sizeof small - 1, "cli_note truncates");
  } else {
    snprintf(small, sizeof small, "ok");
  }
  cli_agree(MPI_COMM_WORLD, &st, small, sizeof small);
  char want[64];
  snprintf(want, sizeof want, "rank %d: xxxxxxxxxxxxxxxx", size - 1);
  want[sizeof small - 1] = '\0';
  CHECK(st == SLABFEED_ERR_NOMEM && strcmp(small, want) == 0,
        "a long message is cut to the buffer: status %d, '%s'", st, small);

  /* cli_note keeps the first failure. */
  slabfeed_status s2 = SLABFEED_OK;
  char m2[64] = "";
  cli_note(&s2, m2, sizeof m2, SLABFEED_ERR_IO, "first %d", 1);
  cli_note(&s2, m2, sizeof m2, SLABFEED_ERR_NOMEM, "second %d", 2);
  CHECK(s2 == SLABFEED_ERR_IO && strcmp(m2, "first 1") == 0,
        "cli_note keeps the first failure: status %d, '%s'", s2, m2);

  return check_finish("apps.agree");
}
