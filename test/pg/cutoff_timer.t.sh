#!/usr/bin/env bash
# The cut-off timer across statements of one session: each pass is held to
# its own allowance, never to a timer an earlier statement left behind. An
# early deadline of a short allowance cancels nothing that is within its own;
# a far deadline does not spare a later statement with a short allowance; a
# timer outside a metered statement cancels nothing. (Guards any change to how
# the timer is armed: a lazily armed timer, tried for select-only overhead and
# left out, must pass these.)
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55486 "shared_preload_libraries = 'ogc_throttle'" "max_parallel_workers_per_gather = 0"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;" >/dev/null || { not_ok "setup"; tap_exit; }
# session SQL...: one session, superuser, reject mode, 400 ms of budget refilling slowly
session() {
  pg_psql "$DIR" "$PORT" -d postgres -At -v VERBOSITY=verbose -v ON_ERROR_STOP=0 \
    -c "SELECT throttle_reset(current_user) IS NOT NULL" \
    -c "SET ogc_throttle.mode = 'reject'" -c "SET ogc_throttle.capacity = 400" -c "SET ogc_throttle.rate = 0.01" \
    "$@" 2>"$DIR/s.err"
}

# Early timer left behind: A's allowance ends ~400 ms in; B (grace 3 s) runs 1 s through it.
t0=$(date +%s%N)
out=$(session -c "SET ogc_throttle.cutoff_grace = 0" -c "SELECT 'a'" \
  -c "SET ogc_throttle.cutoff_grace = 3000" -c "SELECT 'b', pg_sleep(1)" \
  -c "SET ogc_throttle.mode = 'off'" -c "SELECT cutoff FROM throttle_last_statement()")
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "# early timer: $(tr '\n' ' ' <<<"$out") in $ms ms; $(head -c 300 "$DIR/s.err")"
check "a statement within its allowance is not cancelled by an earlier statement's timer" grep -q '^b|$' <<<"$out"
check "... and is not marked cut off" grep -qx 'f' <<<"$out"
check_eq "... and nothing was refused" "" "$(grep -E '53T01|57014' "$DIR/s.err")"

# Late timer left behind: A's allowance ends ~1.4 s in (grace 1 s); B (grace 0) sleeps 5 s on its 400 ms.
t0=$(date +%s%N)
out=$(session -c "SET ogc_throttle.cutoff_grace = 1000" -c "SELECT 'a'" \
  -c "SET ogc_throttle.cutoff_grace = 0" -c "SELECT 'b', pg_sleep(5)" \
  -c "SET ogc_throttle.mode = 'off'" -c "SELECT cutoff FROM throttle_last_statement()")
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "# late timer: $(tr '\n' ' ' <<<"$out") in $ms ms; $(grep -m1 DETAIL "$DIR/s.err")"
check "a statement past its own short allowance is cancelled with 53T01" grep -q '53T01' "$DIR/s.err"
check "... at its own deadline, not the earlier statement's (within 1.2 s)" test "$ms" -lt 1200
check "... and is marked cut off" grep -qx 't' <<<"$out"

# Between statements the timer lapses: an idle session after a short allowance is not cancelled.
out=$(session -c "SET ogc_throttle.cutoff_grace = 0" -c "SELECT 'a'" -c "SET ogc_throttle.mode = 'off'" \
  -c "SELECT pg_sleep(0.8)" -c "SELECT 'still here'")
check "a timer left armed fires harmlessly outside a metered statement" grep -qx 'still here' <<<"$out"
check_eq "... with no error" "" "$(grep -E 'ERROR' "$DIR/s.err")"
tap_exit
