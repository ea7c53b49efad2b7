#!/usr/bin/env bash
# The fast-path function call protocol (libpq's PQfn) runs a function by OID
# outside any statement: no executor hook sees it. Before 0.2's function
# metering, a 500 ms PL/pgSQL function called this way cost nothing, and so did
# pg_sleep. Now a SQL/PL/C function called this way is metered as a statement
# (doc/metering.md, "Function calls outside a statement"); a built-in one is
# refused (0A000), except the large-object functions libpq's lo_* calls use.
set -uo pipefail
. "$(dirname "$0")/common.sh"
cluster_up 55489 "shared_preload_libraries = 'ogc_throttle'" "max_parallel_workers_per_gather = 0"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   CREATE ROLE fp LOGIN;
   ALTER ROLE fp SET ogc_throttle.mode = 'reject';
   ALTER ROLE fp SET ogc_throttle.capacity = 60000;
   ALTER ROLE fp SET ogc_throttle.rate = 0.01;
   CREATE FUNCTION burn(ms int) RETURNS int LANGUAGE plpgsql AS \$\$
   DECLARE x float8 := 0; t0 timestamptz := clock_timestamp(); BEGIN
     WHILE clock_timestamp() < t0 + make_interval(secs => ms / 1000.0) LOOP x := x + sqrt(x + 1); END LOOP;
     RETURN ms; END \$\$;" >/dev/null || { not_ok "setup"; tap_exit; }
PQFN=$(pg_readable_copy "$root/test/pg/pqfn.py")
BURN=$(q "SELECT 'burn(int)'::regprocedure::oid")
INT4PL=$(q "SELECT 'int4pl(int, int)'::regprocedure::oid")
LOCREAT=$(q "SELECT 'lo_creat(int)'::regprocedure::oid")
fn() { as_pg python3 "$PQFN" "host=$DIR port=$PORT user=fp dbname=postgres" "$@"; }
tokens() { q "SELECT tokens FROM throttle_peek('fp')"; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

q "SELECT throttle_reset('fp')" >/dev/null
r=$(fn "$BURN" int:500)
spent=$(awk -v b="$(tokens)" 'BEGIN { printf "%.1f", 60000 - b }')
echo "# PQfn burn(500): $r; bucket spent $spent ms"
check_eq "a PL/pgSQL function called through the fast path runs" "ok 500" "$r"
check "... and its 500 ms are charged ($spent >= 450)" ge "$spent" 450

# (int4pl stands for any built-in: pg_sleep, regexp_replace on a long text, repeat...)
r=$(fn "$INT4PL" int:2 int:2)
echo "# PQfn int4pl(2, 2): $r"
check "a built-in function (int4pl) through the fast path is refused with 0A000" grep -q '^error 0A000 ' <<<"$r"

r=$(fn "$LOCREAT" int:393216)
check "libpq's large-object calls (lo_creat) still work through the fast path ($r)" grep -qE '^ok [0-9]+$' <<<"$r"

# --- the rest of a fast-path message: its arguments' conversion, its implicit commit -----------------
# A call's arguments are converted before the function runs: a domain's CHECK
# runs there, built-in functions no hook times. Its implicit commit runs after
# the answer: deferrable UNIQUE rechecks run no executor pass at all. Both were
# free (charged 0.2 of 251 ms, and 1 139 of 1 768 ms, before the span reached
# the call's answer and the ReadyForQuery after it).
q "CREATE DOMAIN heavy AS text CHECK (md5(repeat(VALUE, 60)) <> '');
   CREATE FUNCTION take(h heavy) RETURNS int LANGUAGE sql AS 'SELECT 7';
   CREATE TABLE uq (id int UNIQUE DEFERRABLE INITIALLY DEFERRED); INSERT INTO uq SELECT generate_series(1, 300000);
   GRANT SELECT, UPDATE ON uq TO fp;
   ALTER ROLE fp SET ogc_throttle.charge_connection = off;
   CREATE FUNCTION bump() RETURNS int LANGUAGE plpgsql AS \$\$ BEGIN UPDATE uq SET id = id + 1; RETURN 1; END \$\$;
   CREATE FUNCTION bump_into_last() RETURNS int LANGUAGE plpgsql AS \$\$ BEGIN
     UPDATE uq SET id = id + 1 WHERE id < (SELECT max(id) FROM uq); RETURN 1; END \$\$" \
  >/dev/null || not_ok "setup of the conversion and commit checks"
TAKE=$(q "SELECT 'take(heavy)'::regprocedure::oid")
BUMP=$(q "SELECT 'bump()'::regprocedure::oid")
BUMP_INTO_LAST=$(q "SELECT 'bump_into_last()'::regprocedure::oid")
head -c 2000000 /dev/zero | tr '\0' 'x' >"$DIR/arg.txt" && chmod 644 "$DIR/arg.txt"
# spent_of FUNCTION ARG...: "<result> <client ms> <charged ms>"
spent_of() {
  local before r
  before=$(settled_tokens fp)
  r=$(as_pg python3 "$PQFN" --time "host=$DIR port=$PORT user=fp dbname=postgres" "$@")
  echo "$r $(awk -v a="$before" -v b="$(settled_tokens fp)" 'BEGIN { printf "%.1f", a - b }')"
}
charged_share() {  # description "<result...> took spent" fraction
  local took spent
  read -r took spent < <(awk '{ print $(NF - 1), $NF }' <<<"$2")
  check "$1 ($spent of $took ms, >= $3)" awk -v s="$spent" -v t="$took" -v f="$3" 'BEGIN { exit !(t > 100 && s >= f * t) }'
}
r=$(spent_of "$TAKE" "textfile:$DIR/arg.txt")
echo "# PQfn take(2 MB heavy): $r"
check "a fast-path call whose argument's domain CHECK works runs" grep -q '^ok 7 ' <<<"$r"
charged_share "... and the argument's conversion is charged" "$r" 0.85
r=$(spent_of "$BUMP")
echo "# PQfn bump() (an UPDATE of 300 000 rows, their rechecks at commit): $r"
check "a fast-path call that leaves deferrable UNIQUE rechecks runs" grep -q '^ok 1 ' <<<"$r"
charged_share "... and its implicit commit's rechecks are charged" "$r" 0.85
r=$(spent_of "$BUMP_INTO_LAST")
echo "# PQfn bump_into_last() (the same, its last recheck a violation): $r"
check "a fast-path call whose implicit commit fails fails with 23505" grep -q '^error 23505 ' <<<"$r"
charged_share "... and what it did up to the error is charged" "$r" 0.85

# --- over budget: cut off; in debt: refused ----------------------------------------------------------
q "ALTER ROLE fp SET ogc_throttle.capacity = 200; ALTER ROLE fp SET ogc_throttle.cutoff_grace = 0" >/dev/null
q "SELECT throttle_reset('fp')" >/dev/null
start=$(date +%s.%N)
r=$(fn "$BURN" int:5000)
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "# PQfn burn(5000) on a 200 ms budget: $r, after ${took}s"
check "a fast-path call past its budget is cancelled with 53T01" grep -q '^error 53T01 .*statement cancelled' <<<"$r"
check "... within 2 s" awk -v t="$took" 'BEGIN { exit !(t < 2) }'
r=$(fn "$BURN" int:10)
check "in debt, the next fast-path call is refused with 53T01" grep -q '^error 53T01 .*refused' <<<"$r"
# An argument's conversion runs before the call's own meter: a domain whose CHECK sleeps as long as
# the argument says ran to its end (5 s on a 200 ms budget, charged afterwards).
q "CREATE DOMAIN sleepy AS float8 CHECK (pg_sleep(VALUE / 1000)::text = '');
   CREATE FUNCTION nap_arg(s sleepy) RETURNS int LANGUAGE sql AS 'SELECT 1';
   SELECT throttle_reset('fp')" >/dev/null
start=$(date +%s.%N)
r=$(fn "$(q "SELECT 'nap_arg(sleepy)'::regprocedure::oid")" float8:5000)
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "# PQfn nap_arg(5000), its argument's CHECK sleeping 5 s, on a 200 ms budget: $r, after ${took}s"
check "a fast-path argument's conversion past the budget is cancelled with 53T01" grep -q '^error 53T01 .*cancelled' <<<"$r"
check "... within 2 s" awk -v t="$took" 'BEGIN { exit !(t < 2) }'
q "ALTER ROLE fp SET ogc_throttle.capacity = 60000; ALTER ROLE fp RESET ogc_throttle.cutoff_grace" >/dev/null

# --- log mode logs the built-in call and serves it; mode off meters nothing --------------------------
q "ALTER ROLE fp SET ogc_throttle.mode = 'log'" >/dev/null
r=$(fn "$INT4PL" int:2 int:2)
check_eq "in log mode a built-in fast-path call is served" "ok 4" "$r"
check "... and logged" grep -q 'would refuse a fast-path call of built-in function int4pl' "$DIR/server.log"
q "ALTER ROLE fp SET ogc_throttle.mode = 'off'" >/dev/null
q "SELECT throttle_reset('fp'); SELECT throttle_spend('fp', 1)" >/dev/null  # a bucket to read
before=$(tokens)
r=$(fn "$BURN" int:200)
check_eq "(control) with mode off, a fast-path call runs" "ok 200" "$r"
check "(control) ... and is free" awk -v a="$before" -v b="$(tokens)" 'BEGIN { exit !(a - b < 5) }'
tap_exit
