"""Datasets of several volumes from Python: path takes a list of paths,
glob patterns and "@manifest" files; Loader.volumes() lists the files in
order; every crop equals the reference reader's crop of the file of its
volume (Batch.volume) at its origin (Batch.origin, in that volume's
coordinates), bit for bit; holdout_volumes keeps a volume out, and
volume_weights takes a list; a bad list is refused on every rank alike,
naming the file."""
from __future__ import annotations

import os

import numpy as np
import pytest

import slabfeed
from conftest import COMM
from slabfeed.tools import Reader

ZS = (14, 10, 12)


@pytest.fixture(scope="module")
def suite(workdir):
    paths = []
    for i, z in enumerate(ZS):
        p = f"{workdir}/box_{i}.h5"
        slabfeed.tools.generate(COMM, p, shape=(z, 10, 8), content="field",
                                seed=20 + i)
        paths.append(p)
    man = f"{workdir}/rest.txt"
    if COMM.rank == 0:
        with open(man, "w") as f:
            f.write("# the last two\n" + "\n".join(paths[1:]) + "\n")
    COMM.Barrier()
    return paths, man


def check_crops(loader, paths, steps, vec):
    readers = [Reader(p) for p in paths]
    seen = [0] * len(paths)
    try:
        for _ in range(steps):
            b = loader.next()
            x = np.from_dlpack(b.input)
            for i, (v, o, g) in enumerate(zip(b.volume, b.origin, b.symmetry)):
                seen[v] += 1
                assert 0 <= o[0] < ZS[v]
                want = readers[v].crop("Nbody", o, 6, symmetry=g, vectors=vec)
                assert np.array_equal(x[i].view(np.uint32), want.view(np.uint32)), (v, o, g)
    finally:
        for r in readers:
            r.close()
    return COMM.allreduce(np.array(seen))


def test_list_glob_and_manifest(suite):
    paths, man = suite
    spec = [paths[0], "@" + man]
    with slabfeed.Loader(COMM, path=spec, input="Nbody", crop=6, batch=2,
                         seed=3, input_vectors=[(1, 2, 3)]) as loader:
        assert [p for p, _ in loader.volumes()] == paths
        assert [s for _, s in loader.volumes()] == [(z, 10, 8) for z in ZS]
        seen = check_crops(loader, paths, 60, [(1, 2, 3)])
        assert (seen > 0).all()
    pattern = os.path.join(os.path.dirname(paths[0]), "box_*.h5")
    with slabfeed.Loader(COMM, path=pattern, input="Nbody", crop=6, batch=2,
                         holdout_volumes=[1], volume_weights="equal") as loader:
        assert [p for p, _ in loader.volumes()] == paths
        seen = check_crops(loader, paths, 40, [])
        assert seen[1] == 0 and seen[0] > 0 and seen[2] > 0


def test_weights_list(suite):
    paths, _ = suite
    with slabfeed.Loader(COMM, path=paths, input="Nbody", crop=6, batch=2,
                         volume_weights=[1.0, 0, 1.0]) as loader:
        seen = check_crops(loader, paths, 30, [])
        assert seen[1] == 0


@pytest.mark.parametrize("spec,needle", [
    (lambda p, m: [p[0], p[0]], "is the same file as volume 0"),
    (lambda p, m: [p[0], p[0] + ".missing"], ".missing"),
    (lambda p, m: os.path.dirname(p[0]) + "/none_*.h5", "matches no file"),
])
def test_refused_on_every_rank(suite, spec, needle):
    paths, man = suite
    with pytest.raises(slabfeed.Error) as err:
        slabfeed.Loader(COMM, path=spec(paths, man), input="Nbody", crop=6)
    assert needle in str(err.value)
    assert COMM.allreduce(1) == COMM.size  # every rank got here


def test_fields_list(suite):
    """input as a list of fields (the generated files' two datasets):
    9 channels, each crop the reader's crop of the same list."""
    paths, _ = suite
    with slabfeed.Loader(COMM, path=paths, input=["Nbody", "Hydro"], crop=6,
                         batch=2, seed=5, input_vectors=[(1, 2, 3), (5, 6, 7)]) as loader:
        readers = [Reader(p) for p in paths]
        try:
            for _ in range(10):
                b = loader.next()
                x = np.from_dlpack(b.input)
                assert x.shape[1] == 9
                for i, (v, o, g) in enumerate(zip(b.volume, b.origin, b.symmetry)):
                    # each dataset on its own, its vector group in its
                    # own channels, concatenated here
                    want = np.concatenate([
                        readers[v].crop("Nbody", o, 6, symmetry=g, vectors=[(1, 2, 3)]),
                        readers[v].crop("Hydro", o, 6, symmetry=g, vectors=[(1, 2, 3)])])
                    assert np.array_equal(x[i].view(np.uint32), want.view(np.uint32))
        finally:
            for r in readers:
                r.close()
    with pytest.raises(TypeError, match="input entries must be names"):
        slabfeed.Loader(COMM, path=paths, input=["Nbody", 3])


def test_sr_pair_and_vector_fields(workdir):
    """tools.generate(scale_factor=2) writes the target on the fine grid;
    a loader with scale_factor 2 gives, per sample, the reader's fine crop
    of edge 2c at 2 x the origin (same symmetry), and input_vector_fields
    names a field of three channels or is refused naming it."""
    p = f"{workdir}/pair.h5"
    slabfeed.tools.generate(COMM, p, shape=(8, 6, 10), content="field",
                            seed=3, scale_factor=2, target_channels=3,
                            overwrite=True)
    r = Reader(p)
    try:
        with slabfeed.Loader(COMM, path=p, input="Nbody", target="Hydro",
                             crop=3, batch=2, seed=9, scale_factor=2,
                             input_vectors=[(1, 2, 3)],
                             target_vectors=[(0, 1, 2)]) as loader:
            for _ in range(6):
                b = loader.next()
                x, t = np.from_dlpack(b.input), np.from_dlpack(b.target)
                assert t.shape[1:] == (3, 6, 6, 6)
                for i, (o, g) in enumerate(zip(b.origin, b.symmetry)):
                    want = r.crop("Nbody", o, 3, symmetry=g, vectors=[(1, 2, 3)])
                    assert np.array_equal(x[i].view(np.uint32), want.view(np.uint32))
                    fine = [2 * int(v) for v in o]
                    want = r.crop("Hydro", fine, 6, symmetry=g, vectors=[(0, 1, 2)])
                    assert np.array_equal(t[i].view(np.uint32), want.view(np.uint32))
    finally:
        r.close()
    with pytest.raises(slabfeed.ArgumentError,
                       match="field 'Nbody' of '.*pair.h5' has 4 channels; a "
                             "vector field has 3"):
        slabfeed.Loader(COMM, path=p, input="Nbody", target="Hydro", crop=3,
                        scale_factor=2, input_vector_fields="Nbody")


def test_coarse_pair(workdir):
    """tools.generate(coarsen_factor=2) writes the target on a grid twice
    as coarse, the field sampled every other voxel; a loader with
    coarsen_factor 2 and a pad of 1 gives, per sample, the reader's input
    crop of edge c + 2 at the origin and its coarse crop of edge c / 2 at
    (origin + 1) / 2 (same symmetry, vectors as vectors on both grids)."""
    p = f"{workdir}/coarse.h5"
    one = f"{workdir}/coarse1.h5"
    slabfeed.tools.generate(COMM, p, shape=(8, 12, 10), content="field",
                            seed=3, coarsen_factor=2, target_channels=3,
                            overwrite=True)
    slabfeed.tools.generate(COMM, one, shape=(8, 12, 10), content="field",
                            seed=3, target_channels=3, overwrite=True)
    r, r1 = Reader(p), Reader(one)
    try:
        # The coarse field at p is the one-grid file's at 2 p.
        for o in [(0, 0, 0), (3, 5, 4), (1, 2, 3)]:
            got = r.crop("Hydro", o, 1)
            want = r1.crop("Hydro", [2 * v for v in o], 1)
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
        with slabfeed.Loader(COMM, path=p, input="Nbody", target="Hydro",
                             crop=4, pad=1, batch=2, seed=9, coarsen_factor=2,
                             input_vectors=[(1, 2, 3)],
                             target_vectors=[(0, 1, 2)]) as loader:
            for _ in range(6):
                b = loader.next()
                x, t = np.from_dlpack(b.input), np.from_dlpack(b.target)
                assert x.shape[1:] == (4, 6, 6, 6) and t.shape[1:] == (3, 2, 2, 2)
                for i, (o, g) in enumerate(zip(b.origin, b.symmetry)):
                    assert all((int(v) + 1) % 2 == 0 for v in o)
                    want = r.crop("Nbody", o, 6, symmetry=g, vectors=[(1, 2, 3)])
                    assert np.array_equal(x[i].view(np.uint32), want.view(np.uint32))
                    shape = (8, 12, 10)
                    coarse = [((int(v) + 1) % n) // 2 for v, n in zip(o, shape)]
                    want = r.crop("Hydro", coarse, 2, symmetry=g, vectors=[(0, 1, 2)])
                    assert np.array_equal(t[i].view(np.uint32), want.view(np.uint32))
    finally:
        r.close()
        r1.close()
    with pytest.raises(slabfeed.ArgumentError,
                       match="crop 3x3x3 is not a multiple of coarsen_factor 2"):
        slabfeed.Loader(COMM, path=p, input="Nbody", target="Hydro", crop=3,
                        coarsen_factor=2)
