#!/usr/bin/env python3
"""Per-next() overhead of the Python layer over the C library.

On a tiny crop (2^3, batch 1: the C work is a few microseconds) it times,
per call, in the same loader:
  C loop        slabfeed_next in a C loop (Loader._time_next)
  _c.next       the extension's next (a Batch object, GIL released)
  Loader.next   the public Python method
  + tensors     + batch.input/.target and numpy/torch.from_dlpack of both
  TorchLoader   slabfeed.torch.TorchLoader.next (torch tensors + metadata)
and prints each minus the C loop: the overhead that Python adds to a
training step. Target: under 50 us.

    mpirun -n 1 python3 bench/python_overhead.py [--device 0] [--n 20000]
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Callable, Dict

from mpi4py import MPI

import numpy as np

import slabfeed


def per_call(f: Callable[[], object], n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t) / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", type=int, default=-1, help="-1: host batches")
    p.add_argument("--n", type=int, default=20000, help="calls per measurement")
    p.add_argument("--repeat", type=int, default=5, help="best of")
    p.add_argument("--file", help="a volume (default: a generated 16^3 one)")
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    tmp = None
    if a.file is None:
        tmp = tempfile.mkdtemp(prefix="sfbench-") if comm.rank == 0 else None
        tmp = comm.bcast(tmp)
        a.file = os.path.join(tmp, "tiny.h5")
        slabfeed.tools.generate(comm, a.file, shape=16)
    opts = dict(path=a.file, input="Nbody", target="Hydro", crop=2, batch=1,
                input_vectors=[(1, 2, 3)], target_vectors=[(1, 2, 3)],
                device=a.device, steps_per_epoch=1 << 40)
    res: Dict[str, float] = {}
    stream = None
    try:
        import torch
        from slabfeed.torch import TorchLoader
        if a.device >= 0:
            torch.cuda.set_device(a.device)
            stream = torch.cuda.current_stream()
    except ImportError:
        torch = None
    with slabfeed.Loader(comm, **opts) as L:
        c = L._c
        s = stream if stream is not None else None
        for _ in range(2):  # warm-up
            c._time_next(a.n // 10, s)
        best = lambda f: min(per_call(f, a.n) for _ in range(a.repeat))  # noqa: E731
        res["C loop"] = min(c._time_next(a.n, s) / a.n for _ in range(a.repeat))
        res["_c.next"] = best(lambda: c.next(s))
        res["Loader.next"] = best(lambda: L.next(s))

        def with_numpy() -> None:
            b = L.next(s)
            np.from_dlpack(b.input), np.from_dlpack(b.target)

        def with_torch() -> None:
            b = L.next(s)
            torch.from_dlpack(b.input), torch.from_dlpack(b.target)

        if a.device < 0:
            res["+ tensors (numpy)"] = best(with_numpy)
        if torch is not None:
            res["+ tensors (torch)"] = best(with_torch)
    if torch is not None:
        with TorchLoader(comm, device=a.device if a.device >= 0 else "cpu", **{
                k: v for k, v in opts.items() if k != "device"}) as T:
            res["TorchLoader.next"] = min(per_call(T.next, a.n) for _ in range(a.repeat))
    if comm.rank == 0:
        base = res["C loop"]
        where = "host batches" if a.device < 0 else f"device {a.device}"
        print(f"python_overhead: {where}, crop 2^3, batch 1, {comm.size} rank(s), "
              f"best of {a.repeat} x {a.n} calls")
        for k, v in res.items():
            extra = "" if k == "C loop" else f"   overhead {1e6 * (v - base):7.2f} us"
            print(f"  {k:20s} {1e6 * v:8.2f} us/call{extra}")
        print("JSON " + json.dumps({"bench": "python_overhead", "device": a.device,
                                    **{k: 1e6 * v for k, v in res.items()}}))
    if tmp is not None:
        comm.Barrier()
        if comm.rank == 0:
            os.remove(a.file)
            os.rmdir(tmp)


if __name__ == "__main__":
    main()
