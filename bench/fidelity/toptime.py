#!/usr/bin/env python3
"""Times the workload as top-level statements (run.sh's TOPLEVEL=1), the way a client runs them.

usage: toptime.py gen QUERIES_TSV [PASSES [inrow]] > toptime.sql
       toptime.py read SERVER_LOG [fidt|fidr] > toptime.tsv      (id, median ms, runs)

measure.sql times each query with EXPLAIN (ANALYZE) inside a DO block: that leaves out parsing,
planning, sending the rows and the implicit commit, and a plan made inside PL/pgSQL's EXECUTE is
not always the one a client's statement gets (a LIMIT page took 19.8 ms there and 0.02-0.1 ms run
by a client). The metering charges what a client's statement takes, and calibration fits its
samples, so the estimate is judged here against the same thing: PostgreSQL's own
"duration: ... statement: /*fidt:<id>:<pass>*/ ..." lines (log_min_duration_statement = 0 in the
session, the hook off), a warm-up pass and then PASSES (3) passes in the orders measure.sql uses,
the median of them per query.

With "inrow" (run.sh's INROW=1), each statement of a pass runs twice in a row, tagged fidt then fidr:
the fidt run follows another statement as before, the fidr run follows itself. A statement that finds
nothing takes 0.1-0.2 ms after itself and 0.35-0.5 ms after a neighbour that filled the caches with
something else: within a class, a dozen such statements rank by their neighbours in fidt's times.
fidr's are each statement's own work with its caches warm: a warm-up right before every timed run.
"""
import sys

from durlog import tagged
from rankstats import quantile

ORDERS = (389, 577, 811, 239, 937, 113, 661)  # as measure.sql: id*k mod 1009 is a permutation for k < 1009


def gen(path, passes=3, inrow=False):
    qs = []
    for line in open(path):
        i, _, sql = line.rstrip("\n").split("\t", 2)
        qs.append((int(i), sql))
    print("\\set ON_ERROR_STOP 0")
    print("SET ogc_throttle.mode = 'off';")
    print("SET statement_timeout = '120s';")
    print("SET log_min_duration_statement = 0;")
    print("\\o /dev/null")
    for p, k in enumerate((1,) + ORDERS[:passes]):  # pass 0: the warm-up, in id order (not read)
        for i, sql in sorted(qs, key=lambda q: (q[0] * k) % 1009):
            print("/*fidt:%d:%d*/ %s;" % (i, p, sql))
            if inrow and p > 0:
                print("/*fidr:%d:%d*/ %s;" % (i, p, sql))


def read(log_path, prefix="fidt"):
    runs = {}
    for tag, ms in tagged(log_path, prefix):
        i, p = tag.split(":")
        if p != "0":  # the warm-up pass
            runs.setdefault(int(i), []).append(ms)
    for i in sorted(runs):
        print("%d\t%r\t{%s}" % (i, quantile(runs[i], 0.5), ",".join(repr(x) for x in runs[i])))


if __name__ == "__main__":
    if len(sys.argv) in (3, 4, 5) and sys.argv[1] == "gen" and sys.argv[4:] in ([], ["inrow"]):
        gen(sys.argv[2], int(sys.argv[3]) if len(sys.argv) >= 4 else 3, len(sys.argv) == 5)
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "read" and sys.argv[3:] in ([], ["fidt"], ["fidr"]):
        read(sys.argv[2], *sys.argv[3:])
    else:
        sys.exit(__doc__)
