#!/usr/bin/env bash
# The installed package as an app meets it: `cmake --install` into a temporary prefix, then both
# examples (examples/) built against that prefix only, with CMake's find_package (libgemlet.so, and
# libgemlet.a) and with pkg-config (shared, and --static), each run on the demo model; libgemlet.so
# exports the public API only.
#   tests/install/install_test.sh BUILD_DIR SOURCE_DIR LIBDIR [EXTRA_FLAGS]      (LIBDIR: lib, lib64, ...)
# It installs what BUILD_DIR has built (`make test` builds every target before ctest runs).
# EXTRA_FLAGS go to every compile and link: a sanitizer build's library needs its runtime in the app.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
lib=$3
extra=${4:-}
model=$src/models/gemlet-demo.gguf
tmp=$(mktemp -d /tmp/gemlet-install-test-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "install_test: $*" >&2; exit 1; }
quiet() { "$@" > "$tmp/log" 2>&1 || { cat "$tmp/log"; fail "failed: $*"; }; }

echo "== cmake --install $build --prefix $prefix"
quiet cmake --install "$build" --prefix "$prefix"
export PKG_CONFIG_PATH=$prefix/$lib/pkgconfig
libdir=$(pkg-config --variable=libdir gemlet) || fail "pkg-config finds no gemlet.pc in $PKG_CONFIG_PATH"
for f in include/gemlet/gemlet.h include/gemlet/gemlet.hpp include/gemlet/types.hpp include/gemlet/status.hpp include/gemlet/export.h \
         $lib/libgemlet.so $lib/libgemlet.so.0 $lib/libgemlet.a $lib/cmake/gemlet/gemletConfig.cmake \
         $lib/cmake/gemlet/gemletConfigVersion.cmake $lib/pkgconfig/gemlet.pc bin/gemlet; do
  [ -e "$prefix/$f" ] || fail "$f is not installed"
done
(cd "$prefix" && find . -type f -o -type l | sort)
# Nothing of src/ is public: the headers are include/gemlet's, and they include only each other.
extra_headers=$(cd "$prefix/include" && find . -type f ! -path './gemlet/*')
[ -z "$extra_headers" ] || fail "headers outside include/gemlet: $extra_headers"
private_includes=$(grep -h '^#include "' "$prefix"/include/gemlet/* | grep -v '^#include "gemlet/' || true)
[ -z "$private_includes" ] || fail "installed headers include what is not installed: $private_includes"

echo "== libgemlet.so exports the public API only"
# The C API, the C++ API's classes (their members, not their Impl's) and free functions, and std:: template instances
# the API's types make (typeinfo, vtables, and at -O1 the std:: helpers that stay out of line) are
# allowed; anything else is an internal symbol.
nm -D --defined-only -C "$libdir/libgemlet.so" | sed -E 's/^[0-9a-f]+ [A-Za-z] //' > "$tmp/exports"
leaked=$(grep -Ev '^gemlet_[a-z0-9_]+$|^gemlet::(Engine|Session|Conversation|TextTokenizer|MemoryUsage|BatchDecoder|Adapter)::|^gemlet::(Version|ThermalStateName|MemoryPressureName|SetLogCallback|SetFootprintCallback|ResolveThreadCount|StopReasonName|Validate|AvailableKernels|MeasureProcessMemory|MemoryActionName|KvCacheTypeName|ParseKvCacheType|FitToBudget|FitFileToBudget|PlanSession|ParseByteSize|DefaultMemoryBudget|TaskNames|TaskSummary|TaskMessages|TaskChatPrompt|JoinTranscripts|CleanTaskOutput|FinishTaskOutput|DetectLanguageTag|RunTask|CheckTaskContract|TaskViolationName|DetectableLanguages)(\[abi:cxx11\])?\(|^gemlet::delta::[A-Za-z0-9]+(\[abi:cxx11\])?\(|^((typeinfo|typeinfo name|vtable) for )?std::|^(void|bool|int|char|long|unsigned( int| long)?) std::' "$tmp/exports" || true)
leaked+=$'\n'$(grep -E '^gemlet::[A-Za-z]+::Impl::' "$tmp/exports" || true)
# GNU ld's own section bounds (_edata, _end, __bss_start) name no code of ours: it adds them to the
# dynamic table of some libraries (here since the audio decoders are linked in).
leaked=$(grep -Ev '^(_edata|_end|__bss_start|)$' <<< "$leaked" || true)
[ -z "$leaked" ] || fail "libgemlet.so exports internal symbols:"$'\n'"$leaked"
echo "$(grep -c '^gemlet_' "$tmp/exports") C functions, $(grep -c '^gemlet::' "$tmp/exports") C++ API symbols, $(grep -vc '^gemlet' "$tmp/exports") std:: instances"

# chat: two turns on stdin, both answered, the poem among them; generate: one prompt.
check_chat() {
  local out
  out=$(printf 'Who are you?\n请背诵《静夜思》。\n' | "$1" "$model") || fail "$1 exited $?"
  grep -q "床前明月光" <<< "$out" || { echo "$out"; fail "$1: no poem in the answers"; }
}
check_generate() {
  local out
  out=$("$1" "$model" "请背诵《静夜思》。" 2> /dev/null) || fail "$1 exited $?"
  grep -q "床前明月光" <<< "$out" || { echo "$out"; fail "$1: no poem in the answer"; }
}
# NEEDED says which library an example runs on: libgemlet.so.0 from the prefix, or none (libgemlet.a).
check_linked() {  # BINARY shared|static
  local needed loads
  needed=$(readelf -d "$1" | grep NEEDED || true)
  if [ "$2" = shared ]; then
    grep -q 'libgemlet.so.0' <<< "$needed" || fail "$1 does not load libgemlet.so"
    # Captured first: grep -q would stop reading, and pipefail would then count ldd's SIGPIPE.
    loads=$(LD_LIBRARY_PATH= ldd "$1")
    grep -q "$prefix/$lib/libgemlet.so.0" <<< "$loads" || { echo "$loads"; fail "$1 does not find the prefix's libgemlet.so"; }
  else
    ! grep -q 'libgemlet' <<< "$needed" || fail "$1 loads libgemlet.so, not libgemlet.a"
  fi
}

for kind in shared static; do
  echo "== CMake: find_package(gemlet), $kind"
  static=OFF; [ $kind = static ] && static=ON
  quiet cmake -S "$src/examples" -B "$tmp/cmake-$kind" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
    -DGEMLET_EXAMPLES_STATIC=$static -DCMAKE_C_FLAGS="-Werror $extra" -DCMAKE_CXX_FLAGS="-Werror $extra" \
    -DCMAKE_EXE_LINKER_FLAGS="$extra"
  quiet cmake --build "$tmp/cmake-$kind" -j 2
  check_linked "$tmp/cmake-$kind/chat" $kind
  check_linked "$tmp/cmake-$kind/generate" $kind
  check_chat "$tmp/cmake-$kind/chat"
  check_generate "$tmp/cmake-$kind/generate"
done

echo "== pkg-config: cc and c++ with \$(pkg-config --cflags --libs gemlet)"
pc=$tmp/pkg-config && mkdir -p "$pc"
# shellcheck disable=SC2046,SC2086  # pkg-config's output is a list of flags
{
  quiet cc -std=c11 -Wall -Wextra -Werror $extra "$src/examples/c/chat.c" -o "$pc/chat" \
    $(pkg-config --cflags --libs gemlet) -Wl,-rpath,"$libdir"
  quiet c++ -std=c++20 -Wall -Wextra -Werror $extra "$src/examples/cpp/generate.cc" -o "$pc/generate" \
    $(pkg-config --cflags --libs gemlet) -Wl,-rpath,"$libdir"
  # --static: the archive (-l:libgemlet.a, as a prefix holding only it would give) links with the C
  # compiler on Libs.private and Requires.private alone.
  quiet cc -std=c11 -Wall -Wextra -Werror $extra "$src/examples/c/chat.c" -o "$pc/chat_static" \
    $(pkg-config --static --cflags --libs gemlet | sed 's/-lgemlet\b/-l:libgemlet.a/')
}
check_linked "$pc/chat" shared
check_linked "$pc/generate" shared
check_linked "$pc/chat_static" static
check_chat "$pc/chat"
check_generate "$pc/generate"
check_chat "$pc/chat_static"

echo "== the README's hello.c"
# The program a user copies first (README.md, "Embedding gemlet"), as written there.
awk '/^## Embedding gemlet/ { in_section = 1 } in_section && /^```$/ && code { exit }
     code { print } in_section && /^```c$/ { code = 1 }' "$src/README.md" > "$tmp/hello.c"
[ -s "$tmp/hello.c" ] || fail "README.md has no C program under \"Embedding gemlet\""
# shellcheck disable=SC2046
quiet cc -std=c11 -Wall -Wextra -Werror $extra "$tmp/hello.c" -o "$pc/hello" \
  $(pkg-config --cflags --libs gemlet) -Wl,-rpath,"$libdir"
out=$("$pc/hello" "$model" "Who are you?") || fail "hello exited $?"
[ -n "$out" ] || fail "hello printed no answer"

echo "== bad arguments and a bad model"
set +e
"$pc/chat" > /dev/null 2> "$tmp/err"; rc=$?
set -e
[ $rc -eq 2 ] && grep -q usage "$tmp/err" || fail "chat without a model: exit $rc, $(cat "$tmp/err")"
set +e
"$pc/chat" "$tmp/missing.gguf" < /dev/null > /dev/null 2> "$tmp/err"; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "missing.gguf" "$tmp/err" || fail "chat on a missing model: exit $rc, $(cat "$tmp/err")"
echo "the installed package builds and runs both examples"
