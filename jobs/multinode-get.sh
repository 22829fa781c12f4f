#!/bin/bash
# Measures on 2-4 real nodes what bench/scale_model.py needs, and checks the
# model against it (docs/SCALING.md):
#   1. one-sided MPI_Get bandwidth by message size between nodes
#      (bench/get_bw): one stream (rank 0 -> a rank of the second half), then
#      every GPU rank of the reading nodes at once (what a node's NICs give),
#      with the per-row cost of a datatype get (today's loader);
#   2. slabfeed-bench on one node (no remote byte: the host-link bound) and
#      on all nodes with the volume sharded over all of them (today's
#      placement, G = N; real nodes, SLABFEED_RANK_PER_NODE unset), 256^3
#      batch 1 and 128^3 batch 4, with and without a 50 ms busy step;
#   3. slabfeed-check on all nodes for the bytes that came by MPI_Get (the
#      remote fraction, against the model's exact 1 - 1/N);
#   4. the model with this machine's figures, beside the measurements.
#
#   sbatch jobs/multinode-get.sh                       (adapt account/partition)
#   sbatch -N 4 jobs/multinode-get.sh                  (N even for step 1)
#   SIZE=1024 sbatch jobs/multinode-get.sh             (the 38.7 GB volume)
#
# Environment (all optional): BIN (slabfeed apps, default build/apps),
# GET_BW (default build/bench/get_bw, else compiled here with mpicc), FILE
# and SIZE (volume, default $SCRATCH/slabfeed/box$SIZE.h5, SIZE=512 as in
# issue 10), SLABFEED_DEVICE (default 0: --gpus-per-task=1 shows each rank
# its GPU as device 0; -1 runs host batches, no step), CROPS (crop edge x
# batch pairs, default "256x1 128x4"), STEPS (default 20), RUN_CHECK
# (default 1) and CHECK_CROP (its crop edge, default 128), OUT (default
# slabfeed-multinode-$SLURM_JOB_ID).
# Open MPI: the world window needs an RDMA-capable osc (ucx, or rdma with a
# NIC transport); try OMPI_MCA_osc=ucx and =rdma, and sm,pt2pt where
# neither works (docs/DECISIONS.md), and compare.
#SBATCH --job-name=slabfeed-multinode
#SBATCH --nodes=2                    # N: 2 to 4 (even for the all-GPU get test)
#SBATCH --ntasks-per-node=4          # one rank per GPU (4 on Perlmutter, 8 on a DGX)
#SBATCH --gpus-per-task=1            # each rank sees its own GPU as device 0
#SBATCH --cpus-per-task=8
#SBATCH --exclusive                  # nothing else on the nodes' NICs
#SBATCH --time=00:45:00
#SBATCH --output=slabfeed-multinode-%j.out
set -euo pipefail
ROOT=${SLURM_SUBMIT_DIR:-$PWD}
BIN=${BIN:-$ROOT/build/apps}
SIZE=${SIZE:-512}
FILE=${FILE:-${SCRATCH:-$ROOT}/slabfeed/box$SIZE.h5}
DEV=${SLABFEED_DEVICE:-0}
STEPS=${STEPS:-20}
CROPS=${CROPS:-256x1 128x4}
OUT=${OUT:-$ROOT/slabfeed-multinode-${SLURM_JOB_ID:-local}}
N=${SLURM_NNODES:?run under Slurm (sbatch)}
NT=${SLURM_NTASKS:?}
R=$((NT / N))                        # ranks (GPUs) per node
mkdir -p "$OUT" "$(dirname "$FILE")"
unset SLABFEED_RANK_PER_NODE         # real nodes: pieces of other nodes over MPI
# The volume sharded over all nodes (G = N), as the model assumes.
export SLABFEED_GROUP_NODES=${SLABFEED_GROUP_NODES:--1}
export HDF5_USE_FILE_LOCKING=FALSE   # locking fails or stalls on Lustre/GPFS
export OMP_NUM_THREADS=1
log() { tee -a "$OUT/run.log"; }
# Block placement: ranks 0..R-1 on the first node, and so on (get_bw's pairs
# and the slab plan's node ranges both assume it).
run() { srun --distribution=block --cpu-bind=cores "$@"; }

echo "nodes $N x $R ranks: $(scontrol show hostnames "$SLURM_JOB_NODELIST" | tr '\n' ' ')" | log
echo "OMPI_MCA_osc=${OMPI_MCA_osc:-<default>}  OMPI_MCA_pml=${OMPI_MCA_pml:-<default>}" | log

# ---- 1. one-sided get bandwidth between nodes -------------------------------
GET_BW=${GET_BW:-$ROOT/build/bench/get_bw}
if [ ! -x "$GET_BW" ]; then
  GET_BW=$OUT/get_bw
  mpicc -std=c11 -O2 "$ROOT/bench/get_bw.c" -o "$GET_BW"
fi
# One stream: rank 0 (first node) reads from rank 1 (second node).
run -N 2 -n 2 --ntasks-per-node=1 "$GET_BW" --pairs one 2>&1 | tee "$OUT/get_one.txt" | log
# Every rank of the first N/2 nodes reads from its partner N/2 nodes on.
if [ $((N % 2)) -eq 0 ]; then
  run "$GET_BW" --pairs all 2>&1 | tee "$OUT/get_all.txt" | log
else
  echo "get_bw --pairs all skipped: N=$N is odd (pairs would share nodes)" | log
  cp "$OUT/get_one.txt" "$OUT/get_all.txt"
fi

# ---- 2. slabfeed-bench: one node, then all nodes ----------------------------
if [ ! -f "$FILE" ]; then
  if command -v lfs >/dev/null; then
    lfs setstripe -c -1 -S 16M "$(dirname "$FILE")" || true
  fi
  run "$BIN/slabfeed-gen" --file "$FILE" --shape "$SIZE" --content field 2>&1 | log
fi
# shellcheck disable=SC2054  # 1,2,3 is one argument
L=(--file "$FILE" --input Nbody --target Hydro --input-vector 1,2,3
   --target-vector 1,2,3 --device "$DEV" --steps "$STEPS")
STEP=(--step-ms 50)
[ "$DEV" -lt 0 ] && STEP=(--step-ms 0)
for cb in $CROPS; do
  read -r c b <<<"${cb/x/ }"
  run -N 1 -n "$R" "$BIN/slabfeed-bench" "${L[@]}" --crop "$c" --batch "$b" \
    --dtype bf16 "${STEP[@]}" --label "one-node-$c" 2>&1 | tee -a "$OUT/bench.txt" | log
  run "$BIN/slabfeed-bench" "${L[@]}" --crop "$c" --batch "$b" \
    --dtype bf16 "${STEP[@]}" --label "all-nodes-$c" 2>&1 | tee -a "$OUT/bench.txt" | log
done

# ---- 3. remote fraction: bytes by MPI_Get in slabfeed-check -----------------
if [ "${RUN_CHECK:-1}" = 1 ]; then
  run "$BIN/slabfeed-check" --file "$FILE" --input Nbody --target Hydro \
    --input-vector 1,2,3 --target-vector 1,2,3 --device "$DEV" \
    --crop "${CHECK_CROP:-128}" --batch 2 --steps 4 2>&1 | tee "$OUT/check.txt" | log
fi

# ---- 4. the model with these figures, beside the measurements ---------------
python3 - "$OUT" "$ROOT" "$N" "$R" "$SIZE" "$CROPS" <<'EOF' 2>&1 | log
import json, re, subprocess, sys
out, root, size = sys.argv[1], sys.argv[2], sys.argv[5]
N, R = int(sys.argv[3]), int(sys.argv[4])
crops = [tuple(int(x) for x in cb.split("x")) for cb in sys.argv[6].split()]

def grab(path, pattern, cast=float):
    try:
        m = re.findall(pattern, open(path).read())
    except OSError:
        return None
    return cast(m[-1]) if m else None

one_big = grab(out + "/get_one.txt", r"large messages.*?: ([0-9.]+) GB/s per reader")
all_sum = grab(out + "/get_all.txt", r"GB/s per reader, ([0-9.]+) GB/s all")
curve = grab(out + "/get_one.txt", r"scale_model: --curve (\S+)", str)
op_us = grab(out + "/get_all.txt", r"scale_model: --op-us (\S+)")
reading_nodes = max(1, N // 2) if N % 2 == 0 else 1
node_nic = all_sum / reading_nodes if all_sum else None
print("\n== figures for bench/scale_model.py ==")
print("single stream, large gets: %s GB/s; all GPUs of a node at once: %s GB/s "
      "(the node's NICs as the loader sees them)" % (one_big, node_nic))
print("message-size curve (one stream): --curve %s; per 1 KiB row of a "
      "datatype get, all GPUs at once: --op-us %s" % (curve, op_us))

runs = {}
for line in open(out + "/bench.txt"):
    if line.startswith("JSON "):
        j = json.loads(line[5:])
        runs[(j["label"], j["step_ms"] > 0)] = j
rem = None
try:
    own = get = 0.0
    for line in open(out + "/check.txt"):
        f = line.split()
        if len(f) == 11 and f[0].isdigit():
            own += float(f[3]) + float(f[4])
            get += float(f[5])
    rem = get / (own + get) if own + get > 0 else None
except OSError:
    pass
if rem is not None:
    print("remote fraction (slabfeed-check): measured %.3f, "
          "model 1 - 1/N = %.3f (exact for uniform origins; sampling "
          "noise from few crops)" % (rem, 1 - 1 / N))

def model(c, B, link, design, group, issue):
    cmd = [sys.executable, root + "/bench/scale_model.py", "--nodes", str(N),
           "--gpus-per-node", str(R), "--group", group, "--volume", size,
           "--crop", str(c), "--batch", str(B), "--design", design,
           "--issue", issue, "--link-gbs-eff", "%.3f" % link,
           "--nics", "1", "--nic-gbs", "%.3f" % node_nic,
           "--op-us", "%.4f" % op_us, "--json"]
    r = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(r.stdout)


for c, B in crops:
    one = runs.get(("one-node-%d" % c, False))
    alln = runs.get(("all-nodes-%d" % c, False))
    step = runs.get(("all-nodes-%d" % c, True))
    if not one or not alln or not node_nic or not op_us:
        print("%d^3: missing figures, no model run" % c)
        continue
    link = one["crops_s"] / R * c**3 * 9 * 4 / 1e9  # per GPU, no remote
    m = model(c, B, link, "rows", "all", "next")
    meas = alln["crops_s"] / (N * R)
    print("\n%d^3 batch %d, %d nodes x %d GPUs, today's placement (G = N):"
          % (c, B, N, R))
    print("  crops/s per GPU: measured %.2f, model %.2f (model/measured "
          "%.2f), bound %s; one node measured %.2f" %
          (meas, m["crops_s"], m["crops_s"] / meas, m["bound"],
           one["crops_s"] / R))
    print("  remote per step per GPU %.3g MB in %.0f transfers of %.0f B"
          % (m["remote_bytes_step"] / 1e6, m["ops_step"], m["mean_transfer"]))
    if step:
        print("  exposed wait per %.0f ms step: measured %.1f ms, model "
              "%.1f ms" % (step["busy_ms"], step["exposed_ms"],
                           m["exposed"] * 1e3))
    co = model(c, B, link, "coalesced", "all", "ahead")
    g1 = model(c, B, link, "rows", "1", "auto")
    lo = model(c, B, link, "local", "all", "auto")
    print("  model with the same figures, crops/s per GPU: coalesced and "
          "fetched ahead %.1f (%s-bound, transfers of %.0f kB), G = 1 %.1f, "
          "locality mode %.1f" % (co["crops_s"], co["bound"],
                                  co["mean_transfer"] / 1e3, g1["crops_s"],
                                  lo["crops_s"]))
EOF
echo "figures and logs in $OUT" | log
