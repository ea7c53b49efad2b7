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
