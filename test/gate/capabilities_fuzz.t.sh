#!/usr/bin/env bash
# Builds the capabilities rewriter's libFuzzer target (clang, ASan+UBSan) and
# runs it for FUZZ_SECONDS (default 30) from MapServer's own capabilities:
# no crash, output independent of chunking, identity when there is nothing to do.
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/test/lib/tap.sh"
cd "$root" || exit 1
secs=${FUZZ_SECONDS:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if make -s build/fuzz/capabilities >"$work/build.log" 2>&1; then ok "capabilities fuzz target builds (clang, -fsanitize=fuzzer,address,undefined)"
else not_ok "capabilities fuzz target builds"; tail -20 "$work/build.log"; tap_exit; fi

# Seeds: two bytes of chunking, then a document (the small fixtures whole, the larger ones' heads).
mkdir -p "$work/corpus"
for f in test/gate/fixtures/capabilities/mapserver-*; do
  { printf '\003\021'; head -c 6000 "$f"; } >"$work/corpus/$(basename "$f")"
done
printf '\000\001<WMS_Capabilities xmlns="http://www.opengis.net/wms"><Service><MaxWidth>9</MaxWidth></Service></WMS_Capabilities>' >"$work/corpus/small"

build/fuzz/capabilities -artifact_prefix="$work/" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=1024 \
  -print_final_stats=1 "$work/corpus" >"$work/fuzz.log" 2>&1
rc=$?
runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$work/fuzz.log")
if [ "$rc" = 0 ]; then ok "fuzzed the capabilities rewriter for ${secs}s: no crash, chunking never changed the output (${runs:-?} runs)"
else not_ok "fuzzer found a failure (rc $rc)"; grep -E "ERROR|SUMMARY|runtime error|#[0-9]+ 0x" "$work/fuzz.log" | head -30; for f in "$work"/crash-*; do [ -e "$f" ] && od -c "$f" | head -8; done; fi
check "fuzzer actually executed inputs" [ "${runs:-0}" -gt 1000 ]
tap_exit
