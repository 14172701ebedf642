// Draws the dashboard's plots (plot.js of the folder given as argv[2]) on a stand-in canvas that records
// what is written on it, for the scenario in argv[3] ({"line": {"x": [...], "ys": [[...], ...]}} or
// {"bars": {"edges": [...], "counts": [...]}}), and prints, as JSON, the texts drawn and the filled rectangles.
"use strict";
const fs = require("fs");
const vm = require("vm");

const [folder, scenarioJson] = process.argv.slice(2);
const texts = [], rects = [];
const ctx = {
  fillStyle: "", strokeStyle: "", lineWidth: 1, font: "", textAlign: "",
  setTransform() {}, clearRect() {}, beginPath() {}, moveTo() {}, lineTo() {}, stroke() {}, strokeRect() {},
  save() {}, restore() {}, translate() {}, rotate() {}, rect() {}, clip() {}, setLineDash() {},
  fillText(text, x, y) { texts.push({ text, x, y }); },
  fillRect(x, y, w, h) { rects.push({ x, y, w, h, color: this.fillStyle }); },
};
const canvas = { clientWidth: 600, clientHeight: 300, width: 600, height: 300, getContext: () => ctx };
const sandbox = { devicePixelRatio: 1 };
sandbox.window = sandbox;
vm.createContext(sandbox);
vm.runInContext(fs.readFileSync(`${folder}/plot.js`, "utf8"), sandbox);
const P = sandbox.TinyPlot, scenario = JSON.parse(scenarioJson);
if (scenario.line) {
  const plot = new P.LinePlot(canvas, { title: "t" });
  plot.setSeries(scenario.line.ys.map((_, i) => ({ label: `s${i}` })));
  plot.push(scenario.line.x, scenario.line.ys);
  plot.draw();
} else {
  const plot = new P.BarPlot(canvas, { title: "h" });
  plot.set(scenario.bars.edges, scenario.bars.counts);
  plot.draw();
}
console.log(JSON.stringify({ texts, rects }));
