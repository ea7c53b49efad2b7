#!/usr/bin/env bash
# An exception at any completion handler costs one exchange, never the
# process, a concurrency slot, a connection count or a second upstream call.
# Uses build/gate/ogc-gate-faults (the gate built with OGC_GATE_FAULTS): a
# request's `X-OT-Test-Fault: N` throws at its Nth handler, `N+` after it ran.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/gate.sh"
GATE_BIN="$root/build/gate/ogc-gate-faults"
GATE=18590 ADMIN=18591 ECHO=18592
tmp=$(mktemp -d)
echo_pid=
cleanup() { gate_stop "$tmp/g"; [ -n "$echo_pid" ] && kill "$echo_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT; [ -n "${KEEP:-}" ] && trap - EXIT
make -s -C "$root" build/gate/ogc-gate-faults >/dev/null || { not_ok "the fault-injection gate builds"; tap_exit; }

ECHO_LOG="$tmp/echo.log" python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$tmp/echo.err" & echo_pid=$!
for i in $(seq 1 30); do curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1; done
# One map slot and a short queue: a slot a fault leaked would turn the
# next tile into a 503.
printf 'concurrency:\n  queue_timeout: 1\n  classes:\n    - {name: maps, match: [GetMap, GetTile], limit: 1}\n' >"$tmp/g.yaml"
gate_start "$tmp/g" "$GATE" "$ADMIN" "http://127.0.0.1:$ECHO" --config "$tmp/g.yaml" --burst 1000000 --rate 100000 \
  || { not_ok "gate starts"; tap_exit; }
ok "the fault-injection gate started"
pid=$(cat "$tmp/g/gate.pid")
metric() { curl -s "http://127.0.0.1:$ADMIN/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

# --- every boundary of a pass-through tile, before and after its body -------
codes=() bad=0 i=0
for n in 1 2 3 4 5 6 7 8 1+ 2+ 3+ 4+ 5+ 6+ 7+ 8+; do
  i=$((i + 1))
  c=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H "X-OT-Test-Fault: $n" "http://127.0.0.1:$GATE/tiles/f/10/$i/1.png")
  codes+=("$n:$c")
  case $c in 200|502) ;; *) bad=$((bad + 1)) ;; esac
done
check_eq "every faulted tile got an answer, 502 or 200 (${codes[*]})" 0 "$bad"
check "the gate process is alive after 16 injected faults" kill -0 "$pid"
injected=$(grep -c 'exception in a handler: injected fault' "$tmp/g/gate.err")
check "at least 12 of the 16 faults hit a handler ($injected)" test "$injected" -ge 12
check_eq "each caught exception is counted in /metrics" "$injected" "$(metric ogc_gate_handler_exceptions_total)"
check_eq "a fault before the first handler's body answers 502 (the upstream was asked)" "1:502" "${codes[0]}"
check_eq "no tile path reached the upstream twice (no retry after a fault)" 0 \
  "$(grep '^GET /tiles/f/' "$tmp/echo.log" | sort | uniq -d | wc -l)"

# Nothing leaked: the one map slot, the in-flight exchanges, the connections.
sleep 0.3
check_eq "the map slot was released by every fault" 0 "$(metric 'ogc_gate_concurrency_active{class="maps"}')"
check_eq "no client connection is left open" 0 "$(metric ogc_gate_connections_open)"
par=$(curl -s -Z --parallel-immediate -o /dev/null -o /dev/null -o /dev/null -w '%{http_code}\n' \
  "http://127.0.0.1:$GATE/tiles/f/11/1/1.png" "http://127.0.0.1:$GATE/tiles/f/11/1/2.png" "http://127.0.0.1:$GATE/tiles/f/11/1/3.png" 2>/dev/null | sort | uniq -c | awk '{print $1"x"$2}')
check_eq "three tiles at once through one slot after the faults: all 200" "3x200" "$par"
check_eq "/healthz answers" 200 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GATE/healthz")"

# Every faulted request is logged once, under its own status.
# The log writer gathers lines for up to 20 ms under load (src/gate/log_writer.hpp).
for i in $(seq 1 20); do
  logged=$(grep -c '"path_hint":\|"request_id"' "$tmp/g/gate.log")
  [ "$logged" -ge 19 ] && break
  sleep 0.05
done
check "the access log kept a line per request ($logged >= 19)" test "$logged" -ge 19
check "a faulted exchange is logged as an error with the exception" grep -q '"status":502.*"upstream_error":"internal: injected fault' "$tmp/g/gate.log"

# --- a large answer cut mid-body: the connection ends, the gate goes on -------
outs=() short=0 wrong=0
for n in 4 5 6 7 8 9; do
  out=$(curl -s -m 10 -o "$tmp/big" -w '%{http_code}' -H "X-OT-Test-Fault: $n" "http://127.0.0.1:$GATE/big?n=4000000"; echo " rc=$? $(stat -c %s "$tmp/big")")
  outs+=("$n:${out// /,}")
  case $out in "200 rc=18 "*) short=$((short + 1)) ;; "502 rc=0 29"|"200 rc=0 4000000") ;; *) wrong=$((wrong + 1)) ;; esac
done
check_eq "4 MB answers with a fault at handlers 4-9: whole, 502, or cut short, never a hang (${outs[*]})" 0 "$wrong"
check "at least one fault landed mid-body and ended the answer short" test "$short" -ge 1
check_eq "the next large answer arrives whole" "200 4000000" "$(curl -s -m 10 -o /dev/null -w '%{http_code} %{size_download}' "http://127.0.0.1:$GATE/big?n=4000000")"

# --- a body read with Expect: 100-continue, and the refusal path -------------
for n in 1 2 3; do
  c=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H "X-OT-Test-Fault: $n" -H 'Expect: 100-continue' \
    --data-binary @"$root/README.md" "http://127.0.0.1:$GATE/post-$n")
  codes+=("post$n:$c")
done
check "POST with 100-continue and a fault at each of its first handlers (refused as unknown): the gate lives (${codes[*]: -3})" kill -0 "$pid"
gate_stop "$tmp/g"
gate_start "$tmp/g" "$GATE" "$ADMIN" "http://127.0.0.1:$ECHO" --config "$tmp/g.yaml" --burst 10 --rate 0.001 \
  || { not_ok "gate restarts with a tiny budget"; tap_exit; }
pid=$(cat "$tmp/g/gate.pid")
for i in $(seq 1 20); do  # spend the budget
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GATE/tiles/f/12/1/$i.png")" = 429 ] && break
done
c1=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H 'X-OT-Test-Fault: 1' "http://127.0.0.1:$GATE/tiles/f/12/2/1.png")
c2=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GATE/tiles/f/12/2/2.png")
check "a fault while writing a refusal ends that exchange ($c1), the next one is refused as usual ($c2)" \
  bash -c "[ '$c2' = 429 ] && kill -0 $pid"
c=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H 'X-OT-Test-Fault: 1' "http://127.0.0.1:$ADMIN/metrics")
check_eq "the admin listener answers after a fault in one of its exchanges ($c)" 200 \
  "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ADMIN/metrics")"
tap_exit
