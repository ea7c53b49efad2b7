#!/usr/bin/env bash
# Shared memory per identity at the default ogc_throttle.max_identities.
# The hash's segments and entries are anonymous allocations, so the figure is
# the difference in all allocated shared memory between the same cluster
# started with and without the library preloaded. The bound is for the bucket
# table, so the optional per-identity statistics of the pricing hook (their own
# table, ogc_throttle.max_identity_stats entries) and the calibration sample
# store (ogc_throttle.max_samples) are switched off for it and measured
# separately.
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

# The statistics table at its default size, reported per tracked identity.
pg_stop "$DIR" fast
pg_conf_set "$DIR" "ogc_throttle.max_identity_stats = 10000"
pg_start "$DIR" "$PORT" || { not_ok "server starts with identity statistics"; tap_exit; }
with_stats=$(total)
per_stat=$(awk -v a="$with_stats" -v b="$with" 'BEGIN { printf "%.1f", (a - b) / 10000 }')
echo "# identity statistics: $((with_stats - with)) bytes for 10000 identities ($per_stat per tracked identity)"
check "identity statistics take <= 160 bytes per tracked identity (got $per_stat)" fcmp "$per_stat" "<=" 160

# The calibration sample store at its default size, per sample.
pg_stop "$DIR" fast
pg_conf_set "$DIR" "ogc_throttle.max_samples = 10000"
pg_start "$DIR" "$PORT" || { not_ok "server starts with the sample store"; tap_exit; }
with_samples=$(total)
per_sample=$(awk -v a="$with_samples" -v b="$with_stats" 'BEGIN { printf "%.1f", (a - b) / 10000 }')
echo "# sample store: $((with_samples - with_stats)) bytes for 10000 samples ($per_sample per sample)"
check "the sample store takes <= 96 bytes per sample (got $per_sample)" fcmp "$per_sample" "<=" 96
tap_exit
