#!/usr/bin/env python3
"""Training throughput of the U-Net of examples/train_unet.py (DDP, bf16
autocast) fed (a) by the original pipeline, bench/peer_dataloader.py's
Dataset in a torch DataLoader (whole volume per process, numpy crop and
rotation in forked workers, pin_memory, .to(device)), or (b) by slabfeed
(slabfeed.torch.TorchLoader: device batches on the current stream).

Per configuration it prints, after --warmup steps, over --steps steps:
  samples/s       global training samples per second (all ranks)
  step ms         wall time per step
  compute ms      GPU time of forward + backward + optimiser step (CUDA
                  events around them on the training stream)
  GPU idle        step - compute, per step and as a share of the step: the
                  time the training stream had no training work (waiting
                  for data, host-to-device copies of the original pipeline)
  host wait ms    host time per step spent getting the batch
  RSS / PSS GB    host memory of this rank's process and of its DataLoader
                  workers (PSS counts pages shared between the processes,
                  e.g. the copy-on-write volume, once)
Rank 0 prints one line per configuration and a JSON line.

    mpirun --bind-to none -n 1 python3 bench/train_throughput.py --file /tmp/box512.h5 --loader slabfeed
    mpirun --bind-to none -n 1 python3 bench/train_throughput.py --file /tmp/box512.h5 --loader peer --workers 4 8 15
    mpirun --bind-to none -n 2 python3 bench/train_throughput.py --file /tmp/box512.h5 --loader slabfeed

`--bind-to none`: Open MPI binds each rank to one core when there are at
most 2 ranks, and forked DataLoader workers inherit that binding (all on
one core); with srun give each task its cores (--cpus-per-task). The script
warns when a rank may use fewer cores than it starts workers.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Tuple

from mpi4py import MPI

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

ROOT = Path(__file__).resolve().parents[1]


def load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def memory_gb() -> Dict[str, float]:
    """RSS of this process, and RSS / PSS of it plus its children (the
    DataLoader workers), from /proc."""
    def rss(pid: int) -> float:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024 / 1e9
        return 0.0

    def pss(pid: int) -> float:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        return int(line.split()[1]) * 1024 / 1e9
        except OSError:
            pass
        return float("nan")

    me = os.getpid()
    kids: List[int] = []
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            kids = [int(p) for p in f.read().split()]
    except OSError:
        pass
    return {"rss_gb": rss(me), "rss_all_gb": rss(me) + sum(rss(k) for k in kids),
            "pss_all_gb": pss(me) + sum(pss(k) for k in kids), "workers": len(kids)}


def peer_batches(args: argparse.Namespace, workers: int, dev: torch.device,
                 ds: Any) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
    """The original pipeline: a DataLoader over peer_dataloader.Crops with
    forked workers and pinned memory, then .to(device)."""
    from torch.utils.data import DataLoader
    dl = DataLoader(ds, batch_size=args.batch, num_workers=workers, pin_memory=True,
                    multiprocessing_context="fork" if workers else None,
                    persistent_workers=bool(workers), drop_last=True)
    for x, y in dl:
        yield x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)


def run(args: argparse.Namespace, name: str, batches: Callable[[], Tuple[torch.Tensor, torch.Tensor]],
        ddp: DDP, opt: torch.optim.Optimizer, dev: torch.device) -> Dict[str, Any]:
    """Warm-up, then the timed steps; returns the rank-0 figures."""
    comm = MPI.COMM_WORLD
    stream = torch.cuda.current_stream(dev)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(args.steps)]
    wait = 0.0
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            torch.cuda.synchronize(dev)
            dist.barrier(device_ids=[dev.index])
            t0 = time.perf_counter()
        tw = time.perf_counter()
        x, y = batches()
        if i >= args.warmup:
            wait += time.perf_counter() - tw
            ev[i - args.warmup][0].record(stream)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            pred = ddp(x.float() if x.dtype == torch.float16 else x)
        loss = F.mse_loss(pred.float(), y.float())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= args.warmup:
            ev[i - args.warmup][1].record(stream)
    torch.cuda.synchronize(dev)
    wall = time.perf_counter() - t0
    compute = sum(a.elapsed_time(b) for a, b in ev) / 1e3
    mem = memory_gb()
    local = {"wall": wall, "compute": compute, "wait": wait, **mem}
    allr = comm.gather(local, root=0)
    if comm.rank != 0:
        return {}
    P = comm.size
    wall = max(r["wall"] for r in allr)
    step = wall / args.steps
    comp = sum(r["compute"] for r in allr) / P / args.steps
    res = {"bench": "train_throughput", "loader": name, "ranks": P, "crop": args.crop,
           "batch": args.batch, "base": args.base, "depth": args.depth,
           "samples_s": args.steps * args.batch * P / wall, "step_ms": 1e3 * step,
           "compute_ms": 1e3 * comp, "gpu_idle_ms": 1e3 * (step - comp),
           "gpu_idle_share": (step - comp) / step,
           "host_wait_ms": 1e3 * sum(r["wait"] for r in allr) / P / args.steps,
           "rss_gb_per_rank": max(r["rss_gb"] for r in allr),
           "rss_all_gb_per_rank": max(r["rss_all_gb"] for r in allr),
           "pss_all_gb_per_rank": max(r["pss_all_gb"] for r in allr),
           "pss_all_gb_total": sum(r["pss_all_gb"] for r in allr),
           "workers": allr[0]["workers"]}
    print(f"{name:22s} {P} GPU(s): {res['samples_s']:7.2f} samples/s, step "
          f"{res['step_ms']:7.1f} ms, compute {res['compute_ms']:7.1f} ms, GPU idle "
          f"{res['gpu_idle_ms']:6.1f} ms ({100 * res['gpu_idle_share']:5.1f} %), host wait "
          f"{res['host_wait_ms']:6.1f} ms; host memory per rank RSS {res['rss_gb_per_rank']:.2f} GB, "
          f"with workers RSS {res['rss_all_gb_per_rank']:.2f} / PSS "
          f"{res['pss_all_gb_per_rank']:.2f} GB", flush=True)
    print("JSON " + json.dumps(res), flush=True)
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--file", required=True)
    p.add_argument("--loader", choices=["slabfeed", "peer"], required=True)
    p.add_argument("--crop", type=int, default=128)
    p.add_argument("--batch", type=int, default=2, help="per rank")
    p.add_argument("--base", type=int, default=16)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16"],
                   help="slabfeed batch dtype (the original pipeline is f32)")
    p.add_argument("--prefetch", type=int, default=3, help="slabfeed ring depth")
    p.add_argument("--residency", default="auto", choices=["auto", "host", "device"],
                   help="slabfeed: where the slabs are read from (GPU memory or "
                   "the node's shared memory)")
    p.add_argument("--workers", type=int, nargs="+", default=[8],
                   help="DataLoader worker counts to try (original pipeline)")
    args = p.parse_args()
    ex = load("train_unet", ROOT / "examples" / "train_unet.py")
    env = ex.init_distributed("nccl")
    dev = torch.device("cuda", env["local"] % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = ex.UNet3d(4, 5, args.base, args.depth).to(dev)
    ddp = DDP(model, device_ids=[dev.index])
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-4)
    if env["rank"] == 0:
        print(f"train_throughput: {env['world']} rank(s), U-Net base {args.base} depth "
              f"{args.depth}, {sum(q.numel() for q in model.parameters())} parameters, "
              f"crop {args.crop}^3, batch {args.batch} per rank, {args.steps} steps after "
              f"{args.warmup}", flush=True)
    n = args.warmup + args.steps
    try:
        if args.loader == "slabfeed":
            from slabfeed.torch import TorchLoader
            with TorchLoader(MPI.COMM_WORLD, device=dev, path=args.file, input="Nbody",
                             target="Hydro", crop=args.crop, batch=args.batch, dtype=args.dtype,
                             prefetch=args.prefetch, input_vectors=[(1, 2, 3)],
                             target_vectors=[(1, 2, 3)], seed=1,
                             residency=args.residency) as L:
                res = run(args, f"slabfeed {args.dtype} residency {args.residency}",
                          lambda: L.next()[:2], ddp, opt, dev)
                st = L.stats()
                if env["rank"] == 0 and res:
                    print(f"  slabfeed rank 0: t_wait {1e3 * st['t_wait'] / max(st['batches'], 1):.2f} "
                          f"ms/batch, loader thread {st['loader_thread']}, slab in GPU "
                          f"memory {st['device_slab_bytes'] / 1e9:.2f} GB", flush=True)
        else:
            peer = load("peer_dataloader", ROOT / "bench" / "peer_dataloader.py")
            t = time.perf_counter()
            ds = peer.Crops(args.file, args.crop, args.batch * (n + 4))
            if env["rank"] == 0:
                print(f"peer: whole volume read in {time.perf_counter() - t:.1f} s per process",
                      flush=True)
            cores = len(os.sched_getaffinity(0))
            for w in args.workers:
                if w + 1 > cores and env["rank"] == 0:
                    print(f"peer: warning: {w} workers but this rank may use {cores} core(s) "
                          "(mpirun --bind-to none, or srun --cpus-per-task)", flush=True)
                it = peer_batches(args, w, dev, ds)
                run(args, f"original, {w:2d} workers", lambda: next(it), ddp, opt, dev)
                del it
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
