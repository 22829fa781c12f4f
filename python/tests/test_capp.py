"""Python batches equal the C loader's: the batches that the C app
slabfeed-dump wrote (CTest fixture `dump` of tests/CMakeLists.txt: 3 ranks x
batch 2, crop 12, f16, seed 5, epoch 2, steps 0-2, on the channels-last
chunked 24x20x18 volume apps_vol.h5) are read back with h5py and compared
with a Python loader's, bit for bit, metadata included. The global sample
stream does not depend on the rank count, so P ranks take batch 6 / P."""
from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import COMM, VEC

import slabfeed

h5py = pytest.importorskip("h5py")

APPS = os.environ.get("SLABFEED_APPS_TEST_DIR", "")
VOL, DUMP = os.path.join(APPS, "apps_vol.h5"), os.path.join(APPS, "apps_dump.h5")
GLOBAL_BATCH, STEPS = 6, 3


@pytest.mark.skipif(not (os.path.exists(VOL) and os.path.exists(DUMP)),
                    reason="the apps' CTest fixtures (apps.gen, apps.dump.np3) did not run")
@pytest.mark.skipif(GLOBAL_BATCH % COMM.size != 0, reason="the global batch 6 needs 1, 2, 3 or 6 ranks")
def test_python_batches_equal_slabfeed_dump():
    with h5py.File(DUMP, "r") as f:
        want = {k: f[k][...] for k in ("input", "target", "origin", "symmetry", "sample",
                                       "sample_epoch")}
        seed, epoch = int(f.attrs["seed"]), int(f.attrs["epoch"])
        dtype = f.attrs["dtype"]
        dtype = dtype.decode() if isinstance(dtype, bytes) else str(dtype)
    assert (seed, epoch, dtype) == (5, 2, "f16")
    assert want["input"].shape[0] == GLOBAL_BATCH * STEPS
    B = GLOBAL_BATCH // COMM.size
    with slabfeed.Loader(COMM, path=VOL, input="Nbody", target="Hydro", crop=12, batch=B,
                         seed=seed, dtype=dtype, input_vectors=VEC, target_vectors=VEC) as L:
        L.seek(epoch, 0)
        for s in range(STEPS):
            b = L.next()
            rows = slice(s * GLOBAL_BATCH + COMM.rank * B, s * GLOBAL_BATCH + (COMM.rank + 1) * B)
            for name, t in (("input", b.input), ("target", b.target)):
                got = np.from_dlpack(t).view(np.uint16)
                assert np.array_equal(got, want[name][rows].view(np.uint16)), f"{name} step {s}"
            assert np.array_equal(np.array(b.origin), want["origin"][rows])
            assert np.array_equal(np.array(b.symmetry), want["symmetry"][rows])
            assert np.array_equal(np.array(b.sample), want["sample"][rows])
            assert (want["sample_epoch"][rows] == b.epoch).all()
            # 1 step per epoch here (the default covers the 24x20x18 box once)
            assert (b.epoch, b.step) == (epoch + s, 0) and len(L) == 1
