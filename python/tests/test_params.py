"""Per-volume parameters from Python: ``params`` names attributes of each
volume's file (written by ``tools.generate(attrs=...)``) or columns of a
manifest; ``Batch.params`` carries each sample's volume's values (after
``params_norm``) and ``Loader.volume_params()`` lists them; the torch
adapter's ``meta.params`` is the same as a (B, K) float32 tensor and
``meta.volume`` the volumes. A missing parameter is refused on every rank,
naming the file."""
from __future__ import annotations

import os

import numpy as np
import pytest

import slabfeed
from conftest import COMM

# Omega_m and sigma_8 of three simulations (float64 attributes); the third
# takes sigma_8 from the manifest instead (its file has 9.0).
OM = (0.31, 0.27, 0.35)
S8 = (0.81, 0.75, 0.88)


@pytest.fixture(scope="module")
def suite(workdir):
    paths = []
    for i in range(3):
        p = f"{workdir}/cosmo_{i}.h5"
        slabfeed.tools.generate(COMM, p, shape=(12, 8, 8), content="field",
                                seed=40 + i, target=None,
                                attrs={"Omega_m": OM[i],
                                       "sigma_8": S8[i] if i < 2 else 9.0})
        paths.append(p)
    man = f"{workdir}/cosmo.txt"
    if COMM.rank == 0:
        with open(man, "w") as f:
            f.write(f"{paths[2]}\tsigma_8={S8[2]!r} unused=1\n")
    COMM.Barrier()
    return paths, man


def want(v, norm):
    x = np.array([OM[v], S8[v]], dtype=np.float32)
    if norm is None:
        return x
    shift = np.array([n[0] for n in norm], dtype=np.float32)
    scale = np.array([n[1] for n in norm], dtype=np.float32)
    return (x - shift) / scale


@pytest.mark.parametrize("norm", [None, [(0.3, 0.05), (0.8, 0.1)]])
def test_batch_params(suite, norm):
    paths, man = suite
    kw = {} if norm is None else {"params_norm": norm}
    with slabfeed.Loader(COMM, path=[paths[0], paths[1], "@" + man],
                         input="Nbody", crop=4, batch=3, seed=1,
                         params=["Omega_m", "sigma_8"], **kw) as loader:
        rows = loader.volume_params()
        assert len(rows) == 3
        for v in range(3):
            assert np.array_equal(np.array(rows[v], dtype=np.float32),
                                  want(v, norm)), (v, rows[v])
        seen = set()
        for _ in range(20):
            b = loader.next()
            assert len(b.params) == 3
            for v, p in zip(b.volume, b.params):
                seen.add(v)
                got = np.array(p, dtype=np.float32)
                assert np.array_equal(got.view(np.uint32),
                                      want(v, norm).view(np.uint32)), (v, p)
        assert COMM.allreduce(len(seen), op=max_op()) >= 2


def max_op():
    from mpi4py import MPI
    return MPI.MAX


def test_no_params(suite):
    paths, _ = suite
    with slabfeed.Loader(COMM, path=paths[0], input="Nbody", crop=4) as loader:
        assert loader.next().params is None
        assert loader.volume_params() == [()]


def test_torch_meta(suite):
    torch = pytest.importorskip("torch")
    from slabfeed.torch import TorchLoader

    paths, man = suite
    loader = TorchLoader(COMM, device="cpu", path=[paths[0], paths[1], "@" + man],
                         input="Nbody", crop=4, batch=2, params="Omega_m,sigma_8")
    try:
        x, y, meta = loader.next()
        assert y is None
        assert meta.params.shape == (2, 2) and meta.params.dtype == torch.float32
        assert len(meta.volume) == 2
        for i, v in enumerate(meta.volume):
            assert np.array_equal(meta.params[i].numpy(), want(v, None))
    finally:
        loader.loader.close()


def test_missing_parameter(suite):
    paths, _ = suite
    # cosmo_2's file alone has sigma_8 = 9 but no h; every rank refuses.
    with pytest.raises(slabfeed.FormatError) as ex:
        slabfeed.Loader(COMM, path=paths[2], input="Nbody", crop=4,
                        params="Omega_m,h")
    msg = str(ex.value)
    assert "has no parameter 'h'" in msg and os.path.basename(paths[2]) in msg
    with pytest.raises(slabfeed.ArgumentError, match="params_norm has 1 entries"):
        slabfeed.Loader(COMM, path=paths[0], input="Nbody", crop=4,
                        params="Omega_m,sigma_8", params_norm=[(0, 1)])


def test_generate_attrs_refused(workdir):
    with pytest.raises(slabfeed.ArgumentError, match="not NAME=NUMBER"):
        slabfeed.tools.generate(COMM, f"{workdir}/bad.h5", shape=8,
                                attrs={"Omega_m": float("nan")})
    assert not os.path.exists(f"{workdir}/bad.h5")


def test_generate_refuses_existing(workdir):
    """An existing file is never replaced without overwrite: the refusal
    names it, the file keeps its bytes; with overwrite it is replaced."""
    p = f"{workdir}/keep.h5"
    slabfeed.tools.generate(COMM, p, shape=8, target=None)
    COMM.Barrier()
    before = open(p, "rb").read()
    with pytest.raises(slabfeed.FileIOError, match="keep.h5' exists; pass overwrite"):
        slabfeed.tools.generate(COMM, p, shape=10, target=None)
    assert open(p, "rb").read() == before
    COMM.Barrier()
    slabfeed.tools.generate(COMM, p, shape=10, target=None, overwrite=True)
    assert slabfeed.tools.describe(p, "Nbody")["shape"] == (10, 10, 10)
