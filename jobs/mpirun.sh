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
# Each rank bound to its share of a NUMA domain's cores (jobs/mpi.sh,
# sf_bind; BIND="..." replaces the flags, BIND= drops them).
SF_MPIRUN=("${run[@]}")
sf_bind "$NP"
# HDF5 file locking does not work on many parallel file systems.
export HDF5_USE_FILE_LOCKING=FALSE
"${run[@]}" -n "$NP" ${SF_BIND[@]+"${SF_BIND[@]}"} "$BIN/slabfeed-gen" --file "$FILE" ${GEN_OVERWRITE:-} --shape "$SIZE" --content field
"${run[@]}" -n 1 "$BIN/slabfeed-info" --file "$FILE" --ranks "$NP"
