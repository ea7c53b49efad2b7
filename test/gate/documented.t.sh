#!/usr/bin/env bash
# The gate's documentation against the gate: every YAML example in doc/ and the README is a
# configuration `--check-config` accepts (an operator pastes them; the gate refuses unknown keys), and
# the flag table of doc/gate.md lists exactly the flags `--help` shows, and every key the configuration
# accepts is named in doc/.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/gate.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
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
python3 "$root/test/gate/documented_keys.py" "$root" || TAP_FAILED=1
tap_exit
