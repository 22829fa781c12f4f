#!/usr/bin/env bash
# A whole tiled prediction pass, side by side on the same box in the same
# run (docs/PERFORMANCE.md, "A whole prediction pass"): the original path
# (bench/original_predict.py: h5py read in one process, a DataLoader of
# wrapped tiles in forked workers with pin_memory, the identity on the
# GPU, stitched, h5py write) against slabfeed-predict on each rank count,
# each timed from its command's start to its file renamed in place (both
# print the Unix time of that moment) and to the command's exit. Prints every step, slabfeed's open and close against
# the read and write ceilings of the same run, and the wall-time ratios.
#   FILE=/dev/shm/box512.h5 RANKS="1 4" bench/predict_vs_original.sh
# Environment: FILE (made with slabfeed-gen --shape ${SIZE:-512} when
# missing), TILE (128), PAD (16), WORKERS (8), RANKS ("1 4"), DEVICE (0;
# -1 without a GPU), OUTDIR (the file's directory), PYTHON (the
# interpreter jobs/env.sh finds), OUT (a folder for the log and JSON),
# PREDICT_ARGS (more options of slabfeed-predict, e.g. "--huge-pages off
# --write-map off" for 0.10's memory; LABEL names them in the JSON),
# LAUNCH_ARGS (the launcher's binding flags for slabfeed's runs; unset,
# those of jobs/mpi.sh's sf_bind, as jobs/mpirun.sh starts its ranks: each
# rank bound to its share of a NUMA domain's cores. Open MPI's own default
# binds one or two ranks to one core each, and the loader then reads and
# faults on that one core: LAUNCH_ARGS= measures that; BIND, as in
# jobs/mpirun.sh, replaces sf_bind's flags where LAUNCH_ARGS is unset).
set -euo pipefail
cd "$(dirname "$0")/.."
. jobs/mpi.sh
. jobs/env.sh
B=$(sf_build_dir)/apps
sf_launcher "$B/.."
SIZE=${SIZE:-512}
FILE=${FILE:-/dev/shm/box$SIZE.h5}
TILE=${TILE:-128} PAD=${PAD:-16} WORKERS=${WORKERS:-8} RANKS=${RANKS:-"1 4"}
DEVICE=${DEVICE:-0}
read -r -a EXTRA <<< "${PREDICT_ARGS:-}"
LABEL=${LABEL:-default}
OUTDIR=${OUTDIR:-$(dirname "$FILE")}
OUT=${OUT:-bench-out}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export HDF5_USE_FILE_LOCKING=FALSE OMPI_MCA_osc_sm_backing_directory=/dev/shm
log() { tee -a "$OUT/predict_vs_original.log"; }
now() { date +%s.%N; }
[ -f "$FILE" ] || "${SF_MPIRUN[@]}" -n 8 "$B/slabfeed-gen" --file "$FILE" \
  --shape "$SIZE" --content field | log

# Seconds from t0 to the "PROG: output in place at Unix time T" line among
# the log's lines after line $3 (the run's own output), or null.
placed() {
  local at
  at=$(tail -n +"$(($3 + 1))" "$OUT/predict_vs_original.log" |
    grep "^$1: output in place at Unix time" | tail -n 1 |
    sed 's/.*Unix time \([0-9.]*\).*/\1/')
  awk -v a="${at:-0}" -v b="$2" 'BEGIN { if (a > 0) printf "%.2f", a - b; else printf "null" }'
}
# Lines in the log so far.
lines() { wc -l < "$OUT/predict_vs_original.log"; }
# a / b to 3 places, or null when either is null.
ratio_of() {
  awk -v a="$1" -v b="$2" 'BEGIN { if (a == "null" || b == "null" || b == 0) printf "null"; else printf "%.3f", a / b }'
}
touch "$OUT/predict_vs_original.log"
before=$(lines)
t0=$(now)
"${PYTHON:-$SF_PY}" bench/original_predict.py --file "$FILE" --input Nbody \
  --tile "$TILE" --pad "$PAD" --workers "$WORKERS" \
  --out "$OUTDIR/original.h5" --overwrite | log
t_orig=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
rm -f "$OUTDIR/original.h5"
p_orig=$(placed original "$t0" "$before")
echo "original: wall $t_orig s to its exit, $p_orig s to the file in place (command start to each)" | log

for n in $RANKS; do
  if [ -n "${LAUNCH_ARGS+x}" ]; then
    read -r -a LAUNCH <<< "$LAUNCH_ARGS"
  else
    sf_bind "$n"
    LAUNCH=(${SF_BIND[@]+"${SF_BIND[@]}"})
  fi
  # Timed as a user runs it (no ceilings measured inside), then again for
  # the read and write ceilings of the same ranks and file.
  before=$(lines)
  t0=$(now)
  "${SF_MPIRUN[@]}" ${LAUNCH[@]+"${LAUNCH[@]}"} -n "$n" "$B/slabfeed-predict" --file "$FILE" --input Nbody \
    --tile "$TILE" --pad "$PAD" --device "$DEVICE" \
    --out "$OUTDIR/slabfeed.h5" --overwrite --no-read-ceiling ${EXTRA[@]+"${EXTRA[@]}"} | log
  t_sf=$(awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
  p_sf=$(placed slabfeed-predict "$t0" "$before")
  rm -f "$OUTDIR/slabfeed.h5"
  "${SF_MPIRUN[@]}" ${LAUNCH[@]+"${LAUNCH[@]}"} -n "$n" "$B/slabfeed-predict" --file "$FILE" --input Nbody \
    --tile "$TILE" --pad "$PAD" --device "$DEVICE" \
    --out "$OUTDIR/slabfeed.h5" --overwrite --write-ceiling ${EXTRA[@]+"${EXTRA[@]}"} | grep -E "ceiling" | log
  rm -f "$OUTDIR/slabfeed.h5"
  ratio=$(awk -v a="$t_sf" -v b="$t_orig" 'BEGIN { printf "%.3f", a / b }')
  rplace=$(ratio_of "$p_sf" "$p_orig")
  echo "slabfeed-predict, $n ranks: wall $t_sf s = $ratio x the original's $t_orig s (to the exit); $p_sf s = $rplace x the original's $p_orig s (to the file in place)" | log
  echo "JSON {\"bench\": \"predict_vs_original\", \"file\": \"$FILE\", \"ranks\": $n, \"label\": \"$LABEL\", \"launch\": \"${LAUNCH[*]+${LAUNCH[*]//\"/}}\", \"tile\": $TILE, \"pad\": $PAD, \"wall_slabfeed\": $t_sf, \"wall_original\": $t_orig, \"ratio\": $ratio, \"place_slabfeed\": $p_sf, \"place_original\": $p_orig, \"ratio_place\": $rplace}" | log
done
grep '^JSON' "$OUT/predict_vs_original.log" | sed 's/^JSON //' > "$OUT/predict_vs_original.jsonl"
