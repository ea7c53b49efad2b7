#!/usr/bin/env bash
# The writes a throttled role leaves to the checkpointer. A shared buffer a statement dirties is written
# later by the checkpointer or the background writer, in time no session's meter sees: a one-row update
# through its ctid on each of 25 000 pages was charged 196 ms, and the checkpointer spent 91 ms of CPU
# writing them (fsync off). Each buffer a metered session or autovacuum leaves dirty is now charged
# ogc_throttle.dirty_block_cost (0.2 ms here, so that the charge stands far above a statement's own
# milliseconds). The ways a client would dodge it, tried: setting the cost itself, dirtying pages already
# dirty (not charged twice, rightly: they are written once), having parallel workers do it, setting hint
# bits by reading, and having autovacuum do it on its table. Controls: buffers the statement wrote out
# itself (a large scan's ring) are in its own time and not charged again; with the cost at 0 nothing is.
set -uo pipefail
. "$(dirname "$0")/common.sh"

COST=0.2
cluster_up 55511 "shared_preload_libraries = 'ogc_throttle'" "shared_buffers = '64MB'" "max_wal_size = '4GB'" \
  "checkpoint_timeout = '1h'" "autovacuum_naptime = 1" "ogc_throttle.dirty_block_cost = $COST" \
  "max_parallel_workers_per_gather = 0"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle" >/dev/null &&
  metered_roles writer reader owner &&
  q "GRANT CREATE ON SCHEMA public TO owner" >/dev/null || { not_ok "setup"; tap_exit; }
# (64 MB of shared buffers: 8 192; a scan of a table over a quarter of them reads it through a 32-buffer ring)
q "CREATE TABLE t (id int PRIMARY KEY, v int, pad text) WITH (fillfactor = 50, autovacuum_enabled = off);
   INSERT INTO t SELECT g, 0, repeat('x', 200) FROM generate_series(1, 40000) g;
   GRANT SELECT, UPDATE ON t TO writer, reader;
   CREATE TABLE small (id int, pad text) WITH (autovacuum_enabled = off);
   CREATE TABLE big (id int, pad text) WITH (autovacuum_enabled = off);
   GRANT SELECT ON small, big TO reader" >/dev/null || { not_ok "tables"; tap_exit; }
q "VACUUM ANALYZE t" >/dev/null
pages=$(q "SELECT relpages FROM pg_class WHERE relname = 't'")
echo "# t: $pages pages, one row of each updated through its ctid"

as_role() { local r=$1; shift; as_pg psql -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U "$r" -d postgres "$@"; }
# charged ROLE SQL...: what the role's session running SQL was charged (its bucket reset first); the
# statements' own milliseconds (psql's \timing) in $DIR/ms
charged() {
  local r=$1 t0; shift
  q "SELECT throttle_reset('$r')" >/dev/null
  t0=$(q "SELECT tokens FROM throttle_peek('$r')")
  as_role "$r" -c '\timing on' "$@" >"$DIR/out" 2>"$DIR/err" || { sed 's/^/# /' "$DIR/err"; echo -1; return; }
  ms_of <"$DIR/out" >"$DIR/ms"
  awk -v a="$t0" -v b="$(settled_tokens "$r")" 'BEGIN { printf "%.1f", a - b }'
}
per_page="UPDATE t SET v = v + 1 WHERE ctid = ANY(ARRAY(SELECT format('(%s,1)', g)::tid FROM generate_series(0, $pages - 1) g))"
want=$(awk -v n="$pages" -v c="$COST" 'BEGIN { printf "%.0f", n * c }')

# 1. A statement's dirtied pages.
q "CHECKPOINT" >/dev/null
c=$(charged writer -c "$per_page")
own=$(cat "$DIR/ms")
echo "# one row on each of $pages pages: charged $c ms, its statement took $own ms; $pages × $COST ms = $want ms"
check "a statement that dirties $pages pages is charged their writeback ($c >= 0.9 × $want + its own time $own × 0.5)" \
  fcmp "$c" ">=" "$(awk -v w="$want" -v o="$own" 'BEGIN { print 0.9 * w + 0.5 * o }')"
check "... and not more than once each ($c <= 1.1 × $want + its own time $own + 50)" \
  fcmp "$c" "<=" "$(awk -v w="$want" -v o="$own" 'BEGIN { print 1.1 * w + o + 50 }')"
c2=$(charged writer -c "$per_page")
own2=$(cat "$DIR/ms")
check "the same pages updated again before a checkpoint writes them are not charged again ($c2 < its own $own2 + 0.1 × $want)" \
  fcmp "$c2" "<" "$(awk -v w="$want" -v o="$own2" 'BEGIN { print o + 0.1 * w }')"

# 2. Settings the client cannot touch.
as_role writer -c "SET ogc_throttle.dirty_block_cost = 0" >/dev/null 2>"$DIR/err"
check "a role cannot set the cost per page itself" grep -q 'cannot be changed now' "$DIR/err"
as_role writer -c "SET ogc_throttle.dirty_block_cost = -1" >/dev/null 2>"$DIR/err"
check "... nor a negative one" grep -q 'ERROR' "$DIR/err"

# 3. Hint bits: a read is what dirties a freshly written table's pages (after a checkpoint wrote them).
q "INSERT INTO small SELECT g, repeat('y', 400) FROM generate_series(1, 20000) g" >/dev/null
q "CHECKPOINT" >/dev/null
spages=$(q "SELECT pg_relation_size('small') / 8192")
c=$(charged reader -c "SELECT count(*) FROM small")
swant=$(awk -v n="$spages" -v c="$COST" 'BEGIN { printf "%.0f", n * c }')
echo "# first read of $spages freshly written pages: charged $c ms, took $(cat "$DIR/ms") ms"
check "a read that sets the hint bits of $spages pages is charged their writeback ($c >= 0.9 × $swant)" \
  fcmp "$c" ">=" "$(awk -v w="$swant" 'BEGIN { print 0.9 * w }')"

# 4. ... and by parallel workers (their buffer counts are added to the leader's at their end).
q "TRUNCATE small; INSERT INTO small SELECT g, repeat('y', 400) FROM generate_series(1, 20000) g" >/dev/null
q "CHECKPOINT" >/dev/null
parallel=(-c "SET max_parallel_workers_per_gather = 2" -c "SET parallel_setup_cost = 0" -c "SET parallel_tuple_cost = 0"
  -c "SET min_parallel_table_scan_size = 0" -c "SET parallel_leader_participation = off")
plan=$(as_role reader "${parallel[@]}" -c "EXPLAIN (COSTS OFF) SELECT count(*) FROM small" 2>&1)
check "... (the plan is parallel)" grep -q "Workers Planned" <<<"$plan"
c=$(charged reader "${parallel[@]}" -c "SELECT count(*) FROM small")
check "a read whose parallel workers set the hint bits is charged their writeback ($c >= 0.9 × $swant)" \
  fcmp "$c" ">=" "$(awk -v w="$swant" 'BEGIN { print 0.9 * w }')"

# Control: pages a scan writes out itself. A table over a quarter of the buffers, none of it cached, is read
# through a ring of 32 buffers, and each dirty one is written by the scan when the ring comes round again.
q "INSERT INTO big SELECT g, repeat('y', 400) FROM generate_series(1, 60000) g" >/dev/null
q "CHECKPOINT" >/dev/null
pg_stop "$DIR" && pg_start "$DIR" "$PORT" || { not_ok "restart"; tap_exit; }
c=$(charged reader -c "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) SELECT count(*) FROM big")
bown=$(cat "$DIR/ms")
buffers=$(grep -m1 'Buffers: shared' "$DIR/out")
dirtied=$(sed -n 's/.*dirtied=\([0-9]*\).*/\1/p' <<<"$buffers"); dirtied=${dirtied:-0}
written=$(sed -n 's/.*written=\([0-9]*\).*/\1/p' <<<"$buffers"); written=${written:-0}
echo "# cold read of big's fresh pages: charged $c ms, took $bown ms;$buffers"
check "... (the scan wrote most of what it dirtied: $written of $dirtied)" \
  fcmp "$written" ">=" "$(awk -v d="$dirtied" 'BEGIN { print 0.8 * d }')"
bcap=$(awk -v o="$bown" -v d="$dirtied" -v w="$written" -v c="$COST" 'BEGIN { print o + 1.1 * (d - w) * c + 20 }')
check "a scan is charged its time and only what it left dirty, not what it wrote itself ($c <= $bcap)" \
  fcmp "$c" "<=" "$bcap"

# 5. Autovacuum's pruning of the owner's cached table: the owner pays its pages' writeback.
as_role owner -c "CREATE TABLE o (id int, v int, pad text) WITH (fillfactor = 50, autovacuum_enabled = off);
  INSERT INTO o SELECT g, 0, repeat('z', 200) FROM generate_series(1, 24000) g" >/dev/null 2>"$DIR/err" ||
  { not_ok "owner's table"; sed 's/^/# /' "$DIR/err"; }
opages=$(q "SELECT pg_relation_size('o') / 8192")
q "UPDATE o SET v = 1 WHERE id % 16 = 1" >/dev/null
q "SELECT count(*) FROM o" >/dev/null
q "CHECKPOINT" >/dev/null
q "SELECT throttle_reset('owner')" >/dev/null
t0=$(q "SELECT tokens FROM throttle_peek('owner')")
q "ALTER TABLE o SET (autovacuum_enabled = on, autovacuum_vacuum_threshold = 1, autovacuum_vacuum_scale_factor = 0,
   autovacuum_vacuum_cost_delay = 0,
   autovacuum_analyze_threshold = 1000000000)" >/dev/null
for i in $(seq 1 60); do [ "$(q "SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'o'")" -ge 1 ] && break; sleep 0.5; done
q "ALTER TABLE o SET (autovacuum_enabled = off)" >/dev/null
sleep 1
c=$(awk -v a="$t0" -v b="$(q "SELECT tokens FROM throttle_peek('owner')")" 'BEGIN { printf "%.1f", a - b }')
owant=$(awk -v n="$opages" -v c="$COST" 'BEGIN { printf "%.0f", n * c }')
echo "# autovacuum of the owner's $opages cached pages, each with a dead row: owner charged $c ms"
check "autovacuum's pruning of $opages cached pages is charged their writeback to the owner ($c >= 0.8 × $owant)" \
  fcmp "$c" ">=" "$(awk -v w="$owant" 'BEGIN { print 0.8 * w }')"

# 6. With the cost at 0, nothing but the statement's own time.
q "ALTER SYSTEM SET ogc_throttle.dirty_block_cost = 0" >/dev/null && q "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
q "CHECKPOINT" >/dev/null
c=$(charged writer -c "$per_page")
check "with ogc_throttle.dirty_block_cost = 0 the same update is charged its own time ($c <= $(cat "$DIR/ms") + 20)" \
  fcmp "$c" "<=" "$(awk -v o="$(cat "$DIR/ms")" 'BEGIN { print o + 20 }')"
tap_exit
