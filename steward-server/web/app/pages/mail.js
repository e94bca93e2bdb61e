// Mail: search as you type with the filters, results with their provenance, the message reader
// (the body as text, a bounded window at a time with "Load more"), the thread, attachments by
// opaque token. Mail is hostile content: it only ever becomes text nodes here.

import {api} from "../api.js";
import {h, clear, when, person, notice, debounce, pill, visible} from "../dom.js";

const PAGE = 30;
const WINDOW_CHARS = 6000;

function provenance(p) {
  if (!p) return "";
  const parts = [];
  if (p.lexical) parts.push(`words #${p.lexical}`);
  if (p.vector) parts.push(`meaning #${p.vector}`);
  if (p.substring) parts.push(`substring #${p.substring}`);
  return parts.join(" · ");
}

function atLeast3(v) {
  const t = v.trim();
  return t.length >= 3 ? t : "";
}

export default {
  title: "Mail",
  render(root, ctx) {
    const p = ctx.params;
    const field = (id, label, attrs) =>
      h("label", {for: id}, label, h("input", {id, value: p.get(id) || "", ...attrs}));
    const text = h("input", {
      id: "q",
      type: "search",
      value: p.get("q") || "",
      placeholder: "words, names, amounts…",
      autocomplete: "off",
    });
    const from = field("from", "From", {autocomplete: "off"});
    const subject = field("subject", "Subject contains", {autocomplete: "off"});
    const after = field("after", "After", {type: "date"});
    const before = field("before", "Before", {type: "date"});
    const unread = h("input", {id: "unread", type: "checkbox", checked: p.get("unread") === "1"});
    const attach = h("input", {id: "attach", type: "checkbox", checked: p.get("attach") === "1"});
    const status = h("p", {class: "muted", role: "status", id: "mail-status"});
    const results = h("ul", {class: "list", id: "results", "aria-label": "Results"});
    const more = h("button", {type: "button", hidden: true}, "Load more");
    const reader = h("div", {id: "reader"});
    let offset = 0;
    let seq = 0;
    let current = null;
    let inflight = null;
    let opening = 0;
    let alive = true;

    const input = (el) => el.querySelector("input");
    function filters() {
      return {
        text: text.value.trim(),
        // Substring filters need three characters: shorter ones wait for more typing.
        from: atLeast3(input(from).value),
        subject_contains: atLeast3(input(subject).value),
        after: input(after).value,
        before: input(before).value,
        unread: unread.checked ? "true" : "",
        has_attachments: attach.checked ? "true" : "",
      };
    }

    async function search(append) {
      if (!alive) return;
      const mine = ++seq;
      const f = filters();
      if (!append) offset = 0;
      // Search as you type: each keystroke searches at once, and the answer still awaited for
      // the previous one is dropped (its request aborted).
      if (inflight) inflight.abort();
      const ctl = new AbortController();
      inflight = ctl;
      let page;
      try {
        page = await api("/search", {query: {...f, limit: PAGE, offset}, signal: ctl.signal});
      } catch (e) {
        if (e.name !== "AbortError" && mine === seq) clear(status, e.message);
        return;
      } finally {
        if (inflight === ctl) inflight = null;
      }
      if (mine !== seq) return; // a newer search answered first
      ctx.setParams({
        q: f.text,
        from: input(from).value.trim(),
        subject: input(subject).value.trim(),
        after: input(after).value,
        before: input(before).value,
        unread: unread.checked ? "1" : "",
        attach: attach.checked ? "1" : "",
        m: current || "",
      });
      if (!append) clear(results);
      for (const m of page.messages) results.append(row(m));
      offset = page.page.next_offset ?? offset;
      more.hidden = page.page.next_offset === null || page.page.next_offset === undefined;
      const sem = page.semantic === "disabled" ? " · by words (no embedder)" : "";
      clear(
        status,
        page.messages.length || append
          ? `${page.page.candidates} found${sem}`
          : f.text
            ? "Nothing matches. Fewer words or other filters may find it."
            : "No messages.",
      );
    }

    function row(m) {
      return h(
        "li",
        {},
        h(
          "button",
          {
            class: "item",
            type: "button",
            dataset: {id: m.id},
            "aria-current": String(m.id) === String(current) ? "true" : null,
            onclick: () => open(m.id),
          },
          h(
            "span",
            {class: "line1"},
            h("strong", {}, m.subject || "(no subject)"),
            h("span", {class: "muted"}, when(m.date)),
          ),
          h(
            "span",
            {class: "line2"},
            person(m.from),
            m.unread ? " · unread" : "",
            m.has_attachments ? " · attachments" : "",
            ` · ${m.mailbox}`,
          ),
          h("span", {class: "line2"}, m.snippet),
          h("span", {class: "line2 prov"}, provenance(m.provenance)),
        ),
      );
    }

    async function open(id) {
      const mine = ++opening;
      current = id;
      for (const b of results.querySelectorAll("button.item")) {
        b.setAttribute("aria-current", b.dataset.id === String(id) ? "true" : "false");
      }
      ctx.setParams({...Object.fromEntries(new URLSearchParams(location.hash.split("?")[1] || "")), m: id});
      clear(reader, notice("Loading…"));
      let msg;
      try {
        msg = await api(`/messages/${id}`, {query: {chars: WINDOW_CHARS}});
      } catch (e) {
        if (mine === opening) clear(reader, notice(e.message, "error"));
        return;
      }
      if (mine !== opening || !alive) return; // another message was opened meanwhile
      const body = h("pre", {class: "body", id: "message-body"}, msg.body.text);
      const loadMore = h("button", {type: "button", hidden: msg.body.next_offset == null}, "Load more of the message");
      let next = msg.body.next_offset;
      loadMore.addEventListener("click", async () => {
        loadMore.disabled = true;
        try {
          const w = await api(`/messages/${id}`, {query: {chars: WINDOW_CHARS, offset: next}});
          body.append(document.createTextNode(visible(w.body.text)));
          next = w.body.next_offset;
          loadMore.hidden = next == null;
        } catch (e) {
          ctx.toast(e.message, "error");
        }
        loadMore.disabled = false;
      });
      const dl = h(
        "dl",
        {class: "headers"},
        h("dt", {}, "From"),
        h("dd", {}, msg.from.map(person).join(", ")),
        h("dt", {}, "To"),
        h("dd", {}, msg.to.map(person).join(", ") || "—"),
        msg.cc.length ? [h("dt", {}, "Cc"), h("dd", {}, msg.cc.map(person).join(", "))] : null,
        h("dt", {}, "Date"),
        h("dd", {}, when(msg.date) || "—"),
        h("dt", {}, "Folder"),
        h("dd", {}, `${msg.account} / ${msg.mailbox}`),
        h("dt", {}, "Message-ID"),
        h("dd", {}, msg.message_id || "—"),
      );
      const attachments = msg.attachments.length
        ? h(
            "div",
            {},
            h("h3", {}, "Attachments"),
            h(
              "ul",
              {},
              msg.attachments.map((a) =>
                h(
                  "li",
                  {},
                  h(
                    "button",
                    {type: "button", onclick: () => download(msg.id, a)},
                    `${a.name || "(unnamed)"} · ${a.mime_type} · ${Math.ceil(a.size / 1024)} KB`,
                  ),
                ),
              ),
            ),
          )
        : null;
      const thread = h("div", {id: "thread"});
      clear(
        reader,
        h(
          "article",
          {class: "card", "aria-labelledby": "message-subject"},
          h("h2", {id: "message-subject"}, msg.subject || "(no subject)"),
          dl,
          msg.body.state !== "full" ? pill(`body: ${msg.body.state}`, "warning") : null,
          body,
          loadMore,
          attachments,
        ),
        thread,
      );
      showThread(thread, msg.thread_id, id, mine);
    }

    async function showThread(el, threadId, currentId, mine) {
      let t;
      try {
        t = await api(`/threads/${threadId}`, {query: {limit: 20}});
      } catch (e) {
        clear(el, notice(e.message, "error"));
        return;
      }
      if (mine !== opening || !alive || t.message_count < 2) return;
      clear(
        el,
        h(
          "div",
          {class: "card"},
          h("h2", {}, `Thread · ${t.message_count} messages`),
          h(
            "ul",
            {class: "list"},
            t.messages.map((m) =>
              h(
                "li",
                {},
                h(
                  "button",
                  {
                    class: "item",
                    type: "button",
                    "aria-current": m.id === currentId ? "true" : "false",
                    onclick: () => open(m.id),
                  },
                  h("span", {class: "line1"}, h("span", {}, person(m.from)), h("span", {class: "muted"}, when(m.date))),
                  h("span", {class: "line2"}, m.snippet),
                ),
              ),
            ),
          ),
          t.next_offset != null ? h("p", {class: "muted"}, "Older messages are not shown.") : null,
        ),
      );
    }

    async function download(messageId, a) {
      try {
        const g = await api("/attachments", {method: "POST", body: {message_id: messageId, position: a.position}});
        const link = h("a", {href: `/attachments/${encodeURIComponent(g.token)}`, download: g.name || "attachment"});
        document.body.append(link);
        link.click();
        link.remove();
      } catch (e) {
        ctx.toast(e.message, "error");
      }
    }

    const go = () => search(false);
    text.addEventListener("input", go);
    // The substring filters wait for a pause: each of their keystrokes is a scan.
    const slow = debounce(go, 150);
    for (const el of [input(from), input(subject)]) el.addEventListener("input", slow);
    for (const el of [input(after), input(before), unread, attach]) el.addEventListener("change", go);
    more.addEventListener("click", () => search(true));

    clear(
      root,
      h("h1", {id: "page-title"}, "Mail"),
      h(
        "form",
        {class: "toolbar", role: "search", onsubmit: (e) => (e.preventDefault(), search(false))},
        h("label", {for: "q"}, "Search", text),
        from,
        subject,
        after,
        before,
        h("label", {for: "unread"}, "Unread", unread),
        h("label", {for: "attach"}, "Attachments", attach),
      ),
      h("div", {class: "split"}, h("div", {}, status, results, more), reader),
    );
    search(false);
    if (p.get("m")) open(Number(p.get("m")));
    text.focus();
    return () => {
      alive = false;
      if (inflight) inflight.abort();
    };
  },
};
