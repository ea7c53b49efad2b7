# Sourced by perf_share.sh and symbol_diff.sh (after test/lib/pg.sh): their throwaway cluster.
# perf_workdir: PGBENCH, a work directory whose cluster is stopped and removed on exit, die().
# perf_cluster PORT [settings...]: run.sh's data (pgbench -i -s 1, setup.sql's points, a density grid)
# in a cluster that preloads the installed library in reject mode with a budget nothing exhausts.
perf_workdir() {
  PGBENCH=/usr/lib/postgresql/15/bin/pgbench
  [ -x "$PGBENCH" ] || PGBENCH="$PGBIN/pgbench"
  command -v perf >/dev/null || { echo "${0##*/}: perf is not installed" >&2; exit 1; }
  work=$(pg_tmpdir)
  trap 'pg_stop "$work" immediate; rm -rf "$work"' EXIT
  trap 'exit 130' INT TERM
}

die() { echo "${0##*/}: $*" >&2; exit 1; }

perf_cluster() {
  local port=$1; shift
  local q=(as_pg timeout 300 psql -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$port" -U postgres -d postgres)
  cp "$here/setup.sql" "$here/postgis.pgbench" "$work/" && chmod 644 "$work"/*.sql "$work"/*.pgbench || die "copy failed"
  pg_cluster_init "$work" "max_connections = 20" "shared_buffers = '128MB'" "synchronous_commit = off" "jit = off" \
    "autovacuum = off" "shared_preload_libraries = 'ogc_throttle'" "ogc_throttle.mode = 'reject'" \
    "ogc_throttle.capacity = 1000000000" "ogc_throttle.rate = 500" "ogc_throttle.cost_max = 1000000" "$@" ||
    die "initdb failed"
  pg_start "$work" "$port" || die "postgres did not start"
  as_pg timeout 300 "$PGBENCH" -i -q -s 1 -h "$work" -p "$port" -U postgres postgres >/dev/null 2>&1 ||
    die "pgbench -i failed"
  "${q[@]}" -v npoints="${NPOINTS:-200000}" -f "$work/setup.sql" >/dev/null || die "setup.sql failed"
  "${q[@]}" -c "VACUUM ANALYZE" -c "CREATE EXTENSION ogc_throttle" -c "SELECT throttle_density_build('pts', 'geom')" \
    >/dev/null || die "setup failed"
}
