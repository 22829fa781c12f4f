#!/usr/bin/env python3
"""Train a 3-D U-Net that maps N-body fields to hydro fields, with
DistributedDataParallel, fed by slabfeed. One process per GPU, started by
srun or mpirun, with the interpreter the package was built for ($SF_PY,
set by `. jobs/env.sh`: see the README's Quickstart):

    srun $SF_PY -m mpi4py examples/train_unet.py --file box.h5 --crop 128 \\
        --batch 2 --steps 2000 --ckpt run.pt
    mpirun -n 2 $SF_PY -m mpi4py examples/train_unet.py --file box.h5 --ckpt run.pt
    mpirun -n 2 $SF_PY -m mpi4py examples/train_unet.py --file box.h5 --resume run.pt

Input `Nbody` (density + velocity, 4 channels), target `Hydro` (smoothed
density, smoothed velocity, temperature, 5 channels); velocity is channels
1, 2, 3 of both and is rotated as a vector by the 48 cube symmetries.
`slabfeed-gen --content field` (or slabfeed.tools.generate(content='field'))
writes such a volume with a target that is a non-local, non-linear and
deterministic function of the input, so the loss falls clearly.

What it shows:
 - torch.distributed from the launcher: rank and world size from
   SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE or
   RANK/WORLD_SIZE (checked against MPI), the local rank (the GPU) from an
   MPI_COMM_TYPE_SHARED split, under any launcher; MASTER_ADDR/MASTER_PORT from the environment, else rank 0's
   host name and a free port, broadcast with mpi4py;
 - NCCL on GPUs (bf16 autocast), gloo on the CPU;
 - slabfeed.torch.TorchLoader: batches made on the GPU, handed to the
   current stream without a host synchronisation;
 - checkpoints with model, optimiser, normalisation and loader state, and
   an exact resume (--resume): the resumed run sees the same batches and
   computes the same losses as one that never stopped;
 - a held-out band (by default the last eighth of the box in z: --holdout,
   --holdout-frac) that no training crop touches, and a validation loss
   over the whole band (--val-every) from a second loader making a tiled
   pass over it: every rank takes its share of the tiles, the loss counts
   each tile's owned part only (the padding around it is context, not
   counted twice), and the sums are all_reduced; examples/predict.py then
   writes the model's prediction of the band with slabfeed.Writer;
 - a suite of simulations: --file repeated (paths, glob patterns or
   @manifests) trains on all the boxes; --holdout-volumes keeps whole
   boxes out of training, and the validation loss is then over those
   boxes (a tiled pass over each, weighted by its voxels);
 - failure handling: an exception or Ctrl-C (SIGINT) on one rank ends the
   whole job within seconds. The loader is used in a `with` block, whose
   collective close is skipped when the block ends on an exception (the
   other ranks may be waiting in a DDP allreduce or a barrier this rank
   will never reach), and an exception that reaches the top calls
   MPI_Abort (what `python -m mpi4py` does; done here too, so that a plain
   `srun $SF_PY examples/train_unet.py` behaves the same);
 - user errors once per job: the arguments, the files and the checkpoint
   path are checked before the loader opens (the crop against the U-Net's
   depth, --ckpt's folder writable and an existing checkpoint kept unless
   --overwrite, --locality against a hold-out...), and such an error, or
   one of slabfeed's errors at open (a missing file: agreed on by every
   rank), is one line `train_unet.py: error: ...` from rank 0 and exit
   status 2 on every rank (slabfeed._cli.run), as the slabfeed apps do;
 - checkpoints written aside (a temporary file in the same folder, renamed
   over --ckpt when complete): a failed save leaves no partial file;
 - the time to the first batch: rank 0 prints `first batch after T s (open
   O s)`, from the process's start, and the seconds spent opening the
   loaders.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from mpi4py import MPI  # initialises MPI before slabfeed and torch use it

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import slabfeed.tools
from slabfeed import _cli
from slabfeed._cli import UsageError
from slabfeed.torch import TorchLoader

VECTORS = [(1, 2, 3)]  # velocity (z, y, x) in both datasets


# ---- model ---------------------------------------------------------------------


class Block(nn.Module):
    """Two 3x3x3 convolutions with LeakyReLU."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.c1 = nn.Conv3d(cin, cout, 3, padding=1)
        self.c2 = nn.Conv3d(cout, cout, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(self.c2(F.leaky_relu(self.c1(x), 0.1)), 0.1)


class UNet3d(nn.Module):
    """A plain 3-D U-Net: `depth` times (block, stride-2 down), a bottom
    block, `depth` times (stride-2 up, concatenation, block), a 1x1x1 head,
    plus the input's density/velocity carried through (the network learns
    the difference). The crop edge must be divisible by 2**depth.

    `scale` > 1 (super-resolution, --scale-factor): a scale head before the
    1x1x1 head, a stride-`scale` ConvTranspose3d (each coarse voxel becomes
    scale^3 fine ones), and the input carried through trilinearly upsampled:
    an input crop of edge c gives an output of edge scale * c, the target
    crop of a pair (docs/CONVENTIONS.md, "Grids of different resolution")."""

    def __init__(self, cin: int = 4, cout: int = 5, base: int = 16, depth: int = 2,
                 scale: int = 1) -> None:
        super().__init__()
        self.scale = scale
        ch = [base * 2 ** i for i in range(depth + 1)]
        self.down = nn.ModuleList()
        self.pool = nn.ModuleList()
        c = cin
        for i in range(depth):
            self.down.append(Block(c, ch[i]))
            self.pool.append(nn.Conv3d(ch[i], ch[i], 2, stride=2))
            c = ch[i]
        self.bottom = Block(c, ch[depth])
        self.up = nn.ModuleList()
        self.upblock = nn.ModuleList()
        for i in reversed(range(depth)):
            self.up.append(nn.ConvTranspose3d(ch[i + 1], ch[i], 2, stride=2))
            self.upblock.append(Block(2 * ch[i], ch[i]))
        if scale > 1:
            self.sr = nn.ConvTranspose3d(ch[0], ch[0], scale, stride=scale)
        self.head = nn.Conv3d(ch[0], cout, 1)
        self.skip = min(cin, cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        h = x
        for blk, pool in zip(self.down, self.pool):
            h = blk(h)
            skips.append(h)
            h = pool(h)
        h = self.bottom(h)
        for up, blk in zip(self.up, self.upblock):
            h = up(h)
            h = blk(torch.cat([h, skips.pop()], dim=1))
        if self.scale > 1:
            h = F.leaky_relu(self.sr(h), 0.1)
            x = F.interpolate(x, scale_factor=self.scale, mode="trilinear",
                              align_corners=False)
        out = self.head(h)
        k = self.skip
        return torch.cat([out[:, :k] + x[:, :k], out[:, k:]], dim=1)


# ---- distributed setup -----------------------------------------------------------


def _env_int(*names: str) -> Optional[int]:
    for n in names:
        if os.environ.get(n, "") != "":
            return int(os.environ[n])
    return None


def local_rank(comm: MPI.Intracomm) -> int:
    """The node-local rank from MPI itself (a shared-memory split), whatever
    the launcher: MPICH's hydra, for one, sets none of the variables Open
    MPI or Slurm set."""
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    local = node.rank
    node.Free()
    return local


def init_distributed(backend: str) -> Dict[str, int]:
    """torch.distributed from the launcher's environment (srun, mpirun,
    torchrun); MPI.COMM_WORLD must agree. Returns rank, world, local."""
    comm = MPI.COMM_WORLD
    rank = _env_int("SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK")
    world = _env_int("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE")
    if (rank, world) != (None, None) and (rank, world) != (comm.rank, comm.size):
        raise RuntimeError(f"launcher says rank {rank} of {world}, MPI says "
                           f"{comm.rank} of {comm.size}: start one MPI job")
    local = local_rank(comm)
    addr = comm.bcast(os.environ.get("MASTER_ADDR") or socket.gethostname()
                      if comm.rank == 0 else None, root=0)
    port = None
    if comm.rank == 0:
        port = os.environ.get("MASTER_PORT")
        if not port:
            with socket.socket() as s:  # a free port on rank 0's host
                s.bind(("", 0))
                port = str(s.getsockname()[1])
    port = comm.bcast(port, root=0)
    dist.init_process_group(backend, init_method=f"tcp://{addr}:{port}",
                            rank=comm.rank, world_size=comm.size)
    return {"rank": comm.rank, "world": comm.size, "local": local}


# ---- normalisation ----------------------------------------------------------------


def channel_stats(loader: TorchLoader, nbatches: int, vectors: Sequence[Sequence[int]],
                  take: Optional[Callable[[], Any]] = None) -> Dict[str, List[float]]:
    """Per-channel mean and std of input and target over the first
    `nbatches` global batches of epoch 0 (all ranks, allreduced); the loader
    is put back where it was. Vector channels get mean 0 and one common std,
    so the normalisation commutes with the rotations. `take`: what gets the
    next batch (default loader.next)."""
    pos = loader.tell()
    loader.seek(0, 0)
    sums: List[torch.Tensor] = []
    for _ in range(nbatches):
        x, y, _ = (take or loader.next)()
        for i, t in enumerate((x, y)):
            t = t.float().transpose(0, 1).reshape(t.shape[1], -1)  # NCDHW
            s = torch.stack([t.sum(1), (t * t).sum(1), torch.full_like(t[:, 0], t.shape[1])])
            if len(sums) <= i:
                sums.append(torch.zeros_like(s, dtype=torch.float64))
            sums[i] += s.double()
    loader.seek(*pos)
    out: Dict[str, List[float]] = {}
    for name, s in zip(("input", "target"), sums):
        dist.all_reduce(s)
        mean = s[0] / s[2]
        var = s[1] / s[2] - mean * mean
        for grp in vectors:
            g = list(grp)
            mean[g] = 0.0
            var[g] = (s[1][g] / s[2][g]).mean()
        out[name + "_mean"] = mean.tolist()
        out[name + "_std"] = var.clamp_min(1e-12).sqrt().tolist()
    return out


def normalise(t: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    return (t.float() - mean) / std


# ---- held-out band and validation ---------------------------------------------------


def parse_region(text: str) -> List[int]:
    """'z,y,x,dz,dy,dx' (voxels; an extent of 0 is the whole axis)."""
    try:
        v = [int(p) for p in text.split(",")]
    except ValueError:
        v = []
    if len(v) != 6 or min(v) < 0:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not z,y,x,dz,dy,dx (six integers >= 0; extent 0: the whole axis)")
    return v


def parse_indices(text: str, n: int) -> List[int]:
    """Volume indices "3,7,10-12" (the library's holdout_volumes form)."""
    out: List[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    if any(i < 0 or i >= n for i in out):
        raise UsageError(f"--holdout-volumes {text}: the indices of the {n} "
                         f"volume(s) are 0..{n - 1}")
    return out


def holdout_band(a: argparse.Namespace, shape: Sequence[int]) -> Optional[List[int]]:
    """The held-out box: --holdout as given, else the last --holdout-frac of
    the box in z (None for a fraction of 0)."""
    if a.holdout is not None:
        return list(a.holdout)
    if a.holdout_frac <= 0:
        return None
    dz = max(1, int(round(a.holdout_frac * shape[0])))
    if dz >= shape[0]:
        raise UsageError(f"--holdout-frac {a.holdout_frac} holds out the whole box "
                         f"({dz} of its {shape[0]} planes)")
    return [shape[0] - dz, 0, 0, dz, 0, 0]


def pass_geometry(crop: int, depth: int, extent: Sequence[int], tile: int = 0,
                  pad: int = -1) -> List[int]:
    """(tile, pad) of a tiled pass over a region of `extent` (z, y, x): pad
    (default a quarter of the training crop) is the context each tile is
    seen with; the tile defaults to what is left of the crop, no larger
    than the region, and shrinks until tile + 2 pad is divisible by
    2**depth (the U-Net's input edge)."""
    P = crop // 4 if pad < 0 else pad
    T = tile if tile > 0 else min(crop - 2 * P, *extent)
    m = 2 ** depth
    if tile <= 0:
        while T > 1 and (T + 2 * P) % m:
            T -= 1
    if T < 1 or (T + 2 * P) % m:
        raise UsageError(f"no tile for pad {P}: tile + 2 pad must be divisible by "
                         f"{m} = 2**depth (--val-tile, --val-pad; predict.py: --tile, "
                         "--pad)")
    return [T, P]


def validation_loss(model: nn.Module, loader: TorchLoader, pad: int,
                    norm: Sequence[torch.Tensor], amp: bool, dev: torch.device,
                    scale: int = 1) -> float:
    """The mean squared error (normalised units, as the training loss) over
    every voxel and channel of the pass's region: the whole pass on every
    rank, each tile's owned part only, sums all_reduced over the ranks.
    `scale`: the target's grid is that many times finer (the tile, its
    owned part and the pad in fine voxels are scale x meta.tile's)."""
    mx, sx, my, sy = norm
    was_training = model.training
    model.eval()
    sums = torch.zeros(2, dtype=torch.float64, device=dev)
    loader.seek(0, 0)
    with torch.no_grad():
        for _ in range(len(loader)):
            x, y, meta = loader.next()
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
                pred = model(normalise(x, mx, sx))
            # The target is the tile itself (edge T, fine voxels); the
            # prediction covers the padded crop: its centre is the tile.
            T, p = y.shape[-1], scale * pad
            tile = pred[..., p:p + T, p:p + T, p:p + T]
            err = (tile.float() - normalise(y, my, sy)).square()
            for i in range(meta.count):  # the real slots; each its owned part
                oz, oy, ox, nz, ny, nx = (scale * v for v in meta.tile[i][3:])
                e = err[i, :, oz:oz + nz, oy:oy + ny, ox:ox + nx]
                sums[0] += e.sum(dtype=torch.float64)
                sums[1] += e.numel()
    dist.all_reduce(sums)
    model.train(was_training)
    return (sums[0] / sums[1]).item()


# ---- training -------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """A size in bytes as the slabfeed apps take it: a number, optionally
    with one of the binary suffixes K, M, G, T (2**10 ... 2**40), e.g.
    200G or 1.5T; 0 means the default budget."""
    t = text.strip()
    scale = 1
    if t and t[-1].upper() in "KMGT":
        scale = 1 << (10 * ("KMGT".index(t[-1].upper()) + 1))
        t = t[:-1]
    try:
        v = float(t)
    except ValueError:
        v = -1.0
    if not (v >= 0 and v * scale < 2 ** 63) or t.lower() in ("nan", "inf", "infinity"):
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a size (bytes, or a number with K, M, G or T)")
    return int(v * scale)


class _HelpFormatter(argparse.HelpFormatter):
    """Every option with a value shows its default; the description is
    wrapped, lines of the epilog that start with spaces are kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        h = action.help or ""
        if ("%(default)" in h or not action.option_strings or action.required
                or action.default is None or action.default is False
                or action.default == argparse.SUPPRESS):
            return h
        return h + " (default: %(default)s)"

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(indent + line if line.startswith("  ")
                         else super(_HelpFormatter, self)._fill_text(line, width, indent)
                         for line in text.splitlines())


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """The arguments; a usage error raises slabfeed._cli.UsageError (printed
    once per job by _cli.run), argparse's own errors included."""
    p = _cli.ArgumentParser(
        prog="train_unet.py",
        description="Train a 3-D U-Net that maps N-body fields (Nbody, 4 channels) "
                    "to hydro fields (Hydro, 5 channels) with DistributedDataParallel, "
                    "fed by slabfeed; one process per GPU (or CPU ranks with gloo), "
                    "started by srun or mpirun.",
        epilog="examples, with $SF_PY the Python the package was built for "
               "(sourcing jobs/env.sh sets it; jobs/local.sh prints it; Debian: "
               "/usr/bin/python3):\n"
               "  srun $SF_PY -m mpi4py examples/train_unet.py --file box.h5 "
               "--crop 128 --batch 2 --steps 2000 --ckpt run.pt\n"
               "  mpirun -n 2 $SF_PY -m mpi4py examples/train_unet.py --file box.h5 "
               "--ckpt run.pt\n"
               "  mpirun -n 2 $SF_PY -m mpi4py examples/train_unet.py --file box.h5 "
               "--resume run.pt\n"
               "An exception or SIGINT on one rank aborts the whole job "
               "(MPI_Abort).\n"
               "Another python3 first on PATH (pyenv, conda) may not see the package "
               "or apt's numpy, mpi4py and torch. As root, mpirun also needs "
               "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; more ranks "
               "than cores need --oversubscribe.",
        formatter_class=_HelpFormatter)
    p.add_argument("--file", required=True, action="append",
                   help="HDF5 volume (slabfeed-gen --content field); repeated, or a glob "
                        "pattern, or @MANIFEST: a suite of volumes, one file per box")
    p.add_argument("--holdout-volumes", default="", metavar="I,J-K",
                   help="a suite: boxes kept out of training (their indices in the "
                        "list); the validation loss is over them (no held-out band)")
    p.add_argument("--input", default="Nbody", help="input dataset")
    p.add_argument("--target", default="Hydro", help="target dataset")
    p.add_argument("--crop", type=int, default=64, help="crop edge (divisible by 2**depth)")
    p.add_argument("--scale-factor", type=int, default=1, metavar="F",
                   help="super-resolution: the target on a grid F times finer (slabfeed-gen "
                        "--scale-factor F writes such a pair); the U-Net gets a scale head "
                        "and its output crop is F x --crop")
    p.add_argument("--batch", type=int, default=2, help="local batch per rank")
    p.add_argument("--steps", type=int, default=1000, help="train until this global step")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    p.add_argument("--base", type=int, default=16, help="channels of the first level")
    p.add_argument("--depth", type=int, default=2, help="U-Net levels below the top")
    p.add_argument("--seed", type=int, default=0, help="model init and sampler seed")
    p.add_argument("--dtype", choices=["auto", "f32", "f16", "bf16"], default="auto",
                   help="batch dtype; auto: bf16 on GPU, f32 on CPU")
    p.add_argument("--prefetch", type=int, default=2, help="batches the loader works ahead")
    p.add_argument("--node-memory", type=parse_size, default=0, metavar="BYTES",
                   help="slab store one node may hold, e.g. 200G (K, M, G, T: binary "
                        "units, as the apps take it; 0: half its memory less 2 GiB per "
                        "rank); sets the replication groups")
    p.add_argument("--locality", action="store_true",
                   help="crops from each rank's node only (stratified in z; not with a "
                        "hold-out: pass --holdout-frac 0)")
    p.add_argument("--holdout", type=parse_region, default=None, metavar="Z,Y,X,DZ,DY,DX",
                   help="the box no training crop touches, validated on (extent 0: the "
                        "whole axis); default: the last --holdout-frac of the box in z")
    p.add_argument("--holdout-frac", type=float, default=0.125,
                   help="without --holdout: hold out this fraction of the box at the end "
                        "of z (0: none, no validation)")
    p.add_argument("--val-every", type=int, default=0,
                   help="validation loss over the whole held-out band every N steps and "
                        "at the last step (0: at the last step only; -1: never)")
    p.add_argument("--val-tile", type=int, default=0,
                   help="tile edge of the validation pass (0: the crop less twice the "
                        "pad, at most the band, tile + 2 pad divisible by 2**depth)")
    p.add_argument("--val-pad", type=int, default=-1,
                   help="context voxels around each validation tile (-1: a quarter of "
                        "the crop)")
    p.add_argument("--val-batch", type=int, default=0,
                   help="tiles per rank and step of the validation pass (0: --batch)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto: cuda when a GPU is visible, else cpu")
    p.add_argument("--backend", choices=["auto", "nccl", "gloo"], default="auto",
                   help="torch.distributed backend; auto: nccl on GPU, gloo on CPU")
    p.add_argument("--no-amp", action="store_true", help="no bf16 autocast on GPU")
    p.add_argument("--norm-batches", type=int, default=4,
                   help="global batches of epoch 0 that the channel mean and std "
                        "are taken from")
    p.add_argument("--ckpt", default=None,
                   help="write checkpoints here, every --every steps and at the end "
                        "(default: none)")
    p.add_argument("--every", type=int, default=0, help="checkpoint interval in steps (0: at the end)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --ckpt (without it an existing file is "
                        "refused before training, unless it is the --resume checkpoint, "
                        "which the run goes on writing)")
    p.add_argument("--resume", default=None,
                   help="checkpoint to resume from, exactly (default: none, start afresh)")
    p.add_argument("--log-every", type=int, default=10, help="print the loss every N steps")
    p.add_argument("--log", default=None,
                   help="also write JSON lines here, one per logged step (rank 0) "
                        "(default: none)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--deterministic", action="store_true",
                   help="deterministic cuDNN algorithms (bitwise repeatable runs on GPU)")
    return p.parse_args(argv)


def check_args(a: argparse.Namespace) -> None:
    """What the arguments alone tell (the same on every rank): UsageError."""
    m = 2 ** a.depth if a.depth >= 0 else 1
    for name, v, lo in (("--crop", a.crop, 1), ("--batch", a.batch, 1), ("--base", a.base, 1),
                        ("--depth", a.depth, 0), ("--steps", a.steps, 0),
                        ("--norm-batches", a.norm_batches, 1), ("--log-every", a.log_every, 1),
                        ("--every", a.every, 0), ("--threads", a.threads, 0),
                        ("--val-tile", a.val_tile, 0), ("--val-pad", a.val_pad, -1),
                        ("--val-batch", a.val_batch, 0), ("--val-every", a.val_every, -1)):
        if v < lo:
            raise UsageError(f"{name} {v}: must be {lo} or more")
    if a.crop % m:
        lo, hi = a.crop // m * m, (a.crop // m + 1) * m
        raise UsageError(f"--crop {a.crop} is not divisible by 2**depth = {m} (--depth "
                         f"{a.depth}: the U-Net halves the crop {a.depth} times): "
                         f"take e.g. --crop {lo or hi}" + (f" or {hi}" if lo else ""))
    if not 0 <= a.holdout_frac < 1:
        raise UsageError(f"--holdout-frac {a.holdout_frac}: must be in [0, 1)")
    if not 1 <= a.scale_factor <= 16:
        raise UsageError(f"--scale-factor {a.scale_factor}: must be 1..16")
    if not a.lr > 0:
        raise UsageError(f"--lr {a.lr}: must be positive")


def check_output(path: str, what: str, overwrite: bool = True,
                 resume: Optional[str] = None) -> None:
    """UsageError unless `path` can be written: its folder exists and takes
    a new file (a probe made and removed), it is not a folder, and (without
    `overwrite`) it does not exist, unless it is the `resume` file (which
    the resumed run goes on writing)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{what} {path}: no such directory '{folder}'")
    if os.path.isdir(path):
        raise UsageError(f"{what} {path} is a directory")
    if os.path.exists(path) and not overwrite and \
            not (resume and os.path.exists(resume) and os.path.samefile(path, resume)):
        raise UsageError(f"{what} {path} exists: pass --overwrite to replace it"
                         + (" (or --resume it)" if what == "--ckpt" else ""))
    probe = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.probe")
    try:
        with open(probe, "xb"):
            pass
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"{what} {path}: cannot write in '{folder}': {e.strerror}") from None


def load_checkpoint(path: str, dev: torch.device) -> Dict[str, Any]:
    """A checkpoint of this script (UsageError when it is none)."""
    return _cli.load_checkpoint(lambda p: torch.load(p, map_location=dev), path,
                                "--resume",
                                ("model", "optimizer", "loader", "norm", "step"))


def save_checkpoint(path: str, state: Dict[str, Any], rank: int, dev: torch.device) -> None:
    """Rank 0 writes `path` aside (a temporary file in the same folder,
    renamed over `path` when complete: a failed save leaves neither a
    partial checkpoint nor the temporary file); everyone waits for it."""
    if rank == 0:
        tmp = os.path.join(os.path.dirname(os.path.abspath(path)),
                           f".{os.path.basename(path)}.{os.getpid()}.tmp")
        try:
            with open(tmp, "xb") as f:
                torch.save(state, f)
                if os.environ.get("SLABFEED_TEST_FAIL", "") in ("example.save",
                                                                "example.save@0"):
                    raise OSError(f"injected failure writing {tmp} "
                                  "(SLABFEED_TEST_FAIL=example.save@0)")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    dist.barrier(device_ids=[dev.index]) if dev.type == "cuda" else dist.barrier()


def process_start() -> float:
    """The time.perf_counter() of this process's start (Linux: from
    /proc/self/stat; elsewhere now)."""
    now = time.perf_counter()
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        age = up - ticks / os.sysconf("SC_CLK_TCK")
        return now - age if 0 <= age < 86400 else now
    except (OSError, ValueError, IndexError):
        return now


def main(argv: Optional[Sequence[str]] = None,
         started: Optional[float] = None) -> List[Dict[str, Any]]:
    """Train; returns the logged records of rank 0 (for tests). A user
    error raises slabfeed._cli.JobError on every rank alike, before any
    loader is left open and before torch.distributed starts. `started`: the
    perf_counter() the time to the first batch counts from (default: now)."""
    t_start = time.perf_counter() if started is None else started
    comm = MPI.COMM_WORLD
    rank, world = comm.rank, comm.size
    with _cli.agreed(comm):
        a = parse_args(argv)
        check_args(a)
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if a.deterministic:
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    gpu = a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
    backend = a.backend if a.backend != "auto" else ("nccl" if gpu else "gloo")
    if gpu:
        dev = torch.device("cuda", local_rank(comm) % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
    dtype = a.dtype if a.dtype != "auto" else ("bf16" if gpu else "f32")
    amp = gpu and not a.no_amp
    records: List[Dict[str, Any]] = []
    spec = a.file[0] if len(a.file) == 1 else a.file
    held_vols = a.holdout_volumes
    # Before the loader opens, every rank alike: the volumes (expanded on
    # rank 0 as the library does), the held-out band, the checkpoint to
    # resume, the files rank 0 will write.
    paths = _cli.on_root(comm, lambda: _cli.expand_paths(a.file))
    band: Optional[List[int]] = None
    vgeom: Optional[List[int]] = None
    ck: Optional[Dict[str, Any]] = None
    with _cli.agreed(comm):
        box = slabfeed.tools.describe(paths[0], a.input)["shape"] \
            if len(paths) == 1 and not held_vols else None
        if a.holdout is not None and box is None:
            raise UsageError("--holdout is a box of one volume: with a suite of "
                             f"{len(paths)} volume(s) hold out whole volumes "
                             "(--holdout-volumes)" if not held_vols else
                             "--holdout with --holdout-volumes: give one or the other")
        band = holdout_band(a, box) if box is not None else None
        if a.locality and band is not None:
            raise UsageError(
                "--locality draws each rank's crops in its node's z-range, which a "
                "hold-out would make unequal: " + (
                    "leave out --holdout" if a.holdout is not None else
                    f"pass --holdout-frac 0 (the default holds out the last "
                    f"{a.holdout_frac} of the box in z)") + ", or leave out --locality")
        if band is not None:
            vgeom = pass_geometry(a.crop, a.depth,
                                  [e or n for e, n in zip(band[3:], box)], a.val_tile,
                                  a.val_pad)
        if a.resume:
            ck = load_checkpoint(a.resume, dev)
            was = ck.get("args", {}).get("scale_factor", 1)
            if was != a.scale_factor:
                raise UsageError(f"--resume {a.resume} was trained with --scale-factor "
                                 f"{was}, this run {a.scale_factor}")
            if ck.get("holdout") != band or ck.get("holdout_volumes", "") != held_vols:
                raise UsageError(
                    f"--resume {a.resume} held out {ck.get('holdout')} (volumes "
                    f"'{ck.get('holdout_volumes', '')}'), this run {band} (volumes "
                    f"'{held_vols}'): the sample stream would differ (pass the "
                    "checkpoint's --holdout / --holdout-frac / --holdout-volumes)")
    if a.ckpt:
        _cli.on_root(comm, lambda: check_output(a.ckpt, "--ckpt", a.overwrite, a.resume))
    if a.log:
        _cli.on_root(comm, lambda: check_output(a.log, "--log"))
    opened: List[TorchLoader] = []
    t_open = time.perf_counter()
    try:
        with _cli.agreed(comm):
            loader = TorchLoader(comm, device=dev, path=spec, input=a.input,
                                 target=a.target, crop=a.crop, batch=a.batch, seed=a.seed,
                                 input_vectors=VECTORS, target_vectors=VECTORS,
                                 dtype=dtype, prefetch=a.prefetch,
                                 node_memory=a.node_memory, locality=a.locality,
                                 holdout=[band] if band else None,
                                 holdout_volumes=held_vols or None,
                                 scale_factor=a.scale_factor)
            opened.append(loader)
        volumes = loader.loader.volumes()
        if box is None:
            box = list(volumes[0][1])
        # The validation passes: over the band, or over each held-out
        # volume; each a loader of its own (a tiled pass; it holds its own
        # copy of its volume's slabs).
        vsets = []  # (path, region or None, voxels)
        with _cli.agreed(comm):
            if band is not None:
                vsets.append((spec, band, 0))
            held = parse_indices(held_vols, len(volumes))
            for i in held:
                path, shape = volumes[i]
                vsets.append((path, None, shape[0] * shape[1] * shape[2]))
            if held:
                vgeom = pass_geometry(a.crop, a.depth, list(volumes[held[0]][1]),
                                      a.val_tile, a.val_pad)
        validate = bool(vsets) and a.val_every >= 0
        vloaders: List[TorchLoader] = []
        for path, region, _ in (vsets if validate else []):
            with _cli.agreed(comm):
                vloaders.append(TorchLoader(
                    comm, device=dev, path=path, input=a.input, target=a.target,
                    batch=a.val_batch or a.batch, tile=vgeom[0], pad=vgeom[1],
                    region=[region] if region else None, input_vectors=VECTORS,
                    target_vectors=VECTORS, dtype=dtype, prefetch=a.prefetch,
                    node_memory=a.node_memory, scale_factor=a.scale_factor))
                opened.append(vloaders[-1])
    except _cli.JobError:  # on every rank alike: the loaders open close
        for v in reversed(opened):
            v.close(force=True)
        raise
    t_open = time.perf_counter() - t_open
    vloader = vloaders[0] if vloaders else None
    env = init_distributed(backend)
    assert (env["rank"], env["world"]) == (rank, world)
    first: List[float] = []

    def take() -> Any:
        """loader.next(); the first batch's time printed by rank 0."""
        b = loader.next()
        if not first:
            first.append(time.perf_counter() - t_start)
            if rank == 0:
                print(f"first batch after {first[0]:.2f} s (open {t_open:.2f} s)",
                      flush=True)
        return b

    # `with`: the collective close on success; when the block ends on an
    # exception (this rank's alone, maybe) the close is skipped and the
    # exception goes on to _run_or_abort's MPI_Abort.
    with loader, contextlib.ExitStack() as vstack:
        for v in vloaders:
            vstack.enter_context(v)
        torch.manual_seed(a.seed)
        model = UNet3d(4, 5, a.base, a.depth, a.scale_factor).to(dev)
        ddp = DDP(model, device_ids=[dev.index] if gpu else None)
        opt = torch.optim.Adam(ddp.parameters(), lr=a.lr)
        step = 0
        norm: Optional[Dict[str, List[float]]] = None
        if ck is not None:
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
            loader.load_state_dict(ck["loader"])
            norm, step = ck["norm"], ck["step"]
        if rank == 0:
            print(f"train_unet: {world} rank(s), {backend}, {dev.type}, batch "
                  f"{a.batch}x{world} of {a.crop}^3 {dtype}, "
                  + (f"target {a.scale_factor * a.crop}^3 (x{a.scale_factor} "
                     "super-resolution), " if a.scale_factor > 1 else "") +
                  f"{sum(p.numel() for p in model.parameters())} parameters, "
                  f"{len(loader)} steps/epoch, from step {step}", flush=True)
            print(loader.loader.placement(), flush=True)
            if len(volumes) > 1:
                print(f"dataset: {len(volumes)} volumes; held out: "
                      f"{held_vols or 'none'}", flush=True)
            if band:
                print(f"held out: z,y,x {band[:3]} extent {band[3:]} (0: the whole axis)"
                      + (f"; validation: {len(vloader)} steps of tile {vgeom[0]}, pad "
                         f"{vgeom[1]}" if vloader else ""), flush=True)
            elif vloaders:
                print(f"validation: {len(vloaders)} held-out volume(s), tile "
                      f"{vgeom[0]}, pad {vgeom[1]}", flush=True)
        if norm is None:
            norm = channel_stats(loader, a.norm_batches, VECTORS, take)
        mx, sx, my, sy = (torch.tensor(norm[k], device=dev).view(1, -1, 1, 1, 1)
                          for k in ("input_mean", "input_std", "target_mean", "target_std"))

        def checkpoint(path: str) -> None:
            save_checkpoint(path, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                                   "loader": loader.state_dict(), "norm": norm,
                                   "step": step, "args": vars(a), "holdout": band,
                                   "volumes": [p for p, _ in volumes],
                                   "holdout_volumes": held_vols,
                                   "box": list(box), "val_geometry": vgeom}, rank, dev)
            if rank == 0:
                print(f"checkpoint: step {step} written to {path}", flush=True)

        loss_sum = torch.zeros((), device=dev)
        t0, wait, n = time.perf_counter(), 0.0, 0
        while step < a.steps:
            tw = time.perf_counter()
            x, y, meta = take()  # ready on the current stream
            wait += time.perf_counter() - tw
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
                pred = ddp(normalise(x, mx, sx))
            loss = F.mse_loss(pred.float(), normalise(y, my, sy))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            n += 1
            loss_sum += loss.detach()
            val_due = bool(vloaders) and (
                step == a.steps or (a.val_every > 0 and step % a.val_every == 0))
            if step % a.log_every == 0 or step == a.steps or val_due:
                dist.all_reduce(loss_sum)
                mean = loss_sum.item() / (n * world)
                dt = time.perf_counter() - t0
                rec = {"step": step, "epoch": meta.epoch, "loader_step": meta.step,
                       "loss": mean, "samples": list(meta.sample),
                       "samples_s": n * a.batch * world / dt, "wait_ms": 1e3 * wait / n}
                val = ""
                if val_due:
                    tv = time.perf_counter()
                    # Over the band, or the held-out volumes weighted by
                    # their voxels (each pass's loss is its voxel mean).
                    losses = [validation_loss(model, v, vgeom[1], (mx, sx, my, sy),
                                              amp, dev, a.scale_factor) for v in vloaders]
                    wts = [vox or 1 for _, _, vox in vsets]
                    rec["val_loss"] = sum(l * w for l, w in zip(losses, wts)) / sum(wts)
                    val = (f" val_loss {rec['val_loss']:.6f} "
                           f"({time.perf_counter() - tv:.1f} s)")
                if rank == 0:
                    records.append(rec)
                    print(f"step {step:6d} epoch {meta.epoch} loss {mean:.6f}{val} "
                          f"{rec['samples_s']:.1f} samples/s loader wait "
                          f"{rec['wait_ms']:.2f} ms/step", flush=True)
                    if a.log:
                        with open(a.log, "a") as f:
                            f.write(json.dumps(rec) + "\n")
                loss_sum.zero_()
                t0, wait, n = time.perf_counter(), 0.0, 0
            if a.ckpt and a.every and step % a.every == 0 and step < a.steps:
                checkpoint(a.ckpt)
        if a.ckpt:
            checkpoint(a.ckpt)
    # DDP's reducer holds the process group: released here, after a barrier
    # (torch 1.13's gloo group, left to be destroyed when main's frame goes,
    # hung now and then in its destructor, joining its worker threads).
    dist.barrier(device_ids=[dev.index]) if gpu else dist.barrier()
    del ddp
    dist.destroy_process_group()  # on success only: not after a failure
    return records


def _run_or_abort(argv: Sequence[str]) -> None:
    """main() as the script: a user error is one line from rank 0 and exit
    status 2 on every rank; any other exception on this rank (KeyboardInterrupt
    from SIGINT included) its traceback and MPI_Abort: the other ranks may be
    waiting in a collective (DDP's allreduce, a barrier) that this rank will
    never reach, and only MPI_Abort ends them (slabfeed._cli.run)."""
    started = process_start()
    _cli.run("train_unet.py", lambda args: main(args, started), argv)


if __name__ == "__main__":
    _run_or_abort(sys.argv[1:])
