// String filters with characters that URL and OData encodings treat specially, and keys
// made of them, through Shared Key and through a table SAS (createTableServiceWithSas).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  call, dropTable, freshTable, insertMany, rowKeys, sasService, service, TableQuery, TableUtilities,
} from "./common.mjs";

const VALUES = [
  "plain", "with space", "a b", "a+b", "a%2Bb", "O'Brien", "it''s two", "'", "a&b=c", "#hash",
  "100%", "%20", "q?x=1", "semi;colon", "slash/back\\slash", "Zürich", "東京", "🚀 rocket",
  "emoji 👩‍💻 + ü", "tab\tnewline\n", "Ｆｕｌｌ ｗｉｄｔｈ", "a == b && c", "x != y",
];
const rk = (i) => String(i).padStart(2, "0");

let table;
let sas;
before(async () => {
  table = await freshTable("fi");
  await insertMany(service(), table, VALUES.map((v, i) => ({ PartitionKey: "f", RowKey: rk(i), Name: v })));
  const P = TableUtilities.SharedAccessPermissions;
  sas = service().generateSharedAccessSignature(table, {
    AccessPolicy: { Permissions: P.QUERY + P.ADD + P.UPDATE + P.DELETE, Expiry: new Date(Date.now() + 3600_000) },
  });
});
after(async () => {
  await dropTable(table);
});

for (const [label, svc] of [["Shared Key", () => service()], ["table SAS", () => sasService(sas)]]) {
  test(`string filters with special characters (${label})`, async () => {
    const s = svc();
    for (const [i, v] of VALUES.entries()) {
      // A ?string? placeholder is quoted and escaped by the SDK after its operator rewriting.
      const q = new TableQuery().where("PartitionKey eq ?string? and Name eq ?string?", "f", v);
      assert.deepEqual(await rowKeys(s, table, q), [rk(i)], JSON.stringify(v));
      const f = new TableQuery().where(TableQuery.stringFilter("Name", TableUtilities.QueryComparisons.EQUAL, v));
      if (!/ (==|!=|&&|\|\|) |!/.test(v)) {
        // where(filter) runs the SDK's operator rewriting over the whole text (turning "!" into
        // "not" inside values), so only values without those tokens go through it unchanged.
        assert.deepEqual(await rowKeys(s, table, f), [rk(i)], `stringFilter ${JSON.stringify(v)}`);
      }
    }
    const above = VALUES.flatMap((v, i) => (v > "🚀" ? [rk(i)] : []));
    assert.deepEqual(above, ["17", "20"]);
    assert.deepEqual(await rowKeys(s, table, new TableQuery().where("Name gt ?", "🚀")), above);
    assert.deepEqual(await rowKeys(s, table, new TableQuery().where("Name eq ? or Name eq ?", "a b", "a+b")), ["02", "03"]);
    const ne = await rowKeys(s, table, new TableQuery().where("Name ne ?", "a+b"));
    assert.equal(ne.length, VALUES.length - 1);
  });
}

test("keys made of special characters round-trip through every entity operation", async () => {
  const keys = ["a b", "O'Brien", "a+b", "a&b=c", "100%", "Zürich 東京", "🚀", "x''y", "(paren)", "a=b;c,d"];
  for (const [label, s] of [["Shared Key", service()], ["table SAS", sasService(sas)]]) {
    for (const k of keys) {
      const PartitionKey = `pk ${k}`;
      const RowKey = `rk ${k}`;
      await call(s, "insertEntity", table, { PartitionKey, RowKey, V: 1 });
      const { result: got } = await call(s, "retrieveEntity", table, PartitionKey, RowKey);
      assert.equal(got.PartitionKey._, PartitionKey, `${label} ${k}`);
      assert.equal(got.RowKey._, RowKey);
      await call(s, "mergeEntity", table, { PartitionKey, RowKey, W: 2, ".metadata": { etag: got[".metadata"].etag } });
      await call(s, "insertOrReplaceEntity", table, { PartitionKey, RowKey, X: 3 });
      const q = new TableQuery().where("PartitionKey eq ? and RowKey eq ?", PartitionKey, RowKey);
      const { result } = await call(s, "queryEntities", table, q, null);
      assert.deepEqual(result.entries.map((e) => [e.PartitionKey._, e.RowKey._, e.V, e.W, e.X._]), [[PartitionKey, RowKey, undefined, undefined, 3]]);
      await call(s, "deleteEntity", table, { PartitionKey, RowKey });
      assert.deepEqual(await rowKeys(s, table, new TableQuery().where("PartitionKey eq ?", PartitionKey)), [], `${label} ${k} deleted`);
    }
  }
});
