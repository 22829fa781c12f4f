/* Test-only fault injection for the apps (tests/test_apps_fail.sh), loaded
 * with LD_PRELOAD into one rank: the SF_INJECT_AT-th call (1-based) of the
 * public function named by SF_INJECT_FUNC fails with SLABFEED_ERR_IO, and
 * from then on the library's messages (slabfeed_last_error,
 * slabfeed_reader_error) read "injected failure of FUNC". The apps call
 * the shared library through its dynamic symbols, so these definitions
 * are found first; the real functions come from dlsym(RTLD_NEXT). Covered:
 * slabfeed_next, slabfeed_copy_to_host, slabfeed_reader_crop,
 * slabfeed_reader_crop_values, and slabfeed_writer_put, whose failure is a
 * refusal (SLABFEED_ERR_ARG, nothing stored, the writer not failed: what
 * put does with a tensor or batch it does not take; its message reads
 * "injected refusal of slabfeed_writer_put" in
 * slabfeed_writer_last_error). */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slabfeed_tools.h"

static char injected[128]; /* "" until the failure was injected */

/* The real definition of `name` (the next one after this library). */
static void *real(const char *name)
{
  void *p = dlsym(RTLD_NEXT, name);
  if (p == NULL) {
    fprintf(stderr, "apps_inject: no %s\n", name);
    abort();
  }
  return p;
}

/* Whether this call of `name` is the one to fail (counts its calls). */
static int fail_now(const char *name, long *calls)
{
  const char *f = getenv("SF_INJECT_FUNC"), *at = getenv("SF_INJECT_AT");
  if (f == NULL || strcmp(f, name) != 0)
    return 0;
  if (++*calls != (at != NULL ? atol(at) : 1))
    return 0;
  snprintf(injected, sizeof injected, "injected failure of %s", name);
  return 1;
}

/* slabfeed_next, failing once on request. */
slabfeed_status slabfeed_next(slabfeed_loader *l, slabfeed_batch *out,
                              void *stream)
{
  static long calls;
  slabfeed_status (*fn)(slabfeed_loader *, slabfeed_batch *, void *);
  void *p = real("slabfeed_next");
  memcpy(&fn, &p, sizeof fn);
  return fail_now("slabfeed_next", &calls) ? SLABFEED_ERR_IO
                                           : fn(l, out, stream);
}

/* slabfeed_copy_to_host, failing once on request. */
slabfeed_status slabfeed_copy_to_host(slabfeed_loader *l,
                                      const slabfeed_tensor *t, void *dst)
{
  static long calls;
  slabfeed_status (*fn)(slabfeed_loader *, const slabfeed_tensor *, void *);
  void *p = real("slabfeed_copy_to_host");
  memcpy(&fn, &p, sizeof fn);
  return fail_now("slabfeed_copy_to_host", &calls) ? SLABFEED_ERR_IO
                                                   : fn(l, t, dst);
}

/* slabfeed_reader_crop, failing once on request. */
slabfeed_status slabfeed_reader_crop(slabfeed_reader *r, const char *dataset,
                                     slabfeed_file_layout layout,
                                     const int64_t origin[3],
                                     const int64_t crop[3], int symmetry,
                                     int ngroups, const int (*groups)[3],
                                     slabfeed_dtype dtype,
                                     slabfeed_out_layout out_layout, void *out)
{
  static long calls;
  slabfeed_status (*fn)(slabfeed_reader *, const char *, slabfeed_file_layout,
                        const int64_t *, const int64_t *, int, int,
                        const int(*)[3], slabfeed_dtype, slabfeed_out_layout,
                        void *);
  void *p = real("slabfeed_reader_crop");
  memcpy(&fn, &p, sizeof fn);
  if (fail_now("slabfeed_reader_crop", &calls))
    return SLABFEED_ERR_IO;
  return fn(r, dataset, layout, origin, crop, symmetry, ngroups, groups, dtype,
            out_layout, out);
}

/* slabfeed_reader_crop_values (what slabfeed-check calls), failing once on
 * request. */
slabfeed_status slabfeed_reader_crop_values(
    slabfeed_reader *r, const char *dataset, slabfeed_file_layout layout,
    const int64_t origin[3], const int64_t crop[3], int symmetry, int ngroups,
    const int (*groups)[3], int nnorm, const slabfeed_norm *norm,
    const float *aug, slabfeed_dtype dtype, slabfeed_out_layout out_layout,
    void *out)
{
  static long calls;
  slabfeed_status (*fn)(
      slabfeed_reader *, const char *, slabfeed_file_layout, const int64_t *,
      const int64_t *, int, int, const int(*)[3], int, const slabfeed_norm *,
      const float *, slabfeed_dtype, slabfeed_out_layout, void *);
  void *p = real("slabfeed_reader_crop_values");
  memcpy(&fn, &p, sizeof fn);
  if (fail_now("slabfeed_reader_crop_values", &calls))
    return SLABFEED_ERR_IO;
  return fn(r, dataset, layout, origin, crop, symmetry, ngroups, groups, nnorm,
            norm, aug, dtype, out_layout, out);
}

/* slabfeed_writer_put, refusing once on request: the real put is not
 * called, so the writer keeps no failure (as for a refused tensor). */
slabfeed_status slabfeed_writer_put(slabfeed_writer *w, const slabfeed_batch *b,
                                    const slabfeed_tensor *out,
                                    slabfeed_out_layout layout, int device,
                                    void *stream)
{
  static long calls;
  slabfeed_status (*fn)(slabfeed_writer *, const slabfeed_batch *,
                        const slabfeed_tensor *, slabfeed_out_layout, int,
                        void *);
  void *p = real("slabfeed_writer_put");
  memcpy(&fn, &p, sizeof fn);
  if (fail_now("slabfeed_writer_put", &calls)) {
    snprintf(injected, sizeof injected,
             "injected refusal of slabfeed_writer_put");
    return SLABFEED_ERR_ARG;
  }
  return fn(w, b, out, layout, device, stream);
}

/* slabfeed_writer_last_error: the injected message once there is one. */
const char *slabfeed_writer_last_error(const slabfeed_writer *w)
{
  const char *(*fn)(const slabfeed_writer *);
  void *p = real("slabfeed_writer_last_error");
  memcpy(&fn, &p, sizeof fn);
  return injected[0] != '\0' ? injected : fn(w);
}

/* slabfeed_last_error: the injected message once there is one. */
const char *slabfeed_last_error(const slabfeed_loader *l)
{
  const char *(*fn)(const slabfeed_loader *);
  void *p = real("slabfeed_last_error");
  memcpy(&fn, &p, sizeof fn);
  return injected[0] != '\0' ? injected : fn(l);
}

/* slabfeed_reader_error: the injected message once there is one. */
const char *slabfeed_reader_error(const slabfeed_reader *r)
{
  const char *(*fn)(const slabfeed_reader *);
  void *p = real("slabfeed_reader_error");
  memcpy(&fn, &p, sizeof fn);
  return injected[0] != '\0' ? injected : fn(r);
}
