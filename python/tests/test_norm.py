"""Per-channel normalisation from Python: the input_norm / target_norm
keywords (sequences of (shift, scale) or ("log", a, shift, scale), or the
text form) give batches equal to numpy's float32 (x - shift) / scale of
the reference reader's crops, bit for bit, and numpy's log within a few
ulp; Loader.options holds the float32 values; a wrong entry count is
refused on every rank alike. slabfeed.tools.field_stats equals numpy's
statistics of the whole dataset, and a normalisation made from it gives a
pass over the box of mean 0 and standard deviation 1 per channel."""
from __future__ import annotations

import numpy as np
import pytest

import slabfeed
from conftest import COMM, tensor_bits
from slabfeed.tools import Reader, field_stats

N = 24  # index_volume is 24^3

F = np.float32
IN_NORM = [("log", 1000.0, 6.5, 0.75), (0.0, 2.5), (0.0, 2.5), (0.0, 2.5)]
TG_NORM = [(7.0, 0.3), (0.0, -2.0), (0.0, -2.0), (0.0, -2.0), (-3.25, 1.5)]


def apply(x: np.ndarray, norm, channel_axis: int) -> np.ndarray:
    """numpy's float32 normalisation of each channel of x (C first or last)."""
    out = np.empty_like(x)
    for c, n in enumerate(norm):
        sl = [slice(None)] * x.ndim
        sl[channel_axis] = c
        v = x[tuple(sl)]
        if n[0] == "log":
            with np.errstate(invalid="ignore", divide="ignore"):
                f = np.log(v + F(n[1]), dtype=F)
            shift, scale = n[2], n[3]
        else:
            f, (shift, scale) = v, n
        out[tuple(sl)] = (f - F(shift)) / F(scale)
    return out


def log_error(got: np.ndarray, want: np.ndarray, x: np.ndarray, n) -> np.ndarray:
    """|got - want| of a log channel against its tolerance: 2 ulp of
    log(x + a) each (the library's log and numpy's) through the shift and
    scale, and an ulp of the result each for the last rounding. 0 where
    both are NaN or equal."""
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.abs(np.log(x + F(n[1]), dtype=F))
        tol = 4.0 * np.spacing(f).astype(np.float64) / abs(n[3]) + \
            2.0 * np.spacing(np.abs(want)).astype(np.float64)
        d = np.abs(got.astype(np.float64) - want.astype(np.float64)) / tol
    d[(np.isnan(got) & np.isnan(want)) | (got == want)] = 0
    return d


def test_keyword_batches_equal_numpy(index_volume):
    with slabfeed.Loader(COMM, path=index_volume, input="Nbody", target="Hydro",
                         crop=6, batch=3, seed=5, input_vectors=[(1, 2, 3)],
                         target_vectors=[(3, 1, 2)], input_norm=IN_NORM,
                         target_norm=TG_NORM, steps_per_epoch=6) as loader, \
            Reader(index_volume) as rd:
        assert loader.options["input_norm"] == tuple(
            tuple(float(F(v)) if not isinstance(v, str) else v for v in e) for e in IN_NORM)
        worst, logs, nans = 0.0, 0, 0
        for b in loader:
            for name, t, norm, vec in (("Nbody", b.input, IN_NORM, [(1, 2, 3)]),
                                       ("Hydro", b.target, TG_NORM, [(3, 1, 2)])):
                got = np.from_dlpack(t)
                for i, (o, g) in enumerate(zip(b.origin, b.symmetry)):
                    x = rd.crop(name, o, 6, symmetry=g, vectors=vec)
                    want = apply(x, norm, 0)
                    for c, n in enumerate(norm):
                        if n[0] == "log":  # numpy's log: a few ulp
                            d = log_error(got[i][c], want[c], x[c], n)
                            assert (np.isnan(got[i][c]) == np.isnan(want[c])).all()
                            worst = max(worst, float(d.max()))
                            logs += d.size
                            nans += int(np.isnan(want[c]).sum())
                        else:  # the identity: the same float32 arithmetic
                            assert np.array_equal(got[i][c].view(np.uint32),
                                                  want[c].view(np.uint32)), (name, c, o, g)
        assert worst <= 1.0, worst
        assert logs > 0 and COMM.allreduce(nans) > 0  # x + a < 0 gives NaN


def test_text_form_and_pass(index_volume):
    """A tiled pass (NDHWC, f16) with the text form: the identity
    normalisations' f16 bits are numpy's float32 result rounded to f16."""
    text = "1.5,0.25;0,-4;0,-4;0,-4"
    with slabfeed.Loader(COMM, path=index_volume, input="Nbody", batch=2,
                         tile=8, pad=2, pass_symmetry=13, dtype="f16",
                         out_layout="ndhwc", input_vectors=[(1, 2, 3)],
                         input_norm=text) as loader, Reader(index_volume) as rd:
        norm = [(1.5, 0.25), (0.0, -4.0), (0.0, -4.0), (0.0, -4.0)]
        assert loader.options["input_norm"] == tuple(norm)
        n = 0
        for b in loader:
            got = tensor_bits(b.input, "f16")
            for i in range(b.count):
                x = rd.crop("Nbody", b.origin[i], 12, symmetry=b.symmetry[i],
                            vectors=[(1, 2, 3)], out_layout="ndhwc")
                want = apply(x, norm, 3).astype(np.float16).view(np.uint16)
                assert np.array_equal(got[i], want)
                n += 1
        assert COMM.allreduce(n) == 27  # 3 x 3 x 3 tiles


def test_wrong_count_refused_everywhere(index_volume):
    with pytest.raises(slabfeed.ArgumentError) as e:
        slabfeed.Loader(COMM, path=index_volume, input="Nbody", crop=6,
                        input_norm=[(0, 1)] * 3)
    msg = str(e.value)
    assert "input_norm has 3 entries but input dataset 'Nbody' has 4 channels" in msg
    assert len(set(COMM.allgather(msg))) == 1


@pytest.fixture(scope="module")
def field_volume(workdir):
    path = f"{workdir}/field_norm.h5"
    slabfeed.tools.generate(COMM, path, shape=(N, N, N), content="field", seed=4)
    return path


def whole(path: str, name: str) -> np.ndarray:
    with Reader(path) as rd:
        return rd.crop(name, (0, 0, 0), N, symmetry=0, vectors=[]).astype(np.float64)


def test_field_stats_equal_numpy(field_volume):
    got = {}
    for name, a in (("Nbody", 1.0), ("Hydro", 0.5)):
        stats = got[name] = field_stats(field_volume, name, comm=COMM, log_a=a)
        x = whole(field_volume, name)
        assert len(stats) == x.shape[0]
        for c, s in enumerate(stats):
            v = x[c].ravel()
            assert s["count"] == v.size and s["nonfinite"] == 0
            assert s["mean"] == pytest.approx(v.mean(), rel=1e-12, abs=1e-12)
            assert s["std"] == pytest.approx(v.std(), rel=1e-12)
            assert (s["min"], s["max"]) == (v.min(), v.max())
            with np.errstate(invalid="ignore", divide="ignore"):
                lv = np.log(v + a)
            ok = np.isfinite(lv)
            assert s["log_count"] == int(ok.sum())
            if s["log_count"]:
                # the library takes float32 log(x + a): ~1e-7 relative
                assert s["log_mean"] == pytest.approx(lv[ok].mean(), rel=1e-6, abs=1e-6)
                assert s["log_std"] == pytest.approx(lv[ok].std(), rel=1e-5, abs=1e-6)
        assert COMM.allgather(stats) == [stats] * COMM.size  # the same everywhere
    plain = field_stats(field_volume, "Nbody")  # no log_a: no log fields
    assert all(p["log_mean"] is None and p["log_count"] is None for p in plain)
    assert [p["mean"] for p in plain] == [s["mean"] for s in got["Nbody"]]
    with pytest.raises(slabfeed.FormatError, match="no dataset 'Bogus'"):
        field_stats(field_volume, "Bogus")


def test_stats_make_a_unit_normalisation(field_volume):
    """Normalised by its own statistics (channel 0 as a log), a pass over
    the whole box has mean 0 and standard deviation 1 in every channel."""
    st = field_stats(field_volume, "Nbody", log_a=0.0)
    assert st[0]["log_count"] == st[0]["count"]  # density > 0
    norm = [("log", 0.0, st[0]["log_mean"], st[0]["log_std"])] + \
        [(s["mean"], s["std"]) for s in st[1:]]
    T = 12
    acc = np.zeros((4, 3))
    with slabfeed.Loader(COMM, path=field_volume, input="Nbody", tile=T,
                         batch=1, input_norm=norm) as loader:
        for b in loader:
            for i in range(b.count):
                v = np.from_dlpack(b.input)[i].reshape(4, -1).astype(np.float64)
                acc += np.stack([np.ones(4) * v.shape[1], v.sum(1), (v * v).sum(1)], 1)
    acc = COMM.allreduce(acc)
    mean = acc[:, 1] / acc[:, 0]
    var = acc[:, 2] / acc[:, 0] - mean ** 2
    assert acc[0, 0] == N ** 3
    assert np.allclose(mean, 0, atol=1e-5) and np.allclose(var, 1, atol=1e-4), (mean, var)
