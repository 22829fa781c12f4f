"""examples/train_unet.py on 2 ranks (mpirun -n 2 ... pytest): DDP with gloo
on the CPU, or with NCCL on 2 GPUs when SLABFEED_TEST_BACKEND=nccl. The loss
falls; a run stopped and resumed from its checkpoints (mid-epoch, then at
an epoch boundary) sees the same batches and computes the same losses as
one that never stopped."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from conftest import COMM

BACKEND = os.environ.get("SLABFEED_TEST_BACKEND", "gloo")
if BACKEND == "nccl" and not os.path.exists("/dev/nvidiactl"):
    pytest.skip("SKIP: no GPU for the NCCL run of the example", allow_module_level=True)

torch = pytest.importorskip("torch")
if BACKEND == "nccl" and torch.cuda.device_count() < COMM.size:
    pytest.skip(f"SKIP: the NCCL run needs {COMM.size} GPUs", allow_module_level=True)

import slabfeed  # noqa: E402

SOURCE = Path(os.environ.get("SLABFEED_SOURCE_DIR", Path(__file__).resolve().parents[2]))


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("train_unet", SOURCE / "examples" / "train_unet.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def field_volume(workdir):
    path = os.path.join(workdir, "field32.h5")
    slabfeed.tools.generate(COMM, path, shape=32, content="field", seed=1)
    return path


def test_train_resume_exact(example, workdir, field_volume):
    """32^3 box, crops 16^3, batch 2 x 2 ranks: 2 steps per epoch."""
    common = ["--file", field_volume, "--crop", "16", "--batch", "2", "--base", "8",
              "--depth", "1", "--lr", "3e-3", "--log-every", "1", "--norm-batches", "2",
              "--threads", "1"]
    if BACKEND == "nccl":
        common += ["--device", "cuda", "--backend", "nccl", "--deterministic"]
    else:
        common += ["--device", "cpu", "--backend", "gloo"]
    ck1, ck2 = os.path.join(workdir, "ck1.pt"), os.path.join(workdir, "ck2.pt")
    full = example.main(common + ["--steps", "40"])
    part1 = example.main(common + ["--steps", "3", "--ckpt", ck1])   # stops mid-epoch 1
    part2 = example.main(common + ["--steps", "6", "--resume", ck1, "--ckpt", ck2])
    part3 = example.main(common + ["--steps", "8", "--resume", ck2])  # from epoch 3, step 0
    if COMM.rank != 0:
        assert full == part1 == part2 == part3 == []  # rank 0 logs
        return
    assert [r["step"] for r in full] == list(range(1, 41))
    resumed = part1 + part2 + part3
    assert [r["step"] for r in resumed] == list(range(1, 9))
    assert [(r["epoch"], r["loader_step"]) for r in resumed[:8]] == \
        [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)]
    for r, u in zip(resumed, full[:8]):
        assert r["samples"] == u["samples"] and r["epoch"] == u["epoch"], r["step"]
        assert r["loss"] == u["loss"], f"step {r['step']}: resumed {r['loss']!r} vs {u['loss']!r}"
    first = sum(r["loss"] for r in full[:5]) / 5
    last = sum(r["loss"] for r in full[-5:]) / 5
    print(f"example ({BACKEND}): loss {first:.4f} (steps 1-5) -> {last:.4f} (steps 36-40)")
    assert last < 0.75 * first, (first, last)  # falls by a quarter in 40 steps
