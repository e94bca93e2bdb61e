// Chat with the agent: the chats on the left, the selected one on the right (its messages, its
// tool calls with their decisions), and a composer. A sent message starts a turn on the server;
// the page follows the chat's event feed by cursor (`GET /chats/{id}/events?after=…&wait=20`)
// and shows the answer as it is written, until the turn ends. Every text from the server and
// the model goes in as a text node.

import {api} from "../api.js";
import {h, clear, when, pill, json, notice, debounce, visible} from "../dom.js";

const CHAT_PAGE = 50;
const MESSAGE_PAGE = 200;
const MORE_MESSAGE_PAGES = 10;
const EVENT_PAGE = 500;
const EVENT_WAIT_SECS = 20;
const RESULT_CHARS = 400;
const MAX_APPROVAL_LOOKUPS = 20;
const NO_MODEL = new Set(["AGENT_NO_MODEL", "AGENT_UNAVAILABLE"]);

const CALL_KIND = {
  ran: "ok",
  failed: "error",
  denied: "error",
  invalid: "error",
  refused: "error",
  declined: "error",
  expired: "error",
  awaiting_approval: "warning",
  revision_requested: "unknown",
  interrupted: "unknown",
  cancelled: "unknown",
  proposed: "unknown",
  running: "unknown",
};

const ENDED = {
  completed: null,
  awaiting_approval: "The turn waits for your decision on a tool call; deciding resumes the chat.",
  max_model_calls: "The turn stopped: it reached its limit of model calls.",
  max_tool_calls: "The turn stopped: it reached its limit of tool calls.",
  budget: "The turn stopped: it reached its token or cost budget.",
  deadline: "The turn stopped: it ran out of time.",
  cancelled: "The turn was cancelled.",
  model_unavailable: "No model answered.",
  error: "The turn failed.",
};

const APPROVAL_OUTCOME = {
  approved: "Approved",
  edited: "Approved with an edit",
  denied: "Denied",
  revision_requested: "Sent back for a revision",
  expired: "It had expired",
  cancelled: "It had been cancelled",
  requested: "Still pending",
};

let uid = 0;
const nextId = (prefix) => `${prefix}-${++uid}`;

/** At most `n` characters, with an ellipsis when cut. */
function trim(s, n = RESULT_CHARS) {
  const t = s === null || s === undefined ? "" : String(s);
  return t.length > n ? `${t.slice(0, n)}…` : t;
}

const enc = encodeURIComponent;

/** The calm card shown when the server has no model (or no agent) for chat. */
function noModelCard(err) {
  return h(
    "div",
    {class: "card no-model"},
    h("h2", null, "No model is connected"),
    h(
      "p",
      null,
      "Chat needs a language model to answer. Connect any OpenAI-compatible server: set ",
      h("code", null, "[llm]"),
      " in ",
      h("code", null, "config.toml"),
      ", or ",
      h("code", null, "STEWARD_LLM_BASE_URL"),
      " (with ",
      h("code", null, "STEWARD_LLM_MODEL"),
      ") in the server's environment, then restart Steward.",
    ),
    h(
      "p",
      null,
      "To try one on this machine without a key, run the project's local model script, ",
      h("code", null, "scripts/local-model"),
      ": it serves a small model on this machine (port 8089) and prints the two variables to set (",
      h("code", null, "STEWARD_LLM_MODEL=smollm2"),
      ").",
    ),
    h("p", null, "Every other page — mail, approvals, memory, watches, the journal, audit, system and devices — works without a model."),
    err && err.message ? h("p", {class: "muted"}, "The server said: ", h("q", null, err.message), err.code ? ` (${err.code})` : "") : null,
  );
}

/** One item a tool result came from, as a link where a page shows it. */
function sourceItem(s) {
  const kind = s && s.kind;
  switch (kind) {
    case "message":
    case "mail": {
      const id = s.id !== undefined && s.id !== null ? s.id : s.message_id;
      return [
        h("a", {href: `#/mail?m=${enc(id)}`}, `Mail #${id}`),
        typeof s.message_id === "string" && s.message_id ? h("span", {class: "muted"}, ` ${s.message_id}`) : null,
      ];
    }
    case "attachment":
      return h("a", {href: `#/mail?m=${enc(s.message_id)}`}, `Attachment ${s.name || `#${s.position}`} of mail #${s.message_id}`);
    case "operation":
      return h("a", {href: "#/journal"}, `Operation #${s.id}`);
    case "watch":
      return h("a", {href: "#/watches"}, `Watch #${s.id}`);
    case "approval":
      return h("a", {href: "#/approvals"}, `Approval #${s.id}`);
    case "memory":
      return h("a", {href: "#/memory"}, `Note ${s.id}`);
    case "train":
      return `Train ${s.train_ref}`;
    case "usage":
      return "The usage ledger";
    case "event":
      return `Calendar event ${s.id}`;
    case "contact":
      return `Contact ${s.id}`;
    case "file":
      return `File ${s.path}`;
    case "external":
      return `${s.server}: ${s.tool}`;
    default:
      return String(kind || "unknown source");
  }
}

function sourceList(sources, untrusted) {
  if (!Array.isArray(sources) || sources.length === 0) return null;
  return h(
    "div",
    null,
    h("p", {class: "muted"}, "Sources ", untrusted ? pill("untrusted content", "warning") : null),
    h(
      "ul",
      {class: "sources"},
      sources.map((s) => h("li", null, sourceItem(s))),
    ),
  );
}

function taintList(taint) {
  const fields = taint && Array.isArray(taint.fields) ? taint.fields : [];
  if (fields.length === 0) return null;
  return h(
    "div",
    null,
    h("p", {class: "muted"}, "Copied from untrusted content:"),
    h(
      "ul",
      null,
      fields.map((f) => h("li", null, h("code", null, f.field), " ", pill(f.kind, "warning"), " ", h("q", null, f.value), ` from ${f.source}`)),
    ),
  );
}

export default {
  title: "Chat",

  render(root, ctx) {
    let alive = true;
    let current = ctx.params.get("c") || null;
    let chats = [];
    let loadGen = 0;
    // The turn being followed in the current chat.
    let controller = null;
    let following = false;
    const active = new Set(); // runs followed
    const ended = new Set(); // runs known to have ended
    const cursors = new Map(); // chat id → highest event seq seen
    // After a decision made here, the next turn that starts in the chat is followed too.
    let adoptUntil = 0; // ms
    let adoptSince = 0; // unix seconds

    // Left: the chats.
    const newButton = h("button", {type: "button", class: "primary", onclick: () => newChat()}, "New chat");
    const chatList = h("ul", {class: "list", id: "chat-list", "aria-labelledby": "chats-heading"});
    const chatListNote = h("div");

    // Right: the chat.
    const banner = h("div");
    const chatTitle = h("h2", {id: "chat-heading"}, "Chat");
    const chatMeta = h("p", {class: "muted"});
    const log = h("div", {class: "chat-log", role: "log", "aria-labelledby": "chat-heading"});
    const runState = h("p", {class: "muted", role: "status"});
    const text = h("textarea", {id: "chat-text", rows: 3, autocomplete: "off"});
    const sendButton = h("button", {type: "submit", class: "primary"}, "Send");
    const cancelButton = h("button", {type: "button", class: "danger", hidden: true, onclick: () => cancelRun()}, "Cancel");
    const form = h(
      "form",
      {class: "composer", onsubmit: (ev) => {
        ev.preventDefault();
        send();
      }},
      h("label", {for: "chat-text"}, "Message"),
      text,
      h("div", {class: "actions"}, sendButton, cancelButton),
    );
    text.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        form.requestSubmit();
      }
    });

    clear(
      root,
      h("h1", {id: "page-title"}, "Chat"),
      h(
        "div",
        {class: "split"},
        h(
          "section",
          {class: "card", "aria-labelledby": "chats-heading"},
          h("h2", {id: "chats-heading"}, "Chats"),
          h("div", {class: "toolbar"}, newButton),
          chatListNote,
          chatList,
        ),
        h(
          "section",
          {"aria-labelledby": "chat-heading"},
          banner,
          chatTitle,
          chatMeta,
          log,
          runState,
          form,
        ),
      ),
    );

    function showNoModel(e) {
      clear(banner, noModelCard(e));
    }

    // ---- the chats list ----

    async function loadChats() {
      try {
        chats = await api("/chats", {query: {limit: CHAT_PAGE}});
        if (!alive) return;
        clear(chatListNote);
        if (!current && chats.length > 0) {
          select(chats[0].id);
          return;
        }
        drawChats();
      } catch (e) {
        if (!alive) return;
        if (NO_MODEL.has(e.code)) showNoModel(e);
        clear(chatList);
        clear(chatListNote, notice(`The chats could not be loaded: ${e.message}`, "error"));
      }
    }
    const refreshChats = debounce(() => {
      if (alive) loadChats();
    }, 500);

    function drawChats() {
      if (chats.length === 0) {
        clear(chatListNote, notice("No chats yet. Start one with New chat, or just write below."));
      }
      clear(
        chatList,
        chats.map((c) =>
          h(
            "li",
            null,
            h(
              "button",
              {
                type: "button",
                class: "item",
                "aria-current": c.id === current ? "true" : null,
                "data-chat-id": c.id,
                onclick: () => select(c.id),
              },
              h("span", {class: "line1"}, h("span", null, c.title || "Untitled chat"), h("span", {class: "muted"}, when(c.updated_at))),
              h("span", {class: "line2"}, `started ${when(c.created_at)}`),
            ),
          ),
        ),
      );
    }

    async function newChat() {
      newButton.disabled = true;
      try {
        const c = await api("/chats", {method: "POST", body: null, once: true});
        if (!alive) return null;
        clear(banner);
        chats = [c, ...chats.filter((x) => x.id !== c.id)];
        await select(c.id);
        text.focus();
        return c.id;
      } catch (e) {
        if (NO_MODEL.has(e.code)) showNoModel(e);
        else ctx.toast(e.message, "error");
        return null;
      } finally {
        newButton.disabled = false;
      }
    }

    async function select(id) {
      stopFollowing();
      const other = id !== current;
      current = id;
      ctx.setParams({c: id});
      drawChats();
      if (other) {
        clear(banner);
        clear(log, notice("Loading…"));
      }
      await loadChat();
    }

    // ---- one chat ----

    // The chat being loaded: a turn followed from now on waits for it, so the log it draws
    // is not wiped under the live answer.
    let loadingChat = Promise.resolve();
    function loadChat() {
      const p = readChat();
      loadingChat = p.catch(() => {});
      return p;
    }

    async function readChat() {
      const gen = ++loadGen;
      const id = current;
      const wasFollowing = following;
      if (!id) {
        chatTitle.textContent = "New chat";
        clear(chatMeta, "Write below to start a chat.");
        clear(log);
        return;
      }
      try {
        const detail = await api(`/chats/${enc(id)}`);
        let messages = detail.messages || [];
        // Oldest first, 200 at a time: page on (bounded) so the latest messages are shown.
        let page = messages;
        let pages = 0;
        while (page.length === MESSAGE_PAGE && pages < MORE_MESSAGE_PAGES) {
          const after = page[page.length - 1].id;
          page = await api(`/chats/${enc(id)}/messages`, {query: {after, limit: MESSAGE_PAGE}});
          messages = messages.concat(page);
          pages++;
        }
        if (gen !== loadGen || !alive) return;
        // A turn followed since this began draws into the log; it reloads when it ends.
        if (following && !wasFollowing) return;
        const truncated = page.length === MESSAGE_PAGE;
        let resumed = false;
        for (const t of detail.turns || []) {
          if (t.status === "running") {
            if (!ended.has(t.run_id) && !active.has(t.run_id)) {
              active.add(t.run_id);
              resumed = true;
            }
          } else {
            ended.add(t.run_id);
          }
        }
        // A turn already running is replayed from the feed's start (its output so far is
        // left out of the stored messages drawn below).
        if (resumed && !following) cursors.delete(id);
        drawChat(detail, messages, truncated);
        if (active.size > 0) startFollowing([]);
      } catch (e) {
        if (gen !== loadGen || !alive) return;
        if (NO_MODEL.has(e.code)) showNoModel(e);
        chatTitle.textContent = "Chat";
        clear(chatMeta);
        clear(log, notice(`This chat could not be loaded: ${e.message}`, "error"));
      }
    }
    const refreshChat = debounce(() => {
      if (alive && !following) loadChat();
    }, 400);

    function drawChat(detail, messages, truncated) {
      const chat = detail.chat || {};
      chatTitle.textContent = visible(chat.title || "Untitled chat");
      clear(chatMeta, `Started ${when(chat.created_at)}`, chat.updated_at ? `, last active ${when(chat.updated_at)}` : "");
      const records = new Map((detail.tool_calls || []).map((r) => [r.call_id, r]));
      const shown = new Set();
      let lookups = 0;
      const els = [];
      if (truncated) els.push(notice(`Showing the first ${messages.length} messages of a longer chat.`));
      for (const m of messages) {
        // The running turn's own output is replayed live from its events.
        const live = m.run_id && active.has(m.run_id) && m.role !== "user";
        if (live) continue;
        if (m.role === "user") {
          els.push(bubble("user", m.content || "", m.created_at));
        } else if (m.role === "assistant") {
          if (m.content) els.push(bubble("assistant", m.content, m.created_at));
          for (const c of Array.isArray(m.tool_calls) ? m.tool_calls : []) {
            const r = c && records.get(c.id);
            if (r) {
              shown.add(r.call_id);
              els.push(callCard(r, lookups++ < MAX_APPROVAL_LOOKUPS));
            } else if (c) {
              els.push(callCard({tool: c.name, input: c.arguments, status: "proposed", result: null, approval_id: null}, false));
            }
          }
        }
        // Tool messages hold the results the cards already show.
      }
      for (const r of records.values()) {
        if (shown.has(r.call_id) || active.has(r.run_id)) continue;
        els.push(callCard(r, lookups++ < MAX_APPROVAL_LOOKUPS));
      }
      const last = (detail.turns || [])[0];
      if (last && last.status !== "running" && last.end_reason && ENDED[last.end_reason]) {
        els.push(notice(`${ENDED[last.end_reason]}${last.error ? ` ${last.error}` : ""}`, last.end_reason === "error" || last.end_reason === "model_unavailable" ? "error" : ""));
        if (last.end_reason === "model_unavailable") showNoModel({message: last.error || "no model answered"});
      }
      if (els.length === 0) els.push(notice("No messages yet. Write the first one below."));
      clear(log, els);
    }

    function bubble(role, content, at) {
      const user = role === "user";
      return h(
        "div",
        {class: user ? "msg user" : "msg"},
        h("p", {class: "muted"}, user ? "You" : "Steward", at ? ` · ${when(at)}` : ""),
        h("div", {class: "body"}, content),
      );
    }

    /** A stored tool call (ToolCallRecord). */
    function callCard(r, lookup) {
      const card = h(
        "div",
        {class: "card tool", "data-call-id": r.call_id || null},
        h("p", {class: "line1"}, h("span", null, "Tool ", h("code", null, r.tool)), " ", pill((r.status || "").replace(/_/g, " "), CALL_KIND[r.status] || "unknown")),
        h("pre", {class: "json"}, json(r.input)),
        r.result ? [h("p", {class: "muted"}, "Result"), h("pre", {class: "json"}, trim(r.result))] : null,
      );
      if (r.approval_id !== null && r.approval_id !== undefined) {
        card.append(h("p", null, h("a", {href: "#/approvals"}, `Approval #${r.approval_id}`)));
        if (lookup && r.status === "awaiting_approval") card.append(approvalControls(r.approval_id));
      }
      return card;
    }

    /** Approve / Deny for an approval still pending (fetched to know its state and level). */
    function approvalControls(approvalId, withSummary = true) {
      const box = h("div", {class: "decide"}, h("p", {class: "muted"}, "Checking the approval…"));
      api(`/approvals/${enc(approvalId)}`)
        .then((d) => {
          const a = d && d.approval;
          if (!a || !alive) return;
          if (a.status !== "requested") {
            clear(box, h("p", null, "Decision: ", pill((a.status || "").replace(/_/g, " "), a.status === "approved" || a.status === "edited" ? "ok" : "unknown")));
            return;
          }
          const secure = a.level === "secure";
          const pinId = nextId(`chat-pin-${approvalId}`);
          const pin = secure ? h("input", {id: pinId, type: "password", inputmode: "numeric", autocomplete: "off"}) : null;
          const buttons = [];
          const decide = async (action) => {
            const body = {};
            if (action === "approve" && secure) {
              const v = pin.value.trim();
              if (!v) {
                ctx.toast("This request is secure: enter your PIN first.", "error");
                pin.focus();
                return;
              }
              body.pin = v;
            }
            for (const b of buttons) b.disabled = true;
            try {
              const r = await api(`/approvals/${enc(approvalId)}/${action}`, {method: "POST", body, once: true});
              ctx.toast(`${(r && APPROVAL_OUTCOME[r.status]) || "Done"}: ${a.summary || a.tool}`, "ok");
              clear(box, h("p", null, "Decision: ", pill((r && r.status ? r.status : action).replace(/_/g, " "), "ok")));
              // The decision resumes the chat: follow the turn it starts (the live feed also says).
              expectTurn();
            } catch (e) {
              ctx.toast(e.message, "error");
              for (const b of buttons) b.disabled = false;
            } finally {
              if (pin) pin.value = "";
            }
          };
          buttons.push(
            h("button", {type: "button", class: "primary", onclick: () => decide("approve")}, "Approve"),
            h("button", {type: "button", class: "danger", onclick: () => decide("deny")}, "Deny"),
          );
          // What runs if approved is the request's normalized input, not the model's words above.
          const taint = a.taint && Array.isArray(a.taint.fields) ? a.taint.fields : [];
          clear(
            box,
            h("p", null, withSummary && a.summary ? `${a.summary} ` : "", pill(secure ? "secure (PIN)" : a.level, secure ? "error" : "warning")),
            h("p", {class: "muted"}, "What runs if you approve:"),
            h("pre", {class: "json"}, json(a.normalized_input)),
            taint.length
              ? h("p", {class: "error"}, `From untrusted content: ${taint.map((f) => `${f.field} = ${f.value} (${f.kind}, from ${f.source})`).join("; ")}`)
              : null,
            h("div", {class: "actions"}, secure ? [h("label", {for: pinId}, "PIN"), pin] : null, buttons),
          );
        })
        .catch((e) => {
          if (alive) clear(box, notice(`The approval could not be read: ${e.message}`, "error"));
        });
      return box;
    }

    // ---- sending and following a turn ----

    async function send() {
      const message = text.value.trim();
      if (!message) {
        text.focus();
        return;
      }
      sendButton.disabled = true;
      let mine = null;
      try {
        let id = current;
        if (!id) {
          id = await newChat();
          if (!id) return;
        }
        text.value = "";
        mine = bubble("user", message, null);
        if (log.firstChild && log.firstChild.classList && log.firstChild.classList.contains("notice") && log.childNodes.length === 1) clear(log);
        log.append(mine);
        const started = await api(`/chats/${enc(id)}/turns`, {method: "POST", body: {text: message}, once: true});
        if (!alive || id !== current) return;
        clear(banner);
        startFollowing([started.run_id]);
        refreshChats();
      } catch (e) {
        if (mine) mine.remove();
        if (!text.value) text.value = message;
        if (NO_MODEL.has(e.code)) showNoModel(e);
        else ctx.toast(e.message, "error");
      } finally {
        sendButton.disabled = false;
      }
    }

    function stopFollowing() {
      if (controller) controller.abort();
      controller = null;
      following = false;
      active.clear();
      adoptUntil = 0;
      cancelButton.hidden = true;
      runState.textContent = "";
    }

    const adopting = () => Date.now() < adoptUntil;

    /** Follows the next turn that starts in this chat (a decision resumes it). */
    function expectTurn() {
      adoptUntil = Date.now() + 30_000;
      adoptSince = Math.floor(Date.now() / 1000) - 60;
      startFollowing([]);
    }

    function startFollowing(runs) {
      for (const r of runs) if (r && !ended.has(r)) active.add(r);
      if (following || (active.size === 0 && !adopting()) || !current) return;
      following = true;
      controller = new AbortController();
      cancelButton.hidden = active.size === 0;
      cancelButton.disabled = false;
      runState.textContent = active.size > 0 ? "Steward is working…" : "Waiting for the turn your decision resumes…";
      follow(current, controller);
    }

    const sleep = (ms, signal) =>
      new Promise((resolve) => {
        const t = setTimeout(resolve, ms);
        signal.addEventListener("abort", () => {
          clearTimeout(t);
          resolve();
        });
      });

    async function follow(chatId, ctl) {
      const signal = ctl.signal;
      await loadingChat;
      if (signal.aborted) return;
      const view = liveView();
      let failures = 0;
      while (!signal.aborted && (active.size > 0 || adopting())) {
        try {
          const known = cursors.has(chatId);
          const after = cursors.get(chatId) || 0;
          const records = await api(`/chats/${enc(chatId)}/events`, {
            query: {after, wait: EVENT_WAIT_SECS, limit: EVENT_PAGE},
            signal,
          });
          if (signal.aborted) return;
          failures = 0;
          for (const r of records || []) {
            if (r.seq > (cursors.get(chatId) || 0)) cursors.set(chatId, r.seq);
            if (
              !active.has(r.run_id) &&
              adopting() &&
              r.event &&
              r.event.type === "turn_started" &&
              !ended.has(r.run_id) &&
              (known || r.at >= adoptSince)
            ) {
              active.add(r.run_id);
              adoptUntil = 0;
            }
            if (!active.has(r.run_id)) continue;
            view.handle(r);
          }
          if (!records || records.length === 0) await checkRuns(signal);
        } catch (e) {
          if (signal.aborted || e.name === "AbortError") return;
          if (++failures >= 5) {
            ctx.toast(`Stopped following the turn: ${e.message}`, "error");
            break;
          }
          await sleep(1000 * failures, signal);
        }
      }
      if (signal.aborted || controller !== ctl) return;
      following = false;
      controller = null;
      active.clear();
      adoptUntil = 0;
      cancelButton.hidden = true;
      runState.textContent = "";
      await loadChat();
      refreshChats();
    }

    /** After a quiet wait: drops runs the server says are no longer running. */
    async function checkRuns(signal) {
      for (const run of [...active]) {
        try {
          const t = await api(`/runs/${enc(run)}`, {signal});
          if (t && t.status !== "running") {
            active.delete(run);
            ended.add(run);
          }
        } catch (e) {
          if (e.name === "AbortError") return;
          if (e.status === 404) active.delete(run);
        }
      }
    }

    /** Renders a running turn's events into the log. */
    function liveView() {
      let writing = null; // the body of the assistant bubble being written
      const calls = new Map(); // call id → {card, state, extra}
      const scroll = () => {
        const last = log.lastElementChild;
        if (last && last.scrollIntoView && document.activeElement !== text) last.scrollIntoView({block: "nearest"});
      };
      const callFor = (e) => {
        let c = calls.get(e.call_id);
        if (!c && e.call_id) {
          // A call drawn from the stored chat (a decision resumed its turn): update that card.
          const stored = [...log.querySelectorAll(".card.tool[data-call-id]")].find((x) => x.dataset.callId === e.call_id);
          const state = stored && stored.querySelector(".line1 .pill");
          if (state) {
            const extra = h("div");
            stored.append(extra);
            c = {card: stored, state, extra};
            calls.set(e.call_id, c);
            // Its stored decision buttons are spent now.
            for (const d of stored.querySelectorAll(".decide button")) d.disabled = true;
          }
        }
        if (!c) {
          const state = pill("proposed", "unknown");
          const extra = h("div");
          const card = h(
            "div",
            {class: "card tool", "data-call-id": e.call_id},
            h("p", {class: "line1"}, h("span", null, "Tool ", h("code", null, e.tool || "")), " ", state),
            e.input !== undefined ? h("pre", {class: "json"}, json(e.input)) : null,
            extra,
          );
          c = {card, state, extra};
          calls.set(e.call_id, c);
          log.append(card);
          writing = null;
        }
        return c;
      };
      const setState = (c, status) => {
        c.state.textContent = String(status).replace(/_/g, " ");
        c.state.className = `pill ${CALL_KIND[status] || "unknown"}`;
      };
      return {
        handle(r) {
          const e = r.event || {};
          switch (e.type) {
            case "turn_started":
              runState.textContent = e.trigger === "decision" ? "Steward is resuming after a decision…" : "Steward is working…";
              cancelButton.hidden = false;
              break;
            case "message_applied":
              log.append(h("p", {class: "muted"}, "A message you sent was taken into this turn."));
              writing = null;
              break;
            case "text_delta": {
              if (!writing) {
                writing = h("div", {class: "body"});
                log.append(h("div", {class: "msg", "data-run-id": r.run_id}, h("p", {class: "muted"}, "Steward"), writing));
              }
              writing.textContent += visible(e.text || "");
              break;
            }
            case "tool_proposed":
              callFor(e);
              break;
            case "tool_started":
              setState(callFor(e), "running");
              break;
            case "approval_required": {
              const c = callFor(e);
              setState(c, "awaiting_approval");
              c.extra.append(
                h(
                  "div",
                  null,
                  e.summary ? h("p", null, e.summary) : null,
                  taintList(e.taint),
                  h("p", null, h("a", {href: "#/approvals"}, `Approval #${e.approval_id}`)),
                  approvalControls(e.approval_id, !e.summary),
                ),
              );
              break;
            }
            case "tool_finished": {
              const c = callFor(e);
              setState(c, e.status);
              if (e.result) c.extra.append(h("p", {class: "muted"}, "Result"), h("pre", {class: "json"}, trim(e.result)));
              const src = sourceList(e.sources, e.untrusted);
              if (src) c.extra.append(src);
              break;
            }
            case "context_compacted":
              log.append(h("p", {class: "muted"}, `Older context was ${e.summarized ? "summarized" : "shortened"} to fit.`));
              break;
            case "turn_ended": {
              active.delete(r.run_id);
              ended.add(r.run_id);
              if (e.next_run && !ended.has(e.next_run)) active.add(e.next_run);
              const why = ENDED[e.reason];
              if (why) log.append(notice(`${why}${e.error ? ` ${e.error}` : ""}`, e.reason === "error" || e.reason === "model_unavailable" ? "error" : ""));
              if (e.reason === "model_unavailable") showNoModel({message: e.error || "no model answered"});
              writing = null;
              break;
            }
            default:
              break;
          }
          scroll();
        },
      };
    }

    async function cancelRun() {
      const runs = [...active];
      if (runs.length === 0) return;
      cancelButton.disabled = true;
      try {
        let reached = false;
        for (const run of runs) {
          const r = await api(`/runs/${enc(run)}/cancel`, {method: "POST", once: true});
          if (r && r.cancelled) reached = true;
        }
        ctx.toast(reached ? "Cancelling: the turn stops at its next safe point." : "The turn had already ended.", "ok");
        runState.textContent = reached ? "Cancelling…" : runState.textContent;
      } catch (e) {
        ctx.toast(e.message, "error");
        cancelButton.disabled = false;
      }
    }

    // ---- live updates ----

    const off = ctx.live
      ? ctx.live.on((e) => {
          if (!alive) return;
          if (e.type === "chat") {
            const kind = e.event && e.event.type;
            if (kind === "turn_started" || kind === "turn_ended") refreshChats();
            if (e.chat_id !== current) return;
            if (kind === "turn_ended") {
              if (!following) refreshChat();
            } else if (!ended.has(e.run_id)) {
              startFollowing([e.run_id]);
            }
          } else if (e.type === "approval") {
            if (current && !following) refreshChat();
          }
        })
      : () => {};

    loadChats();
    if (current) loadChat();

    return () => {
      alive = false;
      loadGen++;
      stopFollowing();
      off();
    };
  },
};
