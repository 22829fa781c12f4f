#!/usr/bin/env bash
# lint.layers: the library's modules depend one way. Every module of src/
# has a layer; a file may include the headers of its own module and of
# lower layers only, so the include graph has no circle and data flows
# down: facade -> back ends -> batch plan -> gather / slab -> store, h5,
# config -> base (errors, geometry, sampler, symmetry, transform, ...).
# A module missing from the table fails the lint, so a new file must be
# placed in it. Usage: lint_layers.sh SRC_DIR
set -euo pipefail
src=${1:?usage: lint_layers.sh SRC_DIR}

declare -A layer=(
  # 0: base, no project includes but the public headers and each other below
  [geometry]=0 [inject]=0 [symmetry]=0 [convert]=0 [nvtx]=0 [transform_gpu]=0
  [errors]=0 [stats]=0
  # 1: leaves over the base
  [sampler]=1 [transform]=1 [cudart]=1 [h5]=1 [placement]=1 [config]=1
  # 2: the store (windows) over the placement
  [store]=2
  # 3: how slabs are read and pieces move
  [slab]=3 [gather]=3
  # 4: the plan of a batch
  [batch]=4
  # 5: remote pieces fetched ahead (over the plan)
  [fetch]=5
  # 6: the back-end interface; 7: its implementations (reached by the
  # facade only through the interface's ops tables)
  [backend]=6 [host]=7 [gpu]=7 [gpu_none]=7
  # 8: the facade, and the tools beside it
  [loader]=8 [gen]=8 [reference]=8
)

bad=0
for f in "$src"/*.c "$src"/*.h "$src"/*.cu; do
  [ -e "$f" ] || continue
  base=$(basename "$f")
  mod=${base%.*}
  if [ -z "${layer[$mod]+x}" ]; then
    echo "lint.layers: $base: module '$mod' has no layer in $0" >&2
    bad=1
    continue
  fi
  while read -r inc; do
    dep=${inc%.h}
    [ -e "$src/$inc" ] || continue # public or system header
    [ "$dep" = "$mod" ] && continue
    if [ -z "${layer[$dep]+x}" ]; then
      echo "lint.layers: $base includes $inc: module '$dep' has no layer" >&2
      bad=1
    elif [ "${layer[$dep]}" -ge "${layer[$mod]}" ]; then
      echo "lint.layers: $base (layer ${layer[$mod]}) includes $inc" \
        "(layer ${layer[$dep]}): modules may include lower layers only" >&2
      bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done
if [ "$bad" -ne 0 ]; then
  echo "lint.layers: FAIL"
  exit 1
fi
echo "lint.layers: PASS"
