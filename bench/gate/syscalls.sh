#!/usr/bin/env bash
# System calls per request at one connection (strace -c -f on the server,
# wrk -t1 -c1), for the refusal and the pass-through path, the gate against
# nginx (limit_req / proxy_pass, one worker; its upstream, a static nginx, is
# not counted, as the gate's is not). At one connection every syscall is on
# the request's path, so this is where a one-connection request's kernel
# entries go (see bench/README.md, "bench/gate/syscalls.sh").
#   [BINS="bin/ogc-gate /path/to/other/ogc-gate"] [SECS=3] [GATE_THREADS=2] bench/gate/syscalls.sh
# strace slows every call: compare the counts, not the rates.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BINS=${BINS:-$root/bin/ogc-gate} SECS=${SECS:-3} GATE_THREADS=${GATE_THREADS:-2}
P_STATIC=18980 P_LIMIT=18981 P_PROXY=18982 P_GREJ=18983 P_GREJ_A=18984 P_GPASS=18985 P_GPASS_A=18986
for b in nginx wrk curl strace; do command -v "$b" >/dev/null || { echo "needs $b" >&2; exit 1; }; done
. "$root/bench/gate/lib/static_upstream.sh"
. "$root/bench/gate/lib/nginx_peer.sh"
. "$root/test/gate/lib/gate.sh"
tmp=$(mktemp -d)
cleanup() {
  for g in grej gpass; do gate_stop "$tmp/$g"; done
  for n in "$tmp/nginx.pid" "$tmp/peer/nginx.pid"; do [ -f "$n" ] && kill "$(cat "$n")" 2>/dev/null; done
  sleep 0.2; rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
static_upstream "$tmp" "$P_STATIC" || exit 1
nginx_peer "$tmp/peer" "$P_STATIC" "$P_PROXY" "$P_LIMIT" "$tmp/www" || exit 1
MAP="/tile.png?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities"
for i in $(seq 1 50); do curl -fs -o /dev/null "http://127.0.0.1:$P_STATIC/tile.png" && break; sleep 0.1; done
curl -s -o /dev/null "http://127.0.0.1:$P_LIMIT$MAP"  # spends nginx's one request a minute

# count PID URL -> "total-per-request  name=per-request ..." (calls of at least 0.01 per request)
count() {
  local pid=$1 url=$2 spid reqs
  wrk -t1 -c1 -d1s "$url" >/dev/null 2>&1  # warm: pools and buffers
  strace -c -f -q -o "$tmp/strace.out" -p "$pid" & spid=$!
  sleep 0.5
  reqs=$(wrk -t1 -c1 -d"${SECS}s" "$url" 2>/dev/null | awk '/requests in/ {print $1}')
  kill -INT "$spid"; wait "$spid" 2>/dev/null
  awk -v n="$reqs" '$1 ~ /^[0-9.]+$/ && NF >= 5 { c = $4; name = $NF; if (c ~ /^[0-9]+$/ && name != "total") { tot += c; per[name] = c / n } }
    END { printf "%5.2f  ", tot / n; for (k in per) if (per[k] >= 0.01) printf " %s=%.2f", k, per[k]; printf "  (%d requests)\n", n }' "$tmp/strace.out"
}
worker=$(pgrep -P "$(cat "$tmp/peer/nginx.pid")" | head -1)
echo "system calls per request, one connection (wrk -t1 -c1 -d${SECS}s under strace -c -f); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nginx limit_req    $(count "$worker" "http://127.0.0.1:$P_LIMIT$MAP")"
echo "nginx proxy_pass   $(count "$worker" "http://127.0.0.1:$P_PROXY/tile.png")"
for bin in $BINS; do
  export GATE_BIN=$bin
  gate_start "$tmp/grej" "$P_GREJ" "$P_GREJ_A" "http://127.0.0.1:$P_STATIC" --threads "$GATE_THREADS" --burst 1 --rate 0.0001 >/dev/null || exit 1
  gate_start "$tmp/gpass" "$P_GPASS" "$P_GPASS_A" "http://127.0.0.1:$P_STATIC" --threads "$GATE_THREADS" --burst 1e9 --rate 1e9 >/dev/null || exit 1
  curl -s -o /dev/null "http://127.0.0.1:$P_GREJ$MAP"
  echo "gate refusal       $(count "$(cat "$tmp/grej/gate.pid")" "http://127.0.0.1:$P_GREJ$MAP")   [$bin]"
  echo "gate pass-through  $(count "$(cat "$tmp/gpass/gate.pid")" "http://127.0.0.1:$P_GPASS/tile.png")   [$bin]"
  gate_stop "$tmp/grej"; gate_stop "$tmp/gpass"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
