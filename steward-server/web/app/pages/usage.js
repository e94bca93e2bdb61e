// Usage & cost: what the models cost over a window, by day (a bar chart drawn as SVG), by
// model, service and action, and the tool calls of outside agents (MCP clients).

import {api} from "../api.js";
import {h, clear, notice} from "../dom.js";

const NS = "http://www.w3.org/2000/svg";
const WINDOWS = [["24h", "Last 24 hours"], ["7d", "Last 7 days"], ["30d", "Last 30 days"], ["all", "Everything"]];
const MEASURES = [
  ["cost_usd", "Cost (USD)", (v) => `$${v.toFixed(4)}`],
  ["requests", "Requests", (v) => String(v)],
  ["input_tokens", "Input tokens", (v) => String(v)],
  ["output_tokens", "Output tokens", (v) => String(v)],
];

function svg(tag, attrs, ...kids) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const k of kids) el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return el;
}

/** Bars of `measure` per group, with a text alternative (the same numbers as a table). */
function chart(groups, [key, label, fmt]) {
  const w = 640;
  const barH = 22;
  const height = Math.max(1, groups.length) * (barH + 6) + 10;
  const max = Math.max(1e-9, ...groups.map((g) => g[key]));
  const box = svg("svg", {viewBox: `0 0 ${w} ${height}`, width: "100%", role: "img", "aria-label": `${label} by day`, class: "chart"});
  groups.forEach((g, i) => {
    const y = 5 + i * (barH + 6);
    const len = Math.max(2, ((w - 260) * g[key]) / max);
    box.append(
      svg("text", {x: 0, y: y + barH * 0.7, "font-size": 13, fill: "currentColor"}, g.key),
      svg("rect", {x: 110, y, width: len, height: barH, rx: 3, fill: "var(--accent)"}),
      svg("text", {x: 116 + len, y: y + barH * 0.7, "font-size": 13, fill: "currentColor"}, fmt(g[key])),
    );
  });
  return box;
}

function table(title, groups) {
  if (!groups.length) return null;
  return h(
    "div",
    {class: "card"},
    h("h2", {}, title),
    h(
      "table",
      {},
      h(
        "thead",
        {},
        h("tr", {}, ["", "Requests", "Failed", "Input", "Output", "Cost", "Mean latency"].map((t) => h("th", {scope: "col"}, t || "Key"))),
      ),
      h(
        "tbody",
        {},
        groups.map((g) =>
          h(
            "tr",
            {},
            h("td", {}, g.key),
            h("td", {}, String(g.requests)),
            h("td", {}, String(g.failed)),
            h("td", {}, String(g.input_tokens)),
            h("td", {}, String(g.output_tokens)),
            h("td", {}, `$${g.cost_usd.toFixed(4)}`),
            h("td", {}, `${Math.round(g.mean_latency_ms)} ms`),
          ),
        ),
      ),
    ),
  );
}

export default {
  title: "Usage",
  render(root, ctx) {
    const since = h(
      "select",
      {id: "usage-since"},
      WINDOWS.map(([v, t]) => h("option", {value: v, selected: (ctx.params.get("since") || "7d") === v}, t)),
    );
    const measure = h(
      "select",
      {id: "usage-measure"},
      MEASURES.map(([v, t]) => h("option", {value: v, selected: (ctx.params.get("measure") || "cost_usd") === v}, t)),
    );
    const out = h("div", {id: "usage"}, notice("Loading…"));

    async function load() {
      ctx.setParams({since: since.value, measure: measure.value});
      let r;
      try {
        r = await api("/usage", {query: {since: since.value}});
      } catch (e) {
        clear(out, notice(e.message, "error"));
        return;
      }
      const m = MEASURES.find(([k]) => k === measure.value) || MEASURES[0];
      const t = r.total;
      clear(
        out,
        h(
          "div",
          {class: "card"},
          h("h2", {}, "Total"),
          h(
            "p",
            {},
            `${t.requests} requests (${t.failed} failed), ${t.input_tokens} tokens in, ${t.output_tokens} out, $${t.cost_usd.toFixed(4)}.`,
          ),
          r.unpriced ? h("p", {class: "muted"}, `${r.unpriced} requests used models without configured rates (counted as $0).`) : null,
          r.unattributed ? h("p", {class: "muted"}, `${r.unattributed} requests came without a service or action.`) : null,
        ),
        r.by_day.length
          ? h("div", {class: "card"}, h("h2", {}, `${m[1]} by day (UTC)`), chart(r.by_day, m))
          : notice("No model was called in this window."),
        table("By day (UTC)", r.by_day),
        table("By model", r.by_model),
        table("By service", r.by_service),
        table("By action", r.by_action),
        r.by_agent.length
          ? h(
              "div",
              {class: "card"},
              h("h2", {}, "Outside agents (MCP)"),
              h(
                "table",
                {},
                h("thead", {}, h("tr", {}, ["Agent", "Calls", "Ran", "Pending", "Declined", "Denied", "Failed"].map((x) => h("th", {scope: "col"}, x)))),
                h(
                  "tbody",
                  {},
                  r.by_agent.map((a) =>
                    h("tr", {}, [a.agent, a.calls, a.ran, a.pending, a.declined, a.denied, a.failed].map((x) => h("td", {}, String(x)))),
                  ),
                ),
              ),
            )
          : null,
      );
    }

    since.addEventListener("change", load);
    measure.addEventListener("change", load);
    clear(
      root,
      h("h1", {id: "page-title"}, "Usage & cost"),
      h(
        "div",
        {class: "toolbar"},
        h("label", {for: "usage-since"}, "Window", since),
        h("label", {for: "usage-measure"}, "Chart", measure),
      ),
      out,
    );
    load();
  },
};
