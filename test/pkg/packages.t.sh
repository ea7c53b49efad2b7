#!/usr/bin/env bash
# The Debian packages as an operator meets them: built by scripts/package.sh
# (dpkg-buildpackage from a copy of the tree; reused when the tree is
# unchanged), checked by lintian, installed with apt-get, the extension created
# from the packaged files in a fresh cluster that preloads it (and a 0.1
# install upgraded with ALTER EXTENSION ... UPDATE), the gate started as its
# unit starts it (systemd does not run here: `systemd-analyze verify` checks
# the unit, and its ExecStart/ExecReload lines run as its user with its
# privilege limits), then both purged and every file checked gone.
# Runs last in scripts/test.sh (test/pkg sorts after test/pg): installing
# replaces the extension files a `make install` put in the system PostgreSQL
# directories; they are saved first and put back at the end.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/lib/pg.sh"
. "$root/test/pkg/lib.sh"
fcmp() { awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN { exit !(op == "<=" ? a <= b : a >= b) }'; }

PG_PORT=18631 GATE_PORT=18680 ADMIN_PORT=18681 ECHO_PORT=18682
UNIT=/lib/systemd/system/ogc-gate.service
CONF=/etc/ogc-gate/ogc-gate.yaml

if [ "$(id -u)" != 0 ]; then not_ok "runs as root (apt-get install needs it)"; tap_exit; fi
tmp=$(pg_tmpdir)
gate_pid="" echo_pid=""
cleanup() {
  [ -n "$gate_pid" ] && { kill "$gate_pid" 2>/dev/null; wait "$gate_pid" 2>/dev/null; }
  [ -n "$echo_pid" ] && kill "$echo_pid" 2>/dev/null
  pg_stop "$tmp/pg" immediate
  purge_packages >/dev/null 2>&1
  restore_saved "$tmp/saved"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build ---------------------------------------------------------------
status_before=$(git -C "$root" status --porcelain)
if ! "$root/scripts/package.sh" >"$tmp/package.out" 2>&1; then
  not_ok "scripts/package.sh builds the packages"; cat "$tmp/package.out"; tap_exit
fi
ext_deb=$(grep "/${EXT_PKG}_[^/]*\.deb$" "$tmp/package.out")
gate_deb=$(grep "/${GATE_PKG}_[^/]*\.deb$" "$tmp/package.out")
check "scripts/package.sh builds $EXT_PKG and $GATE_PKG" test -f "$ext_deb" -a -f "$gate_deb"
check_eq "the build leaves nothing in the checkout that git sees" "$status_before" "$(git -C "$root" status --porcelain)"

lintian --fail-on error "$(dirname "$ext_deb")"/*.changes >"$tmp/lintian.out" 2>&1
errors=$(grep -c '^E: ' "$tmp/lintian.out")
check_eq "lintian reports no errors" 0 "$errors"
[ "$errors" = 0 ] || grep '^E: ' "$tmp/lintian.out"
grep -E '^[WE]: ' "$tmp/lintian.out" | sed 's/^/# lintian: /'

# --- install -------------------------------------------------------------
purge_packages >/dev/null 2>&1  # a previous run that died half-way
save_unowned "$ext_deb" "$tmp/saved"
if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$ext_deb" "$gate_deb" \
     >"$tmp/install.out" 2>&1; then
  ok "apt-get install ./$EXT_PKG*.deb ./$GATE_PKG*.deb"
else
  not_ok "apt-get install of both packages"; tail -n 20 "$tmp/install.out"; tap_exit
fi
so=/usr/lib/postgresql/15/lib/ogc_throttle.so
check_eq "the installed library is the packaged one" \
  "$(dpkg-deb --fsys-tarfile "$ext_deb" | tar -xO ".$so" | sha256sum)" "$(sha256sum <"$so")"
check "the extension's control and SQL files belong to the package" \
  dpkg -S /usr/share/postgresql/15/extension/ogc_throttle.control /usr/share/postgresql/15/extension/ogc_throttle--0.1--0.2.sql

# --- the extension in a fresh cluster, preloaded -----------------------
if ! pg_cluster_init "$tmp/pg" "shared_preload_libraries = 'ogc_throttle'" || ! pg_start "$tmp/pg" "$PG_PORT"; then
  not_ok "a fresh cluster starts with the packaged library preloaded"; cat "$tmp/pg/server.log" 2>/dev/null; tap_exit
fi
q() { pg_psql "$tmp/pg" "$PG_PORT" -d "${DB:-postgres}" -At -c "$1"; }
postmaster=$(head -n 1 "$tmp/pg/data/postmaster.pid")
check "the postmaster has $so mapped" grep -q " $so\$" "/proc/$postmaster/maps"
q "SET client_min_messages = warning; CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle" >/dev/null
check_eq "CREATE EXTENSION installs the packaged default version" 0.2 \
  "$(q "SELECT extversion FROM pg_extension WHERE extname = 'ogc_throttle'")"
check_eq "a spend is charged to the shared bucket" "990|990" \
  "$(q "SELECT round(throttle_spend('pkg-probe', 10)::numeric), (SELECT round(tokens::numeric) FROM throttle_peek('pkg-probe'))" 2>&1)"
out=$(pg_psql "$tmp/pg" "$PG_PORT" -d postgres -v VERBOSITY=verbose -c "SELECT throttle_spend('pkg-probe', 5000)" 2>&1)
check "a spend over the capacity is refused with 54T01" grep -q 'ERROR:  54T01' <<<"$out"

# 0.1 -> 0.2 with the packaged upgrade script: the buckets filled under 0.1
# keep their balances, and 0.2's objects appear.
q "CREATE DATABASE pkg_upgrade" >/dev/null
DB=pkg_upgrade
q "SET client_min_messages = warning; CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle VERSION '0.1'" >/dev/null
check_eq "0.1 installs from the packaged files" 0.1 "$(q "SELECT extversion FROM pg_extension WHERE extname = 'ogc_throttle'")"
q "ALTER DATABASE pkg_upgrade SET ogc_throttle.rate = 0.01" >/dev/null  # no visible refill meanwhile
fill="SELECT throttle_spend('up-a', 100), throttle_spend('up-b', 200), throttle_spend('up-c', 300)"
balances="SELECT string_agg(round(tokens::numeric)::text, ',' ORDER BY identity) FROM throttle_buckets WHERE identity LIKE 'up-%'"
q "$fill" >/dev/null
before=$(q "$balances")
check_eq "three buckets filled under 0.1" "900,800,700" "$before"
check "ALTER EXTENSION ogc_throttle UPDATE runs" q "ALTER EXTENSION ogc_throttle UPDATE"
check_eq "the extension is at 0.2" 0.2 "$(q "SELECT extversion FROM pg_extension WHERE extname = 'ogc_throttle'")"
check_eq "every bucket kept its balance" "$before" "$(q "$balances")"
check_eq "0.2's objects are there (throttle_last_statement)" 1 \
  "$(q "SELECT count(*) FROM pg_proc WHERE proname = 'throttle_last_statement'")"
DB=postgres
pg_stop "$tmp/pg"

# --- the gate, through its unit ------------------------------------------
check "systemd-analyze verify accepts the unit" systemd-analyze verify "$UNIT"
systemd-analyze verify "$UNIT" 2>&1 | sed 's/^/# /'
exposure=$(systemd-analyze security --offline=true --no-pager "$UNIT" 2>/dev/null | sed -n 's/.*Overall exposure level for ogc-gate.service: \([0-9.]*\).*/\1/p')
check "systemd-analyze security rates the unit's exposure at most 2.0 of 10 (got ${exposure:-none})" \
  fcmp "${exposure:-99}" "<=" 2.0
UNIT_USER=$(unit_lines "$UNIT" User) UNIT_GROUP=$(unit_lines "$UNIT" Group)
check_eq "the unit runs as the system user the package created" "ogc-gate ogc-gate /usr/sbin/nologin" \
  "$UNIT_USER $UNIT_GROUP $(getent passwd "$UNIT_USER" | cut -d: -f7)"
check_eq "the config is a conffile readable by root and the gate's group only" "640 root ogc-gate yes" \
  "$(stat -c '%a %U %G' "$CONF") $(dpkg-query -W -f='${Conffiles}' "$GATE_PKG" | grep -q " $CONF " && echo yes)"
for k in NoNewPrivileges ProtectSystem Restart; do printf '%s=%s ' "$k" "$(unit_lines "$UNIT" "$k")"; done >"$tmp/hardening"
check_eq "the unit's hardening and restart policy" "NoNewPrivileges=yes ProtectSystem=strict Restart=on-failure " \
  "$(cat "$tmp/hardening")"
check_eq "the unit empties the capability bounding set" "" "$(unit_lines "$UNIT" CapabilityBoundingSet)"

sed -i -e "s|^listen: .*|listen: 127.0.0.1:$GATE_PORT|" -e "s|^upstream: .*|upstream: http://127.0.0.1:$ECHO_PORT|" \
  -e "s|^admin_listen: .*|admin_listen: 127.0.0.1:$ADMIN_PORT|" "$CONF"
/usr/bin/python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO_PORT" 2>"$tmp/echo.err" & echo_pid=$!
# The upstream must listen before the first request goes through the gate.
for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$ECHO_PORT/" && break; sleep 0.1; done
check "ExecStartPre (--check-config) accepts the edited config as the unit's user" \
  unit_exec "$(unit_lines "$UNIT" ExecStartPre)"
unit_start "$(unit_lines "$UNIT" ExecStart)" "$tmp/gate.log" "$tmp/gate.err"; gate_pid=$UNIT_PID
for i in $(seq 1 100); do
  curl -fs -o /dev/null "http://127.0.0.1:$GATE_PORT/healthz" && break
  kill -0 "$gate_pid" 2>/dev/null || break; sleep 0.1
done
check_eq "the ExecStart line serves /healthz" 200 "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GATE_PORT/healthz")"
check_eq "the gate runs as ogc-gate, no new privileges, no capabilities" "$(id -u ogc-gate) 1 0000000000000000" \
  "$(awk '/^Uid:/ {u=$2} /^NoNewPrivs:/ {n=$2} /^CapBnd:/ {c=$2} END {print u, n, c}' "/proc/$gate_pid/status")"
body=$(curl -s "http://127.0.0.1:$GATE_PORT/wms?service=WMS&version=1.3.0&request=GetCapabilities")
echo "# the gate answered: $(head -c 160 <<<"$body" | tr '\n' ' ')"
check "a request reaches the upstream, canonicalised" grep -q 'GET /wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetCapabilities' <<<"$body"
getmap="http://127.0.0.1:$GATE_PORT/wms?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=x&STYLES=&CRS=EPSG:3857&BBOX=0,0,1000,1000&WIDTH=200&HEIGHT=200&FORMAT=image/png"
check "a 200x200 GetMap passes under the packaged caps" grep -q 'REQUEST=GetMap' <<<"$(curl -s "$getmap")"

# ExecReload: check the file, then SIGHUP; the new cap applies without a restart.
sed -i 's|^  max_pixels: .*|  max_pixels: 10000|' "$CONF"
while read -r line; do unit_exec "$line" "$gate_pid" >>"$tmp/reload.out" 2>&1 || echo "failed: $line" >>"$tmp/reload.out"; done \
  < <(unit_lines "$UNIT" ExecReload)
for i in $(seq 1 50); do grep -q 'configuration reloaded' "$tmp/gate.err" && break; sleep 0.1; done
check "ExecReload (check, then SIGHUP) reloads the config" grep -q 'configuration reloaded' "$tmp/gate.err"
check "the reloaded cap refuses the same GetMap with an OGC exception" \
  grep -q 'ServiceException' <<<"$(curl -s "$getmap")"
kill -TERM "$gate_pid"; wait "$gate_pid"; rc=$?; gate_pid=""
check_eq "SIGTERM stops the gate cleanly" 0 "$rc"

# --- purge -----------------------------------------------------------------
check "apt-get purge removes both packages" purge_packages
left=$( { deb_files "$ext_deb"; deb_files "$gate_deb"; } | while read -r f; do [ -e "$f" ] || [ -L "$f" ] && echo "$f"; done)
check_eq "no packaged file is left" "" "$left"
check "the configuration directory is gone" test ! -e /etc/ogc-gate
check "the service is no longer enabled" test ! -e /etc/systemd/system/multi-user.target.wants/ogc-gate.service
check "the system user is gone" test -z "$(getent passwd ogc-gate)"
check "dpkg forgets both packages" test -z "$(pkg_known "$EXT_PKG" && echo x)$(pkg_known "$GATE_PKG" && echo x)"
tap_exit
