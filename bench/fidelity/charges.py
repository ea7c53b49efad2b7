#!/usr/bin/env python3
"""Charged against measured, from two clocks (run.sh's CHARGES=1; issue 9: "within +-5% in total, and no
statement charged less than 90% of its measured cost").

usage: charges.py gen QUERIES_TSV PREFIX [serial] > charges.sql
       charges.py report QUERIES_TSV PREFIX BUCKETS_TSV SERVER_LOG LAST_TSV [WORKERS_TSV]

gen writes a psql script for one session of the benchmark role: every workload query runs once, as a
top-level statement, under an identity of its own (SET ogc_throttle.identity = '<prefix>.<id>'), so its
bucket holds its charge and nothing else. A settlement under 10 ms waits in the backend for the
identity's next admission, and a change of identity writes it (as does the session's end), so the
buckets are read once, after the session has gone: no batching can hide or double a charge. After
each query the session switches to an auxiliary identity and prints throttle_last_statement()
(the executor's account of the same statement) for comparison.

report joins:
  charged   what the identity's bucket was debited: capacity - tokens, plus the refill since its
            last charge (rate * (read time - last_request)); read by run.sh from throttle_buckets
  measured  PostgreSQL's own "duration: ... ms  statement: /*fid:fq.<id>*/ ..." line
            (log_min_duration_statement = 0 for the role): server-side, from the start of the
            Query message to the end of the statement (parse, plan, execute, send the rows,
            ExecutorEnd, the implicit commit)
and prints the total ratio, the distribution of per-statement ratios and the statements below 0.9.
"""
import math
import sys

from durlog import tagged
from rankstats import quantile


def load_queries(path):
    qs = []
    for line in open(path):
        i, cls, sql = line.rstrip("\n").split("\t", 2)
        qs.append((int(i), cls, sql))
    return qs


def gen(path, prefix, serial=False):
    print("\\set ON_ERROR_STOP 0")
    print("SET statement_timeout = '120s';")
    if serial:
        print("SET max_parallel_workers_per_gather = 0;")
    for i, cls, sql in load_queries(path):
        print("SET ogc_throttle.identity = '%s.%d';" % (prefix, i))
        print("\\o /dev/null")
        print("/*fid:%s.%d*/ %s;" % (prefix, i, sql))
        print("\\o")
        print("SET ogc_throttle.identity = 'fid.aux';")
        print("SELECT %d, estimate, measured, charged FROM throttle_last_statement();" % i)


def durations(log_path):
    """tag -> summed duration (ms) and count of lines."""
    d = {}
    for tag, ms in tagged(log_path, "fid"):
        s, n = d.get(tag, (0.0, 0))
        d[tag] = (s + ms, n + 1)
    return d


def buckets(path):
    """identity -> debit (ms)."""
    b = {}
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) >= 2 and f[1] not in ("", "\\N"):
            b[f[0]] = float(f[1])
    return b


def report(qpath, prefix, bpath, logpath, lastpath, wpath=None):
    qs = load_queries(qpath)
    b = buckets(bpath)
    d = durations(logpath)
    last = {}
    for line in open(lastpath):
        f = line.rstrip("\n").split("\t")
        if len(f) >= 4 and f[0].isdigit():
            last[int(f[0])] = (float(f[2] or "nan"), float(f[3] or "nan"))
    workers = {}
    if wpath:
        for line in open(wpath):
            f = line.rstrip("\n").split("\t")
            if len(f) >= 2 and f[0].isdigit():
                workers[int(f[0])] = int(f[1] or 0)
    rows = []
    missing = []
    for i, cls, sql in qs:
        tag = "%s.%d" % (prefix, i)
        if tag not in d or tag not in b:
            missing.append((i, tag in d, tag in b))
            continue
        ch, ms = b[tag], d[tag][0]
        rows.append({"id": i, "cls": cls, "sql": sql, "charged": ch, "ms": ms, "par": workers.get(i, 0) > 0,
                     "exec_measured": last.get(i, (float("nan"),) * 2)[0]})
    print("%d statements (%d without a duration line or a bucket%s)" % (
        len(rows), len(missing), (": " + ", ".join(str(m[0]) for m in missing[:10])) if missing else ""))
    if not rows:
        return

    def line(name, rs):
        if not rs:
            return
        tc, tm = sum(r["charged"] for r in rs), sum(r["ms"] for r in rs)
        rat = [r["charged"] / r["ms"] for r in rs if r["ms"] > 0]
        below = sum(1 for x in rat if x < 0.9)
        print("| %s | %d | %.1f | %.1f | **%.3f** | %.3f | %.3f | %.3f | %.3f | %d |" % (
            name, len(rs), tc, tm, tc / tm, min(rat), quantile(rat, 0.05), quantile(rat, 0.5), max(rat), below))

    print()
    print("| set | n | charged ms | measured ms | total charged / measured | min | p5 | median | max | below 0.9 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    line("all", rows)
    if workers:
        line("serial plans", [r for r in rows if not r["par"]])
        line("parallel plans", [r for r in rows if r["par"]])
    for c in sorted(set(r["cls"] for r in rows)):
        line(c, [r for r in rows if r["cls"] == c])
    ex = [r for r in rows if not math.isnan(r["exec_measured"])]
    if ex:
        te = sum(r["exec_measured"] for r in ex)
        tm = sum(r["ms"] for r in ex)
        print()
        print("throttle_last_statement().measured (executor passes only) / duration line: %.3f in total; "
              "the bucket debit beyond it (parse, planning, start-up spans): %.1f ms of %.1f ms charged" % (
                  te / tm, sum(r["charged"] - r["exec_measured"] for r in ex), sum(r["charged"] for r in ex)))
    low = sorted((r for r in rows if r["charged"] < 0.9 * r["ms"]), key=lambda r: r["charged"] / r["ms"])
    print()
    print("statements charged below 90%% of their duration line: %d" % len(low))
    for r in low:
        print("  %5.3f  charged %9.3f  measured %9.3f  executor %9.3f  %s%-11s %s" % (
            r["charged"] / r["ms"], r["charged"], r["ms"], r["exec_measured"], "par " if r["par"] else "",
            r["cls"], r["sql"][:160]))
    high = sorted(rows, key=lambda r: -r["charged"] / r["ms"])[:5]
    print()
    print("highest charged / measured:")
    for r in high:
        print("  %5.3f  charged %9.3f  measured %9.3f  %s%-11s %s" % (
            r["charged"] / r["ms"], r["charged"], r["ms"], "par " if r["par"] else "", r["cls"], r["sql"][:160]))


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "gen":
        gen(sys.argv[2], sys.argv[3], len(sys.argv) > 4 and sys.argv[4] == "serial")
    elif len(sys.argv) >= 7 and sys.argv[1] == "report":
        report(*sys.argv[2:8])
    else:
        sys.exit(__doc__)
