// markdown.js: Markdown (the CommonMark blocks and inlines chat models write, GFM tables and
// strikethrough, TeX maths) to DOM nodes. Nothing here parses HTML: text reaches the page only as
// Text nodes and the elements we create, so model output can never become markup or script.
import { renderTex } from "./math.js";

// ---- blocks ----

const FENCE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?/;
const LIST_ITEM = /^( {0,3})([-*+]|(\d{1,9})([.)]))( +|$)/;
const DELIMITER_ROW = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
const MATH_OPEN = /^ {0,3}(\$\$|\\\[)/;

const isBlank = (line) => /^[ \t]*$/.test(line);
const indentOf = (line) => /^ */.exec(line)[0].length;

function expandTabs(line) {
  return line.replace(/^[ \t]+/, (ws) => {
    let out = "";
    for (const c of ws) out += c === "\t" ? " ".repeat(4 - (out.length % 4)) : c;
    return out;
  });
}

function listMarker(line) {
  const m = LIST_ITEM.exec(line);
  if (!m) return null;
  const markerEnd = m[1].length + m[2].length;
  const spaces = m[5].length;
  return {
    indent: m[1].length,
    // Content starts after the marker's spaces (one space when the item is empty or the gap is wide).
    contentIndent: spaces === 0 || spaces > 4 ? markerEnd + 1 : markerEnd + spaces,
    ordered: m[3] !== undefined,
    start: m[3] !== undefined ? Number(m[3]) : 1,
    kind: m[4] ?? m[2], // items of one list share a bullet character or a number delimiter
    empty: spaces === 0,
  };
}

// `$$ ... $$` or `\[ ... \]` standing alone on its lines: the index after its last line, or -1.
function mathBlockEnd(lines, i) {
  const open = MATH_OPEN.exec(lines[i]);
  if (!open) return -1;
  const close = open[1] === "$$" ? "$$" : "\\]";
  for (let j = i; j < lines.length; j++) {
    if (j > i && isBlank(lines[j])) return -1;
    const from = j === i ? lines[i].indexOf(open[1]) + 2 : 0;
    const at = lines[j].indexOf(close, from);
    if (at >= 0) return isBlank(lines[j].slice(at + 2)) ? j + 1 : -1;
  }
  return -1;
}

function splitCells(line) {
  let s = line.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  return s.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
}

function isTableStart(lines, i) {
  if (i + 1 >= lines.length || !lines[i].includes("|") || !lines[i + 1].includes("|")) return false;
  if (!DELIMITER_ROW.test(lines[i + 1])) return false;
  return splitCells(lines[i]).length === splitCells(lines[i + 1]).length;
}

// Whether a line starts a block that ends a paragraph before it.
function interruptsParagraph(line) {
  if (FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || MATH_OPEN.test(line)) return true;
  const item = listMarker(line);
  // CommonMark: an empty item, or a numbered one not starting at 1, cannot interrupt a paragraph.
  return Boolean(item && !item.empty && (!item.ordered || item.start === 1));
}

// Blocks of a document: [{type, src, ...}]. `src` is the block's own text, so a caller can tell
// which blocks a longer version of the same text left unchanged.
export function parseBlocks(text) {
  const lines = text.split(/\r\n|\r|\n/).map(expandTabs);
  const blocks = [];
  let i = 0;
  while (i < lines.length) {
    const start = i;
    const line = lines[i];
    let block;
    let m;
    if (isBlank(line)) { i++; continue; }
    if ((m = FENCE.exec(line)) && !(m[2][0] === "`" && m[3].includes("`"))) {
      const [, indent, fence, info] = m;
      const body = [];
      i++;
      while (i < lines.length) {
        const close = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(lines[i]);
        if (close && close[1][0] === fence[0] && close[1].length >= fence.length) { i++; break; }
        body.push(lines[i].slice(Math.min(indent.length, indentOf(lines[i]))));
        i++;
      }
      block = { type: "code", lang: info.trim().split(/\s+/)[0], text: body.join("\n") };
    } else if ((m = HEADING.exec(line))) {
      block = { type: "heading", level: m[1].length, text: m[2] ?? "" };
      i++;
    } else if (RULE.test(line)) {
      block = { type: "rule" };
      i++;
    } else if (mathBlockEnd(lines, i) > 0) {
      const end = mathBlockEnd(lines, i);
      const src = lines.slice(i, end).join("\n").trim();
      block = { type: "math", tex: src.slice(2, -2).trim() }; // $$ and \[ are both two characters
      i = end;
    } else if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && !isBlank(lines[i])) {
        if (QUOTE.test(lines[i])) inner.push(lines[i].replace(QUOTE, ""));
        else if (interruptsParagraph(lines[i])) break;
        else inner.push(lines[i]); // a lazy continuation of the quoted paragraph
        i++;
      }
      block = { type: "quote", children: parseBlocks(inner.join("\n")) };
    } else if (listMarker(line)) {
      [block, i] = parseList(lines, i);
    } else if (isTableStart(lines, i)) {
      const head = splitCells(lines[i]);
      const align = splitCells(lines[i + 1]).map((d) =>
        d.startsWith(":") && d.endsWith(":") ? "center" : d.endsWith(":") ? "right" : d.startsWith(":") ? "left" : "");
      const rows = [];
      i += 2;
      while (i < lines.length && !isBlank(lines[i]) && lines[i].includes("|") && !interruptsParagraph(lines[i])) {
        const cells = splitCells(lines[i]);
        rows.push(head.map((_, c) => cells[c] ?? ""));
        i++;
      }
      block = { type: "table", head, align, rows };
    } else {
      const para = [line.trim()];
      i++;
      while (i < lines.length && !isBlank(lines[i]) && !interruptsParagraph(lines[i]) && !isTableStart(lines, i)) {
        para.push(lines[i].trim());
        i++;
      }
      block = { type: "paragraph", text: para.join("\n") };
    }
    block.src = lines.slice(start, i).join("\n");
    blocks.push(block);
  }
  return blocks;
}

function parseList(lines, i) {
  const first = listMarker(lines[i]);
  const list = { type: "list", ordered: first.ordered, start: first.start, tight: true, items: [] };
  while (i < lines.length) {
    const item = listMarker(lines[i]);
    if (!item || item.kind !== first.kind || item.ordered !== first.ordered) break;
    const body = [lines[i].slice(item.contentIndent)];
    i++;
    while (i < lines.length) {
      const line = lines[i];
      const indent = indentOf(line);
      if (isBlank(line)) body.push("");
      else if (indent >= item.contentIndent) body.push(line.slice(item.contentIndent));
      // Lenient nesting: models often indent a sub-list by two spaces under "1. ".
      else if (listMarker(line) && indent > item.indent) body.push(line.slice(indent));
      else if (listMarker(line) || isBlank(body[body.length - 1]) || interruptsParagraph(line)) break;
      else body.push(line.trim()); // a lazy continuation of the item's paragraph
      i++;
    }
    let trailing = 0;
    while (body.length > 1 && isBlank(body[body.length - 1])) { body.pop(); trailing++; }
    // Loose (paragraphs in <p>) when a blank line separates items or the blocks of one item.
    if (body.some(isBlank) || (trailing > 0 && i < lines.length && listMarker(lines[i])?.kind === first.kind)) list.tight = false;
    list.items.push(parseBlocks(body.join("\n")));
  }
  return [list, i];
}

// ---- inlines ----

const PUNCTUATION = /[\p{P}\p{S}]/u;
const ASCII_PUNCTUATION = /[!-/:-@[-`{-~]/;
// Han, kana, Hangul, CJK and full-width punctuation: emphasis next to these behaves as it does
// next to a space, so **“引号”**后面 closes (plain CommonMark leaves the ** there as text).
const CJK = /[\u1100-\u11ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]/;
const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0" };

function decodeEntity(match) {
  const name = match.slice(1, -1);
  if (Object.hasOwn(ENTITIES, name)) return ENTITIES[name];
  const code = name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
  const valid = code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff);
  return valid ? String.fromCodePoint(code) : "\ufffd";
}

// An http(s) or mailto URL, normalized, or null: any other scheme (javascript:, data:, vbscript:)
// or a relative URL never becomes an href.
export function safeHref(raw) {
  const url = raw.trim();
  if (!/^(https?:\/\/|mailto:)/i.test(url)) return null;
  try {
    const parsed = new URL(url);
    return ["http:", "https:", "mailto:"].includes(parsed.protocol) ? parsed.href : null;
  } catch {
    return null;
  }
}

function flanking(before, after) {
  const space = (c) => c === "" || /\s/u.test(c);
  const punct = (c) => PUNCTUATION.test(c);
  const loose = (c) => space(c) || punct(c) || CJK.test(c);
  return {
    left: !space(after) && (!punct(after) || loose(before)),
    right: !space(before) && (!punct(before) || loose(after)),
  };
}

// The inline maths starting at text[i], as {node, end}, or null.
function mathAt(text, i) {
  if (text.startsWith("\\(", i) || text.startsWith("\\[", i)) {
    const close = text[i + 1] === "(" ? "\\)" : "\\]";
    const end = text.indexOf(close, i + 2);
    if (end < 0 || !text.slice(i + 2, end).trim()) return null;
    return { node: { t: "math", tex: text.slice(i + 2, end), display: close === "\\]" }, end: end + 2 };
  }
  if (text.startsWith("$$", i)) {
    const end = text.indexOf("$$", i + 2);
    if (end < 0 || !text.slice(i + 2, end).trim() || text.slice(i + 2, end).includes("`")) return null;
    return { node: { t: "math", tex: text.slice(i + 2, end), display: true }, end: end + 2 };
  }
  // $...$ (pandoc's rule): no space just inside either $, and no digit just after the closing
  // one, so "costs $5 and $10" stays text. Backticks end the search: `$` in code is never maths.
  if (/\s/.test(text[i + 1] ?? " ")) return null;
  for (let j = i + 1; j < text.length; j++) {
    const c = text[j];
    if (c === "\\") { j++; continue; }
    if (c === "`") return null;
    if (c === "$") {
      if (/\s/.test(text[j - 1]) || /[0-9]/.test(text[j + 1] ?? "")) return null;
      return { node: { t: "math", tex: text.slice(i + 1, j), display: false }, end: j + 1 };
    }
  }
  return null;
}

// [label](destination "title") starting at text[i]: {label, href, end} or null.
function linkAt(text, i) {
  let depth = 0;
  let j = i;
  for (; j < text.length; j++) {
    const c = text[j];
    if (c === "\\") { j++; continue; }
    if (c === "[") depth++;
    else if (c === "]" && --depth === 0) break;
  }
  if (j >= text.length || text[j + 1] !== "(") return null;
  const label = text.slice(i + 1, j);
  const dest = /^\(\s*(?:<([^<>\n]*)>|((?:[^\s()\\]|\\.|\((?:[^\s()\\]|\\.)*\))*))(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)/.exec(text.slice(j + 1));
  if (!dest) return null;
  return { label, href: dest[1] ?? dest[2], end: j + 1 + dest[0].length };
}

const BARE_URL = /^https?:\/\/[^\s<>"`\u3000-\u303f\uff00-\uffef]+/;

function bareUrlAt(text, i) {
  if (i > 0 && /[\p{L}\p{N}]/u.test(text[i - 1])) return null;
  const m = BARE_URL.exec(text.slice(i, i + 2048));
  if (!m) return null;
  let url = m[0].replace(/[.,:;!?'"*_~]+$/, "");
  // A closing parenthesis belongs to the URL only when it closes one inside it: (see https://x.y/a).
  while (url.endsWith(")") && (url.match(/\)/g).length > (url.match(/\(/g) || []).length)) url = url.slice(0, -1);
  return { url, end: i + url.length };
}

// Inline nodes: {t: "text", v} | {t: "code", v} | {t: "math", tex, display} | {t: "br"} |
// {t: "link", href, children} | {t: "unsafe-link", url, children} | {t: "em"|"strong"|"del", children}.
export function parseInline(text, inLink = false) {
  const items = [];
  let buf = "";
  const flush = () => { if (buf) items.push({ t: "text", v: buf }); buf = ""; };
  const push = (node) => { flush(); items.push(node); };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    let m;
    if (c === "\\") {
      const next = text[i + 1] ?? "";
      if ((next === "(" || next === "[") && (m = mathAt(text, i))) { push(m.node); i = m.end; continue; }
      if (next === "\n") { push({ t: "br" }); i += 2; continue; }
      if (ASCII_PUNCTUATION.test(next)) { buf += next; i += 2; continue; }
      buf += c; i++; continue;
    }
    if (c === "`") {
      const run = /^`+/.exec(text.slice(i))[0];
      let end = -1;
      for (let j = text.indexOf(run, i + run.length); j >= 0; j = text.indexOf(run, j + 1)) {
        if (text[j + run.length] !== "`" && text[j - 1] !== "`") { end = j; break; }
        while (text[j + 1] === "`") j++;
      }
      if (end < 0) { buf += run; i += run.length; continue; }
      let code = text.slice(i + run.length, end).replace(/\n/g, " ");
      if (/^ .*[^ ].* $/.test(code)) code = code.slice(1, -1);
      push({ t: "code", v: code });
      i = end + run.length;
      continue;
    }
    if (c === "$") {
      if ((m = mathAt(text, i))) { push(m.node); i = m.end; continue; }
      const run = /^\$+/.exec(text.slice(i))[0];
      buf += run; i += run.length; continue;
    }
    if (c === "\n") {
      push({ t: "br" }); // chat answers mean their line breaks (poems, addresses, steps)
      i++;
      continue;
    }
    if (c === "<") {
      if ((m = /^<br\s*\/?>/i.exec(text.slice(i, i + 8)))) { push({ t: "br" }); i += m[0].length; continue; }
      if (!inLink && (m = /^<((?:https?:\/\/|mailto:)[^\s<>]*)>/i.exec(text.slice(i, i + 2048))) && safeHref(m[1])) {
        push({ t: "link", href: safeHref(m[1]), children: [{ t: "text", v: m[1] }] });
        i += m[0].length;
        continue;
      }
    }
    if ((c === "[" || (c === "!" && text[i + 1] === "[")) && !inLink) {
      const image = c === "!";
      if ((m = linkAt(text, image ? i + 1 : i))) {
        const href = safeHref(m.href.replace(/\\(.)/g, "$1"));
        // An image is shown as a link to it: the page loads nothing a model names.
        const children = parseInline(m.label, true);
        push(href ? { t: "link", href, children } : { t: "unsafe-link", url: m.href, children });
        i = m.end;
        continue;
      }
    }
    if (c === "h" && !inLink && (m = bareUrlAt(text, i))) {
      const href = safeHref(m.url);
      if (href) push({ t: "link", href, children: [{ t: "text", v: m.url }] });
      else buf += m.url;
      i = m.end;
      continue;
    }
    if (c === "&" && (m = /^&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[a-z]{2,6});/.exec(text.slice(i, i + 12)))) {
      const name = m[0].slice(1, -1);
      if (name[0] === "#" || Object.hasOwn(ENTITIES, name)) { buf += decodeEntity(m[0]); i += m[0].length; continue; }
    }
    if (c === "*" || c === "_" || (c === "~" && text[i + 1] === "~")) {
      const run = new RegExp(`^\\${c}+`).exec(text.slice(i))[0];
      const before = i > 0 ? text[i - 1] : "";
      const after = text[i + run.length] ?? "";
      const { left, right } = flanking(before, after);
      let canOpen = left;
      let canClose = right;
      if (c === "_") { // no emphasis inside snake_case words
        canOpen = left && (!right || PUNCTUATION.test(before));
        canClose = right && (!left || PUNCTUATION.test(after));
      }
      if (c === "~" && run.length !== 2) { buf += run; i += run.length; continue; }
      push({ t: "delim", c, count: run.length, original: run.length, canOpen, canClose });
      i += run.length;
      continue;
    }
    buf += c;
    i++;
  }
  flush();
  return resolveEmphasis(items);
}

// CommonMark's "process emphasis": match closing runs of * _ ~~ with the nearest opener.
function resolveEmphasis(items) {
  for (let ci = 0; ci < items.length; ci++) {
    const closer = items[ci];
    if (closer.t !== "delim" || !closer.canClose || closer.count === 0) continue;
    let oi = ci - 1;
    for (; oi >= 0; oi--) {
      const o = items[oi];
      if (o.t !== "delim" || o.c !== closer.c || !o.canOpen || o.count === 0) continue;
      // The rule of 3: ***a** b* pairs the runs the way people mean them.
      const both = o.canClose || closer.canOpen;
      if (both && (o.original + closer.original) % 3 === 0 && !(o.original % 3 === 0 && closer.original % 3 === 0)) continue;
      break;
    }
    if (oi < 0) continue;
    const opener = items[oi];
    const use = closer.c === "~" ? 2 : opener.count >= 2 && closer.count >= 2 ? 2 : 1;
    const tag = closer.c === "~" ? "del" : use === 2 ? "strong" : "em";
    const inner = items.splice(oi + 1, ci - oi - 1);
    items.splice(oi + 1, 0, { t: tag, children: finishInlines(inner) });
    opener.count -= use;
    closer.count -= use;
    ci = closer.count > 0 ? oi + 1 : oi + 2; // look at what is left of the closer again
  }
  return finishInlines(items);
}

// Unmatched delimiter runs become text; neighbouring texts merge.
function finishInlines(items) {
  const out = [];
  for (const item of items) {
    const node = item.t === "delim" ? { t: "text", v: item.c.repeat(item.count) } : item;
    if (node.t === "text" && !node.v) continue;
    const last = out[out.length - 1];
    if (node.t === "text" && last?.t === "text") last.v += node.v;
    else out.push(node);
  }
  return out;
}

// ---- DOM ----

function h(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function appendInlines(parent, nodes) {
  for (const n of nodes) {
    switch (n.t) {
      case "text": parent.append(n.v); break;
      case "code": parent.append(h("code", "", n.v)); break;
      case "math": parent.append(renderTex(n.tex, n.display)); break;
      case "br": parent.append(h("br")); break;
      case "link": {
        const a = h("a");
        a.href = n.href;
        a.rel = "noopener noreferrer";
        a.target = "_blank";
        appendInlines(a, n.children);
        parent.append(a);
        break;
      }
      case "unsafe-link": {
        // A link to a scheme we do not follow: its text, and the address where a mouse can see it.
        const span = h("span", "unsafe-link");
        span.title = n.url;
        appendInlines(span, n.children);
        parent.append(span);
        break;
      }
      default: { // em, strong, del
        const node = h(n.t);
        appendInlines(node, n.children);
        parent.append(node);
      }
    }
  }
  return parent;
}

async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // Plain http from another machine is not a secure context: no async clipboard there.
    const area = h("textarea", "offscreen");
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand("copy");
    area.remove();
  }
}

function renderCode(block) {
  const wrap = h("div", "code-block");
  const head = h("div", "code-head");
  const lang = /^[\w+#.-]{1,32}$/.test(block.lang) ? block.lang : "";
  head.append(h("span", "code-lang", lang));
  const copy = h("button", "copy", "Copy");
  copy.type = "button";
  copy.addEventListener("click", async () => {
    await copyText(block.text);
    copy.textContent = "Copied";
    setTimeout(() => { copy.textContent = "Copy"; }, 1500);
  });
  head.append(copy);
  const code = h("code", lang ? `language-${lang}` : "", block.text);
  const pre = h("pre");
  pre.append(code);
  wrap.append(head, pre);
  return wrap;
}

function renderBlock(block, tight = false) {
  switch (block.type) {
    case "paragraph":
      return tight ? appendInlines(document.createDocumentFragment(), parseInline(block.text))
        : appendInlines(h("p"), parseInline(block.text));
    case "heading": return appendInlines(h(`h${block.level}`), parseInline(block.text));
    case "rule": return h("hr");
    case "code": return renderCode(block);
    case "math": {
      const div = h("div", "math-block");
      div.append(renderTex(block.tex, true));
      return div;
    }
    case "quote": {
      const quote = h("blockquote");
      for (const child of block.children) quote.append(renderBlock(child));
      return quote;
    }
    case "list": {
      const list = h(block.ordered ? "ol" : "ul");
      if (block.ordered && block.start !== 1) list.start = block.start;
      for (const item of block.items) {
        const li = h("li");
        for (const child of item) li.append(renderBlock(child, block.tight));
        list.append(li);
      }
      return list;
    }
    case "table": {
      const wrap = h("div", "table-wrap");
      const table = h("table");
      const row = (cells, tag) => {
        const tr = h("tr");
        cells.forEach((cell, c) => {
          const td = appendInlines(h(tag), parseInline(cell));
          if (block.align[c]) td.className = `align-${block.align[c]}`;
          tr.append(td);
        });
        return tr;
      };
      const thead = h("thead");
      thead.append(row(block.head, "th"));
      const tbody = h("tbody");
      for (const cells of block.rows) tbody.append(row(cells, "td"));
      table.append(thead, tbody);
      wrap.append(table);
      return wrap;
    }
  }
  return h("p", "", block.src);
}

// Markdown as a fragment of new nodes.
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  for (const block of parseBlocks(text)) fragment.append(renderBlock(block));
  return fragment;
}

// Renders text into container, reusing the nodes of the leading blocks whose source is unchanged
// since the last call: while an answer streams in, only its last block or two are built again.
const rendered = new WeakMap(); // container -> [{src, nodes}]

export function updateMarkdown(container, text) {
  const old = rendered.get(container) ?? [];
  const blocks = parseBlocks(text);
  let keep = 0;
  while (keep < old.length && keep < blocks.length && old[keep].src === blocks[keep].src && old[keep].type === blocks[keep].type) keep++;
  for (const entry of old.slice(keep)) for (const node of entry.nodes) node.remove();
  const now = old.slice(0, keep);
  for (const block of blocks.slice(keep)) {
    const node = renderBlock(block);
    const nodes = node.nodeType === Node.DOCUMENT_FRAGMENT_NODE ? [...node.childNodes] : [node];
    container.append(node);
    now.push({ src: block.src, type: block.type, nodes });
  }
  rendered.set(container, now);
}
