#!/usr/bin/env bash
# OGC API – Features through ogc-gate, against the real MapServer 8 (its
# /demo/ogcapi answers, which name MapServer's own address as an unconfigured
# map server behind the gate does): the OpenAPI document states the gate's
# maximum limit, every JSON and HTML answer names the gate whatever the
# client's spelling, bodies that are not JSON pass the JSON rewriter
# unchanged, and GDAL's OAPIF driver reads the whole layer through the gate by
# following the rewritten next links.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/mapserver.sh"
. "$root/test/gate/lib/gate.sh"
MS=18970 FRONT=18971
tmp=$(mktemp -d)
cleanup() { gate_stop "$tmp/g"; ms_stop "$tmp/ms"; rm -rf "$tmp"; }
trap cleanup EXIT
PY=/usr/bin/python3
export GDAL_HTTP_TIMEOUT=30 GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR

make -s -C "$root" build/gate/capabilities_cli bin/ogc-gate >/dev/null || { not_ok "capabilities_cli and ogc-gate build"; tap_exit; }
CLI=$root/build/gate/capabilities_cli
ms_start "$tmp/ms" "$MS" 3000 || { not_ok "MapServer starts"; tap_exit; }
gate_start "$tmp/g" "$FRONT" $((FRONT + 10)) "http://127.0.0.1:$MS" --max-features 100 --rate 1000000 --burst 1000000 ||
  { not_ok "the gate starts"; tap_exit; }
cd "$tmp" || exit 1
M="http://127.0.0.1:$MS/demo/ogcapi" G="http://127.0.0.1:$FRONT/demo/ogcapi"

# --- /api: the limit's maximum -----------------------------------------------------
api_limit() {  # file -> "maximum default servers[0].url" of the items path's limit
  "$PY" - "$1" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
p = [x for x in d["paths"]["/collections/pts/items"]["get"]["parameters"] if x.get("name") == "limit"][0]
print(p["schema"].get("maximum"), p["schema"].get("default"), d["servers"][0]["url"])
PYEOF
}
curl -fsS "$M/api?f=json" >api-direct.json
read -r mx df url < <(api_limit api-direct.json)
check_eq "MapServer's own /api: limit maximum 10000" 10000 "$mx"
curl -fsS -D api.h "$G/api?f=json" >api.json
read -r mx df url < <(api_limit api.json)
check_eq "/api through the gate: limit maximum is the gate's cap" 100 "$mx"
check_eq "/api through the gate: default kept (10 <= 100)" 10 "$df"
check_eq "/api through the gate: servers[0].url is the gate" "$G" "$url"
check "/api through the gate: sent chunked (rewritten)" grep -qi '^Transfer-Encoding: chunked' api.h
curl -fsS -H 'Accept: application/vnd.oai.openapi+json;version=3.0' "$G/api" >api2.json
read -r mx df url < <(api_limit api2.json)
check_eq "/api by Accept (no f=): maximum 100" 100 "$mx"

# --- no spelling shows MapServer's address ------------------------------------------
leak() { ! grep -q "127.0.0.1:$MS" "$1"; }
names_gate() { grep -q "127.0.0.1:$FRONT/demo/ogcapi" "$1"; }
n=0
while IFS='|' read -r what path hdr; do
  n=$((n + 1))
  if [ -n "$hdr" ]; then curl -sS -H "$hdr" "$G$path" >"a$n.json"; else curl -sS "$G$path" >"a$n.json"; fi
  check "$what: no MapServer address" leak "a$n.json"
  case $what in conformance*) ;; *) check "$what: names the gate" names_gate "a$n.json" ;; esac
done <<'EOF'
landing page f=json|?f=json|
landing page Accept: application/json||Accept: application/json
landing page with a trailing slash|/?f=json|
conformance (no links: only OGC URIs)|/conformance?f=json|
collections f=json|/collections?f=json|
collections/ Accept: application/json|/collections/|Accept: application/json
one collection|/collections/pts?f=json|
items f=json|/collections/pts/items?f=json|
items Accept: application/geo+json|/collections/pts/items|Accept: application/geo+json
items gzip asked|/collections/pts/items?f=json&limit=50|Accept-Encoding: gzip
items Range asked|/collections/pts/items?f=json|Range: bytes=0-200
one item|/collections/pts/items/7?f=json|
/api gzip asked|/api?f=json|Accept-Encoding: gzip
EOF
check "landing page by Accept is JSON (not MapServer's HTML default)" "$PY" -c "import json; json.load(open('a2.json'))"
check "the gzip-asked items answer is plain JSON with all 50 features" \
  "$PY" -c "import json, sys; sys.exit(json.load(open('a10.json'))['numberReturned'] != 50)"
check "the Range-asked items answer is the whole document" "$PY" -c "import json; json.load(open('a11.json'))"

links_gate() {  # file: every links[].href (and the collections' links) starts with the gate's address
  "$PY" - "$1" "$G" <<'PYEOF'
import json, sys
d, g = json.load(open(sys.argv[1])), sys.argv[2]
hrefs = [l["href"] for l in d.get("links", [])]
for c in d.get("collections", []):
    hrefs += [l["href"] for l in c.get("links", [])]
bad = [h for h in hrefs if not h.startswith(g)]
print(len(hrefs), "bad:", bad)
sys.exit(1 if bad or not hrefs else 0)
PYEOF
}
check "landing page: every link is the gate's" links_gate a1.json
check "collections: every link is the gate's" links_gate a5.json
check "items: every link (self, next) is the gate's" links_gate a8.json
curl -fsS "$G/collections/pts/items?f=json&limit=1000" >big.json
check_eq "items limit=1000: the gate's cap (100) returned" 100 "$("$PY" -c "import json; print(json.load(open('big.json'))['numberReturned'])")"
check "items limit=1000: next link at the gate, page of 100" \
  "$PY" -c "import json, sys; d = json.load(open('big.json')); n = [l['href'] for l in d['links'] if l['rel'] == 'next'][0]; sys.exit(not (n.startswith('$G/') and 'limit=100&' in n))"
check "the gate warned once that MapServer advertises its own address" \
  test "$(grep -c "capabilities: the map server advertises http://127.0.0.1:$MS; rewritten to http://127.0.0.1:$FRONT" "$tmp/g/gate.err")" = 1
check "/readyz shows the foreign address" grep -q "capabilities_foreign_origin: http://127.0.0.1:$MS" <(curl -sS "http://127.0.0.1:$FRONT/readyz")
curl -fsS -H 'Host: maps.example.org' "$G/collections?f=json" >host.json
check "the public address follows Host" grep -q '"http://maps.example.org/demo/ogcapi/collections' host.json
check "... and never MapServer's" leak host.json

# --- HTML pages: a browser following their links stays at the gate -----------------
html_links() {  # file: the number of href="http..." links, all of them the gate's
  local all gate
  all=$(grep -o 'href="http[^"]*"' "$1" | wc -l); gate=$(grep -o "href=\"$G[/?][^\"]*\"" "$1" | wc -l)
  echo "# $1: $all links, $gate at the gate"
  [ "$all" -gt 0 ] && [ "$all" = "$gate" ]
}
n=0
while IFS='|' read -r what path hdr; do
  n=$((n + 1))
  if [ -n "$hdr" ]; then curl -sS -H "$hdr" "$G$path" >"h$n.html"; else curl -sS "$G$path" >"h$n.html"; fi
  check "HTML $what: no MapServer address" leak "h$n.html"
  check "HTML $what: every link is the gate's" html_links "h$n.html"
done <<'EOF'
landing page f=html|?f=html|
landing page, a browser's Accept||Accept: text/html,application/xhtml+xml,*/*;q=0.8
collections f=html|/collections?f=html|
one collection f=html|/collections/pts?f=html|
items f=html|/collections/pts/items?f=html&limit=5|
items f=html, gzip asked|/collections/pts/items?f=html|Accept-Encoding: gzip
EOF
curl -fsS -H 'Host: maps.example.org' "$G?f=html" >host.html
check "HTML: the public address follows Host" grep -q 'href="http://maps.example.org/demo/ogcapi/collections?f=html"' host.html

# --- bodies that are not JSON, or not well-formed, pass unchanged -------------------
opts=(--public "http://127.0.0.1:$FRONT" --origin "http://127.0.0.1:$MS" --count-default 100)
curl -fsS "$M/collections?f=html" >html.html
for b in 0 1048576; do
  "$CLI" "${opts[@]}" --json "$b" --chunk 100 <html.html >html.out 2>html.err
  check "MapServer's HTML (buffer $b): byte for byte" cmp -s html.html html.out
  check "... reported as not JSON" grep -q "raw=1.*not JSON" html.err
done
curl -fsS "$M/api?f=json" >api.in
head -c 3000 api.in >cut.json
for c in 1 100 65536; do
  "$CLI" "${opts[@]}" --json 8388608 --chunk "$c" <cut.json >cut.out 2>cut.err
  check "a truncated /api (chunks of $c): passes unchanged" cmp -s cut.json cut.out
done
check "... reported as a parse error" grep -q "raw=1.*parse error" cut.err
"$CLI" "${opts[@]}" --json 8388608 <api.in >api.out 2>api.err
check "the whole /api through the CLI: the limit change reported" grep -q "change: get /collections/pts/items: limit maximum 10000 -> 100" api.err

# --- GDAL's OAPIF driver through the gate --------------------------------------------
# GDAL's debug log names every URL it fetched: none may be MapServer's, and the
# gate must have answered each page GDAL asked for.
items_gate() { grep -c '"operation":"items"' "$tmp/g/gate.log"; }
oapif() {  # log [open options...] -> feature count
  local log=$1
  shift
  CPL_DEBUG=ON ogrinfo -ro -al -q "$@" "OAPIF:$G" 2>"$log" | grep -c '^OGRFeature('
}
g0=$(items_gate)
n=$(oapif ogr.err)
pages=$(grep -c "HTTP: Fetch(.*/collections/pts/items" ogr.err)
gate_log_wait "$tmp/g/gate.log" '"operation":"items"' $((g0 + pages))  # the writer gathers lines for up to 20 ms
g1=$(items_gate)
check_eq "ogrinfo OAPIF through the gate reads all 3000 features" 3000 "$n"
check "... GDAL fetched nothing from MapServer's address (it follows the rewritten next links)" \
  bash -c "! grep -q 'Fetch(http://127.0.0.1:$MS' ogr.err"
check "... every page GDAL fetched was answered by the gate ($pages fetched, $((g1 - g0)) at the gate)" \
  test "$pages" -eq $((g1 - g0)) -a "$pages" -ge 30
n=$(oapif ogr2.err -oo PAGE_SIZE=1000)
pages=$(grep -c "HTTP: Fetch(.*/collections/pts/items" ogr2.err)
gate_log_wait "$tmp/g/gate.log" '"operation":"items"' $((g1 + pages))
g2=$(items_gate)
check_eq "ogrinfo OAPIF asking pages of 1000: all 3000 features" 3000 "$n"
check "... GDAL fetched nothing from MapServer's address" bash -c "! grep -q 'Fetch(http://127.0.0.1:$MS' ogr2.err"
check "... in the gate's pages of 100 ($pages fetched, $((g2 - g1)) at the gate)" \
  test "$pages" -eq $((g2 - g1)) -a "$pages" -ge 30 -a "$pages" -le 32
check "... MapServer was never asked for more than 100" bash -c "! grep -q 'limit=1000' '$tmp/ms/run/access.log'"
tap_exit
