#!/usr/bin/env bash
# One command to see ogc_throttle work: installs what is missing, builds,
# starts a throwaway PostgreSQL + PostGIS cluster in .run/ (git-ignored) with
# the library preloaded, loads a demo table, shows a throttled query being
# refused, then (if built) starts MapServer, reading the demo table as the
# hook-priced role demo_map, with the gate in front.
#   scripts/demo.sh         start (or restart) everything
#   scripts/demo.sh stop    stop everything
# OT_DEMO_RUN moves the state from .run/ elsewhere; OT_DEMO_PG_PORT and
# gate-demo.sh's GATE_PORT, ADMIN_PORT and MS_PORT move the ports.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. test/lib/pg.sh
run=${OT_DEMO_RUN:-$root/.run}
port=${OT_DEMO_PG_PORT:-15432}

stop_all() {
  [ -x scripts/gate-demo.sh ] && [ -d "$run/gate" ] && scripts/gate-demo.sh "$run/gate" stop || true
  [ -d "$run/pg/data" ] && pg_stop "$run/pg" && echo "PostgreSQL stopped."
  return 0
}
if [ "${1:-}" = stop ]; then stop_all; exit 0; fi

scripts/deps.sh
echo "== Building and installing the extension"
make -s -j2 all >/dev/null && make -s install >/dev/null

stop_all
rm -rf "$run/pg"
mkdir -p "$run"
# The cluster lives in .run/pg. If the postgres user cannot reach this checkout
# (a root-only home, say), the data goes to /var/tmp and .run/pg links to it.
if as_pg test -x "$run" 2>/dev/null && as_pg test -w "$run" 2>/dev/null || { [ "$(id -u)" = 0 ] && chown postgres: "$run" && as_pg test -w "$run"; }; then
  pgdir="$run/pg"
else
  pgdir="/var/tmp/ogc_throttle-demo-$(echo "$run" | md5sum | cut -c1-8)"
  rm -rf "$pgdir"; ln -sfn "$pgdir" "$run/pg"
fi
mkdir -p "$pgdir"
echo "== Starting PostgreSQL on 127.0.0.1:$port (data in $run/pg)"
# The log shows refusals (ERROR) with the role and the SQLSTATE.
pg_cluster_init "$pgdir" "shared_preload_libraries = 'ogc_throttle'" "listen_addresses = '127.0.0.1'" \
  "ogc_throttle.capacity = 200" "ogc_throttle.rate = 10" \
  "log_min_messages = warning" "log_line_prefix = '%m [%p] %u %e '"
pg_start "$pgdir" "$port"

psql_demo() { pg_psql "$pgdir" "$port" -d demo "$@"; }
pg_psql "$pgdir" "$port" -c "CREATE DATABASE demo"
psql_demo <<'SQL'
CREATE EXTENSION postgis;
CREATE EXTENSION ogc_throttle;
-- 50 000 points over central Europe, denser towards the middle.
CREATE TABLE demo_points AS
  SELECT i AS id, 'point ' || i AS name,
         ST_SetSRID(ST_MakePoint(10 + 5 * (random() - random()), 50 + 3 * (random() - random())), 4326) AS geom
    FROM generate_series(1, 50000) i;
CREATE INDEX ON demo_points USING gist (geom);
ANALYZE demo_points;
-- A throttled map-server role with a small budget of its own.
CREATE ROLE demo_user LOGIN;
GRANT SELECT ON demo_points TO demo_user;
ALTER ROLE demo_user SET ogc_throttle.capacity = 20;
ALTER ROLE demo_user SET ogc_throttle.rate = 0.5;
-- Estimates are clamped at cost_max, which must not exceed any capacity.
ALTER ROLE demo_user SET ogc_throttle.cost_max = 20;
-- A map-server role whose plain SQL is priced by the hook.
CREATE ROLE demo_map LOGIN;
GRANT SELECT ON demo_points TO demo_map;
ALTER ROLE demo_map SET ogc_throttle.mode = 'reject';
-- Budgets are milliseconds of server time: 200 ms in a burst, 2 % of a core sustained.
ALTER ROLE demo_map SET ogc_throttle.capacity = 200;
ALTER ROLE demo_map SET ogc_throttle.cost_max = 150;
ALTER ROLE demo_map SET ogc_throttle.rate = 20;
SQL

echo
echo "== demo_user (capacity 20, refill 0.5/s, cost_max 20) asks three times for points within 5 km:"
echo "   each query is priced by throttle_cost_radius(5000) and charged before it runs"
pg_psql "$pgdir" "$port" -d demo -U demo_user -v ON_ERROR_STOP=0 <<'SQL' 2>&1 | sed 's/^/   /'
\set q 'SELECT round(throttle_spend(throttle_cost_radius(5000))::numeric, 1) AS tokens_left, (SELECT count(*) FROM demo_points WHERE ST_DWithin(geom::geography, ''SRID=4326;POINT(10 50)''::geography, 5000)) AS points'
:q ;
:q ;
:q ;
-- A 50 km search is priced at the clamp: it fits a full bucket, so it may wait.
SELECT round(throttle_cost_radius(50000)::numeric) AS cost_of_50km;
SELECT throttle_spend(throttle_cost_radius(50000));
SQL

echo
echo "== demo_map (mode reject, capacity 200 ms, refill 20 ms/s) sends plain PostGIS SQL; the hook admits it on its"
echo "   estimate and charges the milliseconds it measurably used:"
pg_psql "$pgdir" "$port" -d demo -U demo_map -v ON_ERROR_STOP=0 <<'SQL' 2>&1 | sed 's/^/   /'
SELECT call, round(cost::numeric, 2) AS cost FROM throttle_explain($$SELECT id FROM demo_points WHERE geom && ST_MakeEnvelope(9.9, 49.9, 10.1, 50.1, 4326)$$);
\set q 'SELECT count(*) AS points FROM demo_points WHERE geom && ST_MakeEnvelope(9.9, 49.9, 10.1, 50.1, 4326)'
:q ;
SELECT round(estimate::numeric, 2) AS estimate_ms, round(measured::numeric, 2) AS measured_ms, round(charged::numeric, 2) AS charged_ms FROM throttle_last_statement();
-- Work the estimate cannot see is charged all the same, and what overruns the budget is stopped:
-- (200 million pairs, several seconds unbounded: far past the 1.2 s its budget and the grace allow, on any machine)
SELECT count(*) AS pairs FROM demo_points a JOIN demo_points b ON a.id % 10 = b.id % 10 WHERE a.id < 40000;
SQL
echo "   demo_map's bucket is now in debt (negative tokens: it must be repaid before its next statement):"
pg_psql "$pgdir" "$port" -d demo -c "SELECT identity, round(tokens::numeric) AS tokens_ms FROM throttle_buckets WHERE identity = 'demo_map'" 2>&1 | sed 's/^/   /'
# MapServer below starts on a full bucket. A backend settles what it still owes
# as it exits, after psql has returned: reset once demo_map's sessions are gone.
for _ in $(seq 1 50); do
  [ "$(pg_psql "$pgdir" "$port" -d demo -Atc "SELECT count(*) FROM pg_stat_activity WHERE usename = 'demo_map'")" = 0 ] && break
  sleep 0.1
done
# Behind MapServer the budget is larger: a WFS client's capabilities alone make
# MapServer scan the table for its extent.
pg_psql "$pgdir" "$port" -d demo -c "ALTER ROLE demo_map SET ogc_throttle.capacity = 500" \
  -c "ALTER ROLE demo_map SET ogc_throttle.rate = 50" -c "SELECT throttle_reset('demo_map')" >/dev/null

if [ -x scripts/gate-demo.sh ] && [ -x bin/ogc-gate ]; then
  echo
  echo "== Starting MapServer (reading demo_points as demo_map, now with capacity 500 ms, refill 50 ms/s) with ogc-gate in front"
  OT_DEMO_PG_CONN="host=127.0.0.1 port=$port dbname=demo user=demo_map" OT_DEMO_PG_LOG="$run/pg/server.log" \
    scripts/gate-demo.sh "$run/gate"
fi

cat <<EOF2

PostgreSQL is running (data in $run/pg, log in $run/pg/server.log):
  psql -h 127.0.0.1 -p $port -U postgres demo        # as the administrator
  psql -h 127.0.0.1 -p $port -U demo_user demo       # as the throttled role (throttle_spend)
  psql -h 127.0.0.1 -p $port -U demo_map demo        # as the role whose statements the hook prices
  SELECT * FROM throttle_buckets;  SELECT * FROM throttle_stats;  SELECT * FROM throttle_identity_stats;
Refusals by the hook:  grep -A2 ' 53T01 ERROR' $run/pg/server.log
Stop everything:  ${OT_DEMO_RUN:+OT_DEMO_RUN=$run }scripts/demo.sh stop
EOF2
