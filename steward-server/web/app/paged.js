// A table loaded a page at a time: "Load more" appends, a fresh load starts over, and an answer
// that lost a race (a newer load, the page left) is dropped.

import {h, clear, notice} from "./dom.js";

/**
 * `pagedTable({columns, row, fetchPage, empty, toast, signal})` gives `{box, body, more, load}`:
 * `box` (the table or a notice) and `more` (the button) go in the page, `load(true)` starts over.
 * - `columns`: header cells, each a text or a function making its content (a fresh node per table);
 * - `row(item)`: a <tr>; `fetchPage(offset, limit)`: the answer for one page;
 * - `take(answer)`: its rows, once it is known to be current (default: the answer itself);
 * - `empty`: the text when there is no row, or a function giving it (it may read the filters);
 * - `busy(b)`: told when a load starts and ends, to hold other controls meanwhile;
 * - `signal`: the page's; once aborted (the page left), nothing is shown any more.
 */
export function pagedTable({columns, row, fetchPage, take, empty, busy, toast, signal, pageSize = 50}) {
  const body = h("tbody");
  const box = h("div", null, notice("Loading…"));
  const more = h("button", {type: "button", hidden: true}, "Load more");
  let offset = 0;
  let seq = 0;
  const gone = () => Boolean(signal && signal.aborted);

  function done() {
    if (busy) busy(false);
    more.disabled = false;
  }

  async function load(fresh) {
    const my = ++seq;
    if (fresh) offset = 0;
    if (busy) busy(true);
    more.disabled = true;
    let answer;
    try {
      answer = await fetchPage(offset, pageSize);
    } catch (e) {
      if (e.name === "AbortError" || gone() || my !== seq) return;
      if (fresh) clear(box, notice(e.message, "error"));
      else toast(e.message, "error");
      done();
      return;
    }
    if (gone() || my !== seq) return;
    done();
    const list = (take ? take(answer) : answer) || [];
    if (fresh) clear(body);
    body.append(...list.map(row));
    offset += list.length;
    more.hidden = list.length < pageSize;
    if (!body.children.length) {
      clear(box, notice(typeof empty === "function" ? empty() : empty));
    } else if (fresh) {
      const head = columns.map((c) => h("th", {scope: "col"}, typeof c === "function" ? c() : c));
      clear(box, h("table", null, h("thead", null, h("tr", null, head)), body));
    }
  }

  more.addEventListener("click", () => load(false));
  return {box, body, more, load};
}
