#!/usr/bin/env bash
# Shared memory per identity at the default ogc_throttle.max_identities.
# The hash's segments and entries are anonymous allocations, so the figure is
# the difference in all allocated shared memory between the same cluster
# started with and without the library preloaded. The bound is for the bucket
# table, so the optional per-identity statistics of the pricing hook (their own
# table, ogc_throttle.max_identity_stats entries) and the calibration sample
# store (ogc_throttle.max_samples) are switched off for it and measured
# separately, and so is the density grids' store (ogc_throttle.density_shared_memory).
set -uo pipefail
. "$(dirname "$0")/common.sh"

LIMIT=128
cluster_up 55423
total() { q "SELECT sum(allocated_size) FROM pg_shmem_allocations WHERE name IS NOT NULL"; }
without=$(total)
pg_stop "$DIR" fast
pg_conf_set "$DIR" "shared_preload_libraries = 'ogc_throttle'"
pg_conf_set "$DIR" "ogc_throttle.max_identity_stats = 0"
pg_conf_set "$DIR" "ogc_throttle.max_samples = 0"
pg_conf_set "$DIR" "ogc_throttle.density_shared_memory = 0"
pg_start "$DIR" "$PORT" || { not_ok "server starts with the library preloaded"; tail -n 20 "$DIR/server.log"; tap_exit; }
with=$(total)
max_ids=$(q "SHOW ogc_throttle.max_identities")
named=$(q "SELECT coalesce(sum(allocated_size), 0) FROM pg_shmem_allocations WHERE name LIKE 'ogc_throttle%'")
per_id=$(awk -v a="$with" -v b="$without" -v n="$max_ids" 'BEGIN { printf "%.1f", (a - b) / n }')
named_per_id=$(awk -v a="$named" -v n="$max_ids" 'BEGIN { printf "%.1f", a / n }')
q "SELECT name, allocated_size FROM pg_shmem_allocations WHERE name LIKE 'ogc_throttle%'" | sed 's/^/# named: /'
echo "# max_identities $max_ids: $((with - without)) bytes in all ($per_id per identity); named rows $named bytes ($named_per_id per identity)"
check_eq "default max_identities" 100000 "$max_ids"
check "named ogc_throttle allocations exist" fcmp "$named" ">" 0
check "shared memory per identity <= $LIMIT bytes (got $per_id)" fcmp "$per_id" "<=" "$LIMIT"

# grow SETTING WHAT LIMIT: restart with SETTING = 10000 and check the extra
# shared memory per entry (the table's size) against LIMIT bytes.
prev=$with
grow() {
  pg_stop "$DIR" fast
  pg_conf_set "$DIR" "$1 = 10000"
  pg_start "$DIR" "$PORT" || { not_ok "server starts with $1 = 10000"; tap_exit; }
  local now; now=$(total)
  local per; per=$(awk -v a="$now" -v b="$prev" 'BEGIN { printf "%.1f", (a - b) / 10000 }')
  echo "# $2: $((now - prev)) bytes for 10000 ($per each)"
  check "$2 take <= $3 bytes each (got $per)" fcmp "$per" "<=" "$3"
  prev=$now
}
grow ogc_throttle.max_identity_stats "identity statistics (per tracked identity)" 160
grow ogc_throttle.max_samples "calibration samples" 129  # two floats per cost class (15) and the measured time: 128, and a share of the ring's header

# The density grids' store: the size asked for and a header of 512 slots (~72 bytes each).
pg_stop "$DIR" fast
pg_conf_set "$DIR" "ogc_throttle.density_shared_memory = '8MB'"
pg_start "$DIR" "$PORT" || { not_ok "server starts with density_shared_memory = 8MB"; tap_exit; }
now=$(total)
echo "# density_shared_memory 8MB: $((now - prev)) bytes"
check "the density store takes 8 MB and at most 64 kB more (got $((now - prev)))" \
  test "$((now - prev))" -ge 8388608 -a "$((now - prev))" -le $((8388608 + 65536))
tap_exit
