#!/usr/bin/env bash
# Without shared_preload_libraries there is no shared bucket table: the
# extension still installs, and every budget function says exactly what to fix
# (SQLSTATE 55000 naming shared_preload_libraries) instead of allowing or crashing.
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55422
out=$(q "CREATE EXTENSION ogc_throttle CASCADE" 2>&1)
if [ $? = 0 ]; then ok "CREATE EXTENSION works without preloading"
else not_ok "CREATE EXTENSION works without preloading (got: $(grep -E 'ERROR|FATAL' <<<"$out" | head -n 1))"; fi
check_eq "library is not preloaded" "" "$(q "SHOW shared_preload_libraries")"

# expect_55000 LABEL SQL: the statement fails with 55000 and names the fix.
expect_55000() {
  local out
  out=$(pg_psql "$DIR" "$PORT" -d postgres -v VERBOSITY=verbose -c "$2" 2>&1)
  if grep -q 'ERROR:  55000:' <<<"$out" && grep -q 'shared_preload_libraries' <<<"$out"; then
    ok "$1 raises 55000 naming shared_preload_libraries"
  else
    not_ok "$1 raises 55000 naming shared_preload_libraries (got: $(head -n 2 <<<"$out" | tr '\n' ' '))"
  fi
}

expect_55000 "throttle_spend(identity, cost)" "SELECT throttle_spend('alice', 1)"
expect_55000 "throttle_spend(cost)" "SELECT throttle_spend(1)"
expect_55000 "throttle_try_spend" "SELECT * FROM throttle_try_spend('alice', 1)"
expect_55000 "throttle_peek(identity)" "SELECT * FROM throttle_peek('alice')"
expect_55000 "throttle_peek()" "SELECT * FROM throttle_peek()"
expect_55000 "throttle_reset" "SELECT throttle_reset('alice')"
expect_55000 "throttle_reset_all" "SELECT throttle_reset_all()"
expect_55000 "throttle_stats_reset" "SELECT throttle_stats_reset()"
expect_55000 "view throttle_buckets" "SELECT * FROM throttle_buckets"
expect_55000 "view throttle_stats" "SELECT * FROM throttle_stats"
# A zero cost must not slip through as "nothing to check".
expect_55000 "throttle_spend with cost 0" "SELECT throttle_spend('alice', 0)"

# Pricing needs no shared memory and keeps working.
check "estimators work without preloading" \
  fcmp "$(q "SELECT throttle_cost_tile(10)" 2>/dev/null)" ">" 0
check_eq "server is still up afterwards" 1 "$(q "SELECT 1")"
tap_exit
