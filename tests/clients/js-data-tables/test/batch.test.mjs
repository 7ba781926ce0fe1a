// submitTransaction ($batch): mixed create/update/upsert/delete applied atomically, and
// failing transactions (duplicate insert, stale ETag) that apply nothing.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { odata, TableTransaction } from "@azure/data-tables";
import { all, freshTable, rejects, serviceFromConn } from "./common.mjs";

let client;
before(async () => {
  client = await freshTable("ba");
});
after(async () => {
  await serviceFromConn().deleteTable(client.tableName);
});

async function snapshot(pk) {
  const rows = await all(client.listEntities({ queryOptions: { filter: odata`PartitionKey eq ${pk}` } }));
  return rows.map(({ etag, timestamp, ...rest }) => rest);
}

test("a mixed transaction applies every operation", async () => {
  const pk = "mixed";
  for (const r of ["upd-merge", "upd-replace", "ups-merge", "ups-replace", "del"]) {
    await client.createEntity({ partitionKey: pk, rowKey: r, Old: r, Keep: 1 });
  }
  const etag = (await client.getEntity(pk, "upd-merge")).etag;
  const tx = new TableTransaction();
  tx.createEntity({ partitionKey: pk, rowKey: "new", New: true, Big: { value: "-9223372036854775808", type: "Int64" } });
  tx.updateEntity({ partitionKey: pk, rowKey: "upd-merge", M: 1 }, "Merge", { etag });
  tx.updateEntity({ partitionKey: pk, rowKey: "upd-replace", R: 1 }, "Replace");
  tx.upsertEntity({ partitionKey: pk, rowKey: "ups-merge", M: 2 }, "Merge");
  tx.upsertEntity({ partitionKey: pk, rowKey: "ups-replace", R: 2 }, "Replace");
  tx.upsertEntity({ partitionKey: pk, rowKey: "ups-new", U: "fresh" }, "Merge");
  tx.deleteEntity(pk, "del");
  const res = await client.submitTransaction(tx.actions);
  assert.equal(res.status, 202);
  assert.deepEqual(res.subResponses.map((s) => s.status), [204, 204, 204, 204, 204, 204, 204]);
  // Every write but the delete answers with the entity's new ETag.
  assert.equal(res.subResponses.filter((s) => /^W\/"datetime'/.test(s.etag ?? "")).length, 6);
  assert.deepEqual(await snapshot(pk), [
    { partitionKey: pk, rowKey: "new", New: true, Big: -9223372036854775808n },
    { partitionKey: pk, rowKey: "upd-merge", Old: "upd-merge", Keep: 1, M: 1 },
    { partitionKey: pk, rowKey: "upd-replace", R: 1 },
    { partitionKey: pk, rowKey: "ups-merge", Old: "ups-merge", Keep: 1, M: 2 },
    { partitionKey: pk, rowKey: "ups-new", U: "fresh" },
    { partitionKey: pk, rowKey: "ups-replace", R: 2 },
  ]);
});

test("a transaction with a duplicate insert fails as a whole: 409, nothing applied", async () => {
  const pk = "dup";
  await client.createEntity({ partitionKey: pk, rowKey: "b", V: 0 });
  await client.createEntity({ partitionKey: pk, rowKey: "c", V: 0 });
  await client.createEntity({ partitionKey: pk, rowKey: "d", V: 0 });
  const before_ = await snapshot(pk);
  const err = await rejects(
    client.submitTransaction([
      ["create", { partitionKey: pk, rowKey: "a", V: 1 }],
      ["update", { partitionKey: pk, rowKey: "c", V: 1 }, "Replace"],
      ["create", { partitionKey: pk, rowKey: "b", V: 1 }],
      ["delete", { partitionKey: pk, rowKey: "d" }],
    ]),
    409,
    "EntityAlreadyExists",
  );
  // The message names the failing operation's index.
  assert.match(err.message, /^2:/);
  assert.deepEqual(await snapshot(pk), before_);
});

test("a transaction with a stale ETag fails as a whole: 412, nothing applied", async () => {
  const pk = "stale";
  await client.createEntity({ partitionKey: pk, rowKey: "a", V: 0 });
  const stale = (await client.getEntity(pk, "a")).etag;
  await client.updateEntity({ partitionKey: pk, rowKey: "a", V: 1 }, "Merge");
  const before_ = await snapshot(pk);
  const err = await rejects(
    client.submitTransaction([
      ["create", { partitionKey: pk, rowKey: "z", V: 9 }],
      ["update", { partitionKey: pk, rowKey: "a", V: 2 }, "Merge", { etag: stale }],
    ]),
    412,
    "UpdateConditionNotSatisfied",
  );
  assert.match(err.message, /^1:/);
  assert.deepEqual(await snapshot(pk), before_);
});

test("a transaction deleting a missing entity fails: 404 ResourceNotFound", async () => {
  const pk = "gone";
  await rejects(
    client.submitTransaction([
      ["create", { partitionKey: pk, rowKey: "x", V: 1 }],
      ["delete", { partitionKey: pk, rowKey: "nope" }],
    ]),
    404,
    "ResourceNotFound",
  );
  assert.deepEqual(await snapshot(pk), []);
});

test("a transaction touching one entity twice is 400 InvalidDuplicateRow", async () => {
  const pk = "twice";
  await client.createEntity({ partitionKey: pk, rowKey: "a", V: 0 });
  await rejects(
    client.submitTransaction([
      ["update", { partitionKey: pk, rowKey: "a", V: 1 }, "Merge"],
      ["delete", { partitionKey: pk, rowKey: "a" }],
    ]),
    400,
    "InvalidDuplicateRow",
  );
  assert.deepEqual(await snapshot(pk), [{ partitionKey: pk, rowKey: "a", V: 0 }]);
});

test("100 operations in one transaction", async () => {
  const pk = "hundred";
  const res = await client.submitTransaction(
    Array.from({ length: 100 }, (_, i) => ["upsert", { partitionKey: pk, rowKey: String(i).padStart(3, "0"), I: i }, "Replace"]),
  );
  assert.equal(res.subResponses.length, 100);
  const rows = await snapshot(pk);
  assert.deepEqual(rows.map((r) => r.I), Array.from({ length: 100 }, (_, i) => i));
});
