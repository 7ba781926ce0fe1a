// @azure/data-tables over HTTPS (tafel serve --cert/--key from `tafel cert`), trusting the
// development CA through NODE_EXTRA_CA_CERTS as docs/https.md says.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { startServer, tafelBinary, uniqueTableName } from "./harness.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
let server;
let tls;

before(async () => {
  tls = fs.mkdtempSync(path.join(os.tmpdir(), "tafel-js-tls-"));
  execFileSync(tafelBinary(), ["cert", "--out", tls], { stdio: "ignore" });
  server = await startServer({ args: ["--cert", path.join(tls, "cert.pem"), "--key", path.join(tls, "key.pem")] });
});

after(async () => {
  if (server) await server.stop();
  fs.rmSync(tls, { recursive: true, force: true });
});

function quickstart(env) {
  return spawnSync(process.execPath, [path.join(HERE, "https-quickstart.mjs"), server.connStr, uniqueTableName("tls")], {
    cwd: HERE,
    env: { ...process.env, ...env },
    encoding: "utf8",
    timeout: 60000,
  });
}

test("the quickstart over HTTPS with the CA in NODE_EXTRA_CA_CERTS", () => {
  assert.match(server.connStr, /TableEndpoint=https:/);
  const run = quickstart({ NODE_EXTRA_CA_CERTS: path.join(tls, "ca.pem") });
  assert.equal(run.status, 0, run.stderr);
  assert.deepEqual(JSON.parse(run.stdout.trim()).rows, [
    ["1", "over TLS", 2],
    ["2", null, null],
  ]);
});

test("without trusting the CA the SDK refuses the certificate", () => {
  const run = quickstart({ NODE_EXTRA_CA_CERTS: "" });
  assert.notEqual(run.status, 0);
  assert.match(run.stderr, /self-signed|unable to (get|verify)|certificate/i);
});
