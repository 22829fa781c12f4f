#include "common/sys.h"

#include <stdio.h>
#include <string.h>

uint64_t sf__meminfo(const char *key)
{
  FILE *f = fopen("/proc/meminfo", "r");
  if (f == NULL)
    return 0;
  char line[256];
  const size_t n = strlen(key);
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, key, n) == 0 && line[n] == ':' &&
        sscanf(line + n + 1, "%llu", &kb) == 1)
      break;
  fclose(f);
  return (uint64_t)kb * 1024;
}
