#!/usr/bin/env bash
# Whether two builds price alike: the same ~850 varied PostGIS statements (identity_gen.py: ST_DWithin on
# geometry, geography, text and degrees; tiles at zooms 8-15; boxes, polygons, joins, LATERAL, KNN,
# subqueries, CTEs, UNION ALL, declared-cost filters, a plan of more than 16 nodes; literal ones through
# throttle_explain, parameters through PREPARE/EXECUTE under generic and custom plans) explained by
# each build in one cluster, and the outputs compared. For a change meant to keep prices and explanations
# as they are. Usage: LIB=a.so,b.so identity.sh. Each build is preloaded in turn and the extension's
# functions (pg_proc.probin) pointed at the same copy, so that throttle_explain runs the build under test.
# The outputs compare within one run only: the fidelity tables are ANALYZEd from a random sample, so two
# runs' clusters may plan (and price) a few statements differently.
# Knobs: PORT (56407), SEED (17), N (16 per shape), KEEP=1 (keeps the outputs, printed at the end).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/test/lib/pg.sh"
PORT=${PORT:-56407}
work=$(pg_tmpdir)
trap 'pg_stop "$work" immediate; [ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
die() { echo "identity.sh: $*" >&2; exit 1; }
[ -n "${LIB:-}" ] || die "LIB=a.so,b.so: the builds to compare"
IFS=, read -r -a given <<<"$LIB"
libs=()
for l in "${given[@]}"; do
  [ -f "$l" ] || die "no file $l"
  cp "$l" "$work/lib${#libs[@]}.so" && chmod 755 "$work/lib${#libs[@]}.so" || die "copy of $l failed"
  libs+=("$work/lib${#libs[@]}.so")
done
cp "$here/setup.sql" "$root/bench/fidelity/gen.sql" "$work/" || die "copy failed"
python3 "$here/identity_gen.py" "${SEED:-17}" "${N:-16}" >"$work/stmts.sql" || die "identity_gen.py failed"
chmod 644 "$work"/*.sql
pg_cluster_init "$work" "max_connections = 20" "jit = off" "autovacuum = off" "max_parallel_workers_per_gather = 2" ||
  die "initdb failed"
pg_start "$work" "$PORT" || die "postgres did not start"
q() { as_pg psql -X -q -h "$work" -p "$PORT" -U postgres -d postgres "$@"; }
q -v ON_ERROR_STOP=1 -v npoints=60000 -f "$work/setup.sql" >/dev/null 2>&1 || die "setup.sql failed"
q -v ON_ERROR_STOP=1 -v npoints=100000 -f "$work/gen.sql" >/dev/null 2>&1 || die "gen.sql failed"
q -v ON_ERROR_STOP=1 >/dev/null <<'SQL' || die "the grids failed"
CREATE TABLE pts_nogrid AS SELECT * FROM pts WHERE id % 3 = 0;
CREATE INDEX ON pts_nogrid USING gist (geom);
ALTER TABLE pts_nogrid ALTER COLUMN geom SET STATISTICS 10000;
VACUUM ANALYZE pts_nogrid;
CREATE EXTENSION ogc_throttle;
SELECT throttle_density_build('pts', 'geom');
SELECT throttle_density_build('fpts', 'geom');
SELECT throttle_density_build('fpts', 'geog');
SELECT throttle_density_build('fcity', 'center');
SQL
pg_stop "$work"
for i in "${!libs[@]}"; do
  pg_conf_set "$work" "shared_preload_libraries = '${libs[$i]}'"
  pg_start "$work" "$PORT" || die "postgres did not start with ${given[$i]}"
  q -c "UPDATE pg_proc SET probin = '${libs[$i]}' WHERE probin LIKE '%ogc_throttle%' OR probin LIKE '$work/lib%.so'" \
    >/dev/null || die "probin"
  q -f "$work/stmts.sql" 2>&1 | sed "s|$work/||" >"$work/out.$i.txt"
  pg_stop "$work"
  echo "${given[$i]} (md5 $(md5sum <"${libs[$i]}" | cut -c1-12)): $(grep -c '^== ' "$work/out.$i.txt") statements," \
    "$(wc -l <"$work/out.$i.txt") lines, md5 $(md5sum <"$work/out.$i.txt" | cut -d' ' -f1)"
done
rc=0
for i in "${!libs[@]}"; do
  [ "$i" = 0 ] && continue
  if cmp -s "$work/out.0.txt" "$work/out.$i.txt"; then echo "${given[$i]}: identical to ${given[0]}"
  else echo "${given[$i]}: DIFFERS from ${given[0]}:"; diff "$work/out.0.txt" "$work/out.$i.txt" | head -20; rc=1; fi
done
[ -n "${KEEP:-}" ] && echo "kept $work"
exit $rc
