#!/usr/bin/env python3
"""Disguised twins (run.sh's TWINS=1; issue 9: "a disguised statement (every shape listed under
*Gameable*) is charged at least 90% of its plain twin").

usage: twins.py gen CITIES_TSV NT SEED OUTDIR     writes OUTDIR/twins.sql, OUTDIR/setrole_*.sql, OUTDIR/roles.tsv
       twins.py report OUTDIR BUCKETS_TSV SERVER_LOG

For every Gameable shape, NT instances over the benchmark's skewed data (alternately in a big city,
the sparse background, a mid-sized city), each a pair of statements doing the same work: the plain
phrasing and its disguise (some shapes add a reference twin: the indexed plain query where the
disguise cannot use the index, two plain cursors where a SCROLL cursor re-reads its stored rows).
Every variant runs once as a warm-up, then REPS (3) times, the pair in alternating order, each run
under an identity of its own (tw.<shape>.<instance>.<variant>.<rep>), so that its bucket debit is its
charge (a settlement under 10 ms is written at the next change of identity or at the session's end;
run.sh reads the buckets after every session has gone). The SET ROLE shape must charge the login
role's bucket, so each of its runs is a session of its own under a fresh login role (fid_l<n>, whose
default identity is fid.warm: the session's first parse spans are not its own), after a warm-up, then
`SET ogc_throttle.identity = ''` (the login role); its disguise runs `SET ROLE fid_group` first. Each statement of a run
carries the tag /*fid:<identity>*/, so its PostgreSQL duration line (log_min_duration_statement = 0)
is matched to it.

report prints per shape the median and minimum over instances of charged(disguise) / charged(plain)
(each the median of REPS runs; target >= 0.9), the same ratio of the duration lines (is the work the
same?), and each variant's charged / measured.
"""
import math
import os
import random
import sys

from durlog import tagged

REPS = 3

# Shapes, in the order of issue 9's list of Gameable disguises.
SHAPES = [
    ("limit_agg", "LIMIT above an aggregate"),
    ("limit_subquery", "LIMIT in an unrelated subquery"),
    ("contains", "ST_Contains(envelope, geom)"),
    ("within", "ST_Within(geom, envelope)"),
    ("overlaps_fn", "geometry_overlaps() as a function"),
    ("distance_lt", "ST_Distance(...) < r"),
    ("knn", "KNN <-> with a big LIMIT"),
    ("lateral", "LATERAL loop"),
    ("join", "spatial join"),
    ("scroll", "SCROLL cursor re-read"),
    ("setrole", "SET ROLE to a group role"),
]


def gen(cities_path, nt, seed, outdir):
    rnd = random.Random(seed)
    cities = []
    for line in open(cities_path):
        f = line.split()
        if len(f) >= 5:
            cities.append((int(f[0]), float(f[1]), float(f[2]), float(f[3]), int(f[4])))
    big = sorted(cities, key=lambda c: -c[4])

    def place(k):
        """Instance k: a big city, the background, a mid-sized city, in turn."""
        if k % 3 == 1:
            return rnd.uniform(-10, 40), rnd.uniform(35, 60), None
        c = big[rnd.randrange(0, 4)] if k % 3 == 0 else big[rnd.randrange(8, 25)]
        return c[1] + rnd.gauss(0, c[3] / 3), c[2] + rnd.gauss(0, c[3] / 3), c

    def pt(lon, lat):
        return "ST_SetSRID(ST_MakePoint(%.6f, %.6f), 4326)" % (lon, lat)

    def env(lon, lat, w):
        return "ST_MakeEnvelope(%.6f, %.6f, %.6f, %.6f, 4326)" % (lon - w / 2, lat - w / 2, lon + w / 2, lat + w / 2)

    def size(c, lo, hi):
        """A search size in degrees: a fraction of the city's spread, or of the background's."""
        base = c[3] if c else 2.0
        return base * math.exp(rnd.uniform(math.log(lo), math.log(hi)))

    # instances: (shape, k, {variant: [statements]}, setup statements)
    inst = []
    seq_off = ["SET enable_indexscan = off", "SET enable_bitmapscan = off"]
    seq_on = ["RESET enable_indexscan", "RESET enable_bitmapscan"]
    for shape, _ in SHAPES:
        for k in range(nt):
            lon, lat, c = place(k)
            v, setup = {}, []
            if shape == "limit_agg":
                r = size(c, 0.5, 2)
                body = "SELECT count(*) FROM fpts WHERE ST_DWithin(geom, %s, %.6f)" % (pt(lon, lat), r)
                v["plain"] = [body]
                v["disguise"] = ["SELECT * FROM (%s) q LIMIT 1" % body]
            elif shape == "limit_subquery":
                r = size(c, 0.5, 2)
                body = "SELECT count(*) FROM fpts WHERE ST_DWithin(geom, %s, %.6f) AND kind IN (SELECT kind FROM fkinds%%s)" % (pt(lon, lat), r)
                v["plain"] = [body % ""]
                v["disguise"] = [body % " ORDER BY kind LIMIT 100"]
            elif shape in ("contains", "within"):
                # Both as bitmap scans: PostGIS estimates the two phrasings apart (ST_Contains's `@` at a
                # default 500 rows), so the plain one goes to a sequential or a plain index scan where the
                # disguise gets a bitmap scan (20 823 rows: 17-29 ms against 10-19 ms): other work, not a discount.
                e = env(lon, lat, size(c, 1, 4))
                pin = ["SET enable_seqscan = off", "SET enable_indexscan = off"]
                unpin = ["RESET enable_seqscan", "RESET enable_indexscan"]
                v["plain"] = pin + ["SELECT count(*) FROM fpts WHERE ST_Intersects(geom, %s)" % e] + unpin
                v["disguise"] = pin + ["SELECT count(*) FROM fpts WHERE %s" % (
                    "ST_Contains(%s, geom)" % e if shape == "contains" else "ST_Within(geom, %s)" % e)] + unpin
            elif shape == "overlaps_fn":
                # geometry_overlaps() is not indexable: the same work is the && filter in a sequential scan.
                e = env(lon, lat, size(c, 1, 4))
                v["plain"] = seq_off + ["SELECT count(*) FROM fpts WHERE geom && %s" % e] + seq_on
                v["disguise"] = ["SELECT count(*) FROM fpts WHERE geometry_overlaps(geom, %s)" % e]
                v["indexed"] = ["SELECT count(*) FROM fpts WHERE geom && %s" % e]
            elif shape == "distance_lt":
                r = size(c, 0.5, 2)
                v["plain"] = seq_off + ["SELECT count(*) FROM fpts WHERE ST_DWithin(geom, %s, %.6f)" % (pt(lon, lat), r)] + seq_on
                v["disguise"] = ["SELECT count(*) FROM fpts WHERE ST_Distance(geom, %s) < %.6f" % (pt(lon, lat), r)]
                v["indexed"] = ["SELECT count(*) FROM fpts WHERE ST_DWithin(geom, %s, %.6f)" % (pt(lon, lat), r)]
            elif shape == "knn":
                # The N nearest by KNN with a big LIMIT; the same index walk, stopped after N rows by the
                # client: a cursor over the unlimited KNN, FETCH N. Reference: a radius that holds them
                # (the N-th neighbour's distance, found before the runs), sorted the same way.
                n = rnd.choice([5000, 20000, 50000, 100000])
                var = "knn_r_%d" % k
                setup.append("SELECT max(d) * (1 + 1e-9) AS %s FROM (SELECT geom <-> %s AS d FROM fpts ORDER BY geom <-> %s LIMIT %d) s \\gset"
                             % (var, pt(lon, lat), pt(lon, lat), n))
                v["plain"] = ["BEGIN", "DECLARE c NO SCROLL CURSOR FOR SELECT id FROM fpts ORDER BY geom <-> %s" % pt(lon, lat),
                              "FETCH %d FROM c" % n, "CLOSE c", "COMMIT"]
                v["disguise"] = ["SELECT id FROM fpts ORDER BY geom <-> %s LIMIT %d" % (pt(lon, lat), n)]
                v["radius"] = ["SELECT id FROM fpts WHERE ST_DWithin(geom, %s, :%s) ORDER BY geom <-> %s" % (pt(lon, lat), var, pt(lon, lat))]
            elif shape == "lateral":
                kk = rnd.choice([3, 6, 10])
                ids = sorted(rnd.sample(range(1, 31), kk))
                rr = math.exp(rnd.uniform(math.log(0.5), math.log(3)))
                byid = {cc[0]: cc for cc in cities}
                v["plain"] = [" UNION ALL ".join(
                    "SELECT %d, count(*) FROM fpts WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint(%r, %r), 4326), %r)"
                    % (i, byid[i][1], byid[i][2], rr * byid[i][3]) for i in ids)]
                v["disguise"] = ["SELECT c.id, n.cnt FROM fcity c, LATERAL (SELECT count(*) AS cnt FROM fpts t "
                                 "WHERE ST_DWithin(t.geom, c.center, %r * c.sigma)) n WHERE c.id IN (%s)"
                                 % (rr, ", ".join(map(str, ids)))]
            elif shape == "join":
                # Points in a city's districts (gen.sql: a 12x12 grid of cells of half its spread);
                # the plain twin counts each district's points by its own literal envelope.
                cc = big[rnd.randrange(0, 15)]
                j0 = rnd.randrange(3, 9)
                cells = [(i, j0) for i in range(12)]
                s = 0.5 * cc[3]

                def cell(i, j):
                    return "ST_MakeEnvelope(%r, %r, %r, %r, 4326)" % (
                        cc[1] + (i - 6) * s, cc[2] + (j - 6) * s, cc[1] + (i - 5) * s, cc[2] + (j - 5) * s)
                eps = s * 1e-3
                strip = "ST_MakeEnvelope(%r, %r, %r, %r, 4326)" % (
                    cc[1] - 6 * s + eps, cc[2] + (j0 - 6) * s + eps, cc[1] + 6 * s - eps, cc[2] + (j0 - 5) * s - eps)
                v["plain"] = [" UNION ALL ".join(
                    "SELECT %d, count(*) FROM fpts WHERE ST_Intersects(geom, %s)" % (n, cell(i, j))
                    for n, (i, j) in enumerate(cells))]
                v["disguise"] = ["SELECT p.id, count(*) FROM fpoly p JOIN fpts t ON ST_Intersects(t.geom, p.geom) "
                                 "WHERE p.city = %d AND p.geom && %s GROUP BY p.id" % (cc[0], strip)]
            elif shape == "scroll":
                r = size(c, 0.3, 1)
                if k % 2 == 0:
                    # A sequential scan reads backwards: the rewind re-executes it. Twin: two plain cursors.
                    q = "SELECT id, kind FROM fpts WHERE ST_Distance(geom, %s) < %.6f" % (pt(lon, lat), r)
                    again = ["MOVE ABSOLUTE 0 IN c", "FETCH ALL FROM c"] if k % 4 == 0 else ["FETCH BACKWARD ALL FROM c"]
                    v["plain"] = ["BEGIN", "DECLARE c NO SCROLL CURSOR FOR " + q, "FETCH ALL FROM c", "CLOSE c",
                                  "DECLARE d NO SCROLL CURSOR FOR " + q, "FETCH ALL FROM d", "CLOSE d", "COMMIT"]
                    v["disguise"] = ["BEGIN", "DECLARE c SCROLL CURSOR FOR " + q, "FETCH ALL FROM c"] + again + \
                                    ["CLOSE c", "COMMIT"]
                else:
                    # A GiST index scan cannot go backwards: a SCROLL cursor stores its rows (Materialize)
                    # and the second read is of the store. Twin: the same store read twice
                    # (a materialised CTE); reference: two plain cursors that execute twice.
                    q = "SELECT id, kind FROM fpts WHERE ST_DWithin(geom, %s, %.6f)" % (pt(lon, lat), r)
                    v["plain"] = ["WITH m AS MATERIALIZED (%s) SELECT * FROM m UNION ALL SELECT * FROM m" % q]
                    v["disguise"] = ["BEGIN", "DECLARE c SCROLL CURSOR FOR " + q, "FETCH ALL FROM c",
                                     "MOVE ABSOLUTE 0 IN c", "FETCH ALL FROM c", "CLOSE c", "COMMIT"]
                    v["twocursors"] = ["BEGIN", "DECLARE c NO SCROLL CURSOR FOR " + q, "FETCH ALL FROM c", "CLOSE c",
                                       "DECLARE d NO SCROLL CURSOR FOR " + q, "FETCH ALL FROM d", "CLOSE d", "COMMIT"]
            elif shape == "setrole":
                r = size(c, 0.5, 2)
                body = "SELECT count(*) FROM fpts WHERE ST_DWithin(geom, %s, %.6f)" % (pt(lon, lat), r)
                v["plain"] = [body]
                v["disguise"] = ["SET ROLE fid_group", body, "RESET ROLE"]
            inst.append((shape, k, v, setup))

    def is_work(s):
        return not s.startswith("SET ") and not s.startswith("RESET ") and not s.startswith("\\")

    def run(ident, stmts, out):
        for s in stmts:
            if is_work(s):
                out.append("\\o /dev/null")
                out.append("/*fid:%s*/ %s;" % (ident, s))
                out.append("\\o")
            else:
                out.append(s + ";")

    os.makedirs(outdir, exist_ok=True)
    # Serial plans: a parallel plan's charge adds its workers' time, which the leader's duration line
    # does not show, and a disguise that only changes whether a plan goes parallel is not the point.
    head = ["\\set ON_ERROR_STOP 0", "SET statement_timeout = '120s';", "SET max_parallel_workers_per_gather = 0;",
            "SET ogc_throttle.identity = 'fid.warm';"]
    main = list(head)
    for shape, k, v, setup in inst:
        main.extend(setup)
    roles = []  # (login role, identity tag)
    sessions = []
    # warm-up: every variant once (not measured: its identity is fid.warm)
    for shape, k, v, setup in inst:
        if shape == "setrole":
            continue
        for name, stmts in v.items():
            run("warm", stmts, main)
    for rep in range(REPS):
        for shape, k, v, setup in inst:
            names = list(v)
            if (rep + k) % 2 == 1:
                names = names[1:2] + names[0:1] + names[2:]
            for name in names:
                ident = "tw.%s.%d.%s.%d" % (shape, k, name, rep)
                if shape == "setrole":
                    role = "fid_l%d" % (len(roles) + 1)
                    roles.append((role, ident))
                    ss = list(head)
                    run("warm", v["plain"], ss)
                    ss.append("SET ogc_throttle.identity = '';")
                    run(ident, v[name], ss)
                    sessions.append((role, ss))
                else:
                    main.append("SET ogc_throttle.identity = '%s';" % ident)
                    run(ident, v[name], main)
                    main.append("SET ogc_throttle.identity = 'fid.aux';")
    with open(os.path.join(outdir, "twins.sql"), "w") as f:
        f.write("\n".join(main) + "\n")
    with open(os.path.join(outdir, "roles.tsv"), "w") as f:
        for n, (role, ss) in enumerate(sessions):
            path = os.path.join(outdir, "setrole_%d.sql" % n)
            with open(path, "w") as g:
                g.write("\n".join(ss) + "\n")
            f.write("%s\t%s\t%s\n" % (role, dict(roles)[role], path))


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return float("nan")
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def report(outdir, bpath, logpath):
    role_of = {}
    for line in open(os.path.join(outdir, "roles.tsv")):
        role, ident, _ = line.rstrip("\n").split("\t")
        role_of[ident] = role
    debit = {}
    for line in open(bpath):
        f = line.rstrip("\n").split("\t")
        if len(f) >= 2 and f[1] not in ("", "\\N"):
            debit[f[0]] = float(f[1])
    dur = {}
    for tag, ms in tagged(logpath, "fid"):
        dur[tag] = dur.get(tag, 0.0) + ms
    # runs[(shape, k)][variant] = [(charged, measured)]
    runs = {}
    missing = 0
    for ident in sorted(dur):
        p = ident.split(".")
        if p[0] != "tw" or len(p) != 5:
            continue
        shape, k, var, rep = p[1], int(p[2]), p[3], int(p[4])
        acct = role_of.get(ident, ident)
        if acct not in debit:
            missing += 1
            continue
        runs.setdefault((shape, k), {}).setdefault(var, []).append((debit[acct], dur[ident]))
    group_debit = debit.get("fid_group")
    print("%d runs matched (%d without a bucket); the group role's bucket after the SET ROLE runs: %s" % (
        sum(len(x) for v in runs.values() for x in v.values()), missing,
        "untouched" if group_debit is None else "debited %.3f ms" % group_debit))
    print()
    print("| shape | n | charged disguise / plain: median | min | measured disguise / plain: median | min | "
          "discount (charged/measured of the disguise over the plain's): median | min | charged / measured (plain; disguise) | "
          "disguise / reference twin (charged) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    worst = []
    for shape, title in SHAPES:
        ks = sorted(k for (s, k) in runs if s == shape)
        cr, mr, cmp, cmd, ref, disc = [], [], [], [], [], []
        for k in ks:
            v = runs[(shape, k)]
            if "plain" not in v or "disguise" not in v:
                continue
            pc, pm = median([x[0] for x in v["plain"]]), median([x[1] for x in v["plain"]])
            dc, dm = median([x[0] for x in v["disguise"]]), median([x[1] for x in v["disguise"]])
            # charged / measured of each variant: the median over its runs of each run's own ratio
            pr = median([x[0] / x[1] for x in v["plain"] if x[1] > 0])
            dr = median([x[0] / x[1] for x in v["disguise"] if x[1] > 0])
            cr.append(dc / pc)
            mr.append(dm / pm)
            cmp.append(pr)
            cmd.append(dr)
            disc.append(dr / pr)
            worst.append((dc / pc, shape, k, pc, dc, pm, dm, pr, dr))
            for name in v:
                if name not in ("plain", "disguise"):
                    ref.append("%s %.2f" % (name, dc / median([x[0] for x in v[name]])))
        if not cr:
            print("| %s | 0 | n/a | | | | | | | |" % title)
            continue
        print("| %s | %d | **%.2f** | **%.2f** | %.2f | %.2f | %.2f | %.2f | %.2f; %.2f | %s |" % (
            title, len(cr), median(cr), min(cr), median(mr), min(mr), median(disc), min(disc), median(cmp), median(cmd),
            ", ".join(ref[:4]) + (" …" if len(ref) > 4 else "") if ref else ""))
    print()
    print("each instance: charged disguise / plain; medians of 3 runs, charged / measured ms (and the median "
          "of the runs' own charged / measured):")
    for r, shape, k, pc, dc, pm, dm, pr, dr in sorted(worst, key=lambda w: (w[1], w[2])):
        print("  %-14s %d  %5.2f   plain %9.3f / %9.3f (%.2f)   disguise %9.3f / %9.3f (%.2f)" % (
            shape, k, r, pc, pm, pr, dc, dm, dr))


if __name__ == "__main__":
    if len(sys.argv) >= 6 and sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif len(sys.argv) >= 5 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
