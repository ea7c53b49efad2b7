#!/usr/bin/env bash
# Autovacuum's work as a table's owner, for a role only the server's configuration throttles. A
# worker runs as the bootstrap superuser, and PostgreSQL gives it that role's ALTER ROLE … SET: an
# administrator who exempts the superuser (mode off, no cut-off, a huge capacity, for its own
# sessions) must not exempt the work autovacuum does for every other role. The server's settings
# read for the owner are the postmaster's (configuration file, ALTER SYSTEM), followed across a
# reload; a database's and the owner's own ALTER … SET still come over them.
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55500 "shared_preload_libraries = 'ogc_throttle'" "max_parallel_workers_per_gather = 0" \
  "autovacuum_naptime = 1" "log_min_messages = error" "log_error_verbosity = verbose" \
  "ogc_throttle.mode = 'reject'" "ogc_throttle.capacity = 300" "ogc_throttle.rate = 0.01" \
  "ogc_throttle.cutoff_grace = 100" "ogc_throttle.charge_connection = off"
# The superuser's own settings: everything the worker's session would otherwise take for the server's.
q "ALTER ROLE postgres SET ogc_throttle.mode = 'off';
   ALTER ROLE postgres SET ogc_throttle.capacity = 1e9;
   ALTER ROLE postgres SET ogc_throttle.rate = 1e9;
   ALTER ROLE postgres SET ogc_throttle.cutoff_grace = -1;
   ALTER ROLE postgres SET ogc_throttle.true_up = off;" >/dev/null || { not_ok "superuser's settings"; tap_exit; }
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   CREATE ROLE plain LOGIN; GRANT CREATE ON SCHEMA public TO plain;
   CREATE ROLE graced LOGIN; GRANT CREATE ON SCHEMA public TO graced;
   ALTER ROLE graced SET ogc_throttle.cutoff_grace = '3s';" >/dev/null || { not_ok "setup"; tap_exit; }

. "$(dirname "$0")/autovacuum_liar.sh"

check_eq "the superuser's own session reads its mode off" "off" "$(q "SHOW ogc_throttle.mode")"
check_eq "plain's session reads the server's mode" "reject" "$(as plain -c "SHOW ogc_throttle.mode")"

# --- plain: throttled by postgresql.conf only; 2 000 rows × 10 ms asked of a 300 ms budget
liar_table plain t 2000
[ -s "$DIR/p.err" ] && { not_ok "plain's table"; cat "$DIR/p.err"; tap_exit; }
wait_for 40 below plain 0
after=$(tokens plain)
echo "# plain: tokens $after, analyzed $(analyzed t)"
check "autovacuum's work for plain's table is charged to plain (the server's mode and true_up, not the superuser's)" \
  test "${after:-0}" -lt 0
check "... cut off with the server's capacity and grace (charged under 0.6 s, not the 20 s asked)" \
  test "${after:-0}" -gt -300
check "... 53T01 in the server log" \
  grep -q 'ERROR:  53T01: ogc_throttle: work autovacuum does as a table.s owner cancelled: identity "plain"' "$DIR/server.log"
check_eq "... and the analyze did not complete" "0" "$(analyzed t)"

# --- graced: the owner's own ALTER ROLE … SET cutoff_grace still comes over the server's
liar_table graced g 2000
wait_for 40 below graced -1000
after=$(tokens graced)
echo "# graced: tokens $after"
check "an owner's own cutoff_grace (3 s) is the one its autovacuum work runs under (charged past 1 s)" \
  test "${after:-0}" -lt -1000
check "... and still cut off (charged under 5 s)" test "${after:-0}" -gt -5000

# --- the server's settings followed across a reload: ALTER SYSTEM sets mode off for everyone
q "ALTER SYSTEM SET ogc_throttle.mode = 'off'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
sleep 1
as plain -c "DROP TABLE t" >/dev/null
before=$(tokens plain)
liar_table plain u 300
wait_for 30 test "$(analyzed u)" -ge 1
check "after ALTER SYSTEM SET mode = off and a reload, plain's table is analyzed to its end" test "$(analyzed u)" -ge 1
check "... and nothing is charged for it (tokens $before, then $(tokens plain))" test "$(tokens plain)" -ge "$before"
tap_exit
