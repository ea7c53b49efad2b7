#!/usr/bin/env bash
# Delay mode of the pricing hook: statements wait for their turn instead of
# failing, in arrival order, visibly (wait event Extension), interruptibly
# (statement_timeout, pg_cancel_backend) and give their turn back when
# interrupted. Every statement here costs exactly 5 (radius weights set so).
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55460 "shared_preload_libraries = 'ogc_throttle'" \
  "ogc_throttle.capacity = 10" "ogc_throttle.rate = 2" "ogc_throttle.cost_max = 10" \
  "ogc_throttle.mode = 'delay'" "ogc_throttle.max_delay = '8s'" \
  "ogc_throttle.radius_fixed_cost = 5" "ogc_throttle.radius_row_cost = 0" \
  "ogc_throttle.true_up = off"  # the queue of estimates; settling on measured time: metering.t.sh
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   CREATE TABLE pts AS SELECT i, ST_SetSRID(ST_MakePoint(i * 0.001, 0), 4326) AS geom FROM generate_series(1, 1000) i;" \
  >/dev/null || { not_ok "setup"; tap_exit; }

STMT="SELECT count(*) FROM pts WHERE ST_DWithin(geom::geography, 'SRID=4326;POINT(0 0)'::geography, 100)"
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
tokens() { q "SELECT round(tokens::numeric, 2) FROM throttle_peek('postgres')"; }
# run_bg NAME [psql -c options...]: the statement in a background session; NAME.out/.err/.end
run_bg() {
  local name=$1; shift
  ( pg_psql "$DIR" "$PORT" -d postgres -At "$@" -c "$STMT" >"$DIR/$name.out" 2>"$DIR/$name.err"; now >"$DIR/$name.end" ) &
  BG_PIDS+=($!)
}
wait_bg() { wait "${BG_PIDS[@]}" 2>/dev/null; BG_PIDS=(); }

# --- one session: the burst runs at once, the third statement waits ~2.5 s
q "SELECT throttle_reset_all()" >/dev/null
# The bucket empties somewhere inside the second statement's psql call: the
# wait is bounded from below from its start and from above from its end, so
# a slow psql start-up on a loaded machine shortens neither bound.
t0=$(now); q "$STMT" >/dev/null; te=$(now); q "$STMT" >/dev/null; t1=$(now)
q "$STMT" >/dev/null; rc=$?; t2=$(now)
echo "# burst of 2 took $(elapsed "$t0" "$t1") s; the 3rd ended $(elapsed "$te" "$t2") s after the 2nd began, $(elapsed "$t1" "$t2") s after it ended (expected 2.5)"
check "the burst (capacity 10 = two statements of 5) does not wait" fcmp "$(elapsed "$t0" "$t1")" "<" 1.0
check "the third statement waits for its tokens and then runs" test "$rc" = 0
check "it waited about cost / rate = 2.5 s" \
  awk -v lo="$(elapsed "$te" "$t2")" -v hi="$(elapsed "$t1" "$t2")" 'BEGIN { exit !(lo >= 2.2 && hi <= 3.5) }'

# --- waiting is visible in pg_stat_activity as an Extension wait
q "SELECT throttle_reset_all()" >/dev/null; q "$STMT" >/dev/null; q "$STMT" >/dev/null
run_bg visible
sleep 0.8
seen=$(q "SELECT wait_event_type || '/' || wait_event FROM pg_stat_activity WHERE query LIKE '%ST_DWithin%' AND pid <> pg_backend_pid()")
wait_bg
check_eq "a waiting statement shows wait_event_type/wait_event" "Extension/Extension" "$seen"
check "and completes" grep -qx '[0-9]*' "$DIR/visible.out"

# --- arrival order: B arrives first, C later; B ends first, C one turn later
q "SELECT throttle_reset_all()" >/dev/null; q "$STMT" >/dev/null; te=$(now); q "$STMT" >/dev/null
t0=$(now); run_bg B; sleep 0.4; run_bg C; wait_bg
b=$(elapsed "$t0" "$(cat "$DIR/B.end")"); c=$(elapsed "$t0" "$(cat "$DIR/C.end")")
b_lo=$(elapsed "$te" "$(cat "$DIR/B.end")"); c_lo=$(elapsed "$te" "$(cat "$DIR/C.end")")
echo "# B finished after $b s, C after $c s (from the 2nd statement's start: $b_lo, $c_lo; expected ~2.5 and ~5.0)"
check "first come, first served: B finishes before C" fcmp "$b" "<" "$c"
check "B waited one turn (2.2-3.5 s)" awk -v lo="$b_lo" -v hi="$b" 'BEGIN { exit !(lo >= 2.2 && hi <= 3.5) }'
check "C waited two turns (4.6-6.2 s), none starved" awk -v lo="$c_lo" -v hi="$c" 'BEGIN { exit !(lo >= 4.6 && hi <= 6.2) }'
check "both ran" bash -c "grep -qx '[0-9]*' '$DIR/B.out' && grep -qx '[0-9]*' '$DIR/C.out'"

# --- a wait longer than max_delay is refused at once and charges nothing
q "SELECT throttle_reset_all()" >/dev/null; q "$STMT" >/dev/null; q "$STMT" >/dev/null
before=$(tokens)
t0=$(now)
err=$(pg_psql "$DIR" "$PORT" -d postgres -At -v VERBOSITY=verbose -c "SET ogc_throttle.max_delay = '1s'" -c "$STMT" 2>&1 >/dev/null)
t1=$(now)
after=$(tokens)
check "refused with SQLSTATE 53T01" grep -q 'ERROR:  53T01: ogc_throttle: statement refused' <<<"$err"
check "refused at once, not after waiting" fcmp "$(elapsed "$t0" "$t1")" "<" 0.8
check "a refused statement charged nothing (tokens $before -> $after)" \
  awk -v a="$before" -v b="$after" 'BEGIN { exit !(b >= a - 0.01) }'

# --- statement_timeout interrupts the wait and the turn is given back
q "SELECT throttle_reset_all()" >/dev/null; q "$STMT" >/dev/null; q "$STMT" >/dev/null
tb=$(now)
before=$(tokens)
t0=$(now)
err=$(pg_psql "$DIR" "$PORT" -d postgres -At -v VERBOSITY=verbose -c "SET statement_timeout = '500ms'" -c "$STMT" 2>&1 >/dev/null)
t1=$(now)
after=$(tokens)
ta=$(now)
check "statement_timeout cancels the wait (57014)" grep -q '57014' <<<"$err"
check "after about 0.5 s" awk -v e="$(elapsed "$t0" "$t1")" 'BEGIN { exit !(e < 1.5) }'
# Refunded: what is back is the refill over the time between the two readings (2/s), not the turn's cost.
check "the reservation is refunded (tokens $before -> $after, refill 2/s over $(elapsed "$tb" "$ta") s)" \
  awk -v a="$before" -v b="$after" -v e="$(elapsed "$tb" "$ta")" 'BEGIN { exit !(b >= a && b <= a + 2 * e + 0.2) }'
t0=$(now); q "SELECT throttle_spend('other', 1)" >/dev/null; t1=$(now)
check "no lock left behind: the next spend answers at once" fcmp "$(elapsed "$t0" "$t1")" "<" 0.5

# --- pg_cancel_backend from another session does the same
q "SELECT throttle_reset_all()" >/dev/null; q "$STMT" >/dev/null; q "$STMT" >/dev/null
tb=$(now)
before=$(tokens)
run_bg cancelled -v VERBOSITY=verbose
sleep 0.6
q "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%ST_DWithin%'" >/dev/null
wait_bg
after=$(tokens)
ta=$(now)
check "pg_cancel_backend cancels the waiting statement (57014)" grep -q '57014' "$DIR/cancelled.err"
check "and its turn is given back (tokens $before -> $after, refill 2/s over $(elapsed "$tb" "$ta") s)" \
  awk -v a="$before" -v b="$after" -v e="$(elapsed "$tb" "$ta")" 'BEGIN { exit !(b >= a && b <= a + 2 * e + 0.2) }'
check "statements_delayed counted" fcmp "$(q "SELECT statements_delayed FROM throttle_stats")" ">=" 4
check "the server is healthy" test "$(q "SELECT 1")" = 1
tap_exit
