// Shared helpers for the legacy `azure-storage` matrix. The server is the one named by the
// environment that tests/clients/run-all sets (see tests/clients/README.md). The package's
// API takes callbacks; `call` turns one call into a promise of { result, response }.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import azure from "azure-storage";

export { azure };
export const TableQuery = azure.TableQuery;
export const TableBatch = azure.TableBatch;
export const TableUtilities = azure.TableUtilities;
export const gen = azure.TableUtilities.entityGenerator;

function env(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through tests/clients/run-all`);
  return v;
}

export const URL_ = env("TAFEL_TABLE_URL").replace(/\/+$/, "");
export const ACCOUNT = env("TAFEL_ACCOUNT");
export const KEY = env("TAFEL_KEY");
export const CONN = env("TAFEL_CONNECTION_STRING");

/** A TableService from the connection string (Shared Key, table flavour), no retries. */
export function service() {
  return azure.createTableService(CONN).withFilter(new azure.LinearRetryPolicyFilter(0, 0));
}

/** A TableService that authenticates with a SAS token only. */
export function sasService(sas) {
  return azure.createTableServiceWithSas(URL_, sas).withFilter(new azure.LinearRetryPolicyFilter(0, 0));
}

/** Calls svc[method](...args, callback); resolves { result, response }, rejects with the error. */
export function call(svc, method, ...args) {
  return new Promise((resolve, reject) => {
    svc[method](...args, (err, result, response) => {
      if (err) {
        err.response = err.response ?? response;
        reject(err);
      } else resolve({ result, response });
    });
  });
}

/** A table name unique to this run: letters and digits, starting with a letter. */
export function tableName(prefix) {
  return `jsas${prefix}${randomBytes(6).toString("hex")}`;
}

export async function freshTable(prefix) {
  const name = tableName(prefix);
  await call(service(), "createTable", name);
  return name;
}

export async function dropTable(name) {
  await call(service(), "deleteTableIfExists", name);
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
  assert.equal(caught.statusCode, status, `status ${caught.statusCode}: ${caught.message}`);
  assert.equal(caught.code, code, `code ${caught.code}: ${caught.message}`);
  return caught;
}

/** Every entity of a TableQuery, following continuation tokens; also the page sizes. */
export async function queryAll(svc, table, query, options = {}) {
  const entries = [];
  const pages = [];
  let token = null;
  do {
    const { result } = await call(svc, "queryEntities", table, query, token, options);
    entries.push(...result.entries);
    pages.push(result.entries.length);
    token = result.continuationToken;
  } while (token);
  return { entries, pages };
}

/** RowKeys (values) of every entity a where clause selects. */
export async function rowKeys(svc, table, query) {
  const { entries } = await queryAll(svc, table, query);
  return entries.map((e) => e.RowKey._);
}

/** Inserts plain entities (same partition) with TableBatch in chunks of 100. */
export async function insertMany(svc, table, entities) {
  for (let i = 0; i < entities.length; i += 100) {
    const batch = new TableBatch();
    // TableBatch wants the keys as entity properties ({ _: value }), not bare strings.
    for (const e of entities.slice(i, i + 100)) {
      batch.insertEntity({ ...e, PartitionKey: gen.String(e.PartitionKey), RowKey: gen.String(e.RowKey) });
    }
    const { result } = await call(svc, "executeBatch", table, batch);
    assert.equal(result.length, Math.min(100, entities.length - i));
    for (const r of result) assert.equal(r.response.statusCode, 204);
  }
}
