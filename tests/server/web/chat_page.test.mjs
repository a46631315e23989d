// chat_page.test.mjs: the chat page of `gemlet serve` in headless Chromium: sending (English and
// Chinese, IME-safe Enter), streaming, Stop, New chat, settings, errors, reasoning, Markdown, maths,
// photos and clips (a file, and a recording from Chromium's fake microphone), and that model output
// can never run script.
//
//   node chat_page.test.mjs [--base-url URL] [--chromium PATH] [--only TEXT]
//
// Without --base-url it starts mock_server.mjs itself. Against another server, the checks that need
// scripted answers run only when that server is the mock (it answers GET /mock/state); the others
// (page load, a real answer streaming in, Stop, New chat, and the renderer on fixed inputs) run
// against anything that serves the page and the API. Exit 0 when every check passes.
import { existsSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startMockServer } from "./mock_server.mjs";

const puppeteer = (await import("puppeteer-core").catch(() => {
  console.error("chat_page.test: puppeteer-core is not installed: run `npm ci` in tests/server/web (run.sh does)");
  process.exit(2);
})).default;

function option(name) {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
}

const TEST_TIMEOUT_MS = 20000;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class Failure extends Error {}
function check(condition, message) {
  if (!condition) throw new Failure(message);
}
function checkEqual(actual, expected, what) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  check(a === e, `${what}: expected ${e}, got ${a}`);
}

// ---- the server ----

let baseUrl = option("--base-url")?.replace(/\/+$/, "");
let mockServer = null;
if (!baseUrl) {
  mockServer = await startMockServer();
  baseUrl = mockServer.url;
}
const isMock = (await fetch(`${baseUrl}/mock/state`).catch(() => null))?.ok === true;

async function mock(route, body) {
  const res = await fetch(`${baseUrl}${route}`, body === undefined ? {} : { method: "POST", body: JSON.stringify(body) });
  check(res.ok, `mock ${route}: HTTP ${res.status}`);
  return res.json();
}
const script = (answer) => mock("/mock/next", answer);
const mockRequests = async () => (await mock("/mock/state")).requests;
// A scripted answer made of pieces of text, delayMs apart.
const pieces = (text, size, delayMs = 5) => ({ chunks: text.match(new RegExp(`[\\s\\S]{1,${size}}`, "gu")).map((content) => ({ content })), delayMs });

// ---- the browser ----

const chromium = option("--chromium") ?? process.env.CHROMIUM ?? "/usr/bin/chromium";
if (!existsSync(chromium)) {
  console.error(`chat_page.test: no Chromium at ${chromium} (pass --chromium PATH)`);
  process.exit(2);
}
const args = ["--disable-dev-shm-usage", "--disable-gpu", "--no-first-run", "--lang=en-US",
  // A microphone that plays a beep, granted without asking: the Record button's test.
  "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream"];
if (process.getuid?.() === 0) args.push("--no-sandbox"); // Chromium refuses to sandbox as root
// Over a pipe, not the DevTools URL Chromium prints: no stdout to parse. On a loaded CI machine (two
// cores, sanitizer tests beside it) a cold start has taken over puppeteer's default 30 s, so wait
// longer and try a second time before failing.
async function launchBrowser() {
  for (let attempt = 1; ; attempt++) {
    const started = Date.now();
    try {
      return await puppeteer.launch({ executablePath: chromium, headless: true, args, pipe: true, timeout: 120_000, protocolTimeout: 300_000 });
    } catch (err) {
      console.error(`chat_page.test: Chromium did not start (attempt ${attempt}, ${Date.now() - started} ms): ${err.message}`);
      if (attempt === 2) throw err;
    }
  }
}
const browser = await launchBrowser();

// A fresh profile (no localStorage from an earlier test) with the page loaded and its model asked.
async function openPage({ width = 1000, height = 800, allowHttpErrors = false } = {}) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  await page.setViewport({ width, height });
  const problems = [];
  page.on("console", (msg) => {
    // A fetch that gets a 4xx/5xx is logged as "Failed to load resource": expected in error tests.
    if (allowHttpErrors && /Failed to load resource: the server responded with a status of/.test(msg.text())) return;
    if (msg.type() === "error" || msg.type() === "warn") problems.push(`console ${msg.type()}: ${msg.text()}`);
  });
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  page.on("requestfailed", (req) => {
    if (!/\/v1\/chat\/completions$/.test(req.url())) problems.push(`request failed: ${req.url()} ${req.failure()?.errorText}`);
  });
  const bodies = []; // the JSON bodies of the chat requests, as the browser sent them
  page.on("request", (req) => {
    if (req.url().endsWith("/v1/chat/completions") && req.method() === "POST") bodies.push(JSON.parse(req.postData()));
  });
  const response = await page.goto(`${baseUrl}/`, { waitUntil: "load" });
  await page.waitForFunction(() => document.getElementById("model").textContent !== "");
  // A real model answers at its own pace: keep its answers short.
  if (!isMock) await setField(page, "#max-tokens", "16");
  return { page, context, problems, bodies, response };
}

// Sets a settings field as typing would (its input event saves it).
const setField = (page, selector, value) => page.$eval(selector, (el, v) => {
  el.value = v;
  el.dispatchEvent(new Event("input", { bubbles: true }));
}, value);

async function sendMessage(page, text) {
  await page.focus("#input");
  // ASCII as key presses; anything else the way an IME commits it (Input.insertText).
  if (/^[\x20-\x7e]*$/.test(text)) await page.keyboard.type(text);
  else await page.keyboard.sendCharacter(text);
  await page.keyboard.press("Enter");
}

const idle = (page, timeout = 15000) => page.waitForFunction(
  () => document.getElementById("stop").hidden && !document.getElementById("send").hidden, { timeout });

// Sends text and waits for the whole answer (or error).
async function sendAndWait(page, text) {
  const asked = await page.$$eval(".msg.user", (els) => els.length);
  await sendMessage(page, text);
  await page.waitForFunction((n) => document.querySelectorAll(".msg.user").length > n, { timeout: 5000 }, asked);
  await idle(page);
}

const lastAnswer = (page) => page.evaluate(() => [...document.querySelectorAll(".msg.assistant .answer")].pop()?.textContent ?? null);

// Records every distinct length of the newest answer's text, as the page changes it.
function watchGrowth(page) {
  return page.evaluate(() => {
    window.__growth = [];
    new MutationObserver(() => {
      const message = [...document.querySelectorAll(".msg.assistant")].pop();
      const n = message ? message.querySelector(".answer").textContent.length + message.querySelector(".thoughts").textContent.length : 0;
      if (window.__growth[window.__growth.length - 1] !== n) window.__growth.push(n);
    }).observe(document.getElementById("messages"), { subtree: true, childList: true, characterData: true });
  });
}

// What the messages hold that must never come from model output.
function dangerIn(page) {
  return page.evaluate(() => {
    const root = document.getElementById("messages");
    const found = [];
    for (const node of root.querySelectorAll("*")) {
      const tag = node.localName;
      if (["img", "script", "svg", "iframe", "object", "embed", "style", "link", "meta", "form", "input", "video", "audio", "base"].includes(tag)) found.push(`<${tag}>`);
      for (const attr of node.attributes) {
        if (/^on/i.test(attr.name) || (attr.name === "style")) found.push(`${tag}[${attr.name}]`);
        if (["href", "src", "xlink:href", "action", "formaction"].includes(attr.name) && !/^(https?:|mailto:)/i.test(attr.value)) found.push(`${tag}[${attr.name}=${attr.value}]`);
      }
    }
    return { found, xss: window.__xss };
  });
}

// ---- the tests ----

const tests = [];
const test = (name, fn, { mockOnly = false } = {}) => tests.push({ name, fn, mockOnly });

test("the page loads with no console errors, its CSP, no inline script, and the model name", async () => {
  const { page, problems, response } = await openPage();
  await sleep(300);
  checkEqual(problems, [], "problems while loading");
  checkEqual(await page.title(), "gemlet", "title");
  const facts = await page.evaluate(() => ({
    csp: document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.content ?? "",
    inlineScripts: document.querySelectorAll("script:not([src])").length,
    styleAttrs: document.querySelectorAll("[style]").length,
    model: document.getElementById("model").textContent,
    focused: document.activeElement?.id,
  }));
  check(/script-src 'self'/.test(facts.csp) && !/unsafe-inline/.test(facts.csp), `CSP meta: ${facts.csp}`);
  checkEqual(facts.inlineScripts, 0, "inline scripts");
  checkEqual(facts.focused, "input", "focused element");
  if (isMock) {
    checkEqual(facts.model, "mock-gemma", "model name from /v1/models");
    check(/frame-ancestors 'none'/.test(response.headers()["content-security-policy"] ?? ""), "the CSP header");
  } else {
    check(facts.model && !/needed|no model/.test(facts.model), `model name: ${facts.model}`);
  }
});

test("English: Enter sends the message and the answer's tokens appear as they arrive", async () => {
  const words = "Streaming works one token at a time, and the text grows while the server is still sending. ".split(/(?<= )/);
  await script({ chunks: words.map((content) => ({ content })), delayMs: 60 });
  const { page, problems, bodies } = await openPage();
  await watchGrowth(page);
  await sendMessage(page, "Hello there");
  await page.waitForFunction(() => ([...document.querySelectorAll(".msg.assistant .answer")].pop()?.textContent ?? "").length > 0, { timeout: 5000 });
  const requests = await mockRequests();
  check(!requests[requests.length - 1].finished, "the first tokens were shown only after the stream had finished");
  checkEqual(await page.$eval("#input", (el) => el.value), "", "the input after sending");
  check(!(await page.$eval("#stop", (el) => el.hidden)), "Stop is not shown while streaming");
  await idle(page);
  const growth = await page.evaluate(() => window.__growth);
  check(growth.filter((n) => n > 0).length >= 5, `the answer did not grow step by step: lengths ${JSON.stringify(growth)}`);
  checkEqual(await lastAnswer(page), words.join("").trim(), "the answer");
  checkEqual(bodies.length, 1, "chat requests");
  const body = bodies[0];
  checkEqual(body.messages, [{ role: "user", content: "Hello there" }], "messages sent");
  checkEqual([body.model, body.stream, body.stream_options], ["mock-gemma", true, { include_usage: true }], "model, stream, stream_options");
  check(/tokens/.test(await page.$eval(".msg.assistant .meta", (el) => el.textContent)), "no usage line under the answer");
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

test("Chinese: 你好 goes out intact, IME Enter does not send, Shift+Enter adds a line", async () => {
  const question = "你好，请解释一下勾股定理";
  const answer = "勾股定理：在直角三角形中，两条直角边的平方和等于斜边的平方，即 $a^2+b^2=c^2$。例如边长为三、四、五的三角形。";
  await script(pieces(answer, 3, 15)); // the mock also splits each event inside UTF-8 characters
  const { page, problems, bodies } = await openPage();
  await page.focus("#input");
  await page.keyboard.sendCharacter(question);
  // An input method committing a candidate: keydown Enter with isComposing, or keyCode 229.
  await page.evaluate(() => {
    const input = document.getElementById("input");
    input.dispatchEvent(new CompositionEvent("compositionstart", { data: "" }));
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", code: "Enter", isComposing: true, bubbles: true, cancelable: true }));
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", code: "Enter", keyCode: 229, bubbles: true, cancelable: true }));
    input.dispatchEvent(new CompositionEvent("compositionend", { data: "" }));
  });
  await page.keyboard.down("Shift");
  await page.keyboard.press("Enter");
  await page.keyboard.up("Shift");
  await sleep(300);
  checkEqual(bodies.length, 0, "requests sent by IME Enter or Shift+Enter");
  checkEqual(await page.$eval("#input", (el) => el.value), `${question}\n`, "the input after Shift+Enter");
  await page.keyboard.press("Backspace");
  await page.keyboard.press("Enter");
  await idle(page);
  checkEqual(bodies.length, 1, "requests after Enter");
  checkEqual(bodies[0].messages, [{ role: "user", content: question }], "the Chinese message sent");
  checkEqual(await page.$eval(".msg.user .body", (el) => [el.textContent, el.lang]), [question, "zh"], "the question shown");
  const shown = await page.evaluate(() => {
    const a = document.querySelector(".msg.assistant .answer");
    return { text: a.textContent, lang: a.lang, maths: a.querySelectorAll("math msup").length, mathFont: getComputedStyle(a.querySelector("math")).fontFamily };
  });
  check(shown.text.startsWith("勾股定理：在直角三角形中") && shown.text.endsWith("例如边长为三、四、五的三角形。"), `the Chinese answer: ${shown.text}`);
  check(!shown.text.includes("\ufffd"), "a UTF-8 character split between chunks came out broken");
  checkEqual([shown.lang, shown.maths], ["zh", 3], "lang and a^2+b^2=c^2 as <msup>");
  check(/Math/.test(shown.mathFont), `maths in a Chinese answer lost its maths font: ${shown.mathFont}`);
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

test("Stop aborts the request, keeps the partial answer, and the next turn carries it", async () => {
  const words = Array.from({ length: 60 }, (_, i) => `word${i} `);
  await script({ chunks: words.map((content) => ({ content })), delayMs: 80 });
  const { page, problems, bodies } = await openPage();
  await sendMessage(page, "Tell me a long story");
  await page.waitForFunction(() => ([...document.querySelectorAll(".msg.assistant .answer")].pop()?.textContent ?? "").includes("word3"), { timeout: 5000 });
  await page.click("#stop");
  await idle(page, 3000);
  let aborted = false;
  for (let i = 0; i < 40 && !aborted; i++) {
    aborted = (await mockRequests()).pop().aborted;
    if (!aborted) await sleep(50);
  }
  check(aborted, "the mock server did not see the request aborted");
  const partial = await lastAnswer(page);
  check(partial.startsWith("word0 word1 word2 word3") && !partial.includes("word59"), `the partial answer: ${partial}`);
  check(/Stopped/.test(await page.$eval(".msg.assistant .meta", (el) => el.textContent)), "no 'Stopped' note");
  await sleep(300);
  checkEqual(await lastAnswer(page), partial, "the answer after Stop (it must not keep growing)");
  await script(pieces("Fine.", 5));
  await sendAndWait(page, "ok");
  const messages = bodies[1].messages;
  checkEqual(messages.map((m) => m.role), ["user", "assistant", "user"], "roles of the next request");
  checkEqual(messages[1].content.trim(), partial.trim(), "the partial answer in the history");
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

test("New chat clears the list and the next request has only the new message", async () => {
  const { page, problems, bodies } = await openPage();
  await sendAndWait(page, "first question");
  await sendAndWait(page, "second question");
  checkEqual(bodies[1].messages.length, 3, "messages of the second request");
  await page.click("#new-chat");
  checkEqual(await page.$$eval("#messages > *", (els) => els.length), 0, "messages after New chat");
  await sendAndWait(page, "a fresh start");
  checkEqual(bodies[2].messages, [{ role: "user", content: "a fresh start" }], "messages after New chat");
  checkEqual(await page.$$eval("#messages .msg", (els) => els.length), 2, "messages shown");
  checkEqual(problems, [], "problems");
});

test("New chat while streaming drops the old answer", async () => {
  await script({ chunks: Array.from({ length: 40 }, (_, i) => ({ content: `old${i} ` })), delayMs: 60 });
  const { page, problems, bodies } = await openPage();
  await sendMessage(page, "slow one");
  await page.waitForFunction(() => (document.querySelector(".msg.assistant .answer")?.textContent ?? "").includes("old2"), { timeout: 5000 });
  await page.click("#new-chat");
  await script(pieces("new answer", 4));
  await sendAndWait(page, "quick one");
  await sleep(200);
  checkEqual(await page.$$eval("#messages .msg", (els) => els.map((el) => el.querySelector(".body, .answer").textContent)), ["quick one", "new answer"], "messages");
  checkEqual(bodies[1].messages, [{ role: "user", content: "quick one" }], "the request after New chat");
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

const MARKDOWN = [
  "## Pythagoras",
  "",
  "Some **bold**, *italic*, ~~gone~~ and `inline <b>code</b> with $x$` text. Prices: $5 and $10.",
  "",
  "- first item",
  "- second with [a link](https://example.com/a_b)",
  "  - nested item",
  "",
  "1. one",
  "2. two",
  "",
  "> quoted **text**",
  "",
  "```html",
  '<div class="x">a < b && c > d</div>',
  "<script>alert(1)</script>",
  "```",
  "",
  "| Side | Length |",
  "|:-----|-------:|",
  "| a    | 3      |",
  "| b    | 4      |",
  "",
  "---",
  "A bare link https://example.org/path. The end.",
].join("\n");

test("Markdown: heading, lists, quote, code block with <tags> intact and Copy, table, links", async () => {
  await script(pieces(MARKDOWN, 7, 5)); // streamed in pieces that cut through every construct
  const { page, problems, context } = await openPage();
  await context.overridePermissions(baseUrl, ["clipboard-read", "clipboard-write", "clipboard-sanitized-write"]);
  await sendAndWait(page, "markdown please");
  const r = await page.evaluate(() => {
    const a = document.querySelector(".msg.assistant .answer");
    const text = (sel) => [...a.querySelectorAll(sel)].map((el) => el.textContent);
    return {
      h2: text("h2"),
      strong: text(":scope > p strong"), em: text(":scope > p em"), del: text(":scope > p del"), inlineCode: text(":scope > p > code"),
      mathInCode: a.querySelectorAll("code math").length,
      priceMaths: [...a.querySelectorAll("p")].filter((p) => p.textContent.includes("Prices")).map((p) => p.querySelectorAll("math").length),
      ul: text(":scope > ul > li").length, nested: text("ul ul > li"), ol: text("ol > li"),
      quote: a.querySelector("blockquote strong")?.textContent,
      codeClass: a.querySelector("pre code")?.className, code: a.querySelector("pre code")?.textContent,
      th: text("th"), td: text("td"), align: [...a.querySelectorAll("tr:first-child td")].map((td) => td.className),
      links: [...a.querySelectorAll("a")].map((l) => [l.getAttribute("href"), l.rel, l.target, l.textContent]),
      hr: a.querySelectorAll("hr").length,
    };
  });
  checkEqual(r.h2, ["Pythagoras"], "heading");
  checkEqual([r.strong, r.em, r.del], [["bold"], ["italic"], ["gone"]], "bold, italic, strikethrough");
  checkEqual(r.inlineCode, ["inline <b>code</b> with $x$"], "inline code");
  checkEqual([r.mathInCode, r.priceMaths], [0, [0]], "maths inside code, maths from $5 and $10");
  checkEqual([r.ul, r.nested, r.ol], [2, ["nested item"], ["one", "two"]], "lists");
  checkEqual(r.quote, "text", "blockquote");
  checkEqual(r.codeClass, "language-html", "code block language class");
  checkEqual(r.code, '<div class="x">a < b && c > d</div>\n<script>alert(1)</script>', "code block text");
  checkEqual([r.th, r.td, r.align], [["Side", "Length"], ["a", "3", "b", "4"], ["align-left", "align-right"]], "table");
  checkEqual(r.links, [
    ["https://example.com/a_b", "noopener noreferrer", "_blank", "a link"],
    ["https://example.org/path", "noopener noreferrer", "_blank", "https://example.org/path"],
  ], "links");
  checkEqual(r.hr, 1, "rule");
  await page.click(".msg.assistant .copy");
  await page.waitForFunction(() => document.querySelector(".msg.assistant .copy").textContent === "Copied", { timeout: 2000 });
  checkEqual(await page.evaluate(() => navigator.clipboard.readText()), r.code, "copied text");
  checkEqual((await dangerIn(page)).found, [], "elements from the code block");
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

const MATHS = [
  "Inline $a^2+b^2=c^2$ and a half: $\\frac{1}{2}$, also \\(\\sqrt{x_1}\\).",
  "",
  "$$\\sum_{i=1}^{n} i = \\frac{n(n+1)}{2}$$",
  "",
  "\\[\\left( \\frac{\\alpha}{\\beta} \\right) \\leq \\infty \\quad \\text{面积} \\unknowncmd\\]",
  "",
  "$$",
  "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix} \\times \\lim_{x \\to 0} \\int_0^1 f(x)\\,dx",
  "$$",
].join("\n");

test("Maths: $...$, $$...$$, \\(...\\), \\[...\\] become <math> (fractions, roots, scripts, Greek, \\text)", async () => {
  await script(pieces(MATHS, 9, 5));
  const { page, problems } = await openPage();
  await sendAndWait(page, "maths please");
  const r = await page.evaluate(() => {
    const a = document.querySelector(".msg.assistant .answer");
    const maths = [...a.querySelectorAll("math")];
    return {
      count: maths.length,
      display: maths.map((m) => m.getAttribute("display") ?? "inline"),
      first: maths[0].querySelectorAll("msup").length,
      frac: maths[1].querySelector("mfrac")?.textContent,
      sqrt: maths[2].querySelector("msqrt msub")?.textContent,
      sum: maths[3].querySelector("munderover > mo")?.textContent,
      greek: [...maths[4].querySelectorAll("mi")].map((m) => m.textContent).join(""),
      fences: [...maths[4].querySelectorAll('mo[stretchy="true"]')].map((m) => m.textContent),
      texts: [...maths[4].querySelectorAll("mtext")].map((m) => m.textContent),
      leq: [...maths[4].querySelectorAll("mo")].some((m) => m.textContent === "≤"),
      cells: [...(maths[5]?.querySelectorAll("mtd") ?? [])].map((m) => m.textContent),
      lim: maths[5]?.querySelector("munder > mo")?.textContent,
      annotation: maths[1].querySelector('annotation[encoding="application/x-tex"]')?.textContent,
      width: maths[1].getBoundingClientRect().width,
    };
  });
  checkEqual(r.count, 6, "<math> elements");
  checkEqual(r.display, ["inline", "inline", "inline", "block", "block", "block"], "display");
  checkEqual([r.first, r.frac, r.sqrt, r.sum], [3, "12", "x1", "∑"], "a^2+b^2=c^2, \\frac{1}{2}, \\sqrt{x_1}, \\sum");
  checkEqual([r.greek, r.fences, r.leq], ["αβ∞", ["(", ")"], true], "Greek, \\left( \\right), \\leq");
  checkEqual(r.texts, ["面积", "\\unknowncmd"], "\\text{} and an unknown command shown as text");
  checkEqual([r.cells, r.lim], [["1", "2", "3", "4"], "lim"], "pmatrix and \\lim");
  checkEqual(r.annotation, "\\frac{1}{2}", "TeX annotation");
  check(r.width > 4, "MathML is not laid out (zero width)");
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

const XSS = [
  '<img src=x onerror="window.__xss=1">',
  "<script>window.__xss=2</script>",
  "[link](javascript:alert(1)) and [other](JaVaScRiPt:window.__xss=3) and [data](data:text/html,<script>window.__xss=4</script>)",
  "<javascript:alert(1)> <a href=\"javascript:window.__xss=5\">raw a</a>",
  '<svg onload="window.__xss=6"><circle r=1></svg>',
  '<iframe src="javascript:window.__xss=7"></iframe> <style>body{display:none}</style>',
  "![pic](javascript:window.__xss=8) ![pic2](https://example.com/x.png)",
  '$<img src=x onerror="window.__xss=9">$ and $\\text{<script>window.__xss=10</script>}$ and $\\href{javascript:alert(1)}{x}$',
  "`<img src=x onerror=window.__xss=11>`",
  ["```html", '<svg onload="window.__xss=12"></svg>', "```"].join("\n"),
  ["| <img src=x onerror=window.__xss=13> | b |", "|---|---|", "| <script>window.__xss=14</script> | c |"].join("\n"),
  "&lt;img src=x onerror=window.__xss=15&gt; &#60;script&#62;",
].join("\n\n");

test("XSS: HTML, javascript: links and tricks in text, maths, code, tables and reasoning stay text", async () => {
  await script({ chunks: [{ reasoning: XSS }, ...pieces(XSS, 11, 3).chunks], delayMs: 3 });
  const { page, problems } = await openPage();
  await sendAndWait(page, '<img src=x onerror="window.__xss=99"> from the user');
  await page.click(".msg.assistant .thinking summary"); // open the reasoning too
  await sleep(500); // time for any onerror/onload to fire
  const { found, xss } = await dangerIn(page);
  checkEqual(found, [], "dangerous elements or attributes in the messages");
  checkEqual(xss, undefined, "window.__xss");
  const r = await page.evaluate(() => {
    const a = document.querySelector(".msg.assistant .answer");
    return {
      text: a.textContent,
      user: document.querySelector(".msg.user").textContent,
      links: [...a.querySelectorAll("a")].map((l) => l.getAttribute("href")),
      unsafe: [...a.querySelectorAll(".unsafe-link")].map((s) => s.textContent),
      mathText: [...a.querySelectorAll("math")].map((m) => m.textContent),
      cells: [...a.querySelectorAll("th, td")].map((c) => c.textContent),
    };
  });
  for (const visible of ['<img src=x onerror="window.__xss=1">', "<script>window.__xss=2</script>", '<svg onload="window.__xss=6">', "<img src=x onerror=window.__xss=11>", "<img src=x onerror=window.__xss=15> <script>"]) {
    check(r.text.includes(visible), `not shown as text: ${visible}`);
  }
  checkEqual(r.user, '<img src=x onerror="window.__xss=99"> from the user', "the user's message");
  checkEqual(r.unsafe, ["link", "other", "data", "pic"], "links without href");
  checkEqual(r.links, ["https://example.com/x.png"], "hrefs");
  check(r.mathText.some((t) => t.includes("<script>window.__xss=10</script>")), "\\text{<script>} not shown as text");
  checkEqual(r.cells, ["<img src=x onerror=window.__xss=13>", "b", "<script>window.__xss=14</script>", "c"], "table cells");
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

test("reasoning_content shows collapsed, apart from the answer, and stays out of the history", async () => {
  const thoughts = ["The user ", "asks about ", "triangles. ", "Recall a²+b²=c²."];
  const answer = ["The ", "answer ", "is 5."];
  await script({ chunks: [...thoughts.map((reasoning) => ({ reasoning })), ...answer.map((content) => ({ content }))], delayMs: 120 });
  const { page, problems, bodies } = await openPage();
  await sendMessage(page, "3-4-?");
  await page.waitForFunction(() => !document.querySelector(".msg.assistant .thinking").hidden, { timeout: 5000 });
  const during = await page.evaluate(() => ({
    summary: document.querySelector(".thinking summary").textContent,
    open: document.querySelector(".thinking").open,
    answer: document.querySelector(".msg.assistant .answer").textContent,
  }));
  checkEqual(during, { summary: "Thinking…", open: false, answer: "" }, "while thinking");
  await idle(page);
  const after = await page.evaluate(() => ({
    summary: document.querySelector(".thinking summary").textContent,
    open: document.querySelector(".thinking").open,
    thoughts: document.querySelector(".thinking .thoughts").textContent,
    answer: document.querySelector(".msg.assistant .answer").textContent,
  }));
  checkEqual(after, { summary: "Thoughts", open: false, thoughts: thoughts.join("").trim(), answer: "The answer is 5." }, "after the answer");
  await sendAndWait(page, "thanks");
  checkEqual(bodies[1].messages[1], { role: "assistant", content: "The answer is 5." }, "the answer in the history");
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

test("an error event in the stream is shown, and the partial answer stays", async () => {
  await script({ chunks: [{ content: "Partial " }, { content: "answer" }, { error: { message: "the model <b>exploded</b>", type: "server_error", code: "boom" } }], delayMs: 20 });
  const { page, problems } = await openPage();
  await sendAndWait(page, "go");
  checkEqual(await page.$eval(".msg.error", (el) => [el.textContent, el.getAttribute("role")]), ["Error (server_error): the model <b>exploded</b>", "alert"], "error shown");
  checkEqual(await lastAnswer(page), "Partial answer", "partial answer");
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

test("SSE framing: CRLF lines, comments, one event over several data: lines, other fields", async () => {
  const chunk = (content) => JSON.stringify({ choices: [{ index: 0, delta: { content }, finish_reason: null }] });
  await script({ chunks: [
    { raw: ": keep-alive comment\r\n\r\n" },
    { raw: `data: ${chunk("CRLF ")}\r\n\r\n` },
    { raw: `event: message\nid: 7\nretry: 1000\ndata: ${chunk("fields ")}\n\n` },
    { raw: `data: {"choices": [{"index": 0,\ndata: "delta": {"content": "split "}}]}\n\n` },
    { raw: `data:${chunk("nospace")}\r\r` },
  ], delayMs: 20 });
  const { page, problems } = await openPage();
  await sendAndWait(page, "framing");
  checkEqual(await lastAnswer(page), "CRLF fields split nospace", "the answer");
  checkEqual(await page.$$eval(".msg.error", (els) => els.length), 0, "errors");
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

test("a server that answers with one JSON body instead of a stream", async () => {
  await script({ whole: { content: "All **at once**.", reasoning: "quick thought" } });
  const { page, problems } = await openPage();
  await sendAndWait(page, "no stream");
  checkEqual(await lastAnswer(page), "All at once.", "the answer");
  checkEqual(await page.$eval(".thinking .thoughts", (el) => el.textContent), "quick thought", "the reasoning");
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

test("HTTP 500 and a non-JSON 502 are shown; the question returns to the input", async () => {
  await script({ status: 500, error: { message: "internal failure", type: "server_error", code: null } });
  await script({ status: 502, text: "Bad gateway" });
  const { page, problems, bodies } = await openPage({ allowHttpErrors: true });
  await sendAndWait(page, "will fail");
  checkEqual(await page.$eval(".msg.error", (el) => el.textContent), "HTTP 500 (server_error): internal failure", "error shown");
  checkEqual(await page.$eval("#input", (el) => el.value), "will fail", "input after the error");
  checkEqual(await page.$$eval(".msg.assistant", (els) => els.length), 0, "empty answers left behind");
  await page.focus("#input");
  await page.keyboard.press("Enter");
  await idle(page);
  checkEqual(await page.$$eval(".msg.error", (els) => els.map((el) => el.textContent)), ["HTTP 500 (server_error): internal failure", "HTTP 502: Bad gateway"], "errors shown");
  checkEqual(bodies[1].messages, [{ role: "user", content: "will fail" }], "a failed question is not sent twice");
  checkEqual(await page.$eval("#input", (el) => el.value), "will fail", "input after the second error");
  await page.keyboard.press("Enter");
  await idle(page);
  checkEqual(bodies[2].messages, [{ role: "user", content: "will fail" }], "messages after two failures");
  checkEqual(await lastAnswer(page), "You said: will fail", "the answer at the third try");
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

test("HTTP 401 asks for the API key, which then goes out as a Bearer token", async () => {
  await mock("/mock/config", { apiKey: "sekrit-key" });
  try {
    const { page, problems, bodies } = await openPage({ allowHttpErrors: true });
    await page.waitForFunction(() => document.getElementById("model").textContent === "API key needed", { timeout: 3000 });
    check(!(await page.$eval("#settings", (el) => el.hidden)), "settings not opened for the key");
    await sendAndWait(page, "secret question");
    const error = await page.$eval(".msg.error", (el) => el.textContent);
    check(/API key/.test(error) && /401/.test(error), `401 error shown: ${error}`);
    checkEqual(await page.evaluate(() => document.activeElement.id), "api-key", "focus after 401");
    await page.keyboard.type("sekrit-key");
    await page.focus("#input"); // leaving the field commits it (change) and asks for the model again
    await page.waitForFunction(() => document.getElementById("model").textContent === "mock-gemma", { timeout: 3000 });
    checkEqual(await page.$eval("#input", (el) => el.value), "secret question", "the question back in the input");
    await script(pieces("Welcome in.", 4));
    await page.keyboard.press("Enter");
    await idle(page);
    checkEqual(await lastAnswer(page), "Welcome in.", "answer after the key");
    const requests = await mockRequests();
    checkEqual(requests.map((r) => r.authorization), [null, "Bearer sekrit-key"], "Authorization headers");
    checkEqual(bodies[1].messages, [{ role: "user", content: "secret question" }], "messages");
    checkEqual(problems, [], "problems");
  } finally {
    await mock("/mock/config", { apiKey: null });
  }
}, { mockOnly: true });

test("settings (system prompt, temperature, max tokens) persist and go into the request", async () => {
  const { page, problems, bodies } = await openPage();
  await page.click("#settings-toggle");
  await setField(page, "#max-tokens", "");
  await page.type("#system-prompt", "You are terse.");
  await page.type("#temperature", "0.3");
  await page.type("#max-tokens", "64");
  await page.reload({ waitUntil: "load" });
  await page.waitForFunction(() => document.getElementById("model").textContent !== "");
  checkEqual(await page.evaluate(() => ["system-prompt", "temperature", "max-tokens"].map((id) => document.getElementById(id).value)), ["You are terse.", "0.3", "64"], "settings after reload");
  await sendAndWait(page, "hi");
  const body = bodies[0];
  checkEqual([body.messages, body.temperature, body.max_tokens], [[{ role: "system", content: "You are terse." }, { role: "user", content: "hi" }], 0.3, 64], "request");
  checkEqual(problems, [], "problems");
});

test("long CJK lines, URLs and words wrap inside a narrow window", async () => {
  const long = "勾股定理".repeat(80) + " https://example.com/" + "a".repeat(200) + " " + "Donaudampfschifffahrt".repeat(10);
  await script(pieces(long, 40, 2));
  const { page, problems } = await openPage({ width: 400, height: 700 });
  await sendAndWait(page, "测".repeat(120));
  const r = await page.evaluate(() => ({
    page: [document.documentElement.scrollWidth, window.innerWidth],
    messages: [...document.querySelectorAll(".msg")].map((m) => m.scrollWidth - m.clientWidth),
  }));
  check(r.page[0] <= r.page[1], `the page scrolls sideways: ${r.page}`);
  check(r.messages.every((d) => d <= 1), `a message overflows: ${r.messages}`);
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

// The renderer on fixed inputs, in the page (any server): no scripted answers needed.
test("renderer: the Markdown and TeX modules on tricky inputs", async () => {
  const { page, problems } = await openPage();
  const r = await page.evaluate(async () => {
    const { renderMarkdown, parseInline } = await import(new URL("markdown.js", location.href));
    const html = (md) => { const d = document.createElement("div"); d.append(renderMarkdown(md)); return d; };
    const tags = (md) => [...html(md).querySelectorAll("*")].map((e) => e.localName).join(" ");
    return {
      price: tags("It costs $5, or $6 with tax."),
      mathAfterPrice: tags("Between $5 and $x$ there"),
      spaced: tags("a $ x $ b"),
      codeDollar: tags("`$HOME` and `a $b$ c`"),
      unclosedFence: html("```py\nprint('<b>')").querySelector("pre code").textContent,
      cjkBold: tags("这是**“重要”**的事"),
      snake: tags("snake_case_name and 中_文_字"),
      approx: tags("~5 to ~10 minutes"),
      escapes: html("\\*not italic\\* and \\$5").textContent,
      entity: html("&lt;b&gt; &amp; &#x4e2d;").textContent,
      nestedOrdered: tags("1. a\n  - b\n2. c"),
      loose: tags("- a\n\n- b"),
      startAt: html("3. three\n4. four").querySelector("ol").start,
      breaks: tags("line one\nline two"),
      table: tags("a | b\n--|--\n1 | 2"),
      notTable: tags("a | b\nno delimiter"),
      mailto: html("[mail](mailto:x@example.com)").querySelector("a")?.getAttribute("href"),
      relative: tags("[rel](/etc/passwd) [vb](vbscript:x)"),
      deep: tags("$" + "{".repeat(500) + "x" + "}".repeat(500) + "$").includes("math"),
      protoCmd: html("$\\constructor \\toString x$").textContent,
      inline: JSON.stringify(parseInline("**a *b* c**")),
    };
  });
  checkEqual(r.price, "p", "$5 ... $6 is not maths");
  check(r.mathAfterPrice.includes("math"), `$x$ after a price: ${r.mathAfterPrice}`);
  check(!r.spaced.includes("math"), `$ x $ with spaces inside: ${r.spaced}`);
  checkEqual(r.codeDollar, "p code code", "$ in code spans");
  checkEqual(r.unclosedFence, "print('<b>')", "an unclosed fence (still streaming)");
  checkEqual(r.cjkBold, "p strong", "bold around CJK punctuation");
  checkEqual([r.snake, r.approx], ["p", "p"], "snake_case and single tildes");
  checkEqual(r.escapes, "*not italic* and $5", "backslash escapes");
  checkEqual(r.entity, "<b> & 中", "entities");
  checkEqual(r.nestedOrdered, "ol li ul li li", "a sub-list indented two spaces under 1.");
  checkEqual([r.loose, r.startAt], ["ul li p li p", 3], "loose list, start number");
  checkEqual([r.breaks, r.table, r.notTable], ["p br", "div table thead tr th th tbody tr td td", "p br"], "line breaks and tables");
  checkEqual([r.mailto, r.relative], ["mailto:x@example.com", "p span span"], "mailto kept, relative and vbscript: dropped");
  check(r.deep, "deeply nested TeX broke the page");
  check(r.protoCmd.includes("\\constructor") && r.protoCmd.includes("\\toString"), `\\constructor: ${r.protoCmd}`);
  checkEqual(r.inline, JSON.stringify([{ t: "strong", children: [{ t: "text", v: "a " }, { t: "em", children: [{ t: "text", v: "b" }] }, { t: "text", v: " c" }] }]), "nested emphasis");
  const { found } = await dangerIn(page);
  checkEqual(found, [], "dangerous elements");
  checkEqual(problems, [], "problems");
});

// A 4x4 PNG (red and blue halves), as a file the file chooser picks.
const PNG_BASE64 = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAE0lEQVR4nGP4z8AARGDiPwNxHACeow/xfxmViwAAAABJRU5ErkJggg==";
const pngFile = path.join(os.tmpdir(), `gemlet-chat-page-${process.pid}.png`);
writeFileSync(pngFile, Buffer.from(PNG_BASE64, "base64"));
process.on("exit", () => rmSync(pngFile, { force: true }));

// The photos of the conversation: the composer's tray and the user messages' thumbnails (decoded: a
// natural width), with their src schemes.
const photosShown = (page) => page.evaluate(() => ({
  tray: [...document.querySelectorAll("#attachments:not([hidden]) img.thumb")].map((img) => img.naturalWidth),
  sent: [...document.querySelectorAll(".msg.user")].map((m) => [...m.querySelectorAll("img.thumb")].map((img) => [img.naturalWidth, img.src.split(":")[0]])),
}));

// A model that takes images (the mock's; a real server's with --mmproj): attach, drop, remove, send.
test("photos: attached or dropped, shown as thumbnails, removable, sent as image_url data URLs, resent with the history", async () => {
  const { page, problems, bodies } = await openPage();
  const takesImages = !(await page.$eval("#attach", (el) => el.hidden));
  if (!isMock && !takesImages) return; // a text-only model: the Photo button stays hidden (checked below)
  check(takesImages, "the Photo button is hidden for a model that takes images");
  const chooser = await page.$("#image-input");
  await chooser.uploadFile(pngFile);
  await page.waitForSelector("#attachments:not([hidden]) img.thumb");
  await chooser.uploadFile(pngFile);
  await page.waitForFunction(() => document.querySelectorAll("#attachments img.thumb").length === 2);
  await page.click("#attachments .attachment:last-child .remove");
  await page.waitForFunction(() => document.querySelectorAll("#attachments img.thumb").length === 1);
  checkEqual((await photosShown(page)).tray, [4], "the tray's thumbnail (decoded)");
  if (isMock) await script(pieces("Red on the left, blue on the right.", 6));
  await sendAndWait(page, "What colours?");
  const first = bodies[bodies.length - 1].messages.at(-1);
  checkEqual(first.role, "user", "the role");
  checkEqual(first.content.map((p) => p.type), ["image_url", "text"], "the parts: the photo, then the text");
  checkEqual(first.content[0].image_url.url, `data:image/png;base64,${PNG_BASE64}`, "the photo's data URL");
  checkEqual(first.content[1].text, "What colours?", "the text part");
  let shown = await photosShown(page);
  checkEqual(shown.tray, [], "the tray after sending");
  checkEqual(shown.sent, [[[4, "blob"]]], "the sent photo in the conversation");

  // A photo dropped on the page, sent alone (Enter with no text).
  await page.evaluate((b64) => {
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const dt = new DataTransfer();
    dt.items.add(new File([bytes], "dropped.png", { type: "image/png" }));
    const target = document.getElementById("messages");
    target.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt, bubbles: true, cancelable: true }));
    target.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, PNG_BASE64);
  await page.waitForSelector("#attachments:not([hidden]) img.thumb");
  check(!(await page.evaluate(() => document.body.classList.contains("dropping"))), "the drop highlight stays after the drop");
  if (isMock) await script(pieces("The same picture.", 6));
  await sendAndWait(page, "");
  const second = bodies[bodies.length - 1].messages;
  checkEqual(second.length, 3, "the second request's messages");
  checkEqual(second[0], first, "the first turn resent as it was, photo included");
  checkEqual(second[2].content.map((p) => p.type), ["image_url"], "a photo alone");
  shown = await photosShown(page);
  checkEqual(shown.sent, [[[4, "blob"]], [[4, "blob"]]], "both photos in the conversation");
  checkEqual(await page.$$eval(".msg.error", (els) => els.map((el) => el.textContent)), [], "errors");
  if (!isMock) check((await lastAnswer(page)).length > 0, "no answer to the photo");

  // New chat: the photos go with the conversation.
  await page.click("#new-chat");
  checkEqual((await photosShown(page)).sent, [], "photos after New chat");
  checkEqual(problems, [], "problems");
});

test("photos: a failed send puts the photo back in the tray", async () => {
  await script({ status: 400, error: { message: "'messages[0].content[0]': the image cannot be used: corrupt PNG", type: "invalid_request_error" } });
  const { page, problems } = await openPage({ allowHttpErrors: true });
  await (await page.$("#image-input")).uploadFile(pngFile);
  await page.waitForSelector("#attachments:not([hidden]) img.thumb");
  await sendAndWait(page, "Look");
  const shown = await photosShown(page);
  checkEqual(shown.tray, [4], "the photo back in the tray");
  check(/corrupt PNG/.test(await page.$eval(".msg.error", (el) => el.textContent)), "the server's message");
  checkEqual(await page.$eval("#input", (el) => el.value), "Look", "the text back in the input");
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

// A 0.5 s 440 Hz tone as a 16 kHz mono 16-bit WAV, as a file the file chooser picks.
function toneWav(seconds) {
  const n = Math.round(seconds * 16000);
  const wav = Buffer.alloc(44 + 2 * n);
  wav.write("RIFF", 0); wav.writeUInt32LE(36 + 2 * n, 4); wav.write("WAVEfmt ", 8); wav.writeUInt32LE(16, 16);
  wav.writeUInt16LE(1, 20); wav.writeUInt16LE(1, 22); wav.writeUInt32LE(16000, 24); wav.writeUInt32LE(32000, 28);
  wav.writeUInt16LE(2, 32); wav.writeUInt16LE(16, 34); wav.write("data", 36); wav.writeUInt32LE(2 * n, 40);
  for (let i = 0; i < n; i++) wav.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 16000)), 44 + 2 * i);
  return wav;
}
const WAV = toneWav(0.5);
const wavFile = path.join(os.tmpdir(), `gemlet-chat-page-${process.pid}.wav`);
writeFileSync(wavFile, WAV);
process.on("exit", () => rmSync(wavFile, { force: true }));

// The clips of the conversation: the tray's players and the user messages', as their src schemes.
const clipsShown = (page) => page.evaluate(() => ({
  tray: [...document.querySelectorAll("#attachments:not([hidden]) audio.clip")].map((a) => a.src.split(":")[0]),
  sent: [...document.querySelectorAll(".msg.user")].map((m) => [...m.querySelectorAll("audio.clip")].map((a) => a.src.split(":")[0])),
}));
// The newest tray player's duration once it has read the clip (the CSP lets blob: media play).
const trayDuration = async (page) => (await page.waitForFunction(() => {
  const audio = [...document.querySelectorAll("#attachments audio.clip")].pop();
  return audio && audio.readyState >= 1 && Number.isFinite(audio.duration) && audio.duration;
}, { timeout: 5000 })).jsonValue();

// A model that hears (the mock's; a real server's with an audio tower): attach, remove, record, send.
test("clips: attached or recorded, shown as players, removable, sent as input_audio, resent with the history", async () => {
  const { page, problems, bodies } = await openPage();
  const hears = !(await page.$eval("#attach-audio", (el) => el.hidden));
  if (!isMock && !hears) return; // a model without an audio tower: the Audio button stays hidden
  check(hears, "the Audio button is hidden for a model that hears");
  const chooser = await page.$("#audio-input");
  await chooser.uploadFile(wavFile);
  await page.waitForSelector("#attachments:not([hidden]) audio.clip");
  check(Math.abs((await trayDuration(page)) - 0.5) < 0.01, "the player's duration");
  await chooser.uploadFile(wavFile);
  await page.waitForFunction(() => document.querySelectorAll("#attachments audio.clip").length === 2);
  await page.click("#attachments .attachment:last-child .remove");
  await page.waitForFunction(() => document.querySelectorAll("#attachments audio.clip").length === 1);
  if (isMock) await script(pieces("A tone at 440 Hz.", 5));
  await sendAndWait(page, "What is this?");
  const first = bodies[bodies.length - 1].messages.at(-1);
  checkEqual(first.content.map((p) => p.type), ["input_audio", "text"], "the parts: the clip, then the text");
  checkEqual(first.content[0].input_audio, { data: WAV.toString("base64"), format: "wav" }, "the clip's bytes, as they were");
  let shown = await clipsShown(page);
  checkEqual(shown, { tray: [], sent: [["blob"]] }, "the clip after sending");

  // Recorded from the (fake) microphone: WAV made in the page from what MediaRecorder gave.
  check(!(await page.$eval("#record", (el) => el.hidden)), "the Record button is hidden");
  await page.click("#record");
  await page.waitForFunction(() => document.getElementById("record").getAttribute("aria-pressed") === "true", { timeout: 5000 });
  await sleep(800);
  await page.click("#record");
  await page.waitForSelector("#attachments:not([hidden]) audio.clip", { timeout: 10000 });
  const recorded = await trayDuration(page);
  check(recorded > 0.3 && recorded < 5, `the recording's duration: ${recorded}`);
  checkEqual(await page.$eval("#record", (el) => el.getAttribute("aria-pressed")), "false", "Record after stopping");
  if (isMock) await script(pieces("A beep.", 4));
  await sendAndWait(page, "");
  const second = bodies[bodies.length - 1].messages;
  checkEqual(second.length, 3, "the second request's messages");
  checkEqual(second[0], first, "the first turn resent as it was, clip included");
  checkEqual(second[2].content.map((p) => p.type), ["input_audio"], "a recording alone");
  const made = Buffer.from(second[2].content[0].input_audio.data, "base64");
  checkEqual([second[2].content[0].input_audio.format, made.toString("latin1", 0, 4), made.readUInt32LE(24)], ["wav", "RIFF", 16000],
             "the recording as 16 kHz WAV");
  shown = await clipsShown(page);
  checkEqual(shown.sent, [["blob"], ["blob"]], "both clips in the conversation");
  checkEqual(await page.$$eval(".msg.error", (els) => els.map((el) => el.textContent)), [], "errors");
  if (!isMock) check((await lastAnswer(page)).length > 0, "no answer to the clip");

  await page.click("#new-chat");
  checkEqual((await clipsShown(page)).sent, [], "clips after New chat");
  checkEqual(problems, [], "problems");
});

test("clips: a failed send puts the clip back in the tray; a file the browser cannot decode is one error", async () => {
  await script({ status: 400, error: { message: "'messages[0].content[0]': the audio cannot be used: truncated WAV", type: "invalid_request_error" } });
  const { page, problems } = await openPage({ allowHttpErrors: true });
  await (await page.$("#audio-input")).uploadFile(wavFile);
  await page.waitForSelector("#attachments:not([hidden]) audio.clip");
  await sendAndWait(page, "Listen");
  checkEqual((await clipsShown(page)).tray, ["blob"], "the clip back in the tray");
  check(/truncated WAV/.test(await page.$eval(".msg.error", (el) => el.textContent)), "the server's message");
  checkEqual(await page.$eval("#input", (el) => el.value), "Listen", "the text back in the input");
  await page.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8])], "noise.m4a", { type: "audio/mp4" }));
    document.getElementById("messages").dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  await page.waitForFunction(() => document.querySelectorAll(".msg.error").length === 2, { timeout: 5000 });
  check(/cannot read noise\.m4a: the browser cannot decode it/.test(await page.$$eval(".msg.error", (els) => els.pop().textContent)),
        "the decoding error");
  checkEqual((await clipsShown(page)).tray, ["blob"], "the tray keeps the first clip only");
  checkEqual(problems, [], "problems");
}, { mockOnly: true });

// Whatever the server's model says (the mock echoes): the answer streams in, and Stop stops it.
test("any server: an answer streams in, Chinese included, and Stop stops a long one", async () => {
  const { page, problems, bodies } = await openPage();
  await watchGrowth(page);
  await sendAndWait(page, "你好，请解释一下勾股定理");
  const growth = await page.evaluate(() => window.__growth);
  check(growth.some((n) => n > 0), `no answer arrived: ${JSON.stringify(growth)}`);
  checkEqual(await page.$$eval(".msg.error", (els) => els.map((el) => el.textContent)), [], "errors");
  checkEqual(bodies[0].messages, [{ role: "user", content: "你好，请解释一下勾股定理" }], "the message sent");
  if (isMock) await script({ chunks: Array.from({ length: 50 }, (_, i) => ({ content: `w${i} ` })), delayMs: 50 });
  else await setField(page, "#max-tokens", "2000");
  await sendMessage(page, "Write a very long story.");
  // A real model may finish its answer before Stop can be pressed (the demo model often does):
  // wait for text in the second answer, then stop it unless it is over already.
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.assistant")].length === 2 &&
    [...document.querySelectorAll(".msg.assistant")].pop().textContent.length > 0, { timeout: 15000 });
  if (!(await page.$eval("#stop", (el) => el.hidden))) {
    await page.click("#stop").catch(async (err) => {
      if (!(await page.$eval("#stop", (el) => el.hidden))) throw err;  // still streaming: a real failure
    });
  }
  await idle(page, 5000);
  const stopped = await page.$$eval(".msg.assistant", (els) => els.pop().textContent);
  check(stopped.length > 0, "the partial answer is gone after Stop");
  checkEqual(await page.$$eval(".msg.error", (els) => els.map((el) => el.textContent)), [], "errors");
  checkEqual(problems, [], "problems");
});

// ---- running ----

const only = option("--only"); // runs the tests whose name contains this
const started = Date.now();
let failed = 0;
let ran = 0;
for (const t of tests) {
  if (t.mockOnly && !isMock) continue;
  if (only && !t.name.includes(only)) continue;
  ran++;
  if (isMock) await mock("/mock/reset", {});
  const begin = Date.now();
  let timer;
  try {
    await Promise.race([
      t.fn(),
      new Promise((_, reject) => { timer = setTimeout(() => reject(new Failure(`timed out after ${TEST_TIMEOUT_MS} ms`)), TEST_TIMEOUT_MS); }),
    ]);
    console.log(`ok   ${t.name} (${Date.now() - begin} ms)`);
  } catch (err) {
    failed++;
    console.log(`FAIL ${t.name} (${Date.now() - begin} ms)\n     ${err instanceof Failure ? err.message : err.stack}`);
  } finally {
    clearTimeout(timer);
    for (const context of browser.browserContexts()) if (context !== browser.defaultBrowserContext()) await context.close().catch(() => {});
  }
}
await browser.close();
await mockServer?.close();
const where = isMock ? "the mock server" : baseUrl;
console.log(`\nchat page (${where}, ${((Date.now() - started) / 1000).toFixed(1)} s): ${ran - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
