// smdebug serve: the Scalars panel. One chart per scalar name; in it one line per run and mode,
// each drawn along its own steps (TRAIN and EVAL do not break each other into dashes): the
// smoothed line (TensorBoard's debiased exponential moving average, computed by the server over
// every value, then downsampled) over the faint raw line (each bucket's lowest and highest
// value); log scale, step, relative and wall-time x axes, regex filter, run toggles, a crosshair
// tooltip, CSV and JSON downloads.
"use strict";
(function () {
  const { el, fmt, dur, download, csvField, exactName, stepWindow } = window.SMD;

  // The x axes: a point's step, its wall time less the run's first (relative), or its wall time.
  const AXES = {
    step: { label: "step", x: (m, j) => m.steps[j] },
    relative: { label: "relative", x: (m, j, origin) => (m.wall_times[j] === null || origin === null ? null : m.wall_times[j] - origin),
                opts: { xFormat: dur, xTicks: dur } },
    wall: { label: "wall time", x: (m, j) => m.wall_times[j],
            opts: { wallAxis: true, xFormat: (t) => new Date(t * 1000).toLocaleString() } },
  };

  const weight = (w) => String(Number(w.toFixed(3))); // 0.6, 0.99, 0.999

  function faint(hex) { // "#1f77b4" -> the same colour, a quarter opaque
    const n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + ",0.25)";
  }

  window.SMD.makeScalars = function (env) {
    const hiddenRuns = new Set();
    // Zoomed charts: scalar name -> [first, last] step of the window the person dragged across.
    // Each is fetched from the server (`from`/`to`): every value of a window narrow enough, as
    // the run's files hold them, not the whole run's downsampled points cut to the window.
    const zooms = new Map();
    let last = []; // [{run, result}] of the latest fetch (what the downloads save)
    let drawing = 0; // the latest draw: an older one's answers (the slider moved on) are dropped

    function drawToggles() {
      const box = document.getElementById("run-toggles");
      const runs = env.runs();
      if (runs.length < 2) { window.SMD.clear(box); return; }
      if (box.querySelectorAll("input").length === runs.length) return;
      window.SMD.clear(box);
      box.append("Runs: ");
      runs.forEach((r) => {
        const input = el("input", { type: "checkbox", "data-run": String(r.id) });
        input.checked = !hiddenRuns.has(r.id);
        input.addEventListener("change", () => {
          if (input.checked) hiddenRuns.delete(r.id); else hiddenRuns.add(r.id);
          env.redraw();
        });
        box.append(el("label", null, input, " " + r.name + " "));
      });
    }

    async function draw() {
      const regex = document.getElementById("scalar-regex").value;
      const w = parseFloat(document.getElementById("smoothing").value) || 0;
      const log = document.getElementById("log-scale").checked;
      const axisName = document.getElementById("scalar-axis").value;
      const axis = AXES[axisName] || AXES.step;
      const suffix = (log ? ":log" : "") + (axisName === "step" ? "" : ":" + axisName);
      document.getElementById("smoothing-value").textContent = weight(w);
      drawToggles();
      const box = document.getElementById("scalar-charts");
      const shownRuns = env.runs().filter((r) => !hiddenRuns.has(r.id));
      const mine = ++drawing;
      let results;
      try {
        results = await Promise.all(shownRuns.map((r) => env.get("runs/" + r.id + "/scalars?" + env.pointsQuery() +
          "&smoothing=" + w + "&regex=" + encodeURIComponent(regex))));
        if (mine !== drawing) return;
        document.getElementById("scalar-error").textContent = "";
      } catch (e) { if (mine === drawing) document.getElementById("scalar-error").textContent = String(e.message); return; }
      // A zoomed chart's scalar: its window, from every run shown, in place of its whole course.
      const windowed = Array.from(zooms).filter(([name]) => results.some((res) => res.scalars.some((s) => s.name === name)));
      let windows;
      try {
        windows = await Promise.all(windowed.map(([name, [from, to]]) => Promise.all(shownRuns.map((r) => env.get("runs/" + r.id +
          "/scalars?" + env.pointsQuery() + "&smoothing=" + w + "&regex=" + encodeURIComponent(exactName(name)) + "&from=" + from + "&to=" + to)))));
        if (mine !== drawing) return;
      } catch (e) { if (mine === drawing) document.getElementById("scalar-error").textContent = String(e.message); return; }
      windowed.forEach(([name], zi) => results.forEach((res, ri) => {
        const i = res.scalars.findIndex((s) => s.name === name);
        const win = windows[zi][ri].scalars.find((s) => s.name === name);
        if (i >= 0 && win) res.scalars[i] = win;
      }));
      env.status.scalar_zooms = Object.fromEntries(zooms);
      last = shownRuns.map((r, i) => ({ run: r.name, result: results[i] }));
      const byName = new Map();
      results.forEach((res, ri) => {
        for (const s of res.scalars) {
          if (!byName.has(s.name)) byName.set(s.name, []);
          for (const m of s.modes) byName.get(s.name).push({ run: shownRuns[ri].name, mode: m, origin: res.first_wall_time, smoothing: res.smoothing });
        }
      });
      const keys = new Set(Array.from(byName.keys()).map((n) => "scalar:" + n + suffix));
      env.dropCharts(box, (k) => !keys.has(k));
      const ci = shownRuns.findIndex((r) => r.id === env.current());
      const shown = results[ci] || { scalars: [], series_total: 0 };
      document.getElementById("scalar-more").textContent = shown.series_total > shown.scalars.length ?
        "Showing " + shown.scalars.length + " of " + shown.series_total + " scalars: narrow the filter to see the others" : "";
      const missing = box.querySelector("p.missing");
      if (!byName.size) { if (!missing) box.append(el("p", { className: "missing", text: "No scalars" + (regex ? " match" : " yet") + "." })); }
      else if (missing) missing.remove();
      for (const [name, list] of byName) {
        // The union of every line's x values (steps or times) is the x axis; each line has
        // values at its own only and is drawn across the others (spanGaps), so it is never cut.
        for (const l of list) {
          l.x = l.mode.steps.map((_, j) => axis.x(l.mode, j, l.origin));
          l.sx = l.mode.smoothed ? l.mode.smoothed.steps.map((_, j) => axis.x(l.mode.smoothed, j, l.origin)) : [];
        }
        const xs = Array.from(new Set(list.flatMap((l) => l.x.concat(l.sx).filter((x) => x !== null)))).sort((a, b) => a - b);
        const index = new Map(xs.map((x, i) => [x, i]));
        const ys = [], series = [];
        list.forEach((l, i) => {
          const colour = env.palette[i % env.palette.length];
          const label = (shownRuns.length > 1 ? l.run + " " : "") + l.mode.mode;
          const keep = (v) => (v === null || (log && v <= 0) ? null : v);
          const line = (x, values) => {
            const y = new Array(xs.length).fill(null);
            x.forEach((at, j) => { if (at !== null) y[index.get(at)] = keep(values[j]); });
            return y;
          };
          const sparse = l.mode.steps.length < 40;
          const sm = l.mode.smoothed;
          if (sm) {
            ys.push(line(l.x, l.mode.values), line(l.sx, sm.values));
            series.push({ label: label + " raw", color: faint(colour), spanGaps: true, points: sparse, width: 1 },
                        { label: label + " (smoothed " + weight(l.smoothing) + ")", color: colour, spanGaps: true, points: sparse, width: 2 });
          } else {
            ys.push(line(l.x, l.mode.values));
            series.push({ label, color: colour, spanGaps: true, points: sparse, width: 2 });
          }
        });
        const zoomed = zooms.get(name);
        const lastValues = list.map((l) => l.mode.mode + " " + fmt(l.mode.values[l.mode.values.length - 1], 4)).join(", ");
        // Steps where a value was NaN or ±Inf are marked (on the step axis).
        const marks = axisName === "step" ? window.SMD.mergeMarks(list.flatMap((l) => l.mode.non_finite)) : [];
        const title = name + (zoomed ? " · steps " + zoomed[0] + "–" + zoomed[1] + " (double-click: all steps)" : " · last " + lastValues) +
          (marks.length ? " · " + window.SMD.nonFiniteText(marks) : "");
        env.chart(box, "scalar:" + name + suffix, title, [xs, ...ys], series,
          Object.assign({ log, xLabel: axis.label, nonFinite: marks, onZoom: (range) => zoomTo(name, range, list, axisName === "step"),
                          xRange: zoomed && axisName === "step" ? zoomed : null, windowed: !!zoomed }, axis.opts || {}));
      }
      env.status.panels.scalars = true;
      return results;
    }

    // A drag across a chart (`range`: its x values) asks for the steps it spans; `null` (a
    // double-click) for the whole run again. On a time axis the steps are those of the points
    // the chart holds within the drag (or around it, when it falls between two).
    function zoomTo(name, range, list, byStep) {
      if (!range) zooms.delete(name);
      else if (byStep) zooms.set(name, stepWindow(range));
      else {
        const points = list.flatMap((l) => l.x.map((x, j) => [x, l.mode.steps[j]])).filter((p) => p[0] !== null);
        const inside = points.filter((p) => p[0] >= range[0] && p[0] <= range[1]).map((p) => p[1]);
        const before = points.filter((p) => p[0] <= range[0]).map((p) => p[1]);
        const after = points.filter((p) => p[0] >= range[1]).map((p) => p[1]);
        const from = inside.length ? Math.min(...inside) : before.length ? Math.max(...before) : null;
        const to = inside.length ? Math.max(...inside) : after.length ? Math.min(...after) : null;
        if (from === null || to === null) return;
        zooms.set(name, [from, to]);
      }
      env.redraw();
    }

    function csv() {
      const rows = [["run", "scalar", "mode", "step", "value", "wall_time"].join(",")];
      for (const { run, result } of last) {
        for (const s of result.scalars) {
          for (const m of s.modes) {
            m.steps.forEach((step, i) => rows.push([run, s.name, m.mode, step, m.values[i], m.wall_times[i]].map(csvField).join(",")));
          }
        }
      }
      return rows.join("\n") + "\n";
    }
    function json() {
      return JSON.stringify(last.map(({ run, result }) => ({ run, scalars: result.scalars })), null, 1);
    }
    document.getElementById("download-csv").addEventListener("click", () => download("scalars.csv", "text/csv", csv()));
    document.getElementById("download-json").addEventListener("click", () => download("scalars.json", "application/json", json()));
    return { draw, csv, json };
  };
})();
