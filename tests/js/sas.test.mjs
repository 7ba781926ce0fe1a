// Shared access signatures through @azure/data-tables: generateTableSas / generateAccountSas
// tokens used with AzureSASCredential against the real tafel binary (node --test).
import assert from "node:assert/strict";
import { after, before } from "node:test";

import {
  AzureNamedKeyCredential,
  AzureSASCredential,
  TableClient,
  TableServiceClient,
  generateAccountSas,
  generateTableSas,
} from "@azure/data-tables";

import {
  ACCOUNT,
  KEY,
  collect,
  expectRestError,
  startServer,
  uniqueTableName,
  testWithLog,
} from "./harness.mjs";

const OPTS = { allowInsecureConnection: true };
const CRED = new AzureNamedKeyCredential(ACCOUNT, KEY);
let server;
let admin;
let table;

before(async () => {
  server = await startServer();
  admin = TableServiceClient.fromConnectionString(server.connStr, OPTS);
  table = uniqueTableName("jssas");
  await admin.createTable(table);
  const tc = TableClient.fromConnectionString(server.connStr, table, OPTS);
  for (const pk of ["a", "b", "c"]) {
    for (const rk of ["1", "2"]) {
      await tc.createEntity({ partitionKey: pk, rowKey: rk, v: `${pk}${rk}` });
    }
  }
});

after(async () => {
  if (server) {
    const res = await server.stop();
    assert.equal(res.code, 0, `tafel exit after SIGTERM: ${JSON.stringify(res)}`);
  }
});

const it = testWithLog(() => server);

const inHours = (h) => new Date(Date.now() + h * 3600 * 1000);
const sasTable = (name, sas) => new TableClient(server.url, name, new AzureSASCredential(sas), OPTS);
const sasService = (sas) => new TableServiceClient(server.url, new AzureSASCredential(sas), OPTS);



const keys = (entities) => entities.map((e) => `${e.partitionKey}${e.rowKey}`).sort();

it("table SAS: query permission reads and cannot write", async () => {
  const sas = generateTableSas(table, CRED, { permissions: { query: true }, expiresOn: inHours(1) });
  const client = sasTable(table, sas);
  assert.deepEqual(keys(await collect(client.listEntities())), ["a1", "a2", "b1", "b2", "c1", "c2"]);
  assert.equal((await client.getEntity("b", "2")).v, "b2");
  await expectRestError(client.createEntity({ partitionKey: "a", rowKey: "9" }), 403, "AuthorizationPermissionMismatch");
  await expectRestError(client.deleteEntity("a", "1"), 403, "AuthorizationPermissionMismatch");
});

it("table SAS: add+update allow upserts, and a key range bounds reads and writes", async () => {
  const sas = generateTableSas(table, CRED, {
    permissions: { query: true, add: true, update: true },
    expiresOn: inHours(1),
    startPartitionKey: "b",
    endPartitionKey: "b",
  });
  const client = sasTable(table, sas);
  assert.deepEqual(keys(await collect(client.listEntities())), ["b1", "b2"]);
  // A point read outside the range is refused before the lookup, like a write.
  await expectRestError(client.getEntity("a", "1"), 403, "AuthorizationPermissionMismatch");
  await client.upsertEntity({ partitionKey: "b", rowKey: "3", v: "b3" }, "Replace");
  await client.upsertEntity({ partitionKey: "b", rowKey: "3", w: 1 }, "Merge");
  assert.equal((await client.getEntity("b", "3")).w, 1);
  await expectRestError(client.upsertEntity({ partitionKey: "c", rowKey: "3" }), 403, "AuthorizationPermissionMismatch");
  await expectRestError(client.deleteEntity("b", "3"), 403, "AuthorizationPermissionMismatch");
});

it("table SAS: expired, wrong table and wrong key are refused", async () => {
  const expired = generateTableSas(table, CRED, { permissions: { query: true }, expiresOn: inHours(-1) });
  await expectRestError(collect(sasTable(table, expired).listEntities()), 403, "AuthenticationFailed");
  const future = generateTableSas(table, CRED, {
    permissions: { query: true },
    startsOn: inHours(1),
    expiresOn: inHours(2),
  });
  await expectRestError(collect(sasTable(table, future).listEntities()), 403, "AuthenticationFailed");
  const other = uniqueTableName("jsother");
  await admin.createTable(other);
  const sas = generateTableSas(table, CRED, { permissions: { query: true }, expiresOn: inHours(1) });
  await expectRestError(collect(sasTable(other, sas).listEntities()), 403, "AuthorizationResourceTypeMismatch");
  const wrongKey = new AzureNamedKeyCredential(ACCOUNT, Buffer.from("x".repeat(32)).toString("base64"));
  const forged = generateTableSas(table, wrongKey, { permissions: { query: true }, expiresOn: inHours(1) });
  await expectRestError(collect(sasTable(table, forged).listEntities()), 403, "AuthenticationFailed");
});

it("table SAS bound to a stored access policy stops when the policy is removed", async () => {
  const tc = TableClient.fromConnectionString(server.connStr, table, OPTS);
  await tc.setAccessPolicy([{ id: "js-readers", accessPolicy: { permission: "r", expiry: inHours(1) } }]);
  const acl = await tc.getAccessPolicy();
  assert.equal(acl.length, 1);
  assert.equal(acl[0].id, "js-readers");
  assert.equal(acl[0].accessPolicy.permission, "r");
  const sas = generateTableSas(table, CRED, { identifier: "js-readers" });
  const client = sasTable(table, sas);
  assert.equal((await client.getEntity("a", "1")).v, "a1");
  await tc.setAccessPolicy([]);
  await expectRestError(client.getEntity("a", "1"), 403, "AuthenticationFailed");
});

it("account SAS: resource types and permissions", async () => {
  // The SDK's defaults: services t, resource types sco, permissions rl.
  const readList = sasService(generateAccountSas(CRED, { expiresOn: inHours(1) }));
  const names = [];
  for await (const t of readList.listTables()) names.push(t.name);
  assert.ok(names.includes(table), names.join(","));
  await expectRestError(readList.createTable(uniqueTableName("jsno")), 403, "AuthorizationPermissionMismatch");
  const rl = generateAccountSas(CRED, { expiresOn: inHours(1) });
  assert.equal((await sasTable(table, rl).getEntity("c", "2")).v, "c2");

  const containerOnly = generateAccountSas(CRED, {
    expiresOn: inHours(1),
    resourceTypes: "c",
    permissions: { query: true, list: true, write: true },
  });
  await expectRestError(sasTable(table, containerOnly).getEntity("c", "2"), 403, "AuthorizationResourceTypeMismatch");
  const created = uniqueTableName("jsyes");
  await sasService(containerOnly).createTable(created);
  const after = [];
  for await (const t of admin.listTables()) after.push(t.name);
  assert.ok(after.includes(created));
});
