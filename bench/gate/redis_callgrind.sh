#!/usr/bin/env bash
# Instructions the gate executes per refusal (valgrind callgrind), in-process
# buckets against the Redis store with and without its refusal cache: a
# figure the machine's load does not move. Redis's own instructions are not
# counted (another process); the script calls it receives are, from
# INFO commandstats. Each gate refuses N1 then N2 requests on one kept-alive
# connection; (Ir(N2) - Ir(N1)) / (N2 - N1) cancels start-up and shutdown.
#   [N1=200] [N2=1200] bench/gate/redis_callgrind.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${BIN:-$root/bin/ogc-gate} N1=${N1:-200} N2=${N2:-1200}
P_REDIS=18970 P_STATIC=18971 P_GATE=18972 P_ADMIN=18973
. "$root/bench/gate/lib/static_upstream.sh"
tmp=$(mktemp -d)
redis_pid= gate_pid=
cleanup() { [ -f "$tmp/nginx.pid" ] && kill "$(cat "$tmp/nginx.pid")" 2>/dev/null; [ -n "$gate_pid" ] && kill "$gate_pid" 2>/dev/null
            [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null; sleep 0.2; rm -rf "$tmp"; }
trap cleanup EXIT
static_upstream "$tmp" "$P_STATIC" || exit 1
redis-server --port "$P_REDIS" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/redis.log" 2>&1 & redis_pid=$!
for _ in $(seq 1 50); do redis-cli -p "$P_REDIS" ping >/dev/null 2>&1 && break; sleep 0.1; done
printf 'identity: {hash_secret: bench}\n' >"$tmp/local.yaml"
for rc in 0 4096; do
  printf 'identity: {hash_secret: bench}\nbuckets: {store: redis, url: "redis://127.0.0.1:%s/0", timeout_ms: 1000, on_error: closed, refusal_cache: %s}\n' \
    "$P_REDIS" "$rc" >"$tmp/redis$rc.yaml"
done
evalsha() { redis-cli -p "$P_REDIS" info commandstats | awk -F'[=,]' '/^cmdstat_evalsha:/ {print $2}'; }

# ir CONFIG N: instructions from start to exit, serving N refusals.
ir() {
  local out=$tmp/cg.out i
  rm -f "$out"
  redis-cli -p "$P_REDIS" flushall >/dev/null
  valgrind --tool=callgrind --callgrind-out-file="$out" "$BIN" --listen "127.0.0.1:$P_GATE" \
    --admin-listen "127.0.0.1:$P_ADMIN" --upstream "http://127.0.0.1:$P_STATIC" --threads 1 --burst 1 --rate 0.0001 \
    --config "$tmp/$1.yaml" >"$tmp/gate.log" 2>"$tmp/gate.err" &
  gate_pid=$!
  for i in $(seq 1 300); do (exec 3<>"/dev/tcp/127.0.0.1/$P_GATE") 2>/dev/null && break; sleep 0.1; done
  # The first request spends the burst; the rest are refused.
  /usr/bin/python3 - "$P_GATE" "$2" <<'PY' || { echo "client failed" >&2; kill "$gate_pid"; return 1; }
import http.client, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
c = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
codes = {}
for _ in range(n + 1):
    c.request('GET', '/?SERVICE=WMS&REQUEST=GetCapabilities')
    r = c.getresponse(); r.read()
    codes[r.status] = codes.get(r.status, 0) + 1
if codes.get(429, 0) != n: sys.exit("expected %d refusals, got %s" % (n, codes))
PY
  kill -TERM "$gate_pid"; wait "$gate_pid" 2>/dev/null; gate_pid=
  awk '/^(summary|totals):/ {print $2; exit}' "$out"
}

echo "ogc-gate under callgrind, one thread, refusals of GetCapabilities; load $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A per
for cfg in local redis0 redis4096; do
  e0=$(evalsha); a=$(ir "$cfg" "$N1") || exit 1
  b=$(ir "$cfg" "$N2") || exit 1; e1=$(evalsha)
  per[$cfg]=$(( (b - a) / (N2 - N1) ))
  echo "$cfg: ${per[$cfg]} Ir per refusal; script calls for $((N1 + N2)) refusals (+2 admissions): $((e1 - e0))"
done
awk -v l="${per[local]}" -v n="${per[redis0]}" -v c="${per[redis4096]}" 'BEGIN {
  printf "per refusal: redis without cache / in-process %.3f, redis with cache / in-process %.3f\n", n / l, c / l }'
