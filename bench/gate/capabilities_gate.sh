#!/usr/bin/env bash
# The capabilities rewrite in ogc-gate, end to end: a ~10 MB WMS 1.3.0
# document (11 000 layers, 3 upstream URLs each) from a static nginx upstream,
# fetched by curl through two gates in the same run — one with
# capabilities.rewrite off (plain relay), one rewriting (caps + addresses) —
# in alternating rounds. Prints MB/s of each (median of ROUNDS), the ratio, and
# the rewriting gate's peak RSS growth (VmHWM after - VmRSS before).
#   bench/gate/capabilities_gate.sh        (ROUNDS=15 LAYERS=11000: ~10 MB)
#   DOC_OUT=FILE bench/gate/capabilities_gate.sh   just writes the document to FILE (for
#       callgrind: ONE_PASS=FILE ORIGIN=http://127.0.0.1:19000 build/gate/capabilities_bench)
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/gate/lib/gate.sh"
ROUNDS=${ROUNDS:-15} LAYERS=${LAYERS:-11000}
UP=19000 GA=19001 GB=19003
tmp=$(mktemp -d)
cleanup() { gate_stop "$tmp/a"; gate_stop "$tmp/b"; [ -f "$tmp/nginx.pid" ] && kill "$(cat "$tmp/nginx.pid")"; rm -rf "$tmp"; }
trap cleanup EXIT
[ -n "${DOC_OUT:-}" ] || make -s -C "$root" bin/ogc-gate >/dev/null || exit 1
mkdir -p "$tmp/www" "$tmp/ngx"; chmod 755 "$tmp" "$tmp/www"
awk -v n="$LAYERS" -v up="http://127.0.0.1:$UP" 'BEGIN {
  print "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
  print "<WMS_Capabilities version=\"1.3.0\" xmlns=\"http://www.opengis.net/wms\" xmlns:xlink=\"http://www.w3.org/1999/xlink\">"
  print "<Service><Name>WMS</Name><Title>bench</Title><OnlineResource xlink:href=\"" up "/?\"/><MaxWidth>8192</MaxWidth><MaxHeight>8192</MaxHeight></Service>"
  print "<Capability><Request><GetCapabilities><Format>text/xml</Format><DCPType><HTTP><Get><OnlineResource xlink:href=\"" up "/?\"/></Get></HTTP></DCPType></GetCapabilities>"
  print "<GetMap><Format>image/png</Format><DCPType><HTTP><Get><OnlineResource xlink:href=\"" up "/?\"/></Get></HTTP></DCPType></GetMap></Request>"
  print "<Exception><Format>XML</Format></Exception><Layer><Title>all</Title>"
  for (i = 0; i < n; i++) {
    printf "<Layer queryable=\"1\"><Name>layer%d</Name><Title>Layer %d</Title><Abstract>A generated layer for the capabilities benchmark &amp; its addresses.</Abstract>\n", i, i
    printf "<CRS>EPSG:4326</CRS><CRS>EPSG:3857</CRS><EX_GeographicBoundingBox><westBoundLongitude>-10</westBoundLongitude><eastBoundLongitude>30</eastBoundLongitude><southBoundLatitude>35</southBoundLatitude><northBoundLatitude>45</northBoundLatitude></EX_GeographicBoundingBox>\n"
    printf "<MetadataURL type=\"ISO19115:2003\"><Format>text/xml</Format><OnlineResource xlink:type=\"simple\" xlink:href=\"%s/?meta=%d\"/></MetadataURL>\n", up, i
    printf "<Style><Name>default</Name><LegendURL width=\"20\" height=\"20\"><Format>image/png</Format><OnlineResource xlink:type=\"simple\" xlink:href=\"%s/?SERVICE=WMS&amp;REQUEST=GetLegendGraphic&amp;LAYER=layer%d\"/></LegendURL></Style>\n", up, i
    printf "<DataURL><Format>text/html</Format><OnlineResource xlink:type=\"simple\" xlink:href=\"%s/data/%d\"/></DataURL></Layer>\n", up, i
  }
  print "</Layer></Capability></WMS_Capabilities>"
}' >"$tmp/www/caps.xml"
chmod 644 "$tmp/www/caps.xml"
if [ -n "${DOC_OUT:-}" ]; then cp "$tmp/www/caps.xml" "$DOC_OUT"; exit 0; fi
size=$(wc -c <"$tmp/www/caps.xml")
cat >"$tmp/nginx.conf" <<CONF
worker_processes 1; pid $tmp/nginx.pid; error_log $tmp/nginx.err warn;
events { worker_connections 1024; }
http { access_log off; types { text/xml xml; } client_body_temp_path $tmp/ngx/body; proxy_temp_path $tmp/ngx/proxy;
  fastcgi_temp_path $tmp/ngx/fcgi; uwsgi_temp_path $tmp/ngx/uwsgi; scgi_temp_path $tmp/ngx/scgi;
  server { listen 127.0.0.1:$UP; root $tmp/www; } }
CONF
nginx -c "$tmp/nginx.conf" -p "$tmp" || exit 1
printf 'capabilities:\n  rewrite: false\n' >"$tmp/off.yaml"
gate_start "$tmp/a" "$GA" $((GA + 1)) "http://127.0.0.1:$UP" --config "$tmp/off.yaml" --threads 1 --rate 1e9 --burst 1e9 || exit 1
gate_start "$tmp/b" "$GB" $((GB + 1)) "http://127.0.0.1:$UP" --threads 1 --rate 1e9 --burst 1e9 --max-pixels 4194304 || exit 1
Q="/caps.xml?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities"
pidb=$(cat "$tmp/b/gate.pid")
rss0=$(awk '/^VmRSS/ {print $2}' "/proc/$pidb/status")
curl -sS "http://127.0.0.1:$GB$Q" >"$tmp/out.xml"
grep -q "<MaxWidth>2048</MaxWidth>" "$tmp/out.xml" && ! grep -q "127.0.0.1:$UP" "$tmp/out.xml" ||
  { echo "the rewriting gate did not rewrite" >&2; exit 1; }
# CPU seconds a gate has used (utime + stime): on a loaded machine wall time
# mostly measures waiting for a core, CPU time per fetch does not.
cpu() { awk -v t="$(getconf CLK_TCK)" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
pida=$(cat "$tmp/a/gate.pid")
ca0=$(cpu "$pida") cb0=$(cpu "$pidb")
ta=() tb=()
for i in $(seq 1 "$ROUNDS"); do
  ta+=("$(curl -sS -o /dev/null -w '%{time_total}' "http://127.0.0.1:$GA$Q")")
  tb+=("$(curl -sS -o /dev/null -w '%{time_total}' "http://127.0.0.1:$GB$Q")")
done
hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pidb/status")
ca1=$(cpu "$pida") cb1=$(cpu "$pidb")
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ma=$(median "${ta[@]}") mb=$(median "${tb[@]}")
awk -v s="$size" -v a="$ma" -v b="$mb" -v r0="$rss0" -v h="$hwm" -v n="$ROUNDS" -v ca="$(echo "$ca1 - $ca0" | bc -l)" -v cb="$(echo "$cb1 - $cb0" | bc -l)" -v load="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
  printf "document: %.1f MB; %d rounds each, alternating; medians\n", s / 1048576, n
  printf "plain relay (rewrite off): %7.1f MB/s  (%.1f ms)\n", s / 1048576 / a, a * 1000
  printf "relay with the rewrite:    %7.1f MB/s  (%.1f ms)\n", s / 1048576 / b, b * 1000
  printf "ratio: %.2f x the plain relay (target >= 0.8)\n", a / b
  printf "gate CPU per fetch: plain %.1f ms, rewriting %.1f ms (CPU ratio %.2f; load %s)\n", ca * 1000 / n, cb * 1000 / n, (cb > 0 ? ca / cb : 0), load
  printf "rewriting gate: RSS %.1f MB before, peak %.1f MB (growth %.1f MB; target < 16)\n", r0 / 1024, h / 1024, (h - r0) / 1024
}'
