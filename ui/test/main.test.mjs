// Unit tests of the console page (src/main.ts) in Node, without a
// browser (test/page.mjs): `node --test test/main.test.mjs` in ui/.
import { test } from "node:test";
import assert from "node:assert/strict";
import { loadPage, consoleDoc } from "./page.mjs";

const MAX_LISTED = 1000; // logging/audit.MaxListed

// auditServer answers GET /v1/audit as logging/audit's Trail does: the
// entries at or after since, oldest first, at most MAX_LISTED, truncated
// when more follow.
function auditServer(entries) {
  return (path) => {
    const u = new URL(path, "http://grove");
    const since = Date.parse(u.searchParams.get("since"));
    const after = entries.filter((e) => Date.parse(e.time) >= since);
    return { status: 200, body: { entries: after.slice(0, MAX_LISTED), truncated: after.length > MAX_LISTED } };
  };
}

function serve(routes) {
  return (path) => {
    const p = new URL(path, "http://grove/ui/").pathname;
    if (p === "/ui/config.json") return { body: { auth_required: false } };
    const r = routes[p];
    return typeof r === "function" ? r(path) : r;
  };
}

test("an empty server renders with no error", async () => {
  const page = await loadPage(serve({ "/v1/console": { body: consoleDoc() } }));
  assert.equal(page.$("#error").hidden, true, page.$("#error").textContent);
  assert.match(page.$("#models").textContent, /No model configured/);
  assert.match(page.$("#contracts").textContent, /No contract configured/);
});

test("the audit trail shows the newest writes when the day holds more than one listing", async () => {
  // 1500 writes over the last 12 hours, one every 28.8 s: more than one
  // listing of GET /v1/audit holds.
  const now = Date.now();
  const entries = Array.from({ length: 1500 }, (_, i) => ({
    id: `r-${String(i).padStart(6, "0")}`,
    time: new Date(now - 12 * 3600 * 1000 + i * 28800).toISOString(),
    who: "release-bot", auth: "token", api: "manage",
    route: "POST /{org}/{project}/{n}/{rv}/metrics", target: `ads/pctr/1/v${i}`, result: "ok", status: "200",
  }));
  const page = await loadPage(serve({ "/v1/console": { body: consoleDoc() }, "/v1/audit": auditServer(entries) }));
  assert.equal(page.$("#error").hidden, true, page.$("#error").textContent);
  const rows = page.$$("#audit tbody tr");
  assert.equal(rows.length, 25);
  // Newest first: the first row is the last write, the 25th the 25th last.
  assert.equal(rows[0].children[3].textContent, "ads/pctr/1/v1499");
  assert.equal(rows[24].children[3].textContent, "ads/pctr/1/v1475");

  // A write made since is listed first at the next reading of the trail,
  // and another replica's that reached the trail late in its place.
  entries.push({ ...entries[1499], id: "r-new", time: new Date(now + 1000).toISOString(), target: "ads/pctr/1/vnew" });
  entries.push({ ...entries[1499], id: "r-late", time: new Date(Date.parse(entries[1499].time) - 10000).toISOString(), target: "ads/pctr/1/vlate" });
  for (let i = 0; i < 5; i++) await page.tick();
  const after = page.$$("#audit tbody tr").map((r) => r.children[3].textContent);
  assert.equal(after.length, 25);
  assert.deepEqual(after.slice(0, 4), ["ads/pctr/1/vnew", "ads/pctr/1/v1499", "ads/pctr/1/vlate", "ads/pctr/1/v1498"]);
});

test("a model named like a property of every object is shown, with no history yet", async () => {
  // A model path is any object path of the bucket: "constructor" and
  // "__proto__" are model paths too, and a model has no history until the
  // server has sampled its figures.
  const names = ["constructor", "__proto__", "toString", "hasOwnProperty"];
  const models = names.map((p) => ({ model_path: p, state: "ready", served: 0, crashes: 0 }));
  const page = await loadPage(serve({ "/v1/console": { body: consoleDoc({ status: { models } }) } }));
  assert.equal(page.$("#error").hidden, true, page.$("#error").textContent);
  assert.deepEqual(page.$$("#models [data-model]").map((e) => e.textContent), names);
});
