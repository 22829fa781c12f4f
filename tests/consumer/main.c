/* Links against the installed library and checks the version agreement
 * between header and library, and the status table. */
#include <slabfeed.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
  if (slabfeed_version() != SLABFEED_VERSION_NUMBER ||
      strcmp(slabfeed_version_string(), SLABFEED_VERSION_STRING) != 0 ||
      strcmp(slabfeed_strerror(SLABFEED_ERR_FORKED),
             "loader used in a forked child process") != 0) {
    printf("consumer: FAIL\n");
    return 1;
  }
  printf("consumer: slabfeed %s found and linked\n", slabfeed_version_string());
  return 0;
}
