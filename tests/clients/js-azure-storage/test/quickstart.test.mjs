// Quickstart: doesTableExist, createTableIfNotExists, list tables (segmented, with a
// prefix), the basic entity round trip, deleteTable / deleteTableIfExists.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { call, dropTable, freshTable, rejects, service, tableName, TableQuery } from "./common.mjs";

const created = [];
after(async () => {
  for (const t of created) await dropTable(t);
});

test("doesTableExist, createTableIfNotExists, createTable twice, delete", async () => {
  const svc = service();
  const name = tableName("qs");
  created.push(name);
  assert.equal((await call(svc, "doesTableExist", name)).result.exists, false);
  const first = await call(svc, "createTableIfNotExists", name);
  assert.equal(first.result.created, true);
  assert.equal(first.result.TableName, name);
  assert.equal((await call(svc, "createTableIfNotExists", name)).result.created, false);
  assert.equal((await call(svc, "doesTableExist", name)).result.exists, true);
  await rejects(call(svc, "createTable", name), 409, "TableAlreadyExists");
  await call(svc, "deleteTable", name);
  assert.equal((await call(svc, "doesTableExist", name)).result.exists, false);
  await rejects(call(svc, "deleteTable", name), 404, "TableNotFound");
  assert.equal((await call(svc, "deleteTableIfExists", name)).result, false);
});

test("listTablesSegmentedWithPrefix pages with maxResults and NextTableName", async () => {
  const svc = service();
  const prefix = tableName("pg");
  const names = [0, 1, 2, 3, 4].map((i) => `${prefix}x${i}`);
  for (const n of names) {
    created.push(n);
    await call(svc, "createTable", n);
  }
  const pages = [];
  let token = null;
  do {
    const { result } = await call(svc, "listTablesSegmentedWithPrefix", prefix, token, { maxResults: 2 });
    pages.push(result.entries);
    token = result.continuationToken;
  } while (token);
  assert.deepEqual(pages, [names.slice(0, 2), names.slice(2, 4), names.slice(4)]);
  const { result } = await call(svc, "listTablesSegmented", null, { maxResults: 1 });
  assert.equal(result.entries.length, 1);
  assert.ok(result.continuationToken.nextTableName);
});

test("entity quickstart: insert, retrieve, query, delete", async () => {
  const svc = service();
  const table = await freshTable("qe");
  created.push(table);
  const ins = await call(svc, "insertEntity", table, { PartitionKey: "p", RowKey: "1", Name: "Ada", Age: 36 });
  assert.match(ins.result[".metadata"].etag, /^W\/"datetime'\d{4}-\d\d-\d\dT\d\d%3A\d\d%3A\d\d(\.\d{0,6}[1-9])?Z'"$/);
  await call(svc, "insertEntity", table, { PartitionKey: "p", RowKey: "2", Name: "Bob", Age: 41 });

  const { result: e } = await call(svc, "retrieveEntity", table, "p", "1");
  assert.deepEqual(e.PartitionKey, { $: "Edm.String", _: "p" });
  assert.deepEqual(e.RowKey, { $: "Edm.String", _: "1" });
  assert.deepEqual(e.Name, { _: "Ada" });
  assert.deepEqual(e.Age, { _: 36 });
  assert.equal(e.Timestamp.$, "Edm.DateTime");
  assert.ok(e.Timestamp._ instanceof Date);
  assert.equal(e[".metadata"].etag, ins.result[".metadata"].etag);

  const q = new TableQuery().where("Age gt ?", 40);
  const { result } = await call(svc, "queryEntities", table, q, null);
  assert.deepEqual(result.entries.map((x) => [x.RowKey._, x.Name._, x.Age._]), [["2", "Bob", 41]]);
  assert.equal(result.continuationToken, null);

  await call(svc, "deleteEntity", table, { PartitionKey: "p", RowKey: "1" });
  await rejects(call(svc, "retrieveEntity", table, "p", "1"), 404, "ResourceNotFound");
  const all = await call(svc, "queryEntities", table, null, null);
  assert.deepEqual(all.result.entries.map((x) => x.RowKey._), ["2"]);
});

test("entity operations on a missing table are 404 TableNotFound", async () => {
  const svc = service();
  const name = tableName("none");
  await rejects(call(svc, "insertEntity", name, { PartitionKey: "p", RowKey: "1" }), 404, "TableNotFound");
  await rejects(call(svc, "retrieveEntity", name, "p", "1"), 404, "TableNotFound");
  await rejects(call(svc, "queryEntities", name, null, null), 404, "TableNotFound");
});

test("the server-timeout option goes out as ?timeout=N and is honoured", async () => {
  const svc = service();
  const sent = [];
  svc.on("sendingRequestEvent", (webResource) => sent.push(webResource));
  const table = await freshTable("to");
  created.push(table);
  await call(svc, "insertEntity", table, { PartitionKey: "p", RowKey: "1", V: 1 }, { timeoutIntervalInMs: 30000 });
  const { result } = await call(svc, "retrieveEntity", table, "p", "1", { timeoutIntervalInMs: 30000 });
  assert.equal(result.V._, 1);
  const q = await call(svc, "queryEntities", table, new TableQuery().top(1), null, { timeoutIntervalInMs: 5000 });
  assert.equal(q.result.entries.length, 1);
  assert.deepEqual(sent.map((w) => w.queryString.timeout), [30, 30, 5]);
});
