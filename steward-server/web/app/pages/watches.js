// Watches: what Steward keeps an eye on (stop one), a time reminder to create, and the
// queued events the watches produced.

import {api} from "../api.js";
import {h, clear, when, pill, json, debounce} from "../dom.js";
import {pagedTable} from "../paged.js";

const PAGE = 50;
const STATUSES = ["active", "stopped", "expired", "completed"];
const STATUS_KIND = {active: "ok", completed: "ok", stopped: "unknown", expired: "unknown"};
const EVENT_KIND = {pending: "warning", delivered: "ok", failed: "error"};

/** A Date as RFC 3339 with the browser's explicit offset (`2026-12-24T18:00:00+01:00`). */
function rfc3339(d) {
  const p = (n) => String(Math.trunc(Math.abs(n))).padStart(2, "0");
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? "+" : "-";
  return (
    `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}` +
    `T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}` +
    `${sign}${p(off / 60)}:${p(off % 60)}`
  );
}

/** A `datetime-local` value for a Date (minutes). */
function localInput(d) {
  return rfc3339(d).slice(0, 16);
}

/** One rule in words. */
function ruleText(r) {
  const parts = [];
  if (r.event) parts.push(`on ${r.event}`);
  const t = r.trigger;
  if (t && t.kind === "time_reached") {
    parts.push(t.at ? `at ${when(t.at)}` : `${t.after_minutes} min after creation`);
  } else if (t && t.kind === "before_time") {
    parts.push(`${t.minutes} min before ${t.field}`);
  } else if (t) {
    parts.push(json(t));
  }
  const where = Object.entries(r.where || {});
  if (where.length) {
    parts.push(`where ${where.map(([k, v]) => `${k} = ${Array.isArray(v) ? v.join(" | ") : v}`).join(", ")}`);
  }
  if (r.once) parts.push("once");
  if (r.grants && r.grants.length) parts.push(`may run ${r.grants.map((g) => g.tool).join(", ")}`);
  if (r.continuation) parts.push(`retries up to ${r.continuation.max_attempts}×`);
  return `${r.id}: ${parts.join(" ") || "any event"}`;
}

/** What a watch looks at, in words. */
function resourceText(w) {
  if (w.source === "time") return `at ${when(w.resource_ref)}`;
  return w.resource_ref;
}

export default {
  title: "Watches",

  render(root, ctx) {
    const aborter = new AbortController();
    const signal = aborter.signal;
    let gone = false;

    // ---- create: a time reminder ----
    const whenIn = h("input", {
      id: "watch-when",
      type: "datetime-local",
      required: true,
      min: localInput(new Date()),
    });
    const what = h("input", {id: "watch-what", autocomplete: "off", required: true, maxlength: "500"});
    const createBtn = h("button", {type: "submit", class: "primary"}, "Set reminder");
    const createForm = h(
      "form",
      {
        class: "card",
        "aria-labelledby": "create-title",
        onsubmit: async (ev) => {
          ev.preventDefault();
          const text = what.value.trim();
          const at = whenIn.value ? new Date(whenIn.value) : null;
          if (!at || Number.isNaN(at.getTime())) {
            ctx.toast("Say when.", "error");
            whenIn.focus();
            return;
          }
          if (at.getTime() <= Date.now()) {
            ctx.toast("That time has passed: pick one in the future.", "error");
            whenIn.focus();
            return;
          }
          if (!text) {
            ctx.toast("Say what to remind you of.", "error");
            what.focus();
            return;
          }
          const definition = {
            source: "time",
            resource_ref: rfc3339(at),
            instruction: text,
            rules: [{id: "remind", event: "time.reached", once: true}],
          };
          createBtn.disabled = true;
          try {
            const r = await api("/watches/proposals", {method: "POST", body: definition, once: true});
            if (gone) return;
            if (r && r.outcome === "needs_approval") {
              ctx.toast("The reminder waits for your approval on the Approvals page.");
            } else {
              ctx.toast(`Reminder set for ${when(definition.resource_ref)}.`);
            }
            what.value = "";
            whenIn.value = "";
            watches.load(true);
          } catch (e) {
            if (e.name !== "AbortError") ctx.toast(e.message, "error");
          } finally {
            createBtn.disabled = false;
          }
        },
      },
      h("h2", {id: "create-title"}, "New reminder"),
      h(
        "div",
        {class: "toolbar"},
        h("label", {for: "watch-when"}, "When", whenIn),
        h("label", {for: "watch-what"}, "Remind me to", what),
        createBtn,
      ),
      h(
        "p",
        {class: "muted"},
        "Train watches start from the chat: they need the train reference that the train lookup gives.",
      ),
    );

    // ---- the watches ----
    const statusSel = h(
      "select",
      {id: "watch-status"},
      h("option", {value: ""}, "Any"),
      STATUSES.map((s) => h("option", {value: s, selected: s === ctx.params.get("status")}, s)),
    );

    function watchRow(w) {
      const stop = h("button", {type: "button", class: "danger"}, "Stop");
      stop.addEventListener("click", async () => {
        stop.disabled = true;
        try {
          const after = await api(`/watches/${encodeURIComponent(w.id)}/stop`, {method: "POST", once: true});
          if (gone) return;
          ctx.toast(`Watch ${w.id} stopped.`);
          row.replaceWith(watchRow(after || {...w, status: "stopped"}));
        } catch (e) {
          if (e.name !== "AbortError") ctx.toast(e.message, "error");
          stop.disabled = false;
        }
      });
      const rules = (w.rules || []).map(ruleText);
      const row = h(
        "tr",
        {dataset: {watchId: String(w.id)}},
        h("td", null, String(w.id)),
        h(
          "td",
          null,
          pill(w.status, STATUS_KIND[w.status] || "unknown"),
          w.last_error ? [" ", pill("source failing", "error")] : null,
        ),
        h("td", null, w.source),
        h(
          "td",
          null,
          h("div", {class: "body"}, w.instruction),
          h("div", {class: "muted"}, resourceText(w)),
          rules.length ? h("div", {class: "muted"}, rules.join("; ")) : null,
          w.last_error ? h("div", {class: "error"}, w.last_error) : null,
          w.attempt > 1 ? h("div", {class: "muted"}, `attempt ${w.attempt} of watch ${w.parent_id}`) : null,
        ),
        h("td", null, when(w.created_at)),
        h("td", null, when(w.expires_at)),
        h("td", null, w.status === "active" ? stop : null),
      );
      return row;
    }

    const watches = pagedTable({
      columns: ["Id", "Status", "Kind", "What", "Created", "Expires", () => h("span", null, "Actions")],
      row: watchRow,
      fetchPage: (offset, limit) => api("/watches", {query: {limit, offset, status: statusSel.value}, signal}),
      empty: () => (statusSel.value ? `No ${statusSel.value} watch.` : "No watch yet."),
      pageSize: PAGE,
      toast: ctx.toast,
      signal,
    });

    statusSel.addEventListener("change", () => {
      ctx.setParams(statusSel.value ? {status: statusSel.value} : {});
      watches.load(true);
    });

    // ---- the events ----
    function eventRow(q) {
      const e = q.event || {};
      return h(
        "tr",
        {dataset: {eventId: String(q.id)}},
        h("td", null, when(q.created_at)),
        h("td", null, String(q.watch_id)),
        h("td", null, e.type || ""),
        h("td", null, pill(q.status, EVENT_KIND[q.status] || "unknown")),
        h(
          "td",
          null,
          h("div", {class: "body"}, q.notification || e.fallback_text || ""),
          q.matched_rules && q.matched_rules.length
            ? h("div", {class: "muted"}, `rules: ${q.matched_rules.join(", ")}`)
            : null,
          q.delivered_at ? h("div", {class: "muted"}, `delivered ${when(q.delivered_at)}`) : null,
          q.last_error
            ? h("div", {class: "error"}, `${q.last_error} (${q.attempts} failed attempt${q.attempts === 1 ? "" : "s"})`)
            : null,
        ),
      );
    }

    const events = pagedTable({
      columns: ["Queued", "Watch", "Event", "Status", "Notification"],
      row: eventRow,
      fetchPage: (offset, limit) => api("/watches/events", {query: {limit, offset}, signal}),
      empty: "No event yet.",
      pageSize: PAGE,
      toast: ctx.toast,
      signal,
    });

    clear(
      root,
      h("h1", {id: "page-title"}, "Watches"),
      createForm,
      h(
        "section",
        {class: "card", "aria-labelledby": "watches-title"},
        h("h2", {id: "watches-title"}, "Your watches"),
        h("div", {class: "toolbar"}, h("label", {for: "watch-status"}, "Status", statusSel)),
        watches.box,
        h("div", {class: "actions"}, watches.more),
      ),
      h(
        "section",
        {class: "card", "aria-labelledby": "events-title"},
        h("h2", {id: "events-title"}, "Events"),
        h("p", {class: "muted"}, "What the watches noticed, oldest first."),
        events.box,
        h("div", {class: "actions"}, events.more),
      ),
    );

    watches.load(true);
    events.load(true);

    const reloadLater = debounce(() => {
      if (gone) return;
      watches.load(true);
      events.load(true);
    }, 250);
    const off = ctx.live
      ? ctx.live.on((e) => {
          if (e.type === "watch" || e.type === "reset") reloadLater();
        })
      : () => {};

    return () => {
      gone = true;
      off();
      aborter.abort();
    };
  },
};
