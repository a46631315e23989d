// mock_server.mjs: a stand-in for `gemlet serve` in the chat page's browser tests. It serves the
// page's files from src/server/web/ and an OpenAI-style API whose answers the test scripts. No
// dependencies beyond Node.
//
//   node mock_server.mjs [--port N] [--plain]   prints "listening on http://127.0.0.1:N"
//
// --plain hides the /mock/ endpoints, so the test treats it as a real server (echo answers only).
//
// The page's endpoints: GET /v1/models (a model that takes text, images and audio), POST
// /v1/chat/completions (streamed when asked).
// The test's endpoints:
//   POST /mock/next    a script: the answer to the next chat completion (they queue up)
//   GET  /mock/state   {requests: [{body, authorization, aborted, finished}], queued}
//   POST /mock/reset   forgets the queue, the requests and the API key
//   POST /mock/config  {apiKey}: from now on require "Authorization: Bearer <apiKey>" (null: none)
// A script is {status, error | text} for an HTTP error, {whole: {content, reasoning}} for one JSON
// answer (no stream), or {chunks, delayMs, finishReason, usage} for a stream: each chunk is
// {content}, {reasoning}, {error} (an error event) or {raw} (bytes as they are), sent delayMs
// apart. Without a script the answer echoes the last user message.
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const WEB_DIR = path.resolve(here, "../../../src/server/web");
export const MODEL_ID = "mock-gemma";

const TYPES = {
  ".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
  ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml", ".json": "application/json",
};

// The Content-Security-Policy the real server is asked to send: the one web_assets.h declares.
async function contentSecurityPolicy() {
  const header = await readFile(path.join(WEB_DIR, "web_assets.h"), "utf8");
  const m = /kWebContentSecurityPolicy\s*=\s*((?:"[^"]*"\s*)+);/.exec(header);
  if (!m) throw new Error("web_assets.h declares no kWebContentSecurityPolicy");
  return [...m[1].matchAll(/"([^"]*)"/g)].map((s) => s[1]).join("");
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function json(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

async function readBody(req) {
  const parts = [];
  for await (const part of req) parts.push(part);
  const text = Buffer.concat(parts).toString("utf8");
  return text ? JSON.parse(text) : {};
}

// A message's text: its content, or its text parts and "[image]" for each image part.
function textOf(content) {
  if (!Array.isArray(content)) return content ?? "";
  return content.map((part) => (part.type === "text" ? part.text : `[${part.type === "image_url" ? "image" : part.type}]`)).join(" ");
}

function echoScript(body) {
  const last = [...(body.messages ?? [])].reverse().find((m) => m.role === "user");
  const words = `You said: ${textOf(last?.content)}`.split(/(?<= )/);
  return { chunks: words.map((w) => ({ content: w })), delayMs: 10 };
}

export async function startMockServer({ port = 0, host = "127.0.0.1", plain = false } = {}) {
  const csp = await contentSecurityPolicy();
  const state = { queue: [], requests: [], apiKey: null };

  const authorized = (req) => !state.apiKey || req.headers.authorization === `Bearer ${state.apiKey}`;
  const unauthorized = (res) => json(res, 401, {
    error: { message: "invalid or missing API key", type: "invalid_request_error", code: "invalid_api_key" },
  });

  async function serveFile(req, res, urlPath) {
    const name = urlPath === "/" ? "index.html" : decodeURIComponent(urlPath.slice(1));
    const file = path.resolve(WEB_DIR, name);
    const type = TYPES[path.extname(file)];
    if (!file.startsWith(WEB_DIR + path.sep) || !type) return json(res, 404, { error: { message: "not found", type: "not_found" } });
    try {
      const body = await readFile(file);
      res.writeHead(200, { "Content-Type": type, "Content-Security-Policy": csp, "Cache-Control": "no-cache" });
      res.end(body);
    } catch {
      json(res, 404, { error: { message: "not found", type: "not_found" } });
    }
  }

  async function chat(req, res) {
    const body = await readBody(req);
    const record = { body, authorization: req.headers.authorization ?? null, aborted: false, finished: false };
    state.requests.push(record);
    if (!authorized(req)) return unauthorized(res);
    const script = state.queue.shift() ?? echoScript(body);
    if (script.status) {
      record.finished = true;
      if (script.text !== undefined) {
        res.writeHead(script.status, { "Content-Type": "text/plain" });
        return res.end(script.text);
      }
      return json(res, script.status, { error: script.error });
    }
    if (script.whole) {
      record.finished = true;
      return json(res, 200, {
        id: "chatcmpl-mock", object: "chat.completion", created: Math.floor(Date.now() / 1000), model: MODEL_ID,
        choices: [{ index: 0, message: { role: "assistant", content: script.whole.content, reasoning_content: script.whole.reasoning }, finish_reason: "stop" }],
        usage: { prompt_tokens: 10, completion_tokens: 3, total_tokens: 13 },
      });
    }
    res.on("close", () => { if (!res.writableFinished) record.aborted = true; });
    res.on("error", () => {}); // a write after the page hung up
    res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "keep-alive" });
    const base = { id: "chatcmpl-mock", object: "chat.completion.chunk", created: Math.floor(Date.now() / 1000), model: MODEL_ID };
    const choice = (delta, finish = null) => ({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] });
    // Each event goes out in two writes split mid-way, often inside a UTF-8 character.
    const send = async (text) => {
      const bytes = Buffer.from(text, "utf8");
      const half = bytes.length >> 1;
      res.write(bytes.subarray(0, half));
      await sleep(2);
      if (!record.aborted) res.write(bytes.subarray(half));
    };
    const event = (value) => send(`data: ${JSON.stringify(value)}\n\n`);
    const delay = script.delayMs ?? 20;
    let first = true;
    for (const chunk of script.chunks ?? []) {
      if (record.aborted) return;
      if (chunk.raw !== undefined) await send(chunk.raw);
      else if (chunk.error) await event({ error: chunk.error });
      else if (chunk.reasoning !== undefined) await event(choice({ ...(first ? { role: "assistant" } : {}), reasoning_content: chunk.reasoning }));
      else await event(choice({ ...(first ? { role: "assistant" } : {}), content: chunk.content ?? "" }));
      first = false;
      await sleep(delay);
    }
    if (record.aborted) return;
    await event(choice({}, script.finishReason ?? "stop"));
    if (body.stream_options?.include_usage) {
      const usage = script.usage ?? { prompt_tokens: 10, completion_tokens: (script.chunks ?? []).length, total_tokens: 10 + (script.chunks ?? []).length };
      await event({ ...base, choices: [], usage });
    }
    await send("data: [DONE]\n\n");
    record.finished = true;
    res.end();
  }

  const server = createServer(async (req, res) => {
    const url = new URL(req.url, "http://mock");
    try {
      if (url.pathname === "/v1/models" && req.method === "GET") {
        if (!authorized(req)) return unauthorized(res);
        return json(res, 200, { object: "list", data: [{ id: MODEL_ID, object: "model", created: 0, owned_by: "gemlet", input_modalities: ["text", "image", "audio"] }] });
      }
      if (url.pathname === "/v1/chat/completions" && req.method === "POST") return await chat(req, res);
      if (plain && url.pathname.startsWith("/mock/")) return json(res, 404, { error: { message: "not found", type: "not_found" } });
      if (url.pathname === "/mock/next" && req.method === "POST") {
        state.queue.push(await readBody(req));
        return json(res, 200, { queued: state.queue.length });
      }
      if (url.pathname === "/mock/state") return json(res, 200, { requests: state.requests, queued: state.queue.length });
      if (url.pathname === "/mock/reset" && req.method === "POST") {
        Object.assign(state, { queue: [], requests: [], apiKey: null });
        return json(res, 200, {});
      }
      if (url.pathname === "/mock/config" && req.method === "POST") {
        state.apiKey = (await readBody(req)).apiKey ?? null;
        return json(res, 200, {});
      }
      if (req.method === "GET") return await serveFile(req, res, url.pathname);
      json(res, 404, { error: { message: `no route ${req.method} ${url.pathname}`, type: "not_found" } });
    } catch (err) {
      if (!res.headersSent) json(res, 500, { error: { message: String(err), type: "mock_error" } });
      else res.destroy();
    }
  });
  await new Promise((resolve) => server.listen(port, host, resolve));
  const url = `http://${host}:${server.address().port}`;
  return {
    url,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const at = process.argv.indexOf("--port");
  const { url } = await startMockServer({ port: at > 0 ? Number(process.argv[at + 1]) : 0, plain: process.argv.includes("--plain") });
  console.log(`listening on ${url}`);
}
