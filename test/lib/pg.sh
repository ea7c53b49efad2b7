# Helpers for scripts that run a throwaway PostgreSQL cluster (sourced, bash).
# initdb/postgres refuse root, so as root every server command runs as postgres.

PGBIN="$(pg_config --bindir)"
PGSHARE="$(pg_config --sharedir)"

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# pg_cluster_init DIR [conf lines...]: a new cluster in DIR/data, socket in DIR.
pg_cluster_init() {
  local dir=$1; shift
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  as_pg "$PGBIN/initdb" -D "$dir/data" -A trust -U postgres --no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; return 1; }
  {
    echo "listen_addresses = ''"
    echo "unix_socket_directories = '$dir'"
    echo "fsync = off"
    echo "log_min_messages = log"
    for line in "$@"; do echo "$line"; done
  } | as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
}

# pg_conf_set DIR LINE: append a setting (read at the next start).
pg_conf_set() { echo "$2" | as_pg tee -a "$1/data/postgresql.conf" >/dev/null; }

pg_start() { as_pg "$PGBIN/pg_ctl" -D "$1/data" -l "$1/server.log" -w -t 60 -o "-p ${2:-5432}" start >/dev/null; }
pg_stop() { as_pg "$PGBIN/pg_ctl" -D "$1/data" -w -t 60 -m "${2:-fast}" stop >/dev/null 2>&1 || true; }

# pg_psql DIR PORT [psql args...]: run psql against the cluster as superuser postgres.
pg_psql() {
  local dir=$1 port=$2; shift 2
  as_pg psql -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres "$@"
}

# pg_tmpdir: a temp directory the postgres user can read and write.
pg_tmpdir() {
  local d
  d=$(mktemp -d /tmp/ogc_throttle.XXXXXX)
  chmod 755 "$d"
  [ "$(id -u)" = 0 ] && chown postgres: "$d"
  echo "$d"
}
