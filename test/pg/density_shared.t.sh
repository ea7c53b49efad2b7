#!/usr/bin/env bash
# Density grids in shared memory (ogc_throttle.density_shared_memory): backends
# share one copy, a rebuild replaces it for a backend already running, a full
# store evicts the least recently used grid, a grid bigger than the store and a
# store of 0 still price as before, and eight clients pricing while a ninth
# rebuilds see no error and leave no grid pinned.
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55490 "shared_preload_libraries = 'ogc_throttle'" "ogc_throttle.density_shared_memory = '128kB'" \
  "max_connections = 30" "max_parallel_workers_per_gather = 0"
q "CREATE EXTENSION ogc_throttle CASCADE" >/dev/null 2>&1 || { not_ok "CREATE EXTENSION"; tap_exit; }

# Six point columns, each of 20 000 points in its own few cities: six grids of similar size.
pg_psql "$DIR" "$PORT" -d postgres -q >/dev/null <<'SQL'
SELECT setseed(0.25);
CREATE TABLE pts AS SELECT i AS id FROM generate_series(1, 20000) i;
DO $$ BEGIN
  FOR k IN 1..6 LOOP
    EXECUTE format('ALTER TABLE pts ADD COLUMN g%s geometry(Point, 4326)', k);
    EXECUTE format($u$UPDATE pts SET g%s = ST_SetSRID(ST_MakePoint(
        (id %% 7) * 3 + %s + (random() - 0.5) * 0.5 * (1 + id %% 3),
        40 + (id %% 5) * 2 + (random() - 0.5) * 0.5 * (1 + id %% 3)), 4326)$u$, k, k);
    EXECUTE format('CREATE INDEX ON pts USING gist (g%s)', k);
  END LOOP;
END $$;
ANALYZE pts;
CREATE FUNCTION rows_in(col text) RETURNS float8 LANGUAGE sql AS $$
  SELECT coalesce((SELECT rows FROM throttle_features(format(
    'SELECT id FROM pts WHERE %I && ST_MakeEnvelope(%s, 41.9, %s, 42.1, 4326)', col,
    substr(col, 2)::int + 2.9, substr(col, 2)::int + 3.1)) WHERE class = 'scan'), 0) $$;
-- 80 000 points spread evenly: a grid bigger than a 128 kB store.
CREATE TABLE big AS SELECT i AS id, ST_SetSRID(ST_MakePoint(random() * 20, random() * 20), 4326)::geometry(Point, 4326) AS g
  FROM generate_series(1, 80000) i;
CREATE INDEX ON big USING gist (g);
ANALYZE big;
CREATE FUNCTION big_rows() RETURNS float8 LANGUAGE sql AS $$
  SELECT rows FROM throttle_features('SELECT id FROM big WHERE g && ST_MakeEnvelope(5, 5, 5.5, 5.5, 4326)') WHERE class = 'scan' $$;
SELECT throttle_density_build('pts', 'g1');
SQL

stats() { q "SELECT $1 FROM throttle_density_shared_stats()"; }
alloc=$(q "SELECT allocated_size FROM pg_shmem_allocations WHERE name = 'ogc_throttle density grids'")
check "the store is one named allocation of at least 128 kB (got ${alloc:-none})" fcmp "${alloc:-0}" ">=" 131072
grid_bytes=$(q "SELECT octet_length(grid) FROM throttle_density WHERE relid = 'pts'::regclass AND attnum = 2")
echo "# one grid: $grid_bytes bytes; store: $(stats size_bytes) bytes"

# --- two backends, one copy ----------------------------------------------------
r1=$(q "SELECT rows_in('g1')")
after_one=$(stats "loads || ' ' || shares || ' ' || grids || ' ' || used_bytes")
r2=$(q "SELECT rows_in('g1')")
after_two=$(stats "loads || ' ' || shares || ' ' || grids || ' ' || used_bytes")
echo "# g1: $r1 rows; after one backend (loads shares grids bytes): $after_one; after two: $after_two"
check "the grid prices (rows $r1 > 10)" fcmp "$r1" ">" 10
check_eq "a second backend prices the same" "$r1" "$r2"
check_eq "the first backend loads the grid into the store" "1 0 1 $grid_bytes" "$after_one"
check_eq "the second one shares it: no second load, one copy" "1 1 1 $grid_bytes" "$after_two"
check_eq "the view shows the one copy, read by no one now" "postgres|pts|2|$grid_bytes|0|f" \
  "$(q "SELECT d.datname, s.relid::regclass, s.attnum, s.bytes, s.readers, s.replaced
          FROM throttle_density_shared s JOIN pg_database d ON d.oid = s.database")"

# --- a rebuild, seen by a backend that is already running ----------------------
# A session kept open on a fifo; ask SQL sets ANSWER to the value of one statement (not in a
# subshell: it counts the lines read).
fifo="$DIR/session.in"; out="$DIR/session.out"
mkfifo "$fifo"; chown postgres: "$fifo"
as_pg "$PGBIN/psql" -X -At -h "$DIR" -p "$PORT" -U postgres -d postgres <"$fifo" >"$out" 2>&1 &
BG_PIDS+=($!)
exec 3>"$fifo"
asked=0
ask() {
  asked=$((asked + 1)); echo "$1" >&3
  for _ in $(seq 100); do [ "$(wc -l <"$out")" -ge "$asked" ] && break; sleep 0.1; done
  ANSWER=$(sed -n "${asked}p" "$out")
}
ask "SELECT rows_in('g1');"; before=$ANSWER
q "UPDATE pts SET g1 = ST_SetSRID(ST_MakePoint(4, 42), 4326) WHERE id <= 5000; SELECT throttle_density_build('pts', 'g1')" >/dev/null
ask "SELECT rows_in('g1');"; after=$ANSWER
echo "# the running session: $before rows before the rebuild, $after after"
check "the running backend prices from the rebuilt grid ($before -> $after)" fcmp "$after" ">" "$before + 4000"
check_eq "the rebuilt grid replaced the old copy (replacements, live grids)" "1 1" \
  "$(q "SELECT (SELECT replacements FROM throttle_density_shared_stats()) || ' ' ||
              (SELECT count(*) FROM throttle_density_shared WHERE NOT replaced)")"
check_eq "a new backend prices like the running one" "$after" "$(q "SELECT rows_in('g1')")"
r1=$after

# --- eviction -------------------------------------------------------------------
declare -A rows
for k in 2 3 4 5 6; do
  q "SELECT throttle_density_build('pts', 'g$k')" >/dev/null
  rows[$k]=$(q "SELECT rows_in('g$k')")
done
ev=$(stats evictions); used=$(stats used_bytes); size=$(stats size_bytes); n=$(stats grids)
echo "# six grids of ~$grid_bytes bytes in a store of $size: $n kept, $used bytes, $ev evictions"
check "a full store evicts (evictions $ev > 0)" fcmp "$ev" ">" 0
fits() { [ -n "$1" ] && [ -n "$2" ] && fcmp "$1" ">" 0 && fcmp "$1" "<=" "$2"; }
check "what it holds fits in it ($used <= $size)" fits "$used" "$size"
live() { q "SELECT string_agg(attnum::text, ' ' ORDER BY attnum) FROM throttle_density_shared WHERE NOT replaced"; }
# How many fit depends on the grids' format (16 bytes a cell: three of these; 20: two); the newest
# that fit are kept (gk is attnum k + 1).
newest=$(seq -s ' ' $((8 - n)) 7)
check "at least two grids fit ($n)" fcmp "$n" ">=" 2
check_eq "the $n newest grids are kept" "$newest" "$(live)"
# g5 read again: the least recently used is now the oldest of the others (g6 when only g5 and g6
# are kept), and goes when g1 comes back.
sleep 0.01; q "SELECT rows_in('g5')" >/dev/null; sleep 0.01
victim=$(tr ' ' '\n' <<<"$newest" | grep -vx 6 | head -1)
check_eq "an evicted grid is read again and prices the same" "$r1" "$(q "SELECT rows_in('g1')")"
check_eq "... in place of the least recently used (attnum $victim)" \
  "$(tr ' ' '\n' <<<"2 $newest" | grep -vx "$victim" | paste -sd ' ')" "$(live)"
exec 3>&-

# --- a grid bigger than the store --------------------------------------------------
q "SELECT throttle_density_build('big', 'g')" >/dev/null
big_bytes=$(q "SELECT octet_length(grid) FROM throttle_density WHERE relid = 'big'::regclass")
refused=$(stats refused)
bigr=$(q "SELECT big_rows()")
echo "# big: $big_bytes bytes, $bigr rows in its box"
check "a grid bigger than the store prices from the grid (rows $bigr > 20)" fcmp "$bigr" ">" 20
check "... read by the backend itself (refused $refused -> $(stats refused), not in the store)" \
  test "$(stats refused)" -gt "$refused" -a "$(q "SELECT count(*) FROM throttle_density_shared WHERE relid = 'big'::regclass")" = 0
check_eq "... and again in a second backend, alike" "$bigr" "$(q "SELECT big_rows()")"

restart() {
  pg_stop "$DIR" fast
  pg_conf_set "$DIR" "ogc_throttle.density_shared_memory = '$1'"
  pg_start "$DIR" "$PORT" || { not_ok "server starts with density_shared_memory = $1"; tail -n 20 "$DIR/server.log"; tap_exit; }
}
# --- 0: every backend its own copy, as before --------------------------------------
restart 0
check_eq "0: no store allocated" "0" "$(q "SELECT count(*) FROM pg_shmem_allocations WHERE name = 'ogc_throttle density grids'")"
check_eq "0: the view is empty and the counters NULL" "0|" "$(q "SELECT (SELECT count(*) FROM throttle_density_shared), (SELECT size_bytes FROM throttle_density_shared_stats())")"
same=yes
for k in 2 3 4 5 6; do [ "$(q "SELECT rows_in('g$k')")" = "${rows[$k]}" ] || same=no; done
check_eq "0: every grid prices as with the store" "yes $r1 $bigr" "$same $(q "SELECT rows_in('g1')") $(q "SELECT big_rows()")"

# --- eight clients pricing over six grids in a small store while one rebuilds -------
restart 128kB
f="$DIR/price.pgbench"; g="$DIR/rebuild.pgbench"
printf '%s\n' "\\set k random(1, 6)" "SELECT 1 / (rows_in('g' || :k) > 0)::int;  -- an error if a grid priced nothing" >"$f"
printf '%s\n' "\\set k random(1, 6)" "SELECT throttle_density_build('pts', 'g' || :k);" >"$g"
chmod 644 "$f" "$g"
as_pg "$PGBIN/pgbench" -n -c 1 -T 8 -f "$g" -h "$DIR" -p "$PORT" -U postgres postgres >"$DIR/rebuild.log" 2>&1 &
rb=$!
as_pg "$PGBIN/pgbench" -n -c 8 -j 2 -T 8 -f "$f" -h "$DIR" -p "$PORT" -U postgres postgres >"$DIR/price.log" 2>&1
prc=$?
wait $rb; rrc=$?
tx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$DIR/price.log")
rtx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$DIR/rebuild.log")
echo "# 8 pricing clients: ${tx:-?} statements; rebuilds: ${rtx:-?}; $(stats "'loads ' || loads || ', shares ' || shares || ', evictions ' || evictions || ', replacements ' || replacements")"
check "pricing clients: no error (pgbench rc $prc, ${tx:-0} statements)" test "$prc" = 0 -a "${tx:-0}" -gt 100
check "the rebuilding client: no error (rc $rrc, ${rtx:-0} rebuilds)" test "$rrc" = 0 -a "${rtx:-0}" -gt 2
check_eq "no grid is left pinned" "0" "$(q "SELECT coalesce(sum(readers), 0) FROM throttle_density_shared")"
check_eq "the server log has no crash" "0" "$(grep -cE 'PANIC|TRAP|terminated by signal|server process .* exited' "$DIR/server.log")"
check "the store still fits ($(stats used_bytes) <= $(stats size_bytes))" fits "$(stats used_bytes)" "$(stats size_bytes)"
check_eq "and prices as before" "$(q "SELECT rows_in('g1') > 0")" "t"
tap_exit
