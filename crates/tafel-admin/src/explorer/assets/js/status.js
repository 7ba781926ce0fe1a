// The status page: version, backend, uptime, and request rates and latencies,
// read from the admin listener's own /metrics (Prometheus text).

import { h, fill } from "./ui.js";

const TOKEN = "tafel.adminToken";
const REFRESH_MS = 2000;

/** Samples of a Prometheus text exposition: [{ name, labels, value }]. */
export function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, "$1");
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

/** The q-quantile of a cumulative histogram's buckets [[le, count]], interpolated. */
export function quantile(buckets, q) {
  const total = buckets.length ? buckets[buckets.length - 1][1] : 0;
  if (!total) return NaN;
  const rank = q * total;
  let [lo, below] = [0, 0];
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (!Number.isFinite(le)) return lo;
      return lo + (le - lo) * ((rank - below) / Math.max(1, count - below));
    }
    [lo, below] = [le, count];
  }
  return lo;
}

function summarize(samples) {
  const one = (name) => (samples.find((s) => s.name === name) || {}).value;
  const info = samples.find((s) => s.name === "tafel_build_info") || { labels: {} };
  const ops = new Map();
  const op = (name) => {
    if (!ops.has(name)) ops.set(name, { requests: 0, errors: 0, buckets: [] });
    return ops.get(name);
  };
  for (const s of samples) {
    if (s.name === "tafel_requests_total") {
      const o = op(s.labels.operation);
      o.requests += s.value;
      if (/^[45]/.test(s.labels.status_class)) o.errors += s.value;
    } else if (s.name === "tafel_request_duration_seconds_bucket") {
      op(s.labels.operation).buckets.push([s.labels.le === "+Inf" ? Infinity : Number(s.labels.le), s.value]);
    }
  }
  return {
    version: info.labels.version, backend: info.labels.backend,
    started: one("process_start_time_seconds"), ready: one("tafel_ready"),
    connections: one("tafel_open_connections"), inFlight: one("tafel_requests_in_flight"),
    ops, at: performance.now(),
  };
}

const fmtMs = (s) => (Number.isFinite(s) ? (s * 1000 < 10 ? (s * 1000).toFixed(2) : (s * 1000).toFixed(0)) + " ms" : "—");

function uptime(started) {
  if (!started) return "—";
  let s = Math.max(0, Math.floor(Date.now() / 1000 - started));
  const d = Math.floor(s / 86400); s %= 86400;
  const hh = Math.floor(s / 3600); s %= 3600;
  return `${d ? d + " d " : ""}${hh} h ${Math.floor(s / 60)} min ${s % 60} s`;
}

export function renderStatus(main) {
  const cards = h("div.cards#status-cards", {}, h("div.card", {}, "Loading…"));
  const table = h("div.grid-wrap#status-ops");
  const note = h("p.hint", {}, "Latency percentiles are over the server's lifetime; rates over the last refresh.");
  fill(main, h("div.page", {}, h("h1", {}, "Status"), cards, h("h2", {}, "Requests by operation"), table, note));
  let last = null;
  let timer = null;

  async function tick() {
    if (!document.body.contains(cards)) return clearInterval(timer); // left the page
    const token = sessionStorage.getItem(TOKEN);
    const r = await fetch("/metrics", { headers: token ? { Authorization: `Bearer ${token}` } : {}, cache: "no-store" }).catch(() => null);
    if (!r || r.status === 401) {
      clearInterval(timer);
      return askToken(r ? "The admin listener asks for its token (--admin-token)." : "The admin listener does not answer.");
    }
    const now = summarize(parseMetrics(await r.text()));
    const secs = last ? (now.at - last.at) / 1000 : 0;
    const rate = (name) => (last && last.ops.has(name) && secs > 0 ? (now.ops.get(name).requests - last.ops.get(name).requests) / secs : NaN);
    const total = [...now.ops.values()].reduce((a, o) => a + o.requests, 0);
    const totalRate = last ? (total - [...last.ops.values()].reduce((a, o) => a + o.requests, 0)) / secs : NaN;
    const card = (label, value, id) => h("div.card", {}, h("div.label", {}, label), h("div.value", { id }, value));
    fill(cards,
      card("Version", now.version || "—", "status-version"), card("Backend", now.backend || "—", "status-backend"),
      card("Uptime", uptime(now.started), "status-uptime"), card("Ready", now.ready ? "yes" : "no", "status-ready"),
      card("Requests", total.toLocaleString(), "status-requests"),
      card("Requests/s", Number.isFinite(totalRate) ? totalRate.toFixed(1) : "…", "status-rate"),
      card("Connections", String(now.connections ?? "—")), card("In flight", String(now.inFlight ?? "—")));
    const ops = [...now.ops].filter(([, o]) => o.requests > 0).sort((a, b) => b[1].requests - a[1].requests);
    fill(table, h("table.grid", {},
      h("thead", {}, h("tr", {}, ["Operation", "Requests", "Per second", "Errors", "p50", "p95", "p99"].map((c) => h("th", {}, c)))),
      h("tbody", {}, ops.length ? ops.map(([name, o]) => h("tr", {}, h("td", {}, name), h("td.num", {}, o.requests.toLocaleString()),
        h("td.num", {}, Number.isFinite(rate(name)) ? rate(name).toFixed(1) : "…"), h("td.num", {}, o.errors.toLocaleString()),
        ...[0.5, 0.95, 0.99].map((q) => h("td.num", {}, fmtMs(quantile(o.buckets, q))))))
        : h("tr", {}, h("td.muted", { colspan: 7 }, "No requests yet.")))));
    last = now;
  }

  function askToken(why) {
    const input = h("input#admin-token", { type: "password", "aria-label": "Admin token", autocomplete: "off" });
    fill(cards, h("form.card", { onsubmit: (e) => { e.preventDefault(); sessionStorage.setItem(TOKEN, input.value); renderStatus(main); } },
      h("p", {}, why), input, h("button.primary", { type: "submit" }, "Show")));
  }

  tick();
  timer = setInterval(tick, REFRESH_MS);
}
