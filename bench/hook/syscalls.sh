#!/usr/bin/env bash
# System calls per transaction, with the library (A, as in run.sh: mode 'reject', a budget nothing
# exhausts) and without it (B), counted by strace over every backend of one pgbench run each. A system
# call costs this VM 1.1-1.3 us (a thread CPU clock read, a timer set) where the vDSO's monotonic clock
# costs 25 ns, and neither callgrind (user space only) nor a tps ratio names it: this says whether the
# hook added one to a statement's path. Not part of the tests; needs strace. Under strace the runs are
# several times slower: read its counts, not its tps.
# Knobs (environment): T (transactions per run, 2000), NPOINTS (50000), LIB (a build to preload in A
# instead of the installed library), A_CONF (more settings for A, separated by ';').
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/test/lib/pg.sh"
command -v strace >/dev/null || { echo "syscalls.sh: strace is not installed" >&2; exit 1; }
T=${T:-2000}
NPOINTS=${NPOINTS:-50000}
PORT_A=${PORT_A:-56411}
PORT_B=${PORT_B:-56412}
PGBENCH=/usr/lib/postgresql/15/bin/pgbench
[ -x "$PGBENCH" ] || PGBENCH="$PGBIN/pgbench"

. "$here/two_clusters.sh"
two_cluster_workdir
q() { as_pg timeout 300 psql -X -q -v ON_ERROR_STOP=1 -h "$1" -p "$2" -U postgres -d postgres "${@:3}"; }

lib="ogc_throttle"
if [ -n "${LIB:-}" ]; then
  cp "$LIB" "$work/lib.so" && chmod 755 "$work/lib.so" || die "cannot copy $LIB"
  lib="$work/lib.so"
fi
cp "$here/setup.sql" "$here/postgis.pgbench" "$work/" && chmod 644 "$work/setup.sql" "$work/postgis.pgbench" ||
  die "copy failed"
common_conf=("max_connections = 20" "shared_buffers = '128MB'" "synchronous_commit = off" "jit = off" "autovacuum = off")
IFS=';' read -r -a a_conf <<<"${A_CONF:-}"
pg_cluster_init "$A" "${common_conf[@]}" "shared_preload_libraries = '$lib'" "ogc_throttle.mode = 'reject'" \
  "ogc_throttle.capacity = 1000000000" "ogc_throttle.rate = 500" "ogc_throttle.cost_max = 1000000" "${a_conf[@]}" ||
  die "initdb A failed"
pg_cluster_init "$B" "${common_conf[@]}" || die "initdb B failed"
pg_start "$A" "$PORT_A" || die "A did not start"
started+=("$A")
pg_start "$B" "$PORT_B" || die "B did not start"
started+=("$B")
for c in "$A $PORT_A" "$B $PORT_B"; do
  set -- $c
  as_pg timeout 300 "$PGBENCH" -i -q -s 1 -h "$1" -p "$2" -U postgres postgres >/dev/null 2>&1 || die "pgbench -i failed"
  q "$1" "$2" -v npoints="$NPOINTS" -f "$work/setup.sql" >/dev/null || die "setup.sql failed"
  q "$1" "$2" -c "VACUUM ANALYZE" >/dev/null || die "VACUUM failed"
done
q "$A" "$PORT_A" -c "CREATE EXTENSION ogc_throttle" -c "SELECT throttle_density_build('pts', 'geom')" >/dev/null ||
  die "the extension's set-up failed on A"
echo "# A preloads $lib (md5 $(md5sum < "${LIB:-$(pg_config --pkglibdir)/ogc_throttle.so}" | cut -c1-12)); B nothing. $T transactions a run, one client."

# count SIDE DIR PORT WORKLOAD: system calls per transaction by name, "name=calls ..." sorted
count() {
  local pm sp out="$work/strace.$1.$4"
  pm=$(head -n 1 "$2/data/postmaster.pid")
  strace -f -c -o "$out" -p "$pm" 2>/dev/null &
  sp=$!
  sleep 1  # (attached before the connection's fork)
  local args=(-S)
  [ "$4" = postgis ] && args=(-f "$work/postgis.pgbench")
  as_pg timeout 600 "$PGBENCH" -n -M prepared -c 1 -t "$T" "${args[@]}" -h "$2" -p "$3" -U postgres postgres \
    >/dev/null 2>&1 || echo "# pgbench failed on $1 ($4)"
  sleep 0.5
  kill -INT "$sp"
  wait "$sp" 2>/dev/null
  awk -v t="$T" '$1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" { printf "%s %.3f\n", $NF, $4 / t }' "$out" | sort
}

for w in select postgis; do
  count A "$A" "$PORT_A" $w > "$work/a.$w"
  count B "$B" "$PORT_B" $w > "$work/b.$w"
  echo
  echo "$w: system calls per transaction"
  printf '%-18s %8s %8s %8s\n' call A B "A - B"
  join -a1 -a2 -e 0 -o 0,1.2,2.2 "$work/a.$w" "$work/b.$w" |
    awk '{ d = $2 - $3; printf "%-18s %8.3f %8.3f %+8.3f\n", $1, $2, $3, d; ta += $2; tb += $3 }
         END { printf "%-18s %8.3f %8.3f %+8.3f\n", "total", ta, tb, ta - tb }'
done
