#!/usr/bin/env python3
"""slabfeed at scale, on paper: remote bytes, transfers and crops/s per GPU.

A first-order model of one training step on one GPU (one rank) of a node,
for slabfeed's placement (z-slabs of a periodic box sharded over the ranks
of a group of G nodes, replicated across groups) and three transfer designs:

  rows       one transport operation per contiguous crop row (today: one
             MPI_Get per piece with subarray datatypes, which Open MPI's
             osc/rdma and osc/ucx turn into one operation per row)
  coalesced  one operation per remote (piece, channel) block -- or per
             piece, per dataset, or one packed message per owner and step
             (--block) -- with a bounded over-fetch factor (--overfetch, or
             --brick for a slab stored in bricks)
  local      locality mode: origins inside the node's z-range, a one-sided
             halo of crop-1 planes, no remote byte

and two ways of issuing them (--issue):

  next       today below MPI_THREAD_MULTIPLE: the gets run inside
             slabfeed_next on the caller's thread, serially with the step
  ahead      remote pieces of step n+K in flight while step n trains

Per step and GPU (B crops of edge c, C channels, float32 over every link):

  t_link = B c^3 C 4 / (host link GB/s x efficiency of c*4-byte rows)
  t_nic  = (remote bytes of the node's GPUs x over-fetch) / (NICs x NIC GB/s)
  t_op   = operations x alpha      (alpha: per-operation overhead)
  t_mem  = optional (--mem-gbs): the node's host DRAM traffic (H2D reads,
           fetched bytes landing and served) / achievable DRAM GB/s
  next:  t_step = max(t_link, t_mem, t_op + t_nic)
         exposed = t_op + t_nic + max(t_link, t_mem)
  ahead: t_step = max(t_link, t_nic, t_op, t_mem)
         exposed = max(0, t_step - T)
  crops/s per GPU = B / t_step

alpha comes from fitting bw(m) = m / (alpha + m / peak) to two points of a
message-size curve (--curve; default 1.5 GB/s at 1 KiB and 9.5 GB/s at
64 KiB, the open-mpi/ompi #4919 figures quoted in issue 10). The geometry
(expected remote planes, z-runs, pieces, rows, owners touched) is exact for
uniform origins in the periodic box; --verify enumerates every z-origin the
way src/batch.c splits a crop and compares.

Standard library only. docs/SCALING.md describes the model, its check
against measurements (--check) and its tables (--sweep --markdown).
"""
import argparse
import json
import math
import signal
import sys

GB = 1e9
GiB = float(1 << 30)
KIB = 1024

# Node presets (docs/SCALING.md gives the sources).
PRESETS = {
    "perlmutter": dict(
        gpus_per_node=4, nics=4, nic_gbs=25.0, host_mem_gib=256,
        host_link_gbs=25.0, mem_peak_gbs=204.8,
        label="Perlmutter-like: 4 A100, 4 x 25 GB/s NICs, 256 GB, "
              "PCIe 4 ~25 GB/s per GPU"),
    "dgx-h200": dict(
        gpus_per_node=8, nics=8, nic_gbs=50.0, host_mem_gib=2048,
        host_link_gbs=55.0, mem_peak_gbs=614.4,
        label="DGX H200: 8 GPUs, 8 x 400 Gb/s (50 GB/s) NICs, 2 TB, "
              "PCIe 5 ~55 GB/s per GPU (measured pinned H2D)"),
}

# Loader throughput / pinned H2D by crop row length (bytes), measured on
# one H200 (docs/PERFORMANCE.md): 64^3 0.46 (256-B rows), 128^3 0.76-0.78
# (512-B rows, 512^3 file, runs 11 and 13), 256^3 0.87-0.90 (1 KiB rows,
# runs 5, 7, 13). Interpolated in log2(row bytes), flat outside.
LINK_EFF = [(256, 0.46), (512, 0.77), (1024, 0.88)]

# open-mpi/ompi #4919 as quoted in issue 10 (GB/s at message bytes).
DEFAULT_CURVE = "1024:1.5,65536:9.5"


def link_efficiency(row_bytes):
    pts = LINK_EFF
    if row_bytes <= pts[0][0]:
        return pts[0][1]
    if row_bytes >= pts[-1][0]:
        return pts[-1][1]
    for (b0, e0), (b1, e1) in zip(pts, pts[1:]):
        if b0 <= row_bytes <= b1:
            t = (math.log2(row_bytes) - math.log2(b0)) / (
                math.log2(b1) - math.log2(b0))
            return e0 + t * (e1 - e0)
    return pts[-1][1]


def parse_curve(text):
    pts = []
    for part in text.split(","):
        m, g = part.split(":")
        pts.append((float(m), float(g) * GB))
    if len(pts) != 2 or pts[0][0] == pts[1][0]:
        raise ValueError("--curve needs two points SIZE:GBPS,SIZE:GBPS")
    return sorted(pts)


def fit_curve(pts):
    """alpha (s) and peak (B/s) of bw(m) = m / (alpha + m / peak) through
    two (message bytes, B/s) points: m/bw = alpha + m/peak is linear in m."""
    (m1, b1), (m2, b2) = pts
    t1, t2 = m1 / b1, m2 / b2
    inv_peak = (t2 - t1) / (m2 - m1)
    alpha = t1 - m1 * inv_peak
    if inv_peak <= 0 or alpha < 0:
        raise ValueError("curve points give no positive alpha and peak")
    return alpha, 1.0 / inv_peak


def bw_at(m, alpha, peak):
    return m / (alpha + m / peak)


# ---------------------------------------------------------------- geometry


def split_begin(Z, P, r):
    """First plane of rank r of P (src/geometry.c: sf__split_begin)."""
    base, rem = divmod(Z, P)
    return r * base + min(r, rem)


def runs_on_range(l, c, Z):
    """Expected number of maximal runs of a periodic crop [o, o+c) (o
    uniform in [0,Z)) inside a range of l planes. Exact for c <= Z-l+1:
    the crop meets the range for l+c-1 origins, once each."""
    if c <= Z - l + 1:
        return (l + c - 1) / Z
    return None  # the crop can meet the range twice: enumerate


def enumerate_node(Z, c, P, R, k):
    """Brute force for node k (ranks kR..kR+R-1): for every z-origin, split
    the crop like src/batch.c (periodic runs, then by owner rank) and count
    remote planes and remote z-runs. Returns (remote planes, remote z-runs,
    P(fully local)) averaged over origins."""
    bounds = [split_begin(Z, P, r) for r in range(P + 1)]
    owner = [0] * Z
    for r in range(P):
        for z in range(bounds[r], bounds[r + 1]):
            owner[z] = r
    planes = runs = local_all = 0
    for o in range(Z):
        pieces = []
        first = min(c, Z - o)
        pieces.append((o, first))
        if first < c:
            pieces.append((0, c - first))
        rp = rr = 0
        for z, n in pieces:
            while n > 0:
                r = owner[z]
                take = min(n, bounds[r + 1] - z)
                if r // R != k:
                    rp += take
                    rr += 1
                z += take
                n -= take
        planes += rp
        runs += rr
        local_all += rp == 0
    return planes / Z, runs / Z, local_all / Z


def geometry(Z, Y, X, c, G, R, B, verify=False):
    """Exact expectations for one crop of a rank on a node of a group of G
    nodes x R ranks (Z planes split over G*R ranks, node k holding ranks
    kR..kR+R-1, contiguous in z). Averaged over the nodes of the group."""
    P = G * R
    if P > Z:
        return None
    bounds = [split_begin(Z, P, r) for r in range(P + 1)]
    lens = [bounds[r + 1] - bounds[r] for r in range(P)]
    nodes = [0] if Z % P == 0 else list(range(G))
    acc = dict(remote_planes=0.0, remote_zruns=0.0, p_local=0.0,
               owners_step=0.0, node_planes=0.0)
    exact = True
    worst = 0.0
    for k in nodes:
        L = bounds[(k + 1) * R] - bounds[k * R]
        zr = 0.0
        own = 0.0
        for j in range(P):
            if j // R == k:
                continue
            x = runs_on_range(lens[j], c, Z)
            if x is None:
                exact = False
                break
            zr += x
            p = min(1.0, (lens[j] + c - 1) / Z)
            own += 1.0 - (1.0 - p) ** B
        if not exact:
            rp, zr, pl = enumerate_node(Z, c, P, R, k)
        else:
            rp = c * (Z - L) / Z  # linearity: each crop plane is uniform
            pl = max(0, L - c + 1) / Z if G > 1 else 1.0
        acc["remote_planes"] += rp
        worst = max(worst, rp / c)
        acc["remote_zruns"] += zr
        acc["p_local"] += pl
        acc["owners_step"] += own
        acc["node_planes"] += L
    n = len(nodes)
    g = {key: v / n for key, v in acc.items()}
    g["ey"] = 1.0 + (c - 1) / Y  # periodic y-runs per crop (c <= Y)
    g["ex"] = 1.0 + (c - 1) / X
    g["remote_fraction"] = g["remote_planes"] / c
    g["naive_fraction"] = 1.0 - 1.0 / G
    g["worst_node_fraction"] = worst
    g["exact_closed_form"] = exact
    if verify:
        vp = vz = vl = 0.0
        for k in nodes:
            a, b, cl = enumerate_node(Z, c, P, R, k)
            vp += a
            vz += b
            vl += cl
        g["verify"] = dict(remote_planes=vp / n, remote_zruns=vz / n,
                           p_local=vl / n)
    return g


# ---------------------------------------------------------------- model


def auto_group(volume_bytes, budget_bytes, N):
    return max(1, min(N, math.ceil(volume_bytes / budget_bytes)))


def predict(p):
    """p: dict of parameters (see build_params). Returns a dict."""
    Z, Y, X = p["shape"]
    c, B, N, R = p["crop"], p["batch"], p["nodes"], p["gpus_per_node"]
    C = sum(p["channels"])
    ndsets = len(p["channels"])
    vol = Z * Y * X * C * 4
    budget = p["budget_bytes"]
    G = p["group"]
    if G in ("auto", None) and p["design"] == "local":
        # locality mode holds Z/G + c-1 planes: the smallest G that fits
        G = next((g for g in range(1, N + 1)
                  if vol * min(Z, Z / g + p["crop"] - 1) / Z <= budget), N)
    elif G in ("auto", None):
        G = auto_group(vol, budget, N)
    if p.get("divisor") and G not in ("all",) and isinstance(G, int):
        G = next(g for g in range(G, N + 1) if N % g == 0)
    elif G == "all":
        G = N
    G = int(G)
    if G < 1 or G > N:
        raise ValueError("G must be in [1, N]")
    design = p["design"]
    out = dict(nodes=N, gpus_per_node=R, group=G, design=design,
               crop=c, batch=B, volume_edge=Z, channels=C,
               volume_bytes=vol, budget_bytes=budget)
    halo = c - 1 if design == "local" else 0
    node_planes = Z / G + halo
    out["slab_bytes_per_node"] = vol * min(Z, node_planes) / Z
    out["fits_budget"] = out["slab_bytes_per_node"] <= budget
    out["fits_memory"] = out["slab_bytes_per_node"] <= p["host_mem_bytes"]
    crop_bytes = c * c * c * C * 4
    if G * R > Z:
        out["feasible"] = False
        out["why"] = "G*R = %d ranks > Z = %d planes" % (G * R, Z)
        return out
    out["feasible"] = True
    if design == "local" or G == 1:
        g = dict(remote_fraction=0.0, naive_fraction=0.0, remote_planes=0.0,
                 remote_zruns=0.0, ey=1 + (c - 1) / Y, ex=1 + (c - 1) / X,
                 p_local=1.0, owners_step=0.0)
        if design != "local":
            g["naive_fraction"] = 1.0 - 1.0 / G
    else:
        g = geometry(Z, Y, X, c, G, R, B, p.get("verify", False))
    out["geometry"] = g
    f = g["remote_fraction"]
    remote_crop = crop_bytes * f
    pieces_crop = g["remote_zruns"] * g["ey"] * g["ex"]
    ovf = p["overfetch"]
    if design == "rows":
        ops_crop = C * g["remote_planes"] * c * g["ex"]
        ovf = 1.0
    elif design == "coalesced":
        blk = p["block"]
        if p["brick"] > 0 and remote_crop > 0:
            b = p["brick"]
            nz = g["remote_planes"] / g["remote_zruns"]
            ny, nx = c / g["ey"], c / g["ex"]
            ovf = ((nz + b - 1) / nz) * ((ny + b - 1) / ny) * (
                (nx + b - 1) / nx)
            ops_crop = remote_crop * ovf / (b ** 3 * 4)
        elif blk == "channel":
            ops_crop = pieces_crop * C
        elif blk == "dataset":
            ops_crop = pieces_crop * ndsets
        elif blk == "piece":
            ops_crop = pieces_crop
        else:  # owner: one packed message per remote owner rank and step
            ops_crop = g["owners_step"] / B
    else:
        ops_crop = 0.0
    alpha = p["alpha"]
    remote_step = B * remote_crop
    fetched_step = remote_step * ovf
    ops_step = B * ops_crop
    link_gbs = p.get("link_eff_gbs") or p["host_link_gbs"] * link_efficiency(
        c * 4)
    t_link = B * crop_bytes / (link_gbs * GB)
    t_nic = fetched_step * R / (p["nics"] * p["nic_gbs"] * GB)
    t_op = ops_step * alpha
    # Optional: host DRAM of the node: every crop byte is read once by the
    # H2D copy, every fetched byte written once where it lands and read
    # once where it is served (symmetric traffic).
    mem = p.get("mem_gbs", 0.0) * p.get("mem_eff", 0.7)
    t_mem = R * (B * crop_bytes + 2 * fetched_step) / (mem * GB) if mem else 0
    issue = p["issue"]
    if issue == "auto":
        issue = "next" if design == "rows" else "ahead"
    T = p["step_ms"] / 1e3
    if issue == "next" and remote_step > 0:
        t_net = t_op + t_nic
        t_step = max(t_link, t_mem, t_net)
        exposed = t_net + max(t_link, t_mem)
        if t_step == t_link:
            bound = "link"
        elif t_step == t_mem:
            bound = "mem"
        else:
            bound = "op" if t_op >= t_nic else "NIC"
    else:
        t_step = max(t_link, t_nic, t_op, t_mem)
        exposed = max(0.0, t_step - T)
        bound = ("link" if t_step == t_link else
                 "NIC" if t_step == t_nic else
                 "mem" if t_step == t_mem else "op")
    out.update(
        issue=issue, remote_fraction=f, naive_fraction=g["naive_fraction"],
        remote_bytes_step=remote_step, fetched_bytes_step=fetched_step,
        overfetch=ovf, ops_step=ops_step,
        mean_transfer=(fetched_step / ops_step) if ops_step > 0 else 0.0,
        pieces_crop=pieces_crop, link_gbs_eff=link_gbs,
        t_link=t_link, t_nic=t_nic, t_op=t_op, t_mem=t_mem, t_step=t_step,
        crops_s=B / t_step, bound=bound, exposed=exposed, step_ms=p["step_ms"],
        alpha=alpha)
    return out


# ---------------------------------------------------------------- output


def fmt_bytes(b):
    if b <= 0:
        return "0"
    for unit, s in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= s:
            return "%.3g %s" % (b / s, unit)
    return "%.0f B" % b


def fmt_xfer(b):
    if b <= 0:
        return "-"
    for unit, s in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= s:
            return "%.3g %s" % (b / s, unit)
    return "%.0f B" % b


def print_table(rows, headers, markdown):
    if markdown:
        print("| " + " | ".join(headers) + " |")
        print("| " + " | ".join("---" for _ in headers) + " |")
        for r in rows:
            print("| " + " | ".join(str(x) for x in r) + " |")
        return
    w = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else
         len(str(h)) for i, h in enumerate(headers)]
    print("  ".join(str(h).rjust(w[i]) for i, h in enumerate(headers)))
    for r in rows:
        print("  ".join(str(x).rjust(w[i]) for i, x in enumerate(r)))


def show_fit(pts, alpha, peak, markdown=False):
    print("Per-operation overhead from the message-size curve "
          "bw(m) = m / (alpha + m/peak), fitted through %s:" %
          ", ".join("%.0f B -> %.3g GB/s" % (m, b / GB) for m, b in pts))
    print("  alpha = %.3f us per operation, peak = %.2f GB/s" %
          (alpha * 1e6, peak / GB))
    rows = []
    for m in (256, 512, 1024, 4096, 16384, 65536, 1 << 20, 1 << 26):
        rows.append((fmt_xfer(m), "%.2f" % (bw_at(m, alpha, peak) / GB),
                     "%.2f" % (bw_at(m, alpha, peak) / peak)))
    print_table(rows, ["message", "GB/s", "of peak"], markdown)
    print()


def cell(o, what="crops"):
    if o is None or not o["feasible"]:
        return "n/a (P>Z)"
    s = "%.3g %s" % (o["crops_s"], o["bound"])
    if not o["fits_memory"]:
        s = "no fit"
    elif not o["fits_budget"] and o["group"] == o["nodes"]:
        s += " !"
    return s


def single(args, p):
    o = predict(p)
    if args.json:
        print(json.dumps(o, default=float))
        return
    print("N=%d nodes x %d GPUs, G=%d%s, crop %d^3 x %d channels, batch %d, "
          "volume %d^3 (%s), design %s, issue %s" %
          (o["nodes"], o["gpus_per_node"], o["group"],
           " (auto: ceil(%s / budget %s))" % (fmt_bytes(o["volume_bytes"]),
                                             fmt_bytes(o["budget_bytes"]))
           if p["group"] == "auto" else "", o["crop"], o["channels"],
           o["batch"], o["volume_edge"], fmt_bytes(o["volume_bytes"]),
           o["design"], o.get("issue", "-")))
    print("slab memory per node: %s (budget %s, host %s)%s" %
          (fmt_bytes(o["slab_bytes_per_node"]), fmt_bytes(o["budget_bytes"]),
           fmt_bytes(p["host_mem_bytes"]),
           "" if o["fits_budget"] else "  ** over budget **"))
    if not o["feasible"]:
        print("infeasible: %s (slabfeed needs at least one plane per rank)"
              % o["why"])
        return
    g = o["geometry"]
    rows = [
        ("remote fraction of a crop, exact", "%.6f" % o["remote_fraction"]),
        ("remote fraction, 1 - 1/G", "%.6f" % o["naive_fraction"]),
        ("remote fraction, node with the fewest planes",
         "%.6f" % g.get("worst_node_fraction", 0.0)),
        ("P(crop entirely on the node)", "%.4f" % g["p_local"]),
        ("remote z-runs per crop (pieces / (y-runs x x-runs))",
         "%.3f" % g["remote_zruns"]),
        ("remote pieces per crop", "%.3f" % o["pieces_crop"]),
        ("remote bytes per step per GPU", fmt_bytes(o["remote_bytes_step"])),
        ("fetched bytes (over-fetch %.3g)" % o["overfetch"],
         fmt_bytes(o["fetched_bytes_step"])),
        ("remote transfers per step per GPU", "%.4g" % o["ops_step"]),
        ("mean transfer", fmt_xfer(o["mean_transfer"])),
        ("host link (effective)", "%.1f GB/s" % o["link_gbs_eff"]),
        ("t_link / t_nic / t_op / t_mem per step",
         "%.2f / %.2f / %.2f / %s ms" % (
             o["t_link"] * 1e3, o["t_nic"] * 1e3, o["t_op"] * 1e3,
             "%.2f" % (o["t_mem"] * 1e3) if o["t_mem"] else "-")),
        ("time per step", "%.2f ms (bound: %s)" % (o["t_step"] * 1e3,
                                                   o["bound"])),
        ("crops/s per GPU", "%.2f" % o["crops_s"]),
        ("exposed wait behind a %.0f ms step" % o["step_ms"],
         "%.2f ms (%.1f %%)" % (o["exposed"] * 1e3,
                                100 * o["exposed"] / (o["step_ms"] / 1e3))
         if o["step_ms"] > 0 else "-"),
    ]
    if "verify" in g:
        v = g["verify"]
        rows.insert(2, ("  enumerated over all z-origins (src/batch.c split)",
                        "%.6f, z-runs %.3f, P(local) %.4f" %
                        (v["remote_planes"] / o["crop"], v["remote_zruns"],
                         v["p_local"])))
    print_table(rows, ["quantity", "value"], args.markdown)


def over_nodes(args, p, nodes):
    rows = []
    for N in nodes:
        o = predict(dict(p, nodes=N))
        if not o["feasible"]:
            rows.append((N, o["group"], "-", "-", "-", "-", "-", "-",
                         "n/a (P>Z)", "-"))
            continue
        rows.append((N, o["group"], fmt_bytes(o["slab_bytes_per_node"]),
                     "%.4f" % o["remote_fraction"],
                     "%.4f" % o["naive_fraction"],
                     "%.0f" % (o["remote_bytes_step"] / 1e6),
                     "%.4g" % o["ops_step"], fmt_xfer(o["mean_transfer"]),
                     cell(o), "%.1f" % (o["exposed"] * 1e3)))
    print("design %s, issue %s, crop %d^3, batch %d, volume %s" % (
        p["design"], p["issue"], p["crop"], p["batch"],
        "x".join(str(x) for x in p["shape"])))
    print_table(rows, ["N", "G", "slab/node", "remote (exact)", "1 - 1/G",
                       "remote MB/step/GPU", "transfers/step", "mean xfer",
                       "crops/s/GPU bound", "exposed ms"], args.markdown)


# ---------------------------------------------------------------- one node

# The host side of one node of N GPUs (docs/SCALING.md, "One node: how many
# GPUs the host can feed"). Each crop crosses its GPU's host link as
# float32 (S_in = c^3 C 4 bytes, whatever the delivered dtype), read by the
# copy engine straight from the node window's pages: per GPU at the link
# rate that is e(4c) x H bytes/s of host memory reads.
NODE_PRESETS = {
    "h200-vm": dict(
        gpus=1, sockets=1, host_link_gbs=55.4, memcpy_gbs=30.75,
        dram_gbs=None, xsocket_gbs=None, gpus_per_switch=1, switch_gbs=None,
        host_mem_gib=128,
        label="the one-H200 machine (16 cores, 128 GiB, one socket as the VM "
              "shows it): pinned H2D 55.4 GB/s, memcpy on all 16 cores 26.1-"
              "30.8 GB/s copied (run 5), so about 61 GB/s of reads"),
    "dgx-h200": dict(
        gpus=8, sockets=2, host_link_gbs=55.4, memcpy_gbs=None,
        dram_gbs=614.4 * 0.7, xsocket_gbs=100.0, gpus_per_switch=1,
        switch_gbs=None, host_mem_gib=2048,
        label="DGX-type H200 node: 8 GPUs, 2 sockets, pinned H2D 55.4 GB/s "
              "per GPU (measured), DRAM 0.7 x 614.4 GB/s (assumed), 100 GB/s "
              "between the sockets per direction (assumed)"),
    "perlmutter": dict(
        gpus=4, sockets=1, host_link_gbs=25.0, memcpy_gbs=None,
        dram_gbs=204.8 * 0.7, xsocket_gbs=None, gpus_per_switch=1,
        switch_gbs=None, host_mem_gib=256,
        label="Perlmutter-like node: 4 A100, 1 socket, PCIe 4 ~25 GB/s per "
              "GPU, DRAM 0.7 x 204.8 GB/s (assumed)"),
}


def node_socket_gpus(N, S, total, how):
    """GPUs of N busy ones on each of S sockets: spread evenly, or filled
    socket by socket (GPUs numbered in blocks per socket, ordinals 0..N-1
    in use: a DGX's GPUs 0-3 are all on its first socket)."""
    if how == "fill":
        per = -(-total // S)
        return [min(per, max(0, N - i * per)) for i in range(S)]
    return [N // S + (i < N % S) for i in range(S)]


def node_host(p):
    """crops/s of N GPUs of one node from the host side (no remote byte):
    the bounds are each GPU's link, the DRAM of each socket, and (one
    sharded copy per node, GPUs on two or more sockets) the links between
    the sockets."""
    N, S = p["gpus"], p["sockets"]
    c, C = p["crop"], sum(p["channels"])
    crop_bytes = c ** 3 * C * 4
    e = link_efficiency(4 * c)
    # Busy GPUs behind one switch uplink: spread over the node's switches,
    # or filling them in order.
    kmax = max(1, p["gpus_per_switch"])
    switches = max(1, -(-p["node_total_gpus"] // kmax))
    k = min(kmax, N if p["gpu_sockets"] == "fill" else -(-N // switches))
    uplink = (p["switch_gbs"] or p["host_link_gbs"]) * GB
    h_gpu = min(p["host_link_gbs"] * GB, uplink / k)
    link = p["link_gbs_eff"] * GB if p["link_gbs_eff"] else h_gpu * e
    n_s = node_socket_gpus(N, S, p["node_total_gpus"], p["gpu_sockets"])
    dram = p["dram_gbs"] * GB if p["dram_gbs"] else None
    bounds = {"link": link / crop_bytes}
    if dram:
        # Reads served by socket s: a GPU's crops come evenly from every
        # rank's slab (uniform origins), the slabs lie with their ranks:
        # N r S_in n_s / N = n_s r S_in <= D / S (also with replicas).
        bounds["DRAM"] = min(dram / S / (n * crop_bytes) for n in n_s if n)
    xs = 0.0
    busy = [n for n in n_s if n]
    if p["replicas"] == "node" and len(busy) > 1:
        # socket a -> socket b: n_b GPUs read n_a / N of their bytes there
        pair = max(a * b for i, a in enumerate(busy)
                   for j, b in enumerate(busy) if i != j)
        if p["xsocket_gbs"]:
            bounds["x-socket"] = p["xsocket_gbs"] * GB * N / (pair * crop_bytes)
        xs = pair / N
    bound = min(bounds, key=bounds.get)
    r = bounds[bound]
    V = p["volume_bytes"]
    copies = {"node": 1, "numa": len(busy), "rank": N}[p["replicas"]]
    return dict(gpus=N, sockets_busy=len(busy), per_socket=n_s, per_switch=k,
                crop_bytes=crop_bytes, link_eff=e, h_gpu=h_gpu / GB,
                link_gbs=link / GB, crops_s_gpu=r, crops_s_node=N * r,
                bound=bound, host_reads_gbs=N * r * crop_bytes / GB,
                xsocket_gbs=xs * r * crop_bytes / GB, copies=copies,
                slab_bytes=copies * V,
                fits=copies * V <= p["host_mem_bytes"] / 2)


def node_table(args, p, gpus):
    rows = []
    for N in gpus:
        o = node_host(dict(p, gpus=N))
        rows.append((N, "/".join(str(x) for x in o["per_socket"]),
                     "%.1f" % o["link_gbs"], "%.3g" % o["crops_s_gpu"],
                     "%.4g" % o["crops_s_node"], o["bound"],
                     "%.0f" % o["host_reads_gbs"],
                     "%.0f" % o["xsocket_gbs"] if o["xsocket_gbs"] else "-",
                     "%s%s" % (fmt_bytes(o["slab_bytes"]),
                               "" if o["fits"] else " (over)")))
    print("one node: %s; crop %d^3 x %d channels = %s over the link per "
          "crop (float32, any output dtype), link efficiency %.2f; "
          "replicas: %s; GPUs %s over %d socket(s)" % (
              p["label"], p["crop"], sum(p["channels"]),
              fmt_bytes(p["crop"] ** 3 * sum(p["channels"]) * 4),
              link_efficiency(4 * p["crop"]), p["replicas"],
              "filled" if p["gpu_sockets"] == "fill" else "spread",
              p["sockets"]))
    print_table(rows, ["GPUs", "per socket", "link GB/s per GPU",
                       "crops/s per GPU", "crops/s node", "bound",
                       "host reads GB/s", "x-socket GB/s per direction",
                       "slab memory"], args.markdown)


def node_params(a, pr):
    np_ = NODE_PRESETS.get(a.preset, {}) if a.preset else {}

    def pick(name, default):
        v = getattr(a, name, None)
        return v if v is not None else np_.get(name, default)
    shape = [int(x) for x in str(a.volume).split(",")]
    if len(shape) == 1:
        shape = shape * 3
    channels = tuple(int(x) for x in a.channels.split(","))
    memcpy = pick("memcpy_gbs", None)
    dram = pick("dram_gbs", None)
    if a.mem_gbs not in ("0", "preset"):
        dram = float(a.mem_gbs) * a.mem_eff
    if memcpy and a.dram_gbs is None and a.mem_gbs == "0":
        dram = 2 * memcpy  # a copy reads and writes every byte it moves
    S = pick("sockets", 1)
    total = pick("gpus", max(int(x) for x in a.node_gpus.split(",")))
    return dict(label=np_.get("label", pr.get("label", "custom")),
                sockets=S, node_total_gpus=total,
                host_link_gbs=pick("host_link_gbs", 25.0),
                link_gbs_eff=a.link_gbs_eff, crop=a.crop, channels=channels,
                gpus_per_switch=pick("gpus_per_switch", 1),
                switch_gbs=pick("switch_gbs", None), dram_gbs=dram,
                xsocket_gbs=pick("xsocket_gbs", None), replicas=a.replicas,
                gpu_sockets=a.gpu_sockets,
                volume_bytes=shape[0] * shape[1] * shape[2] * sum(channels) * 4,
                host_mem_bytes=pick("host_mem_gib", 256) * GiB)


# ---------------------------------------------------------------- sweep


def sweep(args, base):
    md = args.markdown
    nodes = [int(x) for x in args.sweep_nodes.split(",")]
    vols = [int(x) for x in args.sweep_volumes.split(",")]
    crops = [tuple(int(y) for y in x.split("x")) for x in
             args.sweep_crops.split(",")]
    for Z in vols:
        for c, B in crops:
            head = "%d^3 x %d ch volume, %d^3 crops, batch %d" % (
                Z, sum(base["channels"]), c, B)
            print(("#### " if md else "== ") + head + ("" if md else " =="))
            print()
            rows = []
            for N in nodes:
                def run(design, group, issue="auto"):
                    q = dict(base, nodes=N, shape=(Z, Z, Z), crop=c, batch=B,
                             design=design, group=group, issue=issue)
                    return predict(q)
                today = run("rows", "all", "next")
                coal_all = run("coalesced", "all")
                rows_auto = run("rows", "auto", "next")
                coal_auto = run("coalesced", "auto")
                local = run("local", "auto")
                G = coal_auto["group"]
                mem = fmt_bytes(coal_auto["slab_bytes_per_node"])
                if not coal_auto["fits_memory"]:
                    mem += " (no fit)"
                elif not coal_auto["fits_budget"]:
                    mem += " (over)"

                def rf(o):
                    return "%.1f" % (100 * o["remote_fraction"]) if o[
                        "feasible"] else "-"

                def mb(o):
                    return "%.0f" % (o["remote_bytes_step"] / 1e6) if o[
                        "feasible"] else "-"

                def xf(o):
                    return fmt_xfer(o["mean_transfer"]) if o[
                        "feasible"] else "-"
                def ex(o):
                    if not o["feasible"] or not o["fits_memory"]:
                        return "-"
                    return "%.0f" % (100 * o["exposed"] / (o["step_ms"] / 1e3))
                rows.append((N, G, mem,
                             rf(today) + " / " + rf(coal_auto),
                             mb(today) + " / " + mb(coal_auto),
                             xf(today) + " / " + xf(coal_all) + " / " +
                             xf(coal_auto),
                             cell(today), cell(coal_all), cell(rows_auto),
                             cell(coal_auto), cell(local) + (
                                 "" if local["group"] == G else
                                 " (G=%d)" % local["group"]),
                             ex(today) + " / " + ex(coal_all) + " / " +
                             ex(coal_auto)))
            print_table(rows, [
                "N", "G auto", "slab/node", "remote % G=N / G auto",
                "remote MB/step/GPU G=N / auto",
                "mean xfer: rows G=N / coal. G=N / coal. auto",
                "rows G=N next (today)", "coal. G=N", "rows G auto",
                "coal. G auto", "local",
                "exposed %% of %g ms: today / coal. G=N / auto" %
                base["step_ms"]], md)
            print()


# ---------------------------------------------------------------- check

# Issue 10's measurements (slabfeed-bench, 512^3 x (4+5) channel file of
# slabfeed-gen, bf16 out, aggregate crops/s of 2 ranks). Get ceilings: one
# large contiguous MPI_Get, 2 ranks; the two-GPU machine's range is from
# docs/results/h200x2-run{6,7,11}.jsonl (2-rank runs), not issue 10.
CHECK_MACHINES = {
    "h200": dict(label="one H200, 2 ranks on the one GPU",
                 link_share=2, ceiling=(5.1, 5.8),
                 ceiling_src="issue 10, same runs",
                 one_node={256: 78.7, 128: 529.0},
                 two_nodes={256: 14.3, 128: 101.0},
                 exposed_ms={256: 205.0, 128: 116.0}),
    "h200x2": dict(label="two H200, one rank per GPU",
                   link_share=1, ceiling=(6.15, 7.44),
                   ceiling_src="docs/results h200x2 runs 6/7/11 (other runs)",
                   one_node={256: 163.9, 128: 1109.0},
                   two_nodes={256: 15.1, 128: 97.2},
                   exposed_ms={256: 0.01 * 397 * 50, 128: 0.01 * 243 * 50}),
}
CHECK_CROPS = {256: 1, 128: 4}
PINNED_H2D = 55.4  # GB/s, the same-run ceilings of docs/PERFORMANCE.md


def check_params(machine, c, alpha, ceiling):
    m = CHECK_MACHINES[machine]
    crop_bytes = c ** 3 * 9 * 4
    B = CHECK_CROPS[c]
    # The no-remote bound: the one-node run, per rank (2 ranks).
    link_eff = m["one_node"][c] / 2 * crop_bytes / GB
    return dict(nodes=2, gpus_per_node=1, group=2, shape=(512, 512, 512),
                crop=c, batch=B, channels=(4, 5), design="rows", issue="next",
                block="channel", overfetch=1.0, brick=0, alpha=alpha,
                host_link_gbs=PINNED_H2D / m["link_share"],
                link_eff_gbs=link_eff, nics=1,
                nic_gbs=ceiling, budget_bytes=1e18, host_mem_bytes=1e18,
                step_ms=50.0)


def check(args):
    md = args.markdown
    h = CHECK_MACHINES["h200"]
    mid = sum(h["ceiling"]) / 2
    # Fit alpha (per-row overhead of the shared-memory "network") to one
    # point of the one-H200 machine: per rank, seconds per step = 2 ranks x
    # batch / aggregate crops/s = t_op + t_nic.
    cf = args.calibrate
    p = check_params("h200", cf, 0.0, mid)
    o = predict(p)
    t = 2.0 * CHECK_CROPS[cf] / h["two_nodes"][cf]
    alpha = (t - o["t_nic"]) / o["ops_step"]
    print("Calibration: alpha (per-row overhead of MPI_Get between two ranks "
          "of one machine) = %.3f us, fitted to one point: one H200, %d^3 "
          "batch %d, %.1f crops/s (per rank %.1f ms per step: %.0f row "
          "operations of %.0f B mean + %.0f MB at the %.2f GB/s get "
          "ceiling)." % (alpha * 1e6, cf, CHECK_CROPS[cf],
                         h["two_nodes"][cf], t * 1e3, o["ops_step"],
                         o["mean_transfer"], o["remote_bytes_step"] / 1e6,
                         mid))
    print("Everything else below is predicted from it, the geometry, the "
          "get ceiling and the one-node run (the host-link bound).\n")
    rows = []
    for mach in ("h200", "h200x2"):
        m = CHECK_MACHINES[mach]
        lo, hi = m["ceiling"]
        mc = (lo + hi) / 2
        for c in (256, 128):
            B = CHECK_CROPS[c]
            # one node: the link term from the default efficiency table
            q = dict(check_params(mach, c, alpha, mc), group=1,
                     link_eff_gbs=None)
            one = predict(q)
            agg = 2 * one["crops_s"]
            rows.append((m["label"], "%d^3 b%d, one node, crops/s" % (c, B),
                         "%.1f" % m["one_node"][c], "%.1f" % agg,
                         "%.2f" % (agg / m["one_node"][c]),
                         "predicted: %.1f GB/s pinned H2D%s x link "
                         "efficiency %.2f" % (PINNED_H2D, " / 2 ranks"
                                              if m["link_share"] == 2 else "",
                                              link_efficiency(c * 4))))
            res = {}
            for ce in (lo, mc, hi):
                res[ce] = predict(check_params(mach, c, alpha, ce))
            o = res[mc]
            agg = 2 * o["crops_s"]
            how = "FITTED (alpha)" if (mach, c) == ("h200", cf) else \
                "predicted"
            rng = "%.1f-%.1f" % (2 * res[lo]["crops_s"],
                                 2 * res[hi]["crops_s"])
            rows.append((m["label"], "%d^3 b%d, 2 nodes (rank per node), "
                         "crops/s" % (c, B), "%.1f" % m["two_nodes"][c],
                         "%.1f (%s)" % (agg, rng),
                         "%.2f" % (agg / m["two_nodes"][c]),
                         "%s; %d rows/step of %.0f B, ceiling %.2f GB/s (%s)"
                         % (how, o["ops_step"], o["mean_transfer"], mc,
                            m["ceiling_src"])))
            e = o["exposed"] * 1e3
            rows.append((m["label"], "%d^3 b%d, 2 nodes, exposed ms per "
                         "50 ms step" % (c, B), "%.0f" % m["exposed_ms"][c],
                         "%.0f" % e, "%.2f" % (e / m["exposed_ms"][c]),
                         "predicted: serial t_op + t_nic + t_link"))
    print_table(rows, ["machine", "case", "measured", "model (range)",
                       "model/meas.", "how"], md)
    print()
    print("Model ranges: the get ceiling's measured range (H200: 5.1-5.8 GB/s,"
          " issue 10; two-GPU machine: 6.15-7.44 GB/s, other runs).")


# ---------------------------------------------------------------- main


def build_params(a):
    pr = PRESETS.get(a.preset, {}) if a.preset else {}

    def pick(name, default):
        v = getattr(a, name)
        if v is not None:
            return v
        return pr.get(name, default)
    shape = [int(x) for x in str(a.volume).split(",")]
    if len(shape) == 1:
        shape = shape * 3
    host_mem = pick("host_mem_gib", 256) * GiB
    budget = (a.budget_gib * GiB) if a.budget_gib is not None else host_mem / 2
    pts = parse_curve(a.curve)
    alpha, peak = fit_curve(pts)
    if a.op_us is not None:
        alpha = a.op_us * 1e-6
    G = a.group
    if G not in ("auto", "all"):
        G = int(G)
    if a.mem_gbs == "preset":
        if "mem_peak_gbs" not in pr:
            raise ValueError("--mem-gbs preset needs --preset")
        mem_gbs = pr["mem_peak_gbs"]
    else:
        mem_gbs = float(a.mem_gbs)
    p = dict(nodes=a.nodes, gpus_per_node=pick("gpus_per_node", 4),
             group=G, shape=tuple(shape), crop=a.crop, batch=a.batch,
             channels=tuple(int(x) for x in a.channels.split(",")),
             host_link_gbs=pick("host_link_gbs", 25.0),
             link_eff_gbs=a.link_gbs_eff, nics=pick("nics", 4),
             nic_gbs=pick("nic_gbs", 25.0), budget_bytes=budget,
             host_mem_bytes=host_mem, design=a.design, issue=a.issue,
             block=a.block, overfetch=a.overfetch, brick=a.brick,
             alpha=alpha, step_ms=a.step_ms, verify=a.verify,
             mem_gbs=mem_gbs, mem_eff=a.mem_eff, divisor=a.divisor)
    for c in (a.crop,):
        if c > min(shape):
            raise SystemExit("crop %d larger than the box" % c)
    return p, pts, alpha, peak, pr


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a default only where it says something."""

    def _get_help_string(self, action):
        if action.default in (None, False) or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def locality_cuts(starts, Zt, nodes, R):
    """Node ranges of one group of `nodes` nodes of R ranks under locality
    over several volumes (src/plan/placement.c, group_cores): node j begins
    at the volume start nearest Zt * j * R / (nodes * R), after node j-1's
    and leaving one for every later node, ties to the lower (planes of one
    size, as in the suites modelled here; the loader measures in bytes
    where they differ). Returns the range bounds (nodes + 1 of them), or
    None with more nodes than volumes."""
    n = len(starts)
    if nodes > n:
        return None
    gs = nodes * R
    cut = [0]
    for j in range(1, nodes):
        want = Zt * j * R
        c = cut[-1] + 1
        while c < n - (nodes - j) and \
                abs(starts[c + 1] * gs - want) < abs(starts[c] * gs - want):
            c += 1
        cut.append(c)
    return [starts[c] for c in cut] + [Zt]


def suite_placement(n_boxes, Z, Y, X, channels, crop, nodes, R, budget,
                    group=None):
    """Placement of a suite of n_boxes volumes of Z x Y x X (src/io/suite.h:
    stacked along z, every crop wrapping inside its own volume) on `nodes`
    nodes of R ranks, as src/plan/placement.c places one box of n_boxes*Z
    planes: the smallest group of G nodes whose fullest node store fits
    `budget` bytes (or `group`). Returns a dict: G, groups, node store,
    volumes per node (whole, split across two nodes), the share of crops
    held on the drawing rank's node without locality (exact, every origin
    of every volume enumerated), and locality's own placement (node ranges
    cut at volume starts, so every crop is local): its G, fullest node
    store, and the range of a volume's sampling probability against the
    voxel-weighted stream (a node's ranks draw their share from its
    volumes only)."""
    Zt = n_boxes * Z
    plane = Y * X * channels * 4
    G = group
    if G is None:
        G = nodes
        for g in range(1, nodes + 1):
            P = g * R
            if P > Zt:
                break
            most = max(split_begin(Zt, P, (k + 1) * R) - split_begin(Zt, P, k * R)
                       for k in range(g))
            if most * plane <= budget:
                G = g
                break
    P = G * R
    bounds = [split_begin(Zt, P, k * R) for k in range(G + 1)]  # node ranges
    node_of = []
    for k in range(G):
        node_of += [k] * (bounds[k + 1] - bounds[k])
    most = max(bounds[k + 1] - bounds[k] for k in range(G))
    whole = split = 0
    for v in range(n_boxes):
        a, b = node_of[v * Z], node_of[v * Z + Z - 1]
        whole += a == b
        split += a != b
    # Uniform stream: a crop of volume v at origin o is local to the rank's
    # node when all its planes lie on that node (rank's node uniform).
    local_any = 0
    for v in range(n_boxes):
        z0 = v * Z
        for o in range(Z):
            planes = [z0 + (o + i) % Z for i in range(crop)]
            if len({node_of[z] for z in planes}) == 1:
                local_any += 1
    share_any = local_any / (n_boxes * Z) / G
    # Locality: whole volumes per node, its own G from the same budget.
    starts = [v * Z for v in range(n_boxes)]
    GL, cuts = None, None
    for g in ([group] if group is not None else range(1, nodes + 1)):
        c = locality_cuts(starts, Zt, g, R)
        if c is None:
            break
        GL, cuts = g, c
        if max(c[k + 1] - c[k] for k in range(g)) * plane <= budget:
            break
    if cuts is None:
        loc = dict(G_locality=None)
    else:
        boxes = [(cuts[k + 1] - cuts[k]) // Z for k in range(GL)]
        # node k's R ranks draw 1/GL of the samples, spread over its boxes
        ratio = [n_boxes / (GL * m) for m in boxes]
        loc = dict(G_locality=GL, node_bytes_locality=max(boxes) * Z * plane,
                   boxes_per_node=(min(boxes), max(boxes)),
                   sampling=(min(ratio), max(ratio)))
    return dict(G=G, groups=max(1, nodes // G), node_bytes=most * plane,
                planes_per_node=most, volumes_whole=whole,
                volumes_split=split, local_uniform=share_any,
                total_bytes=Zt * plane, **loc)


def suite_table(a, p, n_boxes):
    E = [int(x) for x in str(a.volume).split(",")][0]
    ch = sum(int(x) for x in a.channels.split(","))
    R = p["gpus_per_node"]
    budget = p["budget_bytes"]
    forced = None if a.group == "auto" else int(a.group)
    rows = []
    for N in [int(x) for x in str(a.nodes_list).split(",")]:
        r = suite_placement(n_boxes, E, E, E, ch, a.crop, N, R, budget,
                            forced if forced is None or forced <= N else N)
        rows.append((N, r))
    print("Suite of %d boxes of %d^3 x %d channels (%s in all), crop %d, "
          "%d ranks per node, slab budget %s per node:\n" %
          (n_boxes, E, ch, fmt_bytes(rows[0][1]["total_bytes"]), a.crop, R,
           fmt_bytes(budget)))
    print("| nodes | G (nodes per group) | groups | store of the fullest node "
          "| boxes whole on one node | boxes split over two nodes "
          "| crops on the drawing rank's node |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for N, r in rows:
        print("| %d | %d | %d | %s%s | %d | %d | %.3f |" %
              (N, r["G"], r["groups"], fmt_bytes(r["node_bytes"]),
               " !" if r["node_bytes"] > budget else "",
               r["volumes_whole"], r["volumes_split"], r["local_uniform"]))
    print("\nWith locality (whole boxes per node, every crop on its node):\n")
    print("| nodes | G | groups | store of the fullest node | boxes per node "
          "| a box's sampling probability / voxel-weighted |")
    print("| --- | --- | --- | --- | --- | --- |")
    for N, r in rows:
        if r["G_locality"] is None:
            print("| %d | - | - | refused: more nodes per group than boxes "
                  "| - | - |" % N)
            continue
        GL = r["G_locality"]
        print("| %d | %d | %d | %s%s | %d-%d | %.3f-%.3f |" %
              (N, GL, max(1, N // GL), fmt_bytes(r["node_bytes_locality"]),
               " !" if r["node_bytes_locality"] > budget else "",
               r["boxes_per_node"][0], r["boxes_per_node"][1],
               r["sampling"][0], r["sampling"][1]))


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Predict remote bytes, transfers and crops/s per GPU of "
        "slabfeed on N nodes (docs/SCALING.md).",
        formatter_class=_Help)
    ap.add_argument("--preset", choices=sorted(set(PRESETS) |
                                               set(NODE_PRESETS)),
                    help="node parameters (overridden by the options below; "
                    "h200-vm: --node-gpus only)")
    ap.add_argument("--nodes", "-N", default="2",
                    help="node count N, or a list N1,N2,... for a table")
    ap.add_argument("--gpus-per-node", type=int, default=None,
                    help="GPUs = ranks per node (default 4, or the preset)")
    ap.add_argument("--group", "-G", default="auto",
                    help="nodes per replication group: an integer, 'all' "
                    "(= N, today's placement) or 'auto' (ceil(volume / "
                    "budget), capped at N)")
    ap.add_argument("--divisor", action="store_true",
                    help="round G up to a divisor of N (equal groups)")
    ap.add_argument("--host-mem-gib", type=float, default=None,
                    help="host memory per node, GiB (default 256)")
    ap.add_argument("--budget-gib", type=float, default=None,
                    help="slab budget per node, GiB (default: half the host "
                    "memory)")
    ap.add_argument("--volume", default="1024",
                    help="box edge Z, or Z,Y,X")
    ap.add_argument("--channels", default="4,5",
                    help="channels per dataset (input,target), float32")
    ap.add_argument("--crop", type=int, default=256, help="crop edge c")
    ap.add_argument("--batch", "-B", type=int, default=1,
                    help="crops per GPU per step")
    ap.add_argument("--host-link-gbs", type=float, default=None,
                    help="pinned H2D GB/s per GPU (default 25, or the "
                    "preset); multiplied by the efficiency of c*4-byte rows "
                    "(%s)" % ", ".join("%d B: %.2f" % x for x in LINK_EFF))
    ap.add_argument("--link-gbs-eff", type=float, default=None,
                    help="effective host link GB/s per GPU for these crops "
                    "(replaces host link x efficiency)")
    ap.add_argument("--nics", type=int, default=None,
                    help="NICs per node (default 4, or the preset)")
    ap.add_argument("--nic-gbs", type=float, default=None,
                    help="GB/s per NIC (default 25, or the preset)")
    ap.add_argument("--mem-gbs", default="0",
                    help="host DRAM GB/s per node (peak), or 'preset' "
                    "(Perlmutter 204.8, DGX H200 614.4: channels x DIMM "
                    "rate); 0: not modelled")
    ap.add_argument("--mem-eff", type=float, default=0.7,
                    help="achievable fraction of --mem-gbs")
    ap.add_argument("--curve", default=DEFAULT_CURVE,
                    help="two points BYTES:GBPS of a one-sided message-size "
                    "curve; alpha is fitted to them (issue 10 quoting "
                    "open-mpi/ompi #4919)")
    ap.add_argument("--op-us", type=float, default=None,
                    help="per-operation overhead alpha in us (replaces the "
                    "fit)")
    ap.add_argument("--design", choices=("rows", "coalesced", "local"),
                    default="rows",
                    help="rows: one operation per crop row (today); "
                    "coalesced: large blocks; local: locality mode")
    ap.add_argument("--issue", choices=("auto", "next", "ahead"),
                    default="auto",
                    help="gets inside next (today) or fetched ahead; auto: "
                    "next for rows, ahead otherwise")
    ap.add_argument("--block", choices=("channel", "dataset", "piece",
                                        "owner"), default="channel",
                    help="coalesced unit: one operation per remote (piece, "
                    "channel), (piece, dataset), piece, or one packed "
                    "message per remote owner rank and step")
    ap.add_argument("--overfetch", type=float, default=1.0,
                    help="coalesced: bytes fetched / bytes needed")
    ap.add_argument("--brick", type=int, default=0,
                    help="coalesced: slab stored in bricks of this edge; one "
                    "operation per brick and channel, over-fetch computed")
    ap.add_argument("--step-ms", type=float, default=50.0,
                    help="training step for the exposed wait (0: none)")
    ap.add_argument("--verify", action="store_true",
                    help="also enumerate every z-origin (slow for big boxes)")
    ap.add_argument("--check", action="store_true",
                    help="compare with issue 10's measurements")
    ap.add_argument("--calibrate", type=int, choices=(256, 128),
                    default=256,
                    help="--check: the one-H200 crop edge alpha is fitted to")
    ap.add_argument("--sweep", action="store_true",
                    help="tables over N, volumes, crops and designs")
    ap.add_argument("--sweep-nodes", default="1,4,16,64,256,1024",
                    help="--sweep: node counts")
    ap.add_argument("--sweep-volumes", default="1024,2048,4096",
                    help="--sweep: box edges")
    ap.add_argument("--sweep-crops", default="128x4,256x1",
                    help="--sweep: crops as EDGExBATCH,...")
    ap.add_argument("--fit", action="store_true",
                    help="print the fit of alpha to --curve")
    ap.add_argument("--node-gpus", default=None, metavar="N1,N2,...",
                    help="one node's host side instead: crops/s of 1..N GPUs "
                    "bounded by each GPU's link, the DRAM of each socket and "
                    "the links between sockets (docs/SCALING.md, 'One node')")
    ap.add_argument("--sockets", type=int, default=None,
                    help="--node-gpus: sockets (NUMA domains) of the node")
    ap.add_argument("--xsocket-gbs", type=float, default=None,
                    help="--node-gpus: GB/s between two sockets, per "
                    "direction")
    ap.add_argument("--memcpy-gbs", type=float, default=None,
                    help="--node-gpus: measured host memcpy on all cores, "
                    "bytes copied per s (slabfeed-bench's 'memcpy N "
                    "threads'); the DRAM read budget is twice it")
    ap.add_argument("--dram-gbs", type=float, default=None,
                    help="--node-gpus: achievable DRAM read GB/s of the node "
                    "(replaces --memcpy-gbs)")
    ap.add_argument("--gpus-per-switch", type=int, default=None,
                    help="--node-gpus: busy GPUs sharing one PCIe switch "
                    "uplink")
    ap.add_argument("--switch-gbs", type=float, default=None,
                    help="--node-gpus: GB/s of a switch uplink (default: "
                    "the host link)")
    ap.add_argument("--replicas", choices=("node", "numa", "rank"),
                    default="node",
                    help="--node-gpus: one copy of the volume per node "
                    "(sharded over the ranks: today), per NUMA domain, or "
                    "per rank")
    ap.add_argument("--gpu-sockets", choices=("spread", "fill"),
                    default="spread",
                    help="--node-gpus: the busy GPUs spread evenly over the "
                    "sockets, or filling them in order (ordinals 0..N-1 of "
                    "a node numbered in blocks per socket)")
    ap.add_argument("--markdown", action="store_true", help="markdown tables")
    ap.add_argument("--json", action="store_true",
                    help="one JSON object (single prediction)")
    ap.add_argument("--suite", type=int, default=0, metavar="N",
                    help="a suite of N boxes of edge --volume (one file "
                         "each): the placement table over --nodes (a list)")
    a = ap.parse_args(argv)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under | head
    a.nodes_list = a.nodes
    try:
        node_list = [int(x) for x in str(a.nodes).split(",")]
    except ValueError:
        ap.error("--nodes: an integer or a list N1,N2,...")
    a.nodes = node_list[0]
    if a.node_gpus is not None:
        try:
            gpus = [int(x) for x in a.node_gpus.split(",")]
        except ValueError:
            ap.error("--node-gpus: a list N1,N2,...")
        pr = PRESETS.get(a.preset, {}) if a.preset else {}
        p = node_params(a, pr)
        if a.json:
            print(json.dumps([node_host(dict(p, gpus=N)) for N in gpus]))
        else:
            node_table(a, p, gpus)
        return 0
    try:
        p, pts, alpha, peak, pr = build_params(a)
    except ValueError as e:
        ap.error(str(e))
    if a.suite > 0:
        suite_table(a, p, a.suite)
        return 0
    if a.check:
        check(a)
        return 0
    if a.fit or a.sweep:
        show_fit(pts, *fit_curve(pts), markdown=a.markdown)
    if a.sweep:
        print("Nodes: %s; slab budget %s per node (%s); alpha %.3f us; "
              "bound: link = host link, NIC = NICs shared by the node's "
              "GPUs, op = per-operation overhead; 'n/a (P>Z)': fewer "
              "planes than ranks; 'no fit': the slab exceeds host memory; "
              "'!': over the budget.\n" %
              (pr.get("label", "custom"), fmt_bytes(p["budget_bytes"]),
               "given" if a.budget_gib is not None else "half the host "
               "memory", alpha * 1e6))
        sweep(a, p)
        return 0
    try:
        if len(node_list) > 1:
            over_nodes(a, p, node_list)
        else:
            single(a, p)
    except ValueError as e:
        ap.error(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
