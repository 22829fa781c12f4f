#!/usr/bin/env bash
# The main job on one machine: install what is missing, build, generate a
# small synthetic volume on NP ranks, print its info and slab plan, then run
# the loader on NP ranks with every crop verified against an independent
# serial read, and print a throughput line. Ends with the Python
# interpreter the package was built for.
#   jobs/local.sh            (NP=4, 128^3 box, 4 + 5 channels)
#   NP=8 SIZE=256 DEVICE=0 jobs/local.sh
#   SLABFEED_MPI=mpich jobs/local.sh    (MPICH, in build-mpich/)
# The build is tools/build's (the same flags as tools/test, so the two do
# not rebuild each other's objects); its whole output is in build/build.log
# (build-mpich/build.log). The ranks are started by the mpiexec of the MPI
# the build was made with (jobs/mpi.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
. jobs/mpi.sh
B=$(sf_build_dir)
NP=${NP:-4}
SIZE=${SIZE:-128}
CROP=${CROP:-64}
DEVICE=${DEVICE:--1}
# The job's own synthetic volume is regenerated on every run; a FILE given
# by the caller is never replaced (set GEN_OVERWRITE=--overwrite to allow it).
[ -z "${FILE:-}" ] && GEN_OVERWRITE=${GEN_OVERWRITE---overwrite}
FILE=${FILE:-$B/volume_${SIZE}.h5}
tools/install-deps

# Build, saying what happens: CMake's "slabfeed:" lines (what was found),
# then the progress, on one updating line on a terminal, else every 10 %.
mkdir -p "$B"
log=$B/build.log
if [ -f "$B/CMakeCache.txt" ]; then
  echo "local.sh: building in $B/ (only what changed; log: $log)"
else
  echo "local.sh: first build in $B/ (about 2 minutes on 2 cores; log: $log)"
fi
show_progress() {
  local line pct last=-10 tty=0
  [ -t 1 ] && tty=1
  while IFS= read -r line; do
    case $line in
      "-- slabfeed:"*) echo "  ${line#-- }" ;;
      "["*"%]"* | "["*"/"*"]"*)
        if [ $tty = 1 ]; then
          printf '\r  %-76.76s' "$line"
        else
          pct=${line#[}
          pct=${pct%%]*}
          pct=${pct// /}
          if [[ $pct =~ ^([0-9]+)/([0-9]+)$ ]]; then # Ninja: [n/m]
            pct=$((100 * BASH_REMATCH[1] / BASH_REMATCH[2]))
          fi
          pct=${pct%\%}
          if [[ $pct =~ ^[0-9]+$ ]] && [ "$pct" -ge $((last + 10)) ]; then
            echo "  $line"
            last=$pct
          fi
        fi
        ;;
    esac
  done
  [ $tty = 1 ] && printf '\r%-78s\r' "" || true
}
if ! tools/build 2>&1 | tee "$log" | show_progress; then
  tail -n 30 "$log"
  echo "local.sh: the build failed; the whole output is in $log" >&2
  exit 1
fi
echo "local.sh: built"

# Open MPI as root (ignored by MPICH).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export HDF5_USE_FILE_LOCKING=FALSE
sf_launcher "$B"
echo "local.sh: ranks started with ${SF_MPIRUN[*]}"
run=("${SF_MPIRUN[@]}" -n "$NP")
"${run[@]}" "$B/apps/slabfeed-gen" --file "$FILE" ${GEN_OVERWRITE:-} --shape "$SIZE" --content field --seed 1
"$B/apps/slabfeed-info" --file "$FILE" --ranks "$NP"
"${run[@]}" "$B/apps/slabfeed-check" --file "$FILE" --input Nbody --target Hydro \
  --crop "$CROP" --batch 2 --steps 8 --input-vector 1,2,3 --target-vector 1,2,3 \
  --device "$DEVICE"

# Which Python runs the package: the one CMake built it for (its configure
# line is in the log). A `python3` first on PATH (pyenv, conda) may be
# another one, without apt's numpy and mpi4py.
py=$(sed -n 's/^-- slabfeed: Python package: ON: \([^ ]*\) .*/\1/p' "$log" | tail -n 1)
echo
if [ -n "$py" ]; then
  echo "local.sh: Python: the package in $B/python is built for $py; run it with that interpreter:"
  echo "  PYTHONPATH=$B/python $py -c 'import slabfeed; print(slabfeed.__version__)'"
  pre="${SF_MPIRUN[*]}"
  [ "$(id -u)" -eq 0 ] && pre="OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 $pre"
  echo "  $pre -n 2 env PYTHONPATH=$B/python $py examples/train_unet.py --file $FILE --crop 32 --steps 100"
  other=$(command -v python3 || true)
  if [ -n "$other" ] && [ "$(readlink -f "$other")" != "$(readlink -f "$py")" ]; then
    echo "  (python3 on PATH is $other, another interpreter: it may fail with \"No module named 'mpi4py'\")"
  fi
else
  why=$(sed -n 's/^-- slabfeed: Python package: OFF: //p' "$log" | tail -n 1)
  if [ -z "$why" ] && [ "${SLABFEED_MPI:-openmpi}" = mpich ]; then
    why="tools/build makes the MPICH build without it (Debian's mpi4py is built on Open MPI)"
  fi
  echo "local.sh: Python: the package was not built${why:+: $why}"
fi
