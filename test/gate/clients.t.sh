#!/usr/bin/env bash
# Each cap as the users of real clients see it: gdal_translate (WMS, WMTS
# REST and KVP), ogrinfo (WFS) and OWSLib (/usr/bin/python3; WMS 1.1.1/1.3.0,
# WFS 1.0/1.1/2.0, WMTS REST and KVP) against MapServer behind the gate. The
# reason must reach the user, not just "HTTP error 4xx".
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/mapserver.sh"
. "$root/test/gate/lib/gate.sh"
MS=18200 GATE=18201 ADMIN=18202 GATE400=18203 ADMIN400=18204
tmp=$(mktemp -d)
cleanup() { gate_stop "$tmp/g"; gate_stop "$tmp/g400"; ms_stop "$tmp/ms"; rm -rf "$tmp"; }
trap cleanup EXIT
export GDAL_HTTP_TIMEOUT=20 CPL_CURL_VERBOSE=NO GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR

[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null
ms_start "$tmp/ms" "$MS" 500 "http://127.0.0.1:$GATE/" || { not_ok "MapServer starts"; tap_exit; }
caps=(--burst 1000000 --rate 100000 --max-pixels 500000 --max-features 100)
gate_start "$tmp/g" "$GATE" "$ADMIN" "http://127.0.0.1:$MS" "${caps[@]}" || { not_ok "gate starts"; tap_exit; }
gate_start "$tmp/g400" "$GATE400" "$ADMIN400" "http://127.0.0.1:$MS" "${caps[@]}" --exception-status 400 \
  || { not_ok "gate (400) starts"; tap_exit; }
cd "$tmp" || exit 1
PIXELS_REASON='this service allows at most 500000 pixels'
FEATURES_REASON='this service returns at most 100 features'

# --- GDAL, WMS ---------------------------------------------------------------
wms_xml() {  # version port block -> GDAL WMS service description
  local crs=SRS; [ "$1" = 1.3.0 ] && crs=CRS
  cat <<XML
<GDAL_WMS><Service name="WMS"><Version>$1</Version><ServerUrl>http://127.0.0.1:$2/?</ServerUrl>
<Layers>pts</Layers><$crs>EPSG:4326</$crs><ImageFormat>image/png</ImageFormat></Service>
<DataWindow><UpperLeftX>-10</UpperLeftX><UpperLeftY>45</UpperLeftY><LowerRightX>30</LowerRightX><LowerRightY>35</LowerRightY>
<SizeX>2048</SizeX><SizeY>512</SizeY></DataWindow><BlockSizeX>$3</BlockSizeX><BlockSizeY>$3</BlockSizeY>
<BandsCount>3</BandsCount></GDAL_WMS>
XML
}
for v in 1.1.1 1.3.0; do
  wms_xml "$v" "$GATE" 1024 >"wms-$v-big.xml"
  gdal_translate -q -of PNG "wms-$v-big.xml" "big-$v.png" >"gdal-$v.out" 2>&1
  check "gdal_translate WMS $v: 1024x1024 blocks over the pixel cap show the reason" grep -q "$PIXELS_REASON" "gdal-$v.out"
  wms_xml "$v" "$GATE" 512 >"wms-$v-ok.xml"
  if gdal_translate -q -of PNG "wms-$v-ok.xml" "ok-$v.png" >"gdal-ok-$v.out" 2>&1 && [ -s "ok-$v.png" ]; then
    ok "gdal_translate WMS $v: 512x512 blocks under the cap succeed"
  else not_ok "gdal_translate WMS $v under the cap"; head -5 "gdal-ok-$v.out"; fi
done
# Why 200: with status 400 GDAL hides the text.
wms_xml 1.3.0 "$GATE400" 1024 >wms-400.xml
gdal_translate -q -of PNG wms-400.xml big-400.png >gdal-400.out 2>&1
# Seen with GDAL 3.6: on 400 the WMS driver does not parse the report; it
# dumps the raw XML as a download failure. On 200 it prints the message.
check "(why 200) gdal_translate parses the exception on 200" grep -q "The server returned exception: GetMap asked" gdal-1.3.0.out
check "(why 200) with HTTP 400, gdal_translate reports a failed download, not the exception" \
  bash -c "grep -q 'HTTP status code: 400' gdal-400.out && ! grep -q 'The server returned exception' gdal-400.out"
# WMS has no code for "too large": the report carries none (GDAL then prints no code).
check "gdal_translate WMS 1.1.1/1.3.0: no exception code outside the WMS lists" \
  bash -c "! grep -q 'exception code' gdal-1.1.1.out gdal-1.3.0.out"

# --- GDAL, WMTS (REST and KVP) ----------------------------------------------------
# A tile matrix named 30, deeper than max_zoom (24): refused before MapServer
# (which serves no WMTS). wmts_caps PORT rest|kvp -> capabilities with only a
# REST ResourceURL, or only a KVP GetTile endpoint.
wmts_caps() {
  local rest='' ops=''
  if [ "$2" = rest ]; then
    rest="<ResourceURL format=\"image/png\" resourceType=\"tile\" template=\"http://127.0.0.1:$1/wmts/pts/{Style}/{TileMatrixSet}/{TileMatrix}/{TileRow}/{TileCol}.png\"/>"
  else
    local op
    for op in GetCapabilities GetTile; do
      ops+="<ows:Operation name=\"$op\"><ows:DCP><ows:HTTP><ows:Get xlink:href=\"http://127.0.0.1:$1/?\"><ows:Constraint name=\"GetEncoding\">"
      ops+="<ows:AllowedValues><ows:Value>KVP</ows:Value></ows:AllowedValues></ows:Constraint></ows:Get></ows:HTTP></ows:DCP></ows:Operation>"
    done
    ops="<ows:OperationsMetadata>$ops</ows:OperationsMetadata>"
  fi
  cat <<XML
<Capabilities xmlns="http://www.opengis.net/wmts/1.0" xmlns:ows="http://www.opengis.net/ows/1.1" xmlns:xlink="http://www.w3.org/1999/xlink" version="1.0.0">$ops<Contents>
<Layer><ows:Identifier>pts</ows:Identifier><Style isDefault="true"><ows:Identifier>default</ows:Identifier></Style>
<Format>image/png</Format><TileMatrixSetLink><TileMatrixSet>deep</TileMatrixSet></TileMatrixSetLink>$rest</Layer>
<TileMatrixSet><ows:Identifier>deep</ows:Identifier><ows:SupportedCRS>urn:ogc:def:crs:EPSG::3857</ows:SupportedCRS>
<TileMatrix><ows:Identifier>30</ows:Identifier><ScaleDenominator>559082264.0287178</ScaleDenominator>
<TopLeftCorner>-20037508.3427892 20037508.3427892</TopLeftCorner><TileWidth>256</TileWidth><TileHeight>256</TileHeight>
<MatrixWidth>1</MatrixWidth><MatrixHeight>1</MatrixHeight></TileMatrix></TileMatrixSet></Contents></Capabilities>
XML
}
ZOOM_REASON='Tile zoom level 30 is outside this service.s levels 0 to 24'
for port in "$GATE" "$GATE400"; do for m in rest kvp; do wmts_caps "$port" "$m" >"wmts-$m-$port.xml"; done; done
for m in rest kvp; do
  # GDAL keeps a tile cache in ./gdalwmscache: a fresh one per run.
  (mkdir "gdal-$m" && cd "gdal-$m" && gdal_translate -q -of PNG "WMTS:../wmts-$m-$GATE.xml,layer=pts" wmts.png) >"gdal-wmts-$m.out" 2>&1
  # Seen with GDAL 3.6: on a non-200 answer it prints the body when the
  # Content-Type has "text" in it (the report itself, raw); application/xml
  # gave "error: (null)", and on 200 it parses only <ServiceExceptionReport>.
  check "gdal_translate WMTS $m: the refusal's reason is shown (HTTP 400, text/xml report)" \
    bash -c "grep -q 'HTTP status code: 400, error: <?xml' gdal-wmts-$m.out && grep -q '$ZOOM_REASON' gdal-wmts-$m.out"
done
wmts_head() { curl -s -o /dev/null -w '%{http_code} %{content_type}' "http://127.0.0.1:$GATE$1"; }
check_eq "WMTS REST cap refusal: 400 text/xml although exception_status is 200" "400 text/xml" \
  "$(wmts_head /wmts/pts/default/deep/30/0/0.png)"
check_eq "WMTS KVP cap refusal: 400 text/xml although exception_status is 200" "400 text/xml" \
  "$(wmts_head '/?SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=pts&STYLE=default&TILEMATRIXSET=deep&TILEMATRIX=30&TILEROW=0&TILECOL=0&FORMAT=image/png')"

# --- GDAL, WFS ---------------------------------------------------------------
OGR_WFS_PAGE_SIZE=500 ogrinfo -ro -al -q "WFS:http://127.0.0.1:$GATE/?SERVICE=WFS&VERSION=2.0.0" pts >ogr-big.out 2>&1
check "ogrinfo WFS 2.0 paging with 500 per page: the count cap reason is shown" grep -q "$FEATURES_REASON" ogr-big.out
n=$(ogrinfo -ro -al -q "WFS:http://127.0.0.1:$GATE/?SERVICE=WFS&VERSION=2.0.0" pts 2>ogr-ok.err | grep -c '^OGRFeature(')
check_eq "ogrinfo WFS 2.0 default paging (100) reads all 500 features through the gate" 500 "$n"
n=$(OGR_WFS_PAGING_ALLOWED=OFF ogrinfo -ro -al -q "WFS:http://127.0.0.1:$GATE/?SERVICE=WFS&VERSION=1.1.0" pts 2>/dev/null | grep -c '^OGRFeature(')
check_eq "ogrinfo WFS 1.1 without paging: unbounded GetFeature capped at 100 features" 100 "$n"
OGR_WFS_PAGE_SIZE=500 ogrinfo -ro -al -q "WFS:http://127.0.0.1:$GATE400/?SERVICE=WFS&VERSION=2.0.0" pts >ogr-400.out 2>&1
check "(why 200) with HTTP 400, ogrinfo shows only the status, not the reason" \
  bash -c "grep -q '400' ogr-400.out && ! grep -q '$FEATURES_REASON' ogr-400.out"

# --- GDAL, OGC API Features (MapServer's /demo/ogcapi) ------------------------
n=$(ogrinfo -ro -al -q -oo PAGE_SIZE=5000 "OAPIF:http://127.0.0.1:$GATE/demo/ogcapi" pts 2>/dev/null | grep -c '^OGRFeature(')
check_eq "ogrinfo OAPIF with limit=5000: clamped to 100 per page, all 500 read via next links" 500 "$n"
check "... the gate logged the clamp" gate_log_wait "$tmp/g/gate.log" '"note":"clamped limit 5000->100"'

# --- OWSLib ------------------------------------------------------------------
owslib() {  # port -> one line per case: "<case> <outcome>: <message>"
  /usr/bin/python3 - "$1" <<'PY'
import sys
from owslib.wms import WebMapService
from owslib.wfs import WebFeatureService
from owslib.util import ServiceException
u = 'http://127.0.0.1:%s/' % sys.argv[1]
def run(name, f):
    try:
        f(); print(name, 'ok')
    except ServiceException as e:
        print(name, 'ServiceException:', ' '.join(str(e).split()))
    except Exception as e:
        print(name, type(e).__name__ + ':', ' '.join(str(e).split())[:200])
for v in ('1.1.1', '1.3.0'):
    w = WebMapService(u, version=v)
    run('wms-%s-big' % v, lambda: w.getmap(layers=['pts'], srs='EPSG:4326', bbox=(-10, 35, 30, 45),
                                           size=(1000, 1000), format='image/png').read())
    def small():
        img = w.getmap(layers=['pts'], srs='EPSG:4326', bbox=(-10, 35, 30, 45), size=(256, 256), format='image/png').read()
        assert img[:4] == b'\x89PNG', img[:100]
    run('wms-%s-small' % v, small)
    run('gfi-%s-big' % v, lambda: w.getfeatureinfo(layers=['pts'], query_layers=['pts'], srs='EPSG:4326',
                                                   bbox=(-10, 35, 30, 45), size=(1000, 1000), format='image/png',
                                                   info_format='text/html', xy=(5, 5)).read())
for v in ('1.0.0', '1.1.0', '2.0.0'):
    f = WebFeatureService(u, version=v)
    run('wfs-%s-big' % v, lambda: f.getfeature(typename=['pts'], maxfeatures=5000).read())
    def small():
        b = f.getfeature(typename=['pts'], maxfeatures=7).read()
        assert b.count(b'<ms:pts') == 7, b[:300]
    run('wfs-%s-small' % v, small)
from owslib.wmts import WebMapTileService
def wmts(m):
    t = WebMapTileService(u, xml=open('wmts-%s-%s.xml' % (m, sys.argv[1]), 'rb').read())
    assert t.restonly == (m == 'rest'), 'restonly is %s' % t.restonly
    t.gettile(layer='pts', tilematrixset='deep', tilematrix='30', row=0, column=0, format='image/png').read()
for m in ('rest', 'kvp'):
    run('wmts-%s-big' % m, lambda: wmts(m))
from owslib.ogcapi.features import Features
def api():
    n = len(Features(u + 'demo/ogcapi').collection_items('pts', limit=5000)['features'])
    assert n == 100, n
run('oapif-limit', api)
PY
}
owslib "$GATE" >owslib.out 2>&1
for v in 1.1.1 1.3.0; do
  check "OWSLib WMS $v: pixel cap raises ServiceException with the reason" grep -q "^wms-$v-big ServiceException: .*$PIXELS_REASON" owslib.out
  check "OWSLib WMS $v: a small GetMap returns a PNG" grep -q "^wms-$v-small ok" owslib.out
  check "OWSLib WMS $v: GetFeatureInfo pixel cap raises ServiceException with the reason" grep -q "^gfi-$v-big ServiceException: GetFeatureInfo asked .*$PIXELS_REASON" owslib.out
done
for v in 1.0.0 1.1.0 2.0.0; do
  check "OWSLib WFS $v: feature cap raises ServiceException with the reason" grep -q "^wfs-$v-big ServiceException: .*$FEATURES_REASON" owslib.out
  check "OWSLib WFS $v: 7 features pass" grep -q "^wfs-$v-small ok" owslib.out
done
check "OWSLib OGC API Features: limit=5000 is clamped to 100, not an error" grep -q '^oapif-limit ok' owslib.out
for m in rest kvp; do
  # On 400 OWSLib raises with the raw body: the report, reason inside.
  check "OWSLib WMTS $m: over-cap TileMatrix raises ServiceException with the reason" \
    grep -q "^wmts-$m-big ServiceException: .*$ZOOM_REASON" owslib.out
done
owslib "$GATE400" >owslib-400.out 2>&1
check "(400 also works for OWSLib) WMS 1.3.0 reason in the ServiceException" grep -q "^wms-1.3.0-big ServiceException: .*$PIXELS_REASON" owslib-400.out
check "(exception_status 400 changes nothing for WMTS) OWSLib WMTS REST reason in the ServiceException" \
  grep -q "^wmts-rest-big ServiceException: .*$ZOOM_REASON" owslib-400.out
[ "$TAP_FAILED" = 0 ] || { echo "--- owslib.out"; cat owslib.out; echo "--- gdal"; head -8 gdal-*.out ogr-*.out; }
tap_exit
