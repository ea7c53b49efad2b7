#!/usr/bin/env bash
# Per-request state on a kept-alive connection, Host handling, methods that
# never go upstream, Set-Cookie on an answer that was not shared, unreadable
# TileMatrix values, the Prometheus page and the admin token.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/gate.sh"
GATE=18501 ADMIN=18502 ECHO=18503 GATE2=18504 ADMIN2=18505
tmp=$(mktemp -d)
echo_pid=
cleanup() { gate_stop "$tmp/g"; gate_stop "$tmp/g2"; [ -n "$echo_pid" ] && kill "$echo_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null
raw() { python3 "$root/test/gate/lib/raw_http.py" "$@"; }

ECHO_LOG="$tmp/echo.log" python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$tmp/echo.err" & echo_pid=$!
for i in $(seq 1 30); do curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1; done
: >"$tmp/echo.log"
gate_start "$tmp/g" "$GATE" "$ADMIN" "http://127.0.0.1:$ECHO" --burst 100000 --rate 10000 || { not_ok "gate starts"; tap_exit; }
ok "gate started before an echo upstream"

# --- the request id of an error answer on a kept-alive connection ---------
good="'GET /first HTTP/1.1\r\nHost: g\r\nX-Request-Id: first-1\r\n\r\n'"
big=$(printf 'x%.0s' $(seq 1 20000))
out=$(raw "$GATE" "$good" "'GET /healthz HTTP/1.1\r\nHost: g\r\nX-Big: $big\r\n\r\n'")
id2=$(awk '/^--$/{n++} n==1' <<<"$out" | sed -nE 's/^X-Request-Id: (.*)$/\1/p')
check "431 after a good request on one connection: status 431" grep -q '^HTTP/1.1 431' <<<"$out"
check "431 carries a fresh request id, not the previous one ($id2)" bash -c "[[ '$id2' =~ ^[0-9a-f]{32}$ ]]"
out=$(raw "$GATE" "$good" "'POST /x HTTP/1.1\r\nHost: g\r\nX-Request-Id: second-2\r\nContent-Length: 5000000\r\n\r\n'")
check "413 answers with its own request's id" bash -c "awk '/^--\$/{n++} n==1' <<<'$out' | grep -q '^X-Request-Id: second-2\$'"
check "413 status" grep -q '^HTTP/1.1 413' <<<"$out"
out=$(raw "$GATE" "$good" "'GARBAGE\r\n\r\n'")
id3=$(awk '/^--$/{n++} n==1' <<<"$out" | sed -nE 's/^X-Request-Id: (.*)$/\1/p')
check "400 for a malformed request after a good one" grep -q '^HTTP/1.1 400' <<<"$out"
check "400 carries a fresh request id, not the previous one ($id3)" bash -c "[[ '$id3' =~ ^[0-9a-f]{32}$ ]]"
check "the 413 is logged under its own id" gate_log_wait "$tmp/g/gate.log" '"request_id":"second-2","service":"unknown","status":413'
gate_log_wait "$tmp/g/gate.log" '"request_id":"first-1"' 3  # the third came after the 413
check_eq "only the three good requests are logged under their id" 3 "$(grep -c '"request_id":"first-1"' "$tmp/g/gate.log")"

# --- Host --------------------------------------------------------------
out=$(raw "$GATE" "'GET /a HTTP/1.1\r\nX: y\r\n\r\n'")
check "HTTP/1.1 without Host: 400" grep -q '^HTTP/1.1 400' <<<"$out"
out=$(raw "$GATE" "'GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n'")
check "two Host headers: 400" grep -q '^HTTP/1.1 400' <<<"$out"
out=$(raw "$GATE" "'GET /healthz HTTP/1.0\r\n\r\n'")
check "HTTP/1.0 without Host is still served" grep -q '^HTTP/1.1 200' <<<"$out"
check_eq "none of them reached the upstream" 0 "$(grep -c '^GET /a' "$tmp/echo.log")"

# --- methods that never go upstream -----------------------------------------
st=$(curl -s -o /dev/null -w '%{http_code}' -X TRACE "http://127.0.0.1:$GATE/trace-me")
check_eq "TRACE answered 405" 405 "$st"
hdr=$(curl -s -D - -o /dev/null -X OPTIONS "http://127.0.0.1:$GATE/options-me")
check "OPTIONS answered 204 by the gate with Allow" bash -c "grep -q '^HTTP/1.1 204' <<<'$hdr' && grep -qi '^Allow: GET, HEAD, POST, OPTIONS' <<<'$hdr'"
check_eq "neither TRACE nor OPTIONS reached the upstream" 0 "$(grep -cE '^(TRACE|OPTIONS) ' "$tmp/echo.log")"

# --- Set-Cookie on a coalescable answer nobody shared -----------------------
hdr=$(curl -s -D - -o /dev/null "http://127.0.0.1:$GATE/tiles/setcookie/3/1/2.png")
check "a tile answer with Set-Cookie, not shared, keeps it" grep -qi '^Set-Cookie: sess=abc123' <<<"$hdr"

# --- TileMatrix values without a zoom ---------------------------------------
: >"$tmp/echo.log"
body=$(curl -s "http://127.0.0.1:$GATE/?SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER=a&STYLE=s&FORMAT=image/png&TILEMATRIXSET=g&TILEMATRIX=top&TILEROW=0&TILECOL=0")
check "KVP TILEMATRIX=top refused with an OWS report naming TILEMATRIX" grep -q 'locator="TILEMATRIX"' <<<"$body"
check_eq "... and not forwarded (priced as zoom 0 before)" 0 "$(grep -c 'TILEMATRIX=top' "$tmp/echo.log")"

# --- Prometheus page ---------------------------------------------------------
curl -s -o "$tmp/metrics" "http://127.0.0.1:$ADMIN/metrics"; m=$(cat "$tmp/metrics")
for name in ogc_gate_connections_open ogc_gate_connections_max 'ogc_gate_connections_refused_total{limit="per_address"}' \
  ogc_gate_accept_backoffs_total ogc_gate_handler_exceptions_total ogc_gate_requests_total; do
  check "/metrics has $name" grep -qF "$name" <<<"$m"
done
check "/metrics has no exponent-shortened numbers" bash -c "! grep -qE ' [0-9.]+e[+-][0-9]+\$' '$tmp/metrics'"

# --- admin access -------------------------------------------------------------
"$GATE_BIN" --listen 127.0.0.1:$GATE2 --admin-listen 0.0.0.0:$ADMIN2 --upstream "http://127.0.0.1:$ECHO" \
  >"$tmp/open.out" 2>&1 & pid=$!
for i in $(seq 1 30); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
if kill -0 $pid 2>/dev/null; then kill $pid; not_ok "gate with a non-loopback admin listener and no token refuses to start"
else wait $pid; rc=$?; check "gate with a non-loopback admin listener and no token refuses to start (rc $rc)" [ "$rc" != 0 ]; fi
check "... and says why" grep -q 'admin.token' "$tmp/open.out"
printf 'admin:\n  token: "s3cr3t-admin-token-0123"\n' >"$tmp/admin.yaml"
gate_start "$tmp/g2" "$GATE2" "$ADMIN2" "http://127.0.0.1:$ECHO" --config "$tmp/admin.yaml" || not_ok "gate with a token starts"
st=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ADMIN2/metrics")
check_eq "admin /metrics without the token: 401" 401 "$st"
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer wrong-token-wrong-token' "http://127.0.0.1:$ADMIN2/buckets")
check_eq "admin /buckets with a wrong token: 401" 401 "$st"
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer s3cr3t-admin-token-0123' "http://127.0.0.1:$ADMIN2/metrics")
check_eq "admin /metrics with the token: 200" 200 "$st"
st=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$ADMIN2/healthz")
check_eq "admin /healthz stays open" 200 "$st"
check "the gate kept running through all of it" kill -0 "$(cat "$tmp/g/gate.pid")"
tap_exit
