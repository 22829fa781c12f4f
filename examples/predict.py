#!/usr/bin/env python3
"""Predict the hydro fields of the held-out band (or the whole box) with a
U-Net trained by examples/train_unet.py (a super-resolution one, trained
with --scale-factor F, predicts them on the F times finer grid), write them with slabfeed.Writer,
and compare them with the truth. One process per GPU, started by srun or
mpirun, with the interpreter the package was built for ($SF_PY, set by
`. jobs/env.sh`: see the README's Quickstart):

    srun $SF_PY -m mpi4py examples/predict.py --ckpt run.pt --out pred.h5
    mpirun -n 2 $SF_PY -m mpi4py examples/predict.py --ckpt run.pt --out pred.h5 \\
        --region whole --overwrite

What it does:
 - loads the checkpoint (model, the channel means and standard deviations
   it was trained with, the band it held out, the validation tiles);
 - opens a slabfeed loader making a tiled pass over the band (--region
   band, the default) or the whole box (--region whole): every tile of the
   region once over all ranks, as an input crop with `pad` voxels of
   context on every side, optionally under one cube symmetry
   (--pass-symmetry: test-time augmentation; velocity is rotated as a
   vector);
 - runs the model on each batch (bf16 autocast on GPU) and puts its output,
   de-normalised, into a slabfeed.Writer: the writer takes the centre of
   each output crop (the part the tile owns), undoes the pass symmetry
   (velocity as a vector) and assembles the region in the ranks' z-slabs;
   close() writes one HDF5 dataset with parallel HDF5 (written aside,
   renamed over --out when complete);
 - on rank 0 (numpy; a demo-sized box: the region is read whole), prints
   per channel the RMSE of the prediction and the RMSE relative to the
   truth's standard deviation, and the ratio of the predicted to the true
   power spectrum of one channel (--spectrum-channel) by wavenumber bin: a
   periodic FFT over the written region (for a band, over the band as a
   box, so its thin axis has few wavenumbers).

No torch.distributed: the loader and the writer work over MPI. A user error
(a bad argument, a checkpoint or volume that does not fit, an existing
--out without --overwrite, slabfeed's errors at open) is one line
`predict.py: error: ...` from rank 0 and exit status 2 on every rank.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from mpi4py import MPI  # initialises MPI before slabfeed and torch use it

import numpy as np
import torch

import slabfeed
import slabfeed.tools
from slabfeed import _cli
from slabfeed._cli import UsageError
from slabfeed.torch import TorchLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_unet import (VECTORS, UNet3d, _HelpFormatter, check_output,  # noqa: E402
                        normalise, parse_indices, pass_geometry)

CHANNELS = ["density", "velocity_z", "velocity_y", "velocity_x", "temperature"]


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = _cli.ArgumentParser(
        prog="predict.py",
        description="Predict the held-out band (or the whole box) with a U-Net "
                    "checkpoint of examples/train_unet.py, write it with "
                    "slabfeed.Writer and compare it with the truth.",
        formatter_class=_HelpFormatter)
    p.add_argument("--ckpt", required=True, help="checkpoint written by train_unet.py")
    p.add_argument("--out", required=True, help="the HDF5 file to write")
    p.add_argument("--dataset", default="prediction", help="dataset name in --out")
    p.add_argument("--file", default=None,
                   help="the volume (a path, or a pattern or @MANIFEST of one volume; "
                        "default: the checkpoint's --file, when it is one volume)")
    p.add_argument("--region", choices=["band", "whole"], default="band",
                   help="the held-out band of the checkpoint, or the whole box")
    p.add_argument("--tile", type=int, default=0,
                   help="tile edge (0: the checkpoint's validation tile for the band; "
                        "for the whole box the crop less twice the pad)")
    p.add_argument("--pad", type=int, default=-1,
                   help="context voxels around each tile (-1: the checkpoint's)")
    p.add_argument("--batch", type=int, default=0, help="tiles per rank and step "
                   "(0: the checkpoint's batch)")
    p.add_argument("--pass-symmetry", type=int, default=0,
                   help="cube symmetry id 0..47 of every tile (0: the identity)")
    p.add_argument("--out-dtype", choices=["f32", "f16"], default="f32",
                   help="element type in --out")
    p.add_argument("--layout", choices=["cf", "cl"], default="cf",
                   help="--out layout: (C,Z,Y,X) or (Z,Y,X,C)")
    p.add_argument("--chunk", type=int, default=0, help="chunk edge in --out (0: contiguous)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto: cuda when a GPU is visible, else cpu")
    p.add_argument("--no-amp", action="store_true", help="no bf16 autocast on GPU")
    p.add_argument("--spectrum-channel", type=int, default=0,
                   help="the channel whose power spectra are compared")
    p.add_argument("--picture", default=None, metavar="PNG",
                   help="also draw the prediction beside the truth, their difference and "
                        "the power-spectrum ratio into this PNG (slabfeed.pictures; needs "
                        "matplotlib: Debian's python3-matplotlib)")
    p.add_argument("--no-report", action="store_true",
                   help="write only; no comparison on rank 0 (for boxes too large for "
                        "one process's memory)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    return p.parse_args(argv)


# ---- the comparison (rank 0, numpy) --------------------------------------------------


def power_spectrum(f: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The power spectrum of the periodic box f (z, y, x) by |k| bin: bin i
    holds |k| in [(i - 1/2) dk, (i + 1/2) dk), k in cycles per voxel and
    dk = 1 / (the longest axis). Returns (k of each bin, mean power, number
    of modes); bin 0 is the mean (removed)."""
    F = np.fft.rfftn(f - f.mean())
    power = np.abs(F) ** 2
    kz, ky = np.fft.fftfreq(f.shape[0]), np.fft.fftfreq(f.shape[1])
    kx = np.fft.rfftfreq(f.shape[2])
    k = np.sqrt(kz[:, None, None] ** 2 + ky[None, :, None] ** 2 + kx[None, None, :] ** 2)
    # rfft keeps half of the x modes: those with a mirror image count twice.
    w = np.full(kx.shape, 2.0)
    w[0] = 1.0
    if f.shape[2] % 2 == 0:
        w[-1] = 1.0
    w = np.broadcast_to(w[None, None, :], power.shape)
    dk = 1.0 / max(f.shape)
    b = np.floor(k / dk + 0.5).astype(np.int64).ravel()
    modes = np.bincount(b, weights=w.ravel())
    total = np.bincount(b, weights=(power * w).ravel())
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / modes
    return np.arange(len(modes)) * dk, mean, modes


def compare(truth: np.ndarray, pred: np.ndarray, channel: int) -> Dict[str, Any]:
    """Per-channel RMSE and RMSE / std(truth), and the power-spectrum ratio
    of one channel by bin, of (C, z, y, x) arrays."""
    err = pred.astype(np.float64) - truth.astype(np.float64)
    rmse = np.sqrt((err ** 2).mean(axis=(1, 2, 3)))
    std = truth.astype(np.float64).std(axis=(1, 2, 3))
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = rmse / std
    k, pt, modes = power_spectrum(truth[channel].astype(np.float64))
    _, pp, _ = power_spectrum(pred[channel].astype(np.float64))
    # Up to the Nyquist wavenumber of an axis (|k| <= 1/2): beyond it the
    # shells hold only the corners of the k box.
    inside = [i for i in range(1, len(k)) if k[i] <= 0.5 and modes[i] > 0]
    floor = 1e-8 * max([pt[i] for i in inside if np.isfinite(pt[i])] + [0.0])
    bins = [(float(k[i]), float(pp[i] / pt[i]), int(modes[i]))
            for i in inside if pt[i] > floor]
    return {"rmse": rmse.tolist(), "rel": rel.tolist(), "spectrum": bins,
            "faint": len(inside) - len(bins)}


def report(r: Dict[str, Any], channel: int) -> None:
    names = CHANNELS if len(r["rmse"]) == len(CHANNELS) else \
        [f"channel {c}" for c in range(len(r["rmse"]))]
    print("per-channel error against the truth (physical units):")
    print(f"  {'channel':<12} {'rmse':>12} {'rmse/std':>10}")
    for c, (e, q) in enumerate(zip(r["rmse"], r["rel"])):
        print(f"  {c}:{names[c]:<10} {e:12.6g} {q:10.4f}")
    print(f"power spectrum ratio predicted/true of channel {channel} "
          f"({names[channel]}), k in cycles per voxel:")
    print(f"  {'k':>8} {'ratio':>10} {'modes':>8}")
    for k, ratio, modes in r["spectrum"]:
        print(f"  {k:8.4f} {ratio:10.4f} {modes:8d}")
    if r.get("faint"):
        print(f"  ({r['faint']} bins left out where the truth has almost no power, "
              f"below 1e-8 of its peak: there the ratio compares noise with nothing; "
              f"a synthetic slabfeed-gen box has power only at a few wavenumbers)")
    sys.stdout.flush()


# ---- the pass -------------------------------------------------------------------------


def local_rank(comm: MPI.Intracomm) -> int:
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    r = node.rank
    node.Free()
    return r


def load_checkpoint(path: str, dev: torch.device) -> Dict[str, Any]:
    """A checkpoint of train_unet.py (UsageError when it is none)."""
    return _cli.load_checkpoint(lambda p: torch.load(p, map_location=dev), path,
                                "--ckpt", ("model", "norm", "args"))


def held_out_volumes(ck: Dict[str, Any], volumes: Sequence[str]) -> str:
    """The checkpoint's held-out volumes as "2 'dir/b2.h5', ..." ("" for none)."""
    text = ck.get("holdout_volumes", "") or ""
    if not text:
        return ""
    try:
        idx = parse_indices(text, len(volumes))
    except UsageError:
        return text
    return ", ".join(f"{i} '{volumes[i]}'" for i in idx)


def the_volume(a: argparse.Namespace, ck: Dict[str, Any]) -> str:
    """The one volume to predict: --file (a path, or a pattern or manifest
    of one volume), else the checkpoint's, when it trained on one. Patterns
    and manifests are expanded as the loader does (slabfeed._cli)."""
    trained = ck["args"]["file"]
    entries = list(trained) if isinstance(trained, (list, tuple)) else [trained]
    # The volumes the run trained on (checkpoints before 0.7 do not list them).
    volumes = ck.get("volumes") or _cli.expand_paths(entries)
    if a.file:
        got = _cli.expand_paths([a.file])
        if len(got) != 1:
            raise UsageError(f"--file {a.file} is {len(got)} volumes: predict one "
                             "volume at a time")
        return got[0]
    if len(volumes) != 1:
        held = held_out_volumes(ck, volumes)
        raise UsageError(
            f"{a.ckpt} was trained on a suite of {len(volumes)} volumes ("
            + " ".join(entries) + "): pass --file with the volume to predict"
            + (f", e.g. a held-out one ({held}) with --region whole" if held else ""))
    return volumes[0]


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Predict and write; returns (rank 0) the writer's shape, the output
    path, the comparison and the seconds taken. A user error raises
    slabfeed._cli.JobError on every rank alike (no loader left open)."""
    comm = MPI.COMM_WORLD
    rank = comm.rank
    with _cli.agreed(comm):
        a = parse_args(argv)
        if not 0 <= a.spectrum_channel < len(CHANNELS):
            raise UsageError(f"--spectrum-channel {a.spectrum_channel} is not one of the "
                             f"{len(CHANNELS)} target channels (0..{len(CHANNELS) - 1})")
        for name, v, lo in (("--tile", a.tile, 0), ("--pad", a.pad, -1),
                            ("--batch", a.batch, 0), ("--chunk", a.chunk, 0),
                            ("--threads", a.threads, 0)):
            if v < lo:
                raise UsageError(f"{name} {v}: must be {lo} or more")
        if a.picture is not None:
            if a.no_report:
                raise UsageError("--picture draws the comparison: not with --no-report")
            folder = os.path.dirname(os.path.abspath(a.picture))
            if not os.path.isdir(folder):
                raise UsageError(f"--picture {a.picture}: no folder {folder}")
            if importlib.util.find_spec("matplotlib") is None:
                raise UsageError("--picture needs matplotlib (Debian: apt-get install "
                                 "python3-matplotlib; pip: pip install matplotlib)")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    gpu = a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available())
    if gpu:
        dev = torch.device("cuda", local_rank(comm) % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")
    amp = gpu and not a.no_amp
    with _cli.agreed(comm):
        ck = load_checkpoint(a.ckpt, dev)
        targs = ck["args"]
        path = the_volume(a, ck)
        box = slabfeed.tools.describe(path, targs["input"])["shape"]
        if a.region == "band":
            band = ck.get("holdout")
            if not band:
                trained = targs["file"]
                held = held_out_volumes(ck, ck.get("volumes") or _cli.expand_paths(
                    list(trained) if isinstance(trained, (list, tuple)) else [trained]))
                if held:
                    raise UsageError(
                        f"{a.ckpt} held out whole volumes ({held}), not a band of one "
                        f"box: pass --region whole to predict the whole of {path}")
                raise UsageError(f"{a.ckpt} held out no band (trained with --holdout-frac "
                                 "0): pass --region whole")
            region: Optional[List[int]] = list(band)
            extent = [e or n for e, n in zip(band[3:], box)]
        else:
            region, extent = None, list(box)
        geom = ck.get("val_geometry") if a.region == "band" else None
        if a.tile > 0 or a.pad >= 0 or geom is None:
            geom = pass_geometry(targs["crop"], targs["depth"], extent, a.tile,
                                 a.pad if a.pad >= 0 else (geom[1] if geom else -1))
    _cli.on_root(comm, lambda: check_output(a.out, "--out", a.overwrite))
    T, P = geom
    sf = int(targs.get("scale_factor", 1))  # a super-resolution model: the fine grid
    model = UNet3d(4, 5, targs["base"], targs["depth"], sf).to(dev)
    model.load_state_dict(ck["model"])
    model.eval()
    norm = ck["norm"]
    mx, sx, my, sy = (torch.tensor(norm[k], device=dev).view(1, -1, 1, 1, 1)
                      for k in ("input_mean", "input_std", "target_mean", "target_std"))
    t0 = time.perf_counter()
    with _cli.agreed(comm):
        loader = TorchLoader(comm, device=dev, path=path, input=targs["input"],
                             target=targs["target"], batch=a.batch or targs["batch"],
                             tile=T, pad=P, region=[region] if region else None,
                             pass_symmetry=a.pass_symmetry, input_vectors=VECTORS,
                             target_vectors=VECTORS, dtype="bf16" if gpu else "f32",
                             scale_factor=sf)
    try:
        with _cli.agreed(comm):
            writer = slabfeed.Writer(loader, a.out, dataset=a.dataset, like="target",
                                     layout=a.layout, dtype=a.out_dtype,
                                     chunk=a.chunk or None, overwrite=a.overwrite)
    except _cli.JobError:  # every rank alike
        loader.close(force=True)
        raise
    # `with`: the writer closes (collectively) when the pass ends normally;
    # an exception aborts it (nothing is written) and goes on to
    # _run_or_abort's MPI_Abort; the loader's close is then skipped.
    with loader, writer:
        if rank == 0:
            print(f"predict: {comm.size} rank(s), {dev.type}, "
                  f"{'band ' + str(region) if region else 'the whole box'} of {path}: "
                  f"{len(loader)} steps of {loader.loader.options['batch']} tiles x {comm.size} "
                  f"ranks, tile {T}, pad {P}, symmetry {a.pass_symmetry}"
                  + (f", x{sf} super-resolution" if sf > 1 else "") + f" -> {a.out} "
                  f"{writer.shape} ({a.layout}, {a.out_dtype})", flush=True)
        with torch.no_grad():
            for x, _, meta in loader:  # one pass; x ready on the current stream
                with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
                    pred = model(normalise(x, mx, sx))
                # Physical units; the writer takes the owned centre of each
                # crop and undoes the symmetry (on torch's current stream).
                # A super-resolution model's output is sf x the input crop:
                # the writer, like the target, writes on the fine grid.
                writer.put(loader.batch, pred.float() * sy + my)
    seconds = time.perf_counter() - t0
    out: Dict[str, Any] = {}
    if rank == 0:
        print(f"predict: wrote {a.dataset} {writer.shape} to {a.out} in {seconds:.1f} s",
              flush=True)
        out = {"shape": writer.shape, "out": a.out, "seconds": seconds}
        if not a.no_report:
            # On the target's grid (sf x the input's).
            origin = tuple(sf * v for v in region[:3]) if region else (0, 0, 0)
            fine = tuple(sf * e for e in extent)
            with slabfeed.tools.Reader(path) as rd:
                truth = rd.crop(targs["target"], origin, fine)
            with slabfeed.tools.Reader(a.out) as rd:
                pred = rd.crop(a.dataset, (0, 0, 0), fine, layout=a.layout)
            out["compare"] = compare(truth, pred, a.spectrum_channel)
            report(out["compare"], a.spectrum_channel)
            if a.picture is not None:
                from slabfeed import pictures
                pictures.save_comparison(
                    a.picture, pred, truth, channel=a.spectrum_channel,
                    title=f"{a.out}: channel {a.spectrum_channel} "
                          f"({(CHANNELS + [''] * 64)[a.spectrum_channel]}), middle z slice")
                print(f"predict: drew the prediction beside the truth in {a.picture}",
                      flush=True)
    comm.Barrier()
    return out


def _run_or_abort(argv: Sequence[str]) -> None:
    """main() as the script: a user error is one line from rank 0 and exit
    status 2 on every rank; any other exception on this rank its traceback
    and MPI_Abort (the others may be waiting in the writer's collective
    close): slabfeed._cli.run."""
    _cli.run("predict.py", main, argv)


if __name__ == "__main__":
    _run_or_abort(sys.argv[1:])
