#!/usr/bin/env bash
# What an automatic refit (ogc_throttle.calibration = apply) costs the client whose statement made it
# due: the same 2 x 12 000 small searches (a pause between the halves, so that a fit of the full store
# of 10 000 samples is due in the second), once with the refit in its background worker and once with
# max_worker_processes = 0, where the backend fits after its statement. Prints each run's statement
# durations (PostgreSQL's duration lines: median, p99.9, the five longest) and where each fit ran and
# how long it took (the DEBUG1 lines). Compare the longest statements of the two runs, not absolute times.
# Starts its own throwaway cluster (Unix socket, port 56433 names it) with the installed library.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../test/lib/pg.sh"
PORT=56433
N=${N:-12000}
DIR=$(pg_tmpdir)
started=
cleanup() { [ -n "$started" ] && pg_stop "$DIR" immediate; rm -rf "$DIR"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
pg_cluster_init "$DIR" "shared_preload_libraries = 'ogc_throttle'" "max_parallel_workers_per_gather = 0" \
  "ogc_throttle.max_samples = 10000" "ogc_throttle.calibration = apply" "autovacuum = off" \
  "log_min_messages = debug1" >/dev/null || { echo "initdb failed" >&2; exit 1; }
q() { pg_psql "$DIR" "$PORT" -d postgres -At -c "$1"; }

{
  echo "SET ogc_throttle.mode = 'log'; SET log_min_duration_statement = 0;"
  for _ in $(seq 1 "$N"); do
    echo "SELECT count(*) FROM pts WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint(0.$((RANDOM % 9 + 1)), 0.0$((RANDOM % 9 + 1))), 4326), 0.00$((RANDOM % 9 + 1))) /*refit_lat*/;"
  done
} >"$DIR/w.sql"
chmod 644 "$DIR/w.sql"

run() {  # label
  pg_start "$DIR" "$PORT" >/dev/null || { echo "the cluster did not start" >&2; exit 1; }
  started=1
  q "CREATE EXTENSION IF NOT EXISTS postgis; CREATE EXTENSION IF NOT EXISTS ogc_throttle" >/dev/null 2>&1
  if [ "$(q "SELECT to_regclass('pts') IS NULL")" = t ]; then
    q "CREATE TABLE pts AS SELECT i, ST_SetSRID(ST_MakePoint(random(), random() * 0.2), 4326) AS geom FROM generate_series(1, 200000) i" >/dev/null
    q "CREATE INDEX ON pts USING gist (geom)" >/dev/null
    q "ANALYZE pts" >/dev/null
  fi
  local from=$(($(wc -l <"$DIR/server.log") + 1))
  pg_psql "$DIR" "$PORT" -d postgres -At -f "$DIR/w.sql" >/dev/null
  sleep 8  # past the 10 s between automatic fits
  pg_psql "$DIR" "$PORT" -d postgres -At -f "$DIR/w.sql" >/dev/null
  tail -n +"$from" "$DIR/server.log" | grep -a 'duration: .*refit_lat\*/' | sed 's/.*duration: \([0-9.]*\) ms.*/\1/' |
    sort -g | awk -v l="$1" '{ a[NR] = $1 } END {
      printf "%-34s %d statements: median %.3f ms, p99.9 %.2f, longest %s %s %s %s %s\n", l, NR, a[int(NR / 2)],
        a[int(NR * 0.999)], a[NR], a[NR - 1], a[NR - 2], a[NR - 3], a[NR - 4] }'
  tail -n +"$from" "$DIR/server.log" | grep -a 'refitted from' | sed 's/.*ogc_throttle: /    /'
  pg_stop "$DIR" fast
  started=
}

echo "# $(date -u '+%F %T') load $(cut -d' ' -f1-3 /proc/loadavg); ogc_throttle.so md5 $(md5sum <"$(pg_config --pkglibdir)/ogc_throttle.so" | cut -c1-12)"
run "refit in a background worker"
echo "max_worker_processes = 0" >>"$DIR/data/postgresql.conf"
run "refit in the backend (no worker slot)"
