// Quickstart: tables (create, list with a filter, page through, delete) and the basic
// entity round trip through TableServiceClient / TableClient.fromConnectionString.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { odata, TableClient } from "@azure/data-tables";
import {
  all, freshTable, rejects, serviceFromConn, tableFromConn, tableName, URL_, credential, OPTS, ACCOUNT,
} from "./common.mjs";

const created = [];
after(async () => {
  const svc = serviceFromConn();
  for (const t of created) await svc.deleteTable(t);
});

test("create, list with an odata filter, and delete tables", async () => {
  const svc = serviceFromConn();
  const name = tableName("qs");
  created.push(name);
  await svc.createTable(name);
  // The SDK swallows only a 409 whose code is TableAlreadyExists: any other answer throws.
  let status;
  await svc.createTable(name, { onResponse: (r) => (status = r.status) });
  assert.equal(status, 409);

  const found = await all(svc.listTables({ queryOptions: { filter: odata`TableName eq ${name}` } }));
  assert.deepEqual(found.map((t) => t.name), [name]);
  // TableName comparisons are ordinal on the stored (lower-case) name.
  const upper = await all(svc.listTables({ queryOptions: { filter: odata`TableName eq ${name.toUpperCase()}` } }));
  assert.deepEqual(upper, []);

  await svc.deleteTable(name);
  const gone = await all(svc.listTables({ queryOptions: { filter: odata`TableName eq ${name}` } }));
  assert.deepEqual(gone, []);
  // Deleting a missing table: the SDK swallows only the 404.
  status = undefined;
  await svc.deleteTable(name, { onResponse: (r) => (status = r.status) });
  assert.equal(status, 404);
});

test("list tables page by page with a prefix range filter (NextTableName)", async () => {
  const svc = serviceFromConn();
  const prefix = tableName("pg");
  const names = [0, 1, 2, 3, 4].map((i) => `${prefix}x${i}`);
  for (const n of names) {
    created.push(n);
    await svc.createTable(n);
  }
  const filter = odata`TableName ge ${prefix} and TableName lt ${prefix + "~"}`;
  const pages = [];
  for await (const page of svc.listTables({ queryOptions: { filter } }).byPage({ maxPageSize: 2 })) {
    pages.push(page.map((t) => t.name));
  }
  assert.deepEqual(pages, [names.slice(0, 2), names.slice(2, 4), names.slice(4)]);
  const flat = await all(svc.listTables({ queryOptions: { filter } }));
  assert.deepEqual(flat.map((t) => t.name), names);
});

test("entity quickstart: insert, get, query, delete", async () => {
  const client = await freshTable("qe");
  created.push(client.tableName);
  await client.createEntity({ partitionKey: "p", rowKey: "1", Name: "Ada", Age: 36 });
  await client.createEntity({ partitionKey: "p", rowKey: "2", Name: "Bob", Age: 41 });

  const e = await client.getEntity("p", "1");
  assert.equal(e.partitionKey, "p");
  assert.equal(e.rowKey, "1");
  assert.equal(e.Name, "Ada");
  assert.equal(e.Age, 36);
  assert.match(e.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,6}[1-9])?Z$/);
  // The ETag is the Timestamp's: W/"datetime'<percent-encoded Timestamp>'".
  assert.equal(e.etag, `W/"datetime'${encodeURIComponent(e.timestamp)}'"`);

  const older = await all(client.listEntities({ queryOptions: { filter: odata`Age gt ${40}` } }));
  assert.deepEqual(older.map((x) => [x.rowKey, x.Name, x.Age]), [["2", "Bob", 41]]);
  const every = await all(client.listEntities());
  assert.deepEqual(every.map((x) => x.rowKey), ["1", "2"]);

  await client.deleteEntity("p", "1");
  await rejects(client.getEntity("p", "1"), 404, "ResourceNotFound");
  assert.deepEqual((await all(client.listEntities())).map((x) => x.rowKey), ["2"]);
});

test("entity operations on a missing table are 404 TableNotFound", async () => {
  const client = tableFromConn(tableName("none"));
  await rejects(client.createEntity({ partitionKey: "p", rowKey: "1" }), 404, "TableNotFound");
  await rejects(client.getEntity("p", "1"), 404, "TableNotFound");
  await rejects(all(client.listEntities()), 404, "TableNotFound");
});

test("TableClient with AzureNamedKeyCredential (the SDK signs Shared Key Lite)", async () => {
  const name = tableName("nk");
  created.push(name);
  const client = new TableClient(URL_, name, credential(), OPTS);
  await client.createTable();
  await client.createEntity({ partitionKey: "a", rowKey: "b", V: "named key" });
  let auth;
  const e = await client.getEntity("a", "b", {
    onResponse: (r) => (auth = r.request.headers.get("authorization")),
  });
  assert.equal(e.V, "named key");
  // @azure/data-tables has no full Shared Key signer for tables: a named key credential
  // always signs Shared Key Lite (tablesNamedCredentialPolicy.js).
  assert.match(auth, new RegExp(`^SharedKeyLite ${ACCOUNT}:[A-Za-z0-9+/]+=*$`));
});

test("newer x-ms-version values (the SDK's version option) are accepted", async () => {
  const name = tableName("ver");
  created.push(name);
  await tableFromConn(name).createTable();
  for (const version of ["2020-12-06", "2025-01-05"]) {
    let sent;
    const c = new TableClient(URL_, name, credential(), { ...OPTS, version });
    await c.upsertEntity({ partitionKey: "v", rowKey: version, V: version }, "Replace");
    const e = await c.getEntity("v", version, { onResponse: (r) => (sent = r.request.headers.get("x-ms-version")) });
    assert.equal(sent, version);
    assert.equal(e.V, version);
  }
});
