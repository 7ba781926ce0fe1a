// More than 1,000 rows over two partitions (inserted with TableBatch in chunks of 100):
// queryEntities with continuation tokens, TableQuery.top(n), filter + select + top.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { call, dropTable, freshTable, insertMany, queryAll, service, TableQuery } from "./common.mjs";

const P0 = 600;
const P1 = 450;
const TOTAL = P0 + P1;
const rk = (i) => String(i).padStart(5, "0");
let table;

before(async () => {
  table = await freshTable("pa");
  const rows = (pk, n, base) =>
    Array.from({ length: n }, (_, i) => ({ PartitionKey: pk, RowKey: rk(i), N: base + i, Tag: i % 3 === 0 ? "fizz" : "x y" }));
  await insertMany(service(), table, rows("p0", P0, 0));
  await insertMany(service(), table, rows("p1", P1, P0));
});
after(async () => {
  await dropTable(table);
});

test("without $top a page holds 1,000 rows and the token leads to the rest", async () => {
  const { entries, pages } = await queryAll(service(), table, null);
  assert.deepEqual(pages, [1000, TOTAL - 1000]);
  assert.deepEqual(entries.map((e) => e.N._), Array.from({ length: TOTAL }, (_, i) => i));
  assert.equal(entries[P0].PartitionKey._, "p1");
});

test("top(400) pages through the partition boundary with continuation tokens", async () => {
  const { entries, pages } = await queryAll(service(), table, new TableQuery().top(400));
  assert.deepEqual(pages, [400, 400, 250]);
  assert.deepEqual(entries.map((e) => e.N._), Array.from({ length: TOTAL }, (_, i) => i));
});

test("where + select + top, and resuming from a saved token", async () => {
  const q = () => new TableQuery().select("N").where("N ge ?int32? and Tag eq ?string?", 100, "x y").top(300);
  const want = Array.from({ length: TOTAL }, (_, i) => i).filter((i) => i >= 100 && (i < P0 ? i : i - P0) % 3 !== 0);
  const { entries, pages } = await queryAll(service(), table, q());
  assert.deepEqual(entries.map((e) => e.N._), want);
  for (const e of entries) assert.deepEqual(Object.keys(e).sort(), [".metadata", "N"]);
  for (const n of pages) assert.ok(n <= 300);

  const first = await call(service(), "queryEntities", table, q(), null);
  const token = first.result.continuationToken;
  assert.ok(token.nextPartitionKey && token.nextRowKey, JSON.stringify(token));
  const second = await call(service(), "queryEntities", table, q(), token);
  assert.deepEqual(second.result.entries.map((e) => e.N._), want.slice(300, 600));
});

test("top(7) within one partition: a first page and a token", async () => {
  const { result } = await call(service(), "queryEntities", table, new TableQuery().where("PartitionKey eq ?", "p1").top(7), null);
  assert.deepEqual(result.entries.map((e) => e.RowKey._), [0, 1, 2, 3, 4, 5, 6].map(rk));
  assert.ok(result.continuationToken);
});
