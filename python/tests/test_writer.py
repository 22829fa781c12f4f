"""slabfeed.Writer: the outputs of a tiled pass written back as one HDF5
dataset, on 1-3 ranks. The identity "model" (the input crop itself, or its
centre tile) through a pass over the whole box and over a held-out band
gives back the input bit for bit (read with the serial reference reader,
without h5py), also under a non-identity pass symmetry with vector
channels (the writer undoes both); NDHWC outputs, channels_last tensors,
f16/bf16 outputs, a channels-last f16 file; a transform (2x + 1 on one
channel) compared with numpy; and the refusals (shape, dtype, stale batch,
the input as output, an existing file, a missing directory, an incomplete
pass), each raised on every rank with no file left under the name."""
from __future__ import annotations

import ctypes
import faulthandler
import os
import sys

import numpy as np
import pytest
from conftest import COMM, VEC

import slabfeed
from slabfeed.tools import Reader

N = 24  # index_volume is 24^3: Nbody 4 channels, Hydro 5, velocity 1,2,3
R, P = COMM.rank, COMM.size
BAND = (21, 0, 0, 3, 0, 0)  # the last eighth of z
ODD = (20, 3, 0, 8, 17, 0)  # wraps in z; 17 rows: not a multiple of the tile


@pytest.fixture(autouse=True)
def no_hang():
    """A test stuck in a collective (one rank raised, the others wait)
    dumps its stack and fails the job instead of waiting for ctest."""
    faulthandler.dump_traceback_later(150, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def out_path(workdir: str, name: str) -> str:
    return os.path.join(workdir, name)


def region_box(region):
    z, y, x, dz, dy, dx = region
    return (z, y, x), (dz or N, dy or N, dx or N)


def read_region(path: str, dataset: str, region, layout: str = "auto") -> np.ndarray:
    """The region (periodic) as (C, dz, dy, dx) float32, straight from the
    file with the serial reference reader."""
    origin, ext = region_box(region)
    with Reader(path) as rd:
        return rd.crop(dataset, origin, ext, layout=layout)


def read_output(path: str, shape, layout: str = "cf", dataset: str = "prediction") -> np.ndarray:
    """The whole written dataset as (C, Z, Y, X) float32."""
    ext = shape[1:] if layout == "cf" else shape[:3]
    with Reader(path) as rd:
        return rd.crop(dataset, (0, 0, 0), tuple(ext), layout=layout)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def agreed(msg: str) -> bool:
    """Every rank has the same message (every rank raised)."""
    return len(set(COMM.allgather(msg))) == 1


def no_file(path: str) -> bool:
    """Nothing under the name, nor a partial file beside it."""
    COMM.Barrier()
    d, base = os.path.split(path)
    return not os.path.exists(path) and not any(
        n.startswith(base + ".slabfeed-partial") for n in os.listdir(d))


def loader(path: str, **kw) -> slabfeed.Loader:
    opts = dict(path=path, input="Nbody", target="Hydro", batch=2, tile=5, pad=2,
                input_vectors=VEC, target_vectors=VEC)
    opts.update(kw)
    return slabfeed.Loader(COMM, **opts)


def n_tiles(ext, T: int) -> int:
    return int(np.prod([-(-e // T) for e in ext]))


def run_pass(L, W, output, **put_kw) -> int:
    """Puts output(batch) for every batch of this rank's share of the pass;
    returns the number of real slots put."""
    n = 0
    for b in L:
        W.put(b, output(b), **put_kw)
        n += b.count
    return n


# ---- The identity, bit for bit --------------------------------------------------


@pytest.mark.parametrize("region,centre", [(None, False), (BAND, True), (ODD, False)],
                         ids=["whole-crop", "band-centre", "odd-crop"])
def test_identity_pass(index_volume, workdir, region, centre):
    """The input crops themselves (or their centre T^3), written back: the
    region of the input, bit for bit; every tile put once over all ranks."""
    T, Pd = (3, 2) if region == BAND else (5, 2)
    kw = {} if region is None else {"region": [region]}
    path = out_path(workdir, f"identity-{region is None}-{centre}.h5")
    with loader(index_volume, tile=T, pad=Pd, **kw) as L, \
            slabfeed.Writer(L, path, like="input") as W:
        want_shape = (4,) + region_box(region or (0, 0, 0, 0, 0, 0))[1]
        assert W.shape == want_shape and W.state == "open"
        z0, z1 = W.z_range
        ranges = COMM.allgather((z0, z1))
        assert ranges[0][0] == 0 and ranges[-1][1] == want_shape[1]
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        if centre:  # a strided (non-dense) view: host memory may be; a copy,
            # since numpy < 2 does not export the read-only arrays of from_dlpack
            out = lambda b: np.array(np.from_dlpack(b.input))[:, :, Pd:Pd + T, Pd:Pd + T,
                                                               Pd:Pd + T]
        else:
            out = lambda b: b.input  # the batch's own Tensor speaks DLPack
        put = run_pass(L, W, out)
        assert COMM.allreduce(put) == n_tiles(region_box(region or (0, 0, 0, 0, 0, 0))[1], T)
    assert W.closed and W.state == "closed"
    got = read_output(path, W.shape)
    want = read_region(index_volume, "Nbody", region or (0, 0, 0, 0, 0, 0))
    assert same_bits(got, want)


@pytest.mark.parametrize("g", [7, 29, 47])
def test_symmetry_is_undone(index_volume, workdir, g):
    """A pass with pass_symmetry g: the crops arrive rotated (velocity as a
    vector); written back with like='target' / 'input' they are the file's
    region again, bit for bit."""
    for like, ds, C in (("input", "Nbody", 4), ("target", "Hydro", 5)):
        path = out_path(workdir, f"sym{g}-{like}.h5")
        with loader(index_volume, region=[ODD], pass_symmetry=g) as L, \
                slabfeed.Writer(L, path, like=like) as W:
            assert W.shape == (C, 8, 17, N)
            seen = set()
            for b in L:
                assert set(b.symmetry) == {g}
                W.put(b, b.input if like == "input" else b.target)
                seen.update(b.sample[:b.count])
        assert set().union(*COMM.allgather(seen)) == set(range(n_tiles((8, 17, N), 5)))
        assert same_bits(read_output(path, W.shape), read_region(index_volume, ds, ODD))


def test_ndhwc_and_channels_last(index_volume, workdir):
    """NDHWC batches (layout='ndhwc'), torch channels_last_3d tensors of
    (B,C,D,H,W), f16 and bf16 outputs, into a channels-last f16 chunked
    file."""
    torch = pytest.importorskip("torch")
    from slabfeed.torch import TorchLoader

    truth = read_region(index_volume, "Nbody", BAND)
    cases = [("ndhwc", "f32"), ("channels_last", "f32"), ("channels_last", "f16"),
             ("channels_last", "bf16")]
    for form, dt in cases:
        path = out_path(workdir, f"cl-{form}-{dt}.h5")
        if form == "ndhwc":
            with loader(index_volume, tile=3, pad=2, region=[BAND], pass_symmetry=11,
                        out_layout="ndhwc") as L, \
                    slabfeed.Writer(L, path, like="input", layout="cl", dtype="f16",
                                    chunk=(3, 8, 8)) as W:
                assert W.shape == (3, N, N, 4)
                run_pass(L, W, lambda b: b.input, layout="ndhwc")
        else:
            tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dt]
            with TorchLoader(COMM, device="cpu", path=index_volume, input="Nbody",
                             target="Hydro", batch=2, tile=3, pad=2, region=[BAND],
                             pass_symmetry=11, input_vectors=VEC,
                             target_vectors=VEC) as L, \
                    slabfeed.Writer(L, path, like="input", layout="cl",
                                    dtype="f16") as W:
                for x, _, meta in L:
                    assert meta.count == L.batch.count and meta.tile == L.batch.tile
                    y = x.to(tdt).contiguous(memory_format=torch.channels_last_3d)
                    assert not y.is_contiguous()
                    W.put(L.batch, y)
        got = read_output(path, W.shape, layout="cl")
        want = truth
        if dt == "bf16":  # |index values| < 1024: exact in f16, rounded in bf16
            want = torch.from_numpy(truth.copy()).bfloat16().float().numpy()
        assert same_bits(got, want), (form, dt)


def test_transform_one_channel(index_volume, workdir):
    """output = 2 x + 1 of the density channel, one plain channel
    (like='none'), under a pass symmetry: numpy's 2 x + 1 of the region."""
    path = out_path(workdir, "affine.h5")
    with loader(index_volume, region=[ODD], pass_symmetry=37) as L, \
            slabfeed.Writer(L, path, channels=1, like="none") as W:
        assert W.shape == (1, 8, 17, N)
        run_pass(L, W, lambda b: 2 * np.from_dlpack(b.input)[:, :1] + 1)
    want = 2 * read_region(index_volume, "Nbody", ODD)[:1] + 1
    assert same_bits(read_output(path, W.shape), want)


def test_capsule_is_consumed(index_volume, workdir):
    """The producer's capsule is renamed 'used_dltensor' and its deleter
    called once put returns (numpy's export holds a reference to the array
    until then)."""
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]

    class Producer:
        def __init__(self, a):
            self.a, self.capsules = a, []

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

        def __dlpack__(self, **kw):
            cap = self.a.__dlpack__(**{k: v for k, v in kw.items() if k == "stream"})
            self.capsules.append(cap)
            return cap

    path = out_path(workdir, "capsule.h5")
    with loader(index_volume, region=[BAND], tile=3) as L, \
            slabfeed.Writer(L, path, like="input") as W:
        for b in L:
            a = np.array(np.from_dlpack(b.input))  # a copy: owned by `a` alone
            before = sys.getrefcount(a)
            p = Producer(a)
            W.put(b, p)
            assert [get_name(c) for c in p.capsules] == [b"used_dltensor"]
            del p
            assert sys.getrefcount(a) == before  # the deleter released it
    assert same_bits(read_output(path, W.shape), read_region(index_volume, "Nbody", BAND))


# ---- Refusals ----------------------------------------------------------------------


def expect_everywhere(cls, text, fn):
    """fn() raises cls with `text` in its message on every rank."""
    with pytest.raises(cls) as e:
        fn()
    msg = str(e.value)
    assert text in msg, msg
    COMM.allgather(msg)  # every rank got here
    return msg


def test_bad_puts(index_volume, workdir):
    """Wrong shape, dtype, dimension, type; a stale batch: each refused on
    every rank (a refused put stores nothing and may be retried); a pass
    with refusals and no retry leaves no file."""
    path = out_path(workdir, "bad.h5")
    with loader(index_volume, region=[BAND], tile=3) as L:
        with pytest.raises(slabfeed.StateError):
            with slabfeed.Writer(L, path, like="input") as W:
                b = L.next()
                x = np.array(np.from_dlpack(b.input))  # writable (numpy < 2 exports no other)
                expect_everywhere(slabfeed.ArgumentError, "shape", lambda: W.put(b, x[:, :3]))
                expect_everywhere(slabfeed.ArgumentError, "shape",
                                  lambda: W.put(b, x[:, :, :6, :6, :6]))
                expect_everywhere(slabfeed.ArgumentError, "dtype",
                                  lambda: W.put(b, x.astype(np.float64)))
                expect_everywhere(slabfeed.ArgumentError, "dtype",
                                  lambda: W.put(b, x.astype(np.int32)))
                expect_everywhere(slabfeed.ArgumentError, "5-D", lambda: W.put(b, x[0]))
                expect_everywhere(slabfeed.ArgumentError, "NDHWC",
                                  lambda: W.put(b, x, layout="ndhwc"))
                expect_everywhere(TypeError, "DLPack", lambda: W.put(b, x.tolist()))
                expect_everywhere(TypeError, "slabfeed.Batch", lambda: W.put(x, x))
                expect_everywhere(ValueError, "layout", lambda: W.put(b, x, layout="nchw"))
                W.put(b, x)  # the retry of a refused put is fine
                L.next()
                msg = expect_everywhere(slabfeed.StaleBatchError, "stale",
                                        lambda: W.put(b, x))
                assert isinstance(slabfeed.StaleBatchError("x"), slabfeed.StateError), msg
                # the pass is incomplete: the with block's close fails everywhere
        assert W.state == "failed"
        assert no_file(path)
        with slabfeed.Writer(L, path, like="input") as W:  # a random-crop batch
            with slabfeed.Loader(COMM, path=index_volume, input="Nbody", crop=5) as R2:
                rb = R2.next()
                expect_everywhere(slabfeed.ArgumentError, "tiled pass",
                                  lambda: W.put(rb, rb.input))
            W.abort()
        assert W.state == "aborted" and no_file(path)


def test_exception_in_with_aborts(index_volume, workdir):
    path = out_path(workdir, "aborted.h5")
    with loader(index_volume, region=[BAND], tile=3) as L:
        with pytest.raises(KeyError):
            with slabfeed.Writer(L, path, like="input") as W:
                run_pass(L, W, lambda b: b.input)  # complete, but
                raise KeyError("model failed")  # every rank: aborted
        assert W.state == "aborted" and no_file(path)
        with pytest.raises(slabfeed.StateError, match="aborted"):
            W.close()
        W.abort()  # a no-op


def test_one_rank_aborts(index_volume, workdir):
    """The last rank aborts while the others close: the close raises the
    agreed error on the others, nobody hangs, nothing is written."""
    path = out_path(workdir, "one-abort.h5")
    with loader(index_volume, region=[BAND], tile=3) as L:
        W = slabfeed.Writer(L, path, like="input")
        run_pass(L, W, lambda b: b.input)
        if R == P - 1:
            W.abort()
        else:
            with pytest.raises(slabfeed.StateError, match="aborted"):
                W.close()
        assert no_file(path)


def test_incomplete_pass(index_volume, workdir):
    path = out_path(workdir, "incomplete.h5")
    with loader(index_volume, region=[BAND], tile=3) as L:
        W = slabfeed.Writer(L, path, like="input")
        b = L.next()
        W.put(b, b.input)  # one batch of the pass only
        msg = expect_everywhere(slabfeed.StateError, "voxels", W.close)
        assert agreed(msg.split(":")[0])
        assert W.state == "failed" and no_file(path)


def test_bad_opens(index_volume, workdir):
    """Refused at open, the same error on every rank, no file left and an
    existing file untouched."""
    exists = out_path(workdir, "exists.h5")
    if R == 0:
        with open(exists, "w") as f:
            f.write("keep me\n")
    COMM.Barrier()
    before = open(index_volume, "rb").read(4096)
    with loader(index_volume, region=[BAND], tile=3) as L:
        for overwrite in (False, True):
            msg = expect_everywhere(slabfeed.ArgumentError, "input",
                                    lambda: slabfeed.Writer(L, index_volume, like="input",
                                                            overwrite=overwrite))
            assert agreed(msg)
        assert open(index_volume, "rb").read(4096) == before
        msg = expect_everywhere(slabfeed.FileIOError, "exists",
                                lambda: slabfeed.Writer(L, exists))
        assert agreed(msg) and open(exists).read() == "keep me\n"
        missing = out_path(workdir, os.path.join("no-such-dir", "out.h5"))
        msg = expect_everywhere(slabfeed.FileIOError, "no-such-dir",
                                lambda: slabfeed.Writer(L, missing))
        assert agreed(msg) and not os.path.exists(os.path.dirname(missing))
        # a channel count the target's vector groups cannot be undone on
        msg = expect_everywhere(slabfeed.ArgumentError, "channels",
                                lambda: slabfeed.Writer(L, out_path(workdir, "c.h5"), channels=3))
        assert agreed(msg) and no_file(out_path(workdir, "c.h5"))
        # refused by the extension on the last rank only: every rank raises
        bad = dict(dtype="bf16") if R == P - 1 else {}
        msg = expect_everywhere(ValueError, f"rank {P - 1}: ",
                                lambda: slabfeed.Writer(L, out_path(workdir, "d.h5"), **bad))
        assert agreed(msg) and "dtype" in msg
        bad = dict(chunk="8") if R == P - 1 else {}
        msg = expect_everywhere(TypeError, f"rank {P - 1}: ",
                                lambda: slabfeed.Writer(L, out_path(workdir, "d.h5"), **bad))
        assert agreed(msg)
        # overwrite replaces an existing file
        with slabfeed.Writer(L, exists, like="input", overwrite=True) as W:
            run_pass(L, W, lambda b: b.input)
        assert same_bits(read_output(exists, W.shape), read_region(index_volume, "Nbody", BAND))
    with slabfeed.Loader(COMM, path=index_volume, input="Nbody", crop=5) as L:
        expect_everywhere(slabfeed.ArgumentError, "tiled pass",
                          lambda: slabfeed.Writer(L, out_path(workdir, "e.h5")))
    with pytest.raises(TypeError, match="loader of a tiled pass"):
        slabfeed.Writer(object(), out_path(workdir, "e.h5"))
    # a closed loader: StateError on every rank
    L = loader(index_volume, region=[BAND], tile=3)
    L.close()
    expect_everywhere(slabfeed.StateError, "closed",
                      lambda: slabfeed.Writer(L, out_path(workdir, "f.h5")))
