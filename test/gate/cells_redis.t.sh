#!/usr/bin/env bash
# Area budgets shared through Redis (buckets.store: redis): a scraper that
# alternates between two gates over one area is held to one cell budget,
# not one per gate, and the address charges of its refused requests are
# given back in Redis (else its small address budget would run dry).
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/gate.sh"
REDIS=19103 ECHO=19104 G1=19105 A1=19106 G2=19107 A2=19108
tmp=$(mktemp -d)
redis_pid= echo_pid=
cleanup() { gate_stop "$tmp/g1"; gate_stop "$tmp/g2"; [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null
            [ -n "$echo_pid" ] && kill "$echo_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null
redis-server --port "$REDIS" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/redis.log" 2>&1 & redis_pid=$!
for _ in $(seq 1 50); do redis-cli -p "$REDIS" ping >/dev/null 2>&1 && break; sleep 0.1; done
/usr/bin/python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$tmp/echo.err" & echo_pid=$!
for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1; done
# Tiles cost 1. The address: 30 units, next to no refill; the cell: 6 and 2/s.
cat >"$tmp/g.yaml" <<YAML
identity: {hash_secret: shared-secret, trusted_proxies: [127.0.0.1/32]}
buckets: {store: redis, url: "redis://127.0.0.1:$REDIS/0", timeout_ms: 200, on_error: closed}
concurrency: {classes: []}
cost: {weights: {tile: {fixed: 1, per_row: 0}}}
tiers: [{name: public, rate: 0.001, burst: 30, cells: {grid: 0.25, rate: 2, burst: 6}}]
YAML
check "--check-config accepts cells with the Redis store" "$GATE_BIN" --config "$tmp/g.yaml" --check-config
gate_start "$tmp/g1" "$G1" "$A1" "http://127.0.0.1:$ECHO" --config "$tmp/g.yaml" || { not_ok "gate 1 starts"; tap_exit; }
gate_start "$tmp/g2" "$G2" "$A2" "http://127.0.0.1:$ECHO" --config "$tmp/g.yaml" || { not_ok "gate 2 starts"; tap_exit; }

read -r X0 Y0 < <(/usr/bin/python3 -c "import math; n=2**14; r=math.radians(50.2); print(int((8.505+180)/360*n), int((1-math.log(math.tan(r)+1/math.cos(r))/math.pi)/2*n))")
/usr/bin/python3 - "$G1" "$G2" "$X0" "$Y0" >"$tmp/s.json" <<'PY'
import http.client, json, sys, time
g = [http.client.HTTPConnection('127.0.0.1', int(p), timeout=10) for p in sys.argv[1:3]]
x0, y0 = int(sys.argv[3]), int(sys.argv[4])
out = {'statuses': [], 'bodies': []}
t0 = time.monotonic()
i = 0
for x in range(x0, x0 + 10):
    for y in range(y0, y0 + 10):
        c = g[i % 2]; i += 1
        c.request('GET', '/tiles/osm/14/%d/%d.png' % (x, y), headers={'X-Forwarded-For': '198.51.100.9'})
        r = c.getresponse(); body = r.read().decode('utf-8', 'replace')
        out['statuses'].append(r.status)
        if r.status != 200: out['bodies'].append(body)
out['seconds'] = time.monotonic() - t0
print(json.dumps(out))
PY
/usr/bin/python3 - "$tmp/s.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ok = lambda c, d: print(('ok - ' if c else 'not ok - ') + d)
admitted = s['statuses'].count(200)
bound = 6 + 2 * s['seconds'] + 0.01
ok(admitted <= bound, 'a scraper alternating two gates is held to one cell budget: %d of 100 admitted in %.2f s, at most %.1f' % (admitted, s['seconds'], bound))
ok(admitted >= 6, 'the cell burst was granted (%d)' % admitted)
ok(s['bodies'] and all('Area rate limit' in b for b in s['bodies']),
   'every refusal is the area budget\'s: the address got the refused requests\' charges back (its burst is 30)')
PY
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Forwarded-For: 198.51.100.9' "http://127.0.0.1:$G2/tiles/osm/14/$((X0 + 400))/$Y0.png")
check_eq "the same client in another area, through the other gate: 200" 200 "$st"
n=$(redis-cli -p "$REDIS" --scan --pattern 'ogc_throttle:ip:*@d*' | wc -l)
check "the cell buckets are in Redis ($n keys)" [ "$n" -ge 2 ]
tap_exit
