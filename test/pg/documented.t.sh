#!/usr/bin/env bash
# The operator's documentation against the real server: every setting of the preloaded library in
# doc/configuration.md with the server's default, range, values and context (and no row for a setting
# the server does not have), every function, view and table of the extension in doc/sql-api.md (a
# function that only backs a documented view excepted), no document calling a function the extension
# lacks, every SQLSTATE the extension's source raises in doc/errors.md, and the delegation of grid builds
# doc/sql-api.md describes.
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55515 "shared_preload_libraries = 'ogc_throttle'"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle" >/dev/null || { not_ok "setup"; tap_exit; }
q "SELECT name, vartype, coalesce(unit, ''), boot_val, coalesce(min_val, ''), coalesce(max_val, ''), context,
          coalesce(enumvals::text, '')
     FROM pg_settings WHERE name LIKE 'ogc_throttle.%' ORDER BY 1" > "$DIR/settings.tsv"
# kind|name|whether an extension view reads it (a function that only backs a view)
q "WITH ext AS (SELECT classid, objid FROM pg_depend
                 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
                   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'ogc_throttle')),
        views AS (SELECT string_agg(pg_get_viewdef(c.oid), ' ') AS defs FROM ext JOIN pg_class c ON c.oid = ext.objid
                   WHERE ext.classid = 'pg_class'::regclass AND c.relkind = 'v')
   SELECT DISTINCT 'function', p.proname, (SELECT defs FROM views) ~ ('\\m' || p.proname || '\\(')
     FROM ext JOIN pg_proc p ON p.oid = ext.objid WHERE ext.classid = 'pg_proc'::regclass
   UNION ALL
   SELECT CASE c.relkind WHEN 'v' THEN 'view' ELSE 'table' END, c.relname, false
     FROM ext JOIN pg_class c ON c.oid = ext.objid WHERE ext.classid = 'pg_class'::regclass
   ORDER BY 2" > "$DIR/objects.tsv"

# doc/sql-api.md's delegation of throttle_density_build: EXECUTE alone is not enough, EXECUTE and the
# table's privileges are, and a grantee still builds only from tables it may read.
q "CREATE ROLE builder LOGIN; GRANT EXECUTE ON FUNCTION throttle_density_build(regclass, name) TO builder;
   CREATE TABLE pois AS SELECT i, ST_SetSRID(ST_MakePoint(i % 100, i / 100), 3857)::geometry(Point, 3857) AS geom
     FROM generate_series(1, 5000) i;
   CREATE TABLE secret AS TABLE pois; GRANT SELECT ON pois TO builder" >/dev/null
build() { as_pg psql -X -At -h "$DIR" -p "$PORT" -U builder -d postgres -c "SELECT throttle_density_build('$1', 'geom')" 2>&1; }
check "throttle_density_build with EXECUTE only is refused (permission denied for table throttle_density)" \
  grep -q "permission denied for table throttle_density" <<<"$(build pois)"
q "GRANT SELECT, INSERT, DELETE ON throttle_density TO builder" >/dev/null
out=$(build pois)
check "... with the table's privileges too, the grantee builds a grid ($out cells)" test "${out:-0}" -gt 0 2>/dev/null
check "... but not from a table it may not read" grep -q "permission denied for table secret" <<<"$(build secret)"

errcodes="$(pg_config --includedir-server)/utils/errcodes.h"
python3 "$root/test/pg/documented_check.py" "$root" "$DIR/settings.tsv" "$DIR/objects.tsv" "$errcodes" ||
  TAP_FAILED=1
tap_exit
