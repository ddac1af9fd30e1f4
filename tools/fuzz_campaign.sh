#!/usr/bin/env bash
# A long fuzzing campaign (issue #29): every target of tests/fuzz, built by the `sanitize` preset,
# runs until it has made EXECUTIONS executions (default 10 million), or for at most SECONDS, JOBS
# processes each (default: the cores). New inputs collect in build/sanitize/tests/fuzz/found/<target>;
# the jobs' logs go to build/fuzz-campaign/<target>/, findings to build/sanitize/tests/fuzz/findings.
# Prints each target's executions, time and findings. With --prebuilt it builds nothing: build/sanitize
# was configured and built by hand (on the GPU machine, against tools/gpu_check.sh's bundle).
#
#   tools/fuzz_campaign.sh [--executions N] [--seconds S] [--jobs N] [--prebuilt] [target ...]
set -euo pipefail
cd "$(dirname "$0")/.."
executions=10000000
seconds=
jobs=$(nproc)
prebuilt=
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --executions) executions=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --prebuilt) prebuilt=1; shift ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ -z "$prebuilt" ]; then
  cmake --preset sanitize >/dev/null
  cmake --build --preset fuzz
fi
if [ ${#targets[@]} -eq 0 ]; then  # every target ctest knows
  mapfile -t targets < <(ctest --preset fuzz -N | sed -n 's/^ *Test *#[0-9]*: fuzz\.//p')
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
  limits=(-runs=$(( (executions + jobs - 1) / jobs )))
  if [ -n "$seconds" ]; then limits+=(-max_total_time="$seconds"); fi
  rm -f "$out"/fuzz-*.log
  start=$(date +%s)
  (cd "$out" && "${command[0]}" "${limits[@]}" -jobs="$jobs" -workers="$jobs" "${command[@]:1}") >/dev/null 2>&1 || true
  total=$(cat "$out"/fuzz-*.log 2>/dev/null | awk '/^stat::number_of_executed_units:/ {n += $2} END {print n + 0}')
  findings=$(find build/sanitize/tests/fuzz/findings -name "$target-*" | wc -l)
  echo "$target: $total executions in $(( $(date +%s) - start )) s with $jobs jobs, $findings findings"
done
