#!/usr/bin/env bash
# Differential: each request shape an abusive client might try, sent through
# the gate to a real MapServer 8 (caps 1 MP, 100 features) and to the echo
# upstream. Either the gate refuses it with the protocol's exception, or
# MapServer's actual answer is within the caps (PNG size, feature count),
# and the echo upstream shows the canonical text the gate forwarded.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/mapserver.sh"
. "$root/test/gate/lib/gate.sh"
MS=18520 GATE=18521 ADMIN=18522 ECHO=18523 GATE2=18524 ADMIN2=18525 MSR=18526 GATE3=18527 ADMIN3=18528 GATE4=18529 ADMIN4=18519
tmp=$(mktemp -d)
echo_pid=
cleanup() { gate_stop "$tmp/g"; gate_stop "$tmp/g2"; gate_stop "$tmp/g3"; gate_stop "$tmp/g4"; ms_stop "$tmp/ms"; ms_stop "$tmp/msr"; [ -n "$echo_pid" ] && kill "$echo_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null
ms_start "$tmp/ms" "$MS" 500 "http://127.0.0.1:$GATE/" || { not_ok "MapServer starts"; tap_exit; }
CAPS=(--max-pixels 1000000 --max-features 100 --burst 100000 --rate 10000)
gate_start "$tmp/g" "$GATE" "$ADMIN" "http://127.0.0.1:$MS" "${CAPS[@]}" || { not_ok "gate starts"; tap_exit; }
/usr/bin/python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$tmp/echo.err" & echo_pid=$!
gate_start "$tmp/g2" "$GATE2" "$ADMIN2" "http://127.0.0.1:$ECHO" "${CAPS[@]}" || { not_ok "gate 2 starts"; tap_exit; }
for i in $(seq 1 30); do curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1; done
ok "MapServer, echo upstream and two gates started"

# What an answer is: "png WxH", "features N", or "refused: <exception text>".
answer() {
  curl -s --max-time 20 -o "$tmp/ans" "$@"
  /usr/bin/python3 - "$tmp/ans" <<'PY'
import re, struct, sys
d = open(sys.argv[1], 'rb').read()
if d[:8] == b'\x89PNG\r\n\x1a\n':
    print('png %dx%d' % struct.unpack('>II', d[16:24]))
elif b'FeatureCollection' in d:
    print('features %d' % len(re.findall(rb'<wfs:member>|<gml:featureMember>', d)))
else:
    m = re.search(rb'<(?:ows:ExceptionText|ServiceException)(?:\s[^>]*)?>([^<]*)', d) or re.search(rb'"detail":"([^"]*)', d)
    print('refused: ' + (m.group(1) if m else d[:120]).decode('latin1').replace('\n', ' '))
PY
}
within() {  # description answer: refused, or a PNG of at most 1 MP, or at most 100 features
  local d=$1 a=$2
  case $a in
    refused:*) ok "$d -> ${a:0:90}" ;;
    png\ *) local wh=${a#png } w h; w=${wh%x*}; h=${wh#*x}
            if [ $((w * h)) -le 1000000 ]; then ok "$d -> $a (within 1 MP)"; else not_ok "$d -> $a OVER the cap"; fi ;;
    features\ *) local n=${a#features }
            if [ "$n" -le 100 ]; then ok "$d -> $a (within 100)"; else not_ok "$d -> $a OVER the cap"; fi ;;
    *) not_ok "$d -> unexpected answer '$a'" ;;
  esac
}
refused() {  # description answer
  case $2 in refused:*) ok "$1 -> ${2:0:90}" ;; *) not_ok "$1: expected a refusal, got '$2'" ;; esac
}
G="http://127.0.0.1:$GATE/" D="http://127.0.0.1:$MS/" E="http://127.0.0.1:$GATE2"
M="SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=pts&STYLES=&CRS=EPSG:4326&BBOX=35,-10,45,30&FORMAT=image/png"
F="SERVICE=WFS&VERSION=2.0.0&REQUEST=GetFeature&TYPENAMES=pts"

# --- encoded delimiters, blanks, spellings --------------------------------
q="$M&WIDTH=10&HEIGHT=10&WIDTH%3D2000=&HEIGHT%3D2000="
check_eq "(control) MapServer reads WIDTH%3D2000= as WIDTH=2000" "png 2000x2000" "$(answer "$D?$q")"
refused "encoded '=' in a parameter name (GetMap)" "$(answer "$G?$q")"
refused "encoded '=' in a parameter name (COUNT%3D500=)" "$(answer "$G?$F&COUNT=10&COUNT%3D500=")"
refused "encoded '&' in a parameter name" "$(answer "$G?$M&WIDTH=64&HEIGHT=64&X%26WIDTH=2000")"
refused "trailing blank in a name (LAYERS%20=)" "$(answer "$G?$M&WIDTH=64&HEIGHT=64&LAYERS%20=pts")"
refused "leading blank in a name (+WIDTH=2000)" "$(answer "$G?$M&WIDTH=64&HEIGHT=64&+WIDTH=2000")"
refused "two spellings of WIDTH with different values" "$(answer "$G?$M&WIDTH=64&HEIGHT=64&width=2000")"
within "two spellings of WIDTH with one value" "$(answer "$G?$M&WIDTH=64&HEIGHT=64&width=64")"
refused "NUL in a value (WIDTH=64%00)" "$(answer "$G?$M&WIDTH=64%00&HEIGHT=64")"
refused "malformed escape" "$(answer "$G?$M&WIDTH=64&HEIGHT=6%4")"

# --- other places MapServer reads parameters from --------------------------
check_eq "(control) MapServer reads a Cookie as parameters" "png 2000x2000" \
  "$(answer -H 'Cookie: WIDTH=2000; HEIGHT=2000' "$D?$M&WIDTH=64&HEIGHT=64")"
refused "Cookie carrying WIDTH/HEIGHT" "$(answer -H 'Cookie: WIDTH=2000; HEIGHT=2000' "$G?$M&WIDTH=64&HEIGHT=64")"
within "an unrelated cookie passes" "$(answer -H 'Cookie: session=abc' "$G?$M&WIDTH=64&HEIGHT=64")"
check_eq "(control) MapServer prefers the query string over a form body" "png 2000x2000" \
  "$(answer -d "$M&WIDTH=64&HEIGHT=64" "$D?WIDTH=2000&HEIGHT=2000")"
refused "form body and query string both with OGC parameters" "$(answer -d "$M&WIDTH=64&HEIGHT=64" "$G?WIDTH=2000&HEIGHT=2000")"
check_eq "form body alone: checked and answered" "png 64x64" "$(answer -d "$M&WIDTH=64&HEIGHT=64" "$G")"
refused "form body over the cap" "$(answer -d "$M&WIDTH=2000&HEIGHT=2000" "$G")"
refused "XML body with OGC parameters in the query string" \
  "$(answer -H 'Content-Type: text/xml' --data-binary '<GetFeature service="WFS" version="2.0.0"><Query typeNames="pts"/></GetFeature>' "$G?COUNT=500")"
refused "JSON body with WMS parameters in the query string" \
  "$(answer -H 'Content-Type: application/json' --data-binary '{"limit":1}' "$G?$M&WIDTH=2000&HEIGHT=2000")"
refused "a body that is neither form, XML nor JSON" "$(answer -H 'Content-Type: text/plain' --data-binary 'WIDTH=2000' "$G?$M&WIDTH=64&HEIGHT=64")"

# --- operations and modes ----------------------------------------------------
check_eq "(control) MapServer's CGI mode=map draws 2000x2000" "png 2000x2000" "$(answer "$D?mode=map&mapsize=2000+2000&layers=pts")"
refused "mode=map&mapsize=2000+2000" "$(answer "$G?mode=map&mapsize=2000+2000&layers=pts")"
refused "map.size override beside a GetMap" "$(answer "$G?$M&WIDTH=64&HEIGHT=64&map.size=2000+2000")"
refused "REQUEST=map (WMS 1.0 GetMap) over the cap" \
  "$(answer "$G?SERVICE=WMS&WMTVER=1.0.0&REQUEST=map&LAYERS=pts&STYLES=&SRS=EPSG:4326&BBOX=-10,35,30,45&FORMAT=image/png&WIDTH=2000&HEIGHT=2000")"
within "REQUEST=map within the cap" \
  "$(answer "$G?SERVICE=WMS&VERSION=1.1.1&REQUEST=map&LAYERS=pts&STYLES=&SRS=EPSG:4326&BBOX=-10,35,30,45&FORMAT=image/png&WIDTH=64&HEIGHT=64")"
refused "GetFeatureInfo FEATURE_COUNT=500 over the feature cap" \
  "$(answer "$G?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetFeatureInfo&LAYERS=pts&QUERY_LAYERS=pts&STYLES=&CRS=EPSG:4326&BBOX=35,-10,45,30&WIDTH=64&HEIGHT=64&I=5&J=5&INFO_FORMAT=text/html&FEATURE_COUNT=500")"
refused "unknown WMS operation" "$(answer "$G?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetPrint&WIDTH=2000")"
refused "unknown service" "$(answer "$G?SERVICE=SOS&REQUEST=GetObservation")"
refused "GetLegendGraphic 2000x2000" "$(answer "$G?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetLegendGraphic&LAYER=pts&FORMAT=image/png&SLD_VERSION=1.1.0&WIDTH=2000&HEIGHT=2000")"
check "GetCapabilities passes" grep -q "<WMS_Capabilities" <<<"$(curl -s "$G?SERVICE=WMS&REQUEST=GetCapabilities")"

# --- WFS counts ----------------------------------------------------------------
check_eq "(control) MapServer: RESULTTYPE=hits%20 is not hits, all 500 features" "features 500" "$(answer "$D?$F&RESULTTYPE=hits%20")"
within "RESULTTYPE=hits%20 gets a count injected" "$(answer "$G?$F&RESULTTYPE=hits%20")"
within "RESULTTYPE=HITS is hits" "$(answer "$G?$F&RESULTTYPE=HITS")"
refused "COUNT and MAXFEATURES together" "$(answer "$G?$F&COUNT=10&MAXFEATURES=500")"
X='xmlns:wfs="http://www.opengis.net/wfs/2.0"'
xml() { answer -H 'Content-Type: text/xml' --data-binary "$1" "$G"; }
within "XML with a byte-order mark" "$(xml "$(printf '\xef\xbb\xbf')<wfs:GetFeature service=\"WFS\" version=\"2.0.0\" $X><wfs:Query typeNames=\"pts\"/></wfs:GetFeature>")"
within "XML with a lower-case root" "$(xml "<wfs:getfeature service=\"WFS\" version=\"2.0.0\" $X><wfs:Query typeNames=\"pts\"/></wfs:getfeature>")"
check_eq "(control) MapServer reads x:count=300" "features 300" \
  "$(answer -H 'Content-Type: text/xml' --data-binary "<wfs:GetFeature service=\"WFS\" version=\"2.0.0\" $X xmlns:x=\"urn:x\" x:count=\"300\"><wfs:Query typeNames=\"pts\"/></wfs:GetFeature>" "$D")"
refused "XML count in a foreign namespace (x:count=300)" "$(xml "<wfs:GetFeature service=\"WFS\" version=\"2.0.0\" $X xmlns:x=\"urn:x\" x:count=\"300\"><wfs:Query typeNames=\"pts\"/></wfs:GetFeature>")"
refused "XML COUNT in upper case (300)" "$(xml "<wfs:GetFeature service=\"WFS\" version=\"2.0.0\" $X COUNT=\"300\"><wfs:Query typeNames=\"pts\"/></wfs:GetFeature>")"
refused "XML count and x:count together" "$(xml "<wfs:GetFeature service=\"WFS\" version=\"2.0.0\" $X xmlns:x=\"urn:x\" x:count=\"300\" count=\"5\"><wfs:Query typeNames=\"pts\"/></wfs:GetFeature>")"
refused "XML count as a child element" "$(xml "<wfs:GetFeature service=\"WFS\" version=\"2.0.0\" $X><count>300</count><wfs:Query typeNames=\"pts\"/></wfs:GetFeature>")"
within "XML resultType=\"hits \" gets a count injected" "$(xml "<wfs:GetFeature service=\"WFS\" version=\"2.0.0\" $X resultType=\"hits \"><wfs:Query typeNames=\"pts\"/></wfs:GetFeature>")"
refused "XML with a DOCTYPE" "$(xml "<!DOCTYPE x [<!ENTITY c \"300\">]><wfs:GetFeature service=\"WFS\" version=\"2.0.0\" $X count=\"&c;\"><wfs:Query typeNames=\"pts\"/></wfs:GetFeature>")"

# --- what the upstream received (echo) ---------------------------------------------
seen() { curl -s --max-time 10 "$@" | head -1; }
check_eq "names upper-cased, values re-encoded by the gate" \
  "GET /?SERVICE=wms&VERSION=1.3.0&REQUEST=GetMap&LAYERS=pts&STYLES=&CRS=EPSG:4326&BBOX=35,-10,45,30&FORMAT=image/png&WIDTH=64&HEIGHT=32&vendor=a%20b" \
  "$(seen "$E/?service=wms&version=1.3.0&request=GetMap&layers=pts&styles=&crs=EPSG:4326&bbox=35%2C-10%2C45%2C30&format=image%2Fpng&Width=64&height=32&vendor=a+b")"
check_eq "one value per name" "GET /?SERVICE=WMS&REQUEST=GetCapabilities&WIDTH=1" \
  "$(seen "$E/?SERVICE=WMS&REQUEST=GetCapabilities&WIDTH=1&width=1")"
check_eq "repeated SUBSET is kept, in order" \
  "GET /?SERVICE=WCS&VERSION=2.0.1&REQUEST=DescribeCoverage&COVERAGEID=c&SUBSET=x%280,10%29&SUBSET=y%280,10%29" \
  "$(seen "$E/?SERVICE=WCS&VERSION=2.0.1&REQUEST=DescribeCoverage&COVERAGEID=c&SUBSET=x(0,10)&subset=y(0,10)")"
check_eq "injected count in the canonical spelling" "GET /?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetFeature&TYPENAMES=pts&COUNT=100" \
  "$(seen "$E/?service=WFS&version=2.0.0&request=GetFeature&typenames=pts")"
check_eq "dot segments resolved before forwarding" "GET /private/x?a=1" "$(seen --path-as-is "$E/tiles/../private/x?a=1")"
check_eq "encoded dot segments too" "GET /private/x" "$(seen --path-as-is "$E/tiles/%2e%2E/private/x")"
check_eq "empty segments merged" "GET /tiles/3/1/2.png" "$(seen --path-as-is "$E//tiles///3/1/2.png")"
check "encoded '/' in a segment refused" grep -q "encoded '/'" <<<"$(curl -s --path-as-is "$E/tiles/a%2Fb/x")"
check "'..' above the root refused" grep -q "above the root" <<<"$(curl -s --path-as-is "$E/../etc/passwd")"
check_eq "OGC API names kept in their spelling" "GET /collections/pts/items?limit=5&f=json" "$(seen "$E/collections/pts/items?limit=5&f=json")"
check "OGC API name in another case refused" grep -q "spelt limit" <<<"$(curl -s "$E/collections/pts/items?LIMIT=5000")"
check_eq "form body re-serialised" "SERVICE=WMS&REQUEST=GetCapabilities&X=a%20b" \
  "$(curl -s -d 'service=WMS&request=GetCapabilities&X=a+b' "$E/" | tail -1)"
check_eq "a GET's body is not forwarded" "" "$(curl -s -X GET -d 'WIDTH=2000' "$E/?SERVICE=WMS&REQUEST=GetCapabilities" | sed -n '/^$/,$p' | tr -d '\n')"

# --- identities that cost something to mint -------------------------------------
gate_start "$tmp/g4" "$GATE4" "$ADMIN4" "http://127.0.0.1:$ECHO" --burst 5 --rate 0.0001 || not_ok "gate 4 starts"
admitted=0
for i in $(seq 1 20); do
  h=(-H "X-Api-Key: made-up-$i-$RANDOM"); [ $((i % 2)) = 0 ] && h=(-H "Authorization: Bearer tok-$i-$RANDOM")
  [ "$(curl -s -o /dev/null -w '%{http_code}' "${h[@]}" "http://127.0.0.1:$GATE4/?SERVICE=WMS&REQUEST=GetCapabilities")" = 200 ] && admitted=$((admitted + 1))
done
check_eq "20 rotating made-up credentials from one address: admitted work = that address's budget (5 units)" 5 "$admitted"
check "/buckets holds one bucket for them, keyed by the address" \
  /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["keys"] == 1 and d["buckets"][0]["key"].startswith("ip:")' \
  < <(curl -s "http://127.0.0.1:$ADMIN4/buckets")

# --- WCS: every way to ask for a size (a 1000x500 GeoTIFF behind MapServer) ------------
ms_start_raster "$tmp/msr" "$MSR" "http://127.0.0.1:$GATE3/" || not_ok "raster MapServer starts"
gate_start "$tmp/g3" "$GATE3" "$ADMIN3" "http://127.0.0.1:$MSR" "${CAPS[@]}" || not_ok "gate 3 starts"
cov() {  # curl arguments -> "tiff WxH" or "refused: ..."
  curl -s --max-time 20 -o "$tmp/cov" "$@"
  local s; s=$(gdalinfo "$tmp/cov" 2>/dev/null | sed -nE 's/^Size is ([0-9]+), ([0-9]+)/tiff \1x\2/p')
  [ -n "$s" ] && { echo "$s"; return; }
  echo "refused: $(grep -o 'ExceptionText>[^<]*\|ServiceException [^>]*>[^<]*' "$tmp/cov" | head -1 | sed 's/.*>//')"
}
wcs_within() {  # description answer
  case $2 in
    refused:*) ok "$1 -> ${2:0:90}" ;;
    tiff\ *) local wh=${2#tiff } w h; w=${wh%x*}; h=${wh#*x}
             if [ $((w * h)) -le 1000000 ]; then ok "$1 -> $2 (within 1 MP)"; else not_ok "$1 -> $2 OVER the cap"; fi ;;
    *) not_ok "$1 -> unexpected '$2'" ;;
  esac
}
C1="SERVICE=WCS&VERSION=1.0.0&REQUEST=GetCoverage&COVERAGE=dem&CRS=EPSG:4326&BBOX=-10,35,30,45&FORMAT=GTiff"
C2="SERVICE=WCS&VERSION=2.0.1&REQUEST=GetCoverage&COVERAGEID=dem&FORMAT=image/tiff"
W3="http://127.0.0.1:$GATE3/" D3="http://127.0.0.1:$MSR/"
check_eq "(control) MapServer: RESX/RESY=0.01 over the box is 4000x1000" "tiff 4000x1000" "$(cov "$D3?$C1&RESX=0.01&RESY=0.01")"
refused "WCS 1.0 RESX/RESY giving 4 MP" "$(cov "$W3?$C1&RESX=0.01&RESY=0.01")"
check_eq "WCS 1.0 RESX/RESY within the cap" "tiff 400x100" "$(cov "$W3?$C1&RESX=0.1&RESY=0.1")"
check_eq "WCS 1.0 WIDTH/HEIGHT within the cap" "tiff 100x50" "$(cov "$W3?$C1&WIDTH=100&HEIGHT=50")"
refused "WCS 1.0 WIDTH/HEIGHT over the cap" "$(cov "$W3?$C1&WIDTH=2000&HEIGHT=1000")"
refused "WCS 1.0 both WIDTH/HEIGHT and RESX/RESY" "$(cov "$W3?$C1&WIDTH=100&HEIGHT=50&RESX=0.01&RESY=0.01")"
refused "WCS 1.0 without any size (the standard requires one)" "$(cov "$W3?$C1")"
check_eq "(control) MapServer: SCALESIZE=x(1500),y(1000)" "tiff 1500x1000" "$(cov "$D3?$C2&SCALESIZE=x(1500),y(1000)")"
refused "WCS 2.0 SCALESIZE over the cap" "$(cov "$W3?$C2&SCALESIZE=x(1500),y(1000)")"
check_eq "WCS 2.0 SCALESIZE within the cap" "tiff 500x300" "$(cov "$W3?$C2&SCALESIZE=x(500),y(300)")"
refused "WCS 2.0 SCALEEXTENT over the cap" "$(cov "$W3?$C2&SCALEEXTENT=x(0:1500),y(0:1000)")"
check_eq "(control) MapServer: SCALEFACTOR=3 is 3000x1500" "tiff 3000x1500" "$(cov "$D3?$C2&SCALEFACTOR=3")"
refused "WCS 2.0 SCALEFACTOR above 1" "$(cov "$W3?$C2&SCALEFACTOR=3")"
refused "WCS 2.0 SCALEAXES above 1" "$(cov "$W3?$C2&SCALEAXES=x(2),y(2)")"
check_eq "WCS 2.0 SCALEFACTOR=0.2" "tiff 200x100" "$(cov "$W3?$C2&SCALEFACTOR=0.2")"
check_eq "(control) MapServer reads SIZEX=x(1500) by prefix" "tiff 1500x500" "$(cov "$D3?$C2&SIZEX=x(1500)")"
refused "WCS 2.0 SIZEX=x(1500) (a name read by prefix)" "$(cov "$W3?$C2&SIZEX=x(1500)")"
check_eq "WCS 2.0 repeated SUBSET accepted" "tiff 250x200" "$(cov "$W3?$C2&SUBSET=x(0,10)&SUBSET=y(36,40)")"
refused "WCS 2.0 SCALESIZE and SCALEFACTOR together" "$(cov "$W3?$C2&SCALESIZE=x(10),y(10)&SCALEFACTOR=0.5")"
# WCS as XML POST: MapServer answers a WCS 1.1 GetCoverage body with a coverage the
# gate cannot size (GridOffsets over a BoundingBox); the gate refuses, never forwards it unread.
cat >"$tmp/wcs11.xml" <<'X'
<?xml version="1.0" encoding="UTF-8"?>
<GetCoverage xmlns="http://www.opengis.net/wcs/1.1.1" xmlns:ows="http://www.opengis.net/ows/1.1" service="WCS" version="1.1.1">
  <ows:Identifier>dem</ows:Identifier>
  <DomainSubset><ows:BoundingBox crs="urn:ogc:def:crs:EPSG::4326"><ows:LowerCorner>35 -10</ows:LowerCorner><ows:UpperCorner>45 30</ows:UpperCorner></ows:BoundingBox></DomainSubset>
  <Output format="image/tiff"><GridCRS><GridBaseCRS>urn:ogc:def:crs:EPSG::4326</GridBaseCRS><GridType>urn:ogc:def:method:WCS:1.1:2dSimpleGrid</GridType><GridOffsets>0.01 0.01</GridOffsets><GridCS>urn:ogc:def:cs:OGC:0.0:Grid2dSquareCS</GridCS></GridCRS></Output>
</GetCoverage>
X
sed 's#wcs/1.1.1#wcs/2.0#; s#version="1.1.1"#version="2.0.1"#' "$tmp/wcs11.xml" >"$tmp/wcs20.xml"
check "(control) MapServer answers a WCS 1.1 XML GetCoverage with a coverage" grep -q "<Coverages" \
  <<<"$(curl -s --max-time 20 -H 'Content-Type: text/xml' --data-binary @"$tmp/wcs11.xml" "$D3" | head -c 600 | tr -d '\0')"
refused "WCS 1.1 XML GetCoverage" "$(cov -H 'Content-Type: text/xml' --data-binary @"$tmp/wcs11.xml" "$W3")"
refused "WCS 2.0 XML GetCoverage" "$(cov -H 'Content-Type: text/xml' --data-binary @"$tmp/wcs20.xml" "$W3")"
tap_exit
