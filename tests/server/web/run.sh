#!/usr/bin/env bash
# Runs the chat page's browser test (chat_page.test.mjs) in headless Chromium.
#   run.sh                          against the mock server, which the test starts itself
#   run.sh --base-url URL           against a server already listening at URL
#   run.sh --server-cmd "CMD ..."   starts CMD, waits for the "listening on http://HOST:PORT" line it
#                                   prints, tests that URL, then stops CMD
# Installs the test's npm packages (package-lock.json) when they are missing or older than the
# lock. Exits 77, ctest's "skipped", only when Node.js (18 or newer) or Chromium is not installed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

base_url=""
server_cmd=""
while [ $# -gt 0 ]; do
  case "$1" in
    --base-url) base_url="$2"; shift 2 ;;
    --server-cmd) server_cmd="$2"; shift 2 ;;
    *) echo "run.sh: unknown argument $1 (see the top of $0)" >&2; exit 2 ;;
  esac
done

if ! command -v node >/dev/null; then
  echo "SKIP: node is not installed (scripts/install-deps.sh installs nodejs)"
  exit 77
fi
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 18 ]; then
  echo "SKIP: node $(node --version) is older than 18 (puppeteer-core needs 18)"
  exit 77
fi
chromium="${CHROMIUM:-}"
if [ -z "$chromium" ]; then
  for name in chromium chromium-browser google-chrome-stable google-chrome; do
    if command -v "$name" >/dev/null; then chromium="$(command -v "$name")"; break; fi
  done
fi
if [ -z "$chromium" ] || [ ! -x "$chromium" ]; then
  echo "SKIP: Chromium is not installed (scripts/install-deps.sh installs the chromium package)"
  exit 77
fi

if [ ! -f "$here/node_modules/.package-lock.json" ] || [ "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]; then
  if ! command -v npm >/dev/null; then
    echo "run.sh: node is installed but npm is not: cannot install puppeteer-core" >&2
    exit 1
  fi
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi

test_args=(--chromium "$chromium")
if [ -n "$server_cmd" ]; then
  log="$(mktemp)"
  # Its own process group, so stopping it stops whatever the command started. No stdbuf: it works
  # by LD_PRELOAD, which an ASan-built server refuses; the server flushes its "listening on" line.
  setsid bash -c "exec $server_cmd" >"$log" 2>&1 &
  server_pid=$!
  stop_server() {
    kill -TERM -- "-$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    rm -f "$log"
  }
  trap stop_server EXIT
  for _ in $(seq 1 1200); do # 120 s: a large model takes a while to load
    base_url="$(grep -o -m1 'listening on http://[^ /]*' "$log" | sed 's/^listening on //; s/[.,;)]*$//' || true)"
    [ -n "$base_url" ] && break
    if ! kill -0 "$server_pid" 2>/dev/null; then
      echo "run.sh: the server exited before it was listening: $server_cmd" >&2
      cat "$log" >&2
      exit 1
    fi
    sleep 0.1
  done
  if [ -z "$base_url" ]; then
    echo "run.sh: no 'listening on http://HOST:PORT' line from: $server_cmd" >&2
    cat "$log" >&2
    exit 1
  fi
  echo "run.sh: testing $base_url (started by: $server_cmd)"
fi
if [ -n "$base_url" ]; then test_args+=(--base-url "$base_url"); fi

status=0
node "$here/chat_page.test.mjs" "${test_args[@]}" || status=$?
if [ $status -ne 0 ] && [ -n "$server_cmd" ]; then
  echo "--- the server's output ---"
  tail -n 40 "$log"
fi
exit $status
