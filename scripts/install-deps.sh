#!/usr/bin/env bash
# Installs everything dflash builds and tests with: Debian packages and the npm oracles.
# Idempotent; needs root (or sudo) for apt.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libhwy-dev libpcre2-dev libutf8proc-dev nlohmann-json3-dev libcpp-httplib-dev libcli11-dev
  libgtest-dev libbenchmark-dev
  clang-14 libclang-rt-14-dev
  python3-torch python3-numpy python3-jinja2 libopenblas0-pthread
  chromium
  nginx  # tests/e2e/test_replicas_nginx.py runs deploy/nginx/dflash.conf in a private nginx
)
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
# On x86-64, scripts/test-arm64.sh cross-builds the ARM kernels and runs them under qemu.
if [ "$(dpkg --print-architecture)" = amd64 ]; then
  APT_PACKAGES+=(g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libgtest-dev:arm64
                 libpcre2-dev:arm64 libutf8proc-dev:arm64 libcpp-httplib-dev:arm64)
  dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
fi
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js may come from Debian or from NodeSource (which bundles npm): install only if absent.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The tokenizer and API oracles the tests use (versions pinned by package-lock.json).
if [ ! -d node_modules/@huggingface/tokenizers ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --ignore-scripts --omit=optional --no-audit --no-fund --loglevel=error
fi
# llama.cpp as a peer for `dflash bench --vs-llamacpp` and the GGUF interop test. Kept out of
# package.json: its lock entries for other platforms' optional builds break `npm ci` on npm 11,
# and it is not an oracle the rest of the suite needs. Only the CPU build, no install scripts.
LLAMA_PEER_VERSION=3.22.1
if [ ! -d node_modules/@node-llama-cpp/linux-x64 ] || [ ! -d node_modules/node-llama-cpp ]; then
  npm install --no-save --ignore-scripts --omit=optional --no-audit --no-fund --loglevel=error \
    "node-llama-cpp@$LLAMA_PEER_VERSION" "@node-llama-cpp/linux-x64@$LLAMA_PEER_VERSION"
fi
