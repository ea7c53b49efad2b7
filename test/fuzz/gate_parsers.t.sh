#!/usr/bin/env bash
# Builds the libFuzzer target for the gate's request parsers (clang,
# ASan+UBSan) and runs it for a bounded time (FUZZ_SECONDS, default 30).
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
cd "$root" || exit 1
. "$root/test/lib/fuzz.sh"
fuzz_build gate_parsers "request parsers"

# Seeds: one of each request shape the parsers know.
i=0
for s in \
  '?SERVICE=WMS&REQUEST=GetMap&VERSION=1.3.0&WIDTH=256&HEIGHT=256&CRS=EPSG:4326&BBOX=0,0,1,1' \
  '?service=wfs&request=GetFeature&version=2.0.0&count=10&bbox=1,2,3,4,urn:ogc:def:crs:EPSG::4326' \
  '?SERVICE=WMTS&REQUEST=GetTile&TILEMATRIX=EPSG:3857:5' \
  '?SERVICE=WMTS&REQUEST=GetTile&TILEMATRIXSET=WorldCRS84Quad&TILEMATRIX=5&TILEROW=3&TILECOL=40' \
  'wmts/a/default/UTM32Quad/16/40000/30000.png' 'tms/1.0.0/a/14/8587/10835.png' \
  '?SERVICE=WMS&REQUEST=GetMap&VERSION=1.1.1&WIDTH=256&HEIGHT=256&SRS=EPSG:3857&BBOX=20037000,0,-20037000,1000' \
  'tiles/3/1/2.png' 'collections/a/items?limit=5000&bbox=1,2,3,4' \
  '?SERVICE=WCS&REQUEST=GetCoverage&WIDTH=10&HEIGHT=%32'; do
  printf '\0%s' "$s" >"$work/corpus/seed$i"; i=$((i + 1))
done
printf '\001\n<GetFeature service="WFS" version="1.1.0" maxFeatures="5"><Query/></GetFeature>' >"$work/corpus/xml"
printf '\003search\n{"limit": 100, "bbox": [0,0,1,1]}' >"$work/corpus/json"
# The address parsers (upstream URL, listen address).
printf '\000http://[::1]:8080/cgi-bin/mapserv' >"$work/corpus/upstream6"
printf '\000http://map.example:80/wms//' >"$work/corpus/upstream"
printf '\000[::1]:8001' >"$work/corpus/listen6"
printf '\000127.0.0.1:8000' >"$work/corpus/listen"

fuzz_run gate_parsers 4096 "the request parsers: no crash"
tap_exit
