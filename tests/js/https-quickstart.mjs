// Run by https.test.mjs in a child process, because Node.js reads NODE_EXTRA_CA_CERTS only at
// start: the quickstart through @azure/data-tables over HTTPS, with the CA trusted that way
// and no TLS option given to the SDK. With a third argument, a bearer token, the clients
// use a TokenCredential (as DefaultAzureCredential is used) and the second argument is the
// endpoint URL instead of a connection string. Prints one JSON line of what it saw.
import { TableClient, TableServiceClient } from "@azure/data-tables";

const [target, table, token] = process.argv.slice(2);
const scopes = [];
const credential = token && {
  getToken: async (scope) => {
    scopes.push(...[scope].flat());
    return { token, expiresOnTimestamp: Date.now() + 3600_000 };
  },
};
const service = credential ? new TableServiceClient(target, credential) : TableServiceClient.fromConnectionString(target);
await service.createTable(table);
const client = credential ? new TableClient(target, table, credential) : TableClient.fromConnectionString(target, table);
await client.createEntity({ partitionKey: "p", rowKey: "1", V: "over TLS" });
await client.submitTransaction([
  ["create", { partitionKey: "p", rowKey: "2" }],
  ["upsert", { partitionKey: "p", rowKey: "1", W: 2 }, "Merge"],
]);
const rows = [];
for await (const e of client.listEntities()) rows.push([e.rowKey, e.V ?? null, e.W ?? null]);
await service.deleteTable(table);
console.log(JSON.stringify({ rows, scopes: [...new Set(scopes)] }));
