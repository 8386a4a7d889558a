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
    var scales = { x: { time: spec.time !== false } };
    var axes = [{}, { label: spec.yLabel || "", values: function (u, vals) { return vals.map(si); }, size: 60 }];
    var extra = {};
    spec.series.forEach(function (s) {
      if (s.scale && !extra[s.scale]) {
        extra[s.scale] = true;
        scales[s.scale] = { auto: true };
        axes.push({ scale: s.scale, side: 1, grid: { show: false }, size: 60,
                    label: s.scale === "us" ? "µs" : "ops/s",
                    values: function (u, vals) { return vals.map(si); } });
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

  // A running job's page reloads itself, unless the reader is zoomed in or typing.
  var live = +(document.body.dataset.live || 0);
  if (live > 0) {
    setInterval(function () {
      var zoomed = Array.prototype.some.call(document.querySelectorAll("[data-chart]"), function (el) {
        var u = el.uplot;
        return u && u.scales.x.min > u.data[0][0];
      });
      if (!zoomed && !document.hidden && document.activeElement.tagName !== "INPUT") location.reload();
    }, live * 1000);
  }
})();
