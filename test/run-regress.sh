#!/usr/bin/env bash
# pg_regress on a throwaway instance with ogc_throttle preloaded. The suites
# are copied to a directory the postgres user can read (CI may clone into a
# root-only home).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/test/lib/pg.sh"
work=$(pg_tmpdir)
trap 'rm -rf "$work"' EXIT
cp -r "$root/sql" "$root/expected" "$work/"
mkdir -p "$work/results"
cp "$root/test/regress.conf" "$work/"
chown -R postgres: "$work" 2>/dev/null || true
tests=$(make -s -C "$root" print-regress)
regress="$(pg_config --pkglibdir)/pgxs/src/test/regress/pg_regress"
cd "$work"
set +e
as_pg "$regress" --temp-instance="$work/instance" --temp-config="$work/regress.conf" --port=55400 \
  --inputdir="$work" --outputdir="$work" --bindir="$PGBIN" $tests
rc=$?
set -e
# Keep what the suites printed (git-ignored results/) to review or adopt as expected output.
rm -rf "$root/results"; cp -r "$work/results" "$root/results" 2>/dev/null || true
rm -f "$root/regression.diffs"
if [ $rc != 0 ] && [ -f "$work/regression.diffs" ]; then cp "$work/regression.diffs" "$root/regression.diffs"; cat "$work/regression.diffs"; fi
exit $rc
