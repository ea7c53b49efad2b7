#!/usr/bin/env bash
# Work before admission and work that dodges its cancel, as a throttled role would try them:
# - a function the planner folds (an IMMUTABLE one the role wrote, spinning in PL/pgSQL with no
#   statement inside) runs while the statement is planned;
# - a function in a pricing argument (a generic plan's ST_DWithin radius) runs while it is priced;
# - a function in EXECUTE's parameters runs before anything is planned;
# - a domain's CHECK runs when a parameter is converted to the domain, in a Bind and in EXECUTE's
#   literal parameters, before anything is planned: a function the role wrote, or pg_sleep(VALUE);
# - a function in a generic plan's initial partition pruning runs in the executor's start;
# all had no deadline and ran as long as they liked on a budget of 300 ms. Each is now cut off
# as an executor pass is, with 53T01, and charged.
# - a function that catches its cancel (WHEN OTHERS catches 53T01, where it leaves a plain cancel
#   alone) and goes on is cancelled again as PostgreSQL cancels (57014), which it cannot catch so.
# - delay mode: an unpriced statement on a full bucket was cut off at the grace (the reservation's
#   tokens read as 0); it runs on the tokens the bucket holds.
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55497 "shared_preload_libraries = 'ogc_throttle'" "max_parallel_workers_per_gather = 0"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   CREATE ROLE plain LOGIN; GRANT CREATE ON SCHEMA public TO plain;
   CREATE TABLE pts AS SELECT i, ST_SetSRID(ST_MakePoint(i * 0.001, 0), 4326) AS geom FROM generate_series(1, 1000) i;
   CREATE TABLE few AS SELECT i, ST_SetSRID(ST_MakePoint(i * 0.001, 0), 4326) AS geom FROM generate_series(1, 3) i;
   GRANT SELECT ON pts, few TO plain;
   ALTER ROLE plain SET ogc_throttle.mode = 'reject';
   ALTER ROLE plain SET ogc_throttle.capacity = 300;
   ALTER ROLE plain SET ogc_throttle.rate = 0.01;
   ALTER ROLE plain SET ogc_throttle.cutoff_grace = '100ms';
   ALTER ROLE plain SET ogc_throttle.charge_connection = off;" >/dev/null || { not_ok "setup"; tap_exit; }

# p SQL...: one session of plain's (stdout -At, stderr in $DIR/p.err); its seconds in $DIR/took
# (p runs in $(...), a subshell)
p() {
  local t0; t0=$(date +%s%N)
  as_pg psql -X -h "$DIR" -p "$PORT" -U plain -d postgres -At -v VERBOSITY=verbose "$@" 2>"$DIR/p.err"
  awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }' >"$DIR/took"
}
tokens() { q "SELECT round(tokens) FROM throttle_peek('plain')"; }
reset() { q "SELECT throttle_reset('plain')" >/dev/null; }
# (psql's own start and the set-up of a session are a few tenths of a second on this VM)
within() { fcmp "$(cat "$DIR/took")" "<" "$1"; }

p -c 'CREATE FUNCTION spin(ms float8) RETURNS float8 IMMUTABLE LANGUAGE plpgsql AS $$
        DECLARE t timestamptz := clock_timestamp(); n bigint := 0;
        BEGIN WHILE clock_timestamp() < t + ms * interval '"'"'1 ms'"'"' LOOP n := n + 1; END LOOP; RETURN 0.01; END $$;
      CREATE FUNCTION stubborn(n int) RETURNS int LANGUAGE plpgsql AS $$
        DECLARE caught int := 0;
        BEGIN FOR i IN 1..n LOOP
          BEGIN PERFORM count(*) FROM generate_series(1, 2000000);
          EXCEPTION WHEN OTHERS THEN caught := caught + 1; END;
        END LOOP; RETURN caught; END $$;' >/dev/null
[ -s "$DIR/p.err" ] && { not_ok "functions created"; cat "$DIR/p.err"; tap_exit; }

# --- folded at plan time: 5 s of PL/pgSQL on a 300 ms budget
reset
out=$(p -c "SELECT spin(5000)")
echo "# spin(5000), folded while planning: after $(cat "$DIR/took")s, tokens $(tokens); $(grep -m2 -E 'ERROR|DETAIL' "$DIR/p.err" | tr '\n' ' ')"
check "planning past the budget is cancelled with 53T01" grep -q 'ERROR:  53T01: ogc_throttle: statement cancelled' "$DIR/p.err"
check "planning: within 2 s, not after the function's 5 s" within 2
check "DETAIL says what it used and what the budget allowed" grep -qE 'DETAIL:  It used [0-9]+ ms of server time; its budget allowed (3[5-9][0-9]|40[0-9]) ms' "$DIR/p.err"
check "its time is charged (the bucket in debt)" fcmp "$(tokens)" "<" 0

# --- evaluated while pricing: a generic plan's radius is spin($1), run before the statement is admitted
reset
out=$(p -c "SET plan_cache_mode = force_generic_plan" \
        -c "PREPARE r(float8) AS SELECT count(*) FROM pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(0 0)'::geometry, spin(\$1))" \
        -c "EXECUTE r(5000)")
echo "# EXECUTE r(5000), spin(\$1) evaluated while pricing: after $(cat "$DIR/took")s, tokens $(tokens); $(grep -m1 ERROR "$DIR/p.err")"
check "pricing past the budget is cancelled with 53T01" grep -q 'ERROR:  53T01: ogc_throttle: statement cancelled' "$DIR/p.err"
check "pricing: within 2 s, not after the function's 5 s" within 2
check "its time is charged (the bucket in debt)" fcmp "$(tokens)" "<" 0
reset
out=$(p -c "SET plan_cache_mode = force_generic_plan" \
        -c "PREPARE r(float8) AS SELECT count(*) FROM few WHERE ST_DWithin(geom, 'SRID=4326;POINT(0 0)'::geometry, spin(\$1))" \
        -c "EXECUTE r(20)" -c "SELECT 'next', 1")
check "(control) a radius within the budget (20 ms to price, 3 rows of 20 ms to run) is priced and run" grep -qx 'next|1' <<<"$out"
check_eq "(control) ... without an error" "" "$(cat "$DIR/p.err")"

# --- evaluated by EXECUTE before anything else: its parameters
reset
out=$(p -c "PREPARE e(float8) AS SELECT \$1" -c "EXECUTE e(spin(5000))")
echo "# EXECUTE e(spin(5000)): after $(cat "$DIR/took")s, tokens $(tokens); $(grep -m1 ERROR "$DIR/p.err")"
check "EXECUTE's parameters past the budget are cancelled with 53T01" grep -q 'ERROR:  53T01: ogc_throttle: statement cancelled' "$DIR/p.err"
check "EXECUTE: within 2 s, not after the function's 5 s" within 2
reset
out=$(p -c "PREPARE e(float8) AS SELECT \$1" -c "EXECUTE e(2.5)" -c "EXECUTE e(spin(10))")
check_eq "(control) EXECUTE with a literal, and with a short function, answer" "PREPARE 2.5 0.01" "$(echo $out)"

# --- a parameter's conversion, before anything is planned or started: a domain's CHECK runs where a
#     parameter becomes the domain's type, in a Bind (the extended protocol, as every driver sends
#     parameters) and in EXECUTE's evaluation of its literal parameters. It may call a function the
#     role wrote (spin) or a built-in one (pg_sleep) for as long as the parameter says.
p -c 'CREATE DOMAIN slowd AS float8 CHECK (spin(VALUE) > 0)' \
  -c "CREATE DOMAIN sleepy AS float8 CHECK (pg_sleep(VALUE / 1000)::text = '')" >/dev/null
PQEXEC=$(pg_readable_copy "$root/test/pg/pqexec.py")
printf 'SELECT $1::slowd' >"$DIR/slowd.sql"; printf 'SELECT $1::sleepy' >"$DIR/sleepy.sql"
printf 5000 >"$DIR/p5000"; printf 20 >"$DIR/p20"
chmod 644 "$DIR/slowd.sql" "$DIR/sleepy.sql" "$DIR/p5000" "$DIR/p20"
bind() { as_pg python3 "$PQEXEC" "host=$DIR port=$PORT user=plain dbname=postgres" "$DIR/$1.sql" "$DIR/$2"; }
bind_ms() { awk '{ print $1 == "ok" ? $2 : $3 }' <<<"$1"; }
for d in slowd sleepy; do
  reset
  r=$(bind $d p5000)
  echo "# Bind of \$1::$d = 5000 (its CHECK runs 5 s): $r; tokens $(tokens)"
  check "$d: a Bind's parameter conversion past the budget is cancelled with 53T01" grep -q '^error 53T01 ' <<<"$r"
  check "$d: ... within 2 s, not after the CHECK's 5 s" fcmp "$(bind_ms "$r")" "<" 2000
  check "$d: ... its time is charged (the bucket in debt)" fcmp "$(tokens)" "<" 0
  reset
  r=$(bind $d p20)
  check "(control) $d: a Bind whose CHECK takes 20 ms answers" grep -q '^ok ' <<<"$r"
  reset
  out=$(p -c "PREPARE d($d) AS SELECT \$1" -c "EXECUTE d(5000)")
  echo "# EXECUTE d(5000), a literal converted to $d: after $(cat "$DIR/took")s, tokens $(tokens); $(grep -m1 ERROR "$DIR/p.err")"
  check "$d: EXECUTE's literal parameter past the budget is cancelled with 53T01" \
    grep -q 'ERROR:  53T01: ogc_throttle: statement cancelled' "$DIR/p.err"
  check "$d: ... within 2 s, not after the CHECK's 5 s" within 2
  reset
  out=$(p -c "PREPARE d($d) AS SELECT \$1" -c "EXECUTE d('x')" -c "EXECUTE d(20)" -c "SELECT 'next'")
  check_eq "(control) $d: ... and with 20 ms of CHECK, answers, after a conversion that failed" \
    "PREPARE 20 next" "$(echo $out)"
  check "(control) $d: ... which failed with its own error" grep -q 'ERROR:  22P02: invalid input syntax for type double precision' "$DIR/p.err"
done
# Other spellings of the same conversion: an array of the domain, a domain over it, a composite type
# with a column of it (each converts element by element through the domain's input).
p -c 'CREATE DOMAIN sleepy2 AS sleepy' -c 'CREATE TYPE with_sleepy AS (x sleepy)' >/dev/null
for spelled in "sleepy[]|'{5000}'" "sleepy2|'5000'" "with_sleepy|'(5000)'"; do
  reset
  out=$(p -c "PREPARE s2(${spelled%%|*}) AS SELECT \$1" -c "EXECUTE s2(${spelled#*|})")
  check "EXECUTE of ${spelled%%|*} ${spelled#*|} is cancelled with 53T01" \
    grep -q 'ERROR:  53T01: ogc_throttle: statement cancelled' "$DIR/p.err"
  check "... within 2 s" within 2
done
# A CHECK whose function catches its cancel (53T01, inside its own subtransactions) goes no further:
# the queries it runs after it are refused (the bucket is in debt), and so is the EXECUTE.
reset  # (in debt, the CREATE DOMAIN would be refused)
p -c 'CREATE DOMAIN stubd AS int CHECK (stubborn(VALUE) >= 0)' >/dev/null
reset
out=$(p -c "PREPARE s(stubd) AS SELECT \$1" -c "EXECUTE s(200)" -c "SELECT 'after'")
echo "# EXECUTE s(200), a CHECK that catches each cancel: after $(cat "$DIR/took")s; $(grep ERROR "$DIR/p.err" | tr '\n' ' ')"
check_eq "a CHECK that catches its 53T01 gets no answer" "PREPARE" "$(echo $out)"
check "... the EXECUTE fails with 53T01" grep -q 'ERROR:  53T01: ogc_throttle: statement' "$DIR/p.err"
check "... within 2 s, not after its 20 s of loop" within 2
# A conversion in a bucket in debt is refused, as a cursor's further pass is, before its CHECK runs.
reset
p -c "SELECT pg_sleep(1)" >/dev/null  # cut off at 0.4 s: the bucket in debt
debt=$(tokens)
out=$(p -c "PREPARE d(sleepy) AS SELECT \$1" -c "EXECUTE d(5000)")
echo "# EXECUTE d(5000) on $debt tokens: after $(cat "$DIR/took")s; $(grep -m1 ERROR "$DIR/p.err")"
check "a conversion while the bucket is in debt is refused (53T01) at once" \
  grep -q 'ERROR:  53T01: ogc_throttle: statement refused: budget exhausted' "$DIR/p.err"
check "... not after the CHECK's 5 s" within 2
reset

# --- evaluated by the executor's start: a generic plan's initial partition pruning
p -c "CREATE TABLE pt (k float8) PARTITION BY RANGE (k);
      CREATE TABLE pt1 PARTITION OF pt FOR VALUES FROM (0) TO (1);
      CREATE TABLE pt2 PARTITION OF pt FOR VALUES FROM (1) TO (2)" >/dev/null
reset
out=$(p -c "SET plan_cache_mode = force_generic_plan" -c "PREPARE k(float8) AS SELECT count(*) FROM pt WHERE k = spin(\$1)" \
        -c "EXPLAIN (COSTS OFF) EXECUTE k(0)" -c "EXECUTE k(5000)")
echo "# EXECUTE k(5000), spin(\$1) in the initial pruning: after $(cat "$DIR/took")s, tokens $(tokens); $(grep -m1 ERROR "$DIR/p.err")"
check "(control) the plan prunes partitions at the executor's start" grep -q 'Subplans Removed' <<<"$out"
check "the executor's start past the budget is cancelled with 53T01" grep -q 'ERROR:  53T01: ogc_throttle: statement cancelled' "$DIR/p.err"
check "pruning: within 2 s, not after the function's 5 s" within 2
# ... and a domain's CHECK in a pruning step, in a plan that calls only built-in functions (pg_sleep
# is volatile, and could not be a pruning step itself; hidden in the domain, it is)
reset
out=$(p -c "SET plan_cache_mode = force_generic_plan" -c "PREPARE kd(float8) AS SELECT count(*) FROM pt WHERE k = \$1::sleepy" \
        -c "EXPLAIN (COSTS OFF) EXECUTE kd('0')" -c "EXECUTE kd('5000')")
echo "# EXECUTE kd('5000'), \$1::sleepy in the initial pruning: after $(cat "$DIR/took")s, tokens $(tokens); $(grep -m1 ERROR "$DIR/p.err")"
check "(control) that plan prunes partitions at the executor's start too" grep -q 'Subplans Removed' <<<"$out"
check "a domain's CHECK in the executor's start past the budget is cancelled with 53T01" \
  grep -q 'ERROR:  53T01: ogc_throttle: statement cancelled' "$DIR/p.err"
check "... within 2 s, not after the CHECK's 5 s" within 2
q "ALTER ROLE plain SET plan_cache_mode = force_generic_plan" >/dev/null
printf 'SELECT count(*) FROM pt WHERE k = $1::sleepy' >"$DIR/prune.sql"; chmod 644 "$DIR/prune.sql"
reset
r=$(as_pg python3 "$PQEXEC" "host=$DIR port=$PORT user=plain dbname=postgres" "$DIR/prune.sql" "$DIR/p5000" --prepare-then-wait 0)
q "ALTER ROLE plain RESET plan_cache_mode" >/dev/null
echo "# the same through the extended protocol (Parse, then Bind and Execute of the generic plan): $r"
check "... and through the extended protocol" grep -q '^error 53T01 ' <<<"$r"
check "... within 2 s" fcmp "$(bind_ms "$r")" "<" 2000

# --- a statement that catches its cancel and goes on
reset
out=$(p -c "SELECT stubborn(200)" -c "SELECT 'caught', count(*) FROM pg_stat_activity WHERE usename = 'plain'")
echo "# stubborn(200) (200 x ~100 ms, each caught WHEN OTHERS): after $(cat "$DIR/took")s; $(grep ERROR "$DIR/p.err" | tr '\n' ' ')"
check "it is cancelled again, with 57014, which WHEN OTHERS does not catch" \
  grep -q 'ERROR:  57014: ogc_throttle: statement cancelled again: identity "plain" ran past its budget and caught the first cancellation (53T01)' "$DIR/p.err"
check "within 2 s, not after its 20 s of loop" within 2

# --- delay mode: the tokens a reservation leaves are the statement's allowance
q "ALTER ROLE plain SET ogc_throttle.mode = 'delay'; ALTER ROLE plain SET ogc_throttle.capacity = 60000;
   ALTER ROLE plain SET ogc_throttle.rate = 1" >/dev/null
reset
out=$(p -c "SELECT 'slept', pg_sleep(2.5)" -c "SELECT round(measured), cutoff FROM throttle_last_statement()")
echo "# delay mode, pg_sleep(2.5) on a full 60 s bucket: $(tr '\n' ' ' <<<"$out") after $(cat "$DIR/took")s; $(grep -m1 ERROR "$DIR/p.err")"
check "a statement within a full bucket runs to its end in delay mode" grep -qx 'slept|' <<<"$out"
check "... not cut off" grep -qE '^25[0-9][0-9]\|f$' <<<"$out"
q "ALTER ROLE plain SET ogc_throttle.capacity = 300; ALTER ROLE plain SET ogc_throttle.rate = 0.01" >/dev/null
reset
out=$(p -c "SELECT pg_sleep(5)")
echo "# delay mode, pg_sleep(5) on a 300 ms bucket: after $(cat "$DIR/took")s; $(grep -m1 ERROR "$DIR/p.err")"
check "(control) delay mode still cuts off a statement past its bucket" grep -q '53T01: ogc_throttle: statement cancelled' "$DIR/p.err"
check "(control) ... within 2 s" within 2

# A conversion's stage ends where the statement waits for its turn: the wait is the admission's, and
# what follows it is metered. Priced at 200 on about 70 tokens, the statement waits 1.3 s, well past
# the 180 ms its parameter's conversion was allowed.
q "ALTER ROLE plain SET ogc_throttle.rate = 100; ALTER ROLE plain SET ogc_throttle.statement_fixed_cost = 200" >/dev/null
printf "SELECT count(*) FROM pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(0 0)'::geometry, \$1::slowd)" >"$DIR/priced.sql"
chmod 644 "$DIR/priced.sql"
reset
p -c "SELECT pg_sleep(0.25)" >/dev/null
r=$(bind priced p20)
echo "# delay mode, a Bind converting \$1::slowd (20 ms of CHECK), then waiting its turn for a price of 200: $r"
check "a statement whose parameter's conversion began a stage waits its turn and runs" grep -q '^ok ' <<<"$r"
check "... after its wait (over 0.5 s)" fcmp "$(bind_ms "$r")" ">" 500

tap_exit
