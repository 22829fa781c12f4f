"""mpi4py communicators for the C library: the same MPI library or nothing.

slabfeed takes a communicator as its Fortran handle (``comm.py2f()``),
which the C side turns back with ``MPI_Comm_f2c``: portable across MPI
implementations and free of mpi4py's C API. That only means something when
mpi4py and slabfeed use the very same MPI library. Three facts decide it:

- the MPI slabfeed was compiled against (``_slabfeed.mpi_build``, from the
  macros of its mpi.h: fixed at build time, whatever the process loads);
- the library slabfeed's MPI calls reach (``mpi_library_version()``; the
  extension binds all its symbols when it is loaded). That is the library
  it is linked with, unless another MPI was loaded globally before it, as
  mpi4py does with Open MPI: then it is that one, and an extension built on
  MPICH's mpi.h would hand MPICH handles to Open MPI;
- the library mpi4py's calls reach (``MPI.Get_library_version()``).

The compiled-against family (Open MPI, or MPICH and its ABI-compatible
derivatives) must be the family of both runtime libraries, and the two
runtime libraries must be the same. Whatever the import order, one of these
fails for mismatched libraries. It is checked at import when mpi4py.MPI is
already imported (or another MPI already took slabfeed's calls) and before
the first call that takes a communicator; then MPI must be initialised,
and initialised in the library slabfeed's calls reach (a second copy of
the library in the process would not be).
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional

from . import _slabfeed

if TYPE_CHECKING:  # pragma: no cover
    from mpi4py import MPI

_checked = False

def _norm(s: str) -> str:
    """A library version string without its NUL (Open MPI counts it) and
    surrounding blanks."""
    return s.split("\0", 1)[0].strip()


def _first_line(s: str) -> str:
    """What names a library: the first line of its version string, up to
    a comma ('Open MPI v4.1.4', 'MPICH Version: 4.0.2')."""
    s = _norm(s)
    return " ".join(s.splitlines()[0].split(",")[0].split()) if s else "(empty)"


def _family(version: str) -> Optional[str]:
    """The ABI family of a library version string, None when unknown."""
    v = version.lower()
    if "open mpi" in v or "openmpi" in v:
        return "openmpi"
    if "microsoft mpi" in v or "ms-mpi" in v:
        return "msmpi"
    if any(k in v for k in ("mpich", "intel(r) mpi", "intel mpi", "mvapich")):
        return "mpich"
    return None


def _vendor_family(MPI: Any) -> Optional[str]:
    """The family of the MPI mpi4py was compiled against (MPI.get_vendor)."""
    try:
        name = str(MPI.get_vendor()[0]).lower()
    except Exception:  # pragma: no cover - an mpi4py without get_vendor
        return None
    if name == "open mpi":
        return "openmpi"
    if name == "microsoft mpi":
        return "msmpi"
    if "mpich" in name or "mvapich" in name or name == "intel mpi":
        return "mpich"
    return None


def _ours() -> str:
    """slabfeed's MPI as built: vendor, version, mpicc and library."""
    b = _slabfeed.mpi_build
    what = f"{b['vendor']} {b['version']}".strip()
    details = [f"mpicc {b['mpicc']}"] if b["mpicc"] else []
    if b["libraries"]:
        details.append(b["libraries"])
    return f"{what} ({', '.join(details)})" if details else what


def _theirs(MPI: Any) -> str:
    """mpi4py's MPI: its library version, mpi4py's version and mpicc."""
    details = []
    try:
        import mpi4py

        details.append(f"mpi4py {mpi4py.__version__}")
        mpicc = mpi4py.get_config().get("mpicc")
        if mpicc:
            details.append(f"mpicc {mpicc}")
    except Exception:  # pragma: no cover - a partial mpi4py
        pass
    what = _first_line(MPI.Get_library_version())
    return f"{what} ({', '.join(details)})" if details else what


def _reached() -> str:
    """The library slabfeed's MPI calls reach, and its file."""
    where = _slabfeed.mpi_runtime_library()
    what = _first_line(_slabfeed.mpi_library_version())
    return f"{what} ({where})" if where else what


def _fix(MPI: Any = None) -> str:
    b = _slabfeed.mpi_build
    mpicc = b["mpicc"] or "<the mpicc of slabfeed's MPI>"
    theirs = "<the mpicc of that MPI>"
    if MPI is not None:
        try:
            import mpi4py

            theirs = mpi4py.get_config().get("mpicc") or theirs
        except Exception:  # pragma: no cover
            pass
    return ("One MPI library per process: build mpi4py with slabfeed's MPI "
            f"(env MPICC={mpicc} {sys.executable or 'python3'} -m pip "
            "install --no-binary=mpi4py --force-reinstall mpi4py) or build "
            "slabfeed with mpi4py's MPI "
            f"(cmake -DMPI_C_COMPILER={theirs} with that MPI's parallel HDF5, "
            "-DHDF5_C_COMPILER_EXECUTABLE=<its h5pcc>)"
            if MPI is not None else
            "One MPI library per process: build slabfeed with the MPI that "
            "the other module loads (cmake -DMPI_C_COMPILER=<its mpicc>), or "
            "keep that module out of this process")


def _compare(MPI: Any = None) -> None:
    """Raise slabfeed.MPIError when the facts of the module docstring
    disagree; MPI is mpi4py.MPI, or None to check slabfeed alone."""
    built = _slabfeed.mpi_build["family"]
    reached = _norm(_slabfeed.mpi_library_version())
    fr = _family(reached)
    if MPI is None:
        if built and fr and fr != built:
            raise _slabfeed.MPIError(
                "slabfeed: different MPI libraries in this process: slabfeed "
                f"was built with {_ours()}, but its MPI calls reach "
                f"{_reached()}, which another module loaded globally before "
                f"slabfeed. {_fix()}")
        return
    theirs = _norm(MPI.Get_library_version())
    fm = _family(theirs) or _vendor_family(MPI)
    hijacked = bool(built and fr and fr != built)
    if not (hijacked or (built and fm and fm != built) or reached != theirs):
        return
    note = (": mpi4py loaded it globally before slabfeed, and slabfeed, "
            f"compiled with {_slabfeed.mpi_build['vendor']}'s mpi.h, cannot "
            "call it" if hijacked else "")
    raise _slabfeed.MPIError(
        "slabfeed: mpi4py and slabfeed use different MPI libraries: "
        f"mpi4py uses {_theirs(MPI)}; slabfeed was built with {_ours()} and "
        f"its MPI calls reach {_reached()}{note}. {_fix(MPI)}")


def check_at_import() -> None:
    """The check of import time: slabfeed's MPI against mpi4py's when
    mpi4py.MPI is already imported, or else against the library its calls
    reach. Raises slabfeed.MPIError."""
    _compare(sys.modules.get("mpi4py.MPI"))


def check_same_mpi(MPI: Any) -> None:
    """Raise slabfeed.MPIError unless mpi4py's MPI is slabfeed's MPI.

    Raises slabfeed.StateError when MPI is not initialised (mpi4py
    initialises it when ``mpi4py.MPI`` is imported, unless
    ``mpi4py.rc.initialize`` is False) or already finalised.
    """
    global _checked
    if _checked:
        return
    _compare(MPI)
    if not MPI.Is_initialized() or MPI.Is_finalized():
        raise _slabfeed.StateError(
            "slabfeed: MPI is not initialised (or already finalised): "
            "import mpi4py.MPI first, with mpi4py.rc.initialize left True, "
            "or call MPI.Init_thread()")
    if not _slabfeed.mpi_is_active():
        raise _slabfeed.MPIError(
            "slabfeed: mpi4py initialised MPI but the MPI library slabfeed "
            f"is linked with is not initialised: two copies of the MPI "
            f"library are loaded (slabfeed's calls reach {_reached()}; check "
            "`ldd` of slabfeed/_slabfeed*.so and of mpi4py/MPI*.so)")
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
