#!/usr/bin/env bash
# A long fuzzing campaign (issue #29): every target of tests/fuzz, built by the `sanitize` preset,
# runs until it has made EXECUTIONS executions (default 10 million) or for SECONDS, JOBS processes
# each (default: the cores). New inputs collect in build/sanitize/tests/fuzz/found/<target>; the
# jobs' logs go to build/fuzz-campaign/<target>/, and findings to build/sanitize/tests/fuzz/findings.
# Prints each target's executions, time and findings.
#
#   tools/fuzz_campaign.sh [--executions N | --seconds S] [--jobs N] [target ...]
set -euo pipefail
cd "$(dirname "$0")/.."
executions=10000000
seconds=
jobs=$(nproc)
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --executions) executions=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
cmake --preset sanitize >/dev/null
cmake --build --preset fuzz
if [ ${#targets[@]} -eq 0 ]; then
  targets=(gguf safetensors hf_folder tokenizer_text chat_template image_file server_routes)
fi
# The arguments ctest gives each target (dictionary, seed folders), without its time limit.
fuzz_args() {
  ctest --preset fuzz -N -V -R "^fuzz\.$1\$" | sed -n 's/^[0-9]*: Test command: //p' | head -1 |
    sed 's/ -max_total_time=[0-9]*//'
}
for target in "${targets[@]}"; do
  out=build/fuzz-campaign/$target
  mkdir -p "$out"
  read -r -a command <<<"$(fuzz_args "$target")"
  limit=-runs=$(( (executions + jobs - 1) / jobs ))
  if [ -n "$seconds" ]; then limit=-max_total_time=$seconds; fi
  rm -f "$out"/fuzz-*.log
  start=$(date +%s)
  (cd "$out" && "${command[0]}" "$limit" -jobs="$jobs" -workers="$jobs" "${command[@]:1}") >/dev/null 2>&1 || true
  total=$(cat "$out"/fuzz-*.log 2>/dev/null | awk '/^stat::number_of_executed_units:/ {n += $2} END {print n + 0}')
  findings=$(find build/sanitize/tests/fuzz/findings -name "$target-*" | wc -l)
  echo "$target: $total executions in $(( $(date +%s) - start )) s with $jobs jobs, $findings findings"
done
