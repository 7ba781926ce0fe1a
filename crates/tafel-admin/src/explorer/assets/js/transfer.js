// Export a query's result (JSONL typed and loss-free, or CSV as Storage
// Explorer writes it) and import such a file, in batches, with progress and a
// report of the rows the service refused.

import { h, dialog, download, notify } from "./ui.js";
import { fromWire, toWire, toJsonl, fromJsonl, csvHeader, csvRow, csvRecords, fromCsv } from "./edm.js";

const IN_FLIGHT = 4;

/** Downloads every row of the query (all pages) as `format` ("jsonl" | "csv"). */
export function exportQuery(api, table, query, format) {
  const controller = new AbortController();
  return dialog(`Export ${table} as ${format.toUpperCase()}`, (close) => {
    const out = h("p#export-status", { role: "status" }, "Reading…");
    const entities = [];
    api.queryAll(table, query, (rows) => {
      for (const r of rows) entities.push(fromWire(r));
      out.textContent = `${entities.length.toLocaleString()} entities read…`;
    }, controller.signal).then(() => {
      let parts;
      if (format === "jsonl") {
        parts = entities.map((e) => toJsonl(e) + "\n");
      } else {
        const names = [...new Set(entities.flatMap((e) => e.props.map((p) => p.name)))];
        parts = [csvHeader(names) + "\r\n", ...entities.map((e) => csvRow(e, names) + "\r\n")];
      }
      download(`${table}.${format}`, parts, format === "jsonl" ? "application/x-ndjson" : "text/csv");
      out.textContent = `${entities.length.toLocaleString()} entities exported to ${table}.${format}.`;
      out.dataset.done = entities.length;
    }, (err) => (out.textContent = err.code === "Cancelled" ? "Cancelled." : `${err.status} ${err.code}: ${err.message}`));
    return h("div", {}, out, h("div.actions", {}, h("button", { onclick: () => { controller.abort(); close(); } }, "Close")));
  });
}

/** Parses a JSONL or CSV file: { entities: [{ line, entity }], rejects }. */
export function parseFile(name, text) {
  const entities = [];
  const rejects = [];
  if (/\.csv$/i.test(name)) {
    let header = null;
    for (const { line, fields } of csvRecords(text)) {
      if (!header) { header = fields; continue; }
      try {
        entities.push({ line, entity: fromCsv(header, fields) });
      } catch (e) {
        rejects.push({ line, code: "InvalidInput", message: e.message });
      }
    }
  } else {
    text.split(/\r?\n/).forEach((l, i) => {
      if (!l.trim()) return;
      try {
        entities.push({ line: i + 1, entity: fromJsonl(l) });
      } catch (e) {
        rejects.push({ line: i + 1, code: "InvalidInput", message: e.message });
      }
    });
  }
  return { entities, rejects };
}

/** Runs the import dialog; resolves to the number of entities written. */
export function importFile(api, table) {
  return dialog(`Import into ${table}`, (close) => {
    const file = h("input#import-file", { type: "file", accept: ".jsonl,.ndjson,.json,.csv", "aria-label": "File" });
    const mode = h("select#import-mode", { "aria-label": "Mode" },
      h("option", { value: "insert" }, "Insert (an existing entity is a rejected row)"),
      h("option", { value: "replace" }, "Insert or replace"),
      h("option", { value: "merge" }, "Insert or merge"));
    const bar = h("progress#import-progress", { max: 1, value: 0 });
    const status = h("p#import-status", { role: "status" }, "\u00a0");
    const report = h("div#import-report");
    const start = h("button.primary#import-start", { type: "submit" }, "Import");
    let written = 0;
    const form = h("form", {
      onsubmit: async (e) => {
        e.preventDefault();
        const f = file.files[0];
        if (!f) return notify("Choose a file first", "error");
        start.disabled = true;
        const { entities, rejects } = parseFile(f.name, await f.text());
        bar.max = Math.max(1, entities.length + rejects.length);
        const progress = () => {
          bar.value = written + rejects.length;
          status.textContent = `${written.toLocaleString()} written, ${rejects.length} rejected, of ${(entities.length + rejects.length).toLocaleString()}`;
        };
        progress();
        const chunks = batches(entities);
        let next = 0;
        const worker = async () => {
          while (next < chunks.length) {
            const chunk = chunks[next++];
            // Not `written += await …`: that reads `written` before the wait, losing other workers' counts.
            const n = await writeChunk(api, table, chunk, mode.value, rejects);
            written += n;
            progress();
          }
        };
        await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
        status.dataset.done = "true";
        showReport(report, rejects);
        start.disabled = false;
      },
    }, h("label", { for: "import-file" }, "JSONL (one entity per line, as exported) or CSV (Storage Explorer's columns)"), file,
    h("label", { for: "import-mode" }, "Mode"), mode, bar, status, report,
    h("div.actions", {}, h("button", { type: "button", onclick: () => close(written) }, "Close"), start));
    return form;
  }, { wide: true });
}

/** Up to 100 rows of one partition per batch, no RowKey twice in one. */
function batches(entities) {
  const byPk = new Map();
  for (const item of entities) {
    const list = byPk.get(item.entity.pk) || [];
    list.push(item);
    byPk.set(item.entity.pk, list);
  }
  const out = [];
  for (const list of byPk.values()) {
    let chunk = [];
    let keys = new Set();
    for (const item of list) {
      if (chunk.length === 100 || keys.has(item.entity.rk)) {
        out.push(chunk);
        chunk = [];
        keys = new Set();
      }
      chunk.push(item);
      keys.add(item.entity.rk);
    }
    if (chunk.length) out.push(chunk);
  }
  return out;
}

const METHOD = { insert: "POST", replace: "PUT", merge: "MERGE" };

/** Writes one chunk as a batch; if the service refuses it, row by row to find the rejected ones. */
async function writeChunk(api, table, chunk, mode, rejects) {
  const body = (e) => toWire(e.pk, e.rk, e.props);
  try {
    await api.batch(table, chunk.map(({ entity: e }) => ({ method: METHOD[mode], pk: e.pk, rk: e.rk, body: body(e) })));
    return chunk.length;
  } catch {
    // The batch is atomic: nothing of it was written. Find which rows fail.
  }
  let ok = 0;
  for (const { line, entity: e } of chunk) {
    try {
      if (mode === "insert") await api.insert(table, body(e));
      else await api.upsert(table, e.pk, e.rk, body(e), { merge: mode === "merge" });
      ok++;
    } catch (err) {
      rejects.push({ line, pk: e.pk, rk: e.rk, code: err.code, message: err.message });
    }
  }
  return ok;
}

function showReport(root, rejects) {
  if (!rejects.length) {
    root.replaceChildren(h("p.ok", {}, "Every row was written."));
    return;
  }
  rejects.sort((a, b) => a.line - b.line);
  root.replaceChildren(
    h("p.error", {}, `${rejects.length} ${rejects.length === 1 ? "row was" : "rows were"} rejected:`),
    h("div.report", {}, h("table.grid.compact#import-rejects", {},
      h("thead", {}, h("tr", {}, ["Line", "PartitionKey", "RowKey", "Error"].map((c) => h("th", {}, c)))),
      h("tbody", {}, rejects.slice(0, 200).map((r) => h("tr", {}, h("td", {}, r.line), h("td", {}, r.pk ?? ""), h("td", {}, r.rk ?? ""),
        h("td", {}, `${r.code}: ${r.message}`)))))),
    h("button", { type: "button", onclick: () => download("rejects.jsonl", rejects.map((r) => JSON.stringify(r) + "\n"), "application/x-ndjson") },
      "Download the report (JSONL)"));
}
