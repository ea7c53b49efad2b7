#!/usr/bin/env bash
# The gate's documentation against the gate: every YAML example in doc/ and the README is a
# configuration `--check-config` accepts (an operator pastes them; the gate refuses unknown keys), the
# flag table of doc/gate.md lists exactly the flags `--help` shows, with its defaults, every key the
# configuration accepts is named in doc/, the metrics a gate exports are the ones doc/ names (a gate
# with every feature that adds metrics: a redis-server store, charge: measured, one request settled),
# and its refusals are in the formats doc/gate.md's table of answers gives each protocol.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/gate.sh"
ECHO=18980 G=18981 A=18982 REDIS=18983
tmp=$(mktemp -d)
pids=()
cleanup() { gate_stop "$tmp/g"; for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null

n=0
for doc in "$root"/doc/*.md "$root/README.md"; do
  awk -v base="$tmp/$(basename "$doc" .md)" '/^```yaml/ { p = 1; n++; next } p && /^```/ { p = 0; next }
    p { print > (base "_" n ".yaml") }' "$doc"
done
for y in "$tmp"/*.yaml; do
  [ -e "$y" ] || continue
  n=$((n + 1))
  out=$("$GATE_BIN" --config "$y" --check-config 2>&1)
  check "$(basename "$y" .yaml | sed 's/_\([0-9]*\)$/.md, YAML example \1/') is a valid configuration${out:+ ($(head -n 1 <<<"$out"))}" \
    test "$(head -n 1 <<<"$out")" = "configuration OK"
done
check "the documents hold YAML examples ($n)" test "$n" -ge 5

"$GATE_BIN" --help 2>&1 | grep -oE '^  (-[a-z] \[ )?--[a-z-]+' | grep -oE -- '--[a-z-]+' | sort -u >"$tmp/help.txt"
grep -oE '^\| `--[a-z-]+`( / `--[a-z-]+`|, `-[a-z]`)*' "$root/doc/gate.md" | grep -oE -- '--[a-z-]+' | sort -u >"$tmp/doc.txt"
check "--help lists flags ($(wc -l <"$tmp/help.txt"))" test "$(wc -l <"$tmp/help.txt")" -ge 15
while read -r f; do
  check "$f (--help) is in doc/gate.md's flag table" grep -qx -- "$f" "$tmp/doc.txt"
done <"$tmp/help.txt"
while read -r f; do
  check "doc/gate.md's $f is a flag of the gate" grep -qx -- "$f" "$tmp/help.txt"
done <"$tmp/doc.txt"
"$GATE_BIN" --help 2>&1 | python3 "$root/test/gate/documented_defaults.py" "$root" || TAP_FAILED=1
python3 "$root/test/gate/documented_keys.py" "$root" || TAP_FAILED=1

redis-server --port "$REDIS" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/redis.log" 2>&1 & pids+=($!)
/usr/bin/python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$tmp/echo.err" & pids+=($!)
for i in $(seq 1 50); do
  redis-cli -p "$REDIS" ping >/dev/null 2>&1 && curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1
done
cat >"$tmp/g.yaml" <<YAML
charge: measured
identity:
  hash_secret: documented-test-secret-0123456789
buckets:
  store: redis
  url: redis://127.0.0.1:$REDIS/0
YAML
if gate_start "$tmp/g" "$G" "$A" "http://127.0.0.1:$ECHO" --config "$tmp/g.yaml"; then
  curl -s -o /dev/null "http://127.0.0.1:$G/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities"
  sleep 0.3  # (the settlement is written after the answer)
  curl -s "http://127.0.0.1:$A/metrics" | awk '/^# TYPE /{ print $3, $4 }' | sort -u >"$tmp/families.txt"
  check "the gate exports metric families ($(wc -l <"$tmp/families.txt"))" test "$(wc -l <"$tmp/families.txt")" -ge 20
  while read -r m type; do
    check "metric $m is named in doc/" grep -q "$m" "$root"/doc/*.md
  done <"$tmp/families.txt"
  # a histogram's series end in _bucket, _sum and _count
  grep -ohE '\bogc_gate_[a-z_]+' "$root"/doc/*.md | sort -u | while read -r m; do
    base=$(sed -E 's/_(bucket|sum|count)$//' <<<"$m")
    if grep -q "^$m " "$tmp/families.txt" || grep -q "^$base histogram" "$tmp/families.txt"; then
      echo "ok - doc/'s metric $m is exported"
    else
      echo "not ok - doc/'s metric $m is exported"
    fi
  done >"$tmp/docmetrics.tap"
  cat "$tmp/docmetrics.tap"
  grep -q '^not ok' "$tmp/docmetrics.tap" && TAP_FAILED=1
  python3 "$root/test/gate/documented_answers.py" "$root" "http://127.0.0.1:$G" || TAP_FAILED=1
else
  not_ok "a gate with a redis store and charge: measured starts ($(head -n 2 "$tmp/g/gate.err"))"
fi
tap_exit
