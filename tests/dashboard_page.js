// Runs the dashboard page's scripts (nonfinite.js and dashboard.js of the folder given as argv[2], the plots
// stood in for) in node with a stand-in DOM, websocket and clock, feeds them the frames of a scenario and prints,
// as JSON, the safety badge after each step. A step is {"frame": {...fields of a bridge frame...}} or
// {"wait_ms": N} (the clock moves, the page's timers run).
"use strict";
const fs = require("fs");
const vm = require("vm");

const [folder, stepsJson] = process.argv.slice(2);
let now = 0;
const timers = [];
const elements = {};
function element() {
  return { textContent: "", className: "", innerHTML: "", value: "", addEventListener() {}, appendChild() {},
           prepend() {} };
}
class Plot { constructor() {} setSeries() {} push() {} set() {} draw() {} }
let socket = null;
class WebSocket { constructor() { socket = this; this.readyState = 1; } send() {} }
const sandbox = {
  WebSocket, location: { host: "127.0.0.1:8050" }, performance: { now: () => now },
  document: { getElementById: id => elements[id] || (elements[id] = element()), createElement: element },
  setInterval: (f, ms) => timers.push({ f, ms, due: now + ms }), setTimeout: () => 0, requestAnimationFrame: () => 0,
  TinyPlot: { LinePlot: Plot, BarPlot: Plot, COLORS: [] },
};
sandbox.window = sandbox;   // as in a browser: the page's globals are window's
vm.createContext(sandbox);
for (const name of ["nonfinite.js", "dashboard.js"]) vm.runInContext(fs.readFileSync(`${folder}/${name}`, "utf8"), sandbox);

const FRAME = { type: "frame", t: [], q: [], q_d: [], error: [], effort_cmd: [], latency: [], hist_edges_us: [],
                hist: [], tripped: 0, t_now: 0, samples: 0, lost: 0, publisher_dropped: 0, client_drops: 0,
                bridge_drops: 0, events: [] };
const out = [];
for (const step of JSON.parse(stepsJson)) {
  if (step.frame) socket.onmessage({ data: JSON.stringify({ ...FRAME, ...step.frame }) });
  const end = now + (step.wait_ms || 0);
  for (let t = now; t <= end; t++) {   // 1 ms steps: each timer runs when due
    now = t;
    for (const timer of timers) if (now >= timer.due) { timer.due += timer.ms; timer.f(); }
  }
  const badge = elements.safety;
  out.push({ text: badge.textContent, cls: badge.className, stale: sandbox.rtctl.stale });
}
console.log(JSON.stringify(out));
