"""Errors: slabfeed.Error subclasses that carry the status and the agreed
message and derive from the matching built-in, raised on every rank; the
MPI library check; a loader used after fork raises ForkedError."""
from __future__ import annotations

import os
import threading
import time
import warnings

import pytest
from conftest import COMM, VEC

import slabfeed
from slabfeed import _mpi


def open_loader(path: str, **kw) -> slabfeed.Loader:
    opts = dict(path=path, input="Nbody", target="Hydro", crop=8, batch=2,
                input_vectors=VEC, target_vectors=VEC)
    opts.update(kw)
    return slabfeed.Loader(COMM, **opts)


@pytest.mark.parametrize("cls,builtin,status,code", [
    (slabfeed.ArgumentError, ValueError, "SLABFEED_ERR_ARG", 1),
    (slabfeed.FileIOError, OSError, "SLABFEED_ERR_IO", 2),
    (slabfeed.FormatError, ValueError, "SLABFEED_ERR_FORMAT", 3),
    (slabfeed.MPIError, RuntimeError, "SLABFEED_ERR_MPI", 4),
    (slabfeed.CUDAError, RuntimeError, "SLABFEED_ERR_CUDA", 5),
    (slabfeed.NCCLError, RuntimeError, "SLABFEED_ERR_NCCL", 6),
    (slabfeed.OutOfMemoryError, MemoryError, "SLABFEED_ERR_NOMEM", 7),
    (slabfeed.StateError, RuntimeError, "SLABFEED_ERR_STATE", 8),
    (slabfeed.ForkedError, RuntimeError, "SLABFEED_ERR_FORKED", 9),
    (slabfeed.UnsupportedError, NotImplementedError, "SLABFEED_ERR_UNSUPPORTED", 10),
    (slabfeed.StaleBatchError, RuntimeError, "SLABFEED_ERR_STATE", 8),
])
def test_error_classes(cls, builtin, status, code):
    assert issubclass(cls, slabfeed.Error) and issubclass(cls, builtin)
    assert cls.status == status and cls.code == code
    e = cls("a message")
    assert str(e) == "a message" and e.status == status
    assert cls.__module__ == "slabfeed"


def agreed(msg: str) -> bool:
    return len(set(COMM.allgather(msg))) == 1


def test_missing_file_every_rank(workdir):
    path = os.path.join(workdir, "missing.h5")
    with pytest.raises(slabfeed.FileIOError) as e:
        open_loader(path)
    assert isinstance(e.value, OSError)
    assert e.value.status == "SLABFEED_ERR_IO" and e.value.code == 2
    assert "missing.h5" in str(e.value)
    assert agreed(str(e.value))  # every rank raised, with the same message


def test_not_hdf5_every_rank(workdir):
    path = os.path.join(workdir, "text.h5")
    if COMM.rank == 0:
        with open(path, "w") as f:
            f.write("not an HDF5 file\n")
    COMM.Barrier()
    with pytest.raises(slabfeed.Error) as e:
        open_loader(path)
    assert isinstance(e.value, (OSError, ValueError))
    assert "text.h5" in str(e.value) and agreed(str(e.value))


def test_missing_dataset(index_volume):
    with pytest.raises(slabfeed.Error) as e:
        open_loader(index_volume, input="Velocity")
    assert "Velocity" in str(e.value) and agreed(str(e.value))
    assert e.value.status.startswith("SLABFEED_ERR_")


def test_bad_options(index_volume):
    with pytest.raises(slabfeed.ArgumentError) as e:
        open_loader(index_volume, crop=100)  # larger than the 24^3 box
    assert isinstance(e.value, ValueError) and agreed(str(e.value))
    with pytest.raises(slabfeed.ArgumentError):
        open_loader(index_volume, input_vectors=[(1, 2, 7)])  # no channel 7
    with pytest.raises(slabfeed.ArgumentError):
        open_loader(index_volume, prefetch=0)
    # refused by slabfeed_config_set before the open (agreed on by all ranks)
    with pytest.raises(slabfeed.ArgumentError, match=r"dtype: 'f64' is not one of f32\|f16\|bf16"):
        open_loader(index_volume, dtype="f64")
    with pytest.raises(slabfeed.ArgumentError, match="crop: '8,8' has 2 edges"):
        open_loader(index_volume, crop=(8, 8))
    with pytest.raises(slabfeed.ArgumentError, match="input_vectors: '1,2' is not three channels"):
        open_loader(index_volume, input_vectors=[(1, 2)])
    with pytest.raises(ValueError, match="batch: '0' is below the minimum 1") as e:
        open_loader(index_volume, batch=0)
    assert str(e.value).startswith("rank 0: ") and agreed(str(e.value))
    with pytest.raises(TypeError, match="batch must be an integer"):
        open_loader(index_volume, batch="2")
    with pytest.raises(TypeError, match="intracommunicator"):
        slabfeed.Loader("world", path=index_volume, input="Nbody")


def test_other_mpi_library_refused(index_volume, monkeypatch):
    monkeypatch.setattr(_mpi, "_checked", False)
    monkeypatch.setattr(_mpi._slabfeed, "mpi_library_version", lambda: "MPICH Version: 4.2.0")
    with pytest.raises(slabfeed.MPIError, match="different MPI libraries") as e:
        open_loader(index_volume)
    assert "MPICH" in str(e.value) and isinstance(e.value, RuntimeError)


MPICH_BUILD = {"vendor": "MPICH", "version": "4.0.2", "family": "mpich", "standard": "4.0",
               "mpicc": "/opt/mpich/bin/mpicc", "libraries": "/opt/mpich/lib/libmpich.so"}


def test_mpi_hijacked_by_mpi4py_refused(index_volume, monkeypatch):
    """As an extension built on MPICH sees it after mpi4py loaded Open MPI
    globally: its own MPI_Get_library_version answers Open MPI, like
    mpi4py's; the vendor of its mpi.h (mpi_build) differs. Refused at
    import (check_at_import) and at the first communicator, naming both
    libraries and both fixes (python.mpi_mismatch does it for real)."""
    from mpi4py import MPI
    monkeypatch.setattr(_mpi, "_checked", False)
    monkeypatch.setattr(_mpi._slabfeed, "mpi_build", dict(MPICH_BUILD))
    if _mpi._family(MPI.Get_library_version()) == "mpich":
        monkeypatch.setattr(_mpi._slabfeed, "mpi_build",
                            dict(MPICH_BUILD, vendor="Open MPI", family="openmpi"))
    for call in (_mpi.check_at_import, lambda: open_loader(index_volume)):
        with pytest.raises(slabfeed.MPIError, match="different MPI libraries") as e:
            call()
        m = str(e.value)
        assert _mpi._slabfeed.mpi_build["vendor"] + " 4.0.2" in m and "/opt/mpich/bin/mpicc" in m
        assert _mpi._first_line(MPI.Get_library_version()) in m  # mpi4py's, named
        assert "mpi4py loaded it globally before slabfeed" in m
        assert "--no-binary=mpi4py" in m and "-DMPI_C_COMPILER=" in m
    # without mpi4py: another module took slabfeed's MPI calls
    with pytest.raises(slabfeed.MPIError, match="another module loaded globally"):
        _mpi._compare(None)
    assert not _mpi._checked


def test_mpi_family_names():
    assert _mpi._family("Open MPI v4.1.4, package: Debian OpenMPI\0") == "openmpi"
    assert _mpi._first_line("Open MPI v4.1.4, package: Debian OpenMPI, ident\0") == "Open MPI v4.1.4"
    assert _mpi._first_line("MPICH Version:\t4.0.2\nMPICH Release date: ...") == "MPICH Version: 4.0.2"
    for s in ("MPICH Version:\t4.0.2", "Intel(R) MPI Library 2021.6 for Linux* OS",
              "MVAPICH2 Version      :\t2.3.7", "MPI VERSION    : CRAY MPICH version 8.1.27"):
        assert _mpi._family(s) == "mpich", s
    assert _mpi._family("Microsoft MPI 10.1") == "msmpi"
    assert _mpi._family("Some Vendor MPI 1.0") is None  # unknown: strings must then be equal
    b = slabfeed._slabfeed.mpi_build
    assert b["family"] == _mpi._family(slabfeed._slabfeed.mpi_library_version())
    assert set(b) == {"vendor", "version", "family", "standard", "mpicc", "libraries"}
    assert slabfeed._slabfeed.mpi_runtime_library() is None or \
        "mpi" in os.path.basename(slabfeed._slabfeed.mpi_runtime_library())


def test_fork(index_volume):
    """As tests/test_fork.c: the child gets ForkedError from every call and
    from the batch it inherited (no MPI, no pytest machinery in the child:
    its exit code carries the failed checks); the parent goes on."""
    L = open_loader(index_volume)
    b = L.next()
    with warnings.catch_warnings():  # Python 3.12: fork of a threaded process
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # child
        bad = 0
        try:
            for bit, call in enumerate((L.next, b.input.__dlpack__, lambda: L.seek(0, 0),
                                        L.tell, b.target.tobytes)):
                try:
                    call()
                    bad |= 1 << bit
                except slabfeed.ForkedError as e:
                    if not (isinstance(e, RuntimeError) and "fork" in str(e)
                            and e.status == "SLABFEED_ERR_FORKED"):
                        bad |= 1 << bit
            L.close()  # a no-op in the child: the parent owns everything
        except BaseException:
            bad |= 1 << 7
        os._exit(bad)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), status
    assert os.WEXITSTATUS(status) == 0, f"child checks failed: {os.WEXITSTATUS(status):#x}"
    assert b.valid
    for _ in range(3):
        L.next()
    L.close()


def test_one_thread_at_a_time(index_volume):
    """The GIL is released inside next(); a second thread that calls the
    same loader meanwhile gets StateError instead of racing in C."""
    with open_loader(index_volume, crop=2, batch=1, steps_per_epoch=1 << 40) as L:
        started, refused = threading.Event(), []

        def busy() -> None:
            started.set()
            L._c._time_next(1_000_000)  # a long C loop, GIL released

        t = threading.Thread(target=busy)
        t.start()
        started.wait()
        while t.is_alive() and not refused:
            try:
                L.next()
            except slabfeed.StateError as e:
                refused.append(str(e))
            time.sleep(0.005)
        t.join()
        assert refused and "another thread" in refused[0]
        L.next()  # free again


class _Sneaky:
    """An int-like whose __index__ runs `hook` first (user code inside an
    argument conversion)."""

    def __init__(self, value: int, hook) -> None:
        self.value, self.hook = value, hook

    def __index__(self) -> int:
        self.hook()
        return self.value


def test_dlpack_arguments_before_liveness(index_volume):
    """__dlpack__ converts its arguments (which may run Python code calling
    next() or close()) before it checks the batch: no stale pointer goes
    out."""
    with open_loader(index_volume) as L:
        b = L.next()
        for kw in ({"stream": _Sneaky(-1, L._c.next)},
                   {"max_version": (_Sneaky(1, L._c.next), 0)},
                   {"dl_device": (1, _Sneaky(0, L._c.next))}):
            with pytest.raises(slabfeed.StaleBatchError):
                b.input.__dlpack__(**kw)
            b = L.next()
        b.input.__dlpack__(stream=_Sneaky(-1, lambda: None))  # still fine
    with open_loader(index_volume) as L:
        b = L.next()
        L.next()
        b = L.next()
        with pytest.raises(slabfeed.StaleBatchError, match="closed"):
            b.input.__dlpack__(stream=_Sneaky(-1, L._c.close))  # collective: every rank


def test_loader_init_once(index_volume):
    """A Loader object is opened once: __init__ again (open or closed) is a
    StateError, and batches of the old loader stay stale."""
    with open_loader(index_volume) as L:
        fint = slabfeed._mpi.comm_handle(COMM)
        kw = dict(path=index_volume, input="Nbody", target="Hydro", crop=(8, 8, 8))
        with pytest.raises(slabfeed.StateError, match="already open"):
            L._c.__init__(fint, batch=2, **kw)
        b = L.next()
    with pytest.raises(slabfeed.StateError, match="once"):
        L._c.__init__(fint, batch=1, **kw)
    assert L._c.closed and not b.valid
    assert len(b.origin) == len(b.sample) == len(b.symmetry) == 2
    with pytest.raises(slabfeed.StaleBatchError):
        b.input.__dlpack__()


def test_dropped_open_loader_warns_and_does_not_close(index_volume):
    """Dropping the last reference of an open C loader never closes it (the
    close is collective): a ResourceWarning, on one rank only here, and the
    ranks go on with collective calls. slabfeed.Loader keeps its C loader
    registered, so the atexit hook still closes it on every rank."""
    import gc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # the wrapper's
        c = open_loader(index_volume, crop=2, batch=1)._c
    slabfeed._loader._open.pop(next(k for k, v in slabfeed._loader._open.items() if v is c))
    c.next()
    if COMM.rank == 0:
        with pytest.warns(ResourceWarning, match="garbage-collected while open"):
            del c
            gc.collect()
    COMM.Barrier()  # rank 0 did not enter a collective close
    with open_loader(index_volume) as L:  # collectives still work on every rank
        L.next()
    # Rank > 0 leaks c as well (the process exit takes it).

    with pytest.warns(ResourceWarning, match="dropped while open"):
        L2 = open_loader(index_volume, crop=2, batch=1)
        key = L2._key
        del L2
        gc.collect()
    c2 = slabfeed._loader._open[key]  # still registered: closed at exit ...
    assert not c2.closed
    c2.close()  # ... or here, collectively
    slabfeed._loader._open.pop(key)


def test_fork_checked_before_cuda(index_volume):
    """In a forked child next/_time_next/seek raise ForkedError before
    anything else (a device loader would otherwise make CUDA calls)."""
    L = open_loader(index_volume)
    L.next()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # child
        bad = 0
        calls = (L._c.next, lambda: L._c._time_next(1), lambda: L._c.seek(0, 0),
                 lambda: L._c.next(_Sneaky(1, lambda: None)))
        for bit, call in enumerate(calls):
            try:
                call()
                bad |= 1 << bit
            except slabfeed.ForkedError:
                pass
            except BaseException:
                bad |= 1 << bit
        os._exit(bad)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    L.next()
    L.close()
