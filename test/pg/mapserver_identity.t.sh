#!/usr/bin/env bash
# One client identity from the gate to the database, through a real MapServer 8:
#   client -> ogc-gate (identity.to_upstream: OT_CLIENT=<bucket key>)
#   -> MapServer (runtime substitution of %OT_CLIENT% into the layer's
#      CONNECTION: options='-c ogc_throttle.identity=...', with a VALIDATION pattern)
#   -> PostgreSQL, where the pricing hook charges that client's own bucket.
# One client drains its budget with whole-extent maps and is refused; another
# client of the same map server keeps being served. A client cannot name
# itself (or someone else) through the gate.
set -uo pipefail
. "$(dirname "$0")/common.sh"
. "$root/test/gate/lib/mapserver.sh"
. "$root/test/gate/lib/gate.sh"
MS=18880 GATE=18881 ADMIN=18882 ECHO=18883 GATE2=18884 ADMIN2=18885
WORK=$(mktemp -d); chmod 755 "$WORK"
echo_pid=
cleanup_all() { gate_stop "$WORK/g"; gate_stop "$WORK/g2"; ms_stop "$WORK/ms"; [ -n "$echo_pid" ] && kill "$echo_pid" 2>/dev/null; rm -rf "$WORK"; cleanup; }
trap cleanup_all EXIT

[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null
cluster_up 55483 "shared_preload_libraries = 'ogc_throttle'" "log_min_messages = warning" \
  "log_line_prefix = '%m [%p] %u %e '"
# As in mapserver_hook.t.sh: a whole-extent map is priced at cost_max = capacity
# (2), so each client gets one, and refill is slow. Estimates, not measured
# time, so that the test does not depend on this machine's speed.
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   CREATE TABLE pts AS SELECT i AS id,
     ST_SetSRID(ST_MakePoint(-10 + (i % 80) * 0.5, 35 + (i / 80) * 0.4), 4326)::geometry(Point, 4326) AS geom
     FROM generate_series(0, 3999) i;
   CREATE INDEX ON pts USING gist (geom);
   ANALYZE pts;
   CREATE ROLE mapserver LOGIN;
   GRANT SELECT ON pts TO mapserver;
   -- Trusted to name the payer (doc/pricing-hook.md, 'Who pays').
   GRANT EXECUTE ON FUNCTION throttle_spend(text, float8) TO mapserver;
   ALTER ROLE mapserver SET ogc_throttle.mode = 'reject';
   ALTER ROLE mapserver SET ogc_throttle.capacity = 2;
   ALTER ROLE mapserver SET ogc_throttle.cost_max = 2;
   ALTER ROLE mapserver SET ogc_throttle.rate = 0.01;
   ALTER ROLE mapserver SET ogc_throttle.true_up = off;" >/dev/null || { not_ok "setup"; tap_exit; }

# The recipe of doc/pricing-hook.md ("MapServer: one identity per client").
mkdir -p "$WORK/ms/www" "$WORK/ms/run"
layer=$(ms_layer pts pts 4326 "    CONNECTIONTYPE POSTGIS
    CONNECTION \"host=$DIR port=$PORT dbname=postgres user=mapserver options='-c ogc_throttle.identity=%OT_CLIENT%'\"
    DATA \"geom from pts using unique id using srid=4326\"
    VALIDATION
      \"OT_CLIENT\" \"^(ip|key|jwt):[0-9a-f]{16}\$\"
      \"default_OT_CLIENT\" \"anonymous\"
    END")
ms_write_map "$WORK/ms" "http://127.0.0.1:$GATE/" "$layer" stderr
ms_serve "$WORK/ms" "$MS" || { not_ok "MapServer starts"; tap_exit; }

SECRET=test-secret
cat >"$WORK/g.yaml" <<YAML
identity:
  hash_secret: $SECRET
  to_upstream: {param: OT_CLIENT, header: X-OT-Identity, hmac_key: sign-me}
tiers:
  - {name: public, rate: 1000, burst: 100000}
  - {name: partner, rate: 1000, burst: 100000, keys: [$("$GATE_BIN" --hash-key alice-key), $("$GATE_BIN" --hash-key bob-key)]}
YAML
gate_start "$WORK/g" "$GATE" "$ADMIN" "http://127.0.0.1:$MS" --config "$WORK/g.yaml" || { not_ok "gate starts"; tap_exit; }
/usr/bin/python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$WORK/echo.err" & echo_pid=$!
gate_start "$WORK/g2" "$GATE2" "$ADMIN2" "http://127.0.0.1:$ECHO" --config "$WORK/g.yaml" || { not_ok "gate 2 starts"; tap_exit; }
for i in $(seq 1 30); do curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1; done
ok "PostgreSQL, MapServer with the identity recipe, and two gates started"

key_of() { /usr/bin/python3 -c "import hmac,hashlib,sys; print('key:' + hmac.new(sys.argv[1].encode(), ('key:' + sys.argv[2]).encode(), hashlib.sha1).hexdigest()[:16])" "$SECRET" "$1"; }
ALICE=$(key_of alice-key) BOB=$(key_of bob-key)
G=http://127.0.0.1:$GATE
WMS="SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=pts&STYLES=&CRS=EPSG:4326&FORMAT=image/png"
WHOLE="$WMS&BBOX=35,-10,55,30&WIDTH=256&HEIGHT=256" SMALL="$WMS&BBOX=40,0,41,1&WIDTH=256&HEIGHT=256"
kind() {  # curl args -> png | exception | other
  curl -s --max-time 20 -o "$WORK/ans" "$@"
  if [ "$(head -c 8 "$WORK/ans" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; then echo png
  elif grep -q 'ServiceException' "$WORK/ans"; then echo exception; else echo other; fi
}
stat_of() { q "SELECT statements || ' ' || refused FROM throttle_identity_stats WHERE identity = '$1'"; }

# --- two clients of one map server, each on its own database budget -----------
check_eq "alice's whole-extent map is drawn (her bucket was full)" png "$(kind -H 'X-Api-Key: alice-key' "$G/?$WHOLE")"
check_eq "alice's second whole-extent map is refused by the database" exception "$(kind -H 'X-Api-Key: alice-key' "$G/?$WHOLE")"
check_eq "... and so is her small map: her bucket is empty" exception "$(kind -H 'X-Api-Key: alice-key' "$G/?$SMALL")"
check_eq "bob, on the same map server, gets his small map" png "$(kind -H 'X-Api-Key: bob-key' "$G/?$SMALL")"
a=$(stat_of "$ALICE") b=$(stat_of "$BOB")
echo "# database statistics: alice ($ALICE) '$a', bob ($BOB) '$b'"
check "the database charged alice's own identity and refused her (refused > 0)" test "${a##* }" -gt 0 2>/dev/null
check_eq "it refused nothing of bob's" 0 "${b##* }"
check_eq "nothing was charged to the map server's role itself" "" "$(stat_of mapserver)"
check "MapServer's refusal names alice in the database's reason" \
  grep -q "budget exhausted for identity \"$ALICE\"" "$WORK/ms/run/lighttpd.err"

# --- a client cannot name itself through the gate -----------------------------------
for spelling in "OT_CLIENT=$BOB" "ot_client=$BOB" "Ot_Client=$BOB"; do
  r=$(curl -s -H 'X-Api-Key: alice-key' "$G/?$SMALL&$spelling")
  check "'$spelling' in the query is refused by the gate" grep -q 'OT_CLIENT is set by this gate' <<<"$r"
done
check "OT_CLIENT in a form body is refused" grep -q 'set by this gate' <<<"$(curl -s -H 'X-Api-Key: alice-key' -d "$SMALL&OT_CLIENT=$BOB" "$G/")"
check "OT_CLIENT as a cookie (MapServer reads cookies as parameters) is refused" \
  grep -q 'set by this gate' <<<"$(curl -s -H 'X-Api-Key: alice-key' -b "ot_client=$BOB" "$G/?$SMALL")"
check_eq "bob is still served after alice's attempts" png "$(kind -H 'X-Api-Key: bob-key' "$G/?$SMALL")"
check_eq "... and nothing of it reached his budget's refusals" 0 "$(stat_of "$BOB" | cut -d' ' -f2)"

# --- what the upstream receives (echo upstream) --------------------------------------------
unfold() { sed -e ':a' -e 'N' -e '$!ba' -e 's/\r\?\n[ \t]\+/ /g'; }  # the echo folds long header lines
seen=$(curl -s -H 'X-Api-Key: alice-key' -H "X-OT-Identity: $BOB" -H 'X-OT-Tier: gold' -H 'X-OT-Signature: forged' \
  -H 'X-Request-Id: rid-1' "http://127.0.0.1:$GATE2/?$SMALL" | unfold)
check "the forwarded query ends with the gate's OT_CLIENT" grep -qE "^GET /\?.*&OT_CLIENT=$ALICE"$'\r?$' <<<"$seen"
check_eq "one X-OT-Identity, the gate's (the client's copy is removed)" "$ALICE" \
  "$(grep -i '^X-OT-Identity:' <<<"$seen" | sed 's/^[^:]*: *//' | tr -d '\r' | paste -sd,)"
check_eq "X-OT-Tier is the gate's" partner "$(grep -i '^X-OT-Tier:' <<<"$seen" | sed 's/^[^:]*: *//' | tr -d '\r' | paste -sd,)"
sig=$(grep -i '^X-OT-Signature:' <<<"$seen" | sed 's/^[^:]*: *//' | tr -d '\r' | paste -sd,)
want=$(/usr/bin/python3 -c "import hmac,hashlib,sys; print(hmac.new(b'sign-me', ('%s\npartner\nrid-1' % sys.argv[1]).encode(), hashlib.sha256).hexdigest())" "$ALICE")
check_eq "X-OT-Signature is HMAC-SHA256(identity, tier, request id) under the configured key" "$want" "$sig"
anon=$(curl -s "http://127.0.0.1:$GATE2/?$SMALL" | grep -i '^X-OT-Identity:' | sed 's/^[^:]*: *//' | tr -d '\r')
check "a client without a key is named by its address bucket (ip:...)" grep -qE '^ip:[0-9a-f]{16}$' <<<"$anon"

# --- the recipe's limits, shown (why MapServer must be reachable only by the gate) ----------------
check_eq "(control) straight to MapServer, a made-up OT_CLIENT that fails VALIDATION is charged to 'anonymous'" png \
  "$(kind "http://127.0.0.1:$MS/?$SMALL&OT_CLIENT=x%27%20options%3D")"
check "... which the database shows" test -n "$(stat_of anonymous)"

# --- configuration checks ----------------------------------------------------------------
printf 'identity: {to_upstream: {param: OT_CLIENT}}\n' >"$WORK/bad1.yaml"
check "to_upstream without a hash_secret is refused (identities would change at every start)" \
  bash -c "'$GATE_BIN' --config '$WORK/bad1.yaml' --check-config 2>&1 | grep -q 'needs identity.hash_secret'"
printf 'identity: {hash_secret: s, to_upstream: {param: LAYERS}}\n' >"$WORK/bad2.yaml"
check "a param named like an OGC parameter is refused" \
  bash -c "'$GATE_BIN' --config '$WORK/bad2.yaml' --check-config 2>&1 | grep -q 'no OGC or MapServer request uses'"
printf 'identity: {hash_secret: s, to_upstream: {header: X-Api-Key}}\n' >"$WORK/bad3.yaml"
check "a header that is a key header is refused" \
  bash -c "'$GATE_BIN' --config '$WORK/bad3.yaml' --check-config 2>&1 | grep -q 'cannot be a key header'"
tap_exit
