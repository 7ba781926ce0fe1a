// Shared helpers for the @azure/data-tables matrix. The server is the one named by the
// environment that tests/clients/run-all sets (see tests/clients/README.md).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import {
  AzureNamedKeyCredential,
  TableClient,
  TableServiceClient,
} from "@azure/data-tables";

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through tests/clients/run-all`);
  return v;
}

export const URL_ = env("TAFEL_TABLE_URL").replace(/\/+$/, "");
export const ACCOUNT = env("TAFEL_ACCOUNT");
export const KEY = env("TAFEL_KEY");
export const CONN = env("TAFEL_CONNECTION_STRING");
export const OPTS = { allowInsecureConnection: true };
export const credential = () => new AzureNamedKeyCredential(ACCOUNT, KEY);

/** A table name unique to this run: letters and digits, starting with a letter. */
export function tableName(prefix) {
  return `jsdt${prefix}${randomBytes(6).toString("hex")}`;
}

export const serviceFromConn = () => TableServiceClient.fromConnectionString(CONN, OPTS);
export const tableFromConn = (name) => TableClient.fromConnectionString(CONN, name, OPTS);

/** Creates a table through the connection string and returns its TableClient. */
export async function freshTable(prefix) {
  const name = tableName(prefix);
  const client = tableFromConn(name);
  await client.createTable();
  return client;
}

/** The Azure error code the SDK surfaced (RestError.code is the body's odata.error.code). */
export function errorCode(err) {
  return err?.code ?? err?.response?.headers?.get?.("x-ms-error-code");
}

/** Awaits `promise` and asserts it fails with this HTTP status and Azure error code. */
export async function rejects(promise, status, code) {
  let caught;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught, `expected ${status} ${code}, got success`);
  assert.equal(caught.name, "RestError", `not a RestError: ${caught.stack}`);
  assert.equal(caught.statusCode, status, `status ${caught.statusCode}: ${caught.message}`);
  assert.equal(errorCode(caught), code, `code ${errorCode(caught)}: ${caught.message}`);
  return caught;
}

/** Every item of an async iterator (an SDK listing). */
export async function all(iter) {
  const out = [];
  for await (const x of iter) out.push(x);
  return out;
}

/** RowKeys of every entity the filter selects, in service order. */
export async function rowKeys(client, filter, extra = {}) {
  const items = await all(client.listEntities({ queryOptions: { filter, ...extra } }));
  return items.map((e) => e.rowKey);
}

/** Inserts entities (same partition) with submitTransaction in chunks of 100. */
export async function insertMany(client, entities) {
  for (let i = 0; i < entities.length; i += 100) {
    const chunk = entities.slice(i, i + 100);
    const res = await client.submitTransaction(chunk.map((e) => ["create", e]));
    assert.equal(res.status, 202);
    assert.equal(res.subResponses.length, chunk.length);
    for (const s of res.subResponses) assert.equal(s.status, 204);
  }
}
