// More than 1,000 rows over two partitions (inserted with submitTransaction in chunks of
// 100): the SDK's implicit paging, byPage({maxPageSize}) and resuming from a token.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { odata } from "@azure/data-tables";
import { all, freshTable, insertMany, serviceFromConn } from "./common.mjs";

const P0 = 600;
const P1 = 450;
const TOTAL = P0 + P1;
let client;
const rk = (i) => String(i).padStart(5, "0");

before(async () => {
  client = await freshTable("pa");
  const rows = (pk, n, base) =>
    Array.from({ length: n }, (_, i) => ({ partitionKey: pk, rowKey: rk(i), N: base + i, Tag: i % 3 === 0 ? "fizz" : "x y" }));
  await insertMany(client, rows("p0", P0, 0));
  await insertMany(client, rows("p1", P1, P0));
});
after(async () => {
  await serviceFromConn().deleteTable(client.tableName);
});

test("iterating a listing follows continuation tokens past 1,000 rows", async () => {
  const got = await all(client.listEntities());
  assert.equal(got.length, TOTAL);
  assert.deepEqual(got.map((e) => e.N), Array.from({ length: TOTAL }, (_, i) => i));
  assert.equal(got[P0].partitionKey, "p1");
  assert.equal(got[P0].rowKey, "00000");
});

test("a page without $top holds at most 1,000 rows and carries a token", async () => {
  const pages = [];
  for await (const page of client.listEntities().byPage()) pages.push(page);
  assert.deepEqual(pages.map((p) => p.length), [1000, TOTAL - 1000]);
  assert.equal(typeof pages[0].continuationToken, "string");
  assert.equal(pages[1].continuationToken, undefined);
});

test("byPage({maxPageSize}) sends $top and pages through the partition boundary", async () => {
  const pages = [];
  for await (const page of client.listEntities().byPage({ maxPageSize: 400 })) pages.push(page);
  assert.deepEqual(pages.map((p) => p.length), [400, 400, 250]);
  assert.deepEqual(pages.flat().map((e) => e.N), Array.from({ length: TOTAL }, (_, i) => i));
  assert.ok(pages[0].continuationToken && pages[1].continuationToken);
  assert.equal(pages[2].continuationToken, undefined);
});

test("filter + $select + $top paging, and resuming from a saved continuation token", async () => {
  const queryOptions = { filter: odata`N ge ${100} and Tag eq ${"x y"}`, select: ["N"] };
  const want = Array.from({ length: TOTAL }, (_, i) => i).filter((i) => i >= 100 && (i < P0 ? i : i - P0) % 3 !== 0);
  const pages = [];
  for await (const page of client.listEntities({ queryOptions }).byPage({ maxPageSize: 300 })) pages.push(page);
  const flat = pages.flat();
  assert.deepEqual(flat.map((e) => e.N), want);
  for (const e of flat) assert.deepEqual(Object.keys(e).sort(), ["N", "etag"]);
  for (const p of pages) assert.ok(p.length <= 300);
  assert.equal(pages.slice(0, -1).every((p) => p.continuationToken), true);

  // Resume: a new iterator started from the first page's token continues after it.
  const token = pages[0].continuationToken;
  const resumed = client.listEntities({ queryOptions }).byPage({ maxPageSize: 300, continuationToken: token });
  const next = (await resumed.next()).value;
  assert.deepEqual(next.map((e) => e.N), pages[1].map((e) => e.N));
});

test("$top smaller than a partition: the first page only", async () => {
  const iter = client.listEntities({ queryOptions: { filter: odata`PartitionKey eq ${"p1"}` } }).byPage({ maxPageSize: 7 });
  const first = (await iter.next()).value;
  assert.deepEqual(first.map((e) => e.rowKey), [0, 1, 2, 3, 4, 5, 6].map(rk));
  assert.ok(first.continuationToken);
});
