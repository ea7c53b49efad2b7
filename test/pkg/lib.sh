# Helpers for test/pkg/packages.t.sh (sourced, bash): the system state the
# package test changes, saved before and put back after, and the unit file read
# the way systemd reads it (enough of it for this unit).

EXT_PKG=postgresql-15-ogc-throttle
GATE_PKG=ogc-gate

# deb_files DEB: the regular files and symlinks a package ships, as absolute paths.
deb_files() { dpkg-deb --fsys-tarfile "$1" | tar -t | grep -v '/$' | sed 's|^\./|/|'; }

# Files a `make install` put where the package installs (/usr/lib/postgresql/15/lib/
# ogc_throttle.so, the extension SQL): dpkg overwrites them and the purge deletes
# them, so they are copied aside first and put back at the end.
save_unowned() {  # DEB BACKUP_DIR
  local f
  mkdir -p "$2"
  while read -r f; do
    [ -e "$f" ] || continue
    dpkg -S "$f" >/dev/null 2>&1 && continue
    (cd / && cp -a --parents "${f#/}" "$2"/)
  done < <(deb_files "$1")
}
restore_saved() {  # BACKUP_DIR (their directories belong to postgresql-15 and stay)
  local f
  [ -d "$1" ] || return 0
  while read -r f; do
    cp -a "$1/$f" "/$f"
  done < <(cd "$1" && find . \( -type f -o -type l \) -printf '%P\n')
}

pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
# Known to dpkg at all (installed, or removed with its conffiles left).
pkg_known() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -qvE 'not-installed|^$'; }

purge_packages() {
  local p=()
  pkg_known "$GATE_PKG" && p+=("$GATE_PKG")
  pkg_known "$EXT_PKG" && p+=("$EXT_PKG")
  [ ${#p[@]} = 0 ] && return 0
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${p[@]}"
}

# unit_lines UNIT KEY: the values of KEY= in the [Service] section, one a line.
unit_lines() {
  awk -v key="$2" '/^\[/ { sec = $0; next }
    sec == "[Service]" && index($0, key "=") == 1 { print substr($0, length(key) + 2) }' "$1"
}

# as_unit_user CMD...: as the unit's User=/Group=, with NoNewPrivileges= and the
# empty CapabilityBoundingSet= applied, as systemd would start it.
as_unit_user() {
  setpriv --reuid="$UNIT_USER" --regid="$UNIT_GROUP" --init-groups \
    --no-new-privs --bounding-set=-all --inh-caps=-all -- "$@"
}

# unit_exec LINE [MAINPID]: run one Exec*= command line of the unit (plain
# words, $MAINPID substituted) as the unit's user.
unit_exec() {
  local line=${1//\$MAINPID/${2:-}} words
  read -ra words <<<"$line"
  as_unit_user "${words[@]}"
}

# unit_start LINE OUT ERR: the same in the background; UNIT_PID is the
# process's own pid (setpriv execs it), as $MAINPID would be.
unit_start() {
  local words
  read -ra words <<<"$1"
  setpriv --reuid="$UNIT_USER" --regid="$UNIT_GROUP" --init-groups \
    --no-new-privs --bounding-set=-all --inh-caps=-all -- "${words[@]}" >"$2" 2>"$3" &
  UNIT_PID=$!
}
