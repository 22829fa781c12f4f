/* Test-only failure injection. With SLABFEED_TEST_FAIL=<stage>@<rank> in
 * the environment, sf__inject(stage, rank) is true on that rank at that
 * stage (once per call site and call), so tests can make exactly one rank
 * fail at every collective stage and check that all ranks agree on the
 * error in bounded time. Unset (always, outside tests) it costs one
 * getenv per stage of open; it is never consulted in slabfeed_next. */
#ifndef SF_INJECT_H
#define SF_INJECT_H

#define SF_ENV_TEST_FAIL "SLABFEED_TEST_FAIL"

/* 1 when SLABFEED_TEST_FAIL names `stage` and `rank`, else 0. */
int sf__inject(const char *stage, int rank);

#endif
