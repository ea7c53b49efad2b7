#!/usr/bin/env bash
# A top-level executor pass has no PG_TRY of its own: it is settled by the
# abort of the (sub)transaction it started in. Guards that idiom: an error
# caught inside the statement does not end its clock early; an error in a
# savepoint, or in a transaction block, settles the pass once; a refusal in a
# savepoint leaves pricing working; a backend that exits in the middle of a
# statement (pg_terminate_backend: FATAL, no error reaches a catch block)
# still pays the time it used.
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55487 "shared_preload_libraries = 'ogc_throttle'" "max_parallel_workers_per_gather = 0"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   CREATE TABLE pts AS SELECT i, ST_SetSRID(ST_MakePoint((i % 300) * 0.001, (i / 300) * 0.001), 4326) AS geom
     FROM generate_series(1, 60000) i;
   CREATE INDEX ON pts USING gist (geom); ANALYZE pts;
   GRANT SELECT ON pts TO PUBLIC;
   CREATE ROLE tiles LOGIN;
   ALTER ROLE tiles SET ogc_throttle.mode = 'reject';
   ALTER ROLE tiles SET ogc_throttle.capacity = 60000;
   ALTER ROLE tiles SET ogc_throttle.rate = 0.01;
   CREATE FUNCTION caught_then_sleep() RETURNS int LANGUAGE plpgsql AS \$\$
   BEGIN
     BEGIN PERFORM 1 / 0; EXCEPTION WHEN division_by_zero THEN NULL; END;
     PERFORM pg_sleep(0.3);
     RETURN 1;
   END \$\$;" >/dev/null || { not_ok "setup"; tap_exit; }

t() { as_pg psql -X -q -h "$DIR" -p "$PORT" -U tiles -d postgres -At -v VERBOSITY=verbose "$@" 2>"$DIR/t.err"; }
tokens() { q "SELECT tokens FROM throttle_peek('tiles')"; }
reset_tiles() { q "SELECT throttle_reset('tiles')" >/dev/null; }
last() { tail -n 1 <<<"$1"; }

# --- an error caught inside the statement: its subtransaction aborts, the statement's clock runs on
reset_tiles
row=$(last "$(t -c "SELECT caught_then_sleep()" -c "SELECT measured, charged, cutoff FROM throttle_last_statement()")")
IFS='|' read -r meas chg cut <<<"$row"
echo "# caught error then pg_sleep(0.3): measured $meas, charged $chg"
check "a caught error inside the statement does not stop its clock (measured >= 300 ms)" fcmp "$meas" ">=" 300
check "... and it is charged what it measured" fcmp "$chg" ">=" 300

# --- an error in a savepoint: settled when the savepoint's subtransaction aborts, once
reset_tiles
out=$(t -c "BEGIN" -c "SAVEPOINT s" -c "SELECT pg_sleep(0.3), 1 / (random() * 0)::int" -c "ROLLBACK TO s" \
  -c "SELECT measured, charged, cutoff FROM throttle_last_statement()" -c "COMMIT")
row=$(grep '|' <<<"$out" | tail -n 1)
IFS='|' read -r meas chg cut <<<"$row"
left=$(tokens)
echo "# failed in a savepoint: measured $meas, charged $chg, tokens $left"
check "a statement failing in a savepoint is settled (measured >= 300 ms)" fcmp "$meas" ">=" 300
check "... charged once: the bucket lost its time, not twice its time (tokens $left)" \
  awk -v l="$left" -v m="$meas" 'BEGIN { exit !(60000 - l >= m - 1 && 60000 - l < 2 * m - 5) }'

# --- an error in a transaction block (no savepoint): settled by the transaction's abort
reset_tiles
out=$(t -c "BEGIN" -c "SELECT pg_sleep(0.3), 1 / (random() * 0)::int" -c "ROLLBACK" \
  -c "SELECT measured, charged FROM throttle_last_statement()")
IFS='|' read -r meas chg <<<"$(last "$out")"
echo "# failed in a transaction block: measured $meas, charged $chg"
check "a statement failing in a transaction block is settled (measured >= 300 ms)" fcmp "$meas" ">=" 300

# --- a refusal in a savepoint (pricing errors out): the next statement is still priced
reset_tiles
q "ALTER ROLE tiles SET ogc_throttle.capacity = 1" >/dev/null
out=$(t -c "BEGIN" -c "SAVEPOINT s" \
  -c "SELECT count(*) FROM pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(0.1 0.1)'::geometry, 1)" -c "ROLLBACK TO s" \
  -c "SELECT count(*) FROM pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(0.1 0.1)'::geometry, 0.5)" -c "COMMIT")
q "ALTER ROLE tiles SET ogc_throttle.capacity = 60000" >/dev/null
echo "# $(grep -E 'ERROR' "$DIR/t.err" | tr '\n' ' ')"
check "the priced statement is refused in the savepoint (53T01 or 54T01)" grep -qE '5[34]T01' "$DIR/t.err"
check "... and after ROLLBACK TO the next one is priced (and refused) again" test "$(grep -cE '5[34]T01' "$DIR/t.err")" -eq 2

# --- a backend terminated mid-statement still pays what it used
reset_tiles
t -c "SELECT pg_sleep(5)" >/dev/null &
BG_PIDS+=($!)
pid=""
for _ in $(seq 50); do
  pid=$(q "SELECT pid FROM pg_stat_activity WHERE usename = 'tiles' AND query LIKE 'SELECT pg_sleep(5)%' AND state = 'active'")
  [ -n "$pid" ] && break
  sleep 0.1
done
sleep 1
q "SELECT pg_terminate_backend($pid)" >/dev/null
wait
for _ in $(seq 50); do
  [ -z "$(q "SELECT 1 FROM pg_stat_activity WHERE pid = '${pid:-0}'")" ] && break
  sleep 0.1
done
left=$(tokens)
echo "# terminated after ~1 s: tokens $left of 60000"
check "a backend terminated inside a statement is charged the time it ran (>= 900 ms; tokens $left)" fcmp "$left" "<=" 59100
tap_exit
