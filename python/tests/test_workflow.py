"""Held-out regions and tiled passes through the Python module: the
keywords reach the library (they come from its option table), the batches
are the reference reader's crops, no training crop touches the hold-out,
and a pass hands out every tile of the region once over all ranks, with the
last batch's count of real slots, so that the owned parts stitch back into
the region bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

import slabfeed
from conftest import COMM, check_batch
from slabfeed.tools import Reader

N = 24  # index_volume is 24^3


def hits(origin, crop, box) -> bool:
    """Whether the periodic crop at origin meets the box (z,y,x,dz,dy,dx)."""
    for a in range(3):
        d = box[3 + a] or N
        if (origin[a] - (box[a] - crop + 1)) % N >= min(d + crop - 1, N):
            return False
    return True


def test_holdout_keeps_crops_out(index_volume):
    band = (21, 0, 0, 3, 0, 0)  # the last eighth of z
    with slabfeed.Loader(COMM, path=index_volume, input="Nbody", target="Hydro",
                         crop=6, batch=4, seed=3, input_vectors=[(1, 2, 3)],
                         target_vectors=[(1, 2, 3)], holdout=[band],
                         steps_per_epoch=8) as loader, Reader(index_volume) as rd:
        assert loader.options["holdout"] == (band,)
        seen = 0
        for b in loader:
            for o in b.origin:
                assert not hits(o, 6, band), o
            seen += check_batch(b, rd, crop=(6, 6, 6))
        assert seen == 8 * 4 * 2


def test_pass_covers_the_region_once(index_volume):
    T, P, B = 5, 2, 3
    region = (20, 3, 0, 8, 17, 0)  # wraps in z; 17 rows: not a multiple of T
    dz, dy, dx = 8, 17, N
    stitched = np.zeros((4, dz, dy, dx), np.float32)
    owned = np.zeros((dz, dy, dx), np.int32)
    tiles = set()
    with slabfeed.Loader(COMM, path=index_volume, input="Nbody", target="Hydro",
                         batch=B, tile=T, pad=P, region=[region]) as loader, \
            Reader(index_volume) as rd:
        E = T + 2 * P
        steps = len(loader)
        n_tiles = -(-dz // T) * -(-dy // T) * -(-dx // T)
        assert steps == -(-n_tiles // (COMM.size * B))
        for s, b in enumerate(loader):
            assert b.input.shape == (B, 4, E, E, E)
            first = s * COMM.size * B + COMM.rank * B
            real = [k for k in range(first, first + B) if k < n_tiles]
            assert b.count == len(real)
            assert list(b.sample[:b.count]) == real
            assert all(k == -1 for k in b.sample[b.count:])
            x = np.from_dlpack(b.input)
            for i in range(b.count):
                check = rd.crop("Nbody", b.origin[i], (E, E, E), symmetry=0,
                                vectors=[], dtype="f32", out_layout="ncdhw")
                assert np.array_equal(x[i], check)
                z, y, xx, oz, oy, ox, nz, ny, nx = b.tile[i]
                rz, ry, rx = (z + oz - 20) % N, (y + oy - 3) % N, (xx + ox) % N
                stitched[:, rz:rz + nz, ry:ry + ny, rx:rx + nx] = \
                    x[i][:, P + oz:P + oz + nz, P + oy:P + oy + ny, P + ox:P + ox + nx]
                owned[rz:rz + nz, ry:ry + ny, rx:rx + nx] += 1
                tiles.add(b.sample[i])
    owned = COMM.allreduce(owned)
    stitched = COMM.allreduce(stitched)
    tiles = set().union(*COMM.allgather(tiles))
    assert tiles == set(range(n_tiles))
    assert (owned == 1).all()
    whole = rd_region(index_volume, region)
    assert np.array_equal(stitched, whole)


def rd_region(path, region):
    """The region read voxel by voxel through the reader (periodic)."""
    z0, y0, x0, dz, dy, dx = region
    dx = dx or N
    out = np.zeros((4, dz, dy, dx), np.float32)
    with Reader(path) as rd:
        for z in range(dz):
            row = rd.crop("Nbody", ((z0 + z) % N, y0, x0), (1, dy, dx),
                          symmetry=0, vectors=[], dtype="f32", out_layout="ncdhw")
            out[:, z] = row[:, 0]
    return out


def test_pass_refusals(index_volume):
    with pytest.raises(slabfeed.ArgumentError, match="larger than the box"):
        slabfeed.Loader(COMM, path=index_volume, input="Nbody", tile=20, pad=3)
    with pytest.raises(slabfeed.ArgumentError, match="no crop origin"):
        slabfeed.Loader(COMM, path=index_volume, input="Nbody", crop=6,
                        holdout=[(0, 0, 0, 0, 19, 0)])
