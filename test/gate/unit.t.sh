#!/usr/bin/env bash
# Runs the gate's GoogleTest binary and reports one TAP line per test.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
cd "$root" || exit 1
if ! make -s build/gate/gate_unit >/dev/null 2>&1; then
  not_ok "gate unit tests build"; tap_exit
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
build/gate/gate_unit >"$out" 2>&1; rc=$?
n=0
while read -r status name; do
  n=$((n + 1))
  if [ "$status" = OK ]; then ok "unit $name"; else not_ok "unit $name"; fi
done < <(sed -nE 's/^\[ +(OK|FAILED) +\] ([A-Za-z0-9_.\/]+) \(.*/\1 \2/p' "$out")
[ "$n" -gt 0 ] || not_ok "gate unit tests produced results"
if [ "$rc" != 0 ] && [ "$TAP_FAILED" = 0 ]; then not_ok "gate_unit exit status $rc"; fi
[ "$TAP_FAILED" = 0 ] || grep -B3 -A12 'Failure' "$out" | head -60
tap_exit
