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
  new uPlot({
    width: width, height: 220,
    series: [{}, { label: "records added", stroke: "#0b5cad", fill: "rgba(11,92,173,0.12)", points: { show: points.length < 60 } }],
    axes: [{}, { size: 70 }],
  }, [points.map((p) => p[0]), points.map((p) => p[1])], element);
}
window.addEventListener("DOMContentLoaded", drawThroughput);
