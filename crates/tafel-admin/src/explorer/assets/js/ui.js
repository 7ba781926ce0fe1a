// Small DOM helpers: element building, dialogs, notices, clipboard.

/** h("button.primary#save", { onclick }, "Save"): an element with classes, id, attributes, children. */
export function h(spec, attrs = {}, ...children) {
  const parts = spec.match(/[.#]?[^.#]+/g) || ["div"];
  const tag = parts[0].startsWith(".") || parts[0].startsWith("#") ? "div" : parts.shift();
  const el = document.createElement(tag);
  const classes = parts.filter((p) => p.startsWith(".")).map((p) => p.slice(1));
  const id = parts.find((p) => p.startsWith("#"));
  if (classes.length) el.className = classes.join(" ");
  if (id) el.id = id.slice(1);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "value") el.value = v;
    else if (k === "checked") el.checked = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export const $ = (sel, root = document) => root.querySelector(sel);

/** Replaces an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

/** A notice at the bottom of the page; errors stay until dismissed. */
export function notify(message, kind = "info") {
  const box = $("#notices");
  const close = h("button.link", { "aria-label": "Dismiss", onclick: () => item.remove() }, "×");
  const item = h(`div.notice.${kind}`, { role: kind === "error" ? "alert" : "status" }, h("span", {}, message), close);
  box.append(item);
  if (kind !== "error") setTimeout(() => item.remove(), 4000);
  return item;
}

/** Shows an Azure error with its code and message. */
export function showError(err, what) {
  const text = err && err.code ? `${err.status ? err.status + " " : ""}${err.code}: ${err.message}` : String(err);
  notify(what ? `${what} failed — ${text}` : text, "error");
}

// The close functions of the dialogs open now, and how many times the view changed.
const openDialogs = new Set();
let views = 0;

/**
 * The view changed (a new route): every open dialog is dismissed as with Escape,
 * so an editor never outlives the table or page it was opened on.
 */
export function leaveView() {
  views++;
  for (const close of [...openDialogs]) close(undefined);
}

/** A token that `sameView` checks: was the view left since it was taken? */
export const viewToken = () => views;
export const sameView = (token) => token === views;

/**
 * A modal dialog built by `build(close)`; resolves with what `close(value)` is
 * given (undefined when dismissed with Escape or the backdrop, or when the view
 * changes under it).
 */
export function dialog(title, build, { wide = false } = {}) {
  return new Promise((resolve) => {
    const dlg = h(`dialog.modal${wide ? ".wide" : ""}`, { "aria-label": title });
    const close = (value) => {
      if (!openDialogs.delete(close)) return; // already closed
      dlg.close();
      dlg.remove();
      resolve(value);
    };
    openDialogs.add(close);
    dlg.addEventListener("cancel", (e) => {
      e.preventDefault();
      close(undefined);
    });
    dlg.append(h("h2", {}, title), build(close));
    document.body.append(dlg);
    dlg.showModal();
    const first = dlg.querySelector("[autofocus], input, select, textarea, button.primary");
    if (first) first.focus();
  });
}

/** Asks for the exact `word` before something that cannot be undone. */
export function confirmTyped(title, message, word) {
  return dialog(title, (close) => {
    const input = h("input#confirm-input", { type: "text", autocomplete: "off", spellcheck: "false", "aria-label": `Type ${word} to confirm` });
    const ok = h("button.danger#confirm-ok", { type: "submit", disabled: true }, title);
    input.addEventListener("input", () => (ok.disabled = input.value !== word));
    return h("form", { onsubmit: (e) => { e.preventDefault(); if (input.value === word) close(true); } },
      h("p", {}, message), h("p", {}, "Type ", h("code", {}, word), " to confirm."), input,
      h("div.actions", {}, h("button", { type: "button", onclick: () => close(false) }, "Cancel"), ok));
  });
}

export function confirmPlain(title, message, action = "OK") {
  return dialog(title, (close) => h("div", {}, h("p", {}, message),
    h("div.actions", {}, h("button", { onclick: () => close(false) }, "Cancel"),
      h("button.danger#confirm-ok", { onclick: () => close(true), autofocus: true }, action))));
}

export async function copy(text, what = "Copied") {
  try {
    await navigator.clipboard.writeText(text);
    notify(`${what} to the clipboard`);
  } catch {
    // Clipboard access needs a secure context; select the text instead.
    notify("Copy it from the field (the clipboard is not available here)");
  }
}

/** Offers `parts` (strings) as a file download. */
export function download(name, parts, type) {
  const url = URL.createObjectURL(new Blob(parts, { type }));
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

export const ms = (t0) => `${Math.round(performance.now() - t0)} ms`;
