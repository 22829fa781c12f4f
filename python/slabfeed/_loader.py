"""slabfeed.Loader: the C loader behind an mpi4py communicator."""
from __future__ import annotations

import atexit
import itertools
import operator
import os
import warnings
from typing import TYPE_CHECKING, Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union

from . import _slabfeed
from ._mpi import comm_handle
from ._slabfeed import ArgumentError, Batch

if TYPE_CHECKING:  # pragma: no cover
    from mpi4py import MPI

IntOr3 = Union[int, Sequence[int]]
Vectors = Sequence[Sequence[int]]

# The C loaders of open Loaders, in the order they were opened (keys from a
# counter: never reused, so the order is the creation order on every rank):
# closed at interpreter exit (before mpi4py finalises MPI), in that order on
# every rank. Strong references: the close is collective, so a C loader is
# never closed by the garbage collector (a Loader dropped without close()
# stays open until close() or the exit; the C object would only warn and
# leak it); close() removes the entry.
_open: "Dict[int, Any]" = {}
_next_key = itertools.count()


@atexit.register
def _close_open_loaders() -> None:
    while _open:
        key = next(iter(_open))
        c = _open.pop(key)
        try:
            c.close()
        except Exception:  # MPI already finalised: nothing to do
            pass


class Loader:
    """Random augmented crops of one HDF5 volume, one batch per rank per step.

    ``Loader(comm, path=..., input=..., ...)`` opens the volume collectively
    over ``comm`` (an mpi4py intracommunicator; ``None`` means
    ``MPI.COMM_WORLD``), which must use the MPI library slabfeed was built
    with (checked: ``MPIError`` otherwise). Import ``mpi4py.MPI`` before
    opening a loader; slabfeed never initialises MPI itself. The keywords are
    the fields of the C ``slabfeed_config`` (``include/slabfeed.h``), with
    the C defaults:

    path, input, target
        HDF5 file and dataset names; ``target=None`` loads the input only.
    layout
        file layout of both datasets: ``'auto'`` (from the shape), ``'cf'``
        (C,Z,Y,X) or ``'cl'`` (Z,Y,X,C).
    crop
        crop edge, an int or (z, y, x).
    batch
        local batch B of this rank; the global batch is B * comm.size.
    seed
        sampler seed: the sample stream is a pure function of (seed,
        epoch, sample), the same for any number of ranks.
    symmetries
        ``'all'`` (48), ``'rotations'`` (24) or ``'none'``.
    input_vectors, target_vectors
        vector groups, e.g. ``[(1, 2, 3)]``: channels holding the z, y, x
        components of a vector, rotated with the crop.
    dtype
        ``'f32'``, ``'f16'`` or ``'bf16'`` (round to nearest even).
    out_layout
        ``'ncdhw'`` (B,C,D,H,W) or ``'ndhwc'`` (B,D,H,W,C).
    device
        -1 for host batches, else the CUDA device ordinal of the batches.
    prefetch
        depth of the batch ring (1..64).
    halo
        z-planes copied on each side of a rank's slab.
    rank_per_node
        ``None``: from ``SLABFEED_RANK_PER_NODE``; ``True``/``False``.
    steps_per_epoch
        ``None``: the fewest steps whose crops cover the box once.
    group_nodes
        nodes per replication group: ``0`` the smallest group whose share
        fits ``node_memory`` (or ``SLABFEED_GROUP_NODES``), ``-1`` all
        nodes, ``k`` forced.
    node_memory
        bytes of slab store one node may hold; ``0``: half the node's
        memory less 2 GiB per rank.
    locality
        ``True``: each rank draws its crop origins in its node's z-range,
        so no crop byte crosses nodes (each global batch is stratified in
        z).

    Use: ``for batch in loader`` runs to the end of the current epoch (the
    position then is the next epoch's step 0); ``loader.next()`` for
    step-based loops; ``len(loader)`` is the number of steps per epoch.
    ``state_dict()`` / ``load_state_dict()`` resume exactly.

    Validity (the rule of the C library): a batch and its tensors may be
    used until the next ``next()``, ``seek()`` or ``close()``; after that
    they raise ``StaleBatchError`` rather than read reused memory. Arrays
    made with ``from_dlpack`` keep the raw pointer and are not checked:
    a device batch may be used by work on the stream it was handed to
    until the next ``next()``; a host batch stays valid until the
    ``prefetch``-th following ``next()``; both end at ``seek()`` and
    ``close()``.

    ``close()`` is collective (or use ``with``). Errors are
    ``slabfeed.Error`` subclasses that also derive from the matching
    built-in (``ArgumentError`` is a ``ValueError``, ``FileIOError`` an
    ``OSError``...); errors at open are agreed on by all ranks. A loader
    used in a forked child raises ``ForkedError``.
    """

    def __init__(
        self,
        comm: "Optional[MPI.Intracomm]" = None,
        *,
        path: Union[str, "os.PathLike[str]"],
        input: str,
        target: Optional[str] = None,
        layout: str = "auto",
        crop: IntOr3 = 64,
        batch: int = 1,
        seed: int = 0,
        symmetries: str = "all",
        input_vectors: Vectors = (),
        target_vectors: Vectors = (),
        dtype: str = "f32",
        out_layout: str = "ncdhw",
        device: int = -1,
        prefetch: int = 2,
        halo: int = 0,
        rank_per_node: Optional[bool] = None,
        steps_per_epoch: Optional[int] = None,
        group_nodes: int = 0,
        node_memory: int = 0,
        locality: bool = False,
    ) -> None:
        from mpi4py import MPI

        fint = comm_handle(comm)
        c = MPI.COMM_WORLD if comm is None else comm
        self.rank: int = c.Get_rank()
        self.size: int = c.Get_size()
        self._key = -1
        self._c = _slabfeed.Loader(
            fint, os.fspath(path), input, target=target, layout=layout,
            crop=crop, batch=batch, seed=seed, symmetries=symmetries,
            input_vectors=input_vectors, target_vectors=target_vectors,
            dtype=dtype, out_layout=out_layout, device=device,
            prefetch=prefetch, halo=halo,
            rank_per_node=-1 if rank_per_node is None else int(bool(rank_per_node)),
            steps_per_epoch=0 if steps_per_epoch is None else steps_per_epoch,
            group_nodes=group_nodes, node_memory=node_memory,
            locality=int(bool(locality)))
        # Registered at once (nothing in between may fail: the close is
        # collective, and a loader missing here would not be closed at exit).
        self._key = next(_next_key)
        _open[self._key] = self._c
        # The C side took crop (an int or 3 ints, numpy ints included).
        try:
            crop3: Tuple[int, ...] = (operator.index(crop),) * 3  # type: ignore[arg-type]
        except TypeError:
            crop3 = tuple(operator.index(v) for v in crop)  # type: ignore[union-attr]
        self.options: Dict[str, Any] = dict(
            path=os.fspath(path), input=input, target=target, layout=layout,
            crop=crop3, batch=batch, seed=seed, symmetries=symmetries,
            input_vectors=input_vectors, target_vectors=target_vectors,
            dtype=dtype, out_layout=out_layout, device=device,
            prefetch=prefetch, halo=halo, rank_per_node=rank_per_node,
            steps_per_epoch=self._c.steps_per_epoch, group_nodes=group_nodes,
            node_memory=node_memory, locality=bool(locality))
        """The options this loader was opened with (steps_per_epoch as in
        effect)."""

    # ---- batches -------------------------------------------------------------

    def next(self, stream: Any = None) -> Batch:
        """The next batch of this rank; the previous one becomes stale.

        Device loaders: `stream` (an int ``cudaStream_t``, a
        ``torch.cuda.Stream``, or an object with ``__cuda_stream__``) is
        made to wait on the batch without a host wait, so work queued on it
        may use the batch at once. ``None`` hands the batch to the loader's
        own stream; ``__dlpack__(stream=s)`` (what ``torch.from_dlpack``
        calls with the current stream) then orders `s`. Host loaders ignore
        `stream`. The GIL is released while the call waits.
        """
        return self._c.next(stream)

    def placement(self) -> str:
        """One line saying how the volume was placed at open (nodes,
        replication groups, memory against the budget, how crop pieces
        from other nodes travel): print it from one rank."""
        return self._c.placement()

    def __iter__(self) -> Iterator[Batch]:
        """Batches up to the end of the current epoch (all of it from step 0,
        the rest of it after a mid-epoch resume)."""
        epoch = self._c.tell()[0]
        while self._c.tell()[0] == epoch:
            yield self._c.next(None)

    def __len__(self) -> int:
        """Steps per epoch."""
        return self._c.steps_per_epoch

    @property
    def steps_per_epoch(self) -> int:
        """Steps per epoch in effect."""
        return self._c.steps_per_epoch

    @property
    def device(self) -> int:
        """-1 for host batches, else the CUDA device ordinal."""
        return self._c.device

    @property
    def closed(self) -> bool:
        return self._c.closed

    # ---- position and resume ----------------------------------------------------

    def tell(self) -> Tuple[int, int]:
        """(epoch, step) of the batch the next ``next()`` returns."""
        return self._c.tell()

    def seek(self, epoch: int, step: int = 0) -> None:
        """Make the next ``next()`` return the batch of (epoch, step).

        Call it at the same point on every rank. Batches handed out before
        become stale. ``ArgumentError`` when step >= steps per epoch.
        """
        self._c.seek(epoch, step)

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` unless the loader is already in it.

        Like ``DistributedSampler.set_epoch``: call it at the start of each
        epoch. A position inside `epoch` (after ``load_state_dict`` of a
        mid-epoch checkpoint) is kept, so the usual resume loop just works.
        """
        if self._c.tell()[0] != epoch:
            self._c.seek(epoch, 0)

    _STATE_KEYS = ("seed", "global_batch", "steps_per_epoch", "crop", "symmetries")

    def _stream_identity(self) -> Dict[str, Any]:
        o = self.options
        return {"seed": o["seed"], "global_batch": o["batch"] * self.size,
                "steps_per_epoch": o["steps_per_epoch"], "crop": list(o["crop"]),
                "symmetries": o["symmetries"]}

    def state_dict(self) -> Dict[str, Any]:
        """The position to resume from, plus what defines the sample stream.

        ``{'epoch', 'step', 'seed', 'global_batch', 'steps_per_epoch',
        'crop', 'symmetries'}``: plain ints, lists and str (``torch.save``
        and ``json`` both take it). Equal on every rank when called at the
        same step.
        """
        epoch, step = self._c.tell()
        return {"epoch": epoch, "step": step, **self._stream_identity()}

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> None:
        """Resume at ``state['epoch'], state['step']`` (exactly).

        With `strict`, the options that define the sample stream (seed,
        global batch = batch x ranks, steps per epoch, crop, symmetries)
        must equal the checkpoint's, else ``ArgumentError`` names the
        differences: the same (epoch, step) would be other samples.
        """
        if strict:
            mine = self._stream_identity()
            diff = [f"{k}: checkpoint {state.get(k)!r}, loader {mine[k]!r}"
                    for k in self._STATE_KEYS
                    if k in state and _norm(state[k]) != _norm(mine[k])]
            if diff:
                raise ArgumentError(
                    "slabfeed: the checkpoint's sample stream differs from "
                    "this loader's (" + "; ".join(diff) + "); pass "
                    "strict=False to resume at its (epoch, step) anyway")
        self._c.seek(int(state["epoch"]), int(state["step"]))

    # ---- the rest ------------------------------------------------------------------

    def stats(self) -> Dict[str, Any]:
        """This rank's counters and times since open (``slabfeed_stats``):
        batches, samples, bytes_own/node/remote/out, t_read, t_plan,
        t_gather, t_h2d, t_transform, t_wait (exposed wait in next, s),
        slab_bytes, staging_bytes, loader_thread, remote_gets, remote_runs,
        and the placement: nodes, group_nodes, groups, group, node_budget,
        node_store_bytes, replica_bytes."""
        return self._c.stats()

    def close(self) -> None:
        """Release everything (collective: call it on every rank).

        Idempotent; a no-op in a forked child. Batches become stale.
        """
        self._c.close()
        _open.pop(self._key, None)

    def __del__(self) -> None:
        # The C loader stays in _open (closed at exit, collectively): only
        # a warning here, never a close.
        try:
            c = self.__dict__.get("_c")
            if c is not None and not c.closed and self._key in _open:
                warnings.warn("slabfeed: a Loader was dropped while open; it "
                              "stays open until the process exit (close() is "
                              "collective: call it on every rank, or use "
                              "`with`)", ResourceWarning, stacklevel=2)
        except Exception:  # interpreter shutdown
            pass

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._c.closed:
            return "<slabfeed.Loader closed>"
        e, s = self._c.tell()
        o = self.options
        return (f"<slabfeed.Loader {o['path']!r} {o['input']}->{o['target']} "
                f"crop={o['crop']} batch={o['batch']}x{self.size} "
                f"dtype={o['dtype']} device={o['device']} at epoch {e} step {s} "
                f"of {self.steps_per_epoch}>")


def _norm(v: Any) -> Any:
    return list(v) if isinstance(v, (tuple, list)) else v
