#!/usr/bin/env bash
# Installs the Debian 12 packages gemlet builds with; does nothing when they are already present.
# default-jdk-headless (javac, the JNI headers, /usr/lib/jvm/default-java) is for the Java binding.
# Usage: scripts/install-deps.sh [--arm64]   (--arm64: also what `make test-arm64` needs)
set -euo pipefail
packages=(build-essential cmake pkg-config libhwy-dev nlohmann-json3-dev libcli11-dev libedit-dev libsqlite3-dev libssl-dev libgtest-dev libgmock-dev
          libbenchmark-dev xz-utils python3 default-jdk-headless)
# The chat page's browser test (tests/server/web/run.sh): Chromium, and Node.js with npm only where
# there is no node yet (NodeSource's nodejs carries its own npm and conflicts with Debian's).
packages+=(chromium)
if ! command -v node >/dev/null; then packages+=(nodejs npm); fi
# ARM64 tests (make test-arm64): the cross compiler, the emulator, and the arm64 builds of the
# libraries the kernels and model tests link (Debian multiarch). `make run` does not need them.
arm64=0
if [ "${1:-}" = "--arm64" ]; then
  arm64=1
  packages+=(g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libgtest-dev:arm64)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ $arm64 = 1 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then $SUDO dpkg --add-architecture arm64; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
