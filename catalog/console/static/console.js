// floe console: copy buttons, confirmations of destructive forms, and the throughput chart (uPlot).
"use strict";
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  const done = () => { button.textContent = "Copied"; setTimeout(() => { button.textContent = "Copy"; }, 1500); };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(source.innerText).then(done, () => selectText(source));
  } else {
    selectText(source);
  }
});
function selectText(element) {
  const range = document.createRange();
  range.selectNodeContents(element);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
}
document.addEventListener("submit", (event) => {
  const message = event.target.dataset.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});
function drawThroughput() {
  const element = document.querySelector('[data-chart="throughput"]');
  const data = document.getElementById("throughput-data");
  if (!element || !data || typeof uPlot === "undefined") return;
  const points = JSON.parse(data.textContent);
  const width = Math.max(280, element.clientWidth);
  // One point per append commit, oldest first; the x axis counts commits (a time axis collapses when
  // commits come seconds apart), the legend shows each commit's time.
  const xs = points.map((_, i) => i + 1);
  const times = points.map((p) => new Date(p[0] * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC");
  // Without a hovered point the legend describes the whole chart (uPlot's own placeholder is "--").
  const total = points.reduce((sum, p) => sum + p[1], 0);
  new uPlot({
    width: width, height: 220,
    scales: { x: { time: false } },
    series: [
      { label: "commit", value: (u, v) => (v == null ? `${points.length} shown, newest at ${times[times.length - 1]}` : `#${v} at ${times[v - 1]}`) },
      { label: "records added", value: (u, v) => (v == null ? `${total.toLocaleString("en")} in all` : v.toLocaleString("en")),
        stroke: "#0b5cad", fill: "rgba(11,92,173,0.12)", points: { show: points.length < 60 } },
    ],
    axes: [{ label: "commit (oldest to newest)", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000] }, { size: 70 }],
  }, [xs, points.map((p) => p[1])], element);
}
window.addEventListener("DOMContentLoaded", drawThroughput);
// The ingestion history (sampled by the catalog): records/s, and time lag with offset lag beside it.
function drawHistory() {
  const data = document.getElementById("history-data");
  if (!data || typeof uPlot === "undefined") return;
  const rows = JSON.parse(data.textContent);
  const times = rows.map((r) => r[0]);
  // Without a hovered point the legend shows the latest sample (uPlot's own placeholder is "--").
  const latest = (column) => (u, v) => {
    const value = v == null ? (rows.length ? rows[rows.length - 1][column] : null) : v;
    return value == null ? "none" : (v == null ? "latest " : "") + value.toLocaleString("en");
  };
  const when = { value: (u, v) => new Date((v == null ? times[times.length - 1] : v) * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC" };
  const charts = {
    throughput: {
      series: [when, { label: "records/s", value: latest(1), stroke: "#0b5cad", fill: "rgba(11,92,173,0.12)" }],
      axes: [{}, { size: 70 }],
      values: [rows.map((r) => r[1])],
    },
    lag: {
      scales: { records: {} },
      series: [when, { label: "time lag (s)", value: latest(2), stroke: "#a4161a" }, { label: "offset lag", value: latest(3), stroke: "#1a7f37", scale: "records" }],
      axes: [{}, { size: 70 }, { scale: "records", side: 1, size: 70, grid: { show: false } }],
      values: [rows.map((r) => r[2]), rows.map((r) => r[3])],
    },
  };
  for (const [name, chart] of Object.entries(charts)) {
    const element = document.querySelector(`[data-history="${name}"]`);
    if (!element) continue;
    new uPlot({
      width: Math.max(280, element.clientWidth), height: 200,
      scales: chart.scales || {}, series: chart.series, axes: chart.axes,
    }, [times, ...chart.values], element);
  }
}
window.addEventListener("DOMContentLoaded", drawHistory);
// The overview refreshes itself every 10 s; while keyboard focus is inside it, a refresh would throw
// the focus away, so it waits until focus leaves.
document.addEventListener("htmx:beforeRequest", (event) => {
  const region = event.detail.elt;
  if (region && region.id === "overview-rows" && region.contains(document.activeElement)) {
    event.preventDefault();
  }
});
