#!/usr/bin/env bash
# docs.options: docs/OPTIONS.md holds the option table exactly as
# `slabfeed-info --options` prints it (the library's table), between its
# markers. Usage: check_options_doc.sh OPTIONS.md -- LAUNCH... slabfeed-info
set -euo pipefail
doc=${1:?usage: check_options_doc.sh OPTIONS.md -- COMMAND...}
shift
[ "${1:-}" = "--" ] && shift
want=$(sed -n '/^<!-- options:begin/,/^<!-- options:end/p' "$doc" | sed '1d;$d')
got=$("$@" --options)
if [ -z "$want" ]; then
  echo "docs.options: no table between the markers of $doc"
  echo "docs.options: FAIL"
  exit 1
fi
if ! diff <(printf '%s\n' "$want") <(printf '%s\n' "$got"); then
  echo "docs.options: $doc differs from 'slabfeed-info --options' (above:"
  echo "  < the doc, > the library); regenerate the table between the markers"
  echo "docs.options: FAIL"
  exit 1
fi
echo "docs.options: PASS ($(printf '%s\n' "$got" | wc -l) lines)"
