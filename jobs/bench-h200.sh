#!/usr/bin/env bash
# The figures of docs/PERFORMANCE.md, on the H200 machine, from the repo
# root after tools/build (or cmake --build build). Writes $OUT/bench.log,
# $OUT/bench.jsonl and the PNGs.
#   OUT=bench-out SIZE=1024 jobs/bench-h200.sh
set -euo pipefail
. "$(dirname "$0")/mpi.sh"     # SLABFEED_MPI=mpich: build-mpich and its mpiexec
B=$(sf_build_dir)/apps
sf_launcher "$B/.."
OUT=${OUT:-bench-out}
SIZE=${SIZE:-1024}
FILE=${FILE:-/tmp/box${SIZE}.h5}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HDF5_USE_FILE_LOCKING=FALSE
# Shared-memory windows in /dev/shm, not in the session directory on disk.
export OMPI_MCA_osc_sm_backing_directory=/dev/shm
log() { tee -a "$OUT/bench.log"; }
[ -f "$FILE" ] || "${SF_MPIRUN[@]}" -n 16 $B/slabfeed-gen --file "$FILE" --shape "$SIZE" | log
L="--file $FILE --input Nbody --target Hydro --input-vector 1,2,3 --target-vector 1,2,3"
run() { "${SF_MPIRUN[@]}" -n "$1" $B/slabfeed-bench $L "${@:2}" 2>&1 | log; }
run 1 --device 0 --crop 256 --batch 1 --dtype f32 --steps 30
run 1 --device 0 --crop 256 --batch 1 --dtype bf16 --steps 30
run 1 --device 0 --crop 128 --batch 4 --dtype f32 --steps 40
run 1 --device 0 --crop 128 --batch 4 --dtype bf16 --steps 40
run 4 --device 0 --crop 256 --batch 1 --dtype f32 --steps 20
run 4 --device 0 --crop 128 --batch 4 --dtype bf16 --steps 30
run 1 --device 0 --crop 256 --batch 1 --dtype f32 --steps 10 --baseline fullcopy
grep '^JSON' "$OUT/bench.log" | sed 's/^JSON //' > "$OUT/bench.jsonl"
