"""slabfeed for PyTorch: batches as ``torch.Tensor`` s, zero copy, on the
current CUDA stream.

    from mpi4py import MPI
    from slabfeed.torch import TorchLoader

    loader = TorchLoader(path="box.h5", input="Nbody", target="Hydro",
                         crop=128, batch=2, dtype="bf16",
                         input_vectors=[(1, 2, 3)], target_vectors=[(1, 2, 3)])
    for epoch in range(start_epoch, epochs):
        loader.set_epoch(epoch)          # keeps a resumed mid-epoch position
        for x, y, meta in loader:        # x, y on torch.cuda.current_stream()
            loss = model(x, y) ...
    state = loader.state_dict()          # into the checkpoint

What PyTorch users know from ``DataLoader``: ``len()`` is steps per epoch,
iteration runs one epoch, ``state_dict`` / ``load_state_dict`` as in
``torchdata``'s StatefulDataLoader. Unlike ``DataLoader`` there are no worker
processes (slabfeed works in a loader thread or inside ``next``, never in a
forked process) and the tensors are views of the loader's memory:

A loader opened with ``tile`` > 0 yields the tiles of a pass (``meta.count``
real slots, ``meta.tile`` their geometry); ``slabfeed.Writer`` writes the
outputs back, from the ``slabfeed.Batch`` of the last step:

    with TorchLoader(path="box.h5", input="Nbody", target="Hydro", tile=64,
                     pad=16, batch=2) as loader, \
            slabfeed.Writer(loader, "pred.h5") as writer:
        for x, _, meta in loader:        # one pass
            writer.put(loader.batch, model(x))   # on the current stream

Validity: a yielded tensor may be used until the next batch is taken
(``next()`` or the next iteration step), ``seek()``/``set_epoch()`` to
another position, ``load_state_dict()`` or ``close()``. On the GPU this means
work queued on the current stream before the next batch is taken, which is
what a training step does. Keep a batch longer with ``x.clone()``.

Failures: ``close()`` and ``with`` are collective on the normal path only;
while an exception propagates (an error on this rank alone, a
KeyboardInterrupt) the close is deferred, and at exit after an uncaught
exception nothing collective is entered, so ``python -m mpi4py script.py``
aborts the whole job (see ``slabfeed.Loader.close``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterator, Mapping, NamedTuple, Optional, Tuple, Union

import torch

from ._loader import Loader
from ._slabfeed import Batch

if TYPE_CHECKING:  # pragma: no cover
    from mpi4py import MPI

__all__ = ["TorchLoader", "TorchBatch", "BatchMeta"]


class BatchMeta(NamedTuple):
    """Metadata of a batch (copies; valid forever)."""

    epoch: int
    step: int
    origin: Tuple[Tuple[int, int, int], ...]  # crop origins (z, y, x)
    symmetry: Tuple[int, ...]  # symmetry ids in [0, 48)
    sample: Tuple[int, ...]  # global sample indices within the epoch
    # Tiled passes: the real slots (the batch size but in the last batch),
    # and per slot (z, y, x, oz, oy, ox, nz, ny, nx): the tile's origin, the
    # origin of the part it owns relative to the tile, that part's extent.
    count: int = 0
    tile: Optional[Tuple[Tuple[int, ...], ...]] = None
    # The volume of each sample (index in loader.volumes()); origin is in
    # its coordinates.
    volume: Tuple[int, ...] = ()
    # The per-volume parameters (option params, after params_norm) of each
    # sample: a (B, K) float32 CPU tensor, or None without params. Move it
    # with .to(device) where the model takes it.
    params: Optional[torch.Tensor] = None


class TorchBatch(NamedTuple):
    """One batch: ``x, y, meta = batch``. `target` is None without a target."""

    input: torch.Tensor
    target: Optional[torch.Tensor]
    meta: BatchMeta


_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}


def _device_index(device: Union[None, str, int, torch.device]) -> int:
    """-1 for the CPU, else a CUDA device ordinal."""
    if device is None:
        return torch.cuda.current_device() if torch.cuda.is_available() else -1
    if isinstance(device, int):
        return device
    d = torch.device(device)
    if d.type == "cpu":
        return -1
    if d.type != "cuda":
        raise ValueError(f"slabfeed: device must be 'cpu' or 'cuda[:N]', not {device!r}")
    return torch.cuda.current_device() if d.index is None else d.index


class TorchLoader:
    """An iterable of ``TorchBatch(input, target, meta)`` over a slabfeed
    ``Loader``.

    ``TorchLoader(comm=None, *, device=None, **options)``: `options` are
    those of ``slabfeed.Loader`` (path, input, target, crop, batch, dtype,
    vectors...); `dtype` may also be a torch dtype. `device`: ``None`` (the
    current CUDA device when CUDA is available, else the CPU), ``'cpu'``,
    ``'cuda'``, ``'cuda:N'``, an int or a ``torch.device``. The CPU gets host
    batches (``torch.from_dlpack`` of host memory); a CUDA device gets
    device batches, handed to ``torch.cuda.current_stream(device)`` at each
    step, so they are ready for work queued on it with no host
    synchronisation.

    See the module docstring for how long a tensor stays valid.
    """

    def __init__(self, comm: "Optional[MPI.Intracomm]" = None, *,
                 device: Union[None, str, int, torch.device] = None,
                 **options: Any) -> None:
        dtype = options.get("dtype", "f32")
        if isinstance(dtype, torch.dtype):
            if dtype not in _DTYPES:
                raise ValueError(f"slabfeed: dtype must be float32, float16 or bfloat16, not {dtype}")
            options["dtype"] = _DTYPES[dtype]
        options["device"] = _device_index(device)
        self.loader = Loader(comm, **options)
        """The underlying slabfeed.Loader."""
        self.device = torch.device("cpu") if self.loader.device < 0 else \
            torch.device("cuda", self.loader.device)
        self.batch: Optional[Batch] = None
        """The slabfeed.Batch of the last next() (what slabfeed.Writer.put
        takes); stale, as its tensors, after the following next()."""

    def _convert(self, b: Batch) -> TorchBatch:
        x = torch.from_dlpack(b.input)
        t = b.target
        y = torch.from_dlpack(t) if t is not None else None
        self.batch = b
        p = b.params
        params = torch.tensor(p, dtype=torch.float32) if p is not None else None
        return TorchBatch(x, y, BatchMeta(b.epoch, b.step, b.origin, b.symmetry, b.sample,
                                          b.count, b.tile, b.volume, params))

    def next(self) -> TorchBatch:
        """The next batch (ready on the current stream of its device)."""
        if self.loader.device >= 0:
            return self._convert(self.loader.next(torch.cuda.current_stream(self.device)))
        return self._convert(self.loader.next())

    def __iter__(self) -> Iterator[TorchBatch]:
        """The rest of the current epoch."""
        tell = self.loader.tell
        epoch = tell()[0]
        while tell()[0] == epoch:
            yield self.next()

    def __len__(self) -> int:
        return len(self.loader)

    @property
    def steps_per_epoch(self) -> int:
        return self.loader.steps_per_epoch

    def tell(self) -> Tuple[int, int]:
        """(epoch, step) of the next batch."""
        return self.loader.tell()

    def seek(self, epoch: int, step: int = 0) -> None:
        self.loader.seek(epoch, step)

    def set_epoch(self, epoch: int) -> None:
        """As ``DistributedSampler.set_epoch``; keeps a position inside
        `epoch` (a resumed checkpoint)."""
        self.loader.set_epoch(epoch)

    def state_dict(self) -> Dict[str, Any]:
        return self.loader.state_dict()

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> None:
        self.loader.load_state_dict(state, strict)

    def stats(self) -> Dict[str, Any]:
        return self.loader.stats()

    def close(self, force: bool = False) -> None:
        """Collective; deferred while an exception propagates (see
        ``slabfeed.Loader.close``)."""
        self.loader.close(force)

    def __enter__(self) -> "TorchLoader":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.loader.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        return f"<slabfeed.torch.TorchLoader on {self.device}: {self.loader!r}>"
