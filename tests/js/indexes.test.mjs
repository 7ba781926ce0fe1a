// Secondary indexes (docs/indexes.md) through @azure/data-tables: a query the SDK sends
// unchanged is answered from an index with exactly the scan's entities, in the scan's order,
// page by page through the SDK's own continuation, and the response says which plan served it.
import assert from "node:assert/strict";
import { after, before } from "node:test";

import { TableClient, TableTransaction } from "@azure/data-tables";

import { startServer, testWithLog, uniqueTableName } from "./harness.mjs";

const OPTS = { allowInsecureConnection: true };
let server;
const test = testWithLog(() => server);

before(async () => {
  server = await startServer({ admin: true });
});

after(async () => {
  if (server) await server.stop();
});

/** A client whose responses' x-tafel-query-plan values go to `plans`. */
function client(table, plans) {
  const policy = {
    name: "tafel-plan",
    async sendRequest(request, next) {
      const response = await next(request);
      const plan = response.headers.get("x-tafel-query-plan");
      if (plan) plans.push(plan);
      return response;
    },
  };
  return TableClient.fromConnectionString(server.connStr, table, {
    ...OPTS,
    additionalPolicies: [{ policy, position: "perCall" }],
  });
}

async function pages(tc, filter, maxPageSize) {
  const out = [];
  for await (const page of tc.listEntities({ queryOptions: { filter } }).byPage({ maxPageSize })) {
    out.push(page.map((e) => `${e.partitionKey}/${e.rowKey}`));
  }
  return out;
}

async function declare(table, property) {
  const url = `${server.adminUrl}/accounts/devstoreaccount1/tables/${table}/indexes/${property}`;
  const r = await fetch(url, { method: "PUT" });
  assert.ok([201, 202].includes(r.status), `${r.status} ${await r.text()}`);
  for (let i = 0; i < 600; i++) {
    const list = await (await fetch(url.replace(/\/[^/]*$/, ""))).json();
    if (list.indexes.find((x) => x.property === property)?.state === "ready") return;
    await new Promise((res) => setTimeout(res, 100));
  }
  assert.fail(`the index on ${property} never became ready`);
}

test("an indexed filter answers the scan's entities, order and pages through the SDK", async () => {
  const table = uniqueTableName("jsidx");
  const plans = [];
  const tc = client(table, plans);
  await tc.createTable();
  // 300 entities over 6 partitions: Email unique, Age an Int64 (a JS bigint), Tier a string of 3 values.
  for (let p = 0; p < 6; p++) {
    const tx = new TableTransaction();
    for (let i = p; i < 300; i += 6) {
      tx.createEntity({
        partitionKey: `p${p}`,
        rowKey: String(i).padStart(4, "0"),
        Email: `u${i}@example.com`,
        Age: { value: String(i % 90), type: "Int64" },
        Tier: ["gold", "silver", "bronze"][i % 3],
      });
    }
    await tc.submitTransaction(tx.actions);
  }
  const filters = [
    "Email eq 'u42@example.com'",
    "Age ge 30L and Age lt 40L",
    "Tier eq 'gold' and Age gt 80L",
    "Email eq 'u1@example.com' or Email eq 'u299@example.com'",
    "Age eq 30", // an Int32 literal: no Int64 value matches it (type-strict, as the scan)
  ];
  const scanned = [];
  for (const f of filters) scanned.push(await pages(tc, f, 7));
  assert.ok(plans.every((p) => p === "table-scan"), plans.join());
  assert.deepEqual(scanned[0], [["p0/0042"]]);
  assert.equal(scanned[1].flat().length, 30);
  assert.deepEqual(scanned[4], [[]]);

  await declare(table, "Email");
  await declare(table, "Age");
  plans.length = 0;
  for (const [i, f] of filters.entries()) {
    assert.deepEqual(await pages(tc, f, 7), scanned[i], f);
  }
  assert.ok(plans.includes("index:Email") && plans.includes("index:Age"), plans.join());
  assert.ok(!plans.includes("table-scan"), plans.join());

  // Writes keep the index exact: a changed Email is found by its new value only.
  await tc.updateEntity({ partitionKey: "p0", rowKey: "0042", Email: "new@example.com" }, "Merge");
  assert.deepEqual(await pages(tc, "Email eq 'u42@example.com'", 10), [[]]);
  assert.deepEqual(await pages(tc, "Email eq 'new@example.com'", 10), [["p0/0042"]]);
  await tc.deleteEntity("p0", "0042");
  assert.deepEqual(await pages(tc, "Email eq 'new@example.com'", 10), [[]]);
});

test("the index of every property ('*') serves a filter on any property through the SDK", async () => {
  const table = uniqueTableName("jsall");
  const plans = [];
  const tc = client(table, plans);
  await tc.createTable();
  const tx = new TableTransaction();
  for (let i = 0; i < 40; i++) {
    tx.createEntity({ partitionKey: "p", rowKey: String(i).padStart(3, "0"), Color: ["red", "blue"][i % 2], Size: i });
  }
  await tc.submitTransaction(tx.actions);
  const filters = ["Color eq 'red' and Size lt 10", "Size ge 35"];
  const scanned = [];
  for (const f of filters) scanned.push(await pages(tc, f, 3));
  assert.ok(plans.every((p) => p === "table-scan"), plans.join());

  await declare(table, "*");
  plans.length = 0;
  for (const [i, f] of filters.entries()) {
    assert.deepEqual(await pages(tc, f, 3), scanned[i], f);
  }
  assert.ok(plans.includes("index:Size"), plans.join());
  assert.ok(!plans.includes("table-scan"), plans.join());
  // A property no entity had when '*' was declared is indexed from its first write.
  await tc.updateEntity({ partitionKey: "p", rowKey: "007", Shape: "round" }, "Merge");
  plans.length = 0;
  assert.deepEqual(await pages(tc, "Shape eq 'round'", 10), [["p/007"]]);
  assert.deepEqual(plans, ["index:Shape"]);
});
