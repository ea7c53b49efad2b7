#!/usr/bin/env python3
"""Fidelity table from results.tsv (id, class, estimate, planner, ms, charged, features-json, sql).

For each price (the hook's estimate, the planner's total_cost, the charged amount):
  rho       Spearman rank correlation with the measured time, overall and per class
  under p95 / max   under-pricing: r_i = ms_i / price_i, scaled by the median r over all
            queries (so the unit does not matter); p95 and max of r over the set
  ratio     median ms / price (what one cost unit is worth in ms; 1.0 when prices are ms)
usage: analyze.py results.tsv [--fit] [--executor-charge]
  --fit: fit weights to the features, NNLS on relative error
  --executor-charge: say under the table that the charged column is the executor passes' charge only
"""
import json
import math
import sys

from rankstats import quantile, spearman


def num(s):
    try:
        v = float(s)
        return v if math.isfinite(v) else None
    except ValueError:
        return None


rows = []
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if len(f) < 8:
        continue
    rows.append({"id": int(f[0]), "cls": f[1], "estimate": num(f[2]), "planner": num(f[3]), "ms": num(f[4]),
                 "charged": num(f[5]), "features": json.loads(f[6]) if f[6] else None, "sql": f[7]})
rows = [r for r in rows if r["ms"] is not None]
classes = sorted(set(r["cls"] for r in rows))
prices = ["estimate", "planner", "charged"]


def figures(rs, p):
    pts = [(r[p], r["ms"]) for r in rs if r[p] is not None]
    if len(pts) < 3:
        return None
    rho = spearman([x for x, _ in pts], [y for _, y in pts])
    return rho, pts


def under(rs, p, scale):
    rat = [r["ms"] / max(r[p], 1e-9) / scale for r in rs if r[p] is not None]
    return quantile(rat, 0.95), max(rat) if rat else float("nan")


def fmt(v, spec="%.2f"):
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else spec % v


scales = {}
for p in prices:
    rat = [r["ms"] / max(r[p], 1e-9) for r in rows if r[p] is not None]
    scales[p] = quantile(rat, 0.5) if rat else None

print("%d queries, %d classes; measured ms: median %.2f, max %.1f" % (
    len(rows), len(classes), quantile([r["ms"] for r in rows], 0.5), max(r["ms"] for r in rows)))
print()
print("| set | n | rho estimate | rho planner | rho charged | under p95 est / plan / chg | under max est / plan / chg |")
print("|---|---|---|---|---|---|---|")
for name, rs in [("all", rows)] + [(c, [r for r in rows if r["cls"] == c]) for c in classes]:
    cells = []
    unders = []
    for p in prices:
        fig = figures(rs, p)
        cells.append(fmt(fig[0]) if fig else "n/a")
        unders.append(under(rs, p, scales[p]) if fig and scales[p] else (None, None))
    print("| %s | %d | %s | %s | %s | %s / %s / %s | %s / %s / %s |" % (
        name, len(rs), cells[0], cells[1], cells[2],
        fmt(unders[0][0]), fmt(unders[1][0]), fmt(unders[2][0]),
        fmt(unders[0][1], "%.1f"), fmt(unders[1][1], "%.1f"), fmt(unders[2][1], "%.1f")))
print()
print("ms per unit (median of ms/price): estimate %s, planner %s, charged %s" % (
    fmt(scales["estimate"], "%.4g"), fmt(scales["planner"], "%.4g"), fmt(scales["charged"], "%.4g")))
if "--executor-charge" in sys.argv:
    print("(charged: throttle_last_statement().charged, what the executor passes were charged; a client's statement is\n"
          " also charged its planning, parsing and answer: CHARGES=1 compares the whole charge with the duration lines)")

# The worst under-priced queries by the estimate, to read.
if scales["estimate"]:
    worst = sorted((r for r in rows if r["estimate"] is not None),
                   key=lambda r: -r["ms"] / max(r["estimate"], 1e-9))[:8]
    print()
    print("most under-priced by the estimate (ms, estimate, planner, class, sql):")
    for r in worst:
        print("  %8.2f %10.2f %12.1f %-11s %s" % (r["ms"], r["estimate"], r["planner"], r["cls"], r["sql"][:150]))

if "--fit" in sys.argv:
    fr = [r for r in rows if r["features"]]
    names = sorted(set(k for r in fr for k in r["features"] if k != "unpriced"))
    # The calls' own classes keep only a fixed term when the plan is priced; worker has only a fixed term.
    fixed_only = {"bbox", "radius", "tile", "features", "worker"}
    rows_only = {"encode", "distance", "function", "page", "output"}
    cols = []  # (class, 0 calls | 1 rows)
    for n in names:
        if n not in rows_only:
            cols.append((n, 0))
        if n not in fixed_only:
            cols.append((n, 1))
    X = [[r["features"].get(n, [0, 0])[k] for (n, k) in cols] for r in fr]
    y = [r["ms"] for r in fr]
    # relative error: each row scaled by 1 / (ms + 0.05)
    Xs = [[v / (yy + 0.05) for v in row] for row, yy in zip(X, y)]
    ys = [yy / (yy + 0.05) for yy in y]
    m = len(cols)
    # projected coordinate descent for NNLS
    A = [[sum(Xs[i][a] * Xs[i][b] for i in range(len(Xs))) for b in range(m)] for a in range(m)]
    bvec = [sum(Xs[i][a] * ys[i] for i in range(len(Xs))) for a in range(m)]
    w = [0.0] * m
    for it in range(5000):
        for a in range(m):
            if A[a][a] <= 0:
                continue
            g = bvec[a] - sum(A[a][b] * w[b] for b in range(m) if b != a)
            w[a] = max(0.0, g / A[a][a])
    print()
    print("fitted weights (NNLS, relative error):")
    for (n, k), v in zip(cols, w):
        print("  %-10s %-6s %.6g" % (n, "fixed" if k == 0 else "per_row", v))
    pred = [sum(a * b for a, b in zip(row, w)) for row in X]
    print("  rho of the fit: %.3f" % spearman(pred, y))

    # Refine on the log scale (what the under-pricing ratio measures): coordinate
    # search on each weight, minimising the mean squared log error.
    def msle(ws):
        t = 0.0
        for row, yy in zip(X, y):
            pr = sum(a * b for a, b in zip(row, ws))
            t += (math.log(max(pr, 1e-6)) - math.log(max(yy, 1e-3))) ** 2
        return t / len(y)
    w = [max(v, 1e-7) for v in w]
    best = msle(w)
    for it in range(40):
        improved = False
        for a in range(m):
            for f in (4.0, 2.0, 1.3, 1 / 1.3, 0.5, 0.25):
                cand = list(w)
                cand[a] = w[a] * f
                e = msle(cand)
                if e < best - 1e-9:
                    best, w, improved = e, cand, True
        if not improved:
            break
    print()
    print("refined weights (mean squared log error %.3f):" % best)
    for (n, k), v in zip(cols, w):
        print("  %-10s %-6s %.6g" % (n, "fixed" if k == 0 else "per_row", v))
    pred = [sum(a * b for a, b in zip(row, w)) for row in X]
    print("  rho of the fit: %.3f" % spearman(pred, y))
    rat = sorted(yy / p for yy, p in zip(y, pred))
    med = quantile(rat, 0.5)
    print("  ms per unit %.3f; under p95 %.2f, max %.1f" % (med, quantile([r / med for r in rat], 0.95), max(rat) / med))
    for c in classes:
        idx = [i for i, r in enumerate(fr) if r["cls"] == c]
        print("  %-12s rho %.3f" % (c, spearman([pred[i] for i in idx], [y[i] for i in idx])))
