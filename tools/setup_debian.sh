#!/usr/bin/env bash
# Installs what rocmforge needs to build and test on Debian 12 (run as root or with sudo).
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config
  ccache  # one preset's compiled objects serve the next (CMakeLists.txt)
  nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libspdlog-dev libfmt-dev
  libpcre2-dev libutf8proc-dev libgtest-dev libbenchmark-dev
  libpng-dev libjpeg62-turbo-dev libwebp-dev  # image files (Stable Diffusion)
  uuid-dev libssl-dev  # the server's job ids and base64
  libedit-dev  # line editing in `rocmforge chat`
  python3  # the tests' independent PNG reader (tools/fixtures/png_stdlib.py)
  hipcc libamdhip64-dev  # the rocm preset (HIP 5.2); the cuda preset uses /usr/local/cuda
  clang-16 libclang-rt-16-dev llvm-16  # the sanitize preset: ASan, UBSan, libFuzzer (tests/fuzz), the symbolizer
  libtbb-dev  # the hip-cpu preset: HIP-CPU (third_party/hip-cpu) runs on the parallel algorithms, on TBB
)
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
# The official openai npm client, the Vercel AI SDK and LangChain, which the server's tests drive
# (tests/server/openai_client).
if ! command -v npm >/dev/null; then
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
npm ci --prefix "$(dirname "$0")/../tests/server/openai_client" --no-audit --no-fund --loglevel=error >/dev/null
