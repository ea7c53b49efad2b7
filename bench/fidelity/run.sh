#!/usr/bin/env bash
# Fidelity of the pricing hook (issue 9, item 7): how well the hook's price
# ranks and bounds the time a statement really takes, next to the planner's
# total_cost and (when the metering exists) the amount charged, from one run.
#
# Starts its own throwaway cluster (Unix socket in a private temp dir, no TCP)
# from the PostgreSQL that `pg_config` on PATH names, with ogc_throttle
# preloaded, generates skewed data (gen.sql), a workload (workload.py), prices
# and times every query server-side (measure.sql), and prints the table
# (analyze.py). Stops and removes the cluster on exit.
# Knobs: NPOINTS (500000), NQ queries per class (30), SEED of the workload (7),
# KEEP=dir keeps results there (with CALIBRATE, also the samples the fit read: train_samples.tsv);
# FIT=1 also fits weights to the features.
# CHARGES=1: also charged (bucket debits) against measured (PostgreSQL's duration lines),
# every query once (charges.py); TWINS=1: disguised statements against their plain twins,
# NT instances per shape (4) (twins.py); TIMING=0 skips the estimate/planner timing passes.
# CALIBRATE=seed: first runs that seed's workload under the hook, fits the weights with
# throttle_calibrate(true) and applies them (ogc_throttle.calibration = apply), so that the
# estimate is the self-calibrated one, checked out of sample when the seeds differ.
# TOPLEVEL=1: the measured time is that of each query run by a client as a top-level statement
# (PostgreSQL's duration lines, median of the passes after a warm-up; toptime.py) instead of
# EXPLAIN ANALYZE's execution time inside a DO block.
# PASSES (7; odd, 1-7): timed passes over the workload, each in another order; a query's time is
# their median (KEEP also keeps every pass's time: results.tsv's runs, toptime.tsv).
# INROW=1 (with TOPLEVEL=1): in each top-level pass every statement runs twice in a row, and a third
# table ranks the prices against the second runs, each statement timed right after itself (toptime.py).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/test/lib/pg.sh"
NPOINTS=${NPOINTS:-500000}
NQ=${NQ:-30}
SEED=${SEED:-7}
CHARGES=${CHARGES:-0}
TWINS=${TWINS:-0}
NT=${NT:-4}
TIMING=${TIMING:-1}
CALIBRATE=${CALIBRATE:-}
TOPLEVEL=${TOPLEVEL:-0}
PASSES=${PASSES:-7}
INROW=${INROW:-0}
PORT=56431
PY=/usr/bin/python3
[ -x $PY ] || PY=python3

work=$(pg_tmpdir)
C="$work/c"
started=
cleanup() { [ -n "$started" ] && pg_stop "$C" immediate; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
die() { echo "run.sh: $*" >&2; exit 1; }
case "$PASSES" in 1|3|5|7) ;; *) die "PASSES must be 1, 3, 5 or 7 (a median of an odd count), not '$PASSES'";; esac
case "$INROW:$TOPLEVEL" in 0:*|1:1) ;; *) die "INROW=1 times top-level statements: it needs TOPLEVEL=1";; esac
cp "$here"/gen.sql "$here"/measure.sql "$work/" && chmod 644 "$work"/*.sql

pg_cluster_init "$C" "shared_preload_libraries = 'ogc_throttle'" "shared_buffers = '256MB'" "jit = off" \
  "autovacuum = off" "max_parallel_workers_per_gather = 2" "work_mem = '16MB'" \
  "ogc_throttle.capacity = 1000000000" "ogc_throttle.rate = 1000000000" "ogc_throttle.cost_max = 1000000000" ||
  die "initdb failed"
pg_start "$C" "$PORT" || { tail -n 20 "$C/server.log"; die "cluster did not start"; }
started=1
sql() { pg_psql "$C" "$PORT" -d postgres "$@"; }
lib=$(sql -At -c "SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'")
echo "# PostgreSQL $(sql -At -c 'SHOW server_version') from $PGBIN; ogc_throttle.so from $lib (md5 $(md5sum <"$lib/ogc_throttle.so" | cut -c1-12))"
t0=$(date +%s)
sql -v npoints="$NPOINTS" -f "$work/gen.sql" >/dev/null || die "gen.sql failed"
# The newest extension version the installation has (0.2 brings the fidelity functions).
sql -c "CREATE EXTENSION ogc_throttle VERSION '0.2'" >/dev/null 2>&1 || sql -c "CREATE EXTENSION ogc_throttle" >/dev/null ||
  die "CREATE EXTENSION ogc_throttle failed"
echo "# extension $(sql -At -c "SELECT extversion FROM pg_extension WHERE extname = 'ogc_throttle'"); data: $(sql -At -c "SELECT (SELECT count(*) FROM fpts) || ' points in ' || (SELECT count(*) FROM fcity) || ' cities + background, ' || (SELECT count(*) FROM fpoly) || ' polygons'") ($(( $(date +%s) - t0 )) s)"
if [ "$(sql -At -c "SELECT to_regproc('throttle_density_build') IS NOT NULL")" = t ]; then
  t0=$(date +%s)
  sql -At -c "SELECT throttle_density_build('fpts', 'geom')" -c "SELECT throttle_density_build('fpts', 'geog')" \
    -c "SELECT throttle_density_build('fpoly', 'geom')" >/dev/null || die "throttle_density_build failed"
  echo "# density grids built for fpts.geom, fpts.geog, fpoly.geom ($(( $(date +%s) - t0 )) s)"
fi
sql -At -F $'\t' -c "SELECT id, lon, lat, sigma, n FROM fcity ORDER BY id" >"$work/cities.tsv"
if [ -n "$CALIBRATE" ]; then
  # The product's own loop: statements of another workload run under the hook (each a sample of its
  # features and measured time), throttle_calibrate(true) fits the weights from them, and with
  # ogc_throttle.calibration = apply every price below is made with the fitted weights. Lazy pricing
  # off: it would leave a sample of only one statement in 16 that a full bucket admits.
  [ "$CALIBRATE" != "$SEED" ] || echo "# CALIBRATE = SEED: the fit is checked on the workload it was fitted on (in sample)"
  $PY "$here/workload.py" "$work/cities.tsv" "$NQ" "$CALIBRATE" >"$work/train.tsv" || die "workload.py failed"
  $PY - "$work/train.tsv" >"$work/train.sql" <<'PYEOF'
import sys
qs = [line.rstrip("\n").split("\t", 2)[2] for line in open(sys.argv[1])]
print("SET ogc_throttle.mode = 'reject';")
print("SET ogc_throttle.lazy_pricing = off;")
print("SET statement_timeout = '60s';")
print("\\o /dev/null")
for k in (389, 577, 811):  # three passes, each in another order (as measure.sql's timing)
    for i in sorted(range(len(qs)), key=lambda i: (i * k) % 1009):
        print(qs[i] + ";")
PYEOF
  chmod 644 "$work/train.sql"
  t0=$(date +%s)
  sql -f "$work/train.sql" >/dev/null 2>"$work/train.err" || { head -5 "$work/train.err"; die "the calibration workload failed"; }
  echo "# calibration: seed $CALIBRATE's $(wc -l <"$work/train.tsv") queries x 3 under the hook ($(( $(date +%s) - t0 )) s), then throttle_calibrate(true):"
  sql -c "SELECT class, samples, round(fixed::numeric, 6) AS fixed, round(per_row::numeric, 7) AS per_row, round(fitted_fixed::numeric, 6) AS fitted_fixed, round(fitted_per_row::numeric, 7) AS fitted_per_row, fitted, samples_used, round(spearman_configured::numeric, 3) AS rho_configured, round(spearman_fitted::numeric, 3) AS rho_fitted, round(median_ratio::numeric, 3) AS median_ratio FROM throttle_calibrate(true)" 2>&1 |
    sed 's/^/#   /' || die "throttle_calibrate failed"
  # The samples the fit read, for bench/fidelity/fitcheck (a fit checked on other runs offline).
  if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP" && sql -c "\\copy (SELECT measured, features FROM throttle_samples()) TO '$work/train_samples.tsv'" >/dev/null &&
      cp "$work/train_samples.tsv" "$KEEP/" || echo "# keeping the calibration samples failed" >&2
  fi
  sql -c "ALTER SYSTEM SET ogc_throttle.calibration = 'apply'" -c "SELECT pg_reload_conf()" >/dev/null || die "applying the fit failed"
  sleep 0.5
fi
$PY "$here/workload.py" "$work/cities.tsv" "$NQ" "$SEED" >"$work/queries.tsv" || die "workload.py failed"
chmod 644 "$work/queries.tsv"
sql -c "DROP TABLE IF EXISTS fq" -c "CREATE TABLE fq (id int PRIMARY KEY, cls text, sql text)" \
  -c "\\copy fq FROM '$work/queries.tsv'" >/dev/null || die "loading the workload failed"
if [ "$TIMING" = 1 ]; then
echo "# $(wc -l <"$work/queries.tsv") queries; timing: median of $PASSES EXPLAIN (ANALYZE, TIMING OFF) execution times from $PASSES passes over the workload after a warm-up pass, hook off"
t0=$(date +%s)
sql -c "SET fidelity.passes = $PASSES" -f "$work/measure.sql" >/dev/null || die "measure.sql failed"
echo "# priced and timed in $(( $(date +%s) - t0 )) s"
if [ "$TOPLEVEL" = 1 ]; then
  t0=$(date +%s)
  $PY "$here/toptime.py" gen "$work/queries.tsv" "$PASSES" $([ "$INROW" = 1 ] && echo inrow) >"$work/toptime.sql" &&
    chmod 644 "$work/toptime.sql" &&
    sql -f "$work/toptime.sql" >/dev/null 2>"$work/toptime.err" || die "the top-level timing failed"
  grep -v '^$' "$work/toptime.err" | head -5
  $PY "$here/toptime.py" read "$C/server.log" >"$work/toptime.tsv" && chmod 644 "$work/toptime.tsv" ||
    die "reading the duration lines failed"
  sql -c "CREATE TABLE ftop (id int PRIMARY KEY, ms float8, runs float8[])" -c "\\copy ftop FROM '$work/toptime.tsv'" \
    >/dev/null || die "loading the top-level timings failed"
  if [ "$INROW" = 1 ]; then
    $PY "$here/toptime.py" read "$C/server.log" fidr >"$work/toptime_inrow.tsv" && chmod 644 "$work/toptime_inrow.tsv" &&
      sql -c "CREATE TABLE ftop_inrow (id int PRIMARY KEY, ms float8, runs float8[])" \
        -c "\\copy ftop_inrow FROM '$work/toptime_inrow.tsv'" >/dev/null || die "loading the in-a-row timings failed"
  fi
  echo "# top-level timing (TOPLEVEL=1): $(wc -l <"$work/toptime.tsv") queries, median of $PASSES duration lines after a warm-up pass ($(( $(date +%s) - t0 )) s)"
fi

# Charged: each query as a top-level statement under the hook in reject mode
# with a budget nothing exhausts, then the metering's account of it.
if [ "$(sql -At -c "SELECT to_regproc('throttle_last_statement') IS NOT NULL")" = t ]; then
  $PY - "$work/queries.tsv" >"$work/charge.sql" <<'PYEOF'
import sys
print("SET ogc_throttle.mode = 'reject';")
print("SET statement_timeout = '60s';")
for line in open(sys.argv[1]):
    i, cls, q = line.rstrip("\n").split("\t", 2)
    print("\\o /dev/null")
    print(q + ";")
    print("\\o")
    print("UPDATE fres SET charged = (SELECT charged FROM throttle_last_statement()) WHERE id = %s;" % i)
PYEOF
  chmod 644 "$work/charge.sql"
  sql -f "$work/charge.sql" >/dev/null || echo "# charged pass failed" >&2
fi
sql -At -F $'\t' -c "SELECT q.id, q.cls, r.estimate, r.planner, r.ms, r.charged, coalesce(r.features::text, ''), q.sql FROM fq q JOIN fres r USING (id) ORDER BY q.id" \
  >"$work/results.tsv" || die "reading results failed"
[ -n "${KEEP:-}" ] && { mkdir -p "$KEEP"; cp "$work/results.tsv" "$work/queries.tsv" "$KEEP/"
  sql -At -F $'\t' -c "SELECT id, runs FROM fres ORDER BY id" >"$KEEP/runs.tsv"; }
[ "$TOPLEVEL" = 1 ] && echo "### measured: EXPLAIN (ANALYZE) execution time"
$PY "$here/analyze.py" "$work/results.tsv" ${FIT:+--fit}
# top_table TIMINGS RESULTS KEPT_TIMINGS TITLE: the prices against a top-level timing table's times
top_table() {
  sql -At -F $'\t' -c "SELECT q.id, q.cls, r.estimate, r.planner, t.ms, r.charged, coalesce(r.features::text, ''), q.sql FROM fq q JOIN fres r USING (id) JOIN $1 t USING (id) ORDER BY q.id" \
    >"$work/$2" || die "reading results failed"
  [ -n "${KEEP:-}" ] && cp "$work/$2" "$work/$3" "$KEEP/"
  echo
  echo "### measured: $4"
  $PY "$here/analyze.py" "$work/$2" ${FIT:+--fit} --executor-charge
}
[ "$TOPLEVEL" = 1 ] && top_table ftop results_top.tsv toptime.tsv \
  "the same queries as top-level statements (duration lines; parsing, planning, sending the rows and the commit included)"
[ "$INROW" = 1 ] && top_table ftop_inrow results_inrow.tsv toptime_inrow.tsv \
  "top-level statements, each timed right after itself (INROW=1: the second of two runs in a row)"
fi

# Charged against measured, and the disguised twins: statements of a login role whose budget
# never refills in practice (rate 0.01 ms/s, capacity 1e7 ms: nothing is refused or cut off), each
# run under an identity of its own, so that its bucket's debit is its charge; PostgreSQL logs the
# duration of each (log_min_duration_statement = 0 for these roles only). The buckets are read
# once every session of those roles has ended (a settlement under 10 ms is written then at the latest).
[ "$CHARGES" = 1 ] || [ "$TWINS" = 1 ] || exit 0
[ "$(sql -At -c "SELECT to_regproc('throttle_last_statement') IS NOT NULL")" = t ] || die "CHARGES/TWINS need the metering (extension 0.2)"
setup_role() {  # setup_role NAME [IDENTITY]: a login role of the benchmark, trusted to choose its identity
  sql -c "CREATE ROLE $1 LOGIN IN ROLE fid_group" >/dev/null &&
    for set in "ogc_throttle.mode = 'reject'" "ogc_throttle.capacity = 10000000" "ogc_throttle.rate = 0.01" \
      "ogc_throttle.charge_connection = off" "ogc_throttle.cost_max = 1000000" "log_min_duration_statement = 0" \
      ${2:+"ogc_throttle.identity = '$2'"}; do
      sql -c "ALTER ROLE $1 SET $set" >/dev/null || return 1
    done
}
sql -c "CREATE ROLE fid_group NOLOGIN" -c "GRANT SELECT ON ALL TABLES IN SCHEMA public TO fid_group" \
  -c "GRANT EXECUTE ON FUNCTION throttle_spend(text, float8) TO fid_group" >/dev/null || die "creating the roles failed"
setup_role fid_bench || die "creating the roles failed"
as_bench() { pg_psql "$C" "$PORT" -d postgres -U "${ROLE:-fid_bench}" "$@"; }
bench_sessions_gone() {
  local k
  for k in $(seq 1 200); do
    [ "$(sql -At -c "SELECT count(*) FROM pg_stat_activity WHERE usename LIKE 'fid\_%'")" = 0 ] && return 0
    sleep 0.05
  done
  echo "# some sessions of the benchmark roles did not end" >&2
}
read_buckets() {  # the debit of every bucket: capacity - tokens + the refill since its last charge
  bench_sessions_gone
  sql -c "\\copy (SELECT identity, capacity - tokens + rate * extract(epoch FROM clock_timestamp() - last_request) FROM throttle_buckets) TO '$work/buckets.tsv'" \
    >/dev/null || die "reading the buckets failed"
}
if [ "$CHARGES" = 1 ]; then
  echo
  echo "## Charged vs measured (CHARGES=1)"
  sql -c "CREATE TABLE fworkers AS SELECT id, 0 AS w FROM fq" -c "DO \$\$ DECLARE q record; j json; BEGIN
    FOR q IN SELECT * FROM fq LOOP
      EXECUTE 'EXPLAIN (FORMAT JSON) ' || q.sql INTO j;
      UPDATE fworkers SET w = (SELECT coalesce(max(m[1]::int), 0) FROM regexp_matches(j::text, '\"Workers Planned\": (\d+)', 'g') m) WHERE id = q.id;
    END LOOP; END \$\$" -c "\\copy fworkers TO '$work/workers.tsv'" >/dev/null || die "planning the workload failed"
  # Two passes: the plans as configured (parallel workers allowed, as in the timing above), then serial.
  for pass in fq fs; do
    if [ $pass = fq ]; then echo "### every query once, parallel plans allowed (max_parallel_workers_per_gather = $(sql -At -c 'SHOW max_parallel_workers_per_gather'))"
    else echo; echo "### every query once, serial (max_parallel_workers_per_gather = 0)"; fi
    $PY "$here/charges.py" gen "$work/queries.tsv" $pass $([ $pass = fs ] && echo serial) >"$work/charges_$pass.sql" &&
      chmod 644 "$work/charges_$pass.sql"
    uptime | sed 's/^/# load before: /'
    t0=$(date +%s)
    as_bench -At -F $'\t' -f "$work/charges_$pass.sql" >"$work/last_$pass.tsv" 2>"$work/charges.err" ||
      echo "# the charges pass failed" >&2
    grep -v '^$' "$work/charges.err" | head -5
    echo "# ran in $(( $(date +%s) - t0 )) s"; uptime | sed 's/^/# load after: /'
    read_buckets
    $PY "$here/charges.py" report "$work/queries.tsv" $pass "$work/buckets.tsv" "$C/server.log" "$work/last_$pass.tsv" \
      $([ $pass = fq ] && echo "$work/workers.tsv")
  done
fi
if [ "$TWINS" = 1 ]; then
  echo
  echo "## Disguised twins (TWINS=1, $NT instances per shape, median of 3 runs, pairs alternating)"
  mkdir -p "$work/twins" && $PY "$here/twins.py" gen "$work/cities.tsv" "$NT" "$SEED" "$work/twins" || die "twins.py failed"
  chmod -R a+rX "$work/twins"
  while IFS=$'\t' read -r role _ _; do setup_role "$role" fid.warm || die "creating $role failed"; done <"$work/twins/roles.tsv"
  uptime | sed 's/^/# load before: /'
  t0=$(date +%s)
  # Then the SET ROLE runs: a session each, under a fresh login role, in the same alternating order.
  as_bench -f "$work/twins/twins.sql" >/dev/null 2>"$work/twins.err" || echo "# the twins pass failed" >&2
  while IFS=$'\t' read -r role _ file; do ROLE=$role as_bench -f "$file" >/dev/null 2>>"$work/twins.err"; done <"$work/twins/roles.tsv"
  grep -v '^$' "$work/twins.err" | head -5
  echo "# ran in $(( $(date +%s) - t0 )) s"; uptime | sed 's/^/# load after: /'
  read_buckets
  $PY "$here/twins.py" report "$work/twins" "$work/buckets.tsv" "$C/server.log"
fi
if [ -n "${KEEP:-}" ]; then  # the raw material of both: bucket debits, duration lines, the twins' scripts
  mkdir -p "$KEEP"
  grep -a 'duration: .*/\*fid:' "$C/server.log" >"$KEEP/durations.log"
  cp "$work/buckets.tsv" "$KEEP/"
  cp "$work"/last_*.tsv "$work/workers.tsv" "$KEEP/" 2>/dev/null
  [ -d "$work/twins" ] && cp -r "$work/twins" "$KEEP/"
fi
