# Shared by the test/pg/*.t.sh scripts (sourced, bash): one throwaway cluster
# per script, always stopped and removed on exit, whatever happened.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
. "$root/test/lib/pg.sh"
. "$root/test/lib/tap.sh"

DIR=""
PORT=""
BG_PIDS=()

cleanup() {
  local p
  for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  if [ -n "$DIR" ]; then
    pg_stop "$DIR" immediate
    rm -rf "$DIR"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# cluster_up PORT [conf lines...]: init and start a cluster in a fresh temp dir.
cluster_up() {
  PORT=$1; shift
  DIR=$(pg_tmpdir)
  pg_cluster_init "$DIR" "$@" || { not_ok "initdb"; tap_exit; }
  if ! pg_start "$DIR" "$PORT"; then
    not_ok "server starts"; tail -n 20 "$DIR/server.log"; tap_exit
  fi
}

# q SQL: one value (or rows, |-separated) from the cluster as superuser.
q() { pg_psql "$DIR" "$PORT" -d postgres -At -c "$1"; }

# metered_roles ROLE...: login roles metered in reject mode, each with a bucket that never runs dry (capacity 1e6,
# refilled at 0.01 ms a second: what a role is charged stays out of its tokens) and no connection charge; postgres
# itself is not metered. A role's own ALTER ROLE … SET afterwards overrides these.
metered_roles() {
  local r sql=""
  for r in "$@"; do sql="$sql CREATE ROLE $r LOGIN;"; done
  q "$sql
     ALTER ROLE ALL SET ogc_throttle.capacity = 1000000;
     ALTER ROLE ALL SET ogc_throttle.mode = 'reject';
     ALTER ROLE ALL SET ogc_throttle.rate = 0.01;
     ALTER ROLE ALL SET ogc_throttle.charge_connection = off;
     ALTER ROLE postgres SET ogc_throttle.mode = 'off';" >/dev/null
}

# A file the postgres user can read, whatever the clone's permissions; a client script (*.py) takes the libpq
# bindings it imports along.
pg_readable_copy() {
  local dst="$DIR/$(basename "$1")"
  cp "$1" "$dst" && chmod 644 "$dst" || return 1
  case "$1" in
    *.py) cp "$(dirname "$1")/libpq_ctypes.py" "$DIR/" && chmod 644 "$DIR/libpq_ctypes.py" || return 1 ;;
  esac
  echo "$dst"
}

# awk-based comparisons of decimal numbers: fcmp A OP B
fcmp() { awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN {
  r = (op == "<=") ? a <= b : (op == ">=") ? a >= b : (op == "<") ? a < b : (op == ">") ? a > b : 0; exit !r }'; }

server_log() { cat "$DIR/server.log"; }

# settled_tokens ROLE: the role's bucket once its sessions are gone. A backend
# writes small settlements when it exits, which is after its client has gone.
settled_tokens() {
  local k
  for k in $(seq 1 100); do
    [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE usename = '$1'")" = 0 ] && break
    sleep 0.05
  done
  q "SELECT tokens FROM throttle_peek('$1')"
}
# ms_of: the sum of psql's \timing lines on stdin.
ms_of() { awk '/^Time: /{ t += $2 } END { print t + 0 }'; }
# terminate_in_sleep ROLE: waits for ROLE's session to sleep in pg_sleep, has ROLE terminate it (a role may end
# its own sessions' backends without any privilege), and waits until it has exited; fails if none was ended.
terminate_in_sleep() {
  local n out sleeping="FROM pg_stat_activity WHERE usename = '$1' AND wait_event = 'PgSleep'"
  for n in $(seq 1 600); do [ "$(q "SELECT count(*) $sleeping")" = 1 ] && break; sleep 0.1; done
  out=$(as_pg psql -X -q -h "$DIR" -p "$PORT" -U "$1" -d postgres -Atc "SELECT pg_terminate_backend(pid) $sleeping" 2>&1)
  for n in $(seq 1 600); do [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE usename = '$1'")" = 0 ] && break; sleep 0.1; done
  sleep 0.2
  [ "$out" = t ]
}
