#!/usr/bin/env bash
# A SIGHUP that changes the shared store's settings applies them without a
# restart (doc/shared-buckets.md "How the gate uses it"): a new Redis URL is
# used by the next request, a new timeout_ms and on_error by the next failure;
# only buckets.store itself (local or redis) still needs a restart.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/gate.sh"
RA=18770 RB=18771 ECHO=18772 G=18773 A=18774
tmp=$(mktemp -d)
pa= pb= echo_pid=
cleanup() { gate_stop "$tmp/g"; for p in $pa $pb $echo_pid; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null
redis() { redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/redis$1.log" 2>&1 & echo $!; }
pa=$(redis "$RA"); pb=$(redis "$RB")
for p in "$RA" "$RB"; do for _ in $(seq 1 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done; done
/usr/bin/python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$tmp/echo.err" & echo_pid=$!
conf() {  # port timeout_ms on_error [store]
  printf 'identity: {hash_secret: reload-test}\nbuckets: {store: %s, url: "redis://127.0.0.1:%s/0", timeout_ms: %s, on_error: %s}\ntiers: [{name: public, rate: 10, burst: 100}]\n' \
    "${4:-redis}" "$1" "$2" "$3" >"$tmp/c.yaml"
}
conf "$RA" 100 closed
gate_start "$tmp/g" "$G" "$A" "http://127.0.0.1:$ECHO" --threads 2 --config "$tmp/c.yaml" || { not_ok "gate starts"; tap_exit; }
for _ in $(seq 1 30); do curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1; done
Q="/?SERVICE=WMS&REQUEST=GetCapabilities"
st() { curl -s -o /dev/null --max-time 5 -w '%{http_code} %{time_total}' "http://127.0.0.1:$G$Q"; }
keys() { redis-cli -p "$1" --scan --pattern 'ogc_throttle:*' | wc -l; }
hup() { kill -HUP "$(cat "$tmp/g/gate.pid")"; for _ in $(seq 1 30); do [ "$(grep -c 'configuration reloaded' "$tmp/g/gate.err")" -ge "$1" ] && break; sleep 0.1; done; sleep 0.2; }

check_eq "the gate admits through Redis A" 200 "$(st | cut -d' ' -f1)"
check_eq "... and its bucket is in A, not in B" "1 0" "$(keys "$RA") $(keys "$RB")"

conf "$RB" 100 closed; hup 1
check "a reload to Redis B says the store moved" grep -q 'buckets store moved' "$tmp/g/gate.err"
check "... and no restart is asked for" bash -c "! grep -q 'need a restart' '$tmp/g/gate.err'"
for _ in 1 2 3 4; do st >/dev/null; done   # both I/O threads
check_eq "the next requests are charged in B" 1 "$(keys "$RB")"
kill -KILL "$pa"; wait "$pa" 2>/dev/null; pa=
read -r c t <<<"$(st)"
check_eq "with A gone, the gate is still served by B (on_error: closed would say 503)" 200 "$c"

# timeout_ms and on_error: B stalled
kill -STOP "$pb"
read -r c t <<<"$(st)"
check "B stalled, timeout 100 ms: 503 within 0.6 s ($c in ${t}s)" awk -v c="$c" -v t="$t" 'BEGIN { exit !(c == 503 && t < 0.6) }'
kill -CONT "$pb"; sleep 0.3
conf "$RB" 900 closed; hup 2
for _ in 1 2 3 4; do st >/dev/null; done
kill -STOP "$pb"
read -r c t <<<"$(st)"
check "after a reload to timeout_ms 900: the 503 comes after ~0.9 s ($c in ${t}s)" \
  awk -v c="$c" -v t="$t" 'BEGIN { exit !(c == 503 && t >= 0.8 && t < 2.5) }'
kill -CONT "$pb"; sleep 1.2
conf "$RB" 900 open; hup 3
kill -STOP "$pb"
read -r c t <<<"$(st)"
check_eq "after a reload to on_error: open, B stalled: admitted" 200 "$c"
kill -CONT "$pb"; sleep 1.2
calls() { redis-cli -p "$RB" info commandstats | awk -F'[=,]' '/^cmdstat_evalsha:/ {print $2}'; }
m0=$(calls)
for _ in $(seq 1 20); do st >/dev/null; [ "$(calls)" -gt "$m0" ] && break; sleep 0.1; done
check "B back: the gate is served by it again (script calls $m0 -> $(calls))" test "$(calls)" -gt "$m0"

conf "$RB" 900 open local; hup 4
check "a reload from redis to local still needs a restart (and says so)" grep -q 'needs a restart; kept the running store' "$tmp/g/gate.err"
n0=$(calls)
for _ in 1 2 3 4; do st >/dev/null; done
n1=$(calls)
check "... and keeps charging Redis" test "$n1" -gt "$n0"
tap_exit
