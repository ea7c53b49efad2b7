# Minimal TAP-style reporting for shell test scripts (sourced, bash).
# Each check prints "ok - what" or "not ok - what"; scripts/test.sh counts them.
TAP_FAILED=0
ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; TAP_FAILED=1; }
# check "description" command...: ok if the command succeeds.
check() { local d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
# check_eq "description" expected actual
check_eq() { if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (expected '$2', got '$3')"; fi; }
tap_exit() { exit "$TAP_FAILED"; }
