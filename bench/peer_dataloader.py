#!/usr/bin/env python3
"""The pipeline slabfeed replaces, measured on the same HDF5 file.

Every process holds the whole volume (read with h5py in the parent, shared
copy-on-write with forked DataLoader workers); a sample is a random
periodic crop in numpy and a random cube symmetry (48 elements, velocity
channels 1..3 permuted and sign-flipped with the axes, as slabfeed does);
batches go through DataLoader(pin_memory=True) to the GPU. Prints crops/s
and GB/s (input + target bytes, float32) per worker count, as slabfeed-bench
does, plus a JSON line per run.

    python3 bench/peer_dataloader.py --file box.h5 --crop 128 --batch 4 \
        --workers 0 4 8 15 --batches 16
"""
import argparse
import json
import time

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

PERMS = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]


def symmetry(a, g, vec):
    """Symmetry g of a (C,c,c,c) crop: out axis i takes input axis perm[i],
    reversed where bit i of g // 6 is set; vector group vec = channels of
    the components along axes 0,1,2."""
    perm, flips = PERMS[g % 6], g // 6
    out = np.transpose(a, (0,) + tuple(1 + p for p in perm))
    for i in range(3):
        if flips >> i & 1:
            out = np.flip(out, axis=1 + i)
    out = np.array(out)
    if vec is not None:
        comp = out[list(vec)].copy()
        for i in range(3):
            s = -1.0 if flips >> i & 1 else 1.0
            out[vec[i]] = s * comp[perm[i]]
    return out


class Crops(Dataset):
    def __init__(self, path, crop, length, names=("Nbody", "Hydro")):
        with h5py.File(path, "r") as f:
            self.vols = [f[n][...] for n in names]  # whole volume, every process
        self.crop, self.length = crop, length
        self.n = self.vols[0].shape[1:]

    def __len__(self):
        return self.length

    def __getitem__(self, k):
        rng = np.random.default_rng()
        o = [rng.integers(0, n) for n in self.n]
        g = int(rng.integers(0, 48))
        idx = [np.arange(o[a], o[a] + self.crop) % self.n[a] for a in range(3)]
        out = []
        for v in self.vols:
            a = v[:, idx[0]][:, :, idx[1]][:, :, :, idx[2]]
            out.append(torch.from_numpy(symmetry(a, g, (1, 2, 3))))
        return out[0], out[1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--file", required=True)
    p.add_argument("--crop", type=int, default=128)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--batches", type=int, default=16)
    p.add_argument("--workers", type=int, nargs="+", default=[0, 4, 8, 15])
    a = p.parse_args()
    t = time.time()
    ds = Crops(a.file, a.crop, a.batch * (a.batches + 2))
    print(f"peer: whole volume loaded in {time.time() - t:.1f} s "
          f"({sum(v.nbytes for v in ds.vols) / 1e9:.2f} GB per process)", flush=True)
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    for w in a.workers:
        dl = DataLoader(ds, batch_size=a.batch, num_workers=w, pin_memory=True,
                        multiprocessing_context="fork" if w else None)
        it = iter(dl)
        x, y = next(it)  # warm-up: workers started, first batch
        nbytes, t = 0, time.time()
        for _ in range(a.batches):
            x, y = next(it)
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            nbytes += x.numel() * 4 + y.numel() * 4
        if dev.type == "cuda":
            torch.cuda.synchronize()
        dt = time.time() - t
        crops = a.batches * a.batch / dt
        print(f"peer: workers {w:2d}: {crops:7.2f} crops/s {nbytes / dt / 1e9:6.2f} GB/s", flush=True)
        print("JSON " + json.dumps({"bench": "peer", "workers": w, "crop": a.crop,
                                    "batch": a.batch, "crops_s": crops,
                                    "gbs": nbytes / dt / 1e9}), flush=True)


if __name__ == "__main__":
    main()
