#!/usr/bin/env bash
# What the WAL's readers spend on a session's WAL, against what the session is charged for them
# (ogc_throttle.wal_send_cost, ogc_throttle.wal_decode_cost): the figures to set those costs from on a given
# server. A primary with ogc_throttle preloaded (wal_level = logical), a physical standby made with
# pg_basebackup, and a second cluster subscribed to a publication of one table. A metered role runs four
# write shapes: an update of one row on each page (full-page images), an update of every row of the published
# table, a CREATE TABLE AS into an unpublished table, and non-transactional logical messages (open to every
# role). For each: the statement's own time and charge, its WAL (pg_current_wal_lsn, kB; records from
# EXPLAIN (ANALYZE, WAL) where the shape allows it), and the CPU time of the physical and the logical
# walsender until both have confirmed it (/proc/PID/schedstat), per kB and per record; the archiver's CPU
# time and its commands' (/proc/PID/stat, in clock ticks) until it has archived every segment; and the
# charge against the statement's time and theirs. (EXPLAIN gives no WAL records for a CREATE TABLE AS: "?".)
# Knobs (environment): ROWS (200000), ROUNDS (2), FSYNC (off), ARCHIVE_COMMAND (cp %p /dev/null: put your
# own, with %p and %f, to price it).
# Not part of the tests. Everything started is stopped on exit.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/test/lib/pg.sh"

ROWS=${ROWS:-200000}
ROUNDS=${ROUNDS:-2}
FSYNC=${FSYNC:-off}
ARCHIVE_COMMAND=${ARCHIVE_COMMAND:-cp %p /dev/null}
PORT=56422 STANDBY_PORT=56423 SUB_PORT=56424
die() { echo "wal_readers: $*" >&2; exit 1; }

P=$(pg_tmpdir); S=$(pg_tmpdir); L=$(pg_tmpdir)
trap 'for d in "$S" "$L" "$P"; do pg_stop "$d" immediate; rm -rf "$d"; done' EXIT
pg_cluster_init "$P" "shared_preload_libraries = 'ogc_throttle'" "shared_buffers = '512MB'" "max_wal_size = '8GB'" \
  "checkpoint_timeout = '1h'" "autovacuum = off" "fsync = $FSYNC" "wal_level = logical" \
  "ogc_throttle.dirty_block_cost = 0" "max_parallel_workers_per_gather = 0" "archive_mode = on" \
  "archive_command = '${ARCHIVE_COMMAND//\'/\'\'}'" || die "initdb failed"
pg_start "$P" "$PORT" || { tail -n 20 "$P/server.log"; die "the primary did not start"; }
q() { pg_psql "$P" "$PORT" -d postgres -At -c "$1"; }
q "CREATE EXTENSION postgis" >/dev/null && q "CREATE EXTENSION ogc_throttle" >/dev/null &&
  q "CREATE ROLE metered LOGIN; ALTER ROLE ALL SET ogc_throttle.capacity = 1e7; ALTER ROLE ALL SET ogc_throttle.rate = 0.01;
     ALTER ROLE metered SET ogc_throttle.mode = 'reject'; ALTER ROLE metered SET ogc_throttle.charge_connection = off;
     GRANT CREATE ON SCHEMA public TO metered" >/dev/null &&
  q "CREATE TABLE t (id int PRIMARY KEY, v int, pad text) WITH (fillfactor = 50);
     INSERT INTO t SELECT g, 0, repeat('x', 200) FROM generate_series(1, $ROWS) g; GRANT SELECT, UPDATE ON t TO metered" \
  >/dev/null && q "VACUUM ANALYZE t" >/dev/null || die "setup failed"
as_pg "$PGBIN/pg_basebackup" -h "$P" -p "$PORT" -U postgres -D "$S/data" -R -X stream -c fast >/dev/null 2>&1 &&
  as_pg sed -i "s|^unix_socket_directories.*|unix_socket_directories = '$S'|" "$S/data/postgresql.conf" &&
  pg_start "$S" "$STANDBY_PORT" || die "the standby did not start"
pg_cluster_init "$L" "fsync = $FSYNC" && pg_start "$L" "$SUB_PORT" || die "the subscriber did not start"
q "CREATE PUBLICATION p FOR TABLE t" >/dev/null
pg_psql "$L" "$SUB_PORT" -d postgres -c "CREATE TABLE t (id int PRIMARY KEY, v int, pad text)" \
  -c "CREATE SUBSCRIPTION s CONNECTION 'host=$P port=$PORT user=postgres dbname=postgres' PUBLICATION p
      WITH (copy_data = false)" >/dev/null 2>&1 || die "the subscription failed"
for i in $(seq 1 40); do [ "$(q "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 2 ] && break; sleep 0.25; done
[ "$(q "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 2 ] || die "the walsenders do not stream"
sleep 1.2  # (a backend counts the walsenders again at most once a second)
ppid_=$(q "SELECT pid FROM pg_stat_replication WHERE application_name <> 's'")
lpid=$(q "SELECT pid FROM pg_stat_replication WHERE application_name = 's'")
cpu_ns() { as_pg cut -d' ' -f1 "/proc/$1/schedstat"; }
apid=$(pgrep -P "$(head -1 "$P/data/postmaster.pid")" -f 'postgres: archiver')
[ -n "$apid" ] || die "no archiver"
# the archiver's CPU time and its reaped commands', in ns (clock ticks of 10 ms)
archiver_ns() { awk '{ printf "%.0f", ($14 + $15 + $16 + $17) * 1e7 }' "/proc/$apid/stat"; }
# every segment before the current one archived
archived() {
  local i; q "SELECT pg_switch_wal()" >/dev/null
  for i in $(seq 1 600); do
    [ "$(q "SELECT coalesce(last_archived_wal >= pg_walfile_name(pg_current_wal_lsn() - 1), false) FROM pg_stat_archiver")" = t ] && return 0
    sleep 0.1
  done
  return 1
}
# both walsenders have had everything written so far confirmed
caught_up() {
  local lsn i; lsn=$(q "SELECT pg_current_wal_lsn()")
  for i in $(seq 1 600); do
    [ "$(q "SELECT bool_and(flush_lsn >= '$lsn') FROM pg_stat_replication")" = t ] && return 0
    sleep 0.1
  done
  return 1
}
per_page=$(q "SELECT ceil(reltuples / relpages)::int FROM pg_class WHERE relname = 't'")
# shape NAME SQL: one measurement
shape() {
  local name=$1 sql=$2 t0 l0 p0 c0 a0 out own charged kb records pcpu lcpu acpu
  q "CHECKPOINT" >/dev/null
  caught_up && archived || die "the readers did not catch up"
  q "SELECT throttle_reset('metered')" >/dev/null
  t0=$(q "SELECT tokens FROM throttle_peek('metered')")
  l0=$(q "SELECT pg_current_wal_insert_lsn()"); p0=$(cpu_ns "$ppid_"); c0=$(cpu_ns "$lpid"); a0=$(archiver_ns)
  out=$(as_pg psql -X -q -h "$P" -p "$PORT" -U metered -d postgres -c '\timing on' -c "$sql")
  kb=$(q "SELECT round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$l0') / 1024)")
  caught_up && archived || die "the readers did not catch up"
  pcpu=$(( $(cpu_ns "$ppid_") - p0 )); lcpu=$(( $(cpu_ns "$lpid") - c0 )); acpu=$(( $(archiver_ns) - a0 ))
  own=$(awk '/^Time: /{ t += $2 } END { print t + 0 }' <<<"$out")
  records=$(sed -n 's/.*WAL: records=\([0-9]*\).*/\1/p' <<<"$out" | head -1)
  charged=$(awk -v a="$t0" -v b="$(q "SELECT tokens FROM throttle_peek('metered')")" 'BEGIN { print a - b }')
  awk -v n="$name" -v own="$own" -v ch="$charged" -v kb="$kb" -v rec="${records:-}" -v p="$pcpu" -v l="$lcpu" -v a="$acpu" 'BEGIN {
    printf "| %s | %.0f | %.0f | %d | %s | %.0f | %.2f | %.0f | %s | %.0f | %.2f | %.2f | %.2f |\n", n, own, ch, kb,
      (rec == "") ? "?" : rec, p / 1e6, p / kb / 1e3, l / 1e6, (rec == "") ? "?" : sprintf("%.1f", l / rec / 1e3),
      a / 1e6, a / kb / 1e3, (p + l + a) / 1e6 / own, ch / (own + (p + l + a) / 1e6) }'
}
echo "# $ROWS rows in t (published), fsync = $FSYNC; costs: wal_send_cost $(q "SHOW ogc_throttle.wal_send_cost") ms a kB, wal_decode_cost $(q "SHOW ogc_throttle.wal_decode_cost") ms a record, wal_archive_cost $(q "SHOW ogc_throttle.wal_archive_cost") ms a kB ($ARCHIVE_COMMAND); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| shape | statement ms (psql) | charged ms | WAL kB | records | physical walsender CPU ms | µs a kB | logical walsender CPU ms | µs a record | archiver CPU ms | µs a kB | readers / statement | charged / (statement + readers) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
explain="EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF)"
for r in $(seq 1 "$ROUNDS"); do
  shape "one row a page ($r)" "$explain UPDATE t SET v = v + 1 WHERE id IN (SELECT generate_series(1, $ROWS, $per_page))"
  shape "every row, published ($r)" "$explain UPDATE t SET v = v + 1"
  shape "CREATE TABLE AS, unpublished ($r)" "$explain CREATE TABLE big_$r AS SELECT g, repeat('y', 500) p FROM generate_series(1, $ROWS * 3 / 2) g"
  shape "logical messages ($r)" "SELECT count(pg_logical_emit_message(false, 'x', repeat('m', 100000))) FROM generate_series(1, 1000)"
done
