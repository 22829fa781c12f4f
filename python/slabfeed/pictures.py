"""Pictures of volumes, batches and predictions as PNG files (matplotlib).

    from slabfeed import pictures
    pictures.save_slice("z.png", volume, axis=0, index=32)       # (C,Z,Y,X)
    pictures.save_crops("crops.png", batch)                      # Batch
    info = pictures.save_comparison("cmp.png", prediction, truth)
    info["ratio"]                      # P_pred(k) / P_truth(k), per shell

and from the command line (the slice is read through slabfeed's serial
reader, so any file the loader takes is drawn the same way), with the
interpreter the package was built for ($SF_PY, set by `. jobs/env.sh`):

    $SF_PY -m slabfeed.pictures slice box.h5 --dataset Nbody --axis z --out z.png
    $SF_PY -m slabfeed.pictures crops box.h5 --input Nbody --target Hydro --out crops.png

matplotlib is imported at the first picture, not with ``import slabfeed``
(``slabfeed`` never needs it); where it is missing the call raises
``ImportError`` naming the package (Debian/Ubuntu: ``python3-matplotlib``).
The figures are drawn on matplotlib's Agg canvas directly (no pyplot, no
change of the process's backend, nothing left open).

Conventions (those of slabfeed, docs/CONVENTIONS.md): arrays are C order,
spatial axes 0 = z, 1 = y, 2 = x; a 4-D array is (C, Z, Y, X), or
(Z, Y, X, C) with ``channels_last=True``; a batch is (N, C, D, H, W) (or
(N, D, H, W, C)). A slice across `axis` keeps the two other axes in order:
its rows are the first of them and its columns the second (axis 0: rows y,
columns x; axis 1: rows z, columns x; axis 2: rows z, columns y), and row 0
is drawn at the top, as the array prints (matplotlib's ``origin='upper'``),
in the figures and in the exact images alike. ``index=None`` is the middle
plane (n // 2).

Exact images (``save_slice(..., exact=True)``): the slice itself, one
pixel per cell (or a ``scale`` x ``scale`` block), no axes, written by
``matplotlib.image.imsave``: the gray level of a cell of value v is the
colormap's entry ``min(floor(256 t), 255)`` of ``t = (v - vmin) / (vmax -
vmin)`` (``matplotlib.colors.Normalize``, then the 256-entry lookup table
converted to bytes); values below vmin take the first entry, above vmax the
last, NaN is transparent. With ``cmap='gray'`` (the default there) entry i
is gray level i, give or take one (the table holds i/255 in floating point
and the conversion to bytes truncates).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

PathLike = Union[str, "os.PathLike[str]"]
Axis = Union[int, str]

__all__ = ["save_slice", "save_crops", "save_comparison", "power_spectrum",
           "spectrum_ratio", "read_slice", "take_slice", "to_numpy", "main"]

_AXES = "zyx"


# ---- matplotlib, lazily ------------------------------------------------------------

def _mpl() -> Any:
    """matplotlib, imported at the first picture; ImportError naming the
    package when it is missing."""
    try:
        import matplotlib
        import matplotlib.image  # noqa: F401
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError as e:
        raise ImportError(
            "slabfeed.pictures needs matplotlib, which this Python "
            f"({sys.executable}) cannot import ({e}): on Debian/Ubuntu "
            "install the package python3-matplotlib (apt-get install "
            "python3-matplotlib, for /usr/bin/python3), elsewhere "
            "pip install matplotlib") from e
    return matplotlib


def _figure(width: float, height: float, dpi: float) -> "Figure":
    """A Figure on its own Agg canvas (no pyplot: nothing global)."""
    _mpl()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: "Figure", path: PathLike) -> Tuple[int, int]:
    """Draw and write `fig` as PNG at its own size; (width, height) in
    pixels."""
    fig.canvas.draw()
    fig.savefig(os.fspath(path), format="png", dpi=fig.dpi)
    w, h = fig.canvas.get_width_height()
    return int(w), int(h)


def _extent(fig: "Figure", ax: Any) -> Tuple[int, int, int, int]:
    """The axes' box in the PNG's pixels: (x0, y0, x1, y1), row 0 at the top
    (as matplotlib.image.imread returns the image), after a draw."""
    b = ax.get_window_extent()
    h = fig.canvas.get_width_height()[1]
    return (int(round(b.x0)), int(round(h - b.y1)), int(round(b.x1)), int(round(h - b.y0)))


# ---- arrays ------------------------------------------------------------------------

def to_numpy(x: Any) -> np.ndarray:
    """A host numpy array of `x`: a numpy array as it is, a slabfeed Tensor
    (host or device, bfloat16 included: copied with ``tobytes``), a torch
    tensor (detached, moved to the host, bfloat16 as float32), or anything
    ``numpy.asarray`` takes."""
    if isinstance(x, np.ndarray):
        return x
    if type(x).__module__.startswith("slabfeed") and hasattr(x, "tobytes") \
            and isinstance(getattr(x, "dtype", None), str):
        raw = x.tobytes()
        shape = tuple(x.shape)
        if x.dtype == "bfloat16":  # the upper half of a float32
            bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
            return bits.view(np.float32).reshape(shape)
        return np.frombuffer(raw, dtype=np.dtype(x.dtype)).reshape(shape)
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch.Tensor
        t = x.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        return t.numpy()
    return np.asarray(x)


def _axis(axis: Axis) -> int:
    if isinstance(axis, str):
        if axis.lower() not in ("z", "y", "x", "0", "1", "2"):
            raise ValueError(f"slabfeed.pictures: axis {axis!r}: expected z, y, x or 0, 1, 2")
        a = axis.lower()
        return int(a) if a.isdigit() else _AXES.index(a)
    a = int(axis)
    if a not in (0, 1, 2):
        raise ValueError(f"slabfeed.pictures: axis {axis!r}: expected 0 (z), 1 (y) or 2 (x)")
    return a


def take_slice(array: Any, axis: Axis = 0, index: Optional[int] = None,
               channel: int = 0, channels_last: bool = False
               ) -> Tuple[np.ndarray, Dict[str, Any]]:
    """The 2-D slice that the pictures draw, and what it is.

    `array` is (Z, Y, X), (C, Z, Y, X) (or (Z, Y, X, C) with
    `channels_last`), or already a 2-D slice (drawn as it is: `axis`,
    `index` and `channel` are then ignored). Returns ``(slice, where)``:
    the slice as float64 (rows the first remaining axis, columns the
    second), and ``where`` = {axis, index, channel, rows, cols}, the axis
    names ('z', 'y', 'x') of the rows and columns. `index` None is the
    middle plane; a negative index counts from the end.
    """
    a = to_numpy(array)
    if a.ndim == 2:
        return a.astype(np.float64), {"axis": None, "index": None, "channel": None,
                                      "rows": "row", "cols": "column"}
    ch: Optional[int] = None
    if a.ndim == 4:
        a = np.moveaxis(a, -1, 0) if channels_last else a
        if not -a.shape[0] <= channel < a.shape[0]:
            raise IndexError(f"slabfeed.pictures: channel {channel} of {a.shape[0]}")
        ch = int(channel) % a.shape[0]
        a = a[ch]
    elif a.ndim != 3:
        raise ValueError(
            f"slabfeed.pictures: an array of shape {a.shape}: expected (Z, Y, X), "
            "(C, Z, Y, X) or a 2-D slice (a batch (N, C, D, H, W): save_crops, "
            "or one sample batch[i])")
    ax = _axis(axis)
    n = a.shape[ax]
    i = n // 2 if index is None else int(index)
    if not -n <= i < n:
        raise IndexError(f"slabfeed.pictures: index {i} on axis {_AXES[ax]} of extent {n}")
    i %= n
    rest = [_AXES[k] for k in range(3) if k != ax]
    s = np.take(a, i, axis=ax).astype(np.float64)
    return s, {"axis": _AXES[ax], "index": i, "channel": ch, "rows": rest[0], "cols": rest[1]}


def _limits(values: Sequence[np.ndarray], vmin: Optional[float],
            vmax: Optional[float]) -> Tuple[float, float]:
    """vmin, vmax: the given ones, else the finite range of `values`."""
    finite = [v[np.isfinite(v)] for v in values]
    finite = [v for v in finite if v.size]
    lo = float(min(v.min() for v in finite)) if finite else 0.0
    hi = float(max(v.max() for v in finite)) if finite else 1.0
    lo = lo if vmin is None else float(vmin)
    hi = hi if vmax is None else float(vmax)
    return lo, hi


def _where_text(w: Dict[str, Any]) -> str:
    parts = []
    if w.get("channel") is not None:
        parts.append(f"channel {w['channel']}")
    if w.get("axis") is not None:
        parts.append(f"{w['axis']} = {w['index']}")
    return ", ".join(parts)


# ---- one slice -----------------------------------------------------------------------

def save_slice(path: PathLike, array: Any, axis: Axis = 0, index: Optional[int] = None,
               channel: int = 0, vmin: Optional[float] = None,
               vmax: Optional[float] = None, title: Optional[str] = None,
               cmap: Optional[str] = None, *, exact: bool = False, scale: int = 1,
               channels_last: bool = False, axis_names: Optional[Sequence[str]] = None,
               dpi: float = 100.0) -> Dict[str, Any]:
    """Write one slice of `array` as a PNG at `path`.

    `array`: (Z, Y, X), (C, Z, Y, X) (``channels_last``: (Z, Y, X, C)) or a
    2-D slice; a numpy array, a slabfeed Tensor, a torch tensor or anything
    ``numpy.asarray`` takes. The slice is plane `index` (None: the middle)
    across `axis` (0/'z', 1/'y', 2/'x') of `channel` (see ``take_slice``
    for its orientation). The color scale is [vmin, vmax], by default the
    slice's finite range.

    ``exact=False``: a figure with the image (nearest-neighbour), its axes
    named (`axis_names` (rows, columns) overrides the names, e.g. for a
    2-D slice) and a colorbar, titled `title` (default: what the slice
    is);
    `cmap` defaults to 'viridis'. ``exact=True``: the raw image, one pixel
    per cell repeated into `scale` x `scale` blocks, no axes, no title
    (``matplotlib.image.imsave``; the mapping of values to pixels is in the
    module's docstring); `cmap` defaults to 'gray'.

    Returns {'slice': the 2-D float64 slice drawn (before `scale`),
    'vmin', 'vmax', 'size': (width, height) of the PNG in pixels, and
    'axis', 'index', 'channel', 'rows', 'cols' (``take_slice``)}.
    """
    s, where = take_slice(array, axis, index, channel, channels_last)
    if axis_names is not None:
        where["rows"], where["cols"] = axis_names[0], axis_names[1]
    lo, hi = _limits([s], vmin, vmax)
    scale = int(scale)
    if scale < 1:
        raise ValueError(f"slabfeed.pictures: scale {scale}: expected an integer >= 1")
    info: Dict[str, Any] = {"slice": s, "vmin": lo, "vmax": hi, **where}
    mpl = _mpl()
    if exact:
        img = np.repeat(np.repeat(s, scale, axis=0), scale, axis=1) if scale > 1 else s
        mpl.image.imsave(os.fspath(path), img, cmap=cmap or "gray", vmin=lo, vmax=hi,
                         format="png", origin="upper")
        info["size"] = (img.shape[1], img.shape[0])
        return info
    rows, cols = s.shape
    width = 4.2 * max(0.4, min(2.5, cols / rows)) + 1.8
    fig = _figure(width, 5.0, dpi)
    ax = fig.add_subplot()
    im = ax.imshow(s, cmap=cmap or "viridis", vmin=lo, vmax=hi, origin="upper",
                   interpolation="nearest")
    ax.set_xlabel(where["cols"])
    ax.set_ylabel(where["rows"])
    ax.set_title(title if title is not None else _where_text(where))
    fig.colorbar(im, ax=ax, shrink=0.85)
    info["size"] = _save(fig, path)
    return info


# ---- the crops of a batch -------------------------------------------------------------

def _batch_parts(batch: Any, target: Any, meta: Any) -> Tuple[Any, Any, Any]:
    """(input, target, meta) of a slabfeed Batch, a TorchBatch (x, y, meta)
    or an array with the `target` and `meta` given."""
    if hasattr(batch, "meta") and hasattr(batch, "input"):  # slabfeed.torch.TorchBatch
        return batch.input, batch.target if target is None else target, \
            batch.meta if meta is None else meta
    if hasattr(batch, "input") and hasattr(batch, "origin"):  # slabfeed.Batch
        return batch.input, batch.target if target is None else target, \
            batch if meta is None else meta
    return batch, target, meta


def _meta_field(meta: Any, name: str) -> Optional[Sequence[Any]]:
    if meta is None:
        return None
    v = meta.get(name) if isinstance(meta, dict) else getattr(meta, name, None)
    return None if v is None or len(v) == 0 else v


def save_crops(path: PathLike, batch: Any, *, target: Any = None, show_target: bool = True,
               meta: Any = None, channel: int = 0, target_channel: Optional[int] = None,
               axis: Axis = 0, index: Optional[int] = None, channels_last: bool = False,
               vmin: Optional[float] = None, vmax: Optional[float] = None,
               target_vmin: Optional[float] = None, target_vmax: Optional[float] = None,
               cmap: str = "viridis", target_cmap: Optional[str] = None,
               max_crops: int = 16, columns: Optional[int] = None,
               title: Optional[str] = None, dpi: float = 100.0) -> Dict[str, Any]:
    """Write a grid of one slice per crop of a batch as a PNG at `path`.

    `batch`: a ``slabfeed.Batch`` (its input and target tensors, origins,
    symmetry ids and volumes), a ``slabfeed.torch`` batch ``(x, y, meta)``,
    or an array (N, C, D, H, W) (``channels_last``: (N, D, H, W, C)) with
    `target` (an array like it, or None) and `meta` (anything with, or a
    dict of, ``origin``, ``symmetry``, ``volume``, ``sample``) given. The
    given `target` and `meta` replace the batch's. Channels-last batches
    (``out_layout='ndhwc'``) need ``channels_last=True``: a Batch does not
    say its layout.

    Each panel is slice `index` (None: the middle) across `axis` of
    `channel` of one crop (``take_slice``), titled with the sample's
    origin (z, y, x) in its volume, symmetry id and volume index (those
    the batch carries); with a target and `show_target`, the target's
    slice (its `target_channel`, default `channel`) is drawn right of its
    input. The inputs share one color scale ([vmin, vmax], default the
    range of the panels drawn), the targets another. A tiled pass's batch
    draws its real slots only (``count``); at most `max_crops` crops, in
    `columns` columns (default: up to 4 crops a row).

    Returns {'titles': the panels' titles, input then target per crop,
    'size': (width, height) in pixels, 'crops': the number drawn,
    'vmin', 'vmax', 'target_vmin', 'target_vmax'}.
    """
    x, y, meta = _batch_parts(batch, target, meta)
    x = to_numpy(x)
    if x.ndim != 5:
        raise ValueError(f"slabfeed.pictures: a batch of shape {x.shape}: expected "
                         "(N, C, D, H, W) (or (N, D, H, W, C) with channels_last)")
    y = None if (y is None or not show_target) else to_numpy(y)
    if y is not None and (y.ndim != 5 or y.shape[0] != x.shape[0]):
        raise ValueError(f"slabfeed.pictures: target of shape {y.shape} for a batch "
                         f"of shape {x.shape}")
    n = x.shape[0]
    count = getattr(meta, "count", None) if not isinstance(meta, dict) else meta.get("count")
    if isinstance(count, int) and 0 < count < n:
        n = count
    n = min(n, int(max_crops))
    if n < 1:
        raise ValueError("slabfeed.pictures: no crop to draw")
    origin = _meta_field(meta, "origin")
    symmetry = _meta_field(meta, "symmetry")
    volume = _meta_field(meta, "volume")
    sample = _meta_field(meta, "sample")
    tch = channel if target_channel is None else target_channel
    xs, ys, titles = [], [], []
    where: Dict[str, Any] = {}
    for i in range(n):
        s, where = take_slice(x[i], axis, index, channel, channels_last)
        xs.append(s)
        head = []
        if sample is not None:
            head.append(f"sample {sample[i]}")
        if origin is not None:
            head.append("origin (" + ", ".join(str(int(v)) for v in origin[i]) + ")")
        tail = []
        if symmetry is not None:
            tail.append(f"sym {symmetry[i]}")
        if volume is not None:
            tail.append(f"vol {volume[i]}")
        text = " ".join(head) + ("\n" if head and tail else "") + ", ".join(tail)
        titles.append(f"#{i} input" + (f": {text}" if text else ""))
        if y is not None:
            t, _ = take_slice(y[i], axis, index, tch, channels_last)
            ys.append(t)
            titles.append(f"#{i} target (channel {tch})")
    lo, hi = _limits(xs, vmin, vmax)
    tlo, thi = _limits(ys, target_vmin, target_vmax) if ys else (None, None)
    per = 2 if y is not None else 1
    if columns:
        cols_crops = min(n, int(columns))
    else:  # up to 4 a row, rows as full as they can be
        cols_crops = -(-n // -(-n // 4))
    grid_rows = -(-n // cols_crops)
    grid_cols = cols_crops * per
    fig = _figure(2.9 * grid_cols + 0.8, 3.1 * grid_rows + 0.6, dpi)
    axes = fig.subplots(grid_rows, grid_cols, squeeze=False)
    im_x = im_y = None
    for i in range(grid_rows * cols_crops):
        r, c = divmod(i, cols_crops)
        for p in range(per):
            ax = axes[r][c * per + p]
            if i >= n:
                ax.set_axis_off()
                continue
            if p == 0:
                im_x = ax.imshow(xs[i], cmap=cmap, vmin=lo, vmax=hi, origin="upper",
                                 interpolation="nearest")
            else:
                im_y = ax.imshow(ys[i], cmap=target_cmap or cmap, vmin=tlo, vmax=thi,
                                 origin="upper", interpolation="nearest")
            ax.set_title(titles[i * per + p], fontsize=8)
            ax.tick_params(labelsize=6)
            ax.set_xlabel(where["cols"], fontsize=7)
            ax.set_ylabel(where["rows"], fontsize=7)
    everything = axes.ravel().tolist()
    if im_x is not None:
        # the inputs' scale on the left, the targets' on the right
        fig.colorbar(im_x, ax=everything, shrink=0.8, label="input", pad=0.01,
                     location="left" if im_y is not None else "right")
    if im_y is not None:
        fig.colorbar(im_y, ax=everything, shrink=0.8, label="target", pad=0.01)
    head = title if title is not None else "crops: " + _where_text({**where, "channel": channel})
    step = getattr(meta, "step", None) if not isinstance(meta, dict) else meta.get("step")
    epoch = getattr(meta, "epoch", None) if not isinstance(meta, dict) else meta.get("epoch")
    if title is None and step is not None and epoch is not None:
        head += f" (epoch {epoch}, step {step})"
    fig.suptitle(head, fontsize=10)
    size = _save(fig, path)
    return {"titles": titles, "size": size, "crops": n, "vmin": lo, "vmax": hi,
            "target_vmin": tlo, "target_vmax": thi}


# ---- power spectra -----------------------------------------------------------------------

def power_spectrum(field: Any, box_size: Optional[float] = None
                   ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The isotropic (shell-averaged) power spectrum of a periodic 1-, 2- or
    3-D field: ``(k, P, modes)``.

    The field's discrete Fourier transform F (``numpy.fft.rfftn``,
    unnormalised, in float64) gives P = |F|^2 / N per mode (N the number of
    cells; the mean is in the k = 0 mode, left out, so the field's mean
    does not matter). The modes are grouped in shells of width k_f, the
    fundamental wavenumber 2 pi / L of the shortest axis (L its extent):
    the shell of a mode is round(|k| / k_f); shells 1 .. n/2 (n the
    shortest extent: up to its Nyquist wavenumber) are kept. Per shell: k
    is the mean |k| of its modes, P their mean power, `modes` their
    number (each mode of the full transform counted once: the rfft's half
    spectrum is weighted). k is in units of k_f, or in 1 / (the units of
    `box_size`) when the shortest axis is `box_size` long (k = 2 pi /
    box_size per k_f). Shells without modes are left out. The whole field
    is transformed in memory (float64: about 16 bytes a cell and a few
    temporaries): draw a sub-volume of a huge box.
    """
    f = to_numpy(field).astype(np.float64)
    if f.ndim not in (1, 2, 3):
        raise ValueError(f"slabfeed.pictures: power_spectrum of a field of shape {f.shape}: "
                         "expected 1, 2 or 3 dimensions")
    F = np.fft.rfftn(f)
    power = (F.real ** 2 + F.imag ** 2) / f.size
    freqs = [np.fft.fftfreq(n) for n in f.shape[:-1]] + [np.fft.rfftfreq(f.shape[-1])]
    grids = np.meshgrid(*freqs, indexing="ij", sparse=True)
    kmag = np.sqrt(sum(g ** 2 for g in grids))  # cycles per cell
    nmin = min(f.shape)
    shell = np.rint(kmag * nmin).astype(np.int64)
    weight = np.full(F.shape, 2.0)
    weight[..., 0] = 1.0
    if f.shape[-1] % 2 == 0:
        weight[..., -1] = 1.0
    top = nmin // 2
    sel = (shell >= 1) & (shell <= top)
    idx = shell[sel]
    w = weight[sel]
    modes = np.bincount(idx, weights=w, minlength=top + 1)[1:]
    psum = np.bincount(idx, weights=w * power[sel], minlength=top + 1)[1:]
    ksum = np.bincount(idx, weights=w * kmag[sel], minlength=top + 1)[1:]
    keep = modes > 0
    k = ksum[keep] / modes[keep] * nmin
    if box_size is not None:
        k = k * (2.0 * np.pi / float(box_size))
    return k, psum[keep] / modes[keep], modes[keep]


def spectrum_ratio(prediction: Any, truth: Any, box_size: Optional[float] = None
                   ) -> Tuple[np.ndarray, np.ndarray]:
    """``(k, P_pred(k) / P_truth(k))`` of two fields of one shape
    (``power_spectrum``); NaN where the truth's shell has no power."""
    p = to_numpy(prediction)
    t = to_numpy(truth)
    if p.shape != t.shape:
        raise ValueError(f"slabfeed.pictures: prediction {p.shape} and truth {t.shape} "
                         "differ in shape")
    k, pp, _ = power_spectrum(p, box_size)
    _, pt, _ = power_spectrum(t, box_size)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(pt > 0, pp / np.where(pt > 0, pt, 1.0), np.nan)
    return k, ratio


# ---- a prediction against the truth --------------------------------------------------

def save_comparison(path: PathLike, prediction: Any, truth: Any, *, channel: int = 0,
                    axis: Axis = 0, index: Optional[int] = None,
                    channels_last: bool = False, vmin: Optional[float] = None,
                    vmax: Optional[float] = None, cmap: str = "viridis",
                    diff_cmap: str = "RdBu_r", box_size: Optional[float] = None,
                    title: Optional[str] = None, labels: Sequence[str] = ("prediction", "truth"),
                    dpi: float = 100.0) -> Dict[str, Any]:
    """Write the prediction beside the truth beside their difference, and
    their power-spectrum ratio, as one PNG at `path` (four panels in a row).

    `prediction` and `truth`: one shape, (Z, Y, X) or (C, Z, Y, X)
    (``channels_last``: (Z, Y, X, C)); numpy arrays, torch tensors, slabfeed
    Tensors, anything ``numpy.asarray`` takes. The image panels are slice
    `index` (None: the middle) across `axis` of `channel`
    (``take_slice``): prediction and truth on one color scale ([vmin,
    vmax], default the range of both slices), the difference prediction -
    truth on a symmetric one [-d, d], d = max |difference| (1 where they
    are equal: zero is the middle color of `diff_cmap`, near white for RdBu_r).
    The fourth panel plots P_pred(k) / P_truth(k) of the whole 3-D channel
    (``power_spectrum``: isotropic shell averages of |FFT|^2, k in units of
    the fundamental 2 pi / L, or 1/length with `box_size`), on a log k
    axis, with the ratio 1 marked.

    Returns {'k', 'ratio' (arrays, per shell), 'p_pred', 'p_truth',
    'modes', 'vmin', 'vmax', 'diff_max' (d), 'size': (width, height) in
    pixels, 'panels': {'prediction', 'truth', 'difference', 'spectrum':
    (x0, y0, x1, y1) of each panel's axes in the PNG's pixels, row 0 at the
    top}}.
    """
    p = to_numpy(prediction)
    t = to_numpy(truth)
    if p.shape != t.shape:
        raise ValueError(f"slabfeed.pictures: prediction {p.shape} and truth {t.shape} "
                         "differ in shape")
    if p.ndim not in (3, 4):
        raise ValueError(f"slabfeed.pictures: save_comparison of shape {p.shape}: expected "
                         "(Z, Y, X) or (C, Z, Y, X)")
    ps, where = take_slice(p, axis, index, channel, channels_last)
    ts, _ = take_slice(t, axis, index, channel, channels_last)
    lo, hi = _limits([ps, ts], vmin, vmax)
    diff = ps - ts
    finite = diff[np.isfinite(diff)]
    dmax = float(np.abs(finite).max()) if finite.size else 0.0
    dscale = dmax if dmax > 0 else 1.0
    if p.ndim == 4:
        p3 = np.moveaxis(p, -1, 0)[where["channel"]] if channels_last else p[where["channel"]]
        t3 = np.moveaxis(t, -1, 0)[where["channel"]] if channels_last else t[where["channel"]]
    else:
        p3, t3 = p, t
    k, pp, modes = power_spectrum(p3, box_size)
    _, pt, _ = power_spectrum(t3, box_size)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(pt > 0, pp / np.where(pt > 0, pt, 1.0), np.nan)

    fig = _figure(18.0, 4.5, dpi)
    fig.get_layout_engine().set(wspace=0.04)
    axes = fig.subplots(1, 4, gridspec_kw={"width_ratios": [1, 1, 1, 1.15]})
    names = (labels[0], labels[1], "difference")
    for ax, img, name in zip(axes[:2], (ps, ts), names):
        im = ax.imshow(img, cmap=cmap, vmin=lo, vmax=hi, origin="upper",
                       interpolation="nearest")
        ax.set_title(name)
    fig.colorbar(im, ax=list(axes[:2]), shrink=0.8)
    imd = axes[2].imshow(diff, cmap=diff_cmap, vmin=-dscale, vmax=dscale, origin="upper",
                         interpolation="nearest")
    axes[2].set_title(f"{labels[0]} - {labels[1]} (max |d| = {dmax:.3g})")
    fig.colorbar(imd, ax=axes[2], shrink=0.8)
    for ax in axes[:3]:
        ax.set_xlabel(where["cols"])
        ax.set_ylabel(where["rows"])
    sp = axes[3]
    good = np.isfinite(ratio)
    sp.semilogx(k[good], ratio[good], marker="o", markersize=3, lw=1.2)
    sp.axhline(1.0, color="k", ls="--", lw=0.8)
    rg = ratio[good]
    ylo = min(0.8, float(rg.min())) if rg.size else 0.8
    yhi = max(1.2, float(rg.max())) if rg.size else 1.2
    pad = 0.05 * (yhi - ylo)
    sp.set_ylim(ylo - pad, yhi + pad)
    sp.set_xlabel("k [1/length]" if box_size is not None else "k [2\u03c0/L]")
    sp.set_ylabel("P_pred(k) / P_truth(k)")
    sp.set_title("power spectrum ratio")
    sp.grid(True, which="both", alpha=0.3)
    fig.suptitle(title if title is not None else _where_text(where))
    size = _save(fig, path)
    panels = {n: _extent(fig, a) for n, a in
              zip(("prediction", "truth", "difference", "spectrum"), axes)}
    return {"k": k, "ratio": ratio, "p_pred": pp, "p_truth": pt, "modes": modes,
            "vmin": lo, "vmax": hi, "diff_max": dmax, "size": size, "panels": panels}


# ---- files, through slabfeed -------------------------------------------------------------

def read_slice(path: PathLike, dataset: str, axis: Axis = 0, index: Optional[int] = None,
               channel: int = 0, layout: str = "auto") -> Tuple[np.ndarray, Dict[str, Any]]:
    """Plane `index` (None: the middle) across `axis` of `channel` of a
    dataset of a file, read with slabfeed's serial reader
    (``slabfeed.tools.Reader``: only that plane is read, as float32) and
    returned as ``take_slice`` does: (2-D float64 slice, where), plus
    'shape' (Z, Y, X) and 'channels' of the dataset in `where`. Not
    collective; no MPI needed."""
    from . import tools

    d = tools.describe(path, dataset, layout)
    shape = tuple(int(v) for v in d["shape"])
    ax = _axis(axis)
    n = shape[ax]
    i = n // 2 if index is None else int(index)
    if not -n <= i < n:
        raise IndexError(f"slabfeed.pictures: index {i} on axis {_AXES[ax]} of extent {n}")
    i %= n
    nch = int(d["channels"])
    if not -nch <= channel < nch:
        raise IndexError(f"slabfeed.pictures: channel {channel} of {nch} in {dataset}")
    origin = [0, 0, 0]
    origin[ax] = i
    crop = list(shape)
    crop[ax] = 1
    with tools.Reader(path) as r:
        a = r.crop(dataset, origin, crop, layout=layout)  # (C, cz, cy, cx)
    s = np.take(a[channel % nch], 0, axis=ax).astype(np.float64)
    rest = [_AXES[k] for k in range(3) if k != ax]
    return s, {"axis": _AXES[ax], "index": i, "channel": channel % nch, "rows": rest[0],
               "cols": rest[1], "shape": shape, "channels": nch}


# ---- command line --------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        # The interpreter running this one (which imported the package),
        # so that the usage is a command that works as shown.
        prog=f"{sys.executable or '$SF_PY'} -m slabfeed.pictures",
        description="PNG pictures of slabfeed volumes and batches (matplotlib).")
    sub = p.add_subparsers(dest="command", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--channel", type=int, default=0, help="channel drawn (default 0)")
        q.add_argument("--axis", default="z",
                       help="axis across which to slice: z, y, x or 0, 1, 2 (default z)")
        q.add_argument("--index", type=int, default=None, help="plane (default: the middle one)")
        q.add_argument("--vmin", type=float, default=None,
                       help="color scale minimum (default: the data's)")
        q.add_argument("--vmax", type=float, default=None,
                       help="color scale maximum (default: the data's)")
        q.add_argument("--cmap", default=None, help="matplotlib colormap")
        q.add_argument("--title", default=None, help="title (default: what is drawn)")
        q.add_argument("--out", required=True, help="the PNG file to write")

    s = sub.add_parser("slice", help="one slice of a dataset of a file",
                       description="Draws one slice of a dataset, read through "
                       "slabfeed's serial reader.")
    s.add_argument("file")
    s.add_argument("--dataset", required=True, help="the dataset (e.g. Nbody)")
    s.add_argument("--layout", default="auto", choices=("auto", "cf", "cl"),
                   help="the dataset's layout (default auto)")
    common(s)
    s.add_argument("--exact", action="store_true",
                   help="the raw image: one pixel per cell, no axes (default cmap gray)")
    s.add_argument("--scale", type=int, default=1,
                   help="with --exact: pixels per cell along each side")

    c = sub.add_parser("crops", help="the crops of one batch of a loader opened on a file",
                       description="Opens a slabfeed.Loader on the file (collective: run it "
                       "alone, or under mpiexec, where rank 0 draws its own batch) and "
                       "draws one batch.")
    c.add_argument("file")
    c.add_argument("--input", required=True, help="input dataset")
    c.add_argument("--target", default=None, help="target dataset (drawn beside the input)")
    c.add_argument("--crop", type=int, default=32, help="crop edge (default 32)")
    c.add_argument("--batch", type=int, default=4, help="crops in the batch (default 4)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--symmetries", default=None, choices=("all", "rotations", "none"))
    c.add_argument("--epoch", type=int, default=0)
    c.add_argument("--step", type=int, default=0)
    c.add_argument("--target-channel", type=int, default=None)
    common(c)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line (``$SF_PY -m slabfeed.pictures --help``)."""
    args = _parser().parse_args(argv)
    _mpl()  # the error names the package before any file is read
    if args.command == "slice":
        s, where = read_slice(args.file, args.dataset, args.axis, args.index,
                              args.channel, args.layout)
        title = args.title
        if title is None:
            title = f"{os.path.basename(args.file)}:{args.dataset} {_where_text(where)}"
        info = save_slice(args.out, s, vmin=args.vmin, vmax=args.vmax, title=title,
                          cmap=args.cmap, exact=args.exact, scale=args.scale,
                          axis_names=(where["rows"], where["cols"]))
        print(f"{args.out}: {where['rows']} x {where['cols']} slice {s.shape[0]}x{s.shape[1]} "
              f"of {args.dataset} {_where_text(where)}, {info['size'][0]}x{info['size'][1]} px, "
              f"scale [{info['vmin']:.6g}, {info['vmax']:.6g}]")
        return 0
    from mpi4py import MPI  # before the loader: mpi4py initialises MPI

    from . import Loader

    opts: Dict[str, Any] = {"path": args.file, "input": args.input, "crop": args.crop,
                            "batch": args.batch, "seed": args.seed}
    if args.target:
        opts["target"] = args.target
    if args.symmetries:
        opts["symmetries"] = args.symmetries
    with Loader(MPI.COMM_WORLD, **opts) as loader:
        if (args.epoch, args.step) != (0, 0):
            loader.seek(args.epoch, args.step)
        b = loader.next()
        if loader.rank == 0:
            info = save_crops(args.out, b, channel=args.channel,
                              target_channel=args.target_channel, axis=args.axis,
                              index=args.index, vmin=args.vmin, vmax=args.vmax,
                              cmap=args.cmap or "viridis", title=args.title)
            print(f"{args.out}: {info['crops']} crops of epoch {b.epoch} step {b.step}, "
                  f"{info['size'][0]}x{info['size'][1]} px")
            for t in info["titles"]:
                print("  " + t.replace("\n", " "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
