"""slabfeed built with one MPI, mpi4py with another: a clear refusal in any
import order, never a crash or "MPI_Comm_rank/size failed".

CTest python.mpi_mismatch, registered only in a build tree whose MPI is not
mpi4py's (an MPICH tree next to Debian's mpi4py on Open MPI; or an Open MPI
tree with an mpi4py built on MPICH first on PYTHONPATH); run
without the MPI launcher and without conftest.py (pytest --noconftest:
conftest imports mpi4py and slabfeed together). Every case runs in a fresh
interpreter: the order in which the two MPI libraries are loaded is the
point. Prints SKIP where slabfeed and mpi4py use the same MPI family.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any, Dict

import pytest


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))


def probe(code: str) -> Any:
    r = run(code)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


# slabfeed alone (no mpi4py in the process: it imports, whatever its MPI).
BUILD: Dict[str, str] = probe("""
    import json, slabfeed
    print(json.dumps(slabfeed._slabfeed.mpi_build))
""")
# mpi4py alone, without initialising MPI.
MPI4PY: Dict[str, str] = probe("""
    import json, mpi4py
    mpi4py.rc.initialize = False
    from mpi4py import MPI
    print(json.dumps({"vendor": MPI.get_vendor()[0],
                      "library": MPI.Get_library_version().split("\\0")[0]}))
""")


def family(name: str) -> str:
    n = name.lower()
    return "openmpi" if "open mpi" in n else "mpich" if any(
        k in n for k in ("mpich", "intel", "mvapich")) else n


if family(MPI4PY["vendor"]) == BUILD["family"]:
    pytest.skip(f"SKIP: slabfeed ({BUILD['vendor']}) and mpi4py ({MPI4PY['vendor']}) "
                "use the same MPI family", allow_module_level=True)

# In the child: what an exception is, as JSON.
INFO = """
    import json, sys
    def info(e):
        sf = sys.modules["slabfeed._slabfeed"]
        return {"type": type(e).__name__, "message": str(e),
                "mpierror": isinstance(e, sf.MPIError),
                "runtime": isinstance(e, RuntimeError)}
"""


def check_refusal(out: Dict[str, Any]) -> None:
    """What every refusal says: both libraries, and both ways to fix it."""
    assert out["type"] == "MPIError" and out["mpierror"] and out["runtime"], out
    m = out["message"]
    assert "mpi4py and slabfeed use different MPI libraries" in m, m
    assert BUILD["vendor"] in m and MPI4PY["vendor"] in m, m  # both named
    assert BUILD["mpicc"] in m, m  # slabfeed's mpicc, for mpi4py's rebuild
    assert "--no-binary=mpi4py" in m and "-DMPI_C_COMPILER=" in m, m
    assert "MPI_Comm_rank" not in m, m


IMPORT = """
    try:
        import slabfeed
        print(json.dumps(None))
    except Exception as e:
        print(json.dumps(info(e)))
"""


def test_mpi4py_first_refused_at_import():
    """mpi4py loads its MPI globally first: slabfeed's MPI calls bind to it,
    and slabfeed's own MPI_Get_library_version names mpi4py's library. The
    vendor of the build's mpi.h tells the truth: refused at import."""
    out = probe(INFO + """
    from mpi4py import MPI
    assert MPI.Is_initialized()
    """ + IMPORT)
    assert out is not None
    check_refusal(out)
    # mpi4py loads Open MPI with RTLD_GLOBAL (an MPICH one loads it locally)
    hijacked = family(MPI4PY["vendor"]) == "openmpi"
    assert hijacked == ("mpi4py loaded it globally before slabfeed" in out["message"]), out


def test_mpi4py_uninitialised_first_refused_at_import():
    """The same with mpi4py.rc.initialize = False (MPI never initialised)."""
    out = probe(INFO + """
    import mpi4py
    mpi4py.rc.initialize = False
    from mpi4py import MPI
    """ + IMPORT)
    assert out is not None
    check_refusal(out)


def test_slabfeed_first_refused_at_first_communicator():
    """slabfeed first: its calls stay with its own library, mpi4py then
    initialises the other one. Every call that takes a communicator is
    refused (and stays refused); calls without MPI still work, HDF5
    included (describe of a missing file: FileIOError, not a crash)."""
    out = probe(INFO + """
    import slabfeed
    from mpi4py import MPI
    res = []
    for call in (lambda: slabfeed.Loader(MPI.COMM_WORLD, path="/nonexistent.h5", input="Nbody"),
                 lambda: slabfeed.Loader(path="/nonexistent.h5", input="Nbody"),
                 lambda: slabfeed.tools.generate(MPI.COMM_WORLD, "/nonexistent/x.h5", shape=8),
                 lambda: slabfeed.Loader(MPI.COMM_SELF, path="/nonexistent.h5", input="Nbody")):
        try:
            call()
            res.append(None)
        except Exception as e:
            res.append(info(e))
    try:
        slabfeed.tools.describe("/nonexistent.h5", "Nbody")
        res.append("described")
    except slabfeed.FileIOError:
        res.append("FileIOError")
    res.append(slabfeed._slabfeed.resolve_options(crop=8)["crop"])
    print(json.dumps(res))
    """)
    *refusals, described, crop = out
    for r in refusals:
        assert r is not None, out
        check_refusal(r)
    assert "mpi4py loaded it" not in refusals[0]["message"]  # slabfeed's own library
    assert described == "FileIOError" and crop == [8, 8, 8]


def test_without_mpi4py():
    """No mpi4py in the process: slabfeed imports and reports its MPI."""
    r = run("""
        import slabfeed
        b = slabfeed._slabfeed.mpi_build
        assert b["family"] in ("openmpi", "mpich"), b
        assert slabfeed._slabfeed.mpi_library_version().startswith(
            {"openmpi": "Open MPI", "mpich": "MPICH"}[b["family"]][:4])
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
