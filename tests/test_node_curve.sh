#!/usr/bin/env bash
# jobs/node-curve.sh on a machine without GPUs (jobs.node_curve):
#   1. bash -n, and shellcheck -x where it is installed;
#   2. --dry-run for an 8-GPU node with GPUs 0-3 on NUMA 0 and 4-7 on NUMA 1
#      (SF_NC_GPU_NUMA): NCCL_NVLS_ENABLE=0 exported, every step's command
#      for 1, 2, 4, 8 ranks (one replica per rank at 8), the per-GPU
#      binding wrapper; --bind launcher: the launcher's placement flags;
#   3. the binding wrapper (--exec-bound) puts a rank on its CPU list;
#   4. --host: a real run of the loader steps on 1 and 2 ranks (host
#      batches, a 32^3 file; one replica per rank on 2) and the Markdown
#      tables from their JSON lines.
# Usage: test_node_curve.sh REPO BUILD_DIR
set -uo pipefail
repo=${1:?usage: test_node_curve.sh REPO BUILD_DIR}
build=${2:?usage: test_node_curve.sh REPO BUILD_DIR}
script=$repo/jobs/node-curve.sh
export SLABFEED_BUILD_DIR=$build
fail=0
no() {
  echo "FAIL: $*"
  fail=1
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 1. Syntax and lint.
bash -n "$script" || no "bash -n"
if command -v shellcheck >/dev/null; then
  (cd "$repo" && shellcheck -x jobs/node-curve.sh) || no "shellcheck"
else
  echo "shellcheck not installed: lint skipped"
fi

# 2. Dry runs.
out=$(SF_NC_GPU_NUMA="0 0 0 0 1 1 1 1" bash "$script" --dry-run --gpus 8 \
  --size 512 --file "$work/box.h5" --out "$work/dry" 2>&1) || no "dry run failed: $out"
echo "$out" | head -n 30
grep -q "NCCL_NVLS_ENABLE=0" <<<"$out" || no "NCCL_NVLS_ENABLE=0 not said"
grep -q "binding: gpu" <<<"$out" || no "the GPU binding not chosen"
for r in 1 2 4 8; do
  n=$(grep -v SLABFEED_RANK_PER_NODE <<<"$out" | grep -c -- "-n $r .*slabfeed-bench .*--device local")
  [ "$n" -eq 2 ] || no "$n loader runs on $r ranks (want 2: 256^3 f32, 128^3 bf16)"
  n=$(grep -c -- "-n $r .*env SLABFEED_RANK_PER_NODE=1 .*slabfeed-bench" <<<"$out")
  [ "$n" -eq "$([ $r = 8 ] && echo 2 || echo 0)" ] ||
    no "$n runs with one replica per rank on $r ranks (want 2 on 8 ranks only)"
  grep -q -- "-n $r .*train_throughput.py .*--loader slabfeed --dtype bf16" <<<"$out" ||
    no "no slabfeed training on $r ranks"
  grep -q -- "-n $r .*train_throughput.py .*--loader peer --workers" <<<"$out" ||
    no "no original pipeline on $r ranks"
done
grep -q -- "--exec-bound --" <<<"$out" || no "no binding wrapper"
# The residency reaches the loader and the training (default auto).
grep -q -- "slabfeed-bench .*--residency auto" <<<"$out" || no "the loader runs name no residency"
out_dev=$(SF_NC_GPU_NUMA="0 0 0 0 1 1 1 1" bash "$script" --dry-run --gpus 8 \
  --size 512 --file "$work/box.h5" --out "$work/dry-dev" --residency device 2>&1) ||
  no "dry run with --residency device failed: $out_dev"
[ "$(grep -c -- "slabfeed-bench .*--residency device" <<<"$out_dev")" -ge 8 ] ||
  no "--residency device not on every loader run"
grep -q -- "train_throughput.py .*--residency device" <<<"$out_dev" ||
  no "--residency device not passed to the training"
if bash "$script" --dry-run --gpus 8 --residency nowhere >/dev/null 2>&1; then
  no "--residency nowhere accepted"
fi
grep -q -- "-x NCCL_NVLS_ENABLE\|-genvlist NCCL_NVLS_ENABLE" <<<"$out" ||
  no "NCCL_NVLS_ENABLE not passed to the ranks"
grep -q "rank 4: GPU 4 on NUMA 1" <<<"$out" || no "rank 4's GPU not on NUMA 1"
grep -q "slabfeed-gen .*--shape 512 .*--content field" <<<"$out" || no "no generation"
out=$(bash "$script" --dry-run --gpus 2 --bind launcher --size 512 \
  --file "$work/box.h5" --out "$work/dry2" 2>&1) || no "dry run (launcher) failed: $out"
if grep -q "launcher: openmpi" <<<"$out"; then
  grep -q -- "--map-by numa:PE=[0-9]* --rank-by core --bind-to core" <<<"$out" ||
    no "Open MPI's placement flags missing: $out"
elif grep -q "launcher: hydra" <<<"$out"; then
  grep -q -- "-bind-to numa" <<<"$out" || no "hydra's -bind-to numa missing"
fi
bash "$script" --bogus >/dev/null 2>&1
[ $? -eq 2 ] || no "an unknown option must exit 2"

# 3. The wrapper binds a rank to its list.
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  got=$(SF_NC_CPUS="0 1" OMPI_COMM_WORLD_LOCAL_RANK=1 bash "$script" --exec-bound -- \
    sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
  [ "$got" = 1 ] || no "local rank 1 bound to '$got', want 1"
fi

# 4. A real run on the host path.
out=$(bash "$script" --host --ranks "1 2" --steps 3 --out "$work/host" 2>&1) ||
  no "host run failed: $out"
md=$work/host/node-curve.md
if [ -f "$md" ]; then
  cat "$md"
  grep -q "^| 1 | 0 | [0-9.]* |" "$md" || no "no 1-rank row in the table"
  grep -q "^| 2 | 0 | [0-9.]* |" "$md" || no "no 2-rank row in the table"
  grep -q "topology warnings" "$md" || no "no warnings column"
  grep -q "^| 2 | 16^3 x2 f32 | [0-9.]* | [0-9.]* | [0-9.]* |" "$md" ||
    no "no replica-per-rank row"
  grep -q "runs without a result line" "$md" && no "a run without a result"
else
  no "no node-curve.md: $out"
fi
grep -q "^topology: 2 ranks on 1 host" "$work/host/loader16-R2.log" ||
  no "the bench printed no topology table"
grep -q "^numa: rank 1 on " "$work/host/loader16-R2.log" ||
  no "the bench printed no NUMA line for rank 1"

[ $fail -eq 0 ] && echo "jobs.node_curve: PASS"
exit $fail
