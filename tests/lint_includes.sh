#!/usr/bin/env bash
# lint.includes: the include graph of the whole tree has no circle. A node
# is a module: the files of one folder with one stem (x.c, x.h and x.cu
# are module x). A file of module A that includes "y.h" gives the edge
# A -> module of y.h; the quoted name is resolved as the compiler does, in
# the including file's folder first, then in each -I folder in order (a
# name found nowhere is a system or generated header, and no edge). The
# lint fails, printing each circle found, when the module graph is not a
# DAG. lint.layers checks the layer order of src/ on top of this; this
# lint covers every C and CUDA file of the trees it is given.
# Usage: lint_includes.sh [-I DIR]... ROOT...   (paths are printed
# relative to the current directory)
set -euo pipefail
incs=()
roots=()
while [ $# -gt 0 ]; do
  case $1 in
  -I)
    incs+=("$(cd "${2:?-I needs a folder}" && pwd -P)")
    shift 2
    ;;
  -I*)
    incs+=("$(cd "${1#-I}" && pwd -P)")
    shift
    ;;
  *)
    roots+=("$(cd "$1" && pwd -P)")
    shift
    ;;
  esac
done
if [ ${#roots[@]} -eq 0 ]; then
  echo "usage: lint_includes.sh [-I DIR]... ROOT..." >&2
  exit 2
fi
base=$(pwd -P)

# norm PATH - PATH with "." and "dir/.." segments removed (into $REPLY).
norm() {
  local IFS=/ part out=()
  for part in $1; do
    case $part in
    '' | .) ;;
    ..) [ ${#out[@]} -gt 0 ] && unset 'out[${#out[@]}-1]' ;;
    *) out+=("$part") ;;
    esac
  done
  REPLY="/${out[*]}"
}

# rel PATH - PATH relative to $base where it is below it (into $REPLY).
rel() {
  REPLY=${1#"$base"/}
}

declare -A adj=()   # module -> " dep dep ..."
declare -A known=() # every module of the given trees
nfiles=0
nedges=0
while read -r f; do
  nfiles=$((nfiles + 1))
  mod=${f%.*}
  known[$mod]=1
  dir=${f%/*}
  while read -r inc; do
    target=""
    for d in "$dir" ${incs[@]+"${incs[@]}"}; do
      if [ -f "$d/$inc" ]; then
        norm "$d/$inc"
        target=$REPLY
        break
      fi
    done
    [ -n "$target" ] || continue # system or generated header
    dep=${target%.*}
    [ "$dep" = "$mod" ] && continue
    case " ${adj[$mod]-} " in
    *" $dep "*) ;;
    *)
      adj[$mod]="${adj[$mod]-} $dep"
      nedges=$((nedges + 1))
      ;;
    esac
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find "${roots[@]}" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
  -o -name '*.cuh' \) | sort)

# Depth-first search: 1 on the path (grey), 2 done (black); an edge to a
# grey module closes a circle, printed from that module round to itself.
declare -A color=()
path=()
circles=0
visit() {
  local m=$1 d i cyc
  color[$m]=1
  path+=("$m")
  for d in ${adj[$m]-}; do
    if [ "${color[$d]-0}" = 1 ]; then
      cyc=""
      for ((i = ${#path[@]} - 1; i >= 0; i--)); do
        rel "${path[$i]}"
        cyc="$REPLY -> $cyc"
        [ "${path[$i]}" = "$d" ] && break
      done
      rel "$d"
      echo "lint.includes: include circle: ${cyc}$REPLY" >&2
      circles=$((circles + 1))
    elif [ "${color[$d]-0}" = 0 ]; then
      visit "$d"
    fi
  done
  unset 'path[${#path[@]}-1]'
  color[$m]=2
}
for m in $(printf '%s\n' "${!adj[@]}" | sort); do
  [ "${color[$m]-0}" = 0 ] && visit "$m"
done

if [ "$circles" -ne 0 ]; then
  echo "lint.includes: FAIL ($circles circle(s); module = folder/stem, so" \
    "x.c and x.h are one node)"
  exit 1
fi
echo "lint.includes: PASS ($nfiles files, ${#known[@]} modules, $nedges" \
  "module includes, no circle)"
