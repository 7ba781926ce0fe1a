// @azure/data-tables over HTTPS (tafel serve --cert/--key from `tafel cert`), trusting the
// development CA through NODE_EXTRA_CA_CERTS as docs/https.md says.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { generateKeyPairSync, sign } from "node:crypto";
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

function quickstart(env, args = [server.connStr, uniqueTableName("tls")]) {
  return spawnSync(process.execPath, [path.join(HERE, "https-quickstart.mjs"), ...args], {
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

/** An RS256 token for Azure Storage from an Entra issuer (the server runs --oauth basic). */
function mintToken() {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const b64 = (v) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const now = Math.floor(Date.now() / 1000);
  const head = b64({ alg: "RS256", typ: "JWT", kid: "js" });
  const body = b64({
    aud: "https://storage.azure.com",
    iss: "https://sts.windows.net/72f988bf-86f1-41af-91ab-2d7cd011db47/",
    nbf: now - 60,
    exp: now + 3600,
    oid: "js-test",
  });
  const signature = sign("RSA-SHA256", Buffer.from(`${head}.${body}`), privateKey).toString("base64url");
  return `${head}.${body}.${signature}`;
}

test("the quickstart over HTTPS with a TokenCredential (--oauth basic)", async () => {
  const oauth = await startServer({
    args: ["--cert", path.join(tls, "cert.pem"), "--key", path.join(tls, "key.pem"), "--oauth", "basic"],
  });
  try {
    const run = quickstart({ NODE_EXTRA_CA_CERTS: path.join(tls, "ca.pem") }, [oauth.url, uniqueTableName("tok"), mintToken()]);
    assert.equal(run.status, 0, run.stderr);
    const seen = JSON.parse(run.stdout.trim());
    assert.deepEqual(seen.rows, [
      ["1", "over TLS", 2],
      ["2", null, null],
    ]);
    assert.deepEqual(seen.scopes, ["https://storage.azure.com/.default"]);
  } finally {
    await oauth.stop();
  }
});
