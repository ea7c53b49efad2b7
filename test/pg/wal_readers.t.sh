#!/usr/bin/env bash
# The WAL a throttled role writes, read again by others: each walsender streaming it to a standby or a
# subscriber, and a logical walsender decoding every record of its database. No session's meter sees their
# time: an UPDATE of every row of a published table took 0.6 s in the role's backend and 2.4 s in the logical
# walsender. Each kB a metered session writes is now charged ogc_throttle.wal_send_cost per walsender
# streaming and ogc_throttle.wal_archive_cost when archiving is on (here, a cp to /dev/null), each record
# ogc_throttle.wal_decode_cost per logical walsender of its database. A real physical standby (pg_basebackup)
# and a real logical subscriber (a second cluster) are started here. Tried as a client would: setting the
# costs itself; writing WAL cheaply (pg_logical_emit_message, open to every role); ending the session within
# the statement (its role's own pg_terminate_backend); writing in another database than the logical
# walsender's (its records are skipped there, and not charged the decoding). Controls: with no walsender,
# nothing is charged beyond the statement's own time.
set -uo pipefail
. "$(dirname "$0")/common.sh"

STANDBY_PORT=55513
SUB_PORT=55514
cluster_up 55512 "shared_preload_libraries = 'ogc_throttle'" "shared_buffers = '128MB'" "max_wal_size = '4GB'" \
  "checkpoint_timeout = '1h'" "autovacuum_naptime = 1" "wal_level = logical" "ogc_throttle.dirty_block_cost = 0" \
  "archive_mode = on" "archive_command = 'cp %p /dev/null'" \
  "max_parallel_workers_per_gather = 0"
S=""; L=""
stop_others() { for d in "$S" "$L"; do [ -n "$d" ] && { pg_stop "$d" immediate; rm -rf "$d"; }; done; cleanup; }
trap stop_others EXIT
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle" >/dev/null && q "CREATE DATABASE other" >/dev/null &&
  metered_roles writer owner &&
  q "GRANT CREATE ON SCHEMA public TO owner" >/dev/null &&
  q "CREATE TABLE t (id int PRIMARY KEY, v int, pad text) WITH (fillfactor = 50, autovacuum_enabled = off);
     INSERT INTO t SELECT g, 0, repeat('x', 200) FROM generate_series(1, 60000) g;
     GRANT SELECT, UPDATE ON t TO writer" >/dev/null && q "VACUUM ANALYZE t" >/dev/null &&
  pg_psql "$DIR" "$PORT" -d other -c "CREATE TABLE u (id int PRIMARY KEY, v int, pad text) WITH (fillfactor = 50, autovacuum_enabled = off);
     INSERT INTO u SELECT g, 0, repeat('x', 200) FROM generate_series(1, 60000) g; GRANT SELECT, UPDATE ON u TO writer" \
    -c "VACUUM ANALYZE u" >/dev/null || { not_ok "setup"; tap_exit; }

as_role() { local r=$1 db=$2; shift 2; as_pg psql -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U "$r" -d "$db" "$@"; }
# charged DB SQL...: what writer's session running SQL in DB was charged (its bucket reset first); the
# statements' own milliseconds (psql's \timing) in $DIR/ms, the WAL they wrote (kB, records) in $DIR/wal
charged() {
  local db=$1 t0 l0; shift
  q "SELECT throttle_reset('writer')" >/dev/null
  t0=$(q "SELECT tokens FROM throttle_peek('writer')")
  as_role writer "$db" -c '\timing on' "$@" >"$DIR/out" 2>"$DIR/err" ||
    { sed 's/^/# /' "$DIR/err"; echo -1; return; }
  ms_of <"$DIR/out" >"$DIR/ms"
  awk -v a="$t0" -v b="$(settled_tokens writer)" 'BEGIN { printf "%.1f", a - b }'
}
# set_costs SEND DECODE ARCHIVE: the server's costs, reloaded
set_costs() {
  q "ALTER SYSTEM SET ogc_throttle.wal_send_cost = $1" >/dev/null &&
    q "ALTER SYSTEM SET ogc_throttle.wal_decode_cost = $2" >/dev/null &&
    q "ALTER SYSTEM SET ogc_throttle.wal_archive_cost = $3" >/dev/null &&
    q "SELECT pg_reload_conf()" >/dev/null
  sleep 0.5
}
# The WAL one UPDATE writes, from EXPLAIN (ANALYZE, WAL): "kB records"
explained_wal() {
  sed -n 's/.*WAL: records=\([0-9]*\).* bytes=\([0-9]*\).*/\2 \1/p' "$DIR/out" | head -1 |
    awk '{ printf "%.0f %d", $1 / 1024, $2 }'
}
update_t="EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF) UPDATE t SET v = v + 1"
update_u="EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF) UPDATE u SET v = v + 1"
# at_most C CAP: C is a charge (not the -1 of a failed statement) of at most CAP
at_most() { fcmp "$1" ">=" 0 && fcmp "$1" "<=" "$2"; }
# charged_for UNIT COST LABEL CLAIM: the update, run once, is charged its own time and COST ms a UNIT (kB,
# records) of its WAL, once
charged_for() {
  local c own kb records n want
  c=$(charged postgres -c "$update_t")
  own=$(cat "$DIR/ms"); read -r kb records < <(explained_wal)
  n=$kb; [ "$1" = records ] && n=$records
  want=$(awk -v n="$n" -v c="$2" 'BEGIN { printf "%.0f", n * c }')
  echo "# $3: the update wrote $kb kB in $records records, took $own ms, charged $c ms; $n $1 × $2 ms = $want ms"
  check "$4 ($c >= $own × 0.8 + 0.95 × $want)" \
    fcmp "$c" ">=" "$(awk -v w="$want" -v o="$own" 'BEGIN { print 0.8 * o + 0.95 * w }')"
  check "... once ($c <= $own × 1.2 + 1.1 × $want + 20)" \
    at_most "$c" "$(awk -v w="$want" -v o="$own" 'BEGIN { print 1.2 * o + 1.1 * w + 20 }')"
}
# (the readers are counted again at most once a second)
recount() { sleep 1.2; }

# 1. No walsender (archiving's cost 0): with the costs far above a walsender's (0.01 ms a kB, 0.05 ms a record),
#    nothing is charged beyond the statement's own time.
set_costs 0.01 0.05 0
c=$(charged postgres -c "$update_t")
own=$(cat "$DIR/ms"); read -r kb records < <(explained_wal)
echo "# no standby: the update wrote $kb kB in $records records, took $own ms, charged $c ms"
check "with no walsender (and archiving free), the WAL is not charged ($c <= its own time $own × 1.2 + 20)" \
  at_most "$c" "$(awk -v o="$own" 'BEGIN { print 1.2 * o + 20 }')"

# 2. A physical standby streams every byte.
S=$(pg_tmpdir)
as_pg "$PGBIN/pg_basebackup" -h "$DIR" -p "$PORT" -U postgres -D "$S/data" -R -X stream -c fast >"$S/backup.log" 2>&1 &&
  as_pg sed -i "s|^unix_socket_directories.*|unix_socket_directories = '$S'|" "$S/data/postgresql.conf" &&
  pg_start "$S" "$STANDBY_PORT" || { not_ok "standby"; cat "$S/backup.log" "$S/server.log" 2>/dev/null | tail -5; tap_exit; }
for i in $(seq 1 40); do [ "$(q "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 1 ] && break; sleep 0.25; done
check "... (the standby streams)" test "$(q "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 1
recount
charged_for kB 0.01 "one standby" "an update streamed to a standby is charged its WAL's sending"

# 3. The cheapest WAL there is: a non-transactional logical message, which any role may emit.
c=$(charged postgres -c "SELECT count(pg_logical_emit_message(false, 'x', repeat('m', 100000))) FROM generate_series(1, 300)")
own=$(cat "$DIR/ms")
want=$(awk 'BEGIN { printf "%.0f", 300 * 100000 / 1024 * 0.01 }')
echo "# 300 messages of 100 kB: took $own ms, charged $c ms; their WAL × 0.01 ms a kB = $want ms"
check "WAL written as logical messages is charged its sending too ($c >= 0.95 × $want)" \
  fcmp "$c" ">=" "$(awk -v w="$want" 'BEGIN { print 0.95 * w }')"

# 3a. A session that ends within its statement (its own role may terminate it) leaves its WAL all the same.
#     (0.1 ms a kB: the WAL's charge stands far above the statement's time, its sleep until the end included)
set_costs 0.1 0.05 0
q "SELECT throttle_reset('writer')" >/dev/null
t0=$(q "SELECT tokens FROM throttle_peek('writer')")
l0=$(q "SELECT pg_current_wal_insert_lsn()")
as_role writer postgres -c "WITH u AS (UPDATE t SET v = v + 1 RETURNING 1) SELECT count(*), pg_sleep(60) FROM u" \
  >/dev/null 2>&1 &
BG_PIDS+=($!)
check "... (the writer's role terminated its own session within the statement)" terminate_in_sleep writer
kb=$(q "SELECT round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$l0') / 1024)")
c=$(awk -v a="$t0" -v b="$(settled_tokens writer)" 'BEGIN { printf "%.1f", a - b }')
want=$(awk -v k="$kb" 'BEGIN { printf "%.0f", k * 0.1 }')
echo "# terminated after writing $kb kB of WAL: charged $c ms; $kb kB × 0.1 ms = $want ms"
check "a session terminated within its statement is charged its WAL's sending ($c >= 0.95 × $want)" \
  fcmp "$c" ">=" "$(awk -v w="$want" 'BEGIN { print 0.95 * w }')"
set_costs 0.01 0.05 0

# 4. Archiving (archive_command copies every segment): at 0.01 ms a kB, the same update pays that much more.
set_costs 0 0 0.01
charged_for kB 0.01 "archiving at 0.01 ms a kB" "with archiving on, an update is charged its WAL's archiving"
set_costs 0.01 0.05 0

# Settings the client cannot touch.
as_role writer postgres -c "SET ogc_throttle.wal_send_cost = 0" >/dev/null 2>"$DIR/err"
check "a role cannot set the cost per kB itself" grep -q 'cannot be changed now' "$DIR/err"
as_role writer postgres -c "SET ogc_throttle.wal_decode_cost = 0" >/dev/null 2>"$DIR/err"
check "... nor the cost per record" grep -q 'cannot be changed now' "$DIR/err"
as_role writer postgres -c "SET ogc_throttle.wal_archive_cost = 0" >/dev/null 2>"$DIR/err"
check "... nor archiving's" grep -q 'cannot be changed now' "$DIR/err"

# 5. A logical subscriber of t: at the default costs, the role pays for what its walsender measurably spent.
set_costs DEFAULT DEFAULT DEFAULT
L=$(pg_tmpdir)
pg_cluster_init "$L" && pg_start "$L" "$SUB_PORT" || { not_ok "subscriber"; tap_exit; }
q "CREATE PUBLICATION p FOR TABLE t" >/dev/null
pg_psql "$L" "$SUB_PORT" -d postgres -c "CREATE TABLE t (id int PRIMARY KEY, v int, pad text)" \
  -c "CREATE SUBSCRIPTION s CONNECTION 'host=$DIR port=$PORT user=postgres dbname=postgres' PUBLICATION p
      WITH (copy_data = false)" >/dev/null 2>&1 || { not_ok "subscription"; tap_exit; }
for i in $(seq 1 40); do [ "$(q "SELECT count(*) FROM pg_stat_replication WHERE application_name = 's' AND state = 'streaming'")" = 1 ] && break; sleep 0.25; done
lpid=$(q "SELECT pid FROM pg_stat_replication WHERE application_name = 's' AND state = 'streaming'")
check "... (the subscription streams)" test -n "$lpid"
recount
cpu_ms() { as_pg cat "/proc/$1/schedstat" 2>/dev/null | awk '{ printf "%.1f", $1 / 1e6 }'; }
# caught_up: the subscriber has confirmed everything written so far
caught_up() {
  local lsn i; lsn=$(q "SELECT pg_current_wal_lsn()")
  for i in $(seq 1 240); do
    [ "$(q "SELECT coalesce(flush_lsn >= '$lsn', false) FROM pg_stat_replication WHERE application_name = 's'")" = t ] && return 0
    sleep 0.25
  done
  return 1
}
caught_up
w0=$(cpu_ms "$lpid")
c=$(charged postgres -c "$update_t")
own=$(cat "$DIR/ms"); read -r kb records < <(explained_wal)
caught_up || not_ok "the subscriber catches up"
w1=$(cpu_ms "$lpid")
spent=$(awk -v a="$w0" -v b="$w1" 'BEGIN { printf "%.0f", b - a }')
echo "# logical subscriber: the update wrote $kb kB in $records records, took $own ms; the logical walsender spent $spent ms; charged $c ms"
check "... (its walsender's decoding is a large part of the update's cost: $spent ms >= its own $own ms × 0.5)" \
  fcmp "$spent" ">=" "$(awk -v o="$own" 'BEGIN { print 0.5 * o }')"
check "an update of a published table is charged at least 0.8 × (its own time + its walsender's) ($c >= 0.8 × ($own + $spent))" \
  fcmp "$c" ">=" "$(awk -v s="$spent" -v o="$own" 'BEGIN { print 0.8 * (o + s) }')"

# 6. Another database's logical walsender reads the bytes but skips the records: not charged their decoding.
set_costs 0 0.05 0
recount
charged_for records 0.05 "decoding at 0.05 ms a record, in the subscriber's database" \
  "at 0.05 ms a record, an update in the walsender's database is charged its decoding"
c=$(charged other -c "$update_u")
own=$(cat "$DIR/ms")
echo "# ... in another database: took $own ms, charged $c ms"
check "... and one in another database is not ($c <= its own time $own × 1.2 + 20)" \
  at_most "$c" "$(awk -v o="$own" 'BEGIN { print 1.2 * o + 20 }')"

# 7. Autovacuum's WAL on the owner's table (pruning and freezing every page), streamed to the standby and the
#    subscriber's walsender: the owner pays its sending.
set_costs 0.01 0 0
as_role owner postgres -c "CREATE TABLE o (id int, v int, pad text) WITH (fillfactor = 50, autovacuum_enabled = off);
  INSERT INTO o SELECT g, 0, repeat('z', 200) FROM generate_series(1, 40000) g;
  UPDATE o SET v = 1 WHERE id % 16 = 1" >/dev/null 2>"$DIR/err" || { not_ok "owner's table"; sed 's/^/# /' "$DIR/err"; }
q "CHECKPOINT" >/dev/null
q "SELECT throttle_reset('owner')" >/dev/null
t0=$(q "SELECT tokens FROM throttle_peek('owner')")
l0=$(q "SELECT pg_current_wal_lsn()")
q "ALTER TABLE o SET (autovacuum_enabled = on, autovacuum_vacuum_threshold = 1, autovacuum_vacuum_scale_factor = 0,
   autovacuum_vacuum_cost_delay = 0, autovacuum_freeze_min_age = 0, autovacuum_analyze_threshold = 1000000000)" >/dev/null
for i in $(seq 1 80); do [ "$(q "SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'o'")" -ge 1 ] && break; sleep 0.5; done
q "ALTER TABLE o SET (autovacuum_enabled = off)" >/dev/null
sleep 1
c=$(awk -v a="$t0" -v b="$(q "SELECT tokens FROM throttle_peek('owner')")" 'BEGIN { printf "%.1f", a - b }')
kb=$(q "SELECT round(pg_wal_lsn_diff(pg_current_wal_lsn(), '$l0') / 1024)")
streams=$(q "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
want=$(awk -v k="$kb" -v n="$streams" 'BEGIN { printf "%.0f", k * n * 0.01 }')
echo "# autovacuum of the owner's table ($(q "SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'o'") runs): $kb kB of WAL in all since, $streams walsenders; owner charged $c ms ($want ms for all of it)"
check "autovacuum's WAL is charged its sending to the table's owner ($c >= 0.8 × $want)" \
  fcmp "$c" ">=" "$(awk -v w="$want" 'BEGIN { print 0.8 * w }')"
tap_exit
