#!/usr/bin/env bash
# Budgets, identity, refusals and failure answers, against a stand-in
# upstream that echoes what it receives (test/gate/lib/echo_upstream.py).
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/gate.sh"
ECHO=18300 G1=18301 A1=18302 G2=18303 A2=18304 G3=18305 A3=18306 G4=18307 A4=18308 DEAD=18309
tmp=$(mktemp -d)
echo_pid=
cleanup() { for g in g1 g2 g3 g4; do gate_stop "$tmp/$g"; done; [ -n "$echo_pid" ] && kill "$echo_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null

/usr/bin/python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$tmp/echo.err" & echo_pid=$!
for i in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1; done
CAPS="?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities"   # costs 1 unit

# g1: tiny budget (5 units, 0.2/s), no trusted proxies.
# Keys listed in a tier ("keyed", the same budget) get buckets of their own.
cat >"$tmp/g1.yaml" <<YAML
tiers:
  - {name: public, rate: 0.2, burst: 5}
  - {name: keyed, rate: 0.2, burst: 5, keys: [$("$GATE_BIN" --hash-key partner-1), $("$GATE_BIN" --hash-key e), $("$GATE_BIN" --hash-key 'Bearer tok-1')]}
YAML
gate_start "$tmp/g1" "$G1" "$A1" "http://127.0.0.1:$ECHO" --config "$tmp/g1.yaml" --burst 5 --rate 0.2 || { not_ok "gate starts"; tap_exit; }
st=()
for i in 1 2 3 4 5 6; do st+=("$(curl -s -o /dev/null -D "$tmp/h$i" -w '%{http_code}' "http://127.0.0.1:$G1/$CAPS")"); done
check_eq "five 1-unit requests pass, the sixth is refused" "200 200 200 200 200 429" "${st[*]}"
check "success carries X-RateLimit-Remaining" grep -qi '^X-RateLimit-Remaining: 4' "$tmp/h1"
check "success carries RateLimit-Policy (IETF draft)" grep -qiE '^RateLimit-Policy: "public";q=5;w=25' "$tmp/h1"
ra=$(sed -nE 's/^[Rr]etry-[Aa]fter: ([0-9]+)\r?$/\1/p' "$tmp/h6")
check "429 has an integer Retry-After >= 1 (got '$ra')" [ -n "$ra" ] && [ "$ra" -ge 1 ]
check "429 has RateLimit and X-RateLimit-Remaining: 0" grep -qi '^X-RateLimit-Remaining: 0' "$tmp/h6"
body=$(curl -s "http://127.0.0.1:$G1/$CAPS")
check "429 body is a WMS 1.3.0 exception report" grep -q '<ServiceExceptionReport version="1.3.0" xmlns="http://www.opengis.net/ogc">' <<<"$body"
check "429 body says when to retry" grep -q 'Retry after [0-9]* s' <<<"$body"
# A WFS 2.0 request costing 1 unit like the others: a GetFeature of COUNT=1
# costs ~0.04, which the bucket refills in 0.2 s — on a loaded machine it passed.
wfs429=$(curl -s -w '\nstatus=%{http_code}' "http://127.0.0.1:$G1/?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetCapabilities")
check "WFS 2.0 request over budget: 429" grep -q '^status=429$' <<<"$wfs429"
check "429 for WFS 2.0 is an OWS 1.1 ExceptionReport" grep -q '<ows:ExceptionReport xmlns:ows="http://www.opengis.net/ows/1.1"' <<<"$wfs429"
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Forwarded-For: 203.0.113.77' "http://127.0.0.1:$G1/$CAPS")
check_eq "X-Forwarded-For from an untrusted peer does not change the key" 429 "$st"
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Api-Key: partner-1' "http://127.0.0.1:$G1/$CAPS")
check_eq "an API key listed in a tier is its own bucket" 200 "$st"
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'authorization: BEARER  tok-1' "http://127.0.0.1:$G1/$CAPS")
check_eq "header name and auth scheme compared case-insensitively" 200 "$st"
st=""
for k in made-up-1 made-up-2 made-up-3; do st="$st $(curl -s -o /dev/null -w '%{http_code}' -H "X-Api-Key: $k" "http://127.0.0.1:$G1/$CAPS")"; done
check_eq "made-up API keys are charged to the exhausted address bucket" " 429 429 429" "$st"
check_eq "... and so is a made-up Authorization" 429 "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer nope' "http://127.0.0.1:$G1/$CAPS")"
for p in /healthz /livez /readyz; do
  check_eq "$p exempt from the exhausted budget" 200 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$G1$p")"
done
big="?SERVICE=WMS&VERSION=1.1.1&REQUEST=GetMap&LAYERS=x&SRS=EPSG:4326&BBOX=0,0,10,10&WIDTH=512&HEIGHT=512&FORMAT=image/png"
curl -s -D "$tmp/hn" -o "$tmp/bn" -H 'X-Api-Key: other' "http://127.0.0.1:$G1/$big"
check "a cost above the tier's capacity is refused as never fitting" grep -q 'can never succeed' "$tmp/bn"
check "... in the WMS 1.1.1 format" grep -q '<ServiceExceptionReport version="1.1.1">' "$tmp/bn"
check "... with no Retry-After" bash -c "! grep -qi '^Retry-After' '$tmp/hn'"
m=$(curl -s "http://127.0.0.1:$A1/metrics")
check "metrics count throttled requests by class" grep -qE '^ogc_gate_requests_total\{class="other",verdict="throttled"\} [1-9]' <<<"$m"
check "metrics count cost charged" grep -qE '^ogc_gate_cost_charged_total\{class="other"\} [0-9]' <<<"$m"
check "metrics have upstream latency" grep -qE '^ogc_gate_upstream_latency_seconds_count [1-9]' <<<"$m"
b=$(curl -s "http://127.0.0.1:$A1/buckets")
check "bucket snapshot lists hashed keys with tokens and throttled counts" \
  /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.argv[1]); k=[x for x in d["buckets"] if x["throttled"]>0 and x["key"].startswith("ip:")]; assert k and "tokens" in k[0] and "last_request_s_ago" in k[0]' "$b"
plain=$("$GATE_BIN" --hash-key partner-1)
check "/buckets shows keyed hashes, never the plain SHA-1 of a credential" \
  bash -c "grep -q '\"key:' <<<'$b' && ! grep -q '$plain' <<<'$b'"
check "admin endpoints are not on the public port" [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$G1/metrics")" != 200 ] 

# g2: trusted proxy 127.0.0.1, config file, shadow off; then reloads.
cat >"$tmp/g2.yaml" <<YAML
identity:
  trusted_proxies: [127.0.0.1/32]
tiers:
  - {name: public, rate: 0.2, burst: 3}
  - {name: partner, rate: 100, burst: 1000, keys: [$("$GATE_BIN" --hash-key gold-key)]}
caps: {max_features: 50}
limits: {upstream_timeout: 1}
YAML
awk '/^## Config file/{f=1} f&&/^```yaml/{p=1;next} p&&/^```/{exit} p' "$root/doc/gate.md" >"$tmp/doc.yaml"
check "the example config in doc/gate.md is valid" bash -c "[ -s '$tmp/doc.yaml' ] && '$GATE_BIN' --config '$tmp/doc.yaml' --check-config >/dev/null"
check "--check-config accepts the file" bash -c "'$GATE_BIN' --config '$tmp/g2.yaml' --check-config >/dev/null"
gate_start "$tmp/g2" "$G2" "$A2" "http://127.0.0.1:$ECHO" --config "$tmp/g2.yaml" || not_ok "gate 2 starts"
for i in 1 2 3 4; do curl -s -o /dev/null -H 'X-Forwarded-For: 198.51.100.1' "http://127.0.0.1:$G2/$CAPS"; done
check_eq "behind a trusted proxy the forwarded client is limited" 429 \
  "$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Forwarded-For: 198.51.100.1' "http://127.0.0.1:$G2/$CAPS")"
check_eq "... and another forwarded client has its own bucket" 200 \
  "$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Forwarded-For: 198.51.100.2' "http://127.0.0.1:$G2/$CAPS")"
check_eq "a client cannot pick its key: left-most spoofed hops are ignored" 429 \
  "$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Forwarded-For: 10.9.9.9, 198.51.100.1' "http://127.0.0.1:$G2/$CAPS")"
h=$(curl -s -D - -o /dev/null -H 'X-Api-Key: gold-key' "http://127.0.0.1:$G2/$CAPS")
check "an API key listed in a tier gets that tier's budget" grep -q '"partner";q=1000' <<<"$h"
fwd=$(curl -s "http://127.0.0.1:$G2/collections/x/items?limit=5000&f=json" -H 'X-Api-Key: gold-key')
check "OGC API limit above the maximum is clamped, not refused" grep -q '^GET /collections/x/items?limit=50&f=json' <<<"$fwd"
fwd=$(curl -s -H 'X-Api-Key: gold-key' -H 'Content-Type: application/json' --data '{"collections":["x"],"limit":5000}' "http://127.0.0.1:$G2/search")
check "OGC API search body: limit clamped in the forwarded body" grep -q '"limit":50' <<<"$fwd"
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Api-Key: gold-key' -H 'Content-Type: application/json' --data '{"limit":' "http://127.0.0.1:$G2/search")
check_eq "OGC API search with a broken body: 400, not forwarded" 400 "$st"
st=$(curl -s -o "$tmp/slow" -w '%{http_code}' -H 'X-Api-Key: gold-key' "http://127.0.0.1:$G2/slow?SERVICE=WFS&VERSION=2.0.0&REQUEST=GetCapabilities")
check_eq "upstream timeout gives 504" 504 "$st"
check "... as an OWS exception report" grep -q 'ows:ExceptionReport' "$tmp/slow"

# SIGHUP: a new cap applies, a broken file is refused, connections survive.
curl -s -o "$tmp/during" -w '%{http_code}' -H 'X-Api-Key: gold-key' "http://127.0.0.1:$G2/collections/x/items?limit=10" >"$tmp/during.st" &
bg=$!
sed -i 's/max_features: 50/max_features: 7/' "$tmp/g2.yaml"
kill -HUP "$(cat "$tmp/g2/gate.pid")"; sleep 0.3
wait "$bg"
check_eq "request in flight across SIGHUP completes" 200 "$(cat "$tmp/during.st")"
fwd=$(curl -s "http://127.0.0.1:$G2/collections/x/items?limit=5000" -H 'X-Api-Key: gold-key')
check "SIGHUP reloaded the config (limit now clamped to 7)" grep -q '^GET /collections/x/items?limit=7$' <<<"$fwd"
echo 'tiers: [{name: public, rate: -1, burst: 3}]' >"$tmp/g2.yaml"
check "--check-config rejects a bad file" bash -c "! '$GATE_BIN' --config '$tmp/g2.yaml' --check-config 2>/dev/null"
kill -HUP "$(cat "$tmp/g2/gate.pid")"; sleep 0.3
fwd=$(curl -s "http://127.0.0.1:$G2/collections/x/items?limit=5000" -H 'X-Api-Key: gold-key')
check "a bad reload keeps the running config" grep -q '^GET /collections/x/items?limit=7$' <<<"$fwd"
check "the failed reload is reported" grep -q 'reload failed' "$tmp/g2/gate.err"
# A connection that repeats its request reuses that request's assessment
# (session.cpp): after a reload the same request on the same connection is
# judged by the new configuration, not the one it was first assessed under,
# nor the one the connection held while it waited idle across the reload.
good="identity: {trusted_proxies: [127.0.0.1/32]}
tiers:
  - {name: public, rate: 0.2, burst: 3}
  - {name: partner, rate: 100, burst: 1000, keys: [$("$GATE_BIN" --hash-key gold-key)]}
caps: {max_features: 9}
limits: {upstream_timeout: 1}"
seen=$(/usr/bin/python3 - "$G2" "$(cat "$tmp/g2/gate.pid")" "$tmp/g2.yaml" "$good" <<'PY'
import os, re, signal, socket, sys, time
port, pid, conf, good = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = socket.create_connection(('127.0.0.1', port), timeout=5)
f = s.makefile('rb')
def ask():
    s.sendall(b'GET /collections/x/items?limit=5000 HTTP/1.1\r\nHost: x\r\nX-Api-Key: gold-key\r\n\r\n')
    f.readline()
    n = 0
    while True:
        h = f.readline().strip()
        if not h:
            break
        if h.lower().startswith(b'content-length:'):
            n = int(h.split(b':')[1])
    m = re.search(rb'limit=(\d+)', f.read(n))
    return m.group(1).decode() if m else '?'
seen = [ask(), ask()]
with open(conf, 'w') as c:
    c.write(good + '\n')
os.kill(pid, signal.SIGHUP)
time.sleep(0.5)
seen.append(ask())
print(' '.join(seen))
PY
)
check_eq "a request repeated on one connection is judged by the reloaded config" "7 7 9" "$seen"

# Malformed and oversize requests: an answer, never a crash.
resp=$(printf 'GET / HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n' | timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$G1; cat >&3; head -1 <&3")
check "malformed HTTP gets 400" grep -q '^HTTP/1.1 400' <<<"$resp"
st=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Big: $(head -c 20000 /dev/zero | tr '\0' a)" "http://127.0.0.1:$G1/$CAPS")
check_eq "oversize header gets 431" 431 "$st"
head -c 2000000 /dev/zero >"$tmp/body"
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: text/xml' --data-binary @"$tmp/body" "http://127.0.0.1:$G1/")
check_eq "oversize body gets 413" 413 "$st"
head -c 5000 /dev/zero | tr '\0' a >"$tmp/b5k"
t=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' -H 'Expect: 100-continue' -H 'X-Api-Key: e' --data-binary @"$tmp/b5k" "http://127.0.0.1:$G1/x")
check "Expect: 100-continue answered at once (got '$t')" awk -v t="$t" 'BEGIN { split(t, a, " "); exit !(a[1] == 200 && a[2] < 0.5) }'
st=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$G1/?SERVICE=WMS&REQUEST=GetMap&WIDTH=%zz")
check_eq "bad percent-encoding gets an exception (200 for WMS)" 200 "$st"
st=$(curl -s -o "$tmp/z" -w '%{http_code}' -H 'X-Api-Key: z' "http://127.0.0.1:$G1/tiles/40/1/1.png")
check_eq "XYZ zoom beyond the maximum gets 400" 400 "$st"
check "gate still alive after all that" kill -0 "$(cat "$tmp/g1/gate.pid")"

# g4: buckets stay exact under the gate's threads: 200 requests from 16
# parallel clients against a 50-unit bucket that barely refills.
gate_start "$tmp/g4" "$G4" "$A4" "http://127.0.0.1:$ECHO" --threads 4 --burst 50 --rate 0.01 || not_ok "gate 4 starts"
seq 1 200 | xargs -P 16 -I{} curl -s -o /dev/null -w '%{http_code}\n' "http://127.0.0.1:$G4/$CAPS" >"$tmp/par"
check_eq "under 16 parallel clients and 4 threads exactly 50 of 200 pass" "50 150" \
  "$(grep -c '^200$' "$tmp/par") $(grep -c '^429$' "$tmp/par")"

# g3: upstream down, shadow mode.
gate_start "$tmp/g3" "$G3" "$A3" "http://127.0.0.1:$DEAD" --burst 2 --rate 0.1 --shadow || not_ok "gate 3 starts"
curl -s -D "$tmp/h3" -o "$tmp/b3" "http://127.0.0.1:$G3/$CAPS"
check "upstream down gives 502" grep -q '^HTTP/1.1 502' "$tmp/h3"
check "... as a WMS 1.3.0 exception report" grep -q '<ServiceExceptionReport version="1.3.0"' "$tmp/b3"
wfs=$(curl -s "http://127.0.0.1:$G3/?SERVICE=WFS&VERSION=1.1.0&REQUEST=GetFeature&TYPENAME=x&MAXFEATURES=1")
check "... and as an OWS 1.0 report for WFS 1.1" grep -q '<ows:ExceptionReport xmlns:ows="http://www.opengis.net/ows" version="1.0.0"' <<<"$wfs"
check_eq "/readyz is 503 when the upstream is down" 503 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$G3/readyz")"
check_eq "/livez stays 200" 200 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$G3/livez")"
# Upstream failures are refunded 90 %: it takes ~20 of them to empty 2 units.
for i in $(seq 1 30); do curl -s -o /dev/null "http://127.0.0.1:$G3/$CAPS"; done
check "shadow mode never refuses (no 429) but logs the verdict" gate_log_wait "$tmp/g3/gate.log" '"verdict":"shadow_throttled"'
check "shadow mode: no 429 was sent" bash -c "! grep -q '\"status\":429' '$tmp/g3/gate.log'"

# SIGTERM drains: an in-flight request completes, then the gate exits.
curl -s -o /dev/null -w '%{http_code}' -H 'X-Api-Key: gold-key' "http://127.0.0.1:$G2/slowish" >"$tmp/drain.st" &
bg=$!
sleep 0.3
pid=$(cat "$tmp/g2/gate.pid"); kill -TERM "$pid"
wait "$bg"
check_eq "SIGTERM lets the in-flight request finish" 200 "$(cat "$tmp/drain.st")"
for i in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
check "SIGTERM then exits" bash -c "! kill -0 $pid 2>/dev/null"
tap_exit
