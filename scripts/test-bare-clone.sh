#!/usr/bin/env bash
# The README's first command as a new user meets it: `make run` in a fresh clone of this repository
# with no ../shared beside it (the reference data is for the tests only).
#   scripts/test-bare-clone.sh      (clones the committed HEAD into a temporary folder)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d /tmp/gemlet-bare-clone-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
git clone -q "$PWD" "$tmp/gemlet"
if [ -e "$tmp/shared" ]; then echo "test-bare-clone: $tmp/shared exists" >&2; exit 1; fi
echo "== make run in a bare clone ($tmp/gemlet, no ../shared)"
make -C "$tmp/gemlet" run JOBS="${JOBS:-$(nproc)}" > "$tmp/run.log" 2>&1 || { cat "$tmp/run.log"; exit 1; }
# The demo answered both requests (its poem and the raw continuation's stats line).
grep -q "床前明月光" "$tmp/run.log" || { cat "$tmp/run.log"; echo "test-bare-clone: no answer to the Chinese request" >&2; exit 1; }
grep -q "decode" "$tmp/run.log" || { cat "$tmp/run.log"; echo "test-bare-clone: no --stats line" >&2; exit 1; }
# Without a model named, nothing runs the demo behind the user's back: one line saying how to get one.
mkdir -p "$tmp/home"
if env -u GEMLET_MODEL -u XDG_DATA_HOME HOME="$tmp/home" "$tmp/gemlet/build/apps/gemlet/gemlet" polish \
    <<< "me and him goes to school" > "$tmp/nomodel.log" 2>&1; then
  cat "$tmp/nomodel.log"; echo "test-bare-clone: polish without a model succeeded" >&2; exit 1
fi
grep -q "gemlet pull gemma4-e2b" "$tmp/nomodel.log" || { cat "$tmp/nomodel.log"; echo "test-bare-clone: no 'gemlet pull' hint" >&2; exit 1; }
tail -n 5 "$tmp/run.log"
echo "== make run in a bare clone: ok"
