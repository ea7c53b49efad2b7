#!/usr/bin/env bash
# ogc_throttle.lazy_pricing: a statement whose bucket holds twice cost_max is admitted without
# pricing, against a deposit of cost_max while it runs, and pays its measured time; one in
# lazy_sample_every is priced anyway; a bucket short of twice cost_max prices (and refuses) as
# always; log mode prices; only a superuser changes either setting.
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55496 "shared_preload_libraries = 'ogc_throttle'" "ogc_throttle.mode = 'reject'" \
  "ogc_throttle.capacity = 10000" "ogc_throttle.rate = 0.01" "ogc_throttle.cost_max = 500" \
  "ogc_throttle.charge_connection = off" "ogc_throttle.lazy_sample_every = 0" \
  "ogc_throttle.radius_fixed_cost = 300"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle; CREATE ROLE plain LOGIN;
   CREATE TABLE pts AS SELECT i, ST_SetSRID(ST_MakePoint(i * 0.001, 0), 4326) AS geom FROM generate_series(1, 1000) i;" \
  >/dev/null || { not_ok "setup"; tap_exit; }

check_eq "lazy pricing is on by default (nothing sets it here)" on "$(q "SHOW ogc_throttle.lazy_pricing")"

STMT="SELECT count(*) FROM pts WHERE ST_DWithin(geom::geography, 'SRID=4326;POINT(0 0)'::geography, 500)"
priced() { q "SELECT statements_priced FROM throttle_stats"; }
tokens() { q "SELECT round(tokens::numeric, 2) FROM throttle_peek('postgres')"; }
# psql_s ARGS...: one session of postgres's, every -c in turn
psql_s() { pg_psql "$DIR" "$PORT" -d postgres -At "$@"; }

# --- a full bucket: admitted unpriced, charged its measured time, the deposit given back
p0=$(priced); t0=$(tokens)
last=$(psql_s -c "$STMT" -c "$STMT" -c "$STMT" -c "SELECT estimate, measured > 0, abs(charged - measured) < 0.5 FROM throttle_last_statement()" | tail -n 1)
p1=$(priced); t1=$(tokens)
echo "# three statements: priced $p0 -> $p1, tokens $t0 -> $t1; last statement (estimate|measured|charged = measured): $last"
check_eq "no statement was priced" "$p0" "$p1"
check_eq "the last one: no estimate (NULL), its measured time charged" "|t|t" "$last"
check "the bucket paid the measured time, not the 500 deposits (drop $t0 -> $t1)" \
  awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b < a && a - b < 400) }'

# --- while it runs, cost_max is held; at the end, its time (1.5 s) is what it paid
SLOW="SELECT pg_sleep(1.5), count(*) FROM pts WHERE ST_DWithin(geom::geography, 'SRID=4326;POINT(0 0)'::geography, 500)"
before=$(tokens)
( psql_s -c "$SLOW" >"$DIR/slow.out" 2>"$DIR/slow.err" ) &
BG_PIDS+=($!)
sleep 0.7
during=$(tokens)
wait "${BG_PIDS[@]}"; BG_PIDS=()
after=$(tokens)
echo "# a 1.5 s statement: tokens $before, while it ran $during, after $after"
check "it ran" grep -q '^|4' "$DIR/slow.out"
check "while it ran, its bucket held cost_max (500) for it" \
  awk -v a="$before" -v b="$during" 'BEGIN { exit !(a - b >= 499 && a - b < 520) }'
check "then it paid its 1.5 s (1400-1700 ms)" \
  awk -v a="$before" -v b="$after" 'BEGIN { exit !(a - b >= 1400 && a - b <= 1700) }'

# --- one in lazy_sample_every priced anyway (for calibration samples)
p0=$(priced)
args=(-c "SET ogc_throttle.lazy_sample_every = 4")
for _ in 1 2 3 4 5 6 7 8; do args+=(-c "$STMT"); done
psql_s "${args[@]}" >/dev/null
check_eq "lazy_sample_every = 4: two of eight statements priced" "$((p0 + 2))" "$(priced)"

# --- a bucket short of twice cost_max prices: admitted when its estimate fits, refused when not
drain() {  # drain TO: leaves about TO tokens (this session unpriced: lazy_pricing off)
  psql_s -c "SET ogc_throttle.lazy_pricing = off" -c "SELECT throttle_spend('postgres', tokens - $1) FROM throttle_peek('postgres')" >/dev/null
}
drain 800
p0=$(priced)
out=$(psql_s -c "$STMT" 2>&1)
check_eq "800 tokens, under twice cost_max: priced and admitted" "4|$((p0 + 1))" "$out|$(priced)"
drain 450
p0=$(priced)
out=$(psql_s -c "$STMT" 2>&1)
check_eq "450 tokens, under cost_max: priced (estimate ~300) and admitted" "4|$((p0 + 1))" "$out|$(priced)"
drain 150
err=$(psql_s -v VERBOSITY=verbose -c "$STMT" 2>&1 >/dev/null)
check "150 tokens: refused with SQLSTATE 53T01, as without lazy pricing" \
  grep -q 'ERROR:  53T01: ogc_throttle: statement refused' <<<"$err"

# --- eight at once on a small bucket: lazy admission admits what pricing does (the first holds
# cost_max, 500, where a priced one holds its estimate, ~300, and leaves 700: the rest are priced)
SLOW1="SELECT pg_sleep(1), count(*) FROM pts WHERE ST_DWithin(geom::geography, 'SRID=4326;POINT(0 0)'::geography, 500)"
burst() {  # burst on|off -> statements admitted of eight started together (1 s each, under the cut-off) on a bucket of 1200
  psql_s -c "SET ogc_throttle.lazy_pricing = off" -c "SELECT throttle_reset('postgres')" >/dev/null
  local i
  for i in 1 2 3 4 5 6 7 8; do
    ( psql_s -c "SET ogc_throttle.capacity = 1200" -c "SET ogc_throttle.lazy_pricing = $1" -c "$SLOW1" \
        >"$DIR/burst$i.out" 2>"$DIR/burst$i.err" ) &
    BG_PIDS+=($!)
  done
  wait "${BG_PIDS[@]}"; BG_PIDS=()
  echo "$(cat "$DIR"/burst*.out | grep -c '^|4') $(cat "$DIR"/burst*.err | grep -c 'statement refused')"
}
read -r lazy_in lazy_out <<<"$(burst on)"
read -r priced_in priced_out <<<"$(burst off)"
echo "# eight 1 s statements on 1200 tokens: lazy admitted $lazy_in (refused $lazy_out), priced admitted $priced_in (refused $priced_out)"
check "each was admitted or refused (lazy $lazy_in + $lazy_out, priced $priced_in + $priced_out)" \
  test "$((lazy_in + lazy_out))" = 8 -a "$((priced_in + priced_out))" = 8
check "lazy pricing admitted as many as pricing did ($lazy_in = $priced_in, at least 2)" \
  test "$lazy_in" -ge 2 -a "$lazy_in" = "$priced_in"

# --- log mode prices every statement (its log says what would be refused)
q "SELECT throttle_reset_all()" >/dev/null
p0=$(priced)
psql_s -c "SET ogc_throttle.mode = 'log'" -c "$STMT" >/dev/null
check_eq "log mode: priced" "$((p0 + 1))" "$(priced)"

# --- the throttled role cannot switch it either way
err=$(pg_psql "$DIR" "$PORT" -U plain -d postgres -At -c "SET ogc_throttle.lazy_pricing = off" 2>&1)
check "a plain role may not set ogc_throttle.lazy_pricing" grep -q 'permission denied' <<<"$err"
err=$(pg_psql "$DIR" "$PORT" -U plain -d postgres -At -c "SET ogc_throttle.lazy_sample_every = 1" 2>&1)
check "... nor ogc_throttle.lazy_sample_every" grep -q 'permission denied' <<<"$err"

tap_exit
