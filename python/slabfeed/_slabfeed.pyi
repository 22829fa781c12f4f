"""Type stubs of the C extension slabfeed._slabfeed (python/src/)."""
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

__version__: str
version_number: int
cuda_built: bool
max_streams: int

class Error(Exception):
    status: Optional[str]
    code: Optional[int]
class ArgumentError(Error, ValueError): ...
class FileIOError(Error, OSError): ...
class FormatError(Error, ValueError): ...
class MPIError(Error, RuntimeError): ...
class CUDAError(Error, RuntimeError): ...
class NCCLError(Error, RuntimeError): ...
class OutOfMemoryError(Error, MemoryError): ...
class StateError(Error, RuntimeError): ...
class ForkedError(Error, RuntimeError): ...
class UnsupportedError(Error, NotImplementedError): ...
class StaleBatchError(StateError): ...

class Tensor:
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    dtype: str
    ndim: int
    nbytes: int
    device: int
    valid: bool
    def __dlpack__(self, *, stream: Optional[int] = ..., max_version: Optional[Tuple[int, int]] = ...,
                   dl_device: Optional[Tuple[int, int]] = ..., copy: Optional[bool] = ...) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    def tobytes(self) -> bytes: ...

class Batch:
    input: Tensor
    target: Optional[Tensor]
    epoch: int
    step: int
    origin: Tuple[Tuple[int, int, int], ...]
    sample: Tuple[int, ...]
    symmetry: Tuple[int, ...]
    volume: Tuple[int, ...]
    params: Optional[Tuple[Tuple[float, ...], ...]]
    input_aug: Optional[Tuple[Tuple[Tuple[float, ...], Tuple[float, ...]], ...]]
    target_aug: Optional[Tuple[Tuple[Tuple[float, ...], Tuple[float, ...]], ...]]
    count: int
    tile: Optional[Tuple[Tuple[int, ...], ...]]
    device: int
    stream: Optional[int]
    valid: bool

Vectors = Sequence[Sequence[int]]

class Loader:
    steps_per_epoch: int
    closed: bool
    device: int
    prefetch: int
    batch: int
    options: Dict[str, Any]
    # The keywords are the rows of options(), in their order (the table of
    # the C library; tests/test_options.py checks that they agree). None is
    # "not given": the library default.
    def __init__(self, comm: int, /, *,
                 # one file, or a dataset of several volumes: a list of
                 # paths, glob patterns and "@manifest" files
                 path: Union[str, bytes, os.PathLike[str],
                             Sequence[Union[str, bytes, os.PathLike[str]]]],
                 # a dataset, or fields: "density,velocity@/d/vel_*.h5"
                 # or a list of them
                 input: Union[str, bytes, os.PathLike[str], Sequence[str]],
                 target: Union[str, bytes, os.PathLike[str], Sequence[str], None] = ...,
                 layout: Optional[str] = ...,
                 crop: Union[int, Sequence[int], None] = ...,
                 batch: Optional[int] = ...,
                 seed: Optional[int] = ...,
                 symmetries: Optional[str] = ...,
                 input_vectors: Optional[Vectors] = ...,
                 target_vectors: Optional[Vectors] = ...,
                 dtype: Optional[str] = ...,
                 out_layout: Optional[str] = ...,
                 device: Optional[int] = ...,
                 prefetch: Optional[int] = ...,
                 halo: Optional[int] = ...,
                 rank_per_node: Optional[bool] = ...,
                 steps_per_epoch: Optional[int] = ...,
                 group_nodes: Optional[int] = ...,
                 node_memory: Union[int, str, None] = ...,
                 locality: Optional[bool] = ...,
                 holdout: Optional[Sequence[Sequence[int]]] = ...,
                 tile: Optional[int] = ...,
                 pad: Optional[int] = ...,
                 region: Optional[Sequence[Sequence[int]]] = ...,
                 pass_symmetry: Optional[int] = ...,
                 # per channel (shift, scale) or ("log", a, shift, scale),
                 # or the text "0,1;log(1),0.5,2"
                 input_norm: Union[str, Sequence[Sequence[Any]], None] = ...,
                 target_norm: Union[str, Sequence[Sequence[Any]], None] = ...,
                 target_pad: Optional[bool] = ...,
                 # "voxels", "equal", "w0,w1,..." or a list of weights
                 volume_weights: Union[str, Sequence[float], None] = ...,
                 # "3,7,10-12" or a list of volume indices
                 holdout_volumes: Union[str, Sequence[int], None] = ...,
                 # "Omega_m,Header/Redshift" or a list of names
                 params: Union[str, Sequence[str], None] = ...,
                 params_norm: Union[str, Sequence[Sequence[Any]], None] = ...,
                 # one deviation, a list of one per channel, or the text
                 aug_add: Union[str, float, Sequence[float], None] = ...,
                 aug_mul: Union[str, float, Sequence[float], None] = ...,
                 target_aug_add: Union[str, float, Sequence[float], None] = ...,
                 target_aug_mul: Union[str, float, Sequence[float], None] = ...,
                 aug_share: Optional[bool] = ...,
                 scale_factor: Optional[int] = ...,
                 input_vector_fields: Optional[str] = ...,
                 target_vector_fields: Optional[str] = ...,
                 progress: Optional[str] = ...,
                 read_mode: Optional[str] = ...,
                 shared_window: Optional[str] = ...,
                 touch_threads: Optional[int] = ...,
                 residency: Optional[str] = ...,
                 # bytes, or a size text such as "40G"
                 device_memory: Union[str, int, None] = ...,
                 coarsen_factor: Optional[int] = ...,
                 huge_pages: Optional[str] = ...,
                 write_map: Optional[str] = ...,
                 write_register: Optional[str] = ...) -> None: ...
    def next(self, stream: Any = ...) -> Batch: ...
    def _time_next(self, n: int, stream: Any = ...) -> float: ...
    def seek(self, epoch: int, step: int) -> None: ...
    def tell(self) -> Tuple[int, int]: ...
    def close(self) -> None: ...
    def volumes(self) -> List[Tuple[str, Tuple[int, int, int]]]: ...
    def volume_params(self) -> List[Tuple[float, ...]]: ...
    def stats(self) -> Dict[str, Any]: ...
    def placement(self) -> str: ...

class Writer:
    """The C writer of a tiled pass (slabfeed_writer_*); slabfeed.Writer
    wraps it (it passes the loader's communicator and, for CUDA outputs,
    torch's current stream; a device slabfeed.Tensor given without a stream
    is put on the stream of its batch)."""
    shape: Tuple[int, int, int, int]  # (C, Z, Y, X) for 'cf', (Z, Y, X, C) for 'cl'
    z_range: Tuple[int, int]  # this rank's planes [z0, z1) of the output
    closed: bool
    state: str  # 'open', 'closed' (written), 'aborted', 'failed'
    path: Optional[str]
    device: int
    # Collective over the loader's communicator, whose f2c handle comes
    # first: every rank converts its arguments and all agree before the
    # open (a refusal on one rank raises on every rank).
    def __init__(self, comm: int, loader: Loader, path: Union[str, bytes, os.PathLike[str]],
                 dataset: Optional[str] = ..., channels: int = ..., *,
                 layout: str = ...,  # 'cf' | 'cl'
                 dtype: str = ...,  # 'f32' | 'f16'
                 chunk: Union[int, Sequence[int], None] = ...,
                 overwrite: bool = ...,
                 like: str = ...) -> None: ...  # 'target' | 'input' | 'none'
    # output: anything with __dlpack__ / __dlpack_device__; stream: required
    # for CUDA outputs (an int cudaStream_t or a stream object).
    def put(self, batch: Batch, output: Any, stream: Any = ...,
            layout: str = ...) -> None: ...  # 'ncdhw' | 'ndhwc'
    def close(self) -> None: ...
    def abort(self) -> None: ...

class Reader:
    def __init__(self, path: Any) -> None: ...
    def crop(self, dataset: str, origin: Tuple[int, int, int], crop: Union[int, Sequence[int]], *,
             symmetry: int = ..., vectors: Any = ..., dtype: str = ..., out_layout: str = ...,
             layout: str = ...) -> bytes: ...
    def close(self) -> None: ...

def mpi_library_version() -> str: ...
def mpi_runtime_library() -> Optional[str]: ...
def mpi_is_active() -> bool: ...
# vendor, version, family ('openmpi' | 'mpich' | 'msmpi' | None), standard,
# mpicc, libraries: the MPI the extension was compiled against (mpi.h).
mpi_build: Dict[str, Optional[str]]
class Option(Tuple[Any, ...]):
    """A row of the library's option table (a struct sequence)."""
    name: str
    flag: str
    kind: str  # string, int, uint64, size, switch, choice, edge, vectors, regions, norms
    min: Optional[int]
    max: Optional[int]
    choices: Optional[Tuple[str, ...]]
    aliases: Optional[Tuple[str, ...]]
    default: Any
    metavar: str
    help: str
    required: bool

def options() -> Tuple[Option, ...]: ...
# One dict per channel: count, nonfinite, mean, std, min, max, log_count,
# log_mean, log_std, log_min, log_max (the log ones None without log_a).
def field_stats(comm: int, path: Any, dataset: str, layout: Optional[str] = ...,
                log_a: Optional[float] = ...) -> List[Dict[str, Any]]: ...
def config_defaults() -> Dict[str, Any]: ...
def resolve_options(**options: Any) -> Dict[str, Any]: ...
def generate(comm: int, path: Any, **options: Any) -> None: ...
def describe(path: Any, dataset: str, layout: Optional[str] = ...) -> Dict[str, Any]: ...
