#!/usr/bin/env bash
# docs.quickstart: runs the README's quickstart block as written, in a
# fresh folder, with the build under test (SLABFEED_BUILD_DIR), and checks
# that each step left what the README says: the box, its pictures, the
# checkpoint after 100 steps, the prediction and its picture. The first
# line (jobs/local.sh: install and build) is the build itself and is not
# run again. The folder holds links to the tree's jobs/ and examples/, as
# a clone would.
# Usage: run_quickstart.sh SRC_DIR WORK_DIR
set -euo pipefail
src=${1:?usage: run_quickstart.sh SRC_DIR WORK_DIR}
work=${2:?usage: run_quickstart.sh SRC_DIR WORK_DIR}
rm -rf "$work"
mkdir -p "$work"
ln -s "$src/jobs" "$work/jobs"
ln -s "$src/examples" "$work/examples"
# The first ```sh block after "## Quickstart".
awk '/^## Quickstart/ {q = 1} q && /^```sh/ {b = 1; next} b && /^```/ {exit} b' \
  "$src/README.md" >"$work/quickstart.sh"
if ! grep -q '^jobs/local.sh' "$work/quickstart.sh"; then
  echo "docs.quickstart: no quickstart block (starting with jobs/local.sh) in README.md"
  exit 1
fi
sed -i 's|^jobs/local.sh|: jobs/local.sh|' "$work/quickstart.sh"
echo "docs.quickstart: running:"
sed 's/^/  /' "$work/quickstart.sh"
cd "$work"
log=$work/quickstart.log
if ! bash -euo pipefail -x quickstart.sh >"$log" 2>&1; then
  tail -n 40 "$log"
  echo "docs.quickstart: FAIL (a command of the block failed; log: $log)"
  exit 1
fi
bad=0
for f in run/box.h5 run/box.png run/crops.png run/unet.pt run/pred.h5 run/pred.png; do
  [ -s "$f" ] || { echo "docs.quickstart: $f was not written"; bad=1; }
done
grep -q 'checkpoint: step 100 written to unet.pt' "$log" ||
  { echo "docs.quickstart: training did not write its checkpoint at step 100"; bad=1; }
grep -q 'predict: wrote prediction' "$log" ||
  { echo "docs.quickstart: predict.py did not report its output"; bad=1; }
if [ $bad = 0 ]; then
  grep -E '^(slabfeed-gen: wrote|step +100|predict: )' "$log" | sed 's/^/  /'
  echo "docs.quickstart: PASS"
else
  tail -n 40 "$log"
  echo "docs.quickstart: FAIL"
fi
