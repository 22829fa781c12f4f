/* Links against the installed library through the public header only.
 * Prints the library's version for run.cmake to compare with the build. */
#include <slabfeed.h>
#include <stdio.h>

int main(void)
{
  const char *ok = slabfeed_strerror(SLABFEED_OK);
  if (slabfeed_version() == 0 || !slabfeed_version_string() || !ok || !*ok) {
    printf("consumer: FAIL\n");
    return 1;
  }
  printf("consumer: slabfeed %s found and linked\n", slabfeed_version_string());
  return 0;
}
