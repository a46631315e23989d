#!/usr/bin/env bash
# Installs the Debian 12 packages gemlet builds with; does nothing when they are already present.
# default-jdk-headless (javac, the JNI headers, /usr/lib/jvm/default-java) is for the Java binding.
# libcpp-httplib-dev is gemlet serve's HTTP library.
# libcurl4-openssl-dev is gemlet pull's HTTP(S) client (the model store's fetcher).
# libpng-dev, libjpeg62-turbo-dev, libwebp-dev and libheif-dev decode the images given to vision models
# (src/media: PNG, JPEG, WebP, HEIC; Debian's libheif decodes HEVC through libde265 and encodes with x265).
# libsndfile1-dev (FLAC, Ogg Opus), libvorbis-dev (Ogg Vorbis) and libmpg123-dev (MP3) decode the clips given to
# audio models, and libsoxr-dev resamples them to the model's rate with the resampler HF's own audio loading uses
# (src/media).
# libcld2-dev is the language detector of the task presets (src/flows/language.cc): Google's CLD2, which
# measured ahead of exttextcat, the other one Debian ships, on short and long lines (bench/RESULTS.md).
# libnuma-dev, libmp3lame-dev: a static link of libgemlet.a takes libheif's and libsndfile's private
# dependencies, x265's libnuma and LAME (apps linking libgemlet.a; the install test does).
# Usage: scripts/install-deps.sh [--test] [--arm64]
#   --test: also what the tests alone need (the chat page's browser test); --arm64: what `make test-arm64` needs
set -euo pipefail
packages=(build-essential cmake pkg-config libhwy-dev nlohmann-json3-dev libcli11-dev libedit-dev libsqlite3-dev libssl-dev
          libcpp-httplib-dev libcurl4-openssl-dev libpng-dev libjpeg62-turbo-dev libwebp-dev libheif-dev
          libsndfile1-dev libvorbis-dev libmpg123-dev libsoxr-dev libcld2-dev libnuma-dev libmp3lame-dev libgtest-dev libgmock-dev libbenchmark-dev xz-utils python3 default-jdk-headless)
test_deps=0
arm64=0
for arg in "$@"; do
  case "$arg" in
    --test) test_deps=1 ;;
    --arm64) arm64=1 ;;
    *) echo "install-deps.sh: unknown option '$arg' (--test, --arm64)" >&2; exit 2 ;;
  esac
done
# The chat page's browser test (tests/server/web/run.sh): Chromium, and Node.js with npm only where
# there is no node yet (NodeSource's nodejs carries its own npm and conflicts with Debian's).
# openssl (the command) makes the certificate of the store's https test server. ccache lets CI's
# bare-clone build reuse the test build's objects.
if [ $test_deps = 1 ]; then
  packages+=(chromium openssl ccache)
  if ! command -v node >/dev/null; then packages+=(nodejs npm); fi
fi
# ARM64 tests (make test-arm64): the cross compiler, the emulator, and the arm64 builds of the
# libraries the kernels and model tests link (Debian multiarch). `make run` does not need them.
# libcld2-dev is not multiarch: the arm64 build takes the host's CLD2 headers and libcld2-0:arm64's library.
if [ $arm64 = 1 ]; then
  packages+=(g++-aarch64-linux-gnu qemu-user libhwy-dev:arm64 libgtest-dev:arm64 libcld2-0:arm64)
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
