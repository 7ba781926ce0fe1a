// The account's tables: the side list (prefix search, paging, create) and each
// table's own actions (count, access policies, SAS, delete).

import { h, fill, dialog, confirmTyped, notify, showError, copy } from "./ui.js";
import { tableSas } from "./sign.js";

const PAGE = 50;

export function renderTables(root, api, { selected, open, deleted }) {
  let prefix = "";
  let pages = [""]; // continuation of each page shown so far
  let page = 0;
  let chosen = selected;
  let generation = 0; // a load's answer counts only if no later load started
  const search = h("input#table-prefix", { type: "search", placeholder: "Tables starting with…", "aria-label": "Table name prefix", spellcheck: "false" });
  const list = h("ul.tables#table-list", { role: "listbox", "aria-label": "Tables" });
  const prev = h("button#tables-prev", { disabled: true, onclick: () => { page--; load(); } }, "◀");
  const next = h("button#tables-next", { disabled: true, onclick: () => { page++; load(); } }, "▶");
  const where = h("span.muted", {});
  const create = h("button.primary#table-new", { onclick: () => createTable(api).then((name) => name && (reset(), open(name))) }, "New table");
  let timer;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { prefix = search.value.trim(); reset(); }, 250);
  });
  root.addEventListener("reload", () => reset());
  root.addEventListener("select", (e) => {
    chosen = e.detail;
    for (const li of list.children) li.setAttribute("aria-selected", String(li.dataset.name === chosen));
  });
  list.addEventListener("keydown", (e) => {
    const items = [...list.querySelectorAll("li[data-name]")];
    const i = items.indexOf(document.activeElement);
    if (e.key === "ArrowDown" && i < items.length - 1) { e.preventDefault(); items[i + 1].focus(); }
    if (e.key === "ArrowUp" && i > 0) { e.preventDefault(); items[i - 1].focus(); }
  });

  function reset() {
    pages = [""];
    page = 0;
    load();
  }

  async function load() {
    const mine = ++generation;
    list.setAttribute("aria-busy", "true");
    if (api.sasTable) {
      // A table SAS cannot list tables; it reaches this one.
      show([api.sasTable], "");
      return;
    }
    try {
      const r = await api.listTables({ prefix, next: pages[page], top: PAGE });
      if (mine !== generation) return;
      pages[page + 1] = r.next;
      show(r.names, r.next);
    } catch (err) {
      if (mine !== generation) return;
      fill(list, h("li.muted", {}, err.code === "AuthorizationResourceTypeMismatch" || err.status === 403
        ? "This credential cannot list tables." : `Could not list tables: ${err.code}`));
      list.removeAttribute("aria-busy");
    }
  }

  function show(names, more) {
    fill(list, names.length ? names.map((n) => h("li", {
      "data-name": n, tabindex: 0, role: "option", "aria-selected": String(n === chosen),
      onclick: () => open(n), onkeydown: (e) => e.key === "Enter" && open(n),
    }, n)) : h("li.muted", {}, prefix ? `No table starts with “${prefix}”.` : "No tables yet."));
    prev.disabled = page === 0;
    next.disabled = !more;
    list.dataset.prefix = prefix; // what the list shows, for anyone waiting on a search
    where.textContent = page > 0 || more ? `page ${page + 1}` : "";
    list.removeAttribute("aria-busy");
  }

  // A table SAS reaches one table: no other table's fate is its business.
  const kept = api.sasTable ? null : h("a.side-foot#deleted-link", { href: deleted, title: "Deleted tables still restorable (--table-soft-delete)" }, "Deleted tables");
  fill(root, h("div.side-head", {}, create), search, list, h("div.pager", {}, prev, where, next), kept);
  load();
}

async function createTable(api) {
  const name = await dialog("New table", (close) => {
    const input = h("input#new-table-name", { required: true, pattern: "[A-Za-z][A-Za-z0-9]{2,62}", spellcheck: "false", autofocus: true, "aria-label": "Table name" });
    const error = h("p.error", { role: "alert" });
    return h("form", {
      onsubmit: async (e) => {
        e.preventDefault();
        try {
          await api.createTable(input.value);
          close(input.value);
        } catch (err) {
          error.textContent = `${err.status} ${err.code}: ${err.message}`;
        }
      },
    }, h("label", { for: "new-table-name" }, "Name"), input,
    h("p.hint", {}, "3 to 63 letters and digits, starting with a letter."), error,
    h("div.actions", {}, h("button", { type: "button", onclick: () => close() }, "Cancel"), h("button.primary", { type: "submit" }, "Create")));
  });
  if (name) notify(`Table ${name} created`);
  return name;
}

export async function deleteTable(api, table) {
  const ok = await confirmTyped("Delete table", `Table ${table} and every entity in it will be deleted.`, table);
  if (!ok) return false;
  try {
    await api.deleteTable(table);
    notify(`Table ${table} deleted`);
    return true;
  } catch (err) {
    showError(err, "Deleting the table");
    return false;
  }
}

/** Counts the table's entities (or a query's) on the server: one request. */
export function countEntities(api, table, filter) {
  return dialog(filter ? "Count the query's entities" : "Count entities", (close) => {
    const out = h("p.count#count-result", { role: "status" }, "Counting…");
    const t0 = performance.now();
    // The server counts (`GET /table/$count`): the table's counter when there is
    // no filter, else a scan that sends no entity.
    api.count(table, filter).then((n) => {
      out.textContent = `${n.toLocaleString()} ${n === 1 ? "entity" : "entities"} (${((performance.now() - t0) / 1000).toFixed(1)} s)`;
      out.dataset.count = n;
    }, (err) => (out.textContent = `${err.status} ${err.code}: ${err.message}`));
    return h("div", {}, out, h("div.actions", {}, h("button", { onclick: close }, "Close")));
  });
}

/** Views and edits the table's stored access policies (up to five). */
export async function editAcl(api, table) {
  let policies;
  try {
    policies = await api.getAcl(table);
  } catch (err) {
    return showError(err, "Reading the access policies");
  }
  await dialog(`Access policies of ${table}`, (close) => {
    const rows = h("tbody", {});
    const error = h("p.error", { role: "alert" });
    const add = (p = { id: "", start: "", expiry: "", permission: "r" }) => {
      const field = (name, v, attrs = {}) => h("td", {}, h("input", { value: v, "data-field": name, "aria-label": name, spellcheck: "false", ...attrs }));
      const tr = h("tr", {}, field("id", p.id, { maxlength: 64 }), field("start", p.start, { placeholder: "2026-01-01T00:00:00Z" }),
        field("expiry", p.expiry, { placeholder: "2026-12-31T00:00:00Z" }), field("permission", p.permission, { placeholder: "raud" }),
        h("td", {}, h("button.link", { type: "button", onclick: () => tr.remove(), "aria-label": "Remove policy" }, "Remove")));
      rows.append(tr);
    };
    policies.forEach(add);
    return h("form", {
      onsubmit: async (e) => {
        e.preventDefault();
        const list = [...rows.children].map((tr) => Object.fromEntries(
          [...tr.querySelectorAll("input")].map((i) => [i.dataset.field, i.value.trim()])));
        try {
          await api.setAcl(table, list);
          notify("Access policies saved");
          close(true);
        } catch (err) {
          error.textContent = `${err.status} ${err.code}: ${err.message}`;
        }
      },
    }, h("table.grid.compact", {}, h("thead", {}, h("tr", {}, ["Id", "Start", "Expiry", "Permissions", ""].map((c) => h("th", {}, c)))), rows),
    h("button", { type: "button", onclick: () => add() }, "Add a policy"),
    h("p.hint", {}, "Permissions: r query, a add, u update, d delete. At most five policies."), error,
    h("div.actions", {}, h("button", { type: "button", onclick: () => close() }, "Cancel"), h("button.primary", { type: "submit" }, "Save")));
  }, { wide: true });
}

/** Makes a table SAS with the signed-in account key. */
export async function makeSas(api, table) {
  if (api.cred.kind !== "key") {
    return notify("A SAS is signed with the account key: sign in with the key to make one.", "error");
  }
  const iso = (d) => d.toISOString().replace(/\.\d{3}Z$/, "Z");
  await dialog(`Shared access signature for ${table}`, (close) => {
    const perms = ["r", "a", "u", "d"].map((p) => h("label.inline", {}, h("input", { type: "checkbox", value: p, checked: p === "r" }),
      { r: " Query", a: " Add", u: " Update", d: " Delete" }[p]));
    const field = (id, label, attrs = {}) => [h("label", { for: id }, label), h(`input#${id}`, { spellcheck: "false", ...attrs })];
    const out = h("textarea#sas-out", { rows: 4, readonly: true, "aria-label": "SAS" });
    const url = h("textarea#sas-url", { rows: 3, readonly: true, "aria-label": "SAS URL" });
    const form = h("form", {
      onsubmit: async (e) => {
        e.preventDefault();
        const v = (id) => form.querySelector(`#${id}`).value.trim();
        try {
          const sas = await tableSas(api.account, api.key, {
            table, permissions: perms.map((l) => l.firstChild).filter((c) => c.checked).map((c) => c.value).join(""),
            start: v("sas-start"), expiry: v("sas-expiry"), id: v("sas-id"),
            startPk: v("sas-spk"), startRk: v("sas-srk"), endPk: v("sas-epk"), endRk: v("sas-erk"),
          });
          out.value = sas;
          const cfg = await fetch("/explorer.json", { cache: "no-store" }).then((r) => r.json());
          url.value = `${cfg.tableEndpoint}/${api.account}/${table}?${sas}`;
        } catch (err) {
          showError(err, "Signing");
        }
      },
    },
    h("fieldset", {}, h("legend", {}, "Permissions"), perms),
    field("sas-start", "Start (optional)", { placeholder: iso(new Date()) }),
    field("sas-expiry", "Expiry", { value: iso(new Date(Date.now() + 24 * 3600e3)), required: true }),
    field("sas-id", "Stored policy id (optional)"),
    h("div.two", {}, h("div", {}, ...field("sas-spk", "Start PartitionKey"), ...field("sas-srk", "Start RowKey")),
      h("div", {}, ...field("sas-epk", "End PartitionKey"), ...field("sas-erk", "End RowKey"))),
    h("div.actions", {}, h("button.primary", { type: "submit" }, "Generate")),
    h("label", { for: "sas-out" }, "SAS token"), out,
    h("label", { for: "sas-url" }, "Table URL with the SAS (Table API port)"), url,
    h("div.actions", {}, h("button", { type: "button", onclick: () => out.value && copy(out.value, "SAS copied") }, "Copy SAS"),
      h("button", { type: "button", onclick: () => url.value && copy(url.value, "URL copied") }, "Copy URL"),
      h("button", { type: "button", onclick: () => close() }, "Close")));
    return form;
  }, { wide: true });
}
