// An account's deleted tables still restorable (serve --table-soft-delete,
// docs/lifecycle.md, "Undelete"), with Restore and Restore as…, through the
// admin listener's /accounts/A/deleted-tables.

import { h, fill, notify, dialog } from "./ui.js";
import { adminCall, adminError, tokenForm } from "./admin.js";

/** 3600 → "1 h"; 90061 → "1 d 1 h 1 min 1 s". */
export function duration(s) {
  const units = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1]];
  const parts = [];
  for (const [name, n] of units) {
    if (s >= n) { parts.push(`${Math.floor(s / n)} ${name}`); s %= n; }
  }
  return parts.join(" ") || "0 s";
}

const when = (iso) => (iso ? new Date(iso).toLocaleString() : "");

export function renderDeleted(root, api, { tablesChanged, tableLink }) {
  const base = `/accounts/${encodeURIComponent(api.account)}/deleted-tables`;
  const policy = h("p.hint#deleted-policy", {});
  const list = h("div.grid-wrap#deleted-list", {}, "Loading…");
  const error = h("p.error#deleted-error", { role: "alert" });

  async function load() {
    const r = await adminCall("GET", base).catch(() => null);
    if (!r) return fill(list, h("p.error", {}, "The admin listener does not answer."));
    if (r.status === 401) {
      return fill(list, tokenForm("The admin listener asks for its token (--admin-token).", () => renderDeleted(root, api, { tablesChanged, tableLink })));
    }
    if (r.status !== 200) return fill(list, h("p.error#deleted-unsupported", {}, adminError(r)));
    const keep = r.json.keepSeconds;
    policy.dataset.keep = keep ?? "";
    policy.textContent = keep
      ? `A deleted table stays restorable for ${duration(keep)} (--table-soft-delete), then is gone for good.`
      : "This server keeps no deleted tables: Delete Table removes a table at once, as Azure does. "
        + "Start it with --table-soft-delete DURATION (say 7d) to keep them restorable.";
    policy.classList.toggle("error", !keep);
    const rows = r.json.deletedTables;
    fill(list, h("table.grid#deleted-tables", {},
      h("thead", {}, h("tr", {}, ["Table", "Deleted at", "Restorable until", "Entities", "Bytes", ""].map((c) => h("th", {}, c)))),
      h("tbody", {}, rows.length ? rows.map((t) => h("tr", { "data-id": t.id, "data-name": t.name },
        h("td", {}, t.name), h("td", { title: t.deletedAt }, when(t.deletedAt)),
        h("td", { title: t.restorableUntil }, when(t.restorableUntil)),
        h("td.num", {}, t.entities.toLocaleString()), h("td.num", {}, t.bytes.toLocaleString()),
        h("td", {},
          h("button.restore", { type: "button", onclick: () => restore(t) }, "Restore"), " ",
          h("button.restore-as", { type: "button", onclick: () => restoreAs(t) }, "Restore as…"))))
        : h("tr", {}, h("td.muted", { colspan: 6 }, keep ? "No deleted tables." : "No deleted tables kept.")))));
  }

  async function post(t, as) {
    return adminCall("POST", `${base}/${encodeURIComponent(t.id)}/restore`, as ? { as } : {});
  }

  function restored(name) {
    notify(`Table ${name} restored`);
    tablesChanged();
    load();
  }

  async function restore(t) {
    error.textContent = "";
    const r = await post(t);
    if (r.status !== 200) {
      error.textContent = adminError(r) + (r.status === 409 ? " — use Restore as… for another name." : "");
      return;
    }
    restored(r.json.table);
  }

  async function restoreAs(t) {
    error.textContent = "";
    const name = await dialog(`Restore ${t.name} as…`, (close) => {
      const input = h("input#restore-as-name", { required: true, spellcheck: "false", autofocus: true, value: `${t.name}2`, "aria-label": "New table name" });
      const why = h("p.error#restore-as-error", { role: "alert" });
      return h("form", {
        onsubmit: async (e) => {
          e.preventDefault();
          const r = await post(t, input.value.trim());
          if (r.status !== 200) { why.textContent = adminError(r); return; }
          close(r.json.table);
        },
      }, h("label", { for: "restore-as-name" }, "New name"), input,
      h("p.hint", {}, "Its entities, access policies and indexes come back under this name."), why,
      h("div.actions", {}, h("button", { type: "button", onclick: () => close() }, "Cancel"), h("button.primary", { type: "submit" }, "Restore")));
    });
    if (name) restored(name);
  }

  document.onkeydown = null; // a table view's keys (n: new entity) have no table here
  fill(root, h("div.view-head", {}, h("h2#deleted-title", {}, `Deleted tables of ${api.account}`)),
    policy, error, list,
    h("p.hint", {}, "Restored tables are back in the list on the left; ", h("a", { href: tableLink(api.account) }, "back to the tables"), "."));
  return load();
}
