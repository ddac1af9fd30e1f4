#!/usr/bin/env bash
# The GPU backend's check, in one run on a machine with an NVIDIA GPU: builds the cuda preset's
# test_gpu and rocmforge, runs the GPU tests, then the benchmarks (decode GEMV bandwidth, a decode
# step's kernels, prefill GEMM and flash attention against the materialised version), greedy
# generation on the GPU against the CPU, rocmforge bench on the GPU (llama3-1b, and issue #4's table
# on the llama3-8b shape), Stable Diffusion's bench-image (SD 1.5 and SDXL sizes) and a tiny image, the
# serving benchmark on the GPU (structured output's cost included), the decode step's kernels in place (tools/kernel_timeline.py), and last the tests again under
# compute-sanitizer (memcheck, racecheck) when it is installed; it ends with a summary. Logs
# go to build/gpu-check, and are packed into $OUT/gpu-check-logs.tar.gz when OUT is set (the device
# machine's output folder, which returns only a few files).
#
#   tools/gpu_check.sh              the check; ROCMFORGE_GPU_TARGETS picks the CUDA architectures (90),
#                                   GPU_CHECK_BUILD_DIR the build folder (build/cuda)
#   tools/gpu_check.sh --within S   the same, but a step that would run past S seconds from the start
#                                   is stopped or skipped, so that the summary still prints in time
#   tools/gpu_check.sh --skip A,B   leaves out the named steps (say memcheck,racecheck,bench-8b)
#   tools/gpu_check.sh --baseline D also builds rocmforge from the source tree D (say a `git archive`
#                                   of the commit before a change, unpacked under build/) and runs
#                                   the speed table's rows with it just before this tree's
#                                   (bench-8b-before), so that both figures come from one card
#   tools/gpu_check.sh --soak M     also runs tools/soak_serve.py against `serve --device cuda` for M
#                                   minutes (issue #29's soak: random requests, hang-ups, oversized
#                                   prompts; device memory read each minute), after the serving steps
#   tools/gpu_check.sh --pack-deps  on Debian 12: unpack the project's build dependencies into
#                                   build/gpu-deps, for a GPU machine that has none, and pack that
#                                   folder into build/gpu-deps.tar.xz (3.5 MB where the folder is 15,
#                                   which with the tree passes the 64 MiB a device call carries): carry
#                                   either; the check unpacks the archive and configures against it
set -uo pipefail
cd "$(dirname "$0")/.."
deps=$PWD/build/gpu-deps

# What the top-level CMakeLists.txt finds, plus pkgconf to find the pkg-config ones (cpp-httplib's .pc
# file requires openssl, zlib and brotli, which linking rocmforge needs too).
packages=(nlohmann-json3-dev libcli11-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 libpcre2-dev libpcre2-8-0
          libutf8proc-dev libutf8proc2 libgtest-dev pkgconf-bin libpkgconf3
          libcpp-httplib-dev libcpp-httplib0.11 libssl-dev libssl3 zlib1g-dev zlib1g libbrotli-dev libbrotli1
          libpng-dev libpng16-16 libjpeg62-turbo-dev libjpeg62-turbo libwebp-dev libwebp7 libwebpmux3 libwebpdemux2
          uuid-dev libuuid1 libedit-dev libedit2 libbsd0 libmd0)

if [[ ${1:-} == --pack-deps ]]; then
  set -e
  rm -rf "$deps"
  mkdir -p "$deps/debs"
  (cd "$deps/debs" && apt-get download -q "${packages[@]}")
  for deb in "$deps"/debs/*.deb; do dpkg -x "$deb" "$deps/root"; done
  # Keep it small (it travels with the working tree): no docs, no static libraries but gtest's.
  rm -rf "$deps/debs" "$deps/root/usr/share/doc" "$deps/root/usr/share/man"
  find "$deps/root" -name '*.a' ! -name 'libgtest*' -delete
  # cuDNN's headers from this machine's CUDA toolkit: the GPU machine has the library (PyTorch's
  # wheel) but not the headers to build against.
  if compgen -G "/usr/local/cuda/include/cudnn*.h" >/dev/null; then
    mkdir -p "$deps/cudnn/include"
    cp /usr/local/cuda/include/cudnn*.h "$deps/cudnn/include/"
  fi
  # NCCL's header likewise, for a GPU machine whose NCCL is PyTorch's wheel's.
  if [[ -f /usr/local/cuda/include/nccl.h ]]; then
    mkdir -p "$deps/nccl/include"
    cp /usr/local/cuda/include/nccl.h "$deps/nccl/include/"
  fi
  tar -cJf "$deps.tar.xz" -C "$(dirname "$deps")" "$(basename "$deps")"
  du -sh "$deps" "$deps.tar.xz"
  exit 0
fi
if [[ ! -d $deps && -f $deps.tar.xz ]]; then tar -xJf "$deps.tar.xz" -C "$(dirname "$deps")"; fi

deadline=0
skipped=,
baseline=
soak_minutes=0
while (($#)); do
  case $1 in
    --within) deadline=${2:?--within needs a number of seconds}; shift 2 ;;
    --skip) skipped=,${2:?--skip needs step names},; shift 2 ;;
    --baseline) baseline=$(realpath "${2:?--baseline needs a source folder}"); shift 2 ;;
    --soak) soak_minutes=${2:?--soak needs a number of minutes}; shift 2 ;;
    *) echo "gpu_check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
logs=$PWD/build/gpu-check
rm -rf "$logs"
mkdir -p "$logs"
export PATH=/usr/local/cuda/bin:$PATH
build=${GPU_CHECK_BUILD_DIR:-$PWD/build/cuda}
test_gpu=$build/tests/test_gpu
rocmforge=$build/rocmforge
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
  configure+=("-DPKG_CONFIG_EXECUTABLE=$deps/pkg-config" "-DCMAKE_PREFIX_PATH=$usr")  # the prefix: FindPNG, FindJPEG
fi
# cuDNN: the bundle's headers against the library PyTorch's wheel installed, found through Python.
cudnn_lib=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null)
if [[ -d $deps/cudnn/include && -n $cudnn_lib && -f $cudnn_lib/libcudnn.so.9 ]]; then
  configure+=("-DCUDNN_INCLUDE_DIR=$deps/cudnn/include" "-DCUDNN_LIBRARY=$cudnn_lib/libcudnn.so.9")
  export LD_LIBRARY_PATH=$cudnn_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
# NCCL the same way where the CUDA toolkit has none.
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
if [[ ! -f /usr/local/cuda/include/nccl.h && -d $deps/nccl/include && -n $nccl_lib && -f $nccl_lib/libnccl.so.2 ]]; then
  configure+=("-DNCCL_INCLUDE_DIR=$deps/nccl/include" "-DNCCL_LIBRARY=$nccl_lib/libnccl.so.2")
  export LD_LIBRARY_PATH=$nccl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

steps=()
failed=0
# step NAME COMMAND...: runs COMMAND with its output in $logs/NAME.log and records the outcome. Past
# the deadline it is skipped; a program (not a shell function) is stopped at it.
step() {
  local name=$1 start=$SECONDS status left=$((deadline - SECONDS - 15))
  shift
  if [[ $skipped == *,$name,* ]]; then
    steps+=("$(printf '%-10s %-12s' "$name" "skipped: --skip")")
    return 1
  fi
  if ((deadline > 0 && left <= 0)); then
    steps+=("$(printf '%-10s %-12s' "$name" "skipped: past the --within deadline")")
    return 1
  fi
  if ((deadline > 0)) && [[ $(type -t "$1") == file ]]; then set -- timeout -k 5 "$left" "$@"; fi
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
    echo "== end to end against Hugging Face's float64 references"
    grep -E '^(logits vs HF|perplexity [0-9])' "$logs/tests.log"
    grep -oE 'exception with description ".*"' "$logs/tests.log" | sort | uniq -c
    grep -E '^\[  (PASSED|SKIPPED|FAILED) +\] [0-9]+ tests?' "$logs/tests.log"
    grep -E '^\[  FAILED  \] [A-Za-z]' "$logs/tests.log" | sed 's/, where GetParam.*//; s/ ([0-9]* ms)$//' | sort -u
  fi
  for tool in memcheck racecheck; do
    [[ -f $logs/$tool.log ]] && echo "== $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/$tool.log" | tail -n 1)"
  done
  if [[ -f $logs/benchmark.log ]]; then
    echo "== benchmark"
    grep -E '^\[  bench   \]' "$logs/benchmark.log" | cut -c 14-
  fi
  if [[ -f $logs/generate-cuda.log ]]; then
    echo "== generate, greedy: cuda vs cpu ($(cmp -s "$logs/generate-cuda.txt" "$logs/generate-cpu.txt" && echo identical || echo DIFFERENT))"
    for device in cuda cpu; do
      printf '%-5s %s\n' "$device" "$(tr '\n' ' ' <"$logs/generate-$device.txt")"
      grep -E '^generation:' "$logs/generate-$device.log" | sed 's/^/      /'
    done
  fi
  for bench in bench bench-8b-before bench-8b serve serve-invariant serve-free serve-json; do
    [[ -f $logs/$bench.log ]] || continue
    echo "== rocmforge $bench"
    grep -E '^(device:|model:|\| [a-z0-9])' "$logs/$bench.log" | awk '!/^\| (model|streams)/ || !seen++'
  done
  if [[ -f $logs/soak.log ]]; then
    echo "== soak"
    grep -vE '^(\[|[0-9]{4}-)' "$logs/soak.log"  # the server's own log lines left out
  fi
  for trace in "$logs"/timeline-*.log; do
    [[ -f $trace ]] || continue
    echo "== decode timeline, llama3-8b $(basename "$trace" .log | cut -d- -f2-): each kernel's time in place, a step"
    grep -E '^[a-z]' "$trace" | cut -c 1-150
  done
  echo "== steps"
  printf '%s\n' "${steps[@]}"
  [[ -n ${OUT:-} ]] && tar czf "$OUT/gpu-check-logs.tar.gz" -C "$logs" .
}
trap summary EXIT

step configure "${configure[@]}" -DROCMFORGE_BENCHMARKS=OFF || exit 1
step build cmake --build "$build" --target test_gpu -j "$(nproc)" || exit 1
step tests "$test_gpu"
step benchmark "$test_gpu" --gtest_also_run_disabled_tests --gtest_filter='GemvBenchmark.*:PrefillBenchmark.*:DecodeStepBenchmark.*'

# generate_on DEVICE [-tp N]: the demo model's greedy continuation on DEVICE (split over N GPUs), its
# text in generate-DEVICE.txt (generate-tpN.txt).
# GPU_CHECK_DEMO_MODEL picks another file of the demo model (its GGUF, where a call leaves the
# safetensors behind to fit what it carries).
generate_on() {
  local name=$1${2:+-tp$3}
  "$rocmforge" generate --device "$1" ${2:+"$2" "$3"} -m "${GPU_CHECK_DEMO_MODEL:-models/kjv-llama}" \
    -p "In the beginning" -n 32 --temp 0 \
    >"$logs/generate-${name#cuda-}.txt"
}
# bench_8b: the rows of the speed table (issue #4) on the Llama 3.1 8B shape.
# Then the batch-invariant mode's cost on the same shape.
# bench_8b [BINARY]: with another rocmforge (the baseline's), the same rows but the batch-invariant ones.
bench_8b() {
  local binary=${1:-$rocmforge}
  "$binary" bench --synthetic llama3-8b --device cuda --dtype bf16 -p 512 -n 128 -b 1,8,32 -r 5 &&
    for dtype in q8_0 q4_0 q4_k; do
      "$binary" bench --synthetic llama3-8b --device cuda --dtype $dtype -p 0 -n 128 -b 1 -r 5 || return
    done &&
    if [[ $binary == "$rocmforge" ]]; then
      "$binary" bench --synthetic llama3-8b --device cuda --dtype bf16 -p 512 -n 128 -b 1,8,32 -r 3 --batch-invariant
    fi
}
# bench_tp: tensor parallelism's rows (issue #26) on the 8B shape, one GPU and then two in turn, so that
# each pair comes from the same cards minutes apart; then two GPUs with NCCL's all-reduce alone (no
# one-shot kernel), and the 70B shape over two GPUs.
bench_tp() {
  local tp dtype
  for dtype in bf16 q8_0 q4_k; do
    for tp in 1 2; do
      "$rocmforge" bench --synthetic llama3-8b --device cuda --dtype $dtype -p 512 -n 128 -b 1,32 -r 3 -tp $tp || return
    done
  done
  ROCMFORGE_PEER_ALL_REDUCE=0 "$rocmforge" bench --synthetic llama3-8b --device cuda --dtype bf16 -p 512 -n 128 \
    -b 1,32 -r 3 -tp 2 || return
  for dtype in q8_0 q4_k; do
    "$rocmforge" bench --synthetic llama3-70b --device cuda --dtype $dtype -p 512 -n 128 -b 1 -r 3 -tp 2 || return
  done
}
# build_baseline: rocmforge alone from the --baseline tree, configured as this tree is.
build_baseline() {
  local args=("${configure[@]:3}")  # this tree's configure line less its "cmake --preset cuda"
  args=("${args[@]/#$build/$PWD/build/baseline}")
  (cd "$baseline" && cmake --preset cuda "${args[@]}" -DROCMFORGE_TESTS=OFF) &&
    cmake --build build/baseline --target rocmforge -j "$(nproc)"
}
# timeline DTYPE BATCH [TAG BENCH_ARGS...]: what each kernel of a decode step (the 8B shape, BATCH
# sequences) costs in place, from the GPU's own kernel records (tools/kernel_trace: nsys there cannot
# import its own traces); with a TAG, the bench runs with BENCH_ARGS too (-tp 2: device 0's kernels).
timeline() {
  local trace=$logs/timeline-$1-b$2${3:+-$3}.csv
  CUDA_INJECTION64_PATH=$build/libkernel_trace.so ROCMFORGE_KERNEL_TRACE=$trace \
    "$rocmforge" bench --synthetic llama3-8b --device cuda --dtype "$1" -p 0 -n 32 -b "$2" -r 1 "${@:4}" &&
    python3 tools/kernel_timeline.py "$trace" --steps 16
}
# nccl_only COMMAND...: COMMAND with every all-reduce left to NCCL (no one-shot kernel).
nccl_only() { ROCMFORGE_PEER_ALL_REDUCE=0 "$@"; }
# sd_kernel_totals MODEL STEPS: where the GPU time of one image at MODEL's published size goes,
# kernel by kernel (the VAE's decode included).
sd_kernel_totals() {
  CUDA_INJECTION64_PATH=$build/libkernel_trace.so ROCMFORGE_KERNEL_TRACE=$logs/$1-trace.csv \
    "$rocmforge" bench-image --synthetic "$1" --device cuda -b 1 -r 1 --steps "$2" &&
    python3 tools/kernel_timeline.py "$logs/$1-trace.csv" --totals
}
# rocmforge links the whole project: built apart, so that a failure there leaves the tests' results.
if step build-cli cmake --build "$build" --target rocmforge -j "$(nproc)"; then
  step generate-cuda generate_on cuda
  step generate-cpu generate_on cpu
  step generate-diff cmp "$logs/generate-cuda.txt" "$logs/generate-cpu.txt"
  step bench "$rocmforge" bench --synthetic llama3-1b --device cuda -p 512 -n 128 -r 5
  if [[ -n $baseline ]] && step build-base build_baseline; then
    step bench-8b-before bench_8b "$PWD/build/baseline/rocmforge"
  fi
  step bench-8b bench_8b
  # Two GPUs: the demo model split over both gives the one-GPU text, then tensor parallelism's speed.
  if (($(nvidia-smi -L | wc -l) >= 2)); then
    step generate-tp2 generate_on cuda -tp 2
    step generate-tp-diff cmp "$logs/generate-cuda.txt" "$logs/generate-tp2.txt"
    step bench-tp bench_tp
    if [[ -f $build/libkernel_trace.so ]] || step build-trace cmake --build "$build" --target kernel_trace; then
      step timeline-bf16-b1-tp2 timeline bf16 1 tp2 -tp 2
      step timeline-bf16-b1-tp2-nccl nccl_only timeline bf16 1 tp2-nccl -tp 2
    fi
  fi
  # Stable Diffusion at the published sizes, random weights (issue #23's table), and an image from the
  # tiny SD 1.5 fixture, whose PNG comes back with the logs.
  step sd15-bench "$rocmforge" bench-image --synthetic sd15 --device cuda -b 1,4 -r 3
  step sdxl-bench "$rocmforge" bench-image --synthetic sdxl --device cuda -b 1 -r 2 --steps 10
  # diffusers on the same shapes, where a copy of its source travels as build/diffusers.tar.xz.
  if [[ -f build/diffusers.tar.xz ]] && mkdir -p build/diffusers && tar -xJf build/diffusers.tar.xz -C build/diffusers; then
    step sd15-diffusers env PYTHONPATH=build/diffusers/diffusers/src python3 tools/bench_sd_diffusers.py --model sd15 -b 1,4 -r 3
    step sdxl-diffusers env PYTHONPATH=build/diffusers/diffusers/src python3 tools/bench_sd_diffusers.py --model sdxl -b 1 -r 2 --steps 10
    step sd15-serve env PYTHONPATH=build/diffusers/diffusers/src python3 tools/bench_image_serve.py --binary "$rocmforge" \
      --model sd15 --clients 1,4 --images 16 -- --device cuda
  fi
  step two-workers python3 tools/serve_two_workers.py --binary "$rocmforge" -- --device cuda
  step sd-image "$rocmforge" image -m tests/fixtures/sd/models/sd15/diffusers -p "a red apple" --steps 4 --seed 1 \
    -W 64 -H 48 --device cuda -o "$logs/sd15-tiny.png"
  step serve python3 tools/bench_serve.py --binary "$rocmforge" -- --device cuda
  step serve-invariant python3 tools/bench_serve.py --binary "$rocmforge" -- --device cuda --batch-invariant
  # Structured output's cost (issue #28), on a vocabulary of real size: free, then constrained.
  if step make-1b python3 tools/make_random_hf_llama.py --shape llama3-1b \
      --tokenizer "$build/tests/fixtures/tokenizers/llama3_1" --out "$PWD/build/llama3-1b-random"; then
    step serve-free python3 tools/bench_serve.py --binary "$rocmforge" -m build/llama3-1b-random --concurrency 1,32 \
      --max-tokens 256 -- --device cuda
    step serve-json python3 tools/bench_serve.py --binary "$rocmforge" -m build/llama3-1b-random --concurrency 1,32 \
      --max-tokens 256 --json-schema tools/bench_schema.json -- --device cuda
  fi
  if ((soak_minutes > 0)); then
    step soak python3 tools/soak_serve.py --binary "$rocmforge" -m models/kjv-llama/model.q8_0.gguf \
      --minutes "$soak_minutes" -- --device cuda
  fi
  if step build-trace cmake --build "$build" --target kernel_trace -j "$(nproc)"; then
    step timeline-q4_0-b1 timeline q4_0 1
    step timeline-bf16-b32 timeline bf16 32
    step sd15-trace sd_kernel_totals sd15 4
    step sdxl-trace sd_kernel_totals sdxl 2
  fi
fi
# The sanitizers slow kernels down tenfold and more, so they run last; they leave out the statistical
# sampling tests (thousands of draws), which run no code the other sampling tests do not, and the
# test whose kernel faults on purpose (a lost context), which memcheck would rightly report.
sanitized=(--gtest_filter=-Sampling.DrawsFollowTheHostDistribution:Sampling.TiesAtTheCutOffKeepTheLowerIds:Device.ALostContextEndsTheProcessSayingWhy)
# Racecheck is slower still: the end-to-end tests, which launch the kernels the unit tests check,
# are left to memcheck; so are the tests that run cuBLAS, in whose Hopper GEMM kernels racecheck
# "failed to handle a hardware exception" (H100, CUDA 13), which ends the process's context.
race_checked=("${sanitized[0]}:*HfReferenceGpu*:DecodeGraphs.*:BatchInvariance.*:Gemm.LaunchGemm*:Gemm.TakesTheCallersHalfCopy")
if command -v compute-sanitizer >/dev/null; then
  step memcheck compute-sanitizer --tool memcheck --error-exitcode 99 "$test_gpu" "${sanitized[@]}"
  # Racecheck reports hazards inside cuBLAS's own Hopper kernels (nvjet_*, synchronised by hardware it
  # does not model); ours are checked, the vendor's left out.
  step racecheck compute-sanitizer --tool racecheck --kernel-name-exclude kns=nvjet --error-exitcode 99 \
    "$test_gpu" "${race_checked[@]}"
else
  steps+=("sanitizer  skipped: compute-sanitizer is not installed")
fi
exit $failed
