"""Helpers of the example scripts (examples/train_unet.py, examples/predict.py):
a user error reported once per job, and the loader's expansion of a
dataset's path list.

A user error (a bad argument, a missing file, one of slabfeed's errors at
open, which the library agrees on over the ranks) ends an MPI job of the
scripts the way the slabfeed apps end on a usage error: rank 0 prints one
line ``PROG: error: MESSAGE`` on stderr, every rank finalises MPI and exits
with status 2: no traceback, no MPI_Abort. The checks run inside
``agreed(comm)`` blocks: an error on any rank is raised as ``JobError`` on
every rank at the end of the block (the message of the lowest failing
rank, with "rank R: " in front when the ranks did not all fail alike), and
``run(prog, main, argv)`` turns it into the one line and the exit.
Anything else (an internal error) keeps its traceback and ends the job
with MPI_Abort, as an uncaught exception under ``python -m mpi4py`` does.

Not a public API: the examples' own helpers, kept in the package so that
both scripts share them.
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import os
import re
import sys
import traceback
from typing import Any, Callable, Iterator, List, Optional, Sequence

from ._slabfeed import (ArgumentError, FileIOError, FormatError,
                        UnsupportedError)

__all__ = ["UsageError", "JobError", "USER_ERRORS", "ArgumentParser", "agree",
           "agreed", "on_root", "run", "expand_paths"]


class UsageError(ValueError):
    """A user's mistake found by a script (an argument, a file): one line."""


class JobError(Exception):
    """A user error agreed on by every rank (raised on every rank alike)."""


# What counts as the user's mistake: the scripts' own, and slabfeed's errors
# of a bad option, a missing or unreadable file, a bad file, an unsupported
# combination (at open these are agreed on over the ranks by the library).
USER_ERRORS = (UsageError, ArgumentError, FileIOError, FormatError, UnsupportedError)


def _world() -> Any:
    from mpi4py import MPI

    return MPI.COMM_WORLD


def _message(e: BaseException) -> str:
    """One line: the exception's text, its line breaks folded."""
    text = " ".join(str(e).split())
    return text or type(e).__name__


class ArgumentParser(argparse.ArgumentParser):
    """argparse for an MPI job: an error raises UsageError (agreed and
    printed once by ``run``) instead of printing on every rank and exiting;
    help and version are printed by rank 0 only."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)

    def parse_args(self, args: Optional[Sequence[str]] = None,  # type: ignore[override]
                   namespace: Any = None) -> argparse.Namespace:
        """argparse's, with the C apps' hint when an unrecognised argument
        is an existing file: a glob pattern the shell expanded (``--file
        dir/*.h5`` unquoted gives ``--file dir/a.h5 dir/b.h5 ...``)."""
        ns, extra = self.parse_known_args(args, namespace)
        if extra:
            hint = ""
            if any(not a.startswith("-") and os.path.exists(a) for a in extra):
                hint = (" (a glob pattern the shell expanded? quote it, "
                        "--file 'dir/*.h5', or repeat --file for each file)")
            self.error(f"unrecognized arguments: {' '.join(extra)}{hint}")
        return ns

    def _print_message(self, message: str, file: Any = None) -> None:
        if _world().Get_rank() == 0:
            super()._print_message(message, file)


def agree(comm: Any, message: Optional[str]) -> Optional[str]:
    """Collective: None when no rank has a message, else the message of the
    lowest rank that has one, the same on every rank ("rank R: " in front
    when not every rank has that same message)."""
    rank, size = comm.Get_rank(), comm.Get_size()
    from mpi4py import MPI

    first = comm.allreduce(rank if message is not None else size, op=MPI.MIN)
    if first == size:
        return None
    text = comm.bcast(message if rank == first else None, root=first)
    alike = comm.allreduce(message == text, op=MPI.LAND)
    return text if alike or size == 1 else f"rank {first}: {text}"


@contextlib.contextmanager
def agreed(comm: Any) -> Iterator[None]:
    """Run the block on every rank; a user error (USER_ERRORS) on any rank
    ends the block on every rank with the same JobError. Other exceptions
    pass unchanged (the job then aborts: see ``run``)."""
    message: Optional[str] = None
    try:
        yield
    except USER_ERRORS as e:
        message = _message(e)
    text = agree(comm, message)
    if text is not None:
        raise JobError(text)


def on_root(comm: Any, check: Callable[[], Any]) -> Any:
    """Collective: `check()` on rank 0 only (a test of what rank 0 alone
    will do, e.g. write a file); its result, or its user error as
    JobError, on every rank alike."""
    out: Any = None
    err: Optional[str] = None
    if comm.Get_rank() == 0:
        try:
            out = check()
        except USER_ERRORS as e:
            err = _message(e)
    out, err = comm.bcast((out, err), root=0)
    if err is not None:
        raise JobError(err)
    return out


def run(prog: str, main: Callable[[Sequence[str]], Any], argv: Sequence[str]) -> None:
    """main(argv) as a script's entry point under an MPI launcher.

    JobError: rank 0 prints ``PROG: error: MESSAGE`` on stderr, every rank
    finalises MPI and exits with status 2 (no traceback, no MPI_Abort; under
    ``python -m mpi4py`` too: MPI is finalised before the exit, so mpi4py
    has nothing to abort). SystemExit (help: 0) leaves as usual. Anything
    else, KeyboardInterrupt from SIGINT included: the traceback and
    MPI_Abort, since other ranks may be waiting in a collective this rank
    will never reach."""
    from mpi4py import MPI

    try:
        main(argv)
    except JobError as e:
        sys.stdout.flush()
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(f"{prog}: error: {e}", file=sys.stderr, flush=True)
        if MPI.Is_initialized() and not MPI.Is_finalized():
            MPI.Finalize()
        sys.exit(2)
    except SystemExit:
        raise
    except BaseException:
        rank = MPI.COMM_WORLD.Get_rank()
        traceback.print_exc()
        print(f"{prog}: rank {rank} failed: aborting the job", file=sys.stderr, flush=True)
        sys.stdout.flush()
        MPI.COMM_WORLD.Abort(1)


# ---- the volumes of a path list, as the library finds them ----------------------


def load_checkpoint(load: Callable[[str], Any], path: str, flag: str,
                    keys: Sequence[str]) -> Any:
    """A checkpoint of examples/train_unet.py read with load(path) (e.g.
    torch.load with its map_location): a UsageError naming `flag` and
    path when the file is missing, unreadable, or not a dict holding
    every one of `keys`."""
    try:
        ck = load(path)
    except FileNotFoundError:
        raise UsageError(f"{flag} {path}: no such file") from None
    except Exception as e:
        raise UsageError(f"{flag} {path} is not a checkpoint of train_unet.py "
                         f"({type(e).__name__}: {e})") from None
    if not isinstance(ck, dict) or not set(keys) <= set(ck):
        raise UsageError(f"{flag} {path} is not a checkpoint of train_unet.py")
    return ck


def _manifest(path: str) -> List[str]:
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise UsageError(f"cannot read manifest '{path}': {e.strerror}") from None
    out: List[str] = []
    folder = os.path.dirname(path)
    for no, line in enumerate(lines, 1):
        if line.startswith("#"):
            continue
        if not line.strip():
            raise UsageError(f"manifest '{path}' line {no} is blank (one path per "
                             "line; '#' starts a comment)")
        # The path, then optional columns NAME=VALUE at the end of the line
        # (the library's rule: trailing blank-separated words with a '=',
        # never the first word).
        spans = [m.span() for m in re.finditer(r"[^ \t]+", line)]
        while len(spans) > 1 and "=" in line[spans[-1][0]:spans[-1][1]]:
            spans.pop()
        entry = line[:spans[-1][1]] if spans else line
        out.append(entry if entry.startswith("/") or not folder else
                   os.path.join(folder, entry))
    if not out:
        raise UsageError(f"manifest '{path}' lists no file")
    return out


def expand_paths(entries: Sequence[str]) -> List[str]:
    """The volumes of a dataset's path list, in the loader's order (what
    ``Loader.volumes()`` lists, without opening anything): each entry a
    path, a glob pattern (an entry with * ? or [: its matches, sorted) or
    @MANIFEST (its lines in order, relative to the manifest's folder unless
    absolute, '#' lines skipped, trailing NAME=VALUE columns dropped).
    UsageError for a pattern that matches nothing or a manifest that cannot
    be read. Not collective."""
    out: List[str] = []
    for item in entries:
        item = os.fspath(item)
        if not item:
            raise UsageError("an empty path in the list of volumes")
        if item.startswith("@"):
            out += _manifest(item[1:])
        elif any(c in item for c in "*?["):
            found = sorted(glob.glob(item))
            if not found:
                raise UsageError(f"pattern '{item}' matches no file")
            out += found
        else:
            out.append(item)
    return out
