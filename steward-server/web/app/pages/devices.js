// Devices: the paired browsers and phones, a new pairing link (with its code), revoke.

import {api} from "../api.js";
import {h, clear, when, pill, notice} from "../dom.js";

export default {
  title: "Devices",
  render(root, ctx) {
    const list = h("div", {id: "devices"}, notice("Loading…"));
    const link = h("div", {id: "pairing", "aria-live": "polite"});

    async function load() {
      let devices;
      try {
        devices = await api("/devices");
      } catch (e) {
        clear(list, notice(e.message, "error"));
        return;
      }
      clear(
        list,
        devices.length === 0
          ? notice("No device is paired yet.")
          : h(
              "table",
              {},
              h(
                "thead",
                {},
                h("tr", {}, ["Name", "Paired", "Last used", "State", ""].map((t) => h("th", {scope: "col"}, t || h("span", {class: "muted"}, "Action")))),
              ),
              h(
                "tbody",
                {},
                devices.map((d) =>
                  h(
                    "tr",
                    {dataset: {deviceId: d.id}},
                    h("td", {}, d.name),
                    h("td", {}, when(d.created_at)),
                    h("td", {}, when(d.last_used_at) || "—"),
                    h("td", {}, d.revoked_at ? pill(`revoked ${when(d.revoked_at)}`, "error") : pill("active", "ok")),
                    h(
                      "td",
                      {},
                      d.revoked_at
                        ? ""
                        : h(
                            "button",
                            {
                              type: "button",
                              class: "danger",
                              onclick: async (ev) => {
                                if (!confirm(`Revoke "${d.name}"? Its token stops working at once.`)) return;
                                ev.target.disabled = true;
                                try {
                                  await api(`/devices/${d.id}/revoke`, {method: "POST", once: true});
                                  ctx.toast(`Revoked ${d.name}.`);
                                } catch (e) {
                                  ctx.toast(e.message, "error");
                                }
                                load();
                              },
                            },
                            "Revoke",
                          ),
                    ),
                  ),
                ),
              ),
            ),
      );
    }

    async function newCode(ev) {
      ev.target.disabled = true;
      try {
        const c = await api("/pairing-codes", {method: "POST", once: true});
        const url = `${location.origin}/pair#${c.code}`;
        clear(
          link,
          h(
            "div",
            {class: "card"},
            h("h2", {}, "Pair a phone or another browser"),
            h("p", {}, "Open this link on the device (one use, until ", when(c.expires_at), "):"),
            h("p", {}, h("code", {id: "pair-link"}, url)),
            h("p", {}, "Or enter the code on its pairing page: ", h("strong", {}, c.code)),
            h(
              "p",
              {class: "muted"},
              "From a phone, the server must listen on an address the phone reaches (steward serve --listen, with STEWARD_ALLOWED_HOSTS) — over TLS beyond your own network.",
            ),
          ),
        );
      } catch (e) {
        ctx.toast(e.message, "error");
      }
      ev.target.disabled = false;
    }

    clear(
      root,
      h("h1", {id: "page-title"}, "Devices"),
      h("div", {class: "actions"}, h("button", {type: "button", class: "primary", onclick: newCode}, "New pairing link")),
      link,
      h("h2", {}, "Paired"),
      list,
    );
    load();
  },
};
