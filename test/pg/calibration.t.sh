#!/usr/bin/env bash
# Calibration (issue 9): every completed priced statement leaves a sample
# (its estimate's features and its measured time); throttle_calibrate() fits
# the weights from them, shows them beside the configured ones with the fit's
# quality, refuses to fit from nothing, and, stored and applied
# (ogc_throttle.calibration = apply), makes estimates track measured time.
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55482 "shared_preload_libraries = 'ogc_throttle'" "max_parallel_workers_per_gather = 0" \
  "ogc_throttle.max_samples = 5000"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   CREATE TABLE pts AS SELECT i, ST_SetSRID(ST_MakePoint(random(), random() * 0.2), 4326) AS geom
     FROM generate_series(1, 200000) i;
   CREATE INDEX ON pts USING gist (geom); ANALYZE pts;" >/dev/null || { not_ok "setup"; tap_exit; }

err=$(q "SELECT * FROM throttle_calibrate()" 2>&1 >/dev/null)
check "an empty sample store is a clear error" grep -q 'cannot calibrate: too few usable samples' <<<"$err"
check "... saying how many samples there are" grep -q 'DETAIL:  0 usable samples among the 0 kept' <<<"$err"
check_eq "the view shows nothing yet (no error)" "0" "$(q "SELECT count(*) FROM throttle_calibration")"

# Deliberately bad weights: a radius search "costs" 50 ms plus 1 ms a row.
workload() {
  local i sql="SET ogc_throttle.mode = 'log'; SET ogc_throttle.radius_fixed_cost = 50; SET ogc_throttle.radius_row_cost = 1;"
  sql+="SET ogc_throttle.bbox_fixed_cost = 50; SET ogc_throttle.bbox_row_cost = 1;"
  for i in $(seq 1 "$1"); do
    sql+="SELECT count(*) FROM pts WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint(0.$((RANDOM % 9 + 1)), 0.0$((RANDOM % 9 + 1))), 4326), 0.0$(( (i % 9) + 1 ))$((RANDOM % 10)));"
  done
  echo "$sql"
}
q "$(workload 150)" >/dev/null
kept=$(q "SELECT samples_used FROM throttle_calibration LIMIT 1")
check "the completed statements left samples ($kept of 150)" test "${kept:-0}" -ge 140
# Each sample shows what the fit reads (its features, in throttle_features' shape): a search's sample
# holds its call (priced by its index condition's box) and the scan's rows, and priced with the
# configured weights they make its estimate.
one="SELECT count(*) FROM pts WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint(0.5, 0.05), 4326), 0.02)"
q "SET ogc_throttle.mode = 'log'; $one" >/dev/null
feat=$(q "SELECT coalesce(features->'radius'->>0, features->'bbox'->>0)::float8 = 1 AND (features->'scan'->>1)::float8 > 0
                 AND abs((SELECT sum(coalesce((f.value->>0)::float8 * CASE f.key WHEN 'radius' THEN 0.037 WHEN 'bbox' THEN 0.025 WHEN 'scan' THEN 0.017 WHEN 'join' THEN 0.034 WHEN 'statement' THEN 0.05 ELSE 0 END, 0)
                                  + (f.value->>1)::float8 * CASE f.key WHEN 'scan' THEN 0.0003 WHEN 'join' THEN 0.0025 WHEN 'distance' THEN 0.0039 WHEN 'statement' THEN 0.0036 WHEN 'page' THEN 0.0011 WHEN 'output' THEN 0.0004 ELSE 0 END)
                          FROM json_each(features) f) - estimate) < 1e-3 * estimate + 1e-4
          FROM throttle_samples() WITH ORDINALITY s(measured, estimate, classes, features, n) ORDER BY n DESC LIMIT 1")
check_eq "a sample's features are the fit's input: its classes and rows, and the configured weights price them at its estimate" "t" "$feat"
row=$(q "SELECT class, fitted, round(fitted_per_row::numeric, 5), round(spearman_configured::numeric, 2), round(spearman_fitted::numeric, 2), round(median_ratio::numeric, 2)
         FROM throttle_calibrate() ORDER BY samples DESC LIMIT 1")
echo "# fit: $row"
IFS='|' read -r cls fitted per_row sp_conf sp_fit ratio <<<"$row"
check_eq "the searches' class was fitted" "t" "$fitted"
check "the per-row weight fitted is far below the 1 ms configured ($per_row)" awk -v w="$per_row" 'BEGIN { exit !(w >= 0 && w < 0.05) }'
check "the fitted estimates sit near what statements take (median measured/estimate $ratio within 3x; configured: ~1000x)" \
  awk -v r="$ratio" 'BEGIN { exit !(r >= 0.33 && r <= 3) }'
check "and rank the measured times at least as well as the configured ones ($sp_fit vs $sp_conf)" \
  awk -v a="$sp_fit" -v b="$sp_conf" 'BEGIN { exit !(a >= b - 0.05) }'

# Stored and applied: the same statements are now estimated near what they take.
q "SET client_min_messages = warning; SELECT count(*) FROM throttle_calibrate(true)" >/dev/null
q "ALTER SYSTEM SET ogc_throttle.calibration = 'apply'" >/dev/null; q "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
q "$(workload 60)" >/dev/null
ratio=$(q "SELECT round(median_ratio::numeric, 2) FROM throttle_calibrate() ORDER BY samples DESC LIMIT 1")
est=$(q "SET ogc_throttle.radius_fixed_cost = 50; SET ogc_throttle.radius_row_cost = 1; SET ogc_throttle.bbox_fixed_cost = 50; SET ogc_throttle.bbox_row_cost = 1;
         SELECT round(cost::numeric, 2) FROM throttle_explain(\$\$SELECT count(*) FROM pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(0.5 0.05)'::geometry, 0.01)\$\$) WHERE call LIKE 'total%'")
echo "# applied: a 0.01-degree search is now estimated at $est ms (the configured weights said >= 50)"
check "applied, the fitted weights replace the configured ones in estimates" awk -v e="$est" 'BEGIN { exit !(e < 50) }'
q "ALTER SYSTEM RESET ogc_throttle.calibration" >/dev/null; q "SELECT pg_reload_conf()" >/dev/null
sleep 0.5
est_off=$(q "SET ogc_throttle.radius_fixed_cost = 50; SET ogc_throttle.radius_row_cost = 1; SET ogc_throttle.bbox_fixed_cost = 50; SET ogc_throttle.bbox_row_cost = 1;
         SELECT round(cost::numeric, 2) FROM throttle_explain(\$\$SELECT count(*) FROM pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(0.5 0.05)'::geometry, 0.01)\$\$) WHERE call LIKE 'total%'")
check "calibration = off: the administrator's weights again ($est_off)" awk -v e="$est_off" 'BEGIN { exit !(e >= 50) }'

# A sample is the statement as its client runs it (bench/HISTORY.md, "Timed as a client's statement"):
# what the metering charges, planning and the rest of its messages included, not its executor time
# alone. Nine relations joined with the collapse limits raised plan for ~100 ms around a search that
# executes in under a millisecond. Compared with the server's own duration lines (summed, for the
# extended protocol's Parse, Bind and Execute), tagged.
q "CREATE TABLE k AS SELECT i FROM generate_series(1, 10) i; ANALYZE k" >/dev/null
joins=""; conds=""
for j in $(seq 1 8); do joins+=", k k$j"; conds+=" AND k$j.i = p.i"; done
plan_heavy="SELECT count(*) FROM pts p $joins WHERE ST_DWithin(p.geom, ST_SetSRID(ST_MakePoint(0.5, 0.1), 4326), 0.001) $conds /*plan_heavy_TAG*/"
heavy_settings="SET ogc_throttle.mode = 'log'; SET join_collapse_limit = 20; SET from_collapse_limit = 20"
last_sample() { q "SELECT round(measured::numeric, 2) FROM throttle_samples() WITH ORDINALITY s(measured, estimate, classes, features, n) ORDER BY n DESC LIMIT 1"; }
logged() {  # TAG: the durations (ms, summed) of the statement's lines
  grep -a " LOG:  duration: .*plan_heavy_$1" "$DIR/server.log" |
    awk '{ for (i = 1; i < NF; i++) if ($i == "duration:") { s += $(i + 1); break } } END { printf "%.2f", s }'
}
executor=$(pg_psql "$DIR" "$PORT" -d postgres -At -c "$heavy_settings" -c "SET log_min_duration_statement = 0" \
  -c "${plan_heavy/TAG/simple}" -c "SELECT round(measured::numeric, 2) FROM throttle_last_statement()" | tail -1)
sample=$(last_sample); took=$(logged simple)
echo "# simple Query: sample $sample ms, executor $executor ms, duration line $took ms"
check "the plan-heavy statement's time is mostly planning (executor $executor of $took ms)" \
  awk -v e="$executor" -v t="$took" 'BEGIN { exit !(t > 20 && e < 0.3 * t) }'
check "its sample is the statement's time, planning included ($sample of $took ms, 0.8-1.2)" \
  awk -v s="$sample" -v t="$took" 'BEGIN { exit !(s >= 0.8 * t && s <= 1.2 * t + 1) }'
PQEXEC=$(pg_readable_copy "$root/test/pg/pqexec.py")
echo "${plan_heavy/TAG/extended}" >"$DIR/heavy.sql"; chmod 644 "$DIR/heavy.sql"
as_pg python3 "$PQEXEC" "host=$DIR port=$PORT user=postgres dbname=postgres options='-c ogc_throttle.mode=log -c join_collapse_limit=20 -c from_collapse_limit=20 -c log_min_duration_statement=0'" \
  "$DIR/heavy.sql" >/dev/null
sample=$(last_sample); took=$(logged extended)
echo "# Parse, Bind, Execute, Sync: sample $sample ms, duration lines $took ms"
check "through the extended protocol too, the Bind's planning included ($sample of $took ms, 0.8-1.2)" \
  awk -v s="$sample" -v t="$took" 'BEGIN { exit !(t > 20 && s >= 0.8 * t && s <= 1.2 * t + 1) }'

# Automatic refits: with calibration = apply, a fit every 1000 samples (max_samples 5000 here) and no
# call of throttle_calibrate(). A restart empties the store and forgets the fit.
bad_estimate() {
  q "SET ogc_throttle.radius_fixed_cost = 50; SET ogc_throttle.radius_row_cost = 1; SET ogc_throttle.bbox_fixed_cost = 50; SET ogc_throttle.bbox_row_cost = 1;
     SELECT round(cost::numeric, 2) FROM throttle_explain(\$\$SELECT count(*) FROM pts WHERE ST_DWithin(geom, 'SRID=4326;POINT(0.5 0.05)'::geometry, 0.01)\$\$) WHERE call LIKE 'total%'"
}
q "ALTER SYSTEM SET ogc_throttle.calibration = 'apply'" >/dev/null; q "ALTER SYSTEM SET log_min_messages = debug1" >/dev/null
pg_stop "$DIR" fast
pg_start "$DIR" "$PORT" || { not_ok "the server restarts"; tap_exit; }
est_fresh=$(bad_estimate)
check "after a restart nothing is fitted: the configured weights ($est_fresh)" awk -v e="$est_fresh" 'BEGIN { exit !(e >= 50) }'
q "$(workload 1050)" >/dev/null
# The refit runs in a background worker started for it (the client does not wait): up to 10 s for it.
for _ in $(seq 1 50); do
  est_auto=$(bad_estimate)
  awk -v e="$est_auto" 'BEGIN { exit !(e < 50) }' && break
  sleep 0.2
done
check "1050 statements later a fit was made and applied by itself ($est_auto)" awk -v e="$est_auto" 'BEGIN { exit !(e < 50) }'
check "... in a background worker of its own" grep -q 'refitted from [0-9]* samples in a background worker' "$DIR/server.log"
check "... not in a client's backend" bash -c "! grep -q 'refitted from [0-9]* samples in the backend' '$DIR/server.log'"
# With no worker slot to be had, the backend whose statement made the fit due fits, as before workers.
q "ALTER SYSTEM SET max_worker_processes = 0" >/dev/null
pg_stop "$DIR" fast
pg_start "$DIR" "$PORT" || { not_ok "the server restarts"; tap_exit; }
q "$(workload 1050)" >/dev/null
est_inline=$(bad_estimate)
check "no worker slot (max_worker_processes = 0): the fit is made all the same, at once ($est_inline)" \
  awk -v e="$est_inline" 'BEGIN { exit !(e < 50) }'
check "... by the client's backend" grep -q 'refitted from [0-9]* samples in the backend' "$DIR/server.log"
q "ALTER SYSTEM RESET max_worker_processes" >/dev/null
pg_stop "$DIR" fast
pg_start "$DIR" "$PORT" || { not_ok "the server restarts"; tap_exit; }
q "$(workload 300)" >/dev/null  # a store to fit from again (a restart empties it)
q "ALTER SYSTEM RESET ogc_throttle.calibration" >/dev/null; q "ALTER SYSTEM RESET log_min_messages" >/dev/null; q "SELECT pg_reload_conf()" >/dev/null
check_eq "an ordinary role cannot calibrate" "42501" \
  "$(q "CREATE ROLE someone LOGIN" >/dev/null; as_pg psql -X -h "$DIR" -p "$PORT" -U someone -d postgres -At -v VERBOSITY=verbose -c 'SELECT * FROM throttle_calibrate()' 2>&1 | grep -o '42501' | head -1)"

# Poisoned samples: a throttled client can leave samples that take far longer than their features say
# (here a 20 ms pg_sleep beside a search), and a fit made with them moves the weights every client is
# priced by. Its statements are
# charged either way; ogc_throttle.calibration_samples = off, set for its role by a superuser, keeps them
# out of the store.
q "CREATE ROLE poisoner LOGIN; GRANT SELECT ON pts TO poisoner;
   ALTER ROLE poisoner SET ogc_throttle.mode = 'reject'; ALTER ROLE poisoner SET ogc_throttle.capacity = 1000000;
   ALTER ROLE poisoner SET ogc_throttle.rate = 0.01; ALTER ROLE poisoner SET ogc_throttle.calibration_samples = off;
   ALTER ROLE poisoner SET ogc_throttle.lazy_pricing = off" >/dev/null
# (lazy pricing off: with it, the default, a full bucket prices and samples one statement in 16, and
# 'none left' would say little)
as_poisoner() { as_pg psql -X -h "$DIR" -p "$PORT" -U poisoner -d postgres -At -v VERBOSITY=verbose -c "$1" 2>&1; }
poison() {
  local i sql=""
  for i in $(seq 1 "$1"); do
    sql+="SELECT count(*) FROM (SELECT pg_sleep(0.02)) s, pts WHERE ST_DWithin(geom, ST_SetSRID(ST_MakePoint(0.$((RANDOM % 9 + 1)), 0.05), 4326), 0.002);"
  done
  echo "$sql"
}
kept() { q "SELECT count(*) FROM throttle_samples()"; }
fit() { q "SELECT string_agg(class || ' ' || fitted_fixed || ' ' || fitted_per_row, ', ' ORDER BY class) FROM throttle_calibrate()"; }
before_n=$(kept); before_fit=$(fit)
as_poisoner "$(poison 120)" >/dev/null
check_eq "samples off for a role: its 120 statements left none" "$before_n" "$(kept)"
check_eq "... and the fit is the one before them, weight for weight" "$before_fit" "$(fit)"
check_eq "... and the role cannot turn its samples back on" "42501" \
  "$(as_poisoner "SET ogc_throttle.calibration_samples = on" | grep -o '42501' | head -1)"
check "... while its statements were charged (its bucket went down by at least 120 x 20 ms)" \
  awk -v t="$(as_poisoner "SELECT tokens FROM throttle_peek()")" 'BEGIN { exit !(t != "" && t <= 1000000 - 2400) }'
q "ALTER ROLE poisoner RESET ogc_throttle.calibration_samples" >/dev/null
as_poisoner "$(poison 120)" >/dev/null
after_n=$(kept)
check "samples on (the default): the same 120 statements left samples ($before_n -> $after_n)" test "$after_n" -ge $((before_n + 100))
check "... and they moved the fit" test "$before_fit" != "$(fit)"
tap_exit
