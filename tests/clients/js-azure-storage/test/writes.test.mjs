// replaceEntity / mergeEntity / insertOrReplaceEntity / insertOrMergeEntity / deleteEntity
// with ETag conditions (entity['.metadata'].etag), including the ETag the SDK rebuilds
// from the Timestamp when a no-metadata query gives it none.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { call, dropTable, freshTable, gen, rejects, service, TableQuery, TableUtilities } from "./common.mjs";

let table;
before(async () => {
  table = await freshTable("wr");
});
after(async () => {
  await dropTable(table);
});

const svc = () => service();
const get = async (rk) => (await call(svc(), "retrieveEntity", table, "w", rk)).result;
const withEtag = (entity, etag) => ({ ...entity, ".metadata": { etag } });
const vals = (e) =>
  Object.fromEntries(Object.entries(e).filter(([k]) => ![".metadata", "Timestamp", "PartitionKey", "RowKey"].includes(k)).map(([k, v]) => [k, v._]));

test("insertEntity twice is 409 EntityAlreadyExists; echoContent returns the entity", async () => {
  const { result } = await call(svc(), "insertEntity", table, { PartitionKey: "w", RowKey: "dup", A: 1 }, { echoContent: true });
  assert.deepEqual(result.A, { _: 1 });
  assert.equal(result.RowKey._, "dup");
  await rejects(call(svc(), "insertEntity", table, { PartitionKey: "w", RowKey: "dup", A: 2 }), 409, "EntityAlreadyExists");
  assert.equal((await get("dup")).A._, 1);
});

test("insertOrMergeEntity and insertOrReplaceEntity insert, then merge / replace", async () => {
  await call(svc(), "insertOrMergeEntity", table, { PartitionKey: "w", RowKey: "um", A: 1, Big: gen.Int64("9007199254740993") });
  const r = await call(svc(), "insertOrMergeEntity", table, { PartitionKey: "w", RowKey: "um", B: "two" });
  const e = await get("um");
  assert.deepEqual(vals(e), { A: 1, Big: "9007199254740993", B: "two" });
  assert.equal(e[".metadata"].etag, r.result[".metadata"].etag);

  await call(svc(), "insertOrReplaceEntity", table, { PartitionKey: "w", RowKey: "ur", A: 1, B: 2 });
  await call(svc(), "insertOrReplaceEntity", table, { PartitionKey: "w", RowKey: "ur", C: true });
  assert.deepEqual(vals(await get("ur")), { C: true });
});

test("replaceEntity and mergeEntity with the current ETag succeed and return the new one", async () => {
  await call(svc(), "insertEntity", table, { PartitionKey: "w", RowKey: "et", A: 1, B: 1 });
  const e0 = await get("et");
  const m = await call(svc(), "mergeEntity", table, withEtag({ PartitionKey: "w", RowKey: "et", B: 2 }, e0[".metadata"].etag));
  const e1 = await get("et");
  assert.equal(e1[".metadata"].etag, m.result[".metadata"].etag);
  assert.notEqual(e1[".metadata"].etag, e0[".metadata"].etag);
  assert.deepEqual(vals(e1), { A: 1, B: 2 });
  const r = await call(svc(), "replaceEntity", table, withEtag({ PartitionKey: "w", RowKey: "et", C: 3 }, e1[".metadata"].etag));
  const e2 = await get("et");
  assert.equal(e2[".metadata"].etag, r.result[".metadata"].etag);
  assert.deepEqual(vals(e2), { C: 3 });
  // The ETag is the Timestamp's: W/"datetime'<percent-encoded Timestamp>'".
  assert.match(e2[".metadata"].etag, /^W\/"datetime'\d{4}-\d\d-\d\dT\d\d%3A\d\d%3A\d\d(\.\d{0,6}[1-9])?Z'"$/);
});

test("a stale ETag is 412 UpdateConditionNotSatisfied for merge, replace and delete", async () => {
  await call(svc(), "insertEntity", table, { PartitionKey: "w", RowKey: "stale", A: 1 });
  const old = (await get("stale"))[".metadata"].etag;
  await call(svc(), "mergeEntity", table, { PartitionKey: "w", RowKey: "stale", A: 2 });
  await rejects(call(svc(), "mergeEntity", table, withEtag({ PartitionKey: "w", RowKey: "stale", A: 3 }, old)), 412, "UpdateConditionNotSatisfied");
  await rejects(call(svc(), "replaceEntity", table, withEtag({ PartitionKey: "w", RowKey: "stale", A: 4 }, old)), 412, "UpdateConditionNotSatisfied");
  await rejects(call(svc(), "deleteEntity", table, withEtag({ PartitionKey: "w", RowKey: "stale" }, old)), 412, "UpdateConditionNotSatisfied");
  assert.equal((await get("stale")).A._, 2);
});

test("replace / merge / delete without an ETag send If-Match: * (404 when missing)", async () => {
  await rejects(call(svc(), "mergeEntity", table, { PartitionKey: "w", RowKey: "missing", A: 1 }), 404, "ResourceNotFound");
  await rejects(call(svc(), "replaceEntity", table, { PartitionKey: "w", RowKey: "missing", A: 1 }), 404, "ResourceNotFound");
  await rejects(call(svc(), "deleteEntity", table, { PartitionKey: "w", RowKey: "missing" }), 404, "ResourceNotFound");
  await call(svc(), "insertEntity", table, { PartitionKey: "w", RowKey: "del", A: 1 });
  const cur = (await get("del"))[".metadata"].etag;
  await call(svc(), "deleteEntity", table, withEtag({ PartitionKey: "w", RowKey: "del" }, cur));
  await rejects(call(svc(), "retrieveEntity", table, "w", "del"), 404, "ResourceNotFound");
  await call(svc(), "insertEntity", table, { PartitionKey: "w", RowKey: "del", A: 1 });
  await call(svc(), "deleteEntity", table, { PartitionKey: "w", RowKey: "del" });
  await rejects(call(svc(), "retrieveEntity", table, "w", "del"), 404, "ResourceNotFound");
});

test("a no-metadata query's entities carry an ETag rebuilt from the Timestamp, and it works", async () => {
  await call(svc(), "insertEntity", table, { PartitionKey: "nm", RowKey: "1", A: 1 });
  const q = new TableQuery().where("PartitionKey eq ?", "nm");
  const opts = { payloadFormat: TableUtilities.PayloadFormat.NO_METADATA, autoResolveProperties: true };
  const { result, response } = await call(svc(), "queryEntities", table, q, null, opts);
  const [e] = result.entries;
  const ts = response.body.value[0].Timestamp;
  assert.match(ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,6}[1-9])?Z$/);
  // No odata.etag at this level: the SDK builds W/"datetime'<Timestamp>'" with the ':'
  // left as they are, and sends it back as If-Match.
  assert.equal(e[".metadata"].etag, `W/"datetime'${ts}'"`);
  const merged = await call(svc(), "mergeEntity", table, { ...e, B: { _: 2 } });
  assert.match(merged.result[".metadata"].etag, /^W\/"datetime'/);
  const again = (await call(svc(), "queryEntities", table, q, null, opts)).result.entries[0];
  assert.deepEqual([again.A._, again.B._], [1, 2]);
  // The rebuilt ETag of the older version is stale now.
  await rejects(call(svc(), "replaceEntity", table, { ...e, C: { _: 3 } }), 412, "UpdateConditionNotSatisfied");
  await call(svc(), "deleteEntity", table, again);
  assert.deepEqual((await call(svc(), "queryEntities", table, q, null)).result.entries, []);
});
