#!/usr/bin/env bash
# src/core is shared by the extension and the gate: the build must refuse a
# PostgreSQL or Asio include there, both by its check and by its include path.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf '#include "postgres.h"\nint f() { return 0; }\n' >"$tmp/pg.cpp"
printf '#include <boost/asio.hpp>\nint f() { return 0; }\n' >"$tmp/asio.cpp"

check "the real src/core passes the check" make -s -C "$root" core-purity
check "a postgres.h include is refused by the check" \
  bash -c "! make -s -C '$root' core-purity CORE_PURITY_SRCS='$tmp/pg.cpp' 2>/dev/null"
check "an Asio include is refused by the check" \
  bash -c "! make -s -C '$root' core-purity CORE_PURITY_SRCS='$tmp/asio.cpp' 2>/dev/null"
flags=$(make -s -C "$root" print-core-cxxflags)
out=$(cd "$root" && g++ $flags -c "$tmp/pg.cpp" -o "$tmp/pg.o" 2>&1)
check "core's compile flags cannot even find postgres.h" grep -q 'postgres.h: No such file' <<<"$out"
tap_exit
