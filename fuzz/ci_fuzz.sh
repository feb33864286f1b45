#!/usr/bin/env bash
# ci_fuzz.sh - build the libFuzzer targets with clang and run each one for a
# bounded time from the committed seed corpus.  Fails on the first crash,
# sanitizer report, leak, timeout (> 1 s per input) or input using more than
# 256 MiB.  Nothing is written into the repository: new inputs go to a
# temporary folder, crashes to $FUZZ_ARTIFACTS (default build-fuzz/artifacts).
#
#   FUZZ_SECONDS=60 FUZZ_JOBS=2 fuzz/ci_fuzz.sh
#
# With FUZZ_JOBS=2 (two cores) the six targets take about 3 x FUZZ_SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-2}
build=${FUZZ_BUILD:-build-fuzz}
artifacts=${FUZZ_ARTIFACTS:-$build/artifacts}
targets="open pickle zip tar legacy mobile"

CC=${FUZZ_CC:-clang} cmake -B "$build" -S . -DCKPT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$jobs" --target $(for t in $targets; do printf 'fuzz_%s ' "$t"; done) >/dev/null
mkdir -p "$artifacts"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ASan's quarantine would count against the RSS limit; keep it small.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:quarantine_size_mb=16:malloc_context_size=20
export UBSAN_OPTIONS=${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1

run() {
  local t=$1
  mkdir -p "$work/$t" "$artifacts/$t"
  "$build/fuzz/fuzz_$t" -dict="fuzz/$t.dict" -max_total_time="$seconds" -rss_limit_mb=256 -timeout=1 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$t/" "$work/$t" "fuzz/corpus/$t" \
    >"$work/$t.log" 2>&1
}

pids=() names=() failed=0
for t in $targets; do
  run "$t" & pids+=($!) names+=("$t")
  if [ "${#pids[@]}" -ge "$jobs" ]; then
    if ! wait "${pids[0]}"; then failed=1; echo "fuzz_${names[0]}: FAILED"; tail -60 "$work/${names[0]}.log"; fi
    pids=("${pids[@]:1}") names=("${names[@]:1}")
  fi
done
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then failed=1; echo "fuzz_${names[$i]}: FAILED"; tail -60 "$work/${names[$i]}.log"; fi
done
for t in $targets; do
  printf 'fuzz_%-7s %s\n' "$t" "$(grep -E 'stat::number_of_executed_units' "$work/$t.log" | awk '{print $2 " runs"}')"
done
if [ "$failed" -ne 0 ]; then
  echo "ci_fuzz: failures; reproducers in $artifacts (copy each into fuzz/regressions/<target>/)"
  exit 1
fi
echo "ci_fuzz: ok"
