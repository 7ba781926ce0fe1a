// @azure/data-tables against Tafel answering as Azure Cosmos DB for Table (docs/cosmos.md):
// what the JavaScript SDK does differently on a Cosmos endpoint — it detects one by its host
// name (`<account>.table.cosmos.azure.com`, or `localhost` off Azurite's path), tunnels merges
// through POST + X-HTTP-Method, asks for https://cosmos.azure.com/.default tokens — and Cosmos's
// answers to it: table names, keys, batches, errors. Microsoft's own JS tests for Cosmos are
// unit tests of the SDK's source against fakes (tests/cosmos/README.md), so these are ours.
//
// The server speaks HTTPS with a certificate from `tafel cert` naming the Cosmos host, which
// resolves to 127.0.0.1 through the https.Agent given to the SDK (its `lookup`), so no
// /etc/hosts entry is needed.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { generateKeyPairSync, randomBytes, sign } from "node:crypto";
import dns from "node:dns";
import fs from "node:fs";
import https from "node:https";
import os from "node:os";
import path from "node:path";
import { after, before } from "node:test";

import { AzureNamedKeyCredential, TableClient, TableServiceClient } from "@azure/data-tables";

import { collect, errorCode, expectRestError, startServer, tafelBinary, testWithLog } from "./harness.mjs";

const ACCOUNT = "tafeljs";
// The Cosmos DB emulator's well-known key (any base64 key would do).
const KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==";
const HOST = `${ACCOUNT}.table.cosmos.azure.com`;
const TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47";
const COSMOS_SCOPE = "https://cosmos.azure.com/.default";

let server;
let cosmosFlag;
let tls;
let agent;
const test = testWithLog(() => server);

before(async () => {
  tls = fs.mkdtempSync(path.join(os.tmpdir(), "tafel-js-cosmos-"));
  execFileSync(tafelBinary(), ["cert", "--out", tls, "--name", HOST], { stdio: "ignore" });
  server = await startServer({
    args: ["--account", `${ACCOUNT}:${KEY}`, "--cert", path.join(tls, "cert.pem"), "--key", path.join(tls, "key.pem"),
      "--oauth", "basic", "--oauth-tenant", TENANT],
  });
  agent = new https.Agent({
    keepAlive: true,
    ca: fs.readFileSync(path.join(tls, "ca.pem")),
    lookup: (host, opts, cb) => dns.lookup(host === HOST ? "127.0.0.1" : host, opts, cb),
  });
});

after(async () => {
  agent?.destroy();
  if (server) await server.stop();
  if (cosmosFlag) await cosmosFlag.stop();
  fs.rmSync(tls, { recursive: true, force: true });
});

const endpoint = () => `https://${HOST}:${server.port}`;
const keyCredential = () => new AzureNamedKeyCredential(ACCOUNT, KEY);
// No retries: Cosmos answers a bad table name 500, which the SDK would otherwise retry.
const options = () => ({ agent, retryOptions: { maxRetries: 0 } });
const cosmosName = (prefix) => `${prefix}_${randomBytes(5).toString("hex")}`;

/** Each request's verb and X-HTTP-Method, as the SDK sent them. */
function recordVerbs(client) {
  const seen = [];
  client.pipeline.addPolicy({
    name: "recordVerbs",
    sendRequest: (req, next) => {
      seen.push(`${req.method} ${req.headers.get("X-HTTP-Method") ?? ""}`.trim());
      return next(req);
    },
  });
  return seen;
}

/** A TokenCredential that mints an RS256 token for the scope asked (Tafel runs --oauth basic). */
function tokenCredential({ audience } = {}) {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const scopes = [];
  return {
    scopes,
    async getToken(asked) {
      scopes.push(...[asked].flat());
      const b64 = (v) => Buffer.from(JSON.stringify(v)).toString("base64url");
      const now = Math.floor(Date.now() / 1000);
      const aud = audience ?? [asked].flat()[0].replace(/\/\.default$/, "");
      const head = b64({ alg: "RS256", typ: "JWT", kid: "js" });
      const body = b64({ aud, iss: `https://sts.windows.net/${TENANT}/`, nbf: now - 60, exp: now + 3600, oid: "js" });
      const sig = sign("RSA-SHA256", Buffer.from(`${head}.${body}`), privateKey).toString("base64url");
      return { token: `${head}.${body}.${sig}`, expiresOnTimestamp: (now + 3600) * 1000 };
    },
  };
}

test("a Cosmos host name: Cosmos table names, and merges tunnelled through POST", async () => {
  const svc = new TableServiceClient(endpoint(), keyCredential(), options());
  const name = cosmosName("js_cosmos");
  await svc.createTable(name);
  const table = new TableClient(endpoint(), name, keyCredential(), options());
  const verbs = recordVerbs(table);
  await table.createEntity({ partitionKey: "p", rowKey: "1", a: 1 });
  await table.updateEntity({ partitionKey: "p", rowKey: "1", b: 2 }, "Merge");
  await table.upsertEntity({ partitionKey: "p", rowKey: "2", c: 3 }, "Merge");
  assert.deepEqual(verbs, ["POST", "POST MERGE", "POST MERGE"]);
  const rows = await collect(table.listEntities());
  assert.deepEqual(rows.map((e) => [e.rowKey, e.a, e.b, e.c]), [["1", 1, 2, undefined], ["2", undefined, undefined, 3]]);
  assert.ok((await collect(svc.listTables())).some((t) => t.name === name));
  // Already there: the SDK's createTable takes Cosmos's 409 as done.
  await svc.createTable(name);
  await svc.deleteTable(name);
  assert.ok(!(await collect(svc.listTables())).some((t) => t.name === name));
});

test("table names Cosmos refuses, and keys it refuses where Table Storage takes them", async () => {
  const svc = new TableServiceClient(endpoint(), keyCredential(), options());
  const bad = await expectRestError(svc.createTable("bad/name"), 500, "InternalServerError");
  assert.match(bad.message, /invalid character/);
  const name = cosmosName("keys");
  await svc.createTable(name);
  const table = new TableClient(endpoint(), name, keyCredential(), options());
  const empty = await expectRestError(table.createEntity({ partitionKey: "", rowKey: "r" }), 400, "InvalidInput");
  assert.match(empty.message, /PartitionKey\/RowKey cannot be empty/);
  await table.createEntity({ partitionKey: "分区", rowKey: "行 1" });
  assert.equal((await table.getEntity("分区", "行 1")).rowKey, "行 1");
  await svc.deleteTable(name);
});

test("batches on Cosmos: a changeset with merges, and ResourceNotFound for a missing table", async () => {
  const svc = new TableServiceClient(endpoint(), keyCredential(), options());
  const name = cosmosName("batch");
  await svc.createTable(name);
  const table = new TableClient(endpoint(), name, keyCredential(), options());
  await table.createEntity({ partitionKey: "p", rowKey: "0", v: 0 });
  const result = await table.submitTransaction([
    ["create", { partitionKey: "p", rowKey: "1", v: 1 }],
    ["update", { partitionKey: "p", rowKey: "0", w: 2 }, "Merge"],
    ["upsert", { partitionKey: "p", rowKey: "2", v: 3 }, "Replace"],
  ]);
  assert.equal(result.status, 202);
  // The SDK asks for no content back (`Prefer: return-no-content`) on a batch insert.
  assert.deepEqual(result.subResponses.map((r) => r.status), [204, 204, 204]);
  const rows = await collect(table.listEntities());
  assert.deepEqual(rows.map((e) => [e.rowKey, e.v, e.w]), [["0", 0, 2], ["1", 1, undefined], ["2", 3, undefined]]);
  const missing = new TableClient(endpoint(), cosmosName("missing"), keyCredential(), options());
  await expectRestError(missing.submitTransaction([["create", { partitionKey: "p", rowKey: "1" }]]), 404, "ResourceNotFound");
  await svc.deleteTable(name);
});

test("errors come in Cosmos's JSON form, and service settings Cosmos does not take are refused", async () => {
  const svc = new TableServiceClient(endpoint(), keyCredential(), options());
  const name = cosmosName("errors");
  await svc.createTable(name);
  const table = new TableClient(endpoint(), name, keyCredential(), options());
  const err = await expectRestError(table.getEntity("p", "nope"), 404, "ResourceNotFound");
  assert.match(err.response.headers.get("content-type"), /^application\/json; ?odata=fullmetadata/);
  assert.match(err.response.bodyAsText, /ActivityId: /);
  await expectRestError(svc.setProperties({ cors: [] }), 405, "MethodNotAllowed");
  await svc.deleteTable(name);
});

test("a TokenCredential on a Cosmos endpoint asks for a Cosmos token, and a storage token is refused", async () => {
  const cred = tokenCredential();
  const svc = new TableServiceClient(endpoint(), cred, options());
  const name = cosmosName("token");
  await svc.createTable(name);
  const table = new TableClient(endpoint(), name, cred, options());
  await table.createEntity({ partitionKey: "p", rowKey: "r" });
  assert.equal((await table.getEntity("p", "r")).rowKey, "r");
  await svc.deleteTable(name);
  assert.ok(cred.scopes.length > 0 && cred.scopes.every((s) => s === COSMOS_SCOPE), cred.scopes.join());

  const storageOnly = new TableServiceClient(endpoint(), tokenCredential({ audience: "https://storage.azure.com" }), options());
  const refused = await expectRestError(collect(storageOnly.listTables()), 401, "InvalidAuthenticationInfo");
  assert.match(refused.response.headers.get("www-authenticate"), /resource_id=https:\/\/cosmos\.azure\.com$/);
  assert.equal(errorCode(refused), "InvalidAuthenticationInfo");
});

test("`localhost` is a Cosmos endpoint to the SDK: the emulator's connection string with --cosmos", async () => {
  cosmosFlag = await startServer({ args: ["--cosmos"] });
  const conn =
    `DefaultEndpointsProtocol=http;AccountName=localhost;AccountKey=${KEY};` +
    `TableEndpoint=http://localhost:${cosmosFlag.port}/;`;
  const svc = TableServiceClient.fromConnectionString(conn, { allowInsecureConnection: true });
  const name = cosmosName("emulator");
  await svc.createTable(name);
  const table = TableClient.fromConnectionString(conn, name, { allowInsecureConnection: true });
  const verbs = recordVerbs(table);
  await table.createEntity({ partitionKey: "p", rowKey: "r", a: 1 });
  await table.updateEntity({ partitionKey: "p", rowKey: "r", b: 2 }, "Merge");
  assert.deepEqual(verbs, ["POST", "POST MERGE"]);
  const e = await table.getEntity("p", "r");
  assert.deepEqual([e.a, e.b], [1, 2]);
  await svc.deleteTable(name);
});
