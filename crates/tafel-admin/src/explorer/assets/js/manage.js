// A table's Manage panel: its statistics, its expiry (TTL) policy, its secondary
// indexes and Purge…, through the admin listener's own endpoints
// (docs/lifecycle.md, docs/indexes.md). Every refusal is shown as the server
// worded it: a 400 naming the field, a 401 asks for the admin token, a 501 says
// what the backend lacks.

import { h, fill, notify, confirmTyped, confirmPlain, sameView, viewToken } from "./ui.js";
import { adminCall, adminError, tokenForm, tablePath } from "./admin.js";

const POLL_MS = 250;

/** 1234567 → "1.2 MB"; the exact number stays in the card's title and data-value. */
export function bytes(n) {
  const units = ["bytes", "KB", "MB", "GB", "TB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${n} bytes` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}

/** The filter a purge deletes by, as a `$count` can ask it. */
export function purgeFilter(filter, partition) {
  const parts = [];
  if (partition) parts.push(`PartitionKey eq '${partition.replaceAll("'", "''")}'`);
  if (filter) parts.push(partition ? `(${filter})` : filter);
  return parts.join(" and ");
}

/**
 * Fills `root` with the panel for `table`; `changed()` is called when a purge
 * deleted entities, so the view shows what is left.
 */
export function renderManage(root, api, table, { changed }) {
  const path = (rest) => tablePath(api.account, table, rest);
  const token = viewToken();
  const here = () => sameView(token) && root.isConnected;
  let refused = false; // a 401 replaced the panel with the token form

  // An admin call; a 401 asks for the token once, in place of the panel.
  async function call(method, rest, body) {
    const r = await adminCall(method, rest.startsWith("/") ? rest : path(rest), body);
    if (r.status === 401 && !refused) {
      refused = true;
      fill(root, tokenForm("The admin listener asks for its token (--admin-token) to manage tables.",
        () => renderManage(root, api, table, { changed }), "manage-token"));
    }
    return r;
  }

  // Statistics ---------------------------------------------------------------
  const stats = h("div.cards#manage-stats", { "aria-label": "Statistics" });
  const card = (key, label, value, shown, title) => h(`div.card#stat-${key}`, { "data-value": value, title },
    h("div.label", {}, label), h("div.value", {}, shown));
  async function loadStats() {
    const r = await call("GET", "stats");
    if (r.status !== 200) return fill(stats, h("p.error#stats-error", {}, adminError(r)));
    const s = r.json;
    fill(stats,
      card("entities", "Entities", s.entities, s.entities.toLocaleString()),
      s.partitions === null
        ? card("partitions", "Partitions", "", "—", "This backend does not count partitions")
        : card("partitions", "Partitions", s.partitions, s.partitions.toLocaleString()),
      card("bytes", "Bytes stored", s.bytes, bytes(s.bytes), `${s.bytes.toLocaleString()} bytes`));
  }

  // Expiry -------------------------------------------------------------------
  const ttlNow = h("p#ttl-current", {}, "…");
  const ttlError = h("p.error#ttl-error", { role: "alert" });
  const seconds = h("input#ttl-seconds", { type: "number", placeholder: "none", "aria-label": "Seconds after the last write" });
  const property = h("input#ttl-property", { placeholder: "none, e.g. ExpiresAt", spellcheck: "false", "aria-label": "Expiry property" });
  function describeTtl(p) {
    const parts = [];
    if (p.seconds) parts.push(`${Number(p.seconds).toLocaleString()} s after its last write`);
    if (p.property) parts.push(`at its ${p.property} (Edm.DateTime)`);
    return parts.length ? `An entity expires ${parts.join(", or ")}${parts.length > 1 ? ", whichever is first" : ""}.`
      : "No expiry: entities stay until deleted.";
  }
  async function loadTtl() {
    const r = await call("GET", "ttl");
    if (r.status !== 200) { ttlNow.textContent = ""; ttlError.textContent = adminError(r); return; }
    ttlNow.textContent = describeTtl(r.json);
    ttlNow.dataset.seconds = r.json.seconds ?? "";
    ttlNow.dataset.property = r.json.property ?? "";
    seconds.value = r.json.seconds ?? "";
    property.value = r.json.property ?? "";
  }
  async function ttlChange(method, body, done) {
    ttlError.textContent = "";
    const r = await call(method, "ttl", body);
    if (r.status !== 200 && r.status !== 204) { ttlError.textContent = adminError(r); return; }
    notify(done);
    await loadTtl();
  }
  const ttl = h("form.card#manage-ttl", {
    onsubmit: (e) => {
      e.preventDefault();
      const body = {};
      // As typed: the server checks the values and names what is wrong.
      if (seconds.value.trim()) body.seconds = Number(seconds.value);
      if (property.value.trim()) body.property = property.value.trim();
      ttlChange("PUT", body, "Expiry policy set");
    },
  },
  h("h3", {}, "Expiry (TTL)"), ttlNow,
  h("div.two", {}, h("div", {}, h("label", { for: "ttl-seconds" }, "Seconds after the last write"), seconds),
    h("div", {}, h("label", { for: "ttl-property" }, "Or at a DateTime property"), property)),
  h("p.hint", {}, "An expired entity is invisible at once and removed within seconds; Set replaces the whole policy."),
  ttlError,
  h("div.actions", {},
    h("button#ttl-clear", { type: "button", onclick: () => ttlChange("DELETE", undefined, "Expiry policy cleared") }, "Clear"),
    h("button.primary#ttl-set", { type: "submit" }, "Set")));

  // Indexes ------------------------------------------------------------------
  const indexList = h("div#index-list", {}, "…");
  const indexError = h("p.error#index-error", { role: "alert" });
  const indexProp = h("input#index-property", { placeholder: "Property, e.g. Email, or * for every property", spellcheck: "false", "aria-label": "Property to index" });
  const indexAdd = h("button.primary#index-add", { type: "submit" }, "Add index");
  async function loadIndexes() {
    const r = await call("GET", "indexes");
    if (r.status !== 200) {
      // 501 on a backend without indexes: said once, and nothing to add.
      indexAdd.disabled = indexProp.disabled = r.status === 501;
      return fill(indexList, h("p.muted#index-unsupported", {}, adminError(r)));
    }
    const list = r.json.indexes;
    fill(indexList, list.length ? h("table.grid.compact#indexes", {},
      h("thead", {}, h("tr", {}, ["Property", "State", "Entries", ""].map((c) => h("th", {}, c)))),
      h("tbody", {}, list.map((i) => h("tr", { "data-property": i.property },
        h("td", {}, i.property), h("td", { "data-state": i.state }, stateOf(i)), h("td.num", {}, String(i.entries)),
        h("td", {}, h("button.link.danger", { type: "button", "data-drop": i.property, onclick: () => dropIndex(i.property) }, "Drop"))))))
      : h("p.muted#indexes-none", {}, "No indexes: a filter on a property other than the keys scans."));
    // One still building: look again until it is ready.
    if (list.some((i) => i.state !== "ready")) setTimeout(() => here() && loadIndexes(), 500);
  }
  async function dropIndex(p) {
    if (!(await confirmPlain("Drop index", `Drop the index on ${p}? Queries on it scan again.`, "Drop"))) return;
    indexError.textContent = "";
    const r = await call("DELETE", `indexes/${encodeURIComponent(p)}`);
    if (r.status !== 204) { indexError.textContent = adminError(r); return; }
    notify(`Index on ${p} dropped`);
    await loadIndexes();
  }
  const indexes = h("form.card#manage-indexes", {
    onsubmit: async (e) => {
      e.preventDefault();
      indexError.textContent = "";
      const p = indexProp.value.trim();
      const r = await call("PUT", `indexes/${encodeURIComponent(p)}`);
      if (![200, 201, 202].includes(r.status)) { indexError.textContent = adminError(r); return; }
      // 202: the table has entities, and the index is built online (listed building till ready).
      notify(r.status === 201 ? `Index on ${p} added` : r.status === 202 ? `Index on ${p} added; building` : `${p} was indexed already`);
      indexProp.value = "";
      await loadIndexes();
    },
  },
  h("h3", {}, "Indexes"), indexList,
  h("p.hint", {}, "A $filter on an indexed property is answered from its index; * indexes every property (docs/indexes.md)."),
  indexError, h("div.query-row", {}, indexProp, indexAdd));

  // Purge --------------------------------------------------------------------
  const pFilter = h("input#purge-filter", { placeholder: "$filter, e.g. Status eq 'done' (none: every entity)", spellcheck: "false", "aria-label": "Purge filter" });
  const pPartition = h("input#purge-partition", { placeholder: "PartitionKey (none: every partition)", spellcheck: "false", "aria-label": "Purge partition" });
  const pStatus = h("p.status#purge-status", { role: "status" }, "\u00a0");
  const pError = h("p.error#purge-error", { role: "alert" });
  const pStart = h("button.danger#purge-start", { type: "submit" }, "Purge…");
  async function purge() {
    pError.textContent = "";
    const filter = pFilter.value.trim();
    const partition = pPartition.value;
    const what = [partition ? `in partition '${partition}'` : "", filter ? `matching ${filter}` : ""].filter(Boolean).join(" ");
    let counted;
    try {
      const n = await api.count(table, purgeFilter(filter, partition));
      counted = `${n.toLocaleString()} ${n === 1 ? "entity matches" : "entities match"} now.`;
    } catch (err) {
      counted = `(Not counted: ${err.code || err}: ${err.message || ""})`;
    }
    const message = what ? `Every entity of ${table} ${what} will be deleted. ${counted}`
      : `Every entity of ${table} will be deleted: the table is emptied, at once. ${counted}`;
    if (!(await confirmTyped("Purge", message, table))) return;
    pStart.disabled = true;
    try {
      const body = {};
      if (filter) body.filter = filter;
      if (partition) body.partition = partition;
      const r = await call("POST", "purge", body);
      if (r.status !== 202) { pError.textContent = adminError(r); return; }
      await follow(r.json);
    } finally {
      pStart.disabled = false;
    }
  }
  // Polls the job until it is done or failed, then shows what is left.
  async function follow(job) {
    for (;;) {
      pStatus.dataset.state = job.state;
      pStatus.dataset.deleted = job.deleted;
      if (job.state === "done") {
        pStatus.textContent = `Purge ${job.id}: done, ${job.deleted.toLocaleString()} deleted.`;
        notify(`Purged ${job.deleted.toLocaleString()} ${job.deleted === 1 ? "entity" : "entities"} from ${table}`);
        if (here()) { changed(); loadStats(); }
        return;
      }
      if (job.state === "failed") {
        pStatus.textContent = `Purge ${job.id}: failed after ${job.deleted.toLocaleString()} deleted.`;
        pError.textContent = job.error || "the purge failed";
        if (here()) { changed(); loadStats(); }
        return;
      }
      pStatus.textContent = `Purge ${job.id}: running, ${job.deleted.toLocaleString()} deleted so far…`;
      await new Promise((r) => setTimeout(r, POLL_MS));
      if (!here()) return; // the job goes on without us
      const r = await call("GET", `/purge-jobs/${encodeURIComponent(job.id)}`);
      if (r.status !== 200) { pError.textContent = adminError(r); return; }
      job = r.json;
    }
  }
  const purgeForm = h("form.card#manage-purge", { onsubmit: (e) => { e.preventDefault(); purge(); } },
    h("h3", {}, "Purge"),
    h("p.hint", {}, "Deletes every matching entity on the server, in bounded batches, each delete in the change feed."),
    h("div.two", {}, h("div", {}, h("label", { for: "purge-filter" }, "Filter"), pFilter),
      h("div", {}, h("label", { for: "purge-partition" }, "Partition"), pPartition)),
    pStatus, pError, h("div.actions", {}, pStart));

  fill(root, h("h3", {}, "Statistics"), stats, h("div.manage-cards", {}, ttl, indexes, purgeForm));
  return Promise.all([loadStats(), loadTtl(), loadIndexes()]);
}

/** An index's state as listed; a building one with how far it is. */
function stateOf(i) {
  if (!i.progress || !i.progress.total) return i.state;
  return `${i.state} ${Math.floor((100 * i.progress.done) / i.progress.total)}%`;
}
