#!/usr/bin/env bash
# The extension against its peers, from one run: round trips (pgbench), cost per
# call inside one statement, contention on one key, shared memory per identity.
# Starts its own PostgreSQL (preloaded) and redis-server, stops both on exit.
# Knobs: ROUNDS (3), SECS per pgbench run (5), INNER_N (1e6), PL_N (50000), CONT_N (300000).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/test/lib/pg.sh"

ROUNDS=${ROUNDS:-3}
SECS=${SECS:-5}
INNER_N=${INNER_N:-1000000}
PL_N=${PL_N:-50000}
CONT_N=${CONT_N:-300000}
PORT=55490  # Unix socket only, in a private directory
work=$(pg_tmpdir)
redis_pid=""
cleanup() {
  [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  pg_stop "$work" immediate
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
die() { echo "run.sh: $*" >&2; exit 1; }

cp "$here"/*.pgbench "$here"/setup.sql "$here"/gcra.lua "$work/" && chmod 644 "$work"/* || die "copy failed"
q() { pg_psql "$work" "$PORT" -d postgres -At -c "$1"; }
shmem_total() { q "SELECT sum(allocated_size) FROM pg_shmem_allocations WHERE name IS NOT NULL"; }

# --- PostgreSQL: measure shared memory without, then with, the library
# JIT would add a compile step to the long in-statement loops and nothing else.
pg_cluster_init "$work" "max_connections = 20" "synchronous_commit = off" "jit = off" || die "initdb failed"
pg_start "$work" "$PORT" || die "postgres did not start"
shm_without=$(shmem_total)
pg_stop "$work" fast
pg_conf_set "$work" "shared_preload_libraries = 'ogc_throttle'"
# Nothing is ever refused: every design does the same admitted-path work.
pg_conf_set "$work" "ogc_throttle.capacity = 1000000000"
pg_conf_set "$work" "ogc_throttle.rate = 1000000000"
pg_start "$work" "$PORT" || { tail -n 20 "$work/server.log"; die "postgres did not start with the library"; }
shm_with=$(shmem_total)
max_ids=$(q "SHOW ogc_throttle.max_identities")
bytes_per_id=$(awk -v a="$shm_with" -v b="$shm_without" -v n="$max_ids" 'BEGIN { printf "%.1f", (a - b) / n }')
# The bucket table alone: the pricing hook's per-identity statistics switched off.
pg_stop "$work" fast
pg_conf_set "$work" "ogc_throttle.max_identity_stats = 0"
pg_start "$work" "$PORT" || die "postgres did not start with ogc_throttle.max_identity_stats = 0"
shm_buckets=$(shmem_total)
bucket_bytes_per_id=$(awk -v a="$shm_buckets" -v b="$shm_without" -v n="$max_ids" 'BEGIN { printf "%.1f", (a - b) / n }')
pg_stop "$work" fast
sed -i '/^ogc_throttle.max_identity_stats = 0$/d' "$work/data/postgresql.conf"
pg_start "$work" "$PORT" || die "postgres did not restart"
pg_psql "$work" "$PORT" -d postgres -f "$work/setup.sql" >/dev/null 2>&1 || die "setup.sql failed"

# --- Redis on loopback; measured over its Unix socket, as PostgreSQL is
rport=""
for p in $(seq 56300 56399); do
  (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { rport=$p; break; }
done
[ -n "$rport" ] || die "no free port in 56300-56399"
rsock="$work/redis.sock"
redis-server --bind 127.0.0.1 --port "$rport" --unixsocket "$rsock" --unixsocketperm 700 \
  --save '' --appendonly no --dir "$work" --loglevel warning >"$work/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 50); do redis-cli -s "$rsock" ping >/dev/null 2>&1 && break; sleep 0.1; done
sha=$(redis-cli -s "$rsock" SCRIPT LOAD "$(cat "$work/gcra.lua")") || die "redis script load failed"
[ "$(redis-cli -s "$rsock" EVALSHA "$sha" 1 probe 1 1e9 1e9)" != "" ] || die "redis script does not run"

declare -A vals
add() { vals[$1]+="$2 "; }
median() {
  tr ' ' '\n' <<<"${vals[$1]:-}" | grep -v '^$' | sort -g |
    awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}
# Median over rounds of the ratio within each round: the two runs compared sat
# next to each other in time, so load that drifts over minutes cancels out.
pratio() {
  paste -d' ' <(tr ' ' '\n' <<<"${vals[$1]:-}" | grep -v '^$') <(tr ' ' '\n' <<<"${vals[$2]:-}" | grep -v '^$') |
    awk '$1 != "nan" && $2 != "nan" && $2 > 0 { print $1 / $2 }' | sort -g |
    awk '{ a[NR] = $1 } END { if (NR == 0) print "nan"; else printf "%.2f", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# pgbench_tps SCRIPT CLIENTS KMAX SPREAD
pgbench_tps() {
  as_pg "$PGBIN/pgbench" -n -M prepared -c "$2" -j "$2" -T "$SECS" -f "$work/$1" -D kmax="$3" -D spread="$4" \
    -h "$work" -p "$PORT" -U postgres postgres 2>&1 | sed -n 's/^tps = \([0-9.]*\) .*/\1/p' | grep . || echo nan
}
# redis_rps CLIENTS KEYS(hot|10k)
redis_rps() {
  local key=hot rand=() n=$((SECS * 30000 * $1))
  [ "$2" = 10k ] && { key='k:__rand_int__'; rand=(-r 10000); }
  redis-benchmark -s "$rsock" -c "$1" --threads "$1" -n "$n" "${rand[@]}" --csv \
    EVALSHA "$sha" 1 "$key" 1 1e9 1e9 2>/dev/null | tail -n 1 | awk -F'","' '{ print $2 + 0 }' | grep -v '^0$' || echo nan
}
keys_args() { [ "$1" = hot ] && echo "1 0" || echo "10000 0"; }
# Same design, same work, seconds inside the server for N calls.
inner() { q "SELECT bench_seconds(\$q\$SELECT count($1) FROM generate_series(1, $2) i\$q\$)"; }

# PL/pgSQL or SQL function: use whichever is faster as the peer.
SECS_SAVED=$SECS; SECS=2
plpgsql_probe=$(pgbench_tps rt_plpgsql.pgbench 1 10000 0)
sqlfn_probe=$(pgbench_tps rt_sqlfn.pgbench 1 10000 0)
SECS=$SECS_SAVED
peer_script=rt_plpgsql.pgbench; peer_fn=pl_spend
if awk -v a="$sqlfn_probe" -v b="$plpgsql_probe" 'BEGIN { exit !(a > b) }'; then peer_script=rt_sqlfn.pgbench; peer_fn=sql_spend; fi
echo "# peer probe (1 client, 10k keys, 2 s): pl_spend $plpgsql_probe tps, sql_spend $sqlfn_probe tps -> using $peer_fn"

designs=(ext builtin plpgsql redis)
for r in $(seq "$ROUNDS"); do
  echo "# round $r/$ROUNDS"
  for c in 1 2; do
    for keys in hot 10k; do
      # Rotate the order each round so that no design always runs first or last.
      for i in 0 1 2 3; do
        d=${designs[$(((i + r) % 4))]}
        case $d in
          ext) v=$(pgbench_tps rt_ext.pgbench "$c" $(keys_args $keys)) ;;
          builtin) v=$(pgbench_tps rt_builtin.pgbench "$c" $(keys_args $keys)) ;;
          plpgsql) v=$(pgbench_tps "$peer_script" "$c" $(keys_args $keys)) ;;
          redis) v=$(redis_rps "$c" "$keys") ;;
        esac
        add "rt_${d}_${keys}_c$c" "$v"
      done
    done
  done
  add rt_ext_distinct_c2 "$(pgbench_tps rt_ext.pgbench 2 1 1)"
  # Inside one statement: ns per call.
  inner_designs=(ext builtin empty plpgsql)
  for i in 0 1 2 3; do
    d=${inner_designs[$(((i + r) % 4))]}
    case $d in
      ext) s=$(inner "throttle_spend('k' || (i % 10000), 0.001)" "$INNER_N"); n=$INNER_N ;;
      builtin) s=$(inner "textlen('k' || (i % 10000))" "$INNER_N"); n=$INNER_N ;;
      empty) s=$(inner "'k' || (i % 10000)" "$INNER_N"); n=$INNER_N ;;
      plpgsql) s=$(inner "$peer_fn('k' || (i % 10000), 0.001)" "$PL_N"); n=$PL_N ;;
    esac
    add "in_$d" "$(awk -v s="$s" -v n="$n" 'BEGIN { printf "%.1f", s / n * 1e9 }')"
  done
  # Two sessions spending inside the server: one key vs one key each.
  for spread in 0 1; do
    tps=$(as_pg "$PGBIN/pgbench" -n -c 2 -j 2 -t 3 -f "$work/contend.pgbench" -D spread=$spread -D n="$CONT_N" \
      -h "$work" -p "$PORT" -U postgres postgres 2>&1 | sed -n 's/^tps = \([0-9.]*\) .*/\1/p')
    add "cont_$spread" "$(awk -v t="${tps:-0}" -v n="$CONT_N" 'BEGIN { printf "%.0f", t * n }')"
  done
done

echo
echo "Round trips, transactions/s (median of $ROUNDS x ${SECS}s; all rounds in brackets)"
printf '%-10s %-5s %-8s %12s   %s\n' design keys clients median rounds
for c in 1 2; do for keys in hot 10k; do for d in "${designs[@]}"; do
  printf '%-10s %-5s %-8s %12s   [%s]\n' "$d" "$keys" "$c" "$(median "rt_${d}_${keys}_c$c")" "${vals[rt_${d}_${keys}_c$c]% }"
done; done; done
printf '%-10s %-5s %-8s %12s   [%s]\n' ext distinct 2 "$(median rt_ext_distinct_c2)" "${vals[rt_ext_distinct_c2]% }"
echo
echo "Inside one statement, ns per call (median; the empty loop is the common overhead)"
for d in ext builtin empty plpgsql; do printf '%-10s %10s   [%s]\n' "$d" "$(median "in_$d")" "${vals[in_$d]% }"; done
echo
echo "Two sessions spending inside the server, spends/s: one hot key $(median cont_0), a key each $(median cont_1)"
echo "Shared memory: $((shm_with - shm_without)) bytes for max_identities $max_ids at the default settings;" \
  "$((shm_buckets - shm_without)) with ogc_throttle.max_identity_stats = 0 (the bucket table alone)"

rows=()
row() { rows+=("$1|$2|$3|$(awk -v v="$2" -v t="$4" -v op="$5" 'BEGIN {
  if (v == "nan" || t == "-") { print (t == "-" ? "-" : "no"); exit }
  print ((op == ">=" ? v >= t : v <= t) ? "yes" : "no") }')"); }
for c in 1 2; do for keys in hot 10k; do
  row "round trip, $c cl, $keys keys: ext / built-in" "$(pratio "rt_ext_${keys}_c$c" "rt_builtin_${keys}_c$c")" ">= 0.9" 0.9 ">="
  t=$([ $c = 1 ] && echo 2 || echo 3)
  row "round trip, $c cl, $keys keys: ext / $peer_fn" "$(pratio "rt_ext_${keys}_c$c" "rt_plpgsql_${keys}_c$c")" ">= $t" "$t" ">="
  if [ $c = 2 ]; then
    row "round trip, 2 cl, $keys keys: ext / Redis EVALSHA" "$(pratio "rt_ext_${keys}_c2" "rt_redis_${keys}_c2")" ">= 3" 3 ">="
  else
    row "round trip, 1 cl, $keys keys: ext / Redis EVALSHA" "$(pratio "rt_ext_${keys}_c1" "rt_redis_${keys}_c1")" "-" - ">="
  fi
done; done
row "in statement: ext / built-in (time per call)" "$(pratio in_ext in_builtin)" "<= 2" 2 "<="
row "in statement: $peer_fn / ext (time per call)" "$(pratio in_plpgsql in_ext)" ">= 30" 30 ">="
row "round trip, 2 cl, ext: one hot key / a key each" "$(pratio rt_ext_hot_c2 rt_ext_distinct_c2)" ">= 0.8" 0.8 ">="
row "in statement, 2 sessions: one hot key / a key each" "$(pratio cont_0 cont_1)" ">= 0.8" 0.8 ">="
row "shared memory bytes per identity, bucket table" "$bucket_bytes_per_id" "<= 128" 128 "<="
row "shared memory bytes per identity, default settings" "$bytes_per_id" "<= 128" 128 "<="
echo
echo "Ratios: median over rounds of the ratio within each round."
printf '%-55s | %8s | %7s | %s\n' figure value target "met?"
printf -- '%.0s-' $(seq 85); echo
for r in "${rows[@]}"; do IFS='|' read -r a b c d <<<"$r"; printf '%-55s | %8s | %7s | %s\n' "$a" "$b" "$c" "$d"; done
