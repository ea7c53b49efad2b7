#!/usr/bin/env bash
# Shared buckets in Redis against the in-process buckets, on loopback, in one
# run (bench/gate/redis_store_bench.cpp): decision latency p50/p99 (issue 12
# targets: added p50 <= 0.3 ms, p99 <= 1 ms) and pipelined throughput.
# Knobs: ROUNDS (3), N latency samples (20000), SECS per throughput run (3),
# DEPTH calls in flight (64). Redis on 127.0.0.1:18720.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${ROUNDS:-3} N=${N:-20000} SECS=${SECS:-3} DEPTH=${DEPTH:-64} PORT=18720
command -v redis-server >/dev/null || { echo "needs redis-server" >&2; exit 1; }
make -s -C "$root" build/gate/redis_store_bench || exit 1
tmp=$(mktemp -d)
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" --loglevel warning >"$tmp/log" 2>&1 &
rpid=$!
trap 'kill "$rpid" 2>/dev/null; sleep 0.2; rm -rf "$tmp"' EXIT
for _ in $(seq 1 50); do redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
echo "redis-server $(redis-server --version | sed -nE 's/.*v=([^ ]+).*/\1/p'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
for r in $(seq 1 "$ROUNDS"); do
  echo "--- round $r"
  "$root/build/gate/redis_store_bench" --port "$PORT" --n "$N" --secs "$SECS" --depth "$DEPTH" || rc=1
done
exit $rc
