// The entity editor: insert, edit (replace or merge), duplicate and delete, with
// a typed input for each of the eight EDM types and ETag-conditional saves; a
// conflict shows both versions and lets the user reload or overwrite.

import { h, fill, dialog, notify, confirmPlain, viewToken, sameView } from "./ui.js";
import { TYPES, check, toWire, fromWire, hexToBase64, base64ToHex } from "./edm.js";

const PLACEHOLDER = {
  String: "text", Int32: "-2147483648 … 2147483647", Int64: "-9223372036854775808 … 9223372036854775807",
  Double: "3.25, 1e300, NaN, Infinity", Boolean: "", DateTime: "2024-05-06T07:08:09.1234567Z",
  Guid: "0f8fad5b-d9cb-469f-a165-70867728950e", Binary: "",
};

/** Resolves true once the table changed (saved or deleted). */
export async function editEntity(api, table, entity, mode, known = []) {
  if (mode === "edit") {
    const view = viewToken();
    try {
      entity = fromWire(await api.getEntity(table, entity.pk, entity.rk));
    } catch (err) {
      if (sameView(view)) notify(`Could not read the entity — ${err.status} ${err.code}: ${err.message}`, "error");
      return false;
    }
    // Navigated away while the entity was read: no editor over another view.
    if (!sameView(view)) return false;
  }
  const title = { insert: "New entity", edit: "Edit entity", duplicate: "Duplicate entity" }[mode];
  return dialog(title, (close) => editorForm(api, table, entity, mode, known, close), { wide: true }).then(Boolean);
}

function editorForm(api, table, entity, mode, known, close) {
  const editing = mode === "edit";
  let etag = editing ? entity.etag : "";
  const pk = h("input#edit-pk", { value: entity ? entity.pk : "", readonly: editing, spellcheck: "false", "aria-label": "PartitionKey" });
  const rk = h("input#edit-rk", { value: entity ? (mode === "duplicate" ? `${entity.rk}-copy` : entity.rk) : "", readonly: editing, spellcheck: "false", "aria-label": "RowKey" });
  const rows = h("tbody#edit-props", {});
  const error = h("div.error#edit-error", { role: "alert" });
  const conflict = h("div.conflict#edit-conflict", { hidden: true });
  const merge = h("input#edit-merge", { type: "radio", name: "edit-mode", value: "merge" });
  const replace = h("input#edit-replace", { type: "radio", name: "edit-mode", value: "replace", checked: true });

  // A new entity starts with the page's columns, typed and empty (empty rows are skipped).
  const props = entity ? entity.props : known.map((c) => ({ name: c.name, type: c.type, value: "", template: true }));
  props.forEach((p) => rows.append(propRow(p)));
  if (!props.length) rows.append(propRow({ name: "", type: "String", value: "" }));

  /** The typed properties as entered, or null with the errors marked. */
  function collect() {
    let ok = true;
    const out = [];
    const names = new Set();
    for (const tr of rows.children) {
      const name = tr.querySelector("[data-part=name]").value.trim();
      const type = tr.querySelector("[data-part=type]").value;
      const input = tr.querySelector("[data-part=value]");
      const format = tr.querySelector("[data-part=format]");
      let value = type === "Boolean" ? tr.querySelector("[data-part=bool]").value : input.value;
      let why = "";
      if (value === "" && (!name || tr.hasAttribute("data-template"))) continue; // no property
      if (!name) {
        why = "needs a name";
      } else if (names.has(name)) why = "is named twice";
      else if (type === "Binary" && format.value === "hex") {
        try {
          value = hexToBase64(value);
        } catch (e) {
          why = e.message;
        }
      }
      why = why || check(type, value);
      tr.querySelector(".why").textContent = why;
      tr.classList.toggle("invalid", Boolean(why));
      if (why) ok = false;
      names.add(name);
      out.push({ name, type, value });
    }
    return ok ? out : null;
  }

  async function save(force) {
    error.textContent = "";
    const props = collect();
    if (!props) return;
    const body = toWire(pk.value, rk.value, props);
    try {
      if (editing) {
        await api.update(table, pk.value, rk.value, body, { merge: merge.checked, etag: force ? "*" : etag });
      } else {
        await api.insert(table, body);
      }
      notify(editing ? "Entity saved" : "Entity inserted");
      close(true);
    } catch (err) {
      if (err.status === 412 && editing) return showConflict(props);
      error.textContent = `${err.status} ${err.code}: ${err.message}`;
    }
  }

  // Someone changed the entity since it was opened: show both, let the user choose.
  async function showConflict(mine) {
    let theirs;
    try {
      theirs = fromWire(await api.getEntity(table, pk.value, rk.value));
    } catch (err) {
      error.textContent = err.status === 404
        ? "The entity was deleted since you opened it. Insert it again from a duplicate."
        : `${err.status} ${err.code}: ${err.message}`;
      return;
    }
    const names = [...new Set([...mine.map((p) => p.name), ...theirs.props.map((p) => p.name)])];
    const show = (list, n) => {
      const p = list.find((x) => x.name === n);
      return p ? `${p.value} (${p.type})` : "—";
    };
    fill(conflict,
      h("p", {}, h("strong", {}, "412 UpdateConditionNotSatisfied: "), "the entity changed since you opened it."),
      h("table.grid.compact", {}, h("thead", {}, h("tr", {}, h("th", {}, "Property"), h("th", {}, "Yours"), h("th", {}, `In the table now (${theirs.timestamp})`))),
        h("tbody", {}, names.map((n) => h("tr", { class: show(mine, n) === show(theirs.props, n) ? "" : "differs" },
          h("td", {}, n), h("td", {}, show(mine, n)), h("td", {}, show(theirs.props, n)))))),
      h("div.actions", {},
        h("button#conflict-reload", { type: "button", onclick: () => {
          etag = theirs.etag;
          fill(rows, theirs.props.map(propRow));
          conflict.hidden = true;
        } }, "Reload theirs (discard mine)"),
        h("button.danger#conflict-overwrite", { type: "button", onclick: () => { conflict.hidden = true; save(true); } }, "Overwrite with mine")));
    conflict.hidden = false;
  }

  async function remove() {
    if (!(await confirmPlain("Delete entity", `Delete ${pk.value} / ${rk.value}?`, "Delete"))) return;
    try {
      await api.deleteEntity(table, pk.value, rk.value, etag);
      notify("Entity deleted");
      close(true);
    } catch (err) {
      error.textContent = `${err.status} ${err.code}: ${err.message}`;
    }
  }

  return h("form.editor", { onsubmit: (e) => { e.preventDefault(); save(false); } },
    h("div.two", {}, h("div", {}, h("label", { for: "edit-pk" }, "PartitionKey"), pk), h("div", {}, h("label", { for: "edit-rk" }, "RowKey"), rk)),
    h("table.props", {}, h("thead", {}, h("tr", {}, ["Property", "Type", "Value", ""].map((c) => h("th", {}, c)))), rows),
    h("button#edit-add", { type: "button", onclick: () => {
      const tr = propRow({ name: "", type: "String", value: "" });
      rows.append(tr);
      tr.querySelector("input").focus();
    } }, "+ Property"),
    editing && h("fieldset.inline", {}, h("legend", {}, "Save as"), h("label.inline", {}, replace, " Replace (properties left out are removed)"), h("label.inline", {}, merge, " Merge (properties left out are kept)")),
    conflict, error,
    h("div.actions", {},
      editing && h("button.danger#edit-delete", { type: "button", onclick: remove }, "Delete"),
      editing && h("button#edit-duplicate", { type: "button", onclick: () => {
        close(false);
        editEntity(api, table, { pk: pk.value, rk: rk.value, props: collect() || [] }, "duplicate");
      } }, "Duplicate"),
      h("span.spacer"),
      h("button", { type: "button", onclick: () => close(false) }, "Cancel"),
      h("button.primary#edit-save", { type: "submit" }, editing ? "Save" : "Insert")));
}

/** One property's row: name, type, and an input that fits the type. */
function propRow(p) {
  const name = h("input", { value: p.name, "data-part": "name", "aria-label": "Property name", spellcheck: "false" });
  const type = h("select", { "data-part": "type", "aria-label": "Type" }, TYPES.map((t) => h("option", { selected: t === p.type }, t)));
  const value = h("input", { value: p.value, "data-part": "value", "aria-label": "Value", spellcheck: "false" });
  const bool = h("select", { "data-part": "bool", "aria-label": "Value" }, p.value === "" && h("option", { value: "" }, ""),
    h("option", { selected: p.value === "true" }, "true"), h("option", { selected: p.value === "false" }, "false"));
  const format = h("select", { "data-part": "format", "aria-label": "Binary as" }, h("option", { value: "base64" }, "base64"), h("option", { value: "hex" }, "hex"));
  const why = h("div.why");
  format.addEventListener("change", () => {
    try {
      value.value = format.value === "hex" ? base64ToHex(value.value) : hexToBase64(value.value);
    } catch {
      // Left as typed: the check on save names the problem.
    }
  });
  const fit = () => {
    const t = type.value;
    value.hidden = t === "Boolean";
    bool.hidden = t !== "Boolean";
    format.hidden = t !== "Binary";
    value.placeholder = PLACEHOLDER[t];
    value.inputMode = ["Int32", "Int64"].includes(t) ? "numeric" : "text";
  };
  type.addEventListener("change", fit);
  fit();
  const tr = h("tr", { "data-template": p.template }, h("td", {}, name), h("td", {}, type),
    h("td.value", {}, value, bool, format, why),
    h("td", {}, h("button.link", { type: "button", "aria-label": "Remove property", onclick: () => tr.remove() }, "×")));
  return tr;
}
