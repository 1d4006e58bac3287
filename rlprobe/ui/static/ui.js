/* rlprobe ui: the dashboard's pages. Data comes from /api/* as JSON; every text a run holds is put
   on the page with textContent (or as a text node), never as HTML. Charts: uPlot, as in the report.
   Sections: helpers, live polling, the overlay charts (ChartPanel), the runs page, the run page,
   the compare page, the SQL console. */
(function () {
  "use strict";

  // ---- errors: kept, shown, and counted on <body> (the browser test reads data-errors) -----------
  const errors = (window.rlprobeErrors = window.rlprobeErrors || []);
  function showErrors() {
    document.body.setAttribute("data-errors", String(errors.length));
    const list = document.getElementById("js-errors");
    if (!list || !errors.length) return;
    list.hidden = false;
    list.textContent = "";
    errors.slice(-5).forEach((msg) => list.append(el("li", { text: "JavaScript error: " + msg })));
  }
  window.addEventListener("error", (e) => { errors.push(String(e.message || e)); showErrors(); });
  window.addEventListener("unhandledrejection", (e) => { errors.push(String(e.reason && e.reason.message || e.reason)); showErrors(); });
  document.addEventListener("securitypolicyviolation", (e) => {
    errors.push("Content-Security-Policy blocked " + e.violatedDirective + " " + (e.blockedURI || "inline"));
    showErrors();
  });

  const CONFIG = JSON.parse(document.getElementById("ui-config").textContent);
  const PALETTE = ["#2a6fdb", "#e8590c", "#2e9e5b", "#9c4dcc", "#c92a2a", "#0b8a8a", "#c99700", "#5c7cfa", "#a61e4d", "#495057"];
  const SEVERITY = { critical: 2, warn: 1, info: 0 };

  // ---- helpers ------------------------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = String(v);
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  const $ = (id) => document.getElementById(id);

  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v === null || v === undefined || v === "") continue;
      if (Array.isArray(v)) v.forEach((x) => q.append(k, x));
      else q.append(k, String(v));
    }
    return q.toString();
  }

  async function getJSON(url, options) {
    const response = await fetch(url, Object.assign({ credentials: "same-origin", cache: "no-store" }, options || {}));
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    if (!response.ok) throw new Error((body && body.error) || ("HTTP " + response.status + " from " + url.split("?")[0]));
    return body;
  }

  function fmt(v) {
    if (v === null || v === undefined) return "–";
    if (typeof v !== "number") return String(v);
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(2).replace(/\.?0+e/, "e");
    return String(+v.toPrecision(5));
  }

  function ago(seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "–";
    const s = Math.max(0, seconds);
    if (s < 60) return Math.round(s) + " s ago";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    if (s < 86400) return (s / 3600).toFixed(1) + " h ago";
    return Math.round(s / 86400) + " d ago";
  }

  function duration(s) {
    s = Math.round(s);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return (h ? h + ":" + String(m).padStart(2, "0") : String(m)) + ":" + String(r).padStart(2, "0");
  }

  function utc(t) {
    if (t === null || t === undefined) return "";
    return new Date(t * 1000).toISOString().replace("T", " ").slice(0, 19);
  }

  function rgba(hex, a) {
    const n = parseInt(hex.slice(1), 16);
    return "rgba(" + ((n >> 16) & 255) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }

  function toast(node) {
    const box = $("toasts");
    const t = el("div", { class: "toast" }, node);
    box.append(t);
    setTimeout(() => t.remove(), 9000);
  }

  function badge(severity) {
    return el("span", { class: "badge sev-" + severity, text: severity });
  }

  function debounce(fn, ms) {
    let timer = null;
    return function (...args) { clearTimeout(timer); timer = setTimeout(() => fn.apply(this, args), ms); };
  }

  function runUrl(id) { return "/run?" + query({ id: id }); }

  // ---- live: one poll of /api/runs for the whole page; listeners get each listing ---------------
  const Live = {
    listing: null,
    listeners: [],
    busy: false,
    lastOk: 0,
    colours: new Map(),
    on(fn) { this.listeners.push(fn); if (this.listing) fn(this.listing, true); },
    colour(runId) {
      if (!this.colours.has(runId)) this.colours.set(runId, PALETTE[this.colours.size % PALETTE.length]);
      return this.colours.get(runId);
    },
    row(runId) { return this.listing && this.listing.runs.find((r) => r.run_id === runId); },
    // what must change for a page to read a run again: its files, or what the doctor said
    key(row) { return row ? row.version + "/" + row.findings.state + "/" + row.findings.version + "/" + row.findings.count : "none"; },
    async tick() {
      if (this.busy) return;
      this.busy = true;
      try {
        const listing = await getJSON("/api/runs");
        listing.runs.forEach((r) => this.colour(r.run_id));
        const first = !this.listing;
        this.listing = listing;
        this.lastOk = Date.now();
        for (const fn of this.listeners) {
          try { fn(listing, first); } catch (e) { errors.push(String(e && e.stack || e)); showErrors(); }
        }
      } catch (e) {
        const live = $("live");
        live.className = "live stale";
        live.textContent = "cannot reach the server: " + e.message;
      } finally {
        this.busy = false;
        this.status();
      }
    },
    status() {
      if (!this.lastOk) return;
      const live = $("live"), age = (Date.now() - this.lastOk) / 1000;
      if (age > Math.max(10, CONFIG.poll_s * 4)) { live.className = "live stale"; live.textContent = "not updated for " + ago(age).replace(" ago", ""); return; }
      const n = this.listing.runs.filter((r) => r.status === "live").length;
      live.className = "live fresh";
      live.textContent = (n ? n + " live run" + (n === 1 ? "" : "s") + ", " : "") + "updated " + ago(age);
    },
    start() {
      this.tick();
      setInterval(() => this.tick(), Math.max(0.25, CONFIG.poll_s) * 1000);
      setInterval(() => this.status(), 1000);
    },
  };

  // ---- the overlay charts ---------------------------------------------------------------------------
  function isRelated(finding, metric) {
    if (finding.metrics.includes(metric)) return true;
    if (metric.startsWith("reward_component.") && finding.metrics.includes("reward_components")) return true;
    return finding.evidence_keys.some((k) => k === metric || k.startsWith(metric + "_"));
  }

  /* One run's bins as points: each bin's min and its max where they occur, in x order. */
  function runPoints(cols) {
    const pts = [], mean = [], nonfinite = [];
    for (let i = 0; i < cols.bin.length; i++) {
      const a = cols.x_min[i], b = cols.x_max[i];
      if (a !== null) {
        if (a === b) pts.push([a, cols.v_min[i], cols.step_min[i]]);
        else if (a < b) pts.push([a, cols.v_min[i], cols.step_min[i]], [b, cols.v_max[i], cols.step_max[i]]);
        else pts.push([b, cols.v_max[i], cols.step_max[i]], [a, cols.v_min[i], cols.step_min[i]]);
        mean.push([cols.x_mean[i], cols.v_mean[i]]);
      }
    }
    for (const nf of cols.nonfinite || []) nonfinite.push(nf);
    const out = [];
    for (const p of pts) if (!out.length || p[0] > out[out.length - 1][0]) out.push(p);
    return { pts: out, mean: mean, nonfinite: nonfinite };
  }

  function stepMapper(pts, axis) {
    if (axis === "step") return (s) => s;
    const pairs = pts.map((p) => [p[2], p[0]]).sort((a, b) => a[0] - b[0]);
    return function (s) {
      if (s === null || s === undefined || !pairs.length) return null;
      let lo = 0, hi = pairs.length - 1;
      if (s <= pairs[0][0]) return pairs[0][1];
      if (s >= pairs[hi][0]) return pairs[hi][1];
      while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (pairs[mid][0] <= s) lo = mid; else hi = mid; }
      const [s0, x0] = pairs[lo], [s1, x1] = pairs[hi];
      return s1 === s0 ? x0 : x0 + ((s - s0) * (x1 - x0)) / (s1 - s0);
    };
  }

  /* TensorBoard's smoothing: a debiased exponential moving average. */
  function ema(values, w) {
    let last = 0, n = 0;
    return values.map((v) => {
      if (v === null || !isFinite(v)) return null;
      last = last * w + (1 - w) * v;
      n += 1;
      return last / (1 - Math.pow(w, n));
    });
  }

  function nearest(pts, x) {
    if (!pts.length) return null;
    let lo = 0, hi = pts.length - 1;
    while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (pts[mid][0] <= x) lo = mid; else hi = mid; }
    return Math.abs(pts[lo][0] - x) <= Math.abs(pts[hi][0] - x) ? pts[lo] : pts[hi];
  }

  /* The y range a few extreme points must not set: 0.5%..99.5% of the drawn points, unless the
     extremes are within a few times that spread (then everything is shown). */
  function robustRange(values) {
    const v = values.filter((y) => y !== null && isFinite(y)).sort((a, b) => a - b);
    if (v.length < 40) return null;
    const lo = v[Math.floor(v.length * 0.005)], hi = v[Math.ceil(v.length * 0.995) - 1];
    const spread = hi - lo;
    if (!(spread > 0) || v[v.length - 1] - v[0] <= 5 * spread) return null;
    return [lo - spread * 0.15, hi + spread * 0.15];
  }

  class ChartPanel {
    constructor(options) {
      this.options = options || {};
      this.runs = [];            // [{id, label, colour}]
      this.metrics = [];         // charts, in order
      this.available = [];       // [{metric, n, runs}]
      this.axis = "step";
      this.smooth = 0;
      this.log = false;
      this.fit = false;
      this.zoom = null;          // [lo, hi] on the x axis, or null
      this.marks = {};           // metric -> [{step, label, from, to}] (the compare page's divergences)
      this.data = { series: {}, errors: {}, sql_by_metric: {} };
      this.findings = {};        // run id -> [finding]
      this.events = {};          // run id -> [event]
      this.views = new Map();    // metric -> {fig, plotBox, legend, sql, plot}
      this.seq = 0;
      this.grid = $("chart-grid");
      this.wire();
    }

    wire() {
      const filter = $("metric-filter");
      filter.addEventListener("input", debounce(() => this.renderPicker(), 150));
      $("metric-all").addEventListener("click", () => {
        const add = this.matching().map((m) => m.metric).filter((m) => !this.metrics.includes(m));
        this.setMetrics(this.metrics.concat(add).slice(0, 24));
      });
      $("metric-none").addEventListener("click", () => this.setMetrics([]));
      $("smooth").addEventListener("input", () => {
        this.smooth = +$("smooth").value;
        $("smooth-value").textContent = this.smooth.toFixed(2);
        this.drawAll();
        this.changed();
      });
      $("log-y").addEventListener("change", () => { this.log = $("log-y").checked; this.drawAll(); this.changed(); });
      $("fit-all").addEventListener("change", () => { this.fit = $("fit-all").checked; this.drawAll(); this.changed(); });
      $("x-axis").addEventListener("change", () => { this.axis = $("x-axis").value; this.zoom = null; this.refresh({ findings: false, events: false }); this.changed(); });
      $("zoom-reset").addEventListener("click", () => this.resetZoom());
      let width = window.innerWidth;
      window.addEventListener("resize", debounce(() => { if (Math.abs(window.innerWidth - width) > 40) { width = window.innerWidth; this.refresh({ findings: false, events: false }); } }, 300));
    }

    state() { return { metrics: this.metrics, x: this.axis, smooth: this.smooth, log: this.log, fit: this.fit }; }

    restore(s) {
      if (!s) return;
      if (Array.isArray(s.metrics)) this.metrics = s.metrics.slice(0, 24);
      if (["step", "wall_time", "relative"].includes(s.x)) this.axis = s.x;
      this.smooth = Math.min(0.99, Math.max(0, +s.smooth || 0));
      this.log = !!s.log;
      this.fit = !!s.fit;
      $("x-axis").value = this.axis;
      $("smooth").value = String(this.smooth);
      $("smooth-value").textContent = this.smooth.toFixed(2);
      $("log-y").checked = this.log;
      $("fit-all").checked = this.fit;
    }

    changed() { if (this.options.onChange) this.options.onChange(); }

    /* Draw these runs. Without metrics picked yet, the first charts are the usual ones (the page's
       defaults) drawn from one request, the ones no run logged dropped; the metric picker's list
       (which counts every column of every run) arrives after, without holding the charts up. */
    async setRuns(runs) {
      this.runs = runs;
      this.legend();
      if (!runs.length) {
        this.available = [];
        this.renderPicker();
        this.drawAll();
        return;
      }
      const everything = { has: () => true };
      this.prune = !this.metrics.length;
      if (this.prune) {
        this.metrics = (this.options.defaults ? this.options.defaults(everything) : CONFIG.key_series.slice()).slice(0, 12);
      }
      const picker = this.loadMetrics();
      await this.refresh();
      await picker;
    }

    legend() {
      const box = $("run-legend");
      box.textContent = "";
      for (const r of this.runs) {
        const sw = el("span", { class: "swatch" });
        sw.style.background = r.colour;
        box.append(el("span", { class: "run" }, sw, el("a", { href: runUrl(r.id), text: r.label })));
      }
    }

    pruneEmpty() {
      if (!this.prune) return;
      this.prune = false;
      const drawn = this.metrics.filter((m) => this.runs.some((r) => (this.data.series[r.id] || {})[m]));
      if (drawn.length !== this.metrics.length) {
        this.metrics = drawn;
        this.layout();
        this.renderPicker();
        this.changed();
      }
    }

    async loadMetrics() {
      const ids = this.runs.map((r) => r.id);
      let got;
      try { got = await getJSON("/api/metrics?" + query({ run: ids })); } catch (e) { $("metric-count").textContent = e.message; return; }
      if (ids.join("\u0000") !== this.runs.map((r) => r.id).join("\u0000")) return;  // the selection moved on
      this.available = got.metrics;
      if (!this.metrics.length && !this.prune && this.available.length) {
        // none of the usual metrics was logged (an import of custom ones): chart what there is
        this.metrics = this.available.slice(0, 6).map((m) => m.metric);
        this.refresh({ findings: false, events: false });
      }
      this.renderPicker();
    }

    matching() {
      let rx = null;
      try { rx = new RegExp($("metric-filter").value || ".", "i"); } catch (e) { rx = null; }
      return this.available.filter((m) => (rx ? rx.test(m.metric) : m.metric.includes($("metric-filter").value)));
    }

    renderPicker() {
      const list = $("metric-list");
      list.textContent = "";
      const shown = this.matching();
      const total = this.runs.length;
      for (const m of shown) {
        const box = el("input", { type: "checkbox", value: m.metric });
        box.checked = this.metrics.includes(m.metric);
        box.addEventListener("change", () => {
          this.setMetrics(box.checked ? this.metrics.concat([m.metric]) : this.metrics.filter((x) => x !== m.metric));
        });
        const n = (m.runs || []).length;
        list.append(el("label", { title: m.metric }, box, " " + m.metric, el("span", { class: "n", text: total > 1 ? "  " + n + "/" + total : "" })));
      }
      $("metric-count").textContent = shown.length + " of " + this.available.length + " metrics, " + this.metrics.length + " charted";
    }

    setMetrics(metrics) {
      this.metrics = Array.from(new Set(metrics));
      this.renderPicker();
      this.refresh({ findings: false, events: false });
      this.changed();
    }

    setZoom(lo, hi) {
      if (!(hi > lo)) return;
      this.zoom = [lo, hi];
      $("zoom-reset").hidden = false;
      if (this.options.onZoom) this.options.onZoom(this.zoom, this.axis);
      this.refresh({ findings: false, events: false });
    }

    resetZoom() {
      this.zoom = null;
      $("zoom-reset").hidden = true;
      if (this.options.onZoom) this.options.onZoom(null, this.axis);
      this.refresh({ findings: false, events: false });
    }

    zoomToSteps(first, last) {
      if (this.axis !== "step") { this.axis = "step"; $("x-axis").value = "step"; }
      const pad = Math.max(5, Math.round((last - first) * 0.25));
      this.setZoom(first - pad, last + pad);
    }

    bins() {
      const fig = this.grid.querySelector("figure");
      const width = (fig && fig.clientWidth) || Math.min(this.grid.clientWidth || 800, 900);
      return Math.max(100, Math.min(2000, Math.round(width - 80)));
    }

    async refresh(what) {
      what = Object.assign({ series: true, findings: true, events: true }, what || {});
      const seq = ++this.seq;
      const ids = this.runs.map((r) => r.id);
      this.layout();
      if (!ids.length || !this.metrics.length) { this.drawAll(); return; }
      $("chart-status").textContent = "reading…";
      const t0 = performance.now();
      const jobs = [];
      if (what.series) {
        jobs.push(getJSON("/api/series?" + query({ run: ids, metric: this.metrics, x: this.axis, bins: this.bins(),
          lo: this.zoom ? this.zoom[0] : null, hi: this.zoom ? this.zoom[1] : null })).then((d) => { if (seq === this.seq) this.data = d; }));
      }
      if (what.findings) {
        jobs.push(getJSON("/api/findings?" + query({ run: ids })).then((d) => {
          for (const [id, f] of Object.entries(d.findings)) this.findings[id] = f.findings;
        }));
      }
      if (what.events) {
        jobs.push(getJSON("/api/events?" + query({ run: ids })).then((d) => {
          const by = {};
          d.events.forEach((e) => { (by[e.run_id] = by[e.run_id] || []).push(e); });
          ids.forEach((id) => { this.events[id] = by[id] || []; });
        }));
      }
      try {
        await Promise.all(jobs);
      } catch (e) {
        $("chart-status").textContent = "could not read the charts: " + e.message;
        return;
      }
      if (seq !== this.seq) return;
      if (what.series) this.pruneEmpty();
      if (what.series && !this.metrics.length && this.available.length) {
        this.metrics = this.available.slice(0, 6).map((m) => m.metric);  // none of the usual ones was logged
        this.renderPicker();
        this.refresh({ findings: false, events: false });
        return;
      }
      const errs = Object.entries(this.data.errors || {});
      $("chart-status").textContent = errs.length
        ? errs.map(([id, msg]) => (Live.row(id) ? Live.row(id).name : id) + ": " + msg).join("; ")
        : "read in " + Math.round(performance.now() - t0) + " ms" + (this.zoom ? " (zoomed)" : "");
      this.drawAll();
    }

    layout() {
      for (const [metric, view] of this.views) {
        if (!this.metrics.includes(metric)) { if (view.plot) view.plot.destroy(); view.fig.remove(); this.views.delete(metric); }
      }
      this.metrics.forEach((metric) => {
        let view = this.views.get(metric);
        if (!view) {
          const sql = el("code", { class: "sql", hidden: true });
          const copy = el("button", { type: "button", text: "SQL", title: "the query this chart ran, for rlprobe query or any DuckDB session with the views" });
          copy.addEventListener("click", () => { sql.hidden = !sql.hidden; });
          const remove = el("button", { type: "button", text: "×", title: "remove this chart" });
          remove.addEventListener("click", () => this.setMetrics(this.metrics.filter((m) => m !== metric)));
          const caption = el("figcaption", {}, el("span", { class: "tools" }, copy, " ", remove), el("span", { class: "title", text: metric }), el("span", { class: "bad note-nonfinite" }));
          view = { fig: el("figure", { class: "chart", "data-metric": metric }, caption, sql), plot: null, sql: sql };
          view.plotBox = el("div", { class: "plot" });
          view.legend = el("div", { class: "chart-legend" });
          view.fig.append(view.plotBox, view.legend);
          this.views.set(metric, view);
        }
        this.grid.append(view.fig);  // keeps the picked order
      });
      document.body.setAttribute("data-charts", String(this.metrics.length));
    }

    drawAll() {
      this.layout();
      let drawn = 0;
      for (const metric of this.metrics) {
        try {
          if (this.draw(metric)) drawn += 1;
        } catch (e) {
          errors.push("chart " + metric + ": " + (e && e.stack || e));
          showErrors();
        }
      }
      document.body.setAttribute("data-rendered", String(drawn));
      if (this.options.onDrawn) this.options.onDrawn();
    }

    draw(metric) {
      const view = this.views.get(metric);
      if (view.plot) { view.plot.destroy(); view.plot = null; }
      view.plotBox.textContent = "";
      view.sql.textContent = (this.data.sql_by_metric || {})[metric] || "";
      const axis = this.axis, w = this.smooth, log = this.log;
      const runs = [], tables = [], series = [{ label: axis }], allY = [];
      for (const r of this.runs) {
        const cols = (this.data.series[r.id] || {})[metric];
        if (!cols) continue;
        const p = runPoints(cols);
        if (!p.pts.length && !p.nonfinite.length) continue;
        const run = { id: r.id, label: r.label, colour: r.colour, pts: p.pts, nonfinite: p.nonfinite, toX: stepMapper(p.pts, axis) };
        const ys = p.pts.map((q) => (log && !(q[1] > 0) ? null : q[1]));
        ys.forEach((y) => allY.push(y));
        tables.push([p.pts.map((q) => q[0]), ys]);
        series.push({ label: r.label, stroke: w > 0 ? rgba(r.colour, 0.28) : r.colour, width: w > 0 ? 1 : 1.5, spanGaps: true, points: { show: false } });
        if (w > 0) {
          const mx = p.mean.map((q) => q[0]);
          const my = ema(p.mean.map((q) => (log && !(q[1] > 0) ? null : q[1])), w);
          tables.push([mx, my]);
          series.push({ label: r.label + " (smoothed)", stroke: r.colour, width: 2, spanGaps: true, points: { show: false } });
        }
        runs.push(run);
      }
      const fig = view.fig;
      const nonfinite = runs.reduce((n, r) => n + r.nonfinite.reduce((m, f) => m + f.n, 0), 0);
      fig.querySelector(".note-nonfinite").textContent = nonfinite ? "  (" + nonfinite + " NaN/inf value" + (nonfinite === 1 ? "" : "s") + ", not drawn)" : "";
      fig.setAttribute("data-runs-drawn", String(runs.length));
      fig.setAttribute("data-points", String(runs.reduce((n, r) => n + r.pts.length, 0)));
      fig.setAttribute("data-max-step", String(runs.reduce((m, r) => Math.max(m, ...r.pts.map((q) => q[2])), -Infinity)));
      if (!tables.length) {
        view.plotBox.append(el("div", { class: "empty", text: this.runs.length ? "none of the selected runs logged " + metric + (this.zoom ? " in this range" : "") : "select runs to draw" }));
        fig.setAttribute("data-findings-drawn", "0");
        return false;
      }
      const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
      const robust = this.fit || log ? null : robustRange(allY);
      const zoom = this.zoom;
      const panel = this;
      const xValues = axis === "relative" ? (u, vals) => vals.map((v) => duration(v))
        : axis === "step" ? (u, vals) => vals.map((v) => fmt(v)) : undefined;
      const opts = {
        width: Math.max(320, view.fig.clientWidth || 560),
        height: 220,
        legend: { show: false },
        scales: {
          x: { time: axis === "wall_time", range: (u, mn, mx) => (zoom ? [zoom[0], zoom[1]] : mn === mx ? [mn - 1, mx + 1] : [mn, mx]) },
          y: log ? { distr: 3 } : {
            range: (u, mn, mx) => {
              let lo = mn, hi = mx;
              if (robust) { lo = robust[0]; hi = robust[1]; }
              if (lo === null || hi === null) return [0, 1];
              if (lo === hi) { const pad = Math.abs(lo) * 0.1 || 1; return [lo - pad, hi + pad]; }
              return uPlot.rangeNum(lo, hi, 0.1, true);
            },
          },
        },
        series: series,
        axes: [{ size: 34, values: xValues }, { size: 64, values: (u, vals) => vals.map(fmt) }],
        cursor: {
          sync: { key: "rlprobe-ui" },
          drag: { x: true, y: false, setScale: false },
          bind: { dblclick: () => () => { panel.resetZoom(); return null; } },
        },
        hooks: {
          draw: [(u) => this.overlays(u, metric, runs, fig)],
          setSelect: [(u) => {
            if (u.select.width < 3) return;
            const lo = u.posToVal(u.select.left, "x"), hi = u.posToVal(u.select.left + u.select.width, "x");
            u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
            panel.setZoom(lo, hi);
          }],
          setCursor: [(u) => this.cursorLegend(u, view, runs)],
        },
      };
      view.plot = new uPlot(opts, data, view.plotBox);
      this.cursorLegend(view.plot, view, runs);
      return true;
    }

    cursorLegend(u, view, runs) {
      const idx = u.cursor.idx;
      const x = idx === null || idx === undefined ? null : u.data[0][idx];
      view.legend.textContent = "";
      for (const r of runs) {
        const p = x === null ? r.pts[r.pts.length - 1] : nearest(r.pts, x);
        const sw = el("span", { class: "swatch" });
        sw.style.background = r.colour;
        view.legend.append(el("span", { class: "run" }, sw, r.label + " ", el("b", { text: p ? fmt(p[1]) : "–" }), el("span", { class: "note", text: p ? "step " + p[2] : "" })));
      }
    }

    overlays(u, metric, runs, fig) {
      const ctx = u.ctx, dpr = window.devicePixelRatio || 1;
      const top = u.bbox.top, h = u.bbox.height, left = u.bbox.left, right = u.bbox.left + u.bbox.width;
      const xmin = u.scales.x.min, xmax = u.scales.x.max, ymin = u.scales.y.min, ymax = u.scales.y.max;
      const inside = (x) => x !== null && x >= xmin && x <= xmax;
      let drawnFindings = 0, clipped = 0;
      ctx.save();
      ctx.beginPath();
      ctx.rect(left, top, u.bbox.width, h);
      ctx.clip();
      ctx.textBaseline = "alphabetic";
      for (const r of runs) {
        const lastX = r.pts.length ? r.pts[r.pts.length - 1][0] : null;
        for (const f of this.findings[r.id] || []) {
          if (f.first_step === null) continue;
          const x0v = r.toX(f.first_step);
          const x1v = f.last_step !== null ? r.toX(f.last_step) : lastX;
          if (x0v === null || x0v > xmax || (x1v !== null && x1v < xmin)) continue;
          const related = isRelated(f, metric);
          const x0 = u.valToPos(x0v, "x", true), x1 = u.valToPos(x1v === null ? x0v : x1v, "x", true);
          if (related) {
            ctx.fillStyle = rgba(r.colour, 0.12);
            ctx.fillRect(x0, top, Math.max(x1 - x0, dpr), h);
          }
          ctx.strokeStyle = r.colour;
          ctx.lineWidth = (related ? 2 : 1) * dpr;
          ctx.setLineDash(related ? [] : [2 * dpr, 3 * dpr]);
          ctx.beginPath();
          ctx.moveTo(x0, top);
          ctx.lineTo(x0, top + h);
          ctx.stroke();
          if (related) {
            ctx.fillStyle = r.colour;
            ctx.font = "600 " + 11 * dpr + "px sans-serif";
            ctx.fillText(f.signature_id, x0 + 4 * dpr, top + (12 + 12 * (drawnFindings % 3)) * dpr);
          }
          drawnFindings += 1;
        }
        const visible = (this.events[r.id] || []).map((e) => ({ e: e, x: this.axis === "wall_time" ? e.timestamp : e.at_step === null ? null : r.toX(e.at_step) })).filter((v) => inside(v.x));
        ctx.strokeStyle = rgba(r.colour, 0.6);
        ctx.lineWidth = dpr;
        ctx.setLineDash([4 * dpr, 4 * dpr]);
        for (const v of visible) {
          const x = u.valToPos(v.x, "x", true);
          ctx.beginPath();
          ctx.moveTo(x, top);
          ctx.lineTo(x, top + h);
          ctx.stroke();
        }
        if (visible.length <= 12) {
          ctx.fillStyle = rgba(r.colour, 0.95);
          ctx.font = 10 * dpr + "px sans-serif";
          for (const v of visible) ctx.fillText(v.e.kind, u.valToPos(v.x, "x", true) + 3 * dpr, top + h - 4 * dpr);
        }
        ctx.setLineDash([]);
        ctx.fillStyle = r.colour;
        for (const p of r.pts) {  // points beyond the y axis: a triangle at the edge they went past
          if (p[0] < xmin || p[0] > xmax || p[1] === null) continue;
          const up = p[1] > ymax, down = p[1] < ymin;
          if (!up && !down) continue;
          clipped += 1;
          const x = u.valToPos(p[0], "x", true), y = up ? top : top + h, s = 5 * dpr * (up ? 1 : -1);
          ctx.beginPath();
          ctx.moveTo(x, y);
          ctx.lineTo(x - 4 * dpr, y + s);
          ctx.lineTo(x + 4 * dpr, y + s);
          ctx.closePath();
          ctx.fill();
        }
        ctx.strokeStyle = "#c62828";
        ctx.lineWidth = 2 * dpr;
        for (const nf of r.nonfinite) {
          const xv = r.toX(nf.step);
          if (!inside(xv)) continue;
          const x = u.valToPos(xv, "x", true);
          ctx.beginPath();
          ctx.moveTo(x, top + h);
          ctx.lineTo(x, top + h - 8 * dpr);
          ctx.stroke();
        }
      }
      for (const m of this.marks[metric] || []) {  // the compare page: where B left A, and the baseline
        const first = runs.length ? runs[0] : null;
        if (!first) continue;
        if (m.from !== null && m.to !== null) {
          const a = u.valToPos(first.toX(m.from), "x", true), b = u.valToPos(first.toX(m.to), "x", true);
          ctx.fillStyle = "rgba(90,100,110,0.08)";
          ctx.fillRect(a, top, Math.max(b - a, dpr), h);
        }
        const xv = first.toX(m.step);
        if (!inside(xv)) continue;
        const x = u.valToPos(xv, "x", true);
        ctx.strokeStyle = "#1d232a";
        ctx.lineWidth = 2 * dpr;
        ctx.setLineDash([6 * dpr, 3 * dpr]);
        ctx.beginPath();
        ctx.moveTo(x, top);
        ctx.lineTo(x, top + h);
        ctx.stroke();
        ctx.setLineDash([]);
        ctx.fillStyle = "#1d232a";
        ctx.font = "600 " + 11 * dpr + "px sans-serif";
        ctx.fillText(m.label, x + 4 * dpr, top + h - 18 * dpr);
      }
      ctx.restore();
      fig.setAttribute("data-findings-drawn", String(drawnFindings));
      fig.setAttribute("data-clipped", String(clipped));
    }
  }

  // ---- a simple chart of console rows ---------------------------------------------------------------
  function chartRows(box, result) {
    box.textContent = "";
    const numeric = (t) => /^(DOUBLE|FLOAT|REAL|BIGINT|INTEGER|SMALLINT|TINYINT|HUGEINT|UBIGINT|UINTEGER|DECIMAL)/.test(t);
    const cols = result.columns;
    const nums = cols.map((c, i) => (numeric(result.types[i]) ? i : -1)).filter((i) => i >= 0);
    if (nums.length < 2) { box.append(el("p", { class: "note", text: "chart this needs two numeric columns: an x (step, say) and a y" })); return; }
    const xi = cols.indexOf("step") >= 0 && nums.includes(cols.indexOf("step")) ? cols.indexOf("step") : nums[0];
    const ys = nums.filter((i) => i !== xi).slice(0, 6);
    const gi = cols.indexOf("run_id");
    const groups = new Map();
    for (const row of result.rows) {
      const g = gi >= 0 ? String(row[gi]) : "";
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(row);
    }
    const tables = [], series = [{ label: cols[xi] }];
    let k = 0;
    for (const [g, rows] of groups) {
      rows.sort((a, b) => a[xi] - b[xi]);
      const xs = [], seen = new Set(), keep = [];
      rows.forEach((r) => { if (typeof r[xi] === "number" && !seen.has(r[xi])) { seen.add(r[xi]); keep.push(r); xs.push(r[xi]); } });
      for (const yi of ys) {
        tables.push([xs, keep.map((r) => (typeof r[yi] === "number" ? r[yi] : null))]);
        const colour = g && Live.colours.has(g) && ys.length === 1 ? Live.colour(g) : PALETTE[k++ % PALETTE.length];
        series.push({ label: (g ? (Live.row(g) ? Live.row(g).name : g) + " " : "") + cols[yi], stroke: colour, width: 1.5, spanGaps: true, points: { show: false } });
      }
    }
    if (!tables.length || !tables[0][0].length) { box.append(el("p", { class: "note", text: "no numeric x values to draw" })); return; }
    const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
    new uPlot({ width: Math.max(400, box.clientWidth || 800), height: 260, scales: { x: { time: false } },
      series: series, axes: [{}, { size: 64, values: (u, v) => v.map(fmt) }] }, data, box);
  }

  // ---- the SQL console --------------------------------------------------------------------------------
  function shellQuote(text) { return "'" + String(text).replace(/'/g, "'\\''") + "'"; }

  function setupConsole(selectedIds) {
    const sql = $("sql");
    const ids = selectedIds();
    sql.value = "SELECT run_id, step, reward_mean, kl_mean\nFROM steps\n" +
      (ids.length ? "WHERE run_id IN (" + ids.map((i) => "'" + i.replace(/'/g, "''") + "'").join(", ") + ")\n" : "") + "ORDER BY run_id, step";
    let last = null;
    async function runIt() {
      const status = $("sql-status"), table = $("sql-result");
      status.textContent = "running…";
      $("sql-chart").disabled = true;
      try {
        const result = await getJSON("/api/query", { method: "POST", headers: { "content-type": "application/json" },
          body: JSON.stringify({ sql: sql.value, limit: +$("sql-limit").value }) });
        last = result;
        table.textContent = "";
        table.append(el("thead", {}, el("tr", {}, ...result.columns.map((c, i) => el("th", { title: result.types[i], text: c })))));
        const body = el("tbody");
        for (const row of result.rows) {
          body.append(el("tr", {}, ...row.map((v) => el("td", { class: typeof v === "number" ? "num" : null, text: v === null ? "NULL" : typeof v === "object" ? JSON.stringify(v) : typeof v === "number" ? fmt(v) : v }))));
        }
        table.append(body);
        status.textContent = result.rows.length + " row" + (result.rows.length === 1 ? "" : "s") + (result.truncated ? " (the first " + result.limit + "; there are more)" : "") +
          " in " + result.elapsed_s + " s" + (result.cells_cut ? ", " + result.cells_cut + " long cells cut" : "");
        $("sql-chart").disabled = false;
        document.body.setAttribute("data-sql-rows", String(result.rows.length));
      } catch (e) {
        status.textContent = e.message;
        status.className = "note bad";
        document.body.setAttribute("data-sql-rows", "error");
        return;
      }
      status.className = "note";
    }
    $("sql-run").addEventListener("click", runIt);
    sql.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); runIt(); } });
    $("sql-chart").addEventListener("click", () => { if (last) chartRows($("sql-chart-box"), last); });
    $("sql-copy").addEventListener("click", () => {
      const cli = $("sql-cli");
      cli.hidden = false;
      cli.value = "rlprobe query " + shellQuote(CONFIG.root) + " " + shellQuote(sql.value.trim());
      cli.select();
      if (navigator.clipboard) navigator.clipboard.writeText(cli.value).catch(() => {});
    });
  }

  // ---- the runs page --------------------------------------------------------------------------------
  function runsPage() {
    const hash = new URLSearchParams(location.hash.slice(1));
    let selected = hash.has("runs") ? hash.get("runs").split(",").filter(Boolean) : null;
    let sortKey = "created", sortDir = 1;
    let seenKeys = new Map();
    let lastFindings = new Map();
    const panel = new ChartPanel({ onChange: saveHash });
    panel.restore({ metrics: hash.has("metrics") ? hash.get("metrics").split(",").filter(Boolean) : [], x: hash.get("x"),
      smooth: hash.get("smooth"), log: hash.get("log") === "1", fit: hash.get("fit") === "1" });

    function saveHash() {
      const s = panel.state();
      const params = new URLSearchParams();
      params.set("runs", (selected || []).join(","));
      params.set("metrics", s.metrics.join(","));
      params.set("x", s.x);
      if (s.smooth) params.set("smooth", String(s.smooth));
      if (s.log) params.set("log", "1");
      if (s.fit) params.set("fit", "1");
      history.replaceState(null, "", "#" + params.toString());
    }

    function label(r) { return r.name || r.run_id; }

    function matches(r) {
      const text = $("f-text").value.trim().toLowerCase();
      if (text) {
        const hay = [r.name, r.run_id, r.model_name, r.algorithm, r.path, ...(r.tags || [])].join(" ").toLowerCase();
        if (!text.split(/\s+/).every((t) => hay.includes(t))) return false;
      }
      const tag = $("f-tag").value, status = $("f-status").value, sig = $("f-sig").value;
      if (tag && !(r.tags || []).includes(tag)) return false;
      if (status && r.status !== status) return false;
      if (sig && !r.findings.signatures.includes(sig)) return false;
      return true;
    }

    function sortValue(r) {
      switch (sortKey) {
        case "worst": return r.findings.worst ? SEVERITY[r.findings.worst.severity] * 10 + r.findings.worst.confidence : -1;
        case "tags": return (r.tags || []).join(",");
        case "created": return r.created_at || "";
        default: { const v = r[sortKey]; return v === null || v === undefined ? "" : v; }
      }
    }

    function fillSelect(id, values, first) {
      const s = $(id), keep = s.value;
      s.textContent = "";
      s.append(el("option", { value: "", text: first }));
      values.forEach((v) => s.append(el("option", { value: v, text: v })));
      s.value = values.includes(keep) ? keep : "";
    }

    function renderTable() {
      const listing = Live.listing;
      if (!listing) return;
      const rows = listing.runs.filter(matches);
      rows.sort((a, b) => { const x = sortValue(a), y = sortValue(b); return (x < y ? -1 : x > y ? 1 : 0) * sortDir; });
      const body = document.querySelector("#runs-table tbody");
      body.textContent = "";
      for (const r of rows) {
        const box = el("input", { type: "checkbox", title: "draw this run on the charts" });
        box.checked = selected.includes(r.run_id);
        box.addEventListener("change", () => {
          selected = box.checked ? selected.concat([r.run_id]) : selected.filter((x) => x !== r.run_id);
          selectionChanged();
        });
        const sw = el("span", { class: "swatch" });
        sw.style.background = Live.colour(r.run_id);
        const name = el("td", { class: "name" }, sw, el("a", { href: runUrl(r.run_id), text: label(r) }),
          r.name && r.name !== r.run_id ? el("span", { class: "id", text: r.run_id }) : null,
          el("span", { class: "id", text: r.path }));
        const tags = el("td", {}, ...(r.tags || []).map((t) => el("span", { class: "tag", text: t, title: "show runs tagged " + t,
          onclick: () => { $("f-tag").value = t; renderTable(); } })));
        const status = el("td", {}, el("span", { class: "status status-" + r.status, text: r.status }),
          r.error ? el("span", { class: "error", text: r.error }) : null);
        let progress;
        if (r.planned_steps) {
          const bar = el("progress", { max: r.planned_steps, value: Math.min(r.last_step || 0, r.planned_steps) });
          progress = el("td", {}, bar, (r.last_step === null ? "–" : r.last_step) + " / " + r.planned_steps);
        } else {
          progress = el("td", { text: r.steps_recorded ? "step " + r.last_step + " (" + r.steps_recorded + " recorded)" : "no steps yet" });
        }
        const f = r.findings;
        let worst;
        if (r.status === "broken") worst = el("td", { class: "pending", text: "–" });
        else if (f.state === "pending") worst = el("td", { class: "pending", text: "diagnosing…" });
        else if (f.state === "error") worst = el("td", { class: "bad", text: "doctor: " + f.error });
        else if (f.state === "no steps") worst = el("td", { class: "pending", text: "–" });
        else if (!f.worst) worst = el("td", { class: "note", text: "none" });
        else worst = el("td", {}, badge(f.worst.severity), " " + f.worst.signature_id + " @ " + f.worst.first_step,
          f.count > 1 ? el("span", { class: "note", text: " +" + (f.count - 1) }) : null);
        const tr = el("tr", { "data-run": r.run_id, "data-steps": r.steps_recorded, class: (box.checked ? "selected " : "") + (r.status === "broken" ? "broken" : "") },
          el("td", {}, box), name, tags, el("td", { text: r.algorithm || "" }), el("td", { text: r.model_name || "" }), status, progress,
          el("td", { text: r.last_write_at ? ago(listing.now - r.last_write_at) : "–", title: utc(r.last_write_at) }), worst);
        body.append(tr);
      }
      $("runs-empty").hidden = rows.length > 0;
      $("runs-count").textContent = rows.length === listing.runs.length ? listing.runs.length + " runs" : rows.length + " of " + listing.runs.length + " runs";
      document.querySelectorAll("#runs-table th[data-sort]").forEach((th) => {
        th.className = th.getAttribute("data-sort") === sortKey ? (sortDir > 0 ? "sorted-asc" : "sorted-desc") : "";
      });
      const cmp = $("compare-link");
      cmp.hidden = selected.length !== 2;
      if (selected.length === 2) cmp.href = "/compare?" + query({ a: selected[0], b: selected[1] });
    }

    function selectionChanged() {
      selected = selected.filter((id) => Live.row(id));
      renderTable();
      $("charts-for").textContent = selected.length ? selected.length + " run" + (selected.length === 1 ? "" : "s") : "select runs in the table";
      panel.setRuns(selected.map((id) => ({ id: id, label: label(Live.row(id)), colour: Live.colour(id) })))
        .then(() => document.body.setAttribute("data-ready", "1"));
      saveHash();
    }

    document.querySelectorAll("#runs-table th[data-sort]").forEach((th) => th.addEventListener("click", () => {
      const key = th.getAttribute("data-sort");
      sortDir = key === sortKey ? -sortDir : 1;
      sortKey = key;
      renderTable();
    }));
    ["f-text", "f-tag", "f-status", "f-sig"].forEach((id) => $(id).addEventListener("input", renderTable));
    $("select-shown").addEventListener("click", () => {
      const shown = Live.listing.runs.filter(matches).filter((r) => r.status !== "broken").map((r) => r.run_id);
      selected = Array.from(new Set(selected.concat(shown))).slice(0, 50);
      selectionChanged();
    });
    $("select-none").addEventListener("click", () => { selected = []; selectionChanged(); });

    Live.on((listing, first) => {
      fillSelect("f-tag", Array.from(new Set(listing.runs.flatMap((r) => r.tags || []))).sort(), "any tag");
      fillSelect("f-sig", Array.from(new Set(listing.runs.flatMap((r) => r.findings.signatures))).sort(), "any finding");
      if (first) {
        if (selected === null) {  // the most recently written runs, at most three
          selected = listing.runs.filter((r) => r.status !== "broken" && r.steps_recorded)
            .sort((a, b) => (b.last_write_at || 0) - (a.last_write_at || 0)).slice(0, 3).map((r) => r.run_id);
        }
        selectionChanged();
        setupConsole(() => selected);
      } else {
        renderTable();
        const changed = selected.filter((id) => seenKeys.get(id) !== Live.key(Live.row(id)));
        if (changed.length) panel.refresh();
      }
      for (const r of listing.runs) {
        seenKeys.set(r.run_id, Live.key(r));
        const before = lastFindings.get(r.run_id);
        const now = r.findings;
        if (!first && before && before.state === "ok" && now.state === "ok" && now.worst && (now.count > before.count || (before.worst && SEVERITY[now.worst.severity] > SEVERITY[before.worst.severity]))) {
          toast(el("span", {}, badge(now.worst.severity), label(r) + ": " + now.worst.signature_id + " from step " + now.worst.first_step));
        }
        if (now.state === "ok" || !before) lastFindings.set(r.run_id, now);
      }
    });
  }

  // ---- the run page ---------------------------------------------------------------------------------
  function runPage() {
    const id = CONFIG.run_id;
    let seenKey = null, findings = [], samplesState = { offset: 0, cited: null, citedBy: null };
    const panel = new ChartPanel({
      defaults: (logged) => {
        const out = CONFIG.key_series.filter((m) => logged.has(m));
        findings.forEach((f) => f.metrics.forEach((m) => { if (logged.has(m) && !out.includes(m)) out.push(m); }));
        return out;
      },
      onZoom: (zoom, axis) => {
        if (axis !== "step") return;
        $("sample-from").value = zoom ? String(Math.ceil(zoom[0])) : "";
        $("sample-to").value = zoom ? String(Math.floor(zoom[1])) : "";
        loadSamples(true);
      },
    });
    $("report-link").href = "/report?" + query({ id: id });

    function renderHeader(run, f) {
      const name = $("run-name");
      name.textContent = run.name || run.run_id;
      if (run.name && run.name !== run.run_id) name.append(" ", el("small", { text: run.run_id }));
      document.title = "rlprobe ui: " + (run.name || run.run_id);
      const tags = $("run-tags");
      tags.textContent = "";
      (run.tags || []).forEach((t) => tags.append(el("span", { class: "tag", text: t })));
      const sub = $("run-sub");
      sub.textContent = "";
      const nCrit = f.findings.filter((x) => x.severity === "critical").length;
      sub.append(el("span", { class: "status status-" + run.status, text: run.status }));
      [run.algorithm, run.model_name,
        run.steps_recorded ? "steps " + run.first_step + "–" + run.last_step + " (" + run.steps_recorded + " recorded" + (run.planned_steps ? " of " + run.planned_steps + " planned" : "") + ")" : "no steps yet",
        f.state === "ok" ? f.findings.length + " finding" + (f.findings.length === 1 ? "" : "s") + (nCrit ? ", " + nCrit + " critical" : "") : "doctor: " + (f.error || f.state),
        run.last_write_at ? "last write " + utc(run.last_write_at) + " UTC" : null, run.path].forEach((t) => { if (t) sub.append(el("span", { text: t })); });
      $("run-error").hidden = !run.error;
      $("run-error").textContent = run.error ? "This run cannot be read: " + run.error : "";
      const rows = $("manifest-rows");
      rows.textContent = "";
      ["run_id", "name", "tags", "run_dir", "status", "algorithm", "model_name", "world_size", "created_at", "schema_version",
        "steps_recorded", "first_step", "last_step", "planned_steps", "events"].forEach((k) => {
        const v = run[k];
        rows.append(el("tr", {}, el("th", { text: k }), el("td", { text: Array.isArray(v) ? v.join(", ") : v === null || v === undefined ? "–" : v })));
      });
      rows.append(el("tr", {}, el("th", { text: "last_write_at" }), el("td", { text: utc(run.last_write_at) })));
      $("trainer-config").textContent = JSON.stringify(run.trainer_config || {}, null, 2);
      $("environment").textContent = JSON.stringify(run.environment || {}, null, 2);
    }

    function renderFindings(f) {
      const list = $("finding-list");
      list.textContent = "";
      $("findings-state").textContent = f.state === "ok" ? (f.diagnosed_at ? "diagnosed " + utc(f.diagnosed_at) + " UTC in " + f.seconds + " s" : "")
        : f.state === "pending" ? "the doctor is reading this run…" : f.state === "error" ? "the doctor could not read this run: " + f.error : "no steps yet";
      if (f.state === "ok" && !f.findings.length) list.append(el("p", { text: "No findings: none of the doctor's detectors fired on this run." }));
      for (const x of f.findings) {
        const head = el("h3", {}, badge(x.severity), " " + x.signature_id + " ", el("small", { text: "confidence " + x.confidence.toFixed(2) +
          (x.first_step !== null ? ", from step " + x.first_step + (x.last_step !== null ? " to " + x.last_step : "") : "") }));
        const art = el("article", { class: "finding sev-" + x.severity, id: "finding-" + x.i }, head, el("p", { text: x.explanation }));
        if (x.first_step !== null) {
          art.append(el("p", {}, el("button", { type: "button", text: "show on the charts",
            onclick: () => { panel.zoomToSteps(x.first_step, x.last_step !== null ? x.last_step : x.first_step); $("charts").scrollIntoView(); } })));
        }
        if (x.evidence.length) art.append(el("table", { class: "evidence" }, el("tbody", {}, ...x.evidence.map(([k, v]) => el("tr", {}, el("th", { text: k }), el("td", { text: v }))))));
        if (x.actions.length) art.append(el("ul", { class: "actions" }, ...x.actions.map((a) => el("li", { text: a }))));
        if (x.samples.length) {
          art.append(el("p", { class: "cites" }, "Samples: ", el("a", { href: "#samples", text: x.samples.length + " cited",
            onclick: (e) => { e.preventDefault(); showCited(x); } }), " ", ...x.samples.slice(0, 12).map((s) => el("code", { text: s + " " }))));
        }
        list.append(art);
      }
      const skipped = $("skipped");
      skipped.textContent = "";
      f.skipped.forEach((s) => skipped.append(el("tr", {}, el("th", { text: s.signature_id }), el("td", { text: s.reason }))));
      $("skipped-box").hidden = !f.skipped.length;
      $("skipped-summary").textContent = f.skipped.length + " detectors skipped";
    }

    function showCited(finding) {
      samplesState.cited = finding.samples;
      samplesState.citedBy = finding.signature_id;
      loadSamples(true);
      $("samples").scrollIntoView();
    }

    async function loadSamples(reset) {
      if (reset) samplesState.offset = 0;
      const params = { id: id, order: $("sample-order").value, q: $("sample-q").value, lo: $("sample-from").value, hi: $("sample-to").value,
        cited: samplesState.cited ? samplesState.cited.join(",") : null, offset: samplesState.offset, limit: 20 };
      const cited = $("sample-cited");
      cited.hidden = !samplesState.cited;
      cited.textContent = samplesState.cited ? "cited by " + samplesState.citedBy + " ×" : "";
      let got;
      try { got = await getJSON("/api/samples?" + query(params)); } catch (e) { $("sample-count").textContent = e.message; return; }
      const list = $("sample-list");
      if (reset) list.textContent = "";
      for (const s of got.samples) list.append(sampleCard(s));
      samplesState.offset = got.offset + got.samples.length;
      $("sample-more").hidden = samplesState.offset >= got.matching;
      $("sample-count").textContent = "showing " + samplesState.offset + " of " + got.matching + " matching";
      document.body.setAttribute("data-samples", String(samplesState.offset));
    }

    function sampleCard(s) {
      const comps = Object.keys(s).filter((k) => (k.startsWith("reward_component.") || k.startsWith("extra.")) && s[k] !== null);
      const head = el("header", {}, el("b", { text: "step " + s.step }), " ", el("code", { text: s.sample_id }), " ",
        el("span", { text: "reward " + fmt(s.reward_total) }), " ", el("span", { text: "advantage " + fmt(s.advantage) }), " ",
        s.completion_len !== null ? el("span", { text: s.completion_len + " tokens " }) : null,
        s.truncated ? el("span", { class: "bad", text: "truncated " }) : null,
        s.group_id ? el("span", { text: "group " + s.group_id + " " }) : null,
        s.rank ? el("span", { text: "rank " + s.rank + " " }) : null,
        s.capture_reason ? el("span", { class: "note", text: s.capture_reason + " " }) : null,
        ...comps.map((k) => el("span", { class: "comp", text: k.split(".").slice(1).join(".") + " " + fmt(s[k]) + " " })));
      const prompt = el("details", {}, el("summary", { text: "prompt" + (s.prompt_chars > (s.prompt || "").length ? " (first " + (s.prompt || "").length + " of " + s.prompt_chars + " characters)" : "") }),
        el("pre", { class: "text", text: s.prompt || "" }));
      const card = el("article", { class: "sample", "data-step": s.step, "data-sample": s.sample_id }, head, prompt, el("pre", { class: "text completion", text: s.completion || "" }));
      if (s.completion_chars > (s.completion || "").length) card.append(el("p", { class: "note", text: "first " + (s.completion || "").length + " of " + s.completion_chars + " characters" }));
      return card;
    }

    async function loadEvents() {
      const got = await getJSON("/api/events?" + query({ run: [id], quiet: 1 }));
      const rows = $("event-rows");
      rows.textContent = "";
      for (const e of got.events) {
        rows.append(el("tr", { class: "ev-" + e.kind }, el("td", { text: utc(e.timestamp) }), el("td", { text: e.step !== null ? e.step : e.at_step !== null ? "~" + e.at_step : "" }),
          el("td", { text: e.kind + (e.of_kind > 2000 ? " (2000 of " + e.of_kind + ")" : "") }), el("td", { text: e.rank }), el("td", { text: e.message }), el("td", {}, el("code", { text: e.data || "" }))));
      }
    }

    async function load(first) {
      let got;
      try { got = await getJSON("/api/run?" + query({ id: id })); } catch (e) {
        $("run-error").hidden = false;
        $("run-error").textContent = e.message;
        document.body.setAttribute("data-ready", "1");
        return;
      }
      findings = got.findings.findings;
      renderHeader(got.run, got.findings);
      renderFindings(got.findings);
      if (got.run.status === "broken") { document.body.setAttribute("data-ready", "1"); return; }
      // a live run's new samples show when the browser is on its first page (not paging back through it)
      const samples = first || (samplesState.offset <= 20 && document.activeElement !== $("sample-q"));
      const tasks = [loadEvents(), samples ? loadSamples(true) : Promise.resolve()];
      if (first) tasks.push(panel.setRuns([{ id: id, label: got.run.name || id, colour: Live.colour(id) }]));
      else tasks.push(panel.refresh());
      await Promise.all(tasks);
      document.body.setAttribute("data-ready", "1");
    }

    ["sample-order"].forEach((k) => $(k).addEventListener("change", () => loadSamples(true)));
    $("sample-q").addEventListener("input", debounce(() => loadSamples(true), 300));
    $("sample-from").addEventListener("change", () => loadSamples(true));
    $("sample-to").addEventListener("change", () => loadSamples(true));
    $("sample-reset").addEventListener("click", () => {
      $("sample-q").value = ""; $("sample-from").value = ""; $("sample-to").value = "";
      samplesState.cited = null;
      loadSamples(true);
    });
    $("sample-cited").addEventListener("click", () => { samplesState.cited = null; loadSamples(true); });
    $("sample-more").addEventListener("click", () => loadSamples(false));
    $("compare-with").addEventListener("change", () => {
      const other = $("compare-with").value;
      if (other) location.href = "/compare?" + query({ a: id, b: other });
    });

    Live.on((listing, first) => {
      const sel = $("compare-with");
      if (sel.options.length <= 1) {
        listing.runs.filter((r) => r.run_id !== id && r.status !== "broken").forEach((r) => sel.append(el("option", { value: r.run_id, text: r.name || r.run_id })));
      }
      const key = Live.key(Live.row(id));
      if (first) { seenKey = key; load(true); return; }
      if (key !== seenKey) { seenKey = key; load(false); }
    });
  }

  // ---- the compare page -----------------------------------------------------------------------------
  function comparePage() {
    const a = CONFIG.a, b = CONFIG.b;
    let seen = null, divergent = [];
    const panel = new ChartPanel({
      defaults: (logged) => {
        const out = divergent.filter((m) => logged.has(m));
        CONFIG.key_series.forEach((m) => { if (logged.has(m) && !out.includes(m) && out.length < 8) out.push(m); });
        return out;
      },
    });

    function cell(v) { return v === null || v === undefined ? "–" : typeof v === "object" ? JSON.stringify(v) : typeof v === "number" ? fmt(v) : String(v); }

    function table(id, columns, rows, onRow) {
      const t = $(id);
      t.textContent = "";
      t.append(el("thead", {}, el("tr", {}, ...columns.map((c) => el("th", { text: c })))));
      const body = el("tbody");
      rows.forEach((r) => {
        const tr = el("tr", {}, ...r.cells.map((v) => el("td", { text: cell(v) })));
        if (onRow) { tr.className = "divergence-row"; tr.addEventListener("click", () => onRow(r)); }
        body.append(tr);
      });
      t.append(body);
    }

    async function load(first) {
      let got;
      try { got = await getJSON("/api/compare?" + query({ a: a, b: b })); } catch (e) {
        $("compare-error").hidden = false;
        $("compare-error").textContent = e.message;
        document.body.setAttribute("data-ready", "1");
        return;
      }
      $("compare-error").hidden = true;
      const d = got.diff;
      for (const [side, row] of [["a", got.a], ["b", got.b]]) {
        const span = $("name-" + side);
        span.textContent = "";
        const sw = el("span", { class: "swatch" });
        sw.style.background = Live.colour(row.run_id);
        span.append(sw, el("a", { href: runUrl(row.run_id), text: side.toUpperCase() + ": " + (row.name || row.run_id) }));
      }
      $("compare-sub").textContent = d.overlap_steps + " steps in common" + (d.overlap_steps ? " (" + d.overlap_from + "–" + d.overlap_to + ")" : "") +
        ", " + d.divergences.length + " metric" + (d.divergences.length === 1 ? "" : "s") + " diverged, " + d.config_delta.length + " config key" + (d.config_delta.length === 1 ? "" : "s") + " differ";
      divergent = d.divergences.map((x) => x.metric);
      panel.marks = {};
      d.divergences.forEach((x) => {
        panel.marks[x.metric] = [{ step: x.first_step, label: "B " + (x.direction === "b_higher" ? "higher" : "lower") + " from " + x.first_step + " (z " + fmt(x.z) + ")",
          from: x.baseline_steps[0], to: x.baseline_steps[1] }];
      });
      table("divergence-table", ["metric", "first step", "direction", "z", "peak z", "at step", "A", "B"],
        d.divergences.map((x) => ({ x: x, cells: [x.metric, x.first_step, x.direction.replace("_", " "), x.z, x.peak_z, x.peak_step, x.a_value, x.b_value] })),
        (r) => { if (!panel.metrics.includes(r.x.metric)) panel.setMetrics([r.x.metric].concat(panel.metrics)); panel.zoomToSteps(r.x.first_step, r.x.peak_step); $("charts").scrollIntoView(); });
      const notes = [];
      if (d.apart_from_start.length) notes.push("apart from the start (an offset, not a divergence): " + d.apart_from_start.join(", "));
      if (d.only_in_a.length) notes.push("only in A: " + d.only_in_a.join(", "));
      if (d.only_in_b.length) notes.push("only in B: " + d.only_in_b.join(", "));
      if (d.unchanged.length) notes.push("no divergence: " + d.unchanged.join(", "));
      $("divergence-notes").textContent = notes.join(". ");
      table("config-table", ["key", "A", "B"], d.config_delta.map((c) => ({ cells: [c.key, c.only_in === "b" ? "(absent)" : c.a, c.only_in === "a" ? "(absent)" : c.b] })));
      table("prompt-table", ["prompt", "reward A", "reward B", "gap (B − A)", "samples A", "samples B"],
        d.prompt_gaps.map((g) => ({ cells: [g.prompt_text.length > 300 ? g.prompt_text.slice(0, 300) + "…" : g.prompt_text, g.reward_mean_a, g.reward_mean_b, g.gap, g.n_a, g.n_b] })));
      $("prompt-note").textContent = d.shared_prompts + " prompts captured in both runs";
      if (first) await panel.setRuns([a, b].map((id) => ({ id: id, label: (Live.row(id) || {}).name || id, colour: Live.colour(id) })));
      else await panel.refresh();
      document.body.setAttribute("data-ready", "1");
    }

    Live.on((listing, first) => {
      const key = Live.key(Live.row(a)) + "|" + Live.key(Live.row(b));
      if (first) { seen = key; load(true); return; }
      if (key !== seen) { seen = key; load(false); }
    });
  }

  const pages = { runs: runsPage, run: runPage, compare: comparePage };
  pages[CONFIG.page]();
  Live.start();
  showErrors();
})();
