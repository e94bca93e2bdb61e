// Journal: the write operations Steward performed (sends, calendar changes), their state and
// the evidence that they happened; the ones a person must look at come first.

import {api} from "../api.js";
import {h, clear, when, pill, json, notice, debounce} from "../dom.js";
import {pagedTable} from "../paged.js";

const PAGE = 50;
const REVIEW_PAGE = 10;
const STATES = [
  ["scheduled", "scheduled"],
  ["started", "started"],
  ["backend_returned", "backend returned"],
  ["unknown", "unknown"],
  ["failed", "failed"],
  ["confirmed", "confirmed"],
  ["needs_review", "needs review"],
  ["retry_exhausted", "retry exhausted"],
];
const STATE_KIND = {
  confirmed: "ok",
  scheduled: "unknown",
  started: "unknown",
  backend_returned: "unknown",
  unknown: "warning",
  needs_review: "warning",
  retry_exhausted: "warning",
  failed: "error",
};

function statePill(s) {
  return pill(String(s || "").replace(/_/g, " "), STATE_KIND[s] || "unknown");
}

/** A line that says what stands out about an operation. */
function summary(o) {
  const parts = [];
  if (o.error) parts.push(`error: ${o.error}`);
  if (o.scheduled_for) parts.push(`due ${when(o.scheduled_for)}`);
  if (o.attempted_at) parts.push(`sent ${when(o.attempted_at)}`);
  if (o.approval_id !== null && o.approval_id !== undefined) parts.push(`approval ${o.approval_id}`);
  if (o.confirmation_attempts) {
    parts.push(`${o.confirmation_attempts} confirmation check${o.confirmation_attempts === 1 ? "" : "s"}`);
  }
  return parts.join(" · ");
}

function jsonBlock(label, v) {
  return [
    h("h3", null, label),
    v === null || v === undefined ? h("p", {class: "muted"}, "None.") : h("pre", {class: "json", tabindex: "0"}, json(v)),
  ];
}

function facts(pairs) {
  return h(
    "dl",
    {class: "headers"},
    pairs
      .filter(([, v]) => v !== null && v !== undefined && v !== "")
      .map(([k, v]) => [h("dt", null, k), h("dd", null, v)]),
  );
}

export default {
  title: "Journal",

  render(root, ctx) {
    const aborter = new AbortController();
    const signal = aborter.signal;
    let gone = false;
    let selected = ctx.params.get("op") || "";

    // ---- the operation shown ----
    const detailBox = h("div", {"aria-live": "polite"});
    let detailSeq = 0;

    function remember() {
      const p = {};
      if (stateSel.value) p.state = stateSel.value;
      if (selected) p.op = selected;
      ctx.setParams(p);
    }

    async function showOp(id, focus) {
      if (gone) return;
      const my = ++detailSeq;
      selected = String(id);
      remember();
      for (const tr of ops.body.querySelectorAll("tr")) {
        tr.setAttribute("aria-current", tr.dataset.opId === selected ? "true" : "false");
      }
      clear(detailBox, notice("Loading…"));
      let op;
      try {
        op = await api(`/ops/${encodeURIComponent(id)}`, {signal});
      } catch (e) {
        if (e.name !== "AbortError" && !gone && my === detailSeq) clear(detailBox, notice(e.message, "error"));
        return;
      }
      if (gone || my !== detailSeq) return;
      const heading = h("h2", {id: "op-title", tabindex: "-1"}, `Operation ${op.id}: ${op.kind}`);
      clear(
        detailBox,
        h(
          "article",
          {class: "card", "aria-labelledby": "op-title", dataset: {opId: String(op.id)}},
          heading,
          h("p", null, statePill(op.state)),
          facts([
            ["Tool", op.kind],
            ["Created", when(op.created_at)],
            ["Updated", when(op.updated_at)],
            ["Scheduled for", when(op.scheduled_for)],
            ["Backend called", when(op.attempted_at)],
            ["Backend attempts", String(op.attempts)],
            ["Confirmation checks", String(op.confirmation_attempts)],
            ["Approval", op.approval_id === null || op.approval_id === undefined ? null : String(op.approval_id)],
            ["Error", op.error],
            ["Idempotency key", op.idempotency_key],
            ["Input SHA-256", op.input_sha256],
          ]),
          jsonBlock("Input", op.input),
          jsonBlock("Expected outcome", op.expected),
          jsonBlock("Backend result", op.backend_result),
          jsonBlock("Evidence", op.evidence),
        ),
      );
      if (focus) heading.focus();
    }

    // ---- needs review ----
    const reviewBox = h("div", null, notice("Loading…"));
    const reviewList = h("ul", {class: "list"});
    const reviewMore = h("button", {type: "button", hidden: true}, "Load more");
    let reviewOffset = 0;
    let reviewSeq = 0;

    function reviewItem(o, full) {
      const show = h("button", {type: "button"}, `Show operation ${o.id}`);
      show.addEventListener("click", () => showOp(o.id, true));
      return h(
        "li",
        {dataset: {opId: String(o.id)}},
        h(
          "div",
          {class: "line1"},
          h("strong", null, `${o.kind} #${o.id}`),
          " ",
          statePill(o.state),
          " ",
          h("span", {class: "muted"}, `updated ${when(o.updated_at)}`),
        ),
        summary(o) ? h("p", {class: "muted"}, summary(o)) : null,
        h("h3", null, "Evidence"),
        full
          ? full.evidence === null || full.evidence === undefined
            ? h("p", {class: "muted"}, "No evidence recorded.")
            : h("pre", {class: "json", tabindex: "0"}, json(full.evidence))
          : h("p", {class: "muted"}, "The evidence could not be read."),
        h("div", {class: "actions"}, show),
      );
    }

    async function loadReview(fresh) {
      const my = ++reviewSeq;
      if (fresh) reviewOffset = 0;
      reviewMore.disabled = true;
      let list;
      try {
        list = await api("/ops", {query: {state: "needs_review", limit: REVIEW_PAGE, offset: reviewOffset}, signal});
      } catch (e) {
        if (e.name === "AbortError" || gone || my !== reviewSeq) return;
        if (fresh) clear(reviewBox, notice(e.message, "error"));
        else ctx.toast(e.message, "error");
        reviewMore.disabled = false;
        return;
      }
      if (gone || my !== reviewSeq) return;
      list = list || [];
      // The evidence is only in the full operation (one read each, at most a page).
      const full = await Promise.all(
        list.map((o) => api(`/ops/${encodeURIComponent(o.id)}`, {signal}).catch(() => null)),
      );
      if (gone || my !== reviewSeq) return;
      if (fresh) clear(reviewList);
      reviewList.append(...list.map((o, i) => reviewItem(o, full[i])));
      reviewOffset += list.length;
      reviewMore.hidden = list.length < REVIEW_PAGE;
      reviewMore.disabled = false;
      if (!reviewList.children.length) clear(reviewBox, notice("Nothing needs review."));
      else if (fresh) clear(reviewBox, reviewList);
    }

    reviewMore.addEventListener("click", () => loadReview(false));

    // ---- all operations ----
    const stateSel = h(
      "select",
      {id: "ops-state"},
      h("option", {value: ""}, "Any"),
      STATES.map(([v, label]) => h("option", {value: v, selected: v === ctx.params.get("state")}, label)),
    );

    function opRow(o) {
      const open = h("button", {type: "button", class: "item", "aria-label": `Show operation ${o.id}`}, String(o.id));
      open.addEventListener("click", (ev) => {
        ev.stopPropagation();
        showOp(o.id, true);
      });
      return h(
        "tr",
        {
          dataset: {opId: String(o.id)},
          "aria-current": String(o.id) === selected ? "true" : "false",
          onclick: () => showOp(o.id, true),
        },
        h("td", null, open),
        h("td", null, o.kind),
        h("td", null, statePill(o.state)),
        h("td", null, when(o.created_at)),
        h("td", null, when(o.updated_at)),
        h("td", null, summary(o)),
      );
    }

    const ops = pagedTable({
      columns: ["Id", "Tool", "State", "Created", "Updated", "Summary"],
      row: opRow,
      fetchPage: (offset, limit) => api("/ops", {query: {limit, offset, state: stateSel.value}, signal}),
      empty: () => (stateSel.value ? "No operation in this state." : "No operation yet."),
      pageSize: PAGE,
      toast: ctx.toast,
      signal,
    });

    stateSel.addEventListener("change", () => {
      remember();
      ops.load(true);
    });

    clear(
      root,
      h("h1", {id: "page-title"}, "Journal"),
      h(
        "section",
        {class: "card", "aria-labelledby": "review-title"},
        h("h2", {id: "review-title"}, "Needs review"),
        h(
          "p",
          {class: "muted"},
          "Sends that were not confirmed in time: check whether they arrived before asking again.",
        ),
        reviewBox,
        h("div", {class: "actions"}, reviewMore),
      ),
      h(
        "section",
        {class: "card", "aria-labelledby": "ops-title"},
        h("h2", {id: "ops-title"}, "Operations"),
        h("div", {class: "toolbar"}, h("label", {for: "ops-state"}, "State", stateSel)),
        ops.box,
        h("div", {class: "actions"}, ops.more),
      ),
      detailBox,
    );

    loadReview(true);
    ops.load(true);
    if (selected) showOp(selected, false);

    const reloadLater = debounce(() => {
      if (gone) return;
      loadReview(true);
      ops.load(true);
      if (selected) showOp(selected, false);
    }, 250);
    const off = ctx.live
      ? ctx.live.on((e) => {
          if (e.type === "operation" || e.type === "reset") reloadLater();
        })
      : () => {};

    return () => {
      gone = true;
      off();
      aborter.abort();
    };
  },
};
