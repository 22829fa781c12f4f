"""mpi4py communicators for the C library: the same MPI library or nothing.

slabfeed takes a communicator as its Fortran handle (``comm.py2f()``),
which the C side turns back with ``MPI_Comm_f2c``: portable across MPI
implementations and free of mpi4py's C API. That only means something when
mpi4py and slabfeed use the very same MPI library, which is checked once:
the library version strings must be equal, and the MPI that slabfeed is
linked with must see itself initialised (a second copy of an MPI library in
the process would not).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _slabfeed

if TYPE_CHECKING:  # pragma: no cover
    from mpi4py import MPI

_checked = False


def _first_line(s: str) -> str:
    return s.strip().splitlines()[0] if s.strip() else "(empty)"


def check_same_mpi(MPI: Any) -> None:
    """Raise slabfeed.MPIError unless mpi4py's MPI is slabfeed's MPI.

    Raises slabfeed.StateError when MPI is not initialised (mpi4py
    initialises it when ``mpi4py.MPI`` is imported, unless
    ``mpi4py.rc.initialize`` is False) or already finalised.
    """
    global _checked
    if _checked:
        return
    theirs = MPI.Get_library_version()
    ours = _slabfeed.mpi_library_version()
    if theirs.strip() != ours.strip():
        raise _slabfeed.MPIError(
            "slabfeed: mpi4py and slabfeed use different MPI libraries: "
            f"mpi4py has {_first_line(theirs)!r}, slabfeed was built with "
            f"{_first_line(ours)!r}. Build mpi4py against slabfeed's MPI "
            "(env MPICC=<its mpicc> pip install --no-binary=mpi4py mpi4py) "
            "or build slabfeed with mpi4py's MPI (mpi4py.get_config())")
    if not MPI.Is_initialized() or MPI.Is_finalized():
        raise _slabfeed.StateError(
            "slabfeed: MPI is not initialised (or already finalised): "
            "import mpi4py.MPI first, with mpi4py.rc.initialize left True, "
            "or call MPI.Init_thread()")
    if not _slabfeed.mpi_is_active():
        raise _slabfeed.MPIError(
            "slabfeed: mpi4py initialised MPI but the MPI library slabfeed "
            "is linked with is not initialised: two copies of the MPI "
            "library are loaded (check `ldd` of slabfeed/_slabfeed*.so and "
            "of mpi4py/MPI*.so)")
    _checked = True


def comm_handle(comm: "MPI.Comm | None") -> int:
    """The Fortran handle of `comm` (MPI.COMM_WORLD when None), checked.

    Raises TypeError for anything but an mpi4py intracommunicator,
    ValueError for MPI.COMM_NULL, and the errors of check_same_mpi.
    """
    from mpi4py import MPI

    if comm is None:
        comm = MPI.COMM_WORLD
    if not isinstance(comm, MPI.Intracomm):
        raise TypeError("slabfeed: comm must be an mpi4py intracommunicator "
                        f"(e.g. MPI.COMM_WORLD), not {type(comm).__name__}")
    if comm == MPI.COMM_NULL:
        raise ValueError("slabfeed: comm is MPI.COMM_NULL")
    check_same_mpi(MPI)
    return int(comm.py2f())
