#!/usr/bin/env bash
# The gate's CPU per request, counted in instructions (valgrind callgrind), for
# two binaries (OLD, NEW) on the same requests: repeatable on a loaded machine,
# where throughput ratios (canonical_ab.sh) wander by ±10%.
# Each binary serves N1 and then N2 keep-alive requests in two runs, behind
# nginx serving a 20 kB body; (Ir(N2) - Ir(N1)) / (N2 - N1) is its cost per
# request with start-up and shutdown cancelled out.
#   OLD=/path/to/old/ogc-gate [NEW=bin/ogc-gate] [N1=200] [N2=1200] [MODE=pass|reject] bench/gate/callgrind_ab.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
OLD=${OLD:?set OLD to the ogc-gate binary to compare with} NEW=${NEW:-$root/bin/ogc-gate}
N1=${N1:-200} N2=${N2:-1200} MODE=${MODE:-pass}
P_STATIC=18960 P_GATE=18961 P_ADMIN=18962
. "$root/bench/gate/lib/static_upstream.sh"
tmp=$(mktemp -d)
gate_pid=
# The gate under valgrind is stopped by its pid (other runs use the same names).
cleanup() { [ -f "$tmp/nginx.pid" ] && kill "$(cat "$tmp/nginx.pid")" 2>/dev/null; [ -n "$gate_pid" ] && kill "$gate_pid" 2>/dev/null; sleep 0.2; rm -rf "$tmp"; }
trap cleanup EXIT
static_upstream "$tmp" "$P_STATIC" || exit 1
BUDGET=(--burst 1e9 --rate 1e9); [ "$MODE" = reject ] && BUDGET=(--burst 1 --rate 0.0001)
Q=${Q:-$AB_QUERY}  # Q=PATH?QUERY: another request (run.sh's reject path sends a 3-parameter GetCapabilities)

# ir BINARY N: instructions the gate executed from start to exit, serving
# one probe and N requests on one kept-alive connection.
ir() {
  local out=$tmp/cg.out pid i
  rm -f "$out"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$1" --listen "127.0.0.1:$P_GATE" \
    --admin-listen "127.0.0.1:$P_ADMIN" --upstream "http://127.0.0.1:$P_STATIC" --threads 1 "${BUDGET[@]}" \
    >"$tmp/gate.log" 2>"$tmp/gate.err" &
  pid=$! gate_pid=$!
  # Waits on the port without sending a request: every run serves the same ones.
  for i in $(seq 1 300); do (exec 3<>"/dev/tcp/127.0.0.1/$P_GATE") 2>/dev/null && break; sleep 0.1; done
  /usr/bin/python3 - "$P_GATE" "$Q" "$2" <<'PY' || { echo "client failed" >&2; kill "$pid"; return 1; }
import http.client, sys
port, q, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
c = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
for _ in range(n):
    c.request('GET', q)
    c.getresponse().read()
PY
  kill -TERM "$pid"; wait "$pid" 2>/dev/null; gate_pid=
  # CG_KEEP=DIR keeps each profile for callgrind_annotate.
  [ -n "${CG_KEEP:-}" ] && cp "$out" "$CG_KEEP/$(echo "$1" | tr / _).$2.out"
  awk '/^(summary|totals):/ {print $2; exit}' "$out"
}

declare -A per
for name in OLD NEW; do
  bin=${!name}
  a=$(ir "$bin" "$N1") && b=$(ir "$bin" "$N2") || exit 1
  per[$name]=$(( (b - a) / (N2 - N1) ))
  echo "$name ($bin): $a Ir at $N1 requests, $b Ir at $N2: ${per[$name]} Ir per request"
done
awk -v o="${per[OLD]}" -v n="${per[NEW]}" -v m="$MODE" \
  'BEGIN { printf "%s path: NEW/OLD instructions per request %.3f (%+d Ir)\n", m, n / o, n - o }'
