/* iolens pages: draw the time series (uPlot, vendored) and keep live pages fresh.
   Each chart is a <div data-chart=ID> next to <script type="application/json" id=ID>
   holding {title, x: [epoch s], series: [{label, color, values, scale}], bands, yLabel}. */
(function () {
  "use strict";

  function si(v) {
    if (v == null || !isFinite(v)) return "-";
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (a >= 1e3) return (v / 1e3).toFixed(1) + "k";
    if (a >= 10 || a === 0) return v.toFixed(0);
    return v.toFixed(2);
  }

  // Tick labels that tell the ticks apart: one SI prefix for the axis (its largest tick)
  // and as many decimals as the step between ticks needs ("0.001, 0.002", not "0.00").
  function ticks(u, vals) {
    var big = 0, step = 0;
    vals.forEach(function (v, i) {
      if (v == null) return;
      big = Math.max(big, Math.abs(v));
      var d = i ? Math.abs(v - vals[i - 1]) : 0;
      if (d > 0 && (!step || d < step)) step = d;
    });
    var div = big >= 1e9 ? 1e9 : big >= 1e6 ? 1e6 : big >= 1e3 ? 1e3 : 1;
    var unit = { 1e9: "G", 1e6: "M", 1e3: "k", 1: "" }[div];
    var dec = step ? Math.min(9, Math.max(0, Math.ceil(-Math.log10(step / div) - 1e-9))) : 0;
    return vals.map(function (v) { return v == null ? "" : (v / div).toFixed(dec) + unit; });
  }

  // A time axis spans at least a minute around its data. uPlot widens a span of zero (one
  // sample: a 1-second job) by 86400 "ms", which with epoch seconds is 1000 days.
  var MIN_SPAN = 60;
  function timeRange(u, min, max) {
    var x = u.data[0] || [];
    if (!x.length) return [min, max];
    var lo = x[0], hi = x[x.length - 1];
    if (hi - lo >= MIN_SPAN) return [min, max];
    var mid = (lo + hi) / 2;
    return [mid - MIN_SPAN / 2, mid + MIN_SPAN / 2];
  }

  // I/O phases (or an anomaly episode) as shaded bands behind the lines.
  function bandsPlugin(bands) {
    return {
      hooks: {
        drawClear: [function (u) {
          var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
          ctx.save();
          bands.forEach(function (b) {
            if (b[0] == null || b[1] == null) return;
            var x0 = u.valToPos(b[0], "x", true), x1 = u.valToPos(b[1], "x", true);
            ctx.fillStyle = b[2] ? "rgba(214,39,40,0.13)" : "rgba(255,191,0,0.18)";
            ctx.fillRect(x0, top, Math.max(1, x1 - x0), h);
          });
          ctx.restore();
        }]
      }
    };
  }

  function draw(el) {
    var holder = document.getElementById(el.dataset.chart);
    if (!holder || typeof uPlot === "undefined") return;
    var spec = JSON.parse(holder.textContent);
    var time = spec.time !== false;
    var scales = { x: time ? { time: true, range: timeRange } : { time: false } };
    var axes = [{}, { label: spec.yLabel || "", values: ticks, size: 60 }];
    var extra = {};
    spec.series.forEach(function (s) {
      if (s.scale && !extra[s.scale]) {
        extra[s.scale] = true;
        scales[s.scale] = { auto: true };
        axes.push({ scale: s.scale, side: 1, grid: { show: false }, size: 60,
                    label: s.scale === "us" ? "µs" : "ops/s",
                    values: ticks });
      }
    });
    var opts = {
      title: spec.title || "",
      width: Math.max(320, el.clientWidth || 800),
      height: +(el.dataset.height || 240),
      scales: scales,
      axes: axes,
      cursor: { drag: { x: true, y: false }, sync: { key: "iolens" } },
      tzDate: function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); },
      plugins: spec.bands && spec.bands.length ? [bandsPlugin(spec.bands)] : [],
      series: [{}].concat(spec.series.map(function (s) {
        return { label: s.label, stroke: s.color, width: 1.5, scale: s.scale || "y",
                 fill: s.scale ? undefined : s.color + "22", spanGaps: false,
                 value: function (u, v) { return si(v); } };
      }))
    };
    var data = [spec.x].concat(spec.series.map(function (s) { return s.values; }));
    var plot = new uPlot(opts, data, el);
    el.uplot = plot;
    window.addEventListener("resize", function () {
      plot.setSize({ width: Math.max(320, el.clientWidth || 800), height: opts.height });
    });
  }

  document.querySelectorAll("[data-chart]").forEach(draw);

  // A running job's page polls its live endpoint and fills the "Now" section in place
  // (text only, no markup from the server); once the job has ended it reloads once.
  var now = document.getElementById("live-now");
  function text(id, v) { var el = document.getElementById(id); if (el) el.textContent = v; }
  function dur(s) {
    if (s == null) return "-";
    s = Math.round(s);
    var h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60), r = s % 60;
    return (h ? h + " h " : "") + (h || m ? m + " min " : "") + r + " s";
  }
  function bytes(v) { return v == null ? "-" : si(v) + "B"; }
  function rate(v) { return v == null ? "-" : si(v) + "B/s"; }
  function update(d) {
    text("live-state", d.state || "-");
    text("live-elapsed", dur(d.elapsed_s));
    text("live-read", bytes(d.read_bytes));
    text("live-written", bytes(d.write_bytes));
    var b = d.bandwidth || {};
    text("live-bw", rate(b.current_bw));
    text("live-baseline", rate(b.baseline_bw));
    text("live-baseline-what", b.baseline ? b.baseline + (b.earlier_runs ? " (" + b.earlier_runs + ")" : "") : "no earlier runs yet");
    var p = d.phase;
    text("live-phase", p ? "#" + p.phase + ", " + dur(p.duration_s) + ", " + rate(p.bw) : "-");
    var v = document.getElementById("live-verdict");
    if (b.ratio != null) {
      v.hidden = false;
      v.className = "sev " + (d.slower ? "warning" : "info");
      v.textContent = d.slower
        ? "Slower than " + b.baseline + ": " + (1 / b.ratio).toFixed(1) + "x below its bandwidth"
        : "At " + Math.round(b.ratio * 100) + "% of the bandwidth of " + b.baseline;
    }
    var ul = document.getElementById("live-findings");
    ul.textContent = "";
    (d.findings || []).forEach(function (f) {
      var li = document.createElement("li");
      li.className = "finding " + f.severity;
      li.textContent = f.code + " " + f.name + (f.live ? " (provisional)" : "");
      ul.appendChild(li);
    });
    text("live-updated", "updated " + new Date().toISOString().slice(11, 19) + " UTC");
  }
  if (now) {
    var poll = function () {
      if (document.hidden) return;
      fetch(now.dataset.liveUrl, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (d) {
          if (!d) return;
          update(d);
          if (!d.running) { clearInterval(timer); location.reload(); }
        })
        .catch(function () {});
    };
    var timer = setInterval(poll, 5000);
    poll();
  }

  // Another live page reloads itself, unless the reader is zoomed in or typing.
  var live = +(document.body.dataset.live || 0);
  if (live > 0 && !now) {
    setInterval(function () {
      var zoomed = Array.prototype.some.call(document.querySelectorAll("[data-chart]"), function (el) {
        var u = el.uplot;
        return u && u.scales.x.min > u.data[0][0];
      });
      if (!zoomed && !document.hidden && document.activeElement.tagName !== "INPUT") location.reload();
    }, live * 1000);
  }
})();
