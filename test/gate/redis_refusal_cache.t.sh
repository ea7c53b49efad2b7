#!/usr/bin/env bash
# The refusal cache of the shared store (doc/shared-buckets.md "The refusal
# cache"), through ogc-gate with a real redis-server: a client over budget is
# refused again with no script call (Redis's own EVALSHA count stands still)
# and the same answer, and is admitted again at the instant the store would;
# another client is not refused with it; a cheaper request than the one
# refused still goes to the store (and is admitted when it fits).
# REFUSAL_CACHE=0 runs the same checks with the cache off (they must fail).
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
. "$root/test/gate/lib/gate.sh"
REDIS=18760 ECHO=18761 G1=18762 A1=18763 G2=18764 A2=18765 G3=18766 A3=18767
RC=${REFUSAL_CACHE:-4096}
tmp=$(mktemp -d)
redis_pid= echo_pid=
cleanup() { gate_stop "$tmp/g1"; gate_stop "$tmp/g2"; gate_stop "$tmp/g3"; [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null
            [ -n "$echo_pid" ] && kill "$echo_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

[ -x "$GATE_BIN" ] || make -s -C "$root" bin/ogc-gate >/dev/null
redis-server --port "$REDIS" --bind 127.0.0.1 --save '' --appendonly no >"$tmp/redis.log" 2>&1 & redis_pid=$!
for _ in $(seq 1 50); do redis-cli -p "$REDIS" ping >/dev/null 2>&1 && break; sleep 0.1; done
/usr/bin/python3 "$root/test/gate/lib/echo_upstream.py" "$ECHO" 2>"$tmp/echo.err" & echo_pid=$!
# GetCapabilities costs 1, a GetMap 1.2 (fixed, whatever its size). Gate 1:
# burst 3, 0.05/s (nothing refills during a check); gate 2: burst 1, 2/s (a
# refused client fits again 0.5 s later).
conf() {  # rate burst prefix [refusal_cache]
  cat <<YAML
identity: {hash_secret: cache-test}
buckets: {store: redis, url: "redis://127.0.0.1:$REDIS/0", timeout_ms: 200, on_error: closed, key_prefix: "$3:",
          refusal_cache: ${4:-$RC}}
cost: {other: 1, weights: {map: {fixed: 1.2, per_row: 0, per_megapixel: 0}}}
refund_fraction: 1
tiers: [{name: public, rate: $1, burst: $2}]
YAML
}
conf 0.05 3 slow >"$tmp/c1.yaml"; conf 2 1 fast >"$tmp/c2.yaml"
conf 0.05 3 slow 0 >"$tmp/c3.yaml"  # gate 1's buckets, no cache: what the store answers
# One I/O thread: one cache, so one refusal from the store fills it.
gate_start "$tmp/g1" "$G1" "$A1" "http://127.0.0.1:$ECHO" --threads 1 --config "$tmp/c1.yaml" || { not_ok "gate 1 starts"; tap_exit; }
gate_start "$tmp/g2" "$G2" "$A2" "http://127.0.0.1:$ECHO" --threads 1 --config "$tmp/c2.yaml" || { not_ok "gate 2 starts"; tap_exit; }
gate_start "$tmp/g3" "$G3" "$A3" "http://127.0.0.1:$ECHO" --threads 1 --config "$tmp/c3.yaml" || { not_ok "gate 3 starts"; tap_exit; }
for _ in $(seq 1 30); do curl -s -o /dev/null "http://127.0.0.1:$ECHO/" && break; sleep 0.1; done
ok "redis-server, the echo upstream and three gates started (refusal_cache: $RC)"

/usr/bin/python3 - "$G1" "$G2" "$G3" "$REDIS" <<'PY' >"$tmp/out" 2>"$tmp/py.err"
import http.client, re, subprocess, sys, time
g1, g2, g3, rport = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
CAPS = "/?SERVICE=WMS&REQUEST=GetCapabilities"
MAP = ("/?SERVICE=WMS&VERSION=1.3.0&REQUEST=GetMap&LAYERS=roads&STYLES=&CRS=EPSG:4326&BBOX=0,0,1,1"
       "&WIDTH=64&HEIGHT=64&FORMAT=image/png")
conns = {}
def get(port, src, path):
    c = conns.get((port, src))
    if c is None:
        c = conns[(port, src)] = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=(src, 0))
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body
def redis(*args):
    return subprocess.run(["redis-cli", "-p", rport] + list(args), capture_output=True, text=True).stdout
def evalsha():
    for line in redis("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_evalsha:"):
            return int(line.split("calls=")[1].split(",")[0])
    return 0
def out(*a): print(*a, flush=True)

# --- a client over budget: the store refuses once, the cache after that ---
A = "127.0.0.11"
codes = [get(g1, A, CAPS)[0] for _ in range(3)]
out("burst", *codes)
n0 = evalsha()
st, h0, b0 = get(g1, A, CAPS)
n1 = evalsha()
out("first_refusal", st, n1 - n0)
statuses = []
t = time.time()
for _ in range(50):
    statuses.append(get(g1, A, CAPS)[0])
took = time.time() - t
n2 = evalsha()
# An entry lives a second at most: a loaded machine may need one more call.
out("cached_refusals", len([s for s in statuses if s == 429]), n2 - n1, int(took), "%.3f" % took)
# Each cached answer next to the store's at the same moment (gate 3: the same
# buckets, no cache; a refusal changes nothing in the store).
mask = lambda b: re.sub(rb"[0-9]+(\.[0-9]+)?", b"#", b)
same = waits_ok = 1
for _ in range(10):
    st3, h3, b3 = get(g3, A, CAPS)  # first: the cached answer, a moment later, may only say shorter waits
    st, h, b = get(g1, A, CAPS)
    if st != st3 or mask(b) != mask(b3) or sorted(h) != sorted(h3): same = 0; out("# differs", st, st3, h, h3, b, b3)
    for k in ("content-type", "cache-control", "ratelimit-policy", "x-ratelimit-limit", "x-ratelimit-remaining"):
        if h.get(k) != h3.get(k): same = 0; out("# differs", k, h.get(k), h3.get(k))
    if int(h["retry-after"]) > int(h3["retry-after"]) or int(h["x-ratelimit-reset"]) > int(h3["x-ratelimit-reset"]):
        waits_ok = 0; out("# longer wait", h, h3)
    left = lambda x: float(re.search(rb"and ([0-9.]+) are left", x).group(1))
    if abs(left(b) - left(b3)) > 0.011: same = 0; out("# remaining differs", b, b3)
out("same_answer", same, waits_ok)
# another client of the same gate is not refused with it
B = "127.0.0.12"
n3 = evalsha()
st = get(g1, B, CAPS)[0]
out("other_client", st, evalsha() - n3)
# --- the cost rule: a cheaper request than the refused one goes to the store ---
C = "127.0.0.13"
out("spend", get(g1, C, CAPS)[0], get(g1, C, CAPS)[0])   # 1 of 3 left
n4 = evalsha()
out("map_refused", get(g1, C, MAP)[0], evalsha() - n4)     # 1.2 > 1: the store refuses
n5 = evalsha()
out("map_again", get(g1, C, MAP)[0], evalsha() - n5)       # cached
n6 = evalsha()
out("cheaper", get(g1, C, CAPS)[0], evalsha() - n6)        # 1 < 1.2: the store admits
n7 = evalsha()
out("cheaper_again", get(g1, C, CAPS)[0], evalsha() - n7)  # the store refuses (0 left)
n8 = evalsha()
out("cheaper_cached", get(g1, C, CAPS)[0], evalsha() - n8)

# --- another gate's refund: this gate refuses at most a second longer ---
import threading
E = "127.0.0.15"
slow = {}
def revalidate():  # admitted by gate 3 (1 of 3), answered 304 0.6 s later: refunded in full
    slow["r"] = get(g3, E, "/notmodified?SERVICE=WMS&REQUEST=GetCapabilities&delay_ms=600")[0]
    slow["t"] = time.time()
th = threading.Thread(target=revalidate); th.start()
time.sleep(0.1)
spent = [get(g1, E, CAPS)[0] for _ in range(3)]   # 200 200 429: the last cached, for up to 1 s
t_ref = time.time()
th.join()
t = None
while time.time() - t_ref < 3:
    if get(g1, E, CAPS)[0] == 200: t = time.time(); break
    time.sleep(0.01)
out("refund_elsewhere", slow["r"], *spent)
out("over_refusal_s", "%.3f" % (t - slow["t"]) if t else "never", "%.3f" % (t - t_ref) if t else "never")

# --- admitted again at the instant the store would (gate 2: 2/s, burst 1) ---
D = "127.0.0.14"
out("fast_first", get(g2, D, CAPS)[0])
st, h, _ = get(g2, D, CAPS)
key = [k for k in redis("--scan", "--pattern", "fast:*").split() if k][0]
s_, ns_ = redis("GET", key).split()
tat_old = int(s_) * 10**9 + int(ns_)   # burst 1: cost 1 fits again when Redis's clock reaches it
n9 = evalsha()
polls = 0
while True:
    st, h, _ = get(g2, D, CAPS)
    polls += 1
    if st == 200 or polls > 2000: break
    time.sleep(0.002)
s_, ns_ = redis("GET", key).split()
admitted_at = int(s_) * 10**9 + int(ns_) - 500_000_000   # the admit moved the TAT 0.5 s past its Redis now
out("fast_refused", polls - 1, st, evalsha() - n9)
out("lateness_ms", "%.3f" % ((admitted_at - tat_old) / 1e6))
PY
cat "$tmp/py.err" >&2
sed 's/^/# /' "$tmp/out"
val() { awk -v k="$1" -v i="$2" '$1 == k { print $i }' "$tmp/out"; }
check_eq "a client spends its burst of 3" "200 200 200" "$(val burst 2) $(val burst 3) $(val burst 4)"
check_eq "over budget: the store refuses (429), one script call" "429 1" "$(val first_refusal 2) $(val first_refusal 3)"
check_eq "50 more requests are refused (429)" 50 "$(val cached_refusals 2)"
check "... with no script call (Redis's EVALSHA count: +$(val cached_refusals 3) in $(val cached_refusals 5) s)" \
  test "$(val cached_refusals 3)" -le "$(val cached_refusals 4)"
check_eq "... with the store's answer (a gate without the cache, same moment): body, type, rate-limit headers" 1 "$(val same_answer 2)"
check_eq "... never a longer Retry-After or reset than the store said" 1 "$(val same_answer 3)"
check "the local refusals are counted on /metrics" \
  awk '$1 == "ogc_gate_store_local_refusals_total" && $2 >= 50 { f = 1 } END { exit !f }' \
  <<<"$(curl -s "http://127.0.0.1:$A1/metrics")"
check_eq "another client of the same gate is admitted, by the store" "200 1" "$(val other_client 2) $(val other_client 3)"
check_eq "a GetMap (1.2) the bucket (1 left) cannot take: the store refuses" "429 1" "$(val map_refused 2) $(val map_refused 3)"
check_eq "... and again, from the cache" "429 0" "$(val map_again 2) $(val map_again 3)"
check_eq "a cheaper GetCapabilities (1) still goes to the store, which admits it" "200 1" "$(val cheaper 2) $(val cheaper 3)"
check_eq "... the next one the store refuses (the bucket is empty)" "429 1" "$(val cheaper_again 2) $(val cheaper_again 3)"
check_eq "... and the one after that the cache" "429 0" "$(val cheaper_cached 2) $(val cheaper_cached 3)"
check_eq "a revalidation through gate 3 (304, refunded) while gate 1 refuses its client" "304 200 200 429" \
  "$(val refund_elsewhere 2) $(val refund_elsewhere 3) $(val refund_elsewhere 4) $(val refund_elsewhere 5)"
check "... gate 1 admits it again within a second of its refusal ($(val over_refusal_s 3) s; $(val over_refusal_s 2) s after the refund)" \
  awk -v a="$(val over_refusal_s 3)" 'BEGIN { exit !(a != "never" && a <= 1.1) }'
check "waiting for its instant, a client polls with local refusals ($(val fast_refused 2) polls, $(val fast_refused 4) script calls)" \
  awk -v p="$(val fast_refused 2)" -v n="$(val fast_refused 4)" 'BEGIN { exit !(p >= 20 && n <= 3) }'
check_eq "... then is admitted" 200 "$(val fast_refused 3)"
check "... at the instant the store would: not before it, at most 50 ms after ($(val lateness_ms 2) ms)" \
  awk -v l="$(val lateness_ms 2)" 'BEGIN { exit !(l >= 0 && l <= 50) }'
tap_exit
