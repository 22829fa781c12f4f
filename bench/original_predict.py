#!/usr/bin/env python3
"""The tiled prediction pass slabfeed-predict replaces, as users write it
(map2map's test pass has the same shape), on the same HDF5 file.

One process reads the whole input dataset with h5py; a DataLoader cuts
the tiles (edge T + 2 pad, origins on the T grid, periodic: np.take with
mode='wrap' on each axis) in forked workers with pin_memory; the model,
the identity, runs on the GPU; each tile's T^3 centre is copied back and
stitched into one array, which h5py writes into a file beside the output,
renamed over it when complete. Prints each step's time, the rates against
nothing (the ceilings are slabfeed-predict's of the same run, printed by
bench/predict_vs_original.sh), and a JSON line.

    python3 bench/original_predict.py --file box.h5 --input Nbody \\
        --tile 128 --pad 16 --workers 8 --out original.h5
"""
import time

T_START = time.time()  # before the imports: they are part of the pass

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402


class Tiles(Dataset):
    """Tile g of the box: its origin on the T grid (z slowest), the crop of
    edge T + 2 pad around it with periodic wrap, as float32 (C, E, E, E)."""

    def __init__(self, vol, tile, pad):
        self.vol, self.T, self.P = vol, tile, pad
        self.n = [s // tile for s in vol.shape[1:]]
        if any(s % tile for s in vol.shape[1:]):
            raise SystemExit(f"original_predict: box {vol.shape[1:]} is not "
                             f"a multiple of the tile {tile}")

    def __len__(self):
        return self.n[0] * self.n[1] * self.n[2]

    def origin(self, g):
        z, r = divmod(g, self.n[1] * self.n[2])
        y, x = divmod(r, self.n[2])
        return z * self.T, y * self.T, x * self.T

    def __getitem__(self, g):
        a = self.vol
        E = self.T + 2 * self.P
        for axis, o in enumerate(self.origin(g)):
            a = np.take(a, np.arange(o - self.P, o - self.P + E), axis=axis + 1,
                        mode="wrap")
        return torch.from_numpy(np.ascontiguousarray(a)), g


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--file", required=True)
    p.add_argument("--input", default="Nbody")
    p.add_argument("--tile", type=int, default=128)
    p.add_argument("--pad", type=int, default=16)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--out", required=True)
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing --out")
    a = p.parse_args()
    if os.path.exists(a.out) and not a.overwrite:
        raise SystemExit(f"original_predict: {a.out} exists (--overwrite)")
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    t_imports = time.time() - T_START

    t = time.time()
    with h5py.File(a.file, "r") as f:
        vol = f[a.input][...]  # (C, Z, Y, X) float32, the whole box
    t_read = time.time() - t

    t = time.time()
    ds = Tiles(vol, a.tile, a.pad)
    model = torch.nn.Identity().to(dev)
    out = np.empty_like(vol)
    T, P = a.tile, a.pad
    dl = DataLoader(ds, batch_size=a.batch, num_workers=a.workers,
                    pin_memory=dev.type == "cuda",
                    multiprocessing_context="fork" if a.workers else None)
    with torch.no_grad():
        for x, g in dl:
            y = model(x.to(dev, non_blocking=True))
            y = y[:, :, P:P + T, P:P + T, P:P + T].cpu().numpy()
            for k, gi in enumerate(g.tolist()):
                z, yy, xx = ds.origin(gi)
                out[:, z:z + T, yy:yy + T, xx:xx + T] = y[k]
    t_pass = time.time() - t

    t = time.time()
    tmp = a.out + ".partial"
    with h5py.File(tmp, "w") as f:
        f.create_dataset("prediction", data=out)
    os.replace(tmp, a.out)
    placed = time.time()  # the file in place: what the pass is timed to
    t_write = placed - t
    wall = time.time() - T_START
    gb = vol.nbytes / 1e9
    print(f"original: {a.file} -> {a.out}, {len(ds)} tiles of {T} + 2 x {P}, "
          f"{a.workers} workers, {dev.type}")
    print(f"original: imports + CUDA {t_imports:.2f} s, read {gb:.2f} GB "
          f"{t_read:.2f} s ({gb / t_read:.2f} GB/s), pass {t_pass:.2f} s "
          f"({len(ds) / t_pass:.1f} tiles/s), write {t_write:.2f} s "
          f"({gb / t_write:.2f} GB/s); wall {wall:.2f} s (in-process)",
          flush=True)
    print(f"original: output in place at Unix time {placed:.3f}", flush=True)
    print("JSON " + json.dumps({
        "bench": "original_predict", "file": a.file, "tile": T, "pad": P,
        "workers": a.workers, "tiles": len(ds), "bytes": vol.nbytes,
        "t_imports": t_imports, "t_read": t_read, "t_pass": t_pass,
        "t_write": t_write, "wall_inprocess": wall}), flush=True)


if __name__ == "__main__":
    main()
