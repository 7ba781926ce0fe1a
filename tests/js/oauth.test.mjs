// Bearer tokens through @azure/data-tables: a custom TokenCredential handing out RS256
// tokens minted here, against tafel --oauth strict over HTTPS (a test CA made with the
// openssl CLI). The SDK runs in a child node process (oauth-client.mjs) because
// NODE_EXTRA_CA_CERTS is only read when node starts. Skipped when the binary has no --cert.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { createSign, generateKeyPairSync } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { startServer, tafelBinary } from "./harness.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const TENANT = "00000000-0000-0000-0000-0000000000aa";
const hasTls = (() => {
  try {
    return execFileSync(tafelBinary(), ["serve", "--help"], { encoding: "utf8" }).includes("--cert");
  } catch {
    return false;
  }
})();

const b64url = (buf) => Buffer.from(buf).toString("base64url");

function mint(privateKey, claims) {
  const now = Math.floor(Date.now() / 1000);
  const header = b64url(JSON.stringify({ alg: "RS256", typ: "JWT", kid: "js1" }));
  const body = b64url(
    JSON.stringify({
      aud: "https://storage.azure.com",
      iss: `https://sts.windows.net/${TENANT}/`,
      nbf: now - 60,
      exp: now + 3600,
      ...claims,
    }),
  );
  const signer = createSign("RSA-SHA256");
  signer.update(`${header}.${body}`);
  return `${header}.${body}.${b64url(signer.sign(privateKey))}`;
}

/** A test CA and a certificate for 127.0.0.1 signed by it, with the openssl CLI. */
function makeTls(dir) {
  const run = (...args) => execFileSync("openssl", args, { cwd: dir, stdio: "pipe" });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  run("req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=Tafel JS test CA");
  run("req", ...ec, "-keyout", "key.pem", "-out", "leaf.csr", "-subj", "/CN=127.0.0.1");
  fs.writeFileSync(
    path.join(dir, "leaf.ext"),
    "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
  );
  run("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
    "-out", "cert.pem", "-days", "1", "-extfile", "leaf.ext");
  return { ca: path.join(dir, "ca.pem"), cert: path.join(dir, "cert.pem"), key: path.join(dir, "key.pem") };
}

let server;
let dir;
let privateKey;

before(async () => {
  if (!hasTls) return;
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "tafel-js-oauth-"));
  const tls = makeTls(dir);
  const pair = generateKeyPairSync("rsa", { modulusLength: 2048 });
  privateKey = pair.privateKey;
  const jwk = { ...pair.publicKey.export({ format: "jwk" }), kid: "js1", use: "sig", alg: "RS256" };
  fs.writeFileSync(path.join(dir, "jwks.json"), JSON.stringify({ keys: [jwk] }));
  fs.writeFileSync(
    path.join(dir, "roles.json"),
    JSON.stringify({
      assignment: [
        { principal: "oid:js-owner", role: "Owner" },
        { principal: "oid:js-reader", role: "Storage Table Data Reader" },
      ],
    }),
  );
  server = await startServer({
    https: true,
    args: [
      "--cert", tls.cert, "--key", tls.key,
      "--oauth", "strict",
      "--oauth-jwks", path.join(dir, "jwks.json"),
      "--oauth-roles", path.join(dir, "roles.json"),
      "--oauth-tenant", TENANT,
    ],
  });
  server.ca = tls.ca;
});

after(async () => {
  if (server) await server.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test("quickstart with a TokenCredential over HTTPS; reader vs owner; expired token", { skip: !hasTls && "needs a tafel with HTTPS (--cert/--key)" }, () => {
  const now = Math.floor(Date.now() / 1000);
  const child = spawnSync(process.execPath, [path.join(HERE, "oauth-client.mjs")], {
    encoding: "utf8",
    timeout: 60000,
    env: {
      ...process.env,
      NODE_EXTRA_CA_CERTS: server.ca,
      TAFEL_URL: server.url,
      OWNER_TOKEN: mint(privateKey, { oid: "js-owner" }),
      READER_TOKEN: mint(privateKey, { oid: "js-reader" }),
      EXPIRED_TOKEN: mint(privateKey, { oid: "js-owner", nbf: now - 7200, exp: now - 3600 }),
    },
  });
  assert.equal(child.status, 0, `oauth-client.mjs failed:\n${child.stdout}\n${child.stderr}\n${server.logTail(40)}`);
  const result = JSON.parse(child.stdout.trim().split("\n").pop());
  assert.deepEqual(result, {
    created: true,
    read: { name: "one", n: 2 },
    listed: true,
    readerListed: 1,
    readerInsert: [403, "AuthorizationPermissionMismatch"],
    expired: 401,
    scopes: ["https://storage.azure.com/.default"],
  });
});
