#!/usr/bin/env bash
# Share of the backends' time spent in the hook's own code, under pgbench: perf samples (cpu-clock)
# of the two backends of a `pgbench -M prepared -c 2` run, each sample charged to the hook when, walking
# its call chain from the leaf, a frame of ogc_throttle.so comes before any standard_Executor*,
# standard_planner or standard_ProcessUtility frame (the work the hook wraps is not its own).
# A ratio within one process: far steadier on a loaded machine than tps, and, unlike callgrind, it
# sees what the hook's code costs out of cache. Indirect costs (PostgreSQL's own code evicted by the
# hook's) are not in it. Needs perf (no hardware counters needed) and python3.
# Knobs: SECS (6) per workload, ROUNDS (2), BREAKDOWN=1 (also the inclusive share of the hook's functions, and the functions its samples were taken in), LIB (an ogc_throttle.so to preload instead of the installed
# one: LIB=a.so,b.so alternates builds within each round), NPOINTS (200000), CALLGRAPH (fp: frame
# pointers; dwarf: unwinds from a copy of each sample's stack, at 1999 Hz). The extension is built
# without frame pointers, so fp chains that pass through it lose frames and undercount its share by
# about a tenth (main, PostGIS: 4.8-5.1 % fp against 5.6 % dwarf); dwarf is the accurate one.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$root/test/lib/pg.sh"
SECS=${SECS:-6}
ROUNDS=${ROUNDS:-2}
NPOINTS=${NPOINTS:-200000}
PORT=${PORT:-56404}
. "$here/perf_cluster.sh"
perf_workdir
IFS=, read -r -a libs <<<"${LIB:-installed}"
for l in "${libs[@]}"; do [ "$l" = installed ] || cp "$l" "$work/$(md5sum <"$l" | cut -c1-8).so" || die "no $l"; done
chmod 755 "$work"/*.so 2>/dev/null
perf_cluster "$PORT"

share() {  # perf script output -> "hook-owned %" (BREAKDOWN=1: and where inside the hook)
  python3 -c '
import collections, os, re, sys
std = re.compile(r"standard_(ExecutorStart|ExecutorRun|ExecutorFinish|ExecutorEnd|planner|ProcessUtility)\b")
tot = hook = 0
inside = collections.Counter()  # samples with this function (inclusive) on the hook-owned part of the chain
leaf = collections.Counter()  # hook-owned samples by the function they were taken in, PostgreSQL functions included
def flush(frames):
    global tot, hook
    if not frames: return
    tot += 1
    for i, (sym, dso) in enumerate(frames):
        if std.search(sym): return
        if "ogc_throttle" in dso:
            hook += 1
            owned = []
            for s, d in frames:
                if std.search(s): break
                owned.append(s)
            for s in set(owned): inside[s] += 1
            leaf[frames[0][0]] += 1
            return
frames = []
for line in sys.stdin:
    m = re.match(r"\s+[0-9a-f]+\s+(.*)\s+\((.*)\)$", line.rstrip("\n"))
    if m: frames.append((m.group(1), m.group(2)))
    else: flush(frames); frames = []
flush(frames)
print("%.2f%% of %d samples" % (100.0 * hook / max(tot, 1), tot))
if os.environ.get("BREAKDOWN"):
    for s, n in inside.most_common(40):
        if s.startswith("ot::") or "postgis" in s or s in ("expression_tree_walker", "palloc", "hash_search_with_hash_value"):
            print("    %6.2f%%  %s" % (100.0 * n / max(tot, 1), s[:100]))
    print("  where the hook-owned samples were taken (self):")
    for s, n in leaf.most_common(25):
        print("    %6.2f%%  %s" % (100.0 * n / max(tot, 1), s[:100]))'
}

run() {  # run WORKLOAD(select|postgis) -> share
  local args=(-S) pm pids
  [ "$1" = postgis ] && args=(-f "$work/postgis.pgbench")
  as_pg timeout $((SECS + 60)) "$PGBENCH" -n -M prepared -c 2 -j 2 -T $((SECS + 3)) "${args[@]}" -h "$work" -p "$PORT" \
    -U postgres postgres >"$work/pgbench.log" 2>&1 &
  local bp=$!
  sleep 1.5
  pm=$(head -n 1 "$work/data/postmaster.pid")
  pids=$(ps -o pid=,args= --ppid "$pm" | awk '/\[local\]/ { print $1 }' | paste -sd,)
  local cg=(-F 4999 -g)
  [ "${CALLGRAPH:-fp}" = dwarf ] && cg=(-F 1999 --call-graph dwarf,32768)
  perf record "${cg[@]}" -o "$work/perf.data" -p "$pids" -- sleep "$SECS" >/dev/null 2>&1
  wait "$bp"
  perf script -i "$work/perf.data" -F comm,ip,sym,dso 2>/dev/null | share
}

echo "hook-owned share of backend time (perf, cpu-clock), pgbench -M prepared -c 2, ${SECS}s per run"
for r in $(seq "$ROUNDS"); do
  for l in "${libs[@]}"; do
    name=installed
    if [ "$l" != installed ]; then
      name="$l"
      pg_stop "$work"
      pg_conf_set "$work" "shared_preload_libraries = '$work/$(md5sum <"$l" | cut -c1-8).so'"
      pg_start "$work" "$PORT" || die "postgres did not start with $l"
    fi
    for s in select postgis; do
      echo "round $r, $name, $s (load $(cut -d' ' -f1 /proc/loadavg)): $(run $s)"
    done
  done
done
