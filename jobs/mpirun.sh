#!/usr/bin/env bash
# Generate a volume and print its info with plain mpirun (no scheduler).
#   NP=8 SIZE=1024 FILE=/lustre/me/box.h5 jobs/mpirun.sh
# On Lustre, stripe the directory before writing, e.g.
#   lfs setstripe -c 16 -S 16M /lustre/me      (large files: many OSTs)
# Any MPI: the launcher is the one the build was configured with
# (jobs/mpi.sh; SLABFEED_MPI=mpich picks build-mpich), MPIRUN overrides it
# (e.g. MPIRUN="mpiexec -f hosts").
set -euo pipefail
. "$(dirname "$0")/mpi.sh"
NP=${NP:-4}
SIZE=${SIZE:-256}
# The job's own synthetic volume is regenerated on every run; a FILE given
# by the caller is never replaced (set GEN_OVERWRITE=--overwrite to allow it).
[ -z "${FILE:-}" ] && GEN_OVERWRITE=${GEN_OVERWRITE---overwrite}
FILE=${FILE:-volume_${SIZE}.h5}
BIN=${BIN:-$(dirname "$0")/../$(sf_build_dir)/apps}
sf_launcher "$BIN/.."
read -r -a run <<<"${MPIRUN:-${SF_MPIRUN[0]}}"
# Binding: ranks next to their GPU (one rank per GPU, GPUs numbered in
# blocks per socket, as on DGX-type nodes). A GPU's copy engine reading
# pages of the other socket crosses the inter-socket link, so the loader
# thread and the pinned staging it first touches belong on the GPU's NUMA
# node. Open MPI: ranks mapped over the NUMA domains and numbered by core
# (so ranks 0..k-1 share the first domain, as GPUs 0..k-1 do), each bound
# to its share of its domain's cores (PE=k: the loader's reads, page
# faults and writes run on the rank's CPUs, so one core each would make
# the open one core's); MPICH's hydra: each rank bound to a NUMA domain.
# Other launchers: none. BIND="..." replaces these flags (BIND= drops
# them). `slabfeed-bench --topology` prints each rank's CPUs against its GPU.
bind=()
if "${run[0]}" --version 2>&1 | grep -q -e 'Open MPI' -e OpenRTE; then
  # Physical cores (Open MPI's unit for PE) of the NUMA domains that have
  # CPUs: how many domains, and the smallest one's cores (lscpu, from
  # util-linux; "0 0" without it).
  read -r domains smallest < <(lscpu -p=CORE,NODE 2>/dev/null | grep -v '^#' |
    sort -u | awk -F, '{ n[$2]++ } END { for (d in n) { k++; if (m == 0 || n[d] < m) m = n[d] }; print k + 0, m + 0 }') ||
    true
  domains=${domains:-0} smallest=${smallest:-0}
  pe=0
  if [ "$domains" -ge 1 ]; then
    per_domain=$(((NP + domains - 1) / domains)) # ranks on the fullest domain
    pe=$((smallest / per_domain))
  fi
  if [ "$pe" -ge 1 ]; then
    bind=(--map-by "numa:PE=$pe" --rank-by core --bind-to core)
  else # more ranks than cores, or no lscpu: a core each, as Open MPI does
    bind=(--map-by numa --rank-by core --bind-to core)
  fi
elif "${run[0]}" --version 2>&1 | grep -q HYDRA; then
  bind=(-bind-to numa)
fi
[ -z "${BIND+x}" ] || read -r -a bind <<<"$BIND"
# HDF5 file locking does not work on many parallel file systems.
export HDF5_USE_FILE_LOCKING=FALSE
"${run[@]}" -n "$NP" ${bind[@]+"${bind[@]}"} "$BIN/slabfeed-gen" --file "$FILE" ${GEN_OVERWRITE:-} --shape "$SIZE" --content field
"${run[@]}" -n 1 "$BIN/slabfeed-info" --file "$FILE" --ranks "$NP"
