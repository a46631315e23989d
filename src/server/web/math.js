// math.js: a small subset of TeX to MathML Core elements (which Chromium, Firefox and Safari draw
// without help). Every piece of the source reaches the page as textContent; an unknown command
// shows as its own text, and input we cannot parse shows as the TeX source.

const NS = "http://www.w3.org/1998/Math/MathML";
// Maps, not objects: a command named \constructor must not find Object.prototype's.
const table = (entries) => new Map(Object.entries(entries));
const MAX_DEPTH = 64; // nested groups: deeper input is shown as source rather than risk the stack

const GREEK = table({
  alpha: "α", beta: "β", gamma: "γ", delta: "δ", epsilon: "ϵ", varepsilon: "ε", zeta: "ζ",
  eta: "η", theta: "θ", vartheta: "ϑ", iota: "ι", kappa: "κ", lambda: "λ", mu: "μ", nu: "ν",
  xi: "ξ", omicron: "ο", pi: "π", varpi: "ϖ", rho: "ρ", varrho: "ϱ", sigma: "σ", varsigma: "ς",
  tau: "τ", upsilon: "υ", phi: "ϕ", varphi: "φ", chi: "χ", psi: "ψ", omega: "ω",
  Gamma: "Γ", Delta: "Δ", Theta: "Θ", Lambda: "Λ", Xi: "Ξ", Pi: "Π", Sigma: "Σ",
  Upsilon: "Υ", Phi: "Φ", Psi: "Ψ", Omega: "Ω",
});

// Letter-like symbols: <mi>.
const IDENTIFIERS = table({
  infty: "∞", partial: "∂", nabla: "∇", emptyset: "∅", varnothing: "∅", hbar: "ℏ", ell: "ℓ",
  aleph: "ℵ", Re: "ℜ", Im: "ℑ", wp: "℘", imath: "ı", jmath: "ȷ", top: "⊤", bot: "⊥",
  angle: "∠", triangle: "△", square: "□", degree: "°", prime: "′", dots: "…", ldots: "…",
  cdots: "⋯", vdots: "⋮", ddots: "⋱",
});

// Operators, relations, arrows and punctuation: <mo>.
const OPERATORS = table({
  times: "×", cdot: "⋅", pm: "±", mp: "∓", div: "÷", ast: "∗", star: "⋆", circ: "∘",
  bullet: "∙", oplus: "⊕", ominus: "⊖", otimes: "⊗", odot: "⊙", setminus: "∖", backslash: "\\",
  cup: "∪", cap: "∩", wedge: "∧", land: "∧", vee: "∨", lor: "∨", neg: "¬", lnot: "¬",
  leq: "≤", le: "≤", geq: "≥", ge: "≥", neq: "≠", ne: "≠", approx: "≈", equiv: "≡", sim: "∼",
  simeq: "≃", cong: "≅", propto: "∝", ll: "≪", gg: "≫", leqslant: "⩽", geqslant: "⩾",
  prec: "≺", succ: "≻", mid: "∣", nmid: "∤", parallel: "∥", perp: "⊥", models: "⊨", vdash: "⊢",
  in: "∈", notin: "∉", ni: "∋", subset: "⊂", subseteq: "⊆", supset: "⊃", supseteq: "⊇",
  subsetneq: "⊊", forall: "∀", exists: "∃", nexists: "∄", therefore: "∴", because: "∵",
  to: "→", rightarrow: "→", leftarrow: "←", gets: "←", leftrightarrow: "↔", Rightarrow: "⇒",
  Leftarrow: "⇐", Leftrightarrow: "⇔", implies: "⟹", impliedby: "⟸", iff: "⟺", mapsto: "↦",
  longrightarrow: "⟶", longleftarrow: "⟵", uparrow: "↑", downarrow: "↓", nearrow: "↗",
  searrow: "↘", colon: ":", vert: "|", Vert: "‖", "|": "‖", "{": "{", "}": "}",
  langle: "⟨", rangle: "⟩", lfloor: "⌊", rfloor: "⌋", lceil: "⌈", rceil: "⌉",
  "%": "%", "#": "#", "&": "&", "$": "$", _: "_", lbrace: "{", rbrace: "}",
});

// Big operators whose limits go under and over in display style (movablelimits does the rest).
const BIG_OPERATORS = table({
  sum: "∑", prod: "∏", coprod: "∐", bigcup: "⋃", bigcap: "⋂", bigoplus: "⨁", bigotimes: "⨂",
  bigvee: "⋁", bigwedge: "⋀",
});
const INTEGRALS = table({ int: "∫", iint: "∬", iiint: "∭", oint: "∮" });

// Upright function names; the ones in LIMIT_FUNCTIONS take their subscript underneath.
const FUNCTIONS = new Set([
  "sin", "cos", "tan", "cot", "sec", "csc", "sinh", "cosh", "tanh", "coth", "arcsin", "arccos",
  "arctan", "log", "ln", "lg", "exp", "dim", "ker", "deg", "hom", "arg", "det", "gcd", "lcm",
  "lim", "liminf", "limsup", "max", "min", "sup", "inf", "Pr",
]);
const LIMIT_FUNCTIONS = new Set(["lim", "liminf", "limsup", "max", "min", "sup", "inf", "det", "gcd", "Pr"]);

// Accents: the mark drawn over (or, for underbrace, under) the argument.
const ACCENTS = table({
  // The wide ones use the characters MathML's operator dictionary lets stretch.
  hat: "^", widehat: "ˆ", bar: "¯", vec: "→", overrightarrow: "→", dot: "˙",
  ddot: "¨", tilde: "~", widetilde: "˜", check: "ˇ", breve: "˘", acute: "´", grave: "`",
  overbrace: "⏞",
});
const UNDER_ACCENTS = table({ underbrace: "⏟" });

const SPACES = table({ ",": "0.1667em", ":": "0.2222em", ">": "0.2222em", ";": "0.2778em", " ": "0.25em",
  quad: "1em", qquad: "2em", enspace: "0.5em", thinspace: "0.1667em" });
const IGNORED = new Set(["displaystyle", "textstyle", "scriptstyle", "limits", "nolimits", "!",
  "nonumber", "notag", "relax"]);

// Letter styles as Unicode's mathematical alphanumerics (MathML Core dropped mathvariant).
// [first capital, first small letter, first digit or 0, {letters that live elsewhere}]
const ALPHABETS = table({
  mathbb: [0x1d538, 0x1d552, 0x1d7d8, { C: "ℂ", H: "ℍ", N: "ℕ", P: "ℙ", Q: "ℚ", R: "ℝ", Z: "ℤ" }],
  mathbf: [0x1d400, 0x1d41a, 0x1d7ce, {}],
  boldsymbol: [0x1d468, 0x1d482, 0x1d7ce, {}],
  bm: [0x1d468, 0x1d482, 0x1d7ce, {}],
  mathcal: [0x1d49c, 0x1d4b6, 0, { B: "ℬ", E: "ℰ", F: "ℱ", H: "ℋ", I: "ℐ", L: "ℒ", M: "ℳ", R: "ℛ",
    e: "ℯ", g: "ℊ", o: "ℴ" }],
  mathscr: [0x1d49c, 0x1d4b6, 0, { B: "ℬ", E: "ℰ", F: "ℱ", H: "ℋ", I: "ℐ", L: "ℒ", M: "ℳ", R: "ℛ",
    e: "ℯ", g: "ℊ", o: "ℴ" }],
  mathfrak: [0x1d504, 0x1d51e, 0, { C: "ℭ", H: "ℌ", I: "ℑ", R: "ℜ", Z: "ℨ" }],
  mathsf: [0x1d5a0, 0x1d5ba, 0x1d7e2, {}],
  mathtt: [0x1d670, 0x1d68a, 0x1d7f6, {}],
});
const UPRIGHT = new Set(["mathrm", "mathup", "rm"]);
const TEXT_COMMANDS = new Set(["text", "textrm", "textit", "textbf", "textsf", "texttt", "textnormal", "mbox", "hbox"]);

// Environments: the delimiters around the table, and how its columns align.
const ENVIRONMENTS = table({
  matrix: ["", ""], smallmatrix: ["", ""], pmatrix: ["(", ")"], bmatrix: ["[", "]"],
  Bmatrix: ["{", "}"], vmatrix: ["|", "|"], Vmatrix: ["‖", "‖"], cases: ["{", ""],
  array: ["", ""], aligned: ["", ""], align: ["", ""], "align*": ["", ""], gathered: ["", ""],
  split: ["", ""], equation: ["", ""], "equation*": ["", ""], gather: ["", ""], "gather*": ["", ""],
});

function el(tag, text, attrs) {
  const node = document.createElementNS(NS, tag);
  if (text !== undefined) node.textContent = text;
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  return node;
}

function row(children) {
  if (children.length === 1) return children[0];
  const r = el("mrow");
  r.append(...children);
  return r;
}

function styled(text, alphabet) {
  const [capital, small, digit, exceptions] = alphabet;
  let out = "";
  for (const ch of text) {
    if (exceptions[ch]) out += exceptions[ch];
    else if (ch >= "A" && ch <= "Z") out += String.fromCodePoint(capital + ch.charCodeAt(0) - 65);
    else if (ch >= "a" && ch <= "z") out += String.fromCodePoint(small + ch.charCodeAt(0) - 97);
    else if (ch >= "0" && ch <= "9" && digit) out += String.fromCodePoint(digit + ch.charCodeAt(0) - 48);
    else out += ch;
  }
  return out;
}

class TexParser {
  constructor(src) {
    this.s = src;
    this.i = 0;
    this.depth = 0;
    this.limitBases = new WeakSet(); // bases whose sub/superscripts go under/over
  }

  more() { return this.i < this.s.length; }
  peek() { return this.s[this.i]; }
  skipSpace() { while (this.more() && /\s/.test(this.peek())) this.i++; }
  at(text) { return this.s.startsWith(text, this.i); }

  // A command's name after the backslash: letters, or one other character ("\," "\{").
  readName() {
    const m = /^[a-zA-Z]+\*?/.exec(this.s.slice(this.i, this.i + 40));
    const name = m ? m[0] : this.s[this.i] || "";
    this.i += name.length;
    return name;
  }

  // Raw text inside {...} (for \text, \begin, \operatorname), braces balanced.
  readRawGroup() {
    this.skipSpace();
    if (this.peek() !== "{") return this.more() ? this.s[this.i++] : "";
    let depth = 0;
    const start = ++this.i;
    for (; this.more(); this.i++) {
      const c = this.peek();
      if (c === "\\") { this.i++; continue; }
      if (c === "{") depth++;
      else if (c === "}" && depth-- === 0) return this.s.slice(start, this.i++);
    }
    return this.s.slice(start);
  }

  // The command name of the next token, without consuming it ("" when it is not a command).
  peekCommand() {
    if (this.peek() !== "\\") return "";
    const m = /^\\([a-zA-Z]+)/.exec(this.s.slice(this.i, this.i + 40));
    return m ? m[1] : "";
  }

  // Atoms (with their scripts) until a closing token this list is inside of.
  parseList(stops) {
    if (++this.depth > MAX_DEPTH) throw new Error("TeX nested too deeply");
    const out = [];
    for (;;) {
      this.skipSpace();
      if (!this.more()) break;
      const c = this.peek();
      if (c === "}" && stops.has("}")) break;
      if (c === "&" && stops.has("&")) break;
      if (this.at("\\\\") && stops.has("\\\\")) break;
      const cmd = this.peekCommand();
      if (cmd === "right" && stops.has("right")) break;
      if (cmd === "end" && stops.has("end")) break;
      if (c === "}" || c === "&") { this.i++; continue; } // stray: drop it
      const atom = this.parseAtom();
      if (atom) out.push(this.parseScripts(atom));
    }
    this.depth--;
    return out;
  }

  parseGroup() {
    this.i++; // {
    const kids = this.parseList(new Set(["}"]));
    if (this.peek() === "}") this.i++;
    return row(kids.length ? kids : [el("mrow")]);
  }

  // One argument: a {group}, a command, or a single character (x^23 is x² followed by 3).
  parseArg() {
    this.skipSpace();
    if (!this.more()) return el("mrow");
    const c = this.peek();
    if (c === "{") return this.parseGroup();
    if (c === "\\") return this.parseCommand() || el("mrow");
    this.i++;
    if (/[0-9]/.test(c)) return el("mn", c);
    return this.charAtom(c);
  }

  charAtom(c) {
    if (/\p{L}/u.test(c)) return el("mi", c);
    if ("()[]|".includes(c)) return el("mo", c, { stretchy: "false" });
    if (c === "-") return el("mo", "−");
    if (c === "*") return el("mo", "∗");
    if (c === "~") return el("mspace", undefined, { width: "0.25em" });
    return el("mo", c);
  }

  parseAtom() {
    const c = this.peek();
    if (c === "{") return this.parseGroup();
    if (c === "\\") return this.parseCommand();
    if (c === "^" || c === "_") return el("mrow"); // a script with nothing before it
    if (c === "'") { this.i++; return el("mo", "′"); }
    const num = /^[0-9]+(?:\.[0-9]+)?/.exec(this.s.slice(this.i, this.i + 64));
    if (num) { this.i += num[0].length; return el("mn", num[0]); }
    const ch = String.fromCodePoint(this.s.codePointAt(this.i));
    this.i += ch.length;
    return this.charAtom(ch);
  }

  parseScripts(base) {
    let sub = null;
    let sup = null;
    for (;;) {
      this.skipSpace();
      const c = this.peek();
      if (c === "^" && !sup) { this.i++; sup = this.parseArg(); }
      else if (c === "_" && !sub) { this.i++; sub = this.parseArg(); }
      else if (c === "'" && !sup) {
        let primes = "";
        while (this.peek() === "'") { primes += "′"; this.i++; }
        sup = el("mo", primes);
        if (this.peek() === "^") { this.i++; sup = row([sup, this.parseArg()]); }
      } else break;
    }
    if (!sub && !sup) return base;
    const under = this.limitBases.has(base);
    const tag = sub && sup ? (under ? "munderover" : "msubsup") : sub ? (under ? "munder" : "msub") : (under ? "mover" : "msup");
    const node = el(tag);
    node.append(base, ...[sub, sup].filter(Boolean));
    return node;
  }

  // A delimiter after \left, \right, \big...: a character or a command such as \{ or \langle.
  readDelimiter() {
    this.skipSpace();
    if (this.peek() === "\\") {
      this.i++;
      const name = this.readName();
      return OPERATORS.get(name) ?? (name === "." ? "" : name);
    }
    const c = this.s[this.i++] || "";
    return c === "." ? "" : c;
  }

  parseCommand() {
    this.i++; // backslash
    const name = this.readName().replace(/\*$/, ""); // \operatorname* is \operatorname here
    if (name === "") return null;
    if (GREEK.get(name)) {
      // Capital Greek is upright in TeX; a single-letter <mi> would be italic.
      return el("mi", GREEK.get(name), name[0] === name[0].toUpperCase() ? { mathvariant: "normal" } : {});
    }
    if (IDENTIFIERS.get(name)) return el("mi", IDENTIFIERS.get(name));
    if (OPERATORS.get(name)) return el("mo", OPERATORS.get(name));
    if (BIG_OPERATORS.get(name)) {
      const op = el("mo", BIG_OPERATORS.get(name), { largeop: "true", movablelimits: "true" });
      this.limitBases.add(op);
      return op;
    }
    if (INTEGRALS.get(name)) return el("mo", INTEGRALS.get(name), { largeop: "true" });
    if (FUNCTIONS.has(name)) {
      if (LIMIT_FUNCTIONS.has(name)) {
        const op = el("mo", name, { movablelimits: "true", form: "prefix" });
        this.limitBases.add(op);
        return op;
      }
      return el("mi", name);
    }
    if (SPACES.get(name)) return el("mspace", undefined, { width: SPACES.get(name) });
    if (IGNORED.has(name)) return null;
    switch (name) {
      case "frac": case "dfrac": case "tfrac": case "cfrac": {
        const frac = el("mfrac");
        frac.append(this.parseArg(), this.parseArg());
        if (name === "dfrac" || name === "cfrac") frac.setAttribute("displaystyle", "true");
        if (name === "tfrac") frac.setAttribute("displaystyle", "false");
        return frac;
      }
      case "binom": case "dbinom": case "tbinom": {
        const frac = el("mfrac", undefined, { linethickness: "0" });
        frac.append(this.parseArg(), this.parseArg());
        return row([el("mo", "("), frac, el("mo", ")")]);
      }
      case "sqrt": {
        this.skipSpace();
        if (this.peek() === "[") {
          // \sqrt[n]{x}: the index runs to the closing bracket.
          const close = this.s.indexOf("]", this.i);
          const indexSrc = close < 0 ? "" : this.s.slice(this.i + 1, close);
          this.i = close < 0 ? this.s.length : close + 1;
          const root = el("mroot");
          root.append(this.parseArg(), new TexParser(indexSrc).parseRow());
          return root;
        }
        const sqrt = el("msqrt");
        sqrt.append(this.parseArg());
        return sqrt;
      }
      case "left": {
        const open = this.readDelimiter();
        const kids = this.parseList(new Set(["right"]));
        let close = "";
        if (this.peekCommand() === "right") { this.i += "\\right".length; close = this.readDelimiter(); }
        const fence = (d) => el("mo", d, { stretchy: "true", fence: "true" });
        return row([...(open ? [fence(open)] : []), row(kids.length ? kids : [el("mrow")]), ...(close ? [fence(close)] : [])]);
      }
      case "right": { this.readDelimiter(); return null; } // without its \left
      case "big": case "Big": case "bigg": case "Bigg": case "bigl": case "bigr": case "Bigl":
      case "Bigr": case "biggl": case "biggr": case "Biggl": case "Biggr": case "bigm": case "Bigm": {
        const size = { big: "1.2em", Big: "1.8em", bigg: "2.4em", Bigg: "3em" }[name.replace(/[lrm]$/, "")];
        return el("mo", this.readDelimiter(), { stretchy: "true", minsize: size, maxsize: size });
      }
      case "operatorname": return el("mi", this.readRawGroup().replace(/\\,|\\ /g, " ").trim());
      case "not": {
        this.skipSpace();
        const next = this.parseArg();
        if (next.textContent === "=") return el("mo", "≠");
        if (next.textContent === "∈") return el("mo", "∉");
        return el("mo", next.textContent + "\u0338");
      }
      case "mod": case "bmod": return el("mo", "mod", { lspace: "0.2222em", rspace: "0.2222em" });
      case "pmod": {
        const arg = this.parseArg();
        return row([el("mspace", undefined, { width: "0.4em" }), el("mo", "("), el("mo", "mod"), arg, el("mo", ")")]);
      }
      case "overset": case "stackrel": case "underset": {
        const over = this.parseArg();
        const node = el(name === "underset" ? "munder" : "mover");
        node.append(this.parseArg(), over);
        return node;
      }
      case "boxed": case "fbox": {
        const box = el("mrow", undefined, { class: "tex-boxed" });
        box.append(name === "fbox" ? el("mtext", this.readRawGroup()) : this.parseArg());
        return box;
      }
      case "overline": case "underline": { // a rule drawn by CSS: fonts rarely stretch U+203E
        const ruled = el("mrow", undefined, { class: `tex-${name}` });
        ruled.append(this.parseArg());
        return ruled;
      }
      case "phantom": {
        const ghost = el("mrow", undefined, { class: "tex-phantom" });
        ghost.append(this.parseArg());
        return ghost;
      }
      case "begin": return this.parseEnvironment(this.readRawGroup().trim());
      case "end": { this.readRawGroup(); return null; } // without its \begin
      case "\\": return null; // a line break outside an environment
    }
    if (ACCENTS.get(name) || UNDER_ACCENTS.get(name)) {
      const under = Boolean(UNDER_ACCENTS.get(name));
      const node = el(under ? "munder" : "mover", undefined, under ? { accentunder: "true" } : { accent: "true" });
      const stretchy = /^(wide|over|under)/.test(name) ? "true" : "false";
      node.append(this.parseArg(), el("mo", ACCENTS.get(name) ?? UNDER_ACCENTS.get(name), { stretchy }));
      return node;
    }
    if (TEXT_COMMANDS.has(name)) return el("mtext", this.readRawGroup().replace(/\\([{}$%&#_ ])/g, "$1"));
    if (UPRIGHT.has(name) || name === "mathit") {
      const group = this.parseArg();
      if (name !== "mathit") {
        for (const mi of [group, ...group.querySelectorAll("mi")]) {
          if (mi.localName === "mi") mi.setAttribute("mathvariant", "normal");
        }
      }
      return group;
    }
    if (ALPHABETS.get(name)) {
      const group = this.parseArg();
      for (const leaf of [group, ...group.querySelectorAll("mi, mn")]) {
        if (leaf.localName === "mi" || leaf.localName === "mn") leaf.textContent = styled(leaf.textContent, ALPHABETS.get(name));
      }
      return group;
    }
    // Unknown: show the command itself; its arguments, if any, follow as ordinary groups.
    return el("mtext", "\\" + name, { class: "tex-unknown" });
  }

  parseEnvironment(name) {
    if (name === "array") this.readRawGroup(); // the column spec: alignment is ours to choose
    const rows = [];
    let cells = [];
    for (;;) {
      const kids = this.parseList(new Set(["&", "\\\\", "end"]));
      const cell = el("mtd");
      cell.append(row(kids.length ? kids : [el("mrow")]));
      cells.push(cell);
      if (this.peek() === "&") { this.i++; continue; }
      if (this.at("\\\\")) {
        this.i += 2;
        this.skipSpace();
        if (this.peek() === "[") { const close = this.s.indexOf("]", this.i); if (close > 0) this.i = close + 1; } // \\[2pt]
        rows.push(cells);
        cells = [];
        continue;
      }
      rows.push(cells);
      if (this.peekCommand() === "end") { this.i += "\\end".length; this.readRawGroup(); }
      break;
    }
    // A trailing \\ leaves an empty last row: drop it.
    const last = rows[rows.length - 1];
    if (rows.length > 1 && last.length === 1 && last[0].textContent === "") rows.pop();
    const aligned = /^(aligned|align\*?|split)$/.test(name);
    const grid = el("mtable", undefined, ENVIRONMENTS.has(name) ? { class: `tex-${name.replace("*", "")}` } : {});
    for (const cellsOfRow of rows) {
      const tr = el("mtr");
      cellsOfRow.forEach((cell, col) => {
        // aligned: right-aligned, then left-aligned columns, around each "&".
        if (aligned) cell.setAttribute("class", col % 2 === 0 ? "tex-right" : "tex-left");
        else if (name === "cases") cell.setAttribute("class", "tex-left");
        tr.append(cell);
      });
      grid.append(tr);
    }
    if (!ENVIRONMENTS.has(name)) return row([el("mtext", `\\begin{${name}}`, { class: "tex-unknown" }), grid]);
    const [open, close] = ENVIRONMENTS.get(name);
    const fence = (d) => el("mo", d, { stretchy: "true", fence: "true" });
    return row([...(open ? [fence(open)] : []), grid, ...(close ? [fence(close)] : [])]);
  }

  parseRow() {
    const kids = this.parseList(new Set());
    return row(kids.length ? kids : [el("mrow")]);
  }
}

// <math> for one formula; display=true for $$...$$ and \[...\].
export function renderTex(tex, display = false) {
  const math = el("math", undefined, display ? { display: "block" } : {});
  const semantics = el("semantics");
  let body;
  try {
    body = new TexParser(tex).parseRow();
  } catch {
    body = el("mtext", tex, { class: "tex-error" });
  }
  semantics.append(body, el("annotation", tex, { encoding: "application/x-tex" }));
  math.append(semantics);
  return math;
}
