#!/usr/bin/env bash
# Work parallel maintenance workers do, as a throttled role would use them. A btree CREATE INDEX (or
# REINDEX) and a VACUUM with PARALLEL hand part of their work to workers that run no query: no pass of
# theirs was metered, and a role's index build with two workers used 2.9 s of server CPU for a charge
# of 2.0 s (the leader's). Each such worker now charges the leader's identity its whole life. Measured
# against the CPU time of every process the work took (the postmaster's reaped children: the session's
# backend and its workers), with a serial build as the control; and a build cut off at its deadline,
# whose workers stop with it.
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55503 "shared_preload_libraries = 'ogc_throttle'" "autovacuum = off" \
  "max_parallel_maintenance_workers = 2" "maintenance_work_mem = '256MB'" "min_parallel_index_scan_size = 0"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   CREATE ROLE plain LOGIN; GRANT CREATE ON SCHEMA public TO plain;
   ALTER ROLE plain SET ogc_throttle.mode = 'reject';
   ALTER ROLE plain SET ogc_throttle.capacity = 1000000;
   ALTER ROLE plain SET ogc_throttle.rate = 0.01;
   ALTER ROLE plain SET ogc_throttle.charge_connection = off;" >/dev/null || { not_ok "setup"; tap_exit; }
as() { local who=$1; shift; as_pg psql -X -h "$DIR" -p "$PORT" -U "$who" -d postgres -At "$@" 2>"$DIR/p.err"; }
# parallel_workers on the table: the build asks for 2 workers whatever the planner thinks of its size.
as plain -c "CREATE TABLE big WITH (parallel_workers = 2) AS
               SELECT g AS x, md5(g::text) AS s FROM generate_series(1, 1500000) g" >/dev/null
[ -s "$DIR/p.err" ] && { not_ok "plain's table"; cat "$DIR/p.err"; tap_exit; }

pm=$(head -1 "$DIR/data/postmaster.pid")
reaped_cpu_ms() { awk '{ print ($16 + $17) * 10 }' "/proc/$pm/stat"; }  # children's user + sys, in ticks of 10 ms
tokens() { q "SELECT tokens FROM throttle_peek('plain')"; }
# run WORKERS SQL: "charged cpu" in ms, once the session and its workers have exited
run() {
  local t0 c0 n
  t0=$(tokens); c0=$(reaped_cpu_ms)
  as plain -c "SET max_parallel_maintenance_workers = $1" -c "$2" >/dev/null
  for n in $(seq 1 40); do
    [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE usename = 'plain' OR backend_type = 'parallel worker'")" = 0 ] && break
    sleep 0.05
  done
  sleep 0.2
  awk -v a="$t0" -v b="$(tokens)" -v c="$(( $(reaped_cpu_ms) - c0 ))" 'BEGIN { printf "%.0f %d\n", a - b, c }'
}
ratio() { awk -v c="$1" -v u="$2" 'BEGIN { printf "%.2f", (u > 0) ? c / u : 0 }'; }

read -r ch cpu < <(run 0 "CREATE INDEX serial_i ON big (s, x)")
echo "# serial build: charged $ch ms, CPU $cpu ms"
check "a serial build is charged about its CPU time (ratio $(ratio "$ch" "$cpu"), control)" \
  fcmp "$(ratio "$ch" "$cpu")" ">=" 0.85
read -r ch cpu < <(run 2 "CREATE INDEX parallel_i ON big (s, x)")
echo "# parallel build (2 workers): charged $ch ms, CPU $cpu ms"
check "a build with two parallel workers is charged at least 0.9 of the CPU it took (ratio $(ratio "$ch" "$cpu"))" \
  fcmp "$(ratio "$ch" "$cpu")" ">=" 0.9
read -r ch cpu < <(run 2 "REINDEX INDEX parallel_i")
echo "# REINDEX (2 workers): charged $ch ms, CPU $cpu ms"
check "... and so is a REINDEX (ratio $(ratio "$ch" "$cpu"))" fcmp "$(ratio "$ch" "$cpu")" ">=" 0.9
# CONCURRENTLY: the build commits between its phases (its record is kept across them), and its
# first phase is the same parallel build.
read -r ch cpu < <(run 2 "CREATE INDEX CONCURRENTLY concurrent_i ON big (s, x)")
echo "# CREATE INDEX CONCURRENTLY (2 workers): charged $ch ms, CPU $cpu ms"
check "... and so is a CREATE INDEX CONCURRENTLY (ratio $(ratio "$ch" "$cpu"))" fcmp "$(ratio "$ch" "$cpu")" ">=" 0.9
as plain -c "DROP INDEX concurrent_i" >/dev/null

# A build cut off at its deadline: its workers stop with the leader's error, in an abort where the
# catalog cannot be read to name their identity. They charge the identity the leader published as
# the statement began (before, nothing: the role's debt was only the leader's overrun).
q "CREATE ROLE small LOGIN; GRANT CREATE ON SCHEMA public TO small; ALTER TABLE big OWNER TO small;
   ALTER ROLE small SET ogc_throttle.mode = 'reject';
   ALTER ROLE small SET ogc_throttle.capacity = 200;
   ALTER ROLE small SET ogc_throttle.cutoff_grace = 0;
   ALTER ROLE small SET ogc_throttle.rate = 0.01;
   ALTER ROLE small SET ogc_throttle.charge_connection = off;" >/dev/null
as small -c "SELECT 1" >/dev/null  # its bucket
as small -v VERBOSITY=verbose -c "SET max_parallel_maintenance_workers = 2" -c "CREATE INDEX cut_i ON big (s, x)" >/dev/null
cp "$DIR/p.err" "$DIR/cut.err"
for n in $(seq 1 40); do
  [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE usename = 'small' OR backend_type = 'parallel worker'")" = 0 ] && break
  sleep 0.05
done
sleep 0.2
cut=$(q "SELECT round(tokens) FROM throttle_peek('small')")
echo "# a two-worker build on a 200 ms bucket, no grace: $(grep -o 'ERROR:.*' "$DIR/cut.err" | head -1); the bucket then $cut ms"
check "the build is cut off (53T01)" grep -q "53T01" "$DIR/cut.err"
check "... and its workers' time is charged too: debt beyond the leader's overrun (tokens $cut < -150)" \
  fcmp "$cut" "<" -150
q "ALTER TABLE big OWNER TO plain" >/dev/null

# VACUUM: its indexes' dead entries removed by workers, one index each.
as plain -c "CREATE INDEX big_x ON big (x); CREATE INDEX big_s ON big (s); DROP INDEX serial_i, parallel_i;
             DELETE FROM big WHERE x % 2 = 0" >/dev/null
read -r ch cpu < <(run 2 "VACUUM (PARALLEL 2) big")
echo "# VACUUM (PARALLEL 2): charged $ch ms, CPU $cpu ms"
check "VACUUM (PARALLEL 2) is charged at least 0.9 of the CPU it took (ratio $(ratio "$ch" "$cpu"))" \
  fcmp "$(ratio "$ch" "$cpu")" ">=" 0.9

tap_exit
