#!/usr/bin/env python3
"""PNG charts from slabfeed-bench / peer JSON lines.

    python3 bench/plot.py bench.jsonl outdir/
Writes throughput.png (GB/s per configuration, loader beside the full-copy
baseline and the peer, with the pinned-H2D ceiling) and stages.png (time
per step by stage for each loader configuration)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    rows = [json.loads(l.split("JSON ", 1)[-1]) for l in open(sys.argv[1]) if l.strip()]
    out = sys.argv[2].rstrip("/")
    runs = [r for r in rows if r.get("step_ms", 0) == 0]
    labels = [f"{r['bench']}\n{r.get('ranks', 1)}r c{r['crop']} b{r['batch']} "
              f"{r.get('dtype', 'f32')}" + (f" w{r['workers']}" if "workers" in r else "")
              for r in runs]
    fig, ax = plt.subplots(figsize=(max(8, len(runs) * 1.1), 5))
    colors = {"loader": "tab:blue", "fullcopy": "tab:orange", "peer": "tab:gray"}
    ax.bar(range(len(runs)), [r["gbs"] for r in runs],
           color=[colors.get(r["bench"], "k") for r in runs])
    pinned = max((r.get("ceil_pinned") or 0 for r in runs), default=0)
    if pinned:
        ax.axhline(pinned, ls="--", c="r", label=f"pinned H2D ceiling {pinned:.1f} GB/s")
        ax.legend()
    ax.set_xticks(range(len(runs)), labels, fontsize=7)
    ax.set_ylabel("GB/s delivered (input + target)")
    ax.set_title("slabfeed on one H200: throughput beside the ceiling, baseline and peer")
    fig.tight_layout()
    fig.savefig(f"{out}/throughput.png", dpi=120)

    lr = [r for r in runs if r["bench"] == "loader"]
    fig, ax = plt.subplots(figsize=(max(8, len(lr) * 1.1), 5))
    bottom = [0.0] * len(lr)
    for st in ["plan_ms", "gather_ms", "h2d_ms", "transform_ms", "wait_ms"]:
        vals = [r.get(st, 0) for r in lr]
        ax.bar(range(len(lr)), vals, bottom=bottom, label=st[:-3])
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(lr)), [l for l, r in zip(labels, runs) if r["bench"] == "loader"],
                  fontsize=7)
    ax.set_ylabel("host ms per step (rank 0)")
    ax.set_title("where the loader's host time goes")
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out}/stages.png", dpi=120)


if __name__ == "__main__":
    main()
