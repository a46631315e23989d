// client.js: the two calls the page makes to the OpenAI-compatible server, and its errors.
import { sseEvents } from "./sse.js";

// An error the server (or the network) reported: status is the HTTP status, 0 for none.
export class ApiError extends Error {
  constructor(message, { status = 0, type = "", code = "" } = {}) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.type = type;
    this.code = code;
  }
}

function headers(apiKey, json) {
  const h = {};
  if (json) h["Content-Type"] = "application/json";
  if (apiKey) h.Authorization = `Bearer ${apiKey}`;
  return h;
}

// OpenAI's {"error": {"message", "type", "code"}}, or whatever text came instead.
function errorFrom(payload, status) {
  const e = payload?.error;
  if (e && typeof e === "object") {
    return new ApiError(String(e.message ?? "unknown error"), { status, type: String(e.type ?? ""), code: String(e.code ?? "") });
  }
  if (typeof e === "string") return new ApiError(e, { status });
  return null;
}

async function responseError(res) {
  const text = await res.text().catch(() => "");
  let payload = null;
  try { payload = JSON.parse(text); } catch { /* not JSON */ }
  const detail = errorFrom(payload, res.status);
  if (detail) return detail;
  const body = text.trim().slice(0, 300);
  return new ApiError(body || res.statusText || "request failed", { status: res.status });
}

async function send(url, init) {
  try {
    return await fetch(url, init);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(`cannot reach the server (${err.message})`);
  }
}

// The first model the server lists: GET /v1/models -> data[0]: {id, images, audio} (whether it
// takes them, from gemlet's input_modalities; false when the server does not say).
export async function firstModel({ apiKey, signal } = {}) {
  const res = await send("v1/models", { headers: headers(apiKey, false), signal });
  if (!res.ok) throw await responseError(res);
  const list = await res.json();
  const model = list?.data?.[0];
  if (!model) return { id: null, images: false, audio: false };
  const modalities = Array.isArray(model.input_modalities) ? model.input_modalities : [];
  return { id: model.id ?? null, images: modalities.includes("image"), audio: modalities.includes("audio") };
}

// POSTs a streaming chat completion and yields {content, reasoning, finish, usage} per chunk (each
// part only when present). Throws ApiError for an HTTP error or an error event in the stream, and
// the fetch's AbortError when signal aborts.
export async function* streamChat(body, { apiKey, signal } = {}) {
  const res = await send("v1/chat/completions", {
    method: "POST",
    headers: headers(apiKey, true),
    body: JSON.stringify(body),
    signal,
  });
  if (!res.ok) throw await responseError(res);
  if (!(res.headers.get("Content-Type") ?? "").includes("text/event-stream")) {
    // A server that answered all at once.
    const whole = await res.json();
    const error = errorFrom(whole, res.status);
    if (error) throw error;
    const choice = whole?.choices?.[0];
    yield {
      content: choice?.message?.content ?? "",
      reasoning: choice?.message?.reasoning_content ?? "",
      finish: choice?.finish_reason ?? null,
      usage: whole?.usage ?? null,
    };
    return;
  }
  for await (const data of sseEvents(res.body)) {
    if (data === "[DONE]") return;
    let chunk;
    try {
      chunk = JSON.parse(data);
    } catch {
      throw new ApiError(`the server sent an event that is not JSON: ${data.slice(0, 120)}`);
    }
    const error = errorFrom(chunk, 0);
    if (error) throw error;
    const choice = chunk?.choices?.[0];
    const delta = choice?.delta ?? {};
    yield {
      content: typeof delta.content === "string" ? delta.content : "",
      reasoning: typeof delta.reasoning_content === "string" ? delta.reasoning_content : "",
      finish: choice?.finish_reason ?? null,
      usage: chunk?.usage ?? null,
    };
  }
}
