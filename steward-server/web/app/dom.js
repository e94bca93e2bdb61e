// Tiny DOM helpers. Every text goes in as a text node: nothing the server sends (mail, notes,
// tool results) is ever parsed as HTML.

/** An element: `h("button", {class: "x", onclick: f, disabled: true}, "text", child)`. */
export function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, kids);
  return el;
}

// Bidirectional overrides, embeddings and isolates (U+202A–U+202E, U+2066–U+2069): in mail
// they disguise text ("gnp.exe" shown as "exe.png"). Shown as their names instead, never
// obeyed; ordinary right-to-left text needs none of them.
const BIDI = /[\u202A-\u202E\u2066-\u2069]/g;
const BIDI_NAMES = {
  "\u202A": "LRE", "\u202B": "RLE", "\u202C": "PDF", "\u202D": "LRO", "\u202E": "RLO",
  "\u2066": "LRI", "\u2067": "RLI", "\u2068": "FSI", "\u2069": "PDI",
};

/** Text as it may be shown: bidi controls made visible. */
export function visible(s) {
  return String(s).replace(BIDI, (c) => `[${BIDI_NAMES[c]}]`);
}

function append(el, kids) {
  for (const k of kids) {
    if (k === null || k === undefined || k === false) continue;
    if (Array.isArray(k)) append(el, k);
    else el.append(k instanceof Node ? k : document.createTextNode(visible(k)));
  }
}

/** Replaces an element's children. */
export function clear(el, ...kids) {
  el.replaceChildren();
  append(el, kids);
  return el;
}

/** A time for people: unix seconds or an ISO string, in the browser's zone. */
export function when(t) {
  if (t === null || t === undefined || t === "") return "";
  const d = typeof t === "number" ? new Date(t * 1000) : new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return d.toLocaleString(undefined, {dateStyle: "medium", timeStyle: "short"});
}

/** "Name <addr>" of a sender-like object. */
export function person(p) {
  if (!p) return "";
  const addr = p.addr || p.address || "";
  return p.name ? `${p.name} <${addr}>` : addr;
}

/** A status pill. */
export function pill(text, kind) {
  return h("span", {class: `pill ${kind || ""}`}, text);
}

/** Pretty JSON for a <pre>. */
export function json(v) {
  try {
    return JSON.stringify(typeof v === "string" ? JSON.parse(v) : v, null, 2);
  } catch {
    return String(v);
  }
}

/** A message line for errors and empty states. */
export function notice(text, kind) {
  return h("p", {class: `notice ${kind || ""}`, role: kind === "error" ? "alert" : "status"}, text);
}

/** Calls `fn` at most once per `ms` of quiet (search as you type). */
export function debounce(fn, ms) {
  let t = 0;
  return (...a) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...a), ms);
  };
}
