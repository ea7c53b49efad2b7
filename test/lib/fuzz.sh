# A libFuzzer target as a TAP test (sourced after tap.sh, from the repository
# root). fuzz_build TARGET WHAT builds build/fuzz/TARGET (clang, ASan+UBSan)
# and makes $work/corpus for the caller's seeds; fuzz_run TARGET MAX_LEN WHAT
# runs it for FUZZ_SECONDS (default 30) and reports.
secs=${FUZZ_SECONDS:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fuzz_build() {
  if make -s "build/fuzz/$1" >"$work/build.log" 2>&1; then ok "$2 fuzz target builds (clang, -fsanitize=fuzzer,address,undefined)"
  else not_ok "$2 fuzz target builds"; tail -20 "$work/build.log"; tap_exit; fi
  mkdir -p "$work/corpus"
}

fuzz_run() {
  local rc runs f
  "build/fuzz/$1" -artifact_prefix="$work/" -max_total_time="$secs" -max_len="$2" -timeout=10 -rss_limit_mb=1024 \
    -print_final_stats=1 "$work/corpus" >"$work/fuzz.log" 2>&1
  rc=$?
  runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$work/fuzz.log")
  if [ "$rc" = 0 ]; then ok "fuzzed $3 for ${secs}s (${runs:-?} runs)"
  else
    not_ok "fuzzer found a failure in $3 (rc $rc)"
    grep -E "ERROR|SUMMARY|runtime error|#[0-9]+ 0x" "$work/fuzz.log" | head -30
    for f in "$work"/crash-*; do [ -e "$f" ] && od -c "$f" | head -8; done
  fi
  check "fuzzer actually executed inputs" [ "${runs:-0}" -gt 1000 ]
}
