#!/usr/bin/env bash
# A tile's envelope with its arguments known (a generic plan's ST_TileEnvelope($1, $2, $3)) is priced from its box
# computed as PostGIS computes the envelope, not built through PostGIS. That box must be PostGIS's to the last bit:
# each statement runs under a generic plan in two spellings, one the pricing reads (ST_TileEnvelope(…)) and one it
# cannot, which PostGIS builds (ST_SetSRID(ST_TileEnvelope(…), 3857), the same geometry), and the two estimates
# must be equal: the && filter with margins from -0.5 to 3, custom bounds, ST_AsMVTGeom's box2d bounds, zooms 0-20.
# What PostGIS refuses (a margin under -0.5, a tile outside its zoom) still fails with PostGIS's own error.
set -uo pipefail
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/estimate_twins.sh"

cluster_up 55499 "shared_preload_libraries = 'ogc_throttle'" "max_parallel_workers_per_gather = 0"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   SELECT setseed(0.5);
   CREATE TABLE pts AS SELECT i AS id, i % 7 AS kind,
     ST_SetSRID(ST_MakePoint(556597 + random() * 1113195, 5621521 + random() * 1740345), 3857) AS geom
     FROM generate_series(1, 20000) i;
   CREATE INDEX ON pts USING gist (geom);
   ANALYZE pts;
   SELECT throttle_density_build('pts', 'geom');" >/dev/null || { not_ok "setup"; tap_exit; }

# The same statements, with the envelope read (R) and built by PostGIS (B).
env_r='ST_TileEnvelope($1, $2, $3, margin => $4)'
env_b='ST_SetSRID(ST_TileEnvelope($1, $2, $3, margin => $4), 3857)'
own_r='ST_TileEnvelope($1, $2, $3, ST_MakeEnvelope(0, 5000000, 2000000, 8000000, 3857))'
own_b='ST_SetSRID(ST_TileEnvelope($1, $2, $3, ST_MakeEnvelope(0, 5000000, 2000000, 8000000, 3857)), 3857)'
tile() {  # tile ENVELOPE BOUNDS
  echo "SELECT length(ST_AsMVT(t, 'pts')) FROM (SELECT id, kind, ST_AsMVTGeom(geom, $2, 4096, 64, true) AS geom
        FROM pts WHERE geom && $1) t"
}
python3 - "$DIR/cases" <<'PY'
import random, sys
random.seed(9)
with open(sys.argv[1], "w") as out:
    for i in range(40):
        z = random.randint(0, 20); n = 1 << z
        if i % 2:  # over the data
            x = int((random.uniform(556597, 1669792) + 20037508.34) * n / 40075016.68)
            y = int((20037508.34 - random.uniform(5621521, 7361866)) * n / 40075016.68)
        else:
            x, y = random.randrange(n), random.randrange(n)
        m = random.choice(["0", "0.015625", "0.5", "-0.5", "-0.25", "3", "0.125"])
        out.write(f"{z} {x} {y} {m}\n")
PY
{
  echo "SET plan_cache_mode = force_generic_plan; SET ogc_throttle.mode = 'log';"
  echo "PREPARE fr(int, int, int, float8) AS SELECT count(*) FROM pts WHERE geom && $env_r;"
  echo "PREPARE fb(int, int, int, float8) AS SELECT count(*) FROM pts WHERE geom && $env_b;"
  echo "PREPARE cr(int, int, int) AS SELECT count(*) FROM pts WHERE geom && $own_r;"
  echo "PREPARE cb(int, int, int) AS SELECT count(*) FROM pts WHERE geom && $own_b;"
  echo "PREPARE tr(int, int, int) AS $(tile 'ST_TileEnvelope($1, $2, $3, margin => 0.015625)' 'ST_TileEnvelope($1, $2, $3)');"
  echo "PREPARE tb(int, int, int) AS $(tile 'ST_SetSRID(ST_TileEnvelope($1, $2, $3, margin => 0.015625), 3857)' \
    'ST_SetSRID(ST_TileEnvelope($1, $2, $3), 3857)::box2d');"
  while read -r z x y m; do
    for p in fr fb; do echo "EXECUTE $p($z, $x, $y, $m); SELECT 'E $p $z/$x/$y/$m ' || estimate FROM throttle_last_statement();"; done
    for p in cr cb tr tb; do echo "EXECUTE $p($z, $x, $y); SELECT 'E $p $z/$x/$y ' || estimate FROM throttle_last_statement();"; done
  done <"$DIR/cases"
} >"$DIR/run.sql"
pg_psql "$DIR" "$PORT" -d postgres -At -f "$DIR/run.sql" >"$DIR/run.out" 2>"$DIR/run.err"
for pr in "fr fb" "cr cb" "tr tb"; do check_twins $pr 40; done
check_eq "no error for the valid tiles" "" "$(cat "$DIR/run.err")"

# What PostGIS refuses fails as PostGIS fails it, read or built.
refused() {  # refused NAME ENVELOPE ARGS: the error of one generic-plan execution
  pg_psql "$DIR" "$PORT" -d postgres -At -c "SET plan_cache_mode = force_generic_plan" -c "SET ogc_throttle.mode = 'log'" \
    -c "PREPARE $1(int, int, int, float8) AS SELECT count(*) FROM pts WHERE geom && $2" -c "EXECUTE $1($3)" 2>&1
}
for p in fr fb; do
  env=$([ $p = fr ] && echo "$env_r" || echo "$env_b")
  out="$(refused $p "$env" "3, 1, 1, -0.75") $(refused $p "$env" "3, 8, 1, 0")"
  echo "# $p: $(grep -o 'ERROR:.*' <<<"$out" | tr '\n' ' ')"
  check "$p: a margin under -0.5 fails with PostGIS's error" grep -q 'Margin must not be less than -50%' <<<"$out"
  check "$p: a tile outside its zoom fails with PostGIS's error" grep -q 'Invalid tile x value, 8' <<<"$out"
done
tap_exit
