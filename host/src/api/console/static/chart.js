// Line charts as inline SVG, drawn here (no library): one or more series over
// the same x labels, with a text alternative for screen readers.

const NS = "http://www.w3.org/2000/svg";
const COLOURS = ["#0b5cad", "#a4161a", "#1a7f37", "#8250df", "#bc4c00"];

function s(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

// series: [{name, values: [number|null]}]; labels: x-axis texts (same length).
export function lineChart(title, labels, series, { width = 440, height = 180 } = {}) {
  const pad = { l: 44, r: 14, t: 10, b: 24 };
  const all = series.flatMap((x) => x.values).filter((v) => v !== null && Number.isFinite(v));
  const max = Math.max(1, ...all);
  const n = Math.max(1, labels.length - 1);
  const x = (i) => pad.l + ((width - pad.l - pad.r) * i) / n;
  const y = (v) => height - pad.b - ((height - pad.t - pad.b) * v) / max;
  const summary = series.map((x) => `${x.name}: total ${x.values.reduce((a, b) => a + (b || 0), 0)}, peak ${Math.max(0, ...x.values.filter(Number.isFinite))}`).join("; ");
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `${title}. ${summary}` });
  svg.append(s("title", {}, title));
  for (const f of [0, 0.5, 1]) {
    const v = max * f;
    svg.append(s("line", { x1: pad.l, x2: width - pad.r, y1: y(v), y2: y(v), stroke: "#d0d7de" }));
    svg.append(s("text", { x: pad.l - 6, y: y(v) + 4, "text-anchor": "end" }, Number.isInteger(v) ? v : v.toFixed(1)));
  }
  const ticks = Math.min(labels.length, 5);
  for (let k = 0; k < ticks; k++) {
    const i = ticks === 1 ? 0 : Math.round((k * (labels.length - 1)) / (ticks - 1));
    // The end labels are anchored inward so they are not cut at the edges.
    const anchor = k === 0 ? "start" : k === ticks - 1 ? "end" : "middle";
    svg.append(s("text", { x: x(i), y: height - 8, "text-anchor": anchor }, labels[i]));
  }
  series.forEach((ser, k) => {
    const colour = COLOURS[k % COLOURS.length];
    let d = "";
    ser.values.forEach((v, i) => {
      if (v === null || !Number.isFinite(v)) return;
      d += `${d ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
    });
    if (d) svg.append(s("path", { d, fill: "none", stroke: colour, "stroke-width": 2 }));
    ser.values.forEach((v, i) => {
      if (v && Number.isFinite(v)) svg.append(s("circle", { cx: x(i), cy: y(v), r: 2.5, fill: colour }));
    });
  });
  const legend = document.createElement("p");
  legend.className = "muted";
  legend.textContent = series.map((x, k) => `${["blue", "red", "green", "purple", "orange"][k % 5]}: ${x.name}`).join(" · ");
  const fig = document.createElement("figure");
  const cap = document.createElement("figcaption");
  cap.textContent = title;
  fig.append(cap, svg, legend);
  return fig;
}
