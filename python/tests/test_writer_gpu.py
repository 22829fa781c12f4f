"""slabfeed.Writer with CUDA outputs (run on a GPU machine; SKIP elsewhere):
a device loader's tiled pass, its torch outputs put from torch's current
stream (the default stream, and a side stream, given and not given), dense
channels_last, f16 and bf16 tensors, written back bit for bit; the work
that makes an output is still queued when put is called (the writer's
stream waits for it, no host synchronisation); slabfeed's own device
Tensors (batch.input, batch.target) put as they are, on the stream their
batch was handed to (the loader's own, one given to next, torch's current
one of a TorchLoader); non-dense device outputs, a CUDA output of a host
loader, a device output from another device, a foreign CUDA output with no
stream and a stale Tensor are refused."""
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


@pytest.mark.parametrize("form", ["own-stream", "given-stream", "torch-loader"])
def test_own_tensors(index_volume, workdir, form):
    """put(batch, batch.input) and put(batch, batch.target) of a device
    loader, with no stream: each Tensor is put on the stream its batch was
    handed to by next (where it is ready): the loader's own stream
    (next()), a side stream given to next, torch's current stream (a
    TorchLoader); written back like the input / the target, bit for bit."""
    for like, ds in (("input", "Nbody"), ("target", "Hydro")):
        want = truth(index_volume, ds)
        path = os.path.join(workdir, f"gpu-own-{form}-{like}.h5")

        def own(b: slabfeed.Batch) -> slabfeed.Tensor:
            return b.input if like == "input" else b.target

        if form == "torch-loader":
            with TorchLoader(COMM, device=f"cuda:{DEV}", **opts(index_volume)) as L, \
                    slabfeed.Writer(L, path, like=like) as W:
                for _ in L:
                    t = own(L.batch)
                    assert isinstance(t, slabfeed.Tensor) and t.device == DEV
                    W.put(L.batch, t)
        else:
            side = torch.cuda.Stream() if form == "given-stream" else None
            with slabfeed.Loader(COMM, device=DEV, **opts(index_volume)) as L, \
                    slabfeed.Writer(L, path, like=like) as W:
                epoch = L.tell()[0]
                while L.tell()[0] == epoch:
                    b = L.next(side)
                    if side is not None:
                        assert b.stream == side.cuda_stream
                    W.put(b, own(b))
        got = written(path)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (form, like)


class Foreign:
    """CUDA memory of a type slabfeed does not know (its current stream is
    unknown): DLPack only, delegated to a torch tensor."""

    def __init__(self, t) -> None:
        self.t = t

    def __dlpack__(self, **kw):
        return self.t.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


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
        with pytest.raises(slabfeed.ArgumentError, match="does not know"):
            W.put(L.batch, Foreign(y))  # a foreign CUDA output needs stream=
        W.put(L.batch, y.cpu())  # host memory is taken from a device loader too
        old, t = L.batch, L.batch.target  # slabfeed's own Tensor of this batch
        L.next()
        with pytest.raises(slabfeed.StaleBatchError):
            W.put(old, t)  # stale: refused before anything is stored
        W.abort()
    with TorchLoader(COMM, device="cpu", **opts(index_volume)) as L, \
            slabfeed.Writer(L, path) as W:
        _, y, _ = L.next()
        with pytest.raises(slabfeed.ArgumentError, match="host batches"):
            W.put(L.batch, y.cuda())
        W.abort()
    COMM.Barrier()
    assert not os.path.exists(path)
