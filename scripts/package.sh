#!/usr/bin/env bash
# Builds the Debian packages (postgresql-15-ogc-throttle, ogc-gate) with
# dpkg-buildpackage from a copy of the tree, so that the checkout stays clean
# and its parent directory is not written: the .deb files land in
# build/packages/ (or $OT_PKG_DIR). Uncommitted edits are included (the copy is
# every tracked and untracked-but-not-ignored file). A second run on the same
# tree reuses the packages (`--force` rebuilds). Prints the .deb paths.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OT_PKG_DIR:-$root/build/packages}
force=0
[ "${1:-}" = --force ] && force=1

cd "$root"
version=$(dpkg-parsechangelog -l debian/changelog -S Version)
mapfile -d '' files < <(git ls-files -z --cached --others --exclude-standard)
present=()
for f in "${files[@]}"; do [ -e "$f" ] && present+=("$f"); done
# Tests and benchmarks are copied but go into no package: editing them reuses the build.
tree_hash=$(printf '%s\0' "${present[@]}" | grep -zvE '^(test|bench)/' | LC_ALL=C sort -z | xargs -0 sha256sum |
  sha256sum | cut -d' ' -f1)

if [ "$force" = 0 ] && [ -f "$out/tree-hash" ] && [ "$(cat "$out/tree-hash")" = "$tree_hash" ] &&
   ls "$out"/*.deb >/dev/null 2>&1; then
  ls "$out"/*.deb
  exit 0
fi

rm -rf "$out"
stage="$out/stage"
src="$stage/ogc-throttle-$version"
mkdir -p "$src"
printf '%s\0' "${present[@]}" | tar --null -T - -cf - | tar -xf - -C "$src"

# Parallel make unless the caller chose otherwise (2 cores on the dev machine).
export DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-parallel=2}
(cd "$src" && dpkg-buildpackage -us -uc -b) >"$out/build.log" 2>&1 || {
  tail -n 40 "$out/build.log" >&2
  echo "package.sh: dpkg-buildpackage failed, log in $out/build.log" >&2
  exit 1
}
mv "$stage"/*.deb "$stage"/*.buildinfo "$stage"/*.changes "$out"/
rm -rf "$stage"
echo "$tree_hash" >"$out/tree-hash"
ls "$out"/*.deb
