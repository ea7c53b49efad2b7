#!/usr/bin/env bash
# The shared store through the whole gate over HTTP (issue 12 targets), in one
# run: the same gate binary with in-process buckets and with buckets.store:
# redis (redis-server on loopback), both with charge: measured.
#   refusal path: 429 throughput, redis / in-process       (target >= 0.5x),
#     with the refusal cache (the default) and without (refusal_cache: 0)
#   added latency of a Redis-backed decision: one connection, admitted
#     requests to a static nginx upstream, p50 and p99 of the redis gate less
#     those of the in-process gate                            (<= 0.3 ms, <= 1 ms)
# Knobs: ROUNDS (3), SECS per throughput run (3), LSECS per latency run (3),
# CONNS (32), GATE_THREADS (2). Ports 19300-19311 (clear of the test suites' 19000-19221).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${ROUNDS:-3} SECS=${SECS:-3} LSECS=${LSECS:-3} CONNS=${CONNS:-32} GATE_THREADS=${GATE_THREADS:-2}
P_REDIS=19300 P_STATIC=19301 P_LREJ=19302 P_RREJ=19303 P_LPASS=19304 P_RPASS=19305 A0=19306 A1=19307 A2=19308 A3=19309
P_NREJ=19310 A4=19311
for b in nginx wrk curl redis-server redis-cli; do command -v "$b" >/dev/null || { echo "needs $b" >&2; exit 1; }; done
[ -x "$root/bin/ogc-gate" ] || make -s -C "$root" bin/ogc-gate || exit 1
. "$root/test/gate/lib/gate.sh"
. "$root/bench/gate/lib/static_upstream.sh"
tmp=$(mktemp -d)
redis_pid=
cleanup() {
  for g in lrej rrej nrej lpass rpass; do gate_stop "$tmp/$g"; done
  [ -f "$tmp/nginx.pid" ] && kill "$(cat "$tmp/nginx.pid")" 2>/dev/null
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null
  sleep 0.2; rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

redis-server --port "$P_REDIS" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/redis.log" 2>&1 & redis_pid=$!
for _ in $(seq 1 50); do redis-cli -p "$P_REDIS" ping >/dev/null 2>&1 && break; sleep 0.1; done
static_upstream "$tmp" "$P_STATIC" || { echo "nginx did not start" >&2; exit 1; }
for _ in $(seq 1 50); do curl -fs -o /dev/null "http://127.0.0.1:$P_STATIC/tile.png" && break; sleep 0.1; done
printf 'identity: {hash_secret: bench}\ncharge: measured\n' >"$tmp/local.yaml"
# Each pair its own key prefix: the refusing gate's bucket is empty for a long time.
for k in rej pass; do
  printf 'identity: {hash_secret: bench}\ncharge: measured\nbuckets: {store: redis, url: "redis://127.0.0.1:%s/0", timeout_ms: 50, on_error: closed, key_prefix: "%s:"}\n' \
    "$P_REDIS" "$k" >"$tmp/redis_$k.yaml"
done
# The same refusing gate without its refusal cache: every refusal one script call.
sed 's/key_prefix: "rej:"/key_prefix: "rej:", refusal_cache: 0/' "$tmp/redis_rej.yaml" >"$tmp/redis_nocache.yaml"
up="http://127.0.0.1:$P_STATIC"
q() { gate_start "$tmp/$1" "$2" "$3" "$up" --threads "$GATE_THREADS" --config "$tmp/$4.yaml" "${@:5}" >/dev/null || exit 1; }
q lrej "$P_LREJ" "$A0" local --burst 1 --rate 0.0001
q rrej "$P_RREJ" "$A1" redis_rej --burst 1 --rate 0.0001
q nrej "$P_NREJ" "$A4" redis_nocache --burst 1 --rate 0.0001
q lpass "$P_LPASS" "$A2" local --burst 1e9 --rate 1e9
q rpass "$P_RPASS" "$A3" redis_pass --burst 1e9 --rate 1e9
MAP="/?SERVICE=WMS&REQUEST=GetCapabilities"
for p in "$P_LREJ" "$P_RREJ" "$P_NREJ"; do
  curl -s -o /dev/null "http://127.0.0.1:$p$MAP"
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$p$MAP")" = 429 ] || { echo "port $p: reject path not 429" >&2; exit 1; }
done
for p in "$P_LPASS" "$P_RPASS"; do
  c=$(curl -s -o "$tmp/pass.out" -w '%{http_code}' "http://127.0.0.1:$p$AB_QUERY")
  [ "$c" = 200 ] || { echo "port $p: pass path $c, not 200" >&2; head -c 400 "$tmp/pass.out" >&2; exit 1; }
done
[ -n "$(redis-cli -p "$P_REDIS" --scan --pattern 'rej:*' | head -1)" ] || { echo "the redis gates wrote no bucket" >&2; exit 1; }

rps() { wrk -t2 -c"$CONNS" -d"${SECS}s" "$1" 2>/dev/null | awk '/^Requests\/sec:/{print $2}'; }
lat() {
  wrk -t1 -c1 -d"${LSECS}s" --latency "$1" 2>/dev/null | awk '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
    $1 == "50%" { p50 = ms($2) } $1 == "99%" { p99 = ms($2) } END { printf "%.4f %.4f\n", p50, p99 }'
}
median() { sort -g | awk '{a[NR] = $1} END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
calc() { awk "BEGIN { printf \"%.${2:-3}f\", $1 }"; }
echo "gate + Redis over HTTP: $ROUNDS rounds, wrk -t2 -c$CONNS -d${SECS}s (refusals), -t1 -c1 -d${LSECS}s (latency);"
echo "gate threads $GATE_THREADS; $(nproc) cores shared with wrk, redis-server, nginx and whatever else runs; load $(cut -d' ' -f1-3 /proc/loadavg)"
ratios= nratios= d50s= d99s=
evalsha() { redis-cli -p "$P_REDIS" info commandstats | awk -F'[=,]' '/^cmdstat_evalsha:/ {print $2}'; }
for r in $(seq 1 "$ROUNDS"); do
  # Alternating which redis gate goes first: neither always runs on the warmer machine.
  if [ $((r % 2)) = 1 ]; then nr=$(rps "http://127.0.0.1:$P_NREJ$MAP"); e0=$(evalsha); rr=$(rps "http://127.0.0.1:$P_RREJ$MAP"); e1=$(evalsha)
  else e0=$(evalsha); rr=$(rps "http://127.0.0.1:$P_RREJ$MAP"); e1=$(evalsha); nr=$(rps "http://127.0.0.1:$P_NREJ$MAP"); fi
  lr=$(rps "http://127.0.0.1:$P_LREJ$MAP")
  read -r l50 l99 <<<"$(lat "http://127.0.0.1:$P_LPASS$AB_QUERY")"
  read -r r50 r99 <<<"$(lat "http://127.0.0.1:$P_RPASS$AB_QUERY")"
  ratio=$(calc "$rr / $lr") nratio=$(calc "$nr / $lr") d50=$(calc "$r50 - $l50" 4) d99=$(calc "$r99 - $l99" 4)
  ratios+="$ratio " nratios+="$nratio " d50s+="$d50 " d99s+="$d99 "
  echo "round $r: refusals/s in-process $lr, redis+cache $rr (ratio $ratio, $((e1 - e0)) script calls), redis no cache $nr (ratio $nratio); pass p50/p99 ms in-process $l50/$l99, redis $r50/$r99 (added $d50/$d99)"
done
med() { tr ' ' '\n' <<<"$1" | grep . | median; }
ratio=$(med "$ratios") nratio=$(med "$nratios") d50=$(med "$d50s") d99=$(med "$d99s")
met() { awk "BEGIN { exit !($1) }" && echo met || echo "NOT met"; }
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| measure (median of $ROUNDS rounds) | value | target | |"
echo "| refusal throughput, redis / in-process, refusal cache on | ${ratio}x | >= 0.5x | $(met "$ratio >= 0.5") |"
echo "| refusal throughput, redis / in-process, refusal_cache: 0 | ${nratio}x | >= 0.5x | $(met "$nratio >= 0.5") |"
echo "| added p50 of a Redis-backed decision | ${d50} ms | <= 0.3 ms | $(met "$d50 <= 0.3") |"
echo "| added p99 of a Redis-backed decision | ${d99} ms | <= 1 ms | $(met "$d99 <= 1") |"
