#!/usr/bin/env bash
# Where the hook's cost lands, PostgreSQL's own code included: one cluster and one data set,
# restarted in turn with the library preloaded (A: mode reject, a budget nothing exhausts) and
# without it (B); each time pgbench -M prepared -c 2 runs the workload while perf samples its two
# backends (cpu-clock, no call graph). Every function's samples become microseconds of backend CPU
# per transaction (samples / rate / transactions), and the table is A - B by library and by function.
# perf_share.sh counts only the samples taken under the hook's own frames; this also shows what the
# hook makes PostgreSQL, PostGIS and the kernel do or do slower (their code and data evicted by the
# hook's), at the price of noise: compare rounds, and read small differences as such.
# Knobs: WORKLOAD (postgis, or select), SECS (8) per run, ROUNDS (3; odd rounds A first), LIB (an
# ogc_throttle.so to preload instead of the installed one; LIB=a.so,b.so: two builds, sides A and C,
# beside the same B in each round), A_CONF (more settings for A and C, separated by ';'), TOP (25
# functions), NPOINTS (200000). Needs perf and python3.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/test/lib/pg.sh"
WORKLOAD=${WORKLOAD:-postgis}
SECS=${SECS:-8}
ROUNDS=${ROUNDS:-3}
TOP=${TOP:-25}
NPOINTS=${NPOINTS:-200000}
PORT=${PORT:-56405}
RATE=999
. "$here/perf_cluster.sh"
perf_workdir
# LIB=a.so[,b.so]: each build is a side of its own (A, C), next to the same B in every round.
libs=(ogc_throttle)
if [ -n "${LIB:-}" ]; then
  IFS=, read -r -a given <<<"$LIB"
  libs=()
  for i in "${!given[@]}"; do
    cp "${given[$i]}" "$work/lib$i.so" && chmod 755 "$work/lib$i.so" || die "no ${given[$i]}"
    libs+=("$work/lib$i.so")
  done
fi
[ "${#libs[@]}" -le 2 ] || die "at most two builds"
IFS=';' read -r -a a_conf <<<"${A_CONF:-}"
perf_cluster "$PORT" "${a_conf[@]}"

# With (A) or without (B) the library: the GUCs stay in the file, where B ignores them. (The set-up
# above ran with the installed library: CREATE EXTENSION loads it, and a second copy preloaded
# would define its settings twice.)
restart() {  # restart SIDE: A and C the builds, B none
  local l=""
  [ "$1" = A ] && l=${libs[0]}
  [ "$1" = C ] && l=${libs[1]}
  pg_stop "$work"
  pg_conf_set "$work" "shared_preload_libraries = '$l'"
  pg_start "$work" "$PORT" || die "postgres did not start for $1"
}

# sample TAG SEED: one pgbench run, perf on its backends -> TAG<TAB>µs per transaction<TAB>library<TAB>function
# (the sides of a round draw the same random arguments)
sample() {
  local args=(-S)
  [ "$WORKLOAD" = postgis ] && args=(-f "$work/postgis.pgbench")
  as_pg timeout $((SECS + 60)) "$PGBENCH" -n -M prepared -c 2 -j 2 -T $((SECS + 3)) --random-seed="$2" "${args[@]}" -h "$work" -p "$PORT" \
    -U postgres postgres >"$work/pgbench.log" 2>&1 &
  local bp=$! pm pids tps
  sleep 1.5
  pm=$(head -n 1 "$work/data/postmaster.pid")
  pids=$(ps -o pid=,args= --ppid "$pm" | awk '/\[local\]/ { print $1 }' | paste -sd,)
  perf record -F "$RATE" -o "$work/perf.data" -p "$pids" -- sleep "$SECS" >/dev/null 2>&1
  wait "$bp"
  tps=$(awk '/^tps/ { print $3; exit }' "$work/pgbench.log")
  [ -n "$tps" ] || die "pgbench failed: $(tail -n 3 "$work/pgbench.log")"
  echo "# $1: $tps tps (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  perf report -i "$work/perf.data" --no-children --sort dso,sym -F sample,dso,sym --stdio 2>/dev/null |
    awk -v tag="$1" -v k="$(awk -v r="$RATE" -v t="$tps" -v s="$SECS" 'BEGIN { print 1e6 / r / (t * s) }')" '
      /^ *[0-9]+ / { n = $1; d = $2; $1 = ""; $2 = ""; $3 = ""; sub(/^ +/, ""); printf "%s\t%.4f\t%s\t%s\n", tag, n * k, d, $0 }'
}

echo "backend CPU per transaction by function (perf cpu-clock at $RATE Hz, pgbench -M prepared -c 2, $WORKLOAD, ${SECS}s a run)"
sides="A: ${LIB:-the installed library}"
[ "${#libs[@]}" = 2 ] && sides="A: ${LIB%%,*}, C: ${LIB#*,}"
echo "$sides preloaded, mode reject${A_CONF:+, $A_CONF}; B: no library; the same cluster restarted between them"
for r in $(seq "$ROUNDS"); do
  order=(A B); [ "${#libs[@]}" = 2 ] && order=(A B C)
  [ $((r % 2)) = 0 ] && order=($(printf '%s\n' "${order[@]}" | tac))
  for c in "${order[@]}"; do restart "$c"; sample "$c$r" $((1000 + r)) >>"$work/samples.tsv"; done
done
python3 - "$work/samples.tsv" "$TOP" <<'EOF'
import collections, re, statistics, sys
runs = collections.defaultdict(lambda: collections.defaultdict(float))  # tag -> (dso, sym) -> µs/tx
for line in open(sys.argv[1]):
    tag, us, dso, sym = line.rstrip("\n").split("\t", 3)
    runs[tag][(re.sub(r"^lib\d\.so$", "ogc_throttle.so", dso), sym)] += float(us)
top = int(sys.argv[2])
side = lambda c: [t for t in sorted(runs) if t[0] == c]
sides = [c for c in "AC" if side(c)]
def per(c, key):  # median over c's runs of key(run)
    return statistics.median(key(runs[t]) for t in side(c))
print("\ntotal µs per transaction by round: " + ", ".join("%s %.1f" % (t, sum(runs[t].values())) for t in sorted(runs)))
b = per("B", lambda r: sum(r.values()))
for c in sides:
    a = per(c, lambda r: sum(r.values()))
    print("median: %s %.1f, B %.1f, %s - B %+.1f (%.1f %% of B); by round %s" % (
        c, a, b, c, a - b, 100 * (a - b) / b,
        ", ".join("%+.1f" % (sum(runs[c + t[1:]].values()) - sum(runs[t].values())) for t in side("B") if c + t[1:] in runs)))
head = "".join("%9s" % (c + " - B") for c in sides)
dsos = sorted({d for r in runs.values() for d, _ in r})
rows = []
for d in dsos:
    y = per("B", lambda r: sum(v for (x, _), v in r.items() if x == d))
    rows.append((d, y, [per(c, lambda r: sum(v for (x, _), v in r.items() if x == d)) - y for c in sides]))
print("\n%-28s %9s%s" % ("library", "B µs/tx", head))
for d, y, ds in sorted(rows, key=lambda t: -abs(t[2][0]))[:10]:
    print("%-28s %9.2f%s" % (d[:28], y, "".join("%+9.2f" % x for x in ds)))
keys = {k for r in runs.values() for k in r}
diff = {k: (per("B", lambda r: r.get(k, 0.0)), [per(c, lambda r: r.get(k, 0.0)) for c in sides]) for k in keys}
print("\nfunctions that cost more with the library (median over rounds)")
print("%9s%s  %s" % ("B µs/tx", head, "function"))
for k, (y, xs) in sorted(diff.items(), key=lambda kv: -(kv[1][1][0] - kv[1][0]))[:top]:
    print("%9.2f%s  %s %s" % (y, "".join("%+9.2f" % (x - y) for x in xs), k[0][:20], k[1][:80]))
print("... and less (noise, or work the hook saves)")
for k, (y, xs) in sorted(diff.items(), key=lambda kv: kv[1][1][0] - kv[1][0])[:5]:
    print("%9.2f%s  %s %s" % (y, "".join("%+9.2f" % (x - y) for x in xs), k[0][:20], k[1][:80]))
EOF
