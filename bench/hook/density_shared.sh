#!/usr/bin/env bash
# What the density grids' shared store saves a backend: one cluster, one large grid
# (NPOINTS points in 40 cities), restarted alternately with
#   shared  ogc_throttle.density_shared_memory = 32MB (the default)
#   local   ogc_throttle.density_shared_memory = 0 (every backend its own copy, as before)
# and measured two ways:
#   - memory: CacheMemoryContext of a backend after one priced statement
#     (pg_backend_memory_contexts), and the store's bytes;
#   - first use: pgbench -C (a new connection per statement, each pricing one box
#     from the grid), tps over DURATION seconds, ROUNDS alternating rounds, medians.
# Knobs: NPOINTS (600000), DURATION (10 s), ROUNDS (3), PORT (56420).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/test/lib/pg.sh"
NPOINTS=${NPOINTS:-600000}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-56420}
work=$(pg_tmpdir)
cleanup() { pg_stop "$work" immediate; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
die() { echo "density_shared.sh: $*" >&2; exit 1; }
sql() { as_pg psql -X -q -At -v ON_ERROR_STOP=1 -h "$work" -p "$PORT" -U postgres -d postgres "$@"; }

pg_cluster_init "$work" "shared_preload_libraries = 'ogc_throttle'" "max_connections = 20" "jit = off" \
  "autovacuum = off" "max_parallel_workers_per_gather = 0" || die "initdb failed"
pg_start "$work" "$PORT" || die "postgres did not start"
sql -c "CREATE EXTENSION ogc_throttle CASCADE" >/dev/null 2>&1 || die "CREATE EXTENSION failed"
sql -v n="$NPOINTS" >/dev/null <<'SQL' || die "setup failed"
SELECT setseed(0.3);
CREATE TABLE cities AS SELECT c, 5 + random() * 10 AS x, 45 + random() * 10 AS y, 0.01 + random() * 0.2 AS r
  FROM generate_series(1, 40) c;
CREATE TABLE pts AS
  SELECT i AS id, ST_SetSRID(ST_MakePoint(x + r * (random() - 0.5), y + r * (random() - 0.5)), 4326)::geometry(Point, 4326) AS geom
    FROM generate_series(1, :n) i JOIN cities ON cities.c = 1 + i % 40;
CREATE INDEX ON pts USING gist (geom);
ANALYZE pts;
SELECT throttle_density_build('pts', 'geom');
SQL
bytes=$(sql -c "SELECT octet_length(grid) FROM throttle_density")
f="$work/first.pgbench"
printf '%s\n' "\\set x random(500, 1500)" \
  "SELECT rows FROM throttle_features('SELECT id FROM pts WHERE geom && ST_MakeEnvelope(' || :x / 100.0 || ', 50, ' || :x / 100.0 + 0.01 || ', 50.01, 4326)') WHERE class = 'scan';" >"$f"
chmod 644 "$f"

run() {  # run shared|local -> "tps cache_bytes store_bytes"
  pg_stop "$work" fast
  pg_conf_set "$work" "ogc_throttle.density_shared_memory = '$([ "$1" = shared ] && echo 32MB || echo 0)'"
  pg_start "$work" "$PORT" || die "restart failed"
  local mem store tps
  mem=$(sql -c "SELECT count(*) FROM throttle_features('SELECT id FROM pts WHERE geom && ST_MakeEnvelope(10, 50, 10.01, 50.01, 4326)')" \
            -c "SELECT sum(total_bytes) FROM pg_backend_memory_contexts WHERE name = 'CacheMemoryContext' OR parent = 'CacheMemoryContext'" | tail -1)
  store=$(sql -c "SELECT coalesce(used_bytes, 0) FROM throttle_density_shared_stats()")
  tps=$(as_pg "$PGBIN/pgbench" -n -C -c 2 -j 2 -T "$DURATION" -f "$f" -h "$work" -p "$PORT" -U postgres postgres 2>/dev/null |
        sed -n 's/^tps = \([0-9.]*\).*/\1/p')
  echo "$tps $mem $store"
}
echo "grid: $bytes bytes ($NPOINTS points); pgbench -C -c 2, ${DURATION}s x $ROUNDS rounds, alternating; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-7s | %10s | %22s | %12s\n' store "tps (-C)" "CacheMemoryContext B" "store bytes"
: >"$work/results"
for r in $(seq "$ROUNDS"); do
  for m in local shared; do
    read -r tps mem store <<<"$(run $m)"
    printf '%-7s | %10s | %22s | %12s\n' "$m" "$tps" "$mem" "$store"
    echo "$m $tps $mem" >>"$work/results"
  done
done
med() { grep "^$1 " "$work/results" | cut -d' ' -f2 | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
mem() { grep "^$1 " "$work/results" | tail -1 | cut -d' ' -f3; }
awk -v ls="$(med local)" -v sh="$(med shared)" -v ml="$(mem local)" -v ms="$(mem shared)" 'BEGIN {
  printf "median tps: local %.1f, shared %.1f (shared/local %.3f); a backend holds %d bytes less\n", ls, sh, sh / ls, ml - ms }'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
