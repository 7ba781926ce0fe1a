// String filters with characters that URL and OData encodings treat specially, and keys
// made of them, through three ways of addressing the server: the connection string
// (Shared Key Lite, query percent-encoded), an AzureSASCredential (the SDK re-serialises
// the query with URLSearchParams, so spaces go out as '+' and a '+' as %2B) and a SAS
// embedded in the table URL.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { AzureSASCredential, generateTableSas, odata, TableClient } from "@azure/data-tables";
import { all, credential, freshTable, OPTS, rowKeys, serviceFromConn, URL_ } from "./common.mjs";

const VALUES = [
  "plain",
  "with space",
  "a b",
  "a+b",
  "a%2Bb",
  "O'Brien",
  "it''s two",
  "'",
  "a&b=c",
  "#hash",
  "100%",
  "%20",
  "q?x=1",
  "semi;colon",
  "slash/back\\slash",
  "Zürich",
  "東京",
  "🚀 rocket",
  "emoji 👩‍💻 + ü",
  "tab\tnewline\n",
  "Ｆｕｌｌ ｗｉｄｔｈ",
];

let client;
let sasClient;
let urlSasClient;
before(async () => {
  client = await freshTable("fi");
  const entities = VALUES.map((v, i) => ({ partitionKey: "f", rowKey: String(i).padStart(2, "0"), Name: v }));
  const res = await client.submitTransaction(entities.map((e) => ["create", e]));
  assert.equal(res.status, 202);
  const sas = generateTableSas(client.tableName, credential(), {
    permissions: { query: true, add: true, update: true, delete: true },
    expiresOn: new Date(Date.now() + 3600_000),
  });
  sasClient = new TableClient(URL_, client.tableName, new AzureSASCredential(sas), OPTS);
  urlSasClient = new TableClient(`${URL_}?${sas}`, client.tableName, OPTS);
});
after(async () => {
  await serviceFromConn().deleteTable(client.tableName);
});

for (const [label, get] of [
  ["connection string", () => client],
  ["AzureSASCredential", () => sasClient],
  ["SAS in the URL", () => urlSasClient],
]) {
  test(`string filters with special characters (${label})`, async () => {
    const c = get();
    for (const [i, v] of VALUES.entries()) {
      const rk = String(i).padStart(2, "0");
      assert.deepEqual(await rowKeys(c, odata`PartitionKey eq 'f' and Name eq ${v}`), [rk], JSON.stringify(v));
    }
    // Range and negation over the same values (ordinal UTF-16 order).
    const sorted = VALUES.map((v, i) => [v, String(i).padStart(2, "0")]).sort((a, b) =>
      a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0,
    );
    const ge = sorted.filter(([v]) => v >= "a").map(([, k]) => k).sort();
    assert.deepEqual(await rowKeys(c, odata`Name ge ${"a"}`), ge);
    assert.deepEqual((await rowKeys(c, odata`Name ne ${"a+b"}`)).length, VALUES.length - 1);
    assert.deepEqual(await rowKeys(c, odata`Name eq ${"a b"} or Name eq ${"a+b"}`), ["02", "03"]);
    // Ordinal UTF-16 order (as JS compares strings): U+FF26 sorts after the surrogate pair
    // of U+1F680, although its code point is smaller.
    const above = VALUES.flatMap((v, i) => (v > "🚀" ? [String(i).padStart(2, "0")] : []));
    assert.deepEqual(above, ["17", "20"]);
    assert.deepEqual(await rowKeys(c, odata`Name gt ${"🚀"}`), above);
    assert.deepEqual(await rowKeys(c, odata`Name gt ${"z"} and Name lt ${"🚀"}`), ["16"]);
  });
}

test("keys made of special characters round-trip through every entity operation", async () => {
  const keys = ["a b", "O'Brien", "a+b", "a&b=c", "100%", "Zürich 東京", "🚀", "x''y", "(paren)", "a=b;c,d"];
  for (const [label, c] of [
    ["connection string", client],
    ["SAS credential", sasClient],
    ["SAS in the URL", urlSasClient],
  ]) {
    for (const k of keys) {
      const pk = `pk ${k}`;
      const rk = `rk ${k}`;
      await c.createEntity({ partitionKey: pk, rowKey: rk, V: 1 });
      const got = await c.getEntity(pk, rk);
      assert.equal(got.partitionKey, pk, `${label} ${k}`);
      assert.equal(got.rowKey, rk);
      await c.updateEntity({ partitionKey: pk, rowKey: rk, W: 2 }, "Merge", { etag: got.etag });
      await c.upsertEntity({ partitionKey: pk, rowKey: rk, X: 3 }, "Replace");
      const listed = await all(c.listEntities({ queryOptions: { filter: odata`PartitionKey eq ${pk} and RowKey eq ${rk}` } }));
      assert.deepEqual(listed.map((e) => [e.partitionKey, e.rowKey, e.V, e.W, e.X]), [[pk, rk, undefined, undefined, 3]]);
      await c.deleteEntity(pk, rk);
      assert.deepEqual(await rowKeys(c, odata`PartitionKey eq ${pk}`), [], `${label} ${k} deleted`);
    }
  }
});
