#!/usr/bin/env bash
# Bucket state across restarts: a clean stop keeps what was spent (the downtime
# refills it, since a TAT is an absolute time); a crash starts every bucket
# full; ogc_throttle.save = off restores nothing.
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55421 "shared_preload_libraries = 'ogc_throttle'" \
  "ogc_throttle.capacity = 100" "ogc_throttle.rate = 1" "ogc_throttle.cost_max = 100"
q "CREATE EXTENSION ogc_throttle CASCADE" >/dev/null 2>&1 || { not_ok "CREATE EXTENSION"; tap_exit; }

log_mark=0
mark_log() { log_mark=$(wc -l <"$DIR/server.log"); }
log_since_mark() { tail -n +"$((log_mark + 1))" "$DIR/server.log"; }
restart() {
  mark_log
  pg_stop "$DIR" fast
  sleep "${1:-0}"
  pg_start "$DIR" "$PORT" || { not_ok "server restarts"; tail -n 20 "$DIR/server.log"; tap_exit; }
}
# tokens|epoch of identity, read in one statement so the pair is consistent.
peek() { q "SELECT tokens, extract(epoch FROM clock_timestamp()) FROM throttle_peek('$1')"; }

check "first start says there was nothing to restore" grep -q 'ogc_throttle: no saved bucket state' "$DIR/server.log"

# --- clean restart keeps the balance, refilled by the downtime
q "SELECT throttle_spend('r1', 80)" >/dev/null
IFS='|' read -r tok0 t0 <<<"$(peek r1)"
restart 2
IFS='|' read -r tok1 t1 <<<"$(peek r1)"
expected=$(awk -v a="$tok0" -v t0="$t0" -v t1="$t1" 'BEGIN { e = a + 1 * (t1 - t0); if (e > 100) e = 100; printf "%.4f", e }')
echo "# before stop: $tok0 tokens; after $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s: $tok1 (expected $expected)"
check "log says the bucket was restored" grep -q 'ogc_throttle: restored 1 saved buckets' <(log_since_mark)
check "balance survives a clean restart (not full again)" fcmp "$tok1" "<" 99
check "balance = before + rate x downtime (within 0.02)" \
  awk -v a="$tok1" -v e="$expected" 'BEGIN { d = a - e; exit !(d < 0.02 && d > -0.02) }'
check "the save file is consumed at start" test ! -e "$DIR/data/pg_stat/ogc_throttle.stat"

# --- crash: a backend killed with SIGKILL makes the postmaster reinitialise
q "SELECT throttle_spend('r1', 10)" >/dev/null
mark_log
pg_psql "$DIR" "$PORT" -d postgres -c "SELECT pg_sleep(60) /* victim */" >/dev/null 2>&1 &
BG_PIDS+=($!)
victim=""
for _ in $(seq 50); do
  victim=$(q "SELECT pid FROM pg_stat_activity WHERE query LIKE '%/* victim */' AND pid <> pg_backend_pid()")
  [ -n "$victim" ] && break
  sleep 0.1
done
if [ -z "$victim" ]; then not_ok "found a backend to kill"; tap_exit; fi
kill -9 "$victim"
up=""
for _ in $(seq 100); do
  sleep 0.3
  grep -q 'all server processes terminated; reinitializing' <(log_since_mark) || continue
  [ "$(q "SELECT 1" 2>/dev/null)" = 1 ] && { up=1; break; }
done
check "server reinitialises after the crash" test -n "$up"
check "log says every bucket starts full after the crash" \
  grep -q 'ogc_throttle: shared memory was reinitialised after a crash; every bucket starts full' <(log_since_mark)
check_eq "after the crash the bucket is full" 100 "$(q "SELECT tokens FROM throttle_peek('r1')")"
check_eq "after the crash the table is empty" 0 "$(q "SELECT count(*) FROM throttle_buckets")"

# --- a clean restart after a crash cycle still saves
q "SELECT throttle_spend('r2', 50)" >/dev/null
restart
check "clean restart after a crash still saves and restores" grep -q 'ogc_throttle: restored 1 saved buckets' <(log_since_mark)
check "restored balance after the crash cycle" fcmp "$(q "SELECT tokens FROM throttle_peek('r2')")" "<" 60

# --- save = off: a file written while save was on is not loaded by a server started with it off
q "SELECT throttle_spend('r3', 50)" >/dev/null
pg_conf_set "$DIR" "ogc_throttle.save = off"
restart
check "started with save = off: nothing restored" bash -c "! grep -q 'ogc_throttle: restored' <<<\"\$1\"" _ "$(log_since_mark)"
check_eq "started with save = off: bucket is full" 100 "$(q "SELECT tokens FROM throttle_peek('r3')")"

# --- save = off while running: nothing written at shutdown, nothing restored
q "SELECT throttle_spend('r4', 50)" >/dev/null
restart
check "save = off: nothing restored" bash -c "! grep -q 'ogc_throttle: restored' <<<\"\$1\"" _ "$(log_since_mark)"
check "save = off: log says every bucket starts full" grep -q 'ogc_throttle: ogc_throttle.save is off; every bucket starts full' <(log_since_mark)
check_eq "save = off: bucket is full after restart" 100 "$(q "SELECT tokens FROM throttle_peek('r4')")"
tap_exit
