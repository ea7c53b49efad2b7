#!/usr/bin/env bash
# Work autovacuum does as a table's owner, as a throttled role would use it: a role that may create a
# table gives it an index on an IMMUTABLE function of its own that sleeps only where no client backend
# runs it, and sets the table's analyze thresholds to 0. Autovacuum's ANALYZE then evaluates the
# function on every sampled row: 2 000 rows × 10 ms ran 20 s of a worker on a budget of 300 ms, free.
# Now that work is the owner's: refused while its bucket is in debt, cut off with 53T01 past what the
# bucket held (plus the server's cutoff_grace), charged what it took, under the owner's own settings
# (which a worker does not load). Controls: an owner whose mode is off is neither charged nor cut off;
# an identity the owner may not choose (stored with ALTER ROLE … SET, which does not check it) is
# not the one charged. Other spellings of the same work, an expression statistic, a partial index's
# predicate, a BRIN index's ranges summarized by a work item or by VACUUM, are charged and cut off the same way.
set -uo pipefail
. "$(dirname "$0")/common.sh"

# ERRORs reach the server log only below log_min_messages = log (common.sh's setting ranks them under LOG).
cluster_up 55498 "shared_preload_libraries = 'ogc_throttle'" "max_parallel_workers_per_gather = 0" \
  "autovacuum_naptime = 1" "ogc_throttle.cutoff_grace = 100" "log_min_messages = error" "log_error_verbosity = verbose"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   CREATE ROLE plain LOGIN; GRANT CREATE ON SCHEMA public TO plain;
   ALTER ROLE plain SET ogc_throttle.mode = 'reject';
   ALTER ROLE plain SET ogc_throttle.capacity = 300;
   ALTER ROLE plain SET ogc_throttle.rate = 0.01;
   ALTER ROLE plain SET ogc_throttle.charge_connection = off;
   CREATE ROLE free LOGIN; GRANT CREATE ON SCHEMA public TO free;
   ALTER ROLE free SET ogc_throttle.mode = 'off';
   SELECT throttle_spend('victim', 0);" >/dev/null || { not_ok "setup"; tap_exit; }

. "$(dirname "$0")/autovacuum_liar.sh"
logged() { grep -q "$1" "$DIR/server.log"; }

# --- plain's table: 2 000 rows × 10 ms of autovacuum's ANALYZE on a budget of 300 ms
liar_table plain t 2000
[ -s "$DIR/p.err" ] && { not_ok "plain's table"; cat "$DIR/p.err"; tap_exit; }
before=$(tokens plain)
t0=$(date +%s%N)
wait_for 40 below plain 0
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
after=$(tokens plain)
echo "# plain: tokens $before -> $after after $ms ms; $(grep -m1 -A3 '53T01' "$DIR/server.log" | tr '\n' ' ' | head -c 700)"
check "autovacuum's work for plain's table is charged to plain" test "$after" -lt 0
check "... cut off near what the bucket held plus the grace (charged under 0.6 s, not the 20 s asked)" \
  test "$after" -gt -300
cut='ERROR:  53T01: ogc_throttle: work autovacuum does as a table.s owner cancelled: identity "plain" ran past its budget'
check "... with 53T01 in the server log" logged "$cut"
check "... in autovacuum's task for that table" \
  bash -c 'grep -m1 -A8 "$1" "$2" | grep -qE "automatic (vacuum|analyze) of table \"postgres.public.t\""' _ "$cut" "$DIR/server.log"
check_eq "... which did not complete" "0" "$(analyzed t)"

# In debt: autovacuum's next try at the table is refused before any of it runs.
wait_for 10 logged 'budget exhausted for identity "plain"'
echo "# refused: $(grep -m1 -A4 'budget exhausted for identity "plain"' "$DIR/server.log" | tr '\n' ' ' | head -c 700)"
check "in debt, autovacuum's next try is refused (53T01, budget exhausted)" \
  logged 'ERROR:  53T01: ogc_throttle: statement refused: budget exhausted for identity "plain"'
check "... naming the role and the identity charged" \
  logged 'work autovacuum does as role "plain", the table.s owner, is charged to identity "plain"'
debt=$(tokens plain)
sleep 3
check "... and charged nothing more (tokens $debt, then $(tokens plain))" test "$(tokens plain)" -ge "$debt"
out=$(as plain -c "SELECT count(*) FROM t")
check "plain's own statements are refused while autovacuum's work is unpaid" grep -q '53T01' "$DIR/p.err"

# --- free's table: an owner in mode off; its analyze runs to its end (500 × 10 ms), charged to nobody
liar_table free f 500
wait_for 40 test "$(analyzed f)" -ge 1
check "an owner whose mode is off: autovacuum's analyze completes" test "$(analyzed f)" -ge 1
check_eq "... and no bucket is opened for it" "" "$(q "SELECT last_request FROM throttle_peek('free')")"

# --- an identity the owner may not choose: plain stores one in its own role settings
q "SELECT throttle_reset('plain')" >/dev/null
as plain -c "ALTER ROLE plain SET ogc_throttle.identity = 'victim'" >/dev/null
check "plain may store ogc_throttle.identity in its own settings (ALTER ROLE does not check it)" test ! -s "$DIR/p.err"
victim=$(tokens victim)
as plain -c "INSERT INTO t VALUES (1)" >/dev/null  # a change: autovacuum analyzes t again
wait_for 20 below plain 0
echo "# identity stored: plain $(tokens plain), victim $victim -> $(tokens victim)"
check "... autovacuum's work for plain's table is still charged to plain" test "$(tokens plain)" -lt 0
check_eq "... not to the identity it stored" "$victim" "$(tokens victim)"

# --- other spellings of the same work: an expression statistic, a partial index's predicate
as plain -c "ALTER ROLE plain RESET ogc_throttle.identity; DROP TABLE t" >/dev/null
analyze_now="autovacuum_analyze_threshold = 0, autovacuum_analyze_scale_factor = 0"
# spelled TABLE DDL [TABLE OPTIONS [CONTEXT]]: 2 000 rows, the function only in DDL's object
spelled() {
  local with=${3:-$analyze_now} context=${4:-"automatic (vacuum|analyze) of table \"postgres.public.$1\""}
  q "SELECT throttle_reset('plain')" >/dev/null
  as plain -c "CREATE TABLE $1 (x int) WITH ($with); $2; INSERT INTO $1 SELECT generate_series(1, 2000);" >/dev/null
  wait_for 30 below plain 0
  echo "# $1: tokens $(tokens plain), analyzed $(analyzed "$1")"
  check "$1: autovacuum's work is charged to plain" test "$(tokens plain)" -lt 0
  check "... and cut off (charged under 0.6 s)" test "$(tokens plain)" -gt -300
  check "... in autovacuum's task for $1" \
    bash -c 'grep -A8 "$1" "$2" | grep -qE "$3"' _ "$cut" "$DIR/server.log" "$context"
  as plain -c "DROP TABLE $1" >/dev/null
}
spelled st "CREATE STATISTICS st_liar ON (t_liar(x)) FROM st"
spelled pt "CREATE INDEX ON pt (x) WHERE t_liar(x) > 0"
# A BRIN index's ranges summarized as they fill (autosummarize: a work item, no ANALYZE), and by VACUUM.
spelled bs "CREATE INDEX bs_liar ON bs USING brin (t_liar(x)) WITH (pages_per_range = 1, autosummarize = on)" \
  "autovacuum_enabled = off" 'processing work entry for relation "postgres.public.bs_liar"'
spelled bv "CREATE INDEX ON bv USING brin (t_liar(x)) WITH (pages_per_range = 1)" \
  "autovacuum_vacuum_insert_threshold = 0, autovacuum_vacuum_insert_scale_factor = 0, autovacuum_analyze_threshold = 2000000000" \
  'automatic vacuum of table "postgres.public.bv"'
tap_exit
