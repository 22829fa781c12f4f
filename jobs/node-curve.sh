#!/usr/bin/env bash
# The node curve: one node, 1, 2, 4, 8 ranks (one per GPU; as many GPUs as
# the node has), on one file of the reference shape (1024^3 x (4 + 5)
# channels where the node's memory allows, else 512^3):
#   (a) the loader alone: slabfeed-bench --device local, 256^3 f32 batch 1
#       and 128^3 bf16 batch 4, crops/s per GPU and in total, with the
#       ceilings of the same run (pinned H2D of one GPU alone and of all
#       ranks at once, host memcpy on all cores, GPU to GPU);
#   (b) DDP training of bench/train_throughput.py fed by slabfeed (U-Net
#       base 32 depth 3, 128^3 batch 2 per GPU, bf16): samples/s, GPU idle;
#   (c) the original pipeline in the same training (train_throughput.py
#       --loader peer: the whole volume in every process, DataLoader
#       workers with pin_memory), the best of several worker counts;
#   (d) at the largest rank count, the loader with one replica of the
#       volume per rank (SLABFEED_RANK_PER_NODE=1: every read NUMA-local,
#       R x the memory) against (a)'s shared node window, whose crops read
#       the slabs of every socket, where the memory allows;
# then writes OUT/node-curve.md (tables) and OUT/node-curve.png (samples/s
# against GPUs, slabfeed and original, with the ceilings; needs
# matplotlib, else the PNG is skipped and the table says so).
#
#   jobs/node-curve.sh                         # all GPUs of this node
#   jobs/node-curve.sh --gpus 1 --ranks "1 2 4" # 1-GPU smoke: ranks share it
#   jobs/node-curve.sh --dry-run --gpus 8      # print the commands only
#   jobs/node-curve.sh --host                  # CPU smoke: loader only,
#                                              # host batches, tiny file
#   jobs/node-curve.sh --report OUT            # tables and plot again
#
# Options: --residency auto|host|device (where the loader reads the slabs
# from, for steps a, b and d: GPU memory, the node's GPUs sharing theirs
# over CUDA IPC, or the node's shared memory; default auto), --gpus N
# (default: nvidia-smi -L | wc -l), --ranks "R ..."
# (default 1 2 4 8 up to N, and N), --size 1024|512|EDGE (default: by
# memory), --file F (default /tmp/box$SIZE.h5, generated when missing, as
# jobs/bench-h200.sh does), --out DIR (default node-curve-out), --steps S
# (loader timed steps, default 30), --train-steps S (default 30),
# --workers "W ..." (original pipeline, default: 2 4 8 16 up to the cores
# of a rank), --only a,b,c,d (steps to run), --bind gpu|launcher|none
# (below), --dry-run, --host, --report DIR.
#
# Binding. A GPU's copy engine reading pages of the other socket crosses
# the inter-socket link, and the loader thread and the pinned staging (the
# node window the loader registers, first touched by the rank that reads
# it) belong on the GPU's NUMA node. Under Slurm (SLURM_JOB_ID and srun):
# srun --cpu-bind=cores --cpus-per-task=K --gpus-per-task=1
# --gpu-bind=single:1 (each task its cores and the one GPU nearest them;
# --gpu-bind=closest would give a task all the GPUs of its NUMA node, and
# ranks of one socket would share device 0; with more ranks than GPUs, no
# GPU binding). Otherwise `--bind gpu` (the default where the GPUs' NUMA
# nodes are known: nvidia-smi and sysfs): every rank is bound with taskset
# to its share of the cores of its own GPU's NUMA node (GPU = node-local
# rank modulo the GPUs, as --device local picks), whatever the GPU
# numbering; `--bind launcher`: the launcher's own placement, Open MPI
# mpirun --map-by numa:PE=K --rank-by core --bind-to core (ranks in blocks
# per NUMA domain: right where GPUs are numbered in blocks per socket and
# every GPU is used), MPICH's hydra -bind-to numa; `--bind none`. Every
# loader run prints the topology table (slabfeed-bench --topology), and a
# rank bound away from its GPU is a WARNING there and a column here.
# NCCL_NVLS_ENABLE=0 (NVLink multicast off) is exported to the ranks.
#
# Test knobs: SF_NC_GPU_NUMA="n0 n1 ..." (the NUMA node of each GPU
# instead of nvidia-smi + sysfs).

# ---- The binding wrapper: node-curve.sh --exec-bound -- CMD ... -----------
# Runs on every rank under `--bind gpu`: exec CMD bound to the CPU list of
# its node-local rank in SF_NC_CPUS (one list per local rank).
if [ "${1:-}" = --exec-bound ]; then
  shift
  [ "${1:-}" = -- ] && shift
  lr=${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${PMI_LOCAL_RANK:-${SLURM_LOCALID:-0}}}}
  read -r -a sf_cpus <<<"${SF_NC_CPUS:-}"
  list=${sf_cpus[$lr]:-}
  if [ -n "$list" ] && [ "$list" != - ] && command -v taskset >/dev/null; then
    exec taskset -c "$list" "$@"
  fi
  exec "$@"
fi

set -euo pipefail
SELF=$(readlink -f "$0")
ROOT=$(cd "$(dirname "$SELF")/.." && pwd)
# shellcheck source=jobs/mpi.sh
. "$ROOT/jobs/mpi.sh"

usage() { sed -n '2,/^# Test knobs/p' "$SELF" | sed 's/^# \{0,1\}//'; }
die() { echo "node-curve: $*" >&2; exit 2; }

GPUS='' RANKS='' SIZE='' FILE='' OUT=node-curve-out STEPS=30 TRAIN_STEPS=30
WORKERS='' ONLY=a,b,c,d BIND='' DRY=0 HOST=0 REPORT_ONLY='' RESIDENCY=auto
while [ $# -gt 0 ]; do
  case $1 in
    --gpus) GPUS=${2:?}; shift ;;
    --ranks) RANKS=${2:?}; shift ;;
    --size) SIZE=${2:?}; shift ;;
    --file) FILE=${2:?}; shift ;;
    --out) OUT=${2:?}; shift ;;
    --steps) STEPS=${2:?}; shift ;;
    --train-steps) TRAIN_STEPS=${2:?}; shift ;;
    --workers) WORKERS=${2:?}; shift ;;
    --only) ONLY=${2:?}; shift ;;
    --bind) BIND=${2:?}; shift ;;
    --residency) RESIDENCY=${2:?}; shift ;;
    --dry-run) DRY=1 ;;
    --host) HOST=1 ;;
    --report) REPORT_ONLY=${2:?}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option '$1'" ;;
  esac
  shift
done
case ${BIND:-auto} in auto | gpu | launcher | none) ;; *) die "--bind gpu|launcher|none" ;; esac
case $RESIDENCY in auto | host | device) ;; *) die "--residency auto|host|device" ;; esac
[ "$HOST" = 1 ] && [ "$RESIDENCY" = device ] && die "--residency device needs GPUs (not --host)"
for v in STEPS TRAIN_STEPS ${GPUS:+GPUS} ${SIZE:+SIZE}; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a number, not '${!v}'"
done
for r in $RANKS; do [[ $r =~ ^[1-9][0-9]*$ ]] || die "--ranks: '$r' is not a rank count"; done

B=$(sf_build_dir)
[ "${B#/}" != "$B" ] || B=$ROOT/$B
BIN=$B/apps
PY=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "$B/CMakeCache.txt" 2>/dev/null || true)
PY=${PY:-python3}
report() { # the tables and the plot from the logs in $1
  "$PY" - "$1" <<'EOF'
import glob, json, os, sys

out = sys.argv[1]
node = json.load(open(os.path.join(out, "node.json")))
G = node["gpus"]

def lines(path):
    rows = []
    for ln in open(path, errors="replace"):
        if ln.startswith("JSON "):
            try:
                rows.append(json.loads(ln[5:]))
            except ValueError:
                pass
    return rows

def warnings_in(path):
    return sum(1 for ln in open(path, errors="replace") if ln.startswith("WARNING: rank "))

loader, train, peer, warn, failed, replica = {}, {}, {}, {}, [], {}
for path in sorted(glob.glob(os.path.join(out, "*-R*.log"))):
    name = os.path.basename(path)[:-4]
    step, r = name.rsplit("-R", 1)
    r = int(r)
    rows = lines(path)
    if not rows:
        failed.append(name)
    if step.startswith("loader") or step.startswith("replica"):
        warn[r] = max(warn.get(r, 0), warnings_in(path))
        for j in rows:
            if j.get("bench") == "loader" and not j.get("step_ms"):
                (loader if step.startswith("loader") else replica)[(r, j["crop"])] = j
    for j in rows:
        if j.get("bench") != "train_throughput":
            continue
        if j["loader"].startswith("slabfeed"):
            train[r] = j
        elif r not in peer or j["samples_s"] > peer[r]["samples_s"]:
            peer[r] = j

def f(x, d=1):
    return "n/a" if x is None else ("%.*f" % (d, x))

ranks = sorted({r for r, _ in loader} | set(train) | set(peer))
used = lambda r: min(r, G) if G else 0
per = lambda r: max(used(r), 1) if G else r  # host runs: per rank
unit = "GPU" if G else "rank"
crops = sorted({c for _, c in loader}, reverse=True)
md = ["# Node curve: %s, %d GPU(s)" % (node["host"], G), "",
      "File `%s` (%d^3 x 9 channels, %.2f GB); %s; binding: %s; "
      "NCCL_NVLS_ENABLE=0; %s." % (node["file"], node["size"], node["volume"] / 1e9,
                                   node["launcher"], node["binding"], node["date"]), ""]
if loader:
    md += ["## (a) The loader alone (slabfeed-bench --device %s)" % node["device"], ""]
    head = "| ranks | GPUs |"
    for c in crops:
        j = next(v for (rr, cc), v in loader.items() if cc == c)
        head += " %d^3 x%d %s crops/s | per %s | per %s / pinned H2D |" % (
            c, j["batch"], j["dtype"], unit, unit)
    md += [head + " topology warnings |", "|" + " --- |" * (2 + 3 * len(crops) + 1)]
    for r in ranks:
        row = "| %d | %d |" % (r, used(r))
        for c in crops:
            j = loader.get((r, c))
            if not j:
                row += " - | - | - |"
                continue
            g = per(r)
            link = j["link_gbs"] / g if j.get("link_gbs") else None
            ratio = link / j["ceil_pinned"] if link and j.get("ceil_pinned") else None
            row += " %s | %s | %s |" % (f(j["crops_s"]), f(j["crops_s"] / g),
                                         f(ratio, 3))
        md.append(row + " %s |" % warn.get(r, "-"))
    md += ["", "Ceilings measured in the same runs (GB/s; per GPU / pinned H2D: "
           "float32 gathered per GPU over one GPU's pinned H2D alone):", "",
           "| ranks | pinned H2D, one GPU alone | pinned H2D, all ranks at once: total | slowest rank | host memcpy, all cores | GPU to GPU |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in ranks:
        js = [loader[k] for k in loader if k[0] == r]
        if not js:
            continue
        j = js[0]
        md.append("| %d | %s | %s | %s | %s | %s |" % (
            r, f(j.get("ceil_pinned")), f(j.get("ceil_h2d_all")),
            f(j.get("ceil_h2d_all_min")), f(j.get("ceil_memcpyN")), f(j.get("ceil_p2p"))))
    md.append("")
if replica:
    md += ["One replica of the volume per rank (SLABFEED_RANK_PER_NODE=1: every "
           "crop byte from the rank's own pages, on its NUMA node; R x the "
           "memory) against the shared node window (one copy per node, each "
           "rank's slab on its own NUMA node, a crop's bytes from every "
           "slab):", "",
           "| ranks | crop | shared window crops/s | one replica per rank crops/s | replica / shared |",
           "| --- | --- | --- | --- | --- |"]
    for (r, c), j in sorted(replica.items()):
        w = loader.get((r, c))
        md.append("| %d | %d^3 x%d %s | %s | %s | %s |" % (
            r, c, j["batch"], j["dtype"], f(w and w["crops_s"]), f(j["crops_s"]),
            f(j["crops_s"] / w["crops_s"], 2) if w else "-"))
    md.append("")
# A training sample over the host link: input + target float32 (the loader
# copies float32 crops and converts on the GPU).
t0 = next(iter(train.values()), None) or next(iter(peer.values()), None)
sample = (t0["crop"] if t0 else 128) ** 3 * 9 * 4
if train or peer:
    md += ["## (b, c) Training: bench/train_throughput.py, DDP, U-Net base %s depth %s, %s^3 batch %s per GPU"
           % ((t0 or {}).get("base", "?"), (t0 or {}).get("depth", "?"),
              (t0 or {}).get("crop", "?"), (t0 or {}).get("batch", "?")), "",
           "| ranks | GPUs | slabfeed samples/s | per GPU | GPU idle | original samples/s (best) | workers | GPU idle | slabfeed / original | ceiling: H2D all at once / sample | host memcpy / sample |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in ranks:
        s, p = train.get(r), peer.get(r)
        ceil = next((loader[k] for k in loader if k[0] == r), {})
        h2d = ceil.get("ceil_h2d_all")
        mem = ceil.get("ceil_memcpyN")
        md.append("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r, used(r), f(s and s["samples_s"]), f(s and s["samples_s"] / max(used(r), 1)),
            ("%.1f %%" % (100 * s["gpu_idle_share"])) if s else "-",
            f(p and p["samples_s"]), p["workers"] if p else "-",
            ("%.1f %%" % (100 * p["gpu_idle_share"])) if p else "-",
            f(s["samples_s"] / p["samples_s"]) if s and p else "-",
            f(h2d * 1e9 / sample if h2d else None, 0),
            f(mem * 1e9 / sample if mem else None, 0)))
    md += ["", "A sample crosses the host link as float32 input + target: %.1f MB "
           "(the loader converts to bf16 on the GPU)." % (sample / 1e6), ""]
for note in node.get("notes", []):
    md.append("- " + note)
if failed:
    md.append("- runs without a result line (see their logs): " + ", ".join(failed))

png = os.path.join(out, "node-curve.png")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    md.append("- no PNG: matplotlib is not installed for %s" % sys.executable)
    png = None
if png:
    fig, ax = plt.subplots(figsize=(8, 5))
    xs = [r for r in ranks if r in train]
    if xs:
        ax.plot(xs, [train[r]["samples_s"] for r in xs], "o-", c="tab:blue",
                label="slabfeed, DDP training")
    xs = [r for r in ranks if r in peer]
    if xs:
        ax.plot(xs, [peer[r]["samples_s"] for r in xs], "s-", c="tab:gray",
                label="original pipeline (best workers)")
    c0 = min(crops) if crops else None
    xs = [r for r in ranks if (r, c0) in loader]
    if xs:
        j0 = loader[(xs[0], c0)]
        ax.plot(xs, [loader[(r, c0)]["crops_s"] for r in xs], "^--", c="tab:green",
                label="loader alone, %d^3 %s crops/s" % (c0, j0["dtype"]))
        for key, style, name in (("ceil_h2d_all", "r:", "pinned H2D, all ranks at once"),
                                 ("ceil_memcpyN", "m:", "host memcpy, all cores (bytes copied)")):
            ys = [(r, loader[(r, c0)].get(key)) for r in xs]
            ys = [(r, v * 1e9 / (c0 ** 3 * 9 * 4)) for r, v in ys if v]
            if ys:
                ax.plot([r for r, _ in ys], [v for _, v in ys], style,
                        label="ceiling: %s / %d^3 sample" % (name, c0))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ranks, [str(r) for r in ranks])
    ax.set_xlabel("ranks (GPUs: %d on this node)" % G)
    ax.set_ylabel("samples/s (all ranks)")
    ax.set_title("slabfeed on one node: %s" % node["host"])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    md.append("- plot: node-curve.png")
open(os.path.join(out, "node-curve.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
EOF
}
if [ -n "$REPORT_ONLY" ]; then
  report "$REPORT_ONLY"
  exit 0
fi

# ---- The node -------------------------------------------------------------
cores=$(nproc)
mem_avail=$(($(sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo) * 1024))
notes=()
if [ "$HOST" = 1 ]; then
  GPUS=0
elif [ -z "$GPUS" ]; then
  GPUS=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU ' || true)
  if [ "$GPUS" = 0 ]; then
    [ "$DRY" = 1 ] || die "no GPU found (nvidia-smi -L); --gpus N, or --host for a CPU smoke test"
    GPUS=1
    notes+=("dry run without a visible GPU: --gpus 1 assumed")
  fi
fi
if [ -z "$RANKS" ]; then
  if [ "$HOST" = 1 ]; then
    RANKS="1 2"
  else
    for r in 1 2 4 8 16 32; do [ "$r" -le "$GPUS" ] && RANKS+="$r "; done
    [[ " $RANKS " = *" $GPUS "* ]] || RANKS+="$GPUS"
  fi
fi
read -r -a RANK_LIST <<<"$RANKS"
rmax=0
for r in "${RANK_LIST[@]}"; do [ "$r" -gt "$rmax" ] && rmax=$r; done
volume() { echo $(($1 * $1 * $1 * 9 * 4)); }
if [ -z "$SIZE" ]; then
  if [ "$HOST" = 1 ]; then
    SIZE=32
  else
    # 1024^3 where the loader (the file in the page cache + the node
    # window) and the original pipeline (a copy per rank + the page
    # cache) both fit with 20 % to spare, else 512^3.
    v=$(volume 1024)
    need=$((v * (rmax > 1 ? rmax + 1 : 2) * 12 / 10))
    if [ "$mem_avail" -ge "$need" ]; then SIZE=1024; else SIZE=512; fi
    notes+=("size $SIZE^3: $((mem_avail / 1000000000)) GB available, 1024^3 needs $((need / 1000000000)) GB for $rmax rank(s) of the original pipeline")
  fi
fi
V=$(volume "$SIZE")
if [ -z "$FILE" ]; then
  FILE=/tmp/box$SIZE.h5
  [ "$HOST" = 1 ] && FILE=$OUT/box$SIZE.h5
fi

# The NUMA node of each GPU (nvidia-smi's order; CUDA_DEVICE_ORDER=PCI_BUS_ID
# makes CUDA's ordinals the same).
export CUDA_DEVICE_ORDER=PCI_BUS_ID
gpu_numa=()
if [ -n "${SF_NC_GPU_NUMA:-}" ]; then
  read -r -a gpu_numa <<<"$SF_NC_GPU_NUMA"
elif [ "$GPUS" -gt 0 ] && command -v nvidia-smi >/dev/null; then
  while read -r bus; do
    bus=$(tr 'A-F' 'a-f' <<<"${bus// /}")
    bus=${bus: -12} # 00000000:3b:00.0 -> 0000:3b:00.0
    gpu_numa+=("$(cat "/sys/bus/pci/devices/$bus/numa_node" 2>/dev/null || echo -1)")
  done < <(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null || true)
fi

# ---- The launcher and the binding ---------------------------------------------
sf_launcher "$B"
if [ -n "${SLURM_JOB_ID:-}" ] && command -v srun >/dev/null && [ "${SF_NC_LAUNCHER:-}" != mpirun ]; then
  kind=srun
elif "${SF_MPIRUN[0]}" --version 2>&1 | grep -q -e 'Open MPI' -e OpenRTE; then
  kind=openmpi
elif "${SF_MPIRUN[0]}" --version 2>&1 | grep -q -i -e HYDRA -e mpich; then
  kind=hydra
else
  kind=other
fi
if [ -z "$BIND" ] || [ "$BIND" = auto ]; then
  BIND=launcher
  if [ "$kind" != srun ] && [ "$HOST" = 0 ] && [ "${#gpu_numa[@]}" -ge "$GPUS" ] &&
    command -v taskset >/dev/null; then
    BIND=gpu
    for n in "${gpu_numa[@]:0:$GPUS}"; do [[ $n =~ ^[0-9]+$ ]] || BIND=launcher; done
  fi
  [ "$HOST" = 1 ] || [ "$kind" = srun ] || [ "$BIND" = gpu ] ||
    notes+=("the GPUs' NUMA nodes are unknown here: the launcher's own placement")
fi
[ "$BIND" = gpu ] && [ "$kind" = srun ] && BIND=launcher # srun binds by itself

# Expands "0-3,8" to "0 1 2 3 8".
expand() {
  local part a b c ids=() parts=()
  IFS=, read -r -a parts <<<"$1"
  for part in "${parts[@]}"; do
    [ -n "$part" ] || continue
    a=${part%-*} b=${part#*-}
    for ((c = a; c <= b; c++)); do ids+=("$c"); done
  done
  echo "${ids[*]}"
}
# Compresses "0 1 2 3 8" to "0-3,8".
compress() {
  local list="" a="" p="" c
  for c in $1 ""; do
    if [ -n "$a" ] && { [ -z "$c" ] || [ "$c" -ne $((p + 1)) ]; }; then
      list+=${list:+,}$a
      [ "$p" -gt "$a" ] && list+=-$p
      a=""
    fi
    [ -z "$c" ] && break
    [ -z "$a" ] && a=$c
    p=$c
  done
  echo "$list"
}
# SF_NC_CPUS for R ranks (--bind gpu): local rank r uses GPU r % GPUS; the
# ranks whose GPUs share a NUMA node share that node's allowed CPUs in
# equal contiguous parts. Prints the plan.
gpu_binding() {
  local R=$1 r q n k i c allowed lists=()
  local -a cpus
  allowed=" $(expand "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)") "
  for ((r = 0; r < R; r++)); do
    n=${gpu_numa[$((r % GPUS))]}
    cpus=()
    for c in $(expand "$(cat "/sys/devices/system/node/node$n/cpulist" 2>/dev/null)"); do
      [[ $allowed = *" $c "* ]] && cpus+=("$c")
    done
    k=0 i=0
    for ((q = 0; q < R; q++)); do
      [ "${gpu_numa[$((q % GPUS))]}" = "$n" ] || continue
      [ "$q" -lt "$r" ] && i=$((i + 1))
      k=$((k + 1))
    done
    local nc=${#cpus[@]} from to
    if [ "$nc" -eq 0 ]; then
      lists+=("-")
      echo "  rank $r: GPU $((r % GPUS)) on NUMA $n: no allowed CPU there, left unbound"
      continue
    fi
    from=$((i * nc / k)) to=$(((i + 1) * nc / k))
    [ "$to" -gt "$from" ] || to=$((from + 1)) # more ranks than cores: shared
    lists+=("$(compress "${cpus[*]:$from:$((to - from))}")")
    echo "  rank $r: GPU $((r % GPUS)) on NUMA $n: CPUs ${lists[-1]}"
  done
  SF_NC_CPUS="${lists[*]}"
  export SF_NC_CPUS
}
# LAUNCH: the command line that starts R ranks next to their GPUs.
launch() {
  local R=$1 per=$((cores / $1))
  [ "$per" -ge 1 ] || per=1
  [ "$BIND" = gpu ] && gpu_binding "$R" >/dev/null
  local env=() e
  for e in NCCL_NVLS_ENABLE CUDA_DEVICE_ORDER PYTHONPATH SF_NC_CPUS OMPI_MCA_osc_sm_backing_directory; do
    [ -n "${!e+x}" ] && env+=("$e") # passed on explicitly (set ones only)
  done
  case $kind in
    srun)
      LAUNCH=(srun -N 1 -n "$R" --cpus-per-task="$per" --cpu-bind=cores --export=ALL)
      # One GPU per task, the one nearest its cores; ranks sharing GPUs:
      # all GPUs visible to every task (--device local picks).
      [ "$HOST" = 0 ] && [ "$R" -le "$GPUS" ] && LAUNCH+=(--gpus-per-task=1 --gpu-bind=single:1)
      ;;
    openmpi)
      LAUNCH=("${SF_MPIRUN[@]}" -n "$R")
      for e in "${env[@]}"; do LAUNCH+=(-x "$e"); done
      if [ "$BIND" = none ] || [ "$BIND" = gpu ] || [ "$R" -gt "$cores" ]; then
        LAUNCH+=(--bind-to none)
      else
        local numa_nodes pe
        numa_nodes=$(find /sys/devices/system/node -maxdepth 1 -name 'node[0-9]*' 2>/dev/null | wc -l)
        [ "$numa_nodes" -ge 1 ] || numa_nodes=1
        pe=$((per < cores / numa_nodes ? per : cores / numa_nodes))
        [ "$pe" -ge 1 ] || pe=1
        LAUNCH+=(--map-by "numa:PE=$pe" --rank-by core --bind-to core)
      fi
      ;;
    hydra)
      LAUNCH=("${SF_MPIRUN[@]}" -n "$R" -genvlist "$(
        IFS=,
        echo "${env[*]}"
      )")
      if [ "$BIND" = launcher ]; then LAUNCH+=(-bind-to numa); else LAUNCH+=(-bind-to none); fi
      ;;
    *) LAUNCH=("${SF_MPIRUN[@]}" -n "$R") ;;
  esac
  [ "$BIND" = gpu ] && [ "$kind" != srun ] && LAUNCH+=(bash "$SELF" --exec-bound --)
  return 0
}

# ---- Running ----------------------------------------------------------------
export NCCL_NVLS_ENABLE=0 # NVLink multicast off, on every rank
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HDF5_USE_FILE_LOCKING=FALSE
export OMPI_MCA_osc_sm_backing_directory=/dev/shm # windows in memory, not on disk
export PYTHONPATH=$B/python${PYTHONPATH:+:$PYTHONPATH}
mkdir -p "$OUT"
say() { echo "node-curve: $*" | tee -a "$OUT/node-curve.log"; }
show() { printf '%q ' "$@" | sed 's/ $//'; echo; }
# step NAME R CMD...: one run, its output in OUT/NAME-R<R>.log; a failed
# run is noted and the curve goes on.
step() {
  local name=$1 R=$2
  shift 2
  launch "$R"
  if [ "$DRY" = 1 ]; then
    show "${LAUNCH[@]}" "$@"
    return 0
  fi
  say "$name, $R rank(s): $(show "${LAUNCH[@]}" "$@")"
  if ! "${LAUNCH[@]}" "$@" >"$OUT/$name-R$R.log" 2>&1; then
    say "$name, $R rank(s) FAILED (exit status above; log $OUT/$name-R$R.log)"
    tail -n 5 "$OUT/$name-R$R.log" | sed 's/^/  /'
  fi
  grep -E '^(total|WARNING|samples|original|slabfeed|topology|host |rank |[0-9]+ )' \
    "$OUT/$name-R$R.log" | sed 's/^/  /' | head -n 40 || true
}

say "$(hostname): $cores cores, $((mem_avail / 1000000000)) GB available, $GPUS GPU(s)$([ "${#gpu_numa[@]}" -gt 0 ] && echo " on NUMA nodes ${gpu_numa[*]:0:$GPUS}"); ranks $RANKS"
say "launcher: $kind (${SF_MPIRUN[0]}), binding: $BIND; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE; file $FILE ($SIZE^3 x 9, $((V / 1000000)) MB)"
[ "${#notes[@]}" -eq 0 ] || printf 'node-curve: note: %s\n' "${notes[@]}"
if [ "$BIND" = gpu ]; then
  for r in "${RANK_LIST[@]}"; do
    say "binding of $r rank(s) (taskset per rank, next to its GPU):"
    (gpu_binding "$r") | tee -a "$OUT/node-curve.log"
  done
fi

# The file: generated once (field content, 4 + 5 channels), reused after.
if [ ! -f "$FILE" ]; then
  gen=("${SF_MPIRUN[@]}" -n "$((cores < 16 ? cores : 16))" "$BIN/slabfeed-gen" --file "$FILE"
    --shape "$SIZE" --input-channels 4 --target-channels 5 --content field --seed 1 --quiet)
  if [ "$DRY" = 1 ]; then show "${gen[@]}"; else say "generating $FILE"; "${gen[@]}"; fi
fi

dev=local
[ "$HOST" = 1 ] && dev=-1
# shellcheck disable=SC2054 # 1,2,3 is one argument
L=(--file "$FILE" --input Nbody --target Hydro --input-vector 1,2,3 --target-vector 1,2,3
  --device "$dev" --step-ms 0 --topology)
[ "$HOST" = 1 ] || L+=(--residency "$RESIDENCY")
if [ "$HOST" = 1 ]; then
  crops=("16 2 f32" "8 4 bf16")
else
  crops=("256 1 f32" "128 4 bf16")
fi
T=(--file "$FILE" --crop 128 --batch 2 --base 32 --depth 3 --steps "$TRAIN_STEPS" --warmup 5)
for R in "${RANK_LIST[@]}"; do
  if [[ ,$ONLY, = *,d,* ]] && [ "$R" = "$rmax" ] && [ "$R" -ge 2 ]; then
    # One replica per rank: every rank its own "node" with the whole volume
    # in its own pages (first touched by it, on its NUMA node).
    if [ "$DRY" = 0 ] && [ $((V * (R + 1) * 11 / 10)) -gt "$mem_avail" ]; then
      notes+=("one replica per rank on $R ranks skipped: $R copies of the volume do not fit")
    else
      for cbd in "${crops[@]}"; do
        read -r c bt dt <<<"$cbd"
        step "replica$c" "$R" env SLABFEED_RANK_PER_NODE=1 "$BIN/slabfeed-bench" "${L[@]}" \
          --crop "$c" --batch "$bt" --dtype "$dt" --steps "$STEPS" --label "node-curve-replica-$c-R$R"
      done
    fi
  fi
  if [[ ,$ONLY, = *,a,* ]]; then
    for cbd in "${crops[@]}"; do
      read -r c bt dt <<<"$cbd"
      step "loader$c" "$R" "$BIN/slabfeed-bench" "${L[@]}" --crop "$c" --batch "$bt" \
        --dtype "$dt" --steps "$STEPS" --label "node-curve-$c-R$R"
    done
  fi
  if [ "$HOST" = 1 ]; then
    continue # training needs CUDA
  fi
  if [[ ,$ONLY, = *,b,* ]]; then
    step train "$R" "$PY" -m mpi4py "$ROOT/bench/train_throughput.py" "${T[@]}" \
      --loader slabfeed --dtype bf16 --residency "$RESIDENCY"
  fi
  if [[ ,$ONLY, = *,c,* ]]; then
    # Every process holds the whole volume; the page cache holds the file.
    if [ "$DRY" = 0 ] && [ $((V * (R + 1) * 11 / 10)) -gt "$mem_avail" ]; then
      say "original pipeline, $R rank(s): skipped, needs $((V * (R + 1) / 1000000000)) GB"
      notes+=("original pipeline on $R ranks skipped: $R copies of the volume do not fit")
      continue
    fi
    per=$((cores / R))
    w=$WORKERS
    if [ -z "$w" ]; then
      for x in 2 4 8 16 32; do [ "$x" -lt "$per" ] && w+="$x "; done
      [ $((per - 1)) -ge 1 ] && [[ " $w " != *" $((per - 1)) "* ]] && w+="$((per - 1))"
      w=${w:-1}
    fi
    read -r -a wl <<<"$w"
    step peer "$R" "$PY" -m mpi4py "$ROOT/bench/train_throughput.py" "${T[@]}" \
      --loader peer --workers "${wl[@]}"
  fi
done
[ "$DRY" = 1 ] && exit 0

# ---- The report -----------------------------------------------------------------
json_str() { "$PY" -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1"; }
{
  printf '{"host": %s, "gpus": %d, "size": %d, "volume": %d, "file": %s, ' \
    "$(json_str "$(hostname)")" "$GPUS" "$SIZE" "$V" "$(json_str "$FILE")"
  printf '"launcher": %s, "binding": %s, "device": %s, "date": %s, "notes": [' \
    "$(json_str "$kind (${SF_MPIRUN[0]})")" "$(json_str "$BIND")" "$(json_str "$dev")" \
    "$(json_str "$(date -u +%Y-%m-%dT%H:%MZ)")"
  sep=""
  for n in "${notes[@]}"; do printf '%s%s' "$sep" "$(json_str "$n")"; sep=", "; done
  printf ']}\n'
} >"$OUT/node.json"
report "$OUT" | tee -a "$OUT/node-curve.log"
say "tables in $OUT/node-curve.md"
