// rtctl dashboard: frames from the websocket bridge (~30 Hz) -> TinyPlot canvases; e-stop (no token) and
// re-arm (with the control token typed into the page) buttons.
"use strict";
(function () {
  const $ = id => document.getElementById(id);
  const P = TinyPlot;
  const state = window.rtctl = { frames: 0, samples: 0, tripped: null, stale: false, replies: [], events: [], connected: false, joints: [] };
  const STALE_MS = 500;  // no fresh samples for this long (the bridge says so, or no frame came): the data is stale
  let freshAt = null;    // performance.now() when the newest samples reached the bridge (from each frame's age)
  const pos = new P.LinePlot($("pos"), { title: "joint position q vs desired q_d", ylabel: "rad or m" });
  const err = new P.LinePlot($("err"), { title: "tracking error q_d - q", ylabel: "rad or m" });
  const eff = new P.LinePlot($("eff"), { title: "commanded effort", ylabel: "N m or N" });
  const hist = new P.BarPlot($("hist"), { title: "loop wake-up latency histogram (all samples)", xlabel: "us" });
  state.plots = { pos, err, eff, hist };
  let joint = 0, ws = null, dirty = false;

  function setJoints(names) {
    if (JSON.stringify(names) === JSON.stringify(state.joints)) return;
    state.joints = names;
    const sel = $("joint"); sel.innerHTML = "";
    names.forEach((n, i) => { const o = document.createElement("option"); o.value = i; o.textContent = n; sel.appendChild(o); });
    sel.value = joint = 0;
    resetPos();
    err.setSeries(names.map(n => ({ label: n })));
    eff.setSeries(names.map(n => ({ label: n })));
  }
  function resetPos() {
    const n = state.joints[joint] || "joint";
    pos.setSeries([{ label: n + " q", color: P.COLORS[0] }, { label: n + " q_d", color: P.COLORS[1], dash: [6, 4] }]);
  }
  $("joint").addEventListener("change", e => { joint = +e.target.value; resetPos(); });

  function col(rows, k) { return rows.map(r => r[k]); }
  function onFrame(f) {
    if (!state.joints.length && f.q.length) setJoints(f.q[0].map((_, i) => "j" + i));
    const n = state.joints.length;
    if (f.t.length && n) {
      pos.push(f.t, [col(f.q, joint), col(f.q_d, joint)]);
      err.push(f.t, [...Array(n).keys()].map(k => col(f.error, k)));
      eff.push(f.t, [...Array(n).keys()].map(k => col(f.effort_cmd, k)));
    }
    hist.set(f.hist_edges_us, f.hist);
    state.frames++; state.samples = f.samples; state.tripped = !!f.tripped;
    if (typeof f.age === "number") freshAt = performance.now() - 1000 * f.age;
    showSafety();
    $("info").textContent = `t = ${f.t_now.toFixed(2)} s · ${f.samples} samples · lost ${f.lost} · ring drops ${f.publisher_dropped} · browser drops ${f.client_drops} · bridge drops ${f.bridge_drops}`;
    for (const e of f.events) {
      state.events.push(e);
      const d = document.createElement("div"); d.textContent = `[${e.kind}] cycle ${e.cycle}: ${e.detail}`; $("events").prepend(d);
    }
    dirty = true;
  }
  // The safety state as last received; greyed out and marked STALE once the newest samples are older than STALE_MS,
  // whether the bridge says so (the loop or its publisher stopped) or no frame arrives at all (the bridge stopped).
  function showSafety() {
    if (state.tripped === null || freshAt === null) return;
    const age = performance.now() - freshAt;
    state.stale = age > STALE_MS;
    const shown = state.tripped ? "SAFE STATE: TRIPPED" : "ARMED";
    const b = $("safety");
    b.textContent = state.stale ? `STALE: no data for ${(age / 1000).toFixed(1)} s (last: ${shown})` : shown;
    b.className = state.stale ? "stale" : state.tripped ? "tripped" : "armed";
  }
  setInterval(showSafety, 100);
  function connect() {
    ws = new WebSocket(`ws://${location.host}/ws`);
    ws.onopen = () => { state.connected = true; $("info").textContent = "connected, waiting for telemetry..."; };
    ws.onclose = () => { state.connected = false; $("info").textContent = "disconnected; retrying..."; setTimeout(connect, 1000); };
    ws.onmessage = ev => {
      const m = RtctlJson.parse(ev.data);
      if (m.type === "frame") onFrame(m);
      else if (m.type === "meta") setJoints(m.meta.joints || []);
      else if (m.type === "reply") { state.replies.push(m); $("reply").textContent = `${m.cmd}: ${m.ok ? "ok" : "refused: " + m.error}`; }
    };
  }
  function send(command) { if (ws && ws.readyState === 1) ws.send(JSON.stringify(command)); }
  // The token stays in the password field: never in storage, the URL or window.rtctl.
  function withToken(command) { const token = $("token").value; return token ? { ...command, token } : command; }
  $("estop").addEventListener("click", () => send({ cmd: "estop" }));
  $("rearm").addEventListener("click", () => send(withToken({ cmd: "rearm" })));
  function render() {
    if (dirty) { pos.draw(); err.draw(); eff.draw(); hist.draw(); dirty = false; state.drawn = { pos: pos.pointsDrawn, err: err.pointsDrawn, eff: eff.pointsDrawn, hist: hist.barsDrawn }; }
    requestAnimationFrame(render);
  }
  connect(); requestAnimationFrame(render);
})();
