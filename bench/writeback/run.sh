#!/usr/bin/env bash
# What the checkpointer spends writing the pages a session dirtied, against what that session is charged for
# them (ogc_throttle.dirty_block_cost): the figure to set that cost from on a given server. One cluster,
# ogc_throttle preloaded; a metered role dirties PAGES pages in each of three shapes (a one-row update
# through its ctid on each page, a read that sets the hint bits of freshly written pages, the same read by
# two parallel workers); after each, a CHECKPOINT writes them. For each: the statement's own time, what
# the role was charged, the buffers the checkpoint wrote, and the checkpointer's CPU time for it (from
# /proc/PID/schedstat, in nanoseconds), per page and against the charge for writeback. (The charge of the
# read by two workers holds the workers' own time too: the statement column is its wall time.)
# Knobs (environment): PAGES (20000), ROUNDS (3), FSYNC (off; on: the checkpoint's fsyncs count, and the
# disk's speed with them), COST (the default, 0.005 ms).
# Not part of the tests. Everything started is stopped on exit.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/test/lib/pg.sh"

PAGES=${PAGES:-20000}
ROUNDS=${ROUNDS:-3}
FSYNC=${FSYNC:-off}
COST=${COST:-0.005}
PORT=${PORT:-56421}
die() { echo "writeback: $*" >&2; exit 1; }

work=$(pg_tmpdir)
trap 'pg_stop "$work"; rm -rf "$work"' EXIT
# shared buffers hold the table twice over: what is dirtied stays for the checkpoint
sb=$(( PAGES * 8 * 3 / 1024 + 64 ))
pg_cluster_init "$work" "shared_preload_libraries = 'ogc_throttle'" "shared_buffers = '${sb}MB'" \
  "max_wal_size = '16GB'" "checkpoint_timeout = '1h'" "autovacuum = off" "fsync = $FSYNC" \
  "ogc_throttle.dirty_block_cost = $COST" "max_parallel_workers_per_gather = 0" || die "initdb failed"
pg_start "$work" "$PORT" || { tail -n 20 "$work/server.log"; die "the server did not start"; }
q() { pg_psql "$work" "$PORT" -d postgres -At -c "$1"; }
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle; CREATE ROLE metered LOGIN;
   ALTER ROLE ALL SET ogc_throttle.capacity = 1e6; ALTER ROLE ALL SET ogc_throttle.rate = 0.01;
   ALTER ROLE metered SET ogc_throttle.mode = 'reject';
   ALTER ROLE metered SET ogc_throttle.charge_connection = off" \
  >/dev/null || die "setup failed"
# 16 rows a page (fillfactor 50, 200-byte rows)
q "CREATE TABLE t (id int PRIMARY KEY, v int, pad text) WITH (fillfactor = 50);
   INSERT INTO t SELECT g, 0, repeat('x', 200) FROM generate_series(1, $PAGES * 16) g;
   CREATE TABLE fresh (id int, pad text); GRANT SELECT, UPDATE ON t TO metered; GRANT SELECT ON fresh TO metered" \
  >/dev/null || die "tables failed"
q "VACUUM ANALYZE t" >/dev/null
pages=$(q "SELECT relpages FROM pg_class WHERE relname = 't'")
cpu_ns() {
  local pid
  pid=$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
  as_pg cut -d' ' -f1 "/proc/$pid/schedstat"
}
written() { q "SELECT buffers_checkpoint FROM pg_stat_bgwriter"; }
# shape NAME SQL...: one measurement
shape() {
  local name=$1 t0 c0 w0 own charged cpu wrote; shift
  q "SELECT throttle_reset('metered')" >/dev/null
  t0=$(q "SELECT tokens FROM throttle_peek('metered')")
  own=$(as_pg psql -X -q -h "$work" -p "$PORT" -U metered -d postgres -c '\timing on' "$@" |
    awk '/^Time: /{ t += $2 } END { print t + 0 }')
  sleep 0.2
  charged=$(awk -v a="$t0" -v b="$(q "SELECT tokens FROM throttle_peek('metered')")" 'BEGIN { print a - b }')
  c0=$(cpu_ns); w0=$(written)
  q "CHECKPOINT" >/dev/null
  cpu=$(( $(cpu_ns) - c0 )); wrote=$(( $(written) - w0 ))
  awk -v n="$name" -v own="$own" -v ch="$charged" -v cpu="$cpu" -v w="$wrote" -v c="$COST" 'BEGIN {
    ms = cpu / 1e6
    printf "| %s | %.1f | %.1f | %d | %.1f | %.2f | %.2f |\n", n, own, ch, w, ms, (w > 0) ? cpu / w / 1e3 : 0,
      (ms > 0) ? w * c / ms : 0 }'
}
echo "# $pages pages, fsync = $FSYNC, ogc_throttle.dirty_block_cost = $COST ms; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| shape | statement ms (psql) | charged ms | pages the checkpoint wrote | checkpointer CPU ms | its µs a page | pages × cost / checkpointer CPU |"
echo "|---|---|---|---|---|---|---|"
parallel=(-c "SET max_parallel_workers_per_gather = 2" -c "SET parallel_setup_cost = 0" -c "SET parallel_tuple_cost = 0"
  -c "SET min_parallel_table_scan_size = 0" -c "SET parallel_leader_participation = off")
for r in $(seq 1 "$ROUNDS"); do
  q "CHECKPOINT" >/dev/null
  shape "ctid update ($r)" -c "UPDATE t SET v = v + 1 WHERE ctid = ANY(ARRAY(SELECT format('(%s,1)', g)::tid FROM generate_series(0, $pages - 1) g))"
  q "TRUNCATE fresh; INSERT INTO fresh SELECT g, repeat('y', 400) FROM generate_series(1, $PAGES * 18) g" >/dev/null
  q "CHECKPOINT" >/dev/null
  shape "hint bits ($r)" -c "SELECT count(*) FROM fresh"
  q "TRUNCATE fresh; INSERT INTO fresh SELECT g, repeat('y', 400) FROM generate_series(1, $PAGES * 18) g" >/dev/null
  q "CHECKPOINT" >/dev/null
  shape "hint bits, 2 workers ($r)" "${parallel[@]}" -c "SELECT count(*) FROM fresh"
  # (the ctid update's next round finds its rows' new versions at (page, 2), … : a page's first line pointer is
  # dead, and the update's scan prunes it; the table is remade for each round)
  q "TRUNCATE t; INSERT INTO t SELECT g, 0, repeat('x', 200) FROM generate_series(1, $PAGES * 16) g" >/dev/null
  q "VACUUM t" >/dev/null
done
