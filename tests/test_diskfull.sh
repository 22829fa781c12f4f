#!/bin/bash
# Writers on a small filesystem that fills up (issue "Nothing lost,
# nothing hangs"), on NP ranks. The test chooses at run time: a 4 MiB
# tmpfs mounted by the test where mounting is permitted (root, CI), else a
# 4 MiB file size limit (RLIMIT_FSIZE) that fsize_preload.c sets in every
# rank right after MPI_Init; it prints which. Every rank runs through this
# script as a wrapper that records the program's exit status in rc.<rank>.
#
#   contig, chunked  test_diskfull (slabfeed_generate: every rank the same
#                    status and message, the earlier file byte-identical,
#                    nothing else left, then runs that fit succeed and read
#                    back right), then slabfeed-gen itself: a 9.4 MB volume
#                    over an earlier file exits 1 on every rank, with the
#                    reservation and (tmpfs) without it, the earlier file
#                    unchanged and no partial file left; a volume that
#                    fits exits 0 on every rank
#   dump             slabfeed-dump the same way: an output that does not
#                    fit (with and, on tmpfs, without the reservation: then
#                    the write fails part-way) exits 1 on every rank, the
#                    earlier output unchanged, no partial file; one that
#                    fits exits 0 and test_dumpfile verifies every row
#   predict          slabfeed-predict (the writer of a pass) the same way:
#                    the whole box does not fit (with and without the
#                    reservation), the earlier output unchanged, no
#                    partial file; a band that fits is verified bit for
#                    bit
#
# usage: test_diskfull.sh CASE NP APPDIR TESTPROG PRELOAD VERIFY -- MPIEXEC
#        NPFLAG [PREFLAGS...]
#   APPDIR holds the apps, TESTPROG is test_diskfull, PRELOAD the
#   fsize_preload module, VERIFY test_dumpfile.

# ---- Wrapper mode: one rank -------------------------------------------------
if [ "$1" = "--rank" ]; then
  dir=$2
  shift 2
  rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}}
  if [ -n "$SF_TEST_FSIZE" ]; then
    export LD_PRELOAD=$SF_FSIZE_PRELOAD${LD_PRELOAD:+:$LD_PRELOAD}
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
  fi
  "$@"
  echo $? >"$dir/rc.$rank"
  exit 0
fi

case_=$1 np=$2 appdir=$3 prog=$4 preload=$5 verify=$6
shift 6
[ "$1" = "--" ] && shift
mpi=("$1" "$2" "$np" "${@:3}")
mpi1=("$1" "$2" 1 "${@:3}")
gen=$appdir/slabfeed-gen
dump=$appdir/slabfeed-dump
fails=0

fail() {
  echo "FAIL: diskfull.$case_: $*"
  fails=$((fails + 1))
}

work=$(mktemp -d "${TMPDIR:-/tmp}/sf-diskfull.XXXXXX") || exit 1
small=$work/small
mkdir "$small"
mode=fsize # SF_DISKFULL_MODE=fsize: the fallback even where mounting works
if [ "${SF_DISKFULL_MODE:-}" != fsize ] && [ "$(id -u)" = 0 ] &&
  mount -t tmpfs -o size=4m slabfeed-diskfull "$small" 2>/dev/null; then
  mode=tmpfs
fi
cleanup() {
  [ $mode = tmpfs ] && umount "$small"
  rm -rf "$work"
}
trap cleanup EXIT
if [ $mode = tmpfs ]; then
  echo "diskfull: small filesystem: a 4 MiB tmpfs mounted at $small"
else
  why="mounting a tmpfs is not permitted here"
  [ "${SF_DISKFULL_MODE:-}" = fsize ] && why="SF_DISKFULL_MODE=fsize"
  echo "diskfull: $why: a 4 MiB file size limit (RLIMIT_FSIZE, set after" \
    "MPI_Init) on every rank instead"
fi
export SF_FSIZE_PRELOAD=$preload

# run LIMITED PROG ARGS...: PROG on np ranks through the wrapper, at most
# 60 s; LIMITED=1: under the file size limit in fsize mode. Output in
# $work/out.
run() {
  local limited=$1
  shift
  rm -f "$work"/rc.*
  local fsize=
  [ "$limited" = 1 ] && [ $mode = fsize ] && fsize=4194304
  SF_TEST_FSIZE=$fsize timeout -k 5 60 "${mpi[@]}" bash "$0" --rank "$work" \
    "$@" >"$work/out" 2>&1
  local rc=$?
  [ $rc = 124 ] || [ $rc = 137 ] && fail "hung: killed after 60 s: $*"
  grep -v '^ *$' "$work/out" | grep -v -- '^---\|fbtl\|ompio' |
    sed 's/^/  | /' | head -12
}

# expect_rc STATUS: every rank exited with STATUS.
expect_rc() {
  local i
  for ((i = 0; i < np; i++)); do
    if [ ! -f "$work/rc.$i" ]; then
      fail "rank $i did not finish"
    elif [ "$(cat "$work/rc.$i")" != "$1" ]; then
      fail "rank $i exited $(cat "$work/rc.$i"), expected $1"
    fi
  done
}

expect_out() {
  grep -qF -- "$1" "$work/out" || fail "no '$1' in the output"
}

# only FILE: the small filesystem holds FILE and nothing else.
only() {
  local left
  left=$(ls -A "$small" | grep -v -x -F "$(basename "$1")")
  [ -z "$left" ] || fail "left on the small filesystem: $left"
}

sum() { cksum <"$1"; }

# too_big OUT PROG ARGS...: a writer whose output OUT does not fit, with
# the reservation (checked: the error says why) and without it (the write
# fails part-way): exit 1 on every rank, the message names OUT, the
# earlier OUT unchanged, no partial file.
too_big() {
  local out=$1 before how
  shift
  before=$(sum "$out")
  for how in checked skipped; do
    [ $how = skipped ] && export SLABFEED_TEST_NO_RESERVE=1
    run 1 "$@"
    unset SLABFEED_TEST_NO_RESERVE
    expect_rc 1
    expect_out "'$out'"
    if [ $how = checked ]; then
      [ $mode = tmpfs ] && expect_out "not enough space to write '$out'"
      [ $mode = fsize ] && expect_out "file size limit"
    fi
    [ "$(sum "$out")" = "$before" ] || fail "reservation $how: $out changed"
    only "$out"
  done
}

case $case_ in
contig | chunked)
  run 1 "$prog" "$small" "$case_" $mode
  grep -q "diskfull: PASS" "$work/out" || fail "test_diskfull"
  expect_rc 0
  rm -f "$small"/*
  opt=()
  [ "$case_" = chunked ] && opt=(--chunked)
  out=$small/g.h5
  run 1 "$gen" --file "$out" --shape 24 "${opt[@]}" --quiet
  expect_rc 0
  before=$(sum "$out")
  # An existing file is refused without --overwrite, and left as it was.
  run 1 "$gen" --file "$out" --shape 16 "${opt[@]}"
  expect_rc 1
  expect_out "'$out' exists; pass overwrite (slabfeed-gen --overwrite) to replace it"
  [ "$(sum "$out")" = "$before" ] || fail "gen without --overwrite changed $out"
  only "$out"
  for how in checked skipped; do
    [ $how = skipped ] && export SLABFEED_TEST_NO_RESERVE=1
    run 1 "$gen" --file "$out" --shape 64 "${opt[@]}" --overwrite
    unset SLABFEED_TEST_NO_RESERVE
    expect_rc 1
    expect_out "slabfeed-gen: I/O error: rank "
    if [ $how = checked ]; then
      [ $mode = tmpfs ] && expect_out "not enough space to write '$out'"
      [ $mode = fsize ] && expect_out "file size limit"
    fi
    [ "$(sum "$out")" = "$before" ] || fail "reservation $how: $out changed"
    only "$out"
  done
  run 1 "$gen" --file "$out" --shape 32 "${opt[@]}" --overwrite
  expect_rc 0
  expect_out "slabfeed-gen: wrote $out"
  only "$out"
  ;;
dump)
  vol=$work/vol.h5
  run 0 "$gen" --file "$vol" --shape 24 --quiet --overwrite
  expect_rc 0
  loader=(--file "$vol" --input Nbody --target Hydro --crop 12 --batch 2
    --input-vector 1,2,3 --target-vector 1,2,3 --seed 5 --epoch 2)
  out=$small/d.h5
  run 1 "$dump" "${loader[@]}" --steps 1 --out "$out"
  expect_rc 0
  too_big "$out" "$dump" "${loader[@]}" --steps 30 --out "$out" --overwrite
  run 1 "$dump" "${loader[@]}" --steps 4 --out "$out" --overwrite
  expect_rc 0
  only "$out"
  timeout 60 "${mpi1[@]}" "$verify" "$vol" "$out" >"$work/verify" 2>&1
  tail -1 "$work/verify" | sed 's/^/  | /'
  grep -q "apps.dump.verify: PASS" "$work/verify" || fail "test_dumpfile"
  ;;
predict)
  # The writer of a pass (slabfeed-predict, the identity as the model):
  # the whole 64^3 x 4 box (4 MiB of float32) does not fit, a band does.
  vol=$work/vol.h5
  run 0 "$gen" --file "$vol" --shape 64 --quiet --overwrite
  expect_rc 0
  pred=$appdir/slabfeed-predict
  p=(--file "$vol" --input Nbody --input-vector 1,2,3 --tile 8 --pad 2
    --batch 2 --pass-symmetry 5 --like input --overwrite)
  out=$small/p.h5
  run 1 "$pred" "${p[@]}" --region 0,0,0,8,0,0 --out "$out"
  expect_rc 0
  too_big "$out" "$pred" "${p[@]}" --out "$out"
  run 1 "$pred" "${p[@]}" --region 24,0,0,16,0,0 --out "$out" --verify
  expect_rc 0
  expect_out "verify: OK, bit for bit"
  only "$out"
  ;;
*)
  fail "unknown case"
  ;;
esac

if [ $fails = 0 ]; then
  echo "diskfull.$case_: PASS ($mode)"
  exit 0
fi
echo "diskfull.$case_: $fails failed checks ($mode)"
exit 1
