"""GPU batches through PyTorch (run on a GPU machine; SKIP elsewhere):
f32/f16/bf16 device batches, handed to torch's current stream, equal host
batches bit for bit; the loader's own stream plus torch.from_dlpack on
another stream; a slow consumer on another stream while the loader moves on
(prefetch 1: the slot is rewritten only after that stream has read it)."""
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
from slabfeed.torch import TorchLoader  # noqa: E402

if not slabfeed.cuda_built:
    pytest.skip("SKIP: slabfeed was built without CUDA", allow_module_level=True)


def local_rank() -> int:
    """This rank's index among the ranks of its node, from MPI itself (a
    shared-memory split): right under any launcher (mpiexec of Open MPI or
    MPICH, srun), unlike OMPI_COMM_WORLD_LOCAL_RANK / SLURM_LOCALID."""
    from mpi4py import MPI

    node = COMM.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_rank()
    finally:
        node.Free()


LOCAL = local_rank()
DEV = LOCAL % torch.cuda.device_count()
torch.cuda.set_device(DEV)

OPTS = dict(input="Nbody", target="Hydro", crop=8, batch=2, seed=7,
            input_vectors=VEC, target_vectors=VEC)
INT = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}


def bits(t: "torch.Tensor") -> np.ndarray:
    return t.detach().cpu().view(INT[t.dtype]).numpy()


@pytest.mark.parametrize("dtype,out_layout,side_stream", [
    ("f32", "ncdhw", False), ("f16", "ndhwc", True), ("bf16", "ncdhw", True),
    ("bf16", "ndhwc", False)])
def test_gpu_batches_equal_host(index_volume, dtype, out_layout, side_stream):
    opts = dict(OPTS, path=index_volume, dtype=dtype, out_layout=out_layout)
    stream = torch.cuda.Stream() if side_stream else torch.cuda.default_stream()
    with slabfeed.Loader(COMM, **opts) as host, \
            TorchLoader(COMM, device=f"cuda:{DEV}", **opts) as gpu, torch.cuda.stream(stream):
        for _ in range(6):
            hb = host.next()
            x, y, meta = gpu.next()  # on `stream`, no host synchronisation
            assert x.device == torch.device("cuda", DEV)
            assert (meta.epoch, meta.step, meta.sample, meta.origin, meta.symmetry) == \
                (hb.epoch, hb.step, hb.sample, hb.origin, hb.symmetry)
            for g, h in ((x, hb.input), (y, hb.target)):
                assert np.array_equal(bits(g), bits(torch.from_dlpack(h)))


def test_own_stream_and_export(index_volume):
    """next() without a stream uses the loader's stream; torch.from_dlpack
    on another stream orders that stream (DLPack stream rule)."""
    opts = dict(OPTS, path=index_volume, dtype="bf16", device=DEV)
    s = torch.cuda.Stream()
    with slabfeed.Loader(COMM, **dict(opts, device=-1)) as host, slabfeed.Loader(COMM, **opts) as L:
        for _ in range(4):
            b, hb = L.next(), host.next()
            assert b.device == DEV and b.stream is not None
            assert b.input.__dlpack_device__() == (2, DEV)
            with torch.cuda.stream(s):
                x = torch.from_dlpack(b.input)
                assert np.array_equal(bits(x), bits(torch.from_dlpack(hb.input)))
            assert b.input.tobytes() == torch.from_dlpack(hb.input).view(torch.int16).numpy().tobytes()
        old = b
        L.next()
        with pytest.raises(slabfeed.StaleBatchError):
            torch.from_dlpack(old.input)


def test_slow_consumer_on_another_stream(index_volume):
    """Batch n is handed to stream A; stream B sleeps ~20 ms, then reads it
    (from_dlpack on B). The host takes batch n + 1 at once; with prefetch 1
    it goes into the same slot, which must wait until B has read batch n."""
    opts = dict(OPTS, path=index_volume, dtype="f32", prefetch=1)
    a, b_stream = torch.cuda.Stream(), torch.cuda.Stream()
    cycles = 40_000_000  # ~20 ms at 2 GHz
    got, want = [], []
    with slabfeed.Loader(COMM, **dict(opts, device=-1)) as host, \
            slabfeed.Loader(COMM, **dict(opts, device=DEV)) as L:
        for _ in range(5):
            batch = L.next(a)
            with torch.cuda.stream(b_stream):
                torch.cuda._sleep(cycles)  # a slow consumer
                got.append(torch.from_dlpack(batch.input).clone())
            want.append(np.from_dlpack(host.next().input).copy())
        torch.cuda.synchronize()
    for i, (g, w) in enumerate(zip(got, want)):
        assert np.array_equal(g.cpu().numpy().view(np.uint32), w.view(np.uint32)), f"batch {i}"


def test_stream_arguments(index_volume):
    with slabfeed.Loader(COMM, **dict(OPTS, path=index_volume, device=DEV)) as L:
        with pytest.raises(ValueError, match="ambiguous"):
            L.next(0)
        b = L.next(torch.cuda.default_stream(DEV))  # torch's default stream: legacy (1)
        assert b.stream == 1
        with pytest.raises(ValueError, match="ambiguous"):
            b.input.__dlpack__(stream=0)
        b.input.__dlpack__(stream=-1)  # the consumer orders itself
        with pytest.raises(slabfeed.CUDAError, match="per-thread"):
            b.input.__dlpack__(stream=2)  # per-thread default stream: refused
        # max_streams in all besides the stream of next
        streams = [torch.cuda.Stream() for _ in range(slabfeed._slabfeed.max_streams + 1)]
        for s in streams[:-1]:
            b.input.__dlpack__(stream=s.cuda_stream)
        with pytest.raises(slabfeed.CUDAError, match="at most"):
            b.input.__dlpack__(stream=streams[-1].cuda_stream)
        L.next(streams[0])  # joins them all
        torch.cuda.synchronize()
