# Starting and stopping ogc-gate in tests and the demo.
#   gate_start DIR PORT ADMIN_PORT UPSTREAM_URL [extra flags...]
#     -> pid in DIR/gate.pid, JSON log in DIR/gate.log, stderr in DIR/gate.err
#   gate_stop DIR
#   gate_log_wait FILE PATTERN [N] [SECONDS]
GATE_BIN=${GATE_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/bin/ogc-gate}

gate_start() {
  local dir=$1 port=$2 admin=$3 upstream=$4
  shift 4
  mkdir -p "$dir"
  "$GATE_BIN" --listen "127.0.0.1:$port" --admin-listen "127.0.0.1:$admin" --upstream "$upstream" "$@" \
    >>"$dir/gate.log" 2>>"$dir/gate.err" &
  echo $! >"$dir/gate.pid"
  local i
  for i in $(seq 1 50); do
    curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null && return 0
    kill -0 "$(cat "$dir/gate.pid")" 2>/dev/null || break
    sleep 0.1
  done
  echo "ogc-gate did not come up:" >&2; cat "$dir/gate.err" >&2
  return 1
}

gate_stop() {
  local dir=$1 pid i
  [ -f "$dir/gate.pid" ] || return 0
  pid=$(cat "$dir/gate.pid")
  kill -TERM "$pid" 2>/dev/null
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  rm -f "$dir/gate.pid"
}

# gate_log_wait FILE PATTERN [N] [SECONDS]: succeeds once FILE holds at least N
# (default 1) lines matching the extended regex PATTERN; fails after SECONDS
# (default 5) without them. A request's access-log line is handed to the
# writer thread only after its answer went out, and the writer gathers lines
# for up to 20 ms before writing (src/gate/log_writer.hpp): a client can have
# its answer before its line is in the file, so read the log through this.
gate_log_wait() {
  local file=$1 pat=$2 n=${3:-1} secs=${4:-5} i
  for i in $(seq 1 $((secs * 20))); do
    [ "$(grep -cE -- "$pat" "$file" 2>/dev/null)" -ge "$n" ] 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}
