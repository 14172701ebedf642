// plot.js -- a tiny canvas plotter shipped with rtctl (no dependencies, no CDN).
// LinePlot: rolling time-series (x = control time, s) with autoscaled axes and a legend.
// BarPlot: a histogram from bin edges and counts (optionally log-scaled counts); one count more than bins
// is the overflow bin (everything above the last edge), drawn apart and labelled "≥ last edge".
"use strict";
(function (global) {
  const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                  "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"];

  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) { hi = lo + 1; }
    const span = hi - lo, raw = span / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(m => m * mag).find(s => span / s <= count) || 10 * mag;
    const ticks = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-12 * span; v += step) ticks.push(v);
    return ticks;
  }
  // A tick's label with the digits its axis's step needs, so neighbouring ticks never read alike
  // (0.6000005 and 0.6000010 on a joint that hardly moves; not "0.6 0.6 0.6").
  function fmt(v, step) {
    const a = Math.abs(v);
    if (a === 0) return "0";
    const digits = (n, lo) => Math.min(15, Math.max(lo, Math.ceil(n - 1e-9)));
    if (a < 1e-3 || a >= 1e4) return v.toExponential(step > 0 ? digits(Math.log10(a / step), 1) : 1);
    return step > 0 ? v.toFixed(digits(-Math.log10(step), 0)) : +v.toPrecision(4) + "";
  }
  function labels(ticks) {
    const step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : 0;
    return ticks.map(v => fmt(v, step));
  }
  function setup(canvas) {
    const dpr = global.devicePixelRatio || 1, w = canvas.clientWidth || canvas.width, h = canvas.clientHeight || canvas.height;
    if (canvas.width !== Math.round(w * dpr)) { canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr); }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, w, h);
    return { ctx, w, h };
  }
  function frame(ctx, box, xt, yt, xr, yr, title, xlabel, ylabel) {
    const { l, t, r, b } = box;
    ctx.strokeStyle = "#ddd"; ctx.fillStyle = "#444"; ctx.lineWidth = 1; ctx.font = "11px sans-serif";
    const X = x => l + (x - xr[0]) / (xr[1] - xr[0] || 1) * (r - l), Y = y => b - (y - yr[0]) / (yr[1] - yr[0] || 1) * (b - t);
    ctx.textAlign = "center";
    const xl = labels(xt), yl = labels(yt);
    xt.forEach((x, i) => { ctx.beginPath(); ctx.moveTo(X(x), t); ctx.lineTo(X(x), b); ctx.stroke(); ctx.fillText(xl[i], X(x), b + 13); });
    ctx.textAlign = "right";
    yt.forEach((y, i) => { ctx.beginPath(); ctx.moveTo(l, Y(y)); ctx.lineTo(r, Y(y)); ctx.stroke(); ctx.fillText(yl[i], l - 4, Y(y) + 4); });
    ctx.strokeStyle = "#888"; ctx.strokeRect(l, t, r - l, b - t);
    ctx.textAlign = "left"; ctx.font = "bold 12px sans-serif"; ctx.fillText(title, l, t - 6);
    ctx.font = "11px sans-serif"; ctx.textAlign = "right"; ctx.fillText(xlabel, r, b + 26);
    ctx.save(); ctx.translate(12, (t + b) / 2); ctx.rotate(-Math.PI / 2); ctx.textAlign = "center"; ctx.fillText(ylabel, 0, 0); ctx.restore();
    return { X, Y };
  }

  class LinePlot {
    constructor(canvas, opts) {
      this.canvas = canvas; this.opts = Object.assign({ title: "", xlabel: "t (s)", ylabel: "", window: 5 }, opts || {});
      this.series = []; this.pointsDrawn = 0;
    }
    setSeries(defs) {  // [{label, color?, dash?}]
      this.series = defs.map((d, i) => ({ label: d.label, color: d.color || COLORS[i % COLORS.length], dash: d.dash || [], x: [], y: [] }));
    }
    push(x, ys) {  // x: array of times; ys: one array per series
      for (let s = 0; s < this.series.length; s++) {
        const S = this.series[s];
        for (let i = 0; i < x.length; i++) { S.x.push(x[i]); S.y.push(ys[s][i]); }
        const cut = S.x.length ? S.x[S.x.length - 1] - this.opts.window : 0;
        let k = 0; while (k < S.x.length && S.x[k] < cut) k++;
        if (k) { S.x.splice(0, k); S.y.splice(0, k); }
      }
    }
    draw() {
      const { ctx, w, h } = setup(this.canvas);
      let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
      for (const S of this.series) for (let i = 0; i < S.x.length; i++) {
        if (!isFinite(S.y[i])) continue;
        x0 = Math.min(x0, S.x[i]); x1 = Math.max(x1, S.x[i]); y0 = Math.min(y0, S.y[i]); y1 = Math.max(y1, S.y[i]);
      }
      if (!isFinite(x0)) { x0 = 0; x1 = 1; y0 = -1; y1 = 1; }
      if (y1 - y0 < 1e-12) { y0 -= 1e-6; y1 += 1e-6; }
      const pad = 0.05 * (y1 - y0); y0 -= pad; y1 += pad;
      const box = { l: 62, t: 20, r: w - 110, b: h - 30 };
      const { X, Y } = frame(ctx, box, niceTicks(x0, x1, 6), niceTicks(y0, y1, 5), [x0, x1], [y0, y1],
                             this.opts.title, this.opts.xlabel, this.opts.ylabel);
      let drawn = 0;
      ctx.save(); ctx.beginPath(); ctx.rect(box.l, box.t, box.r - box.l, box.b - box.t); ctx.clip();
      for (const S of this.series) {
        ctx.strokeStyle = S.color; ctx.lineWidth = 1.5; ctx.setLineDash(S.dash); ctx.beginPath();
        for (let i = 0; i < S.x.length; i++) { const px = X(S.x[i]), py = Y(S.y[i]); if (i) ctx.lineTo(px, py); else ctx.moveTo(px, py); }
        ctx.stroke(); drawn += S.x.length;
      }
      ctx.restore(); ctx.setLineDash([]);
      ctx.font = "11px sans-serif"; ctx.textAlign = "left";
      this.series.forEach((S, i) => { ctx.fillStyle = S.color; ctx.fillRect(box.r + 8, box.t + 4 + 14 * i, 10, 3); ctx.fillStyle = "#333"; ctx.fillText(S.label, box.r + 22, box.t + 9 + 14 * i); });
      this.pointsDrawn = drawn;
      return drawn;
    }
  }

  class BarPlot {
    constructor(canvas, opts) { this.canvas = canvas; this.opts = Object.assign({ title: "", xlabel: "", ylabel: "count", log: true }, opts || {}); this.edges = []; this.counts = []; this.barsDrawn = 0; }
    set(edges, counts) { this.edges = edges; this.counts = counts; }
    draw() {
      const { ctx, w, h } = setup(this.canvas), e = this.edges, c = this.counts;
      const f = v => this.opts.log ? Math.log10(1 + v) : v;
      const ymax = Math.max(1, ...c.map(f));
      const box = { l: 62, t: 20, r: w - 20, b: h - 30 };
      const overflow = e.length > 1 && c.length === e.length, width = overflow ? e[e.length - 1] - e[e.length - 2] : 0;
      const x0 = e.length ? e[0] : 0, x1 = e.length ? e[e.length - 1] : 1;
      const yt = this.opts.log ? niceTicks(0, ymax, 4) : niceTicks(0, ymax, 5);
      const { X, Y } = frame(ctx, box, niceTicks(x0, x1, 6), yt, [x0, x1 + 2 * width], [0, ymax], this.opts.title,
                             this.opts.xlabel, this.opts.log ? "log10(1 + count)" : this.opts.ylabel);
      let drawn = 0;
      for (let i = 0; i < c.length; i++) {
        if (!c[i]) continue;
        const last = overflow && i === c.length - 1;
        const xa = last ? X(x1 + width) : X(e[i]), xb = last ? X(x1 + 2 * width) : X(e[i + 1]), y = Y(f(c[i]));
        ctx.fillStyle = last ? "#d62728" : "#1f77b4";
        ctx.fillRect(xa + 0.5, y, Math.max(1, xb - xa - 1), box.b - y); drawn++;
      }
      if (overflow) {
        ctx.fillStyle = "#d62728"; ctx.textAlign = "center"; ctx.font = "11px sans-serif";
        ctx.fillText(`≥ ${fmt(x1, width)}`, X(x1 + 1.5 * width), box.t + 12);
      }
      this.barsDrawn = drawn;
      return drawn;
    }
  }
  global.TinyPlot = { LinePlot, BarPlot, COLORS, labels, niceTicks };
})(window);
