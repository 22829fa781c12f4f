"""slabfeed.Writer: the outputs of a tiled pass written back as one HDF5
dataset (the C writer, ``slabfeed_writer_*``)."""
from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Optional, Sequence, Tuple, Union

from . import _slabfeed
from ._loader import Loader, _next_key, _open
from ._mpi import comm_handle
from ._slabfeed import ArgumentError, Batch

__all__ = ["Writer"]


class _AbortAtExit:
    """What the exit hook of ``_loader`` calls ``close()`` on: a writer
    still open at a normal interpreter exit is aborted (collectively, in
    creation order with the loaders), never written."""

    __slots__ = ("c",)

    def __init__(self, c: Any) -> None:
        self.c = c

    def close(self) -> None:
        self.c.abort()


def _loader_parts(loader: Any) -> Tuple[Any, Any]:
    """The C loader and the mpi4py communicator of a slabfeed.Loader or a
    slabfeed.torch.TorchLoader."""
    inner = loader if isinstance(loader, Loader) else getattr(loader, "loader", None)
    if not isinstance(inner, Loader):
        raise TypeError("slabfeed: Writer needs the loader of a tiled pass (a "
                        "slabfeed.Loader or slabfeed.torch.TorchLoader opened "
                        f"with tile > 0), not {type(loader).__name__}")
    return inner._c, inner._comm


def _producer_stream(output: Any) -> Optional[int]:
    """The stream a CUDA output was written on, by its framework: torch's
    current stream of the tensor's device (CuPy's current stream for a
    CuPy array); None for host memory, and for slabfeed's own Tensor (the
    extension puts it on the stream its batch was handed to, where it is
    ready). A framework's default stream (handle 0) is the legacy default
    stream, 1 in DLPack's numbering."""
    if isinstance(output, _slabfeed.Tensor):
        return None
    try:
        dev_type = output.__dlpack_device__()[0]
    except Exception:  # not DLPack: the extension raises the clear error
        return None
    if dev_type != 2:  # kDLCUDA
        return None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(output, torch.Tensor):
        return torch.cuda.current_stream(output.device).cuda_stream or 1
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(output, cupy.ndarray):
        with output.device:
            return cupy.cuda.get_current_stream().ptr or 1
    raise ArgumentError(
        "slabfeed: Writer.put: the output is CUDA memory of "
        f"{type(output).__module__}.{type(output).__name__}, whose current "
        "stream slabfeed does not know: pass stream= (the cudaStream_t the "
        "output was written on, as an int, or a stream object)")


class Writer:
    """The outputs of a tiled pass written back as one HDF5 dataset.

    ``Writer(loader, path, dataset="prediction", channels=0, layout="cf",
    dtype="f32", chunk=None, overwrite=False, like="target")`` opens the
    writer of `loader`'s tiled pass (a ``slabfeed.Loader`` or
    ``slabfeed.torch.TorchLoader`` opened with ``tile`` > 0), collectively
    over the loader's communicator. The output dataset covers the pass's
    region (the box when it has none): output voxel (z, y, x) is box voxel
    ``region origin + (z, y, x)``, periodic; `shape` gives it as in the
    file, ``(C, Z, Y, X)`` for layout ``'cf'``, ``(Z, Y, X, C)`` for
    ``'cl'``. The file is written aside and renamed over `path` only when
    complete; an existing file is replaced only with `overwrite` (the
    loader's input file never).

    - `channels`: output channels; 0 takes those of `like`.
    - `like`: which dataset of the pass the outputs are like, whose vector
      groups (and normalisation) ``put`` undoes: ``'target'`` (the input
      when the loader has no target), ``'input'``, or ``'none'`` (plain
      channels).
    - `dtype`: ``'f32'`` or ``'f16'`` in the file; `chunk`: None
      (contiguous), an int or (z, y, x) chunk edges.

    ``put(batch, output)`` stores the outputs of one batch, ``close()``
    writes the file (collective), ``abort()`` discards it (collective).
    With ``with``: the block ending normally closes, ending on an exception
    aborts. Arguments refused on any rank raise the same error on every
    rank (naming that rank) before the collective open; errors of the open
    and the close are agreed by all ranks.
    """

    def __init__(self, loader: Any, path: Union[str, "os.PathLike[str]"],
                 dataset: str = "prediction", channels: int = 0,
                 layout: str = "cf", dtype: str = "f32",
                 chunk: Union[None, int, Sequence[int]] = None,
                 overwrite: bool = False, like: str = "target") -> None:
        c, comm = _loader_parts(loader)
        self._key = -1
        self._c = _slabfeed.Writer(comm_handle(comm), c, path, dataset, channels,
                                   layout=layout, dtype=dtype, chunk=chunk,
                                   overwrite=bool(overwrite), like=like)
        # Registered at once: a writer still open at a normal exit is
        # aborted there, collectively, in order with the loaders.
        self._key = next(_next_key)
        _open[self._key] = _AbortAtExit(self._c)

    # ---- puts ----------------------------------------------------------------

    def put(self, batch: Batch, output: Any, stream: Any = None, *,
            layout: str = "ncdhw") -> None:
        """Store the outputs of one batch of the pass (not collective).

        `batch` is the ``slabfeed.Batch`` the outputs were computed from
        (``Loader.next()``; with a ``TorchLoader``, its ``batch``
        attribute), used before the loader's next ``next()``: a stale batch
        raises ``StaleBatchError``. `output` is anything with ``__dlpack__``
        and ``__dlpack_device__`` (torch tensors on the CPU or CUDA, numpy
        arrays), float32, float16 or bfloat16, shaped ``(B, C, D, H, W)``
        (``layout='ndhwc'``: ``(B, D, H, W, C)``) in any dense strides
        (``torch.channels_last_3d`` too), with edge ``tile`` (the tiles) or
        ``tile + 2 pad`` (the input crops: their centre is taken), in the
        frame of the batch's symmetry: the writer undoes the symmetry (the
        vector channels of `like` as vectors) and the normalisation. Only
        the first ``batch.count`` slots are used.

        CUDA outputs: `stream` is the stream the output was written on (an
        int ``cudaStream_t``, a ``torch.cuda.Stream``, or an object with
        ``__cuda_stream__``); None takes torch's current stream of the
        output's device, and for slabfeed's own ``Tensor`` (``batch.input``,
        ``batch.target`` of a device batch) the stream its batch was handed
        to by ``next()``, where it is ready; CuPy's current stream for a
        CuPy array. CUDA memory of any other type needs `stream` (slabfeed
        does not know its current stream: ``ArgumentError``). The output
        is exported with ``__dlpack__(stream=...)``, so its producer orders its work before
        that stream, and the writer's own stream waits for it; there is no
        device synchronisation. The output may be reused when put returns.

        A refused put (``ArgumentError`` for a wrong shape, dtype or
        device, a batch of another pass; ``StaleBatchError``; ``TypeError``)
        stores nothing and may be retried; a put that failed while storing
        makes ``close()`` fail on every rank (nothing is written). numpy
        before 2.0 exports no read-only array (those of
        ``numpy.from_dlpack``): pass the batch's Tensor or a copy.
        """
        if not isinstance(batch, Batch) and hasattr(batch, "meta") and isinstance(batch, tuple):
            raise TypeError("slabfeed: Writer.put takes the slabfeed.Batch, not a "
                            "TorchBatch: pass TorchLoader.batch (the batch of its "
                            "last next())")
        if stream is None:
            stream = _producer_stream(output)
        self._c.put(batch, output, stream, layout)

    # ---- the end -------------------------------------------------------------

    def close(self) -> None:
        """Write the file (collective: call it on every rank).

        Checks that every voxel of the output was put exactly once, writes
        every rank's slab with one collective write, verifies the file and
        renames it over `path`. Raises the agreed error on every rank
        otherwise (also when a put raised on any rank, or a rank aborted),
        and no file is left under the name. A no-op after a close that
        succeeded.
        """
        try:
            self._c.close()
        finally:
            if self._c.closed:
                _open.pop(self._key, None)

    def abort(self) -> None:
        """Discard the output (collective: call it on every rank, or on some
        while the others call ``close()``, which then raises). Removes the
        partial file; a no-op once closed or aborted."""
        try:
            self._c.abort()
        finally:
            if self._c.closed:
                _open.pop(self._key, None)

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # Ending on an exception: abort, which meets the close of ranks
        # whose block ended normally (they raise; nothing is written).
        # Closed or aborted inside the block: nothing more.
        if self._c.closed:
            return
        if exc_type is not None:
            self.abort()
        else:
            self.close()

    def __del__(self) -> None:
        # The C writer stays in _open (aborted at a normal exit): only a
        # warning here, never a collective call.
        try:
            c = self.__dict__.get("_c")
            if c is not None and not c.closed and self._key in _open:
                warnings.warn("slabfeed: a Writer was dropped while open; "
                              "nothing is written, and it is aborted at the "
                              "process exit (close() is collective: call it on "
                              "every rank, or use `with`)", ResourceWarning,
                              stacklevel=2)
        except Exception:  # interpreter shutdown
            pass

    # ---- properties ----------------------------------------------------------

    @property
    def shape(self) -> Tuple[int, int, int, int]:
        """The output dataset's shape as in the file: (C, Z, Y, X) for
        layout 'cf', (Z, Y, X, C) for 'cl'."""
        return self._c.shape

    @property
    def z_range(self) -> Tuple[int, int]:
        """(z0, z1): the planes of the output this rank holds and writes."""
        return self._c.z_range

    @property
    def closed(self) -> bool:
        """True once closed or aborted."""
        return self._c.closed

    @property
    def state(self) -> str:
        """'open', 'closed' (the file is written), 'aborted' or 'failed'
        (close raised: nothing was written)."""
        return self._c.state

    @property
    def path(self) -> str:
        """The output file's name."""
        return self._c.path

    def __repr__(self) -> str:
        return f"<slabfeed.Writer {self.path!r} shape={self.shape} {self.state}>"
