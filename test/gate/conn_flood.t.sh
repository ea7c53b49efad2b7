#!/usr/bin/env bash
# Connection floods on loopback (bounded: at most 500 connections, ~20 s).
# One address over its limit is turned away while other addresses are
# served and probes answer fast; beyond the global limit only probes are
# answered (from a small reserve); out of descriptors the listener backs
# off instead of spinning, and the gate serves again once the flood is gone.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/gate.sh"
GATE=18510 ADMIN=18511 ECHO=18512 GATE2=18513 ADMIN2=18514
tmp=$(mktemp -d)
pids=()
cleanup() { touch "$tmp/stop"; gate_stop "$tmp/g"; gate_stop "$tmp/g2"; for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null

python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$tmp/echo.err" & pids+=($!)
for i in $(seq 1 30); do curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1; done
printf 'limits:\n  max_connections: 300\n  max_connections_per_address: 100\n' >"$tmp/limits.yaml"
gate_start "$tmp/g" "$GATE" "$ADMIN" "http://127.0.0.1:$ECHO" --config "$tmp/limits.yaml" --threads 2 \
  || { not_ok "gate starts"; tap_exit; }
ok "gate started (max_connections 300, per address 100)"

flood() {  # name src n: starts a flood in the background, waits until it has connected
  rm -f "$tmp/ready.$1"
  python3 "$root/test/gate/lib/flood.py" "$2" "$3" "$4" 60 "$tmp/ready.$1" "$tmp/stop" >"$tmp/out.$1" & pids+=($!)
  local i; for i in $(seq 1 200); do [ -s "$tmp/ready.$1" ] && return 0; sleep 0.05; done
  return 1
}
probe_p99() {  # port path: slowest of 20 sequential probes from 127.0.0.1, in ms
  local i worst=0 t
  for i in $(seq 1 20); do
    t=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 2 "http://127.0.0.1:$1$2")
    [ "${t%% *}" = 200 ] || { echo 99999; return; }
    t=$(awk -v s="${t#* }" 'BEGIN{printf "%d", s*1000}')
    [ "$t" -gt "$worst" ] && worst=$t
  done
  echo "$worst"
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# 1. One address, 1000 connections: 100 held, the rest turned away.
flood a 127.0.0.2 "$GATE" 1000 || not_ok "flood from 127.0.0.2 connected"
sleep 0.5
p=$(probe_p99 "$GATE" /healthz)
check "/healthz from another address while 127.0.0.2 floods: slowest of 20 = ${p} ms (< 250 on a shared machine)" [ "$p" -lt 250 ]
st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$GATE/other/address")
check_eq "another address is served (forwarded) during the flood" 200 "$st"
m=$(curl -s "http://127.0.0.1:$ADMIN/metrics")
refused=$(sed -nE 's/^ogc_gate_connections_refused_total\{limit="per_address"\} ([0-9]+)$/\1/p' <<<"$m")
check "connections over the per-address limit were refused (${refused:-none})" [ "${refused:-0}" -ge 800 ]
open=$(sed -nE 's/^ogc_gate_connections_open ([0-9]+)$/\1/p' <<<"$m")
check "the gate holds no more than 100 of them (+ the probe) (${open:-?})" [ "${open:-999}" -le 102 ]

# 2. Beyond the global limit (300): 4 more addresses × 100.
for k in 3 4 5 6; do flood b$k 127.0.0.$k "$GATE" 100 || not_ok "flood from 127.0.0.$k connected"; done
sleep 0.3
st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:$GATE/over/limit")
case $st in 503|000) ok "a request beyond the global limit is not served ($st)";; *) not_ok "a request beyond the global limit is not served (got $st)";; esac
sleep 2.3  # idle connections in the probe reserve are let go after 2 s
gpid=$(cat "$tmp/g/gate.pid")
c0=$(cpu_ticks "$gpid")
p=$(probe_p99 "$GATE" /healthz)
check "/healthz answered from the reserve at the global limit: slowest of 20 = ${p} ms (< 250 on a shared machine)" [ "$p" -lt 250 ]
st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:$GATE/over/limit")
check_eq "a non-probe request from the reserve is answered 503" 503 "$st"
sleep 1
c1=$(cpu_ticks "$gpid")
check "the gate does not spin while full ($((c1 - c0)) ticks in ~2 s)" [ $((c1 - c0)) -lt 60 ]
touch "$tmp/stop"; sleep 0.5
alive=$(sed -nE 's/^alive ([0-9]+) of.*/\1/p' "$tmp/out.a")
check "the first flood kept at most 100 connections (${alive:-?})" [ "${alive:-999}" -le 100 ]
sleep 0.5
st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$GATE/after/flood")
check_eq "served again once the flood is gone" 200 "$st"
rm -f "$tmp/stop"

# 3. Out of descriptors: a gate under ulimit -n 200 told to take 1000.
printf 'limits:\n  max_connections: 1000\n  max_connections_per_address: 1000\n' >"$tmp/many.yaml"
( ulimit -n 200; ulimit -Hn 200; gate_start "$tmp/g2" "$GATE2" "$ADMIN2" "http://127.0.0.1:$ECHO" --config "$tmp/many.yaml" --threads 1 ) \
  || not_ok "gate 2 starts under ulimit -n 200"
g2=$(cat "$tmp/g2/gate.pid")
flood c 127.0.0.7 "$GATE2" 400 || not_ok "flood of gate 2 connected"
sleep 0.5
c0=$(cpu_ticks "$g2"); sleep 2; c1=$(cpu_ticks "$g2")
check "out of descriptors, the listener backs off ($((c1 - c0)) ticks in 2 s, < 40)" [ $((c1 - c0)) -lt 40 ]
check "gate 2 is alive" kill -0 "$g2"
touch "$tmp/stop"; sleep 1
st=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "http://127.0.0.1:$GATE2/healthz")
check_eq "gate 2 answers once the flood is gone" 200 "$st"
m=$(curl -s --max-time 3 "http://127.0.0.1:$ADMIN2/metrics")
b=$(sed -nE 's/^ogc_gate_accept_backoffs_total ([0-9]+)$/\1/p' <<<"$m")
check "the back-offs were counted (${b:-none})" [ "${b:-0}" -ge 1 ]
tap_exit
