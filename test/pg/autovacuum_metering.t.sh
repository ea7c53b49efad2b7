#!/usr/bin/env bash
# Autovacuum's own work on a table, as a throttled role would use it: the owner of a table sets its
# autovacuum thresholds to one row, and each of its one-row updates makes a worker vacuum the table
# (every index scanned) and analyze it. Fifteen updates of a 400 000-row table with four indexes were
# charged 67 ms and took autovacuum 1.6 s, free. Now each such transaction of a worker is charged to the
# table's owner, never refused (a table left unvacuumed harms everyone): the debt refuses the owner's
# own statements. Controls: an owner whose mode is off is not charged, and its table is vacuumed too; the
# system catalogs' upkeep (everyone's DDL) is not charged to the bootstrap superuser; a vacuum its owner
# cancels with a conflicting lock request is charged as well (to the session that dropped the table, when a
# DROP TABLE cancelled it); with ogc_throttle.charge_autovacuum off (server-wide) nothing is charged.
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55509 "shared_preload_libraries = 'ogc_throttle'" "autovacuum_naptime = 1" \
  "log_autovacuum_min_duration = 0" "log_min_messages = log" "deadlock_timeout = 200ms"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle" >/dev/null &&
  metered_roles churner small canceller bystander dropper &&
  q "ALTER ROLE small SET ogc_throttle.capacity = 300; CREATE ROLE free LOGIN; ALTER ROLE free SET ogc_throttle.mode = 'off';
     GRANT CREATE ON SCHEMA public TO churner, small, free, canceller, bystander, dropper" >/dev/null || { not_ok "setup"; tap_exit; }

tokens() { q "SELECT tokens FROM throttle_peek('$1')"; }
as_role() { local r=$1; shift; as_pg psql -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -U "$r" -d postgres "$@"; }
# churned_table ROLE TABLE ROWS: a table whose autovacuum thresholds are one row, four indexes
churned_table() {
  as_role "$1" -c "CREATE TABLE $2 (id int PRIMARY KEY, a int, b int, c int, pad text) WITH (
      autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1,
      autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 1);
    CREATE INDEX ON $2 (a); CREATE INDEX ON $2 (b); CREATE INDEX ON $2 (c);
    INSERT INTO $2 SELECT g, g, g, g, repeat('x', 100) FROM generate_series(1, $3) g" -c "VACUUM ANALYZE $2"
}
vacuums() { q "SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = '$1'"; }
# autovacuum_seconds TABLE FROM: the elapsed time autovacuum logged for TABLE, its runs after the FROM-th
autovacuum_seconds() {
  awk -v t="\"postgres.public.$1\"" -v from="$2" '
    /automatic (vacuum|analyze) of table/ { mine = index($0, t) > 0; n += mine; on = mine && n > from }
    on && /elapsed:/ { for (i = 1; i <= NF; i++) if ($i == "elapsed:") s += $(i + 1) }
    END { printf "%.3f", s + 0 }' "$DIR/server.log"
}
runs() { grep -c "automatic \(vacuum\|analyze\) of table \"postgres.public.$1\"" "$DIR/server.log"; }
churn() {  # churn ROLE TABLE N: N one-row updates, a second apart
  local i
  for i in $(seq 1 "$3"); do
    as_role "$1" -c "UPDATE $2 SET a = a + 1 WHERE id = $((i * 1000))" 2>>"$DIR/churn.err" >/dev/null
    sleep 1
  done
}

# 1. The owner pays for autovacuum's work on its table.
churned_table churner t 400000 >/dev/null 2>"$DIR/p.err" || { not_ok "churner's table"; cat "$DIR/p.err"; tap_exit; }
sleep 2
t0=$(tokens churner); r0=$(runs t); v0=$(vacuums t)
churn churner t 15
for i in $(seq 1 30); do [ "$(runs t)" -gt "$r0" ] && [ "$(vacuums t)" -ge $((v0 + 5)) ] && break; sleep 0.5; done
sleep 3
charged=$(awk -v a="$t0" -v b="$(tokens churner)" 'BEGIN { printf "%.0f", a - b }')
av=$(autovacuum_seconds t "$r0")
echo "# churner charged $charged ms for 15 one-row updates; autovacuum ran $(( $(runs t) - r0 )) times on its table for $av s ($(( $(vacuums t) - v0 )) vacuums)"
ratio=$(awk -v c="$charged" -v s="$av" 'BEGIN { printf "%.2f", (s > 0) ? c / (s * 1000) : 0 }')
check "autovacuum's work on a table is charged to its owner (charged / autovacuum's time $ratio >= 0.8)" \
  fcmp "$ratio" ">=" 0.8
check "... and not twice (charged / autovacuum's time $ratio <= 1.5)" fcmp "$ratio" "<=" 1.5

# 2. Never refused: an owner in debt still has its table vacuumed, and its own statements are refused.
# (built by a superuser and given to small: building it would take more than small's bucket holds)
churned_table postgres s 200000 >/dev/null 2>"$DIR/p.err" && q "ALTER TABLE s OWNER TO small" >/dev/null ||
  { not_ok "small's table"; cat "$DIR/p.err"; tap_exit; }
v0=$(vacuums s)
# (the updates are a superuser's: small's own are refused once its bucket is in debt, and then nothing is left
# to vacuum)
churn postgres s 12
for i in $(seq 1 20); do [ "$(vacuums s)" -ge $((v0 + 3)) ] && break; sleep 0.5; done
sleep 2
st=$(tokens small); vs=$(( $(vacuums s) - v0 ))
echo "# small (capacity 300): tokens $st after $vs vacuums of its table"
check "an owner whose table's upkeep costs more than its bucket holds is left in debt" fcmp "$st" "<" 0
check "... its table is vacuumed all the same ($vs vacuums)" test "$vs" -ge 3
as_role small -v VERBOSITY=verbose -c "SELECT 1" >/dev/null 2>"$DIR/p.err"
check "... and its own next statement is refused (53T01)" grep -q 53T01 "$DIR/p.err"

# 3. An owner whose mode is off is not charged, and its table is vacuumed.
churned_table free f 100000 >/dev/null 2>"$DIR/p.err" || { not_ok "free's table"; cat "$DIR/p.err"; tap_exit; }
v0=$(vacuums f); f0=$(q "SELECT tokens FROM throttle_peek('free')")
churn free f 4
for i in $(seq 1 20); do [ "$(vacuums f)" -ge $((v0 + 2)) ] && break; sleep 0.5; done
sleep 1
f1=$(q "SELECT tokens FROM throttle_peek('free')")
check "an owner with mode off has its table vacuumed ($(( $(vacuums f) - v0 )) vacuums)" test "$(( $(vacuums f) - v0 ))" -ge 2
check "... and is charged nothing (tokens $f0, then $f1)" test "$f0" = "$f1"

# 4. The system catalogs' upkeep (everyone's DDL) is not charged to their owner, the bootstrap superuser,
#    metered here for the purpose.
q "ALTER ROLE postgres SET ogc_throttle.mode = 'reject'" >/dev/null
c0=$(q "SELECT sum(autovacuum_count) FROM pg_stat_sys_tables WHERE relname IN ('pg_class', 'pg_attribute', 'pg_type')")
p0=$(tokens postgres)
as_role churner -c "DO \$\$ BEGIN FOR i IN 1..400 LOOP CREATE TEMP TABLE tmp (a int, b text); DROP TABLE tmp; END LOOP; END \$\$" \
  >/dev/null 2>"$DIR/p.err"
sleep 6  # (not polled: the superuser's own statements are charged here too)
p1=$(tokens postgres)
q "ALTER ROLE postgres SET ogc_throttle.mode = 'off'" >/dev/null
cv=$(( $(q "SELECT sum(autovacuum_count) FROM pg_stat_sys_tables WHERE relname IN ('pg_class', 'pg_attribute', 'pg_type')") - c0 ))
pc=$(awk -v a="$p0" -v b="$p1" 'BEGIN { printf "%.0f", a - b }')
echo "# $cv autovacuums of pg_class, pg_attribute and pg_type; the metered bootstrap superuser was charged $pc ms (its own statements included)"
check "autovacuum of the system catalogs is not charged to their owner ($cv vacuums, $pc ms charged)" \
  eval '[ "$cv" -ge 3 ] && fcmp "$pc" "<" 30'

# cancel_seen vacuum|analyze TABLE [SQL [SETTLED]]: once autovacuum's work on canceller's TABLE shows in its
# progress view, let it run 2.5 s, then cancel it by the owner's SQL (a conflicting lock request; by default an
# ALTER TABLE that also turns the table's autovacuum off), and run SETTLED (a command that returns once the
# charge is in; by default a 2 s sleep); sets cc (ms charged to the owner meanwhile), ran (ms from seen to
# cancelled), cr. (WHO: another role than canceller.)
cancel_seen() {
  local t0 seen ended i who=${WHO:-canceller}
  t0=$(settled_tokens "$who")
  for i in $(seq 1 100); do
    [ "$(q "SELECT count(*) FROM pg_stat_progress_$1 WHERE relid = '$2'::regclass")" = 1 ] && break
    sleep 0.1
  done
  seen=$(date +%s.%N)
  sleep 2.5
  as_role "$who" -c "${3:-ALTER TABLE $2 SET (autovacuum_enabled = off)}" >/dev/null 2>"$DIR/p.err"
  ended=$(date +%s.%N)
  ${4:-sleep 2}
  cc=$(awk -v a="$t0" -v b="$(settled_tokens "$who")" 'BEGIN { printf "%.0f", a - b }')
  ran=$(awk -v a="$seen" -v b="$ended" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
  cr=$(awk -v c="$cc" -v r="$ran" 'BEGIN { printf "%.2f", (r > 0) ? c / r : 0 }')
}

# 5. A vacuum cancelled is charged too. Its owner asks for a lock that conflicts with the vacuum's, waits
#    deadlock_timeout, and the vacuum is cancelled, however long it had run; the table is vacuumed again
#    later, from the start. The aborted transaction cannot read the catalog: the charge waits for the worker's
#    next commit. (The slow vacuum is the owner's own setting: a cost delay per page.)
as_role canceller -c "CREATE TABLE c (id int PRIMARY KEY, a int, pad text) WITH (
    autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1, autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 1, autovacuum_vacuum_cost_delay = 10, autovacuum_vacuum_cost_limit = 20);
  CREATE INDEX ON c (a); INSERT INTO c SELECT g, g, repeat('x', 100) FROM generate_series(1, 200000) g" \
  -c "VACUUM ANALYZE c" -c "UPDATE c SET a = a + 1" >/dev/null 2>"$DIR/p.err" || { not_ok "canceller's table"; cat "$DIR/p.err"; }
cancel_seen vacuum c
echo "# the vacuum of canceller's table was seen running for $ran ms before its owner's ALTER TABLE ended; charged $cc ms"
# (log_min_messages = log leaves the worker's ERROR out of the log: the vacuum never finished instead)
check "the owner's conflicting lock request cancelled the vacuum ($(vacuums c) finished, $(runs c) logged)" \
  eval '[ "$(vacuums c)" = 0 ] && [ "$(runs c)" = 0 ]'
check "a vacuum cancelled by its table's owner is charged to the owner (charged $cc ms / ran $ran ms: $cr >= 0.8)" \
  fcmp "$cr" ">=" 0.8
check "... and not twice ($cr <= 1.5: the owner's wait for the lock is in it)" fcmp "$cr" "<=" 1.5

# 5a. ... and by a DROP TABLE, while the same worker has another role's slow table to vacuum next. The
#     cancelled vacuum is charged at the worker's next commit, which comes at once (vacuum() commits the
#     worker's transaction before it opens the next table): whether the DROP has committed by then is a race.
#     If not, the owner pays; if so, no owner is left and the session whose lock request cancelled the vacuum
#     (its payer, read from shared memory) pays. Either way the dropper. (One worker, so that the next table
#     is the same worker's; the cluster is restarted for it.)
pg_conf_set "$DIR" "autovacuum_max_workers = 1"
pg_stop "$DIR" && pg_start "$DIR" "$PORT" || { not_ok "restart with one worker"; tap_exit; }
slow_table() {  # slow_table ROLE TABLE ROWS: a table whose vacuum its own cost delay slows, dead rows in it
  as_role "$1" -c "CREATE TABLE $2 (id int PRIMARY KEY, a int, pad text) WITH (autovacuum_enabled = off,
      autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1, autovacuum_analyze_scale_factor = 0,
      autovacuum_analyze_threshold = 1, autovacuum_vacuum_cost_delay = 10, autovacuum_vacuum_cost_limit = 20);
    CREATE INDEX ON $2 (a); INSERT INTO $2 SELECT g, g, repeat('x', 100) FROM generate_series(1, $3) g" \
    -c "VACUUM ANALYZE $2" -c "UPDATE $2 SET a = a + 1"
}
slow_table canceller d 200000 >/dev/null 2>"$DIR/p.err" || { not_ok "canceller's table d"; cat "$DIR/p.err"; }
slow_table bystander d2 40000 >/dev/null 2>"$DIR/p.err" || { not_ok "bystander's table d2"; cat "$DIR/p.err"; }
as_role canceller -c "ALTER TABLE d SET (autovacuum_enabled = on)" >/dev/null &&
  as_role bystander -c "ALTER TABLE d2 SET (autovacuum_enabled = on)" >/dev/null
d2_vacuumed() {  # the worker's next table done, with its commit, where d's cancelled vacuum is charged
  local i
  for i in $(seq 1 200); do [ "$(vacuums d2)" -ge 1 ] && break; sleep 0.1; done
  sleep 1
}
cancel_seen vacuum d "DROP TABLE d" d2_vacuumed
echo "# the vacuum of canceller's table d was seen running for $ran ms before its DROP TABLE ended; charged $cc ms; bystander's d2 vacuumed $(vacuums d2) time(s) after it"
check "... (the table is gone, and the worker vacuumed d2)" \
  eval '[ "$(q "SELECT count(*) FROM pg_class WHERE relname = '"'d'"'")" = 0 ] && [ "$(vacuums d2)" -ge 1 ]'
check "a vacuum cancelled by its table's DROP is charged to the session that dropped it ($cc ms / $ran ms: $cr >= 0.8)" \
  fcmp "$cr" ">=" 0.8

# 5b. An analyze cancelled while it computes an expression index's statistics: the owner's function runs
#     on its own meter (maintenance_metering.cpp), which settles at the abort before this charge is taken.
as_role canceller -c "CREATE FUNCTION slow(int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS \$\$
    BEGIN PERFORM pg_sleep(0.0005); RETURN \$1; END \$\$;
  CREATE TABLE e (id int, a int) WITH (autovacuum_vacuum_threshold = 100000000,
    autovacuum_vacuum_insert_threshold = 100000000, autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 1);
  CREATE INDEX ON e (slow(a))" -c "INSERT INTO e SELECT g, g FROM generate_series(1, 50000) g" >/dev/null 2>"$DIR/p.err" ||
  { not_ok "canceller's second table"; cat "$DIR/p.err"; }
cancel_seen analyze e
echo "# the analyze of canceller's table with an expression index was seen running for $ran ms before it was cancelled; charged $cc ms"
check "an analyze cancelled in its owner's function is charged once ($(q "SELECT autoanalyze_count FROM pg_stat_user_tables WHERE relname = 'e'") finished; charged / ran $cr between 0.8 and 1.5)" \
  eval 'fcmp "$cr" ">=" 0.8 && fcmp "$cr" "<=" 1.5'

# 5c. ... and by other spellings of a DROP: a DROP OWNED, and a first statement that takes the vacuum's lock
#     with no DROP (a BRIN summarization) followed by a DROP TABLE in its transaction. Where the DROP wins the
#     race of 5a, the session had published no payer at the abort; it has by the charge, at its commit. (This
#     run cannot choose the race's winner: the check holds whichever wins.) The worker's next work is
#     bystander's slow TOAST table: autovacuum's second pass, after every main table, whatever their order in
#     pg_class.
slow_toast() {  # slow_toast TABLE: bystander's table whose TOAST table alone needs a slow vacuum, off for now
  as_role bystander -c "CREATE TABLE $1 (id int, pad text) WITH (autovacuum_enabled = off,
      toast.autovacuum_enabled = off, toast.autovacuum_vacuum_scale_factor = 0, toast.autovacuum_vacuum_threshold = 1,
      toast.autovacuum_vacuum_cost_delay = 10, toast.autovacuum_vacuum_cost_limit = 20);
    ALTER TABLE $1 ALTER pad SET STORAGE EXTERNAL;
    INSERT INTO $1 SELECT g, repeat('y', 8000) FROM generate_series(1, 600) g" -c "DELETE FROM $1 WHERE id % 2 = 0"
}
toast_vacuums() {
  q "SELECT autovacuum_count FROM pg_stat_all_tables WHERE relid = (SELECT reltoastrelid FROM pg_class WHERE relname = '$1')"
}
toast_vacuumed() {  # the worker's next work done, with its commit, where the cancelled vacuum is charged
  local i
  for i in $(seq 1 300); do [ "$(toast_vacuums "$TOAST")" -ge 1 ] && break; sleep 0.1; done
  sleep 1
}
# drop_cancels TABLE TOAST SQL: dropper's slow TABLE, bystander's TOAST next, the vacuum cancelled by SQL
drop_cancels() {
  slow_table dropper "$1" 200000 >/dev/null 2>"$DIR/p.err" || { not_ok "dropper's table $1"; cat "$DIR/p.err"; }
  as_role dropper -c "CREATE INDEX $1_brin ON $1 USING brin (a)" >/dev/null 2>>"$DIR/p.err"
  slow_toast "$2" >/dev/null 2>>"$DIR/p.err" || { not_ok "bystander's table $2"; cat "$DIR/p.err"; }
  as_role dropper -c "ALTER TABLE $1 SET (autovacuum_enabled = on)" >/dev/null &&
    as_role bystander -c "ALTER TABLE $2 SET (toast.autovacuum_enabled = on)" >/dev/null
  TOAST=$2 WHO=dropper cancel_seen vacuum "$1" "$3" toast_vacuumed
  echo "# the vacuum of dropper's table $1 was seen running for $ran ms before \"$3\" ended; charged $cc ms; $2's TOAST table vacuumed $(toast_vacuums "$2") time(s) after it"
}
drop_cancels owned owned_next "DROP OWNED BY dropper"
check "... by a DROP OWNED (the table is gone: $(q "SELECT count(*) FROM pg_class WHERE relname = 'owned'") left; the worker's next work done: $(toast_vacuums owned_next)); charged to the session that dropped it ($cc ms / $ran ms: $cr >= 0.8)" \
  eval '[ "$(q "SELECT count(*) FROM pg_class WHERE relname = '"'owned'"'")" = 0 ] && [ "$(toast_vacuums owned_next)" -ge 1 ] && fcmp "$cr" ">=" 0.8'
q "GRANT CREATE ON SCHEMA public TO dropper" >/dev/null  # (DROP OWNED revoked it)
drop_cancels summarized summarized_next "SELECT brin_summarize_new_values('summarized_brin'); DROP TABLE summarized"
check "... by a BRIN summarization, then a DROP TABLE in its transaction ($(q "SELECT count(*) FROM pg_class WHERE relname = 'summarized'") left, $(toast_vacuums summarized_next) next; $cc ms / $ran ms: $cr >= 0.8)" \
  eval '[ "$(q "SELECT count(*) FROM pg_class WHERE relname = '"'summarized'"'")" = 0 ] && [ "$(toast_vacuums summarized_next)" -ge 1 ] && fcmp "$cr" ">=" 0.8'

# 6. Turned off server-wide: the owner pays for its updates only.
q "ALTER SYSTEM SET ogc_throttle.charge_autovacuum = off" >/dev/null && q "SELECT pg_reload_conf()" >/dev/null
sleep 1
t0=$(tokens churner); v0=$(vacuums t)
churn churner t 4
for i in $(seq 1 20); do [ "$(vacuums t)" -ge $((v0 + 2)) ] && break; sleep 0.5; done
sleep 1
off=$(awk -v a="$t0" -v b="$(tokens churner)" 'BEGIN { printf "%.0f", a - b }')
check "with ogc_throttle.charge_autovacuum off, $(( $(vacuums t) - v0 )) vacuums of churner's table are not charged (4 updates: $off ms)" \
  fcmp "$off" "<" 100
q "SELECT count(*) FROM pg_settings WHERE name = 'ogc_throttle.charge_autovacuum' AND context = 'sighup'" > "$DIR/ctx"
check "... a server-wide setting (sighup)" grep -qx 1 "$DIR/ctx"

tap_exit
