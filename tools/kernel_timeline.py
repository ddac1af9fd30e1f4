#!/usr/bin/env python3
"""What each kernel of a decode step costs in place, from a trace of tools/kernel_trace.

With programmatic dependent launch, kernels overlap their neighbours: a kernel's own duration (end -
start) counts time it spent waiting for the one before. What it adds to the step is its end minus the
latest end of the kernels before it (its marginal time); the GPU idles where a kernel starts after
every earlier one has ended. Steps are cut at each launch of the step's first kernel (the token
embedding); the last --steps complete ones are averaged.

With --totals, for a trace without steps to cut (Stable Diffusion's, whose kernels do not overlap):
each kernel's summed own time over the whole trace and its share, the largest first.

    python3 tools/kernel_timeline.py trace.csv [--steps 16] [--first embedding_kernel] [--device 0]
    python3 tools/kernel_timeline.py trace.csv --totals [--top 25]
"""
import argparse
import collections
import csv
import re
import statistics


def short_name(name):
    name = re.sub(r"\(anonymous namespace\)::|rf::gpu::|rf::|attention::|gemv_detail::", "", name)
    name = re.sub(r"\(DType\)|\(RopeLayout\)|std::integral_constant", "", name)
    return name.removeprefix("void ").split("(")[0][:110]


def load(path, device=0):
    """The trace's kernels on one device (a tensor-parallel run traces every rank's), in order of their start."""
    with open(path, newline="") as f:
        return sorted(({"start": int(r["start_ns"]), "end": int(r["end_ns"]), "grid": int(r["grid"]),
                        "block": int(r["block"]), "name": short_name(r["name"])} for r in csv.DictReader(f)
                       if int(r.get("device", 0)) == device),
                      key=lambda k: k["start"])


def timeline(kernels, steps, first):
    """The last `steps` complete steps: their median wall time, idle time inside a step and after its last
    kernel (us), and per kernel (name, grid, block, the kernel before it) its own and marginal times (us)."""
    firsts = [i for i, k in enumerate(kernels) if first in k["name"]]
    if len(firsts) < 2:
        raise SystemExit(f"fewer than two kernels named like {first!r}: no complete step")
    cuts = firsts[-(steps + 1):]
    rows = {}
    walls, idles, busy = [], [], []
    for begin, end in zip(cuts, cuts[1:]):
        step = kernels[begin:end]
        walls.append((kernels[end]["start"] - step[0]["start"]) / 1e3)
        latest, idle, previous = step[0]["start"], 0, "(step)"
        for k in step:
            idle += max(0, k["start"] - latest)
            marginal = max(0, k["end"] - max(latest, k["start"]))
            latest = max(latest, k["end"])
            row = rows.setdefault((k["name"], k["grid"], k["block"], previous), {"own": [], "marginal": []})
            row["own"].append((k["end"] - k["start"]) / 1e3)
            row["marginal"].append(marginal / 1e3)
            previous = k["name"]
        idles.append(idle / 1e3)
        busy.append((latest - step[0]["start"]) / 1e3)
    wall = statistics.median(walls)
    summary = {"steps": len(walls), "kernels": (cuts[-1] - cuts[0]) // len(walls), "wall": wall,
               "idle": statistics.median(idles), "after": wall - statistics.median(busy)}
    return summary, rows


def totals(kernels, top):
    """Each kernel name's summed own time and launch count, the `top` largest."""
    time, launches = collections.Counter(), collections.Counter()
    for k in kernels:
        time[k["name"]] += k["end"] - k["start"]
        launches[k["name"]] += 1
    everything = sum(time.values())
    print(f"kernel time {everything / 1e6:.2f} ms in {len(kernels)} launches")
    print(f"{'ms':>9} {'share':>6} {'launches':>8}  kernel")
    for name, ns in time.most_common(top):
        print(f"{ns / 1e6:>9.2f} {100 * ns / everything:>5.1f}% {launches[name]:>8}  {name}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--steps", type=int, default=16, help="complete steps to average, from the end")
    parser.add_argument("--first", default="embedding_kernel", help="the step's first kernel (a substring)")
    parser.add_argument("--totals", action="store_true", help="summed time per kernel over the whole trace")
    parser.add_argument("--top", type=int, default=25, help="kernels --totals lists")
    parser.add_argument("--device", type=int, default=0, help="the device whose kernels count")
    args = parser.parse_args()
    if args.totals:
        totals(load(args.trace, args.device), args.top)
        return
    s, rows = timeline(load(args.trace, args.device), args.steps, args.first)
    print(f"steps: {s['steps']}, kernels a step: {s['kernels']}, step wall {s['wall']:.1f} us (median), "
          f"idle inside a step {s['idle']:.1f} us, after its last kernel {s['after']:.1f} us")
    print(f"{'kernel':<72} {'grid':>7} {'block':>5} {'a step':>6} {'own us':>7} {'in place':>8} {'a step us':>9} {'share':>6}  after")
    for (name, grid, block, previous), row in rows.items():
        per_step = len(row["own"]) / s["steps"]
        total = sum(row["marginal"]) / s["steps"]
        print(f"{name[:72]:<72} {grid:>7} {block:>5} {per_step:>6.0f} {statistics.mean(row['own']):>7.2f} "
              f"{statistics.mean(row['marginal']):>8.2f} {total:>9.1f} {100 * total / s['wall']:>5.1f}%  {previous[:40]}")


if __name__ == "__main__":
    main()
