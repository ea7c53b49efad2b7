#!/usr/bin/env bash
# A backend visits the bucket it used last without the partition lock (bucket_table.cpp, "A backend
# visits one bucket"): a removal must wait until no backend is inside such a visit, or the visitor
# writes into an entry that is already another identity's (a spend lost, a debt handed over).
# concurrency.t.sh races removals against visits and catches a missing wait only now and then (the
# window is one visit long, ~100 ns). Here gdb holds a visitor inside its visit (at gcra_spend, under
# the entry's spinlock, the entry named in the backend's slot) while another session removes the
# bucket: the removal must not finish until the visitor is let go, and afterwards the identity's
# next spend must find a bucket of its own.
set -uo pipefail
. "$(dirname "$0")/common.sh"

command -v gdb >/dev/null || { not_ok "gdb is installed (scripts/packages.txt)"; tap_exit; }
cluster_up 55517 "shared_preload_libraries = 'ogc_throttle'" "ogc_throttle.mode = 'off'" "ogc_throttle.max_identities = 100" \
  "ogc_throttle.capacity = 100" "ogc_throttle.rate = 0.01" "ogc_throttle.cost_max = 100"
q "SET client_min_messages = warning; CREATE EXTENSION ogc_throttle CASCADE" >/dev/null || { not_ok "CREATE EXTENSION"; tap_exit; }

# The visitor: one psql session fed through a FIFO, so that its statements come when this script says.
mkfifo "$DIR/visitor.in" && chmod 666 "$DIR/visitor.in" || { not_ok "fifo"; tap_exit; }
as_pg psql -X -At -h "$DIR" -p "$PORT" -U postgres -d postgres <"$DIR/visitor.in" >"$DIR/visitor.out" 2>&1 &
BG_PIDS+=($!)
exec 7>"$DIR/visitor.in"
say() { echo "$1" >&7; }
# wait_for FILE LINES SECONDS: until FILE has LINES lines
wait_for() {
  local i
  for i in $(seq $(($3 * 20))); do
    [ -e "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0
    sleep 0.05
  done
  return 1
}

say "SELECT pg_backend_pid();"
say "SELECT allowed FROM throttle_try_spend('fence', 1);"  # the bucket made, and remembered
wait_for "$DIR/visitor.out" 2 20 || { not_ok "visitor session answers"; cat "$DIR/visitor.out" | sed 's/^/# /'; tap_exit; }
vpid=$(sed -n 1p "$DIR/visitor.out")
check_eq "visitor: first spend allowed" t "$(sed -n 2p "$DIR/visitor.out")"

# hold_and_remove NAME SQL: gdb stops the visitor at its next gcra_spend (under the entry's spinlock, the
# entry named in its slot) and holds it there while another session runs SQL, which removes buckets;
# SQL must not finish before the visitor is let go. Sets N, the visitor's output lines so far.
N=2
hold_and_remove() {
  local name=$1 sql=$2 gdb_pid remover
  rm -f "$DIR/armed" "$DIR/held" "$DIR/release"
  gdb -q -batch -nx -p "$vpid" \
    -ex 'set pagination off' -ex 'set confirm off' \
    -ex 'break ot::core::gcra_spend' \
    -ex "shell touch $DIR/armed" \
    -ex 'continue' \
    -ex "shell touch $DIR/held" \
    -ex 'bt 4' \
    -ex "shell while [ ! -e $DIR/release ]; do sleep 0.05; done" \
    -ex 'delete' -ex 'detach' >"$DIR/gdb.log" 2>&1 &
  gdb_pid=$!
  BG_PIDS+=($gdb_pid)
  for _ in $(seq 600); do [ -e "$DIR/armed" ] && break; sleep 0.05; done
  check "$name: gdb attached to the visitor and set its breakpoint" [ -e "$DIR/armed" ]
  say "SELECT allowed FROM throttle_try_spend('fence', 1);"
  for _ in $(seq 400); do [ -e "$DIR/held" ] && break; sleep 0.05; done
  if [ -e "$DIR/held" ] && grep -q 'bucket_spend' "$DIR/gdb.log"; then
    ok "$name: the visitor is held inside bucket_spend's visit"
  else
    not_ok "$name: the visitor is held inside bucket_spend's visit"
    sed 's/^/# gdb: /' "$DIR/gdb.log"
  fi

  as_pg psql -X -At -h "$DIR" -p "$PORT" -U postgres -d postgres -c "$sql" >"$DIR/remover.out" 2>&1 &
  remover=$!
  BG_PIDS+=($remover)
  sleep 1.5
  kill -0 "$remover" 2>/dev/null && ok "$name: waits while the visitor is inside its visit" ||
    not_ok "$name: waits while the visitor is inside its visit (it returned: $(tr '\n' ' ' <"$DIR/remover.out"))"

  touch "$DIR/release"
  for _ in $(seq 200); do kill -0 "$remover" 2>/dev/null || break; sleep 0.05; done
  check "$name: finishes once the visitor is let go" wait "$remover"
  REMOVED=$(tail -n 1 "$DIR/remover.out")
  wait "$gdb_pid"
  N=$((N + 1))
  wait_for "$DIR/visitor.out" "$N" 20
  check_eq "$name: the held spend completes" t "$(sed -n "${N}p" "$DIR/visitor.out")"
}

# The bucket removed after the held spend: the next spend finds no remembered entry to trust and
# makes a new, full bucket (capacity 100, one spent).
next_spend_fresh() {
  say "SELECT allowed FROM throttle_try_spend('fence', 1);"
  N=$((N + 1))
  wait_for "$DIR/visitor.out" "$N" 20
  check_eq "$1: the visitor's next spend is allowed" t "$(sed -n "${N}p" "$DIR/visitor.out")"
  check "$1: in a new bucket: capacity less that one spend" fcmp \
    "$(q "SELECT round(tokens::numeric, 3) FROM throttle_peek('fence')")" ">=" 98.99
  check_eq "$1: one bucket for the identity" 1 "$(q "SELECT count(*) FROM throttle_buckets WHERE identity = 'fence'")"
}

hold_and_remove "throttle_reset" "SELECT throttle_reset('fence')"
check_eq "throttle_reset: found the bucket" t "$REMOVED"
next_spend_fresh "after throttle_reset"

hold_and_remove "throttle_reset_all" "SELECT throttle_reset_all()"
check_eq "throttle_reset_all: removed the one bucket" 1 "$REMOVED"
next_spend_fresh "after throttle_reset_all"

# An eviction: the table (max_identities = 100) filled by another session's new identities, each
# left full (cost_max 1, capacity 1, rate 1e9: its spend refilled at once), so that making room
# removes full buckets, and the fence comes first.
hold_and_remove "an eviction" "SET ogc_throttle.cost_max = 1; SET ogc_throttle.capacity = 1; SET ogc_throttle.rate = 1e9;
  SELECT count(throttle_spend('filler_' || i, 0.001)) FROM generate_series(1, 300) i"
check_eq "an eviction: the filler's spends all done" 300 "$REMOVED"
check "an eviction: buckets were evicted" fcmp "$(q "SELECT evicted_full FROM throttle_stats")" ">" 0
exec 7>&-
! grep -q 'PANIC\|stuck spinlock\|server process .* was terminated' "$DIR/server.log" && ok "no crash, no stuck spinlock" ||
  { not_ok "no crash, no stuck spinlock"; grep 'PANIC\|stuck\|terminated' "$DIR/server.log" | sed 's/^/# /'; }
tap_exit
