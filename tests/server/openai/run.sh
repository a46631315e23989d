#!/usr/bin/env bash
# OpenAI's Node.js client against gemlet serve (client.test.mjs), and the README's curl line.
# Usage: run.sh GEMLET MODEL [SCRIPTED_MODEL [HF_MM_DIR]]   (exit 77: skipped, Node.js or npm missing)
# SCRIPTED_MODEL: `gemlet synth --script ../scripted/gemma4_tools.json`, for tools.test.mjs.
# HF_MM_DIR: shared/testdata/hf-mm, whose gemma3_image is converted (text GGUF + mmproj) for images.test.mjs,
# and gemma4_e2b_image_audio for audio.test.mjs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
gemlet="$1"
model="$2"
scripted="${3:-}"
hf_mm="${4:-}"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then echo "skipped: Node.js and npm are needed"; exit 77; fi
if [ ! -d "$here/node_modules/openai" ]; then (cd "$here" && npm ci --no-audit --no-fund >/dev/null); fi
node "$here/client.test.mjs" --server-cmd "$gemlet serve -m $model --port 0 -c 1024 -n 2 --no-cache"
if [ -n "$scripted" ]; then
  node "$here/tools.test.mjs" --server-cmd "$gemlet serve -m $scripted --port 0 -c 1024 -n 2 --no-cache"
fi
if [ -n "$hf_mm" ] && [ -d "$hf_mm/gemma3_image" ]; then
  work="$(mktemp -d)"
  "$gemlet" convert "$hf_mm/gemma3_image" -o "$work/m.gguf" --mmproj-out "$work/mmproj.gguf" --outtype f32 >/dev/null 2>&1 ||
    { echo "FAIL: gemlet convert $hf_mm/gemma3_image"; exit 1; }
  status=0
  node "$here/images.test.mjs" --image "$hf_mm/gemma3_image/image.png" \
    --server-cmd "$gemlet serve -m $work/m.gguf --mmproj $work/mmproj.gguf --port 0 -c 512 -n 2 --no-cache" || status=$?
  rm -rf "$work"
  [ "$status" = 0 ] || exit "$status"
fi

if [ -n "$hf_mm" ] && [ -d "$hf_mm/gemma4_e2b_image_audio" ]; then
  work="$(mktemp -d)"
  "$gemlet" convert "$hf_mm/gemma4_e2b_image_audio" -o "$work/m.gguf" --mmproj-out "$work/mmproj.gguf" --outtype f32 >/dev/null 2>&1 ||
    { echo "FAIL: gemlet convert $hf_mm/gemma4_e2b_image_audio"; exit 1; }
  status=0
  node "$here/audio.test.mjs" --clip "$hf_mm/gemma4_e2b_image_audio/audio.wav" \
    --server-cmd "$gemlet serve -m $work/m.gguf --mmproj $work/mmproj.gguf --port 0 -c 2048 -n 2 --no-cache --max-tokens 8 --max-audio-seconds 100" ||
    status=$?
  rm -rf "$work"
  [ "$status" = 0 ] || exit "$status"
fi

# curl, streamed, as the README shows it.
log="$(mktemp)"
trap 'kill "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
"$gemlet" serve -m "$model" --port 0 -c 512 -n 1 --no-cache >"$log" 2>/dev/null &
pid=$!
for _ in $(seq 600); do grep -q "listening on" "$log" && break; sleep 0.1; done
url="$(grep -o 'http://[0-9.:]*' "$log" | head -1)"
out="$(curl -sS -N "$url/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"你好"}],"max_tokens":8,"stream":true}')"
# Here-strings, not `echo | grep -q`: under pipefail, grep -q leaving at its first match can kill
# echo with SIGPIPE and fail a check that matched.
grep -q '^data: \[DONE\]' <<<"$out" || { echo "FAIL curl: no [DONE] in: $out"; exit 1; }
grep -q '"chat.completion.chunk"' <<<"$out" || { echo "FAIL curl: no chunks in: $out"; exit 1; }
echo "ok   curl streams chat.completion.chunk events and [DONE]"
