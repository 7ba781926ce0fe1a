// Upsert (Merge/Replace), update with ETags (match, mismatch, wildcard), delete with and
// without an ETag, duplicate inserts.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { freshTable, rejects, serviceFromConn } from "./common.mjs";

let client;
before(async () => {
  client = await freshTable("wr");
});
after(async () => {
  await serviceFromConn().deleteTable(client.tableName);
});

const strip = ({ etag, timestamp, ...rest }) => rest;

test("createEntity twice is 409 EntityAlreadyExists", async () => {
  await client.createEntity({ partitionKey: "w", rowKey: "dup", A: 1 });
  await rejects(client.createEntity({ partitionKey: "w", rowKey: "dup", A: 2 }), 409, "EntityAlreadyExists");
  assert.equal((await client.getEntity("w", "dup")).A, 1);
});

test("upsertEntity Merge inserts, then merges keeping other properties and their types", async () => {
  const r1 = await client.upsertEntity({ partitionKey: "w", rowKey: "um", A: 1, Big: { value: "9007199254740993", type: "Int64" } }, "Merge");
  assert.match(r1.etag, /^W\/"datetime'.+'"$/);
  const r2 = await client.upsertEntity({ partitionKey: "w", rowKey: "um", B: "two" }, "Merge");
  assert.notEqual(r2.etag, r1.etag);
  const e = await client.getEntity("w", "um");
  assert.equal(e.etag, r2.etag);
  assert.deepEqual(strip(e), { "odata.metadata": e["odata.metadata"], partitionKey: "w", rowKey: "um", A: 1, Big: 9007199254740993n, B: "two" });
});

test("upsertEntity Replace inserts, then replaces dropping absent properties", async () => {
  await client.upsertEntity({ partitionKey: "w", rowKey: "ur", A: 1, B: 2 }, "Replace");
  await client.upsertEntity({ partitionKey: "w", rowKey: "ur", C: true }, "Replace");
  const e = await client.getEntity("w", "ur");
  assert.equal(e.A, undefined);
  assert.equal(e.B, undefined);
  assert.equal(e.C, true);
});

test("updateEntity Merge and Replace with a matching ETag succeed and return the new ETag", async () => {
  await client.createEntity({ partitionKey: "w", rowKey: "et", A: 1, B: 1 });
  const e0 = await client.getEntity("w", "et");
  const r1 = await client.updateEntity({ partitionKey: "w", rowKey: "et", B: 2 }, "Merge", { etag: e0.etag });
  const e1 = await client.getEntity("w", "et");
  assert.equal(e1.etag, r1.etag);
  assert.notEqual(e1.etag, e0.etag);
  assert.deepEqual([e1.A, e1.B], [1, 2]);
  const r2 = await client.updateEntity({ partitionKey: "w", rowKey: "et", C: 3 }, "Replace", { etag: e1.etag });
  const e2 = await client.getEntity("w", "et");
  assert.equal(e2.etag, r2.etag);
  assert.deepEqual([e2.A, e2.B, e2.C], [undefined, undefined, 3]);
});

test("updateEntity with a stale ETag is 412 UpdateConditionNotSatisfied and changes nothing", async () => {
  await client.createEntity({ partitionKey: "w", rowKey: "stale", A: 1 });
  const old = await client.getEntity("w", "stale");
  await client.updateEntity({ partitionKey: "w", rowKey: "stale", A: 2 }, "Merge", { etag: old.etag });
  await rejects(client.updateEntity({ partitionKey: "w", rowKey: "stale", A: 3 }, "Merge", { etag: old.etag }), 412, "UpdateConditionNotSatisfied");
  await rejects(client.updateEntity({ partitionKey: "w", rowKey: "stale", A: 4 }, "Replace", { etag: old.etag }), 412, "UpdateConditionNotSatisfied");
  assert.equal((await client.getEntity("w", "stale")).A, 2);
  // No etag option means If-Match: * (unconditional update of an existing entity).
  await client.updateEntity({ partitionKey: "w", rowKey: "stale", A: 5 }, "Replace");
  assert.equal((await client.getEntity("w", "stale")).A, 5);
});

test("updateEntity on a missing entity is 404 ResourceNotFound (If-Match: *)", async () => {
  await rejects(client.updateEntity({ partitionKey: "w", rowKey: "missing", A: 1 }, "Merge"), 404, "ResourceNotFound");
  await rejects(client.updateEntity({ partitionKey: "w", rowKey: "missing", A: 1 }, "Replace"), 404, "ResourceNotFound");
  await rejects(client.getEntity("w", "missing"), 404, "ResourceNotFound");
});

test("deleteEntity with a stale ETag is 412; with the current one or none it deletes", async () => {
  await client.createEntity({ partitionKey: "w", rowKey: "del1", A: 1 });
  const old = await client.getEntity("w", "del1");
  await client.updateEntity({ partitionKey: "w", rowKey: "del1", A: 2 }, "Merge");
  await rejects(client.deleteEntity("w", "del1", { etag: old.etag }), 412, "UpdateConditionNotSatisfied");
  const cur = await client.getEntity("w", "del1");
  await client.deleteEntity("w", "del1", { etag: cur.etag });
  await rejects(client.getEntity("w", "del1"), 404, "ResourceNotFound");

  await client.createEntity({ partitionKey: "w", rowKey: "del2", A: 1 });
  await client.deleteEntity("w", "del2");
  await rejects(client.getEntity("w", "del2"), 404, "ResourceNotFound");
  await rejects(client.deleteEntity("w", "del2"), 404, "ResourceNotFound");
});
