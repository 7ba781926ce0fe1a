// One table's entities: the query bar and builder, a page-at-a-time grid with
// typed cells, selection and bulk delete, and the table's actions.

import { h, $, fill, notify, showError, copy, confirmPlain, ms } from "./ui.js";
import { fromWire, TYPES, SYSTEM, literal, check } from "./edm.js";
import { countEntities, deleteTable, editAcl, makeSas } from "./tables.js";
import { editEntity } from "./editor.js";
import { exportQuery, importFile } from "./transfer.js";
import { renderManage } from "./manage.js";

const OPS = ["eq", "ne", "gt", "ge", "lt", "le"];
const COLUMNS = "tafel.columns";

// Whether the Manage panel is open, kept in the tab's session: running a query
// (a new route), opening another table or reloading does not close it.
const MANAGE = "tafel.manage";

// Each table's property names in the order first seen, for this tab's session: the
// grid keeps its columns in that order across pages and filters, so a column never
// moves because another page's first row listed its properties differently.
const columnOrder = {
  all() {
    try {
      return JSON.parse(sessionStorage.getItem(COLUMNS)) || {};
    } catch {
      return {};
    }
  },
  /** The remembered order of `key`'s table, grown by `names` not seen before. */
  extend(key, names) {
    const all = this.all();
    const known = all[key] || [];
    const order = [...known, ...names.filter((n) => !known.includes(n))];
    if (order.length !== known.length) {
      all[key] = order;
      try {
        sessionStorage.setItem(COLUMNS, JSON.stringify(all));
      } catch {
        // Storage full or off: the order still holds for this page's life below.
      }
    }
    return order;
  },
};

export async function renderEntities(root, api, table, params, nav) {
  if (!table) {
    fill(root, h("div.empty", {}, h("h2", {}, api.account),
      h("p", {}, "Choose a table on the left, or create one with New table."),
      h("p.hint", {}, "Keys: / focuses the filter, n inserts an entity, ↑ ↓ move through rows, Enter opens one, Space selects it, ? lists the keys.")));
    return;
  }
  const q = { filter: params.get("filter") || "", select: params.get("select") || "", top: params.get("top") || "" };
  let pages = [null]; // continuation that starts each page
  let page = 0;
  let rows = []; // the current page, as fromWire entities
  const selected = new Set();
  let generation = 0; // a load's answer counts only if no later load started

  const filter = h("input#filter", { value: q.filter, placeholder: "$filter, e.g. PartitionKey eq 'p1' and Age gt 30", "aria-label": "$filter", spellcheck: "false" });
  const select = h("input#select", { value: q.select, placeholder: "$select: Name,Age", "aria-label": "$select", spellcheck: "false" });
  const top = h("input#top", { value: q.top, type: "number", min: 1, max: 1000, placeholder: "$top", "aria-label": "$top" });
  const builder = h("div.builder#builder", { hidden: true });
  const status = h("p.status#result-status", { role: "status" }, "\u00a0");
  const grid = h("div.grid-wrap#grid", { tabindex: -1 });
  const prev = h("button#page-prev", { disabled: true, onclick: () => { page--; load(); }, title: "Previous page" }, "◀ Previous");
  const next = h("button#page-next", { disabled: true, onclick: () => { page++; load(); }, title: "Next page" }, "Next ▶");
  const pageNo = h("span.muted#page-no", {}, "page 1");
  const delSel = h("button#delete-selected", { disabled: true, onclick: bulkDelete }, "Delete selected");
  let manageOpen = sessionStorage.getItem(MANAGE) === "open";
  const manage = h("section.manage#manage", { "aria-label": "Manage the table", hidden: !manageOpen });
  const showManage = () => renderManage(manage, api, table, { changed: () => load() });
  const manageToggle = h("button#manage-toggle", { "aria-expanded": String(manageOpen), title: "Statistics, expiry, indexes, purge",
    onclick: () => {
      manageOpen = manage.hidden;
      sessionStorage.setItem(MANAGE, manageOpen ? "open" : "");
      manage.hidden = !manageOpen;
      manageToggle.setAttribute("aria-expanded", String(manageOpen));
      if (manageOpen) showManage();
    } }, "Manage");

  // The query as typed in the bar: what Run shows and Copy link shares.
  const typedQuery = () => new URLSearchParams([["filter", filter.value.trim()], ["select", select.value.trim()], ["top", top.value.trim()]]);
  const run = (e) => {
    if (e) e.preventDefault();
    const link = nav.share(typedQuery());
    if (location.hash !== link) location.hash = link; // re-renders through the route
    else { pages = [null]; page = 0; load(); }
  };
  const queryNow = () => ({ filter: q.filter, select: q.select });
  const edit = async (entity, mode) => {
    if (await editEntity(api, table, entity, mode, columns())) load();
  };

  const actions = h("div.toolbar", {},
    h("button.primary#entity-new", { onclick: () => edit(null, "insert"), title: "Insert an entity (n)" }, "New entity"),
    delSel,
    h("button#export-jsonl", { onclick: () => exportQuery(api, table, queryNow(), "jsonl") }, "Export JSONL"),
    h("button#export-csv", { onclick: () => exportQuery(api, table, queryNow(), "csv") }, "Export CSV"),
    h("button#import", { onclick: () => importFile(api, table).then((n) => n && load()) }, "Import…"),
    h("button#count", { onclick: () => countEntities(api, table, q.filter) }, "Count"),
    h("a#live-changes", { href: nav.changes, title: "The table's change feed, live" }, "Changes"),
    h("span.spacer"),
    manageToggle,
    h("button#acl", { onclick: () => editAcl(api, table) }, "Access policies"),
    h("button#sas", { onclick: () => makeSas(api, table) }, "SAS…"),
    h("button.danger#table-delete", {
      onclick: async () => {
        if (await deleteTable(api, table)) {
          nav.tablesChanged();
          location.hash = nav.share(null).replace(/\/[^/]*$/, "");
        }
      },
    }, "Delete table"));

  const form = h("form.query", { onsubmit: run },
    h("div.query-row", {}, filter, h("button.primary#run", { type: "submit" }, "Run")),
    h("div.query-row", {}, select, top,
      h("button#builder-toggle", { type: "button", "aria-expanded": "false", onclick: (e) => {
        builder.hidden = !builder.hidden;
        e.target.setAttribute("aria-expanded", String(!builder.hidden));
        if (!builder.hidden && !builder.children.length) buildRow();
      } }, "Builder"),
      h("button#share", { type: "button", onclick: () => copy(new URL(nav.share(typedQuery()), location.href).href, "Link copied") }, "Copy link")),
    builder);

  // The builder writes a $filter from rows of property, operator and typed value.
  function buildRow() {
    const list = h("datalist#builder-props", {}, columns().map((c) => h("option", { value: c.name })));
    const rowsBox = builder.querySelector(".rows") || h("div.rows");
    const join = h("select", { "aria-label": "and / or", "data-part": "join" }, h("option", {}, "and"), h("option", {}, "or"));
    const prop = h("input", { list: "builder-props", placeholder: "Property", "aria-label": "Property", "data-part": "prop", spellcheck: "false" });
    const op = h("select", { "aria-label": "Operator", "data-part": "op" }, OPS.map((o) => h("option", {}, o)));
    const type = h("select", { "aria-label": "Type", "data-part": "type" }, TYPES.map((t) => h("option", {}, t)));
    const value = h("input", { placeholder: "Value", "aria-label": "Value", "data-part": "value", spellcheck: "false" });
    prop.addEventListener("change", () => {
      const known = columns().find((c) => c.name === prop.value);
      if (known) type.value = known.type;
    });
    const row = h("div.builder-row", {}, rowsBox.children.length ? join : h("span.join"), prop, op, type, value,
      h("button.link", { type: "button", onclick: () => row.remove(), "aria-label": "Remove condition" }, "×"));
    rowsBox.append(row);
    if (!builder.children.length) {
      builder.append(list, rowsBox, h("div.actions", {},
        h("button#builder-add", { type: "button", onclick: buildRow }, "+ Condition"),
        h("button.primary#builder-apply", { type: "button", onclick: applyBuilder }, "Use as filter")));
    } else builder.querySelector("datalist").replaceWith(list);
  }

  function applyBuilder() {
    const parts = [];
    for (const row of builder.querySelectorAll(".builder-row")) {
      const get = (p) => row.querySelector(`[data-part=${p}]`);
      const [name, type, text] = [get("prop").value.trim(), get("type").value, get("value").value];
      if (!name) continue;
      const why = check(type, text);
      if (why) return notify(`${name}: the value ${why}`, "error");
      const cond = `${name} ${get("op").value} ${literal(type, text)}`;
      parts.push(parts.length ? `${get("join") ? get("join").value : "and"} ${cond}` : cond);
    }
    filter.value = parts.join(" ");
    run();
  }

  // Columns: the system ones, then the page's properties, each with its type, in the
  // table's remembered order (first seen first), whatever order this page lists them in.
  let order = [];
  function columns() {
    const seen = new Map();
    for (const r of rows) for (const p of r.props) if (!seen.has(p.name)) seen.set(p.name, p.type);
    order = columnOrder.extend(`${api.account}/${table}`, [...order, ...seen.keys()]);
    return order.filter((name) => seen.has(name)).map((name) => ({ name, type: seen.get(name) }));
  }

  function renderGrid() {
    const cols = columns();
    const all = h("input#select-all", { type: "checkbox", "aria-label": "Select all on this page",
      checked: rows.length > 0 && rows.every((r) => selected.has(r)),
      onchange: (e) => { rows.forEach((r) => (e.target.checked ? selected.add(r) : selected.delete(r))); renderGrid(); } });
    const head = h("tr", {}, h("th.check", {}, all), SYSTEM.map((c) => h("th", {}, c)), cols.map((c) => h("th", { title: `Edm.${c.type}` }, c.name)));
    const body = rows.map((r, i) => {
      const byName = new Map(r.props.map((p) => [p.name, p]));
      const box = h("input", { type: "checkbox", checked: selected.has(r), "aria-label": `Select ${r.pk} / ${r.rk}`,
        onclick: (e) => e.stopPropagation(), onchange: (e) => { e.target.checked ? selected.add(r) : selected.delete(r); updateSelection(); } });
      return h("tr", { tabindex: 0, "data-index": i, onclick: () => edit(r, "edit"),
        onkeydown: (e) => rowKey(e, r, box) },
      h("td.check", {}, box), h("td", {}, r.pk), h("td", {}, r.rk), h("td.muted", {}, r.timestamp),
      cols.map((c) => {
        const p = byName.get(c.name);
        return p ? h("td", { title: `Edm.${p.type}`, "data-type": p.type }, h("span.v", {}, p.value), h("span.t", {}, p.type)) : h("td.absent", {});
      }));
    });
    fill(grid, h("table.grid#entities", { "aria-rowcount": rows.length },
      h("thead", {}, head), h("tbody", {}, body.length ? body : h("tr", {}, h("td.muted", { colspan: 4 + cols.length }, "No entities match.")))));
    updateSelection();
  }

  function rowKey(e, r, box) {
    const tr = e.currentTarget;
    if (e.key === "Enter") edit(r, "edit");
    else if (e.key === " ") { e.preventDefault(); box.checked = !box.checked; box.dispatchEvent(new Event("change")); }
    else if (e.key === "ArrowDown" && tr.nextElementSibling) { e.preventDefault(); tr.nextElementSibling.focus(); }
    else if (e.key === "ArrowUp" && tr.previousElementSibling) { e.preventDefault(); tr.previousElementSibling.focus(); }
    else if (e.key === "d" && !e.ctrlKey) { e.preventDefault(); edit(r, "duplicate"); }
    else if (e.key === "Delete") { e.preventDefault(); if (!selected.size) selected.add(r); bulkDelete(); }
  }

  function updateSelection() {
    delSel.disabled = selected.size === 0;
    delSel.textContent = selected.size ? `Delete selected (${selected.size})` : "Delete selected";
  }

  async function bulkDelete() {
    const chosen = [...selected];
    if (!chosen.length || !(await confirmPlain("Delete entities", `Delete ${chosen.length} selected ${chosen.length === 1 ? "entity" : "entities"}?`, "Delete"))) return;
    // Batches of up to 100 in one partition each; each batch is atomic.
    const byPk = new Map();
    for (const r of chosen) byPk.set(r.pk, [...(byPk.get(r.pk) || []), r]);
    let done = 0;
    const failed = [];
    for (const group of byPk.values()) {
      for (let i = 0; i < group.length; i += 100) {
        const part = group.slice(i, i + 100);
        try {
          await api.batch(table, part.map((r) => ({ method: "DELETE", pk: r.pk, rk: r.rk, etag: r.etag })));
          done += part.length;
        } catch (err) {
          failed.push(`${part[err.index || 0].pk} / ${part[err.index || 0].rk}: ${err.code}`);
        }
      }
    }
    selected.clear();
    if (failed.length) notify(`Deleted ${done}; ${failed.length} batch(es) failed — ${failed.join("; ")}`, "error");
    else notify(`Deleted ${done} ${done === 1 ? "entity" : "entities"}`);
    load();
  }

  async function load() {
    const mine = ++generation;
    grid.setAttribute("aria-busy", "true");
    const t0 = performance.now();
    try {
      const r = await api.query(table, { filter: q.filter, select: q.select, top: q.top, next: pages[page] });
      if (mine !== generation) return;
      rows = r.rows.map(fromWire);
      pages[page + 1] = r.next;
      pages.length = page + 2;
      const plan = r.plan ? ` · plan ${r.plan}, ${r.examined} examined` : "";
      status.textContent = `${rows.length} ${rows.length === 1 ? "row" : "rows"} on this page · ${ms(t0)}${r.next ? " · more pages" : ""}${plan}`;
      renderGrid();
      prev.disabled = page === 0;
      next.disabled = !r.next;
      pageNo.textContent = `page ${page + 1}`;
    } catch (err) {
      if (mine !== generation) return;
      status.textContent = `${err.status} ${err.code}: ${err.message}`;
      status.classList.add("error");
      rows = [];
      renderGrid();
      return;
    } finally {
      if (mine === generation) grid.removeAttribute("aria-busy");
    }
    status.classList.remove("error");
  }

  // One handler, replaced with each table shown: n inserts wherever focus is not in a field.
  document.onkeydown = (e) => {
    const typing = /INPUT|TEXTAREA|SELECT/.test(document.activeElement.tagName);
    if (typing || e.ctrlKey || e.metaKey || e.altKey || document.querySelector("dialog[open]")) return;
    if (e.key === "n") { e.preventDefault(); edit(null, "insert"); }
  };
  fill(root, h("div.view-head", {}, h("h2#table-name", {}, table)), actions, manage, form, status, grid, h("div.pager", {}, prev, pageNo, next));
  if (manageOpen) showManage();
  await load();
  const first = $("#entities tbody tr[tabindex]");
  if (first && document.activeElement === document.body) first.focus({ preventScroll: true });
}
