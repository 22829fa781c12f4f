"""The loader options of the Python package are the library's option table
(slabfeed_option_at): the extension's options(), the keywords of the typing
stub, Loader's docstring and signature must all agree with the C table, the
defaults round-trip, a bad value of each option is refused naming it, every
keyword takes effect, and a bad option on one rank raises the same error on
every rank instead of leaving the others in the collective open."""
from __future__ import annotations

import ast
import ctypes
import faulthandler
import inspect
import os
import re
from typing import Any, Dict, List

import pytest
from conftest import COMM, VEC

import slabfeed
from slabfeed import _slabfeed

P, R = COMM.size, COMM.rank
OPTIONS = _slabfeed.options()
NAMES = [o.name for o in OPTIONS]
DEFAULTS = {o.name: o.default for o in OPTIONS}
SOURCE = os.environ.get("SLABFEED_SOURCE_DIR")


@pytest.fixture(autouse=True)
def no_hang():
    """A test stuck in a collective (one rank raised, the others wait in
    open) dumps its stack and fails the job instead of waiting for the
    ctest timeout."""
    faulthandler.dump_traceback_later(120, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


# ---- The table as C has it ------------------------------------------------------------

def header() -> str:
    if SOURCE is None:
        pytest.skip("SLABFEED_SOURCE_DIR is not set")
    with open(os.path.join(SOURCE, "include", "slabfeed.h")) as f:
        return f.read()


def kind_names() -> Dict[int, str]:
    """slabfeed_option_kind from the header: value -> lower-case name."""
    body = re.search(r"typedef enum \{(.*?)\} slabfeed_option_kind;", header(), re.S).group(1)
    return {int(v): n.lower() for n, v in re.findall(r"SLABFEED_OPTION_(\w+)\s*=\s*(\d+)", body)}


class _Row(ctypes.Structure):
    """struct slabfeed_option (include/slabfeed.h)."""
    _fields_ = [("name", ctypes.c_char_p), ("flag", ctypes.c_char_p), ("kind", ctypes.c_int),
                ("min", ctypes.c_int64), ("max", ctypes.c_int64), ("choices", ctypes.c_char_p),
                ("aliases", ctypes.c_char_p), ("default_value", ctypes.c_char_p),
                ("metavar", ctypes.c_char_p), ("help", ctypes.c_char_p), ("flags", ctypes.c_uint)]


def c_rows() -> List[Dict[str, Any]]:
    """The rows of slabfeed_option_at, read from the shared library with
    ctypes (independent of the extension's conversion)."""
    lib_path = os.environ.get("SLABFEED_LIBRARY")
    if not lib_path or not os.path.exists(lib_path):
        pytest.skip("SLABFEED_LIBRARY (the shared libslabfeed) is not set")
    lib = ctypes.CDLL(lib_path, mode=ctypes.RTLD_LOCAL)
    lib.slabfeed_option_at.restype = ctypes.POINTER(_Row)
    lib.slabfeed_option_at.argtypes = [ctypes.c_int]
    rows, i = [], 0
    while True:
        p = lib.slabfeed_option_at(i)
        if not p:
            break
        r = p.contents
        rows.append({f: (v.decode() if isinstance(v, bytes) else v)
                     for f, v in ((f, getattr(r, f)) for f, _ in _Row._fields_)})
        i += 1
    return rows


def test_options_are_the_c_table():
    kinds = kind_names()
    rows = c_rows()
    assert NAMES == [r["name"] for r in rows]
    for o, r in zip(OPTIONS, rows):
        kind = kinds[r["kind"]]
        unbounded = kind in ("string", "choice")
        assert (o.flag, o.kind, o.metavar, o.help) == (r["flag"], kind, r["metavar"], r["help"])
        assert o.min == (None if unbounded else r["min"]), o.name
        no_max = unbounded or (kind in ("uint64", "size") and r["max"] == 0)
        assert o.max == (None if no_max else r["max"]), o.name
        assert o.choices == (tuple(r["choices"].split("|")) if r["choices"] else None)
        assert o.aliases == (tuple(r["aliases"].split("|")) if r["aliases"] else None)
        assert o.required == bool(r["flags"] & 1), o.name
        # the row's default text, given as a Python value, is the default
        assert _slabfeed.resolve_options(**{o.name: text_value(kind, r["default_value"])}) \
            == DEFAULTS, o.name


def text_value(kind: str, text: str) -> Any:
    """The Python value meant by an option's text (the test's own parser)."""
    if kind == "string":
        return text or None
    if kind in ("int", "uint64"):
        return int(text)
    if kind == "edge":
        v = [int(x) for x in re.split("[,x]", text)]
        return v[0] if len(v) == 1 else tuple(v)
    if kind in ("vectors", "regions"):
        return [tuple(int(c) for c in g.split(",")) for g in text.split(";")] if text else []
    if kind == "norms":
        return [norm_entry(e) for e in text.split(";")] if text else []
    return text  # size, switch, choice: the text itself is accepted


def norm_entry(text: str) -> tuple:
    """One normalisation entry of the text form as the Python value:
    (shift, scale) or ("log", a, shift, scale)."""
    parts = text.split(",")
    if parts[0].startswith("log("):
        return ("log", float(parts[0][4:-1]), float(parts[1]), float(parts[2]))
    return (float(parts[0]), float(parts[1]))


def test_table_follows_the_struct():
    """The rows are the fields of slabfeed_config, in order (the counts of
    the vector groups belong to their rows)."""
    body = re.search(r"typedef struct slabfeed_config \{(.*?)\} slabfeed_config;", header(),
                     re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    fields = re.findall(r"(\w+)\s*(?:\[[^\]]*\]\s*)*;", body)
    assert [f for f in fields if f != "size" and not f.startswith("n_")] == NAMES


# ---- The Python consumers ----------------------------------------------------------------

def test_stub_lists_every_option():
    path = os.path.join(os.path.dirname(slabfeed.__file__), "_slabfeed.pyi")
    tree = ast.parse(open(path).read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Loader")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    a = init.args
    assert [x.arg for x in a.posonlyargs + a.args] == ["self", "comm"]
    assert a.kwarg is None and a.vararg is None
    assert [x.arg for x in a.kwonlyargs] == NAMES
    required = [d is None for d in a.kw_defaults]  # no default: required
    assert required == [o.required for o in OPTIONS]


def test_loader_documents_every_option():
    doc = slabfeed.Loader.__doc__
    section = doc[doc.index("    Options:\n"):]
    documented = re.findall(r"^    (\w+) : ", section, re.M)
    assert documented == NAMES
    for o in OPTIONS:
        assert f"(--{o.flag}" in section
        assert o.help.split()[-1].rstrip(".") in section, o.name


def test_loader_signature_is_the_table():
    params = inspect.signature(slabfeed.Loader).parameters
    assert list(params) == ["comm"] + NAMES
    for o in OPTIONS:
        p = params[o.name]
        assert p.kind is inspect.Parameter.KEYWORD_ONLY
        assert p.default == (inspect.Parameter.empty if o.required else o.default), o.name


def test_config_defaults_are_the_table():
    assert _slabfeed.config_defaults() == DEFAULTS
    assert _slabfeed.resolve_options() == DEFAULTS


# ---- Values --------------------------------------------------------------------------------

def test_defaults_round_trip():
    """Each default, given by keyword, changes nothing (Python value -> text
    -> slabfeed_config_set -> slabfeed_config_get -> Python value)."""
    for o in OPTIONS:
        assert _slabfeed.resolve_options(**{o.name: o.default}) == DEFAULTS, o.name


def bad_values(o) -> List[Any]:
    if o.kind == "int":
        return [o.min - 1, o.max + 1, 2 ** 70]
    if o.kind == "uint64":
        return [-1, 2 ** 64 if o.max is None else o.max + 1]
    if o.kind == "size":
        return [-1, 2 ** 64, "12Q", "1.5", "K"]
    if o.kind == "edge":
        return [o.min - 1, o.max + 1, (8, 8), (8, o.min - 1, 8), (1, 2, 3, 4)]
    if o.kind == "vectors":
        return [[(1, 2)], [(1, 2, 64)], [(1, 2, -1)], [(1, 2, 3)] * (o.max + 1)]
    if o.kind == "regions":
        return [[(1, 2, 3)], [(0, 0, 0, -1, 0, 0)], [(0, 0, 0, 2 ** 31, 0, 0)],
                [(0, 0, 0, 1, 1, 1)] * (o.max + 1)]
    if o.kind == "norms":
        return [[(0, 0)], [(0.5, 1e-50)], [(float("inf"), 1)], [(0, float("nan"))],
                [("log", float("inf"), 0, 1)], [(1, 2, 3)], [("log", 1, 2)], [()],
                "0,1;", "1,2x", [(0, 1)] * (o.max + 1)]
    if o.kind == "switch":
        return [2, "maybe"] + ([] if o.min == -1 else [-1, "auto"])
    if o.kind == "choice":
        return ["bogus", o.choices[0].upper()]
    return []


def test_bad_values_name_the_option():
    checked = 0
    for o in OPTIONS:
        for v in bad_values(o):
            with pytest.raises(slabfeed.ArgumentError) as e:
                _slabfeed.resolve_options(**{o.name: v})
            assert str(e.value).startswith(o.name + ": "), (o.name, v, str(e.value))
            assert isinstance(e.value, ValueError)
            checked += 1
    assert checked > 40


def test_wrong_types_name_the_option():
    wrong = {"string": [3], "int": ["2", 2.0, True], "uint64": ["2", True], "size": [1.5, True],
             "switch": [1.0, []], "choice": [1], "edge": ["8", 8.0, True, (8, "8", 8)],
             "vectors": ["1,2,3", [1.0, 2, 3], [(1, 2, 3.0)], [True, 1, 2]],
             "regions": ["0,0,0,1,0,0", [(0, 0, 0, 1.0, 0, 0)], 7],
             "norms": [3, 1.5, [(0.0, 1.0), 2.0], [1.0, 2.0], [(True, 1.0)], [(0, "1")],
                       [("exp", 1, 0, 1)], [(0, 1j)], b"0,1"]}
    for o in OPTIONS:
        # An int row with named values (device "local") takes text too.
        named = o.kind == "int" and o.choices
        # The deviations of the augmentation take one number as well.
        numbers = o.kind == "string" and "aug_" in o.name
        for v in (x for x in (wrong[o.kind] if not numbers else [True])
                  if not (named and isinstance(x, str))):
            with pytest.raises(TypeError, match=rf"\b{o.name} must be "):
                _slabfeed.resolve_options(**{o.name: v})


def test_keywords():
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        _slabfeed.resolve_options(bogus=1)
    # a flag is not a keyword
    with pytest.raises(TypeError, match="'file' \\(the option is 'path'\\)"):
        _slabfeed.resolve_options(file="x.h5")
    with pytest.raises(TypeError, match="keyword arguments only"):
        _slabfeed.resolve_options("x.h5")
    # None is "not given"
    assert _slabfeed.resolve_options(**{o.name: None for o in OPTIONS}) == DEFAULTS


def other_value(o) -> Any:
    """A valid value of o other than its default, and what it resolves to."""
    if o.kind == "string":
        return "name.h5", "name.h5"
    if o.kind in ("int", "uint64"):
        v = o.default + 1 if o.max is None or o.default + 1 <= o.max else o.default - 1
        return v, v
    if o.kind == "size":
        return "3K", 3072
    if o.kind == "switch":
        return (not o.default), (not o.default)
    if o.kind == "choice":
        v = next(c for c in o.choices if c != o.default)
        return v, v
    if o.kind == "edge":
        return [5, 6, 7], (5, 6, 7)
    if o.kind == "vectors":
        return [[1, 2, 3], (0, 4, 5)], ((1, 2, 3), (0, 4, 5))
    if o.kind == "regions":
        return [(56, 0, 0, 8, 0, 0)], ((56, 0, 0, 8, 0, 0),)
    if o.kind == "norms":
        return [(1.5, 2), ("log", 1, -0.25, 3)], ((1.5, 2.0), ("log", 1.0, -0.25, 3.0))
    raise AssertionError(o.kind)


def test_every_keyword_takes_effect():
    for o in OPTIONS:
        given, want = other_value(o)
        got = _slabfeed.resolve_options(**{o.name: given})
        assert got[o.name] == want, o.name
        assert {k: v for k, v in got.items() if k != o.name} == \
            {k: v for k, v in DEFAULTS.items() if k != o.name}, o.name


def test_other_forms():
    r = _slabfeed.resolve_options
    assert r(device="local")["device"] == "local"  # a named value
    with pytest.raises(slabfeed.ArgumentError, match="device"):
        r(device="remote")
    assert r(crop=12)["crop"] == (12, 12, 12)
    assert r(dtype="bfloat16")["dtype"] == "bf16"  # an alias: the name back
    assert r(input_vectors=(1, 2, 3))["input_vectors"] == ((1, 2, 3),)  # one flat group
    assert r(input_vectors=[])["input_vectors"] == ()
    # normalisations: the text form, numpy numbers, values back as float32
    import numpy as np
    got = r(input_norm=[(0.1, np.float32(3)), ["log", np.float64(1e-3), -1, 0.25]])
    want = ((float(np.float32(0.1)), 3.0), ("log", float(np.float32(1e-3)), -1.0, 0.25))
    assert got["input_norm"] == want
    assert r(input_norm="0.1,3;log(0.001),-1,0.25")["input_norm"] == want
    assert r(input_norm=(), target_norm="")["input_norm"] == ()
    with pytest.raises(slabfeed.ArgumentError, match="input_norm: .*scale must be finite"):
        r(input_norm=[(0, 1e-46)])  # 0 once rounded to float
    assert r(node_memory="2.5G")["node_memory"] == 5 << 29
    assert r(node_memory=1 << 40)["node_memory"] == 1 << 40
    for v, want in ((True, True), (0, False), ("on", True), ("auto", None), (-1, None)):
        assert r(rank_per_node=v)["rank_per_node"] is want, v
    assert r(locality=1)["locality"] is True
    import pathlib
    assert r(path=pathlib.Path("/tmp/x.h5"))["path"] == "/tmp/x.h5"
    assert r(path=b"/tmp/y.h5")["path"] == "/tmp/y.h5"
    assert r(target="")["target"] is None
    with pytest.raises(slabfeed.ArgumentError, match="path: .*null"):
        r(path="a\0b")


# ---- Options reach the loader ---------------------------------------------------------

def test_options_reach_the_loader(index_volume):
    import numpy as np
    kw = dict(path=index_volume, input="Nbody", crop=(4, 6, 8), symmetries="none", batch=3,
              dtype="float16", out_layout="ndhwc", prefetch=3, steps_per_epoch=5, seed=9,
              input_vectors=VEC, halo=1, node_memory="64M")
    with slabfeed.Loader(COMM, **kw) as L:
        want = _slabfeed.resolve_options(**kw)
        assert L.options == want
        assert L.options["crop"] == (4, 6, 8) and L.options["dtype"] == "f16"
        assert L.options["target"] is None and L.options["rank_per_node"] is None
        assert len(L) == 5 and L._c.prefetch == 3 and L._c.batch == 3
        b = L.next()
        assert b.input.shape == (3, 4, 6, 8, 4) and b.input.dtype == "float16"
        assert b.target is None and set(b.symmetry) == {0}
        assert np.from_dlpack(b.input).dtype == np.float16
        assert L.stats()["node_budget"] == 64 << 20
        L.options["batch"] = 99  # a copy: the loader's stays
        assert L._c.options["batch"] == 3
    # steps_per_epoch in effect, not the 0 of "cover the box once"
    with slabfeed.Loader(COMM, path=index_volume, input="Nbody", crop=8) as L:
        assert L.options["steps_per_epoch"] == len(L) > 0
        assert L.options["crop"] == (8, 8, 8) and L.options["batch"] == 1


def test_required_options(index_volume):
    with pytest.raises(TypeError, match="missing required keyword argument: 'path'") as e:
        slabfeed.Loader(COMM, input="Nbody")
    assert "the HDF5 file" in str(e.value)
    with pytest.raises(TypeError, match="arguments: 'path' .*, 'input' "):
        slabfeed.Loader(COMM)
    with pytest.raises(TypeError, match="'input'"):
        slabfeed.Loader(COMM, path=index_volume, input=None)  # None: not given
    with pytest.raises(slabfeed.ArgumentError, match="input is required"):
        slabfeed.Loader(COMM, path=index_volume, input="")  # given, empty: the library's


# ---- One rank's bad option: every rank raises -----------------------------------------

def messages(msg: str) -> List[str]:
    return COMM.allgather(msg)


class _Boom:
    def __index__(self) -> int:
        raise RuntimeError("boom")


def test_one_rank_bad_option_raises_everywhere(index_volume):
    """Only the last rank (rank 1 on 2 ranks) passes a bad option: every
    rank raises the same error, naming that rank, and nobody is left in the
    collective open (the no_hang fixture fails a hang); a good open works
    afterwards."""
    bad = P - 1
    base = dict(path=index_volume, input="Nbody", target="Hydro", crop=8, batch=2)
    cases = [
        (dict(dtype="bogus"), slabfeed.ArgumentError, "dtype: 'bogus' is not one of"),
        (dict(batch=0), slabfeed.ArgumentError, "batch: '0' is below the minimum 1"),
        (dict(crop="8"), TypeError, "crop must be an int or a sequence"),
        (dict(bogus=1), TypeError, "unexpected keyword argument 'bogus'"),
        (dict(path=None), TypeError, "missing required keyword argument: 'path'"),
        (dict(seed=_Boom()), slabfeed.Error, "RuntimeError: boom"),
    ]
    for extra, cls, text in cases:
        kw = dict(base, **extra) if R == bad else base
        with pytest.raises(cls) as e:
            slabfeed.Loader(COMM, **kw)
        msg = str(e.value)
        assert msg.startswith(f"rank {bad}: ") and text in msg, msg
        assert len(set(messages(msg))) == 1  # the same on every rank
        if cls is slabfeed.Error:
            assert type(e.value) is slabfeed.Error
            if R == bad:
                assert isinstance(e.value.__cause__, RuntimeError)
    with slabfeed.Loader(COMM, **base) as L:  # the ranks are in step
        L.next()
