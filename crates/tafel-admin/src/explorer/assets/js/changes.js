// A table's changes, live: the change feed (GET /$changes, a Tafel server started
// with --change-retention) read through the same /api/ path as every other call,
// long-polling, newest first. Each line is one insert, merge, replace or delete
// with the entity as it stands after it.

import { TableError } from "./api.js";
import { h, fill } from "./ui.js";

const KEEP = 500; // rows shown; older ones drop off the bottom
const WAIT = "20"; // seconds a read waits for a change

/** Properties of an after-image, briefly: `Name=value` without the annotations. */
function brief(entity) {
  if (!entity) return "";
  return Object.entries(entity)
    .filter(([k]) => !k.includes("@") && !k.startsWith("odata.") && !["PartitionKey", "RowKey", "Timestamp"].includes(k))
    .map(([k, v]) => `${k}=${typeof v === "string" ? v.slice(0, 40) : JSON.stringify(v)}`)
    .join(" ");
}

export function renderChanges(root, api, table, { back }) {
  const body = h("tbody");
  const status = h("p.status#changes-status", { role: "status" }, "Waiting for changes…");
  let paused = false;
  const pause = h("button#changes-pause", {
    onclick: () => {
      paused = !paused;
      pause.textContent = paused ? "Resume" : "Pause";
      if (!paused) read();
    },
  }, "Pause");
  const from = h("select#changes-from", { "aria-label": "From" },
    h("option", { value: "latest" }, "from now"),
    h("option", { value: "" }, "from the oldest kept"));
  fill(root,
    h("div.toolbar", {}, h("h2", {}, `Changes to ${table}`), h("span.spacer"), from, pause,
      h("a#changes-back", { href: back }, "Back to entities")),
    status,
    h("div.grid-wrap", {}, h("table.grid#changes", {},
      h("thead", {}, h("tr", {}, ...["Position", "Time", "Operation", "PartitionKey", "RowKey", "After the change"].map((c) => h("th", {}, c)))),
      body)));
  let after = "latest";
  let generation = 0;
  from.addEventListener("change", () => {
    after = from.value;
    body.replaceChildren();
    generation++;
    read();
  });

  async function read() {
    const mine = ++generation;
    while (!paused && mine === generation && root.isConnected && root.contains(body)) {
      let r;
      try {
        r = await api.call("GET", "/$changes", {
          // Where "now" is, at once; then long polls from there.
          query: [["table", table], ["after", after], ["wait", after === "latest" ? "0" : WAIT]],
          accept: "application/x-ndjson",
        });
      } catch (e) {
        if (mine !== generation) return;
        const text = e instanceof TableError && e.code === "ChangeFeedNotEnabled"
          ? "This server keeps no change feed: start it with --change-retention (e.g. 24h) to see changes here."
          : `Reading the changes failed: ${e}`;
        status.textContent = text;
        return;
      }
      if (mine !== generation) return;
      const text = await r.text();
      after = r.headers.get("x-tafel-next-after") || after;
      for (const line of text.split("\n").filter((l) => l.trim())) {
        let c;
        try {
          c = JSON.parse(line);
        } catch {
          continue;
        }
        body.prepend(h("tr", { "data-op": c.op },
          h("td", {}, c.position), h("td", {}, c.time), h("td", {}, c.op),
          h("td", {}, c.PartitionKey ?? ""), h("td", {}, c.RowKey ?? ""), h("td.muted", {}, brief(c.entity))));
      }
      while (body.children.length > KEEP) body.lastChild.remove();
      status.textContent = `At position ${after} (the newest committed: ${r.headers.get("x-tafel-head") || "?"}); ${paused ? "paused" : "live"}.`;
    }
  }
  read();
}
