// Run by https.test.mjs in a child process, because Node.js reads NODE_EXTRA_CA_CERTS only at
// start: the quickstart through @azure/data-tables over HTTPS, with the CA trusted that way
// and no TLS option given to the SDK. Prints one JSON line of what it saw.
import { TableClient, TableServiceClient } from "@azure/data-tables";

const [connStr, table] = process.argv.slice(2);
const service = TableServiceClient.fromConnectionString(connStr);
await service.createTable(table);
const client = TableClient.fromConnectionString(connStr, table);
await client.createEntity({ partitionKey: "p", rowKey: "1", V: "over TLS" });
await client.submitTransaction([
  ["create", { partitionKey: "p", rowKey: "2" }],
  ["upsert", { partitionKey: "p", rowKey: "1", W: 2 }, "Merge"],
]);
const rows = [];
for await (const e of client.listEntities()) rows.push([e.rowKey, e.V ?? null, e.W ?? null]);
await service.deleteTable(table);
console.log(JSON.stringify({ rows }));
