"""Fixtures of the slabfeed Python tests, run by pytest on every rank of an
MPI job (mpirun -n P python3 -m pytest ...): generated volumes in a
directory shared by the ranks, and helpers that compare batches with the
serial reference reader bit for bit."""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Sequence

from mpi4py import MPI  # before slabfeed: MPI is initialised by mpi4py

import numpy as np
import pytest

import slabfeed
from slabfeed.tools import Reader

COMM = MPI.COMM_WORLD


@pytest.fixture(scope="session")
def comm() -> MPI.Intracomm:
    return COMM


@pytest.fixture(scope="session")
def workdir() -> Iterator[str]:
    """A directory all ranks share (under $SLABFEED_TEST_DIR when set)."""
    base = os.environ.get("SLABFEED_TEST_DIR")
    d = tempfile.mkdtemp(prefix="sfpy-", dir=base) if COMM.rank == 0 else None
    d = COMM.bcast(d, root=0)
    yield d
    COMM.Barrier()
    if COMM.rank == 0:
        shutil.rmtree(d, ignore_errors=True)


def _volume(workdir: str, name: str, **kw: Any) -> str:
    path = os.path.join(workdir, name)
    slabfeed.tools.generate(COMM, path, **kw)
    return path


@pytest.fixture(scope="session")
def index_volume(workdir: str) -> str:
    """24^3, channels-first float32, exact index content (4 + 5 channels)."""
    return _volume(workdir, "index.h5", shape=24, content="index")


@pytest.fixture(scope="session")
def odd_volume(workdir: str) -> str:
    """A non-cubic 20x22x18 box, channels-last, chunked, stored float16."""
    return _volume(workdir, "odd.h5", shape=(20, 22, 18), layout="cl",
                   chunked=True, float16=True, content="index")


VEC = [(1, 2, 3)]

_BITS = {"f32": np.uint32, "f16": np.uint16, "bf16": np.uint16}


def tensor_bits(t: slabfeed.Tensor, dtype: str) -> np.ndarray:
    """The tensor's elements as unsigned integers (bit patterns): through
    numpy.from_dlpack (zero copy) for f32/f16, tobytes() for bf16 (numpy has
    no bfloat16)."""
    if dtype == "bf16":
        return np.frombuffer(t.tobytes(), dtype=np.uint16).reshape(t.shape)
    return np.from_dlpack(t).view(_BITS[dtype])


def expected_sample_ids(step: int, batch: int, size: int, rank: int) -> List[int]:
    """Conventions: rank r takes [s*P*B + r*B, s*P*B + (r+1)*B)."""
    first = step * size * batch + rank * batch
    return list(range(first, first + batch))


def check_batch(b: slabfeed.Batch, reader: Reader, *, crop: Sequence[int],
                dtype: str = "f32", out_layout: str = "ncdhw",
                target: Optional[str] = "Hydro", vectors: Any = VEC) -> int:
    """Every sample of b equals the reference reader's crop at its origin
    and symmetry, bit for bit; returns the number of samples checked."""
    n = 0
    for name, t in (("Nbody", b.input), (target, b.target)):
        if name is None:
            assert t is None
            continue
        got = tensor_bits(t, dtype)
        for i, (o, g) in enumerate(zip(b.origin, b.symmetry)):
            ref = reader.crop(name, o, tuple(crop), symmetry=g, vectors=vectors,
                              dtype=dtype, out_layout=out_layout)
            ref_bits = ref.view(_BITS[dtype])
            assert got[i].shape == ref_bits.shape
            assert np.array_equal(got[i], ref_bits), \
                f"{name} sample {b.sample[i]} (origin {o}, symmetry {g}) differs"
            n += 1
    return n


def batch_record(b: slabfeed.Batch, dtype: str = "f32") -> Dict[str, Any]:
    """What identifies a batch: position, metadata and a copy of the bits."""
    rec: Dict[str, Any] = {"epoch": b.epoch, "step": b.step, "origin": b.origin,
                           "symmetry": b.symmetry, "sample": b.sample,
                           "input": tensor_bits(b.input, dtype).copy()}
    if b.target is not None:
        rec["target"] = tensor_bits(b.target, dtype).copy()
    return rec


def same_record(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    return all(np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k]
               for k in a)
