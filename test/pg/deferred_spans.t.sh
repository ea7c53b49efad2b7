#!/usr/bin/env bash
# A ParseComplete, BindComplete or CommandComplete sent while the client's next message is already
# buffered, or inside a simple Query, reads no clock: the span is deferred to a later answer, or to
# ReadyForQuery, where the stamp PostgreSQL took for its activity report ends it
# (message_metering.cpp, doc/metering.md). The span may grow, never shrink, and must never take in
# a wait for the client: each way a client can pause after a deferred answer (after a Describe, a
# Flush, a Close) ends it there, and a session that leaves with a span deferred (a Terminate right
# behind a Bind, a backend that ends itself in the Execute), or in a message that ended its own
# backend, or whose client hung up while it worked, still pays for it. A raw-protocol client
# (rawproto.py) chooses what is sent in one write.
# The Bind's work here is a domain's CHECK sleeping 300 ms while it converts the parameter:
# pg_sleep is built in, so no meter times it, and only the span charges it.
set -uo pipefail
. "$(dirname "$0")/common.sh"
cluster_up 55518 "shared_preload_libraries = 'ogc_throttle'"
q "SET client_min_messages = warning; CREATE EXTENSION ogc_throttle CASCADE" >/dev/null || { not_ok "setup"; tap_exit; }
metered_roles dr
q "CREATE DOMAIN slowint AS int CHECK (VALUE > 0 AND pg_sleep(0.3) IS NOT NULL)" >/dev/null || { not_ok "domain"; tap_exit; }
slowint=$(q "SELECT 'slowint'::regtype::oid")
RAW=$(pg_readable_copy "$root/test/pg/rawproto.py")
raw() { as_pg python3 "$RAW" "$DIR/.s.PGSQL.$PORT" dr "$@"; }
tokens() { settled_tokens dr; }
spent_since() { awk -v a="$1" -v b="$(tokens)" 'BEGIN { printf "%.1f", a - b }'; }
raw parse:"SELECT 1" bind execute sync >/dev/null  # the bucket exists
# charged LO HI TEXT STEP...: runs rawproto.py with the steps and checks that the role's bucket paid
# LO <= ms < HI for them (r keeps what the client received)
charged() {
  local lo=$1 hi=$2 text=$3 before spent
  shift 3
  before=$(tokens)
  r=$(raw "$@")
  spent=$(spent_since "$before")
  check "$text ($spent ms; $r)" awk -v s="$spent" -v lo="$lo" -v hi="$hi" 'BEGIN { exit !(s >= lo && s < hi) }'
}

# --- the span deferred, then ended by the answer that ends the statement
charged 290 600 "a pipelined Parse, Bind, Describe, Execute, Sync: the Bind's 300 ms are charged" \
  parse:'SELECT $1 + 1':"$slowint" bind:5 describe execute sync

# --- a wait for the client after a deferred answer is not charged
charged 0 50 "a pause after a Describe (Parse, Bind, Describe; 0.5 s; Execute, Sync) is not charged" \
  parse:"SELECT 1" bind describe send sleep:0.5 execute sync

charged 0 50 "a pause after a Flush (Parse, Bind, Flush; 0.5 s; ...) is not charged" \
  parse:"SELECT 1" bind flush send sleep:0.5 describe execute sync

charged 0 50 "a pause after a Close (Parse, Bind, Close; 0.5 s; Sync) is not charged" \
  parse:"SELECT 1" bind close send sleep:0.5 sync

charged 0 50 "(control) a pause after a Bind sent alone is not charged" \
  parse:"SELECT 1" bind send sleep:0.5 describe execute sync

charged 290 400 "a pause before the Sync (Parse, Bind, Execute; 1 s; Sync): the Bind's 300 ms are charged, not the pause" \
  parse:'SELECT $1 + 1':"$slowint" bind:5 execute send sleep:1 sync

charged 0 50 "a pause after a second statement's Bind, the first's CommandComplete deferred, is not charged" \
  parse:"SELECT 1" bind execute parse:"SELECT 2" bind send sleep:0.5 execute sync

# --- a simple Query reads nothing more from the client up to its ReadyForQuery, so its
# CommandComplete defers the span; an extended-protocol statement after it in the same session does
# not inherit that, nor does an EXECUTE's portal (unnamed in the protocol's sense, named inside)
charged 0 50 "a simple Query, then Parse, Bind, Execute; 1 s; Sync: the pause is not charged" \
  "query:SELECT 1" parse:"SELECT 1" bind execute send sleep:1 sync

charged 0 50 "an EXECUTE sent as Parse, Bind, Execute; 1 s; Sync: the pause is not charged" \
  "query:PREPARE ps AS SELECT 1" parse:"EXECUTE ps" bind execute send sleep:1 sync

charged 0 50 "(control) two simple Queries, three statements, in one write: charged little" \
  "query:SELECT 1; SELECT 2" "query:SELECT 3"

# --- ended at ReadyForQuery by the stamp PostgreSQL took for it, or by the clock without one
q "ALTER ROLE dr SET track_activities = off" >/dev/null
charged 290 600 "activity tracking off (no stamp before ReadyForQuery): the pipelined Bind's 300 ms are charged" \
  parse:'SELECT $1 + 1':"$slowint" bind:5 execute sync
q "ALTER ROLE dr RESET track_activities" >/dev/null

# --- a session that leaves with the span deferred
charged 290 600 "a Terminate right behind the Bind: the Bind's 300 ms are charged at the exit" \
  parse:'SELECT $1 + 1':"$slowint" bind:5 terminate

charged 290 600 "an Execute that ends its own backend (FATAL) behind the Bind: the Bind's 300 ms are charged" \
  parse:'SELECT pg_terminate_backend(pg_backend_pid()) WHERE $1 > 0':"$slowint" bind:5 execute sync
case "$r" in *E:57P01*) ok "... the backend did end itself (57P01)" ;; *) not_ok "... the backend did end itself (57P01): $r" ;; esac

# --- a message that ends its own backend pays for what it did before its pass: the EXECUTE's
# parameter, converted to slowint (300 ms), is the message's work, outside every meter
q "GRANT EXECUTE ON FUNCTION pg_terminate_backend(int, bigint) TO dr" >/dev/null
charged 290 600 "an EXECUTE whose pass ends its own backend, one Query: its parameter's 300 ms are charged" \
  "query:PREPARE t(slowint) AS SELECT pg_terminate_backend(pg_backend_pid()) WHERE \$1 > 0; EXECUTE t(5)"
charged 290 600 "an EXECUTE whose pass ends its own backend, two Queries: its parameter's 300 ms are charged" \
  "query:PREPARE t(slowint) AS SELECT pg_terminate_backend(pg_backend_pid()) WHERE \$1 > 0" "query:EXECUTE t(5)"
case "$r" in *E:57P01*) ok "... the backend did end itself (57P01)" ;; *) not_ok "... the backend did end itself (57P01): $r" ;; esac
# (planning cut short by the FATAL settles nothing itself: a function the planner folds, whose
# simple expressions run no pass, ends the backend while the EXECUTE's custom plan is made)
q "CREATE FUNCTION fold_and_die() RETURNS boolean IMMUTABLE LANGUAGE plpgsql AS
   \$\$ BEGIN RETURN pg_terminate_backend(pg_backend_pid()) AND pg_sleep(0.2) IS NULL; END \$\$" >/dev/null
charged 290 600 "an EXECUTE whose planning ends its own backend: its parameter's 300 ms and its planning are charged" \
  "query:PREPARE d(slowint) AS SELECT fold_and_die() WHERE \$1 > 0; EXECUTE d(5)"
# (the pass that was running is settled by the abort after the exit's charge: not counted twice)
charged 290 450 "a pass that runs 300 ms, then ends its own backend: charged once" \
  "query:SELECT pg_sleep(0.3) IS NOT NULL AND pg_terminate_backend(pg_backend_pid())"

# --- a client gone without a word: with client_connection_check_interval the backend notices the
# closed socket while it works and ends with a FATAL it cannot send (no ErrorResponse marks it)
q "CREATE DOMAIN slow1s AS int CHECK (VALUE > 0 AND pg_sleep(1) IS NOT NULL)" >/dev/null
slow1s=$(q "SELECT 'slow1s'::regtype::oid")
q "ALTER ROLE dr SET client_connection_check_interval = '100ms'" >/dev/null
charged 250 900 "a client that hangs up 0.3 s into a Bind's 1 s conversion: the backend's work up to its exit is charged" \
  parse:'SELECT $1 + 1':"$slow1s" bind:5 execute sync send sleep:0.3 hangup
charged 550 1500 "a client that hangs up 0.6 s in, during the pass after a 300 ms Bind: the Bind and the pass so far are charged" \
  parse:'SELECT pg_sleep(2) IS NULL WHERE $1 > 0':"$slowint" bind:5 execute sync send sleep:0.6 hangup
charged 550 1500 "... the same in one Query (an EXECUTE's 300 ms parameter, then its pass): charged up to the exit" \
  "query:PREPARE h(slowint) AS SELECT pg_sleep(2) IS NULL WHERE \$1 > 0; EXECUTE h(5)" send sleep:0.6 hangup
# (a backend that leaves while it waits for the client pays nothing for the wait, ended by the end
# of its input or by a FATAL: it was reading, not serving)
charged 0 50 "(control) a client that hangs up 1 s after its Execute's answer, with no Sync: the wait is not charged" \
  parse:"SELECT 1" bind execute send sleep:1 hangup
charged 0 50 "(control) a Terminate 1 s after an Execute's answer, with no Sync: the wait is not charged" \
  parse:"SELECT 1" bind execute send sleep:1 terminate
before=$(tokens)
active="FROM pg_stat_activity WHERE usename = 'dr' AND state = 'active'"
(for k in $(seq 1 100); do [ "$(q "SELECT count(*) $active")" = 1 ] && break; sleep 0.05; done
 sleep 1; q "SELECT pg_terminate_backend(pid) $active" >/dev/null) &
r=$(raw parse:"SELECT 1" bind execute send sleep:2)
wait
spent=$(spent_since "$before")
check "(control) a backend terminated 1 s after its Execute's answer, waiting for the Sync: the wait is not charged ($spent ms; $r)" \
  awk -v s="$spent" 'BEGIN { exit !(s < 50) }'
case "$r" in *E:57P01*) ok "... it was terminated (57P01)" ;; *) not_ok "... it was terminated (57P01): $r" ;; esac
q "ALTER ROLE dr RESET client_connection_check_interval" >/dev/null

# --- and each statement is charged once
charged 590 900 "two pipelined statements with a 300 ms Bind each: 600 ms charged, no more" \
  parse:'SELECT $1 + 1':"$slowint" bind:5 describe execute parse:'SELECT $1 + 2':"$slowint" bind:6 describe execute sync
tap_exit
