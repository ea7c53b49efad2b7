#!/usr/bin/env bash
# Shared buckets in Redis over the asynchronous client (src/gate/redis_*),
# with a real redis-server on 127.0.0.1:18702 that the test kills, stalls and
# restarts. Two probes (build/gate/redis_probe) stand for two gates: each has
# its own connection and io_context thread, and is never re-created.
# Ports 187xx only: the other gate tests use 185xx and 8000/8001.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
cd "$root" || exit 1
PORT=18702
TIMEOUT_MS=100
probe=build/gate/redis_probe
command -v redis-server >/dev/null || { not_ok "redis-server installed (scripts/packages.txt)"; tap_exit; }
make -s "$probe" >/dev/null 2>&1 || { not_ok "redis_probe builds"; tap_exit; }

tmp=$(mktemp -d)
redis_pid= pids=()
start_redis() {
  redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
    --loglevel warning >>"$tmp/redis.log" 2>&1 &
  redis_pid=$!
  disown "$redis_pid"  # killing it on purpose is no job-control news
  for _ in $(seq 1 50); do redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG && return 0; sleep 0.1; done
  return 1
}
cleanup() {
  [ -n "$redis_pid" ] && kill -CONT "$redis_pid" 2>/dev/null && kill -KILL "$redis_pid" 2>/dev/null
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# Gate "a": tiles fail open, coverages fail closed, maps take the default
# (closed), everything else falls back to the in-process buckets.
cat >"$tmp/a.yaml" <<YAML
buckets:
  store: redis
  url: redis://127.0.0.1:$PORT/0
  timeout_ms: $TIMEOUT_MS
  on_error: closed
  key_prefix: "t:"
  refusal_cache: 0   # the store's own sharing; the cache in front of it: redis_refusal_cache.t.sh
  classes: {tile: {on_error: open}, coverage: {on_error: closed}, other: {on_error: local}}
YAML
sed 's/on_error: closed$/on_error: open/' "$tmp/a.yaml" >"$tmp/b.yaml"

# start_probe NAME: fds in ${NAME}_in / ${NAME}_out
start_probe() {
  mkfifo "$tmp/$1.in" "$tmp/$1.out"
  "$probe" --config "$tmp/$1.yaml" <"$tmp/$1.in" >"$tmp/$1.out" 2>>"$tmp/$1.err" &
  pids+=($!)
  eval "exec {${1}_in}>\"$tmp/$1.in\"; exec {${1}_out}<\"$tmp/$1.out\""
}
# ask NAME COMMAND...: prints the probe's answer line
ask() {
  local fin fout line
  eval "fin=\${${1}_in} fout=\${${1}_out}"
  shift
  echo "$*" >&"$fin"
  IFS= read -r -t 8 line <&"$fout" || line="noanswer"
  case $line in hang|noanswer) echo "$line" >>"$tmp/hangs" ;; esac
  echo "$line"
}
field() { sed -nE "s/^(.* )?$1=([^ ]*).*/\2/p" <<<"$2" | head -1; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 0) }'; }
near() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 0.5) }'; }  # the refill of a few seconds

check "redis-server starts on $PORT" start_redis
start_probe a
start_probe b

# --- shared state between two gates -----------------------------------------
B="100 0.1"  # capacity 100, refilled in 1000 s: nothing refills during the test
r=$(ask a admit key:alice 30 $B map)
check_eq "gate a admits from Redis" "redis allowed" "$(field source "$r") $(field outcome "$r")"
check "gate a: 70 left after 30 of 100 ($r)" near "$(field remaining "$r")" 70
r=$(ask b admit key:alice 30 $B map)
check "gate b sees gate a's spend: ~40 left ($r)" near "$(field remaining "$r")" 40
r=$(ask a settle key:alice 50 $B)
check_eq "gate a settles a measured overrun" "1" "$(field ok "$r")"
r=$(ask b admit key:alice 5 $B map)
check_eq "gate b refuses after gate a's settlement put alice in debt" "redis refused" "$(field source "$r") $(field outcome "$r")"
r=$(ask a settle key:alice -1000 $B)
r=$(ask b admit key:alice 100 $B map)
check_eq "a refund through gate a refills the bucket gate b reads" "allowed" "$(field outcome "$r")"
check_eq "the shared key expires with its debt (TTL at most one refill)" 1 \
  "$(t=$(redis-cli -p "$PORT" pttl t:key:alice); [ "$t" -gt 0 ] && [ "$t" -le 1000001 ] && echo 1)"
r=$(ask a admit key:bob 101 $B map)
check_eq "a cost above the capacity never fits" "never" "$(field outcome "$r")"

# --- three gates hammer one identity: one budget, not three ---------------------
# capacity 50, 100/s, cost 1, 3 s: at most 50 + 100 x window + 1 admitted in
# total, and at least 95% of what the window allows while all three ran.
for g in 1 2 3; do
  "$probe" --config "$tmp/a.yaml" --hammer key:mallory 1 50 100 3 8 >"$tmp/h$g" 2>&1 &
  hp[$g]=$!
done
for g in 1 2 3; do wait "${hp[$g]}" || not_ok "hammer $g: every call answered by Redis ($(cat "$tmp/h$g"))"; done
read -r total first last allrun < <(cat "$tmp"/h1 "$tmp"/h2 "$tmp"/h3 | sed -E 's/[a-z]+=//g' |
  awk '{ n += $1; if (!f || $4 < f) f = $4; if ($5 > l) l = $5; if ($4 > s) s = $4; if (!e || $5 < e) e = $5 }
       END { printf "%d %.6f %.6f %.6f\n", n, f, l, e - s }')
upper=$(awk -v f="$first" -v l="$last" 'BEGIN { printf "%.1f", 50 + 100 * (l - f) + 1 }')
lower=$(awk -v w="$allrun" 'BEGIN { printf "%.1f", 0.95 * (50 + 100 * w) }')
check "three gates, one budget: $total admitted <= $upper" le "$total" "$upper"
check "three gates, no under-admission: $total admitted >= $lower" le "$lower" "$total"

# --- Redis stalled (SIGSTOP): every class gets its policy within the timeout -----
policies() {  # policies WHAT: the four classes on gate a
  local r
  r=$(ask a admit key:carol 1 $B tile)
  check_eq "$1: tile fails open" "open allowed" "$(field source "$r") $(field outcome "$r")"
  check "$1: tile answered within timeout + 150 ms ($r)" le "$(field ms "$r")" $((TIMEOUT_MS + 150))
  r=$(ask a admit key:carol 1 $B coverage)
  check_eq "$1: coverage fails closed" "closed refused" "$(field source "$r") $(field outcome "$r")"
  check "$1: coverage answered within timeout + 150 ms ($r)" le "$(field ms "$r")" $((TIMEOUT_MS + 150))
  r=$(ask a admit key:carol 1 $B map)
  check_eq "$1: map takes the default (closed)" "closed refused" "$(field source "$r") $(field outcome "$r")"
  r=$(ask a admit key:carol 1 $B scan)
  check_eq "$1: the unlisted class 'scan' takes the default too" "closed" "$(field source "$r")"
  r=$(ask a admit key:carol 1 $B other)
  check_eq "$1: other falls back to the in-process buckets" "local" "$(field source "$r")"
  r=$(ask a settle key:carol 5 $B)
  check_eq "$1: a settlement fails, and says so" "0" "$(field ok "$r")"
}
kill -STOP "$redis_pid"
r=$(ask a admit key:carol 1 $B tile)
check_eq "stalled Redis: the call times out" "timeout" "$(field failure "$r")"
ms=$(field ms "$r")
check "stalled Redis: not before timeout_ms ($ms ms)" le $((TIMEOUT_MS - 5)) "$ms"
policies "stalled Redis"

# --- Redis killed mid-run ------------------------------------------------------
kill -CONT "$redis_pid"; kill -KILL "$redis_pid"
for _ in $(seq 1 50); do kill -0 "$redis_pid" 2>/dev/null || break; sleep 0.05; done
redis_pid=
policies "Redis killed"
r=$(ask b admit key:carol 1 $B map)
check_eq "gate b: maps follow its own default (open)" "open allowed" "$(field source "$r") $(field outcome "$r")"
m=$(ask a metrics; while IFS= read -r -t 2 l <&"$a_out"; do [ "$l" = END ] && break; echo "$l"; done)
check "metrics count timeouts" grep -qE '^ogc_gate_store_errors_total\{kind="timeout"\} [1-9]' <<<"$m"
check "metrics count refused connections" grep -qE '^ogc_gate_store_errors_total\{kind="unavailable"\} [1-9]' <<<"$m"
check "metrics count fallbacks to local buckets" grep -qE '^ogc_gate_store_fallbacks_total\{on_error="local"\} [1-9]' <<<"$m"
check "metrics count fail-open decisions" grep -qE '^ogc_gate_store_fallbacks_total\{on_error="open"\} [1-9]' <<<"$m"

# --- Redis back: the same clients decide with it again --------------------------
check "redis-server restarts on $PORT" start_redis
back() {  # back NAME: Redis decides for this probe within 5 s (reconnect backoff ≤ 2 s)
  local r
  for _ in $(seq 1 50); do
    r=$(ask "$1" admit key:dave 1 $B map)
    [ "$(field source "$r")" = redis ] && return 0
    sleep 0.1
  done
  return 1
}
check "gate a uses Redis again without a restart" back a
check "gate b uses Redis again without a restart" back b
r=$(ask a admit key:erin 60 $B map)
r=$(ask b admit key:erin 60 $B map)
check_eq "after the restart the budget is shared again (b refused after a spent 60 of 100)" "redis refused" \
  "$(field source "$r") $(field outcome "$r")"
m=$(ask a metrics; while IFS= read -r -t 2 l <&"$a_out"; do [ "$l" = END ] && break; echo "$l"; done)
check "answered calls are in the latency histogram" grep -qE '^ogc_gate_store_latency_seconds_count [1-9]' <<<"$m"
check "no call hung (every answer within 5 s)" test ! -s "$tmp/hangs"
ask a quit >/dev/null; ask b quit >/dev/null
tap_exit
