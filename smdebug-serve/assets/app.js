// smdebug serve: the dashboard page. Run data only ever reaches the DOM through textContent,
// attribute values or canvas text, never as markup.
"use strict";
(function () {
  const status = { panels: {}, charts: 0, errors: [], csp: [], steps: null, last_step_time: null,
                   ended: false, updates: 0, requests: 0 };
  function publish() {
    // What a test (or a curious person) can read back: the time charts' x ranges and the zoom.
    status.zoom = zoom;
    // First meaningful paint: the overview, system, steps and scalars panels all drawn with the
    // run's data, in ms since navigation started.
    if (status.first_paint_ms === undefined && ["overview", "system", "steps", "scalars"].every((p) => status.panels[p])) {
      status.first_paint_ms = Math.round(performance.now());
    }
    status.time_scales = [];
    for (const c of charts.values()) {
      if (c.plot.timeChart) status.time_scales.push([c.plot.scales.x.min, c.plot.scales.x.max]);
    }
    document.body.dataset.status = JSON.stringify(status);
  }
  window.addEventListener("error", (e) => { status.errors.push(String(e.message)); publish(); });
  window.addEventListener("unhandledrejection", (e) => { status.errors.push(String(e.reason)); publish(); });
  document.addEventListener("securitypolicyviolation", (e) => {
    status.csp.push(e.violatedDirective + " " + e.blockedURI); publish();
  });

  const $ = (id) => document.getElementById(id);
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (k === "text") node.textContent = v;
        else if (k === "className") node.className = v;
        else node.setAttribute(k, v);
      }
    }
    for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function fmt(x, digits) {
    if (x === null || x === undefined || Number.isNaN(x)) return "–";
    if (typeof x !== "number") return String(x);
    const a = Math.abs(x);
    if (a >= 1e9) return (x / 1e9).toFixed(2) + "G";
    if (a >= 1e6) return (x / 1e6).toFixed(2) + "M";
    if (a >= 1e4) return (x / 1e3).toFixed(1) + "k";
    return x.toFixed(digits === undefined ? 2 : digits);
  }

  // A duration in seconds in the unit that fits it: "640 µs", "12.5 ms", "3.20 s", "2 min 05 s"
  // (never "0.00 s" for a sub-millisecond step).
  function dur(seconds) {
    if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "–";
    if (!Number.isFinite(seconds)) return seconds > 0 ? "+Inf s" : "-Inf s";
    const a = Math.abs(seconds);
    if (a === 0) return "0 s";
    // Three significant digits, trailing zeros after the point dropped ("640", "12.5", "1.2").
    const three = (x) => { const t = x.toPrecision(3); return t.includes(".") ? t.replace(/0+$/, "").replace(/\.$/, "") : t; };
    // A value that rounds up to 1000 of a unit is shown in the next one ("1 ms", not "1.00e+3 µs").
    const fits = (x) => Math.abs(Number(x.toPrecision(3))) < 1000;
    if (a < 1e-3 && fits(seconds * 1e6)) return three(seconds * 1e6) + " µs";
    if (a < 1 && fits(seconds * 1e3)) return three(seconds * 1e3) + " ms";
    if (a < 120) return seconds.toFixed(2) + " s";
    const m = Math.floor(a / 60), rest = Math.round(a - 60 * m);
    return (seconds < 0 ? "-" : "") + m + " min " + String(rest).padStart(2, "0") + " s";
  }

  // The token: from the URL, else asked for.
  const params = new URLSearchParams(location.search);
  let token = params.get("token") || "";
  function api(path) {
    const sep = path.includes("?") ? "&" : "?";
    return "/api/" + path + (token ? sep + "token=" + encodeURIComponent(token) : "");
  }
  async function get(path) {
    status.requests++;
    const r = await fetch(api(path), { headers: token ? { "x-smdebug-token": token } : {} });
    if (r.status === 401) { askToken(); throw new Error("token needed"); }
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }
  function askToken() {
    const form = $("token-form");
    if (!form.hidden) return;
    form.hidden = false;
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      token = $("token-input").value.trim();
      form.hidden = true;
      start();
    }, { once: true });
  }

  // ---- charts -------------------------------------------------------------------------------
  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
                   "#7f7f7f", "#bcbd22", "#17becf"];
  let zoom = null; // [from, to] seconds, or null for everything
  const charts = new Map(); // key -> {plot, box}
  let syncing = false;
  let zoomTimer = null;

  function chartWidth() { return Math.max(320, Math.min(560, (document.body.clientWidth - 80) / 2)); }

  // A zoom is the user's when it follows a press on the chart (drag to zoom, double-click to
  // reset); scale changes from new data are not zooms.
  function onZoom(u) {
    if (syncing || !u.timeChart || !u.pressedAt || Date.now() - u.pressedAt > 3000) return;
    u.pressedAt = 0;
    const min = u.scales.x.min, max = u.scales.x.max;
    if (min === undefined || max === undefined || min === null) return;
    const xs = u.data[0];
    const whole = xs.length && min <= xs[0] && max >= xs[xs.length - 1];
    zoom = whole ? null : [min, max];
    syncing = true;
    for (const c of charts.values()) {
      if (c.plot !== u && c.plot.timeChart) {
        if (zoom) c.plot.setScale("x", { min, max });
        else c.plot.setData(c.plot.data, true);
      }
    }
    syncing = false;
    clearTimeout(zoomTimer);
    zoomTimer = setTimeout(() => { refreshTimeViews(); }, 150);
  }

  // Draws (or updates) a chart. `series`: [{label, color}], `data`: [xs, ys...].
  function chart(container, key, title, data, series, opts) {
    opts = opts || {};
    const existing = charts.get(key);
    if (existing && existing.seriesCount === series.length && existing.container === container) {
      existing.plot.setData(data, !zoom || !opts.time);
      if (zoom && opts.time) { syncing = true; existing.plot.setScale("x", { min: zoom[0], max: zoom[1] }); syncing = false; }
      return existing.plot;
    }
    if (existing) { existing.plot.destroy(); existing.box.remove(); }
    const box = el("div", { className: "chart", "data-chart": key });
    box.append(el("h4", { text: title }));
    container.append(box);
    const plot = new uPlot({
      width: opts.width || chartWidth(), height: opts.height || 180,
      scales: { x: { time: !!opts.time } },
      cursor: { sync: { key: opts.time ? "time" : key }, drag: { x: true, y: false } },
      legend: { show: true },
      series: [{ label: opts.xLabel || (opts.time ? "time" : "step") }].concat(series.map((s, i) => ({
        label: s.label, stroke: s.color || palette[i % palette.length], width: 1,
        fill: s.fill, points: { show: !!s.points }, paths: s.paths, spanGaps: false,
      }))),
      bands: opts.bands,
      axes: [{}, { size: 60, values: (u, vals) => vals.map((v) => fmt(v)) }],
      hooks: { setScale: [(u, k) => { if (k === "x") onZoom(u); }] },
    }, data, box);
    plot.timeChart = !!opts.time;
    plot.over.addEventListener("mousedown", () => { plot.pressedAt = Date.now(); });
    if (zoom && opts.time) { syncing = true; plot.setScale("x", { min: zoom[0], max: zoom[1] }); syncing = false; }
    charts.set(key, { plot, box, seriesCount: series.length, container });
    status.charts = charts.size;
    return plot;
  }
  function dropCharts(container) {
    for (const [k, c] of charts) {
      if (c.container === container) { c.plot.destroy(); c.box.remove(); charts.delete(k); }
    }
    status.charts = charts.size;
  }

  function heat(v) { // 0..100 -> a blue-to-yellow colour
    if (v === null || v === undefined) return "#eef0f3";
    const t = Math.max(0, Math.min(1, v / 100));
    const r = Math.round(40 + 215 * t), g = Math.round(60 + 160 * t), b = Math.round(140 - 110 * t);
    return "rgb(" + r + "," + g + "," + b + ")";
  }
  function drawGrid(canvas, rows, labelWidth, scaleMax) {
    const ctx = canvas.getContext("2d");
    const nrows = rows.length;
    const ncols = nrows ? rows[0].values.length : 0;
    const rowH = nrows ? Math.max(3, Math.min(18, 300 / nrows)) : 0;
    canvas.height = Math.max(40, nrows * rowH + 4);
    canvas.width = Math.max(300, document.body.clientWidth - 80);
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    if (!nrows || !ncols) {
      ctx.fillStyle = "#5b6678"; ctx.font = "13px sans-serif";
      ctx.fillText("No data yet.", 10, 24);
      return false;
    }
    const cellW = (canvas.width - labelWidth) / ncols;
    ctx.font = Math.min(12, rowH) + "px sans-serif";
    rows.forEach((row, r) => {
      ctx.fillStyle = "#1d2430";
      if (rowH >= 8) ctx.fillText(row.label, 2, r * rowH + rowH - 2, labelWidth - 4);
      row.values.forEach((v, c) => {
        ctx.fillStyle = heat(scaleMax && v !== null ? (v / scaleMax) * 100 : v);
        ctx.fillRect(labelWidth + c * cellW, r * rowH, Math.ceil(cellW), rowH - 1);
      });
    });
    return true;
  }

  // ---- state --------------------------------------------------------------------------------
  let runs = [];
  let current = 0;
  const versions = new Map();

  function runState(r) {
    if (r.open_error) return ["cannot open: " + r.open_error, "waiting"];
    if (r.gone) return ["run gone: " + r.identity, "waiting"];
    if (!r.exists) return [r.identity ? "view reset: " + r.identity + "; waiting for the new run" : "waiting for the run to start", "waiting"];
    if (r.complete) return ["run ended" + (r.end_reason ? " (" + r.end_reason + ")" : ""), "ended"];
    return ["live", "live"];
  }
  function updateHeader() {
    const sel = $("run-select");
    if (sel.options.length !== runs.length) {
      clear(sel);
      runs.forEach((r) => sel.append(el("option", { value: String(r.id), text: r.name })));
      sel.value = String(current);
    }
    const r = runs[current];
    if (!r) return;
    const [text, cls] = runState(r);
    const s = $("run-state");
    s.textContent = text + " · step " + (r.last_step === null ? "–" : r.last_step) + " · " +
      r.steps + " steps · " + r.samples + " samples";
    // A run replaced or written again from step 0: its view was reset, and the page says so.
    if (r.exists && r.identity) s.textContent += " · view reset: " + r.identity;
    s.className = "state " + cls;
    s.dataset.steps = String(r.steps);
    status.steps = r.steps;
    status.ended = !!r.complete;
    const stop = $("stop");
    stop.disabled = !r.writable || r.complete || !!r.stop_requested;
    stop.title = !r.writable ? "this server cannot write into the run" :
      r.stop_requested ? "stop requested: " + r.stop_requested : "";
    const download = $("download");
    download.setAttribute("href", api("runs/" + r.id + "/report"));
    // While the server draws the report, its stage replaces the button's label.
    download.textContent = r.report ? "Building report: " + r.report + "…" : "Download report";
    download.classList.toggle("busy", !!r.report);
  }

  // ---- panels -------------------------------------------------------------------------------
  async function drawOverview() {
    const all = await Promise.all(runs.map((r) => get("runs/" + r.id + "/overview")));
    const cards = $("overview-runs");
    clear(cards);
    for (const o of all) {
      const dl = el("dl");
      const add = (k, v) => { dl.append(el("dt", { text: k }), el("dd", { text: v })); };
      add("location", o.location);
      add("state", runState(o)[0]);
      add("steps", o.steps + (o.last_step !== null ? " (last " + o.last_step + ")" : ""));
      add("samples / spans", o.samples + " / " + o.spans);
      add("tensors", o.tensors);
      if (o.start !== null) add("duration", dur(o.end - o.start));
      if (o.phases) {
        add("initialization", dur(o.phases.initialization));
        add("training loop", dur(o.phases.training_loop));
        add("finalization", dur(o.phases.finalization));
      }
      if (o.top_phases.length) add("most time", o.top_phases.slice(0, 3).map((p) => p.phase + " " + dur(p.total_s)).join(", "));
      if (o.warnings.length) add("warnings", o.warnings.join("; "));
      cards.append(el("div", { className: "card" }, el("h3", { text: o.name }), dl));
    }
    const o = all[current] || all[0];
    const stats = $("node-stats");
    clear(stats);
    if (!o || !o.nodes.length) stats.append(el("p", { className: "missing", text: "No system metrics yet." }));
    for (const n of (o ? o.nodes : [])) {
      const table = el("table", null, el("tr", null, ...["node " + n.node, "unit", "min", "max", "p99", "p90", "p50"].map((h) => el("th", { text: h }))));
      for (const row of n.rows) {
        table.append(el("tr", null, el("td", { text: row.metric }), el("td", { text: row.unit }),
          ...["min", "max", "p99", "p90", "p50"].map((k) => el("td", { text: fmt(row[k]) }))));
      }
      stats.append(table);
    }
    const rules = $("rules");
    clear(rules);
    if (!o || !o.rules.length) {
      rules.append(el("p", { className: "missing", text: o && o.rules_written ? "No rules ran." :
        "No rule statuses in the run yet (run `smdebug rules --follow --write-into-run` or a RuleRunner with the job)." }));
    }
    // Rules that found issues or failed first, rules that had nothing to check last (greyed).
    const rank = { IssuesFound: 0, Error: 1, NoData: 3 };
    const ordered = (o ? o.rules : []).slice().sort((a, b) => (rank[a.status] ?? 2) - (rank[b.status] ?? 2));
    for (const r of ordered) {
      const noData = r.status === "NoData";
      const box = el("div", { className: "rule " + r.status, "data-rule": r.name },
        el("strong", { text: r.name }), " ", el("span", { className: "status", text: r.status }),
        noData ? " · nothing checked in this run (not a pass)" : " · triggered " + r.triggered + " of " + r.datapoints);
      if (r.message) box.append(el("div", { className: noData ? "reason" : "", text: (noData ? "Why: " : "") + r.message }));
      if (r.description) box.append(el("div", { className: "why", text: "Checks: " + r.description }));
      if (r.recommendation) box.append(el("div", { className: "why", text: "Recommendation: " + r.recommendation }));
      for (const e of r.evidence.slice(0, 5)) {
        box.append(el("div", { className: "why", text: "Evidence: " + e.tensor + " at step " + e.step + ": " + e.measure + " = " + fmt(e.value) + (e.limit !== null && e.limit !== undefined ? " (limit " + fmt(e.limit) + ")" : "") }));
      }
      rules.append(box);
    }
    status.panels.overview = true;
  }

  // Points asked per series: a minimum and a maximum per pixel column of a chart (the server
  // caps every series at 2,000 whatever is asked).
  function pointsQuery() { return "points=" + Math.round(2 * chartWidth()); }
  function windowQuery() { return pointsQuery() + (zoom ? "&from=" + zoom[0] + "&to=" + zoom[1] : ""); }

  async function drawSystem() {
    const r = runs[current];
    const q = windowQuery();
    const [sys, spans] = await Promise.all([get("runs/" + r.id + "/system?" + q), get("runs/" + r.id + "/spans?" + q)]);
    drawGrid($("heatmap"), sys.heatmap.rows, 130);
    const groups = new Map();
    for (const s of sys.series) {
      const k = s.type + " " + (s.type === "cpu" || s.type === "gpu" ? s.dimension : s.name) + " (" + s.unit + ")";
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k).push(s);
    }
    const box = $("system-charts");
    const full = r.start !== null ? [r.start, r.end] : null;
    for (const [title, list] of groups) {
      // One x axis per chart: the union of the series' times.
      const xs = Array.from(new Set(list.flatMap((s) => s.data.t))).sort((a, b) => a - b);
      const index = new Map(xs.map((x, i) => [x, i]));
      const ys = list.map((s) => { const y = new Array(xs.length).fill(null); s.data.t.forEach((t, i) => { y[index.get(t)] = s.data.v[i]; }); return y; });
      const plot = chart(box, "sys:" + title, title, [xs, ...ys], list.map((s) => ({ label: s.node + " " + s.name + (s.dimension && s.type !== "cpu" && s.type !== "gpu" ? " " + s.dimension : "") })), { time: true, fullRange: full });
      if (title.startsWith("cpu CPUUtilization") && xs.length) status.last_point = xs[xs.length - 1];
      void plot;
    }
    if (!groups.size) { clear(box); dropCharts(box); box.append(el("p", { className: "missing", text: "No system metrics yet." })); }
    const more = $("system-more");
    if (more) more.textContent = sys.series_total > sys.series.length ?
      "Showing " + sys.series.length + " of " + sys.series_total + " timelines" +
      (sys.heatmap.band > 1 ? "; heatmap rows are means of " + sys.heatmap.band + " neighbours" : "") : "";
    const sp = $("spans");
    clear(sp);
    const totals = el("table", null, el("tr", null, ...["phase", "spans", "total s"].map((h) => el("th", { text: h }))));
    for (const t of spans.totals) totals.append(el("tr", null, el("td", { text: t.phase }), el("td", { text: t.count }), el("td", { text: fmt(t.total_s, 3) })));
 status.window_spans = spans.count;
    sp.append(el("p", { text: spans.count + " spans in the window" + (spans.truncated ? " (first " + spans.spans.length + " listed)" : "") }), totals);
    const list = el("table", null, el("tr", null, ...["phase", "name", "step", "node", "start", "ms"].map((h) => el("th", { text: h }))));
    for (const s of spans.spans.slice(0, 200)) {
      list.append(el("tr", null, el("td", { text: s.phase }), el("td", { text: s.name }), el("td", { text: s.step === null ? "" : s.step }),
        el("td", { text: s.node }), el("td", { text: new Date(s.start * 1000).toISOString().slice(11, 23) }), el("td", { text: fmt((s.end - s.start) * 1000, 1) })));
    }
    sp.append(list);
    status.panels.system = true;
  }

  async function drawSteps() {
    const r = runs[current];
    const st = await get("runs/" + r.id + "/steps?last=" + ($("last-n").value || 30) + "&" + windowQuery());
    const box = $("step-charts");
    if (!st.series.length) {
      dropCharts(box); clear(box);
      box.append(el("p", { className: "missing", text: "No step spans yet (record steps with SpanRecorder)." }));
    } else {
      const p = box.querySelector("p.missing"); if (p) p.remove();
      for (const s of st.series) {
        const label = s.mode + " · " + s.node + (s.worker !== null ? " worker " + s.worker : "");
        const out = new Map(s.outliers.map((o) => [o.t, o.duration]));
        const plot = chart(box, "steps:" + label, "Step duration (s), " + label + " · p50 " + dur(s.p50),
          [s.data.t, s.data.v, s.data.t.map((t) => out.has(t) ? out.get(t) : null)],
          [{ label: "duration" }, { label: "outlier", color: "#d62728", points: true, paths: () => null }], { time: true, fullRange: r.start !== null ? [r.start, r.end] : null });
        if (s.data.t.length) status.last_step_time = s.data.t[s.data.t.length - 1];
        void plot;
      }
      if (st.histogram) {
        const h = st.histogram;
        const xs = h.counts.map((_, i) => h.lo + (i + 0.5) * h.width);
        chart(box, "steps:histogram", "Step duration histogram (s)", [xs, h.counts], [{ label: "steps", fill: "rgba(74,120,194,0.4)", paths: uPlot.paths.bars({ size: [0.9] }) }], { xLabel: "seconds" });
      }
    }
    const pbox = $("phase-chart");
    const ph = st.phases;
    if (ph.steps.length) {
      const xs = ph.steps.map((_, i) => i);
      const names = ph.phases.concat(["other"]);
      // Stacked: each series is the running sum.
      const acc = new Array(xs.length).fill(0);
      const ys = names.map((n) => ph.steps.map((s, i) => { acc[i] += n === "other" ? s.other : (s.phases[n] || 0); return acc[i]; }));
      chart(pbox, "phases", "Time per phase (s, stacked) over the last " + ph.steps.length + " steps", [xs, ...ys],
        names.map((n, i) => ({ label: n, fill: palette[i % palette.length] + "55" })), { xLabel: "step (recent)", width: chartWidth() * 2 });
    } else {
      dropCharts(pbox); clear(pbox); pbox.append(el("p", { className: "missing", text: "No phases recorded within steps yet." }));
    }
    status.panels.steps = true;
  }

  function smooth(values, w) {
    let last = null; let debias = 0; const out = [];
    for (const v of values) {
      if (v === null) { out.push(null); continue; }
      last = last === null ? 0 : last; debias = w * debias + (1 - w);
      last = w * last + (1 - w) * v; out.push(last / debias);
    }
    return out;
  }
  let tensorNames = [];
  async function drawScalars() {
    const regex = $("scalar-regex").value;
    const w = parseFloat($("smoothing").value) || 0;
    const box = $("scalar-charts");
    let results;
    try {
      results = await Promise.all(runs.map((r) => get("runs/" + r.id + "/scalars?" + pointsQuery() + "&regex=" + encodeURIComponent(regex))));
      $("scalar-error").textContent = "";
    } catch (e) { $("scalar-error").textContent = String(e.message); return; }
    tensorNames = results[current] ? results[current].tensors : [];
    // One chart per scalar name; runs and modes overlaid.
    const byName = new Map();
    results.forEach((res, ri) => { for (const s of res.scalars) { if (!byName.has(s.name)) byName.set(s.name, []); for (const m of s.modes) byName.get(s.name).push({ run: runs[ri].name, mode: m }); } });
    for (const [k, c] of charts) if (c.container === box && !byName.has(k.slice(7))) { c.plot.destroy(); c.box.remove(); charts.delete(k); }
    const shown = results[current] || { scalars: [], series_total: 0 };
    $("scalar-more").textContent = shown.series_total > shown.scalars.length ?
      "Showing " + shown.scalars.length + " of " + shown.series_total + " scalars: narrow the filter to see the others" : "";
    if (!byName.size) { if (!box.querySelector("p.missing")) box.append(el("p", { className: "missing", text: "No scalars" + (regex ? " match" : " yet") + "." })); }
    else { const p = box.querySelector("p.missing"); if (p) p.remove(); }
    for (const [name, list] of byName) {
      const xs = Array.from(new Set(list.flatMap((l) => l.mode.steps))).sort((a, b) => a - b);
      const index = new Map(xs.map((x, i) => [x, i]));
      const ys = list.map((l) => { const y = new Array(xs.length).fill(null); const sm = smooth(l.mode.values, w); l.mode.steps.forEach((s, i) => { y[index.get(s)] = sm[i]; }); return y; });
      chart(box, "scalar:" + name, name, [xs, ...ys], list.map((l) => ({ label: (runs.length > 1 ? l.run + " " : "") + l.mode.mode })), {});
    }
    const sel = $("tensor-select");
    if (sel.options.length !== tensorNames.length) {
      const keep = sel.value;
      clear(sel);
      tensorNames.forEach((n) => sel.append(el("option", { value: n, text: n })));
      if (keep && tensorNames.includes(keep)) sel.value = keep;
    }
    status.panels.scalars = true;
  }

  async function drawTensor() {
    const name = $("tensor-select").value;
    const box = $("tensor-charts");
    if (!name) { status.panels.tensors = true; return; }
    const r = runs[current];
    const t = await get("runs/" + r.id + "/tensor?name=" + encodeURIComponent(name) + "&steps=100");
    const xs = t.steps.map((s) => s.step);
    chart(box, "tensor:reductions", "Reductions of " + name, [xs, t.steps.map((s) => s.mean), t.steps.map((s) => s.std), t.steps.map((s) => s.l2), t.steps.map((s) => s.min), t.steps.map((s) => s.max)],
      [{ label: "mean" }, { label: "std" }, { label: "L2 norm" }, { label: "min" }, { label: "max" }], {});
    // Distribution: the nine percentile lines, bands filled between symmetric pairs.
    const bandSeries = t.band_percentiles.map((p) => ({ label: "p" + p, color: "rgba(31,119,180," + (p === 50 ? 1 : 0.35) + ")" }));
    const bands = [[1, 9], [2, 8], [3, 7], [4, 6]].map(([a, b], i) => ({ series: [b, a], fill: "rgba(31,119,180," + (0.08 + i * 0.08) + ")" }));
    chart(box, "tensor:distribution", "Distribution of " + name + " over steps", [xs, ...t.band_percentiles.map((_, i) => t.steps.map((s) => s.bands[i]))], bandSeries, { bands });
    const stepSel = $("tensor-step");
    const keep = stepSel.value;
    clear(stepSel);
    xs.forEach((s) => stepSel.append(el("option", { value: String(s), text: String(s) })));
    if (keep && xs.map(String).includes(keep)) stepSel.value = keep; else if (xs.length) stepSel.value = String(xs[xs.length - 1]);
    await drawTensor2d();
    status.panels.tensors = true;
  }
  async function drawTensor2d() {
    const name = $("tensor-select").value;
    const step = $("tensor-step").value;
    if (!name || step === "") return;
    const r = runs[current];
    const t = await get("runs/" + r.id + "/tensor2d?name=" + encodeURIComponent(name) + "&step=" + step);
    const vals = t.cells.flat().filter((v) => v !== null);
    const lo = Math.min(...vals), hi = Math.max(...vals);
    $("tensor2d-info").textContent = name + " at step " + t.step + ", shape [" + t.shape.join(", ") + "], " + fmt(lo) + " … " + fmt(hi);
    const canvas = $("tensor2d");
    const ctx = canvas.getContext("2d");
    const rows = t.cells.length, cols = rows ? t.cells[0].length : 0;
    canvas.width = 400; canvas.height = rows && cols ? Math.max(20, Math.min(400, 400 * rows / cols)) : 40;
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    const cw = canvas.width / Math.max(1, cols), rh = canvas.height / Math.max(1, rows);
    t.cells.forEach((row, i) => row.forEach((v, j) => {
      ctx.fillStyle = heat(v === null ? null : hi > lo ? ((v - lo) / (hi - lo)) * 100 : 50);
      ctx.fillRect(j * cw, i * rh, Math.ceil(cw), Math.ceil(rh));
    }));
  }

  async function drawKineto() {
    const k = await get("kineto");
    const box = $("kineto-tables");
    clear(box);
    if (!k.ranks.length) box.append(el("p", { className: "missing", text: "No Kineto traces: start with `smdebug serve RUN --trace FILE…` (PyTorch profiler traces, .json or .json.gz)." }));
    for (const r of k.ranks) {
      box.append(el("h3", { text: "Rank " + r.rank + " · " + r.file }),
        el("p", { text: "span " + fmt(r.span_us / 1000, 1) + " ms · GPU busy " + fmt(r.gpu_busy_us / 1000, 1) + " ms · idle " + fmt(r.gpu_idle_us / 1000, 1) + " ms" }));
      for (const [title, rows] of [["GPU kernels", r.gpu_kernels], ["CPU operators", r.cpu_operators]]) {
        const table = el("table", null, el("tr", null, ...[title, "count", "total ms", "share", ""].map((h) => el("th", { text: h }))));
        for (const op of rows) {
          const bar = el("span", { className: "bar" });
          bar.style.width = Math.round(op.share * 200) + "px";
          table.append(el("tr", null, el("td", { text: op.name }), el("td", { text: op.count }), el("td", { text: fmt(op.total_us / 1000, 2) }), el("td", { text: fmt(op.share * 100, 1) + "%" }), el("td", null, bar)));
        }
        box.append(table);
      }
    }
    status.panels.kineto = true;
  }

  // Code-profile windows: listed again at most every 10 s (each listing reads the summaries).
  let codeDrawn = { run: null, at: 0 };
  async function drawCode(force) {
    const r = runs[current];
    if (!r) return;
    if (!force && codeDrawn.run === r.id && performance.now() - codeDrawn.at < 10000) return;
    codeDrawn = { run: r.id, at: performance.now() };
    const c = await get("runs/" + r.id + "/code");
    const box = $("code-windows");
    clear(box);
    for (const w of c.warnings) box.append(el("p", { className: "error", text: w }));
    if (!c.windows.length) {
      box.append(el("p", { className: "missing", text: "No code profile in this run: open a code-profiling window (smdebug-profiler's CodeProfiler, or PythonProfilingConfig in the session) to see where the CPU time goes." }));
    }
    if (c.total > c.windows.length) box.append(el("p", { className: "hint", text: "The last " + c.windows.length + " of " + c.total + " windows." }));
    for (const w of c.windows.slice().reverse()) {
      const base = "runs/" + r.id + "/code/" + encodeURIComponent(w.id);
      const when = new Date(w.start * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
      box.append(el("h3", { text: (w.steps ? w.steps + " · " : "") + "node " + w.node + ", worker " + w.worker }),
        el("p", { text: when + " · " + fmt(w.end - w.start, 2) + " s · " + w.samples + " samples at " + w.frequency_hz + " Hz" +
          (w.process_cpu_seconds === null ? "" : " (" + fmt(w.process_cpu_seconds, 2) + " CPU s)") + " · " + w.functions + " functions" +
          (w.shared_root_functions ? " (the total list leaves out the " + w.shared_root_functions + " start-up functions every sample shared)" : "") }));
      const tables = el("div", { className: "code-tables" });
      for (const [title, rows] of [["self samples", w.top_self], ["total samples", w.top_total]]) {
        const table = el("table", { className: "code-top" }, el("tr", null, ...["function", title, "share", ""].map((h) => el("th", { text: h }))));
        for (const f of rows) {
          const bar = el("span", { className: "bar" });
          bar.style.width = Math.round(f.share * 120) + "px";
          table.append(el("tr", null, el("td", { className: "fn", text: f.function, title: f.function }), el("td", { text: f.samples }), el("td", { text: fmt(f.share * 100, 1) + "%" }), el("td", null, bar)));
        }
        tables.append(table);
      }
      box.append(tables);
      const links = el("p");
      if (w.flamegraph) {
        box.append(el("img", { className: "flamegraph", src: api(base + "/flamegraph.svg"), alt: "flame graph of " + (w.steps || w.id) }));
        links.append(el("a", { href: api(base + "/flamegraph.svg"), target: "_blank", rel: "noopener", text: "open the flame graph" }), " · ");
      }
      if (w.pprof) links.append(el("a", { href: api(base + "/profile.pb.gz"), download: w.id + ".pb.gz", text: "download the pprof profile" }));
      box.append(links);
    }
    status.panels.code = true;
    status.code_windows = c.windows.length;
  }

  async function guarded(name, f) {
    try { await f(); } catch (e) { if (String(e.message) !== "token needed") { status.errors.push(name + ": " + e.message); } }
    // When each panel was last drawn, ms since navigation started (for the scale figures).
    status.panel_ms = status.panel_ms || {};
    status.panel_ms[name] = Math.round(performance.now());
  }
  async function refreshTimeViews() {
    await guarded("system", drawSystem);
    await guarded("steps", drawSteps);
    publish();
  }
  let busy = false, again = false;
  async function refreshAll() {
    if (busy) { again = true; return; }
    busy = true;
    do {
      again = false;
      updateHeader();
      await guarded("overview", drawOverview);
      await refreshTimeViews();
      await guarded("scalars", drawScalars);
      publish();
      await guarded("tensors", drawTensor);
      await guarded("code", () => drawCode(false));
      status.updates++;
      publish();
    } while (again);
    busy = false;
  }

  let source = null;
  async function start() {
    try {
      runs = (await get("runs")).runs;
    } catch (e) { publish(); return; }
    runs.forEach((r) => versions.set(r.id, r.version));
    updateHeader();
    await guarded("kineto", drawKineto);
    await refreshAll();
    if (source) source.close();
    source = new EventSource(api("events"));
    source.addEventListener("runs", (e) => {
      const next = JSON.parse(e.data).runs;
      const changed = next.some((r) => versions.get(r.id) !== r.version);
      runs = next;
      runs.forEach((r) => versions.set(r.id, r.version));
      updateHeader();
      publish();
      if (changed) refreshAll();
    });
  }

  $("run-select").addEventListener("change", (e) => {
    current = parseInt(e.target.value, 10) || 0; zoom = null;
    dropCharts($("system-charts")); dropCharts($("step-charts"));
    refreshAll();
  });
  $("refresh").addEventListener("click", () => { codeDrawn.at = 0; refreshAll(); });
  $("last-n").addEventListener("change", () => guarded("steps", drawSteps));
  $("scalar-regex").addEventListener("input", () => guarded("scalars", drawScalars));
  $("smoothing").addEventListener("input", () => guarded("scalars", drawScalars));
  $("tensor-select").addEventListener("change", () => guarded("tensors", drawTensor));
  $("tensor-step").addEventListener("change", () => guarded("tensors", drawTensor2d));
  $("stop").addEventListener("click", () => { $("stop-dialog").showModal(); });
  $("stop-cancel").addEventListener("click", () => { $("stop-dialog").close(); });
  $("stop-confirm").addEventListener("click", async () => {
    $("stop-dialog").close();
    const r = runs[current];
    const res = await fetch(api("runs/" + r.id + "/stop"), { method: "POST",
      headers: Object.assign({ "content-type": "application/json" }, token ? { "x-smdebug-token": token } : {}),
      body: JSON.stringify({ confirm: true, reason: $("stop-reason").value }) });
    const body = await res.json();
    if (!res.ok) { status.errors.push("stop: " + (body.error || res.statusText)); }
    $("stop").disabled = true;
    publish();
  });
  window.addEventListener("resize", () => { for (const c of charts.values()) c.plot.setSize({ width: chartWidth(), height: 180 }); });
  publish();
  start();
})();
