#include "errors.h"

#include <stdio.h>
#include <string.h>

const char *sf_strerror(sf_status s)
{
  switch (s) {
#define SF_STATUS_CASE(name, value, text)                                      \
  case name:                                                                   \
    return text;
    SF_STATUS_MAP(SF_STATUS_CASE)
#undef SF_STATUS_CASE
  }
  return "unknown status";
}

unsigned sf_version(void)
{
  return SLABFEED_VERSION_NUMBER;
}

const char *sf_version_string(void)
{
  return SLABFEED_VERSION_STRING;
}

void sf_err_clear(sf_err *e)
{
  e->status = SF_OK;
  e->agreed = 0;
  e->msg[0] = '\0';
}

sf_status sf_fail(sf_err *e, sf_status st, const char *fmt, ...)
{
  if (e->status != SF_OK)
    return st;
  e->status = st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
  return st;
}

sf_status sf_fail_mpi(sf_err *e, int mpi_rc, const char *what)
{
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS)
    snprintf(text, sizeof text, "MPI error code %d", mpi_rc);
  return sf_fail(e, SF_ERR_MPI, "%s failed: %s", what, text);
}

/* Agreement: MINLOC over (failed ? rank : size) finds the lowest failing
 * rank, which then broadcasts its status and message. */
sf_status sf_agree(MPI_Comm comm, sf_err *e)
{
  int rank, size;
  if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS ||
      MPI_Comm_size(comm, &size) != MPI_SUCCESS)
    return sf_fail(e, SF_ERR_MPI, "MPI_Comm_rank/size failed in sf_agree");
  int mine = e->status != SF_OK ? rank : size;
  int first = size;
  if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
    return sf_fail(e, SF_ERR_MPI, "MPI_Allreduce failed in sf_agree");
  if (first == size)
    return SF_OK;
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
    return sf_fail(e, SF_ERR_MPI, "MPI_Bcast failed in sf_agree");
  e->status = (sf_status)pkt.status;
  e->agreed = 1;
  memcpy(e->msg, pkt.msg, sizeof e->msg);
  e->msg[sizeof e->msg - 1] = '\0';
  return e->status;
}

void sf_err_copy(const sf_err *e, char *buf, size_t len)
{
  if (buf == NULL || len == 0)
    return;
  snprintf(buf, len, "%s", e->msg);
}
