// A console page in Node, for the unit tests (test/*.test.mjs), without a
// browser: src/main.ts bundled by esbuild and run against a small DOM of
// index.html's elements (elements, text nodes, attributes, the selectors
// the tests use), a fake fetch answered by the test and timers the test
// fires. Text is only ever text here: nothing parses HTML after the
// skeleton, so a tag in a string the page shows stays in textContent.
import { build } from "esbuild";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ui = join(dirname(fileURLToPath(import.meta.url)), "..");

class Node {
  constructor() {
    this.childNodes = [];
    this.parentNode = null;
  }
  get textContent() {
    return this.childNodes.map((c) => c.textContent).join("");
  }
  set textContent(v) {
    this.replaceChildren(String(v));
  }
  append(...cs) {
    for (const c of cs) {
      const n = c instanceof Node ? c : new Text(String(c));
      if (n.parentNode) n.parentNode.childNodes.splice(n.parentNode.childNodes.indexOf(n), 1);
      n.parentNode = this;
      this.childNodes.push(n);
    }
  }
  replaceChildren(...cs) {
    for (const c of this.childNodes) c.parentNode = null;
    this.childNodes = [];
    this.append(...cs);
  }
}

class Text extends Node {
  constructor(data) {
    super();
    this.data = data;
  }
  get textContent() {
    return this.data;
  }
  set textContent(v) {
    this.data = String(v);
  }
}

class Element extends Node {
  constructor(tag) {
    super();
    this.tagName = tag.toLowerCase();
    this.attrs = new Map();
    this.style = {};
    this.listeners = {};
    this.value = "";
  }
  setAttribute(k, v) {
    this.attrs.set(k, String(v));
  }
  getAttribute(k) {
    return this.attrs.has(k) ? this.attrs.get(k) : null;
  }
  get id() {
    return this.getAttribute("id") ?? "";
  }
  get className() {
    return this.getAttribute("class") ?? "";
  }
  set className(v) {
    this.setAttribute("class", v);
  }
  get hidden() {
    return this.attrs.has("hidden");
  }
  set hidden(v) {
    if (v) this.attrs.set("hidden", "");
    else this.attrs.delete("hidden");
  }
  get children() {
    return this.childNodes.filter((c) => c instanceof Element);
  }
  addEventListener(type, f) {
    (this.listeners[type] ??= []).push(f);
  }
  focus() {}
  // Selectors of one compound: tag, #id, .class and [attr] or [attr="v"].
  matches(sel) {
    const m = /^([a-z0-9]*)((?:[#.][\w-]+|\[[\w-]+(?:="[^"]*")?\])*)$/i.exec(sel.trim());
    if (!m) throw new Error(`selector not supported here: ${sel}`);
    if (m[1] && m[1].toLowerCase() !== this.tagName) return false;
    for (const [, kind, name, value] of m[2].matchAll(/([#.]|\[)([\w-]+)(?:="([^"]*)")?\]?/g)) {
      if (kind === "#" && this.id !== name) return false;
      if (kind === "." && !this.className.split(/\s+/).includes(name)) return false;
      if (kind === "[" && (!this.attrs.has(name) || (value !== undefined && this.attrs.get(name) !== value))) return false;
    }
    return true;
  }
  // Descendant combinators only ("#audit td").
  querySelectorAll(sel) {
    const parts = sel.trim().split(/\s+/);
    let found = [this];
    for (const part of parts) {
      const next = [];
      for (const root of found) {
        const walk = (e) => {
          for (const c of e.children) {
            if (c.matches(part) && !next.includes(c)) next.push(c);
            walk(c);
          }
        };
        walk(root);
      }
      found = next;
    }
    return found;
  }
  querySelector(sel) {
    return this.querySelectorAll(sel)[0] ?? null;
  }
}

const VOID = new Set(["meta", "link", "input", "br", "img"]);

// parse builds index.html's elements under root: tags, attributes and
// text, enough for its simple markup.
function parse(html, root) {
  const stack = [root];
  for (const [, close, tag, attrs, text] of html.matchAll(/<(\/?)([a-z0-9]+)([^>]*)>|([^<]+)/gi)) {
    const top = stack[stack.length - 1];
    if (text !== undefined) {
      if (text.trim()) top.append(text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&"));
      continue;
    }
    if (close) {
      while (stack.length > 1 && stack.pop().tagName !== tag.toLowerCase());
      continue;
    }
    const e = new Element(tag);
    for (const [, k, v] of attrs.matchAll(/([\w-]+)(?:="([^"]*)")?/g)) e.setAttribute(k, v ?? "");
    top.append(e);
    if (!VOID.has(e.tagName) && !attrs.trim().endsWith("/")) stack.push(e);
  }
}

let bundle;
let loads = 0;

/**
 * Loads the console page with answer(path) answering its calls (a
 * {status, body} whose body is JSON-encoded unless a string, or
 * undefined: 404) and returns the page: its document, the paths called,
 * settle() (waits until the page has nothing left to do but its timer),
 * and tick() (fires its poll timer, then settles).
 */
export async function loadPage(answer, { storage = {} } = {}) {
  bundle ??= (await build({ absWorkingDir: ui, entryPoints: ["src/main.ts"], bundle: true, format: "esm", write: false, logLevel: "warning" }))
    .outputFiles[0].text;
  const html = await readFile(join(ui, "index.html"), "utf8");
  const root = new Element("html");
  parse(html.replace(/^<!doctype[^>]*>/i, ""), root);
  const document = {
    documentElement: root,
    body: root.querySelector("body"),
    createElement: (tag) => new Element(tag),
    createElementNS: (_ns, tag) => new Element(tag),
    getElementById: (id) => root.querySelector(`#${id}`),
  };
  const calls = [];
  let pending = 0;
  let timer = null;
  const window = {
    setTimeout: (f) => {
      timer = f;
      return 1;
    },
    clearTimeout: () => {
      timer = null;
    },
  };
  const store = new Map(Object.entries(storage));
  Object.assign(globalThis, {
    Node,
    document,
    window,
    sessionStorage: {
      getItem: (k) => (store.has(k) ? store.get(k) : null),
      setItem: (k, v) => store.set(k, String(v)),
      removeItem: (k) => store.delete(k),
    },
    fetch: async (path, init) => {
      pending++;
      try {
        calls.push({ path, headers: { ...(init?.headers ?? {}) } });
        const a = (await answer(path, init)) ?? { status: 404, body: { error: "not found" } };
        const text = typeof a.body === "string" ? a.body : JSON.stringify(a.body);
        return new Response(text, { status: a.status ?? 200 });
      } finally {
        pending--;
      }
    },
  });
  const settle = async () => {
    // The page's work is chains of promises on fetch answers: run the
    // event loop until none is in flight and nothing changes for a while.
    for (let quiet = 0; quiet < 20; ) {
      await new Promise((r) => setImmediate(r));
      quiet = pending === 0 ? quiet + 1 : 0;
    }
  };
  await import(`data:text/javascript;base64,${Buffer.from(`${bundle}\n// load ${++loads}\n`).toString("base64")}`);
  await settle();
  return {
    document,
    calls,
    settle,
    tick: async () => {
      const f = timer;
      timer = null;
      if (!f) throw new Error("the page has no poll scheduled");
      f();
      await settle();
    },
    $: (sel) => root.querySelector(sel),
    $$: (sel) => root.querySelectorAll(sel),
  };
}

/** A /v1/console document with the given parts over an empty server. */
export function consoleDoc(parts = {}) {
  const { status, ...rest } = parts;
  return {
    time: "2026-01-01T00:00:00Z",
    interval_ms: 1000,
    status: {
      ready: true,
      config: { source: "file:///models.json", poll_interval: "10s", models: 0 },
      models: [],
      ...status,
    },
    contracts: [],
    model_series: {},
    contract_series: {},
    ...rest,
  };
}
