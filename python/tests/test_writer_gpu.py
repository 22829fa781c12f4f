"""slabfeed.Writer with CUDA outputs (run on a GPU machine; SKIP elsewhere):
a device loader's tiled pass, its torch outputs put from torch's current
stream (the default stream, and a side stream, given and not given), dense
channels_last, f16 and bf16 tensors, written back bit for bit; the work
that makes an output is still queued when put is called (the writer's
stream waits for it, no host synchronisation); non-dense device outputs,
a CUDA output of a host loader and a device output from another device
are refused."""
from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import COMM, VEC

if not os.path.exists("/dev/nvidiactl"):
    pytest.skip("SKIP: no GPU", allow_module_level=True)
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("SKIP: torch sees no GPU", allow_module_level=True)

import slabfeed  # noqa: E402
from slabfeed.tools import Reader  # noqa: E402
from slabfeed.torch import TorchLoader  # noqa: E402

if not slabfeed.cuda_built:
    pytest.skip("SKIP: slabfeed was built without CUDA", allow_module_level=True)


def local_rank() -> int:
    from mpi4py import MPI

    node = COMM.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_rank()
    finally:
        node.Free()


DEV = local_rank() % torch.cuda.device_count()
torch.cuda.set_device(DEV)
N = 24
ODD = (20, 3, 0, 8, 17, 0)  # as test_writer.py: wraps in z, 17 rows


def truth(path: str, dataset: str) -> np.ndarray:
    with Reader(path) as rd:
        return rd.crop(dataset, ODD[:3], (8, 17, N))


def written(path: str) -> np.ndarray:
    with Reader(path) as rd:
        return rd.crop("prediction", (0, 0, 0), (8, 17, N), layout="cf")


def opts(path: str, **kw):
    o = dict(path=path, input="Nbody", target="Hydro", batch=2, tile=5, pad=2,
             region=[ODD], pass_symmetry=29, input_vectors=VEC, target_vectors=VEC)
    o.update(kw)
    return o


@pytest.mark.parametrize("form", ["default-stream", "side-stream", "side-stream-given",
                                  "channels-last-f16", "bf16-late"])
def test_device_outputs(index_volume, workdir, form):
    want = truth(index_volume, "Hydro")
    path = os.path.join(workdir, f"gpu-{form}.h5")
    side = torch.cuda.Stream() if form.startswith("side") or form == "bf16-late" else None
    with TorchLoader(COMM, device=f"cuda:{DEV}", **opts(index_volume)) as L, \
            slabfeed.Writer(L, path) as W, \
            torch.cuda.stream(side if side is not None else torch.cuda.current_stream()):
        for x, y, meta in L:  # y ready on the current stream
            if form == "channels-last-f16":
                out = y.half().contiguous(memory_format=torch.channels_last_3d)
            elif form == "bf16-late":
                # The output is made by work still queued: a long kernel
                # first, then the values (the writer must wait for both).
                torch.cuda._sleep(20_000_000)
                out = (y.float() * 1.0).bfloat16()
            else:
                out = y * 1.0  # a new tensor, made on the current stream
            if form == "side-stream-given":
                W.put(L.batch, out, stream=side)
            else:
                W.put(L.batch, out)
    got = written(path)
    if form == "bf16-late":
        want = torch.from_numpy(want.copy()).bfloat16().float().numpy()
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), form


def test_device_refusals(index_volume, workdir):
    path = os.path.join(workdir, "gpu-refused.h5")
    with TorchLoader(COMM, device=f"cuda:{DEV}", **opts(index_volume)) as L, \
            slabfeed.Writer(L, path) as W:
        x, y, _ = L.next()
        with pytest.raises(slabfeed.ArgumentError, match="dense"):
            W.put(L.batch, torch.zeros(2, 5, 18, 9, 9, device=y.device)[:, :, ::2])
        if torch.cuda.device_count() > 1:
            other = (DEV + 1) % torch.cuda.device_count()
            with pytest.raises(slabfeed.ArgumentError, match="device"):
                W.put(L.batch, y.to(f"cuda:{other}"))
        W.put(L.batch, y.cpu())  # host memory is taken from a device loader too
        W.abort()
    with TorchLoader(COMM, device="cpu", **opts(index_volume)) as L, \
            slabfeed.Writer(L, path) as W:
        _, y, _ = L.next()
        with pytest.raises(slabfeed.ArgumentError, match="host batches"):
            W.put(L.batch, y.cuda())
        W.abort()
    COMM.Barrier()
    assert not os.path.exists(path)
