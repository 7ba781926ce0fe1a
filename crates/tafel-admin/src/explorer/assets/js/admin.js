// Calls to the admin listener's own endpoints (/faults, /accounts/…/ttl, …):
// same origin, JSON, with the admin token (--admin-token) when one was given.

import { h } from "./ui.js";

export const TOKEN = "tafel.adminToken";

/**
 * `method` on `path`, with `body` as JSON; resolves with { status, json, text }
 * whatever the status (a 401's text is not JSON). Rejects only when the listener
 * does not answer.
 */
export async function adminCall(method, path, body) {
  const token = sessionStorage.getItem(TOKEN);
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON: a 401's or a 204's text */ }
  return { status: r.status, json, text };
}

/** An answer's error as one line: `501 NotSupportedByBackend: …`. */
export function adminError(r) {
  if (r.json && r.json.error) return `${r.status} ${r.json.error}: ${r.json.message || ""}`.trim();
  if (r.status === 401) return "401: the admin listener asks for its token (--admin-token)";
  return `${r.status}: ${r.text.trim()}`;
}

/** A small form asking for the admin token; `then()` runs once it is kept. */
export function tokenForm(why, then, id = "admin-token") {
  const input = h(`input#${id}`, { type: "password", "aria-label": "Admin token", autocomplete: "off" });
  return h("form.card.token", { onsubmit: (e) => { e.preventDefault(); sessionStorage.setItem(TOKEN, input.value); then(); } },
    h("p", {}, why), input, h("button.primary", { type: "submit" }, "Use the token"));
}

/** `/accounts/A/tables/T/<rest>`, each part escaped. */
export const tablePath = (account, table, rest) =>
  `/accounts/${encodeURIComponent(account)}/tables/${encodeURIComponent(table)}/${rest}`;
