#!/usr/bin/env bash
# Area budgets (tiers[].cells, issue 15) against the echo upstream: a scraper
# walking one area tile by tile is held to the cell budget, a user panning
# across 50 cells at a human pace is never refused; the refusal names the
# budget; /buckets and /metrics count exactly; bad configurations are refused.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/gate.sh"
ECHO=19100 G=19101 A=19102
tmp=$(mktemp -d)
echo_pid=
cleanup() { gate_stop "$tmp/g"; [ -n "$echo_pid" ] && kill "$echo_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null
PY=/usr/bin/python3
WALK="$root/test/gate/lib/cell_walkers.py"

# --- configuration checks ------------------------------------------------------
bad_config() {  # description, tiers[0].cells YAML, expected text, [extra top-level YAML]
  printf '%s\ntiers:\n  - name: public\n    rate: 10\n    burst: 100\n    cells: %s\n' "${4:-}" "$2" >"$tmp/bad.yaml"
  out=$("$GATE_BIN" --config "$tmp/bad.yaml" --check-config 2>&1); rc=$?
  check "--check-config refuses $1 ($out)" bash -c "[ $rc -ne 0 ] && grep -qF -- \"\$1\" <<<\"\$2\"" _ "$3" "$out"
}
bad_config "a grid of 0 degrees" "{grid: 0, rate: 1, burst: 5}" "tiers[public].cells.grid: must be a cell size in degrees"
bad_config "a grid of z99" "{grid: z99, rate: 1, burst: 5}" "or a zoom level written z0 to z24"
bad_config "a grid that is no number" "{grid: fine, rate: 1, burst: 5}" "tiers[public].cells.grid"
bad_config "a missing burst" "{grid: 0.1, rate: 1}" "tiers[public].cells: needs grid, rate and burst"
bad_config "a zero rate" "{grid: 0.1, rate: 0, burst: 5}" "tiers[public].cells: "
bad_config "an unknown cost class" "{grid: 0.1, rate: 1, burst: 5, classes: [maps]}" "unknown cost class 'maps'"
bad_config "an unknown key" "{grid: 0.1, rate: 1, burst: 5, size: 3}" "unknown key 'size'"
printf 'tiers:\n  - {name: public, rate: 10, burst: 100, cells: {grid: z12, rate: 1, burst: 5}}\n' >"$tmp/good.yaml"
check "--check-config accepts a zoom-level grid" "$GATE_BIN" --config "$tmp/good.yaml" --check-config

# --- the gate ------------------------------------------------------------------
# Every map view and tile costs 1 unit. The address budget is large and
# does not refill (so what it was charged can be read off /buckets); the cell
# budget is 6 units and 2 per second. Time runs 10x fast: a human who looks
# at a new view every second, in a deployment with 0.2 units/s per cell, is
# a walker taking a step every 0.1 s here.
/usr/bin/python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$tmp/echo.err" & echo_pid=$!
for i in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1; done
cat >"$tmp/g.yaml" <<YAML
identity: {trusted_proxies: [127.0.0.1/32]}
limits: {max_keys: 4096}
concurrency: {classes: []}
cost:
  weights:
    map: {fixed: 1, per_row: 0, per_megapixel: 0}
    tile: {fixed: 1, per_row: 0, per_megapixel: 0}
tiers:
  - name: public
    rate: 0.001
    burst: 100000
    cells: {grid: 0.25, rate: 2, burst: 6}
  - name: tiles
    rate: 0.001
    burst: 100000
    networks: [198.51.100.64/26]
    cells: {grid: z11, rate: 2, burst: 6}
  - {name: keyed, rate: 0.001, burst: 100000, keys: [$("$GATE_BIN" --hash-key partner-1)]}
YAML
gate_start "$tmp/g" "$G" "$A" "http://127.0.0.1:$ECHO" --config "$tmp/g.yaml" || { not_ok "gate starts"; tap_exit; }

keys() { curl -s "http://127.0.0.1:$A/buckets" | $PY -c 'import json,sys; print("\n".join(sorted(set(c["key"] for c in json.load(sys.stdin)["cells"]))))'; }

# scraper ADDR GRIDNAME X0 Y0: every z14 tile of a 10x10 block, then the
# checks that it was held to its cells' budget (6 + 2/s each).
scraper() {
  local addr=$1 name=$2 x0=$3 y0=$4
  keys >"$tmp/before"
  $PY "$WALK" scrape "$G" "$addr" 14 "$x0" "$y0" 10 >"$tmp/s.json" || { not_ok "$name scraper ran"; return; }
  keys >"$tmp/after"
  key=$(comm -13 "$tmp/before" "$tmp/after")
  curl -s "http://127.0.0.1:$A/buckets" >"$tmp/b.json"
  $PY - "$tmp/s.json" "$tmp/b.json" "$key" "$name" <<'PY'
import json, sys
s, b, key, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4]
ok = lambda c, d: print(('ok - ' if c else 'not ok - ') + name + ' scraper: ' + d)
admitted = s['statuses'].count(200)
refused = len(s['statuses']) - admitted
cells = [c for c in b['cells'] if c['key'] == key]
bound = len(cells) * (6 + 2 * s['seconds']) + 0.01
ok(len(cells) >= 1 and key.startswith('ip:'), 'its cells are on /buckets under its address (%d cells)' % len(cells))
ok(admitted <= bound, 'held to the cell budget: %d of 100 tiles in %.2f s admitted, at most %.1f allowed' % (admitted, s['seconds'], bound))
ok(refused >= 50, 'most of the block refused (%d)' % refused)
ok(all(r['status'] == 429 for r in s['refusals']), 'refusals are 429')
ok(all('Area rate limit' in r['body'] and 'for map cell' in r['body'] for r in s['refusals']), 'refusals name the area budget and the cell')
ok(all(r['retry_after'] and int(r['retry_after']) >= 1 for r in s['refusals']), 'refusals carry Retry-After >= 1')
ok(all(r['policy'] and r['policy'].startswith('"%s.cell";q=6;' % ('tiles' if name == 'z11' else 'public')) for r in s['refusals']),
   'RateLimit-Policy names the cell budget')
ok(sum(c['throttled'] for c in cells) == refused, '/buckets counts exactly its %d refusals' % refused)
addr = [x for x in b['buckets'] if x['key'] == key]
ok(len(addr) == 1 and abs(100000 - addr[0]["tokens"] - admitted) < 0.5,
   'the address bucket is charged for the %d admitted only (holds %.3f)' % (admitted, addr[0]['tokens'] if addr else -1))
print(refused, file=open(sys.argv[1] + '.refused', 'w'))
PY
  total_refused=$(( ${total_refused:-0} + $(cat "$tmp/s.json.refused") ))
}
tile() { $PY -c "import math,sys; lon,lat,z=float(sys.argv[1]),float(sys.argv[2]),int(sys.argv[3]); n=2**z; r=math.radians(lat); print(int((lon+180)/360*n), int((1-math.log(math.tan(r)+1/math.cos(r))/math.pi)/2*n))" "$@"; }
read -r X0 Y0 < <(tile 8.505 50.2 14)
scraper 198.51.100.7 "0.25-degree" "$X0" "$Y0"
# The same address elsewhere: another cell, its own budget.
st=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Forwarded-For: 198.51.100.7' "http://127.0.0.1:$G/tiles/osm/14/$((X0 + 400))/$Y0.png")
check_eq "the scraper's next area is not refused" 200 "$st"
read -r X1 Y1 < <(tile 13.4 52.5 14)
scraper 198.51.100.70 "z11" $(( X1 / 8 * 8 )) $(( Y1 / 8 * 8 ))

# A keyed client is not held by the area budget (keyed_clients: false).
st=""; for i in $(seq 1 12); do st="$st$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Api-Key: partner-1' "http://127.0.0.1:$G/tiles/osm/14/$X0/$Y0.png") "; done
check_eq "a keyed client's 12 tiles of one cell all pass" "$(printf '200 %.0s' $(seq 1 12))" "$st"

# A client that caches: 304s give the cell 0.9 of each charge back, as the address.
st=""; for i in $(seq 1 20); do st="$st$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Forwarded-For: 198.51.100.20' "http://127.0.0.1:$G/notmodified/tiles/14/$X0/$Y0.png") "; done
check_eq "20 revalidations (304) of one cell's tile pass: refunds reach the cell budget (6 + 2/s without)" "$(printf '304 %.0s' $(seq 1 20))" "$st"

# --- the panning user ------------------------------------------------------------
$PY "$WALK" pan "$G" 198.51.100.8 0.25 50 0.1 15 >"$tmp/p.json" || not_ok "panning user ran"
$PY - "$tmp/p.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
ok = lambda c, d: print(('ok - ' if c else 'not ok - ') + 'panning user: ' + d)
ok(p['cells'] >= 50, 'walked across %d cells in %d views (%.1f s)' % (p['cells'], p['steps'], p['seconds']))
ok(not p['refusals'], 'never refused (%d refusals%s)' % (len(p['refusals']), (': ' + p['refusals'][0]['body'][:200]) if p['refusals'] else ''))
PY

# --- metrics -------------------------------------------------------------------
m=$(curl -s "http://127.0.0.1:$A/metrics")
n=$(sed -nE 's/^ogc_gate_requests_total\{class="tile",verdict="cell_throttled"\} ([0-9]+)$/\1/p' <<<"$m")
check_eq "/metrics counts every cell refusal exactly" "$total_refused" "$n"
check "/metrics has no cell refusal of maps (the panning user)" bash -c '! grep -q "class=\"map\",verdict=\"cell_throttled\"" <<<"$1"' _ "$m"
ck=$(sed -nE 's/^ogc_gate_cell_keys ([0-9]+)$/\1/p' <<<"$m")
check "/metrics shows the cell buckets held (${ck:-none})" [ "${ck:-0}" -ge 50 ]
b=$(curl -s "http://127.0.0.1:$A/buckets")
check "/buckets lists each tier's area budget" $PY -c '
import json,sys; d=json.loads(sys.argv[1]); t={x["tier"]:x for x in d["cell_budgets"]}
assert t["public"]["grid"]=="0.25" and t["public"]["rate"]==2 and t["public"]["burst"]==6 and t["public"]["classes"]==["map","tile"]
assert t["tiles"]["grid"]=="z11" and "keyed" not in t and d["cell_keys"]==len(d["cells"])' "$b"

gate_stop "$tmp/g"
tap_exit
