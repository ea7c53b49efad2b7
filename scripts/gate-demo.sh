#!/usr/bin/env bash
# Demo of the front gate: a real MapServer (cgi-mapserver as FastCGI under
# lighttpd) serving 500 generated points as WMS and WFS, with ogc-gate in
# front. Standalone: no database needed, the data is a generated GeoJSON file.
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

if command -v ogc-gate >/dev/null; then GATE_BIN=$(command -v ogc-gate)
else make -s -C "$root" bin/ogc-gate >/dev/null; GATE_BIN=$root/bin/ogc-gate; fi

ms_start "$dir/mapserver" "$MS_PORT" 500 "http://127.0.0.1:$GATE_PORT/"

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
