#include "common/errors.h"

#include <stdio.h>
#include <string.h>

const char *slabfeed_strerror(slabfeed_status s)
{
  switch (s) {
#define SF_STATUS_CASE(name, value, text)                                      \
  case name:                                                                   \
    return text;
    SLABFEED_STATUS_MAP(SF_STATUS_CASE)
#undef SF_STATUS_CASE
  }
  return "unknown status";
}

const char *slabfeed_status_name(slabfeed_status s)
{
  switch (s) {
#define SF_STATUS_NAME(name, value, text)                                      \
  case name:                                                                   \
    return #name;
    SLABFEED_STATUS_MAP(SF_STATUS_NAME)
#undef SF_STATUS_NAME
  }
  return "SLABFEED_UNKNOWN";
}

unsigned slabfeed_version(void)
{
  return SLABFEED_VERSION_NUMBER;
}

const char *slabfeed_version_string(void)
{
  return SLABFEED_VERSION_STRING;
}

void sf__err_clear(sf__err *e)
{
  e->status = SLABFEED_OK;
  e->agreed = 0;
  e->msg[0] = '\0';
}

slabfeed_status sf__fail(sf__err *e, slabfeed_status st, const char *fmt, ...)
{
  if (e->status != SLABFEED_OK)
    return st;
  e->status = st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return st;
}

slabfeed_status sf__fail_mpi(sf__err *e, int mpi_rc, const char *what)
{
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS)
    snprintf(text, sizeof text, "MPI error code %d", mpi_rc);
  return sf__fail(e, SLABFEED_ERR_MPI, "%s failed: %s", what, text);
}

/* Agreement: MINLOC over (failed ? rank : size) finds the lowest failing
 * rank, which then broadcasts its status and message. */
slabfeed_status sf__agree(MPI_Comm comm, sf__err *e)
{
  int rank, size;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
      MPI_Comm_size(comm, &size) != MPI_SUCCESS)
    return sf__fail(e, SLABFEED_ERR_MPI,
                    "MPI_Comm_rank/size failed in sf__agree");
  int mine = e->status != SLABFEED_OK ? rank : size;
  int first = size;
  if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
    return sf__fail(e, SLABFEED_ERR_MPI, "MPI_Allreduce failed in sf__agree");
  if (first == size)
    return SLABFEED_OK;
  struct {
    int status;
    char msg[SF_ERRLEN];
  } pkt;
  if (rank == first && e->agreed) {
    pkt.status = (int)e->status;
    memcpy(pkt.msg, e->msg, sizeof pkt.msg);
  } else if (rank == first) {
    pkt.status = (int)e->status;
    const int n = snprintf(pkt.msg, sizeof pkt.msg, "rank %d: ", rank);
    memcpy(pkt.msg + n, e->msg, sizeof pkt.msg - (size_t)n - 1);
    pkt.msg[sizeof pkt.msg - 1] = '\0';
  }
  if (MPI_Bcast(&pkt, (int)sizeof pkt, MPI_BYTE, first, comm) != MPI_SUCCESS)
    return sf__fail(e, SLABFEED_ERR_MPI, "MPI_Bcast failed in sf__agree");
  e->status = (slabfeed_status)pkt.status;
  e->agreed = 1;
  memcpy(e->msg, pkt.msg, sizeof e->msg);
  e->msg[sizeof e->msg - 1] = '\0';
  return e->status;
}

void sf__err_copy(const sf__err *e, char *buf, size_t len)
{
  if (buf == NULL || len == 0)
    return;
  snprintf(buf, len, "%s", e->msg);
}

int sf__sized_write(void *dst, const void *src, size_t src_size, size_t min)
{
  size_t have;
  memcpy(&have, dst, sizeof have);
  if (have < min)
    return -1;
  const size_t n = have < src_size ? have : src_size;
  memcpy((char *)dst + sizeof have, (const char *)src + sizeof have,
         n - sizeof have);
  if (have > src_size)
    memset((char *)dst + src_size, 0, have - src_size);
  return 0;
}

void sf__sized_init(void *dst, size_t size, const void *defaults, size_t full)
{
  if (dst == NULL || size < sizeof(size_t))
    return;
  memcpy(dst, defaults, size < full ? size : full);
  if (size > full)
    memset((char *)dst + full, 0, size - full);
}
