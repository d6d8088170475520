// sluice's time-series board: draws charts (uPlot) from per-second samples, live from server-sent
// events or from samples embedded in a report. One code path for every page that shows charts.
(function () {
  "use strict";
  const MAX_SAMPLES = 900;
  const PALETTE = ["#2563eb", "#16a34a", "#f59e0b", "#dc2626", "#7c3aed", "#0891b2", "#db2777", "#65a30d", "#ea580c", "#475569"];

  // The number at `path` ("a.b.c") in a sample, then at key `name` (which may hold dots) when
  // given, or null.
  function at(sample, path, name) {
    let v = sample;
    for (const k of name === undefined ? path.split(".") : [...path.split("."), name]) {
      if (v == null || typeof v !== "object") return null;
      v = v[k];
    }
    return typeof v === "number" && isFinite(v) ? v : null;
  }

  class Board {
    constructor(root, spec) {
      this.root = root;
      this.spec = spec;
      this.samples = [];
      this.plots = new Map();
      this.charts = spec.charts.map((c) => ({ title: c.title, series: 0, points: 0 }));
      this.status = "waiting";
      // Each chart gets a cell of its own inside `root`, so several boards share a page.
      this.cells = spec.charts.map(() => {
        const cell = document.createElement("div");
        cell.className = "chart";
        root.appendChild(cell);
        return cell;
      });
      window.sluiceBoard = this;
      (window.sluiceBoards = window.sluiceBoards || []).push(this);
    }

    // Series of a chart, a wildcard ("viewers.*") becoming one series per key any sample has.
    seriesOf(chart) {
      const out = [];
      for (const s of chart.series) {
        if (!s.key.endsWith(".*")) {
          out.push(s);
          continue;
        }
        const base = s.key.slice(0, -2);
        const names = new Set();
        for (const x of this.samples) {
          let m = x;
          for (const k of base.split(".")) m = m == null ? null : m[k];
          if (m && typeof m === "object") Object.keys(m).forEach((n) => names.add(n));
        }
        for (const n of [...names].sort()) out.push({ key: base, name: n, label: (s.label ? s.label + " " : "") + n });
      }
      return out;
    }

    replace(samples) {
      this.samples = [];
      this.push(samples);
    }

    push(samples) {
      for (const s of samples) this.samples.push(s);
      if (this.samples.length > MAX_SAMPLES) this.samples.splice(0, this.samples.length - MAX_SAMPLES);
      this.draw();
    }

    draw() {
      const times = this.samples.map((s) => s.t);
      this.spec.charts.forEach((chart, i) => {
        const series = this.seriesOf(chart);
        const columns = series.map((s) => this.samples.map((x) => at(x, s.key, s.name)));
        const data = [times, ...columns];
        const keys = series.map((s) => s.key + "/" + (s.name || "")).join("|");
        let entry = this.plots.get(i);
        if (entry && entry.keys !== keys) {
          entry.plot.destroy();
          entry = null;
        }
        if (!entry) {
          const el = this.cells[i];
          const opts = {
            width: Math.max(300, el.clientWidth - 8),
            height: 170,
            title: chart.title + (chart.unit ? " (" + chart.unit + ")" : ""),
            scales: { x: { time: true }, y: { range: (u, lo, hi) => [Math.min(0, lo), hi > 0 ? hi * 1.1 : 1] } },
            series: [{}].concat(series.map((s, j) => ({ label: s.label, stroke: PALETTE[j % PALETTE.length], width: 1.5, spanGaps: false }))),
            axes: [{}, { size: 60 }],
          };
          entry = { keys, plot: new uPlot(opts, data, el) };
          this.plots.set(i, entry);
        } else {
          entry.plot.setData(data);
        }
        this.charts[i].series = series.length;
        this.charts[i].points = columns.reduce((n, c) => n + c.filter((v) => v !== null).length, 0);
      });
    }

    // Follows `url`'s server-sent events: a `history` event (an array of samples) on connect,
    // then one sample a second.
    follow(url) {
      const source = new EventSource(url);
      source.addEventListener("history", (e) => this.replace(JSON.parse(e.data)));
      source.onmessage = (e) => {
        this.status = "live";
        this.push([JSON.parse(e.data)]);
        const s = document.getElementById("status");
        if (s) s.textContent = "live, " + new Date().toLocaleTimeString();
      };
      source.onerror = () => {
        this.status = "reconnecting";
        const s = document.getElementById("status");
        if (s) s.textContent = "reconnecting…";
      };
    }
  }

  window.SluiceBoard = Board;
})();
