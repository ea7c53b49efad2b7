#!/usr/bin/env bash
# scripts/demo.sh as a newcomer runs it, then every command it prints, in the
# order printed, run as printed: each must do what the text beside it says.
# The demo runs in its own state directory and ports, so a demo the developer
# left running is not touched.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
tmp=$(mktemp -d); chmod 755 "$tmp"
export OT_DEMO_RUN=$tmp/run OT_DEMO_PG_PORT=15497 GATE_PORT=18873 ADMIN_PORT=18874 MS_PORT=18875
cleanup() { "$root/scripts/demo.sh" stop >/dev/null 2>&1; [ -n "${KEEP:-}" ] || rm -rf "$tmp"; }
trap cleanup EXIT

"$root/scripts/demo.sh" >"$tmp/demo.out" 2>&1; rc=$?
check_eq "scripts/demo.sh succeeds" 0 "$rc"
[ "$rc" = 0 ] || { tail -n 30 "$tmp/demo.out" | sed 's/^/# /'; tap_exit; }
out=$tmp/demo.out

# --- what the demo itself ran and printed ----------------------------------
check "demo_user's 5 km searches pass and show tokens left" grep -qE '^ +1[0-9]\.[0-9] \| +[0-9]+$' "$out"
check "demo_user's 50 km search is refused: budget exhausted, with a retry hint" \
  grep -q 'ERROR:  ogc_throttle: budget exhausted for identity "demo_user"' "$out"
check "demo_map's join is cut off with 53T01's message" grep -q 'statement cancelled: identity "demo_map" ran past its budget' "$out"
check "demo_map's bucket is shown in debt" grep -qE '^ +demo_map \| +-[0-9]+$' "$out"

# --- the commands it prints, in order -----------------------------------------
# printed PATTERN: the first printed command line (two blanks of indent) starting with PATTERN.
printed() { grep -m1 -E "^  $1" "$out" | sed 's/^  //'; }
run() { bash -c "$1" 2>&1; }
# A person reads between commands, and demo_map's bucket refills meanwhile
# (50 ms/s). Run back to back on a loaded machine, the WFS client's extent scan
# would leave the whole-area maps a bucket already in debt: the unit is wall
# time, and contention lengthens it. Wait for a full bucket (at most 15 s)
# before the two steps that spend demo_map's budget.
. "$root/test/lib/pg.sh"
full_bucket() {
  local i r
  for i in $(seq 1 150); do
    r=$(pg_psql "$OT_DEMO_RUN/pg" "$OT_DEMO_PG_PORT" -d demo -Atc \
      "SELECT coalesce(bool_and(tokens >= capacity - 1), true) FROM throttle_buckets WHERE identity = 'demo_map'" 2>/dev/null)
    [ "$r" = t ] && return 0
    sleep 0.1
  done
  echo "# demo_map's bucket is not full after 15 s: $r"
}
c=$(printed "curl -s -o /tmp/map.png")
check_eq "'A pass': a PNG" "200 image/png" "$(run "$c")"
c=$(printed "gdal_translate")
check "'through GDAL': a 512x512 image" grep -q 'Size is 512, 512' <<<"$(run "$c")"
c=$(printed "ogrinfo")
full_bucket
n=$(run "$c"); check "'a WFS client': features in the box ($n)" test "${n:-0}" -gt 0
c=$(printed "curl -s '")
check "'Refused by the gate': a WMS exception naming the pixel cap" \
  grep -q 'ServiceException locator="WIDTH">GetMap asked for 4096x4096' <<<"$(run "$c")"
c=$(printed "for i in 1 2 3 4 5")
full_bucket
r=$(run "$c")
echo "# whole-area maps: $(grep -c 'image/png' <<<"$r") drawn, then $(grep -c 'text/xml' <<<"$r") refused"
check_eq "'Refused by the database': the first whole-area map is drawn" "200 image/png" "$(sed -n 1p <<<"$r")"
check "... a later one is answered with MapServer's ServiceExceptionReport" grep -q '^200 text/xml' <<<"$(sed -n 2,5p <<<"$r")"
check "... which says only 'check server logs'" grep -qi 'check server logs' <<<"$r"
c=$(printed "grep -A2 'demo_map 53T01 ERROR'")
r=$(run "$c")
check "'the database's reason': 53T01 with its HINT" grep -q 'demo_map 53T01 HINT:  Retry after' <<<"$r"
c=$(printed "tail -n 1 ")
check "'the gate': verdict pass" grep -q '"verdict":"pass"' <<<"$(run "$c")"
c=$(sed -n 's/^Admin: *//p' "$out" | head -1)
r=$(run "$c")
check "'Admin': metrics and buckets answer" grep -q '# TYPE' <<<"$r"
c=$(sed -n 's/^Refusals by the hook: *//p' "$out")
check "'Refusals by the hook' finds them" grep -q '53T01 ERROR' <<<"$(run "$c")"

c=$(sed -n 's/^Stop everything: *//p' "$out")
(cd "$root" && run "$c") >/dev/null
check "'Stop everything' stops the gate" bash -c "! curl -s -o /dev/null http://127.0.0.1:$GATE_PORT/healthz"
check "... and PostgreSQL" bash -c "! (exec 3<>/dev/tcp/127.0.0.1/$OT_DEMO_PG_PORT) 2>/dev/null"
tap_exit
