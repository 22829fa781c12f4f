#include "plan/residency.h"

int sf__residency_fits(const sf__gpu_share *all, int n, int device,
                       uint64_t budget_opt, uint64_t *share, int *sharing,
                       uint64_t *budget)
{
  uint64_t bytes = 0, free_min = UINT64_MAX;
  int k = 0;
  for (int i = 0; i < n; i++)
    if (all[i].device == device) {
      bytes += all[i].bytes > 0 ? (uint64_t)all[i].bytes : 0;
      free_min = all[i].free_b < free_min ? all[i].free_b : free_min;
      k++;
    }
  *share = bytes;
  *sharing = k;
  *budget = budget_opt > 0 ? budget_opt : k > 0 ? free_min / 2 : 0;
  return bytes <= *budget;
}
