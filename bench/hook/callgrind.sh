#!/usr/bin/env bash
# Instructions per statement with and without the pricing hook, counted by
# callgrind: immune to other load on the machine, unlike tps. Optional
# companion to run.sh (needs valgrind; about 3 minutes).
#
# One cluster with the data of run.sh, then `postgres --single` under
# callgrind runs N and 3N EXECUTEs of one prepared statement per kind, with
#   reject  the library preloaded, mode 'reject', budget never exhausted
#   none    no library
# Per statement = (Ir(3N) - Ir(N)) / 2N: start-up and one-time costs cancel.
# One-time = Ir(N) - N x per statement, compared between the two (library
# load, shared memory set-up, and the hook's first-use catalogue scan).
# Knobs: N (300), NPOINTS (200000), KINDS ("select dwithin tile"), GRID (1: build a density grid),
# SAMPLING=1 (also: calibration sampling off / on / with automatic refits), KEEP=1
# keeps the work directory (callgrind files for callgrind_annotate), CACHESIM=1 (valgrind's cache
# simulation: also I1, D1 and last-level misses per statement, and it runs about twice as long),
# CONN=1 (the statements come over a socket from pgbench -M prepared, as a driver sends them —
# Parse, Bind, Execute, Sync — to a server under callgrind, and the client backend's own
# instructions are counted: what --single leaves out, the protocol's messages and the answers the
# library watches, is in; about 10 minutes; PROTOCOL=extended: pgbench -M extended, an unnamed statement
# parsed again each time, Parse, Bind, Describe, Execute, Sync, as PQexecParams sends it), LIB=a.so[,b.so] (the hook runs from these builds instead of
# the installed library, one row each against the same runs without it: shared_preload_libraries takes a
# path, so a branch is compared with main without installing either; the data's set-up still uses the
# installed extension; the CACHESIM and SAMPLING tables get one row per build, labelled as the first table's),
# A_CONF (more settings for the hook's runs, as in run.sh: 'ogc_throttle.lazy_pricing = off; ...'),
# PLANS (generic or custom: plan_cache_mode for both runs; unset, the planner replans every EXECUTE
# of these statements over this data, as pgbench -M prepared sessions do).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/test/lib/pg.sh"
N=${N:-300}
PROTOCOL=${PROTOCOL:-prepared}
NPOINTS=${NPOINTS:-200000}
PORT=${PORT:-56403}
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed" >&2; exit 1; }
work=$(pg_tmpdir)
running=""
cleanup() { [ -n "$running" ] && pg_stop "$work" immediate; if [ -n "${KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi; }
trap cleanup EXIT
trap 'exit 130' INT TERM
die() { echo "callgrind.sh: $*" >&2; exit 1; }

cachesim=()
[ -n "${CACHESIM:-}" ] && cachesim=(--cache-sim=yes)
cp "$here/setup.sql" "$work/" && chmod 644 "$work/setup.sql" || die "copy failed"
pg_cluster_init "$work" "max_connections = 20" "jit = off" "autovacuum = off" || die "initdb failed"
pg_start "$work" "$PORT" || die "postgres did not start"
running=yes
as_pg timeout 300 "$PGBIN/pgbench" -i -q -s 1 -h "$work" -p "$PORT" -U postgres postgres >/dev/null 2>&1 ||
  die "pgbench -i failed"
as_pg timeout 300 psql -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$PORT" -U postgres -d postgres -v npoints="$NPOINTS" \
  -f "$work/setup.sql" >/dev/null || die "setup.sql failed"
# GRID=1 (default): a density grid for pts.geom, as doc/cost-model.md tells an operator to build; the
# pricing walk then counts a search's rows from it. GRID=0: PostGIS's statistics instead (the fallback).
if [ "${GRID:-1}" = 1 ]; then
  as_pg timeout 300 psql -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$PORT" -U postgres -d postgres \
    -c "CREATE EXTENSION ogc_throttle" -c "SELECT throttle_density_build('pts', 'geom')" >/dev/null ||
    die "throttle_density_build failed"
fi
pg_stop "$work"
running=""

# The statements of run.sh, as prepared statements with random arguments.
gen() {  # gen KIND COUNT
  awk -v kind="$1" -v n="$2" -v plans="${PLANS:-}" 'BEGIN {
    srand(7)
    if (plans != "") printf "SET plan_cache_mode = force_%s_plan;\n", plans
    if (kind == "select") print "PREPARE q(int) AS SELECT abalance FROM pgbench_accounts WHERE aid = $1;"
    if (kind == "dwithin") print "PREPARE q(float8, float8, float8) AS SELECT count(*) FROM pts WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint($1, $2), 3857), $3);"
    if (kind == "tile") print "PREPARE q(int, int, int) AS SELECT length(ST_AsMVT(t, \x27pts\x27)) FROM (SELECT id, kind, ST_AsMVTGeom(geom, ST_TileEnvelope($1, $2, $3), 4096, 64, true) AS geom FROM pts WHERE geom && ST_TileEnvelope($1, $2, $3, margin => 0.015625)) t;"
    for (i = 0; i < n; i++) {
      if (kind == "select") printf "EXECUTE q(%d);\n", 1 + int(rand() * 100000)
      if (kind == "dwithin") printf "EXECUTE q(%d, %d, %d);\n", 556597 + int(rand() * 1113195), 5621521 + int(rand() * 1740345), 100 + int(rand() * 4900)
      if (kind == "tile") printf "EXECUTE q(13, %d, %d);\n", 4210 + int(rand() * 227), 2592 + int(rand() * 354)
    }
  }'
}
# LIB: copies of the builds where the server's user can read them; hooklib is the one the runs load.
libs=(ogc_throttle)
if [ -n "${LIB:-}" ]; then
  libs=()
  IFS=, read -ra given <<<"$LIB"
  for l in "${given[@]}"; do
    [ -f "$l" ] || die "LIB: no file $l"
    cp "$l" "$work/lib${#libs[@]}.so" && chmod 755 "$work/lib${#libs[@]}.so" || die "copy of $l failed"
    libs+=("$work/lib${#libs[@]}.so")
  done
fi
hooklib=${libs[0]}
config_opts() {  # config_opts CONFIG: sets opts, the server's settings for that configuration
  local hook=(-c shared_preload_libraries="$hooklib" -c ogc_throttle.mode=reject
    -c ogc_throttle.capacity=1000000000 -c ogc_throttle.rate=500 -c ogc_throttle.cost_max=1000000)
  local kv
  IFS=';' read -ra extra <<<"${A_CONF:-}"
  for kv in "${extra[@]}"; do
    kv=$(tr -d ' ' <<<"$kv"); kv=${kv//\'/}
    [ -n "$kv" ] && hook+=(-c "$kv")
  done
  case $1 in
    none) opts=(-c shared_preload_libraries=) ;;
    reject) opts=("${hook[@]}") ;;
    nosample) opts=("${hook[@]}" -c ogc_throttle.max_samples=0) ;;       # calibration sampling off
    apply) opts=("${hook[@]}" -c ogc_throttle.calibration=apply) ;;    # sampling and automatic refits
  esac
}
ir() {  # ir KIND COUNT CONFIG -> total instructions of the single-user backend
  local f="$work/$1.$2.$3" opts
  config_opts "$3"
  gen "$1" "$2" >"$f.sql"; chmod 644 "$f.sql"
  as_pg timeout 1200 valgrind --tool=callgrind "${cachesim[@]}" --callgrind-out-file="$f.out" \
    "$PGBIN/postgres" --single -D "$work/data" -c jit=off "${opts[@]}" postgres <"$f.sql" >"$f.log" 2>&1
  grep -q ERROR "$f.log" && { grep -m3 ERROR "$f.log" >&2; die "$1 under $3 failed"; }
  sed -n 's/.*I *refs: *//p' "$f.log" | tr -d ,
}

# CONN=1: one pgbench client (-M $PROTOCOL, fixed seed) against a server started under callgrind; the
# client backend is found by its pid in the server log, and its own callgrind file is read.
script() {  # script KIND -> the pgbench script of run.sh's statement of that kind
  case $1 in
    select) printf '%s\n' '\set aid random(1, 100000)' 'SELECT abalance FROM pgbench_accounts WHERE aid = :aid;' ;;
    dwithin) printf '%s\n' '\set px random(556597, 1669792)' '\set py random(5621521, 7361866)' '\set r random(100, 5000)' \
      'SELECT count(*) FROM pts WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint(:px, :py), 3857), :r);' ;;
    tile) printf '%s\n' '\set tx random(4210, 4436)' '\set ty random(2592, 2945)' \
      "SELECT length(ST_AsMVT(t, 'pts')) FROM (SELECT id, kind, ST_AsMVTGeom(geom, ST_TileEnvelope(13, :tx, :ty), 4096, 64, true) AS geom FROM pts WHERE geom && ST_TileEnvelope(13, :tx, :ty, margin => 0.015625)) t;" ;;
  esac
}
ir_conn() {  # ir_conn KIND COUNT CONFIG -> total instructions of the client backend
  local f="$work/$1.$2.$3" opts k pid
  config_opts "$3"
  script "$1" >"$f.pgbench"; chmod 644 "$f.pgbench"
  as_pg valgrind --tool=callgrind --callgrind-out-file="$f.%p.out" "$PGBIN/postgres" -D "$work/data" -p "$PORT" \
    -c jit=off -c log_connections=on -c "log_line_prefix=%p " "${opts[@]}" >"$f.log" 2>&1 &
  running=yes
  for k in $(seq 1 240); do as_pg "$PGBIN/pg_isready" -q -h "$work" -p "$PORT" && break; sleep 0.5; done
  as_pg "$PGBIN/pgbench" -n -c 1 -t "$2" -M "$PROTOCOL" --random-seed=7 -f "$f.pgbench" -h "$work" -p "$PORT" \
    -U postgres postgres >"$f.pgbench.log" 2>&1 || { tail -3 "$f.pgbench.log" >&2; die "$1 under $3: pgbench failed"; }
  as_pg "$PGBIN/pg_ctl" -D "$work/data" -w -t 300 -m fast stop >/dev/null 2>&1
  running=""
  pid=$(awk '/connection authorized: user=postgres database=postgres application_name=pgbench/ { p = $1 } END { print p }' "$f.log")
  [ -n "$pid" ] && [ -f "$f.$pid.out" ] || die "$1 under $3: no callgrind file of the pgbench backend"
  cp "$f.$pid.out" "$f.out"
  sed -n 's/^summary: *//p' "$f.out"
}
if [ -n "${CONN:-}" ]; then
  [ -n "${CACHESIM:-}" ] && die "CACHESIM=1 counts --single runs only"
  ir() { ir_conn "$@"; }
fi

# Settlements and statistics are written to shared memory every 10 ms (100 ms) of measured time: under
# valgrind a statement takes ~50x longer, so those flushes happen ~50x more often than on a real run, and
# how often depends on the machine's load. Their share is printed apart (inclusive Ir of flush_owed and
# record_true_up). The hook's object is ogc_throttle.so, or libN.so under LIB= (the copies made above).
flushes() {  # flushes CALLGRIND-FILE -> inclusive Ir of the settlement's flushes
  callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
    awk '$3 != "=>" && /\/(ogc_throttle|lib[0-9]+)\.so\]$/ && /::flush_owed\(\)|::record_true_up\(/ { v = $1; gsub(",", "", v); t += v } END { print t + 0 }'
}
echo "callgrind, instructions (Ir); N = $N and $((3 * N)) executions per kind; density grid: ${GRID:-1};" \
  "$([ -n "${CONN:-}" ] && echo "the client backend of pgbench -M $PROTOCOL over a socket" || echo "postgres --single")"
printf '%-9s | %12s | %12s | %10s | %7s | %9s | %10s | %s\n' kind "none Ir/stmt" "hook Ir/stmt" "hook adds" ratio "flushes" "w/o flush" "one-time extra"
printf -- '%.0s-' $(seq 104); echo
for kind in ${KINDS:-select dwithin tile}; do
  a1=$(ir $kind "$N" none); a3=$(ir $kind $((3 * N)) none)
  for li in "${!libs[@]}"; do
    hooklib=${libs[$li]}
    b1=$(ir $kind "$N" reject); b3=$(ir $kind $((3 * N)) reject)
    f1=$(flushes "$work/$kind.$N.reject.out"); f3=$(flushes "$work/$kind.$((3 * N)).reject.out")
    label=$kind; [ -n "${LIB:-}" ] && label="$kind/$li"
    # each build's logs (the CACHESIM table reads them) and, with KEEP, its callgrind files, apart
    for f in "$work/$kind".*.reject.log; do cp "$f" "${f%.log}.lib$li.log"; done
    [ -n "${KEEP:-}" ] && [ -n "${LIB:-}" ] && for f in "$work/$kind".*.reject.out; do cp "$f" "${f%.out}.lib$li.out"; done
    awk -v a1="$a1" -v a3="$a3" -v b1="$b1" -v b3="$b3" -v f1="$f1" -v f3="$f3" -v n="$N" -v k="$label" 'BEGIN {
      pa = (a3 - a1) / (2 * n); pb = (b3 - b1) / (2 * n); pf = (f3 - f1) / (2 * n)
      oa = a1 - n * pa; ob = b1 - n * pb
      printf "%-9s | %12.0f | %12.0f | %+10.0f | %7.3f | %9.0f | %+10.0f | %+.1f M\n", k, pa, pb, pb - pa, pa / pb, pf, pb - pa - pf, (ob - oa) / 1e6 }'
  done
done
[ -n "${LIB:-}" ] && for li in "${!libs[@]}"; do echo "kind/$li: ${given[$li]} (md5 $(md5sum <"${libs[$li]}" | cut -c1-12))"; done
# CACHESIM=1: the simulated misses per statement (same (3N - N) / 2N difference), from the runs above.
# valgrind's model (the host's L1 sizes, a last level of the host's LL) is not the hardware, but it counts
# the same way for both libraries: first-level instruction misses (I1mr), data misses (D1mr + D1mw) and
# last-level misses (ILmr + DLmr + DLmw). The hook's share of each is the cost the Ir column hides.
event() {  # event KIND COUNT CONFIG EVENT... -> sum of those events in the "Collected" line
  local f="$work/$1.$2.$3.log"; shift 3
  awk -v want="$*" '/Events *:/ { sub(/.*Events *: */, ""); n = split($0, names, " ") }
    /Collected *:/ { sub(/.*Collected *: */, ""); split($0, vals, " ")
      k = split(want, w, " "); t = 0; for (i = 1; i <= n; i++) for (j = 1; j <= k; j++) if (names[i] == w[j]) t += vals[i]
      print t }' "$f"
}
if [ -n "${CACHESIM:-}" ]; then
  echo
  echo "simulated cache misses per statement (valgrind --cache-sim=yes)"
  printf '%-9s | %-10s | %10s | %10s | %10s\n' kind misses none hook "hook adds"
  printf -- '%.0s-' $(seq 60); echo
  for kind in ${KINDS:-select dwithin tile}; do
    for li in "${!libs[@]}"; do
    label=$kind; [ -n "${LIB:-}" ] && label="$kind/$li"
    for ev in "I1mr" "D1mr D1mw" "ILmr DLmr DLmw"; do
      a1=$(event $kind "$N" none $ev); a3=$(event $kind $((3 * N)) none $ev)
      b1=$(event $kind "$N" reject.lib$li $ev); b3=$(event $kind $((3 * N)) reject.lib$li $ev)
      awk -v a1="$a1" -v a3="$a3" -v b1="$b1" -v b3="$b3" -v n="$N" -v k="$label" -v e="$ev" 'BEGIN {
        pa = (a3 - a1) / (2 * n); pb = (b3 - b1) / (2 * n)
        label = e; if (e ~ /D1mr/) label = "D1"; else if (e ~ /ILmr/) label = "LL"; else label = "I1"
        printf "%-9s | %-10s | %10.1f | %10.1f | %+10.1f\n", k, label, pa, pb, pb - pa }'
    done
    done
  done
fi
echo "ratio = none/hook per statement: the throughput a server-CPU-bound run would keep (the tps ratio is"
echo "closer to 1, since pgbench and the kernel's socket work take part of each transaction)."

# SAMPLING=1: what calibration sampling costs a priced statement — the hook with ogc_throttle.max_samples = 0
# (no sample store) against the default (every completed priced statement leaves a sample), and with
# ogc_throttle.calibration = apply (a refit every 1000 samples: use N >= 1000 to catch some).
if [ -n "${SAMPLING:-}" ]; then
  echo
  printf '%-9s | %14s | %14s | %10s | %14s | %10s\n' kind "no samples" "sampling" "extra" "+ auto refit" "extra"
  printf -- '%.0s-' $(seq 84); echo
  for kind in ${KINDS:-select dwithin tile}; do
    [ "$kind" = select ] && continue  # nothing priced: no sample
    for li in "${!libs[@]}"; do
    hooklib=${libs[$li]}
    label=$kind; [ -n "${LIB:-}" ] && label="$kind/$li"
    c1=$(ir $kind "$N" nosample); c3=$(ir $kind $((3 * N)) nosample)
    b1=$(ir $kind "$N" reject); b3=$(ir $kind $((3 * N)) reject)
    d1=$(ir $kind "$N" apply); d3=$(ir $kind $((3 * N)) apply)
    awk -v c1="$c1" -v c3="$c3" -v b1="$b1" -v b3="$b3" -v d1="$d1" -v d3="$d3" -v n="$N" -v k="$label" 'BEGIN {
      pc = (c3 - c1) / (2 * n); pb = (b3 - b1) / (2 * n); pd = (d3 - d1) / (2 * n)
      printf "%-9s | %14.0f | %14.0f | %+9.2f%% | %14.0f | %+9.2f%%\n", k, pc, pb, (pb / pc - 1) * 100, pd, (pd / pc - 1) * 100 }'
    done
  done
fi
