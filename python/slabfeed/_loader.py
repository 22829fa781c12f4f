"""slabfeed.Loader: the C loader behind an mpi4py communicator."""
from __future__ import annotations

import atexit
import inspect
import itertools
import operator
import sys
import textwrap
import warnings
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Tuple

from . import _slabfeed
from ._mpi import comm_handle
from ._slabfeed import ArgumentError, Batch

if TYPE_CHECKING:  # pragma: no cover
    from mpi4py import MPI

# The C loaders of open Loaders (and the open slabfeed.Writers, whose entry
# aborts them), in the order they were opened (keys from a counter: never
# reused, so the order is the creation order on every rank): closed at
# interpreter exit (before mpi4py finalises MPI), in that order on every
# rank. Strong references: the close is collective, so a C loader is
# never closed by the garbage collector (a Loader dropped without close()
# stays open until close() or the exit; the C object would only warn and
# leak it); close() removes the entry. A close deferred during an exception
# (Loader.close) leaves its entry here.
_open: "Dict[int, Any]" = {}
_next_key = itertools.count()

# Set when mpi4py was told to abort at exit (python -m mpi4py after an
# uncaught exception or a non-zero SystemExit): see _watch_abort_status.
_aborting = False


def _watch_abort_status() -> None:
    """Learn when mpi4py is asked to call MPI_Abort at exit.

    ``python -m mpi4py`` catches what ends the script (an exception, a
    non-zero ``SystemExit``) and calls ``mpi4py.MPI._set_abort_status``, so
    that MPI_Abort ends the job after the atexit hooks. A SystemExit leaves
    no other trace an atexit hook can see, so the function is wrapped (once;
    where mpi4py has no such function, only ``sys.last_value`` tells)."""
    MPI = sys.modules.get("mpi4py.MPI")
    f = getattr(MPI, "_set_abort_status", None)
    if f is None or getattr(f, "_slabfeed_wrapper", False):
        return

    def _set_abort_status(status: Any) -> Any:
        global _aborting
        if status:
            _aborting = True
        return f(status)

    _set_abort_status._slabfeed_wrapper = True  # type: ignore[attr-defined]
    try:
        MPI._set_abort_status = _set_abort_status  # type: ignore[union-attr]
    except (AttributeError, TypeError):  # pragma: no cover
        pass


def _exit_is_abnormal() -> bool:
    """Whether the interpreter is ending because of an uncaught exception
    (KeyboardInterrupt from SIGINT included: Python stores it in
    ``sys.last_value``/``sys.last_exc`` before the atexit hooks run) or
    because mpi4py is about to call MPI_Abort: then other ranks may be
    inside a collective call that this rank will never make."""
    return (_aborting or getattr(sys, "last_value", None) is not None
            or getattr(sys, "last_exc", None) is not None)


def _handling_exception() -> bool:
    """Whether this thread is raising or handling an exception (a `finally`
    or `except` block, or code called from one)."""
    return sys.exc_info()[1] is not None


@atexit.register
def _close_open_loaders() -> None:
    # After an uncaught exception, a signal or an abort, another rank may be
    # waiting in a collective (a training step's allreduce) that this rank
    # will never reach, and slabfeed_close is collective: never enter it
    # then. The loaders are left to the process's end (MPI_Abort under
    # python -m mpi4py); a normal exit closes them collectively, in order.
    if _exit_is_abnormal():
        return
    while _open:
        key = next(iter(_open))
        c = _open.pop(key)
        try:
            c.close()
        except Exception:  # MPI already finalised: nothing to do
            pass


def _as_int(name: str, value: Any) -> int:
    """`value` as an int (anything with __index__: int, numpy integers),
    never a float or str truncated or parsed in silence."""
    if isinstance(value, bool):
        raise TypeError(f"slabfeed: {name} must be an integer, not {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"slabfeed: {name} must be an integer, not "
                        f"{value!r} ({type(value).__name__})") from None


class Loader:
    """Random augmented crops of one HDF5 volume, one batch per rank per step.

    ``Loader(comm, path=..., input=..., ...)`` opens the volume collectively
    over ``comm`` (an mpi4py intracommunicator; ``None`` means
    ``MPI.COMM_WORLD``), which must use the MPI library slabfeed was built
    with (checked: ``MPIError`` otherwise). Import ``mpi4py.MPI`` before
    opening a loader; slabfeed never initialises MPI itself.

    The keywords are the rows of the library's option table (the fields of
    the C ``slabfeed_config``, the ``--flags`` of the command-line tools;
    ``slabfeed._slabfeed.options()``), listed below with their defaults. Only
    the keywords given are passed on; ``None`` means "not given" (the
    default). ``path`` and ``input`` are required. The local batch is
    ``batch``: the global batch is ``batch * comm.size``, and the sample
    stream is a function of (seed, epoch, sample) only, the same for any
    number of ranks. A bad value on any rank raises the same error on every
    rank (naming that rank), before the collective open.

    <options>

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

    ``close()`` is collective (or use ``with``); it is deferred when
    called while an exception propagates (see ``close``), and the loaders
    still open at exit are closed collectively only when the interpreter
    exits normally: an exception or a signal on one rank never leaves it in
    a collective that the other ranks do not reach. Errors are
    ``slabfeed.Error`` subclasses that also derive from the matching
    built-in (``ArgumentError`` is a ``ValueError``, ``FileIOError`` an
    ``OSError``...); errors at open are agreed on by all ranks. A loader
    used in a forked child raises ``ForkedError``.
    """

    def __init__(self, comm: "Optional[MPI.Intracomm]" = None, **options: Any) -> None:
        # The signature help() shows is the table's (_signature below).
        from mpi4py import MPI

        fint = comm_handle(comm)
        self._key = -1
        c = MPI.COMM_WORLD if comm is None else comm
        self._comm = c  # for slabfeed.Writer's agreement before its open
        self.rank: int = c.Get_rank()
        self.size: int = c.Get_size()
        _watch_abort_status()
        self._c = _slabfeed.Loader(fint, **options)
        # Registered at once (nothing in between may fail: the close is
        # collective, and a loader missing here would not be closed at exit).
        self._key = next(_next_key)
        _open[self._key] = self._c
        self._deferred = False
        self.options: Dict[str, Any] = self._c.options
        """Every option of the table as this loader was opened with it: the
        defaults with the keywords given applied, as the library took them
        (``crop`` as (z, y, x), ``dtype`` by its name, vector groups as
        tuples), ``steps_per_epoch`` as in effect."""
        self.options["steps_per_epoch"] = self._c.steps_per_epoch

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

    def volumes(self) -> List[Tuple[str, Tuple[int, int, int]]]:
        """The volumes of the dataset as (path, (z, y, x)), in the order
        Batch.volume indexes: the path list's entries in order, patterns
        expanded and sorted, manifests line by line."""
        return self._c.volumes()

    def volume_params(self) -> List[Tuple[float, ...]]:
        """Each volume's parameters (the ``params`` option's names, in
        order, after ``params_norm``), in the order of ``volumes()``: the
        rows ``Batch.params`` carries per sample."""
        return self._c.volume_params()

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
        self._c.seek(_as_int("epoch", epoch), _as_int("step", step))

    def set_epoch(self, epoch: int) -> None:
        """Start `epoch` unless the loader is already in it.

        Like ``DistributedSampler.set_epoch``: call it at the start of each
        epoch. A position inside `epoch` (after ``load_state_dict`` of a
        mid-epoch checkpoint) is kept, so the usual resume loop just works.
        """
        epoch = _as_int("epoch", epoch)
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

        `state` is what ``state_dict()`` returned: ``epoch`` and ``step``
        are required integers (``ArgumentError`` names a missing key;
        ``TypeError`` refuses a float or a string, which would otherwise be
        truncated or parsed). With `strict`, the options that define the
        sample stream (seed, global batch = batch x ranks, steps per epoch,
        crop, symmetries) must equal the checkpoint's, else
        ``ArgumentError`` names the differences: the same (epoch, step)
        would be other samples.
        """
        if not isinstance(state, Mapping):
            raise TypeError("slabfeed: load_state_dict takes the dict of "
                            f"state_dict(), not {type(state).__name__}")
        missing = [k for k in ("epoch", "step") if k not in state]
        if missing:
            raise ArgumentError(
                "slabfeed: load_state_dict: the state has no "
                + " and no ".join(repr(k) for k in missing)
                + f" (keys: {sorted(map(str, state))}); it must be the dict "
                "of state_dict(): {'epoch', 'step', 'seed', 'global_batch', "
                "'steps_per_epoch', 'crop', 'symmetries'}")
        epoch = _as_int("state['epoch']", state["epoch"])
        step = _as_int("state['step']", state["step"])
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
        self._c.seek(epoch, step)

    # ---- the rest ------------------------------------------------------------------

    def stats(self) -> Dict[str, Any]:
        """This rank's counters and times since open (``slabfeed_stats``):
        batches, samples, bytes_own/node/remote/out, t_read, t_plan,
        t_gather, t_h2d, t_transform, t_wait (exposed wait in next, s),
        slab_bytes, staging_bytes, loader_thread, remote_gets, remote_runs,
        the placement: nodes, group_nodes, groups, group, node_budget,
        node_store_bytes, replica_bytes; device_slab_bytes,
        slab_released_bytes; and where the open's time went (0.12):
        t_open, of it t_open_context (waiting for the device's context),
        t_open_backend and, of that, t_open_register."""
        return self._c.stats()

    def close(self, force: bool = False) -> None:
        """Release everything (collective: call it on every rank).

        Idempotent; a no-op in a forked child. Batches become stale.

        Called while an exception is being raised or handled on this thread
        (from a ``finally`` or ``except`` block, or ``with`` ending on an
        exception), it does not close: the other ranks may be waiting in a
        collective call (a training step) that this rank will not reach, and
        the close would wait for them forever. The loader is then left open:
        closed collectively at a normal interpreter exit, or left to the
        process's end when the job aborts (``python -m mpi4py``). Pass
        ``force=True`` to close collectively anyway, in an ``except`` block
        that every rank enters alike (an error every rank got, e.g. one of
        slabfeed's agreed errors).
        """
        if not force and not self._c.closed and _handling_exception():
            self._deferred = True
            return
        self._c.close()
        _open.pop(self._key, None)
        self._deferred = False

    def __del__(self) -> None:
        # The C loader stays in _open (closed at exit, collectively): only
        # a warning here, never a close.
        try:
            c = self.__dict__.get("_c")
            if (c is not None and not c.closed and self._key in _open
                    and not self.__dict__.get("_deferred", False)):
                warnings.warn("slabfeed: a Loader was dropped while open; it "
                              "stays open until the process exit (close() is "
                              "collective: call it on every rank, or use "
                              "`with`)", ResourceWarning, stacklevel=2)
        except Exception:  # interpreter shutdown
            pass

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # Ending on an exception: deferred, as close() from a `finally`
        # (the exception may be this rank's alone). Ending normally: the
        # collective close, also inside an outer `except` block.
        if exc_type is not None:
            if not self._c.closed:
                self._deferred = True
            return
        self.close(force=True)

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


# ---- The options, from the library's table ---------------------------------------
# Loader's docstring and signature are made from _slabfeed.options() (the
# rows of slabfeed_option_at) at import: nothing here names an option.

# By kind: what a keyword takes (documentation) and its annotation.
_TAKES = {
    "string": "str or os.PathLike", "int": "int", "uint64": "int",
    "size": "int (bytes) or str ('200G')", "switch": "bool", "choice": "str",
    "edge": "int or (z, y, x)", "vectors": "[(k0, k1, k2), ...]",
    "regions": "[(z, y, x, dz, dy, dx), ...]",
    "norms": "[(shift, scale) or ('log', a, shift, scale), ...] or str",
}
_ANNOTATIONS = {
    "string": "Union[str, os.PathLike[str], None]", "int": "int", "uint64": "int",
    "size": "Union[int, str]", "switch": "Optional[bool]", "choice": "str",
    "edge": "Union[int, Sequence[int]]", "vectors": "Sequence[Sequence[int]]",
    "regions": "Sequence[Sequence[int]]",
    "norms": "Union[str, Sequence[Sequence[Any]]]",
}


def _takes(o: Any) -> str:
    if o.kind == "choice":
        names = [repr(c) for c in o.choices]
        text = ", ".join(names[:-1]) + " or " + names[-1]
        return text + (f" (or {', '.join(map(repr, o.aliases))})" if o.aliases else "")
    if o.kind == "switch":
        return "bool or None (auto)" if o.min == -1 else "bool"
    if o.kind in ("int", "uint64", "edge") and o.min is not None:
        if o.max is not None and o.max < 2 ** 31 - 1:
            return f"{_TAKES[o.kind]}, {o.min}..{o.max}"
        return f"{_TAKES[o.kind]} >= {o.min}"
    return _TAKES[o.kind]


def _options_doc(indent: str = "    ") -> str:
    """The option list of Loader's docstring: one entry per row."""
    lines: List[str] = []
    for o in _slabfeed.options():
        default = "required" if o.required else f"default {o.default!r}"
        flag = f"--{o.flag}" if o.kind == "choice" else f"--{o.flag} {o.metavar}"
        lines.append(f"{indent}{o.name} : {_takes(o)}; {default} ({flag})")
        lines += textwrap.wrap(o.help[:1].upper() + o.help[1:] + ".", 76,
                               initial_indent=indent + "    ",
                               subsequent_indent=indent + "    ")
    return "\n".join(lines) + "\n"


def _signature() -> inspect.Signature:
    """Loader.__init__ as help() shows it: comm, then every option by keyword
    with its default (the required ones without)."""
    P = inspect.Parameter
    params = [P("self", P.POSITIONAL_OR_KEYWORD),
              P("comm", P.POSITIONAL_OR_KEYWORD, default=None,
                annotation="Optional[MPI.Intracomm]")]
    for o in _slabfeed.options():
        note = _ANNOTATIONS[o.kind]
        if o.required:
            note = note.replace(", None]", "]")
        elif o.kind == "switch" and o.min != -1:
            note = "bool"
        params.append(P(o.name, P.KEYWORD_ONLY, default=P.empty if o.required else o.default,
                        annotation=note))
    return inspect.Signature(params, return_annotation="None")


if Loader.__doc__:  # not under python -OO
    Loader.__doc__ = Loader.__doc__.replace("    <options>\n", "    Options:\n\n" + _options_doc())
Loader.__init__.__signature__ = _signature()  # type: ignore[attr-defined]
