// Run by oauth.test.mjs in a node started with NODE_EXTRA_CA_CERTS (the test CA): drives
// @azure/data-tables with a custom TokenCredential and prints what it saw as one JSON line.
import { TableClient, TableServiceClient } from "@azure/data-tables";

const url = process.env.TAFEL_URL;
const scopes = new Set();
const credential = (token) => ({
  async getToken(requested) {
    for (const s of [].concat(requested)) scopes.add(s);
    return { token, expiresOnTimestamp: Date.now() + 3600 * 1000 };
  },
});
const owner = credential(process.env.OWNER_TOKEN);
const name = `jsoauth${Date.now()}`;
const out = {};

const svc = new TableServiceClient(url, owner);
await svc.createTable(name);
out.created = true;
const table = new TableClient(url, name, owner);
await table.createEntity({ partitionKey: "p", rowKey: "1", name: "one", n: 1 });
await table.upsertEntity({ partitionKey: "p", rowKey: "1", n: 2 }, "Merge");
const e = await table.getEntity("p", "1");
out.read = { name: e.name, n: e.n };
const names = [];
for await (const t of svc.listTables()) names.push(t.name);
out.listed = names.includes(name);

const reader = new TableClient(url, name, credential(process.env.READER_TOKEN));
let count = 0;
for await (const _ of reader.listEntities()) count += 1;
out.readerListed = count;
try {
  await reader.createEntity({ partitionKey: "p", rowKey: "2" });
  out.readerInsert = "allowed";
} catch (err) {
  out.readerInsert = [err.statusCode, err.code ?? err.details?.errorCode];
}

try {
  const expired = new TableServiceClient(url, credential(process.env.EXPIRED_TOKEN));
  for await (const _ of expired.listTables()) break;
  out.expired = "allowed";
} catch (err) {
  out.expired = err.statusCode;
}

await svc.deleteTable(name);
out.scopes = [...scopes];
console.log(JSON.stringify(out));
