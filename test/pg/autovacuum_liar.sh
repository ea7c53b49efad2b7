# Helpers for the tests of work autovacuum does as a table's owner (sourced after common.sh's cluster_up).
# as ROLE psql-args...: psql as ROLE, stderr to $DIR/p.err
as() { local who=$1; shift; as_pg psql -X -h "$DIR" -p "$PORT" -U "$who" -d postgres -At -v VERBOSITY=verbose "$@" 2>"$DIR/p.err"; }
tokens() { q "SELECT round(tokens) FROM throttle_peek('$1')"; }
analyzed() { q "SELECT coalesce(autoanalyze_count, 0) FROM pg_stat_user_tables WHERE relname = '$1'"; }
# liar_table OWNER TABLE ROWS: TABLE analyzed at every change, with an index on TABLE_liar(x), an
# IMMUTABLE function that sleeps 10 ms a row only outside a client backend: what the role's own
# statements run costs it nothing, autovacuum's ANALYZE pays 10 ms a sampled row.
liar_table() {
  as "$1" -c "CREATE FUNCTION $2_liar(x int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS \$\$
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = pg_backend_pid() AND backend_type = 'client backend')
        THEN PERFORM pg_sleep(0.01); END IF;
        RETURN x;
      END \$\$;
    CREATE TABLE $2 (x int) WITH (autovacuum_analyze_threshold = 0, autovacuum_analyze_scale_factor = 0);
    CREATE INDEX ON $2 ($2_liar(x));
    INSERT INTO $2 SELECT generate_series(1, $3);" >/dev/null
}
# wait_for SECONDS COMMAND...: until the command succeeds (true) or the time is up (false).
wait_for() {
  local n=$(( $1 * 4 )); shift
  while [ "$n" -gt 0 ]; do "$@" && return 0; sleep 0.25; n=$((n - 1)); done
  return 1
}
below() { [ "$(tokens "$1")" -lt "$2" ]; }
