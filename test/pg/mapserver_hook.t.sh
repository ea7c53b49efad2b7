#!/usr/bin/env bash
# Two enforcement points, one cost model, with real parts end to end:
#   curl / GDAL / OWSLib -> ogc-gate -> MapServer 8 (FastCGI under lighttpd)
#   -> PostGIS, where MapServer's own SQL is priced by the pricing hook
#   (ogc_throttle.mode = 'reject' for MapServer's role, a small budget).
# Small maps pass both; a whole-extent map or feature request passes the gate
# and is refused by the database, which the client sees as an OGC exception;
# a map over the gate's pixel cap is refused by the gate before any SQL runs.
set -uo pipefail
. "$(dirname "$0")/common.sh"
. "$root/test/gate/lib/mapserver.sh"
. "$root/test/gate/lib/gate.sh"
MS=18600 GATE=18601 ADMIN=18602
WORK=$(mktemp -d); chmod 755 "$WORK"  # psql runs as postgres from here
cleanup_all() { gate_stop "$WORK/g"; ms_stop "$WORK/ms"; rm -rf "$WORK"; cleanup; }
trap cleanup_all EXIT
export GDAL_HTTP_TIMEOUT=20 CPL_CURL_VERBOSE=NO GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR

[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null
# ERRORs are logged (pg.sh's log_min_messages = log leaves them out), with
# the role and the SQLSTATE; log_statement shows the SQL MapServer sends.
cluster_up 55470 "shared_preload_libraries = 'ogc_throttle'" "log_min_messages = warning" \
  "log_statement = 'all'" "log_line_prefix = '%m [%p] %u %e '"
# 4000 points on a 0.5 x 0.4 degree grid over Europe (-10..29.5 E, 35..54.6 N).
# MapServer's role: every statement priced and charged, refused when short.
# A whole-extent search is priced at cost_max = capacity (CAP = 6 ms: the
# estimate of MapServer's whole-extent SQL over 4000 points, ~10 ms, reaches
# it; a small box's is a few hundredths; WFS's LIMIT 1001 ~3): it needs a full
# bucket, so after any small request it is refused (53T01); refill is slow.
CAP=6
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   CREATE TABLE pts AS SELECT i AS id, 'p' || i AS name,
     ST_SetSRID(ST_MakePoint(-10 + (i % 80) * 0.5, 35 + (i / 80) * 0.4), 4326)::geometry(Point, 4326) AS geom
     FROM generate_series(0, 3999) i;
   CREATE INDEX ON pts USING gist (geom);
   ANALYZE pts;
   CREATE ROLE mapserver LOGIN;
   GRANT SELECT ON pts TO mapserver;
   ALTER ROLE mapserver SET ogc_throttle.mode = 'reject';
   ALTER ROLE mapserver SET ogc_throttle.capacity = $CAP;
   ALTER ROLE mapserver SET ogc_throttle.cost_max = $CAP;
   ALTER ROLE mapserver SET ogc_throttle.rate = 0.01;
   -- Checks the estimates end to end; settling on measured time: metering.t.sh.
   ALTER ROLE mapserver SET ogc_throttle.true_up = off;" >/dev/null || { not_ok "setup"; tap_exit; }

ms_start_postgis "$WORK/ms" "$MS" "host=$DIR port=$PORT dbname=postgres user=mapserver" pts 4326 \
  "http://127.0.0.1:$GATE/" || { not_ok "MapServer starts"; tap_exit; }
# The gate's own budget is large: everything below passes it except the cap.
gate_start "$WORK/g" "$GATE" "$ADMIN" "http://127.0.0.1:$MS" --burst 100000 --rate 1000 --max-pixels 1000000 \
  || { not_ok "gate starts"; tap_exit; }
cd "$WORK" || exit 1
G=http://127.0.0.1:$GATE
WMS="SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=pts&STYLES=&CRS=EPSG:4326&FORMAT=image/png"
MS_ERR=$WORK/ms/run/lighttpd.err

stats() { q "SELECT statements || ' ' || refused || ' ' || cost_charged FROM throttle_identity_stats WHERE identity = 'mapserver'"; }
field() { echo "$1" | cut -d' ' -f"$2"; }
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; }
# gate_line ID: the gate's JSON log line for X-Request-Id ID (the log is batched).
gate_line() {
  local i
  for i in $(seq 1 30); do grep -F "\"request_id\":\"$1\"" "$WORK/g/gate.log" && return 0; sleep 0.1; done
  return 1
}
# MapServer's SQL in the server log: admitted statements are logged when they
# execute; a refused one fails at Bind (ExecutorStart runs there in the
# extended protocol MapServer uses), so only its ERROR's STATEMENT line shows.
ms_sql_admitted() { grep -E '^.* mapserver 00000 LOG:  execute <unnamed>: SELECT .*ST_Intersects' "$DIR/server.log" | sed 's/.*execute <unnamed>: //'; }
ms_sql_refused() { grep -E ' mapserver (53|54)T01 STATEMENT:  SELECT .*ST_Intersects' "$DIR/server.log"; }

# --- a small GetMap through the gate: a PNG, charged in the database ---------
curl -s -o small.png -H 'X-Request-Id: small-map' "$G/?$WMS&BBOX=40,0,41,1&WIDTH=256&HEIGHT=256"
check "small GetMap through the gate: MapServer answers with a PNG" is_png small.png
s=$(stats)
check_eq "the database priced one statement of role mapserver and refused none" "1 0" "$(field "$s" 1) $(field "$s" 2)"
charged=$(field "$s" 3)
check "... and charged it (cost_charged $charged > 0)" fcmp "${charged:-0}" ">" 0
sql=$(ms_sql_admitted | tail -n 1)
echo "# MapServer's SQL: $sql"
check "MapServer's SQL is one literal ST_Intersects(\"geom\", ST_GeomFromText('POLYGON((...))',4326))" \
  grep -qE "^SELECT .* FROM pts WHERE ST_Intersects\(\"geom\", ST_GeomFromText\('POLYGON\(\([-0-9. ,]+\)\)',4326\)\)$" <<<"$sql"
explain=$(q "SELECT call || ' | ' || cost FROM throttle_explain(\$q\$$sql\$q\$)")
echo "$explain" | sed 's/^/# explain: /'
check "throttle_explain of that SQL prices the ST_Intersects box by the planner's estimate (a literal box)" \
  grep -qE "^#1 ST_Intersects box .* by the planner's estimate" <<<"$explain"
total=$(echo "$explain" | sed -n 's/^total | //p')
check "... at the price the database charged ($total vs $charged)" \
  awk -v a="${total:-x}" -v b="${charged:-y}" 'BEGIN { exit !(a + 0 > 0 && (a - b) ^ 2 < 1e-12) }'
peek=$(q "SELECT round(tokens::numeric, 4) || ' ' || capacity FROM throttle_peek('mapserver')")
tokens=$(field "$peek" 1)
check_eq "throttle_peek shows mapserver's own bucket (capacity $CAP)" "$CAP" "$(field "$peek" 2)"
check "... short by the charge (tokens $tokens, charged $charged; refill 0.01/s)" \
  awk -v t="${tokens:-99}" -v c="${charged:-0}" -v cap="$CAP" 'BEGIN { exit !(t >= cap - c - 1e-6 && t <= cap - c + 0.5) }'
line=$(gate_line small-map)
check "the gate passed it and charged its own budget" \
  bash -c 'grep -q "\"verdict\":\"pass\"" <<<"$1" && grep -q "\"upstream_status\":200" <<<"$1" && grep -qE "\"cost\":[1-9]" <<<"$1"' _ "$line"

# --- GDAL's WMS driver through the gate ------------------------------------
cat >small-wms.xml <<XML
<GDAL_WMS><Service name="WMS"><Version>1.1.1</Version><ServerUrl>$G/?</ServerUrl>
<Layers>pts</Layers><SRS>EPSG:4326</SRS><ImageFormat>image/png</ImageFormat></Service>
<DataWindow><UpperLeftX>5</UpperLeftX><UpperLeftY>46</UpperLeftY><LowerRightX>6</LowerRightX><LowerRightY>45</LowerRightY>
<SizeX>256</SizeX><SizeY>256</SizeY></DataWindow><BlockSizeX>256</BlockSizeX><BlockSizeY>256</BlockSizeY>
<BandsCount>3</BandsCount></GDAL_WMS>
XML
before=$(field "$(stats)" 1)
gdal_translate -q -of PNG small-wms.xml gdal-small.png >gdal-small.out 2>&1
check "gdal_translate (WMS 1.1.1) of a 1-degree box through the gate writes a PNG" is_png gdal-small.png
after=$(stats)
check "... its GetMap was priced in the database too ($before -> $(field "$after" 1) statements), none refused" \
  bash -c '[ "$1" -gt "$2" ] && [ "$3" = 0 ]' _ "$(field "$after" 1)" "$before" "$(field "$after" 2)"

# --- the gate's cap: refused at the edge, no SQL at all ----------------------
before=$(stats)
curl -s -o cap.xml -H 'X-Request-Id: cap-map' "$G/?$WMS&BBOX=-90,-180,90,180&WIDTH=4096&HEIGHT=4096"
check "a 4096x4096 GetMap is refused by the gate (its pixel cap), as a WMS exception" \
  grep -q 'this service allows at most 1000000 pixels' cap.xml
check_eq "... and never reached the database (mapserver's statistics unchanged)" "$before" "$(stats)"
check "... the gate's log says cap, upstream_status 0" \
  bash -c 'grep -q "\"verdict\":\"cap\"" <<<"$1" && grep -q "\"upstream_status\":0" <<<"$1"' _ "$(gate_line cap-map)"

# --- a whole-extent GetMap: passes the gate, refused by the database ---------
curl -s -D big.head -o big.xml -H 'X-Request-Id: big-map' "$G/?$WMS&BBOX=-90,-180,90,180&WIDTH=256&HEIGHT=256"
echo "# client saw: $(tr -s '\n' ' ' <big.xml | sed 's/.*<ServiceException>//; s/<\/ServiceException>.*//')"
check "whole-extent GetMap: the client gets MapServer's ServiceExceptionReport, not a map" \
  grep -q "<ServiceExceptionReport" big.xml
check "... saying its PostGIS query failed (MapServer shows no database text: 'Check server logs')" \
  grep -q "msPostGISLayerWhichShapes(): Query error. Error executing query. Check server logs" big.xml
s=$(stats)
check_eq "the database refused one statement of role mapserver" 1 "$(field "$s" 2)"
check "the server log has the refusal: SQLSTATE 53T01/54T01, role mapserver, priced as ST_Intersects" \
  bash -c 'grep -E " mapserver (53|54)T01 ERROR:  ogc_throttle: statement refused" "$1" >/dev/null &&
           grep -E " mapserver (53|54)T01 DETAIL:  The statement costs $2; .*priced as: #1 ST_Intersects box" "$1" >/dev/null' _ "$DIR/server.log" "$CAP"
check "... for MapServer's whole-extent SQL" \
  grep -qF "ST_GeomFromText('POLYGON((-180 -90,-180 90,180 90,180 -90,-180 -90))',4326)" <<<"$(ms_sql_refused)"
check "MapServer's error log has the database's reason (ogc_throttle: statement refused ... Retry after)" \
  bash -c 'grep -q "msPostGISLayerWhichShapes(): Error (ERROR:  ogc_throttle: statement refused: budget exhausted for identity \"mapserver\"" "$1" &&
           grep -q "HINT:  Retry after" "$1"' _ "$MS_ERR"
line=$(gate_line big-map)
echo "# gate: $line"
check "two enforcement points: the gate passed it (verdict pass, upstream_status 200, status 200)" \
  bash -c 'grep -q "\"verdict\":\"pass\"" <<<"$1" && grep -q "\"upstream_status\":200" <<<"$1" && grep -q "\"status\":200" <<<"$1"' _ "$line"
check "... with budget to spare in its own bucket (RateLimit headers)" \
  grep -qiE '^ratelimit: .*r=[1-9]' big.head

# --- OWSLib through the gate --------------------------------------------------
/usr/bin/python3 - "$G/" >owslib.out 2>&1 <<'PY'
import sys
from owslib.wms import WebMapService
from owslib.wfs import WebFeatureService
from owslib.util import ServiceException
u = sys.argv[1]
def run(name, f):
    try:
        f(); print(name, 'ok')
    except ServiceException as e:
        print(name, 'ServiceException:', ' '.join(str(e).split()))
    except Exception as e:
        print(name, type(e).__name__ + ':', ' '.join(str(e).split())[:300])
w = WebMapService(u, version='1.1.1')
def small():
    img = w.getmap(layers=['pts'], srs='EPSG:4326', bbox=(10, 45, 11, 46), size=(256, 256), format='image/png').read()
    assert img[:8] == b'\x89PNG\r\n\x1a\n', img[:200]
run('wms-small', small)
run('wms-big', lambda: w.getmap(layers=['pts'], srs='EPSG:4326', bbox=(-180, -90, 180, 90), size=(256, 256),
                                format='image/png').read())
f = WebFeatureService(u, version='2.0.0')
run('wfs-big', lambda: f.getfeature(typename=['ms:pts']).read())
PY
sed 's/^/# owslib: /' owslib.out
ms_sql_admitted | tail -n 2 | cut -c1-400 | sed 's/^/# last admitted: /'
check "OWSLib WMS 1.1.1: a small GetMap is a PNG" grep -qx 'wms-small ok' owslib.out
check "OWSLib WMS 1.1.1: the whole-extent GetMap raises ServiceException (Query error ... Check server logs)" \
  grep -q '^wms-big ServiceException: .*msPostGISLayerWhichShapes(): Query error. Error executing query' owslib.out
# MapServer bounds an unbounded GetFeature itself (LIMIT 1001): the limit
# directly bounds the scan, so it is priced at 1001 rows (about 3 ms with the encoding of each row), not at
# the whole extent, and fits what the bucket has left.
wfs_served() { grep -qx 'wfs-big ok' owslib.out && ms_sql_admitted | grep -q 'LIMIT 1001$'; }
check "OWSLib WFS 2.0: an unbounded GetFeature, which MapServer sends with LIMIT 1001, is priced by that limit and served" wfs_served

# --- every ST_Intersects statement MapServer sent was priced ------------------
s=$(stats)
n_ok=$(ms_sql_admitted | wc -l); n_refused=$(ms_sql_refused | wc -l)
echo "# mapserver: $s (statements refused cost_charged); log: $n_ok admitted, $n_refused refused"
check_eq "throttle_identity_stats counts every box query MapServer sent (server log: $n_ok + $n_refused)" \
  "$((n_ok + n_refused))" "$(field "$s" 1)"
check_eq "... and the refusals (the whole-extent GetMap twice)" "2 2" "$n_refused $(field "$s" 2)"
sum=0
while IFS= read -r sql; do
  c=$(q "SELECT cost FROM throttle_explain(\$q\$$sql\$q\$) WHERE call = 'total'")
  sum=$(awk -v a="$sum" -v b="$c" 'BEGIN { printf "%.9f", a + b }')
done < <(ms_sql_admitted)
check "what the database charged is the sum of throttle_explain over the admitted SQL ($sum vs $(field "$s" 3))" \
  awk -v a="$sum" -v b="$(field "$s" 3)" 'BEGIN { exit !(a > 0 && (a - b) ^ 2 < 1e-10) }'

tap_exit
