// Memory: the review inbox (accept, edit and accept, reject), search over the accepted notes
// with their provenance, and forget with its receipt. Every text from the server goes in as
// a text node.

import {api} from "../api.js";
import {h, clear, when, pill, json, notice, debounce} from "../dom.js";

const KINDS = ["fact", "preference", "person", "commitment", "project", "place"];
const SENSITIVITIES = ["low", "normal", "high", "critical"];
const REASONS = [
  ["wrong", "Wrong: it is not true"],
  ["outdated", "Outdated: it was true once"],
  ["private", "Private: true, but not to be remembered"],
  ["trivial", "Trivial: not worth remembering"],
];
const FORGET_BY = [
  ["id", "By id", "Note id"],
  ["subject", "By subject", "Subject"],
  ["query", "By query", "Words"],
];
const SEARCH_LIMIT = 20;

let seq = 0;
const uid = (prefix) => `${prefix}-${++seq}`;
const enc = encodeURIComponent;

/** An ISO instant as a `datetime-local` value in the browser's zone ("" when none). */
function toLocalInput(iso) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return "";
  const p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** A `datetime-local` value as an RFC 3339 instant (null when empty or invalid). */
function fromLocalInput(v) {
  if (!v) return null;
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? null : d.toISOString();
}

/** A definition list of the pairs that have a value. */
function facts(pairs) {
  const rows = pairs.filter(([, v]) => v !== null && v !== undefined && v !== "" && !(Array.isArray(v) && !v.length));
  return h(
    "dl",
    {class: "headers"},
    rows.map(([k, v]) => [h("dt", null, k), h("dd", null, Array.isArray(v) ? v.join(", ") : v)]),
  );
}

function confidence(c) {
  return typeof c === "number" ? `${Math.round(c * 100)} %` : null;
}

function validity(m) {
  if (!m.valid_from && !m.valid_to) return "";
  return `${m.valid_from ? when(m.valid_from) : "always"} → ${m.valid_to ? when(m.valid_to) : "now"}`;
}

/** One source of a note, as a list item. */
function sourceItem(s) {
  switch (s && s.type) {
    case "mail":
      // A source names the mail by its RFC Message-ID only: the API has no way to turn
      // that into the mirror's id the mail page opens, so it is shown, not linked.
      return h(
        "li",
        null,
        "Mail, Message-ID ",
        h("code", null, `<${s.message_id}>`),
        s.quote ? h("blockquote", {class: "body"}, s.quote) : null,
      );
    case "chat":
      return h("li", null, "A chat: ", h("code", null, s.chat));
    case "document":
      return h(
        "li",
        null,
        "A document: ",
        h("code", null, s.fingerprint),
        s.page !== null && s.page !== undefined ? `, page ${s.page}` : "",
      );
    case "person":
      return h("li", null, "You said it");
    case "import":
      return h("li", null, "Imported from ", h("code", null, s.path));
    default:
      return h("li", null, h("pre", {class: "json"}, json(s)));
  }
}

function sources(list) {
  return list && list.length
    ? h("ul", null, list.map(sourceItem))
    : h("p", {class: "muted"}, "No source recorded.");
}

/** An accepted note, compact: for "may replace". */
function relatedNote(n, named) {
  const m = n.meta;
  return h(
    "li",
    {dataset: {noteId: m.id}},
    h("div", {class: "body"}, n.body),
    h(
      "p",
      {class: "muted"},
      [m.id, m.kind, m.subject, validity(m), named ? "named as replaced" : "same subject"].filter(Boolean).join(" · "),
    ),
  );
}

function noteDetail(hit) {
  const n = hit.note;
  const m = n.meta;
  const r = m.review;
  const ranks = [
    hit.lexical_rank ? `words #${hit.lexical_rank}` : null,
    hit.vector_rank ? `meaning #${hit.vector_rank}` : null,
  ].filter(Boolean);
  const heading = h("h3", {id: "note-title", tabindex: "-1"}, `Note ${m.id}`);
  return h(
    "article",
    {class: "card", "aria-labelledby": "note-title", dataset: {noteId: m.id}},
    heading,
    h("div", {class: "body"}, n.body),
    facts([
      ["Kind", m.kind],
      ["Subject", m.subject],
      ["Sensitivity", m.sensitivity],
      ["Confidence", confidence(m.confidence)],
      ["Valid from", when(m.valid_from)],
      ["Valid to", when(m.valid_to)],
      ["Learned", when(m.created)],
      ["Proposed by", m.proposed_by],
      ["Reviewed", r ? `${r.decision} by ${r.by}, ${when(r.at)}` : null],
      ["Replaces", m.supersedes],
      ["Replaced by", m.superseded_by],
      ["Replaced at", when(m.superseded_at)],
      ["Replacement holds from", when(m.replaced_from)],
      ["File", hit.file],
      ["Found by", ranks.join(", ")],
    ]),
    h("h4", null, "Sources"),
    sources(m.sources),
  );
}

export default {
  title: "Memory",

  render(root, ctx) {
    const aborter = new AbortController();
    const signal = aborter.signal;
    let gone = false;

    // ---- (a) Inbox ----
    const inboxCount = h("span", {class: "muted"});
    const inboxBox = h("div", {"aria-busy": "true"}, notice("Loading…"));
    const cards = new Map(); // proposal id -> {card, engaged()}
    let inboxSeq = 0;

    function setCount(n) {
      inboxCount.textContent = n === null ? "" : ` (${n} waiting)`;
    }

    function proposalCard(p) {
      const note = p.note;
      const m = note.meta;
      const id = m.id;
      const titleId = uid("proposal");
      let editing = false;
      let busy = false;

      const reasonId = uid("reason");
      const reason = h(
        "select",
        {id: reasonId},
        h("option", {value: ""}, "No reason given"),
        REASONS.map(([v, label]) => h("option", {value: v}, label)),
      );
      const acceptBtn = h("button", {type: "button", class: "primary"}, "Accept");
      const editBtn = h("button", {type: "button", "aria-expanded": "false"}, "Edit & accept");
      const rejectBtn = h("button", {type: "button", class: "danger"}, "Reject");
      const editBox = h("div", {hidden: true});

      const named = new Set(m.supersedes || []);
      const related = p.related || [];
      const card = h(
        "article",
        {class: "card", dataset: {proposalId: id}, "aria-labelledby": titleId},
        h("h3", {id: titleId}, `${m.kind}${m.subject ? ` · ${m.subject}` : ""}`),
        h(
          "div",
          {class: "split"},
          h(
            "div",
            null,
            h("div", {class: "body"}, note.body),
            facts([
              ["Kind", m.kind],
              ["Subject", m.subject],
              ["Confidence", confidence(m.confidence)],
              ["Valid from", when(m.valid_from)],
              ["Valid to", when(m.valid_to)],
              ["Sensitivity", m.sensitivity],
              ["Proposed by", m.proposed_by],
              ["Proposed", when(m.created)],
              ["Expires", when(p.expires)],
              ["Replaces", m.supersedes],
              ["Id", id],
            ]),
            h("h4", null, "Sources"),
            sources(m.sources),
          ),
          h(
            "aside",
            {"aria-label": `Notes it may replace (${id})`},
            h("h4", null, "May replace"),
            related.length
              ? h("ul", {class: "list"}, related.map((n) => relatedNote(n, named.has(n.meta.id))))
              : h("p", {class: "muted"}, "No accepted note it may replace."),
          ),
        ),
        h(
          "div",
          {class: "actions"},
          acceptBtn,
          editBtn,
          h("label", {for: reasonId}, "Reason"),
          reason,
          rejectBtn,
        ),
        editBox,
      );

      const controls = () => [...card.querySelectorAll("button, select, input, textarea")];

      async function act(fn) {
        if (busy) return;
        busy = true;
        const els = controls();
        for (const el of els) el.disabled = true;
        card.setAttribute("aria-busy", "true");
        let stale = false;
        try {
          await fn();
        } catch (e) {
          if (e.name !== "AbortError") ctx.toast(e.message, "error");
          // Decided elsewhere (or expired): the inbox as it is now.
          stale = e.status === 404;
        } finally {
          busy = false;
          card.removeAttribute("aria-busy");
          for (const el of els) el.disabled = false;
        }
        if (stale) {
          editing = false;
          loadInbox();
        }
      }

      function done(text) {
        editing = false;
        cards.delete(id);
        card.remove();
        setCount(cards.size);
        if (!cards.size) clear(inboxBox, notice("Nothing waiting for review."));
        ctx.toast(text);
      }

      acceptBtn.addEventListener("click", () =>
        act(async () => {
          await api(`/memory/proposals/${enc(id)}/accept`, {method: "POST", body: {}, once: true});
          done("Accepted: it is a note now.");
        }),
      );

      rejectBtn.addEventListener("click", () =>
        act(async () => {
          await api(`/memory/proposals/${enc(id)}/reject`, {
            method: "POST",
            body: {reason: reason.value || null},
            once: true,
          });
          done("Rejected: it will not be proposed again.");
        }),
      );

      editBtn.addEventListener("click", () => {
        editing = !editing;
        editBtn.setAttribute("aria-expanded", String(editing));
        if (!editing) {
          editBox.hidden = true;
          clear(editBox);
          return;
        }
        clear(editBox, editForm());
        editBox.hidden = false;
        const first = editBox.querySelector("textarea");
        if (first) first.focus();
      });

      function editForm() {
        const ids = {
          text: uid("edit-text"),
          kind: uid("edit-kind"),
          sens: uid("edit-sensitivity"),
          subject: uid("edit-subject"),
          from: uid("edit-from"),
          to: uid("edit-to"),
          sup: uid("edit-supersedes"),
          hint: uid("edit-hint"),
        };
        const from0 = toLocalInput(m.valid_from);
        const to0 = toLocalInput(m.valid_to);
        const sup0 = (m.supersedes || []).join(", ");
        const text = h("textarea", {id: ids.text, required: true, value: note.body});
        const kind = h(
          "select",
          {id: ids.kind},
          KINDS.map((k) => h("option", {value: k, selected: k === m.kind}, k)),
        );
        const sens = h(
          "select",
          {id: ids.sens},
          SENSITIVITIES.map((s) => h("option", {value: s, selected: s === m.sensitivity}, s)),
        );
        const subject = h("input", {id: ids.subject, autocomplete: "off", value: m.subject || ""});
        const from = h("input", {id: ids.from, type: "datetime-local", value: from0, "aria-describedby": ids.hint});
        const to = h("input", {id: ids.to, type: "datetime-local", value: to0, "aria-describedby": ids.hint});
        const sup = h("input", {id: ids.sup, autocomplete: "off", value: sup0});
        const cancel = h("button", {type: "button"}, "Cancel");
        cancel.addEventListener("click", () => editBtn.click());

        const form = h(
          "form",
          {
            "aria-label": `Edit proposal ${id}`,
            onsubmit: (ev) => {
              ev.preventDefault();
              if (!text.value.trim()) {
                ctx.toast("The fact cannot be empty.", "error");
                text.focus();
                return;
              }
              // Only what changed: absent fields stay as proposed.
              const edit = {};
              if (text.value.trim() !== note.body.trim()) edit.text = text.value.trim();
              if (kind.value !== m.kind) edit.kind = kind.value;
              if (sens.value !== m.sensitivity) edit.sensitivity = sens.value;
              if (subject.value.trim() !== (m.subject || "")) edit.subject = subject.value.trim();
              if (from.value && from.value !== from0) edit.valid_from = fromLocalInput(from.value);
              if (to.value && to.value !== to0) edit.valid_to = fromLocalInput(to.value);
              const supNow = sup.value.split(/[\s,]+/).filter(Boolean);
              if (supNow.join(", ") !== sup0) edit.supersedes = supNow;
              act(async () => {
                await api(`/memory/proposals/${enc(id)}/accept`, {method: "POST", body: edit, once: true});
                done(Object.keys(edit).length ? "Accepted with your changes." : "Accepted.");
              });
            },
          },
          h("h4", null, "Edit, then accept"),
          h("label", {for: ids.text}, "Fact"),
          text,
          h(
            "div",
            {class: "toolbar"},
            h("label", {for: ids.kind}, "Kind", kind),
            h("label", {for: ids.sens}, "Sensitivity", sens),
            h("label", {for: ids.subject}, "Subject", subject),
          ),
          h(
            "div",
            {class: "toolbar"},
            h("label", {for: ids.from}, "Valid from", from),
            h("label", {for: ids.to}, "Valid to", to),
            h("label", {for: ids.sup}, "Replaces (note ids, comma-separated)", sup),
          ),
          h("p", {id: ids.hint, class: "muted"}, "A date left empty keeps the proposed one."),
          h(
            "div",
            {class: "actions"},
            h("button", {type: "submit", class: "primary"}, "Accept with changes"),
            cancel,
          ),
        );
        return form;
      }

      return {card, engaged: () => editing || busy};
    }

    async function loadInbox() {
      const my = ++inboxSeq;
      let list;
      try {
        list = await api("/memory/inbox", {signal});
      } catch (e) {
        if (e.name === "AbortError" || gone || my !== inboxSeq) return;
        inboxBox.removeAttribute("aria-busy");
        clear(inboxBox, notice(e.message, "error"));
        return;
      }
      if (gone || my !== inboxSeq) return;
      inboxBox.removeAttribute("aria-busy");
      const next = new Map();
      for (const p of list || []) {
        const id = p && p.note && p.note.meta && p.note.meta.id;
        if (!id || next.has(id)) continue;
        const old = cards.get(id);
        // A card being edited or decided stays as it is.
        next.set(id, old && old.engaged() ? old : proposalCard(p));
      }
      cards.clear();
      for (const [k, v] of next) cards.set(k, v);
      setCount(cards.size);
      if (!cards.size) clear(inboxBox, notice("Nothing waiting for review."));
      else clear(inboxBox, [...cards.values()].map((c) => c.card));
    }

    // ---- (b) Search ----
    const q = h("input", {
      id: "memory-q",
      type: "search",
      autocomplete: "off",
      maxlength: "500",
      value: ctx.params.get("q") || "",
    });
    const hitsBox = h("div", {"aria-live": "polite"});
    const detailBox = h("div");
    let searchCtl = null;
    let openNote = ctx.params.get("note") || "";

    function remember() {
      const p = {};
      if (q.value.trim()) p.q = q.value.trim();
      if (openNote) p.note = openNote;
      ctx.setParams(p);
    }

    async function search() {
      if (gone) return;
      const text = q.value.trim();
      if (searchCtl) searchCtl.abort();
      remember();
      if (!text) {
        clear(hitsBox);
        return;
      }
      const ctl = new AbortController();
      searchCtl = ctl;
      const onLeave = () => ctl.abort();
      signal.addEventListener("abort", onLeave);
      let hits;
      try {
        hits = await api("/memory/search", {query: {q: text, limit: SEARCH_LIMIT}, signal: ctl.signal});
      } catch (e) {
        if (e.name !== "AbortError" && !gone) clear(hitsBox, notice(e.message, "error"));
        return;
      } finally {
        signal.removeEventListener("abort", onLeave);
      }
      if (gone || ctl !== searchCtl) return;
      if (!hits || !hits.length) {
        clear(hitsBox, notice("No note matches."));
        return;
      }
      clear(
        hitsBox,
        h("p", {class: "muted"}, `${hits.length} note${hits.length === 1 ? "" : "s"}${hits.length >= SEARCH_LIMIT ? " (the best 20)" : ""}`),
        h(
          "ul",
          {class: "list", "aria-label": "Notes found"},
          hits.map((hit) => {
            const m = hit.note.meta;
            const first = String(hit.note.body || "").split("\n")[0];
            const ranks = [
              hit.lexical_rank ? `words #${hit.lexical_rank}` : null,
              hit.vector_rank ? `meaning #${hit.vector_rank}` : null,
            ];
            const prov = (m.sources || []).map((s) => s.type).join(", ");
            return h(
              "li",
              null,
              h(
                "button",
                {
                  type: "button",
                  class: "item",
                  "aria-current": m.id === openNote ? "true" : null,
                  dataset: {noteId: m.id},
                  onclick: (ev) => {
                    for (const b of hitsBox.querySelectorAll("button.item")) b.removeAttribute("aria-current");
                    ev.currentTarget.setAttribute("aria-current", "true");
                    showNote(m.id, true);
                  },
                },
                h("span", {class: "line1"}, h("span", null, first), h("span", null, pill(m.kind, "unknown"))),
                h(
                  "span",
                  {class: "line2"},
                  [m.subject, validity(m), prov ? `from ${prov}` : null, ...ranks].filter(Boolean).join(" · "),
                ),
              ),
            );
          }),
        ),
      );
    }

    async function showNote(id, focus) {
      if (gone) return;
      openNote = id;
      remember();
      clear(detailBox, notice("Loading…"));
      let hit;
      try {
        hit = await api(`/memory/notes/${enc(id)}`, {signal});
      } catch (e) {
        if (e.name !== "AbortError" && !gone && openNote === id) clear(detailBox, notice(e.message, "error"));
        return;
      }
      if (gone || openNote !== id) return;
      clear(detailBox, noteDetail(hit));
      if (focus) {
        const t = detailBox.querySelector("#note-title");
        if (t) t.focus();
      }
    }

    const searchLater = debounce(search, 150);
    q.addEventListener("input", searchLater);

    // ---- (c) Forget ----
    const by = h(
      "select",
      {id: "forget-by"},
      FORGET_BY.map(([v, label]) => h("option", {value: v}, label)),
    );
    const valueLabel = h("span", null, FORGET_BY[0][2]);
    const value = h("input", {id: "forget-value", autocomplete: "off", required: true});
    const dry = h("input", {id: "forget-dry", type: "checkbox", checked: true});
    dry.checked = true;
    const forgetBtn = h("button", {type: "submit", class: "danger"}, "Forget");
    const receiptBox = h("div");
    by.addEventListener("change", () => {
      const f = FORGET_BY.find(([v]) => v === by.value);
      valueLabel.textContent = f ? f[2] : "Value";
    });

    const forgetForm = h(
      "form",
      {
        class: "card",
        "aria-labelledby": "forget-section-title",
        onsubmit: async (ev) => {
          ev.preventDefault();
          const v = value.value.trim();
          if (!v) {
            ctx.toast("Say what to forget.", "error");
            value.focus();
            return;
          }
          const input = {selector: {by: by.value, value: v}, dry_run: dry.checked};
          forgetBtn.disabled = true;
          try {
            const receipt = await api("/memory/forget", {method: "POST", body: input, once: true});
            if (gone) return;
            clear(receiptBox, receiptCard(receipt, input.selector));
            const t = receiptBox.querySelector("h3");
            if (t) t.focus();
            if (!receipt.dry_run) {
              loadInbox();
              search();
              if (openNote) showNote(openNote, false);
            }
          } catch (e) {
            if (e.name !== "AbortError") ctx.toast(e.message, "error");
          } finally {
            forgetBtn.disabled = false;
          }
        },
      },
      h(
        "p",
        {class: "muted"},
        "Removes notes (with their history) and the proposals from the same sources. A dry run only says what would go.",
      ),
      h(
        "div",
        {class: "toolbar"},
        h("label", {for: "forget-by"}, "Select", by),
        h("label", {for: "forget-value"}, valueLabel, value),
        h("label", {for: "forget-dry"}, "Dry run", dry),
        forgetBtn,
      ),
    );

    function itemsTable(items) {
      if (!items || !items.length) return h("p", {class: "muted"}, "None.");
      return h(
        "table",
        null,
        h("thead", null, h("tr", null, h("th", {scope: "col"}, "Id"), h("th", {scope: "col"}, "File"), h("th", {scope: "col"}, "Content hash"))),
        h(
          "tbody",
          null,
          items.map((it) =>
            h("tr", null, h("td", null, it.id), h("td", null, h("code", null, it.path)), h("td", null, h("code", null, it.content_hash))),
          ),
        ),
      );
    }

    function receiptCard(r, selector) {
      const dryRun = r.dry_run === true;
      const verb = dryRun ? "would go" : "removed";
      return h(
        "article",
        {class: "card", "aria-labelledby": "receipt-title", dataset: {dryRun: String(dryRun)}},
        h("h3", {id: "receipt-title", tabindex: "-1"}, dryRun ? "Dry run — nothing removed" : "Forgotten"),
        dryRun ? h("p", {class: "notice"}, "Nothing was removed: this is what a forget would do.") : null,
        facts([
          ["Selected", `${selector.by}: ${selector.value}`],
          ["Asked by", r.by],
          ["At", when(r.at)],
          [`Notes ${verb}`, String((r.notes || []).length)],
          [`Proposals ${verb}`, String((r.proposals || []).length)],
          ["Index entries", String(r.index_entries)],
          ["Vectors", String(r.vectors)],
          ["Tombstones", String(r.tombstones)],
        ]),
        h("h4", null, dryRun ? "Notes that would go" : "Notes removed"),
        itemsTable(r.notes),
        h("h4", null, dryRun ? "Proposals that would go" : "Proposals removed"),
        itemsTable(r.proposals),
        h("h4", null, "Kept, and why"),
        r.kept && r.kept.length
          ? h("ul", null, r.kept.map((k) => h("li", null, h("strong", null, k.what), ": ", k.why)))
          : h("p", {class: "muted"}, "Nothing."),
      );
    }

    // ---- the page ----
    clear(
      root,
      h("h1", {id: "page-title"}, "Memory"),
      h(
        "section",
        {"aria-labelledby": "inbox-title"},
        h("h2", {id: "inbox-title"}, "Inbox", inboxCount),
        inboxBox,
      ),
      h(
        "section",
        {"aria-labelledby": "search-title"},
        h("h2", {id: "search-title"}, "Notes"),
        h("div", {class: "toolbar", role: "search"}, h("label", {for: "memory-q"}, "Search notes", q)),
        h("div", {class: "split"}, hitsBox, detailBox),
      ),
      h(
        "section",
        {"aria-labelledby": "forget-section-title"},
        h("h2", {id: "forget-section-title"}, "Forget"),
        forgetForm,
        receiptBox,
      ),
    );

    loadInbox();
    if (q.value.trim()) search();
    if (openNote) showNote(openNote, false);

    const reloadLater = debounce(() => {
      if (!gone) loadInbox();
    }, 200);
    const off = ctx.live
      ? ctx.live.on((e) => {
          if (e.type === "memory" || e.type === "reset") reloadLater();
        })
      : () => {};

    return () => {
      gone = true;
      off();
      aborter.abort();
      if (searchCtl) searchCtl.abort();
    };
  },
};
