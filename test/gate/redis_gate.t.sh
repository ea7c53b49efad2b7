#!/usr/bin/env bash
# Many gates, one budget (issue 12): three ogc-gate processes keep their
# buckets in one real redis-server (buckets.store: redis). Three clients
# hammer one identity, each through another gate: what the gates admit
# together stays within one budget. Redis stopped: each class does what its
# on_error says, within the timeout; Redis back: the shared budget is used
# again, without restarting the gates.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/gate.sh"
REDIS=18740 ECHO=18741 G1=18742 A1=18743 G2=18744 A2=18745 G3=18746 A3=18747
tmp=$(mktemp -d)
redis_pid= echo_pid=
start_redis() { redis-server --port "$REDIS" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/redis.log" 2>&1 & redis_pid=$!
                for _ in $(seq 1 50); do redis-cli -p "$REDIS" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
cleanup() { gate_stop "$tmp/g1"; gate_stop "$tmp/g2"; gate_stop "$tmp/g3"; [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null
            [ -n "$echo_pid" ] && kill "$echo_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null
start_redis || { not_ok "redis-server starts"; tap_exit; }
/usr/bin/python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$tmp/echo.err" & echo_pid=$!
# Burst 20, 10 per second; GetCapabilities costs 1 (cost.other). Gates 1 and 2
# refuse when the store cannot answer; gate 3 admits.
conf() {  # on_error
  cat <<YAML
identity: {hash_secret: shared-secret}
buckets: {store: redis, url: "redis://127.0.0.1:$REDIS/0", timeout_ms: 100, on_error: $1, refusal_cache: ${REFUSAL_CACHE:-4096}}
tiers: [{name: public, rate: 10, burst: 20}]
YAML
}
conf closed >"$tmp/c12.yaml"; conf open >"$tmp/c3.yaml"
gate_start "$tmp/g1" "$G1" "$A1" "http://127.0.0.1:$ECHO" --config "$tmp/c12.yaml" || { not_ok "gate 1 starts"; tap_exit; }
gate_start "$tmp/g2" "$G2" "$A2" "http://127.0.0.1:$ECHO" --config "$tmp/c12.yaml" || { not_ok "gate 2 starts"; tap_exit; }
gate_start "$tmp/g3" "$G3" "$A3" "http://127.0.0.1:$ECHO" --config "$tmp/c3.yaml" || { not_ok "gate 3 starts"; tap_exit; }
for _ in $(seq 1 30); do curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1; done
ok "redis-server, the echo upstream and three gates sharing it started"

printf 'identity: {to_upstream: {}}\nbuckets: {store: redis, url: "redis://127.0.0.1:1/0"}\n' >"$tmp/bad.yaml"
check "store: redis without identity.hash_secret is refused (each gate would name a client differently)" \
  bash -c "'$GATE_BIN' --config '$tmp/bad.yaml' --check-config 2>&1 | grep -q 'needs identity.hash_secret'"

Q="/?SERVICE=WMS&REQUEST=GetCapabilities"
# hammer PORT SECONDS: requests on one connection as fast as answered; prints "ok refused"
hammer() {
  /usr/bin/python3 - "$1" "$2" "$Q" <<'PY'
import http.client, sys, time
port, secs, q = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
c = http.client.HTTPConnection('127.0.0.1', port, timeout=10)
ok = refused = 0
start = time.time()
end = start + secs
while time.time() < end:
    c.request('GET', q)
    r = c.getresponse(); r.read()
    if r.status == 200: ok += 1
    elif r.status == 429: refused += 1
print(ok, refused, "%.6f %.6f" % (start, time.time()))
PY
}
redis-cli -p "$REDIS" flushall >/dev/null
t0=$(date +%s.%N)
hammer "$G1" 3 >"$tmp/h1" & p1=$!; hammer "$G2" 3 >"$tmp/h2" & p2=$!; hammer "$G3" 3 >"$tmp/h3" & p3=$!
wait "$p1" "$p2" "$p3"
elapsed=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
read -r o1 r1 s1 e1 <"$tmp/h1"; read -r o2 r2 s2 e2 <"$tmp/h2"; read -r o3 r3 s3 e3 <"$tmp/h3"
# The window the clients hammered in (first start to last end), without
# the interpreters' start-up.
window=$(awk -v a="$s1 $s2 $s3" -v b="$e1 $e2 $e3" 'BEGIN { split(a, s); split(b, e); lo = s[1]; hi = e[1]
  for (i = 2; i <= 3; i++) { if (s[i] < lo) lo = s[i]; if (e[i] > hi) hi = e[i] }; printf "%.2f", hi - lo }')
admitted=$((o1 + o2 + o3)) refused=$((r1 + r2 + r3))
bound=$(awk -v e="$elapsed" 'BEGIN { printf "%.1f", 20 + 10 * e + 1 }')
echo "# three gates, ${elapsed}s (hammering ${window}s): admitted $o1 + $o2 + $o3 = $admitted (bound $bound), refused $refused"
check "together the gates admit no more than one budget (burst + rate x elapsed + one request)" \
  awk -v a="$admitted" -v b="$bound" 'BEGIN { exit !(a <= b) }'
check "... and not much less: at least 95% of 20 + 10 x the hammering window" \
  awk -v a="$admitted" -v w="$window" 'BEGIN { exit !(a >= 0.95 * (20 + 10 * w)) }'
check "every gate refused some (they all saw the shared bucket empty)" test "$r1" -gt 0 -a "$r2" -gt 0 -a "$r3" -gt 0
check "the store's metrics are on /metrics" grep -q '^ogc_gate_store_latency_seconds_count [1-9]' \
  <<<"$(curl -s "http://127.0.0.1:$A1/metrics")"

# --- Redis gone: closed refuses, open admits, within the timeout; nothing hangs -------------
kill -STOP "$redis_pid"  # stalled: connections accepted, nothing answered
sleep 3                  # the bucket refills meanwhile, as it would in Redis
st() { curl -s -o /dev/null --max-time 5 -w '%{http_code} %{time_total}' "http://127.0.0.1:$1$Q"; }
read -r c1 t1 <<<"$(st "$G1")"; read -r c3 t3 <<<"$(st "$G3")"
echo "# Redis stalled: gate 1 (closed) $c1 in ${t1}s, gate 3 (open) $c3 in ${t3}s"
check_eq "Redis stalled: on_error closed refuses, 503 (the store, not the client, is at fault)" 503 "$c1"
check_eq "... on_error open admits" 200 "$c3"
check "... each within the 100 ms timeout (+ slack), nothing hangs" awk -v a="$t1" -v b="$t3" 'BEGIN { exit !(a < 1 && b < 1) }'
kill -KILL "$redis_pid"; wait "$redis_pid" 2>/dev/null; redis_pid=
read -r c1 t1 <<<"$(st "$G1")"
check_eq "Redis down: on_error closed still refuses (503)" 503 "$c1"
start_redis || not_ok "redis-server restarts"
got=
for _ in $(seq 1 40); do [ "$(st "$G1" | cut -d' ' -f1)" = 200 ] && { got=1; break; }; sleep 0.1; done
check "Redis back: gate 1 admits again without a restart" test -n "$got"
check "... and writes the shared bucket in Redis again" test -n "$(redis-cli -p "$REDIS" --scan --pattern '*' | head -1)"
tap_exit
