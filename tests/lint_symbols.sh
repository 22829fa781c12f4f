#!/usr/bin/env bash
# lint.symbols: the libraries' symbols keep to the naming convention, so
# that nothing of slabfeed can interpose on another library in one process
# (issue 9, point 1). Usage:
#   lint_symbols.sh [--self-test] LIBSLABFEED_SO LIBSLABFEED_A
# Fails when
#   1. the shared library exports (defined dynamic symbol) a name that does
#      not start with slabfeed_ (internal code has hidden visibility);
#   2. the static library has a global defined symbol that is neither
#      slabfeed_* nor sf__*, except for the toolchain's classes listed in
#      toolchain_ok below, each checked by name form and symbol type;
#   3. any symbol of either library (defined or undefined, global or local)
#      has the name of a function libsndfile exports: its sf_* names are
#      what slabfeed's first prefix clashed with (soundfile and torchaudio
#      load libsndfile into training processes). The list below is checked
#      against libsndfile 1.2.0's `nm -D`; an installed libsndfile.so.1 is
#      read too, and its names added.
# --self-test then plants one violation of each kind in copies of the
# libraries (and a small .so) and fails unless every one is rejected, so
# that this lint cannot pass by matching nothing. Needs cc (or $CC), ar.
set -u
export LC_ALL=C   # one collation for sort and comm
NM=${NM:-nm}
self_test=0
if [ "${1:-}" = --self-test ]; then
  self_test=1
  shift
fi
so=${1:?usage: lint_symbols.sh [--self-test] LIBSLABFEED_SO LIBSLABFEED_A}
a=${2:?usage: lint_symbols.sh [--self-test] LIBSLABFEED_SO LIBSLABFEED_A}

# libsndfile's exported functions (src/Symbols.gnu-binutils, sndfile.h;
# sf_wchar_open is the Windows build's).
sndfile_names="sf_open sf_open_fd sf_open_virtual sf_close sf_seek sf_strerror
sf_error sf_error_number sf_error_str sf_perror sf_command sf_format_check
sf_version_string sf_set_string sf_get_string sf_current_byterate sf_read_raw
sf_write_raw sf_readf_short sf_readf_int sf_readf_float sf_readf_double
sf_writef_short sf_writef_int sf_writef_float sf_writef_double sf_read_short
sf_read_int sf_read_float sf_read_double sf_write_short sf_write_int
sf_write_float sf_write_double sf_write_sync sf_wchar_open sf_set_chunk
sf_get_chunk_iterator sf_next_chunk_iterator sf_get_chunk_size
sf_get_chunk_data"
real_sndfile=$({ ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null |
               awk '$1 == "libsndfile.so.1" { print $NF; exit }')
sndfile_from="the built-in list"
if [ -n "$real_sndfile" ] && [ -r "$real_sndfile" ]; then
  real=$("$NM" -D --defined-only "$real_sndfile" | awk 'NF == 3 && $2 ~ /^[TW]$/ { sub(/@.*/, "", $3); print $3 }')
  extra=$(comm -13 <(printf '%s\n' $sndfile_names | sort -u) <(printf '%s\n' $real | sort -u))
  if [ -n "$extra" ]; then
    echo "lint.symbols: note: $real_sndfile exports names missing from the list:" $extra
  fi
  sndfile_names="$sndfile_names $real"
  sndfile_from="the built-in list and $real_sndfile"
fi

# Global defined symbols of the static library outside slabfeed_/sf__ that
# come from the toolchain and cannot clash. Reads "TYPE NAME" lines, prints
# the ones not accepted.
toolchain_ok() {
  awk '
    $2 ~ /^(slabfeed_|sf__)/ { next }
    # NVTX v3 is header-only: each translation unit that includes it defines
    # its implementation as weak (W/V) hidden symbols with the _v3 suffix,
    # merged at link and never exported from the .so (rule 1).
    $2 ~ /^nvtx[A-Za-z0-9_]*_v3$/ && $1 ~ /^[WV]$/ { next }
    $2 == "InitializeInjectionNvtx2_fnptr" && $1 ~ /^[WV]$/ { next }
    # GCC'\''s weak hidden pointer to the C++ personality routine (the host
    # code of the .cu objects); the dot keeps it out of any source name.
    $2 == "DW.ref.__gxx_personality_v0" && $1 ~ /^[WV]$/ { next }
    # nvcc gives anonymous-namespace code of a .cu file external linkage in
    # a namespace named by a hash of the file (_GLOBAL__N__<hash>_<file>_...),
    # as functions (_ZN) and function-local statics (_ZZN): unique per file.
    $2 ~ /^_ZZ?N[0-9]+_GLOBAL__N_/ && $1 ~ /^[TWVuRDB]$/ { next }
    { print "  " $1 " " $2 }'
}

# check SO A: prints the violations, returns their count (0: clean).
check() {
  local so=$1 a=$2 n=0 bad
  bad=$("$NM" -D --defined-only "$so" | awk 'NF == 3 {
          sub(/@.*/, "", $3)
          if ($3 ~ /^slabfeed_/) next
          if ($2 == "A" && $3 ~ /^SLABFEED_/) next   # a version node, if any
          print "  " $2 " " $3 }')
  if [ -n "$bad" ]; then
    echo "FAIL: $so exports symbols outside slabfeed_*:"
    echo "$bad"
    n=$((n + 1))
  fi
  bad=$("$NM" -g --defined-only "$a" 2>/dev/null | awk 'NF == 3 { print $2, $3 }' | toolchain_ok | sort -u)
  if [ -n "$bad" ]; then
    echo "FAIL: $a has global symbols outside slabfeed_*, sf__* and the toolchain's:"
    echo "$bad"
    n=$((n + 1))
  fi
  bad=$({ "$NM" "$a"; "$NM" -D "$so"; "$NM" "$so"; } 2>/dev/null |
        awk 'NF >= 2 { sub(/@.*/, "", $NF); print $NF }' | sort -u |
        comm -12 - <(printf '%s\n' $sndfile_names | sort -u))
  if [ -n "$bad" ]; then
    echo "FAIL: symbols named like libsndfile's exports (from $sndfile_from):"
    echo "$bad" | sed 's/^/  /'
    n=$((n + 1))
  fi
  return $n
}

status=0
if check "$so" "$a"; then
  echo "lint.symbols: $(basename "$so"): $("$NM" -D --defined-only "$so" | awk 'NF == 3' | wc -l) exported, all slabfeed_*"
  echo "lint.symbols: $(basename "$a"): $("$NM" -g --defined-only "$a" 2>/dev/null | awk 'NF == 3 && $3 ~ /^(slabfeed_|sf__)/' | wc -l) global slabfeed_*/sf__*, $("$NM" -g --defined-only "$a" 2>/dev/null | awk 'NF == 3 && $3 !~ /^(slabfeed_|sf__)/' | wc -l) of the toolchain's classes"
  echo "lint.symbols: no name of libsndfile's $(printf '%s\n' $sndfile_names | sort -u | wc -l) exports (from $sndfile_from)"
else
  status=1
fi

if [ "$self_test" = 1 ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  CC=${CC:-cc}
  # plant NAME C-SOURCE: a copy of the static library with one more object.
  plant() {
    printf '%s\n' "$2" > "$tmp/$1.c"
    "$CC" -c -fPIC -o "$tmp/$1.o" "$tmp/$1.c" || exit 1
    cp "$a" "$tmp/$1.a" && ar rc "$tmp/$1.a" "$tmp/$1.o" || exit 1
  }
  # expect CASE SO A PATTERN: check must fail and name PATTERN.
  expect() {
    local out
    if out=$(check "$2" "$3"); then
      echo "FAIL: self-test: $1: accepted"
      status=1
    elif ! printf '%s\n' "$out" | grep -q -- "$4"; then
      echo "FAIL: self-test: $1: rejected without naming $4:"
      echo "$out"
      status=1
    else
      echo "lint.symbols: self-test: $1: rejected"
    fi
  }
  plant sndfile 'int sf_open(void) { return 0; }'
  expect "global sf_open in the .a" "$so" "$tmp/sndfile.a" " sf_open$"
  plant local 'static int sf_seek(void) { return 1; } int sf__use(void) { return sf_seek(); }'
  expect "local sf_seek in the .a" "$so" "$tmp/local.a" "sf_seek"
  plant undef 'extern int sf_strerror(void); int sf__call(void) { return sf_strerror(); }'
  expect "undefined sf_strerror in the .a" "$so" "$tmp/undef.a" "sf_strerror"
  plant prefix 'int oops_global = 1;'
  expect "global oops_global in the .a" "$so" "$tmp/prefix.a" "oops_global"
  plant nvtx 'int nvtxRangePushA_impl_init_v3(void) { return 0; }'
  expect "strong nvtx*_v3 in the .a" "$so" "$tmp/nvtx.a" "nvtxRangePushA_impl_init_v3"
  plant anon 'int _ZN3foo3barEv(void) { return 0; }'
  expect "C++ symbol outside an anonymous namespace in the .a" "$so" "$tmp/anon.a" "_ZN3foo3barEv"
  printf 'int foo(void) { return 0; }\nint slabfeed_ok(void) { return 0; }\n' > "$tmp/foo.c"
  "$CC" -shared -fPIC -o "$tmp/libfoo.so" "$tmp/foo.c" || exit 1
  expect "foo exported from a .so" "$tmp/libfoo.so" "$a" " foo$"
  printf 'int sf_close(void) { return 0; }\n' > "$tmp/close.c"
  "$CC" -shared -fPIC -o "$tmp/libclose.so" "$tmp/close.c" || exit 1
  expect "sf_close exported from a .so" "$tmp/libclose.so" "$a" "sf_close"
fi

if [ "$status" = 0 ]; then
  echo "lint.symbols: PASS"
fi
exit "$status"
