"""slabfeed: random augmented crops of one huge 3-D HDF5 volume, fed to every
rank of an MPI job, zero copy into PyTorch or numpy through DLPack.

    from mpi4py import MPI              # initialises MPI (slabfeed never does)
    import slabfeed

    with slabfeed.Loader(MPI.COMM_WORLD, path="box.h5", input="Nbody",
                         target="Hydro", crop=64, batch=4,
                         input_vectors=[(1, 2, 3)], target_vectors=[(1, 2, 3)],
                         dtype="bf16", device=0) as loader:
        for batch in loader:            # one epoch
            x = torch.from_dlpack(batch.input)   # zero copy, on torch's stream
            ...

``slabfeed.torch.TorchLoader`` does the DLPack and stream part for PyTorch.
A loader opened with ``tile`` > 0 hands out a tiled pass over a region
instead (validation, inference); ``slabfeed.Writer`` writes the model's
outputs of such a pass back as one HDF5 dataset:

    with slabfeed.Loader(MPI.COMM_WORLD, path="box.h5", input="Nbody",
                         target="Hydro", tile=64, pad=16, batch=2) as loader, \
            slabfeed.Writer(loader, "pred.h5") as writer:
        for batch in loader:            # one pass
            writer.put(batch, model(torch.from_dlpack(batch.input)))

A batch stays valid until the loader's next ``next()``, ``seek()`` or
``close()`` (see ``Loader``); ``slabfeed.tools`` has the generator and the
serial reference reader.
"""
try:
    from . import _slabfeed  # noqa: F401
except ImportError as e:  # the source tree's python/slabfeed, not a build
    raise ImportError(
        "slabfeed: the C extension slabfeed._slabfeed is missing: "
        f"{__path__[0]} is not a built package: build with CMake and set "
        "PYTHONPATH=<build>/python, or pip install ./python (and do not run "
        "Python from inside the python/ directory of the source tree)") from e

from ._slabfeed import (  # noqa: F401  (re-exported)
    ArgumentError,
    Batch,
    CUDAError,
    Error,
    FileIOError,
    ForkedError,
    FormatError,
    MPIError,
    NCCLError,
    OutOfMemoryError,
    StaleBatchError,
    StateError,
    Tensor,
    UnsupportedError,
    __version__,
    cuda_built,
)
from . import _mpi

# Refuse at once an MPI other than slabfeed's: mpi4py's when mpi4py.MPI is
# already imported (else at the first call that takes a communicator), or
# one that another module loaded globally before slabfeed (slabfeed's MPI
# calls would reach it). slabfeed.MPIError names both libraries.
_mpi.check_at_import()

from ._loader import Loader  # noqa: F401,E402
from ._writer import Writer  # noqa: F401,E402
from . import tools  # noqa: F401,E402

__all__ = [
    "Loader", "Writer", "Batch", "Tensor", "tools", "cuda_built", "__version__",
    "Error", "ArgumentError", "FileIOError", "FormatError", "MPIError",
    "CUDAError", "NCCLError", "OutOfMemoryError", "StateError",
    "ForkedError", "UnsupportedError", "StaleBatchError",
]
