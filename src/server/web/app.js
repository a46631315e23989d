// app.js: the chat page: the conversation, the composer (text, photos and clips), the settings, and
// answers streamed into the message list as they arrive.
import { canRecord, readClip, startRecording } from "./audio.js";
import { ApiError, firstModel, streamChat } from "./client.js";
import { updateMarkdown } from "./markdown.js";

const $ = (id) => document.getElementById(id);
const ui = {
  messages: $("messages"), composer: $("composer"), input: $("input"), send: $("send"),
  stop: $("stop"), newChat: $("new-chat"), model: $("model"), settingsToggle: $("settings-toggle"),
  settings: $("settings"), apiKey: $("api-key"), system: $("system-prompt"),
  temperature: $("temperature"), maxTokens: $("max-tokens"),
  attach: $("attach"), imageInput: $("image-input"), attachments: $("attachments"),
  attachAudio: $("attach-audio"), audioInput: $("audio-input"), record: $("record"),
};

const SETTINGS_KEY = "gemlet.chat.settings";
const RENDER_INTERVAL_MS = 50; // re-render the streaming answer at most this often

const chat = {
  history: [],       // [{role, content}] of this chat: no system prompt, no reasoning
  controller: null,  // aborts the answer streaming now
  generation: 0,     // New chat bumps it, so an answer still arriving stays out of the next chat
  model: null,
  takesImages: null, // from /v1/models: true, false, or null (not known)
  modelReady: null,  // the pending GET /v1/models
  photos: [],        // attached to the next message: [{name, url (blob:, the thumbnail), dataUrl}]
  photoUrls: [],     // the blob: URLs of this chat's sent photos and clips, let go by New chat
  takesAudio: null,  // from /v1/models, as takesImages
  clips: [],         // attached to the next message: [{name, url (blob:, the player), blob, data (base64), format}]
  stopRecording: null, // while the microphone records: ends it, resolves with the clip
};

// ---- settings ----

function loadSettings() {
  let saved = {};
  try { saved = JSON.parse(localStorage.getItem(SETTINGS_KEY) ?? "{}") ?? {}; } catch { /* none */ }
  ui.apiKey.value = saved.apiKey ?? "";
  ui.system.value = saved.system ?? "";
  ui.temperature.value = saved.temperature ?? "";
  ui.maxTokens.value = saved.maxTokens ?? "";
}

function saveSettings() {
  const settings = { apiKey: ui.apiKey.value, system: ui.system.value,
    temperature: ui.temperature.value, maxTokens: ui.maxTokens.value };
  try { localStorage.setItem(SETTINGS_KEY, JSON.stringify(settings)); } catch { /* storage off */ }
}

function showSettings(open, focus) {
  ui.settings.hidden = !open;
  ui.settingsToggle.setAttribute("aria-expanded", String(open));
  if (open && focus) focus.focus();
}

// ---- messages ----

function div(className, text) {
  const node = document.createElement("div");
  node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// CJK text gets its own lang, so the browser picks Chinese (Japanese, Korean) glyphs and line
// breaking for it; a few CJK words in an English answer do not count.
function setLang(node, text) {
  const sample = text.slice(0, 4000).replace(/\s/g, "");
  const cjk = (sample.match(/[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]/g) ?? []).length;
  if (cjk < 2 || cjk < sample.length / 5) { node.removeAttribute("lang"); return; }
  node.lang = /[\u3040-\u30ff]/.test(sample) ? "ja" : /[\uac00-\ud7af]/.test(sample) ? "ko" : "zh";
}

function addMessage(node) {
  ui.messages.append(node);
  return node;
}

function thumbnail(photo) {
  const img = document.createElement("img");
  img.className = "thumb";
  img.src = photo.url;
  img.alt = photo.name || "photo";
  return img;
}

function player(clip) {
  const audio = document.createElement("audio");
  audio.className = "clip";
  audio.controls = true;
  audio.preload = "metadata";
  audio.src = clip.url;
  audio.title = clip.name || "clip";
  return audio;
}

function addUserMessage(text, photos = [], clips = []) {
  const node = div("msg user");
  if (photos.length) {
    const strip = div("photos");
    strip.append(...photos.map(thumbnail));
    node.append(strip);
  }
  if (clips.length) {
    const strip = div("clips");
    strip.append(...clips.map(player));
    node.append(strip);
  }
  if (text || (!photos.length && !clips.length)) {
    const body = div("body", text);
    setLang(body, text);
    node.append(body);
  }
  return addMessage(node);
}

function addAssistantMessage() {
  const node = div("msg assistant");
  const thinking = document.createElement("details"); // reasoning: collapsed, apart from the answer
  thinking.className = "thinking";
  thinking.hidden = true;
  const summary = document.createElement("summary");
  summary.textContent = "Thinking…";
  const thoughts = div("thoughts markdown");
  thinking.append(summary, thoughts);
  const answer = div("answer markdown");
  const meta = div("meta");
  node.append(thinking, answer, meta);
  addMessage(node);
  return { node, thinking, summary, thoughts, answer, meta };
}

function describe(err) {
  if (err instanceof ApiError) {
    if (err.status === 401) return `The server needs an API key (HTTP 401: ${err.message}). Enter it under Settings and send again.`;
    const kind = err.type ? ` (${err.type})` : "";
    return err.status ? `HTTP ${err.status}${kind}: ${err.message}` : `Error${kind}: ${err.message}`;
  }
  return `Error: ${err?.message ?? String(err)}`;
}

function addError(err) {
  const node = div("msg error", describe(err));
  node.setAttribute("role", "alert");
  return addMessage(node);
}

const nearBottom = () => ui.messages.scrollHeight - ui.messages.scrollTop - ui.messages.clientHeight < 48;
const scrollDown = () => { ui.messages.scrollTop = ui.messages.scrollHeight; };

// ---- photos ----

// A file the browser can name as an image (HEIC from a phone may come with no type).
const isImage = (file) => file.type.startsWith("image/") || /\.(heic|heif)$/i.test(file.name);

function readDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

// The tray: each photo's thumbnail and each clip's player, with a button that removes it.
function renderPhotos() {
  const item = (thing, view, what, drop) => {
    const node = div(`attachment ${what}`);
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "remove";
    remove.textContent = "×";
    remove.title = `Remove ${thing.name || `the ${what}`}`;
    remove.setAttribute("aria-label", remove.title);
    remove.addEventListener("click", () => {
      drop();
      URL.revokeObjectURL(thing.url);
      renderPhotos();
      ui.input.focus();
    });
    node.append(view, remove);
    return node;
  };
  ui.attachments.replaceChildren(
    ...chat.photos.map((photo) => item(photo, thumbnail(photo), "photo", () => { chat.photos = chat.photos.filter((p) => p !== photo); })),
    ...chat.clips.map((clip) => item(clip, player(clip), "clip", () => { chat.clips = chat.clips.filter((c) => c !== clip); })));
  ui.attachments.hidden = chat.photos.length === 0 && chat.clips.length === 0;
}

// Attaches the image files among `files` to the next message: a thumbnail each, and the bytes as a
// data URL (the server reads only inline images: nothing it is sent makes it reach out).
async function attachPhotos(files) {
  const images = [...files].filter(isImage);
  if (!images.length) return;
  if (chat.takesImages === false) {
    addError(new Error("this model takes text only: the server was started without its vision tower (gemlet serve --mmproj FILE)"));
    scrollDown();
    return;
  }
  for (const file of images) {
    let dataUrl;
    try {
      dataUrl = await readDataUrl(file);
    } catch (err) {
      addError(new Error(`cannot read ${file.name}: ${err?.message ?? err}`));
      continue;
    }
    // The type as the server expects it: an image's, whatever the browser guessed.
    if (!/^data:image\//.test(dataUrl)) dataUrl = dataUrl.replace(/^data:[^;,]*/, "data:image/heic");
    chat.photos.push({ name: file.name, url: URL.createObjectURL(file), dataUrl });
  }
  renderPhotos();
}

// ---- clips ----

const isAudio = (file) => file.type.startsWith("audio/") || /\.(wav|mp3|flac|ogg|oga|opus|m4a|aac|webm)$/i.test(file.name);

function refuseAudio() {
  if (chat.takesAudio !== false) return false;
  addError(new Error("this model does not hear: the server has no audio tower (Gemma 4 E2B and E4B hear, served with their mmproj file)"));
  scrollDown();
  return true;
}

function addClip(clip) {
  chat.clips.push({ ...clip, url: URL.createObjectURL(clip.blob) });
  renderPhotos();
}

// Attaches the audio files among `files` to the next message: a player each, and the bytes as
// base64 for an input_audio part (what the server cannot read, the browser turns into WAV).
async function attachClips(files) {
  const clips = [...files].filter(isAudio);
  if (!clips.length || refuseAudio()) return;
  for (const file of clips) {
    try {
      addClip(await readClip(file));
    } catch (err) {
      addError(new Error(`cannot read ${file.name}: ${err?.message ?? err}`));
      scrollDown();
    }
  }
}

// Record starts the microphone; pressed again, the recording joins the tray as a clip.
async function toggleRecording() {
  if (chat.stopRecording) {
    const stop = chat.stopRecording;
    chat.stopRecording = null;
    showRecording(false);
    try {
      addClip(await stop());
    } catch (err) {
      addError(new Error(`the recording failed: ${err?.message ?? err}`));
    }
    ui.input.focus();
    return;
  }
  if (refuseAudio()) return;
  try {
    chat.stopRecording = await startRecording();
    showRecording(true);
  } catch (err) {
    addError(new Error(`cannot record: ${err?.message ?? err}`));
    scrollDown();
  }
}

function showRecording(on) {
  ui.record.setAttribute("aria-pressed", String(on));
  ui.record.textContent = on ? "Stop recording" : "Record";
  ui.record.classList.toggle("recording", on);
}

// Photos and clips among dropped or pasted files.
function attachFiles(files) {
  attachPhotos(files);
  attachClips(files);
}

// ---- sending ----

function requestBody() {
  const messages = [];
  const system = ui.system.value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...chat.history);
  const body = { model: chat.model ?? "gemlet", messages, stream: true, stream_options: { include_usage: true } };
  const temperature = Number.parseFloat(ui.temperature.value);
  if (Number.isFinite(temperature)) body.temperature = temperature;
  const maxTokens = Number.parseInt(ui.maxTokens.value, 10);
  if (maxTokens > 0) body.max_tokens = maxTokens;
  return body;
}

function setStreaming(on) {
  ui.send.hidden = on;
  ui.stop.hidden = !on;
  ui.messages.setAttribute("aria-busy", String(on));
}

function metaLine({ stopped, finish, usage, seconds }) {
  const parts = [];
  if (stopped) parts.push("Stopped");
  else if (finish === "length") parts.push("Cut off at the token limit");
  const tokens = usage?.completion_tokens;
  if (Number.isFinite(tokens)) {
    parts.push(`${tokens} tokens`);
    if (seconds > 0 && tokens > 1) parts.push(`${(tokens / seconds).toFixed(1)} tokens/s`);
  }
  return parts.join(" · ");
}

async function send() {
  const text = ui.input.value;
  const photos = chat.photos;
  const clips = chat.clips;
  if ((!text.trim() && !photos.length && !clips.length) || chat.controller) return;
  ui.input.value = "";
  fitInput();
  chat.photos = [];
  chat.clips = [];
  renderPhotos();
  chat.photoUrls.push(...photos.map((p) => p.url), ...clips.map((c) => c.url));
  const generation = chat.generation;
  const question = addUserMessage(text, photos, clips);
  // With photos or clips, OpenAI's content parts: the photos, the clips, then the text (as Ollama
  // places images).
  const asked = !photos.length && !clips.length ? text : [
    ...photos.map((p) => ({ type: "image_url", image_url: { url: p.dataUrl } })),
    ...clips.map((c) => ({ type: "input_audio", input_audio: { data: c.data, format: c.format } })),
    ...(text.trim() ? [{ type: "text", text }] : []),
  ];
  chat.history.push({ role: "user", content: asked });
  const view = addAssistantMessage();
  scrollDown();
  const controller = new AbortController();
  chat.controller = controller;
  setStreaming(true);

  let content = "";
  let reasoning = "";
  let finish = null;
  let usage = null;
  let failure = null;
  let stopped = false;
  let firstToken = 0;
  let timer = 0;
  const render = () => {
    timer = 0;
    const follow = nearBottom();
    if (reasoning) {
      view.thinking.hidden = false;
      updateMarkdown(view.thoughts, reasoning);
      setLang(view.thoughts, reasoning);
    }
    updateMarkdown(view.answer, content);
    setLang(view.answer, content);
    if (follow) scrollDown();
  };

  try {
    await chat.modelReady;
    const options = { apiKey: ui.apiKey.value.trim(), signal: controller.signal };
    for await (const part of streamChat(requestBody(), options)) {
      if (!firstToken && (part.content || part.reasoning)) firstToken = performance.now();
      reasoning += part.reasoning;
      content += part.content;
      if (content) view.summary.textContent = "Thoughts";
      finish = part.finish ?? finish;
      usage = part.usage ?? usage;
      if (!timer) timer = setTimeout(render, RENDER_INTERVAL_MS);
    }
  } catch (err) {
    if (err.name === "AbortError") stopped = true;
    else failure = err;
  }
  clearTimeout(timer);
  if (generation !== chat.generation) return; // New chat came first: this answer belongs nowhere
  render();
  chat.controller = null;
  setStreaming(false);
  view.summary.textContent = "Thoughts";
  const seconds = firstToken ? (performance.now() - firstToken) / 1000 : 0;
  view.meta.textContent = metaLine({ stopped, finish, usage, seconds });

  if (content) {
    chat.history.push({ role: "assistant", content }); // a stopped answer keeps what it had
    if (ui.model.classList.contains("problem")) chat.modelReady = loadModel(); // it works now
  } else {
    // No answer: the question leaves the history (two user turns in a row would follow) and
    // goes back into the input box, to send again.
    chat.history.pop();
    question.classList.add("unanswered");
    if (!reasoning) view.node.remove();
    if (!ui.input.value) { ui.input.value = text; fitInput(); }
    if (!chat.photos.length && photos.length) {
      chat.photos = photos.map((p) => ({ ...p, url: URL.createObjectURL(dataUrlBlob(p.dataUrl)) }));
      renderPhotos();
    }
    if (!chat.clips.length && clips.length) {
      chat.clips = clips.map((c) => ({ ...c, url: URL.createObjectURL(c.blob) }));
      renderPhotos();
    }
  }
  if (failure) {
    addError(failure);
    if (failure.status === 401) showSettings(true, ui.apiKey);
  }
  scrollDown();
  if (!failure || failure.status !== 401) ui.input.focus();
}

// The bytes of a data URL, for a new thumbnail of a photo sent back to the composer.
function dataUrlBlob(dataUrl) {
  const [head, data] = dataUrl.split(",", 2);
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  return new Blob([bytes], { type: head.slice(5).split(";")[0] });
}

function stop() {
  chat.controller?.abort();
}

function newChat() {
  chat.generation++;
  stop();
  chat.controller = null;
  setStreaming(false);
  chat.history = [];
  ui.messages.replaceChildren();
  for (const url of chat.photoUrls) URL.revokeObjectURL(url);
  chat.photoUrls = [];
  if (chat.stopRecording) toggleRecording(); // a recording under way joins the new chat's tray
  ui.input.focus();
}

async function loadModel() {
  try {
    const model = await firstModel({ apiKey: ui.apiKey.value.trim() });
    chat.model = model.id;
    chat.takesImages = model.images;
    ui.attach.hidden = !model.images;
    chat.takesAudio = model.audio;
    ui.attachAudio.hidden = !model.audio;
    ui.record.hidden = !model.audio || !canRecord();
    ui.model.textContent = chat.model ?? "";
    ui.model.title = "The model the server runs";
    ui.model.classList.remove("problem");
  } catch (err) {
    ui.model.textContent = err.status === 401 ? "API key needed" : "no model list";
    ui.model.title = describe(err);
    ui.model.classList.add("problem");
    if (err.status === 401) showSettings(true, ui.apiKey);
  }
}

function fitInput() {
  ui.input.style.height = "auto";
  ui.input.style.height = `${Math.min(ui.input.scrollHeight + 2, 240)}px`;
}

// ---- wiring ----

ui.input.addEventListener("keydown", (event) => {
  if (event.key !== "Enter" || event.shiftKey) return;
  // An input method (Chinese pinyin, Japanese kana) commits its candidate with Enter: that Enter
  // is the IME's, not a send. Chrome marks it isComposing; Safari sends keyCode 229 after the end.
  if (event.isComposing || event.keyCode === 229) return;
  event.preventDefault();
  send();
});
ui.input.addEventListener("input", fitInput);
ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
ui.stop.addEventListener("click", stop);
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && !event.isComposing && chat.controller) stop(); // not an IME's cancel
});
ui.newChat.addEventListener("click", newChat);
ui.attach.addEventListener("click", () => ui.imageInput.click());
ui.imageInput.addEventListener("change", async () => {
  await attachPhotos(ui.imageInput.files);
  ui.imageInput.value = ""; // the same file again is a new attachment
  ui.input.focus();
});
ui.attachAudio.addEventListener("click", () => ui.audioInput.click());
ui.audioInput.addEventListener("change", async () => {
  await attachClips(ui.audioInput.files);
  ui.audioInput.value = "";
  ui.input.focus();
});
ui.record.addEventListener("click", toggleRecording);
// Photos and clips dropped anywhere on the page, or pasted into the message box.
const carriesFiles = (event) => [...(event.dataTransfer?.types ?? [])].includes("Files");
document.addEventListener("dragover", (event) => {
  if (!carriesFiles(event)) return;
  event.preventDefault();
  document.body.classList.add("dropping");
});
document.addEventListener("dragleave", (event) => {
  if (event.relatedTarget === null) document.body.classList.remove("dropping");
});
document.addEventListener("drop", (event) => {
  document.body.classList.remove("dropping");
  if (!carriesFiles(event)) return;
  event.preventDefault(); // else the browser opens the file in place of the page
  attachFiles(event.dataTransfer.files);
});
ui.input.addEventListener("paste", (event) => {
  const files = [...(event.clipboardData?.files ?? [])].filter((file) => isImage(file) || isAudio(file));
  if (!files.length) return;
  event.preventDefault();
  attachFiles(files);
});
ui.settingsToggle.addEventListener("click", () => showSettings(ui.settings.hidden));
ui.settings.addEventListener("submit", (event) => event.preventDefault()); // Enter in a field: nothing to post
for (const field of [ui.apiKey, ui.system, ui.temperature, ui.maxTokens]) field.addEventListener("input", saveSettings);
ui.apiKey.addEventListener("change", () => { chat.modelReady = loadModel(); });

loadSettings();
chat.modelReady = loadModel();
ui.input.focus();
