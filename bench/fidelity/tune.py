#!/usr/bin/env python3
"""Tune the plan classes' weights for the under-pricing tail, from kept runs.

usage: tune.py DIR/results.tsv [DIR/results.tsv ...] [--check DIR/results.tsv ...]
       (run.sh with KEEP=DIR keeps one; runs after --check are not tuned on, only priced with
       the weights before and after: out of sample)

analyze.py --fit minimises the mean squared log error, which lets a few
classes sit at 2-3x under their median; the admission and the cut-off care
about the tail. This starts from the shipped defaults and searches, weight by
weight, for the smallest under-pricing p95 over every run given (overall, plus
a third of the worst class's and a twentieth of the worst maximum), with a
penalty for a Spearman rho below 0.90 overall or 0.86 in a class. Only the
plan classes (scan, join, encode, distance, worker, statement, page) move: bbox, radius, tile
and features are the gate's too. The function class is absent from the
workload and keeps its weight.
"""
import json
import math
import sys

from rankstats import quantile, spearman as rank_correlation

DEFAULTS = {"bbox": (0.025, 0), "radius": (0.037, 0), "features": (0.025, 0), "tile": (0.022, 0),
            "scan": (0.017, 0.0003), "join": (0.034, 0.0025), "encode": (0, 0.001), "distance": (0, 0.0039),
            "worker": (32, 0), "function": (0, 0.000005), "statement": (0.05, 0.0036),
            "page": (0, 0.0011), "output": (0, 0.0004)}
TUNED = ("scan", "join", "encode", "distance", "worker", "statement", "page")
# Where the search starts a weight the defaults leave at 0 (it scales weights multiplicatively);
# page has no fixed term.
START = {"statement": (0.02, 0.002), "page": (0, 0.002)}


def load(path):
    rows = []
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) < 8 or not f[6]:
            continue
        try:
            rows.append((f[1], float(f[4]), json.loads(f[6])))
        except ValueError:
            continue
    return rows


def price(w, features):
    return sum(w.get(c, (0, 0))[0] * n + w.get(c, (0, 0))[1] * r for c, (n, r) in features.items() if c != "unpriced")


def figures(w, rows):
    """{set: (rho, under-pricing p95, max)} with ratios scaled by their median."""
    pr = [max(price(w, f), 1e-9) for _, _, f in rows]
    ms = [m for _, m, _ in rows]
    ratio = [m / p for m, p in zip(ms, pr)]
    med = quantile(ratio, 0.5)
    under = [r / med for r in ratio]
    out = {"all": (rank_correlation(pr, ms, degenerate=0.0), quantile(under, 0.95), max(under))}
    for cls in sorted(set(r[0] for r in rows)):
        idx = [i for i, r in enumerate(rows) if r[0] == cls]
        out[cls] = (rank_correlation([pr[i] for i in idx], [ms[i] for i in idx], degenerate=0.0), quantile([under[i] for i in idx], 0.95),
                    max(under[i] for i in idx))
    return out


def loss(w, runs):
    total = 0.0
    for rows in runs:
        fig = figures(w, rows)
        total += max(fig["all"][1], 1) + 0.3 * max(v[1] for v in fig.values()) + 0.05 * max(v[2] for v in fig.values())
        for k, v in fig.items():
            floor = 0.9 if k == "all" else 0.86
            total += 100 * max(0.0, floor - v[0])
    return total


def main():
    args = sys.argv[1:]
    checks = args[args.index("--check") + 1:] if "--check" in args else []
    paths = args[:args.index("--check")] if "--check" in args else args
    runs = [load(p) for p in paths]
    held_out = [load(p) for p in checks]
    if not runs or not all(runs) or not all(held_out):
        sys.exit(__doc__)
    w = dict(DEFAULTS)
    for c, v in START.items():
        w[c] = tuple(v[i] if w[c][i] == 0 else w[c][i] for i in (0, 1))
    best = loss(w, runs)
    for _ in range(40):
        improved = False
        for c in TUNED:
            for i in (0, 1):
                if w[c][i] <= 0:
                    continue
                for f in (1.5, 1.2, 1.07, 1 / 1.07, 1 / 1.2, 1 / 1.5):
                    cand = dict(w)
                    v = list(cand[c])
                    v[i] *= f
                    cand[c] = tuple(v)
                    e = loss(cand, runs)
                    if e < best - 1e-6:
                        best, w, improved = e, cand, True
        if not improved:
            break
    print("tuned weights (fixed, per row):")
    for c in TUNED:
        print("  %-9s %.6g %.6g" % (c, w[c][0], w[c][1]))
    for path, rows, out in [(p, r, False) for p, r in zip(paths, runs)] + [(p, r, True) for p, r in zip(checks, held_out)]:
        print(path + (" (out of sample)" if out else " (tuned on)"))
        before, after = figures(DEFAULTS, rows), figures(w, rows)
        for k in before:
            print("  %-12s rho %.3f -> %.3f  p95 %.2f -> %.2f  max %.1f -> %.1f" % (
                k, before[k][0], after[k][0], before[k][1], after[k][1], before[k][2], after[k][2]))


if __name__ == "__main__":
    main()
