// Fault rules (docs/testing.md) against @azure/data-tables: what the JS SDK does when
// pages end early, an insert's connection is closed after it was applied, and the
// server is busy. Rules come from a --faults file; attempts are counted in the access log.
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before } from "node:test";

import { TableClient } from "@azure/data-tables";

import { collect, expectRestError, startServer, testWithLog, uniqueTableName } from "./harness.mjs";

const OPTS = { allowInsecureConnection: true };
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tafel-js-faults-"));
const accessLog = path.join(dir, "access.log");
let server;

before(async () => {
  const rules = path.join(dir, "faults.toml");
  fs.writeFileSync(
    rules,
    `[[rule]]
table = "jspages*"
end-page-early = true
end-page-after = 4

[[rule]]
table = "jslost*"
operation = "InsertEntity"
lose-answer = true
times = 1

[[rule]]
table = "jstimeout*"
operation = "InsertEntity"
lose-answer = true
error = "OperationTimedOut"
times = 1

[[rule]]
table = "jsbusy*"
operation = "InsertEntity"
error = "ServerBusy"
times = 3
`,
  );
  server = await startServer({ args: ["--faults", rules, "--access-log", accessLog, "--log-format", "json"] });
});

after(async () => {
  if (server) await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
});

const it = testWithLog(() => server);

async function table(prefix) {
  const client = TableClient.fromConnectionString(server.connStr, uniqueTableName(prefix), OPTS);
  await client.createTable();
  return client;
}

/** The access log's lines for `operation` on `table`, once there are `n` (it is written a few ms behind). */
async function attempts(table, operation, n) {
  const deadline = Date.now() + 10000;
  for (;;) {
    const lines = fs
      .readFileSync(accessLog, "utf8")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .filter((e) => e.table === table && e.operation === operation);
    if (lines.length >= n || Date.now() > deadline) return lines;
    await new Promise((r) => setTimeout(r, 50));
  }
}

it("a page ended early is followed to every entity", async () => {
  const t = await table("jspages");
  await t.submitTransaction(
    Array.from({ length: 10 }, (_, i) => ["create", { partitionKey: "p", rowKey: String(i).padStart(2, "0"), v: i }]),
  );
  const all = await collect(t.listEntities());
  assert.deepEqual(all.map((e) => e.v), [...Array(10).keys()]);
  const filtered = await collect(t.listEntities({ queryOptions: { filter: "v ge 3" } }));
  assert.deepEqual(filtered.map((e) => e.v), [3, 4, 5, 6, 7, 8, 9]);
  // 10 entities at 4 a page: 3 pages, then 2 for the 7 filtered ones.
  const pages = await attempts(t.tableName, "QueryEntities", 5);
  assert.equal(pages.length, 5);
  assert.ok(pages.every((e) => e.fault === "end-page-early"));
});

it("an insert whose connection closed after it was applied is retried and meets 409", async () => {
  const t = await table("jslost");
  await expectRestError(t.createEntity({ partitionKey: "p", rowKey: "r", v: 1 }), 409, "EntityAlreadyExists");
  const lines = await attempts(t.tableName, "InsertEntity", 2);
  assert.deepEqual(
    lines.map((e) => [e.status, e.fault ?? ""]),
    [
      [204, "lose-answer-close"],
      [409, ""],
    ],
  );
  assert.deepEqual((await collect(t.listEntities())).map((e) => e.v), [1]);
});

it("an insert answered OperationTimedOut after it was applied is retried and meets 409", async () => {
  const t = await table("jstimeout");
  await expectRestError(t.createEntity({ partitionKey: "p", rowKey: "r", v: 1 }), 409, "EntityAlreadyExists");
  const lines = await attempts(t.tableName, "InsertEntity", 2);
  assert.deepEqual(
    lines.map((e) => [e.status, e.error_code, e.fault ?? ""]),
    [
      [500, "OperationTimedOut", "lose-answer"],
      [409, "EntityAlreadyExists", ""],
    ],
  );
  assert.deepEqual((await collect(t.listEntities())).map((e) => e.v), [1]);
});

it("three ServerBusy answers are ridden out by the default retry policy", async () => {
  const t = await table("jsbusy");
  await t.createEntity({ partitionKey: "p", rowKey: "r" });
  const lines = await attempts(t.tableName, "InsertEntity", 4);
  assert.deepEqual(
    lines.map((e) => [e.status, e.error_code]),
    [
      [503, "ServerBusy"],
      [503, "ServerBusy"],
      [503, "ServerBusy"],
      [204, ""],
    ],
  );
});
