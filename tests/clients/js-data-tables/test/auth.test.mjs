// Shared access signatures made by the SDK (generateTableSas, generateAccountSas), used
// both as AzureSASCredential and embedded in the URL; Shared Key Lite (the SDK's only
// Shared Key flavour); wrong keys.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  AzureNamedKeyCredential,
  AzureSASCredential,
  generateAccountSas,
  generateTableSas,
  odata,
  TableClient,
  TableServiceClient,
} from "@azure/data-tables";
import { ACCOUNT, all, credential, freshTable, OPTS, rejects, serviceFromConn, tableName, URL_ } from "./common.mjs";

const HOUR = () => new Date(Date.now() + 3600_000);
let client; // owner (connection string)
let other; // a second table
const created = [];

before(async () => {
  client = await freshTable("au");
  other = await freshTable("ao");
  created.push(client.tableName, other.tableName);
  for (const pk of ["a", "b", "c"]) {
    for (const rk of ["1", "2"]) await client.createEntity({ partitionKey: pk, rowKey: rk, V: `${pk}${rk}` });
  }
  await other.createEntity({ partitionKey: "a", rowKey: "1", V: "other" });
});
after(async () => {
  const svc = serviceFromConn();
  for (const t of created) await svc.deleteTable(t);
});

const tableSas = (name, options) => generateTableSas(name, credential(), { expiresOn: HOUR(), ...options });
const viaCredential = (name, sas) => new TableClient(URL_, name, new AzureSASCredential(sas), OPTS);
const viaUrl = (name, sas) => new TableClient(`${URL_}?${sas}`, name, OPTS);
const keys = (rows) => rows.map((e) => `${e.partitionKey}${e.rowKey}`);

test("table SAS, read only: queries and reads succeed, writes are 403 AuthorizationPermissionMismatch", async () => {
  const sas = tableSas(client.tableName, { permissions: { query: true } });
  assert.match(sas, /(^|&)sp=r(&|$)/);
  assert.match(sas, new RegExp(`(^|&)tn=${client.tableName}(&|$)`));
  for (const c of [viaCredential(client.tableName, sas), viaUrl(client.tableName, sas)]) {
    assert.deepEqual(keys(await all(c.listEntities())), ["a1", "a2", "b1", "b2", "c1", "c2"]);
    assert.equal((await c.getEntity("b", "2")).V, "b2");
    await rejects(c.createEntity({ partitionKey: "z", rowKey: "1" }), 403, "AuthorizationPermissionMismatch");
    await rejects(c.updateEntity({ partitionKey: "a", rowKey: "1", V: "x" }, "Merge"), 403, "AuthorizationPermissionMismatch");
    await rejects(c.upsertEntity({ partitionKey: "a", rowKey: "1", V: "x" }, "Replace"), 403, "AuthorizationPermissionMismatch");
    await rejects(c.deleteEntity("a", "1"), 403, "AuthorizationPermissionMismatch");
    await rejects(c.submitTransaction([["create", { partitionKey: "z", rowKey: "1" }]]), 403, "AuthorizationPermissionMismatch");
  }
  assert.equal((await client.getEntity("a", "1")).V, "a1");
});

test("table SAS, add+update+delete: every write and a transaction succeed, through both forms", async () => {
  const sas = tableSas(client.tableName, { permissions: { query: true, add: true, update: true, delete: true } });
  for (const [label, c] of [["credential", viaCredential(client.tableName, sas)], ["url", viaUrl(client.tableName, sas)]]) {
    const pk = `sas-${label}`;
    await c.createEntity({ partitionKey: pk, rowKey: "1", V: 1 });
    const e = await c.getEntity(pk, "1");
    await c.updateEntity({ partitionKey: pk, rowKey: "1", V: 2 }, "Merge", { etag: e.etag });
    await c.upsertEntity({ partitionKey: pk, rowKey: "2", V: 3 }, "Merge");
    const res = await c.submitTransaction([
      ["create", { partitionKey: pk, rowKey: "3", V: 4 }],
      ["update", { partitionKey: pk, rowKey: "1", V: 5 }, "Replace"],
      ["upsert", { partitionKey: pk, rowKey: "2", W: 6 }, "Merge"],
    ]);
    assert.equal(res.status, 202);
    const rows = await all(c.listEntities({ queryOptions: { filter: odata`PartitionKey eq ${pk}` } }));
    assert.deepEqual(rows.map((r) => [r.rowKey, r.V, r.W]), [["1", 5, undefined], ["2", 3, 6], ["3", 4, undefined]], label);
    await c.submitTransaction([["delete", { partitionKey: pk, rowKey: "3" }]]);
    await c.deleteEntity(pk, "1");
    await c.deleteEntity(pk, "2");
    assert.deepEqual(await all(c.listEntities({ queryOptions: { filter: odata`PartitionKey eq ${pk}` } })), []);
  }
});

test("table SAS for one table is refused on another table and for table operations", async () => {
  const sas = tableSas(client.tableName, { permissions: { query: true, add: true, update: true, delete: true } });
  const wrong = viaCredential(other.tableName, sas);
  await rejects(all(wrong.listEntities()), 403, "AuthorizationResourceTypeMismatch");
  await rejects(wrong.getEntity("a", "1"), 403, "AuthorizationResourceTypeMismatch");
  const svc = new TableServiceClient(URL_, new AzureSASCredential(sas), OPTS);
  await rejects(all(svc.listTables()), 403, "AuthorizationResourceTypeMismatch");
  await rejects(svc.createTable(tableName("never")), 403, "AuthorizationResourceTypeMismatch");
});

test("table SAS with a partition key range: queries are clipped, point operations outside are 403", async () => {
  const sas = tableSas(client.tableName, {
    permissions: { query: true, add: true },
    startPartitionKey: "b",
    endPartitionKey: "b",
  });
  const c = viaCredential(client.tableName, sas);
  assert.deepEqual(keys(await all(c.listEntities())), ["b1", "b2"]);
  assert.deepEqual(keys(await all(c.listEntities({ queryOptions: { filter: odata`RowKey eq ${"1"}` } }))), ["b1"]);
  assert.equal((await c.getEntity("b", "1")).V, "b1");
  await rejects(c.getEntity("a", "1"), 403, "AuthorizationPermissionMismatch");
  await rejects(c.getEntity("c", "9"), 403, "AuthorizationPermissionMismatch");
  await rejects(c.createEntity({ partitionKey: "c", rowKey: "3" }), 403, "AuthorizationPermissionMismatch");
  await c.createEntity({ partitionKey: "b", rowKey: "3", V: "b3" });
  assert.equal((await client.getEntity("b", "3")).V, "b3");
  await client.deleteEntity("b", "3");
});

test("stored access policy: setAccessPolicy/getAccessPolicy, and a SAS naming it", async () => {
  const start = new Date(Date.now() - 600_000);
  const expiry = HOUR();
  await client.setAccessPolicy([
    { id: "readers", accessPolicy: { permission: "r", start, expiry } },
    { id: "writers", accessPolicy: { permission: "raud" } },
  ]);
  const acl = await client.getAccessPolicy();
  // The SDK sends the dates without milliseconds and reads them back as Dates.
  const secs = (d) => Math.floor(d.getTime() / 1000) * 1000;
  assert.deepEqual(
    acl.map((a) => [a.id, a.accessPolicy.permission, a.accessPolicy.start?.getTime(), a.accessPolicy.expiry?.getTime()]),
    [["readers", "r", secs(start), secs(expiry)], ["writers", "raud", undefined, undefined]],
  );
  const readers = generateTableSas(client.tableName, credential(), { identifier: "readers" });
  assert.match(readers, /(^|&)si=readers(&|$)/);
  const c = viaCredential(client.tableName, readers);
  assert.equal((await c.getEntity("a", "2")).V, "a2");
  await rejects(c.createEntity({ partitionKey: "z", rowKey: "1" }), 403, "AuthorizationPermissionMismatch");
  // Removing the policy revokes the SAS that names it.
  await client.setAccessPolicy([]);
  assert.deepEqual(await client.getAccessPolicy(), []);
  await rejects(c.getEntity("a", "2"), 403, "AuthenticationFailed");
});

test("expired and tampered table SAS are 403 AuthenticationFailed", async () => {
  const expired = generateTableSas(client.tableName, credential(), {
    permissions: { query: true },
    startsOn: new Date(Date.now() - 7200_000),
    expiresOn: new Date(Date.now() - 3600_000),
  });
  await rejects(all(viaCredential(client.tableName, expired).listEntities()), 403, "AuthenticationFailed");
  const forged = tableSas(client.tableName, { permissions: { query: true } }).replace("sp=r", "sp=raud");
  await rejects(viaUrl(client.tableName, forged).createEntity({ partitionKey: "z", rowKey: "1" }), 403, "AuthenticationFailed");
  const otherKey = generateTableSas(client.tableName, new AzureNamedKeyCredential(ACCOUNT, Buffer.from("not the key").toString("base64")), {
    permissions: { query: true },
    expiresOn: HOUR(),
  });
  await rejects(viaCredential(client.tableName, otherKey).getEntity("a", "1"), 403, "AuthenticationFailed");
});

test("account SAS with every permission: tables and entities", async () => {
  const sas = generateAccountSas(credential(), {
    expiresOn: HOUR(),
    permissions: { query: true, write: true, delete: true, list: true, add: true, update: true },
    resourceTypes: "sco",
    services: { table: true },
  });
  assert.match(sas, /(^|&)ss=t(&|$)/);
  assert.match(sas, /(^|&)srt=sco(&|$)/);
  const svc = new TableServiceClient(URL_, new AzureSASCredential(sas), OPTS);
  const name = tableName("as");
  created.push(name);
  await svc.createTable(name);
  assert.deepEqual((await all(svc.listTables({ queryOptions: { filter: odata`TableName eq ${name}` } }))).map((t) => t.name), [name]);
  for (const c of [viaCredential(name, sas), viaUrl(name, sas)]) {
    await c.upsertEntity({ partitionKey: "p", rowKey: "1", V: 1 }, "Replace");
    await c.submitTransaction([["create", { partitionKey: "p", rowKey: "2", V: 2 }]]);
    assert.deepEqual((await all(c.listEntities())).map((e) => e.V), [1, 2]);
    await c.deleteEntity("p", "1");
    await c.deleteEntity("p", "2");
  }
  await svc.deleteTable(name);
  assert.deepEqual(await all(svc.listTables({ queryOptions: { filter: odata`TableName eq ${name}` } })), []);
});

test("account SAS, read and list only: writes are 403 AuthorizationPermissionMismatch", async () => {
  const sas = generateAccountSas(credential(), { expiresOn: HOUR() }); // the SDK's default: rl, sco, t
  assert.match(sas, /(^|&)sp=rl(&|$)/);
  const svc = new TableServiceClient(URL_, new AzureSASCredential(sas), OPTS);
  const listed = await all(svc.listTables({ queryOptions: { filter: odata`TableName eq ${client.tableName}` } }));
  assert.deepEqual(listed.map((t) => t.name), [client.tableName]);
  await rejects(svc.createTable(tableName("never")), 403, "AuthorizationPermissionMismatch");
  await rejects(svc.deleteTable(client.tableName), 403, "AuthorizationPermissionMismatch");
  const c = viaUrl(client.tableName, sas);
  assert.equal((await c.getEntity("c", "2")).V, "c2");
  await rejects(c.createEntity({ partitionKey: "z", rowKey: "1" }), 403, "AuthorizationPermissionMismatch");
  await rejects(c.deleteEntity("a", "1"), 403, "AuthorizationPermissionMismatch");
});

test("account SAS without the needed resource type or service is refused", async () => {
  const objectsOnly = generateAccountSas(credential(), {
    expiresOn: HOUR(),
    permissions: { query: true, list: true, add: true },
    resourceTypes: "o",
  });
  const svc = new TableServiceClient(URL_, new AzureSASCredential(objectsOnly), OPTS);
  await rejects(all(svc.listTables()), 403, "AuthorizationResourceTypeMismatch");
  await rejects(svc.createTable(tableName("never")), 403, "AuthorizationResourceTypeMismatch");
  assert.equal((await viaCredential(client.tableName, objectsOnly).getEntity("a", "2")).V, "a2");

  const blobOnly = generateAccountSas(credential(), {
    expiresOn: HOUR(),
    permissions: { query: true, list: true },
    services: { blob: true },
  });
  await rejects(all(viaCredential(client.tableName, blobOnly).listEntities()), 403, "AuthorizationServiceMismatch");
});

test("Shared Key Lite with the wrong key is 403 AuthenticationFailed", async () => {
  const bad = new AzureNamedKeyCredential(ACCOUNT, Buffer.from("x".repeat(64)).toString("base64"));
  await rejects(new TableClient(URL_, client.tableName, bad, OPTS).getEntity("a", "1"), 403, "AuthenticationFailed");
  await rejects(all(new TableServiceClient(URL_, bad, OPTS).listTables()), 403, "AuthenticationFailed");
  // Full Shared Key is not tested here: @azure/data-tables signs only Shared Key Lite
  // (tablesNamedCredentialPolicy.js), with no option for the other flavour.
});

test("a client with no credential at all is 403 AuthenticationFailed", async () => {
  const anon = new TableClient(URL_, client.tableName, OPTS);
  await rejects(anon.getEntity("a", "1"), 403, "AuthenticationFailed");
  await rejects(all(new TableServiceClient(URL_, OPTS).listTables()), 403, "AuthenticationFailed");
});
