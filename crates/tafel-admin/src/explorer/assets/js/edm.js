// The eight EDM types: reading them from the wire (full metadata), checking
// what a person typed, and writing them back loss-free. Values are kept as the
// text the wire carries (Int64 as a decimal string, Binary as base64), so
// nothing passes through a JavaScript number that could round it.

import { b64decode, b64encode } from "./sign.js";

export const TYPES = ["String", "Int32", "Int64", "Double", "Boolean", "DateTime", "Guid", "Binary"];
export const SYSTEM = ["PartitionKey", "RowKey", "Timestamp"];

/**
 * A wire entity (full metadata) as { pk, rk, timestamp, etag, props: [{ name,
 * type, value }] } with every value a string.
 */
export function fromWire(obj) {
  const props = [];
  for (const [name, raw] of Object.entries(obj)) {
    if (name.includes("@") || name.startsWith("odata.") || SYSTEM.includes(name)) continue;
    const annotated = obj[`${name}@odata.type`];
    let type = annotated ? annotated.replace(/^Edm\./, "") : null;
    if (!type) {
      if (typeof raw === "boolean") type = "Boolean";
      else if (typeof raw === "number") type = Number.isInteger(raw) ? "Int32" : "Double";
      else type = "String";
    }
    props.push({ name, type, value: valueText(type, raw) });
  }
  return {
    pk: obj.PartitionKey, rk: obj.RowKey, timestamp: obj.Timestamp || "", etag: obj["odata.etag"] || "", props,
  };
}

function valueText(type, raw) {
  if (raw === null || raw === undefined) return "";
  if (type === "Double" && typeof raw === "number") {
    // Keep a fraction on whole numbers so the text still reads as a Double.
    return Number.isInteger(raw) && Math.abs(raw) < 1e21 ? raw.toFixed(1) : String(raw);
  }
  return String(raw);
}

const INT = /^[+-]?\d+$/;
const DATETIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,7})?)?(Z|[+-]\d{2}:\d{2})$/;
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Hex text as base64 (Binary typed as hex). Throws on bad hex. */
export function hexToBase64(hex) {
  const clean = hex.replace(/\s+/g, "").replace(/^0x/i, "");
  if (clean.length % 2 || /[^0-9a-f]/i.test(clean)) throw new Error("is not hex (pairs of 0-9, a-f)");
  const out = new Uint8Array(clean.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(clean.slice(i * 2, i * 2 + 2), 16);
  return b64encode(out);
}

export function base64ToHex(b64) {
  return [...b64decode(b64)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** Why `text` is not a value of `type`, or "" when it is. */
export function check(type, text) {
  switch (type) {
    case "Int32":
      return INT.test(text) && Number(text) >= -(2 ** 31) && Number(text) < 2 ** 31
        ? "" : "must be a whole number from -2147483648 to 2147483647";
    case "Int64": {
      if (!INT.test(text)) return "must be a whole number";
      const v = BigInt(text);
      return v >= -(2n ** 63n) && v < 2n ** 63n ? "" : "must be from -9223372036854775808 to 9223372036854775807";
    }
    case "Double":
      return ["NaN", "Infinity", "-Infinity"].includes(text) || (text.trim() !== "" && Number.isFinite(Number(text)))
        ? "" : "must be a number (or NaN, Infinity, -Infinity)";
    case "Boolean":
      return text === "true" || text === "false" ? "" : "must be true or false";
    case "DateTime":
      return DATETIME.test(text) && !Number.isNaN(Date.parse(text.replace(/\.(\d{3})\d+/, ".$1")))
        ? "" : "must be like 2024-05-06T07:08:09.1234567Z";
    case "Guid":
      return GUID.test(text) ? "" : "must be like 0f8fad5b-d9cb-469f-a165-70867728950e";
    case "Binary":
      try {
        b64decode(text);
        return "";
      } catch {
        return "must be base64";
      }
    default:
      return "";
  }
}

/** The JSON body of an entity with these props (checked already). */
export function toWire(pk, rk, props) {
  const body = { PartitionKey: pk, RowKey: rk };
  for (const { name, type, value } of props) {
    switch (type) {
      case "String":
        body[name] = value;
        break;
      case "Int32":
        body[name] = Number(value);
        break;
      case "Boolean":
        body[name] = value === "true";
        break;
      case "Double":
        body[`${name}@odata.type`] = "Edm.Double";
        body[name] = Number.isFinite(Number(value)) ? Number(value) : value;
        break;
      case "Int64":
        body[`${name}@odata.type`] = "Edm.Int64";
        body[name] = BigInt(value).toString();
        break;
      default:
        body[`${name}@odata.type`] = `Edm.${type}`;
        body[name] = value;
    }
  }
  return body;
}

/** One line of JSONL export: the wire form, typed, without odata.* members. */
export function toJsonl(entity) {
  const body = { PartitionKey: entity.pk, RowKey: entity.rk };
  if (entity.timestamp) {
    body["Timestamp@odata.type"] = "Edm.DateTime";
    body.Timestamp = entity.timestamp;
  }
  Object.assign(body, toWire(entity.pk, entity.rk, entity.props));
  return JSON.stringify(body);
}

/** An entity from a JSONL line (the wire form); Timestamp is dropped. */
export function fromJsonl(line) {
  const obj = JSON.parse(line);
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) throw new Error("is not a JSON object");
  if (typeof obj.PartitionKey !== "string" || typeof obj.RowKey !== "string") {
    throw new Error("needs PartitionKey and RowKey strings");
  }
  const e = fromWire(obj);
  for (const p of e.props) {
    const why = check(p.type, p.value);
    if (why) throw new Error(`${p.name} (${p.type}) ${why}`);
  }
  return e;
}

function csvField(s) {
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/**
 * CSV as Azure Storage Explorer writes it: PartitionKey, RowKey, Timestamp,
 * then each property followed by a `Name@type` column.
 */
export function csvHeader(names) {
  return ["PartitionKey", "RowKey", "Timestamp", ...names.flatMap((n) => [n, `${n}@type`])].map(csvField).join(",");
}

export function csvRow(entity, names) {
  const byName = new Map(entity.props.map((p) => [p.name, p]));
  const cells = [entity.pk, entity.rk, entity.timestamp];
  for (const n of names) {
    const p = byName.get(n);
    cells.push(p ? p.value : "", p ? `Edm.${p.type}` : "");
  }
  return cells.map(csvField).join(",");
}

/** RFC 4180 records of `text`: arrays of fields, with each record's line number. */
export function* csvRecords(text) {
  let field = "", row = [], quoted = false, line = 1, start = 1;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { field += '"'; i++; }
      else if (c === '"') quoted = false;
      else { if (c === "\n") line++; field += c; }
    } else if (c === '"') quoted = true;
    else if (c === ",") { row.push(field); field = ""; }
    else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      row.push(field); field = "";
      if (row.length > 1 || row[0] !== "") yield { line: start, fields: row };
      row = []; line++; start = line;
    } else field += c;
  }
  row.push(field);
  if (row.length > 1 || row[0] !== "") yield { line: start, fields: row };
}

/** An entity from a CSV record under `header` (Storage Explorer's columns). */
export function fromCsv(header, fields) {
  const at = (name) => header.indexOf(name);
  if (at("PartitionKey") < 0 || at("RowKey") < 0) throw new Error("the header needs PartitionKey and RowKey");
  const props = [];
  header.forEach((name, i) => {
    if (SYSTEM.includes(name) || name.endsWith("@type")) return;
    const t = at(`${name}@type`);
    const type = t >= 0 ? (fields[t] || "").replace(/^Edm\./, "") : "String";
    if (t >= 0 && fields[t] === "" && (fields[i] || "") === "") return; // absent in this row
    if (!TYPES.includes(type)) throw new Error(`${name}: unknown type ${fields[t]}`);
    const value = fields[i] || "";
    const why = check(type, value);
    if (why) throw new Error(`${name} (${type}) ${why}`);
    props.push({ name, type, value });
  });
  return { pk: fields[at("PartitionKey")] || "", rk: fields[at("RowKey")] || "", props };
}

/** An OData literal of `type` for a $filter. */
export function literal(type, text) {
  switch (type) {
    case "String": return `'${text.replaceAll("'", "''")}'`;
    case "Int64": return `${BigInt(text)}L`;
    case "Double": return /[.eE]|N|I/.test(text) ? text : `${text}.0`;
    case "DateTime": return `datetime'${text}'`;
    case "Guid": return `guid'${text}'`;
    case "Binary": return `X'${base64ToHex(text)}'`;
    default: return text;
  }
}
