// The app shell: the header with the navigation and the connection state, a hash router, and
// the pairing gate. Pages live in ./pages, one module each: `{title, render(root, ctx)}`,
// where render may return a function that cleans up when the page is left.

import {api} from "./api.js";
import {h, clear, debounce} from "./dom.js";
import {Live} from "./live.js";

const PAGES = [
  ["chat", "Chat"],
  ["approvals", "Approvals"],
  ["mail", "Mail"],
  ["memory", "Memory"],
  ["watches", "Watches"],
  ["journal", "Journal"],
  ["usage", "Usage"],
  ["audit", "Audit"],
  ["system", "System"],
  ["devices", "Devices"],
];
const DEFAULT_PAGE = "mail";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const state = document.getElementById("conn");
const toasts = document.getElementById("toasts");
const badge = h("span", {class: "badge", hidden: true});

let cleanup = null;
let live = null;
let renders = 0;
let unpaired = false;

function route() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [name, query] = raw.split("?");
  const page = PAGES.some(([p]) => p === name) ? name : DEFAULT_PAGE;
  return {page, params: new URLSearchParams(query || "")};
}

/** Sets the page's parameters in the address without reloading the page. */
function setParams(params) {
  const {page} = route();
  const q = new URLSearchParams(params).toString();
  history.replaceState(null, "", `#/${page}${q ? `?${q}` : ""}`);
}

/** A short message; errors stay until dismissed. The container is the live region. */
function toast(text, kind) {
  const t = h("div", {class: `toast ${kind || ""}`}, text);
  if (kind === "error") {
    t.append(" ", h("button", {type: "button", class: "dismiss", onclick: () => t.remove()}, "Dismiss"));
  } else {
    setTimeout(() => t.remove(), 6000);
  }
  toasts.append(t);
  while (toasts.children.length > 5) toasts.firstElementChild.remove();
}

function showState(s, wait) {
  state.dataset.state = s;
  state.textContent =
    s === "live" ? "live" : s === "connecting" ? "connecting…" : `offline, retrying in ${Math.ceil(wait / 1000)} s`;
}

function drawNav(current) {
  clear(
    nav,
    PAGES.map(([p, label]) =>
      h(
        "a",
        {href: `#/${p}`, "aria-current": p === current ? "page" : null},
        label,
        p === "approvals" ? badge : null,
      ),
    ),
  );
}

function leavePage() {
  if (cleanup) {
    try {
      cleanup();
    } catch (e) {
      console.error(e);
    }
    cleanup = null;
  }
}

async function render() {
  const mine = ++renders;
  const {page, params} = route();
  drawNav(page);
  leavePage();
  const root = h("section", {class: `page page-${page}`, "aria-labelledby": "page-title"});
  clear(main, root);
  try {
    const mod = await import(`./pages/${page}.js`);
    if (mine !== renders) return; // left before it loaded
    document.title = `${mod.default.title} · Steward`;
    const done = (await mod.default.render(root, {live, params, setParams, toast, go})) || null;
    if (mine !== renders) {
      // Left while it rendered: its cleanup runs now, not never.
      if (done) done();
      return;
    }
    cleanup = done;
    // The new page's heading takes the focus, as a page load would.
    const title = root.querySelector("#page-title");
    if (title) {
      title.setAttribute("tabindex", "-1");
      title.focus({preventScroll: true});
    }
  } catch (e) {
    if (mine === renders) clear(root, h("p", {class: "notice error", role: "alert"}, `This page failed: ${e.message}`));
  }
}

function go(hash) {
  location.hash = hash;
}

// One count after a burst of approval events (a replay brings up to a thousand).
const recount = debounce(() => {
  api("/approvals", {query: {status: "pending", limit: 100}})
    .then((l) => setBadge(l.length))
    .catch(() => {});
}, 300);

function countPending(e) {
  if (e.type === "snapshot") setBadge(e.pending_approvals.length);
  else if (e.type === "approval") recount();
}

function setBadge(n) {
  badge.hidden = n === 0;
  clear(badge, n >= 100 ? "99+" : String(n), h("span", {class: "sr-only"}, " waiting"));
}

/** The pairing was lost (revoked, expired): stop everything once and ask for a new one. */
function lostPairing() {
  if (unpaired) return;
  unpaired = true;
  renders++;
  leavePage();
  if (live) live.stop();
  window.removeEventListener("hashchange", render);
  pairing();
}

function pairing() {
  const code = h("input", {id: "pair-code", autocomplete: "off", required: true, "aria-describedby": "pair-help"});
  const name = h("input", {id: "pair-name", value: "browser", required: true});
  const out = h("p", {role: "status"});
  const form = h(
    "form",
    {
      class: "card pair",
      onsubmit: async (ev) => {
        ev.preventDefault();
        try {
          await api("/pair", {method: "POST", body: {code: code.value.trim(), name: name.value.trim()}});
          location.hash = `#/${DEFAULT_PAGE}`;
          location.reload();
        } catch (e) {
          out.textContent = e.message;
        }
      },
    },
    h("h1", {id: "page-title"}, "Pair this browser"),
    h(
      "p",
      {id: "pair-help"},
      "Steward only answers browsers it has paired. Open the pairing link that `steward serve` or `steward demo` printed, or enter its code here (a new one: `POST /pairing-codes`, or the Devices page of a paired browser).",
    ),
    h("label", {for: "pair-code"}, "Code"),
    code,
    h("label", {for: "pair-name"}, "Name of this device"),
    name,
    h("button", {type: "submit"}, "Pair"),
    out,
  );
  drawNav(null);
  nav.hidden = true;
  clear(main, form);
}

async function start() {
  if ("serviceWorker" in navigator) {
    // The one script URL the app vouches for (the CSP requires Trusted Types): nothing else,
    // and no HTML, ever goes through a policy.
    const tt = window.trustedTypes;
    const policy = tt
      ? tt.createPolicy("steward", {
          createScriptURL: (u) => {
            if (u !== "/sw.js") throw new TypeError(`not the service worker: ${u}`);
            return u;
          },
        })
      : null;
    navigator.serviceWorker.register(policy ? policy.createScriptURL("/sw.js") : "/sw.js").catch(() => {});
  }
  // Paired? One cheap authenticated read (it also gives the badge its first count).
  try {
    await api("/approvals", {query: {status: "pending", limit: 1}});
  } catch (e) {
    if (e.status === 401) {
      unpaired = true;
      pairing();
      return;
    }
  }
  window.addEventListener("steward:unpaired", lostPairing);
  live = new Live(showState);
  live.on(countPending);
  live.start();
  window.addEventListener("hashchange", render);
  render();
}

start();
