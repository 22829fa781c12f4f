#include "common/mpilib.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

/* The library's version string, "" when MPI cannot say. */
static void version(char v[MPI_MAX_LIBRARY_VERSION_STRING])
{
  int n = 0;
  if (MPI_Get_library_version(v, &n) != MPI_SUCCESS)
    n = 0;
  v[n < MPI_MAX_LIBRARY_VERSION_STRING ? n
                                       : MPI_MAX_LIBRARY_VERSION_STRING - 1] =
      '\0';
}

sf__mpilib_family sf__mpilib(void)
{
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  version(v);
  if (strstr(v, "Open MPI") != NULL)
    return SF__MPILIB_OPEN_MPI;
  if (strstr(v, "MPICH") != NULL || strstr(v, "Intel(R) MPI") != NULL ||
      strstr(v, "MVAPICH") != NULL)
    return SF__MPILIB_MPICH;
  return SF__MPILIB_OTHER;
}

const char *sf__mpilib_name(char *buf, size_t len)
{
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  version(v);
  const char *s = v;
  while (*s == ' ' || *s == '\t')
    s++;
  const size_t n = strcspn(s, ",\r\n");
  snprintf(buf, len, "%.*s", (int)n, s[0] != '\0' ? s : "unknown MPI");
  for (char *c = buf; *c != '\0'; c++)
    if (*c == '\t')
      *c = ' ';
  return buf;
}
