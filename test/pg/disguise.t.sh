#!/usr/bin/env bash
# Issue 9's "gameable" shapes: work the estimate does not see, or sees capped,
# is charged all the same, because the charge is the measured time. For each
# disguised statement: what it was estimated at (what 0.1 charged: about one
# unit, or nothing), what it took, and what it was charged — all it took.
# (Times are not compared between twins here: on a shared machine that is a
# benchmark's job, bench/fidelity's. Whether the estimates see through the
# disguises is regress suite hook_fidelity's.)
set -uo pipefail
. "$(dirname "$0")/common.sh"

# (Estimates are read here, so every statement is priced: lazy pricing off.)
cluster_up 55484 "shared_preload_libraries = 'ogc_throttle'" "max_parallel_workers_per_gather = 0" \
  "ogc_throttle.mode = 'reject'" "ogc_throttle.capacity = 1000000" "ogc_throttle.rate = 999" \
  "ogc_throttle.cost_max = 100000" "ogc_throttle.lazy_pricing = off"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   CREATE TABLE pts AS SELECT i AS id, ST_SetSRID(ST_MakePoint(random(), random()), 4326) AS geom
     FROM generate_series(1, 100000) i;
   CREATE INDEX ON pts USING gist (geom); ANALYZE pts;" >/dev/null || { not_ok "setup"; tap_exit; }

RUNS=3
# last SQL: "estimate|measured|charged" of the statement
last() { pg_psql "$DIR" "$PORT" -d postgres -At -c "$1" -c "SELECT estimate, measured, charged FROM throttle_last_statement()" | tail -n 1; }
# pays NAME SQL: charged all it measurably took, over RUNS runs
pays() {
  local e=0 m=0 c=0 i row
  for i in $(seq 1 "$RUNS"); do
    row=$(last "$2"); IFS='|' read -r a b d <<<"$row"
    e=$(awk -v x="$e" -v y="$a" 'BEGIN { print x + y }'); m=$(awk -v x="$m" -v y="$b" 'BEGIN { print x + y }')
    c=$(awk -v x="$c" -v y="$d" 'BEGIN { print x + y }')
  done
  echo "# $1: estimated $e, took $m ms, charged $c ms over $RUNS runs"
  check "$1 is charged all it took (>= 99%)" awk -v m="$m" -v c="$c" 'BEGIN { exit !(m > 0 && c >= 0.99 * m) }'
}
PT="'SRID=4326;POINT(0.5 0.5)'::geometry"
BOX="ST_MakeEnvelope(0.2, 0.2, 0.8, 0.8, 4326)"
pays "LIMIT above an aggregate" "SELECT * FROM (SELECT count(*) FROM pts WHERE ST_DWithin(geom, $PT, 0.3)) q LIMIT 1"
pays "LIMIT in an unrelated subquery" "SELECT count(*) FROM pts WHERE ST_DWithin(geom, $PT, 0.3) AND id > (SELECT 0 LIMIT 1)"
pays "ST_Contains with a folded envelope" "SELECT count(*) FROM pts WHERE ST_Contains($BOX, geom)"
pays "geometry_overlaps spelled as a function" "SELECT count(*) FROM pts WHERE geometry_overlaps(geom, $BOX)"
pays "ST_Distance(...) < r" "SELECT count(*) FROM pts WHERE ST_Distance(geom, $PT) < 0.3"
pays "KNN <-> with a big LIMIT" "SELECT count(*) FROM (SELECT id FROM pts ORDER BY geom <-> $PT LIMIT 30000) q"
pays "a LATERAL loop" "SELECT sum(n) FROM generate_series(1, 20) g, LATERAL (SELECT count(*) AS n FROM pts WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint(g * 0.04, 0.5), 4326), 0.05)) x"
pays "a spatial self-join" "SELECT count(*) FROM pts a JOIN pts b ON ST_DWithin(a.geom, b.geom, 0.003) WHERE a.id <= 3000"

# Work no class recognises (per-row GEOS work in a filter, a user's function) is
# estimated from the functions' declared cost before it runs, so that admission
# and the cut-off see it: estimated at least 90% of the least it took (0.2
# before: estimated 0, admitted on any budget).
estimates() {
  local min="" e row i
  for i in $(seq 1 "$RUNS"); do
    row=$(last "$2"); IFS='|' read -r e b d <<<"$row"
    min=$(awk -v x="$min" -v y="$b" 'BEGIN { print (x == "" || y < x) ? y : x }')
  done
  echo "# $1: estimated $e, took at least $min ms"
  check "$1 is estimated >= 90% of what it took" awk -v m="$min" -v e="$e" 'BEGIN { exit !(m > 0 && e >= 0.9 * m) }'
}
estimates "per-row ST_Buffer in a filter" "SELECT count(*) FROM pts WHERE ST_Area(ST_Buffer(geom, 0.01)) > 0"
# A user's function declared as dear as what it runs is estimated as its inline twin.
q "CREATE FUNCTION dear(g geometry) RETURNS float8 LANGUAGE plpgsql COST 10050 AS
   \$\$ BEGIN RETURN ST_Area(ST_Buffer(g, 0.01)); END \$\$" >/dev/null
est() { last "$1" | cut -d'|' -f1; }
fn=$(est "SELECT sum(dear(geom)) FROM pts WHERE id <= 30000"); twin=$(est "SELECT sum(ST_Area(ST_Buffer(geom, 0.01))) FROM pts WHERE id <= 30000")
echo "# a user function: estimated $fn, its inline twin $twin"
check "a user function declared dear is estimated >= 90% of its inline twin" \
  awk -v a="$fn" -v b="$twin" 'BEGIN { exit !(b > 100 && a >= 0.9 * b) }'
tap_exit
