#!/usr/bin/env bash
# A real MapServer behind the gate: answers under the caps are byte-identical
# to asking MapServer directly; rewritten requests stay within the cap;
# request ids are honoured, minted, echoed and forwarded.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/mapserver.sh"
. "$root/test/gate/lib/gate.sh"
MS=18100 GATE=18101 ADMIN=18102 ECHO=18103 GATE2=18104 ADMIN2=18105
tmp=$(mktemp -d)
echo_pid=
cleanup() { gate_stop "$tmp/g"; gate_stop "$tmp/g2"; ms_stop "$tmp/ms"; [ -n "$echo_pid" ] && kill "$echo_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null
ms_start "$tmp/ms" "$MS" 500 "http://127.0.0.1:$GATE/" || { not_ok "MapServer starts"; tap_exit; }
gate_start "$tmp/g" "$GATE" "$ADMIN" "http://127.0.0.1:$MS" --burst 100000 --rate 10000 --max-features 100 \
  || { not_ok "gate starts"; tap_exit; }
ok "MapServer and gate started"

same() {  # description query: body via gate == body direct, and status 200
  local d=$1 q=$2
  curl -s -o "$tmp/direct" "http://127.0.0.1:$MS/?$q"
  local st; st=$(curl -s -o "$tmp/gated" -w '%{http_code}' "http://127.0.0.1:$GATE/?$q")
  if [ "$st" = 200 ] && [ -s "$tmp/direct" ] && cmp -s "$tmp/direct" "$tmp/gated"; then ok "$d"
  else not_ok "$d (status $st, $(wc -c <"$tmp/gated") vs $(wc -c <"$tmp/direct") bytes)"; fi
}
same "WMS 1.3.0 GetMap PNG byte-identical through the gate" \
  "SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=pts&STYLES=&CRS=EPSG:4326&BBOX=35,-10,45,30&WIDTH=400&HEIGHT=200&FORMAT=image/png"
same "WMS 1.1.1 GetMap PNG byte-identical through the gate" \
  "SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=pts&STYLES=&SRS=EPSG:4326&BBOX=-10,35,30,45&WIDTH=256&HEIGHT=256&FORMAT=image/png"
same "WFS 1.0.0 GetFeature (MAXFEATURES under the cap) byte-identical" \
  "SERVICE=WFS&VERSION=1.0.0&REQUEST=GetFeature&TYPENAME=pts&MAXFEATURES=20&OUTPUTFORMAT=geojson"
# Capabilities state the gate's caps (doc/capabilities.md): MapServer's MAXSIZE 8192 becomes the gate's
# 4096 (√ of the default 4096² pixels); every other byte as MapServer wrote it (it advertises the gate).
q="SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities"
curl -s -o "$tmp/direct" "http://127.0.0.1:$MS/?$q"
st=$(curl -s -o "$tmp/gated" -w '%{http_code}' "http://127.0.0.1:$GATE/?$q")
check_eq "WMS GetCapabilities through the gate: 200" 200 "$st"
check "WMS GetCapabilities: identical but for the gate's MaxWidth/MaxHeight" \
  cmp -s "$tmp/direct" <(sed -e 's|<MaxWidth>4096</MaxWidth>|<MaxWidth>8192</MaxWidth>|' -e 's|<MaxHeight>4096</MaxHeight>|<MaxHeight>8192</MaxHeight>|' "$tmp/gated")
check "... which were changed" grep -q "<MaxWidth>4096</MaxWidth>" "$tmp/gated"

# Content-Type and status of the upstream are passed along unchanged.
ct=$(curl -s -o /dev/null -w '%{content_type}' "http://127.0.0.1:$GATE/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=pts&STYLES=&CRS=EPSG:4326&BBOX=35,-10,45,30&WIDTH=64&HEIGHT=64&FORMAT=image/png")
check_eq "upstream Content-Type passed through" "image/png" "$ct"

# Unbounded GetFeature: the cap is injected, MapServer returns exactly 100.
n=$(curl -s "http://127.0.0.1:$GATE/?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetFeature&TYPENAMES=pts" | grep -o '<wfs:member>' | wc -l)
check_eq "unbounded WFS 2.0 GetFeature gets COUNT=100 injected" 100 "$n"
n=$(curl -s "http://127.0.0.1:$GATE/?SERVICE=WFS&VERSION=1.1.0&REQUEST=GetFeature&TYPENAME=pts" | grep -o '<gml:featureMember>' | wc -l)
check_eq "unbounded WFS 1.1 GetFeature gets MAXFEATURES=100 injected" 100 "$n"
n=$(curl -s "http://127.0.0.1:$MS/?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetFeature&TYPENAMES=pts" | grep -o '<wfs:member>' | wc -l)
check_eq "(control) MapServer alone returns all 500" 500 "$n"

# POST XML GetFeature without a count: capped too.
cat >"$tmp/gf.xml" <<'XML'
<?xml version="1.0"?>
<wfs:GetFeature service="WFS" version="2.0.0" xmlns:wfs="http://www.opengis.net/wfs/2.0"><wfs:Query typeNames="pts"/></wfs:GetFeature>
XML
n=$(curl -s -H 'Content-Type: text/xml' --data-binary @"$tmp/gf.xml" "http://127.0.0.1:$GATE/" | grep -o '<wfs:member>' | wc -l)
check_eq "POST XML GetFeature without count is capped at 100" 100 "$n"
sed -i 's/version="2.0.0"/version="2.0.0" count="400"/' "$tmp/gf.xml"
body=$(curl -s -H 'Content-Type: text/xml' --data-binary @"$tmp/gf.xml" "http://127.0.0.1:$GATE/")
check "POST XML GetFeature count=400 refused with an OWS exception" grep -q 'count=400 features; this service returns at most 100' <<<"$body"

# Keep-alive: a refusal and a pass on one connection, each answered right.
M="http://127.0.0.1:$GATE/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=pts&STYLES=&CRS=EPSG:4326&BBOX=35,-10,45,30&FORMAT=image/png"
out=$(curl -s -w '|%{http_code}|%{content_type}|%{num_connects}\n' -o /dev/null "$M&WIDTH=99999&HEIGHT=99999" -o /dev/null "$M&WIDTH=64&HEIGHT=64")
check_eq "keep-alive: cap then pass on one connection" "|200|text/xml|1 |200|image/png|0" "$(echo $out)"

# Request ids.
hdr=$(curl -s -D - -o /dev/null -H 'X-Request-Id: test-abc.123' "http://127.0.0.1:$GATE/?SERVICE=WMS&REQUEST=GetCapabilities")
check "valid incoming X-Request-Id echoed" grep -qi '^X-Request-Id: test-abc.123' <<<"$hdr"
hdr=$(curl -s -D - -o /dev/null -H 'X-Request-Id: bad id <script>' "http://127.0.0.1:$GATE/?SERVICE=WMS&REQUEST=GetCapabilities")
rid=$(sed -nE 's/^[Xx]-[Rr]equest-[Ii]d: ([0-9a-f]+)\r?$/\1/p' <<<"$hdr")
check "invalid X-Request-Id replaced by a minted one" [ ${#rid} = 32 ]
check "request id logged" gate_log_wait "$tmp/g/gate.log" '"request_id":"test-abc.123"'
check "log line has identity hash, class, cost, verdict, upstream status, latency" \
  grep -qE '"class":"map".*"cost":[0-9.]+.*"identity":"[0-9a-f]{16}".*"latency_ms":.*"upstream_status":200,"verdict":"pass"' "$tmp/g/gate.log"

# Headers the upstream sees (echo server).
/usr/bin/python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$tmp/echo.err" & echo_pid=$!
gate_start "$tmp/g2" "$GATE2" "$ADMIN2" "http://127.0.0.1:$ECHO" || not_ok "gate 2 starts"
for i in $(seq 1 30); do curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1; done
seen=$(curl -s -H 'X-Request-Id: fwd-42' -H 'Authorization: Bearer s3cret' "http://127.0.0.1:$GATE2/some/path?a=1&B=%20x")
check "path and query forwarded unchanged" grep -q '^GET /some/path?a=1&B=%20x' <<<"$seen"
check "request id forwarded upstream" grep -qi '^X-Request-Id: fwd-42' <<<"$seen"
check "X-Forwarded-For carries the peer" grep -qi '^X-Forwarded-For: 127.0.0.1' <<<"$seen"
# Only once the request's line is written does its absence of the credential say anything.
check "the credential-carrying request is logged" gate_log_wait "$tmp/g2/gate.log" '"request_id":"fwd-42"'
check "raw credential never logged" bash -c "! grep -q s3cret '$tmp/g2/gate.log'"
tap_exit
