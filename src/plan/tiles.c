#include "plan/tiles.h"

void sf__tiles_init(sf__tiles *t, const int64_t shape[3],
                    const int64_t region[6], int64_t T, int64_t P)
{
  t->T = T;
  t->P = P;
  t->count = 1;
  for (int a = 0; a < 3; a++) {
    t->shape[a] = shape[a];
    t->region[a] = region[a];
    t->region[3 + a] = region[3 + a];
    t->n[a] = (region[3 + a] + T - 1) / T;
    t->count *= (uint64_t)t->n[a];
  }
}

void sf__tiles_at(const sf__tiles *t, uint64_t g, int64_t out[9])
{
  const int64_t idx[3] = {(int64_t)(g / (uint64_t)(t->n[1] * t->n[2])),
                          (int64_t)(g / (uint64_t)t->n[2] % (uint64_t)t->n[1]),
                          (int64_t)(g % (uint64_t)t->n[2])};
  for (int a = 0; a < 3; a++) {
    const int64_t d = t->region[3 + a], own = idx[a] * t->T;
    const int64_t start = own < d - t->T ? own : d - t->T;
    out[a] = (t->region[a] + start) % t->shape[a];
    out[3 + a] = own - start;
    out[6 + a] = d - own < t->T ? d - own : t->T;
  }
}

void sf__tiles_input_origin(const sf__tiles *t, uint64_t g, int64_t o[3])
{
  int64_t at[9];
  sf__tiles_at(t, g, at);
  for (int a = 0; a < 3; a++)
    o[a] = ((at[a] - t->P) % t->shape[a] + t->shape[a]) % t->shape[a];
}
