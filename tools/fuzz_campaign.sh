#!/usr/bin/env bash
# A long fuzzing campaign (issue #29): every target of tests/fuzz, built by the `sanitize` preset,
# runs until it has made EXECUTIONS executions (default 10 million), JOBS processes each (default:
# the cores). New inputs collect in build/sanitize/tests/fuzz/found/<target>; crashes are written
# to build/fuzz-campaign/<target>/ with libFuzzer's log. Prints each target's executions and time.
#
#   tools/fuzz_campaign.sh [--executions N] [--jobs N] [target ...]
set -euo pipefail
cd "$(dirname "$0")/.."
executions=10000000
jobs=$(nproc)
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --executions) executions=$2; shift 2 ;;
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
  per_job=$(( (executions + jobs - 1) / jobs ))
  start=$(date +%s)
  (cd "$out" && "${command[0]}" -runs="$per_job" -jobs="$jobs" -workers="$jobs" "${command[@]:1}") || true
  total=$(cat "$out"/fuzz-*.log 2>/dev/null | awk '/^stat::number_of_executed_units:/ {n += $2} END {print n + 0}')
  crashes=$(find "$out" -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' | wc -l)
  echo "$target: ${total:-0} executions in $(( $(date +%s) - start )) s, $crashes findings (in $out)"
done
