#!/usr/bin/env bash
# The GPU backend's check, in one run on a machine with an NVIDIA GPU: builds the cuda preset's
# test_gpu, runs the kernel tests, runs them again under compute-sanitizer (memcheck, racecheck) when
# it is installed, then the decode-GEMV bandwidth benchmark, and ends with a summary. Logs go to $OUT
# when set (the device machine's output folder), else build/gpu-check.
#
#   tools/gpu_check.sh              the check; ROCMFORGE_GPU_TARGETS picks the CUDA architectures (90),
#                                   GPU_CHECK_BUILD_DIR the build folder (build/cuda)
#   tools/gpu_check.sh --pack-deps  on Debian 12: unpack the project's build dependencies into
#                                   build/gpu-deps, for a GPU machine that has none (carry that folder;
#                                   the check then configures against it)
set -uo pipefail
cd "$(dirname "$0")/.."
deps=$PWD/build/gpu-deps

# What the top-level CMakeLists.txt finds, plus pkgconf to find the pkg-config ones.
packages=(nlohmann-json3-dev libcli11-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libpcre2-dev libpcre2-8-0
          libutf8proc-dev libutf8proc2 libgtest-dev pkgconf-bin libpkgconf3)

if [[ ${1:-} == --pack-deps ]]; then
  set -e
  rm -rf "$deps"
  mkdir -p "$deps/debs"
  (cd "$deps/debs" && apt-get download -q "${packages[@]}")
  for deb in "$deps"/debs/*.deb; do dpkg -x "$deb" "$deps/root"; done
  # Keep it small (it travels with the working tree): no docs, no static libraries but gtest's.
  rm -rf "$deps/debs" "$deps/root/usr/share/doc" "$deps/root/usr/share/man"
  find "$deps/root" -name '*.a' ! -name 'libgtest*' -delete
  du -sh "$deps"
  exit 0
fi

logs=${OUT:-$PWD/build/gpu-check}
mkdir -p "$logs"
export PATH=/usr/local/cuda/bin:$PATH
build=${GPU_CHECK_BUILD_DIR:-$PWD/build/cuda}
test_gpu=$build/tests/test_gpu
configure=(cmake --preset cuda -B "$build" -DROCMFORGE_GPU_TARGETS="${ROCMFORGE_GPU_TARGETS:-90}")

if [[ -d $deps/root ]]; then
  usr=$deps/root/usr
  for package in fmt spdlog nlohmann_json CLI11 GTest; do
    config=$(find "$usr" \( -name "${package}Config.cmake" -o -name "${package}-config.cmake" \) -print -quit)
    configure+=("-D${package}_DIR=$(dirname "$config")")
  done
  # pkgconf from the bundle, reading only the bundle's .pc files (their paths rebased onto it).
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$usr/lib/x86_64-linux-gnu" "$usr/bin/pkgconf" >"$deps/pkg-config"
  chmod +x "$deps/pkg-config"
  export PKG_CONFIG_LIBDIR=$usr/lib/x86_64-linux-gnu/pkgconfig:$usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$deps/root
  configure+=("-DPKG_CONFIG_EXECUTABLE=$deps/pkg-config")
fi

steps=()
failed=0
# step NAME COMMAND...: runs COMMAND with its output in $logs/NAME.log and records the outcome.
step() {
  local name=$1 start=$SECONDS status
  shift
  "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  if ((rc == 0)); then status=ok; else status="FAILED ($rc)" failed=1; fi
  steps+=("$(printf '%-10s %-12s %5ds   %s' "$name" "$status" $((SECONDS - start)) "$name.log")")
  return $rc
}

# shellcheck disable=SC2317  # called by the EXIT trap
summary() {
  echo
  echo "== device"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 4
  if [[ -f $logs/tests.log ]]; then
    echo "== kernel tests: error against the CPU reference"
    grep -E '^\[  error   \]' "$logs/tests.log" | cut -c 14-
    grep -E '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?|^\[  FAILED  \] [A-Za-z]' "$logs/tests.log"
  fi
  for tool in memcheck racecheck; do
    [[ -f $logs/$tool.log ]] && echo "== $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$tool.log" | tail -n 1)"
  done
  if [[ -f $logs/benchmark.log ]]; then
    echo "== benchmark"
    grep -E '^\[  bench   \]' "$logs/benchmark.log" | cut -c 14-
  fi
  echo "== steps"
  printf '%s\n' "${steps[@]}"
}
trap summary EXIT

step configure "${configure[@]}" -DROCMFORGE_BENCHMARKS=OFF || exit 1
step build cmake --build "$build" --target test_gpu -j "$(nproc)" || exit 1
step tests "$test_gpu"
if command -v compute-sanitizer >/dev/null; then
  step memcheck compute-sanitizer --tool memcheck --error-exitcode 99 "$test_gpu"
  step racecheck compute-sanitizer --tool racecheck --error-exitcode 99 "$test_gpu"
else
  steps+=("sanitizer  skipped: compute-sanitizer is not installed")
fi
step benchmark "$test_gpu" --gtest_also_run_disabled_tests --gtest_filter='GemvBenchmark.*'
exit $failed
