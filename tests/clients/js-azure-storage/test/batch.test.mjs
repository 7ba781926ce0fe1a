// TableBatch / executeBatch: mixed operations applied atomically, failing batches that
// apply nothing, and the lone-retrieve batch.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { call, dropTable, freshTable, gen, rejects, service, TableBatch, TableQuery } from "./common.mjs";

let table;
before(async () => {
  table = await freshTable("ba");
});
after(async () => {
  await dropTable(table);
});

const key = (pk, rk) => ({ PartitionKey: gen.String(pk), RowKey: gen.String(rk) });
async function snapshot(pk) {
  const { result } = await call(service(), "queryEntities", table, new TableQuery().where("PartitionKey eq ?", pk), null);
  return result.entries.map((e) =>
    Object.fromEntries(Object.entries(e).filter(([k]) => ![".metadata", "Timestamp"].includes(k)).map(([k, v]) => [k, v._])),
  );
}

test("a mixed batch applies every operation", async () => {
  const pk = "mixed";
  for (const r of ["merge", "replace", "ups-merge", "ups-replace", "del"]) {
    await call(service(), "insertEntity", table, { PartitionKey: pk, RowKey: r, Old: r, Keep: 1 });
  }
  const etag = (await call(service(), "retrieveEntity", table, pk, "merge")).result[".metadata"].etag;
  const b = new TableBatch();
  b.insertEntity({ ...key(pk, "new"), New: gen.Boolean(true), Big: gen.Int64("-9223372036854775808") }, { echoContent: true });
  b.mergeEntity({ ...key(pk, "merge"), M: gen.Int32(1), ".metadata": { etag } });
  b.replaceEntity({ ...key(pk, "replace"), R: gen.Int32(1) });
  b.insertOrMergeEntity({ ...key(pk, "ups-merge"), M: gen.Int32(2) });
  b.insertOrReplaceEntity({ ...key(pk, "ups-replace"), R: gen.Int32(2) });
  b.insertOrMergeEntity({ ...key(pk, "ups-new"), U: gen.String("fresh") });
  b.deleteEntity(key(pk, "del"));
  const { result } = await call(service(), "executeBatch", table, b);
  assert.deepEqual(result.map((r) => r.response.statusCode), [201, 204, 204, 204, 204, 204, 204]);
  // The echoed insert comes back as an entity.
  assert.deepEqual(result[0].entity.Big, { $: "Edm.Int64", _: "-9223372036854775808" });
  assert.deepEqual(await snapshot(pk), [
    { PartitionKey: pk, RowKey: "merge", Old: "merge", Keep: 1, M: 1 },
    { PartitionKey: pk, RowKey: "new", New: true, Big: "-9223372036854775808" },
    { PartitionKey: pk, RowKey: "replace", R: 1 },
    { PartitionKey: pk, RowKey: "ups-merge", Old: "ups-merge", Keep: 1, M: 2 },
    { PartitionKey: pk, RowKey: "ups-new", U: "fresh" },
    { PartitionKey: pk, RowKey: "ups-replace", R: 2 },
  ]);
});

test("a batch with a duplicate insert fails as a whole: 409, nothing applied", async () => {
  const pk = "dup";
  for (const r of ["b", "c", "d"]) await call(service(), "insertEntity", table, { PartitionKey: pk, RowKey: r, V: 0 });
  const before_ = await snapshot(pk);
  const b = new TableBatch();
  b.insertEntity({ ...key(pk, "a"), V: gen.Int32(1) });
  b.replaceEntity({ ...key(pk, "c"), V: gen.Int32(1) });
  b.insertEntity({ ...key(pk, "b"), V: gen.Int32(1) });
  b.deleteEntity(key(pk, "d"));
  const err = await rejects(call(service(), "executeBatch", table, b), 409, "EntityAlreadyExists");
  assert.match(err.message, /^2:/);
  assert.deepEqual(await snapshot(pk), before_);
});

test("a batch with a stale ETag fails as a whole: 412, nothing applied", async () => {
  const pk = "stale";
  await call(service(), "insertEntity", table, { PartitionKey: pk, RowKey: "a", V: 0 });
  const stale = (await call(service(), "retrieveEntity", table, pk, "a")).result[".metadata"].etag;
  await call(service(), "mergeEntity", table, { PartitionKey: pk, RowKey: "a", V: 1 });
  const before_ = await snapshot(pk);
  const b = new TableBatch();
  b.insertEntity({ ...key(pk, "z"), V: gen.Int32(9) });
  b.deleteEntity({ ...key(pk, "a"), ".metadata": { etag: stale } });
  await rejects(call(service(), "executeBatch", table, b), 412, "UpdateConditionNotSatisfied");
  assert.deepEqual(await snapshot(pk), before_);
});

test("a batch touching one entity twice is 400 InvalidDuplicateRow", async () => {
  const pk = "twice";
  await call(service(), "insertEntity", table, { PartitionKey: pk, RowKey: "a", V: 0 });
  const b = new TableBatch();
  b.mergeEntity({ ...key(pk, "a"), V: gen.Int32(1) });
  b.deleteEntity(key(pk, "a"));
  await rejects(call(service(), "executeBatch", table, b), 400, "InvalidDuplicateRow");
  assert.deepEqual(await snapshot(pk), [{ PartitionKey: pk, RowKey: "a", V: 0 }]);
});

test("a batch of one retrieveEntity is a query batch", async () => {
  await call(service(), "insertEntity", table, { PartitionKey: "q", RowKey: "1", V: gen.Int64("9007199254740993") });
  const b = new TableBatch();
  b.retrieveEntity("q", "1");
  const { result } = await call(service(), "executeBatch", table, b);
  assert.equal(result.length, 1);
  assert.equal(result[0].response.statusCode, 200);
  assert.deepEqual(result[0].entity.V, { $: "Edm.Int64", _: "9007199254740993" });
  const missing = new TableBatch();
  missing.retrieveEntity("q", "nope");
  await rejects(call(service(), "executeBatch", table, missing), 404, "ResourceNotFound");
});

test("100 operations in one batch", async () => {
  const b = new TableBatch();
  for (let i = 0; i < 100; i++) b.insertOrReplaceEntity({ ...key("hundred", String(i).padStart(3, "0")), I: gen.Int32(i) });
  const { result } = await call(service(), "executeBatch", table, b);
  assert.equal(result.length, 100);
  assert.deepEqual((await snapshot("hundred")).map((r) => r.I), Array.from({ length: 100 }, (_, i) => i));
});
