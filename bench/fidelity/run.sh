#!/usr/bin/env bash
# Fidelity of the pricing hook (issue 9, item 7): how well the hook's price
# ranks and bounds the time a statement really takes, next to the planner's
# total_cost and (when the metering exists) the amount charged, from one run.
#
# Starts its own throwaway cluster (Unix socket in a private temp dir, no TCP)
# from the PostgreSQL that `pg_config` on PATH names, with ogc_throttle
# preloaded, generates skewed data (gen.sql), a workload (workload.py), prices
# and times every query server-side (measure.sql), and prints the table
# (analyze.py). Stops and removes the cluster on exit.
# Knobs: NPOINTS (500000), NQ queries per class (30), SEED of the workload (7),
# KEEP=dir keeps results there; FIT=1 also fits weights to the features.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/test/lib/pg.sh"
NPOINTS=${NPOINTS:-500000}
NQ=${NQ:-30}
SEED=${SEED:-7}
PORT=56431
PY=/usr/bin/python3
[ -x $PY ] || PY=python3

work=$(pg_tmpdir)
C="$work/c"
started=
cleanup() { [ -n "$started" ] && pg_stop "$C" immediate; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
die() { echo "run.sh: $*" >&2; exit 1; }
cp "$here"/gen.sql "$here"/measure.sql "$work/" && chmod 644 "$work"/*.sql

pg_cluster_init "$C" "shared_preload_libraries = 'ogc_throttle'" "shared_buffers = '256MB'" "jit = off" \
  "autovacuum = off" "max_parallel_workers_per_gather = 2" "work_mem = '16MB'" \
  "ogc_throttle.capacity = 1000000000" "ogc_throttle.rate = 1000000000" "ogc_throttle.cost_max = 1000000000" ||
  die "initdb failed"
pg_start "$C" "$PORT" || { tail -n 20 "$C/server.log"; die "cluster did not start"; }
started=1
sql() { pg_psql "$C" "$PORT" -d postgres "$@"; }
lib=$(sql -At -c "SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'")
echo "# PostgreSQL $(sql -At -c 'SHOW server_version') from $PGBIN; ogc_throttle.so from $lib (md5 $(md5sum <"$lib/ogc_throttle.so" | cut -c1-12))"
t0=$(date +%s)
sql -v npoints="$NPOINTS" -f "$work/gen.sql" >/dev/null || die "gen.sql failed"
# The newest extension version the installation has (0.2 brings the fidelity functions).
sql -c "CREATE EXTENSION ogc_throttle VERSION '0.2'" >/dev/null 2>&1 || sql -c "CREATE EXTENSION ogc_throttle" >/dev/null ||
  die "CREATE EXTENSION ogc_throttle failed"
echo "# extension $(sql -At -c "SELECT extversion FROM pg_extension WHERE extname = 'ogc_throttle'"); data: $(sql -At -c "SELECT (SELECT count(*) FROM fpts) || ' points in ' || (SELECT count(*) FROM fcity) || ' cities + background, ' || (SELECT count(*) FROM fpoly) || ' polygons'") ($(( $(date +%s) - t0 )) s)"
if [ "$(sql -At -c "SELECT to_regproc('throttle_density_build') IS NOT NULL")" = t ]; then
  t0=$(date +%s)
  sql -At -c "SELECT throttle_density_build('fpts', 'geom')" -c "SELECT throttle_density_build('fpts', 'geog')" \
    -c "SELECT throttle_density_build('fpoly', 'geom')" >/dev/null || die "throttle_density_build failed"
  echo "# density grids built for fpts.geom, fpts.geog, fpoly.geom ($(( $(date +%s) - t0 )) s)"
fi
sql -At -F $'\t' -c "SELECT id, lon, lat, sigma, n FROM fcity ORDER BY id" >"$work/cities.tsv"
$PY "$here/workload.py" "$work/cities.tsv" "$NQ" "$SEED" >"$work/queries.tsv" || die "workload.py failed"
chmod 644 "$work/queries.tsv"
sql -c "DROP TABLE IF EXISTS fq" -c "CREATE TABLE fq (id int PRIMARY KEY, cls text, sql text)" \
  -c "\\copy fq FROM '$work/queries.tsv'" >/dev/null || die "loading the workload failed"
echo "# $(wc -l <"$work/queries.tsv") queries; timing: median of 3 EXPLAIN (ANALYZE, TIMING OFF) execution times from 3 passes over the workload after a warm-up pass, hook off"
t0=$(date +%s)
sql -f "$work/measure.sql" >/dev/null || die "measure.sql failed"
echo "# priced and timed in $(( $(date +%s) - t0 )) s"

# Charged: each query as a top-level statement under the hook in reject mode
# with a budget nothing exhausts, then the metering's account of it.
if [ "$(sql -At -c "SELECT to_regproc('throttle_last_statement') IS NOT NULL")" = t ]; then
  $PY - "$work/queries.tsv" >"$work/charge.sql" <<'PYEOF'
import sys
print("SET ogc_throttle.mode = 'reject';")
print("SET statement_timeout = '60s';")
for line in open(sys.argv[1]):
    i, cls, q = line.rstrip("\n").split("\t", 2)
    print("\\o /dev/null")
    print(q + ";")
    print("\\o")
    print("UPDATE fres SET charged = (SELECT charged FROM throttle_last_statement()) WHERE id = %s;" % i)
PYEOF
  chmod 644 "$work/charge.sql"
  sql -f "$work/charge.sql" >/dev/null || echo "# charged pass failed" >&2
fi
sql -At -F $'\t' -c "SELECT q.id, q.cls, r.estimate, r.planner, r.ms, r.charged, coalesce(r.features::text, ''), q.sql FROM fq q JOIN fres r USING (id) ORDER BY q.id" \
  >"$work/results.tsv" || die "reading results failed"
[ -n "${KEEP:-}" ] && { mkdir -p "$KEEP"; cp "$work/results.tsv" "$work/queries.tsv" "$KEEP/"; }
$PY "$here/analyze.py" "$work/results.tsv" ${FIT:+--fit}
