#!/usr/bin/env bash
# Runs every test suite: unit (GoogleTest), pg_regress, and each TAP script
# test/*/*.t.sh (database, gate, fuzz). Ends with "N passed, N failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
logs="$root/build/test-logs"
rm -rf "$logs"; mkdir -p "$logs"

"$root/scripts/deps.sh" || { echo "0 passed, 1 failed"; exit 1; }
if ! { make -j2 all >"$logs/build.log" 2>&1 && make install >>"$logs/build.log" 2>&1 && make -j2 unit >>"$logs/build.log" 2>&1; }; then
  tail -n 40 "$logs/build.log"
  echo "build failed"; echo "0 passed, 1 failed"; exit 1
fi

total_pass=0
total_fail=0
record() {  # suite passed failed
  printf '%-28s %4d passed, %d failed\n' "$1" "$2" "$3"
  total_pass=$((total_pass + $2)); total_fail=$((total_fail + $3))
}

# GoogleTest
test/unit/run_unit >"$logs/unit.log" 2>&1; rc=$?
p=$(grep -c '^\[       OK \]' "$logs/unit.log"); f=$(grep -c '^\[  FAILED  \] .*(' "$logs/unit.log")
[ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
record unit "$p" "$f"

# pg_regress on a temp instance with the library preloaded
test/run-regress.sh >"$logs/regress.log" 2>&1; rc=$?
p=$(grep -cE '\.\.\. ok' "$logs/regress.log"); f=$(grep -cE '\.\.\. FAILED' "$logs/regress.log")
[ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
record regress "$p" "$f"

# TAP scripts
for t in test/*/*.t.sh; do
  [ -e "$t" ] || continue
  name=${t#test/}; name=${name%.t.sh}
  bash "$t" >"$logs/${name//\//_}.log" 2>&1; rc=$?
  p=$(grep -c '^ok ' "$logs/${name//\//_}.log"); f=$(grep -c '^not ok ' "$logs/${name//\//_}.log")
  [ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
  record "$name" "$p" "$f"
done

if [ "$total_fail" != 0 ]; then
  echo; echo "Failures (logs in $logs):"
  grep -H '^not ok ' "$logs"/*.log || true
  [ -f regression.diffs ] && head -n 60 regression.diffs
fi
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" = 0 ]
