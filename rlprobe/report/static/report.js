/* rlprobe report: draws the charts (uPlot) and drives the sample browser.
   Data comes from the JSON island #rlprobe-data; text is only ever set with textContent. */
(function () {
  "use strict";

  function showErrors() {
    var list = document.getElementById("js-errors");
    var errors = window.rlprobeErrors || [];
    document.body.setAttribute("data-errors", String(errors.length));
    if (!list || !errors.length) return;
    list.hidden = false;
    while (list.firstChild) list.removeChild(list.firstChild);
    errors.forEach(function (msg) {
      var li = document.createElement("li");
      li.textContent = "JavaScript error: " + msg;
      list.appendChild(li);
    });
  }
  window.addEventListener("error", function () { setTimeout(showErrors, 0); });

  var data = JSON.parse(document.getElementById("rlprobe-data").textContent);
  var findings = data.findings;
  var plots = [];
  var syncing = false;
  var drawn = 0;
  var PALETTE = ["#2a6fdb", "#2e9e5b", "#9c4dcc", "#d9480f", "#0b8a8a", "#a61e4d", "#5c7cfa", "#868e96"];

  function rgba(hex, a) {
    var n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16 & 255) + "," + (n >> 8 & 255) + "," + (n & 255) + "," + a + ")";
  }

  function fmt(v) {
    if (v == null) return "–";
    var a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(2).replace(/\.?0+e/, "e");
    return String(+v.toPrecision(5));
  }

  function overlays(chart) {
    return function (u) {
      var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height, dpr = window.devicePixelRatio || 1;
      var xmin = u.scales.x.min, xmax = u.scales.x.max;
      ctx.save();
      ctx.beginPath();
      ctx.rect(u.bbox.left, top, u.bbox.width, h);
      ctx.clip();
      ctx.textAlign = "left";
      ctx.textBaseline = "alphabetic";
      chart.findings.forEach(function (i) {
        var f = findings[i];
        if (f.first == null) return;
        var last = f.last != null ? f.last : data.step_hi;
        if (last < xmin || f.first > xmax) return;
        var x0 = u.valToPos(f.first, "x", true), x1 = u.valToPos(last, "x", true);
        ctx.fillStyle = rgba(f.colour, 0.13);
        ctx.fillRect(x0, top, Math.max(x1 - x0, dpr), h);
        ctx.strokeStyle = f.colour;
        ctx.lineWidth = 2 * dpr;
        ctx.setLineDash([]);
        ctx.beginPath();
        ctx.moveTo(x0, top);
        ctx.lineTo(x0, top + h);
        ctx.stroke();
        ctx.fillStyle = f.colour;
        ctx.font = (11 * dpr) + "px sans-serif";
        ctx.fillText(f.sig, x0 + 4 * dpr, top + 12 * dpr);
      });
      var visible = data.events.filter(function (e) { return e.step >= xmin && e.step <= xmax; });
      ctx.strokeStyle = "rgba(90,100,110,0.55)";
      ctx.lineWidth = dpr;
      ctx.setLineDash([4 * dpr, 4 * dpr]);
      visible.forEach(function (e) {
        var x = u.valToPos(e.step, "x", true);
        ctx.beginPath();
        ctx.moveTo(x, top);
        ctx.lineTo(x, top + h);
        ctx.stroke();
      });
      if (visible.length <= 12) {
        ctx.fillStyle = "rgba(70,80,90,0.9)";
        ctx.font = (10 * dpr) + "px sans-serif";
        visible.forEach(function (e) {
          ctx.fillText(e.kind, u.valToPos(e.step, "x", true) + 3 * dpr, top + h - 4 * dpr);
        });
      }
      ctx.restore();
    };
  }

  function onScale(u, key) {
    if (key !== "x" || syncing) return;
    syncing = true;
    var mn = u.scales.x.min, mx = u.scales.x.max;
    plots.forEach(function (p) {
      if (p !== u) p.setScale("x", { min: mn, max: mx });
      p.root.parentNode.setAttribute("data-x-range", Math.round(p.scales.x.min) + "," + Math.round(p.scales.x.max));
    });
    syncing = false;
    setSampleRange(mn, mx);
  }

  function counted() {
    drawn += 1;
    if (drawn === data.charts.length) {
      document.body.setAttribute("data-rendered", String(plots.length || drawn));
      document.body.setAttribute("data-render-ms", String(Math.round(performance.now())));
      showErrors();
    }
  }

  function makeChart(chart, el) {
    var x = chart.x, series = [{ label: "step", value: function (u, v) { return v == null ? "–" : String(Math.round(v)); } }];
    var values = [x], bands = [];
    if (chart.banded) {
      var s = chart.series[0];
      values.push(s.mean, s.min, s.max);
      series.push(
        { label: s.label + " (mean)", stroke: PALETTE[0], width: 1.5, value: function (u, v) { return fmt(v); } },
        { label: "min", stroke: rgba(PALETTE[0], 0.35), width: 0.5, value: function (u, v) { return fmt(v); } },
        { label: "max", stroke: rgba(PALETTE[0], 0.35), width: 0.5, value: function (u, v) { return fmt(v); } }
      );
      bands.push({ series: [3, 2], fill: rgba(PALETTE[0], 0.16) });
    } else {
      chart.series.forEach(function (s, i) {
        values.push(s.mean);
        series.push({ label: s.label, stroke: PALETTE[i % PALETTE.length], width: 1.5, value: function (u, v) { return fmt(v); } });
      });
    }
    var first = true;
    var opts = {
      width: Math.max(300, el.clientWidth || 600),
      height: 210,
      scales: { x: { time: false }, y: { range: yRange } },
      series: series,
      bands: bands,
      axes: [{ size: 34 }, { size: 70, values: function (u, vals) { return vals.map(fmt); } }],
      cursor: { sync: { key: "rlprobe" }, drag: { x: true, y: false } },
      legend: { live: true },
      hooks: {
        draw: [overlays(chart), function () { if (first) { first = false; counted(); } }],
        setScale: [onScale]
      }
    };
    var plot = new uPlot(opts, values, el);
    plots.push(plot);
    return plot;
  }

  /* uPlot's default range for a constant series is 0..100; keep a flat line in the middle instead. */
  function yRange(u, mn, mx) {
    if (mn == null || mx == null) return [0, 1];
    if (mn === mx) {
      var pad = Math.abs(mn) * 0.1 || 1;
      return [mn - pad, mx + pad];
    }
    return uPlot.rangeNum(mn, mx, 0.1, true);
  }

  function zoomTo(lo, hi) {
    if (!plots.length) return;
    plots[0].setScale("x", { min: lo, max: hi });
  }

  data.charts.forEach(function (chart) {
    var el = document.getElementById(chart.id);
    try {
      makeChart(chart, el);
    } catch (err) {
      window.rlprobeErrors.push("chart " + chart.title + ": " + err);
      showErrors();
    }
  });
  if (!data.charts.length) document.body.setAttribute("data-rendered", "0");

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      plots.forEach(function (p) {
        var w = p.root.parentNode.clientWidth;
        if (w) p.setSize({ width: Math.max(300, w), height: 210 });
      });
    }, 150);
  });

  Array.prototype.forEach.call(document.querySelectorAll("[data-zoom-finding]"), function (el) {
    el.addEventListener("click", function (ev) {
      var f = findings[+el.getAttribute("data-zoom-finding")];
      if (!f || f.first == null) return;
      var last = f.last != null ? f.last : data.step_hi;
      var pad = Math.max(5, Math.round((last - f.first) * 0.25));
      zoomTo(Math.max(data.step_lo, f.first - pad), Math.min(data.step_hi, last + pad));
      ev.preventDefault();
      document.getElementById("charts").scrollIntoView({ behavior: "smooth" });
    });
  });

  /* A link to the report with #steps=A-B opens it zoomed to those steps. */
  var zoomHash = /^#steps=(-?\d+)-(-?\d+)$/.exec(location.hash);
  var pendingZoom = zoomHash ? [+zoomHash[1], +zoomHash[2]] : null;

  /* ---- sample browser ---- */
  var list = document.getElementById("sample-list");
  if (!list) {
    if (pendingZoom) zoomTo(pendingZoom[0], pendingZoom[1]);
    showErrors();
    return;
  }
  var cards = Array.prototype.slice.call(list.querySelectorAll(".sample"));
  var mode = document.getElementById("sample-mode");
  var from = document.getElementById("sample-from");
  var to = document.getElementById("sample-to");
  var more = document.getElementById("sample-more");
  var count = document.getElementById("sample-count");
  var PAGE = 20, limit = PAGE;

  function reward(c) {
    var r = c.getAttribute("data-reward");
    return r === "" ? NaN : +r;
  }

  function apply(keep) {
    var lo = from.value === "" ? -Infinity : +from.value;
    var hi = to.value === "" ? Infinity : +to.value;
    var m = mode.value;
    var chosen = cards.filter(function (c) {
      var step = +c.getAttribute("data-step");
      if (step < lo || step > hi) return false;
      if (m === "cited") return c.getAttribute("data-cited") === "1" || c === keep;
      if (m === "top" || m === "bottom") return !isNaN(reward(c)) || c === keep;
      return true;
    });
    chosen.sort(function (a, b) {
      if (m === "top") return reward(b) - reward(a) || +a.getAttribute("data-step") - +b.getAttribute("data-step");
      if (m === "bottom") return reward(a) - reward(b) || +a.getAttribute("data-step") - +b.getAttribute("data-step");
      return +a.getAttribute("data-step") - +b.getAttribute("data-step");
    });
    var n = Math.max(limit, keep ? chosen.indexOf(keep) + 1 : 0);
    cards.forEach(function (c) { c.hidden = true; });
    chosen.forEach(function (c, i) {
      list.appendChild(c);
      c.hidden = i >= n;
    });
    more.hidden = chosen.length <= n;
    count.textContent = "showing " + Math.min(n, chosen.length) + " of " + chosen.length + " matching (" + cards.length + " embedded)";
  }

  function setSampleRange(lo, hi) {
    if (lo == null || hi == null || !from) return;
    var full = lo <= data.step_lo && hi >= data.step_hi;
    from.value = full ? "" : String(Math.ceil(lo));
    to.value = full ? "" : String(Math.floor(hi));
    limit = PAGE;
    apply();
  }

  mode.addEventListener("change", function () { limit = PAGE; apply(); });
  from.addEventListener("change", function () { limit = PAGE; apply(); });
  to.addEventListener("change", function () { limit = PAGE; apply(); });
  document.getElementById("sample-reset").addEventListener("click", function () {
    from.value = ""; to.value = ""; limit = PAGE; apply();
  });
  more.addEventListener("click", function () { limit += PAGE; apply(); });

  function reveal(n) {
    var card = document.getElementById("sample-" + n);
    if (!card) return;
    mode.value = "cited";
    from.value = "";
    to.value = "";
    apply(card);
    card.scrollIntoView({ block: "start" });
    card.classList.add("flash");
    setTimeout(function () { card.classList.remove("flash"); }, 1600);
  }
  Array.prototype.forEach.call(document.querySelectorAll("a.sample-link"), function (a) {
    a.addEventListener("click", function (ev) {
      ev.preventDefault();
      reveal(a.getAttribute("data-sample"));
      if (history.replaceState) history.replaceState(null, "", a.getAttribute("href"));
    });
  });

  apply();
  if (pendingZoom) zoomTo(pendingZoom[0], pendingZoom[1]);
  var m = /^#sample-(\d+)$/.exec(location.hash);
  if (m) reveal(m[1]);
  showErrors();
})();
