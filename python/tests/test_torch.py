"""slabfeed.torch on the CPU (host batches through torch.from_dlpack), and
the DLPack capsules themselves: legacy and versioned structs read back with
a ctypes mirror written from the DLPack specification (independent of
python/src/dlpack.h), bfloat16 as kDLBfloat, no leaked references."""
from __future__ import annotations

import ctypes
import gc
import sys

import numpy as np
import pytest
from conftest import COMM, VEC, expected_sample_ids

torch = pytest.importorskip("torch")

import slabfeed  # noqa: E402
from slabfeed.tools import Reader  # noqa: E402
from slabfeed.torch import TorchLoader  # noqa: E402

P, R = COMM.size, COMM.rank

OPTS = dict(input="Nbody", target="Hydro", crop=8, batch=2, input_vectors=VEC,
            target_vectors=VEC, seed=11, steps_per_epoch=3)


def as_bits(t: "torch.Tensor") -> np.ndarray:
    it = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}
    return t.view(it[t.dtype]).numpy()


@pytest.mark.parametrize("dtype,tdtype", [("f32", torch.float32), (torch.bfloat16, torch.bfloat16),
                                          ("f16", torch.float16)])
def test_torch_cpu_batches(index_volume, dtype, tdtype):
    name = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}[tdtype]
    with TorchLoader(COMM, device="cpu", path=index_volume, dtype=dtype, **OPTS) as L, \
            Reader(index_volume) as ref:
        assert len(L) == 3 and L.device == torch.device("cpu")
        steps = []
        for x, y, meta in L:  # one epoch
            assert isinstance(x, torch.Tensor) and x.dtype == tdtype and x.device.type == "cpu"
            assert x.shape == (2, 4, 8, 8, 8) and y.shape == (2, 5, 8, 8, 8)
            assert list(meta.sample) == expected_sample_ids(meta.step, 2, P, R)
            for i, (o, g) in enumerate(zip(meta.origin, meta.symmetry)):
                for name_ds, t in (("Nbody", x), ("Hydro", y)):
                    r = ref.crop(name_ds, o, 8, symmetry=g, vectors=VEC, dtype=name)
                    assert np.array_equal(as_bits(t[i]), r.view(as_bits(t[i]).dtype))
            steps.append((meta.epoch, meta.step))
        assert steps == [(0, 0), (0, 1), (0, 2)]
        assert L.tell() == (1, 0)


def test_torch_zero_copy_and_resume(index_volume):
    with TorchLoader(COMM, device="cpu", path=index_volume, **OPTS) as L:
        b = L.loader.next()
        t = torch.from_dlpack(b.input)
        assert t.data_ptr() == np.from_dlpack(b.input).ctypes.data  # one memory
        L.seek(0, 1)
        state = L.state_dict()
        want = [L.next() for _ in range(1)][0]
        want = (want.input.clone(), want.meta)
        L.load_state_dict(state)
        L.set_epoch(0)  # keeps (0, 1)
        x, _, meta = L.next()
        assert meta == want[1] and torch.equal(x, want[0])


# ---- DLPack structs, from the specification (dlpack.h v1.0) ---------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]


def read_capsule(cap, name: bytes, struct):
    assert _api.PyCapsule_IsValid(cap, name) == 1
    return struct.from_address(_api.PyCapsule_GetPointer(cap, name))


@pytest.mark.parametrize("dtype,code,bits", [("f32", 2, 32), ("f16", 2, 16), ("bf16", 4, 16)])
def test_dlpack_capsules(index_volume, dtype, code, bits):
    with slabfeed.Loader(COMM, path=index_volume, dtype=dtype, out_layout="ndhwc",
                         **{k: v for k, v in OPTS.items()}) as L:
        b = L.next()
        b.input  # the Tensor (cached by the batch) holds the loader too
        owner = L._c
        base = sys.getrefcount(owner)
        ptr = None
        for kw, name, struct in (({}, b"dltensor", DLManagedTensor),
                                 ({"max_version": (0, 8)}, b"dltensor", DLManagedTensor),
                                 ({"max_version": (1, 0)}, b"dltensor_versioned",
                                  DLManagedTensorVersioned),
                                 ({"max_version": (1, 3), "dl_device": (1, 0), "copy": False},
                                  b"dltensor_versioned", DLManagedTensorVersioned)):
            cap = b.input.__dlpack__(**kw)
            assert sys.getrefcount(owner) == base + 1  # the capsule keeps the loader
            m = read_capsule(cap, name, struct)
            t = m.dl_tensor
            if struct is DLManagedTensorVersioned:
                assert (m.version.major, m.version.minor) == (1, 0) and m.flags == 0
            assert (t.device.device_type, t.device.device_id) == (1, 0)
            assert t.ndim == 5 and (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (code, bits, 1)
            assert tuple(t.shape[i] for i in range(5)) == b.input.shape == (2, 8, 8, 8, 4)
            assert tuple(t.strides[i] for i in range(5)) == b.input.strides
            assert t.byte_offset == 0 and m.deleter
            ptr = ptr or t.data
            assert t.data == ptr
            del cap, m, t  # unconsumed: the capsule's destructor calls the deleter
            gc.collect()
            assert sys.getrefcount(owner) == base
        # consumed by torch: the reference goes when the tensor goes
        x = torch.from_dlpack(b.input)
        assert sys.getrefcount(owner) == base + 1 and x.data_ptr() == ptr
        del x
        gc.collect()
        assert sys.getrefcount(owner) == base
        with pytest.raises(BufferError, match="copy"):
            b.input.__dlpack__(copy=True)
        with pytest.raises(BufferError, match="device"):
            b.input.__dlpack__(dl_device=(2, 0))
        with pytest.raises(ValueError, match="None"):
            b.input.__dlpack__(stream=7)
