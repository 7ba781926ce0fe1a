// The Faults page: the fault rules in force with how often each fired, a form
// to add one, the whole set as JSON to edit, and Clear. It talks to the admin
// listener's own /faults (docs/testing.md), as the status page reads /metrics.

import { h, fill, notify } from "./ui.js";
import { adminCall, tokenForm } from "./admin.js";

const COUNTS = ["matched", "fired"];
const MATCH = ["account", "table", "partition", "operation", "method"];
const WHEN = ["times", "every", "probability", "seed", "for-seconds"];
const OPERATIONS = ["InsertEntity", "UpdateEntity", "MergeEntity", "DeleteEntity", "InsertOrReplaceEntity",
  "InsertOrMergeEntity", "QueryEntity", "QueryEntities", "EntityGroupTransaction", "QueryTables", "QueryTable",
  "CreateTable", "DeleteTable", "GetTableAcl", "SetTableAcl", "GetTableServiceProperties",
  "SetTableServiceProperties", "GetTableServiceStats"];
const ERRORS = ["ServerBusy", "OperationTimedOut", "InternalError", "EntityAlreadyExists",
  "UpdateConditionNotSatisfied", "ResourceNotFound", "TableNotFound"];

const call = (method, body) => adminCall(method, "/faults", body);

/** A rule as written: without the counts the server adds. */
const asWritten = (rule) => Object.fromEntries(Object.entries(rule).filter(([k]) => !COUNTS.includes(k)));

function describe(rule, keys) {
  return keys.filter((k) => rule[k] !== undefined).map((k) => `${k} = ${JSON.stringify(rule[k])}`).join(", ");
}

function action(rule) {
  const error = rule.error || rule.code || (rule.status ? `status ${rule.status}` : "");
  const parts = [];
  if (rule["delay-ms"]) parts.push(`wait ${rule["delay-ms"]} ms`);
  if (rule["delay-after-ms"]) parts.push(`apply, then wait ${rule["delay-after-ms"]} ms`);
  if (rule["lose-answer"]) parts.push(error ? `apply, then answer ${error}` : "apply, then close the connection");
  else if (error) parts.push(`answer ${error}`);
  if (rule["end-page-early"]) parts.push(`end the page after ${rule["end-page-after"] || 1}`);
  return parts.join("; ");
}

export function renderFaults(main) {
  const list = h("div.grid-wrap#faults-list", {}, "Loading…");
  const error = h("p.error#faults-error", { role: "alert" });
  const json = h("textarea#faults-json", { rows: 8, spellcheck: "false", "aria-label": "Rules as JSON" });
  let rules = [];

  async function load() {
    const r = await call("GET").catch(() => null);
    if (!r || r.status === 401) return askToken(r ? "The admin listener asks for its token (--admin-token)." : "The admin listener does not answer.");
    rules = r.json.rules;
    json.value = JSON.stringify(rules.map(asWritten), null, 2);
    fill(list, h("table.grid", {},
      h("thead", {}, h("tr", {}, ["#", "Matches", "Does", "When", "Matched", "Fired"].map((c) => h("th", {}, c)))),
      h("tbody", {}, rules.length ? rules.map((rule, i) => h("tr", {},
        h("td.num", {}, String(i + 1)), h("td", {}, describe(rule, MATCH) || "every request"), h("td", {}, action(rule)),
        h("td", {}, describe(rule, WHEN) || "always"), h("td.num", {}, String(rule.matched)), h("td.num.fired", {}, String(rule.fired))))
        : h("tr", {}, h("td.muted", { colspan: 6 }, "No fault rules: every request is served as it is.")))));
  }

  async function replace(next, done) {
    error.textContent = "";
    const r = await call("PUT", { rules: next });
    if (r.status !== 200) {
      error.textContent = r.json && r.json.error ? r.json.error : `${r.status}: ${r.text}`;
      return;
    }
    notify(done);
    await load();
  }

  const field = (id, label, input) => h("label", { for: id }, label, input);
  const table = h("input#fault-table", { placeholder: "any (a glob: orders*)", spellcheck: "false" });
  const partition = h("input#fault-partition", { placeholder: "any (a glob)", spellcheck: "false" });
  const operation = h("select#fault-operation", {}, h("option", { value: "" }, "any"), OPERATIONS.map((o) => h("option", { value: o }, o)));
  const err = h("select#fault-error", {}, h("option", { value: "" }, "none"), ERRORS.map((e) => h("option", { value: e }, e)));
  const lose = h("input#fault-lose", { type: "checkbox" });
  const delay = h("input#fault-delay", { type: "number", min: 0, placeholder: "0" });
  const times = h("input#fault-times", { type: "number", min: 1, placeholder: "always" });
  const form = h("form.card#faults-add", {
    onsubmit: (e) => {
      e.preventDefault();
      const rule = {};
      if (table.value.trim()) rule.table = table.value.trim();
      if (partition.value.trim()) rule.partition = partition.value.trim();
      if (operation.value) rule.operation = operation.value;
      if (err.value) rule.error = err.value;
      if (lose.checked) rule["lose-answer"] = true;
      if (delay.value) rule["delay-ms"] = Number(delay.value);
      if (times.value) rule.times = Number(times.value);
      replace([...rules.map(asWritten), rule], "Rule added");
    },
  },
  h("h2", {}, "Add a rule"),
  field("fault-table", "Table", table), field("fault-partition", "PartitionKey", partition),
  field("fault-operation", "Operation", operation), field("fault-error", "Answer with", err),
  field("fault-lose", "Apply it, then lose the answer", lose), field("fault-delay", "Delay (ms)", delay),
  field("fault-times", "Only the first N times", times),
  h("div.actions", {}, h("button.primary#faults-add-submit", { type: "submit" }, "Add")));

  const edit = h("form.card#faults-edit", {
    onsubmit: (e) => {
      e.preventDefault();
      let next;
      try { next = JSON.parse(json.value); } catch (x) { error.textContent = `Not JSON: ${x.message}`; return; }
      replace(Array.isArray(next) ? next : next.rules, "Rules replaced");
    },
  },
  h("h2", {}, "Every rule, as JSON"), json,
  h("p.hint", {}, "Keys: account, table, partition, operation, method; error or status/code/message, lose-answer, delay-ms, delay-after-ms, end-page-early, end-page-after; times, every, probability, seed, for-seconds. A set with a bad rule is refused whole."),
  h("div.actions", {},
    h("button#faults-clear", { type: "button", onclick: async () => { await call("DELETE"); notify("Rules cleared"); await load(); } }, "Clear all"),
    h("button.primary#faults-apply", { type: "submit" }, "Apply")));

  fill(main, h("div.page", {}, h("h1", {}, "Faults"),
    h("p.hint", {}, "Make chosen requests fail, lose their answer, wait or end a page early, to test a client's retries (docs/testing.md)."),
    list, error, form, edit));

  function askToken(why) {
    fill(list, tokenForm(why, () => renderFaults(main)));
  }

  return load();
}
