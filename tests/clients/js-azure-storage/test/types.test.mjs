// All eight EDM types through entityGenerator, read back at every payload format
// (minimal, full, and no metadata with the SDK's property resolvers), and filters on
// every type with TableQuery's typed placeholders and filter helpers.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { call, dropTable, freshTable, gen, rowKeys, service, TableQuery, TableUtilities } from "./common.mjs";

const GUID = "3f2504e0-4f89-11d3-9a0c-0305e82c3301";
const BYTES = Buffer.from([0, 1, 2, 127, 128, 250, 255, 0x2b, 0x2f]);
const DT7 = "2024-06-04T08:15:30.1234567Z";
const { PayloadFormat, EdmType } = TableUtilities;

const ENTITY = {
  PartitionKey: gen.String("types"),
  RowKey: gen.String("all"),
  Str: gen.String("Zürich 東京 🚀 a+b&c#d%e 'q'"),
  Plain: "untyped string",
  Empty: gen.String(""),
  Bool: gen.Boolean(true),
  BoolF: false,
  I32: gen.Int32(2147483647),
  I32Min: gen.Int32(-2147483648),
  I32Plain: 7,
  I64: gen.Int64("9007199254740993"),
  I64Min: gen.Int64("-9223372036854775808"),
  I64Max: gen.Int64("9223372036854775807"),
  I64Small: gen.Int64(5),
  Dbl: gen.Double(3.25),
  DblIntegral: gen.Double(2),
  DblPlain: 0.5,
  DblTiny: gen.Double(-1.5e-10),
  DblNaN: gen.Double(NaN),
  DblInf: gen.Double(Infinity),
  DblNegInf: gen.Double(-Infinity),
  Dt: gen.DateTime(DT7),
  DtDate: gen.DateTime(new Date("2020-02-29T10:00:00.123Z")),
  DtPlain: new Date("2021-03-04T05:06:07.890Z"),
  Guid: gen.Guid(GUID),
  Bin: gen.Binary(BYTES),
  BinEmpty: gen.Binary(Buffer.alloc(0)),
};

let table;
before(async () => {
  table = await freshTable("ty");
  await call(service(), "insertEntity", table, ENTITY);
});
after(async () => {
  await dropTable(table);
});

const bytes = (b) => [...b];

test("minimal metadata: typed values come back with their EDM types, exact", async () => {
  const { result: e } = await call(service(), "retrieveEntity", table, "types", "all");
  assert.deepEqual(e.Str, { _: ENTITY.Str._ });
  assert.deepEqual(e.Plain, { _: "untyped string" });
  assert.deepEqual(e.Empty, { _: "" });
  assert.deepEqual(e.Bool, { _: true });
  assert.deepEqual(e.BoolF, { _: false });
  assert.deepEqual(e.I32, { _: 2147483647 });
  assert.deepEqual(e.I32Min, { _: -2147483648 });
  assert.deepEqual(e.I32Plain, { _: 7 });
  // Int64 stays a string: no precision lost beyond 2^53.
  assert.deepEqual(e.I64, { $: "Edm.Int64", _: "9007199254740993" });
  assert.deepEqual(e.I64Min, { $: "Edm.Int64", _: "-9223372036854775808" });
  assert.deepEqual(e.I64Max, { $: "Edm.Int64", _: "9223372036854775807" });
  assert.deepEqual(e.I64Small, { $: "Edm.Int64", _: "5" });
  assert.deepEqual(e.Dbl, { _: 3.25 });
  // No annotation at minimal metadata: the SDK's JSON parser (json-edm-parser) types a
  // number written with a fraction ("2.0") as Edm.Double, so the server must write one.
  assert.deepEqual(e.DblIntegral, { $: "Edm.Double", _: 2 });
  assert.deepEqual(e.DblPlain, { _: 0.5 });
  assert.deepEqual(e.DblTiny, { _: -1.5e-10 });
  assert.equal(e.DblNaN.$, "Edm.Double");
  assert.ok(Number.isNaN(e.DblNaN._));
  assert.deepEqual(e.DblInf, { $: "Edm.Double", _: Infinity });
  assert.deepEqual(e.DblNegInf, { $: "Edm.Double", _: -Infinity });
  assert.equal(e.Dt.$, "Edm.DateTime");
  assert.equal(e.Dt._.toISOString(), "2024-06-04T08:15:30.123Z");
  assert.equal(e.DtDate._.toISOString(), "2020-02-29T10:00:00.123Z");
  assert.equal(e.DtPlain.$, "Edm.DateTime");
  assert.equal(e.DtPlain._.toISOString(), "2021-03-04T05:06:07.890Z");
  assert.deepEqual(e.Guid, { $: "Edm.Guid", _: GUID });
  assert.equal(e.Bin.$, "Edm.Binary");
  assert.deepEqual(bytes(e.Bin._), bytes(BYTES));
  assert.deepEqual(bytes(e.BinEmpty._), []);
});

test("wire form (full metadata): 7-digit DateTime, Int64 as a string, OData control members", async () => {
  const { response } = await call(service(), "retrieveEntity", table, "types", "all", {
    payloadFormat: PayloadFormat.FULL_METADATA,
  });
  const body = response.body;
  assert.equal(body["Dt"], DT7);
  assert.equal(body["DtDate"], "2020-02-29T10:00:00.123Z");
  assert.equal(body["DtPlain"], "2021-03-04T05:06:07.89Z");
  assert.equal(body["I64"], "9007199254740993");
  assert.match(body["Timestamp"], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,6}[1-9])?Z$/);
  assert.equal(body["Timestamp@odata.type"], "Edm.DateTime");
  assert.equal(body["odata.type"], `${process.env.TAFEL_ACCOUNT}.${table}`);
  assert.equal(body["odata.editLink"], `${table}(PartitionKey='types',RowKey='all')`);
  assert.ok(body["odata.id"].endsWith(`/${table}(PartitionKey='types',RowKey='all')`), body["odata.id"]);
  assert.equal(body["odata.etag"], response.headers.etag);
  assert.equal(body["DblIntegral@odata.type"], "Edm.Double");
});

test("full metadata: the SDK reads every annotation", async () => {
  const { result: e } = await call(service(), "retrieveEntity", table, "types", "all", {
    payloadFormat: PayloadFormat.FULL_METADATA,
  });
  assert.deepEqual(e.I64, { $: "Edm.Int64", _: "9007199254740993" });
  assert.deepEqual(e.DblIntegral, { $: "Edm.Double", _: 2 });
  assert.deepEqual(e.I32, { _: 2147483647 });
  assert.deepEqual(e.Guid, { $: "Edm.Guid", _: GUID });
  assert.equal(e.Timestamp.$, "Edm.DateTime");
  assert.equal(e[".metadata"].type, `${process.env.TAFEL_ACCOUNT}.${table}`);
});

test("no metadata: autoResolveProperties and a propertyResolver restore the types", async () => {
  const types = {
    I64: EdmType.INT64, Dt: EdmType.DATETIME, Guid: EdmType.GUID, Bin: EdmType.BINARY, DblIntegral: EdmType.DOUBLE,
  };
  const { result: e, response } = await call(service(), "retrieveEntity", table, "types", "all", {
    payloadFormat: PayloadFormat.NO_METADATA,
    autoResolveProperties: true,
    propertyResolver: (pk, rk, name, value, type) => types[name] ?? type,
  });
  assert.equal(response.body["odata.etag"], undefined);
  assert.equal(response.body["I64@odata.type"], undefined);
  assert.equal(response.body["I64"], "9007199254740993");
  assert.deepEqual(e.I64, { $: "Edm.Int64", _: "9007199254740993" });
  assert.equal(e.Dt._.toISOString(), "2024-06-04T08:15:30.123Z");
  assert.deepEqual(e.Guid, { $: "Edm.Guid", _: GUID });
  assert.deepEqual(bytes(e.Bin._), bytes(BYTES));
  assert.deepEqual(e.Str, { $: "Edm.String", _: ENTITY.Str._ });
  assert.deepEqual(e.Bool, { $: "Edm.Boolean", _: true });
  // The ETag still comes from the response header.
  assert.equal(e[".metadata"].etag, response.headers.etag);
});

test("filters on every type match only the stored type", async () => {
  const svc = service();
  const one = ["all"];
  const none = [];
  const Q = (...args) => new TableQuery().where(...args);
  const F = (f) => new TableQuery().where(f);
  const cases = [
    [Q("Str eq ?string?", ENTITY.Str._), one],
    [Q("Str eq ?", ENTITY.Str._), one],
    [Q("Plain eq ?", "untyped string"), one],
    [Q("Empty eq ?string?", ""), one],
    [Q("Bool eq ?bool? and BoolF eq ?bool?", true, false), one],
    [F("Bool and not BoolF"), one],
    [Q("I32 eq ?int32?", 2147483647), one],
    [Q("I32 eq ?int64?", "2147483647"), none],
    [Q("I32Min lt ?", -2147483647), one],
    [Q("I32Plain eq ?int32?", 7), one],
    [Q("I64 eq ?int64?", "9007199254740993"), one],
    [Q("I64 eq ?int64?", "9007199254740992"), none],
    [F(TableQuery.int64Filter("I64", "gt", "9007199254740992")), one],
    [F(TableQuery.combineFilters(
      TableQuery.int64Filter("I64Min", "eq", "-9223372036854775808"), "and",
      TableQuery.int64Filter("I64Max", "eq", "9223372036854775807"))), one],
    [Q("I64Small eq ?int32?", 5), none],
    [Q("I64Small eq ?int64?", 5), one],
    [Q("Dbl eq ?double?", 3.25), one],
    [F(TableQuery.doubleFilter("DblPlain", "lt", 0.75)), one],
    [F("DblIntegral eq 2.0"), one],
    [Q("DblIntegral eq ?int32?", 2), none],
    [Q("DblTiny lt ?double? and DblTiny gt ?double?", 0.5, -1e-9), one],
    [F(`Dt eq datetime'${DT7}'`), one],
    [F("Dt eq datetime'2024-06-04T08:15:30.1234568Z'"), none],
    [Q("Dt gt ?date?", new Date("2024-06-04T08:15:30.123Z")), one],
    [F(TableQuery.dateFilter("DtDate", "eq", new Date("2020-02-29T10:00:00.123Z"))), one],
    [Q("DtPlain ge ?date? and DtPlain le ?date?", new Date("2021-03-04T05:06:07.890Z"), new Date("2021-03-04T05:06:07.890Z")), one],
    [Q("Dt eq ?string?", DT7), none],
    [Q("Guid eq ?guid?", GUID), one],
    [F(TableQuery.guidFilter("Guid", "eq", GUID)), one],
    [Q("Guid eq ?string?", GUID), none],
    [Q("Bin eq ?binary?", BYTES), one],
    [F(TableQuery.binaryFilter("Bin", "eq", Buffer.from([0]))), none],
    [F(TableQuery.combineFilters(TableQuery.stringFilter("PartitionKey", "eq", "types"), "and",
      TableQuery.dateFilter("Timestamp", "gt", new Date("2000-01-01T00:00:00Z")))), one],
  ];
  for (const [query, want] of cases) {
    assert.deepEqual(await rowKeys(svc, table, query), want, query.toQueryObject().$filter);
  }
});

test("TableQuery.select returns only the listed properties", async () => {
  const q = new TableQuery().select("I64", "Guid", "Bin").where("PartitionKey eq ?", "types");
  const { result } = await call(service(), "queryEntities", table, q, null);
  const [e] = result.entries;
  assert.deepEqual(Object.keys(e).sort(), [".metadata", "Bin", "Guid", "I64"]);
  assert.deepEqual(e.I64, { $: "Edm.Int64", _: "9007199254740993" });
  assert.match(e[".metadata"].etag, /^W\/"datetime'/);
});
