// sluice's board: draws charts (uPlot) from samples, live from server-sent events or embedded in a
// report. A chart's x is the samples' time (`t`) or, with `chart.x`, a number of each sample
// (users, connections, a chunk size; linear or log). One code path for every page with charts.
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

  // A number short enough for an axis tick (150k, 1.5M).
  function short(v) {
    const a = Math.abs(v);
    if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(0) + "k";
    if (a >= 100 || v === Math.trunc(v)) return v.toFixed(0);
    if (a >= 1) return v.toFixed(1);
    return v.toFixed(2);
  }

  // A time axis whose ticks all read alike (14:05:30), spaced for that width: uPlot's default
  // writes the date and time at the first tick and seconds alone after it, and that long first
  // label ran into the next.
  function timeAxis() {
    const two = (n) => String(n).padStart(2, "0");
    const clock = (t) => {
      const d = new Date(t * 1000);
      return two(d.getHours()) + ":" + two(d.getMinutes()) + ":" + two(d.getSeconds());
    };
    // Whole seconds only: a half-second tick would repeat its neighbour's label.
    const incrs = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
    return { space: 80, incrs, values: (u, splits) => splits.map(clock) };
  }

  // The x axis of a chart with `chart.x`: its named ticks, else a tick at each x when there are
  // few (a sweep's points), else uPlot's own.
  function xAxis(chart, xs) {
    const axis = { label: chart.x.label };
    const named = chart.x.ticks || [];
    if (named.length > 0) {
      axis.splits = () => named.map((t) => t[0]);
      axis.values = (u, splits) => splits.map((v) => (named.find((t) => t[0] === v) || [v, short(v)])[1]);
    } else if (xs.length > 0 && xs.length <= 12) {
      axis.splits = () => xs;
      axis.values = (u, splits) => splits.map(short);
    } else if (!chart.x.log) {
      axis.values = (u, splits) => splits.map(short);
    }
    return axis;
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

    // Held samples (a report): all of them, however many.
    replace(samples) {
      this.samples = samples.slice();
      this.draw();
    }

    push(samples) {
      for (const s of samples) this.samples.push(s);
      if (this.samples.length > MAX_SAMPLES) this.samples.splice(0, this.samples.length - MAX_SAMPLES);
      this.draw();
    }

    draw() {
      this.spec.charts.forEach((chart, i) => {
        // The samples this chart draws, in x order: a time series all of them; an x-y chart
        // those with an x (a positive one on a log axis).
        let rows = this.samples.map((s) => [chart.x ? at(s, chart.x.key) : s.t, s]);
        if (chart.x) {
          rows = rows.filter(([x]) => x !== null && (!chart.x.log || x > 0));
          rows.sort((a, b) => a[0] - b[0]);
        }
        const series = this.seriesOf(chart);
        const xs = rows.map(([x]) => x);
        const columns = series.map((s) => rows.map(([, x]) => at(x, s.key, s.name)));
        const data = [xs, ...columns];
        const keys = series.map((s) => s.key + "/" + (s.name || "")).join("|");
        let entry = this.plots.get(i);
        if (entry && entry.keys !== keys) {
          entry.plot.destroy();
          entry = null;
        }
        if (!entry) {
          const el = this.cells[i];
          const xy = !!chart.x;
          const opts = {
            width: Math.max(300, el.clientWidth - 8),
            height: xy ? 260 : 170,
            title: xy ? chart.title : chart.title + (chart.unit ? " (" + chart.unit + ")" : ""),
            // An x-y chart's legend names its lines (its few points are marked); a time series'
            // legend shows the values under the cursor.
            legend: { live: !xy },
            scales: {
              x: xy ? { time: false, distr: chart.x.log ? 3 : 1, log: 10 } : { time: true },
              y: { range: (u, lo, hi) => [Math.min(0, lo), hi > 0 ? hi * 1.1 : 1] },
            },
            series: [{ label: xy ? chart.x.label : "time" }].concat(
              series.map((s, j) => ({
                label: s.label,
                stroke: s.color || PALETTE[j % PALETTE.length],
                width: xy ? 2 : 1.5,
                dash: s.dashed ? [6, 4] : undefined,
                // A sweep's points are few and each a measurement: marked, and joined across
                // an x another line has and this one lacks.
                points: xy ? { show: true, size: 7 } : undefined,
                spanGaps: xy,
              }))
            ),
            axes: [xy ? xAxis(chart, [...new Set(xs)]) : timeAxis(), xy ? { size: 60, label: chart.unit, values: (u, splits) => splits.map(short) } : { size: 60 }],
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
