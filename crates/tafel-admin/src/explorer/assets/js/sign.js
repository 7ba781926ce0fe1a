// Request signing in the browser: Shared Key for the Table service, and table
// SAS tokens. The account key stays in this tab (sessionStorage) and is never
// sent: only signatures are.

const enc = new TextEncoder();

export function b64encode(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

/** Throws on text that is not base64. */
export function b64decode(text) {
  const s = atob(text.trim());
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

// SHA-256 and HMAC for pages without WebCrypto: browsers give crypto.subtle only
// to secure contexts, and an admin listener reached over plain HTTP on another
// host is not one.
const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

export function sha256(data) {
  const len = data.length;
  const padded = new Uint8Array(((len + 9 + 63) >> 6) << 6);
  padded.set(data);
  padded[len] = 0x80;
  const view = new DataView(padded.buffer);
  view.setUint32(padded.length - 8, Math.floor(len / 0x20000000));
  view.setUint32(padded.length - 4, (len << 3) >>> 0);
  const h = new Uint32Array([
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
  ]);
  const w = new Uint32Array(64);
  const rotr = (x, n) => (x >>> n) | (x << (32 - n));
  for (let off = 0; off < padded.length; off += 64) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(off + i * 4);
    for (let i = 16; i < 64; i++) {
      const s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
      const s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) >>> 0;
    }
    let [a, b, c, d, e, f, g, hh] = h;
    for (let i = 0; i < 64; i++) {
      const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i]) >>> 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) >>> 0;
      hh = g; g = f; f = e; e = (d + t1) >>> 0;
      d = c; c = b; b = a; a = (t1 + t2) >>> 0;
    }
    const add = [a, b, c, d, e, f, g, hh];
    for (let i = 0; i < 8; i++) h[i] = (h[i] + add[i]) >>> 0;
  }
  const out = new Uint8Array(32);
  const ov = new DataView(out.buffer);
  for (let i = 0; i < 8; i++) ov.setUint32(i * 4, h[i]);
  return out;
}

export function hmacFallback(key, msg) {
  let k = key.length > 64 ? sha256(key) : key;
  const block = new Uint8Array(64);
  block.set(k);
  const inner = new Uint8Array(64 + msg.length);
  const outer = new Uint8Array(64 + 32);
  for (let i = 0; i < 64; i++) {
    inner[i] = block[i] ^ 0x36;
    outer[i] = block[i] ^ 0x5c;
  }
  inner.set(msg, 64);
  outer.set(sha256(inner), 64);
  return sha256(outer);
}

/** HMAC-SHA256 of `text` (UTF-8) with `key` bytes, base64. */
export async function hmac(key, text) {
  const msg = enc.encode(text);
  if (globalThis.crypto && crypto.subtle) {
    const k = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    return b64encode(new Uint8Array(await crypto.subtle.sign("HMAC", k, msg)));
  }
  return b64encode(hmacFallback(key, msg));
}

/**
 * The Authorization header of a Shared Key request (Table flavour):
 * VERB, Content-MD5, Content-Type, x-ms-date, then /account + the path as sent
 * (path-style, so it starts with the account again) and ?comp= when present.
 */
export async function sharedKey(account, key, { method, contentType, date, path, comp }) {
  let resource = `/${account}${path}`;
  if (comp) resource += `?comp=${comp}`;
  const toSign = [method, "", contentType || "", date, resource].join("\n");
  return `SharedKey ${account}:${await hmac(key, toSign)}`;
}

/**
 * A table SAS (service SAS), as the query string to append. `o`: permissions
 * ("raud" order), start/expiry (ISO, seconds precision), optional key range,
 * stored policy id, IP range and protocol.
 */
export async function tableSas(account, key, o) {
  const version = "2019-02-02";
  const fields = [
    o.permissions || "", o.start || "", o.expiry || "", `/table/${account}/${o.table.toLowerCase()}`,
    o.id || "", o.ip || "", o.protocol || "", version,
    o.startPk || "", o.startRk || "", o.endPk || "", o.endRk || "",
  ];
  const sig = await hmac(key, fields.join("\n"));
  const params = [["sv", version], ["tn", o.table]];
  const add = (k, v) => v && params.push([k, v]);
  add("sp", o.permissions); add("st", o.start); add("se", o.expiry); add("si", o.id);
  add("sip", o.ip); add("spr", o.protocol);
  add("spk", o.startPk); add("srk", o.startRk); add("epk", o.endPk); add("erk", o.endRk);
  params.push(["sig", sig]);
  return params.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join("&");
}
