#!/usr/bin/env bash
# Who a metered session may give a table to. Autovacuum's upkeep of a table and the functions of its
# indexes that autovacuum runs are charged to the table's owner. A throttled role that is a member of a group
# role whose settings charge nothing could give its table to the group and have its upkeep done free: by
# ALTER TABLE … OWNER TO, REASSIGN OWNED, SET ROLE and CREATE TABLE (or CREATE TABLE AS, SELECT INTO, CREATE
# MATERIALIZED VIEW, EXPLAIN ANALYZE CREATE TABLE … AS), CREATE SCHEMA … AUTHORIZATION with a table in it, or a
# SECURITY DEFINER function of the group's that creates the table. Each is refused now (42501, the role to fix
# in the HINT), and loses nothing. Controls: a group that is metered, a temporary table, an EXPLAIN without
# ANALYZE, a view, a session that is not metered, and an administrator's SECURITY DEFINER function owned by a
# role the member does not belong to all go on. What an operator sees: throttle_role_settings(role), and
# throttle_unpaid_upkeep listing a table given to the group before (here by a member that is not metered).
set -uo pipefail
. "$(dirname "$0")/common.sh"

cluster_up 55510 "shared_preload_libraries = 'ogc_throttle'" "autovacuum = off"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle" >/dev/null &&
  metered_roles member freebie &&
  q "CREATE ROLE grp NOLOGIN; ALTER ROLE grp SET ogc_throttle.mode = 'off';
     CREATE ROLE paying NOLOGIN;
     CREATE ROLE helper NOLOGIN; ALTER ROLE helper SET ogc_throttle.mode = 'off';
     ALTER ROLE freebie SET ogc_throttle.mode = 'off';
     GRANT grp, paying TO member; GRANT grp TO freebie;
     GRANT CREATE ON SCHEMA public TO member, freebie, grp, paying, helper; GRANT CREATE ON DATABASE postgres TO member;
     CREATE FUNCTION grp_makes(name text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER
       AS \$\$ BEGIN EXECUTE format('CREATE TABLE %I (a int)', name); END \$\$;
     ALTER FUNCTION grp_makes(text) OWNER TO grp;
     CREATE FUNCTION helper_makes(name text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER
       AS \$\$ BEGIN EXECUTE format('CREATE TABLE %I (a int)', name); END \$\$;
     ALTER FUNCTION helper_makes(text) OWNER TO helper" >/dev/null || { not_ok "setup"; tap_exit; }

as_role() { local r=$1; shift; as_pg psql -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h "$DIR" -p "$PORT" -U "$r" -d postgres "$@"; }
owner() { q "SELECT coalesce((SELECT relowner::regrole::text FROM pg_class WHERE relname = '$1' AND relkind IN ('r', 'm')), 'none')"; }
refused() {  # refused LABEL SQL...: the member's statements end in 42501 naming grp
  as_role member "${@:2}" >/dev/null 2>"$DIR/err"
  check "$1 is refused (42501)" grep -q "42501" "$DIR/err"
  check "... naming the group and what to do" grep -q 'ALTER ROLE grp SET ogc_throttle.mode' "$DIR/err"
}

as_role member -c "CREATE TABLE mine (a int); INSERT INTO mine SELECT generate_series(1, 1000)" >/dev/null 2>"$DIR/err"
check "a metered member creates its own table" test "$(owner mine)" = member

# 1. Each way of giving a table to a group whose mode is off.
refused "ALTER TABLE … OWNER TO an unmetered group" -c "ALTER TABLE mine OWNER TO grp"
sed 's/^/# /' "$DIR/err"
check "... and the table is still the member's, its rows there" \
  eval '[ "$(owner mine)" = member ] && [ "$(q "SELECT count(*) FROM mine")" = 1000 ]'
refused "SET ROLE to the group and CREATE TABLE" -c "SET ROLE grp" -c "CREATE TABLE grps (a int)"
check "... and no table was made" test "$(owner grps)" = none
refused "SET ROLE to the group and CREATE TABLE AS" -c "SET ROLE grp" -c "CREATE TABLE grps2 AS SELECT 1 AS a"
refused "SET ROLE to the group and CREATE MATERIALIZED VIEW" -c "SET ROLE grp" -c "CREATE MATERIALIZED VIEW grpm AS SELECT 1 AS a"
refused "SET ROLE to the group and EXPLAIN ANALYZE CREATE TABLE AS" -c "SET ROLE grp" \
  -c "EXPLAIN (ANALYZE, COSTS OFF) CREATE TABLE grpx AS SELECT 1 AS a"
check "... and no table was made" test "$(owner grpx)" = none
refused "SET ROLE to the group and SELECT INTO" -c "SET ROLE grp" -c "SELECT 1 AS a INTO grps3"
refused "CREATE SCHEMA … AUTHORIZATION the group with a table in it" -c "CREATE SCHEMA gs AUTHORIZATION grp CREATE TABLE gst (a int)"
check "... and no table was made" test "$(owner gst)" = none
refused "REASSIGN OWNED BY the member TO the group" -c "REASSIGN OWNED BY member TO grp"
check "... and the member's table is still its own" test "$(owner mine)" = member
refused "a SECURITY DEFINER function of the group's that creates a table" -c "SELECT grp_makes('grpf')"
check "... and no table was made" test "$(owner grpf)" = none

# 2. What goes on.
as_role member -c "SET ROLE grp" -c "CREATE TEMP TABLE scratch (a int)" >/dev/null 2>"$DIR/err"
check "a temporary table as the group (no autovacuum) is made" test ! -s "$DIR/err"
as_role member -c "SET ROLE grp" -c "EXPLAIN (COSTS OFF) CREATE TABLE grpy AS SELECT 1 AS a" >/dev/null 2>"$DIR/err"
check "an EXPLAIN without ANALYZE (nothing made) goes on" test ! -s "$DIR/err"
as_role member -c "CREATE TABLE given (a int)" -c "ALTER TABLE given OWNER TO paying" >/dev/null 2>"$DIR/err"
check "a table given to a metered group" test "$(owner given)" = paying
as_role member -c "SELECT helper_makes('helped')" >/dev/null 2>"$DIR/err"
check "an administrator's SECURITY DEFINER function, of a role the member is not in, makes its table" \
  test "$(owner helped)" = helper
as_role member -c "CREATE VIEW v AS SELECT 1 AS a" -c "ALTER VIEW v OWNER TO grp" >/dev/null 2>"$DIR/err"
check "a view (no upkeep) given to the group" test "$(q "SELECT relowner::regrole FROM pg_class WHERE relname = 'v'")" = grp
# (ALTER TABLE naming a view is checked as a table: see upkeep_owner.cpp)
refused "ALTER TABLE naming a view" -c "CREATE VIEW v2 AS SELECT 1 AS a" -c "ALTER TABLE v2 OWNER TO grp"
as_role freebie -c "CREATE TABLE f (a int)" -c "ALTER TABLE f OWNER TO grp" >/dev/null 2>"$DIR/err"
check "a session that is not metered gives its table to the group" test "$(owner f)" = grp

# 3. What an operator sees: each role's settings as its sessions start, and the tables whose upkeep no budget pays.
check_eq "throttle_role_settings: the member is metered (ALTER ROLE ALL)" "reject|t|1000000|0.01|t" \
  "$(q "SELECT mode, true_up, capacity, rate, charged FROM throttle_role_settings('member')")"
check_eq "... the group is not (its own ALTER ROLE)" "off|f" "$(q "SELECT mode, charged FROM throttle_role_settings('grp')")"
q "ALTER ROLE paying IN DATABASE postgres SET ogc_throttle.mode = 'log'" >/dev/null
check_eq "... a role's setting in this database over its own" "log|f" \
  "$(q "SELECT mode, charged FROM throttle_role_settings('paying')")"
q "ALTER ROLE paying IN DATABASE postgres RESET ogc_throttle.mode" >/dev/null
check_eq "throttle_unpaid_upkeep: the table an unmetered member gave the group, with its metered member" "f|grp|{member}" \
  "$(q "SELECT relation, owner, metered_members FROM throttle_unpaid_upkeep ORDER BY 1::text")"
q "CREATE ROLE watcher LOGIN IN ROLE pg_monitor" >/dev/null
check_eq "... which pg_monitor reads" "1" "$(as_role watcher -At -c "SELECT count(*) FROM throttle_unpaid_upkeep" 2>&1)"
as_role member -c "SELECT * FROM throttle_unpaid_upkeep" >/dev/null 2>"$DIR/err"
check "... and a metered role does not" grep -q "permission denied" "$DIR/err"
q "ALTER ROLE grp SET ogc_throttle.mode = 'reject'" >/dev/null
as_role member -c "ALTER TABLE mine OWNER TO grp" >/dev/null 2>"$DIR/err"
check "once the group has a mode of its own (the HINT's advice), the member may give it the table" \
  test "$(owner mine)" = grp
check_eq "... and no table's upkeep is unpaid" "0" "$(q "SELECT count(*) FROM throttle_unpaid_upkeep")"

tap_exit
