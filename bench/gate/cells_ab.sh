#!/usr/bin/env bash
# The area budget's cost on the refusal path (issue 15: >= 0.9x the gate
# without it), in one run, three gates refusing the same GetMap:
#   off       no area budget; the address bucket refuses
#   on_addr   area budget configured; the address bucket refuses first (the
#             cell is never looked at)
#   on_cell   the address admits, the cell refuses and the address gets its
#             charge back (the worst case: two buckets, a cell key, a refund)
# Two figures: wrk throughput (rounds in rotating order, ratios within each
# round, medians) and, as the noise-free second figure, valgrind instructions
# per request for each gate (one thread, (Ir(N2) - Ir(N1)) / (N2 - N1)).
#   [ROUNDS=5] [SECS=3] [CONNS=32] [N1=200] [N2=1200] [CALLGRIND=1] bench/gate/cells_ab.sh
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${ROUNDS:-5} SECS=${SECS:-3} CONNS=${CONNS:-32} N1=${N1:-200} N2=${N2:-1200} CALLGRIND=${CALLGRIND:-1}
P_UP=19110 P_CG=19111 P_CG_A=19112
declare -A PORT=([off]=19113 [on_addr]=19115 [on_cell]=19117)
names=(off on_addr on_cell)
for b in wrk curl; do command -v "$b" >/dev/null || { echo "needs $b" >&2; exit 1; }; done
[ -x "$root/bin/ogc-gate" ] || make -s -C "$root" bin/ogc-gate || exit 1
. "$root/test/gate/lib/gate.sh"
tmp=$(mktemp -d)
cleanup() { for n in "${names[@]}"; do gate_stop "$tmp/$n"; done; [ -n "${cg_pid:-}" ] && kill "$cg_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# Every GetMap costs 1 unit. Nothing is forwarded: the upstream port is never used.
common='cost: {weights: {map: {fixed: 1, per_row: 0, per_megapixel: 0}}}
concurrency: {classes: []}'
cat >"$tmp/off.yaml" <<Y
$common
tiers: [{name: public, rate: 0.0001, burst: 1}]
Y
cat >"$tmp/on_addr.yaml" <<Y
$common
tiers: [{name: public, rate: 0.0001, burst: 1, cells: {grid: 0.1, rate: 1, burst: 100}}]
Y
cat >"$tmp/on_cell.yaml" <<Y
$common
tiers: [{name: public, rate: 1000000, burst: 1000000000, cells: {grid: 0.1, rate: 0.0001, burst: 1}}]
Y
Q="/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=roads,rivers&STYLES=&CRS=EPSG:4326&BBOX=50.11,8.66,50.12,8.68&WIDTH=256&HEIGHT=256&FORMAT=image/png"
for n in "${names[@]}"; do
  gate_start "$tmp/$n" "${PORT[$n]}" $((PORT[$n] + 1)) "http://127.0.0.1:$P_UP" --config "$tmp/$n.yaml" --threads 2 || exit 1
  curl -s -o /dev/null "http://127.0.0.1:${PORT[$n]}$Q"  # spends the one unit (off, on_addr / the cell's, on_cell)
  body=$(curl -s -w ' status=%{http_code}' "http://127.0.0.1:${PORT[$n]}$Q")
  want="Rate limit of the 'public' tier"; [ "$n" = on_cell ] && want="Area rate limit of the 'public' tier"
  grep -q "status=429" <<<"$body" && grep -q "$want" <<<"$body" || { echo "$n: not the expected refusal: $body" >&2; exit 1; }
done

rps() { wrk -t2 -c"$CONNS" -d"${SECS}s" "$1" 2>/dev/null | awk '/^Requests\/sec:/{print $2}'; }
median() { sort -g | awk '{a[NR] = $1} END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
declare -A R
echo "area budget refusal path: $ROUNDS rounds, wrk -t2 -c$CONNS -d${SECS}s, gate threads 2, $(nproc) cores shared with wrk (and other work)"
for r in $(seq 1 "$ROUNDS"); do
  order=("${names[@]:$((r % 3))}" "${names[@]:0:$((r % 3))}")
  line="round $r:"
  declare -A now=()
  for n in "${order[@]}"; do v=$(rps "http://127.0.0.1:${PORT[$n]}$Q"); now[$n]=$v; R[$n]+="$v "; line+=" $n=$v"; done
  a=$(awk "BEGIN { printf \"%.3f\", ${now[on_addr]} / ${now[off]} }"); c=$(awk "BEGIN { printf \"%.3f\", ${now[on_cell]} / ${now[off]} }")
  R[ratio_addr]+="$a "; R[ratio_cell]+="$c "
  echo "$line  ratios: on_addr/off=$a on_cell/off=$c"
done
med() { tr ' ' '\n' <<<"${R[$1]}" | grep . | median; }
echo "median req/s: off=$(med off) on_addr=$(med on_addr) on_cell=$(med on_cell)"
echo "median ratio (target >= 0.9): on_addr/off=$(med ratio_addr) on_cell/off=$(med ratio_cell)"
for n in "${names[@]}"; do gate_stop "$tmp/$n"; done

[ "$CALLGRIND" = 1 ] || exit 0
command -v valgrind >/dev/null || { echo "no valgrind: instruction counts skipped" >&2; exit 0; }
# ir CONFIG N: instructions the gate executed serving N refusals on one connection.
ir() {
  local out=$tmp/cg.out i
  rm -f "$out"
  valgrind --tool=callgrind --callgrind-out-file="$out" "$root/bin/ogc-gate" --listen "127.0.0.1:$P_CG" \
    --admin-listen "127.0.0.1:$P_CG_A" --upstream "http://127.0.0.1:$P_UP" --threads 1 --config "$tmp/$1.yaml" \
    >"$tmp/cg.log" 2>"$tmp/cg.err" &
  cg_pid=$!
  for i in $(seq 1 300); do (exec 3<>"/dev/tcp/127.0.0.1/$P_CG") 2>/dev/null && break; sleep 0.1; done
  /usr/bin/python3 - "$P_CG" "$Q" "$2" <<'PY' || { kill "$cg_pid"; return 1; }
import http.client, sys
port, q, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
c = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
for _ in range(n):
    c.request('GET', q)
    c.getresponse().read()
PY
  kill -TERM "$cg_pid"; wait "$cg_pid" 2>/dev/null; cg_pid=
  awk '/^(summary|totals):/ {print $2; exit}' "$out"
}
declare -A per
for n in "${names[@]}"; do
  a=$(ir "$n" "$N1") && b=$(ir "$n" "$N2") || exit 1
  per[$n]=$(( (b - a) / (N2 - N1) ))
  echo "instructions per request, $n: ${per[$n]} Ir"
done
awk -v o="${per[off]}" -v a="${per[on_addr]}" -v c="${per[on_cell]}" \
  'BEGIN { printf "instruction ratio (off/on, as a throughput ratio): on_addr %.3f, on_cell %.3f\n", o / a, o / c }'
