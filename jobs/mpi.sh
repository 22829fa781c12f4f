# shellcheck shell=bash
# Sourced (not run) by the jobs/ scripts that start MPI themselves with
# mpirun/mpiexec (the Slurm scripts use srun, which fits any MPI built for
# Slurm). Picks the build for SLABFEED_MPI as tools/build does, and the
# launcher that build was configured with:
#   sf_build_dir        prints build (SLABFEED_MPI=openmpi, the default) or
#                       build-mpich (SLABFEED_MPI=mpich); SLABFEED_BUILD_DIR
#                       overrides it
#   sf_launcher DIR     sets the array SF_MPIRUN: the mpiexec in DIR's
#                       CMakeCache.txt (CMake's MPIEXEC_EXECUTABLE; `mpirun`
#                       where there is none), and --oversubscribe when it is
#                       Open MPI's (more ranks than cores). MPICH's mpiexec
#                       (hydra) places any number of ranks without a flag
#                       and has no --oversubscribe.
# The launcher comes from the build, not from PATH: a program built on one
# MPI and started by another MPI's launcher runs as N separate 1-rank jobs.
# OMPI_* environment variables are harmless under MPICH; mpirun flags are
# not.

sf_build_dir() {
  local mpi=${SLABFEED_MPI:-openmpi}
  case $mpi in
    openmpi) echo "${SLABFEED_BUILD_DIR:-build}" ;;
    mpich) echo "${SLABFEED_BUILD_DIR:-build-mpich}" ;;
    *)
      echo "jobs: SLABFEED_MPI=$mpi: expected openmpi or mpich" >&2
      return 2
      ;;
  esac
}

sf_launcher() {
  local exe
  exe=$(sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p' "$1/CMakeCache.txt" 2>/dev/null || true)
  SF_MPIRUN=("${exe:-mpirun}")
  if "${SF_MPIRUN[0]}" --version 2>&1 | grep -q -e 'Open MPI' -e OpenRTE; then
    SF_MPIRUN+=(--oversubscribe)
  fi
}
