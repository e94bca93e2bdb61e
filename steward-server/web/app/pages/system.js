// System: the status items (observational), the runner's jobs, the mirror's counts and the
// policy in force per tool.

import {api} from "../api.js";
import {h, clear, when, pill, notice} from "../dom.js";

export default {
  title: "System",
  render(root, ctx) {
    const status = h("div", {id: "status"}, notice("Loading…"));
    const jobs = h("div", {id: "jobs"});
    const stats = h("div", {id: "stats"});
    const policy = h("div", {id: "policy"});

    function showStatus(s) {
      clear(
        status,
        h(
          "div",
          {class: "card"},
          h("h2", {}, "Status ", pill(s.status, s.status)),
          h("p", {class: "muted"}, `checked ${when(s.checked_at)}`),
          h(
            "table",
            {},
            h("thead", {}, h("tr", {}, h("th", {scope: "col"}, "Item"), h("th", {scope: "col"}, "State"), h("th", {scope: "col"}, "Detail"))),
            h(
              "tbody",
              {},
              s.items.map((i) => h("tr", {}, h("td", {}, i.name), h("td", {}, pill(i.status, i.status)), h("td", {}, i.detail))),
            ),
          ),
        ),
      );
    }

    async function load() {
      try {
        showStatus(await api("/system/status"));
      } catch (e) {
        clear(status, notice(e.message, "error"));
      }
      try {
        const list = await api("/system/jobs");
        clear(
          jobs,
          h(
            "div",
            {class: "card"},
            h("h2", {}, "Background jobs"),
            h(
              "table",
              {},
              h(
                "thead",
                {},
                h("tr", {}, ["Job", "Every", "Last run", "Outcome", "Next", "Note"].map((t) => h("th", {scope: "col"}, t))),
              ),
              h(
                "tbody",
                {},
                list.map((j) =>
                  h(
                    "tr",
                    {},
                    h("td", {}, j.name),
                    h("td", {}, j.config.enabled ? `${Math.round(j.config.interval_secs / 60)} min` : "off"),
                    h("td", {}, when(j.last_finished_at) || "—"),
                    h(
                      "td",
                      {},
                      j.running ? pill("running", "ok") : j.last_outcome ? pill(String(j.last_outcome), j.last_error ? "error" : "ok") : "—",
                    ),
                    h("td", {}, when(j.next_run_at) || "—"),
                    h("td", {class: "muted"}, j.unavailable || j.last_error || j.last_summary || ""),
                  ),
                ),
              ),
            ),
          ),
        );
      } catch (e) {
        clear(jobs, notice(`Jobs: ${e.message}`, "error"));
      }
      try {
        const s = await api("/stats");
        clear(
          stats,
          h(
            "div",
            {class: "card"},
            h("h2", {}, "Mirror"),
            h(
              "dl",
              {class: "headers"},
              Object.entries(s.messages_by_role || {}).map(([k, v]) => [h("dt", {}, k), h("dd", {}, String(v))]),
              h("dt", {}, "files in error"),
              h("dd", {}, String(s.error_count)),
            ),
          ),
        );
      } catch (e) {
        clear(stats, notice(`Mirror: ${e.message}`, "error"));
      }
      try {
        const p = await api("/policy");
        const tools = p.tools || [];
        const policy = (p.current && p.current.policy) || {};
        const rules = policy.rules || {};
        const overrides = policy.overrides || {};
        const show = (v) => (typeof v === "string" ? v : v && v.level ? v.level : JSON.stringify(v));
        // In the order the policy applies them: a denied prefix, an override, a rule, the default.
        const level = (t) => {
          if ((policy.deny_prefixes || []).some((d) => t.name.startsWith(d))) return "deny (prefix)";
          if (overrides[t.name] !== undefined) return `${show(overrides[t.name])} (override)`;
          if (rules[t.name] !== undefined) return `${show(rules[t.name])} (rule)`;
          return t.default_level;
        };
        clear(
          policy,
          h(
            "div",
            {class: "card"},
            h("h2", {}, "Policy per tool"),
            h("p", {class: "muted"}, `policy version ${p.current ? p.current.version : 0}; change a level with PUT /policy/{tool} or \`steward policy\``),
            h(
              "table",
              {},
              h("thead", {}, h("tr", {}, h("th", {scope: "col"}, "Tool"), h("th", {scope: "col"}, "Level"), h("th", {scope: "col"}, "What it does"))),
              h(
                "tbody",
                {},
                tools.map((t) => h("tr", {}, h("td", {}, t.name), h("td", {}, pill(level(t), "unknown")), h("td", {class: "muted"}, t.description || ""))),
              ),
            ),
          ),
        );
      } catch (e) {
        clear(policy, notice(`Policy: ${e.message}`, "error"));
      }
    }

    const off = ctx.live ? ctx.live.on((e) => {
      if (e.type === "status" || e.type === "observation") api("/system/status").then(showStatus).catch(() => {});
    }) : null;
    clear(root, h("h1", {id: "page-title"}, "System"), status, jobs, stats, policy);
    load();
    return () => off && off();
  },
};
