/* unit.residency: the fit rule of slabs resident in GPU memory
 * (plan/residency.h), without a GPU. The ranks of a node that use one GPU
 * add up on it; ranks on other GPUs do not count; the default budget is
 * half of the smallest free memory the sharing ranks saw; device_memory
 * replaces it; a GPU no rank uses fits with nothing on it; exactly at the
 * budget fits, one byte over does not. */
#include <stdio.h>

#include "check.h"
#include "plan/residency.h"

#define GB 1000000000ull

int main(int argc, char **argv)
{
  MPI_Init(&argc, &argv);
  /* Four ranks: 0 and 1 on GPU 0, 2 on GPU 1, 3 on GPU 0 (a third one). */
  const sf__gpu_share node[4] = {{0, 0, (int64_t)(10 * GB), 80 * GB},
                                 {1, 0, (int64_t)(12 * GB), 70 * GB},
                                 {2, 1, (int64_t)(30 * GB), 100 * GB},
                                 {3, 0, (int64_t)(9 * GB), 90 * GB}};
  uint64_t share = 0, budget = 0;
  int sharing = 0;
  int fits = sf__residency_fits(node, 4, 0, 0, &share, &sharing, &budget);
  CHECK(share == 31 * GB && sharing == 3 && budget == 35 * GB && fits,
        "GPU 0: share %llu (want 31 GB), %d ranks (3), budget %llu (35 GB: "
        "half the smallest free), fits %d",
        (unsigned long long)share, sharing, (unsigned long long)budget, fits);
  fits = sf__residency_fits(node, 4, 1, 0, &share, &sharing, &budget);
  CHECK(share == 30 * GB && sharing == 1 && budget == 50 * GB && fits,
        "GPU 1: share %llu, %d ranks, budget %llu, fits %d",
        (unsigned long long)share, sharing, (unsigned long long)budget, fits);
  fits = sf__residency_fits(node, 4, 0, 31 * GB, &share, &sharing, &budget);
  CHECK(budget == 31 * GB && fits, "device_memory exactly the share fits");
  fits = sf__residency_fits(node, 4, 0, 31 * GB - 1, &share, &sharing, &budget);
  CHECK(budget == 31 * GB - 1 && !fits, "one byte under the share: refused");
  fits = sf__residency_fits(node, 4, 1, 29 * GB, &share, &sharing, &budget);
  CHECK(!fits, "GPU 1 over an explicit budget: refused");
  fits = sf__residency_fits(node, 4, 5, 0, &share, &sharing, &budget);
  CHECK(share == 0 && sharing == 0 && budget == 0 && fits,
        "a GPU no rank uses: nothing on it, fits");
  /* One rank whose GPU reports little free memory sets the budget of all
   * the ranks sharing that GPU. */
  const sf__gpu_share low[2] = {{0, 0, (int64_t)(1 * GB), 60 * GB},
                                {1, 0, (int64_t)(1 * GB), 3 * GB}};
  fits = sf__residency_fits(low, 2, 0, 0, &share, &sharing, &budget);
  CHECK(budget == 1500000000ull && !fits,
        "budget %llu from the smaller free memory, fits %d",
        (unsigned long long)budget, fits);
  return check_finish("unit.residency");
}
