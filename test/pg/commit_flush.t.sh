#!/usr/bin/env bash
# A transaction that wrote pays for its commit (doc/metering.md, "The commit"):
# the commit record's flush runs after every statement's executor is done, in
# no statement. With fsync on, a one-row INSERT ran 0.1 ms and its commit
# waited 2.7 ms for the disk: a client of tiny write transactions used the
# disk for a few percent of what it was charged.
set -uo pipefail
. "$(dirname "$0")/common.sh"
cluster_up 55492 "shared_preload_libraries = 'ogc_throttle'" "fsync = on" "synchronous_commit = on" \
  "max_prepared_transactions = 25"
q "CREATE EXTENSION postgis; CREATE EXTENSION ogc_throttle;
   CREATE ROLE wr LOGIN;
   CREATE TABLE w (i int); GRANT INSERT, SELECT ON w TO wr;
   ALTER ROLE wr SET ogc_throttle.mode = 'reject';
   ALTER ROLE wr SET ogc_throttle.capacity = 600000;
   ALTER ROLE wr SET ogc_throttle.rate = 0.01;
   ALTER ROLE wr SET ogc_throttle.charge_connection = off;
   ALTER ROLE wr SET log_min_duration_statement = 0;" >/dev/null || { not_ok "setup"; tap_exit; }
# (each psql and pgbench below is a new session: its set-up is charged only where that is tested)

u() { as_pg psql -X -q -h "$DIR" -p "$PORT" -U wr -d postgres -At "$@" 2>"$DIR/u.err"; }
tokens() { settled_tokens wr; }
spent_since() { awk -v a="$1" -v b="$(tokens)" 'BEGIN { printf "%.1f", a - b }'; }
script="$DIR/insert.sql"; echo "INSERT INTO w VALUES (1);" >"$script"
select1="$DIR/select1.sql"; echo "SELECT 1;" >"$select1"
chmod 644 "$script" "$select1"
# pgbench -t N as wr: the client's own latency average (ms) per transaction.
bench() {
  as_pg env PGOPTIONS="${2:-}" "$PGBIN/pgbench" -n -h "$DIR" -p "$PORT" -U wr -t 200 -f "$1" postgres 2>&1 |
    awk '/latency average/ { print $4 }'
}

# durations_since OFFSET [STATEMENT]: the server's own durations (ms, summed) of the STATEMENTs (the
# one-row INSERTs) logged past OFFSET of server.log. A simple-protocol statement's duration line covers its commit, flush included; the client's
# latency also holds two process wake-ups, which on this VM took 0.1-0.3 ms and are no server work.
log_size() { stat -c %s "$DIR/server.log"; }
durations_since() {
  tail -c +"$(($1 + 1))" "$DIR/server.log" | grep -aF "statement: ${2:-INSERT INTO w VALUES (1);}" | grep -a 'duration: ' |
    awk '{ for (i = 1; i < NF; i++) if ($i == "duration:") s += $(i + 1) } END { printf "%.1f", s }'
}
u -c "SELECT 1" >/dev/null  # the bucket exists
before=$(tokens)
off=$(log_size)
lat=$(bench "$script")
spent=$(spent_since "$before")
server=$(durations_since "$off")
echo "# 200 one-row INSERT transactions, fsync on: $lat ms each at the client, $server ms in all in the server's duration lines, bucket spent $spent ms"
check "each write transaction's commit is charged: >= 85% of the server's durations ($spent of $server ms)" \
  awk -v s="$spent" -v d="$server" 'BEGIN { exit !(d > 0 && s >= 0.85 * d) }'
check "... and not more than 105% of the client's time" awk -v s="$spent" -v l="$lat" 'BEGIN { exit !(s <= 1.05 * 200 * l) }'

before=$(tokens)
lat=$(bench "$script" "-c synchronous_commit=off")
spent=$(spent_since "$before")
echo "# the same with synchronous_commit off: $lat ms each, bucket spent $spent ms"
check "(control) with synchronous_commit off the commit waits for nothing, and is charged little ($spent ms)" \
  awk -v s="$spent" -v l="$lat" 'BEGIN { exit !(s <= 200 * (l + 0.1)) }'

before=$(tokens)
lat=$(bench "$select1")
spent=$(spent_since "$before")
echo "# 200 SELECT 1: $lat ms each, bucket spent $spent ms"
check "a read-only transaction's commit adds nothing ($spent ms for 200 SELECT 1)" \
  awk -v s="$spent" 'BEGIN { exit !(s <= 200 * 0.2) }'

# A procedure that commits as it goes is on its CALL's clock: charged once.
q "CREATE PROCEDURE many_commits() LANGUAGE plpgsql AS \$\$
   BEGIN FOR k IN 1..50 LOOP INSERT INTO w VALUES (k); COMMIT; END LOOP; END \$\$;
   GRANT EXECUTE ON PROCEDURE many_commits() TO wr" >/dev/null
# Its reference is the server's duration line: a loaded CI run measured 19.952 ms at the client for a
# CALL charged 15.6 ms, the rest being the client's wake-ups.
before=$(tokens)
off=$(log_size)
took=$(u -c '\timing on' -c "CALL many_commits()" | ms_of)
spent=$(spent_since "$before")
server=$(durations_since "$off" "CALL many_commits()")
echo "# CALL of 50 committed INSERTs: $took ms at the client, $server ms in the server's duration line, bucket spent $spent ms"
check "a procedure's own commits are charged once, with its CALL ($spent of $server ms in the server, $took at the client)" \
  awk -v s="$spent" -v d="$server" -v t="$took" 'BEGIN { exit !(d > 0 && s >= 0.85 * d && s <= 1.1 * t + 1) }'

before=$(tokens)
took=$(u -c "BEGIN" -c "INSERT INTO w VALUES (7)" -c '\timing on' -c "PREPARE TRANSACTION 'p1'" | ms_of)
spent=$(spent_since "$before")
q "COMMIT PREPARED 'p1'" >/dev/null
echo "# PREPARE TRANSACTION of a one-row INSERT: $took ms, bucket spent $spent ms"
check "PREPARE TRANSACTION's flush is charged (>= 0.3 ms: $spent ms of $took)" \
  awk -v s="$spent" -v t="$took" 'BEGIN { exit !(t > 0 && s >= 0.3) }'

# COMMIT PREPARED writes and flushes the prepared transaction's commit record
# inside the statement, in a transaction of its own with no xid; ROLLBACK
# PREPARED likewise its abort record. Whoever runs them pays; they are never refused.
# finish_prepared VERB: 20 one-row transactions prepared, then VERB PREPARED for each, timed at the
# client and in the server's duration lines (the client's time also holds its wake-ups: 24 ms against
# 10 ms of the server's on a loaded machine).
finish_prepared() {
  local k off args=()
  for k in $(seq 1 20); do args+=(-c "BEGIN" -c "INSERT INTO w VALUES ($k)" -c "PREPARE TRANSACTION 'f$k'"); done
  u "${args[@]}" >/dev/null
  before=$(tokens)
  off=$(log_size)
  args=(-c '\timing on'); for k in $(seq 1 20); do args+=(-c "$1 PREPARED 'f$k'"); done
  took=$(u "${args[@]}" | ms_of)
  spent=$(spent_since "$before")
  server=$(durations_since "$off" "$1 PREPARED")
  echo "# 20 $1 PREPARED: $took ms at the client, $server ms in the server's duration lines, bucket spent $spent ms"
}
charged_its_flush() {  # >= 85% of the server's durations, <= 105% of the client's time
  awk -v s="$spent" -v d="$server" -v t="$took" 'BEGIN { exit !(d > 0 && s >= 0.85 * d && s <= 1.05 * t + 1) }'
}
finish_prepared COMMIT
check "COMMIT PREPARED is charged its flush: >= 85% of the server's durations ($spent of $server ms; $took at the client)" \
  charged_its_flush
finish_prepared ROLLBACK
check "ROLLBACK PREPARED is charged its flush likewise ($spent of $server ms)" charged_its_flush
q "ALTER ROLE wr SET ogc_throttle.capacity = 1" >/dev/null
q "SELECT throttle_reset('wr')" >/dev/null
# (its INSERTs and PREPARE's flush, a few ms, overdraw a 1 ms bucket)
u -c "BEGIN" -c "INSERT INTO w VALUES (0)" -c "INSERT INTO w VALUES (0)" -c "PREPARE TRANSACTION 'd1'" >/dev/null
u -c "SELECT pg_sleep(0.01)" >/dev/null 2>&1  # and 10 ms more: a fast disk's flushes alone stayed under 1 ms
tokens >/dev/null  # the PREPARE session has settled
refused=$(u -c "SELECT count(*) FROM w" >/dev/null; cat "$DIR/u.err")
u -c "COMMIT PREPARED 'd1'" >/dev/null
left=$(q "SELECT count(*) FROM pg_prepared_xacts WHERE gid = 'd1'")
check "(control) the bucket is in debt: a SELECT is refused" grep -q 'ogc_throttle: statement refused' <<<"$refused"
check "a role in debt still finishes its prepared transaction (its locks are released; $(head -c 200 "$DIR/u.err"))" \
  test "$left" = 0
q "ALTER ROLE wr SET ogc_throttle.capacity = 600000" >/dev/null; q "SELECT throttle_reset('wr')" >/dev/null
u -c "SELECT 1" >/dev/null  # the bucket exists again, at the new capacity

# A new session pays for its own set-up (fork, authentication, caches, settings) in backend CPU time.
before=$(tokens); loff=$(log_size)
as_pg "$PGBIN/pgbench" -n -C -h "$DIR" -p "$PORT" -U wr -t 50 -f "$select1" postgres >"$DIR/c.out" 2>&1
off=$(spent_since "$before"); off_server=$(durations_since "$loff" "SELECT 1;")
q "ALTER ROLE wr SET ogc_throttle.charge_connection = on" >/dev/null
before=$(tokens)
as_pg "$PGBIN/pgbench" -n -C -h "$DIR" -p "$PORT" -U wr -t 50 -f "$select1" postgres >"$DIR/c.out" 2>&1
on=$(spent_since "$before")
conn=$(awk '/average connection time/ { print $5 }' "$DIR/c.out")
echo "# 50 connections of one SELECT 1 each: charged $on ms (charge_connection off: $off, the SELECTs' duration lines $off_server); $conn ms a connection at the client"
check "each new session is charged its set-up: >= 0.3 ms a connection ($on ms for 50)" \
  awk -v s="$on" 'BEGIN { exit !(s >= 50 * 0.3) }'
check "... not more than the client waited for it ($on <= 50 x $conn ms)" \
  awk -v s="$on" -v c="$conn" 'BEGIN { exit !(c > 0 && s <= 50 * c) }'
# A session's first statement fills its caches: SELECT 1 took 0.6-1.5 ms on one VM, under 0.5 on another. The
# statements' own duration lines say what they took there.
check "(control) with ogc_throttle.charge_connection off, 50 connections cost only their statements ($off ms; their lines $off_server)" \
  awk -v s="$off" -v d="$off_server" -v o="$on" 'BEGIN { exit !(d > 0 && s <= d + 50 * 0.1 && s < o / 3) }'
r=$(as_pg env PGOPTIONS="-c ogc_throttle.charge_connection=off" psql -X -h "$DIR" -p "$PORT" -U wr -d postgres -At \
      -c "SELECT 1" 2>&1)
check "a client cannot turn it off for itself" grep -q "permission denied to set parameter" <<<"$r"
q "ALTER ROLE wr SET ogc_throttle.charge_connection = off" >/dev/null

# Log mode measures and charges nothing; a role in debt still commits what it wrote (it cannot be refused
# once written) and its next statement is refused.
q "ALTER ROLE wr SET ogc_throttle.mode = 'log'" >/dev/null
before=$(tokens)
bench "$script" >/dev/null
check "(control) in log mode nothing is charged" awk -v s="$(spent_since "$before")" 'BEGIN { exit !(s <= 0.01) }'
q "ALTER ROLE wr SET ogc_throttle.mode = 'reject'; ALTER ROLE wr SET ogc_throttle.capacity = 1" >/dev/null
q "SELECT throttle_reset('wr')" >/dev/null
n0=$(q "SELECT count(*) FROM w")
args=(); for k in $(seq 1 60); do args+=(-c "INSERT INTO w VALUES ($k)"); done
u "${args[@]}" >/dev/null
n1=$(q "SELECT count(*) FROM w")
echo "# capacity 1 ms, 60 one-row INSERTs: rows $n0 -> $n1, tokens $(tokens); $(head -n1 "$DIR/u.err")"
# How many a 1 ms bucket admits is 1 ms over what each costs at that moment (0.05 to 0.5 ms a one-row INSERT
# on one VM within a minute, as its disk was busy or not): some are admitted, then the debt refuses the rest.
check "on a 1 ms budget, write transactions put the bucket in debt and later INSERTs are refused ($((n1 - n0)) of 60 admitted)" \
  awk -v a="$n0" -v b="$n1" 'BEGIN { exit !(b > a && b < a + 60) }'
check "... with the refusal SQLSTATE's message" grep -q 'ogc_throttle: statement refused' "$DIR/u.err"
tap_exit
