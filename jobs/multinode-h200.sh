#!/usr/bin/env bash
# The multi-node figures of docs/PERFORMANCE.md ("Across nodes"), on one
# GPU machine with every rank its own node (--rank-per-node): the
# placement, both remote-transfer designs, with and without a simulated
# 50 ms training step. From the repo root after tools/build. Writes
# $OUT/multinode.log and $OUT/multinode.jsonl.
#   OUT=bench-out DEV=0 jobs/multinode-h200.sh       # 2 ranks on one H200
#   OUT=bench-out DEV=local jobs/multinode-h200.sh   # one H200 per rank
# MODES (default "send get") lists the remote designs; EXTRA adds options.
set -euo pipefail
. "$(dirname "$0")/mpi.sh"     # SLABFEED_MPI=mpich: build-mpich and its mpiexec
B=$(sf_build_dir)/apps
sf_launcher "$B/.."
OUT=${OUT:-bench-out}
SIZE=${SIZE:-512}
DEV=${DEV:-0}
FILE=${FILE:-/tmp/box${SIZE}.h5}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HDF5_USE_FILE_LOCKING=FALSE
export OMPI_MCA_osc_sm_backing_directory=/dev/shm
# Without an RDMA transport osc/rdma cannot make the world window.
export OMPI_MCA_osc=${OMPI_MCA_osc:-sm,pt2pt}
log() { tee -a "$OUT/multinode.log"; }
[ -f "$FILE" ] || "${SF_MPIRUN[@]}" -n 8 $B/slabfeed-gen --file "$FILE" --shape "$SIZE" | log
L="--file $FILE --input Nbody --target Hydro --input-vector 1,2,3 --target-vector 1,2,3 --device $DEV"
run() { echo "## $*" | log; "${SF_MPIRUN[@]}" -n 2 $B/slabfeed-bench $L ${EXTRA:-} "$@" 2>&1 | log; }
# A volume that fits the budget: G = 1 by default, against one node.
run --crop 128 --batch 4 --dtype bf16 --steps 60 --label onenode
run --crop 128 --batch 4 --dtype bf16 --steps 60 --rank-per-node --label rpn-auto
# Forced G = 2: every crossing piece travels; both designs.
for mode in ${MODES:-send get}; do
  SLABFEED_REMOTE=$mode run --crop 128 --batch 4 --dtype bf16 --steps 40 \
    --step-ms 50 --rank-per-node --group-nodes 2 --label "g2-$mode-128"
  SLABFEED_REMOTE=$mode run --crop 256 --batch 1 --dtype bf16 --steps 20 \
    --step-ms 50 --rank-per-node --group-nodes 2 --label "g2-$mode-256"
done
grep '^JSON' "$OUT/multinode.log" | sed 's/^JSON //' > "$OUT/multinode.jsonl"
