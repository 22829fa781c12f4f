"""examples/train_unet.py and examples/predict.py on 2 ranks (mpirun -n 2
... pytest): DDP with gloo on the CPU, or with NCCL on 2 GPUs when
SLABFEED_TEST_BACKEND=nccl. The loss falls; a run stopped and resumed from
its checkpoints (mid-epoch, then at an epoch boundary) sees the same batches
and computes the same losses as one that never stopped; the validation loss
over the held-out band is printed beside the training loss and is finite.
predict.py writes the band (and the whole box, under a pass symmetry) with
slabfeed.Writer: the files have the region's shape and the printed errors
and spectrum ratios are finite numbers. A super-resolution pair
(--scale-factor 2) trains with the U-Net's scale head, and predict.py writes
its fine grid, the values those of the model applied to the input."""
from __future__ import annotations

import importlib.util
import math
import os
import re
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


def load_example(name: str):
    spec = importlib.util.spec_from_file_location(name, SOURCE / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def example():
    return load_example("train_unet")


@pytest.fixture(scope="module")
def predict():
    return load_example("predict")


def device_args():
    if BACKEND == "nccl":
        return ["--device", "cuda", "--backend", "nccl", "--deterministic"]
    return ["--device", "cpu", "--backend", "gloo"]


NUMBER = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)"


@pytest.fixture(scope="module")
def field_volume(workdir):
    path = os.path.join(workdir, "field32.h5")
    slabfeed.tools.generate(COMM, path, shape=32, content="field", seed=1)
    return path


def test_train_resume_exact(example, workdir, field_volume, capsys):
    """32^3 box, the last 4 planes held out, crops 16^3, batch 2 x 2 ranks:
    2 steps per epoch; the validation pass over the band every 10 steps
    (tile 4, pad 4: 64 tiles) and at the end of every run."""
    common = ["--file", field_volume, "--crop", "16", "--batch", "2", "--base", "8",
              "--depth", "1", "--lr", "3e-3", "--log-every", "1", "--norm-batches", "2",
              "--threads", "1", "--val-every", "10"] + device_args()
    ck1, ck2 = os.path.join(workdir, "ck1.pt"), os.path.join(workdir, "ck2.pt")
    full = example.main(common + ["--steps", "40"])
    printed = capsys.readouterr().out
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
    # The validation loss: at steps 10, 20, 30, 40, printed beside the loss.
    val = {r["step"]: r["val_loss"] for r in full if "val_loss" in r}
    assert sorted(val) == [10, 20, 30, 40] and all(math.isfinite(v) for v in val.values())
    lines = re.findall(rf"^step +(\d+) epoch \d+ loss ({NUMBER}) val_loss ({NUMBER}) ",
                       printed, re.M)
    assert [int(st) for st, _, _ in lines] == [10, 20, 30, 40], printed
    assert all(math.isfinite(float(v)) for _, _, v in lines)
    assert "held out: z,y,x [28, 0, 0] extent [4, 0, 0]" in printed
    print(f"example ({BACKEND}): val_loss {val[10]:.4f} (step 10) -> {val[40]:.4f} (step 40)")
    assert all("val_loss" in r for r in (part1[-1], part2[-1], part3[-1]))


def test_predict(example, predict, workdir, field_volume, capsys):
    """A few training steps, then predict.py: the band (the default) and the
    whole box under a pass symmetry, written with slabfeed.Writer; the
    files' datasets have the region's shape, and every number printed (per
    channel RMSE and relative RMSE, the spectrum ratios) is finite."""
    ck = os.path.join(workdir, "predict-ck.pt")
    example.main(["--file", field_volume, "--crop", "16", "--batch", "2", "--base", "8",
                  "--depth", "1", "--steps", "6", "--log-every", "3", "--norm-batches", "2",
                  "--threads", "1", "--ckpt", ck] + device_args())
    capsys.readouterr()
    dev = device_args()[:2]
    cases = [(["--out", os.path.join(workdir, "band.h5")], (5, 4, 32, 32), "cf"),
             (["--out", os.path.join(workdir, "whole.h5"), "--region", "whole",
               "--pass-symmetry", "29", "--layout", "cl", "--out-dtype", "f16",
               "--spectrum-channel", "4", "--tile", "8", "--pad", "4"], (32, 32, 32, 5), "cl")]
    for extra, shape, layout in cases:
        out = extra[1]
        r = predict.main(["--ckpt", ck, "--threads", "1"] + dev + extra)
        printed = capsys.readouterr().out
        info = slabfeed.tools.describe(out, "prediction", layout)
        assert tuple(info["dims"]) == shape and info["channels"] == 5
        if COMM.rank != 0:
            assert r == {}
            continue
        assert tuple(r["shape"]) == shape and r["out"] == out
        c = r["compare"]
        assert len(c["rmse"]) == len(c["rel"]) == 5 and len(c["spectrum"]) > 3
        numbers = [*c["rmse"], *c["rel"], *(x for b in c["spectrum"] for x in b[:2])]
        assert all(math.isfinite(v) for v in numbers), c
        table = re.findall(rf"^  (\d):\w+ +({NUMBER}) +({NUMBER})$", printed, re.M)
        assert [int(k) for k, _, _ in table] == list(range(5)), printed
        ratios = re.findall(rf"^ +({NUMBER}) +({NUMBER}) +(\d+)$", printed, re.M)
        assert len(ratios) == len(c["spectrum"]), printed
        assert all(math.isfinite(float(x)) for row in table + ratios for x in row[1:3])
        print(f"predict ({BACKEND}) {shape}: relative RMSE "
              + ", ".join(f"{q:.3f}" for q in c["rel"]))
    # --picture: the comparison drawn (rank 0) into a PNG that decodes to
    # the figure's size, its truth panel not blank.
    mpimg = pytest.importorskip("matplotlib.image")
    png = os.path.join(workdir, "band.png")
    if COMM.rank == 0 and os.path.exists(png):
        os.unlink(png)
    COMM.Barrier()
    predict.main(["--ckpt", ck, "--threads", "1", "--out", os.path.join(workdir, "band.h5"),
                  "--overwrite", "--picture", png] + dev)
    if COMM.rank == 0:
        img = mpimg.imread(png)
        assert img.shape[:2] == (450, 1800), img.shape
        assert img[:, 450:900, :3].std() > 0.05  # the truth panel has structure
        assert "drew the prediction beside the truth in" in capsys.readouterr().out


def test_suite_holdout_volumes(example, workdir, capsys):
    """A suite of three boxes given as a pattern, the last held out: the
    training loss falls, and the validation loss is over the held-out box
    (a tiled pass over it), finite."""
    for i in range(3):
        slabfeed.tools.generate(COMM, os.path.join(workdir, f"suite{i}.h5"),
                                shape=(24, 16, 16), content="field", seed=10 + i)
    recs = example.main(["--file", os.path.join(workdir, "suite*.h5"),
                         "--holdout-volumes", "2", "--crop", "8", "--batch", "2",
                         "--base", "4", "--depth", "1", "--steps", "6",
                         "--log-every", "3", "--val-every", "3", "--norm-batches", "2",
                         "--threads", "1"] + device_args())
    out = capsys.readouterr().out
    if COMM.rank == 0:
        assert "dataset: 3 volumes; held out: 2" in out, out
        assert "validation: 1 held-out volume(s)" in out, out
        assert len(recs) == 2 and all(math.isfinite(r["val_loss"]) for r in recs)


def _generate_pair(path: str, shape: int, factor: int, seed: int) -> None:
    """A super-resolution pair (the target `factor` x finer), written by
    rank 0: tools.generate(scale_factor=) where the module has it, else
    slabfeed-gen --scale-factor (the build's app, one process outside this
    job: none of its launcher's variables)."""
    try:
        slabfeed.tools.generate(COMM, path, shape=shape, content="field", seed=seed,
                                scale_factor=factor)
        return
    except TypeError:  # no scale_factor keyword in this build's tools.generate
        pass
    err = None
    if COMM.rank == 0:
        import subprocess
        apps = Path(os.environ.get("SLABFEED_APPS_TEST_DIR", SOURCE / "build" / "tests"))
        gen = apps.parent / "apps" / "slabfeed-gen"
        env = {k: v for k, v in os.environ.items()
               if not re.match(r"(OMPI_|PMIX_|PMI_)", k) or k.startswith("OMPI_ALLOW")}
        r = subprocess.run([str(gen), "--file", path, "--shape", str(shape), "--content",
                            "field", "--seed", str(seed), "--scale-factor", str(factor),
                            "--quiet"], env=env, capture_output=True, text=True, timeout=120)
        err = None if r.returncode == 0 else f"{gen}: exit {r.returncode}\n{r.stdout}{r.stderr}"
    err = COMM.bcast(err, root=0)
    assert err is None, err


def test_super_resolution(example, predict, workdir, capsys):
    """--scale-factor 2 on a generated pair (input 16^3, target 32^3): the
    U-Net with its scale head trains a few steps (finite losses, the
    validation over the band on the fine grid), the checkpoint keeps the
    factor, and predict.py writes the whole box on the fine grid (5 x 32^3,
    the writer like the target); the written values are the model applied
    to the input: two tiles recomputed on rank 0 from the reference
    reader's padded input crops, against the file's fine tiles."""
    f, n = 2, 16
    pair = os.path.join(workdir, "pair16x2.h5")
    _generate_pair(pair, n, f, seed=5)
    ck = os.path.join(workdir, "sr-ck.pt")
    recs = example.main(["--file", pair, "--scale-factor", str(f), "--crop", "8",
                         "--batch", "2", "--base", "4", "--depth", "1", "--steps", "4",
                         "--log-every", "2", "--norm-batches", "1", "--threads", "1",
                         "--ckpt", ck] + device_args())
    printed = capsys.readouterr().out
    if COMM.rank == 0:
        assert "target 16^3 (x2 super-resolution)" in printed, printed
        assert [r["step"] for r in recs] == [2, 4], recs
        assert all(math.isfinite(r["loss"]) for r in recs)
        assert math.isfinite(recs[-1]["val_loss"]), recs
    out = os.path.join(workdir, "sr-whole.h5")
    T, P = 4, 2
    r = predict.main(["--ckpt", ck, "--out", out, "--region", "whole", "--tile", str(T),
                      "--pad", str(P), "--threads", "1", "--no-amp"] + device_args()[:2])
    capsys.readouterr()
    info = slabfeed.tools.describe(out, "prediction", "cf")
    assert tuple(info["dims"]) == (5, f * n, f * n, f * n), info
    if COMM.rank != 0:
        return
    assert tuple(r["shape"]) == (5, f * n, f * n, f * n)
    assert all(math.isfinite(v) for v in r["compare"]["rmse"])
    import numpy as np

    ckpt = torch.load(ck, map_location="cpu")
    assert ckpt["args"]["scale_factor"] == f
    model = example.UNet3d(4, 5, ckpt["args"]["base"], ckpt["args"]["depth"], f)
    model.load_state_dict(ckpt["model"])
    model.eval()
    norm = {k: torch.tensor(v).view(1, -1, 1, 1, 1) for k, v in ckpt["norm"].items()}
    worst = 0.0
    with slabfeed.tools.Reader(pair) as rd, slabfeed.tools.Reader(out) as wr:
        for tile in ((4, 8, 4), (8, 4, 8)):  # tile origins (coarse), crops inside the box
            x = rd.crop("Nbody", tuple(t - P for t in tile), T + 2 * P)
            with torch.no_grad():
                y = model(example.normalise(torch.from_numpy(x.copy())[None],
                                            norm["input_mean"], norm["input_std"]))
            y = (y * norm["target_std"] + norm["target_mean"])[0].numpy()
            c = f * P
            want = y[:, c:c + f * T, c:c + f * T, c:c + f * T]
            got = wr.crop("prediction", tuple(f * t for t in tile), f * T, layout="cf")
            assert got.shape == want.shape == (5, f * T, f * T, f * T)
            # CPU: float32 both ways; GPU: bf16 batches and TF32 convolutions.
            tol = 1e-4 if BACKEND == "gloo" else 3e-2
            assert np.allclose(got, want, rtol=tol, atol=tol * np.abs(want).max()), \
                (tile, float(np.abs(got - want).max()))
            assert np.abs(want).max() > 0.1  # a field, not zeros
            worst = max(worst, float(np.abs(got - want).max()))
    print(f"example ({BACKEND}): x{f} super-resolution, prediction {r['shape']}, two "
          f"tiles recomputed: max |difference| {worst:.3g}")
