"""One rank of test_abort.py's jobs (not a test module): a training-shaped
loop over a slabfeed loader, with an allreduce per step standing in for
DDP, and a failure on one rank at step 3.

    python -m mpi4py abort_worker.py VOLUME MODE FAIL_RANK [READY_FILE]

MODE says how the loader is held and how the rank fails:
  atexit   two Loaders, never closed (left to the atexit hook); raises
  with     `with Loader(...)`; raises
  finally  `try: ... finally: loader.close()`; raises
  torch    TorchLoader with `finally: loader.close()`; raises
  sysexit  `with Loader(...)`; sys.exit(3)
  sigint   `with Loader(...)`; writes its pid to READY_FILE and sleeps
           until the test sends it SIGINT (KeyboardInterrupt)
  gen      writes the 24^3 test volume VOLUME and exits
FAIL_RANK -1: no rank fails (the normal path: every loader is closed
collectively, exit 0). The failing rank prints "FAILING rank R at T"
(T: time.time()) just before it fails.
"""
from __future__ import annotations

import os
import sys
import time

from mpi4py import MPI

import slabfeed

COMM = MPI.COMM_WORLD


def fail_here(mode: str, step: int, fail_rank: int, ready: str) -> None:
    if COMM.rank != fail_rank or step != 3:
        return
    print(f"FAILING rank {COMM.rank} at {time.time():.3f}", flush=True)
    if mode == "sysexit":
        sys.exit(3)
    if mode == "sigint":
        with open(ready + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(ready + ".tmp", ready)
        while True:  # KeyboardInterrupt arrives here
            time.sleep(0.05)
    raise RuntimeError(f"injected failure on rank {COMM.rank} at step {step}")


def main() -> None:
    volume, mode, fail_rank = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ready = sys.argv[4] if len(sys.argv) > 4 else ""
    if mode == "gen":
        slabfeed.tools.generate(COMM, volume, shape=24, content="index")
        return
    opts = dict(path=volume, input="Nbody", target="Hydro", crop=8, batch=1,
                steps_per_epoch=8)

    def steps(loader) -> None:
        for step, _ in enumerate(loader):
            fail_here(mode, step, fail_rank, ready)
            COMM.allreduce(step)  # stands for DDP's gradient allreduce

    if mode == "atexit":
        first = slabfeed.Loader(COMM, **opts)
        second = slabfeed.Loader(COMM, **opts)
        steps(first)
        steps(second)
    elif mode in ("with", "sysexit", "sigint"):
        with slabfeed.Loader(COMM, **opts) as loader:
            steps(loader)
        assert loader.closed
    elif mode == "finally":
        loader = slabfeed.Loader(COMM, **opts)
        try:
            steps(loader)
        finally:
            loader.close()
        assert loader.closed
    elif mode == "torch":
        from slabfeed.torch import TorchLoader
        tl = TorchLoader(COMM, device="cpu", **opts)
        try:
            steps(tl)
        finally:
            tl.close()
        assert tl.loader.closed
    else:
        raise SystemExit(f"abort_worker: unknown mode {mode!r}")
    COMM.Barrier()
    if COMM.rank == 0:
        print(f"abort_worker: {mode}: done on {COMM.size} ranks", flush=True)


if __name__ == "__main__":
    main()
