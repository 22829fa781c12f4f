#include "common/inject.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sf__inject(const char *stage, int rank)
{
  const char *v = getenv(SF_ENV_TEST_FAIL);
  if (v == NULL || v[0] == '\0')
    return 0;
  const char *at = strchr(v, '@');
  const size_t n = at != NULL ? (size_t)(at - v) : strlen(v);
  if (n != strlen(stage) || strncmp(v, stage, n) != 0)
    return 0;
  return at == NULL || atoi(at + 1) == rank;
}
