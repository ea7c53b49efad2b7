#!/usr/bin/env bash
# One-connection latency of two gate binaries and nginx proxy_pass, in front
# of the same static upstream (a separate one-worker nginx, 20 kB), measured
# as run.sh's pooled mode does: per round, SLICES interleaved runs of SLICE s
# per server (wrk -t1 -c1, order rotated per slice), each server's samples
# pooled (bench/gate/lib/latency_dump.lua). Prints each round's p50/p99 and
# the p99 ratios NEW/OLD, NEW/nginx and OLD/nginx.
#   OLD=/path/to/ogc-gate [NEW=bin/ogc-gate] [ROUNDS=3] [SLICES=10] [SLICE=1] [GATE_THREADS=2] bench/gate/latency_ab.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
OLD=${OLD:?set OLD to the ogc-gate binary to compare with} NEW=${NEW:-$root/bin/ogc-gate}
ROUNDS=${ROUNDS:-3} SLICES=${SLICES:-10} SLICE=${SLICE:-1} GATE_THREADS=${GATE_THREADS:-2}
P_STATIC=18990 P_PROXY=18991 P_OLD=18992 P_OLD_A=18993 P_NEW=18994 P_NEW_A=18995
for b in nginx wrk curl; do command -v "$b" >/dev/null || { echo "needs $b" >&2; exit 1; }; done
. "$root/bench/gate/lib/static_upstream.sh"
. "$root/bench/gate/lib/nginx_peer.sh"
. "$root/test/gate/lib/gate.sh"
tmp=$(mktemp -d)
cleanup() {
  gate_stop "$tmp/old"; gate_stop "$tmp/new"
  for n in "$tmp/nginx.pid" "$tmp/peer/nginx.pid"; do [ -f "$n" ] && kill "$(cat "$n")" 2>/dev/null; done
  sleep 0.2; rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
static_upstream "$tmp" "$P_STATIC" || exit 1
nginx_peer "$tmp/peer" "$P_STATIC" "$P_PROXY" || exit 1
for i in $(seq 1 50); do curl -fs -o /dev/null "http://127.0.0.1:$P_STATIC/tile.png" && break; sleep 0.1; done
GATE_BIN=$OLD gate_start "$tmp/old" "$P_OLD" "$P_OLD_A" "http://127.0.0.1:$P_STATIC" --threads "$GATE_THREADS" --burst 1e9 --rate 1e9 || exit 1
GATE_BIN=$NEW gate_start "$tmp/new" "$P_NEW" "$P_NEW_A" "http://127.0.0.1:$P_STATIC" --threads "$GATE_THREADS" --burst 1e9 --rate 1e9 || exit 1
names=(old new nginx)
declare -A URL=([old]="http://127.0.0.1:$P_OLD/tile.png" [new]="http://127.0.0.1:$P_NEW/tile.png" [nginx]="http://127.0.0.1:$P_PROXY/tile.png")
pooled() {
  cat "$@" | sort -n -k1,1 | awk '{ v[NR] = $1; c[NR] = $2; n += $2 }
    END { r50 = int(0.50 * n); if (r50 < 0.50 * n) r50++; r99 = int(0.99 * n); if (r99 < 0.99 * n) r99++
          for (i = 1; i <= NR; i++) { cum += c[i]; if (!p50 && cum >= r50) p50 = v[i]; if (!p99 && cum >= r99) p99 = v[i] }
          printf "%d %d %d\n", p50, p99, n }'
}
echo "one-connection latency, pooled: $ROUNDS rounds x $SLICES slices of ${SLICE}s per server; gate threads $GATE_THREADS"
echo "OLD $OLD"; echo "NEW $NEW"; echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in "${names[@]}"; do wrk -t1 -c1 -d1s "${URL[$n]}" >/dev/null 2>&1; done  # warm-up
for r in $(seq 1 "$ROUNDS"); do
  for s in $(seq 1 "$SLICES"); do
    k=$(((r + s) % 3)); order=("${names[@]:$k}" "${names[@]:0:$k}")
    for n in "${order[@]}"; do
      LAT_OUT="$tmp/lat.$r.$n.$s" wrk -t1 -c1 -d"${SLICE}s" -s "$root/bench/gate/lib/latency_dump.lua" "${URL[$n]}" >/dev/null 2>&1
    done
  done
  declare -A P50 P99 S99
  line="round $r (µs, p50/p99):"
  for n in "${names[@]}"; do
    read -r a b c < <(pooled "$tmp/lat.$r.$n".*); P50[$n]=$a P99[$n]=$b; line+=" $n=$a/$b (n=$c)"
    S99[$n]=$(for f in "$tmp/lat.$r.$n".*; do pooled "$f" | awk '{print $2}'; done | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}')
  done
  sline="  median of the slices' own p99 (µs): old=${S99[old]} new=${S99[new]} nginx=${S99[nginx]}; ratios new/old=$(awk "BEGIN{printf \"%.3f\", ${S99[new]}/${S99[old]}}") new/nginx=$(awk "BEGIN{printf \"%.3f\", ${S99[new]}/${S99[nginx]}}")"
  echo "$line  p99 ratios: new/old=$(awk "BEGIN{printf \"%.3f\", ${P99[new]}/${P99[old]}}") new/nginx=$(awk "BEGIN{printf \"%.3f\", ${P99[new]}/${P99[nginx]}}") old/nginx=$(awk "BEGIN{printf \"%.3f\", ${P99[old]}/${P99[nginx]}}")"
  echo "$sline"
done
line="all rounds (µs, p50/p99):"
for n in "${names[@]}"; do read -r a b c < <(pooled "$tmp"/lat.*."$n".*); P50[$n]=$a P99[$n]=$b; line+=" $n=$a/$b (n=$c)"; done
echo "$line  p99 ratios: new/old=$(awk "BEGIN{printf \"%.3f\", ${P99[new]}/${P99[old]}}") new/nginx=$(awk "BEGIN{printf \"%.3f\", ${P99[new]}/${P99[nginx]}}") old/nginx=$(awk "BEGIN{printf \"%.3f\", ${P99[old]}/${P99[nginx]}}")"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
