// All eight EDM types round-trip exactly, with and without the SDK's type conversion,
// and each is stored as the type it was sent as (checked with typed filter literals).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { odata } from "@azure/data-tables";
import { freshTable, rowKeys, serviceFromConn } from "./common.mjs";

const GUID = "3f2504e0-4f89-11d3-9a0c-0305e82c3301";
const BYTES = Uint8Array.from([0, 1, 2, 127, 128, 250, 255, 0x2b, 0x2f]);
const B64 = Buffer.from(BYTES).toString("base64");
const DT7 = "2024-06-04T08:15:30.1234567Z";

const ENTITY = {
  partitionKey: "types",
  rowKey: "all",
  Str: "Zürich 東京 🚀 a+b&c#d%e 'q'",
  StrTyped: { value: "12345", type: "String" },
  Empty: "",
  Bool: true,
  BoolF: { value: false, type: "Boolean" },
  I32: 2147483647,
  I32Min: { value: -2147483648, type: "Int32" },
  I64: { value: "9007199254740993", type: "Int64" },
  I64Min: { value: "-9223372036854775808", type: "Int64" },
  I64Max: { value: "9223372036854775807", type: "Int64" },
  I64Small: { value: "5", type: "Int64" },
  I64BigInt: 9007199254740995n,
  Dbl: 3.25,
  DblTiny: -1.5e-10,
  DblIntegral: { value: 2, type: "Double" },
  DblString: { value: "1.5", type: "Double" },
  DblNaN: { value: "NaN", type: "Double" },
  DblInf: { value: "Infinity", type: "Double" },
  DblNegInf: { value: "-Infinity", type: "Double" },
  Dt: { value: DT7, type: "DateTime" },
  DtDate: new Date("2020-02-29T10:00:00.123Z"),
  DtOld: { value: "1601-01-01T00:00:00.0000001Z", type: "DateTime" },
  Guid: { value: GUID, type: "Guid" },
  Bin: BYTES,
  BinTyped: { value: B64, type: "Binary" },
  BinEmpty: new Uint8Array(0),
};

let client;
before(async () => {
  client = await freshTable("ty");
  await client.createEntity(ENTITY);
});
after(async () => {
  await serviceFromConn().deleteTable(client.tableName);
});

test("default conversion: every type comes back as the SDK's JS type, values exact", async () => {
  const e = await client.getEntity("types", "all");
  assert.equal(e.Str, ENTITY.Str);
  assert.equal(e.StrTyped, "12345");
  assert.equal(e.Empty, "");
  assert.equal(e.Bool, true);
  assert.equal(e.BoolF, false);
  assert.equal(e.I32, 2147483647);
  assert.equal(e.I32Min, -2147483648);
  assert.equal(e.I64, 9007199254740993n);
  assert.equal(e.I64Min, -9223372036854775808n);
  assert.equal(e.I64Max, 9223372036854775807n);
  assert.equal(e.I64Small, 5n);
  assert.equal(e.I64BigInt, 9007199254740995n);
  assert.equal(e.Dbl, 3.25);
  assert.equal(e.DblTiny, -1.5e-10);
  assert.equal(e.DblIntegral, 2);
  assert.equal(e.DblString, 1.5);
  // The SDK hands the special doubles back as the strings on the wire.
  assert.equal(e.DblNaN, "NaN");
  assert.equal(e.DblInf, "Infinity");
  assert.equal(e.DblNegInf, "-Infinity");
  assert.ok(e.Dt instanceof Date);
  assert.equal(e.Dt.toISOString(), "2024-06-04T08:15:30.123Z");
  assert.equal(e.DtDate.toISOString(), "2020-02-29T10:00:00.123Z");
  assert.deepEqual(e.Guid, { value: GUID, type: "Guid" });
  assert.ok(e.Bin instanceof Uint8Array);
  assert.deepEqual([...e.Bin], [...BYTES]);
  assert.deepEqual([...e.BinTyped], [...BYTES]);
  assert.deepEqual([...e.BinEmpty], []);
});

test("disableTypeConversion: exact wire values and EDM types", async () => {
  const e = await client.getEntity("types", "all", { disableTypeConversion: true });
  assert.deepEqual(e.I64, { value: "9007199254740993", type: "Int64" });
  assert.deepEqual(e.I64Min, { value: "-9223372036854775808", type: "Int64" });
  assert.deepEqual(e.I64Max, { value: "9223372036854775807", type: "Int64" });
  assert.deepEqual(e.I64BigInt, { value: "9007199254740995", type: "Int64" });
  // DateTime keeps all 7 fractional digits; trailing zeros are dropped as Azure drops them.
  assert.deepEqual(e.Dt, { value: DT7, type: "DateTime" });
  assert.deepEqual(e.DtDate, { value: "2020-02-29T10:00:00.123Z", type: "DateTime" });
  assert.deepEqual(e.DtOld, { value: "1601-01-01T00:00:00.0000001Z", type: "DateTime" });
  assert.deepEqual(e.Guid, { value: GUID, type: "Guid" });
  assert.deepEqual(e.Bin, { value: B64, type: "Binary" });
  assert.deepEqual(e.BinEmpty, { value: "", type: "Binary" });
  assert.deepEqual(e.DblNaN, { value: "NaN", type: "Double" });
  assert.deepEqual(e.DblInf, { value: "Infinity", type: "Double" });
  assert.deepEqual(e.DblNegInf, { value: "-Infinity", type: "Double" });
  // Minimal metadata annotates only non-inferable types: the SDK infers the rest.
  assert.deepEqual(e.I32, { value: "2147483647", type: "Int32" });
  assert.deepEqual(e.Dbl, { value: "3.25", type: "Double" });
  assert.deepEqual(e.Bool, { value: "true", type: "Boolean" });
  assert.deepEqual(e.Str, { value: ENTITY.Str, type: "String" });
  assert.match(e.timestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,6}[1-9])?Z$/);
});

test("wire form: Int64 as strings, integral Double with a fraction, 7-digit DateTime", async () => {
  let raw;
  await client.getEntity("types", "all", { onResponse: (r) => (raw = r.bodyAsText) });
  const body = JSON.parse(raw);
  assert.equal(body["I64"], "9007199254740993");
  assert.equal(body["I64@odata.type"], "Edm.Int64");
  assert.equal(body["Dt@odata.type"], "Edm.DateTime");
  assert.equal(body["Guid@odata.type"], "Edm.Guid");
  assert.equal(body["Bin@odata.type"], "Edm.Binary");
  assert.equal(body["I32@odata.type"], undefined);
  // An integral double is written so that it reads back as a double, not an Int32.
  assert.match(raw, /"DblIntegral":2\.0[,}]/);
  assert.match(raw, /"I32":2147483647[,}]/);
  assert.ok(body["odata.metadata"].endsWith(`$metadata#${client.tableName}/@Element`));
});

test("filters on every type match only the stored type", async () => {
  const one = ["all"];
  const none = [];
  const cases = [
    [odata`Str eq ${ENTITY.Str}`, one],
    [odata`StrTyped eq '12345'`, one],
    [odata`StrTyped eq 12345`, none],
    [odata`Empty eq ''`, one],
    [odata`Bool eq true and BoolF eq false`, one],
    [`Bool and not BoolF`, one],
    [odata`I32 eq 2147483647`, one],
    [odata`I32 eq 2147483647L`, none],
    [odata`I32Min lt -2147483647`, one],
    [odata`I64 eq 9007199254740993L`, one],
    [odata`I64 eq 9007199254740992L`, none],
    [odata`I64 gt 9007199254740992L and I64 lt 9007199254740994L`, one],
    [odata`I64Small eq 5`, none],
    [odata`I64Small eq 5L`, one],
    [odata`I64Min eq -9223372036854775808L and I64Max eq 9223372036854775807L`, one],
    [odata`Dbl eq 3.25`, one],
    [odata`DblIntegral eq 2.0`, one],
    [odata`DblIntegral eq 2`, none],
    [odata`DblString eq 1.5`, one],
    [odata`DblTiny lt 0.0 and DblTiny gt -1.0e-9`, one],
    [odata`Dt eq datetime'${DT7}'`, one],
    [odata`Dt eq datetime'2024-06-04T08:15:30.1234568Z'`, none],
    [odata`Dt gt ${new Date("2024-06-04T08:15:30.123Z")}`, one],
    [odata`DtDate eq ${new Date("2020-02-29T10:00:00.123Z")}`, one],
    [odata`Dt eq ${DT7}`, none],
    [odata`Guid eq guid'${GUID}'`, one],
    [odata`Guid eq ${GUID}`, none],
    [`Bin eq X'${Buffer.from(BYTES).toString("hex")}'`, one],
    [`Bin eq binary'${Buffer.from(BYTES).toString("hex").toUpperCase()}'`, one],
    [`Bin eq X'00'`, none],
    [odata`Timestamp gt datetime'2000-01-01T00:00:00Z' and PartitionKey eq 'types'`, one],
  ];
  for (const [filter, want] of cases) {
    assert.deepEqual(await rowKeys(client, filter), want, filter);
  }
});

test("$select on getEntity and listEntities returns only the listed properties", async () => {
  const e = await client.getEntity("types", "all", { queryOptions: { select: ["I64", "Guid", "Bin"] } });
  // A single-entity body carries odata.metadata, which the SDK passes through.
  assert.deepEqual(Object.keys(e).sort(), ["Bin", "Guid", "I64", "etag", "odata.metadata"]);
  assert.equal(e.I64, 9007199254740993n);
  const [l] = await (async () => {
    const out = [];
    for await (const x of client.listEntities({ queryOptions: { select: ["rowKey", "Dt", "DblIntegral"] } }))
      out.push(x);
    return out;
  })();
  assert.deepEqual(Object.keys(l).sort(), ["DblIntegral", "Dt", "etag", "rowKey"]);
  assert.equal(l.rowKey, "all");
  assert.equal(l.Dt.toISOString(), "2024-06-04T08:15:30.123Z");
});
