// Starts the real tafel binary for the JS SDK tests (like tests/python/conftest.py):
// $TAFEL_BIN or <repo>/target/release/tafel, on a free loopback port, with a fresh data dir.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

export const ACCOUNT = "devstoreaccount1";
export const KEY =
  "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");

export function tafelBinary() {
  return process.env.TAFEL_BIN || path.join(REPO_ROOT, "target", "release", "tafel");
}

// Below the kernel's ephemeral range, as tests/python/ports.py: a port the
// kernel hands out is also where outgoing connections take theirs.
function ephemeralLow() {
  try {
    return Number(fs.readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/)[0]) || 32768;
  } catch {
    return 32768;
  }
}

function tryListen(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

async function freePort() {
  const high = ephemeralLow();
  for (let i = 0; i < 200; i++) {
    const port = 20000 + Math.floor(Math.random() * (high - 20000));
    if (await tryListen(port)) return port;
  }
  throw new Error(`no free port in 20000..${high}`);
}

function canConnect(port) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: "127.0.0.1", port });
    sock.setTimeout(500);
    sock.once("connect", () => {
      sock.destroy();
      resolve(true);
    });
    sock.once("error", () => resolve(false));
    sock.once("timeout", () => {
      sock.destroy();
      resolve(false);
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A unique, valid table name (letters/digits, starts with a letter). */
export function uniqueTableName(prefix = "js") {
  return (prefix + randomBytes(10).toString("hex")).slice(0, 63);
}

/** With TAFEL_BACKEND=postgres and TAFEL_POSTGRES_URL (a server to create databases on, as
 * scripts/with-postgres provides), each server gets a new database of its own. */
function backendArgs() {
  if (process.env.TAFEL_BACKEND !== "postgres") return [];
  const admin = process.env.TAFEL_POSTGRES_URL;
  if (!admin) throw new Error("TAFEL_BACKEND=postgres needs TAFEL_POSTGRES_URL");
  const name = `tafel_js_${randomBytes(8).toString("hex")}`;
  execFileSync("psql", ["-v", "ON_ERROR_STOP=1", "-q", admin, "-c", `CREATE DATABASE ${name}`], { stdio: "ignore" });
  return ["--backend", "postgres", "--postgres-url", `${admin.replace(/\/[^/]*$/, "")}/${name}`];
}

/** Starts tafel; `args` are extra serve flags (with `--cert` the server speaks HTTPS); with
 * `admin`, the admin listener on a free port of its own (`adminUrl`). */
export async function startServer({ timeoutMs = 60000, args = [], admin = false } = {}) {
  const bin = tafelBinary();
  if (!fs.existsSync(bin)) {
    throw new Error(`tafel binary not found at ${bin}; run \`cargo build --release -p tafel\` or set TAFEL_BIN`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tafel-js-"));
  const dataDir = path.join(dir, "data");
  const logPath = path.join(dir, "tafel.log");
  const port = await freePort();
  const adminPort = admin ? await freePort() : null;
  const adminArgs = admin ? ["--admin-port", String(adminPort)] : ["--no-admin"];
  const logFd = fs.openSync(logPath, "a");
  const child = spawn(
    bin,
    // No admin listener unless asked (its default port would clash between servers), no drain wait.
    ["serve", "--host", "127.0.0.1", "--port", String(port), "--data-dir", dataDir, ...adminArgs, "--drain-seconds", "0", ...backendArgs(), ...args],
    {
      stdio: ["ignore", logFd, logFd],
      env: { RUST_LOG: "info", NO_COLOR: "1", ...process.env },
    },
  );
  fs.closeSync(logFd);
  let exited = null;
  child.on("exit", (code, signal) => {
    exited = { code, signal };
  });

  const logTail = (lines = 80) => {
    try {
      return fs.readFileSync(logPath, "utf8").split("\n").slice(-lines).join("\n");
    } catch {
      return "";
    }
  };

  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (exited) {
      throw new Error(`tafel exited during startup (${JSON.stringify(exited)}):\n${logTail()}`);
    }
    if (await canConnect(port)) break;
    if (Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error(`tafel did not accept connections within ${timeoutMs} ms:\n${logTail()}`);
    }
    await sleep(50);
  }

  const scheme = args.includes("--cert") || args.includes("--pfx") ? "https" : "http";
  const url = `${scheme}://127.0.0.1:${port}/${ACCOUNT}`;
  const connStr =
    `DefaultEndpointsProtocol=${scheme};AccountName=${ACCOUNT};AccountKey=${KEY};` +
    `TableEndpoint=${url};`;

  async function stop() {
    if (exited) return exited;
    const done = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 15000);
    const result = await done;
    clearTimeout(timer);
    if (!process.env.TAFEL_KEEP_DATA) fs.rmSync(dir, { recursive: true, force: true });
    return result;
  }

  return {
    port,
    adminUrl: admin ? `http://127.0.0.1:${adminPort}` : null,
    url,
    connStr,
    dataDir,
    logPath,
    logTail,
    stop,
    isRunning: () => exited === null,
  };
}

/** The error code of an SDK RestError (body `odata.error.code` or x-ms-error-code header). */
export function errorCode(err) {
  return (
    err?.code ??
    err?.details?.errorCode ??
    err?.details?.odataError?.code ??
    err?.response?.parsedBody?.odataError?.code ??
    err?.response?.headers?.get?.("x-ms-error-code")
  );
}

/** Awaits `promise` and asserts it fails with this HTTP status and Azure error code. */
export async function expectRestError(promise, status, code) {
  let caught;
  try {
    await promise;
  } catch (err) {
    caught = err;
  }
  assert.ok(caught, `expected a ${status} ${code} error, got success`);
  assert.equal(caught.statusCode, status, `status: ${caught.statusCode} ${caught.message}`);
  assert.equal(errorCode(caught), code, `code: ${errorCode(caught)} (${caught.message})`);
  return caught;
}

/** Every item of an async iterator (an SDK listing). */
export async function collect(iter) {
  const out = [];
  for await (const x of iter) out.push(x);
  return out;
}

/**
 * `test`, but a failure's message carries the tail of the server log.
 * `getServer` returns the suite's server (started in `before`, so read lazily).
 */
export function testWithLog(getServer) {
  return (name, fn) =>
    test(name, async (t) => {
      try {
        await fn(t);
      } catch (err) {
        const server = getServer();
        if (server) err.message = `${err.message}\n--- tafel log (tail) ---\n${server.logTail(60)}`;
        throw err;
      }
    });
}
