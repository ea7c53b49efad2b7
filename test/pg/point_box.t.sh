#!/usr/bin/env bash
# A search around a point given as parameters (a generic plan's ST_DWithin(geom, ST_SetSRID(ST_MakePoint($1, $2),
# 3857), $3)) is priced from the point's box read from its arguments, not from the point built through PostGIS. That
# box must be PostGIS's: each statement runs under a generic plan in two spellings, one the pricing reads
# (ST_MakePoint) and one it cannot, which PostGIS builds (ST_Point, the same geometry), and the two estimates must be
# equal: ST_DWithin, its && ST_Expand index condition, a point with z, SRIDs PostGIS keeps and one it clamps,
# coordinates that are not finite; and, on a table without a density grid, the point PostGIS's estimate is asked about.
set -uo pipefail
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/estimate_twins.sh"

cluster_up 55508 "shared_preload_libraries = 'ogc_throttle'" "max_parallel_workers_per_gather = 0"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   SELECT setseed(0.5);
   CREATE TABLE pts AS SELECT i AS id,
     ST_SetSRID(ST_MakePoint(556597 + random() * 1113195, 5621521 + random() * 1740345), 3857) AS geom
     FROM generate_series(1, 20000) i;
   CREATE INDEX ON pts USING gist (geom);
   ANALYZE pts;
   SELECT throttle_density_build('pts', 'geom');" >/dev/null || { not_ok "setup"; tap_exit; }

python3 - "$DIR/cases" <<'PY'
import random, sys
random.seed(11)
with open(sys.argv[1], "w") as out:
    for i in range(40):
        x = repr(random.uniform(556597, 1669792)) if i % 4 else repr(random.uniform(-2e7, 2e7))
        y = repr(random.uniform(5621521, 7361866)) if i % 4 else repr(random.uniform(-2e7, 2e7))
        r = random.choice(["0", "10", "250.5", "5000", "40000", "1e6"])
        out.write(f"{x} {y} {r}\n")
    for x, y in (("'NaN'", "6000000"), ("'Infinity'", "6000000"), ("900000", "'-Infinity'")):
        out.write(f"{x} {y} 1000\n")
PY
pt_r='ST_SetSRID(ST_MakePoint($1, $2), 3857)'
pt_b='ST_SetSRID(ST_Point($1, $2), 3857)'
{
  echo "SET plan_cache_mode = force_generic_plan; SET ogc_throttle.mode = 'log';"
  echo "PREPARE dr(float8, float8, float8) AS SELECT count(*) FROM pts WHERE ST_DWithin(geom, $pt_r, \$3);"
  echo "PREPARE db(float8, float8, float8) AS SELECT count(*) FROM pts WHERE ST_DWithin(geom, $pt_b, \$3);"
  echo "PREPARE er(float8, float8, float8) AS SELECT count(*) FROM pts WHERE geom && ST_Expand($pt_r, \$3);"
  echo "PREPARE eb(float8, float8, float8) AS SELECT count(*) FROM pts WHERE geom && ST_Expand($pt_b, \$3);"
  echo "PREPARE zr(float8, float8, float8) AS SELECT count(*) FROM pts
          WHERE ST_DWithin(geom, ST_Force2D(ST_SetSRID(ST_MakePoint(\$1, \$2, 7), 3857)), \$3)
            AND ST_SetSRID(ST_MakePoint(\$1, \$2, 7), 3857) && ST_Expand(ST_SetSRID(ST_MakePoint(\$1, \$2, 7), 3857), \$3);"
  echo "PREPARE zb(float8, float8, float8) AS SELECT count(*) FROM pts
          WHERE ST_DWithin(geom, ST_Force2D(ST_SetSRID(ST_Point(\$1, \$2), 3857)), \$3)
            AND ST_SetSRID(ST_Point(\$1, \$2), 3857) && ST_Expand(ST_SetSRID(ST_Point(\$1, \$2), 3857), \$3);"
  # An SRID as a parameter, against a column without one: 0 and 4326 are kept, -7 becomes 0 (PostGIS's NOTICE).
  echo "CREATE TABLE free AS SELECT id, ST_SetSRID(geom, 0) AS geom FROM pts; CREATE INDEX ON free USING gist (geom); ANALYZE free;"
  echo "PREPARE sr(float8, float8, float8, int) AS SELECT count(*) FROM free WHERE geom && ST_Expand(ST_SetSRID(ST_MakePoint(\$1, \$2), \$4), \$3);"
  echo "PREPARE sb(float8, float8, float8, int) AS SELECT count(*) FROM free WHERE geom && ST_Expand(ST_SetSRID(ST_Point(\$1, \$2), \$4), \$3);"
  # No density grid on free: the search's rows are PostGIS's estimate for this execution's point, built only then
  # (the point first or second).
  echo "PREPARE fr(float8, float8, float8) AS SELECT count(*) FROM free WHERE ST_DWithin(geom, ST_MakePoint(\$1, \$2), \$3);"
  echo "PREPARE fb(float8, float8, float8) AS SELECT count(*) FROM free WHERE ST_DWithin(geom, ST_Point(\$1, \$2), \$3);"
  echo "PREPARE gr(float8, float8, float8) AS SELECT count(*) FROM free WHERE ST_DWithin(ST_MakePoint(\$1, \$2), geom, \$3);"
  echo "PREPARE gb(float8, float8, float8) AS SELECT count(*) FROM free WHERE ST_DWithin(ST_Point(\$1, \$2), geom, \$3);"
  i=0
  while read -r x y r; do
    i=$((i + 1))
    for p in dr db er eb zr zb fr fb gr gb; do echo "EXECUTE $p($x, $y, $r); SELECT 'E $p $i ' || coalesce(estimate::text, 'null') FROM throttle_last_statement();"; done
  done <"$DIR/cases"
  i=0
  while read -r x y r; do
    i=$((i + 1))
    for s in 0 -7; do
      for p in sr sb; do echo "EXECUTE $p($x, $y, $r, $s); SELECT 'E $p $i/$s ' || coalesce(estimate::text, 'null') FROM throttle_last_statement();"; done
    done
  done < <(head -20 "$DIR/cases")
} >"$DIR/run.sql"
pg_psql "$DIR" "$PORT" -d postgres -At -f "$DIR/run.sql" >"$DIR/run.out" 2>"$DIR/run.err"
for pr in "dr db 43" "er eb 43" "zr zb 43" "fr fb 43" "gr gb 43" "sr sb 40"; do check_twins $pr; done
echo "# messages: $(sed "s/^psql:[^ ]* //" "$DIR/run.err" | sort | uniq -c | tr -s " " | tr "\n" ";")"
check "an SRID PostGIS clamps is left to PostGIS (its NOTICE, once for each spelling)" \
  test "$(grep -c 'SRID value -7 converted to the officially unknown SRID value 0' "$DIR/run.err")" -ge 40
check "no error" test -z "$(grep ERROR "$DIR/run.err")"
tap_exit
