// Grove's web console: polls GET /v1/console (and /v1/audit, /v1/cluster
// when the server has them) with the tab's token, and draws what they say.
// No framework, no external resource: DOM calls and inline SVG charts.

import { sparkline, shareChart, palette, reliabilityDiagram, trendline } from "./charts";
import type { ContractPoint, ReliabilityBin } from "./charts";

const POLL_MS = 2000;
const AUDIT_EVERY = 5; // polls between two audit listings
const TOKEN_KEY = "grove-console-token";

// Shapes of the JSON the server answers (the fields the console reads).
interface ModelStatus {
  model_path: string; state: string; checksum?: string; runtime?: string; version?: number;
  version_of?: string; replicas?: number; served: number; crashes: number; updating?: boolean;
  last_error?: string; registered?: boolean; on_demand?: boolean; memory_bytes?: number;
}
// The memory budget and the on-demand models (docs/density.md).
interface MemoryStatus {
  budget_bytes: number; used_bytes: number; load_policy: string; loaded: number; unloaded: number;
  unload_order: string[] | null;
}
interface ConfigStatus {
  source: string; poll_interval: string; last_poll?: string; last_success?: string;
  last_error?: string; last_error_at?: string; models: number;
}
interface PredictionLog {
  topic: string; encoding: string; embedded: boolean; buffered: number; buffered_bytes: number;
  delivered: number; failed: number; dropped: number; last_error?: string; last_error_at?: string;
}
interface ClusterSection {
  node: string; controller: string; draining: boolean;
  models: { model_path: string; placed_on: string[]; ready_on: string[] }[];
}
interface Status {
  ready: boolean; config: ConfigStatus; models: ModelStatus[];
  prediction_log?: PredictionLog; cluster?: ClusterSection; memory?: MemoryStatus;
}
interface CompareWindow {
  executions: number; errors: number; error_rate: number; champion_failed: number;
  p50_ratio: number; p99_ratio: number; mean_abs_diff: number; max_abs_diff: number;
  within_tolerance: number; agreement?: number; mismatches: number;
}
interface Comparison { tolerance: number; n: number; since_start: CompareWindow; last_n: CompareWindow; last_5m: CompareWindow }
// A servable's outcome figures (Grove.outcomes of the contract stats):
// binary windows have the first group of figures, numeric ones mae, rmse
// and bias; null is undefined.
interface OutcomeFigures {
  count: number; positives?: number; mean_prediction?: number | null; observed_rate?: number | null;
  calibration?: number | null; ece?: number | null; bins?: ReliabilityBin[]; logloss?: number | null;
  brier?: number | null; auc?: number | null; mae?: number | null; rmse?: number | null; bias?: number | null;
}
interface VsChampion {
  n: number; n_champion?: number; method: string; logloss_delta: number | null; ci95: [number, number] | null; auc_delta: number | null;
}
interface OutcomeSample { t: string; count: number; logloss: number | null; auc: number | null; calibration: number | null }
interface Outcomes { since_valid: OutcomeFigures; last_1h: OutcomeFigures; vs_champion?: VsChampion; history?: OutcomeSample[] }
interface Servable {
  release_version: string; model_path: string; ready: boolean; valid: boolean; expired: boolean; reason?: string;
  phase_in_pct: number; traffic_share: number; served: number; shadow_executions: number; shadow_dropped: number;
  latency: { count: number; p50_ms: number; p99_ms: number };
  gate?: { state: string; detail?: string }; comparison?: Comparison; outcomes?: Outcomes;
}
interface ModelPoint { t: number; rps: number; p50_ms: number | null; p99_ms: number | null; queue: number; inflight: number }
interface ConsoleDoc {
  time: string; interval_ms: number; status: Status;
  contracts: { id: string; router?: string; servables: Servable[] | null; error?: string }[];
  model_series: Record<string, ModelPoint[]>; contract_series: Record<string, ContractPoint[]>;
  caller_roles?: string[];
}
interface AuditEntry {
  id: string; time: string; who: string; auth: string; api: string; route: string;
  target?: string; result: string; status?: string; error?: string;
}
interface ClusterStatus {
  node: string; controller: string; term: number;
  members: { name: string; advertise: string; budget_bytes: number; free_bytes: number; draining: boolean; models: unknown[] }[];
}

// ---- DOM helpers ----

type Child = Node | string | number | null | undefined | false;

function el(tag: string, attrs: Record<string, string> = {}, ...children: Child[]): HTMLElement {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function byId(id: string): HTMLElement {
  const e = document.getElementById(id);
  if (!e) throw new Error(`no element #${id}`);
  return e;
}

function fill(section: string, ...children: Child[]): void {
  const body = byId(section).querySelector(".body") as HTMLElement;
  body.replaceChildren(...children.filter((c): c is Node | string => c !== null && c !== undefined && c !== false).map((c) => (c instanceof Node ? c : String(c))));
}

function table(head: string[], rows: Child[][], numeric: Set<number> = new Set()): HTMLElement {
  return el("table", {},
    el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows.map((r) => el("tr", {}, ...r.map((c, i) => el("td", numeric.has(i) ? { class: "num" } : {}, c))))));
}

function pill(text: string, kind: string): HTMLElement {
  return el("span", { class: `pill ${kind}` }, text);
}

function fmt(n: number | null | undefined, digits = 1): string {
  if (n === null || n === undefined || !isFinite(n)) return "–";
  return n.toFixed(digits);
}

function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? `${n} B` : `${n.toFixed(2)} ${units[i]}`;
}

function pct(n: number): string { return `${(n * 100).toFixed(1)} %`; }

function when(ts?: string): string {
  if (!ts) return "–";
  const d = new Date(ts);
  return isNaN(d.getTime()) ? ts : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

// ---- calls ----

class Unauthorized extends Error {}

let token = sessionStorage.getItem(TOKEN_KEY) ?? "";

async function getJSON<T>(path: string): Promise<{ status: number; body: T | null; text: string }> {
  const headers: Record<string, string> = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  const resp = await fetch(path, { headers, cache: "no-store" });
  const text = await resp.text();
  let body: T | null = null;
  try { body = JSON.parse(text) as T; } catch { /* not JSON: the text says why */ }
  return { status: resp.status, body, text };
}

function errorOf(r: { status: number; body: unknown; text: string }): string {
  const b = r.body as { error?: string } | null;
  return `HTTP ${r.status}: ${b?.error ?? r.text.trim()}`;
}

// ---- rendering ----

function renderConfig(c: ConfigStatus): void {
  fill("config", el("dl", { class: "kv" },
    el("dt", {}, "source"), el("dd", { class: "mono" }, c.source),
    el("dt", {}, "poll interval"), el("dd", {}, c.poll_interval),
    el("dt", {}, "models in force"), el("dd", {}, c.models),
    el("dt", {}, "last poll"), el("dd", {}, when(c.last_poll)),
    el("dt", {}, "last applied"), el("dd", {}, when(c.last_success)),
    el("dt", {}, "last error"), el("dd", {}, c.last_error
      ? el("span", { class: "error", id: "config-error" }, `${when(c.last_error_at)}: ${c.last_error}`)
      : el("span", { class: "muted" }, "none"))));
}

function spark(points: ModelPoint[], pick: (p: ModelPoint) => number | null, label: string, digits: number, color: string): HTMLElement {
  const vals = points.map(pick);
  let last: number | null = null;
  for (let i = vals.length - 1; i >= 0 && last === null; i--) last = vals[i];
  return el("span", { class: "spark", title: label }, sparkline(vals, 90, 22, color), el("span", { class: "v" }, fmt(last, digits)));
}

function mib(bytes: number): string {
  return `${(bytes / (1 << 20)).toFixed(1)} MiB`;
}

// memoryLine says what the loaded models take of the memory budget, how
// many on-demand models are loaded and unloaded, and the order the budget
// would unload them in.
function memoryLine(m: MemoryStatus): HTMLElement {
  const budget = m.budget_bytes > 0
    ? `${mib(m.used_bytes)} used of a ${mib(m.budget_bytes)} budget (${Math.round((100 * m.used_bytes) / m.budget_bytes)} %)`
    : `${mib(m.used_bytes)} counted, no budget`;
  const order = m.unload_order && m.unload_order.length > 0 ? m.unload_order.join(", ") : "–";
  return el("p", { id: "memory", "data-loaded": String(m.loaded), "data-unloaded": String(m.unloaded) },
    `Memory: ${budget} · on demand: ${m.loaded} loaded, ${m.unloaded} unloaded (load policy ${m.load_policy}) · unload order: `,
    el("span", { class: "mono" }, order));
}

function renderModels(models: ModelStatus[], series: Record<string, ModelPoint[]>, memory?: MemoryStatus): void {
  if (models.length === 0) {
    fill("models", el("p", { class: "muted" }, "No model configured."));
    return;
  }
  const rows = models.map((m) => {
    // An own property only: a model path may be "constructor" or "__proto__".
    const s = Object.prototype.hasOwnProperty.call(series, m.model_path) ? series[m.model_path] : [];
    const lat = el("span", {}, spark(s, (p) => p.p50_ms, "p50 ms", 2, palette[0]), " ", spark(s, (p) => p.p99_ms, "p99 ms", 2, palette[3]));
    const name = el("span", { class: "mono", "data-model": m.model_path }, m.model_path);
    return [
      name,
      el("span", { "data-state": m.state }, pill(m.state, m.state), m.on_demand ? el("span", { class: "muted" }, " on demand") : "",
        m.updating ? " updating" : "", m.last_error ? el("div", { class: "error" }, m.last_error) : null),
      m.version ? `${m.version}` : "–",
      m.checksum ? el("span", { class: "mono", title: m.checksum }, m.checksum.slice(0, 12)) : "–",
      m.runtime ?? "–",
      m.replicas ?? 0,
      m.served,
      spark(s, (p) => p.rps, "requests/s", 1, palette[1]),
      lat,
      spark(s, (p) => p.queue, "queue depth", 0, palette[2]),
    ] as Child[];
  });
  const tbl = table(["model path", "state", "version", "checksum", "runtime", "replicas", "served", "req/s", "p50 / p99 ms", "queue"], rows, new Set([5, 6]));
  fill("models", memory ? memoryLine(memory) : null, tbl);
}

function comparisonTable(c: Comparison): HTMLElement {
  const ws: [string, CompareWindow][] = [["since start", c.since_start], [`last ${c.n}`, c.last_n], ["last 5 min", c.last_5m]];
  const row = (name: string, f: (w: CompareWindow) => string): Child[] => [name, ...ws.map(([, w]) => f(w))];
  return table(["", ...ws.map(([n]) => n)], [
    row("executions", (w) => `${w.executions}`),
    row("error rate", (w) => pct(w.error_rate)),
    row("champion failed", (w) => `${w.champion_failed}`),
    row("p50 ratio", (w) => fmt(w.p50_ratio, 2)),
    row("p99 ratio", (w) => fmt(w.p99_ratio, 2)),
    row("mean |diff|", (w) => fmt(w.mean_abs_diff, 5)),
    row("max |diff|", (w) => fmt(w.max_abs_diff, 5)),
    row(`within ${c.tolerance}`, (w) => pct(w.within_tolerance)),
    row("agreement", (w) => (w.agreement === undefined ? "–" : pct(w.agreement))),
    row("mismatches", (w) => `${w.mismatches}`),
  ], new Set([1, 2, 3]));
}

// outcomePanel is a release's outcome figures: its reliability diagram
// (since it became valid), its figures since valid and over the last
// hour, its comparison with the champion, and its log loss, AUC and
// calibration over the last hour (the server's samples, one a minute).
function outcomePanel(s: Servable, o: Outcomes, color: string): HTMLElement {
  const sv = o.since_valid;
  const h1 = o.last_1h;
  const row = (name: string, f: (w: OutcomeFigures) => string): Child[] => [name, f(sv), f(h1)];
  const rows: Child[][] = [row("scored", (w) => `${w.count}`)];
  if (sv.bins) {
    rows.push(row("positives", (w) => `${w.positives ?? 0}`), row("log loss", (w) => fmt(w.logloss, 4)), row("AUC", (w) => fmt(w.auc, 4)),
      row("calibration", (w) => fmt(w.calibration, 3)), row("ECE", (w) => fmt(w.ece, 4)), row("Brier", (w) => fmt(w.brier, 4)),
      row("mean prediction", (w) => fmt(w.mean_prediction, 4)), row("observed rate", (w) => fmt(w.observed_rate, 4)));
  } else {
    rows.push(row("MAE", (w) => fmt(w.mae, 4)), row("RMSE", (w) => fmt(w.rmse, 4)), row("bias", (w) => fmt(w.bias, 4)));
  }
  const vs = o.vs_champion;
  const history = o.history ?? [];
  const trend = (name: string, pick: (p: OutcomeSample) => number | null, digits: number) => {
    let last: number | null = null;
    for (let i = history.length - 1; i >= 0 && last === null; i--) last = pick(history[i]);
    return el("div", { class: "spark", "data-trend": name }, el("span", { class: "muted" }, name),
      trendline(history.map(pick), 120, 26, color), el("span", { class: "v" }, fmt(last, digits)));
  };
  const span = history.length > 1
    ? `${Math.round((Date.parse(history[history.length - 1].t) - Date.parse(history[0].t)) / 60000)} min`
    : "one sample";
  return el("div", { class: "outcome", "data-outcomes": s.release_version, "data-count": `${sv.count}`, "data-history": `${history.length}` },
    el("h4", {}, el("span", { class: "mono" }, s.release_version), vs?.method === "paired" ? " (shadow)" : ""),
    el("div", { class: "outcome-body" },
      sv.bins ? reliabilityDiagram(sv.bins, 190, color) : null,
      table(["", "since valid", "last hour"], rows, new Set([1, 2]))),
    vs ? el("p", { class: "vs" }, `vs champion (${vs.method}, ${vs.n} predictions${vs.n_champion ? ` against ${vs.n_champion}` : ""}): `,
      `log loss Δ ${fmt(vs.logloss_delta, 4)}`, vs.ci95 ? ` [${fmt(vs.ci95[0], 4)}, ${fmt(vs.ci95[1], 4)}]` : "",
      `, AUC Δ ${fmt(vs.auc_delta, 4)}`) : null,
    sv.bins ? el("div", { class: "trends" }, el("span", { class: "muted" }, `since valid, over ${span}:`),
      trend("log loss", (p) => p.logloss, 4), trend("AUC", (p) => p.auc, 4), trend("calibration", (p) => p.calibration, 3)) : null);
}

function renderContracts(doc: ConsoleDoc): void {
  if (doc.contracts.length === 0) {
    fill("contracts", el("p", { class: "muted" }, "No contract configured."));
    return;
  }
  const cards = doc.contracts.map((c) => {
    const servables = c.servables ?? [];
    const releases = servables.map((s) => s.release_version);
    const points = doc.contract_series[c.id] ?? [];
    const legend = el("div", { class: "legend" }, ...releases.map((r, i) => {
      const swatch = el("span", { class: "swatch" });
      swatch.style.background = palette[i % palette.length]; // CSSOM: the CSP refuses style attributes
      return el("span", {}, swatch, r);
    }));
    const rows = servables.map((s) => [
      el("span", { class: "mono" }, s.release_version),
      el("span", { class: "mono" }, s.model_path),
      el("span", {}, s.expired ? pill("expired", "bad") : s.valid ? pill("valid", "ok") : pill("not valid", "warn"), " ",
        s.ready ? "" : pill("not ready", "warn"), s.reason ? el("span", { class: "muted" }, ` ${s.reason}`) : null),
      pct(s.traffic_share),
      `${fmt(s.phase_in_pct, 0)} %`,
      s.served,
      s.latency.count ? `${fmt(s.latency.p50_ms, 2)} / ${fmt(s.latency.p99_ms, 2)}` : "–",
      `${s.shadow_executions}${s.shadow_dropped ? ` (${s.shadow_dropped} dropped)` : ""}`,
      s.gate ? `${s.gate.state}${s.gate.detail ? `: ${s.gate.detail}` : ""}` : "–",
    ] as Child[]);
    const comparisons = servables.filter((s) => s.comparison).map((s) =>
      el("div", { "data-comparison": s.release_version, "data-executions": `${s.comparison?.since_start.executions ?? 0}` },
        el("h3", {}, `Champion–challenger: ${s.release_version} (shadow) against the answers callers got`),
        comparisonTable(s.comparison as Comparison)));
    const judged = servables.filter((s) => s.outcomes);
    const outcomes = judged.length === 0 ? null : el("div", {},
      el("h3", {}, "Outcomes: the predictions against what happened (the evaluator's figures)"),
      el("div", { class: "outcomes" }, ...judged.map((s) =>
        outcomePanel(s, s.outcomes as Outcomes, palette[releases.indexOf(s.release_version) % palette.length]))));
    return el("div", { class: "contract", "data-contract": c.id },
      el("h3", {}, el("span", { class: "mono" }, c.id), c.router ? el("span", { class: "muted" }, ` router ${c.router}`) : null),
      c.error ? el("p", { class: "error" }, c.error) : null,
      el("div", { class: "chart" }, shareChart(points, releases, 520, 120), legend),
      table(["release", "model path", "validity", "share", "phase-in", "served", "p50 / p99 ms", "shadow executions", "gate"], rows, new Set([3, 4, 5])),
      ...comparisons, outcomes);
  });
  fill("contracts", ...cards);
}

function renderPredictionLog(p?: PredictionLog): void {
  if (!p) {
    fill("predlog", el("p", { class: "muted" }, "Off (no Kafka configured)."));
    return;
  }
  const health = p.dropped > 0 || p.failed > 0 ? pill("losing events", "bad") : pill("healthy", "ok");
  fill("predlog", el("dl", { class: "kv", "data-delivered": `${p.delivered}`, "data-dropped": `${p.dropped}` },
    el("dt", {}, "health"), el("dd", {}, health),
    el("dt", {}, "topic"), el("dd", { class: "mono" }, `${p.topic} (${p.encoding}${p.embedded ? ", embedded broker" : ""})`),
    el("dt", {}, "buffered"), el("dd", {}, `${p.buffered} events, ${bytes(p.buffered_bytes)}`),
    el("dt", {}, "delivered"), el("dd", {}, p.delivered),
    el("dt", {}, "failed"), el("dd", {}, p.failed),
    el("dt", {}, "dropped"), el("dd", {}, p.dropped),
    el("dt", {}, "last error"), el("dd", {}, p.last_error ? el("span", { class: "error" }, `${when(p.last_error_at)}: ${p.last_error}`) : "none")));
}

function renderCluster(c: ClusterSection | undefined, members: ClusterStatus | null): void {
  const section = byId("cluster");
  section.hidden = !c;
  if (!c) return;
  const placement = table(["model path", "placed on", "ready on"],
    c.models.map((m) => [
      el("span", { class: "mono", "data-placed": m.model_path, "data-ready-on": (m.ready_on ?? []).join(" ") }, m.model_path),
      (m.placed_on ?? []).join(", ") || "–", (m.ready_on ?? []).join(", ") || "–"]));
  const memberTable = members ? table(["member", "address", "memory budget", "free", "models", "draining"],
    (members.members ?? []).map((m) => [el("span", { "data-member": m.name }, m.name), el("span", { class: "mono" }, m.advertise),
      bytes(m.budget_bytes), bytes(m.free_bytes), (m.models ?? []).length, m.draining ? "yes" : "no"]),
    new Set([2, 3, 4])) : el("p", { class: "muted" }, "Members: GET /v1/cluster needs the manage role.");
  fill("cluster", el("dl", { class: "kv" },
    el("dt", {}, "this node"), el("dd", {}, c.node),
    el("dt", {}, "controller"), el("dd", {}, c.controller || "–"),
    el("dt", {}, "draining"), el("dd", {}, c.draining ? "yes" : "no")),
  el("h3", {}, "Placement"), placement, el("h3", {}, "Members"), memberTable);
}

function renderAudit(entries: AuditEntry[] | null, note: string): void {
  const section = byId("audit");
  section.hidden = entries === null && note === "";
  if (entries === null) {
    fill("audit", el("p", { class: "muted" }, note));
    return;
  }
  if (entries.length === 0) {
    fill("audit", el("p", { class: "muted" }, "No management write recorded in the last 24 hours."));
    return;
  }
  const rows = entries.slice(-25).reverse().map((e) => [
    when(e.time), `${e.who} (${e.auth})`, el("span", { class: "mono" }, e.route), e.target ?? "–",
    e.result === "ok" ? pill(e.status ?? "ok", "ok") : el("span", {}, pill(e.status ?? e.result, "bad"), " ", e.error ?? ""),
  ] as Child[]);
  fill("audit", table(["time", "who", "route", "target", "result"], rows));
}

// ---- the loop ----

let polls = 0;
let timer: number | undefined;
// run numbers the polling loops: a new token starts a new one, and a poll
// of an older loop still in flight when it did schedules nothing.
let run = 0;

function showError(msg: string): void {
  const e = byId("error");
  e.textContent = msg;
  e.hidden = msg === "";
}

function askToken(why: string): void {
  byId("auth").hidden = false;
  byId("auth-why").textContent = why;
  (byId("token") as HTMLInputElement).focus();
}

async function poll(): Promise<void> {
  const r = await getJSON<ConsoleDoc>("/v1/console");
  if (r.status === 401) throw new Unauthorized(errorOf(r));
  if (r.status === 403) throw new Unauthorized(`${errorOf(r)} (the console needs a token with the read role)`);
  if (r.status !== 200 || !r.body) throw new Error(`/v1/console: ${errorOf(r)}`);
  const doc = r.body;
  const ready = byId("ready");
  ready.textContent = doc.status.ready ? "ready" : "not ready";
  ready.className = `pill ${doc.status.ready ? "ready" : "warn"}`;
  byId("updated").textContent = `updated ${when(doc.time)}`;
  renderConfig(doc.status.config);
  renderModels(doc.status.models ?? [], doc.model_series, doc.status.memory);
  renderContracts(doc);
  renderPredictionLog(doc.status.prediction_log);

  let members: ClusterStatus | null = null;
  // GET /v1/cluster needs the manage role: asked for only when the
  // server says the token has it (or authenticates no one), so that a
  // read-only token is not refused, and the browser logs no error, on
  // every poll.
  if (doc.status.cluster && (doc.caller_roles === undefined || doc.caller_roles.includes("manage"))) {
    const c = await getJSON<ClusterStatus>("/v1/cluster");
    if (c.status === 200) members = c.body;
  }
  renderCluster(doc.status.cluster, members);

  if (polls % AUDIT_EVERY === 0) await pollAudit();
  polls++;
}

// The newest audit entries read, oldest first (at most AUDIT_KEPT): GET
// /v1/audit lists at most 1000 entries, the oldest since the time asked,
// and says when more follow (truncated). The page follows such a listing
// to its end, then asks only from a little before the newest entry it has
// (AUDIT_LATE_MS: another replica's entry may reach the trail after a
// newer one); ids tell the entries read again apart.
const AUDIT_KEPT = 25;
const AUDIT_LATE_MS = 60 * 1000;
let auditKept: AuditEntry[] = [];

async function pollAudit(): Promise<void> {
  const dayAgo = Date.now() - 24 * 3600 * 1000;
  const newest = auditKept.length > 0 ? Date.parse(auditKept[auditKept.length - 1].time) - AUDIT_LATE_MS : dayAgo;
  let since = new Date(Math.max(dayAgo, newest)).toISOString();
  for (;;) {
    const a = await getJSON<{ entries: AuditEntry[]; truncated?: boolean }>(`/v1/audit?since=${encodeURIComponent(since)}`);
    if (a.status === 404) return renderAudit(null, "");
    if (a.status !== 200 || !a.body) return renderAudit(null, `The audit trail could not be read: ${errorOf(a)}`);
    const got = a.body.entries ?? [];
    const known = new Set(auditKept.map((e) => e.id));
    auditKept = auditKept.concat(got.filter((e) => !known.has(e.id)))
      .sort((x, y) => Date.parse(x.time) - Date.parse(y.time)).slice(-AUDIT_KEPT);
    const last = got.length > 0 ? got[got.length - 1].time : since;
    if (!a.body.truncated || last === since) break;
    since = last;
  }
  renderAudit(auditKept.filter((e) => Date.parse(e.time) >= dayAgo), "");
}

async function loop(mine: number): Promise<void> {
  window.clearTimeout(timer);
  try {
    await poll();
    if (mine !== run) return;
    showError("");
    byId("auth").hidden = true;
  } catch (err) {
    if (mine !== run) return;
    if (err instanceof Unauthorized) {
      askToken(err.message);
      return; // resumes when a token is given
    }
    showError(err instanceof Error ? err.message : String(err));
  }
  timer = window.setTimeout(() => void loop(mine), POLL_MS);
}

function restart(): void {
  run++;
  polls = 0;
  auditKept = [];
  void loop(run);
}

function setToken(t: string): void {
  token = t;
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
  byId("forget").hidden = !t;
}

async function start(): Promise<void> {
  byId("auth-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = byId("token") as HTMLInputElement;
    setToken(input.value.trim());
    input.value = "";
    restart();
  });
  byId("forget").addEventListener("click", () => {
    setToken("");
    run++;
    window.clearTimeout(timer);
    askToken("Token forgotten: enter one to go on.");
  });
  setToken(token);
  const cfg = await getJSON<{ auth_required: boolean }>("config.json");
  if (cfg.body?.auth_required && !token) {
    askToken("This server needs a token. It is kept for this tab only (sessionStorage) and sent as Authorization: Bearer with every call.");
    return;
  }
  restart();
}

void start();
