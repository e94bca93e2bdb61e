// Steward's web client in Debian's chromium (playwright-core launches the system executable;
// it downloads no browser). Run by steward-server/tests/web.rs against `steward serve`:
//   STEWARD_BASE, STEWARD_PAIR_URL, STEWARD_CHROMIUM, STEWARD_PIN, STEWARD_DENY_APPROVAL,
//   STEWARD_SECURE_APPROVAL, STEWARD_OUTAGE_APPROVAL (the seeded requests, see web.rs),
//   STEWARD_SCREENSHOTS (optional: a directory for every page's screenshots).
// Throws (exit 1) on anything that goes wrong; prints one JSON summary line last.

import {readFileSync, mkdirSync} from "node:fs";
import {createRequire} from "node:module";
import {chromium} from "playwright-core";

const require = createRequire(import.meta.url);
const AXE = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");
const base = process.env.STEWARD_BASE;
const pairUrl = process.env.STEWARD_PAIR_URL;
const waiting = process.env.STEWARD_DENY_APPROVAL;
const secure = process.env.STEWARD_SECURE_APPROVAL;
const pin = process.env.STEWARD_PIN;
const outage = Number(process.env.STEWARD_OUTAGE_APPROVAL);
const shots = process.env.STEWARD_SCREENSHOTS;
const PAGES = ["chat", "approvals", "mail", "memory", "watches", "journal", "usage", "audit", "system", "devices"];
const summary = {axe: {}, flows: []};

// A watchdog: a step that waits forever (a promise that never settles) fails the run instead.
setTimeout(() => {
  console.error("flows: still running after 5 minutes; stopping");
  process.exit(3);
}, 300_000).unref();

function check(ok, what) {
  if (!ok) throw new Error(`failed: ${what}`);
}

const browser = await chromium.launch({
  executablePath: process.env.STEWARD_CHROMIUM || "/usr/bin/chromium",
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
const context = await browser.newContext({viewport: {width: 1280, height: 860}});
const page = await context.newPage();
// Everything the page asks for must go to this server: nothing to another origin, ever.
const offsite = [];
page.on("request", (r) => {
  const u = r.url();
  if (!u.startsWith(base) && !u.startsWith("ws://" + new URL(base).host) && !u.startsWith("data:")) offsite.push(u);
});
const dialogs = [];
page.on("dialog", (d) => {
  dialogs.push(d.message());
  d.dismiss().catch(() => {});
});
const errors = [];
page.on("pageerror", (e) => errors.push(e.message));

async function axe(name) {
  await page.evaluate(AXE + "\n;0");
  const r = await page.evaluate(async () => {
    const res = await window.axe.run(document, {resultTypes: ["violations"]});
    return res.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" "))}));
  });
  summary.axe[name] = r.length;
  check(r.length === 0, `accessibility of ${name}: ${JSON.stringify(r)}`);
}

async function visit(name, query) {
  await page.goto(`${base}/#/${name}${query ? `?${query}` : ""}`);
  await page.waitForSelector(`section.page-${name} h1#page-title`);
  await page.waitForLoadState("networkidle");
}

// The live feed goes through a route this script can cut; every frame the page receives is kept.
const wsUrls = [];
const frames = [];
let wsBlocked = false;
let wsCurrent = null;
await page.routeWebSocket(/\/ws(\?|$)/, (ws) => {
  wsUrls.push(ws.url());
  if (wsBlocked) {
    ws.close({code: 1013, reason: "the test's outage"});
    return;
  }
  const server = ws.connectToServer();
  wsCurrent = {ws, server};
  server.onMessage((m) => {
    frames.push(String(m));
    ws.send(m);
  });
});
const outageEvents = () =>
  frames
    .map((f) => JSON.parse(f))
    .filter((e) => e.type === "approval" && e.approval_id === outage && e.event === "denied");

// 1. Pair this browser with the link the server printed; the app opens, live.
await page.goto(pairUrl);
await page.click("#go");
await page.waitForURL(`${base}/`);
await page.waitForSelector('#conn[data-state="live"]');
summary.flows.push("paired");

// 2. Mail: search as you type, open a result, read it and its thread.
await visit("mail");
await page.fill("#q", "invoice");
await page.waitForFunction(() => new URLSearchParams(location.hash.split("?")[1]).get("q") === "invoice");
await page.waitForSelector("#results li button.item");
const found = await page.locator("#results li").count();
check(found > 0, "search finds the demo invoices");
await page.locator("#results li button.item").first().click();
await page.waitForSelector("#message-body");
check((await page.textContent("#message-subject")).length > 0, "the message opens");
await axe("mail");
summary.flows.push(`searched (${found} shown) and read`);

// 3. Hostile mail stays text: no script runs, nothing leaves, the page stays responsive.
// The CSP's Trusted Types: a string can reach no HTML sink, whatever the code would try.
const sinkBlocked = await page.evaluate(() => {
  try {
    document.createElement("div").innerHTML = "<b>markup</b>";
    return false;
  } catch {
    return true;
  }
});
check(sinkBlocked, "Trusted Types block HTML sinks");
const scriptsBefore = await page.evaluate(() => document.scripts.length);
await page.fill("#q", "HOSTILEMARK");
await page.waitForFunction(() => document.querySelectorAll("#results li").length >= 3);
for (let i = 0; i < 3; i++) {
  await page.locator("#results li button.item").nth(i).click();
  await page.waitForFunction(() => document.querySelector("#message-body")?.textContent.includes("HOSTILEMARK"));
}
await page.locator("#results li button.item", {hasText: "Huge body"}).click();
await page.waitForFunction(() => document.querySelector("#message-subject")?.textContent.includes("Huge body"));
const hostile = await page.evaluate(() => ({
  pwned: window.__pwned ?? null,
  scripts: document.scripts.length,
  frames: document.querySelectorAll("main iframe, main img, main svg, main style, main a[href^='javascript:']").length,
  body: document.querySelector("#message-body").textContent.length,
}));
check(hostile.pwned === null, `no script from mail ran (${hostile.pwned})`);
check(hostile.scripts === scriptsBefore, "no script element was added");
check(hostile.frames === 0, "no markup from mail became elements");
check(hostile.body <= 12000, `the 5 MB body shows a bounded window (${hostile.body} chars)`);
await page.getByRole("button", {name: "Load more of the message"}).click();
await page.waitForFunction((n) => document.querySelector("#message-body").textContent.length > n, hostile.body);
// A bidi override in a subject is shown by name, never obeyed ("gnp.exe" must not read "exe.png").
await page.locator("#results li button.item", {hasText: "bidi"}).click();
await page.waitForFunction(() => document.querySelector("#message-subject")?.textContent.includes("bidi"));
const subject = await page.textContent("#message-subject");
check(!subject.includes("\u202E") && subject.includes("[RLO]gnp.exe[PDF]"), `bidi controls shown by name: ${subject}`);
summary.flows.push("hostile mail stayed text");

// 4. A request waiting for the person, denied with a note on its card.
await visit("approvals");
const card = page.locator(`[data-approval-id="${waiting}"]`);
await card.waitFor();
await axe("approvals");
await card.getByRole("button", {name: "Deny", exact: true}).click();
await card.locator("textarea").fill("Not this one.");
await card.getByRole("button", {name: /^(Deny|Confirm deny|Send denial)/}).last().click();
await page.waitForFunction((id) => !document.querySelector(`[data-approval-id="${id}"]`), waiting);
summary.flows.push("denied with a note");

// A secure request: a wrong PIN is refused and it stays waiting; the right one approves it.
const secureCard = page.locator(`[data-approval-id="${secure}"]`);
await secureCard.locator('input[type="password"]').fill("000000");
await secureCard.getByRole("button", {name: "Approve", exact: true}).click();
await secureCard.locator('[role="alert"]:not([hidden])').waitFor();
check(await secureCard.isVisible(), "a wrong PIN leaves the request waiting");
await secureCard.locator('input[type="password"]').fill(pin);
await secureCard.getByRole("button", {name: "Approve", exact: true}).click();
await page.waitForFunction((id) => !document.querySelector(`[data-approval-id="${id}"]`), secure);
summary.flows.push("secure request approved with the PIN");

// 4b. A reconnect replays what was missed, exactly once: the feed is cut, a request is denied
// meanwhile (through the API, as another device would), and the page learns of it on resuming.
await page.waitForSelector('#conn[data-state="live"]');
wsBlocked = true;
wsCurrent.ws.close({code: 1012, reason: "the test's outage"});
wsCurrent.server.close();
await page.waitForSelector('#conn[data-state="offline"]');
const denied = await page.evaluate(
  async (id) =>
    (
      await fetch(`/approvals/${id}/deny`, {
        method: "POST",
        headers: {"content-type": "application/json"},
        body: JSON.stringify({note: "During the outage."}),
      })
    ).status,
  outage,
);
check(denied === 200, `denied during the outage (${denied})`);
check(outageEvents().length === 0, "nothing arrived while the feed was cut");
const cut = wsUrls.length;
wsBlocked = false;
await page.waitForSelector('#conn[data-state="live"]', {timeout: 60_000});
for (let i = 0; i < 200 && outageEvents().length === 0; i++) await page.waitForTimeout(50);
check(outageEvents().length === 1, `the missed event arrived once (${outageEvents().length})`);
check(/[?&]after=/.test(wsUrls[wsUrls.length - 1]) && wsUrls.length > cut, `resumed from the cursor: ${wsUrls.at(-1)}`);
await page.waitForFunction((id) => !document.querySelector(`[data-approval-id="${id}"]`), outage);
summary.flows.push("reconnect replayed the missed event once");

// 5. A chat turn: the model proposes mail.send, the person approves it on the card, the turn
// ends with the model's answer.
await visit("chat");
await page.getByRole("button", {name: "New chat"}).click();
await page.getByLabel("Message").fill("Tell Anna I'll see her at 8 for dinner.");
await page.getByRole("button", {name: "Send", exact: true}).click();
const approve = page.locator(".page-chat").getByRole("button", {name: "Approve", exact: true});
await approve.first().waitFor({timeout: 30_000});
await axe("chat");
await approve.first().click();
await page.getByText("Done: the mail to Anna is on its way.").first().waitFor({timeout: 30_000});
summary.flows.push("chat turn approved and finished");

// 6. Memory: the proposal accepted from the inbox.
await visit("memory");
const proposal = page.locator("[data-proposal-id]", {hasText: "Anna prefers calls"});
await proposal.waitFor();
await axe("memory");
const proposalId = await proposal.getAttribute("data-proposal-id");
await proposal.getByRole("button", {name: "Accept", exact: true}).click();
await page.waitForFunction((id) => !document.querySelector(`[data-proposal-id="${id}"]`), proposalId);
// Recall finds it at once.
await page.getByLabel("Search notes").fill("Anna calls");
await page.locator(".page-memory").getByText("Anna prefers calls").first().waitFor();
summary.flows.push("memory proposal accepted and found");

// 7. Every other page renders, accessibly.
for (const name of ["watches", "journal", "audit", "system", "devices"]) {
  await visit(name);
  await axe(name);
}
// Usage: the chat turn above was recorded, and the page says so.
await visit("usage");
await page.locator("#usage").getByText(/\b[1-9]\d* requests/).first().waitFor();
await axe("usage");
summary.flows.push("usage shows the chat's model calls");

// 8. The offline shell: with the service worker in control, the app opens without the server.
await page.goto(`${base}/#/system`);
const ready = await page.evaluate(() =>
  Promise.race([navigator.serviceWorker.ready.then(() => true), new Promise((r) => setTimeout(() => r(false), 20_000))]),
);
check(ready, "the service worker installed");
await page.reload();
await page.waitForFunction(() => navigator.serviceWorker.controller !== null);
await context.setOffline(true);
await page.reload();
await page.waitForSelector("header.top .brand");
summary.flows.push("offline shell loads");
await context.setOffline(false);

// 9. Screenshots of every page: desktop and phone, light and dark.
if (shots) {
  mkdirSync(shots, {recursive: true});
  for (const [size, viewport] of [["desktop", {width: 1280, height: 860}], ["phone", {width: 390, height: 844}]]) {
    await page.setViewportSize(viewport);
    for (const scheme of ["light", "dark"]) {
      await page.emulateMedia({colorScheme: scheme});
      for (const name of PAGES) {
        await visit(name, name === "mail" ? "q=invoice" : "");
        if (name === "mail") {
          await page.locator("#results li button.item").first().click();
          await page.waitForSelector("#message-body");
        }
        await page.screenshot({path: `${shots}/${name}-${size}-${scheme}.png`});
      }
    }
  }
  summary.flows.push("screenshots");
}

check(outageEvents().length === 1, `the missed event stayed delivered once (${outageEvents().length})`);
check(offsite.length === 0, `no request left for another origin: ${offsite.join(", ")}`);
check(dialogs.length === 0, `no dialog opened: ${dialogs.join(", ")}`);
check(errors.length === 0, `no script error: ${errors.join(" | ")}`);
summary.offsite = offsite.length;
await browser.close();
console.log(JSON.stringify(summary));
