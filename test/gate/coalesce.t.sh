#!/usr/bin/env bash
# Coalescing against a real MapServer: a stampede of identical GetMaps makes
# one upstream call (counted in lighttpd's access log) and every client gets
# the same image; different credentials never share; WFS POSTs are never
# coalesced; an upstream failure reaches every waiter once and is not reused.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/mapserver.sh"
. "$root/test/gate/lib/gate.sh"
MS=18400 GATE=18401 ADMIN=18402 ECHO=18403 GATE2=18404 ADMIN2=18405
tmp=$(mktemp -d)
[ -n "$KEEP" ] && tmp=$KEEP && mkdir -p $tmp
echo_pid=
cleanup() { gate_stop "$tmp/g"; gate_stop "$tmp/g2"; ms_stop "$tmp/ms"; [ -n "$echo_pid" ] && kill "$echo_pid" 2>/dev/null; [ -z "$KEEP" ] && rm -rf "$tmp"; }
trap cleanup EXIT
[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null

# Many points and a large image: a render of a few hundred ms, so that the
# stampede's arrivals all fall inside the first one's flight.
ms_start "$tmp/ms" "$MS" 20000 "http://127.0.0.1:$GATE/" || { not_ok "MapServer starts"; tap_exit; }
# 5 concurrent WFS POSTs meet the features class (4 slots): the fifth waits, and
# on a loaded machine MapServer can take longer than the default 2 s queue timeout.
printf 'concurrency:\n  queue_timeout: 30\n' >"$tmp/g.yaml"
gate_start "$tmp/g" "$GATE" "$ADMIN" "http://127.0.0.1:$MS" --config "$tmp/g.yaml" --burst 1000000 --rate 100000 || { not_ok "gate starts"; tap_exit; }
ok "MapServer and gate started"
LOG="$tmp/ms/run/access.log"
# lighttpd buffers its access log: a marker request sent straight to it,
# once it shows up, proves that every earlier line has been written.
upstream_calls() {  # pattern: how many requests MapServer saw
  local mark; mark=$(date +%s%N); curl -s -o /dev/null "http://127.0.0.1:$MS/?marker=$mark"
  local i; for i in $(seq 1 100); do grep -q "marker=$mark " "$LOG" && break; sleep 0.1; done
  grep -ci -- "$1" "$LOG"
}
# One curl process, all transfers started at once (not waiting to multiplex).
par() { curl -s -Z --parallel-immediate --parallel-max 50 "$@" 2>/dev/null; }
Q="SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=pts&STYLES=&CRS=EPSG:4326&WIDTH=2500&HEIGHT=2500&FORMAT=image/png"

# 1. Stampede: 25 identical concurrent GetMaps (curl --parallel: one process, 25 connections).
args=()
for i in $(seq 1 25); do args+=(-o "$tmp/s$i.png" "http://127.0.0.1:$GATE/?$Q&BBOX=30,-11,46,31"); done
par "${args[@]}"
check_eq "25 identical concurrent GetMaps: exactly 1 upstream request" 1 "$(upstream_calls 'BBOX=30,-11,46,31')"
check_eq "... and all 25 got the same image" 1 "$(md5sum "$tmp"/s*.png | awk '{print $1}' | sort -u | wc -l)"
check "... a PNG" bash -c "head -c 4 '$tmp/s1.png' | grep -q PNG"
curl -s -o "$tmp/direct.png" "http://127.0.0.1:$MS/?$Q&BBOX=30,-11,46,31"
check "... byte-identical to MapServer's own answer" cmp -s "$tmp/direct.png" "$tmp/s25.png"
gate_log_wait "$tmp/g/gate.log" '"coalesced":true' 24  # lines are written after the answers
check "waiters are logged as coalesced" bash -c "[ \$(grep -c '\"coalesced\":true' '$tmp/g/gate.log') = 24 ]"
check "metrics count coalesced requests" grep -q '^ogc_gate_coalesced_total 24$' <(curl -s "http://127.0.0.1:$ADMIN/metrics")
before=$(upstream_calls 'BBOX=30,-11,46,31')  # the stampede's call and the direct one
curl -s -o /dev/null "http://127.0.0.1:$GATE/?$Q&BBOX=30,-11,46,31"
check_eq "a later identical request is a new upstream call (no caching)" $((before + 1)) "$(upstream_calls 'BBOX=30,-11,46,31')"

# Normalisation: keys case-folded and reordered, case-insensitive values folded, still one flight.
Q2="request=GetMap&service=wms&VERSION=1.3.0&layers=pts&styles=&crs=epsg:4326&WIDTH=2500&HEIGHT=2500&format=image/png&bbox=30,-12,46,31"
Q3="BBOX=30,-12,46,31&$Q"
par -o /dev/null "http://127.0.0.1:$GATE/?$Q3" -o /dev/null "http://127.0.0.1:$GATE/?$Q2" \
  -o /dev/null "http://127.0.0.1:$GATE/?$Q3" -o /dev/null "http://127.0.0.1:$GATE/?$Q2"
check_eq "differently spelled but equal GetMaps share one flight" 1 "$(upstream_calls 'BBOX=30,-12,46,31')"

# 2. Two credentials: never shared.
args=()
for i in 1 2 3 4 5; do args+=(-o /dev/null "http://127.0.0.1:$GATE/?$Q&BBOX=30,-13,46,31"); done
par -H 'Authorization: Bearer alice' "${args[@]}" & p1=$!
par -H 'Authorization: Bearer bob' "${args[@]}" & p2=$!
wait $p1 $p2
check_eq "two Authorization headers, 5 requests each: 2 upstream requests" 2 "$(upstream_calls 'BBOX=30,-13,46,31')"

# 3. WFS POST: never coalesced.
cat >"$tmp/gf.xml" <<'XML'
<?xml version="1.0"?>
<wfs:GetFeature service="WFS" version="2.0.0" count="5" xmlns:wfs="http://www.opengis.net/wfs/2.0"><wfs:Query typeNames="pts"/></wfs:GetFeature>
XML
before=$(upstream_calls '"POST / ')
args=()
for i in 1 2 3 4 5; do args+=(--next -o "$tmp/p$i" -H 'Content-Type: text/xml' --data-binary @"$tmp/gf.xml" "http://127.0.0.1:$GATE/"); done
par "${args[@]}"
check_eq "5 identical concurrent WFS POSTs: 5 upstream requests" 5 $(( $(upstream_calls '"POST / ') - before ))
check "... each answered with features" bash -c "grep -q '<wfs:member>' '$tmp/p1' && grep -q '<wfs:member>' '$tmp/p5'"

# 4. Upstream failure during a flight: every waiter gets it, once; the next request retries.
ECHO_LOG="$tmp/echo.log" /usr/bin/python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$tmp/echo.err" & echo_pid=$!
for i in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1; done
gate_start "$tmp/g2" "$GATE2" "$ADMIN2" "http://127.0.0.1:$ECHO" --burst 100000 --rate 10000 || not_ok "gate 2 starts"
F="http://127.0.0.1:$GATE2/fail?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=x&STYLES=&CRS=EPSG:4326&BBOX=0,0,1,1&WIDTH=10&HEIGHT=10&FORMAT=image/png"
args=()
for i in $(seq 1 10); do args+=(-o "$tmp/f$i" -w '%{http_code}\n' "$F"); done
codes=$(par "${args[@]}" | sort | uniq -c | awk '{print $1"x"$2}')
check_eq "upstream failure mid-flight: all 10 clients get a 502" "10x502" "$codes"
check "... each as a WMS exception report" bash -c "grep -l 'not reachable' '$tmp'/f* | wc -l | grep -qx 10"
check_eq "... from a single upstream call" 1 "$(grep -c '^GET /fail' "$tmp/echo.log")"
curl -s -o /dev/null "$F"
check_eq "the failure is not reused: the next request goes upstream again" 2 "$(grep -c '^GET /fail' "$tmp/echo.log")"

# 5. Disconnecting clients, the leader among them, do not cancel the render for the others.
S="http://127.0.0.1:$GATE2/slowish?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=x&STYLES=&CRS=EPSG:4326&BBOX=0,0,2,2&WIDTH=10&HEIGHT=10&FORMAT=image/png"
curl -s -o /dev/null --max-time 0.3 "$S" & lead=$!   # leads the flight, gives up after 0.3 s
sleep 0.1
args=()
for i in 1 2 3 4 5 6; do args+=(-o "$tmp/w$i" -w '%{http_code}\n' "$S"); done
par --max-time 0.3 -o /dev/null "$S" -o /dev/null "$S" & quit=$!   # two waiters that give up too
codes=$(par "${args[@]}" | sort | uniq -c | awk '{print $1"x"$2}')
wait "$lead" "$quit"
check_eq "leader and two waiters hang up mid-flight: the other 6 still get a 200" "6x200" "$codes"
check_eq "... from the one upstream call" 1 "$(grep -c '^GET /slowish?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=x&STYLES=&CRS=EPSG:4326&BBOX=0,0,2,2' "$tmp/echo.log")"
tap_exit
