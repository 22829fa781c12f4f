#!/bin/bash
# The apps under failure (issue 12), end to end on NP ranks. Every rank runs
# through this script as a wrapper that records the app's exit status in
# rc.<rank> and exits 0 itself, so that mpiexec does not kill the other
# ranks and each rank's own status can be checked. A run that hangs is cut
# by `timeout` and fails (ctest's TIMEOUT is the second net).
#
#   nodir    dump --out /no/such/dir/x.h5: every rank exits 1 within
#            seconds; the message names the path
#   samefile dump --out = --file, also as another spelling and through a
#            symlink: every rank exits 2; the volume is unchanged
#   outdir   dump --out an existing directory: every rank exits 1; the
#            directory is untouched
#   partway  dump over an earlier file with a file size limit on rank 0
#            that the output passes part-way: every rank exits 1; the
#            earlier file is unchanged and no partial file is left
#   exists   dump over an earlier file without --overwrite: every rank
#            exits 1, the message (once) names the file and --overwrite;
#            the earlier file is byte for byte as it was and no partial
#            file is left; with --overwrite it is replaced
#   chunked  dump over an earlier file with the transfer cut into 1000-byte
#            messages: every rank exits 0, the file is replaced, no partial
#            file is left, and test_dumpfile verifies every row
#   fullcopy bench --baseline fullcopy: its spot check against the serial
#            reader runs and passes; a crop larger than the box is refused
#            on every rank (exit 1)
#   check    slabfeed-check with one call failing on one rank (apps_inject.c
#            preloaded there): a reference read on rank 1, slabfeed_next on
#            rank 0: every rank exits 1 with that rank's message
#   step     slabfeed-dump over an earlier file with slabfeed_next failing
#            on rank 1 at step 2, then slabfeed_copy_to_host on rank 0 (the
#            writer) at step 2: every rank exits 1 with that message; the
#            earlier file is unchanged and no partial file is left
#   bench    slabfeed-bench with slabfeed_next failing on rank 1 inside the
#            timed steps, then on rank 0 in the warm-up: every rank exits 1
#   predict  slabfeed-predict over an earlier file with slabfeed_writer_put
#            refused (not stored, the writer not failed) at step 2 on rank
#            1, then on rank 0: every rank exits 1 with the put's message,
#            not the close's count of missing voxels; the earlier file is
#            unchanged and no partial file is left
#
# usage: test_apps_fail.sh CASE NP APPDIR VOLUME VERIFY INJECT -- MPIEXEC
#        NPFLAG [PREFLAGS...]
#   APPDIR holds the apps; VOLUME is the generated 24x20x18 test volume
#   (Nbody 4 + Hydro 5 channels; copied, never written); VERIFY is
#   test_dumpfile; INJECT the apps_inject module; then the mpiexec
#   program, its flag for the number of processes, and the flags before
#   the program.

# ---- Wrapper mode: one rank -------------------------------------------------
if [ "$1" = "--rank" ]; then
  dir=$2 fsize=$3 inject=$4
  shift 4
  rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}}
  # A soft file size limit on rank 0 only (the writer of the dump).
  if [ "$rank" = 0 ] && [ "$fsize" != - ]; then
    ulimit -S -f "$fsize"
  fi
  # The failing call (SF_INJECT_FUNC, SF_INJECT_AT) on rank $inject only.
  if [ "$rank" = "$inject" ]; then
    export LD_PRELOAD=$SF_INJECT_LIB${LD_PRELOAD:+:$LD_PRELOAD}
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
  fi
  "$@"
  echo $? >"$dir/rc.$rank"
  exit 0
fi

case_=$1 np=$2 appdir=$3 volume=$4 verify=$5
export SF_INJECT_LIB=$6
shift 6
[ "$1" = "--" ] && shift
mpi=("$1" "$2" "$np" "${@:3}")
mpi1=("$1" "$2" 1 "${@:3}")
dump=$appdir/slabfeed-dump
bench=$appdir/slabfeed-bench
check=$appdir/slabfeed-check
predict=$appdir/slabfeed-predict
fails=0

dir=$(mktemp -d "${TMPDIR:-/tmp}/sf-apps-fail.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
cp "$volume" "$dir/vol.h5"
vol=$dir/vol.h5
vectors=(--input-vector "1,2,3" --target-vector "1,2,3")
loader=(--file "$vol" --input Nbody --target Hydro --crop 12 --batch 2
  "${vectors[@]}")

# fail MESSAGE: one failed check.
fail() {
  echo "FAIL: $case_: $*"
  fails=$((fails + 1))
}

# run FSIZE PROG ARGS...: runs PROG on np ranks through the wrapper, with
# at most 40 s; leaves its output in $dir/out and the time in $elapsed.
# $inject_rank (when set) is the rank with apps_inject preloaded.
run() {
  local fsize=$1
  shift
  rm -f "$dir"/rc.*
  local t0=$SECONDS
  timeout -k 5 40 "${mpi[@]}" bash "$0" --rank "$dir" "$fsize" \
    "${inject_rank:--}" "$@" >"$dir/out" 2>&1
  local rc=$?
  elapsed=$((SECONDS - t0))
  [ $rc = 124 ] || [ $rc = 137 ] && fail "hung: killed after ${elapsed} s: $*"
  sed 's/^/  | /' "$dir/out" | grep -v '^  | *$' | head -20
}

# expect_rc STATUS: every rank exited with STATUS.
expect_rc() {
  local i
  for ((i = 0; i < np; i++)); do
    if [ ! -f "$dir/rc.$i" ]; then
      fail "rank $i did not finish"
    elif [ "$(cat "$dir/rc.$i")" != "$1" ]; then
      fail "rank $i exited $(cat "$dir/rc.$i"), expected $1"
    fi
  done
}

# expect_out TEXT: the output holds TEXT (fixed string).
expect_out() {
  grep -qF -- "$1" "$dir/out" || fail "no '$1' in the output"
}

# no_partial FILE: no FILE.slabfeed-partial.* is left.
no_partial() {
  local left
  left=$(ls "$1".slabfeed-partial.* 2>/dev/null)
  [ -z "$left" ] || fail "partial file left: $left"
}

sum() { cksum <"$1"; }

# inject RANK FUNC AT: the AT-th call of FUNC fails on RANK in later runs.
inject() {
  inject_rank=$1
  export SF_INJECT_FUNC=$2 SF_INJECT_AT=$3
}

# A small earlier file to be kept (or replaced): a successful dump.
earlier() {
  run - "$dump" "${loader[@]}" --steps 1 --out "$1"
  expect_rc 0
  [ -f "$1" ] || fail "the earlier file $1 was not written"
}

case $case_ in
nodir)
  run - "$dump" "${loader[@]}" --steps 3 --out /no/such/dir/x.h5
  expect_rc 1
  expect_out "/no/such/dir/x.h5"
  [ "$elapsed" -le 20 ] || fail "took $elapsed s"
  ;;
samefile)
  before=$(sum "$vol")
  ln -s "$vol" "$dir/link.h5"
  for out in "$vol" "$dir/./vol.h5" "$dir/link.h5"; do
    run - "$dump" "${loader[@]}" --steps 3 --out "$out"
    expect_rc 2
    expect_out "--out '$out'"
    [ "$(sum "$vol")" = "$before" ] || fail "--out $out changed the volume"
  done
  ;;
outdir)
  mkdir "$dir/d"
  run - "$dump" "${loader[@]}" --steps 3 --out "$dir/d"
  expect_rc 1
  expect_out "'$dir/d'"
  [ -z "$(ls -A "$dir/d")" ] || fail "the directory was written to"
  [ -d "$dir/d" ] || fail "the directory is gone"
  ;;
partway)
  # No target: the input rows fill the file in order, and the 16 MiB
  # limit is passed at about step 22 of 30 (crops 18^3 x 4 channels,
  # float32, 4 x np samples a step): rows were written before it fails.
  out=$dir/dump.h5
  earlier "$out"
  before=$(sum "$out")
  run 16384 "$dump" --file "$vol" --input Nbody --crop 18 --batch 4 \
    --steps $((60 / np)) --out "$out" --overwrite
  expect_rc 1
  expect_out "'$out'"
  [ "$(sum "$out")" = "$before" ] || fail "the earlier file changed"
  no_partial "$out"
  ;;
exists)
  out=$dir/dump.h5
  earlier "$out"
  before=$(sum "$out")
  run - "$dump" "${loader[@]}" --steps 3 --seed 9 --out "$out"
  expect_rc 1
  expect_out "--out '$out' exists; pass --overwrite to replace it"
  [ "$(grep -c "exists; pass --overwrite" "$dir/out")" = 1 ] ||
    fail "the refusal is not printed once"
  [ "$(sum "$out")" = "$before" ] || fail "the earlier file changed"
  no_partial "$out"
  run - "$dump" "${loader[@]}" --steps 3 --seed 9 --out "$out" --overwrite
  expect_rc 0
  [ "$(sum "$out")" != "$before" ] || fail "--overwrite: the file was not replaced"
  no_partial "$out"
  ;;
chunked)
  out=$dir/dump.h5
  earlier "$out"
  before=$(sum "$out")
  export SLABFEED_DUMP_CHUNK_BYTES=1000
  run - "$dump" "${loader[@]}" --steps 3 --epoch 2 --seed 5 --dtype f16 \
    --out "$out" --overwrite
  unset SLABFEED_DUMP_CHUNK_BYTES
  expect_rc 0
  [ "$(sum "$out")" != "$before" ] || fail "the earlier file was not replaced"
  no_partial "$out"
  timeout 40 "${mpi1[@]}" "$verify" "$vol" "$out" >"$dir/verify" 2>&1
  sed 's/^/  | /' "$dir/verify" | tail -3
  grep -q "apps.dump.verify: PASS" "$dir/verify" || fail "test_dumpfile"
  ;;
fullcopy)
  run - "$bench" "${loader[@]}" --baseline fullcopy --warmup 1 --steps 5
  expect_rc 0
  expect_out "full copy: spot check: $((4 * np)) samples"
  expect_out "equal the serial reference reader"
  run - "$bench" "${loader[@]}" --baseline fullcopy --crop 30 --steps 5
  expect_rc 1
  expect_out "does not fit the box"
  ;;
check)
  inject 1 slabfeed_reader_crop_values 5
  run - "$check" "${loader[@]}" --steps 4
  expect_rc 1
  expect_out "rank 1: reference read of sample"
  expect_out "injected failure of slabfeed_reader_crop_values"
  inject 0 slabfeed_next 2
  run - "$check" "${loader[@]}" --steps 4
  expect_rc 1
  expect_out "rank 0: injected failure of slabfeed_next"
  ;;
step)
  out=$dir/dump.h5
  earlier "$out"
  before=$(sum "$out")
  for how in 1:slabfeed_next 0:slabfeed_copy_to_host; do
    r=${how%%:*} func=${how#*:}
    inject "$r" "$func" 3 # next: step 2; copy_to_host: step 1's input
    run - "$dump" "${loader[@]}" --steps 4 --out "$out" --overwrite
    expect_rc 1
    expect_out "rank $r: injected failure of $func"
    [ "$(sum "$out")" = "$before" ] || fail "$func: the earlier file changed"
    no_partial "$out"
  done
  ;;
bench)
  inject 1 slabfeed_next 4 # warm-up 2: the second timed step
  run - "$bench" "${loader[@]}" --warmup 2 --steps 5
  expect_rc 1
  expect_out "rank 1: injected failure of slabfeed_next"
  inject 0 slabfeed_next 1
  run - "$bench" "${loader[@]}" --warmup 2 --steps 5
  expect_rc 1
  expect_out "rank 0: injected failure of slabfeed_next"
  ;;
predict)
  out=$dir/pred.h5
  pass=(--file "$vol" --input Nbody --input-vector "1,2,3" --tile 6 --pad 2
    --batch 2 --out "$out" --overwrite)
  run - "$predict" "${pass[@]}" --verify
  expect_rc 0
  expect_out "verify: OK, bit for bit"
  before=$(sum "$out")
  for r in 1 0; do
    inject "$r" slabfeed_writer_put 2
    run - "$predict" "${pass[@]}"
    expect_rc 1
    expect_out "rank $r: injected refusal of slabfeed_writer_put"
    ! grep -q "stop putting" "$dir/out" ||
      fail "rank $r: the close's coverage message, not the refused put's"
    [ "$(sum "$out")" = "$before" ] || fail "rank $r: the earlier file changed"
    no_partial "$out"
  done
  ;;
*)
  fail "unknown case"
  ;;
esac

if [ $fails = 0 ]; then
  echo "apps.fail.$case_: PASS"
  exit 0
fi
echo "apps.fail.$case_: $fails failed checks"
exit 1
