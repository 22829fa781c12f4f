#!/usr/bin/env bash
# The main job on one machine: install what is missing, build, generate a
# small synthetic volume on NP ranks, print its info and slab plan, then run
# the loader on NP ranks with every crop verified against an independent
# serial read, and print a throughput line.
#   jobs/local.sh            (NP=4, 128^3 box, 4 + 5 channels)
#   NP=8 SIZE=256 DEVICE=0 jobs/local.sh
set -euo pipefail
cd "$(dirname "$0")/.."
NP=${NP:-4}
SIZE=${SIZE:-128}
CROP=${CROP:-64}
DEVICE=${DEVICE:--1}
FILE=${FILE:-build/volume_${SIZE}.h5}
tools/install-deps
tools/build >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export HDF5_USE_FILE_LOCKING=FALSE
run="mpirun --oversubscribe -n $NP"
$run build/apps/slabfeed-gen --file "$FILE" --shape "$SIZE" --content field --seed 1
build/apps/slabfeed-info --file "$FILE" --ranks "$NP"
$run build/apps/slabfeed-check --file "$FILE" --input Nbody --target Hydro \
  --crop "$CROP" --batch 2 --steps 8 --input-vector 1,2,3 --target-vector 1,2,3 \
  --device "$DEVICE"
