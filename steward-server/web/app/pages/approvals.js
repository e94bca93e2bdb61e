// Approvals: the requests waiting for a person (and the ones already decided). Each card shows
// exactly what the executor will run and the hash it checks; the person approves (with a PIN
// for secure requests), edits then approves, denies, or sends it back for a revision.

import {api} from "../api.js";
import {h, clear, when, pill, json, notice, debounce, visible} from "../dom.js";

const PAGE = 50;

const STATUS_KIND = {
  requested: "warning",
  approved: "ok",
  edited: "ok",
  denied: "error",
  revision_requested: "unknown",
  expired: "error",
  cancelled: "unknown",
};

const STATUS_TEXT = {
  requested: "pending",
  approved: "approved",
  edited: "approved with an edit",
  denied: "denied",
  revision_requested: "revision requested",
  expired: "expired",
  cancelled: "cancelled",
};

const OUTCOME = {
  approved: "Approved",
  edited: "Approved with your edit",
  denied: "Denied",
  revision_requested: "Sent back for a revision",
  expired: "It had expired",
  cancelled: "It had been cancelled",
  requested: "Still pending",
};

/** The input as pretty JSON text (`null` stays `null`). */
function pretty(v) {
  if (v === undefined) return "null";
  return json(v);
}

/** A line diff of two texts (longest common subsequence), as lines prefixed "  ", "- ", "+ ". */
export function lineDiff(a, b) {
  const x = a.split("\n");
  const y = b.split("\n");
  // Strip the common head and tail so the table stays small for the usual one-field edit.
  let head = 0;
  while (head < x.length && head < y.length && x[head] === y[head]) head++;
  let tail = 0;
  while (
    tail < x.length - head &&
    tail < y.length - head &&
    x[x.length - 1 - tail] === y[y.length - 1 - tail]
  ) {
    tail++;
  }
  const xm = x.slice(head, x.length - tail);
  const ym = y.slice(head, y.length - tail);
  const out = x.slice(0, head).map((l) => `  ${l}`);
  if (xm.length * ym.length > 1_000_000) {
    // Too big to align: everything old out, everything new in.
    out.push(...xm.map((l) => `- ${l}`), ...ym.map((l) => `+ ${l}`));
  } else {
    const n = xm.length;
    const m = ym.length;
    const t = Array.from({length: n + 1}, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        t[i][j] = xm[i] === ym[j] ? t[i + 1][j + 1] + 1 : Math.max(t[i + 1][j], t[i][j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n && j < m) {
      if (xm[i] === ym[j]) {
        out.push(`  ${xm[i]}`);
        i++;
        j++;
      } else if (t[i + 1][j] >= t[i][j + 1]) {
        out.push(`- ${xm[i++]}`);
      } else {
        out.push(`+ ${ym[j++]}`);
      }
    }
    while (i < n) out.push(`- ${xm[i++]}`);
    while (j < m) out.push(`+ ${ym[j++]}`);
  }
  out.push(...x.slice(x.length - tail).map((l) => `  ${l}`));
  return out.join("\n");
}

/** `message:12` or `attachment:12:1` → the mail page for message 12; anything else: text. */
function sourceLink(source) {
  const m = /^(?:message|attachment):(\d+)/.exec(source || "");
  return m ? h("a", {href: `#/mail?m=${m[1]}`}, source) : h("code", null, source);
}

export default {
  title: "Approvals",

  render(root, ctx) {
    let view = ctx.params.get("view") === "past" ? "past" : "pending";
    let items = []; // the approvals shown, in the server's order (newest first)
    let offset = 0; // requests fetched so far (the server's paging, before filtering)
    let more = false;
    let generation = 0;
    let alive = true;
    const cards = new Map(); // id → {key, el}

    const select = h(
      "select",
      {
        id: "approvals-view",
        onchange: () => {
          view = select.value === "past" ? "past" : "pending";
          ctx.setParams(view === "past" ? {view} : {});
          cards.clear();
          load();
        },
      },
      h("option", {value: "pending", selected: view === "pending"}, "Pending"),
      h("option", {value: "past", selected: view === "past"}, "Past"),
    );
    const status = h("p", {class: "muted", role: "status", "aria-live": "polite"}, "Loading…");
    const batches = h("div", {class: "batches"});
    const list = h("ul", {class: "list", id: "approvals-list", "aria-label": "Approval requests"});
    const moreButton = h("button", {type: "button", hidden: true, onclick: () => load(true)}, "Load more");

    clear(
      root,
      h("h1", {id: "page-title"}, "Approvals"),
      h(
        "div",
        {class: "toolbar"},
        h("label", {for: "approvals-view"}, "Show", select),
        h("button", {type: "button", onclick: () => load()}, "Reload"),
      ),
      status,
      batches,
      list,
      h("div", {class: "actions"}, moreButton),
    );

    async function load(append = false) {
      const gen = ++generation;
      const from = append ? offset : 0;
      if (!append) status.textContent = "Loading…";
      moreButton.disabled = true;
      try {
        const query = view === "pending" ? {status: "pending", limit: PAGE, offset: from} : {limit: PAGE, offset: from};
        const page = await api("/approvals", {query});
        if (gen !== generation || !alive) return;
        const shown = view === "past" ? page.filter((a) => a.status !== "requested") : page;
        items = append ? items.concat(shown.filter((a) => !items.some((b) => b.id === a.id))) : shown;
        offset = from + page.length;
        more = page.length === PAGE;
        draw();
      } catch (e) {
        if (gen !== generation || !alive) return;
        status.textContent = "";
        clear(list);
        clear(batches, notice(`The approvals could not be loaded: ${e.message}`, "error"));
      } finally {
        if (gen === generation) moreButton.disabled = false;
      }
    }

    /** Re-reads the first page, keeping what was already paged in (live updates). */
    const refresh = debounce(() => {
      if (alive) load();
    }, 250);

    function draw() {
      const pending = items.filter((a) => a.status === "requested");
      if (view === "pending") {
        status.textContent = items.length === 0 ? "Nothing is waiting for you." : `${items.length} waiting for you${more ? " (more below)" : ""}.`;
      } else {
        status.textContent = items.length === 0 ? "No decided requests yet." : `${items.length} decided request${items.length === 1 ? "" : "s"}.`;
      }
      drawBatches(pending);
      const seen = new Set();
      const els = items.map((a) => {
        seen.add(a.id);
        const key = JSON.stringify([a.status, a.decided_at, a.effective_sha256, a.note, a.expires_at, a.normalized_input]);
        const had = cards.get(a.id);
        // A card whose request did not change keeps its element: a PIN or an edit being typed
        // survives a live refresh.
        if (had && had.key === key) return had.el;
        const el = h("li", null, card(a));
        cards.set(a.id, {key, el});
        return el;
      });
      for (const id of [...cards.keys()]) if (!seen.has(id)) cards.delete(id);
      clear(list, els);
      moreButton.hidden = !more;
    }

    function drawBatches(pending) {
      const groups = new Map();
      for (const a of pending) {
        if (a.batch_id === null || a.batch_id === undefined) continue;
        if (!groups.has(a.batch_id)) groups.set(a.batch_id, []);
        groups.get(a.batch_id).push(a);
      }
      const bars = [];
      for (const [batch, group] of groups) {
        if (group.length < 2) continue;
        bars.push(batchBar(batch, group));
      }
      clear(batches, bars);
    }

    function batchBar(batch, group) {
      const secure = group.some((a) => a.level === "secure");
      const pinId = `batch-pin-${batch}`;
      const pin = secure
        ? h("input", {id: pinId, type: "password", inputmode: "numeric", autocomplete: "off"})
        : null;
      const button = h(
        "button",
        {
          type: "button",
          class: "primary",
          onclick: async () => {
            if (secure && !pin.value.trim()) {
              ctx.toast("Enter your PIN: this batch holds a secure request.", "error");
              pin.focus();
              return;
            }
            button.disabled = true;
            let done = 0;
            try {
              for (const a of [...group].sort((x, y) => x.id - y.id)) {
                const body = a.level === "secure" ? {pin: pin.value.trim()} : {};
                const r = await api(`/approvals/${a.id}/approve`, {method: "POST", body, once: true});
                if (r && (r.status === "approved" || r.status === "edited")) done++;
              }
              ctx.toast(`Batch ${batch}: approved ${done} of ${group.length}.`, "ok");
            } catch (e) {
              ctx.toast(`Batch ${batch}: approved ${done} of ${group.length}, then: ${e.message}`, "error");
            } finally {
              if (pin) pin.value = "";
              button.disabled = false;
              load();
            }
          },
        },
        "Approve all in batch",
      );
      return h(
        "div",
        {class: "card", "data-batch-id": batch},
        h("p", null, `Batch ${batch}: ${group.length} requests waiting — `, group.map((a) => a.summary).join("; ")),
        h(
          "div",
          {class: "actions"},
          secure ? h("label", {for: pinId}, "PIN for the secure requests") : null,
          pin,
          button,
        ),
      );
    }

    function card(a) {
      const id = a.id;
      const pending = a.status === "requested";
      const titleId = `approval-${id}-title`;
      const article = h("article", {class: "card", "data-approval-id": id, "aria-labelledby": titleId});
      const facts = h(
        "dl",
        {class: "headers"},
        h("dt", null, "Tool"),
        h("dd", null, h("code", null, a.tool)),
        h("dt", null, "Level"),
        h("dd", null, pill(a.level === "secure" ? "secure (PIN)" : a.level, a.level === "secure" ? "error" : "warning")),
        h("dt", null, "Requested by"),
        h("dd", null, a.requested_by),
        a.chat
          ? [
              h("dt", null, "Chat"),
              h("dd", null, a.chat.startsWith("chat_") ? h("a", {href: `#/chat?c=${encodeURIComponent(a.chat)}`}, a.chat) : a.chat),
            ]
          : null,
        h("dt", null, "Created"),
        h("dd", null, when(a.created_at)),
        h("dt", null, pending ? "Expires" : "Expiry"),
        h("dd", null, when(a.expires_at)),
        a.batch_id !== null && a.batch_id !== undefined ? [h("dt", null, "Batch"), h("dd", null, String(a.batch_id))] : null,
        a.decided_at ? [h("dt", null, "Decided"), h("dd", null, `${when(a.decided_at)}${a.decided_by ? ` by ${a.decided_by}` : ""}`)] : null,
        a.note ? [h("dt", null, "Note"), h("dd", null, a.note)] : null,
      );

      const parts = [
        h("h2", {id: titleId}, a.summary || `${a.tool} request`),
        h("p", {class: "line1"}, pill(STATUS_TEXT[a.status] || a.status, STATUS_KIND[a.status] || "unknown"), " ", h("span", {class: "muted"}, `request #${id}`)),
        facts,
        h("p", null, h("strong", null, pending ? "The exact input the executor will run" : "The input as proposed (after preflight)")),
        h("pre", {class: "json"}, pretty(a.normalized_input)),
      ];
      const effective = a.effective_input === undefined ? null : a.effective_input;
      if (!pending && effective !== null && JSON.stringify(effective) !== JSON.stringify(a.normalized_input)) {
        parts.push(h("p", null, h("strong", null, "What ran instead (the person's edit)")), h("pre", {class: "json"}, pretty(effective)));
      }
      parts.push(
        h(
          "p",
          null,
          h("span", {class: "muted"}, "hash the executor checks: "),
          a.effective_sha256 ? h("code", null, a.effective_sha256) : h("span", null, "computed on approval"),
        ),
      );
      const tainted = a.taint && Array.isArray(a.taint.fields) ? a.taint.fields : [];
      if (tainted.length > 0) {
        parts.push(
          h("p", null, h("strong", null, "Copied from untrusted content")),
          h(
            "ul",
            {class: "taint"},
            tainted.map((f) =>
              h(
                "li",
                null,
                h("code", null, f.field),
                " ",
                pill(f.kind, "warning"),
                " ",
                h("q", null, f.value),
                " from ",
                sourceLink(f.source),
                f.tool ? ` (via ${f.tool})` : "",
              ),
            ),
          ),
        );
      }
      parts.push(history(a));
      if (pending) parts.push(decide(a));
      clear(article, parts);
      return article;
    }

    function history(a) {
      const out = h("div", {hidden: true, id: `approval-${a.id}-history`});
      const button = h(
        "button",
        {
          type: "button",
          "aria-expanded": "false",
          "aria-controls": `approval-${a.id}-history`,
          onclick: async () => {
            if (!out.hidden) {
              out.hidden = true;
              button.setAttribute("aria-expanded", "false");
              return;
            }
            out.hidden = false;
            button.setAttribute("aria-expanded", "true");
            clear(out, notice("Loading…"));
            try {
              const d = await api(`/approvals/${a.id}`);
              const events = (d && d.events) || [];
              clear(
                out,
                events.length === 0
                  ? notice("No recorded transitions.")
                  : h(
                      "ol",
                      {class: "history"},
                      events.map((e) => h("li", null, h("strong", null, e.event), ` — ${e.actor} — `, h("time", null, when(e.at)))),
                    ),
              );
            } catch (e) {
              clear(out, notice(`The history could not be loaded: ${e.message}`, "error"));
            }
          },
        },
        "History",
      );
      return h("div", null, h("div", {class: "actions"}, button), out);
    }

    function decide(a) {
      const id = a.id;
      const secure = a.level === "secure";
      const pinId = `approval-${id}-pin`;
      const original = pretty(a.normalized_input);
      const pin = secure
        ? h("input", {id: pinId, type: "password", inputmode: "numeric", autocomplete: "off", required: true})
        : null;
      const problem = h("p", {class: "notice error", role: "alert", hidden: true});
      const panel = h("div", {class: "decide-panel"}); // the one open form: edit, deny or revise
      let open = null; // which form is open
      const busyButtons = new Set();

      const say = (text) => {
        problem.textContent = text;
        problem.hidden = !text;
      };
      const busy = (on) => {
        for (const b of busyButtons) if (b.isConnected) b.disabled = on;
      };
      const pinValue = () => {
        if (!secure) return undefined;
        const v = pin.value.trim();
        if (!v) {
          say("This is a secure request: enter your PIN first.");
          pin.focus();
          return null;
        }
        return v;
      };

      async function send(action, body) {
        say("");
        busy(true);
        try {
          const r = await api(`/approvals/${id}/${action}`, {method: "POST", body, once: true});
          const outcome = (r && OUTCOME[r.status]) || "Done";
          ctx.toast(`${outcome}: ${a.summary || a.tool}`, r && r.status === "requested" ? "error" : "ok");
          if (pin) pin.value = "";
          load();
        } catch (e) {
          if (pin) pin.value = "";
          say(e.message);
          ctx.toast(e.message, "error");
          busy(false);
        }
      }

      /** Opens one form under the buttons (or closes it when it is already open). */
      function toggle(which, opener, build) {
        say("");
        for (const b of [editButton, denyButton, reviseButton]) b.setAttribute("aria-expanded", "false");
        if (open === which) {
          open = null;
          clear(panel);
          opener.focus();
          return;
        }
        open = which;
        opener.setAttribute("aria-expanded", "true");
        const {el, focus} = build();
        clear(panel, el);
        focus.focus();
      }
      const close = (opener) => {
        open = null;
        opener.setAttribute("aria-expanded", "false");
        clear(panel);
        opener.focus();
      };

      const approve = h(
        "button",
        {
          type: "button",
          class: "primary",
          onclick: () => {
            const p = pinValue();
            if (p === null) return;
            send("approve", secure ? {pin: p} : {});
          },
        },
        "Approve",
      );

      // Edit & approve: the edited input, its diff against the proposal, then a confirmation.
      function editForm() {
        const editId = `approval-${id}-edit`;
        const editor = h("textarea", {id: editId, rows: 10, spellcheck: "false", value: original});
        const diff = h("pre", {class: "json"});
        const diffBox = h("div", {hidden: true}, h("p", {class: "muted"}, "Changes (lines starting with - are removed, + are added):"), diff);
        let edited = null;
        const confirm = h(
          "button",
          {
            type: "button",
            class: "primary",
            hidden: true,
            onclick: () => {
              if (edited === null) return;
              const p = pinValue();
              if (p === null) return;
              send("approve", secure ? {edit: edited, pin: p} : {edit: edited});
            },
          },
          "Confirm and run the edited input",
        );
        const review = h("button", {type: "submit"}, "Show changes");
        busyButtons.add(confirm);
        busyButtons.add(review);
        editor.addEventListener("input", () => {
          // A changed text needs a fresh look at its diff before it can run.
          edited = null;
          confirm.hidden = true;
          diffBox.hidden = true;
        });
        const el = h(
          "form",
          {
            id: `approval-${id}-editor`,
            onsubmit: (ev) => {
              ev.preventDefault();
              say("");
              edited = null;
              confirm.hidden = true;
              diffBox.hidden = true;
              let value;
              try {
                value = JSON.parse(editor.value);
              } catch (e) {
                say(`The edit is not valid JSON: ${e.message}`);
                editor.focus();
                return;
              }
              if (value === null || typeof value !== "object" || Array.isArray(value)) {
                say("The edit must be a JSON object.");
                editor.focus();
                return;
              }
              const next = JSON.stringify(value, null, 2);
              diff.textContent = next === original ? "(no changes: this is the input as proposed)" : visible(lineDiff(original, next));
              diffBox.hidden = false;
              edited = value;
              confirm.hidden = false;
              confirm.focus();
            },
          },
          h("label", {for: editId}, "Input to run instead (JSON)"),
          editor,
          h("div", {class: "actions"}, review, h("button", {type: "button", onclick: () => close(editButton)}, "Close editor")),
          diffBox,
          h("div", {class: "actions"}, confirm),
        );
        return {el, focus: editor};
      }

      function denyForm() {
        const noteId = `approval-${id}-deny-note`;
        const note = h("textarea", {id: noteId, rows: 2});
        const confirm = h("button", {type: "submit", class: "danger"}, "Confirm deny");
        busyButtons.add(confirm);
        const el = h(
          "form",
          {
            id: `approval-${id}-deny`,
            onsubmit: (ev) => {
              ev.preventDefault();
              const n = note.value.trim();
              send("deny", n ? {note: n} : {});
            },
          },
          h("label", {for: noteId}, "Note for the record (optional)"),
          note,
          h("div", {class: "actions"}, confirm, h("button", {type: "button", onclick: () => close(denyButton)}, "Back")),
        );
        return {el, focus: note};
      }

      function reviseForm() {
        const noteId = `approval-${id}-revise-note`;
        const note = h("textarea", {id: noteId, rows: 3, required: true});
        const confirm = h("button", {type: "submit", class: "primary"}, "Send for revision");
        busyButtons.add(confirm);
        const el = h(
          "form",
          {
            id: `approval-${id}-revise`,
            novalidate: true,
            onsubmit: (ev) => {
              ev.preventDefault();
              const n = note.value.trim();
              if (!n) {
                say("Write a note first: it tells the agent what to change.");
                note.focus();
                return;
              }
              send("revise", {note: n});
            },
          },
          h("label", {for: noteId}, "What should the agent change? (required)"),
          note,
          h("div", {class: "actions"}, confirm, h("button", {type: "button", onclick: () => close(reviseButton)}, "Back")),
        );
        return {el, focus: note};
      }

      const editButton = h(
        "button",
        {
          type: "button",
          "aria-expanded": "false",
          "aria-controls": `approval-${id}-panel`,
          onclick: () => toggle("edit", editButton, editForm),
        },
        "Edit & approve",
      );
      const denyButton = h(
        "button",
        {
          type: "button",
          class: "danger",
          "aria-expanded": "false",
          "aria-controls": `approval-${id}-panel`,
          onclick: () => toggle("deny", denyButton, denyForm),
        },
        "Deny",
      );
      const reviseButton = h(
        "button",
        {
          type: "button",
          "aria-expanded": "false",
          "aria-controls": `approval-${id}-panel`,
          onclick: () => toggle("revise", reviseButton, reviseForm),
        },
        "Revise",
      );
      for (const b of [approve, editButton, denyButton, reviseButton]) busyButtons.add(b);
      panel.id = `approval-${id}-panel`;

      return h(
        "div",
        {class: "decide"},
        secure ? h("p", null, h("label", {for: pinId}, "PIN (this request is secure)"), " ", pin) : null,
        h("div", {class: "actions"}, approve, editButton, denyButton, reviseButton),
        problem,
        panel,
      );
    }

    const off = ctx.live
      ? ctx.live.on((e) => {
          if (e.type === "approval" || e.type === "reset") refresh();
        })
      : () => {};

    load();

    return () => {
      alive = false;
      generation++;
      off();
    };
  },
};
