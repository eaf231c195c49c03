// Drives the console in headless Chromium (Debian's, never a downloaded
// browser) against a running grove, as it/console_test.go starts it:
//
//   GROVE_URL        the listener serving /ui/ (http://127.0.0.1:port)
//   GROVE_TOKEN      a token with the read role ("" when auth is off)
//   GROVE_CONFIG     the bucket's model config file, rewritten mid-test
//   GROVE_NEW_CONFIG a model config that adds GROVE_NEW_MODEL
//   GROVE_NEW_MODEL  the model path that must appear after the rewrite
//                    (optional)
//   GROVE_UNLOADED_MODEL  an on-demand model (GROVE_NEW_MODEL, say) that
//                    must show unloaded, with the memory budget's line
//                    counting it (optional)
//   GROVE_CONTRACT   a contract id whose share chart must render (optional)
//   GROVE_CLUSTER_NODE, GROVE_CLUSTER_MODEL  the node and a model the
//                    cluster section must show placed on it (optional)
//   GROVE_COMPARED   "id release": a shadow release whose comparison with
//                    the champion must show executions (optional)
//   GROVE_PREDICTION_LOG  "1": the prediction log must show deliveries
//   GROVE_OUTCOMES   "id release...": releases whose outcomes panel must
//                    show a reliability diagram (its diagonal and a dot per
//                    bin with predictions) and log loss, AUC and
//                    calibration over at least two samples (optional)
//   GROVE_AUDIT_ROUTE     a route the audit trail must list (optional)
//   GROVE_BREAK_CONFIG    "1": at the end, break GROVE_CONFIG's JSON: the
//                    config error must show
//   GROVE_SCREENSHOT where to write the page's screenshot (PNG)
//   CHROMIUM         the browser (default /usr/bin/chromium)
//
// It fails (exit 1, the reason on stderr) on any console error or page
// error, and prints one line per step done.
import { chromium } from "playwright-core";
import { copyFile, writeFile } from "node:fs/promises";

const env = (k, def) => {
  const v = process.env[k] ?? def;
  if (v === undefined) throw new Error(`${k} is not set`);
  return v;
};
const url = env("GROVE_URL");
const token = env("GROVE_TOKEN", "");
const step = (msg) => console.log(`ok: ${msg}`);

const browser = await chromium.launch({
  executablePath: env("CHROMIUM", "/usr/bin/chromium"),
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const problems = [];
// Closing the browser aborts the console's poll in flight: not a failure.
let closing = false;
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  // While a wrong token is tried, the browser's own report of the 401 is
  // expected; any other console error fails the test.
  let wrongTokenTried = false;
  page.on("console", (m) => {
    if (m.type() !== "error") return;
    if (wrongTokenTried && /status of 401/.test(m.text())) return;
    problems.push(`console error: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => {
    if (!closing) problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on("request", (r) => {
    if (!r.url().startsWith(url) && !r.url().startsWith("data:")) problems.push(`request off the server: ${r.url()}`);
  });
  const calls = [];
  page.on("request", (r) => { if (r.url().includes("/v1/console")) calls.push(r.headers()["authorization"] ?? ""); });
  let clusterCalls = 0;
  page.on("request", (r) => { if (new URL(r.url()).pathname === "/v1/cluster") clusterCalls++; });

  await page.goto(`${url}/ui/`, { waitUntil: "load" });
  step("page loaded");

  if (token) {
    await page.locator("#auth").waitFor({ state: "visible", timeout: 5000 });
    // A wrong token brings the form back with the server's reason.
    wrongTokenTried = true;
    await page.fill("#token", "not-a-token");
    await page.click("#auth-form button[type=submit]");
    await page.locator("#auth-why", { hasText: "unknown bearer token" }).waitFor({ timeout: 5000 });
    wrongTokenTried = false;
    step("a wrong token is refused and asked again");
    await page.fill("#token", token);
    await page.click("#auth-form button[type=submit]");
    await page.locator("#auth").waitFor({ state: "hidden", timeout: 5000 });
    const stored = await page.evaluate(() => sessionStorage.getItem("grove-console-token"));
    if (stored !== token) throw new Error(`the token is not kept in sessionStorage (found ${JSON.stringify(stored)})`);
    step("token entered and kept for the tab");
    // Kept for the tab: a reload lists the models with it, without
    // asking again.
    await page.reload({ waitUntil: "load" });
    await page.locator("[data-model]").first().waitFor({ timeout: 10000 });
    if (await page.locator("#auth").isVisible()) throw new Error("after a reload the console asks for the token again");
    step("the token survives a reload of the tab");
  }
  await page.locator("[data-model]").first().waitFor({ timeout: 10000 });
  step(`models listed: ${(await page.locator("[data-model]").allTextContents()).join(" ")}`);

  // A model added to the bucket's config appears within a poll (the
  // server's and the page's).
  const newModel = process.env.GROVE_NEW_MODEL;
  if (newModel) {
    if (await page.locator(`[data-model="${newModel}"]`).count() !== 0) throw new Error(`${newModel} is listed before it is configured`);
    await copyFile(env("GROVE_NEW_CONFIG"), env("GROVE_CONFIG"));
    const added = Date.now();
    await page.locator(`[data-model="${newModel}"]`).waitFor({ timeout: 15000 });
    step(`${newModel} appeared ${Date.now() - added} ms after the config changed`);
  }

  // An on-demand model no request loaded yet shows unloaded, and the
  // memory line gives the budget and counts it.
  const unloaded = process.env.GROVE_UNLOADED_MODEL;
  if (unloaded) {
    await page.locator(`#models tr:has([data-model="${unloaded}"]) [data-state="unloaded"]`, { hasText: "on demand" }).waitFor({ timeout: 10000 });
    await page.locator("#memory", { hasText: "MiB budget" }).waitFor({ timeout: 10000 });
    const n = Number(await page.locator("#memory").getAttribute("data-unloaded"));
    if (!(n >= 1)) throw new Error(`the memory line counts ${n} unloaded models`);
    step(`${unloaded} shows unloaded, the memory line ${await page.locator("#memory").textContent()}`);
  }

  // The contract's share chart renders, with an area per release, once
  // the history holds a few samples.
  const contract = process.env.GROVE_CONTRACT;
  if (contract) {
    const chart = page.locator(`[data-contract="${contract}"] svg.share-chart`);
    await chart.waitFor({ timeout: 10000 });
    await page.waitForFunction((id) => {
      const areas = document.querySelectorAll(`[data-contract="${id}"] svg.share-chart path[data-release]`);
      return areas.length > 0 && [...areas].some((a) => (a.getAttribute("d") ?? "").split("L").length > 4);
    }, contract, { timeout: 15000 });
    const releases = await chart.locator("path[data-release]").evaluateAll((ps) => ps.map((p) => p.getAttribute("data-release")));
    step(`share chart of ${contract} drawn for ${releases.join(", ")}`);
  }

  const node = process.env.GROVE_CLUSTER_NODE;
  if (node) {
    const model = env("GROVE_CLUSTER_MODEL");
    await page.locator("#cluster").waitFor({ state: "visible", timeout: 10000 });
    await page.locator(`#cluster [data-placed="${model}"][data-ready-on~="${node}"]`).waitFor({ timeout: 10000 });
    if (process.env.GROVE_CLUSTER_MEMBERS === "0") {
      // A token without manage: the members are not asked for (GET
      // /v1/cluster would be refused, and the browser log the refusal).
      await page.locator("#cluster", { hasText: "needs the manage role" }).waitFor({ timeout: 10000 });
      if (clusterCalls > 0) throw new Error(`GET /v1/cluster was called ${clusterCalls} times with a token that lacks manage`);
      step(`cluster: ${model} placed and ready on ${node}; members not asked for without manage`);
    } else {
      await page.locator(`#cluster [data-member="${node}"]`).waitFor({ timeout: 10000 });
      step(`cluster: ${model} placed and ready on ${node}, ${node} listed among the members`);
    }
  }

  const compared = process.env.GROVE_COMPARED;
  if (compared) {
    const [id, rel] = compared.split(" ");
    const cmp = page.locator(`[data-contract="${id}"] [data-comparison="${rel}"]`);
    await cmp.waitFor({ timeout: 10000 });
    await page.waitForFunction(([id, rel]) => {
      const e = document.querySelector(`[data-contract="${id}"] [data-comparison="${rel}"]`);
      return e !== null && Number(e.getAttribute("data-executions")) > 0;
    }, [id, rel], { timeout: 15000 });
    step(`champion-challenger comparison of ${id} ${rel}: ${await cmp.getAttribute("data-executions")} shadow executions compared`);
  }

  const outcomes = process.env.GROVE_OUTCOMES;
  if (outcomes) {
    const [id, ...rels] = outcomes.split(" ");
    for (const rel of rels) {
      const panel = page.locator(`[data-contract="${id}"] [data-outcomes="${rel}"]`);
      await panel.waitFor({ timeout: 10000 });
      await page.waitForFunction(([id, rel]) => {
        const e = document.querySelector(`[data-contract="${id}"] [data-outcomes="${rel}"]`);
        return e !== null && Number(e.getAttribute("data-history")) >= 2;
      }, [id, rel], { timeout: 15000 });
      const dots = await panel.locator("svg.reliability circle[data-bin]").count();
      const diagonal = await panel.locator("svg.reliability line.diagonal").count();
      if (dots < 3 || diagonal !== 1) throw new Error(`${id} ${rel}: the reliability diagram has ${dots} bins and ${diagonal} diagonals`);
      for (const trend of ["log loss", "AUC", "calibration"]) {
        const points = await panel.locator(`[data-trend="${trend}"] svg.trend circle`).count();
        if (points < 2) throw new Error(`${id} ${rel}: ${trend} over time has ${points} points, want 2`);
      }
      step(`outcomes of ${id} ${rel}: ${await panel.getAttribute("data-count")} scored, ${dots} reliability bins, figures over time`);
    }
  }

  if (process.env.GROVE_PREDICTION_LOG === "1") {
    await page.waitForFunction(() => Number(document.querySelector("[data-delivered]")?.getAttribute("data-delivered")) > 0,
      null, { timeout: 15000 });
    step(`prediction log: ${await page.locator("[data-delivered]").getAttribute("data-delivered")} events delivered`);
  }

  const audited = process.env.GROVE_AUDIT_ROUTE;
  if (audited) {
    await page.locator("#audit td", { hasText: audited }).first().waitFor({ timeout: 15000 });
    step(`audit trail lists ${audited}`);
  }

  // Sparklines are drawn for the models.
  const sparks = await page.locator("[data-model]").first().locator("xpath=ancestor::tr").locator(".spark svg").count();
  if (sparks < 4) throw new Error(`a model row has ${sparks} sparklines, want 4 (req/s, p50, p99, queue)`);
  step("sparklines drawn");

  if (process.env.GROVE_BREAK_CONFIG === "1") {
    await writeFile(env("GROVE_CONFIG"), '{"model_metadata": [');
    const shown = page.locator("#config-error");
    await shown.waitFor({ timeout: 15000 });
    step(`config error shown: ${await shown.textContent()}`);
  }

  const withToken = calls.filter((a) => a !== "Bearer not-a-token");
  if (token && (withToken.length === 0 || withToken.some((a) => a !== `Bearer ${token}`))) {
    throw new Error(`a /v1/console call went without the token: ${JSON.stringify(calls)}`);
  }
  await page.screenshot({ path: env("GROVE_SCREENSHOT"), fullPage: true });
  step("screenshot taken");
} catch (err) {
  problems.push(String(err?.stack ?? err));
} finally {
  closing = true;
  await browser.close();
}
if (problems.length > 0) {
  console.error(problems.join("\n"));
  process.exit(1);
}
