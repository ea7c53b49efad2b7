#!/usr/bin/env bash
# The capabilities rewrite as real clients read it. MapServer (3 000 points)
# advertises its own address, as an unconfigured map server behind the gate
# does; ogc-gate (the "front" below) rewrites on its response path. Then:
#   OWSLib (WMS 1.1.1/1.3.0, WFS 2.0) sees the caps and follows the front's address,
#   GDAL's WFS driver pages by itself in pages of the advertised CountDefault,
#   bodies that are not capabilities (HTML, truncated XML) pass unchanged.
# `capabilities.t.sh regen` rewrites test/gate/fixtures/capabilities from this MapServer instead.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/mapserver.sh"
. "$root/test/gate/lib/gate.sh"
MS=18900 FRONT=18901 FRONT70=18902
tmp=$(mktemp -d)
pids=()
cleanup() { gate_stop "$tmp/g$FRONT"; gate_stop "$tmp/g$FRONT70"; ms_stop "$tmp/ms"; rm -rf "$tmp"; }
trap cleanup EXIT
PY=/usr/bin/python3  # OWSLib is only visible to the system python
export GDAL_HTTP_TIMEOUT=30 GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR

make -s -C "$root" build/gate/capabilities_cli bin/ogc-gate >/dev/null || { not_ok "capabilities_cli and ogc-gate build"; tap_exit; }
CLI=$root/build/gate/capabilities_cli

if [ "${1:-}" = regen ]; then
  ms_start_raster "$tmp/ms" "$MS" || exit 1
  fx=$root/test/gate/fixtures/capabilities b="http://127.0.0.1:$MS/?"
  for s in WMS:1.1.1:wms111 WMS:1.3.0:wms130 WFS:1.0.0:wfs100 WFS:1.1.0:wfs110 WFS:2.0.0:wfs200 WCS:1.0.0:wcs100 WCS:2.0.1:wcs201; do
    IFS=: read -r svc ver name <<<"$s"
    curl -fsS "${b}SERVICE=$svc&VERSION=$ver&REQUEST=GetCapabilities" >"$fx/mapserver-$name.xml"
  done
  curl -sS "${b}SERVICE=WMTS&VERSION=1.0.0&REQUEST=GetCapabilities" >"$fx/mapserver-wmts-error.html"
  o="http://127.0.0.1:$MS/demo/ogcapi"
  for s in "?f=json:landing" "/conformance?f=json:conformance" "/collections?f=json:collections" "/api?f=json:api" \
           "/collections/pts/items?f=json&limit=3:items"; do
    curl -fsS "$o${s%:*}" >"$fx/mapserver-oapi-${s##*:}.json"
  done
  exit 0
fi

ms_start "$tmp/ms" "$MS" 3000 || { not_ok "MapServer starts"; tap_exit; }
front() {  # port count_default: the gate, public address from Host
  gate_start "$tmp/g$1" "$1" $(($1 + 10)) "http://127.0.0.1:$MS" --max-pixels 4194304 --max-features "$2" \
    --rate 1000000 --burst 1000000
}
front "$FRONT" 100 || { not_ok "front starts"; tap_exit; }
front "$FRONT70" 70 || { not_ok "front (70) starts"; tap_exit; }
cd "$tmp" || exit 1

# --- OWSLib, WMS ---------------------------------------------------------------
wms_py() {  # port version -> "maxwidth maxheight getmap_url"
  "$PY" - "$1" "$2" <<'PYEOF'
import sys
from owslib.wms import WebMapService
wms = WebMapService("http://127.0.0.1:%s/?" % sys.argv[1], version=sys.argv[2], timeout=30)
ns = "{http://www.opengis.net/wms}" if sys.argv[2] == "1.3.0" else ""
svc = wms.identification._root  # OWSLib 0.27 keeps Service's element; it has no MaxWidth field
mw, mh = svc.find(ns + "MaxWidth"), svc.find(ns + "MaxHeight")
url = [m["url"] for m in wms.getOperationByName("GetMap").methods if m["type"] == "Get"][0]
print(mw.text if mw is not None else "-", mh.text if mh is not None else "-", url)
PYEOF
}
read -r mw mh url < <(wms_py "$MS" 1.3.0)
check_eq "OWSLib WMS 1.3.0 from MapServer directly: its own MaxWidth" 8192 "$mw"
check_eq "OWSLib WMS 1.3.0 from MapServer directly: GetMap at MapServer's address (around the gate)" "http://127.0.0.1:$MS/?" "$url"
read -r mw mh url < <(wms_py "$FRONT" 1.3.0)
check_eq "OWSLib WMS 1.3.0 rewritten: MaxWidth is the gate's" 2048 "$mw"
check_eq "OWSLib WMS 1.3.0 rewritten: MaxHeight is the gate's" 2048 "$mh"
check_eq "OWSLib WMS 1.3.0 rewritten: GetMap at the front's address" "http://127.0.0.1:$FRONT/?" "$url"
read -r mw mh url < <(wms_py "$FRONT" 1.1.1)
check_eq "OWSLib WMS 1.1.1 rewritten: GetMap at the front's address" "http://127.0.0.1:$FRONT/?" "$url"
"$PY" - "$FRONT" >owslib-getmap.out 2>&1 <<'PYEOF'
import sys
from owslib.wms import WebMapService
wms = WebMapService("http://127.0.0.1:%s/?" % sys.argv[1], version="1.3.0", timeout=30)
img = wms.getmap(layers=["pts"], srs="EPSG:4326", bbox=(35, -10, 45, 30), size=(256, 128), format="image/png")
print("png" if img.read()[:4] == b"\x89PNG" else "no png")
PYEOF
check "OWSLib GetMap follows the rewritten address and draws" grep -qx png owslib-getmap.out
check "... and that GetMap went through the front" gate_log_wait "$tmp/g$FRONT/gate.log" '"operation":"GetMap"'

# --- OWSLib, WFS 2.0 -----------------------------------------------------------
"$PY" - "$FRONT" >owslib-wfs.out 2>&1 <<'PYEOF'
import sys
from owslib.wfs import WebFeatureService
wfs = WebFeatureService("http://127.0.0.1:%s/?" % sys.argv[1], version="2.0.0", timeout=30)
ows = "{http://www.opengis.net/ows/1.1}"
# OWSLib 0.27's wfs.constraints stays empty for WFS 2.0 (it looks for Constraint in the WFS
# namespace) and its Constraint keeps only <Value>s: read the parsed tree it keeps.
om = wfs._capabilities.find(ows + "OperationsMetadata")
dv = {c.get("name"): c.findtext(ows + "DefaultValue") for c in om.findall(ows + "Constraint")}
url = [m["url"] for m in wfs.getOperationByName("GetFeature").methods if m["type"] == "Get"][0]
print("paging", dv.get("ImplementsResultPaging"))
print("count", dv.get("CountDefault"))
print("url", url)
PYEOF
check_eq "OWSLib WFS 2.0 rewritten: ImplementsResultPaging" "paging TRUE" "$(grep ^paging owslib-wfs.out)"
check_eq "OWSLib WFS 2.0 rewritten: CountDefault is the gate's cap" "count 100" "$(grep ^count owslib-wfs.out)"
check_eq "OWSLib WFS 2.0 rewritten: GetFeature at the front's address" "url http://127.0.0.1:$FRONT/?" "$(grep ^url owslib-wfs.out)"

# --- GDAL's WFS driver pages by itself -------------------------------------------
ogr() {  # port -> debug log; features on stdout counted
  CPL_DEBUG=ON ogrinfo -ro -al -q "WFS:http://127.0.0.1:$1/?SERVICE=WFS&VERSION=2.0.0" 2>"ogr-$1.err" | grep -c '^OGRFeature('
}
n=$(ogr "$FRONT")
check "ogrinfo through the front: paging with page size 100 from CountDefault" grep -q "Paging support with page size 100" "ogr-$FRONT.err"
check_eq "ogrinfo through the front: all 3000 features read, no option given" 3000 "$n"
check "the gate warned once that MapServer advertises its own address" \
  test "$(grep -c "capabilities: the map server advertises http://127.0.0.1:$MS; rewritten to http://127.0.0.1:$FRONT" "$tmp/g$FRONT/gate.err")" = 1
check "/readyz shows the foreign address" grep -q "capabilities_foreign_origin: http://127.0.0.1:$MS" <(curl -sS "http://127.0.0.1:$FRONT/readyz")
gate_log_wait "$tmp/g$FRONT/gate.log" '"operation":"GetFeature"' 30  # the writer gathers lines for up to 20 ms
pages=$(grep -c '"operation":"GetFeature"' "$tmp/g$FRONT/gate.log")
check "ogrinfo through the front: in pages of 100 (saw $pages GetFeature with COUNT=100)" test "$pages" -ge 30
check "GetFeature's GML names the gate, not MapServer (schemaLocation)" \
  bash -c "curl -sS 'http://127.0.0.1:$FRONT/?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetFeature&TYPENAMES=pts&COUNT=2' | grep -q 'http://127.0.0.1:$FRONT/' && ! curl -sS 'http://127.0.0.1:$FRONT/?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetFeature&TYPENAMES=pts&COUNT=2' | grep -q ':$MS'"

# --- A client dodging the rewrite: no form of capabilities names MapServer -----
G="http://127.0.0.1:$FRONT/"
leak() { ! grep -q "127.0.0.1:$MS" "$@"; }
for q in "SERVICE=WMS&REQUEST=GetCapabilities" "SERVICE=WMS&VERSION=1.1.1&REQUEST=GetCapabilities" \
         "SERVICE=WMS&WMTVER=1.0.0&REQUEST=capabilities" "service=wms&request=getcapabilities&version=1.3.0" \
         "SERVICE=WFS&ACCEPTVERSIONS=1.1.0,1.0.0&REQUEST=GetCapabilities" "SERVICE=WFS&VERSION=1.0.0&REQUEST=GetCapabilities" \
         "SERVICE=WFS&ACCEPTVERSIONS=2.0.0&SECTIONS=OperationsMetadata&REQUEST=GetCapabilities" \
         "SERVICE=WCS&VERSION=1.0.0&REQUEST=GetCapabilities" "SERVICE=WCS&VERSION=2.0.1&REQUEST=GetCapabilities"; do
  curl -sS "$G?$q" >dodge.xml
  check "no MapServer address in $q" leak dodge.xml
  check "... and it names the gate" grep -q "127.0.0.1:$FRONT/" dodge.xml
done
curl -sS "$G?SERVICE=WFS&VERSION=2.0.0&REQUEST=DescribeFeatureType&TYPENAMES=pts" >dft.xml
check "no MapServer address in DescribeFeatureType" leak dft.xml
curl -sS -H 'Accept-Encoding: gzip, deflate, br' "$G?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities" >dodge.gz
check "Accept-Encoding: gzip: still rewritten (the gate asks MapServer for identity)" grep -q "<MaxWidth>2048</MaxWidth>" dodge.gz
curl -sS -H 'Range: bytes=0-3000' "$G?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities" -D range.h >range.xml
check "Range: the whole rewritten document, no 206" bash -c "grep -q '^HTTP/1.1 200' range.h && grep -q '</WMS_Capabilities>' range.xml"
check "Range: no MapServer address" leak range.xml
curl -sS -H 'Content-Type: text/xml' --data-binary \
  '<GetCapabilities service="WFS" xmlns="http://www.opengis.net/wfs/2.0" xmlns:ows="http://www.opengis.net/ows/1.1"><ows:AcceptVersions><ows:Version>2.0.0</ows:Version></ows:AcceptVersions></GetCapabilities>' \
  "$G" >post.xml
check "POST XML GetCapabilities: CountDefault is the gate's" grep -q "CountDefault.*DefaultValue>100<" post.xml
check "POST XML GetCapabilities: no MapServer address" leak post.xml
curl -sS -X POST -d 'SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities' "$G" >postform.xml
check "POST form GetCapabilities: rewritten" grep -q "<MaxWidth>2048</MaxWidth>" postform.xml
check "POST form GetCapabilities: no MapServer address" leak postform.xml
curl -sS -D get.h -o /dev/null "$G?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities"
check "GET: sent chunked (the length changed)" grep -qi '^Transfer-Encoding: chunked' get.h
# A proxy in front of the gate: its forwarded host is believed only from a trusted address.
curl -sS -H 'X-Forwarded-Host: evil.example' "$G?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities" >xfh.xml
check "X-Forwarded-Host from an untrusted client is ignored" bash -c "! grep -q evil.example xfh.xml"
curl -sS -H 'Host: maps.example.org' "$G?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities" >host.xml
check "the public address follows Host (no public_url configured)" grep -q "http://maps.example.org/" host.xml
check "... and never MapServer's" leak host.xml
n=$(ogr "$FRONT70")
check "ogrinfo follows the advertised CountDefault (70)" grep -q "Paging support with page size 70" "ogr-$FRONT70.err"
check_eq "ogrinfo at page size 70 reads all 3000 features" 3000 "$n"
check "ogrinfo pages of 70 went through the front" grep -qi "request=GetFeature.*count=70" "$tmp/ms/run/access.log"

# --- Bodies the rewriter must not touch ------------------------------------------
curl -sS "http://127.0.0.1:$MS/?SERVICE=WMTS&VERSION=1.0.0&REQUEST=GetCapabilities" >wmts.html
"$CLI" --public "http://127.0.0.1:$FRONT/" --origin "http://127.0.0.1:$MS" --max-width 10 --max-height 10 --count-default 5 \
  <wmts.html >wmts.out 2>wmts.err
check "MapServer's HTML answer (WMTS) passes byte for byte" cmp -s wmts.html wmts.out
check "... and the rewriter says why" grep -q "raw=1.*not a capabilities document" wmts.err
curl -fsS "http://127.0.0.1:$MS/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities" >wms130.xml
half=$(($(wc -c <wms130.xml) / 2))
head -c "$half" wms130.xml >cut.xml
printf '<broken attr="\n' >>cut.xml
tail -c +$((half + 1)) wms130.xml >>cut.xml
opts=(--public "http://127.0.0.1:$FRONT/" --origin "http://127.0.0.1:$MS" --max-width 2048 --max-height 2048)
for c in 1 100 16384; do
  "$CLI" "${opts[@]}" --full-parse 1 --chunk "$c" <cut.xml >cut.out 2>cut.err
  rest=$((($(wc -c <wms130.xml) - half) + 16))
  check "malformed WMS 1.3.0, full parse (chunks of $c): the malformed rest passes unchanged" \
    cmp -s <(tail -c "$rest" cut.xml) <(tail -c "$rest" cut.out)
  check "malformed WMS 1.3.0, full parse (chunks of $c): reported as passed raw" grep -q "raw=1.*XML error" cut.err
  "$CLI" "${opts[@]}" --chunk "$c" <cut.xml >cut.out 2>cut.err
  check "malformed WMS 1.3.0, fast tail (chunks of $c): only the caps and the addresses differ" \
    cmp -s cut.xml <(sed -e "s|http://127.0.0.1:$FRONT/|http://127.0.0.1:$MS/|g" -e 's|>2048<|>8192<|' cut.out)
done
check "malformed WMS 1.3.0: the part before the error was rewritten (Service block)" grep -q "<MaxWidth>2048</MaxWidth>" cut.out
tap_exit
