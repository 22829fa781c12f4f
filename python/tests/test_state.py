"""Positions and checkpoints refused clearly: a state without its keys, a
step that is not an integer, an epoch longer than sample ids can count; and
close() deferred while an exception propagates (collective otherwise)."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import COMM

import slabfeed

OPTS = dict(input="Nbody", target="Hydro", crop=8, batch=1)


@pytest.fixture
def loader(index_volume):
    with slabfeed.Loader(COMM, path=index_volume, **OPTS) as lo:
        yield lo


@pytest.mark.parametrize("state,missing", [
    ({}, "'epoch' and no 'step'"), ({"epoch": 0}, "'step'"), ({"step": 1}, "'epoch'")])
def test_state_without_keys(loader, state, missing):
    with pytest.raises(slabfeed.ArgumentError, match=f"the state has no {missing}"):
        loader.load_state_dict(state)
    assert loader.tell() == (0, 0)


@pytest.mark.parametrize("value", [1.0, 1.7, "1", True, None])
def test_state_step_not_an_integer(loader, value):
    state = loader.state_dict()
    state["step"] = value
    with pytest.raises(TypeError, match=r"state\['step'\] must be an integer"):
        loader.load_state_dict(state)
    with pytest.raises(TypeError, match="must be an integer"):
        loader.seek(0, value)
    assert loader.tell() == (0, 0)


def test_state_integers_of_any_kind(loader):
    state = loader.state_dict()
    state.update(epoch=np.int64(1), step=np.uint8(2))
    loader.load_state_dict(state)
    assert loader.tell() == (1, 2)
    loader.set_epoch(np.int32(1))  # the same epoch: the position is kept
    assert loader.tell() == (1, 2)
    with pytest.raises(TypeError, match="epoch must be an integer"):
        loader.set_epoch(1.0)
    with pytest.raises(TypeError):
        loader.load_state_dict([("epoch", 0), ("step", 0)])


def test_state_not_a_mapping(loader):
    with pytest.raises(TypeError, match="takes the dict of state_dict"):
        loader.load_state_dict(None)


def test_steps_per_epoch_too_long(index_volume):
    """More than 2^62 samples per epoch is refused on every rank, naming the
    most steps (sample ids are int64; len() a Py_ssize_t); the most works."""
    gb = 4 * COMM.size
    limit = 2 ** 62 // gb
    for spe in (limit + 1, 2 ** 62, 2 ** 63, 2 ** 64 - 1):
        with pytest.raises(slabfeed.ArgumentError, match="steps_per_epoch") as e:
            slabfeed.Loader(COMM, path=index_volume, input="Nbody", crop=8, batch=4,
                            steps_per_epoch=spe)
        assert f"at most {limit} steps" in str(e.value)
    try:
        lo = slabfeed.Loader(COMM, path=index_volume, input="Nbody", crop=8, batch=4,
                             steps_per_epoch=limit)
    except slabfeed.ArgumentError as e:  # pragma: no cover
        pytest.fail(f"{limit} steps per epoch refused: {e}")
    with lo:
        assert len(lo) == limit
        lo.seek(0, limit - 1)
        b = lo.next()
        assert max(b.sample) == limit * gb - gb + 4 * COMM.rank + 3 < 2 ** 62
        assert lo.tell() == (1, 0)


def test_close_deferred_while_an_exception_propagates(index_volume):
    lo = slabfeed.Loader(COMM, path=index_volume, **OPTS)
    with pytest.raises(RuntimeError):
        try:
            raise RuntimeError("this rank only, maybe")
        finally:
            lo.close()  # not collective here: deferred
    assert not lo.closed
    try:
        raise KeyError("an error every rank got")
    except KeyError:
        lo.close(force=True)  # collective on request
    assert lo.closed
    lo.close()  # idempotent


def test_with_ending_on_an_exception_defers(index_volume):
    with pytest.raises(ZeroDivisionError):
        with slabfeed.Loader(COMM, path=index_volume, **OPTS) as lo:
            lo.next()
            1 / 0
    assert not lo.closed
    lo.close()
    assert lo.closed
    try:
        raise KeyError("handled alike on every rank")
    except KeyError:
        with slabfeed.Loader(COMM, path=index_volume, **OPTS) as lo2:
            lo2.next()
    assert lo2.closed  # a `with` ending normally closes, also in an except block
