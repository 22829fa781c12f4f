"""slabfeed.Loader on 1-4 ranks: batches through DLPack equal the serial
reference reader bit for bit, the sample stream follows the conventions,
stale batches raise, resume is exact (mid-epoch and at an epoch boundary),
any communicator works."""
from __future__ import annotations

import inspect
import math
import os

import numpy as np
import pytest
from conftest import (COMM, VEC, batch_record, check_batch, expected_sample_ids,
                      same_record, tensor_bits)
from mpi4py import MPI

import slabfeed
from slabfeed import _slabfeed
from slabfeed.tools import Reader

P, R = COMM.size, COMM.rank


def open_loader(path: str, comm: MPI.Intracomm = COMM, **kw) -> slabfeed.Loader:
    opts = dict(path=path, input="Nbody", target="Hydro", crop=8, batch=2,
                input_vectors=VEC, target_vectors=VEC, seed=3)
    opts.update(kw)
    return slabfeed.Loader(comm, **opts)


PERM_SIGN = [1, -1, -1, 1, 1, -1]  # of the 6 permutations, lexicographic order


def is_rotation(g: int) -> bool:
    return PERM_SIGN[g % 6] * (-1) ** bin(g // 6).count("1") == 1


@pytest.mark.parametrize("volume,dtype,out_layout,extra", [
    ("index_volume", "f32", "ncdhw", {}),
    ("index_volume", "bf16", "ndhwc", {"symmetries": "rotations"}),
    ("index_volume", "f16", "ndhwc", {"symmetries": "none", "target": None,
                                     "target_vectors": (), "crop": (8, 6, 4)}),
    ("odd_volume", "f16", "ncdhw", {"crop": 6, "prefetch": 1}),
    ("odd_volume", "bf16", "ncdhw", {"halo": 1, "batch": 3}),
])
def test_batches_equal_reference(request, volume, dtype, out_layout, extra):
    path = request.getfixturevalue(volume)
    crop = extra.get("crop", 8)
    crop3 = (crop,) * 3 if isinstance(crop, int) else crop
    with open_loader(path, dtype=dtype, out_layout=out_layout, steps_per_epoch=10, **extra) as L, \
            Reader(path) as ref:
        B = L.options["batch"]
        checked = 0
        for s in range(3):
            b = L.next()
            assert (b.epoch, b.step) == (0, s)
            assert list(b.sample) == expected_sample_ids(s, B, P, R)
            assert b.input.dtype == {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype]
            c = 4
            assert b.input.shape == ((B, c, *crop3) if out_layout == "ncdhw" else (B, *crop3, c))
            if extra.get("symmetries") == "none":
                assert set(b.symmetry) == {0}
            if extra.get("symmetries") == "rotations":
                assert all(is_rotation(g) for g in b.symmetry)
            assert all(0 <= g < 48 for g in b.symmetry)
            checked += check_batch(b, ref, crop=crop3, dtype=dtype, out_layout=out_layout,
                                   target=extra.get("target", "Hydro"))
            # The ranks' samples of a step form the global batch, once each.
            everyone = COMM.allgather(list(b.sample))
            assert sorted(sum(everyone, [])) == list(range(s * P * B, (s + 1) * P * B))
        assert checked == 3 * B * (1 if extra.get("target", "Hydro") is None else 2)


def test_zero_copy_and_metadata(index_volume):
    with open_loader(index_volume) as L:
        b = L.next()
        x1, x2 = np.from_dlpack(b.input), np.from_dlpack(b.input)
        assert np.shares_memory(x1, x2)  # both views of the loader's memory
        assert not x1.flags["OWNDATA"]
        assert x1.shape == b.input.shape == (2, 4, 8, 8, 8)
        assert x1.strides == tuple(s * 4 for s in b.input.strides)
        assert b.input.__dlpack_device__() == (1, 0)
        assert b.input.nbytes == x1.nbytes
        assert b.input.tobytes() == x1.tobytes()
        assert b.device == -1 and b.stream is None and b.valid
        assert len(b.origin) == 2 and all(len(o) == 3 for o in b.origin)
        assert all(0 <= v < 24 for o in b.origin for v in o)


def test_stale_batches_raise(index_volume):
    with open_loader(index_volume) as L:
        b = L.next()
        t = b.input
        L.next()
        assert not b.valid and not t.valid and "stale" in repr(b)
        for f in (lambda: t.__dlpack__(), lambda: np.from_dlpack(b.target), t.tobytes):
            with pytest.raises(slabfeed.StaleBatchError) as e:
                f()
            assert isinstance(e.value, slabfeed.StateError)
            assert isinstance(e.value, RuntimeError)
            assert e.value.status == "SLABFEED_ERR_STATE"
        assert len(b.sample) == 2  # metadata are copies: still readable
        b2 = L.next()
        L.seek(0, 0)
        with pytest.raises(slabfeed.StaleBatchError):
            b2.input.__dlpack__()
        b3 = L.next()
    with pytest.raises(slabfeed.StaleBatchError, match="closed"):
        b3.input.__dlpack__()
    with pytest.raises(slabfeed.StateError, match="closed"):
        L.next()
    L.close()  # idempotent


def test_host_view_valid_until_prefetch(index_volume):
    """A numpy view of a host batch keeps its content until the prefetch-th
    following next (the C rule the docstrings state)."""
    K = 3
    with open_loader(index_volume, prefetch=K) as L:
        views, copies = [], []
        for _ in range(K):
            b = L.next()
            views.append(np.from_dlpack(b.input))
            copies.append(views[-1].copy())
        # batch 0's view after K - 1 further nexts: unchanged
        assert np.array_equal(views[0], copies[0])
        assert not np.array_equal(copies[0], copies[1])


def test_resume_mid_epoch(index_volume):
    with open_loader(index_volume) as A:
        recs, state = [], None
        for s in range(6):
            if s == 2:
                state = A.state_dict()
            recs.append(batch_record(A.next()))
    assert state["epoch"] == 0 and state["step"] == 2
    with open_loader(index_volume) as B:
        B.load_state_dict(state)
        assert B.tell() == (0, 2)
        for s in range(2, 6):
            assert same_record(batch_record(B.next()), recs[s]), f"step {s} differs"


def test_resume_at_epoch_boundary(index_volume):
    with open_loader(index_volume, steps_per_epoch=3) as A:
        assert len(A) == 3
        epoch0 = [batch_record(b) for b in A]  # iteration: one epoch
        assert [r["step"] for r in epoch0] == [0, 1, 2]
        state = A.state_dict()
        assert (state["epoch"], state["step"]) == (1, 0)
        epoch1 = [batch_record(b) for b in A]
        assert [(r["epoch"], r["step"]) for r in epoch1] == [(1, 0), (1, 1), (1, 2)]
    # a new epoch draws other crops from the same sample indices
    assert epoch0[0]["sample"] == epoch1[0]["sample"]
    assert not same_record(epoch0[0], epoch1[0])
    with open_loader(index_volume, steps_per_epoch=3) as B:
        B.load_state_dict(state)
        got = [batch_record(b) for b in B]
        assert len(got) == 3 and all(same_record(g, r) for g, r in zip(got, epoch1))
        assert B.tell() == (2, 0)


def test_iteration_and_set_epoch(index_volume):
    with open_loader(index_volume, steps_per_epoch=4) as L:
        L.seek(0, 1)
        assert [b.step for b in L] == [1, 2, 3]  # the rest of epoch 0
        L.seek(5, 2)
        L.set_epoch(5)  # inside epoch 5 already: the position stays
        assert L.tell() == (5, 2)
        L.set_epoch(6)
        assert L.tell() == (6, 0)
        with pytest.raises(slabfeed.ArgumentError, match="past the end"):
            L.seek(0, 4)
        assert L.tell() == (6, 0)


def test_state_dict_strict(index_volume):
    with open_loader(index_volume) as A:
        state = A.state_dict()
    with open_loader(index_volume, seed=4) as B:
        with pytest.raises(slabfeed.ArgumentError, match="seed") as e:
            B.load_state_dict(state)
        assert isinstance(e.value, ValueError)
        B.load_state_dict(state, strict=False)
        assert B.tell() == (0, 0)


def test_any_communicator(index_volume):
    """COMM_SELF on every rank (1-rank loaders side by side) and, with 2+
    ranks, the halves of a split: each follows the conventions of its own
    communicator and equals the reference."""
    with open_loader(index_volume, comm=MPI.COMM_SELF) as L, Reader(index_volume) as ref:
        b = L.next()
        assert list(b.sample) == [0, 1]
        check_batch(b, ref, crop=(8, 8, 8))
    if P < 2:
        return
    sub = COMM.Split(R % 2, R)
    try:
        with open_loader(index_volume, comm=sub) as L, Reader(index_volume) as ref:
            assert L.size == sub.size and L.rank == sub.rank
            b = L.next()
            assert list(b.sample) == expected_sample_ids(0, 2, sub.size, sub.rank)
            check_batch(b, ref, crop=(8, 8, 8))
    finally:
        sub.Free()


def test_len_stats_and_defaults(index_volume):
    with open_loader(index_volume, batch=1) as L:
        # default: the fewest steps whose crops cover the box once
        assert len(L) == math.ceil(24 ** 3 / (8 ** 3 * P * 1))
        for _ in range(2):
            L.next()
        st = L.stats()
        assert st["batches"] == 2 and st["samples"] == 2
        assert st["bytes_out"] == 2 * (4 + 5) * 8 ** 3 * 4
        assert st["slab_bytes"] > 0
        # the open's parts lie inside it (host batches: no context, no
        # registration)
        assert 0 < st["t_read"] <= st["t_open"]
        assert st["t_open_context"] == 0 and st["t_open_register"] == 0
        assert st["t_read"] + st["t_open_backend"] <= st["t_open"]
        # SLABFEED_RANK_PER_NODE=1 (python.rpn.np2): pieces of the other
        # ranks' slabs travel with MPI_Get
        moved = COMM.allreduce(st["bytes_remote"])
        if os.environ.get("SLABFEED_RANK_PER_NODE") == "1" and P > 1:
            assert moved > 0
        elif P == 1:
            assert moved == 0
    # the Python signature shows the C library's defaults
    sig = inspect.signature(slabfeed.Loader).parameters
    for k, v in _slabfeed.config_defaults().items():
        if k in ("path", "input"):
            assert sig[k].default is inspect.Parameter.empty  # required
        else:
            assert sig[k].default == v, k
    assert _slabfeed.config_defaults()["crop"] == (64, 64, 64)
    assert _slabfeed.config_defaults()["rank_per_node"] is None  # auto


def test_placement_groups_and_locality(index_volume):
    """The placement options reach the library: one group of all nodes
    moves pieces between "nodes" (rank per node), groups of one node and
    locality mode move none, and the crops stay those of the reference."""
    rpn = os.environ.get("SLABFEED_RANK_PER_NODE") == "1" and P > 1
    for kw, remote in (({"group_nodes": -1}, rpn), ({"group_nodes": 1}, False),
                       ({"group_nodes": -1, "locality": True}, False)):
        with open_loader(index_volume, batch=2, **kw) as L, \
                Reader(index_volume) as ref:
            line = L.placement()
            assert line.startswith("placement: ") and "group" in line
            for _ in range(3):
                assert check_batch(L.next(), ref, crop=(8, 8, 8)) == 4
            st = L.stats()
            assert st["nodes"] == (P if rpn else 1)
            assert st["group_nodes"] == (1 if "locality" not in kw and
                                         kw["group_nodes"] == 1 else st["nodes"])
            moved = COMM.allreduce(st["bytes_remote"])
            assert (moved > 0) == remote, (kw, moved)


def test_tensor_bits_helper_is_not_vacuous(index_volume):
    """The comparison helper sees a single flipped bit."""
    with open_loader(index_volume) as L, Reader(index_volume) as ref:
        b = L.next()
        bits = tensor_bits(b.input, "f32").copy()
        r = ref.crop("Nbody", b.origin[0], 8, symmetry=b.symmetry[0], vectors=VEC)
        assert np.array_equal(bits[0], r.view(np.uint32))
        bits[0, 1, 2, 3, 4] ^= 1
        assert not np.array_equal(bits[0], r.view(np.uint32))
