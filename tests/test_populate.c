/* mpi.populate: the page faults of touch_threads (common/sys.h). On
 * private memory and on an MPI-3 shared window of two ranks, at unaligned
 * starts and odd lengths, with 1 to 100 threads asked for, through
 * MADV_POPULATE_WRITE and through the page touches of older kernels
 * (SLABFEED_TEST_NO_POPULATE=1): every byte keeps its value, and a rank
 * reads the other's values through the window after it populated. The
 * automatic thread count stays within [1, SF_TOUCH_AUTO_MAX]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "check.h"
#include "common/sys.h"

static unsigned char pattern(size_t i)
{
  return (unsigned char)((i * 2654435761u) >> 13);
}

static int intact(const unsigned char *p, size_t n, size_t base)
{
  for (size_t i = 0; i < n; i++)
    if (p[i] != pattern(base + i))
      return 0;
  return 1;
}

static void private_memory(int touch)
{
  const size_t n = ((size_t)3 << 20) + 4093;
  unsigned char *buf = malloc(n + 64);
  CHECK(buf != NULL, "allocate %zu bytes", n);
  if (buf == NULL)
    return;
  for (size_t i = 0; i < n + 64; i++)
    buf[i] = pattern(i);
  const int threads[] = {1, 2, 3, 8, 64, 100};
  const size_t starts[] = {0, 7, 4096, 4095};
  for (size_t t = 0; t < sizeof threads / sizeof *threads; t++)
    for (size_t s = 0; s < sizeof starts / sizeof *starts; s++) {
      const int advised =
          sf__populate(buf + starts[s], n - starts[s] - 1, threads[t]);
      CHECK(!touch || !advised, "touches asked for, madvise reported");
      CHECK(intact(buf, n + 64, 0), "%s, %d threads, start %zu: a byte changed",
            touch ? "touches" : "madvise", threads[t], starts[s]);
    }
  CHECK(sf__populate(NULL, 10, 4) == 1 && sf__populate(buf, 0, 4) == 1,
        "nothing to populate is a success");
  free(buf);
}

static void shared_window(void)
{
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL,
                      &node);
  int nrank = 0, nsize = 1;
  MPI_Comm_rank(node, &nrank);
  MPI_Comm_size(node, &nsize);
  const size_t n = ((size_t)5 << 20) + 11;
  unsigned char *mine = NULL;
  MPI_Win win;
  CHECK(MPI_Win_allocate_shared((MPI_Aint)n, 1, MPI_INFO_NULL, node, &mine,
                                &win) == MPI_SUCCESS,
        "MPI_Win_allocate_shared");
  MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
  const int touch_n = sf__touch_threads(0, nsize);
  CHECK(touch_n >= 1 && touch_n <= SF_TOUCH_AUTO_MAX,
        "auto threads %d for %d node ranks", touch_n, nsize);
  CHECK(sf__touch_threads(5, nsize) == 5, "an explicit count is kept");
  sf__populate(mine, n, touch_n);
  for (size_t i = 0; i < n; i++)
    mine[i] = pattern(i + (size_t)nrank);
  sf__populate(mine + 1, n - 1, 3); /* populated pages again: kept */
  MPI_Win_sync(win);
  MPI_Barrier(node);
  MPI_Win_sync(win);
  const int peer = (nrank + 1) % nsize;
  MPI_Aint sz;
  int unit;
  unsigned char *theirs = NULL;
  MPI_Win_shared_query(win, peer, &sz, &unit, &theirs);
  CHECK(sz == (MPI_Aint)n && theirs != NULL && intact(theirs, n, (size_t)peer),
        "rank %d: node rank %d's window after it populated", rank, peer);
  MPI_Win_unlock_all(win);
  MPI_Win_free(&win);
  MPI_Comm_free(&node);
}

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  private_memory(0);
  setenv("SLABFEED_TEST_NO_POPULATE", "1", 1);
  private_memory(1);
  shared_window();
  unsetenv("SLABFEED_TEST_NO_POPULATE");
  shared_window();
  return check_finish("mpi.populate");
}
