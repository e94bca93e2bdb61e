// Audit: the redacted trail of what happened (who, what, which tool, how risky), newest
// first, filtered, a page at a time.

import {api} from "../api.js";
import {h, clear, when, pill, json, notice} from "../dom.js";
import {pagedTable} from "../paged.js";

const PAGE = 50;
const RISK_KIND = {low: "unknown", medium: "warning", high: "error"};
const TEXT_FILTERS = [
  ["actor", "Actor"],
  ["event_type", "Event type"],
  ["tool", "Tool"],
  ["chat", "Chat"],
  ["text", "Payload contains"],
];

/** Unix seconds as a `datetime-local` value in the browser's zone. */
function toLocalInput(secs) {
  const n = Number(secs);
  if (!secs || !Number.isFinite(n)) return "";
  const d = new Date(n * 1000);
  const p = (x) => String(x).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** A `datetime-local` value as Unix seconds ("" when empty or invalid). */
function toSecs(v) {
  if (!v) return "";
  const t = new Date(v).getTime();
  return Number.isNaN(t) ? "" : String(Math.floor(t / 1000));
}

export default {
  title: "Audit",

  render(root, ctx) {
    const aborter = new AbortController();
    const signal = aborter.signal;

    // ---- the filters ----
    const inputs = {};
    for (const [k] of TEXT_FILTERS) {
      inputs[k] = h("input", {id: `audit-${k}`, autocomplete: "off", value: ctx.params.get(k) || ""});
    }
    inputs.actor.setAttribute("placeholder", "owner, agent:…");
    inputs.event_type.setAttribute("placeholder", "tool.executed, policy.decision…");
    const risk = h(
      "select",
      {id: "audit-risk"},
      h("option", {value: ""}, "Any"),
      ["low", "medium", "high"].map((r) => h("option", {value: r, selected: r === ctx.params.get("risk")}, r)),
    );
    const after = h("input", {id: "audit-after", type: "datetime-local", value: toLocalInput(ctx.params.get("after"))});
    const before = h("input", {id: "audit-before", type: "datetime-local", value: toLocalInput(ctx.params.get("before"))});
    const apply = h("button", {type: "submit", class: "primary"}, "Apply");
    const reset = h("button", {type: "button"}, "Clear");

    /** The applied filters (what the last submit said). */
    let filters = {};

    function read() {
      const f = {};
      for (const [k] of TEXT_FILTERS) {
        const v = inputs[k].value.trim();
        if (v) f[k] = v;
      }
      if (risk.value) f.risk = risk.value;
      const a = toSecs(after.value);
      const b = toSecs(before.value);
      if (a) f.after = a;
      if (b) f.before = b;
      return f;
    }

    const form = h(
      "form",
      {
        "aria-label": "Audit filters",
        onsubmit: (ev) => {
          ev.preventDefault();
          filters = read();
          ctx.setParams(filters);
          records.load(true);
        },
      },
      h(
        "div",
        {class: "toolbar"},
        TEXT_FILTERS.map(([k, label]) => h("label", {for: `audit-${k}`}, label, inputs[k])),
        h("label", {for: "audit-risk"}, "Risk", risk),
        h("label", {for: "audit-after"}, "From", after),
        h("label", {for: "audit-before"}, "Until", before),
        apply,
        reset,
      ),
    );
    reset.addEventListener("click", () => {
      for (const [k] of TEXT_FILTERS) inputs[k].value = "";
      risk.value = "";
      after.value = "";
      before.value = "";
      filters = {};
      ctx.setParams({});
      records.load(true);
    });

    // ---- the records ----
    const warnBox = h("div");

    function row(r) {
      const details = [];
      if (r.chat) details.push(h("div", {class: "muted"}, `chat ${r.chat}`));
      if (r.correlation_id) details.push(h("div", {class: "muted"}, `correlation ${r.correlation_id}`));
      if (r.payload !== null && r.payload !== undefined) {
        details.push(
          h("details", null, h("summary", null, "Payload"), h("pre", {class: "json", tabindex: "0"}, json(r.payload))),
        );
      }
      return h(
        "tr",
        {dataset: {auditId: String(r.id)}},
        h("td", null, h("time", {datetime: new Date(r.at * 1000).toISOString()}, when(r.at))),
        h("td", null, r.actor),
        h("td", null, r.event_type),
        h("td", null, r.tool || ""),
        h("td", null, pill(r.risk, RISK_KIND[r.risk] || "unknown")),
        h("td", null, details),
      );
    }

    const records = pagedTable({
      columns: ["Time", "Actor", "Event", "Tool", "Risk", "Details"],
      row,
      fetchPage: (offset, limit) => api("/audit", {query: {...filters, limit, offset}, signal}),
      take: (page) => {
        const failures = (page && page.write_failures) || 0;
        clear(
          warnBox,
          failures
            ? notice(
                `${failures} audit write${failures === 1 ? "" : "s"} failed since Steward started: the trail may be missing them.`,
                "error",
              )
            : null,
        );
        return (page && page.events) || [];
      },
      empty: () => (Object.keys(filters).length ? "No record matches these filters." : "No record yet."),
      busy: (b) => {
        apply.disabled = b;
      },
      pageSize: PAGE,
      toast: ctx.toast,
      signal,
    });

    clear(
      root,
      h("h1", {id: "page-title"}, "Audit"),
      h("p", {class: "muted"}, "What Steward, its agents and you did, newest first, as recorded (redacted)."),
      form,
      warnBox,
      h(
        "section",
        {class: "card", "aria-label": "Audit records"},
        records.box,
        h("div", {class: "actions"}, records.more),
      ),
    );

    filters = read();
    records.load(true);

    return () => aborter.abort();
  },
};
