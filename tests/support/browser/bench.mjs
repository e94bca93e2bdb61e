// The web client's speed on a large home (scripts/bench web): what the first load costs over the
// wire, how soon the app is usable, and how fast search-as-you-type shows its first result.
//   STEWARD_BASE, STEWARD_PAIR_URL, STEWARD_CHROMIUM; STEWARD_BENCH_RUNS (default 15).
// Prints medians and p95s; asserts nothing (scripts/bench reports, docs/benchmarks.md records).

import {chromium} from "playwright-core";

const base = process.env.STEWARD_BASE;
const runs = Number(process.env.STEWARD_BENCH_RUNS || 15);
const QUERIES = ["invoice", "meeting thursday", "bonifico", "condominio", "Rossi", "tax paperwork", "berlin", "signed copy"];

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const fmt = (xs) => `median ${pct(xs, 50).toFixed(1)} ms, p95 ${pct(xs, 95).toFixed(1)} ms (n=${xs.length})`;

const browser = await chromium.launch({
  executablePath: process.env.STEWARD_CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});

// Pair once; every run is a fresh context (cold cache) carrying the device cookie.
const setup = await browser.newContext();
const p0 = await setup.newPage();
await p0.goto(process.env.STEWARD_PAIR_URL);
await p0.click("#go");
await p0.waitForURL(`${base}/`);
const cookies = await setup.cookies();
await setup.close();

const loads = [];
const inPage = [];
const bytes = [];
for (let i = 0; i < runs; i++) {
  const ctx = await browser.newContext({serviceWorkers: "block"});
  await ctx.addCookies(cookies);
  const page = await ctx.newPage();
  const requests = [];
  page.on("requestfinished", (r) => requests.push(r));
  const t0 = Date.now();
  await page.goto(`${base}/#/mail`);
  await page.waitForSelector("#results li button.item");
  loads.push(Date.now() - t0);
  // The page's own clock: from the start of its navigation to the first mail listed.
  inPage.push(await page.evaluate(() => performance.now()));
  let wire = 0;
  for (const r of requests) {
    const s = await r.sizes();
    wire += s.responseBodySize + s.responseHeadersSize;
  }
  bytes.push(wire);
  await ctx.close();
}
console.log(`first load to the first mail listed (cold cache, ${runs} runs), as the driver sees it (new tab included): ${fmt(loads)}`);
console.log(`the same, by the page's clock (navigation start to the first mail listed): ${fmt(inPage)}`);
console.log(`bytes over the wire for that load (compressed, headers included): median ${pct(bytes, 50)} B`);

// Search as you type: from the keystroke that completes a query to its first result in the list.
const ctx = await browser.newContext();
await ctx.addCookies(cookies);
const page = await ctx.newPage();
await page.goto(`${base}/#/mail`);
await page.waitForSelector("#results li button.item");
const typed = [];
for (let round = 0; round < Math.max(2, Math.ceil(runs / QUERIES.length)); round++) {
  for (const q of QUERIES) {
    const ms = await page.evaluate(async (q) => {
      const input = document.getElementById("q");
      const results = document.getElementById("results");
      input.value = "";
      input.dispatchEvent(new Event("input"));
      await new Promise((r) => setTimeout(r, 150));
      return await new Promise((resolve) => {
        let t0 = 0;
        const obs = new MutationObserver(() => {
          const first = results.querySelector("li");
          if (first && t0) {
            obs.disconnect();
            resolve(performance.now() - t0);
          }
        });
        obs.observe(results, {childList: true});
        // Type it a key at a time, as a person does; time the last key.
        for (let i = 1; i <= q.length; i++) {
          input.value = q.slice(0, i);
          if (i === q.length) t0 = performance.now();
          input.dispatchEvent(new Event("input"));
        }
      });
    }, q);
    typed.push(ms);
  }
}
console.log(`search as you type, last keystroke to first result: ${fmt(typed)}`);
await browser.close();
