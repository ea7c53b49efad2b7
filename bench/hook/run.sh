#!/usr/bin/env bash
# Cost of the pricing hook (issue 3), from one run: two clusters side by side,
#   A  ogc_throttle preloaded, ogc_throttle.mode = 'reject' with a budget nothing
#      ever exhausts and the other settings at their defaults: every statement is
#      admitted, timed and trued up (the refill of 500 ms/s is below one core, so the
#      cut-off timer is armed), and, under lazy pricing, one PostGIS statement in 16
#      is priced (A_CONF='ogc_throttle.lazy_pricing = off': every one, the plan walk,
#      argument evaluation and pricing included);
#   B  the same PostgreSQL without the library,
# same data, same settings otherwise. pgbench -M prepared, 2 clients, alternating
# A/B over several rounds, for select-only (-S, nothing to price) and a PostGIS
# script (ST_DWithin + an ST_AsMVT tile, random arguments); select-only with a
# new connection per transaction (-C). Then one extra pair of each with A at
# mode 'off' (library loaded, hook returns at once). tps and server CPU per
# transaction (from the postmaster's reaped-children times) for every run.
# Not part of the tests. Everything started is stopped on exit.
# Knobs (environment): ROUNDS (5), SECS per pgbench run (6), OFF_ROUNDS (1), CONNECT_ROUNDS (3), A_CONF,
# NPOINTS (200000), SCALE (pgbench -i scale, 1), GRID (1: a density grid for pts.geom on A),
# CLIENTS (2: pgbench -c and -j; 1 leaves out what two backends sharing one bucket cost each other),
# IDENTITIES (1: every client logs in as the same role, one bucket for all, as a pool's connections share one;
# CLIENTS: each client its own login role and pgbench process, so no two backends visit one bucket: the two
# settings' difference is what sharing a bucket costs).
# PGOPTIONS reaches every client of both clusters: PGOPTIONS='-c plan_cache_mode=force_generic_plan' times
# generic plans on A and B alike (what PostgreSQL may settle on for a prepared statement after its fifth
# execution, a tile server's among them).
# PEER=lib (say, pg_stat_statements): a third cluster P, the same data, with that library preloaded
# instead, timed in the same rounds (select-only and PostGIS): what a per-statement meter most
# operators already run costs the same workload, next to A's figure. P/B rows carry no target.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/test/lib/pg.sh"

ROUNDS=${ROUNDS:-5}
SECS=${SECS:-6}
OFF_ROUNDS=${OFF_ROUNDS:-1}
CONNECT_ROUNDS=${CONNECT_ROUNDS:-3}
NPOINTS=${NPOINTS:-200000}
SCALE=${SCALE:-1}
CLIENTS=${CLIENTS:-2}
IDENTITIES=${IDENTITIES:-1}
[ "$IDENTITIES" = 1 ] || [ "$IDENTITIES" = "$CLIENTS" ] || { echo "run.sh: IDENTITIES is 1 or CLIENTS" >&2; exit 2; }
PGBENCH=/usr/lib/postgresql/15/bin/pgbench
[ -x "$PGBENCH" ] || PGBENCH="$PGBIN/pgbench"
# Unix sockets only (listen_addresses = ''), each in its own private directory;
# the port numbers only name the sockets. Kept in 56400-56420.
PORT_A=${PORT_A:-56401}
PORT_B=${PORT_B:-56402}
PORT_P=${PORT_P:-56404}
PEER=${PEER:-}

. "$here/two_clusters.sh"
two_cluster_workdir
# bounded SECONDS CMD...: a client program run as postgres with a wall-clock limit
bounded() { local s=$1; shift; as_pg timeout --kill-after=5 "$s" "$@"; }
# psql_to DIR PORT SECONDS [psql args...]
psql_to() {
  local dir=$1 port=$2 s=$3; shift 3
  bounded "$s" psql -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres "$@"
}

cp "$here/setup.sql" "$here/postgis.pgbench" "$work/" && chmod 644 "$work"/*.sql "$work"/*.pgbench || die "copy failed"

common_conf=(
  "max_connections = 20"
  "shared_buffers = '128MB'"
  "synchronous_commit = off"
  "jit = off"
  # read-only workload after a VACUUM ANALYZE: autovacuum would only add noise
  "autovacuum = off"
)
# A_CONF: more settings for A, separated by ';' (say, 'ogc_throttle.true_up = off'), to tell what
# part of the hook's work costs what.
IFS=';' read -r -a a_conf <<<"${A_CONF:-}"
[ -n "${A_CONF:-}" ] && echo "# A's further settings: $A_CONF"
pg_cluster_init "$A" "${common_conf[@]}" \
  "shared_preload_libraries = 'ogc_throttle'" \
  "ogc_throttle.mode = 'reject'" \
  "ogc_throttle.capacity = 1000000000" \
  "ogc_throttle.rate = 500" \
  "ogc_throttle.cost_max = 1000000" "${a_conf[@]}" || die "initdb A failed"
pg_cluster_init "$B" "${common_conf[@]}" || die "initdb B failed"
P="$work/p"
sides=(A B)
if [ -n "$PEER" ]; then
  pg_cluster_init "$P" "${common_conf[@]}" "shared_preload_libraries = '$PEER'" || die "initdb P failed"
  sides+=(P)
fi
libfile="$(pg_config --pkglibdir)/ogc_throttle.so"
libid() { echo "$(md5sum <"$libfile" | cut -c1-12), installed $(date -r "$libfile" '+%F %T')"; }
lib_at_start=$(libid)
pg_start "$A" "$PORT_A" || { tail -n 20 "$A/server.log"; die "A did not start"; }
started+=("$A")
pg_start "$B" "$PORT_B" || { tail -n 20 "$B/server.log"; die "B did not start"; }
started+=("$B")
if [ -n "$PEER" ]; then
  pg_start "$P" "$PORT_P" || { tail -n 20 "$P/server.log"; die "P ($PEER) did not start"; }
  started+=("$P")
fi

qa() { psql_to "$A" "$PORT_A" 120 -d postgres -At -c "$1"; }
qb() { psql_to "$B" "$PORT_B" 120 -d postgres -At -c "$1"; }
qp() { psql_to "$P" "$PORT_P" 120 -d postgres -At -c "$1"; }

echo "# setup: pgbench -i -s $SCALE and $NPOINTS points with a GiST index in ${sides[*]}"
for c in "${sides[@]}"; do
  d=$A; p=$PORT_A; [ $c = B ] && { d=$B; p=$PORT_B; }; [ $c = P ] && { d=$P; p=$PORT_P; }
  bounded 300 "$PGBENCH" -i -q -s "$SCALE" -h "$d" -p "$p" -U postgres postgres >"$work/init_$c.log" 2>&1 ||
    { cat "$work/init_$c.log"; die "pgbench -i failed on $c"; }
  psql_to "$d" "$p" 300 -d postgres -v npoints="$NPOINTS" -f "$work/setup.sql" >/dev/null ||
    die "setup.sql failed on $c"
  psql_to "$d" "$p" 120 -d postgres -c "VACUUM ANALYZE" -c "CHECKPOINT" >/dev/null || die "vacuum failed on $c"
  # IDENTITIES=CLIENTS: one login role per client, superusers as postgres is (metered alike)
  for i in $(seq 0 $((CLIENTS - 1))); do
    psql_to "$d" "$p" 60 -d postgres -c "CREATE ROLE bench_client_$i LOGIN SUPERUSER" >/dev/null || die "role failed on $c"
  done
done
qa "CREATE EXTENSION ogc_throttle" >/dev/null || die "CREATE EXTENSION ogc_throttle failed on A"
# GRID=1 (default): the density grid doc/cost-model.md tells an operator to build for a searched
# column; GRID=0 leaves the pricing walk to PostGIS's statistics (the fallback, far dearer per statement).
if [ "${GRID:-1}" = 1 ]; then
  qa "SELECT throttle_density_build('pts', 'geom')" >/dev/null || die "throttle_density_build failed on A"
fi

echo "# A: shared_preload_libraries = '$(qa 'SHOW shared_preload_libraries')', mode = $(qa 'SHOW ogc_throttle.mode'), capacity = $(qa 'SHOW ogc_throttle.capacity'), rate = $(qa 'SHOW ogc_throttle.rate'), cost_max = $(qa 'SHOW ogc_throttle.cost_max')"
echo "# A loaded $libfile: md5 $lib_at_start"
echo "# B: shared_preload_libraries = '$(qb 'SHOW shared_preload_libraries')', ogc_throttle loaded: $(qb "SELECT count(*) > 0 FROM pg_settings WHERE name LIKE 'ogc_throttle.%'")"
[ "$(qb "SELECT count(*) FROM pg_settings WHERE name LIKE 'ogc_throttle.%'")" = 0 ] || die "B has the library loaded"
if [ -n "$PEER" ]; then
  echo "# P: shared_preload_libraries = '$(qp 'SHOW shared_preload_libraries')', compute_query_id = $(qp 'SHOW compute_query_id'), ogc_throttle loaded: $(qp "SELECT count(*) > 0 FROM pg_settings WHERE name LIKE 'ogc_throttle.%'")"
  [ "$(qp 'SHOW shared_preload_libraries')" = "$PEER" ] || die "P did not preload $PEER"
fi
PGBENCH_SEED=${PGBENCH_SEED:-4242}
plan_q="EXPLAIN (COSTS OFF) SELECT count(*) FROM pts WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint(1000000, 6500000), 3857), 2000)"
plan_a=$(qa "$plan_q" | tr '\n' ' '); plan_b=$(qb "$plan_q" | tr '\n' ' ')
echo "# same plans: $([ "$plan_a" = "$plan_b" ] && echo yes || echo "NO: A $plan_a / B $plan_b")"
echo "# same data: A $(qa "SELECT count(*) || ' points, ' || (SELECT count(*) FROM pgbench_accounts) || ' accounts, checksum ' || sum(hashtext(ST_AsText(geom))::numeric) FROM pts")"
echo "#            B $(qb "SELECT count(*) || ' points, ' || (SELECT count(*) FROM pgbench_accounts) || ' accounts, checksum ' || sum(hashtext(ST_AsText(geom))::numeric) FROM pts")"

# Server CPU, robust to other load on the machine: a backend's CPU time is
# added to the postmaster's cutime + cstime when it exits and is reaped, so the
# postmaster's children-time difference across a pgbench run (pgbench opens
# its own connections and closes them at the end) is the CPU its backends used.
CLK_TCK=$(getconf CLK_TCK)
postmaster_pid() { head -n 1 "$1/data/postmaster.pid"; }
children_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $14 + $15 }'; }
nchildren() { ps -o pid= --ppid "$1" | wc -l; }

# pgbench_run CLUSTER(A|B) SCRIPT(select|postgis) SECS|-tN -> tps (or nan);
# leaves the server CPU microseconds per transaction in $work/last_cpu.
pgbench_run() {
  local d=$A p=$PORT_A len=(-T "$3") script=(-S)
  [ "$1" = B ] && { d=$B; p=$PORT_B; }
  [ "$1" = P ] && { d=$P; p=$PORT_P; }
  [ "$2" = postgis ] && script=(-f "$work/postgis.pgbench")
  [ "$2" = connect ] && script=(-S -C)
  case $3 in -t*) len=("$3") ;; esac
  local pm base t0 t1 ntx
  pm=$(postmaster_pid "$d"); base=$(nchildren "$pm"); t0=$(children_ticks "$pm")
  # One seed for the run: A and B get the same sequence of random arguments.
  if [ "$IDENTITIES" = 1 ]; then
    bounded $((SECS + 90)) "$PGBENCH" -n -M prepared -c "$CLIENTS" -j "$CLIENTS" --random-seed="$PGBENCH_SEED" "${len[@]}" "${script[@]}" \
      -h "$d" -p "$p" -U postgres postgres >"$work/last_pgbench.log" 2>&1
  else
    # one pgbench process per client and role, at once; their tps and transactions add up
    local i pids=()
    for i in $(seq 0 $((CLIENTS - 1))); do
      bounded $((SECS + 90)) "$PGBENCH" -n -M prepared -c 1 -j 1 --random-seed=$((PGBENCH_SEED + i)) "${len[@]}" "${script[@]}" \
        -h "$d" -p "$p" -U "bench_client_$i" postgres >"$work/last_pgbench.$i.log" 2>&1 &
      pids+=($!)
    done
    wait "${pids[@]}"
    cat "$work"/last_pgbench.[0-9]*.log | awk '
      /^tps = / { tps += $3 } /^number of transactions actually processed: / { n += $6 } /aborted|error/ { print }
      END { printf "number of transactions actually processed: %d\ntps = %f (summed)\n", n, tps }' >"$work/last_pgbench.log"
  fi
  local tps
  tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$work/last_pgbench.log")
  if [ -z "$tps" ] || grep -q 'aborted\|error' "$work/last_pgbench.log"; then
    echo "run.sh: pgbench on $1 ($2) failed:" >&2; tail -n 5 "$work/last_pgbench.log" >&2; echo nan; echo nan >"$work/last_cpu"; return
  fi
  # wait (at most 5 s) until the run's backends have exited and been reaped
  for _ in $(seq 50); do [ "$(nchildren "$pm")" -le "$base" ] && break; sleep 0.1; done
  t1=$(children_ticks "$pm")
  ntx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$work/last_pgbench.log")
  awk -v a="$t0" -v b="$t1" -v n="${ntx:-0}" -v hz="$CLK_TCK" \
    'BEGIN { if (n > 0) printf "%.2f\n", (b - a) / hz * 1e6 / n; else print "nan" }' >"$work/last_cpu"
  printf '%.0f\n' "$tps"
}

# --- Evidence that the hook prices and charges on A (before timing)
stat() { qa "SELECT statements_priced || ' ' || spends || ' ' || round(cost_charged::numeric, 1) FROM throttle_stats"; }
echo
echo "# Evidence on A (throttle_stats: statements_priced spends cost_charged)"
echo "#   how the hook prices the two PostGIS statements (throttle_explain, sample arguments):"
qa "SELECT '#     ' || call || coalesce(' -> ' || cost, '') FROM throttle_explain(\$q\$SELECT count(*) FROM pts WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint(1000000, 6500000), 3857), 2500)\$q\$)"
qa "SELECT '#     ' || call || coalesce(' -> ' || cost, '') FROM throttle_explain(\$q\$SELECT length(ST_AsMVT(t, 'pts')) FROM (SELECT id, kind, ST_AsMVTGeom(geom, ST_TileEnvelope(13, 4300, 2700), 4096, 64, true) AS geom FROM pts WHERE geom && ST_TileEnvelope(13, 4300, 2700, margin => 0.015625)) t\$q\$)"
s0=($(stat))
pgbench_run A select -t500 >/dev/null
s1=($(stat))
pgbench_run A postgis -t500 >/dev/null
s2=($(stat))
sel_priced=$((s1[0] - s0[0])); gis_priced=$((s2[0] - s1[0])); gis_spends=$((s2[1] - s1[1]))
echo "#   before:                     ${s0[*]}"
echo "#   after select-only, ${CLIENTS}x500 tx: ${s1[*]}   (priced +$sel_priced)"
echo "#   after PostGIS,     ${CLIENTS}x500 tx: ${s2[*]}   (priced +$gis_priced, spends +$gis_spends; 2 statements per tx)"
hook_ok=yes
[ "$sel_priced" = 0 ] || { hook_ok=no; echo "#   UNEXPECTED: select-only statements were priced"; }
# With ogc_throttle.lazy_pricing on (the default), a full bucket prices one statement in lazy_sample_every (16).
statements=$((CLIENTS * 1000))
want_priced=$statements
if [ "$(qa 'SHOW ogc_throttle.lazy_pricing')" = on ]; then
  every=$(qa 'SHOW ogc_throttle.lazy_sample_every')
  want_priced=$((every > 0 ? statements / every - 2 : 0))
fi
[ "$gis_priced" -ge "$want_priced" ] && [ "$gis_spends" -ge "$statements" ] ||
  { hook_ok=no; echo "#   UNEXPECTED: PostGIS statements were not priced ($want_priced expected) and all charged ($statements)"; }
# The same PostGIS statements in B run and return the same kind of result
pgbench_run B postgis -t100 >/dev/null
[ "$(qb "SELECT 1")" = 1 ] || die "B is not answering"
echo "#   hook prices and charges on A: $hook_ok"

# --- Warm-up (caches, plans) on both, not recorded
for c in "${sides[@]}"; do for s in select postgis; do pgbench_run "$c" "$s" 2 >/dev/null; done; done

declare -A vals
add() { vals[$1]+="$2 "; }
median() {
  tr ' ' '\n' <<<"${vals[$1]:-}" | grep -v '^$' | grep -v nan | sort -g |
    awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
# Median over rounds of the A/B ratio within each round: the two runs of a
# round sat next to each other in time, so load that drifts over minutes
# (other people's compiles) cancels out better than in a ratio of medians.
pratio() {
  paste -d' ' <(tr ' ' '\n' <<<"${vals[$1]:-}" | grep -v '^$') <(tr ' ' '\n' <<<"${vals[$2]:-}" | grep -v '^$') |
    awk '$1 != "nan" && $2 != "nan" && $2 > 0 { print $1 / $2 }' | sort -g |
    awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else printf "%.3f", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
# A distribution-free interval for that median (the sign test's): the k-th smallest and the k-th largest
# of the n round ratios, k the largest for which both lie outside the true median with probability at
# most 10 % (n = 5: the extremes, 94 %; n = 7: the extremes, 98 %; n = 9: the 2nd, 96 %), printed
# "lo-hi"; fewer than 5 rounds bound nothing ("-").
pci() {
  paste -d' ' <(tr ' ' '\n' <<<"${vals[$1]:-}" | grep -v '^$') <(tr ' ' '\n' <<<"${vals[$2]:-}" | grep -v '^$') |
    awk '$1 != "nan" && $2 != "nan" && $2 > 0 { print $1 / $2 }' | sort -g |
    awk '{ a[NR] = $1 }
      END {
        n = NR; if (n < 5) { print "-"; exit }
        k = 0; tail = 0; c = 1  # c = C(n, i), tail = P(Bin(n, 1/2) <= i - 1)
        for (i = 0; i < n; i++) {
          if (2 * (tail + c) / 2 ^ n > 0.10) break
          tail += c; k = i + 1; c = c * (n - i) / (i + 1)
        }
        printf "%.3f-%.3f", a[k], a[n - k + 1]
      }'
}
loadavg() { cut -d' ' -f1 /proc/loadavg; }

echo
echo "# Timing: pgbench -M prepared -c $CLIENTS -j $CLIENTS -T $SECS ($IDENTITIES login role(s)), $ROUNDS rounds; within a round ${sides[*]} alternate"
echo "# (odd rounds in that order, even rounds reversed). Other work on this 2-core machine lands in the"
echo "# figures: compare the ratios within rounds, not absolute tps."
for r in $(seq "$ROUNDS"); do
  order=("${sides[@]}"); [ $((r % 2)) = 0 ] && order=($(printf '%s\n' "${sides[@]}" | tac))
  line="# round $r/$ROUNDS (load $(loadavg)):"
  for s in select postgis; do
    for c in "${order[@]}"; do
      v=$(pgbench_run "$c" "$s" "$SECS"); add "${s}_$c" "$v"; add "cpu_${s}_$c" "$(cat "$work/last_cpu")"
      line+=" $s/$c=$v"
    done
  done
  echo "$line"
done

# --- A new connection per transaction (pgbench -C), select-only: what a
# client that connects per request (CGI map servers) sees. Informative.
echo "# select-only with a new connection per transaction (-C), $CONNECT_ROUNDS alternating pair(s)"
for r in $(seq "$CONNECT_ROUNDS"); do
  order=(A B); [ $((r % 2)) = 0 ] && order=(B A)
  line="# connect pair $r/$CONNECT_ROUNDS (load $(loadavg)):"
  for c in "${order[@]}"; do
    v=$(pgbench_run "$c" connect "$SECS"); add "connect_$c" "$v"; add "cpu_connect_$c" "$(cat "$work/last_cpu")"
    line+=" connect/$c=$v"
  done
  echo "$line"
done

# --- A with mode 'off': library loaded, the hook returns at once
qa "ALTER SYSTEM SET ogc_throttle.mode = 'off'" >/dev/null && qa "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
echo "# A switched to ogc_throttle.mode = $(qa 'SHOW ogc_throttle.mode') (reload) for $OFF_ROUNDS extra pair(s) per script"
p0=$(stat)
for r in $(seq "$OFF_ROUNDS"); do
  order=(A B); [ $((r % 2)) = 0 ] && order=(B A)
  line="# off pair $r/$OFF_ROUNDS (load $(loadavg)):"
  for s in select postgis connect; do
    for c in "${order[@]}"; do
      v=$(pgbench_run "$c" "$s" "$SECS"); add "off_${s}_$c" "$v"; add "cpu_off_${s}_$c" "$(cat "$work/last_cpu")"
      line+=" $s/$c=$v"
    done
  done
  echo "$line"
done
p1=$(stat)
echo "# throttle_stats on A across the mode-off runs: $p0 -> $p1 (nothing priced: $([ "${p0%% *}" = "${p1%% *}" ] && echo yes || echo no))"
qa "ALTER SYSTEM RESET ogc_throttle.mode" >/dev/null && qa "SELECT pg_reload_conf()" >/dev/null

echo
echo "tps per round (A = hook on, B = no library)"
for k in select_A select_B ${PEER:+select_P} postgis_A postgis_B ${PEER:+postgis_P} connect_A connect_B off_select_A off_select_B off_postgis_A off_postgis_B off_connect_A off_connect_B; do
  printf '  %-15s %-40s server CPU µs/tx: %s\n' "$k" "${vals[$k]:-}" "${vals[cpu_$k]:-}"
done
spread() {  # max/min of B's rounds: how noisy the machine was
  tr ' ' '\n' <<<"${vals[$1]:-}" | grep -v '^$' | grep -v nan | sort -g |
    awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (lo > 0) printf "%.2f", hi / lo; else print "nan" }'
}
echo "  noise: max/min over rounds of B = select $(spread select_B), postgis $(spread postgis_B)"

rows=()
row() {  # figure, A key, B key, target
  local ratio ci met
  ratio=$(pratio "$2" "$3")
  ci=$(pci "$2" "$3")
  # met only if the interval clears the target, missed only if it lies below; else the run cannot tell
  met=$(awk -v v="$ratio" -v ci="$ci" -v t="$4" 'BEGIN {
    if (t == "-") { print "-"; exit }
    if (v == "nan") { print "no"; exit }
    if (ci == "-") { print (v >= t ? "yes (median)" : "no (median)"); exit }
    split(ci, b, "-"); print (b[1] >= t ? "yes" : (b[2] < t ? "no" : "cannot tell")) }')
  rows+=("$1|$(median "$2")|$(median "$3")|$ratio|$ci|$([ "$4" = - ] && echo - || echo ">= $4")|$met")
}
row "select-only (-S), hook on (reject)" select_A select_B 0.99
row "PostGIS (ST_DWithin + ST_AsMVT), hook on (reject)" postgis_A postgis_B 0.97
if [ -n "$PEER" ]; then
  row "select-only (-S), P: $PEER" select_P select_B -
  row "PostGIS, P: $PEER" postgis_P postgis_B -
  row "select-only (-S), A against P" select_A select_P -
  row "PostGIS, A against P" postgis_A postgis_P -
fi
row "select-only, new connection per tx (-C)" connect_A connect_B -
row "select-only (-S), A mode off ($OFF_ROUNDS pair)" off_select_A off_select_B -
row "PostGIS, A mode off ($OFF_ROUNDS pair)" off_postgis_A off_postgis_B -
row "select-only -C, A mode off ($OFF_ROUNDS pair)" off_connect_A off_connect_B -
echo
echo "A = ogc_throttle preloaded (mode reject, budget never exhausted); B = no library${PEER:+; P = $PEER preloaded (rows \"P: ...\": P in the A column, against B)}. tps: medians over rounds;"
echo "ratio: median over rounds of A/B within the round (so it need not equal the ratio of the medians);"
echo "interval: where that median lies with >= 90 % confidence (sign test over the rounds; 5 rounds or more);"
echo "met?: yes when the interval clears the target, no when it lies below, cannot tell when it straddles it."
printf '%-52s | %9s | %9s | %6s | %11s | %7s | %s\n' figure "A tps" "B tps" ratio interval target "met?"
printf -- '%.0s-' $(seq 119); echo
for x in "${rows[@]}"; do
  IFS='|' read -r a b c d e f g <<<"$x"
  printf '%-52s | %9s | %9s | %6s | %11s | %7s | %s\n' "$a" "$b" "$c" "$d" "$e" "$f" "$g"
done
echo "hook verified charging on A before timing: $hook_ok"
lib_at_end=$(libid)
[ "$lib_at_end" = "$lib_at_start" ] ||
  echo "note: $libfile was reinstalled during the run ($lib_at_end); A kept running the build it loaded at start ($lib_at_start)"

# The same runs seen as server CPU per transaction (all backends, µs): other
# people's load stretches wall-clock time but hardly the CPU a transaction
# needs, so this is the steadier view of what the hook adds.
echo
echo "Server CPU per transaction, µs (backends' user+sys from the postmaster's reaped-children times; median over rounds)"
printf '%-52s | %9s | %9s | %9s | %s\n' figure "A µs/tx" "B µs/tx" "A - B" "B/A (tps-equivalent)"
printf -- '%.0s-' $(seq 105); echo
cpu_row() {
  local a b
  a=$(median "$2"); b=$(median "$3")
  printf '%-52s | %9s | %9s | %9s | %s\n' "$1" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%+.2f", a - b }')" \
    "$(pratio "$3" "$2")"
}
cpu_row "select-only (-S), hook on (reject)" cpu_select_A cpu_select_B
cpu_row "PostGIS (ST_DWithin + ST_AsMVT), hook on (reject)" cpu_postgis_A cpu_postgis_B
if [ -n "$PEER" ]; then
  cpu_row "select-only (-S), P: $PEER" cpu_select_P cpu_select_B
  cpu_row "PostGIS, P: $PEER" cpu_postgis_P cpu_postgis_B
fi
cpu_row "select-only, new connection per tx (-C)" cpu_connect_A cpu_connect_B
cpu_row "select-only (-S), A mode off ($OFF_ROUNDS pair)" cpu_off_select_A cpu_off_select_B
cpu_row "PostGIS, A mode off ($OFF_ROUNDS pair)" cpu_off_postgis_A cpu_off_postgis_B
cpu_row "select-only -C, A mode off ($OFF_ROUNDS pair)" cpu_off_connect_A cpu_off_connect_B
