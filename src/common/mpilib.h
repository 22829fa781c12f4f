/* Which MPI library the process runs on, for the few places where
 * slabfeed must avoid a pattern one library gets wrong or name the setting
 * of the library actually in use. From MPI_Get_library_version, which any
 * thread may call before or after MPI_Init. */
#ifndef SF_MPILIB_H
#define SF_MPILIB_H

#include <stddef.h>

typedef enum {
  SF__MPILIB_OTHER = 0,
  SF__MPILIB_OPEN_MPI = 1, /* Open MPI (and its derivatives that say so) */
  SF__MPILIB_MPICH = 2     /* MPICH and its derivatives: HPE Cray MPICH,
                              Intel MPI, MVAPICH */
} sf__mpilib_family;

/* The family of the MPI library in use. */
sf__mpilib_family sf__mpilib(void);

/* The library's name and version, up to the first comma or line end
 * ("Open MPI v4.1.4",
 * "MPICH Version: 4.0.2") into buf; returns buf. */
const char *sf__mpilib_name(char *buf, size_t len);

#endif
