// Inline SVG charts: a sparkline of one series, the stacked traffic
// share of a contract's releases over time, a release's reliability
// diagram and the trend of one of its outcome figures.

/** One sample of a contract's traffic: each release's share and phase-in. */
export interface ContractPoint { t: number; releases: Record<string, { share: number; phase_in_pct: number }> }

const SVG = "http://www.w3.org/2000/svg";

/** Colours of the series, in order. */
export const palette = ["#0969da", "#1a7f37", "#bf8700", "#cf222e", "#8250df", "#1b7c83", "#bc4c00", "#57606a"];

function svg(tag: string, attrs: Record<string, string | number>): SVGElement {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

/**
 * A sparkline of values (null: no figure, a gap) scaled from 0 to their
 * maximum, in a width x height box.
 */
export function sparkline(values: (number | null)[], width: number, height: number, color: string): SVGElement {
  const box = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  box.append(svg("line", { x1: 0, y1: height - 0.5, x2: width, y2: height - 0.5, stroke: "#dde1e4" }));
  const max = Math.max(0, ...values.filter((v): v is number => v !== null && isFinite(v)));
  const n = values.length;
  if (n === 0) return box;
  const x = (i: number) => (n === 1 ? width : (i / (n - 1)) * width);
  const y = (v: number) => height - 1 - (max > 0 ? (v / max) * (height - 3) : 0);
  let d = "";
  let pen = false;
  values.forEach((v, i) => {
    if (v === null || !isFinite(v)) {
      pen = false;
      return;
    }
    d += `${pen ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
    pen = true;
  });
  if (d) box.append(svg("path", { d, fill: "none", stroke: color, "stroke-width": 1.5, "stroke-linejoin": "round" }));
  return box;
}

/**
 * The traffic share of each release of a contract over time, stacked (the
 * shares add up to 1), with the phase-in of each drawn as a dashed line;
 * releases are coloured in the order given.
 */
export function shareChart(points: ContractPoint[], releases: string[], width: number, height: number): SVGElement {
  const pad = { l: 34, r: 6, t: 6, b: 18 };
  const w = width - pad.l - pad.r;
  const h = height - pad.t - pad.b;
  const box = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "share-chart", role: "img" });
  const axis = svg("g", { stroke: "#dde1e4", "font-size": 10, fill: "#66727a" });
  for (const f of [0, 0.5, 1]) {
    const yy = pad.t + h - f * h;
    axis.append(svg("line", { x1: pad.l, y1: yy, x2: pad.l + w, y2: yy }));
    const label = svg("text", { x: pad.l - 4, y: yy + 3, "text-anchor": "end", stroke: "none" });
    label.textContent = `${f * 100}%`;
    axis.append(label);
  }
  box.append(axis);
  if (points.length === 0) return box;
  const t0 = points[0].t;
  const t1 = points[points.length - 1].t;
  const x = (t: number) => pad.l + (t1 > t0 ? ((t - t0) / (t1 - t0)) * w : w);
  const y = (f: number) => pad.t + h - Math.min(Math.max(f, 0), 1) * h;
  const below = points.map(() => 0);
  releases.forEach((rel, ri) => {
    const color = palette[ri % palette.length];
    const top = points.map((p, i) => below[i] + (p.releases[rel]?.share ?? 0));
    let d = "";
    points.forEach((p, i) => { d += `${i === 0 ? "M" : "L"}${x(p.t).toFixed(1)},${y(top[i]).toFixed(1)}`; });
    for (let i = points.length - 1; i >= 0; i--) d += `L${x(points[i].t).toFixed(1)},${y(below[i]).toFixed(1)}`;
    box.append(svg("path", { d: `${d}Z`, fill: color, "fill-opacity": 0.55, stroke: color, "stroke-width": 1, "data-release": rel }));
    let phase = "";
    points.forEach((p, i) => { phase += `${i === 0 ? "M" : "L"}${x(p.t).toFixed(1)},${y((p.releases[rel]?.phase_in_pct ?? 0) / 100).toFixed(1)}`; });
    box.append(svg("path", { d: phase, fill: "none", stroke: color, "stroke-width": 1, "stroke-dasharray": "3 3" }));
    top.forEach((v, i) => { below[i] = v; });
  });
  const span = svg("text", { x: pad.l + w, y: height - 4, "text-anchor": "end", "font-size": 10, fill: "#66727a" });
  span.textContent = `last ${Math.round((t1 - t0) / 1000)} s`;
  box.append(span);
  return box;
}

/** One calibration bin of a servable's outcome figures (see main.ts). */
export interface ReliabilityBin {
  lower: number; upper: number; count: number;
  mean_prediction: number | null; observed_rate: number | null;
}

/**
 * A reliability diagram: for each calibration bin with predictions, its
 * observed rate against its mean prediction (a dot whose area grows with
 * the bin's count), joined in order, over the diagonal where a calibrated
 * model's bins lie; both axes from 0 to 1.
 */
export function reliabilityDiagram(bins: ReliabilityBin[], size: number, color: string): SVGElement {
  const pad = { l: 28, r: 6, t: 6, b: 22 };
  const w = size - pad.l - pad.r;
  const h = size - pad.t - pad.b;
  const x = (p: number) => pad.l + Math.min(Math.max(p, 0), 1) * w;
  const y = (p: number) => pad.t + h - Math.min(Math.max(p, 0), 1) * h;
  const box = svg("svg", { width: size, height: size, viewBox: `0 0 ${size} ${size}`, class: "reliability", role: "img" });
  const axis = svg("g", { stroke: "#dde1e4", "font-size": 10, fill: "#66727a" });
  for (const f of [0, 0.5, 1]) {
    axis.append(svg("line", { x1: pad.l, y1: y(f), x2: pad.l + w, y2: y(f) }));
    axis.append(svg("line", { x1: x(f), y1: pad.t, x2: x(f), y2: pad.t + h }));
    const ly = svg("text", { x: pad.l - 4, y: y(f) + 3, "text-anchor": "end", stroke: "none" });
    ly.textContent = `${f}`;
    const lx = svg("text", { x: x(f), y: pad.t + h + 11, "text-anchor": "middle", stroke: "none" });
    lx.textContent = `${f}`;
    axis.append(ly, lx);
  }
  const name = svg("text", { x: pad.l + w, y: size - 1, "text-anchor": "end", stroke: "none" });
  name.textContent = "predicted → observed ↑";
  axis.append(name);
  box.append(axis);
  box.append(svg("line", { x1: x(0), y1: y(0), x2: x(1), y2: y(1), stroke: "#8c959f", "stroke-dasharray": "4 3", class: "diagonal" }));
  const used = bins.map((b, i) => ({ b, i })).filter(({ b }) => b.count > 0 && b.mean_prediction !== null && b.observed_rate !== null);
  const most = Math.max(1, ...used.map(({ b }) => b.count));
  let d = "";
  used.forEach(({ b }, k) => { d += `${k === 0 ? "M" : "L"}${x(b.mean_prediction as number).toFixed(1)},${y(b.observed_rate as number).toFixed(1)}`; });
  if (d) box.append(svg("path", { d, fill: "none", stroke: color, "stroke-width": 1.5 }));
  for (const { b, i } of used) {
    const dot = svg("circle", { cx: x(b.mean_prediction as number).toFixed(1), cy: y(b.observed_rate as number).toFixed(1),
      r: (2 + 4 * Math.sqrt(b.count / most)).toFixed(1), fill: color, "fill-opacity": 0.8, "data-bin": i });
    const tip = svg("title", {});
    tip.textContent = `[${b.lower}, ${b.upper}): ${b.count} predictions, mean ${(b.mean_prediction as number).toFixed(4)}, observed ${(b.observed_rate as number).toFixed(4)}`;
    dot.append(tip);
    box.append(dot);
  }
  return box;
}

/**
 * A trend of values over time (null: no figure, a gap), scaled from their
 * minimum to their maximum, so that small changes of a figure near 1 (a
 * calibration, an AUC) show.
 */
export function trendline(values: (number | null)[], width: number, height: number, color: string): SVGElement {
  const box = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", class: "trend", "data-points": values.length });
  box.append(svg("line", { x1: 0, y1: height - 0.5, x2: width, y2: height - 0.5, stroke: "#dde1e4" }));
  const known = values.filter((v): v is number => v !== null && isFinite(v));
  if (known.length === 0) return box;
  const lo = Math.min(...known);
  const hi = Math.max(...known);
  const n = values.length;
  const x = (i: number) => (n === 1 ? width / 2 : (i / (n - 1)) * (width - 4) + 2);
  const y = (v: number) => (hi > lo ? height - 3 - ((v - lo) / (hi - lo)) * (height - 6) : height / 2);
  let d = "";
  let pen = false;
  values.forEach((v, i) => {
    if (v === null || !isFinite(v)) {
      pen = false;
      return;
    }
    d += `${pen ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
    pen = true;
  });
  box.append(svg("path", { d, fill: "none", stroke: color, "stroke-width": 1.5, "stroke-linejoin": "round" }));
  values.forEach((v, i) => {
    if (v !== null && isFinite(v)) box.append(svg("circle", { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 1.8, fill: color }));
  });
  return box;
}
