#!/usr/bin/env bash
# What canonical forwarding costs: pass-through throughput of two gate
# binaries (OLD, NEW) in front of nginx serving a static 20 kB body, with a
# typical 11-parameter KVP query, alternating rounds. Prints the median of
# the per-round NEW/OLD ratios. MODE=reject compares the 429 path instead.
#   OLD=/path/to/old/ogc-gate [NEW=bin/ogc-gate] [ROUNDS=5] [SECS=4] [MODE=pass|reject] bench/gate/canonical_ab.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
OLD=${OLD:?set OLD to the ogc-gate binary to compare with} NEW=${NEW:-$root/bin/ogc-gate}
ROUNDS=${ROUNDS:-5} SECS=${SECS:-4} CONNS=${CONNS:-32}
P_STATIC=18950 P_OLD=18951 P_OLD_A=18952 P_NEW=18953 P_NEW_A=18954
. "$root/test/gate/lib/gate.sh"
. "$root/bench/gate/lib/static_upstream.sh"
tmp=$(mktemp -d)
cleanup() { gate_stop "$tmp/old"; gate_stop "$tmp/new"; [ -f "$tmp/nginx.pid" ] && kill "$(cat "$tmp/nginx.pid")" 2>/dev/null; sleep 0.2; rm -rf "$tmp"; }
trap cleanup EXIT
static_upstream "$tmp" "$P_STATIC" || exit 1
BUDGET=(--burst 1e9 --rate 1e9); [ "${MODE:-pass}" = reject ] && BUDGET=(--burst 1 --rate 0.0001)
GATE_BIN=$OLD gate_start "$tmp/old" "$P_OLD" "$P_OLD_A" "http://127.0.0.1:$P_STATIC" --threads 1 "${BUDGET[@]}" || exit 1
GATE_BIN=$NEW gate_start "$tmp/new" "$P_NEW" "$P_NEW_A" "http://127.0.0.1:$P_STATIC" --threads 1 "${BUDGET[@]}" || exit 1
Q=$AB_QUERY
for p in "$P_OLD" "$P_NEW"; do curl -s -o /dev/null "http://127.0.0.1:$p$Q"; done  # spends a reject gate's one unit
# Requests/s, and the gate's own CPU time per request (utime+stime from
# /proc): on a shared 2-core machine the second is far less noisy.
run() {  # port pidfile -> "rps cpu_us_per_request"
  local pid=$(cat "$2") t0 t1 out n
  t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  out=$(wrk -t1 -c"$CONNS" -d"${SECS}s" "http://127.0.0.1:$1$Q" 2>/dev/null)
  t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  n=$(awk '/requests in/{print $1}' <<<"$out")
  awk -v r="$(awk '/^Requests\/sec:/{print $2}' <<<"$out")" -v n="$n" -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%s %.2f\n", r, t / hz * 1e6 / n }'
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ratios="" cpus=""
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then read -r o oc < <(run "$P_OLD" "$tmp/old/gate.pid"); read -r n nc < <(run "$P_NEW" "$tmp/new/gate.pid")
  else read -r n nc < <(run "$P_NEW" "$tmp/new/gate.pid"); read -r o oc < <(run "$P_OLD" "$tmp/old/gate.pid"); fi
  x=$(awk "BEGIN { printf \"%.3f\", $n / $o }"); ratios+="$x "
  y=$(awk "BEGIN { printf \"%.3f\", $oc / $nc }"); cpus+="$y "
  echo "round $r: old $o/s ${oc}us/req, new $n/s ${nc}us/req; throughput new/old $x, cpu old/new $y"
done
echo "median throughput new/old: $(median <<<"$ratios"); median CPU-per-request old/new: $(median <<<"$cpus")"
