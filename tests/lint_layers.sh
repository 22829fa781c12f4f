#!/usr/bin/env bash
# lint.layers: the library's modules depend one way. The layer of every
# module is read from the one table in docs/ARCHITECTURE.md (rows
# "| layer | `src/folder/` | `module`, ... | what |"); a file may include
# the headers of its own module and of lower layers only, so the include
# graph has no circle and data flows down. A file of src/ whose module is
# not in the table fails the lint, and so does a table row naming a module
# that has no file: the table and the tree cannot drift apart. Every file
# of src/ is in a layer folder: one at the root of src/ fails too.
# Usage: lint_layers.sh SRC_DIR ARCHITECTURE.md
set -euo pipefail
src=${1:?usage: lint_layers.sh SRC_DIR ARCHITECTURE.md}
doc=${2:?usage: lint_layers.sh SRC_DIR ARCHITECTURE.md}

declare -A layer=()
while IFS='|' read -r _ num folder mods _; do
  num=${num//[[:space:]]/}
  folder=$(sed 's/[` ]//g; s|^src/||; s|/$||' <<<"$folder")
  if [ -z "$folder" ]; then
    echo "lint.layers: $doc places modules at the root of src/: every" \
      "module is in a layer folder" >&2
    bad_doc=1
  fi
  for m in $(grep -o '`[a-z0-9_]*`' <<<"$mods" | tr -d '`'); do
    key=${folder:+$folder/}$m
    layer[$key]=$num
    if ! compgen -G "$src/$key.[ch]" >/dev/null && ! compgen -G "$src/$key.cu" >/dev/null; then
      echo "lint.layers: $doc names module '$key', which has no file in $src" >&2
      bad_doc=1
    fi
  done
done < <(grep -E '^\|[[:space:]]*[0-9]+[[:space:]]*\|[[:space:]]*`src/' "$doc")
if [ ${#layer[@]} -eq 0 ]; then
  echo "lint.layers: no layer table found in $doc" >&2
  echo "lint.layers: FAIL"
  exit 1
fi

bad=${bad_doc:-0}
while read -r f; do
  rel=${f#"$src"/}
  mod=${rel%.*}
  if [ "$rel" = "${rel#*/}" ]; then
    echo "lint.layers: $rel sits at the root of $src: every file is in a" \
      "layer folder" >&2
    bad=1
    continue
  fi
  if [ -z "${layer[$mod]+x}" ]; then
    echo "lint.layers: $rel: module '$mod' has no layer in $doc" >&2
    bad=1
    continue
  fi
  while read -r inc; do
    dep=${inc%.h}
    [ -e "$src/$inc" ] || continue # public or system header
    [ "$dep" = "$mod" ] && continue
    if [ -z "${layer[$dep]+x}" ]; then
      echo "lint.layers: $rel includes $inc: module '$dep' has no layer" >&2
      bad=1
    elif [ "${layer[$dep]}" -ge "${layer[$mod]}" ]; then
      echo "lint.layers: $rel (layer ${layer[$mod]}) includes $inc" \
        "(layer ${layer[$dep]}): modules may include lower layers only" >&2
      bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find "$src" -name '*.c' -o -name '*.h' -o -name '*.cu' | sort)
if [ "$bad" -ne 0 ]; then
  echo "lint.layers: FAIL"
  exit 1
fi
echo "lint.layers: PASS (${#layer[@]} modules)"
