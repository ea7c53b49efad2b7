#!/usr/bin/env bash
# Demo of the front gate: a real MapServer (cgi-mapserver as FastCGI under
# lighttpd) serving 500 generated points as WMS and WFS, with ogc-gate in
# front. Standalone: no database needed, the data is a generated GeoJSON file.
# With OT_DEMO_PG_CONN set (a libpq connection string; scripts/demo.sh sets it),
# MapServer serves the PostGIS table demo_points over that connection instead,
# so the database's pricing hook prices MapServer's SQL behind the gate;
# OT_DEMO_PG_LOG names that server's log (where its refusals are explained).
#
#   scripts/gate-demo.sh DIR          start (all state under DIR, e.g. .run/gate-demo)
#   scripts/gate-demo.sh DIR stop     stop what a previous start left running
#
# Ports (loopback): gate 8000, admin 8001, MapServer 8081; override with
# GATE_PORT, ADMIN_PORT, MS_PORT.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/test/gate/lib/mapserver.sh"
dir=${1:?usage: $0 DIR [stop]}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
GATE_PORT=${GATE_PORT:-8000} ADMIN_PORT=${ADMIN_PORT:-8001} MS_PORT=${MS_PORT:-8081}

stop() {
  if [ -f "$dir/gate.pid" ]; then kill -TERM "$(cat "$dir/gate.pid")" 2>/dev/null || true; rm -f "$dir/gate.pid"; fi
  ms_stop "$dir/mapserver" || true
}
if [ "${2:-}" = stop ]; then stop; echo "stopped"; exit 0; fi
stop
# Logs start empty: the commands printed below grep them for this run's lines.
rm -rf "$dir/mapserver" "$dir/gate.log" "$dir/gate.err"

if command -v ogc-gate >/dev/null; then GATE_BIN=$(command -v ogc-gate)
else make -s -C "$root" bin/ogc-gate >/dev/null; GATE_BIN=$root/bin/ogc-gate; fi

pg_conn=${OT_DEMO_PG_CONN:-}
if [ -n "$pg_conn" ]; then
  ms_start_postgis "$dir/mapserver" "$MS_PORT" "$pg_conn" demo_points 4326 "http://127.0.0.1:$GATE_PORT/"
else
  ms_start "$dir/mapserver" "$MS_PORT" 500 "http://127.0.0.1:$GATE_PORT/"
fi

# The demo data is sparse (500 points over Europe), so the density is set low;
# the public tier is small so that a 429 is easy to see.
cat >"$dir/gate.yaml" <<YAML
listen: 127.0.0.1:$GATE_PORT
admin_listen: 127.0.0.1:$ADMIN_PORT
upstream: http://127.0.0.1:$MS_PORT
caps: {max_pixels: 4194304, max_features: 100}
cost: {density_per_km2: 0.001}
default_tier: public
tiers:
  - {name: public, rate: 5, burst: 60}
  - {name: partner, rate: 100, burst: 2000, keys: [$("$GATE_BIN" --hash-key demo-partner-key)]}
YAML
"$GATE_BIN" --config "$dir/gate.yaml" --check-config >/dev/null
nohup "$GATE_BIN" --config "$dir/gate.yaml" >>"$dir/gate.log" 2>>"$dir/gate.err" &
echo $! >"$dir/gate.pid"
for _ in $(seq 1 50); do curl -fs -o /dev/null "http://127.0.0.1:$GATE_PORT/readyz" && break; sleep 0.1; done
curl -fs -o /dev/null "http://127.0.0.1:$GATE_PORT/readyz" || { echo "gate did not become ready; see $dir/gate.err" >&2; exit 1; }

G=http://127.0.0.1:$GATE_PORT
if [ -n "$pg_conn" ]; then
  # demo_points: 50 000 points around 10 E 50 N (WMS 1.3.0 EPSG:4326 boxes are lat,lon).
  MAP="SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=demo_points&STYLES=&CRS=EPSG:4326&FORMAT=image/png"
  cat <<TXT
ogc-gate demo running: gate $G (admin http://127.0.0.1:$ADMIN_PORT), MapServer http://127.0.0.1:$MS_PORT
MapServer reads demo_points from PostgreSQL ($pg_conn): the pricing hook prices and charges its SQL.
State, logs and config in $dir (gate.log has one JSON line per request; MapServer's errors go to
$dir/mapserver/run/lighttpd.err, the database's reasons for its refusals to its own log).

A pass (a 0.2 degree box; MapServer's SQL is charged the few milliseconds it takes in the database):
  curl -s -o /tmp/map.png -w '%{http_code} %{content_type}\n' '$G/?$MAP&BBOX=49.9,9.9,50.1,10.1&WIDTH=512&HEIGHT=512'

The same through GDAL and a WFS client:
  gdal_translate -q -outsize 512 512 'WMS:$G/?$MAP&BBOX=49.9,9.9,50.1,10.1' /tmp/m.png && gdalinfo /tmp/m.png | grep '^Size'
  ogrinfo -ro -al -q -spat 9.9 49.9 10.1 50.1 'WFS:$G/?SERVICE=WFS&VERSION=2.0.0' demo_points | grep -c '^OGRFeature('

Refused by the gate (4096x4096 is over its pixel cap; MapServer and the database never see it):
  curl -s '$G/?$MAP&BBOX=46,4,54,16&WIDTH=4096&HEIGHT=4096'

Refused by the database (the whole area, all 50 000 points, is estimated at several tens of ms and
admitted; each is charged what it measurably took, a few hundred ms, until the bucket is in debt: then
the next is refused with SQLSTATE 53T01. The gate passes them all, and MapServer answers the refused
ones with a ServiceExceptionReport that says only "check server logs"). Run these last: the bucket
needs a while to refill afterwards (the HINT says how long).
  for i in 1 2 3 4 5; do curl -s -o /tmp/big.out -w '%{http_code} %{content_type}\n' '$G/?$MAP&BBOX=46,4,54,16&WIDTH=1024&HEIGHT=768'; done; cat /tmp/big.out
  grep -A2 'demo_map 53T01 ERROR' ${OT_DEMO_PG_LOG:-the PostgreSQL log} | tail -n 3   # the database's reason
  tail -n 1 $dir/gate.log                                                          # the gate: "verdict":"pass"

Admin:   curl -s http://127.0.0.1:$ADMIN_PORT/metrics ; curl -s http://127.0.0.1:$ADMIN_PORT/buckets

Stop:    $0 $1 stop
TXT
  exit 0
fi
MAP="SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=pts&STYLES=&CRS=EPSG:4326&BBOX=34,-11,46,31&FORMAT=image/png"
cat <<TXT
ogc-gate demo running: gate $G (admin http://127.0.0.1:$ADMIN_PORT), MapServer http://127.0.0.1:$MS_PORT
State, logs and config in $dir (gate.log has one JSON line per request).

A pass (PNG from MapServer, with the remaining budget in the headers):
  curl -s -D - -o /tmp/map.png '$G/?$MAP&WIDTH=512&HEIGHT=256' | grep -i ratelimit

A cap rejection (4096x4096 is over 4194304 pixels; a WMS exception, HTTP 200 so GDAL shows it):
  curl -s '$G/?$MAP&WIDTH=4096&HEIGHT=4096'
  curl -s '$G/?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetFeature&TYPENAMES=pts&COUNT=5000'

A 429 (the public tier holds 60 units; a 2048x1024 GetMap costs about 35):
  for i in 1 2 3; do curl -s -o /dev/null -D - '$G/?$MAP&WIDTH=2048&HEIGHT=1024' | grep -iE '^HTTP|retry-after'; done

The same with the partner key (its own, larger bucket):
  curl -s -o /dev/null -w '%{http_code}\n' -H 'X-Api-Key: demo-partner-key' '$G/?$MAP&WIDTH=2048&HEIGHT=1024'

Clients: gdal_translate -outsize 512 256 'WMS:$G/?$MAP' /tmp/m.png
         ogrinfo -al -so 'WFS:$G/?SERVICE=WFS&VERSION=2.0.0'
Admin:   curl -s http://127.0.0.1:$ADMIN_PORT/metrics ; curl -s http://127.0.0.1:$ADMIN_PORT/buckets

Stop:    $0 $1 stop
TXT
