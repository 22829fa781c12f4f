"""slabfeed.pictures: the PNGs decoded (matplotlib.image.imread) and their
pixels checked against the data.

Exact images: matplotlib maps a value v to t = (v - vmin) / (vmax - vmin)
(Normalize), then to entry min(floor(256 t), 255) of the colormap's
256-entry table (below 0: the first entry, above 1: the last), converted
to bytes by truncation: (entry * 255).astype(uint8). The gray table holds
i / 255 in floating point, so 24 of its 256 entries come out as i - 1
(e.g. 33/255 * 255 = 32.99999...): the gray level of a pixel is the ideal
quantisation min(floor(256 t), 255) give or take one, and is exactly the
table's entry (checked too). The PNG holds 8-bit levels; imread returns
level / 255 as float32, so round(255 * pixel) is the level again.

Run on 1 rank (python.pictures); skipped where matplotlib is missing
(Debian: python3-matplotlib), except the checks that slabfeed does not need
it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Tuple

import numpy as np
import pytest

import slabfeed
from conftest import COMM


def _mpl() -> Any:
    return pytest.importorskip(
        "matplotlib",
        reason="matplotlib is not installed (Debian: apt-get install python3-matplotlib)")


def _levels(path: str) -> np.ndarray:
    """The PNG's 8-bit levels, (rows, columns, channels)."""
    import matplotlib.image as mimage

    img = mimage.imread(path)
    assert img.dtype == np.float32 and img.max() <= 1.0
    return np.rint(img * 255.0).astype(np.int64)


def _ideal(v: np.ndarray, vmin: float, vmax: float) -> np.ndarray:
    """The ideal 8-bit quantisation: min(floor(256 t), 255), t clipped to [0, 1]."""
    t = (np.asarray(v, dtype=np.float64) - vmin) / (vmax - vmin)
    return np.clip(np.floor(t * 256.0), 0, 255).astype(np.int64)


def _gray_table() -> np.ndarray:
    """matplotlib's gray colormap as bytes (what imsave writes for entry i)."""
    import matplotlib

    cm = matplotlib.colormaps["gray"]
    return (cm(np.arange(256)) * 255).astype(np.uint8)[:, 0].astype(np.int64)


def _workfile(name: str) -> str:
    d = os.environ.get("SLABFEED_TEST_DIR") or os.getcwd()
    return os.path.join(d, name)


def _pythonpath_env() -> dict:
    env = dict(os.environ)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(slabfeed.__file__)))
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    return env


# ---- slabfeed without matplotlib -------------------------------------------------------

def test_import_slabfeed_does_not_import_matplotlib() -> None:
    code = ("import sys; import slabfeed, slabfeed.pictures; "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], env=_pythonpath_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_missing_matplotlib_names_the_package() -> None:
    # A None entry in sys.modules makes the import fail as if missing.
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "import numpy as np; from slabfeed import pictures\n"
            "try:\n    pictures.save_slice('never.png', np.zeros((2, 2, 2)))\n"
            "except ImportError as e:\n    print(e)\nelse:\n    print('no error')\n")
    r = subprocess.run([sys.executable, "-c", code], env=_pythonpath_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "python3-matplotlib" in r.stdout and "matplotlib" in r.stdout, r.stdout
    assert not os.path.exists("never.png")


# ---- exact images -----------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, 2])
def test_exact_gray_levels(tmp_path: Any, axis: int) -> None:
    _mpl()
    from slabfeed import pictures

    rng = np.random.default_rng(7 + axis)
    a = rng.uniform(-3.0, 5.0, size=(3, 11, 13, 17)).astype(np.float32)
    vmin, vmax = -2.0, 4.0  # narrower than the data: both clips are exercised
    p = str(tmp_path / f"exact{axis}.png")
    info = pictures.save_slice(p, a, axis=axis, index=4, channel=2, vmin=vmin, vmax=vmax,
                               exact=True)
    want = np.take(a[2], 4, axis=axis).astype(np.float64)
    lev = _levels(p)
    assert lev.shape[:2] == want.shape, (lev.shape, want.shape)
    assert info["size"] == (want.shape[1], want.shape[0])
    np.testing.assert_array_equal(info["slice"], want)
    gray = lev[..., 0]
    np.testing.assert_array_equal(gray, lev[..., 1])
    np.testing.assert_array_equal(gray, lev[..., 2])
    assert (lev[..., 3] == 255).all()  # opaque: no NaN
    ideal = _ideal(want, vmin, vmax)
    assert np.abs(gray - ideal).max() <= 1
    # ... and exactly the table's entry of the ideal index.
    np.testing.assert_array_equal(gray, _gray_table()[ideal])
    assert (gray[want <= vmin] == 0).all() and (gray[want >= vmax] == 255).all()
    assert (want < vmin).any() and (want > vmax).any()


def test_exact_default_range_and_blocks(tmp_path: Any) -> None:
    _mpl()
    from slabfeed import pictures

    rng = np.random.default_rng(3)
    a = rng.normal(size=(9, 10, 12))
    p1 = str(tmp_path / "one.png")
    p3 = str(tmp_path / "three.png")
    info = pictures.save_slice(p1, a, axis="y", exact=True)  # middle plane y = 5
    s = a[:, 5, :]
    assert info["index"] == 5 and info["rows"] == "z" and info["cols"] == "x"
    assert (info["vmin"], info["vmax"]) == (s.min(), s.max())
    g1 = _levels(p1)[..., 0]
    assert np.abs(g1 - _ideal(s, s.min(), s.max())).max() <= 1
    assert g1.min() == 0 and g1.max() == 255
    pictures.save_slice(p3, a, axis="y", exact=True, scale=3)
    g3 = _levels(p3)[..., 0]
    assert g3.shape == (3 * s.shape[0], 3 * s.shape[1])
    np.testing.assert_array_equal(g3, np.repeat(np.repeat(g1, 3, axis=0), 3, axis=1))


@pytest.mark.parametrize("axis,index,cell", [(0, 1, (2, 5)), (1, 2, (1, 5)), (2, 5, (1, 2))])
def test_exact_orientation(tmp_path: Any, axis: int, index: int, cell: Tuple[int, int]) -> None:
    """One bright cell at (z, y, x) = (1, 2, 5) of a 4 x 6 x 8 box: the
    slice across z has rows y and columns x, across y rows z and columns
    x, across x rows z and columns y; row 0 at the top."""
    _mpl()
    from slabfeed import pictures

    a = np.zeros((4, 6, 8), dtype=np.float32)
    a[1, 2, 5] = 1.0
    p = str(tmp_path / f"orient{axis}.png")
    pictures.save_slice(p, a, axis=axis, index=index, vmin=0.0, vmax=1.0, exact=True, scale=2)
    gray = _levels(p)[..., 0]
    shape = [s for k, s in enumerate(a.shape) if k != axis]
    assert gray.shape == (2 * shape[0], 2 * shape[1])
    bright = np.argwhere(gray == 255)
    r, c = cell
    assert sorted(map(tuple, bright)) == [(2 * r, 2 * c), (2 * r, 2 * c + 1),
                                          (2 * r + 1, 2 * c), (2 * r + 1, 2 * c + 1)]
    assert (np.delete(gray.ravel(), [i * gray.shape[1] + j for i, j in bright]) == 0).all()


def test_exact_channels_last_and_torch(tmp_path: Any) -> None:
    _mpl()
    from slabfeed import pictures

    rng = np.random.default_rng(5)
    cf = rng.uniform(size=(2, 5, 6, 7))
    p1, p2 = str(tmp_path / "cf.png"), str(tmp_path / "cl.png")
    pictures.save_slice(p1, cf, axis=2, index=3, channel=1, vmin=0, vmax=1, exact=True)
    pictures.save_slice(p2, np.moveaxis(cf, 0, -1), axis=2, index=3, channel=1, vmin=0,
                        vmax=1, exact=True, channels_last=True)
    np.testing.assert_array_equal(_levels(p1), _levels(p2))
    torch = pytest.importorskip("torch")
    p3 = str(tmp_path / "torch.png")
    pictures.save_slice(p3, torch.from_numpy(cf), axis=2, index=3, channel=1, vmin=0, vmax=1,
                        exact=True)
    np.testing.assert_array_equal(_levels(p1), _levels(p3))


def test_slice_figure_decodes(tmp_path: Any) -> None:
    _mpl()
    from slabfeed import pictures

    a = np.arange(4 * 8 * 16, dtype=np.float32).reshape(4, 8, 16)
    p = str(tmp_path / "fig.png")
    info = pictures.save_slice(p, a, axis=0, index=2, title="a slice")
    lev = _levels(p)
    assert lev.shape[1::-1] == info["size"]
    assert info["size"][0] > 16 and info["size"][1] > 8
    assert len(np.unique(lev.reshape(-1, lev.shape[-1]), axis=0)) > 16  # not blank


def test_bad_arguments() -> None:
    _mpl()
    from slabfeed import pictures

    with pytest.raises(ValueError, match="save_crops"):
        pictures.take_slice(np.zeros((2, 1, 4, 4, 4)))
    with pytest.raises(ValueError, match="axis"):
        pictures.take_slice(np.zeros((4, 4, 4)), axis="w")
    with pytest.raises(IndexError):
        pictures.take_slice(np.zeros((4, 4, 4)), index=4)
    with pytest.raises(ValueError, match="shape"):
        pictures.spectrum_ratio(np.zeros((4, 4, 4)), np.zeros((4, 4, 5)))


# ---- power spectra and the comparison ------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 2])
def test_power_spectrum_plane_wave(axis: int) -> None:
    """cos(2 pi 3 x / n): all the power in the shell k = 3 k_f, and the
    shells' power times their modes adds up to sum f^2 (Parseval: the
    rfft's half spectrum is weighted right along the halved axis (2) and
    the others (0))."""
    from slabfeed import pictures

    n = 16
    i = np.arange(n)
    wave = np.cos(2 * np.pi * 3 * i / n)
    shape = [1, 1, 1]
    shape[axis] = n
    f = np.broadcast_to(wave.reshape(shape), (n, n, n)).copy() + 2.0  # + a mean
    k, p, modes = pictures.power_spectrum(f)
    assert len(k) == n // 2
    np.testing.assert_allclose(k[2], 3.0, rtol=0.05)
    np.testing.assert_allclose(modes[2] * p[2], (f.size / 2.0), rtol=1e-12)
    assert np.all(np.abs(np.delete(p, 2)) < 1e-20 * f.size)
    # The modes of a full 16^3 transform, shells 1..8.
    kf = np.fft.fftfreq(n) * n
    kk = np.sqrt(kf[:, None, None] ** 2 + kf[None, :, None] ** 2 + kf[None, None, :] ** 2)
    sh = np.rint(kk).astype(int)
    np.testing.assert_array_equal(modes, [np.count_nonzero(sh == s) for s in range(1, 9)])
    kb, _, _ = pictures.power_spectrum(f, box_size=100.0)
    np.testing.assert_allclose(kb, k * 2 * np.pi / 100.0)


def _field(seed: int = 11, shape: Tuple[int, ...] = (2, 24, 24, 24)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    f = rng.normal(size=shape)
    # some large-scale structure: a running sum along z, made periodic
    return f + np.roll(f, 1, axis=-1) + np.roll(f, 1, axis=-2)


def _panel(lev: np.ndarray, box: Tuple[int, int, int, int], inset: int = 4) -> np.ndarray:
    x0, y0, x1, y1 = box
    return lev[y0 + inset:y1 - inset, x0 + inset:x1 - inset, :3]


def test_comparison_identical(tmp_path: Any) -> None:
    _mpl()
    import matplotlib

    from slabfeed import pictures

    t = _field()
    p = str(tmp_path / "same.png")
    info = pictures.save_comparison(p, t.copy(), t, channel=1, axis=1)
    lev = _levels(p)
    assert lev.shape[1::-1] == info["size"] == (1800, 450)
    np.testing.assert_allclose(info["ratio"], 1.0, rtol=1e-12)
    assert info["diff_max"] == 0.0
    d = _panel(lev, info["panels"]["difference"])
    assert d.size and (d == d[0, 0]).all(), "the difference of identical inputs is not uniform"
    zero = (np.array(matplotlib.colormaps["RdBu_r"](0.5)[:3]) * 255)
    assert np.abs(d[0, 0] - zero).max() <= 1, (d[0, 0], zero)
    pred = _panel(lev, info["panels"]["prediction"])
    assert len(np.unique(pred.reshape(-1, 3), axis=0)) > 16  # the field is drawn


def test_comparison_shifted_and_doubled(tmp_path: Any) -> None:
    _mpl()
    from slabfeed import pictures

    t = _field()
    p = str(tmp_path / "shift.png")
    # A periodic shift changes every mode's phase, none's power: ratio 1.
    info = pictures.save_comparison(p, np.roll(t, 2, axis=3), t, channel=0)
    np.testing.assert_allclose(info["ratio"], 1.0, rtol=1e-10)
    assert info["diff_max"] > 0
    d = _panel(_levels(p), info["panels"]["difference"])
    assert len(np.unique(d.reshape(-1, 3), axis=0)) > 8, \
        "a shifted prediction's difference is uniform"
    # Twice the truth: 4 times the power in every shell.
    q = str(tmp_path / "double.png")
    info = pictures.save_comparison(q, 2.0 * t, t)
    assert len(info["k"]) == 12 and np.all(np.diff(info["k"]) > 0)
    np.testing.assert_allclose(info["ratio"], 4.0, rtol=1e-12)
    k, r = pictures.spectrum_ratio(2.0 * t[0], t[0])
    np.testing.assert_allclose(k, info["k"])
    np.testing.assert_allclose(r, 4.0, rtol=1e-12)


# ---- batches --------------------------------------------------------------------------------

def test_crops_of_a_batch(tmp_path: Any, index_volume: str) -> None:
    _mpl()
    from slabfeed import pictures

    with slabfeed.Loader(COMM, path=index_volume, input="Nbody", target="Hydro", crop=8,
                         batch=3, seed=5) as loader:
        b = loader.next()
        p = str(tmp_path / "crops.png")
        info = pictures.save_crops(p, b, channel=1, axis="x")
        assert info["crops"] == 3
        for i in range(3):
            text = info["titles"][2 * i]
            o = ", ".join(str(v) for v in b.origin[i])
            assert f"origin ({o})" in text and f"sym {b.symmetry[i]}" in text, text
            assert f"vol {b.volume[i]}" in text and f"sample {b.sample[i]}" in text, text
            assert "target" in info["titles"][2 * i + 1]
        lev = _levels(p)
        assert lev.shape[1::-1] == info["size"]
        # The inputs' color scale is the range of the slices drawn.
        x = pictures.to_numpy(b.input)
        drawn = x[:, 1, :, :, 4]
        assert (info["vmin"], info["vmax"]) == (drawn.min(), drawn.max())
        # An array with its metadata as a dict, without the target.
        q = str(tmp_path / "arrays.png")
        info2 = pictures.save_crops(q, x, meta={"origin": b.origin, "symmetry": b.symmetry},
                                    max_crops=2)
        assert info2["crops"] == 2 and len(info2["titles"]) == 2
        assert f"sym {b.symmetry[1]}" in info2["titles"][1]
        assert _levels(q).shape[1::-1] == info2["size"]


# ---- the command line ---------------------------------------------------------------------

def _fmix64(h: np.ndarray) -> np.ndarray:
    h = h.copy()
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xff51afd7ed558ccd)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xc4ceb9fe1a85ec53)
    h ^= h >> np.uint64(33)
    return h


def _index_values(dataset: int, c: int, shape: Tuple[int, int, int]) -> np.ndarray:
    """slabfeed_index_value over a box, in numpy (include/slabfeed_tools.h)."""
    z, y, x = np.meshgrid(*[np.arange(n, dtype=np.uint64) for n in shape], indexing="ij")
    key = (np.uint64(dataset * 64 + c) << np.uint64(48)) ^ (z << np.uint64(32)) \
        ^ (y << np.uint64(16)) ^ x
    return (_fmix64(key) % np.uint64(2048)).astype(np.int64) - 1024


@pytest.fixture(scope="module")
def cli_volume(workdir: str) -> str:
    path = os.path.join(workdir, "pictures-cli.h5")
    slabfeed.tools.generate(COMM, path, shape=(6, 10, 14), content="index", input_channels=2,
                            target_channels=3, layout="cl", overwrite=True)
    return path


@pytest.mark.parametrize("axis,index", [("z", 4), ("y", 7), ("x", 13)])
def test_cli_slice_exact(tmp_path: Any, cli_volume: str, axis: str, index: int) -> None:
    _mpl()
    out = str(tmp_path / f"cli-{axis}.png")
    r = subprocess.run([sys.executable, "-m", "slabfeed.pictures", "slice", cli_volume,
                        "--dataset", "Hydro", "--channel", "2", "--axis", axis, "--index",
                        str(index), "--exact", "--vmin", "-1024", "--vmax", "1023", "--out", out],
                       env=_pythonpath_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert out in r.stdout
    want = np.take(_index_values(1, 2, (6, 10, 14)), index, axis="zyx".index(axis))
    gray = _levels(out)[..., 0]
    assert gray.shape == want.shape
    ideal = _ideal(want, -1024.0, 1023.0)
    assert np.abs(gray - ideal).max() <= 1
    np.testing.assert_array_equal(gray, _gray_table()[ideal])
    # The same slice through read_slice, in this process.
    from slabfeed import pictures

    s, where = pictures.read_slice(cli_volume, "Hydro", axis=axis, index=index, channel=2)
    np.testing.assert_array_equal(s, want)
    assert where["shape"] == (6, 10, 14) and where["channels"] == 3


def test_cli_slice_figure_and_errors(tmp_path: Any, cli_volume: str) -> None:
    _mpl()
    out = str(tmp_path / "cli-fig.png")
    r = subprocess.run([sys.executable, "-m", "slabfeed.pictures", "slice", cli_volume,
                        "--dataset", "Nbody", "--out", out],
                       env=_pythonpath_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _levels(out).shape[0] > 100
    r = subprocess.run([sys.executable, "-m", "slabfeed.pictures", "slice", cli_volume,
                        "--dataset", "Nbody", "--index", "99", "--out", out],
                       env=_pythonpath_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "index 99" in r.stderr, r.stderr


def test_cli_crops(tmp_path: Any, cli_volume: str, capsys: Any) -> None:
    """`crops` in this process (its Loader on this job's COMM_WORLD: a
    subprocess would be an MPI process of its own inside this job)."""
    _mpl()
    from slabfeed import pictures

    out = str(tmp_path / "cli-crops.png")
    rc = pictures.main(["crops", cli_volume, "--input", "Nbody", "--target", "Hydro",
                        "--crop", "6", "--batch", "2", "--seed", "3", "--step", "1",
                        "--out", out])
    assert rc == 0
    text = capsys.readouterr().out
    assert "2 crops of epoch 0 step 1" in text and "origin (" in text and "sym " in text
    assert _levels(out).shape[0] > 100
