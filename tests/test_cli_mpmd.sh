#!/bin/bash
# Command lines that differ between ranks (an MPMD launch, `mpiexec -n 1
# APP GOOD : -n 1 APP BAD`): the apps parse on every rank and agree on one
# outcome before anything collective (cli_settle). Before, the rank with
# the bad option left alone (exit 2, no message: only rank 0 printed) while
# the others waited in slabfeed_open forever, and dump left partial files.
# Every rank runs through this script as a wrapper that records the app's
# exit status in rc.<rank>; a run is cut after 40 s (a hang fails).
#
#   error    a bad value / an unknown option on one rank (rank 1 of 2, rank
#            0 of 2, rank 2 of 3), in check, dump, gen, info and bench:
#            every rank exits 2; "APP: rank R: MESSAGE" and the usage are
#            printed once; dump writes nothing (no output, no partial
#            file; an earlier output is unchanged)
#   same     the same error on every rank: printed once, without a rank
#   help     --help or --version on rank 1 only: printed once on stdout
#            (the help with the defaults, not rank 0's values); every rank
#            exits 0 and none opens the loader
#   mixed    --help on rank 0, a bad option on rank 1: the error wins,
#            every rank exits 2
#
# usage: test_cli_mpmd.sh CASE APPDIR VOLUME -- MPIEXEC NPFLAG [PREFLAGS...]

# ---- Wrapper mode: one rank -------------------------------------------------
if [ "$1" = "--rank" ]; then
  dir=$2
  shift 2
  rank=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-${SLURM_PROCID:-0}}}}
  "$@"
  echo $? >"$dir/rc.$rank"
  exit 0
fi

case_=$1 appdir=$2 volume=$3
shift 3
[ "$1" = "--" ] && shift
mpiexec=$1 npflag=$2
shift 2
pre=("$@")
fails=0

dir=$(mktemp -d "${TMPDIR:-/tmp}/sf-cli-mpmd.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
cp "$volume" "$dir/vol.h5"
vol=$dir/vol.h5
loader=(--file "$vol" --input Nbody --target Hydro --crop 12 --batch 2
  --input-vector "1,2,3" --target-vector "1,2,3")

fail() {
  echo "FAIL: $case_: $*"
  fails=$((fails + 1))
}

# run NP_0 "ARGS_0" NP_1 "ARGS_1" [...]: one MPMD job, each section NP
# ranks of the words ARGS (split on spaces); rank order follows the
# sections. Output in $dir/out (stdout) and $dir/err (stderr), the number
# of ranks in $np.
run() {
  local cmd=("$mpiexec" "${pre[@]}") first=1
  np=0
  rm -f "$dir"/rc.*
  while [ $# -gt 0 ]; do
    [ $first = 1 ] || cmd+=(:)
    first=0
    # shellcheck disable=SC2206
    cmd+=("$npflag" "$1" bash "$0" --rank "$dir" $2)
    np=$((np + $1))
    shift 2
  done
  local t0=$SECONDS
  timeout -k 5 40 "${cmd[@]}" >"$dir/out" 2>"$dir/err"
  local rc=$?
  elapsed=$((SECONDS - t0))
  [ $rc = 124 ] || [ $rc = 137 ] && fail "hung: killed after ${elapsed} s: ${cmd[*]}"
  cat "$dir/out" "$dir/err" | sed 's/^/  | /' | grep -v '^  | *$' | head -6
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

# once STREAM TEXT: STREAM (out or err) holds TEXT (fixed) on exactly one
# line.
once() {
  local n
  n=$(grep -cF -- "$2" "$dir/$1")
  [ "$n" = 1 ] || fail "'$2' on $n lines of std$1, expected 1"
}

# none TEXT: neither stream holds TEXT.
none() {
  if grep -qF -- "$1" "$dir/out" "$dir/err"; then
    fail "'$1' printed"
  fi
}

L="${loader[*]}"
case $case_ in
error)
  for app in check dump; do
    p=$appdir/slabfeed-$app
    extra="--steps 2"
    [ $app = dump ] && extra="--steps 2 --out $dir/d.h5"
    run 1 "$p $L $extra" 1 "$p $L $extra --crop abc"
    expect_rc 2
    once err "slabfeed-$app: rank 1: --crop: 'abc'"
    once err "usage: slabfeed-$app "
    none "placement"
    run 1 "$p $L $extra --bogus" 1 "$p $L $extra"
    expect_rc 2
    once err "slabfeed-$app: rank 0: unknown option '--bogus'"
    once err "usage: slabfeed-$app "
    run 2 "$p $L $extra" 1 "$p $L $extra --batch 0x"
    expect_rc 2
    once err "slabfeed-$app: rank 2: --batch: '0x'"
    [ "$elapsed" -le 20 ] || fail "$app: took $elapsed s"
  done
  # dump writes nothing: no new output, an earlier one unchanged
  [ -e "$dir/d.h5" ] && fail "dump created its output"
  ls "$dir"/d.h5.slabfeed-partial.* >/dev/null 2>&1 && fail "partial file left"
  dump=$appdir/slabfeed-dump
  run 2 "$dump $L --steps 1 --out $dir/e.h5"
  expect_rc 0
  before=$(cksum <"$dir/e.h5")
  run 1 "$dump $L --steps 3 --out $dir/e.h5" 1 "$dump $L --steps 3 --out $dir/e.h5 --seed x"
  expect_rc 2
  once err "slabfeed-dump: rank 1: --seed: 'x'"
  [ "$(cksum <"$dir/e.h5")" = "$before" ] || fail "the earlier output changed"
  ls "$dir"/e.h5.slabfeed-partial.* >/dev/null 2>&1 && fail "partial file left"
  # the other apps, through the same parser
  run 1 "$appdir/slabfeed-gen --file $dir/g.h5 --shape 8 --quiet --overwrite" \
    1 "$appdir/slabfeed-gen --file $dir/g.h5 --shape 8 --quiet --bogus"
  expect_rc 2
  once err "slabfeed-gen: rank 1: unknown option '--bogus'"
  [ -e "$dir/g.h5" ] && fail "gen wrote its file"
  run 1 "$appdir/slabfeed-info --file $vol" 1 "$appdir/slabfeed-info --file $vol --ranks x"
  expect_rc 2
  once err "slabfeed-info: rank 1: --ranks: 'x'"
  run 1 "$appdir/slabfeed-bench $L --steps 2" 1 "$appdir/slabfeed-bench $L --steps 2 --bogus"
  expect_rc 2
  once err "slabfeed-bench: rank 1: unknown option '--bogus'"
  ;;
same)
  run 2 "$appdir/slabfeed-check $L --crop abc"
  expect_rc 2
  once err "slabfeed-check: --crop: 'abc'"
  none "rank 0:"
  once err "usage: slabfeed-check "
  ;;
help)
  for app in check dump; do
    p=$appdir/slabfeed-$app
    extra="--steps 2 --seed 77"
    [ $app = dump ] && extra="$extra --out $dir/h.h5"
    run 1 "$p $L $extra" 1 "$p $L $extra --help"
    expect_rc 0
    once out "usage: slabfeed-$app "
    once out "common options:"
    none "(default: 77)" # rank 0's value is not shown as the default
    none "placement"
    run 1 "$p $L $extra" 1 "$p $L $extra --version"
    expect_rc 0
    once out "slabfeed-$app (slabfeed) "
    [ "$(wc -l <"$dir/out")" = 1 ] || fail "$app --version: more than one line"
    none "placement"
  done
  [ -e "$dir/h.h5" ] && fail "dump created its output"
  ;;
mixed)
  p=$appdir/slabfeed-check
  run 1 "$p $L --help" 1 "$p $L --crop abc"
  expect_rc 2
  once err "slabfeed-check: rank 1: --crop: 'abc'"
  none "common options:" # no help text
  ;;
*)
  fail "unknown case"
  ;;
esac

if [ $fails = 0 ]; then
  echo "apps.cli.mpmd.$case_: PASS"
  exit 0
fi
echo "apps.cli.mpmd.$case_: $fails failed checks"
exit 1
