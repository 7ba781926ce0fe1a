// The explorer's shell: sign-in, the signed-in accounts, routing and keys.
//
// Routes (the hash, so a query can be shared as a link; no credential is ever
// part of it): #/ tables · #/a/<account>/<table>?filter=&select=&top= a
// table's entities · #/a/<account>/<table>/changes its changes, live ·
// #/a/<account>/deleted-tables the account's deleted tables (no table name has
// a '-') · #/status the server's status · #/faults the fault rules.

import { Api } from "./api.js";
import { h, $, fill, showError, leaveView } from "./ui.js";
import { renderTables } from "./tables.js";
import { renderEntities } from "./entities.js";
import { renderStatus } from "./status.js";
import { renderFaults } from "./faults.js";
import { renderChanges } from "./changes.js";
import { renderDeleted } from "./deleted.js";

const DEV_ACCOUNT = "devstoreaccount1";
const DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const SESSIONS = "tafel.sessions";
const DELETED = "deleted-tables";

// Credentials live in this tab's sessionStorage: gone when the tab closes,
// never in a URL, a cookie or the server's logs.
const sessions = {
  list() {
    try {
      return JSON.parse(sessionStorage.getItem(SESSIONS)) || [];
    } catch {
      return [];
    }
  },
  save(list) {
    sessionStorage.setItem(SESSIONS, JSON.stringify(list));
  },
  add(cred) {
    this.save([cred, ...this.list().filter((c) => c.account !== cred.account)]);
  },
  remove(account) {
    this.save(this.list().filter((c) => c.account !== account));
  },
};

function route() {
  const [path, qs] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(qs || "");
  if (parts[0] === "status") return { view: "status" };
  if (parts[0] === "faults") return { view: "faults" };
  if (parts[0] === "a" && parts[1] && parts[2] === DELETED) {
    return { view: "tables", account: parts[1], table: null, params, deleted: true };
  }
  if (parts[0] === "a" && parts[1]) {
    return { view: "tables", account: parts[1], table: parts[2] || null, params, changes: parts[3] === "changes" };
  }
  return { view: "tables", account: null, table: null, params };
}

export function tableLink(account, table, params) {
  const q = params && [...params].filter(([, v]) => v).length ? `?${new URLSearchParams([...params].filter(([, v]) => v))}` : "";
  return `#/a/${encodeURIComponent(account)}${table ? "/" + encodeURIComponent(table) : ""}${q}`;
}

let current = { api: null, account: null };

function apiFor(account) {
  const creds = sessions.list();
  const cred = creds.find((c) => c.account === account) || creds[0];
  if (!cred) return null;
  if (current.account !== cred.account || current.cred !== cred.secret) {
    current = { api: new Api(cred), account: cred.account, cred: cred.secret };
  }
  return current.api;
}

function header(active) {
  const creds = sessions.list();
  const select = $("#account");
  fill(select, ...creds.map((c) => h("option", { value: c.account, selected: c.account === active }, c.account)),
    h("option", { value: "" }, "Add an account…"));
  select.hidden = creds.length === 0;
  $("#signout").hidden = creds.length === 0;
}

async function render() {
  // A dialog belongs to the view it was opened on (Back, a link, the Status page).
  leaveView();
  const r = route();
  const main = $("#main");
  for (const a of document.querySelectorAll("header nav a")) {
    a.toggleAttribute("aria-current", a.dataset.view === r.view);
  }
  if (r.view === "status") {
    header(current.account);
    return renderStatus(main);
  }
  if (r.view === "faults") {
    header(current.account);
    return renderFaults(main);
  }
  const api = apiFor(r.account);
  if (!api || r.account === "+") {
    header(null);
    return renderSignIn(main);
  }
  header(api.account);
  if (!r.account) {
    // A table SAS reaches one table: open it.
    history.replaceState(null, "", tableLink(api.account, api.sasTable));
  }
  const table = r.table || (api.sasTable && r.account === api.account ? api.sasTable : null);
  let split = $("#main > .split");
  if (!split || split.dataset.account !== api.account) {
    split = h("div.split", { "data-account": api.account }, h("aside#tables", { "aria-label": "Tables" }),
      h("section#view", { "aria-label": "Entities" }));
    fill(main, split);
    renderTables($("#tables"), api, { selected: table, open: (t) => (location.hash = tableLink(api.account, t)),
      deleted: `${tableLink(api.account)}/${DELETED}` });
  } else {
    $("#tables").dispatchEvent(new CustomEvent("select", { detail: table }));
  }
  if (r.deleted) {
    return renderDeleted($("#view"), api, {
      tableLink, tablesChanged: () => $("#tables").dispatchEvent(new CustomEvent("reload")),
    });
  }
  if (table && r.changes) {
    return renderChanges($("#view"), api, table, { back: tableLink(api.account, table) });
  }
  await renderEntities($("#view"), api, table, r.params, {
    changes: `${tableLink(api.account, table)}/changes`,
    share: (params) => tableLink(api.account, table, params),
    tablesChanged: () => $("#tables").dispatchEvent(new CustomEvent("reload")),
  });
}

function renderSignIn(main) {
  let kind = "key";
  const account = h("input#signin-account", { name: "account", value: DEV_ACCOUNT, required: true, autocomplete: "username", spellcheck: "false" });
  const secret = h("textarea#signin-secret", { name: "secret", rows: 3, required: true, spellcheck: "false", autocomplete: "off" });
  const label = h("label", { for: "signin-secret" }, "Account key");
  const hint = h("p.hint", {});
  const error = h("p.error#signin-error", { role: "alert" });
  const tabs = ["key", "sas", "token"].map((k) => h("button.tab", {
    type: "button", role: "tab", "data-kind": k, "aria-selected": String(k === kind),
    onclick: () => setKind(k),
  }, { key: "Account key", sas: "SAS", token: "Bearer token" }[k]));
  const dev = h("button.link#signin-dev", { type: "button", onclick: () => { setKind("key"); account.value = DEV_ACCOUNT; secret.value = DEV_KEY; } },
    "Use the development account (devstoreaccount1 and its well-known key)");
  function setKind(k) {
    kind = k;
    for (const t of tabs) t.setAttribute("aria-selected", String(t.dataset.kind === k));
    label.textContent = { key: "Account key", sas: "SAS token (or a URL that carries one)", token: "Bearer token (JWT)" }[k];
    hint.textContent = {
      key: "Requests are signed in this browser; the key is never sent.",
      sas: "A table SAS opens its one table; an account SAS, the whole account.",
      token: "Accepted when Tafel runs with --oauth.",
    }[k];
  }
  setKind("key");
  const submit = h("button.primary#signin-submit", { type: "submit" }, "Sign in");
  const form = h("form.signin", {
    onsubmit: async (e) => {
      e.preventDefault();
      error.textContent = "";
      let value = secret.value.trim();
      if (kind === "sas" && value.includes("?")) value = value.slice(value.indexOf("?") + 1);
      const cred = { account: account.value.trim(), kind, secret: value };
      submit.disabled = true;
      try {
        const api = new Api(cred);
        // Proves the credential before keeping it: a table SAS can read its table only.
        if (api.sasTable) await api.query(api.sasTable, { top: 1 });
        else await api.listTables({ top: 1 });
        sessions.add(cred);
        location.hash = tableLink(cred.account, api.sasTable);
        render();
      } catch (err) {
        error.textContent = err.code ? `${err.status} ${err.code}: ${err.message}` : `Not signed in: ${err.message}`;
      } finally {
        submit.disabled = false;
      }
    },
  },
  h("h1", {}, "Sign in"),
  h("div.tabs", { role: "tablist" }, tabs),
  h("label", { for: "signin-account" }, "Account name"), account,
  label, secret, hint, dev, error,
  h("div.actions", {}, submit));
  fill(main, h("div.center", {}, form));
  account.focus();
}

function setTheme(theme) {
  document.documentElement.dataset.theme = theme;
  localStorage.setItem("tafel.theme", theme);
  $("#theme").textContent = { auto: "Theme: auto", light: "Theme: light", dark: "Theme: dark" }[theme];
}

function init() {
  setTheme(localStorage.getItem("tafel.theme") || "auto");
  $("#theme").addEventListener("click", () => {
    const order = ["auto", "light", "dark"];
    setTheme(order[(order.indexOf(document.documentElement.dataset.theme) + 1) % 3]);
  });
  $("#account").addEventListener("change", (e) => {
    location.hash = e.target.value ? tableLink(e.target.value) : "#/a/+";
  });
  $("#signout").addEventListener("click", () => {
    if (current.account) sessions.remove(current.account);
    current = { api: null, account: null };
    location.hash = "#/";
    render();
  });
  window.addEventListener("hashchange", () => render().catch((e) => showError(e)));
  document.addEventListener("keydown", (e) => {
    const typing = /INPUT|TEXTAREA|SELECT/.test(document.activeElement.tagName);
    if (typing || e.ctrlKey || e.metaKey || e.altKey || document.querySelector("dialog[open]")) return;
    if (e.key === "/") {
      const f = $("#filter");
      if (f) { e.preventDefault(); f.focus(); }
    } else if (e.key === "?") {
      $("#keys").hidden = !$("#keys").hidden;
    }
  });
  render().catch((e) => showError(e));
}

init();
