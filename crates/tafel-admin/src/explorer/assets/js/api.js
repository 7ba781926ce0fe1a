// The Table REST API as the explorer calls it: through the admin listener's
// /api/ path, signed or carrying the user's credential on every call, exactly
// as an SDK would.

import { b64decode, sharedKey } from "./sign.js";

const VERSION = "2019-02-02";
export const FULL = "application/json;odata=fullmetadata";
const NONE = "application/json;odata=nometadata";

/** An error answered by the service: status, Azure's code and message. */
export class TableError extends Error {
  constructor(status, code, message) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code || `HTTP ${status}`;
  }
  toString() {
    return `${this.status} ${this.code}: ${this.message}`;
  }
}

/** Reads Azure's error from a response body (JSON or XML). */
export function parseError(status, text, headerCode) {
  let code = headerCode || "";
  let message = "";
  try {
    const e = JSON.parse(text)["odata.error"];
    code = e.code || code;
    message = (e.message && e.message.value) || "";
  } catch {
    const c = /<Code>([^<]*)<\/Code>/.exec(text);
    const m = /<Message>([^<]*)<\/Message>/.exec(text);
    if (c) code = c[1];
    if (m) message = m[1];
  }
  return new TableError(status, code, message.split("\n")[0]);
}

/** `'` doubled, then percent-encoded: a key inside `(PartitionKey='…')`. */
export const keyLiteral = (k) => encodeURIComponent(k.replaceAll("'", "''"));
export const entityPath = (table, pk, rk) =>
  `/${table}(PartitionKey='${keyLiteral(pk)}',RowKey='${keyLiteral(rk)}')`;

/**
 * A credential: { account, kind: "key" | "sas" | "token", secret }. A SAS may
 * be a table SAS (`tn=` names the one table it reaches) or an account SAS.
 */
export class Api {
  constructor(cred) {
    this.cred = cred;
    if (cred.kind === "key") this.key = b64decode(cred.secret);
    if (cred.kind === "sas") this.sas = cred.secret.replace(/^\?/, "");
  }

  get account() {
    return this.cred.account;
  }

  /** The one table a table SAS reaches, or null. */
  get sasTable() {
    if (!this.sas) return null;
    return new URLSearchParams(this.sas).get("tn");
  }

  /**
   * One call. `path` is below the account ("/Tables", "/t()"); `query` a list
   * of [name, value]. Returns the Response; throws TableError unless 2xx.
   */
  async call(method, path, { query = [], headers = {}, body, accept = FULL } = {}) {
    const fullPath = `/${this.account}${path}`;
    const parts = query.filter(([, v]) => v !== undefined && v !== null && v !== "")
      .map(([k, v]) => `${k}=${encodeURIComponent(v)}`);
    if (this.sas) parts.push(this.sas);
    const url = `/api${fullPath}${parts.length ? "?" + parts.join("&") : ""}`;
    const h = {
      "x-ms-version": VERSION,
      "x-ms-date": new Date().toUTCString(),
      DataServiceVersion: "3.0;NetFx",
      MaxDataServiceVersion: "3.0;NetFx",
      Accept: accept,
      ...headers,
    };
    if (body !== undefined && !h["Content-Type"]) h["Content-Type"] = "application/json";
    if (this.key) {
      const comp = query.find(([k]) => k === "comp");
      h.Authorization = await sharedKey(this.account, this.key, {
        method, contentType: h["Content-Type"], date: h["x-ms-date"], path: fullPath, comp: comp && comp[1],
      });
    } else if (this.cred.kind === "token") {
      h.Authorization = `Bearer ${this.cred.secret}`;
    }
    const resp = await fetch(url, { method, headers: h, body, cache: "no-store", credentials: "omit" });
    if (!resp.ok) {
      throw parseError(resp.status, await resp.text(), resp.headers.get("x-ms-error-code"));
    }
    return resp;
  }

  async json(method, path, opts) {
    const r = await this.call(method, path, opts);
    return r.status === 204 ? null : r.json();
  }

  /** One page of tables whose names start with `prefix` (case as typed). */
  async listTables({ prefix = "", next = "", top = 50 } = {}) {
    const query = [["$top", String(top)], ["NextTableName", next]];
    if (prefix) {
      const end = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
      query.push(["$filter", `TableName ge '${prefix.replaceAll("'", "''")}' and TableName lt '${end.replaceAll("'", "''")}'`]);
    }
    const r = await this.call("GET", "/Tables", { query, accept: NONE });
    const body = await r.json();
    return { names: body.value.map((t) => t.TableName), next: r.headers.get("x-ms-continuation-NextTableName") || "" };
  }

  createTable(name) {
    return this.call("POST", "/Tables", {
      body: JSON.stringify({ TableName: name }),
      headers: { Prefer: "return-no-content" },
    });
  }

  deleteTable(name) {
    return this.call("DELETE", `/Tables('${keyLiteral(name)}')`);
  }

  /** One page of a query: { rows (fullmetadata objects), next: {pk, rk} | null, plan, examined }
   * (plan and examined: the server's x-tafel-query-plan and x-tafel-rows-examined). */
  async query(table, { filter, select, top, next } = {}) {
    const query = [["$filter", filter], ["$select", select], ["$top", top ? String(top) : ""]];
    if (next) query.push(["NextPartitionKey", next.pk], ["NextRowKey", next.rk]);
    const r = await this.call("GET", `/${table}()`, { query });
    const body = await r.json();
    const pk = r.headers.get("x-ms-continuation-NextPartitionKey");
    const rk = r.headers.get("x-ms-continuation-NextRowKey");
    return {
      rows: body.value,
      next: pk ? { pk, rk: rk || "" } : null,
      plan: r.headers.get("x-tafel-query-plan"),
      examined: r.headers.get("x-tafel-rows-examined"),
    };
  }

  /** How many entities match `filter` (all without one): the `$count` path, a number. */
  async count(table, filter) {
    const r = await this.call("GET", `/${table}/$count`, { query: [["$filter", filter]], accept: "text/plain" });
    return Number(await r.text());
  }

  /** Every row of a query, page by page; `onPage(rows)` sees each page. */
  async queryAll(table, { filter, select }, onPage, signal) {
    let next = null;
    do {
      if (signal && signal.aborted) throw new TableError(0, "Cancelled", "Cancelled.");
      const page = await this.query(table, { filter, select, next });
      await onPage(page.rows);
      next = page.next;
    } while (next);
  }

  getEntity(table, pk, rk) {
    return this.json("GET", entityPath(table, pk, rk));
  }

  /** Inserts; resolves to nothing, throws EntityAlreadyExists and the like. */
  insert(table, body) {
    return this.call("POST", `/${table}`, { body: JSON.stringify(body), headers: { Prefer: "return-no-content" } });
  }

  /** Replace (PUT) or merge (MERGE) under `etag` ("*": whatever is there). */
  update(table, pk, rk, body, { merge = false, etag = "*" } = {}) {
    return this.call(merge ? "MERGE" : "PUT", entityPath(table, pk, rk), {
      body: JSON.stringify(body),
      headers: { "If-Match": etag },
    });
  }

  /** Insert-or-replace (PUT) or insert-or-merge (MERGE): no If-Match. */
  upsert(table, pk, rk, body, { merge = false } = {}) {
    return this.call(merge ? "MERGE" : "PUT", entityPath(table, pk, rk), { body: JSON.stringify(body) });
  }

  deleteEntity(table, pk, rk, etag = "*") {
    return this.call("DELETE", entityPath(table, pk, rk), { headers: { "If-Match": etag } });
  }

  async getAcl(table) {
    const r = await this.call("GET", `/${table}`, { query: [["comp", "acl"]], accept: "application/xml" });
    const doc = new DOMParser().parseFromString(await r.text(), "application/xml");
    return [...doc.getElementsByTagName("SignedIdentifier")].map((si) => {
      const text = (tag) => (si.getElementsByTagName(tag)[0] || {}).textContent || "";
      return { id: text("Id"), start: text("Start"), expiry: text("Expiry"), permission: text("Permission") };
    });
  }

  setAcl(table, policies) {
    const esc = (s) => s.replace(/[<>&]/g, (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;" })[c]);
    const ids = policies.map((p) => {
      const field = (tag, v) => (v ? `<${tag}>${esc(v)}</${tag}>` : "");
      const policy = field("Start", p.start) + field("Expiry", p.expiry) + field("Permission", p.permission);
      return `<SignedIdentifier><Id>${esc(p.id)}</Id><AccessPolicy>${policy}</AccessPolicy></SignedIdentifier>`;
    });
    const body = `<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers>${ids.join("")}</SignedIdentifiers>`;
    return this.call("PUT", `/${table}`, {
      query: [["comp", "acl"]], body, headers: { "Content-Type": "application/xml" }, accept: "application/xml",
    });
  }

  /**
   * One changeset of write operations on one partition, atomic:
   * ops = [{ method: "POST"|"PUT"|"MERGE"|"DELETE", pk, rk, body?, etag? }].
   * Throws the failing operation's TableError, with `.index` set.
   */
  async batch(table, ops) {
    const id = () => Math.random().toString(16).slice(2) + Date.now().toString(16);
    const batch = `batch_${id()}`;
    const changeset = `changeset_${id()}`;
    const base = `${location.protocol}//${location.host}/${this.account}`;
    const lines = [`--${batch}`, `Content-Type: multipart/mixed; boundary=${changeset}`, ""];
    ops.forEach((op, i) => {
      const url = op.method === "POST" ? `${base}/${table}` : base + entityPath(table, op.pk, op.rk);
      lines.push(`--${changeset}`, "Content-Type: application/http", "Content-Transfer-Encoding: binary", "",
        `${op.method} ${url} HTTP/1.1`, `Content-ID: ${i + 1}`, `Accept: ${NONE}`, "Prefer: return-no-content");
      if (op.etag) lines.push(`If-Match: ${op.etag}`);
      if (op.body) lines.push("Content-Type: application/json", "", JSON.stringify(op.body));
      else lines.push("");
    });
    lines.push(`--${changeset}--`, `--${batch}--`, "");
    const r = await this.call("POST", "/$batch", {
      body: lines.join("\r\n"),
      headers: { "Content-Type": `multipart/mixed; boundary=${batch}` },
    });
    const text = await r.text();
    // A failed changeset answers with the one failing response.
    const m = /HTTP\/1\.1 (\d{3})[^\r\n]*\r?\n([\s\S]*?)\r?\n\r?\n([\s\S]*?)\r?\n--/.exec(text);
    if (m && !m[1].startsWith("2")) {
      const err = parseError(Number(m[1]), m[3], "");
      // Azure prefixes the message with the failing operation's 0-based index.
      const idx = /^(\d+):/.exec(err.message);
      err.index = idx ? Number(idx[1]) : 0;
      if (idx) err.message = err.message.slice(idx[0].length);
      throw err;
    }
  }
}
