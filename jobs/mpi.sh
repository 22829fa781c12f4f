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
#   sf_bind NP          sets the array SF_BIND: the launcher's flags that
#                       give each of NP ranks its share of a NUMA domain's
#                       cores (below); BIND="..." replaces them, BIND=
#                       drops them.
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

# Binding: ranks next to their GPU (one rank per GPU, GPUs numbered in
# blocks per socket, as on DGX-type nodes). A GPU's copy engine reading
# pages of the other socket crosses the inter-socket link, so the loader
# thread and the pinned staging it first touches belong on the GPU's NUMA
# node. Open MPI: ranks mapped over the NUMA domains and numbered by core
# (so ranks 0..k-1 share the first domain, as GPUs 0..k-1 do), each bound
# to its share of its domain's cores (PE=k: the loader's reads, page
# faults and writes run on the rank's CPUs, so one core each, Open MPI's
# default for one or two ranks, would make the open one core's); MPICH's
# hydra: each rank bound to a NUMA domain. Other launchers: none.
# `slabfeed-bench --topology` prints each rank's CPUs against its GPU.
# Uses SF_MPIRUN (sf_launcher).
# shellcheck disable=SC2034 # SF_BIND is the caller's
sf_bind() {
  local np=$1 domains smallest per_domain pe
  SF_BIND=()
  if [ -n "${BIND+x}" ]; then
    read -r -a SF_BIND <<<"$BIND"
  elif "${SF_MPIRUN[0]}" --version 2>&1 | grep -q -e 'Open MPI' -e OpenRTE; then
    # Physical cores (Open MPI's unit for PE) of the NUMA domains that
    # have CPUs: how many domains, and the smallest one's cores (lscpu,
    # from util-linux; "0 0" without it).
    read -r domains smallest < <(lscpu -p=CORE,NODE 2>/dev/null | grep -v '^#' |
      sort -u | awk -F, '{ n[$2]++ } END { for (d in n) { k++; if (m == 0 || n[d] < m) m = n[d] }; print k + 0, m + 0 }') ||
      true
    domains=${domains:-0} smallest=${smallest:-0}
    pe=0
    if [ "$domains" -ge 1 ]; then
      per_domain=$(((np + domains - 1) / domains)) # ranks on the fullest domain
      pe=$((smallest / per_domain))
    fi
    if [ "$pe" -ge 1 ]; then
      SF_BIND=(--map-by "numa:PE=$pe" --rank-by core --bind-to core)
    else # more ranks than cores, or no lscpu: a core each, as Open MPI does
      SF_BIND=(--map-by numa --rank-by core --bind-to core)
    fi
  elif "${SF_MPIRUN[0]}" --version 2>&1 | grep -q HYDRA; then
    SF_BIND=(-bind-to numa)
  fi
}
