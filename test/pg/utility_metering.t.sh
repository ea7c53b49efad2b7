#!/usr/bin/env bash
# Work outside the executor is metered like any statement (doc/metering.md):
# utility statements (building an index, a DO block's loop, VACUUM, CREATE
# TABLE AS) and the planning of a statement that is never executed. Without
# it, a role could burn server time for nothing by building and dropping
# indexes, looping in PL/pgSQL, or asking to EXPLAIN a many-way join.
# In debt, every other utility statement is refused before its work (PREPARE's
# analysis); transaction control, SET and letting go of what a session holds
# never are; and a literal's or a Bind parameter's input function, which runs
# before any of the statement's meters, is refused before it parses.
set -uo pipefail
. "$(dirname "$0")/common.sh"
cluster_up 55484 "shared_preload_libraries = 'ogc_throttle'" "max_parallel_workers_per_gather = 0" \
  "max_parallel_maintenance_workers = 0"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   CREATE ROLE util LOGIN;
   GRANT CREATE ON SCHEMA public TO util;
   ALTER ROLE util SET ogc_throttle.mode = 'reject';
   ALTER ROLE util SET ogc_throttle.capacity = 60000;
   ALTER ROLE util SET ogc_throttle.rate = 0.01;" >/dev/null || { not_ok "setup"; tap_exit; }

# u SQL...: psql as the throttled role; stdout (-At), stderr to $DIR/u.err
u() { as_pg psql -X -q -h "$DIR" -p "$PORT" -U util -d postgres -At -v VERBOSITY=verbose "$@" 2>"$DIR/u.err"; }
tokens() { q "SELECT tokens FROM throttle_peek('util')"; }
spent_since() { awk -v a="$1" -v b="$(tokens)" 'BEGIN { printf "%.1f", a - b }'; }
# u_timed ARGS...: u, its output dropped, and how long it took in `took` (seconds)
u_timed() {
  local start; start=$(date +%s.%N)
  u "$@" >/dev/null
  took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
}
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
LAST="SELECT round(measured) || ' ' || round(charged) FROM throttle_last_statement()"

q "SELECT throttle_reset('util')" >/dev/null
before=$(tokens)
r=$(u -c "CREATE TABLE pts AS SELECT i, ST_SetSRID(ST_MakePoint(random(), random()), 4326) AS g FROM generate_series(1, 300000) i" -c "$LAST")
echo "# CREATE TABLE AS: measured/charged $r"
check "CREATE TABLE AS is measured and charged as one statement" ge "${r% *}" 1

# --- an index built and dropped again and again is charged every time ------------
before=$(tokens)
r=$(u -c "CREATE INDEX pts_g ON pts USING gist (g)" -c "$LAST")
ms=${r% *}; spent=$(spent_since "$before")
echo "# CREATE INDEX: measured/charged '$r' ms, bucket spent $spent"
check "CREATE INDEX on 300 000 points is measured (${ms} ms)" ge "$ms" 20
check "... and the bucket paid it ($spent of $ms)" ge "$spent" "$(awk -v m="$ms" 'BEGIN { print m * 0.9 }')"
# (against the rebuilds' own measured times: a warm rebuild took 460 ms after a first build of 670)
before=$(tokens)
again=$(u -c "DROP INDEX pts_g" -c "CREATE INDEX pts_g ON pts USING gist (g)" -c "$LAST" -c "DROP INDEX pts_g" \
  -c "CREATE INDEX pts_g ON pts USING gist (g)" -c "$LAST" | awk '{ s += $1 } END { print s + 0 }')
spent=$(spent_since "$before")
check "two more rebuilds are charged again ($spent ms, measured $again)" \
  ge "$spent" "$(awk -v m="$again" 'BEGIN { print (m > 40 ? m : 1e9) * 0.9 }')"

# --- a DO block's loop never reaches the executor hooks, but it pays ----------------
before=$(tokens)
r=$(u -c "DO \$\$ DECLARE x float8 := 0; t timestamptz := clock_timestamp(); BEGIN
            WHILE clock_timestamp() < t + interval '300 ms' LOOP x := x + sqrt(x + 1); END LOOP; END \$\$" -c "$LAST")
spent=$(spent_since "$before")
echo "# DO loop of 300 ms: measured/charged '$r', bucket spent $spent"
check "a 300 ms DO loop is charged at least 280 ms ($spent)" ge "$spent" 280

# --- VACUUM (which commits as it goes) and ANALYZE are metered, and the session lives on --------
before=$(tokens)
r=$(u -c "VACUUM ANALYZE pts" -c "$LAST" -c "SELECT 'alive'")
echo "# VACUUM ANALYZE: '$r', bucket spent $(spent_since "$before")"
check "VACUUM ANALYZE is measured" ge "$(sed -n 1p <<<"$r" | cut -d' ' -f1)" 1
check "... and the session goes on" grep -q '^alive$' <<<"$r"

# --- a cursor WITH HOLD is read from its stored rows after COMMIT: every re-read pays ----------------
# (SCROLL, so MOVE ABSOLUTE 0 rewinds it; 0.2 ran it once at COMMIT and served the re-reads for nothing)
PEEK="\\! psql -X -At -h $DIR -p $PORT -U postgres -d postgres -c \"SELECT tokens FROM throttle_peek('util')\""
cat >"$DIR/held.sql" <<SQL
DECLARE held SCROLL CURSOR WITH HOLD FOR SELECT i, g, ST_AsText(g) FROM pts;
$PEEK
\\o /dev/null
FETCH ALL FROM held;
MOVE ABSOLUTE 0 IN held;
FETCH ALL FROM held;
MOVE ABSOLUTE 0 IN held;
FETCH ALL FROM held;
\\o
$PEEK
SQL
chmod 644 "$DIR/held.sql"
q "SELECT throttle_reset('util')" >/dev/null
r=$(u -f "$DIR/held.sql")
read -r after_declare after_reads <<<"$(echo $r)"
reads=$(awk -v a="$after_declare" -v b="$after_reads" 'BEGIN { printf "%.1f", a - b }')
echo "# held cursor over 300 000 rows: tokens after DECLARE (run at COMMIT) $after_declare, after 3 reads $after_reads"
check "three FETCH ALL of a held cursor are charged ($reads ms >= 30)" ge "$reads" 30

# --- over budget: cut off with 53T01; in debt: refused; BEGIN/SET/COMMIT still work ----------------
q "ALTER ROLE util SET ogc_throttle.capacity = 200; ALTER ROLE util SET ogc_throttle.cutoff_grace = 0" >/dev/null
q "SELECT throttle_reset('util')" >/dev/null
u -c "CREATE TABLE t_held (i int)" >/dev/null  # (dropped in debt below)
u_timed -c "DO \$\$ DECLARE x float8 := 0; BEGIN LOOP x := x + 1; END LOOP; END \$\$"
echo "# endless DO loop on a 200 ms budget: stopped after ${took}s; $(grep -m1 DETAIL "$DIR/u.err")"
check "an endless DO loop is cut off with 53T01" grep -q 'ERROR:  53T01: ogc_throttle: statement cancelled' "$DIR/u.err"
check "... within 2 s" awk -v t="$took" 'BEGIN { exit !(t < 2) }'
u -c "CREATE INDEX ON pts USING gist (g)" >/dev/null
check "in debt, CREATE INDEX is refused with 53T01" grep -q 'ERROR:  53T01: ogc_throttle: statement refused' "$DIR/u.err"
r=$(u -c "BEGIN" -c "SET LOCAL work_mem = '8MB'" -c "SHOW work_mem" -c "COMMIT")
check_eq "in debt, BEGIN, SET, SHOW and COMMIT still work" "8MB" "$r"
# Other utility statements do their work before anything times them (PREPARE and CREATE VIEW analyse a query:
# a literal's input function runs there): refused while in debt, before that work. 20 PREPAREs of a
# 200 000-point literal ran 1 130 ms for a role 100 ms in debt.
python3 -c "print('PREPARE big AS SELECT ST_NPoints(\'LINESTRING(' + ','.join('%d %d' % (i, i) for i in range(200000)) + ')\'::geometry);')" \
  >"$DIR/prepare.sql"
chmod 644 "$DIR/prepare.sql"
# what one takes analysed, at the client (postgres is not metered)
full=$(pg_psql "$DIR" "$PORT" -d postgres -At -c '\timing on' -f "$DIR/prepare.sql" | awk '/^Time:/ { print $2 }')
# refused_thrice FILE WHAT BEFORE: FILE run three times in debt, each refused with 53T01 and charged under
# half of what one PREPARE analysed took (full)
refused_thrice() {
  local t0 refused spent
  t0=$(tokens)
  u -f "$1" -f "$1" -f "$1" >/dev/null
  refused=$(grep -c 'ERROR:  53T01: ogc_throttle: statement refused' "$DIR/u.err")
  spent=$(spent_since "$t0")
  echo "# in debt, three ${2}s of the literal: $refused refused, charged $spent ms; one PREPARE analysed: ${full:-?} ms"
  check "in debt, a $2 of a 200 000-point literal is refused with 53T01 ($refused of 3)" test "$refused" = 3
  check "... $3 (each charged $(awk -v s="$spent" 'BEGIN { printf "%.1f", s / 3 }') ms, under half of ${full:-?})" \
    awk -v s="$spent" -v f="${full:-0}" 'BEGIN { exit !(f > 0 && s / 3 < 0.5 * f) }'
}
refused_thrice "$DIR/prepare.sql" PREPARE "before its analysis"
# A plain SELECT of that literal is analysed before any hook of the statement runs (the raw parse, then the
# literal's input function), and a Bind converts a text parameter the same way: in debt, that input function
# is refused before it runs. (20 such SELECTs ran 1 130 ms of backend CPU for a role 100 ms in debt, each
# refused only after its analysis.)
sed 's/^PREPARE big AS //' "$DIR/prepare.sql" >"$DIR/select.sql"
refused_thrice "$DIR/select.sql" SELECT "before the literal's input function ran"
PQEXEC=$(pg_readable_copy "$root/test/pg/pqexec.py")
python3 -c "print('LINESTRING(' + ','.join('%d %d' % (i, i) for i in range(200000)) + ')', end='')" >"$DIR/big.wkt"
echo 'SELECT ST_NPoints($1::geometry)' >"$DIR/bind.sql"
chmod 644 "$DIR/big.wkt" "$DIR/bind.sql"
r=$(as_pg python3 "$PQEXEC" "host=$DIR port=$PORT user=util dbname=postgres" "$DIR/bind.sql" "$DIR/big.wkt" --backend-cpu)
cpu=$(sed -n 's/^backend_cpu //p' <<<"$r"); r=$(head -n 1 <<<"$r")
echo "# in debt, the literal as a Bind's text parameter: ${r:0:100}; the backend ran $cpu ms on a CPU"
check "... and as a Bind's text parameter: refused with 53T01" grep -q '^error 53T01 ' <<<"$r"
check "... before its conversion (the backend ran ${cpu:-?} ms on a CPU, under half of ${full:-?})" \
  awk -v c="${cpu:-}" -v f="${full:-0}" 'BEGIN { exit !(c != "" && f > 0 && c < 0.5 * f) }'
# delay mode: the input function waits for its turn; a turn beyond max_delay (this debt at 0.01 ms/s) is refused at once
q "ALTER ROLE util SET ogc_throttle.mode = 'delay'" >/dev/null
t0=$(tokens)
u -f "$DIR/select.sql" >/dev/null
spent=$(spent_since "$t0")
check "in delay mode, a turn past max_delay is refused with 53T01 before the literal is parsed (charged $spent ms)" \
  awk -v s="$spent" -v f="${full:-0}" -v r="$(grep -c '53T01: ogc_throttle: statement refused: identity "util" would wait longer' "$DIR/u.err")" \
  'BEGIN { exit !(r == 1 && f > 0 && s < 0.5 * f) }'
q "ALTER ROLE util SET ogc_throttle.mode = 'reject'" >/dev/null
u -c "CREATE TABLE t_debt (i int)" -c "CREATE VIEW v_debt AS SELECT 1 AS one" -c "NOTIFY jobs" -c "COMMENT ON TABLE pts IS 'x'" >/dev/null
check "... and so are CREATE TABLE, CREATE VIEW, NOTIFY and COMMENT ($(grep -c 'statement refused' "$DIR/u.err") of 4)" \
  test "$(grep -c 'ERROR:  53T01: ogc_throttle: statement refused' "$DIR/u.err")" = 4
r=$(u -c "LISTEN jobs" -c "UNLISTEN *" -c "DEALLOCATE ALL" -c "DISCARD ALL" -c "BEGIN" -c "SAVEPOINT s" -c "RELEASE s" \
      -c "CLOSE ALL" -c "ROLLBACK" -c "TRUNCATE t_held" -c "DROP TABLE t_held" -c "SET work_mem = '9MB'" -c "SHOW work_mem")
check_eq "... while LISTEN, UNLISTEN, DEALLOCATE, DISCARD, savepoints, CLOSE, TRUNCATE and DROP still work$(head -n 1 "$DIR/u.err" | sed 's/^/: /')" \
  "9MB" "$r"
q "ALTER ROLE util SET ogc_throttle.capacity = 60000; ALTER ROLE util RESET ogc_throttle.cutoff_grace" >/dev/null

# --- planning alone is server time: charged, and refused in debt ----------------------------------------
q "CREATE TABLE j AS SELECT i FROM generate_series(1, 10) i; ANALYZE j; GRANT SELECT ON j TO util" >/dev/null
J="EXPLAIN SELECT 1 FROM j a1, j a2, j a3, j a4, j a5, j a6, j a7, j a8, j a9, j a10, j a11 WHERE a1.i = a2.i AND
   a2.i = a3.i AND a3.i = a4.i AND a4.i = a5.i AND a5.i = a6.i AND a6.i = a7.i AND a7.i = a8.i AND a8.i = a9.i AND
   a9.i = a10.i AND a10.i = a11.i AND a11.i = a1.i"
EXHAUSTIVE=(-c "SET geqo = off" -c "SET join_collapse_limit = 20" -c "SET from_collapse_limit = 20")
q "SELECT throttle_reset('util')" >/dev/null
before=60000 start=$(date +%s.%N)  # a reset bucket is full (throttle_peek shows the caller's budget until it exists)
u "${EXHAUSTIVE[@]}" -c "$J" >/dev/null
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", (b - a) * 1000 }'); spent=$(spent_since "$before")
echo "# EXPLAIN of an 11-way join (planning only): ${took} ms in psql, bucket charged $spent ms"
check "planning only (EXPLAIN without ANALYZE) is charged" ge "$spent" "$(awk -v t="$took" 'BEGIN { print t * 0.5 }')"
q "ALTER ROLE util SET ogc_throttle.capacity = 200" >/dev/null
q "SELECT throttle_reset('util')" >/dev/null
u "${EXHAUSTIVE[@]}" -c "$J" -c "$J" >/dev/null
check "in debt from planning, the next EXPLAIN is refused with 53T01" grep -q 'ERROR:  53T01: ogc_throttle: statement refused' "$DIR/u.err"
q "ALTER ROLE util SET ogc_throttle.capacity = 60000" >/dev/null

# --- a query run while planning is charged once: as a statement of its own, not again by the planning meter --
# The planner runs an IMMUTABLE function with constant arguments (constant folding); the planning meter's
# wall time included the queries it ran, which were charged as statements too: 0.3 s of pg_sleep was
# charged twice.
q "CREATE FUNCTION slow_const() RETURNS int IMMUTABLE LANGUAGE plpgsql AS \$\$ BEGIN PERFORM pg_sleep(0.3); RETURN 1; END \$\$;
   GRANT EXECUTE ON FUNCTION slow_const() TO util; ALTER ROLE util SET log_min_duration_statement = 0" >/dev/null
q "SELECT throttle_reset('util')" >/dev/null
u -c "SELECT slow_const() /*folded*/" >/dev/null
spent=$(spent_since 60000)
took=$(grep -a ' LOG:  duration: .*folded' "$DIR/server.log" | tail -1 | awk '{ for (i = 1; i < NF; i++) if ($i == "duration:") print $(i + 1) }')
echo "# SELECT slow_const(), folded by the planner: duration line ${took} ms, bucket charged $spent ms"
check "a function the planner runs is charged once ($spent of ${took:-?} ms, 0.9-1.2)" \
  awk -v s="$spent" -v t="${took:-0}" 'BEGIN { exit !(t >= 300 && s >= 0.9 * t && s <= 1.2 * t) }'
q "ALTER ROLE util RESET log_min_duration_statement" >/dev/null
# ... and still bounded by the budget: a query the planner runs is a statement of its own, cut off at its
# deadline (with the planning clock alone on it, 3 s of pg_sleep ran to its end on a 200 ms budget).
q "CREATE FUNCTION slow_const3() RETURNS int IMMUTABLE LANGUAGE plpgsql AS \$\$ BEGIN PERFORM pg_sleep(3); RETURN 1; END \$\$;
   GRANT EXECUTE ON FUNCTION slow_const3() TO util; ALTER ROLE util SET ogc_throttle.capacity = 200" >/dev/null
q "SELECT throttle_reset('util')" >/dev/null
u_timed -c "SELECT slow_const3() /*folded3*/"
echo "# SELECT slow_const3() (3 s folded by the planner) on a 200 ms budget: ${took} s; $(grep -o 'ERROR:  53T01.*' "$DIR/u.err" | head -1)"
check "a query the planner runs is cut off at its budget with 53T01" grep -q 'ERROR:  53T01: ogc_throttle: statement cancelled' "$DIR/u.err"
check "... well before its 3 s (${took} s)" awk -v t="$took" 'BEGIN { exit !(t < 2) }'
q "ALTER ROLE util SET ogc_throttle.capacity = 60000" >/dev/null

# --- with ogc_throttle.true_up = off (0.1 behaviour) utility statements are not metered ---------------
q "SELECT throttle_reset('util')" >/dev/null
before=$(tokens)
u -c "SET ogc_throttle.true_up = off" -c "CREATE INDEX pts_g2 ON pts USING gist (g)" >/dev/null 2>&1
if grep -q 'permission denied\|42501' "$DIR/u.err"; then
  q "ALTER ROLE util SET ogc_throttle.true_up = off" >/dev/null
  u -c "CREATE INDEX pts_g2 ON pts USING gist (g)" >/dev/null
fi
check_eq "(control) with true_up off, CREATE INDEX is free, as in 0.1" "0.0" "$(spent_since "$before" | awk '{ printf "%.1f", ($1 < 1 ? 0 : $1) }')"
tap_exit
