"""The tools of ``slabfeed_tools.h``: the parallel generator, dataset
description, the per-channel field statistics (for normalisation) and the
independent serial reference reader (what slabfeed's tests compare every
batch with, bit for bit)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _slabfeed
from ._mpi import comm_handle

if TYPE_CHECKING:  # pragma: no cover
    import numpy
    from mpi4py import MPI

PathLike = Union[str, "os.PathLike[str]"]
IntOr3 = Union[int, Sequence[int]]


def generate(comm: "Optional[MPI.Intracomm]", path: PathLike, *,
             shape: IntOr3 = 64, input: str = "Nbody",
             target: Optional[str] = "Hydro", input_channels: int = 4,
             target_channels: int = 5, layout: str = "cf",
             chunked: bool = False, chunk: Optional[IntOr3] = None,
             float16: bool = False, content: str = "index", seed: int = 0,
             progress: bool = False,
             attrs: Optional[Dict[str, float]] = None,
             overwrite: bool = False,
             input_fields: Optional[str] = None,
             target_fields: Optional[str] = None,
             scale_factor: int = 1, coarsen_factor: int = 1) -> None:
    """Write a synthetic volume (``slabfeed_generate``), collective over comm.

    content ``'index'`` stores exact integers that tests recompute
    (``slabfeed_index_value``); ``'field'`` a smooth periodic random field
    with a learnable target: input = density + velocity (4 channels),
    target = Gaussian-smoothed density, smoothed velocity, temperature (5),
    velocity in channels 1, 2, 3 of both. ``layout`` is ``'cf'`` (C,Z,Y,X)
    or ``'cl'`` (Z,Y,X,C); ``target=None`` writes the input only.
    ``attrs`` ({name: number}) become float64 attributes of the root group
    (a simulation's parameters, which the loader's ``params`` reads).
    An existing file at `path` is refused (``FileIOError``) unless
    ``overwrite``; it is then replaced once the new file is complete.
    ``input_fields`` ("density:1,velocity:3") writes the input as fields,
    datasets of their own (one channel: 3-D), read back with
    ``input="density,velocity"``; ``target_fields`` likewise.
    ``scale_factor`` F > 1 writes a super-resolution pair: the target on
    a grid F times finer on every axis (F x shape), the same field
    sampled F times finer, read with the loader's ``scale_factor=F``.
    ``coarsen_factor`` G > 1 writes a coarser target: on a grid G times
    coarser (shape / G, shape a multiple of G), the same field sampled
    every G voxels, read with the loader's ``coarsen_factor=G``.
    """
    text = None
    if attrs:
        text = ",".join(f"{k}={float(v)!r}" for k, v in attrs.items())
    _slabfeed.generate(comm_handle(comm), os.fspath(path), input=input,
                       target=target, shape=shape,
                       input_channels=input_channels,
                       target_channels=target_channels, layout=layout,
                       chunked=chunked, chunk=chunk, float16=float16,
                       content=content, seed=seed, progress=progress,
                       attrs=text, overwrite=overwrite,
                       input_fields=input_fields, target_fields=target_fields,
                       scale_factor=scale_factor,
                       coarsen_factor=coarsen_factor)


def describe(path: PathLike, dataset: str, layout: str = "auto") -> Dict[str, Any]:
    """What ``slabfeed_describe`` finds: dims (as stored), channels, shape
    (Z, Y, X), layout ('cf'/'cl'), type_bits, chunked, chunk. Not
    collective."""
    return _slabfeed.describe(os.fspath(path), dataset, layout)


def field_stats(path: PathLike, dataset: str, *,
                comm: "Optional[MPI.Intracomm]" = None, layout: str = "auto",
                log_a: Optional[float] = None) -> List[Dict[str, Any]]:
    """Per-channel statistics of a dataset (``slabfeed_field_stats``),
    collective over comm (``MPI.COMM_WORLD`` when None): every rank reads
    its z-slab with parallel HDF5 and all ranks get the same numbers.

    One dict per channel: ``count`` (finite values), ``nonfinite`` (NaN
    and inf, left out), ``mean``, ``std`` (population), ``min``, ``max``,
    and ``log_count``, ``log_mean``, ``log_std``, ``log_min``,
    ``log_max`` of log(x + log_a) as the loader's normalisation computes
    it (float32), over the values where it is finite; the log fields are
    None when ``log_a`` is None. A normalisation from them:
    ``input_norm=[(s["mean"], s["std"]) for s in stats]``, or
    ``("log", a, s["log_mean"], s["log_std"])`` per channel.
    """
    return _slabfeed.field_stats(comm_handle(comm), os.fspath(path), dataset,
                                 layout, log_a)


_NP_DTYPES = {"f32": "float32", "float32": "float32", "f16": "float16",
              "float16": "float16", "bf16": "uint16", "bfloat16": "uint16"}


class Reader:
    """The independent serial reference reader (``slabfeed_reader_*``).

    ``Reader(path).crop(dataset, origin, crop, symmetry=..., vectors=...,
    dtype=..., out_layout=...)`` forms one sample straight from the file
    with serial HDF5 and the reference transform, as a numpy array shaped
    (C, D, H, W) or (D, H, W, C); bf16 comes as its uint16 bit patterns
    (numpy has no bfloat16). Not collective; a context manager.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        self._r = _slabfeed.Reader(self.path)
        self._channels: Dict[Tuple[str, str], int] = {}

    def crop(self, dataset: str, origin: Sequence[int], crop: IntOr3, *,
             symmetry: int = 0, vectors: Sequence[Sequence[int]] = (),
             dtype: str = "f32", out_layout: str = "ncdhw",
             layout: str = "auto") -> "numpy.ndarray":
        import numpy as np

        c3 = (crop,) * 3 if isinstance(crop, int) else tuple(crop)
        raw = self._r.crop(dataset, tuple(int(v) for v in origin), c3,
                           symmetry=int(symmetry), vectors=vectors,
                           dtype=dtype, out_layout=out_layout, layout=layout)
        key = (dataset, layout)
        if key not in self._channels:
            self._channels[key] = describe(self.path, dataset, layout)["channels"]
        ch = self._channels[key]
        a = np.frombuffer(raw, dtype=_NP_DTYPES[dtype])
        shape = (ch, *c3) if out_layout == "ncdhw" else (*c3, ch)
        return a.reshape(shape)

    def close(self) -> None:
        self._r.close()

    def __enter__(self) -> "Reader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
