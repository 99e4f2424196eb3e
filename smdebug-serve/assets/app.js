// smdebug serve: the dashboard page. Run data only ever reaches the DOM through textContent,
// attribute values or canvas text, never as markup. Sections are tabs with stable URLs
// (#/run/<id>/<tab>); only the shown tab's panels are fetched, and only when the server's
// pushed state says their data changed.
"use strict";
(function () {
  const { el, clear, fmt, dur, evidenceText, axisLabel, axisSize, heat, colourScale, drawGrid, tooltipPlugin, nonFinitePlugin, nonFiniteText, selectionIn,
          AXIS_FONT, CATEGORICAL, naturalCompare, metricTitle } = window.SMD;
  const status = { panels: {}, charts: 0, errors: [], csp: [], steps: null, last_step_time: null,
                   ended: false, updates: 0, requests: 0, tab: null, // and the deltas applied, refetches asked for:
                   patched: { system: 0, steps: 0, rules: 0 }, refetches: [], delta_steps: 0, delta_rules: 0 };
  function publish() {
    status.zoom = zoom;
    // First meaningful paint: the tab's panels (of overview, headlines, system, steps and
    // scalars) drawn with the run's data, in ms since navigation started.
    const need = (TAB_PANELS[tab] || []).filter((p) => ["overview", "headlines", "system", "steps", "scalars"].includes(p));
    if (status.first_paint_ms === undefined && need.length && need.every((p) => status.panels[p])) {
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
  // One colour per run, the same in every chart, legend and tab: its place in the run list.
  const runColour = (id) => palette[id % palette.length];
  let zoom = null; // [from, to] seconds, or null for everything
  const charts = new Map(); // key -> {plot, box, title}
  let syncing = false;
  let zoomTimer = null;

  // Charts fill the width: as many 560 px columns as fit, sharing the panel's width.
  function chartWidth(container) {
    const main = document.querySelector("main");
    const inner = (container && container.clientWidth) || (main.clientWidth - 66);
    const cols = Math.max(1, Math.floor((inner + 12) / (560 + 12)));
    return Math.max(300, Math.floor((inner - 12 * (cols - 1)) / cols) - 10);
  }

  // A zoom is the user's when it follows a press on the chart (drag to zoom, double-click to
  // reset); scale changes from new data are not zooms.
  // A chart of steps (the scalars') that was given `onZoom` hands its zoom to it: its window is
  // fetched from the server (every value, once narrow enough) rather than cut from the points
  // it holds; a double-click on a chart drawn for a window (`windowed`) asks for everything
  // again (`null`).
  function onZoom(u) {
    if (syncing || !(u.timeChart || u.stepZoom) || !u.pressedAt || Date.now() - u.pressedAt > 3000) return;
    u.pressedAt = 0;
    const min = u.scales.x.min, max = u.scales.x.max;
    if (min === undefined || max === undefined || min === null) return;
    const xs = u.data[0];
    const whole = xs.length && min <= xs[0] && max >= xs[xs.length - 1];
    if (!u.timeChart) { if (!whole) u.stepZoom([min, max]); return; }
    zoom = whole ? null : [min, max];
    spanPage = 0;
    shownStep = null;
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

  const timeLabel = (t) => new Date(t * 1000).toISOString().slice(11, 23);
  // A time axis' labels, one line each, in UTC as the page's other times: to the second
  // ("14:02:10"), to the tenth or thousandth of a second where the ticks are closer, and the
  // seconds left out where every tick falls on a whole minute ("14:02").
  function timeTicks(vals) {
    const step = vals.length > 1 ? Math.abs(vals[1] - vals[0]) : 60;
    const whole = (k) => vals.every((v) => Math.abs(v / k - Math.round(v / k)) < 1e-6);
    const cut = whole(60) ? 5 : step >= 1 ? 8 : step >= 0.1 ? 10 : 12;
    return vals.map((v) => timeLabel(v).slice(0, cut));
  }
  // A live legend's value of a line: at the cursor, else (the cursor off the chart) the line's
  // last value, so that a legend never reads "--": `last` when the line says what it is (its
  // last value as the title writes it, NaN where it was NaN), else its last point drawn.
  const liveValue = (format, last) => (u, v, si, at) => {
    if (at !== null && at !== undefined) return format(u, v);
    const said = last();
    if (said !== undefined) return said;
    const ys = u.data[si] || [];
    for (let k = ys.length - 1; k >= 0; k--) if (ys[k] !== null && ys[k] !== undefined) return format(u, ys[k]);
    return format(u, null);
  };
  // Draws (or updates) a chart. `series`: [{label, color}], `data`: [xs, ys...]. Its title
  // follows the data (a chart kept for a new selection is renamed).
  function chart(container, key, title, data, series, opts) {
    opts = opts || {};
    const existing = charts.get(key);
    // Kept when its lines are the same, in the same colours (another run's are drawn again).
    const labels = series.map((s) => s.label + " " + (s.color || "")).join("\n");
    if (existing && existing.labels === labels && existing.container === container) {
      if (existing.title.textContent !== title) existing.title.textContent = title;
      existing.ref.opts = opts;
      existing.ref.series = series;
      existing.opts = opts;
      existing.plot.nonFinite = opts.nonFinite || [];
      existing.plot.ownValues = opts.ownValues || null;
      existing.plot.yFixed = opts.yRange || null;
      existing.plot.setData(data, !zoom || !opts.time);
      if (zoom && opts.time) { syncing = true; existing.plot.setScale("x", { min: zoom[0], max: zoom[1] }); syncing = false; }
      existing.plot.stepZoom = opts.onZoom || null;
      existing.plot.windowed = !!opts.windowed;
      showRange(existing.plot, opts.xRange);
      return existing.plot;
    }
    if (existing) { existing.plot.destroy(); existing.box.remove(); }
    const box = el("div", { className: "chart", "data-chart": key });
    const h = el("h4", { text: title });
    box.append(h);
    container.append(box);
    // Panels made as the page goes (the Scalars tab's groups) are resized with the page too.
    watch.observe(container);
    // `xFormat`/`yFormat`: how the tooltip (and the axes, with `xTicks`/`yFormat`) write a value:
    // durations with `dur`, wall-clock times as dates; `tipFormat`: the tooltip's own, when it
    // differs. The formats, the tooltip's extra line and the y range are read through `ref`,
    // which a chart kept for new data points at the new options (their closures hold the new
    // data).
    const ref = { opts, series };
    const xFormat = (x) => (ref.opts.xFormat || (ref.opts.time ? timeLabel : String))(x);
    const yTick = (v) => (ref.opts.yFormat || axisLabel)(v);
    const tipFormat = opts.tipFormat ? (v) => (ref.opts.tipFormat || yTick)(v) : opts.yFormat ? yTick : null;
    // `yRange`: the y axis' extent, either a function of the data's [min, max] (0–100 for a
    // percentage) or a fixed [a, b] (the Scalars tab's outlier-robust extent, `plot.yFixed` once
    // drawn); without one, the data's, padded as uPlot pads. `xRangeOf`: the x axis' range from
    // the data's; `xSplits(u)`: where the x axis' ticks go.
    const yScale = Object.assign(opts.log ? { distr: 3 } : {}, {
      range: (u, min, max) => {
        const r = "yFixed" in u ? u.yFixed : ref.opts.yRange;
        if (typeof r === "function") return r(min, max);
        const [a, b] = r || [min, max];
        if (a === null || b === null) return [0, 1];
        return opts.log ? uPlot.rangeLog(a, b, 10, false) : uPlot.rangeNum(a, b, 0.1, true);
      } });
    const plot = new uPlot({
      width: opts.width || chartWidth(container), height: opts.height || 200,
      scales: { x: Object.assign({ time: !!(opts.time || opts.wallAxis) }, opts.xRangeOf ? { range: (u, min, max) => ref.opts.xRangeOf(min, max) } : {}), y: yScale },
      cursor: { sync: { key: opts.time ? "time" : key }, drag: { x: true, y: false } },
      // The lines' names and colours, only where there are several (the title names a single
      // line); values are in the tooltip, not in a row of "--" under the chart, except where a
      // chart asks for them beside the names (`liveLegend`: the Scalars tab's).
      legend: { show: opts.legend !== false && series.length > 1, live: !!opts.liveLegend,
                // A dashed line's marker is dashed (EVAL beside TRAIN in one colour).
                markers: { dash: (u, i) => (u.series[i].dash && u.series[i].dash.length ? "dashed" : "solid") } },
      // Room on the right for half the x axis' last label (uPlot's own guess is for shorter
      // labels than a time to the tenth of a second).
      padding: [null, (u, side, sides, cycle) => {
        const axis = u.axes[0];
        const v = cycle > 0 && axis._values;
        return v && v.length ? Math.max(8, Math.ceil(window.SMD.textWidth(v[v.length - 1]) / 2 + 2)) : 16;
      }, null, null],
      plugins: [tooltipPlugin(xFormat, tipFormat, opts.tipExtra ? (u, i) => ref.opts.tipExtra && ref.opts.tipExtra(u, i) : null),
                nonFinitePlugin(opts.nonFinite)],
      series: [Object.assign({ label: opts.xLabel || (opts.time ? "time" : "step") },
                             opts.liveLegend ? { value: (u, v) => (v === null ? "last" : xFormat(v)) } : {})]
        .concat(series.map((s, i) => Object.assign({
          label: s.label, stroke: s.color || palette[i % palette.length], width: s.width || 1,
          fill: s.fill, points: { show: !!s.points }, paths: s.paths, spanGaps: !!s.spanGaps,
        }, s.dash && s.dash.length ? { dash: s.dash } : {}, s.value ? { value: liveValue(s.value, () => (ref.series[i] || {}).last) } : {}))),
      bands: opts.bands,
      // Ticks far enough apart for their labels: a time to the second or tenth is ~60–75 px.
      axes: [Object.assign({ font: AXIS_FONT, space: opts.time ? 100 : 60 }, opts.xSplits ? { splits: (u) => ref.opts.xSplits(u) } : {},
               opts.xTicks ? { values: (u, vals) => vals.map((v) => (ref.opts.xTicks || String)(v)) } :
               opts.time ? { values: (u, vals) => timeTicks(vals) } : {}),
             { font: AXIS_FONT, size: axisSize, values: (u, vals) => vals.map(yTick) }],
      hooks: { setScale: [(u, k) => { if (k === "x") onZoom(u); }] },
    }, data, box);
    plot.timeChart = !!opts.time;
    plot.nonFinite = opts.nonFinite || [];
    plot.ownValues = opts.ownValues || null;
    // A line left out of the legend (`legend: false`: a faint raw line under its smoothed one,
    // whose values the tooltip gives).
    const rows = plot.root.querySelectorAll(".u-legend .u-series");
    series.forEach((s, i) => { if (s.legend === false && rows[i + 1]) rows[i + 1].hidden = true; });
    plot.stepZoom = opts.onZoom || null;
    plot.windowed = !!opts.windowed;
    plot.over.addEventListener("mousedown", () => { plot.pressedAt = Date.now(); });
    plot.over.addEventListener("dblclick", () => { if (plot.stepZoom && plot.windowed) plot.stepZoom(null); });
    plot.yFixed = opts.yRange || null;
    if (zoom && opts.time) { syncing = true; plot.setScale("x", { min: zoom[0], max: zoom[1] }); syncing = false; }
    showRange(plot, opts.xRange);
    charts.set(key, { plot, box, labels, container, title: h, opts, ref });
    status.charts = charts.size;
    return plot;
  }
  // A chart drawn for a window shows that window (not only the span of its points).
  function showRange(plot, range) {
    if (!range) return;
    syncing = true;
    plot.setScale("x", { min: range[0], max: range[1] });
    syncing = false;
  }
  // What a chart holds, for the tests: its x values, its lines' labels and values, its x scale.
  window.SMD.chartData = (key) => {
    const c = charts.get(key);
    return c && { x: c.plot.data[0], labels: c.plot.series.slice(1).map((s) => s.label), y: c.plot.data.slice(1),
                  scale: [c.plot.scales.x.min, c.plot.scales.x.max], non_finite: c.plot.nonFinite,
                  // The y extent shown, whether it is logarithmic, and each line's colour.
                  yScale: [c.plot.scales.y.min, c.plot.scales.y.max], yLog: c.plot.scales.y.distr === 3,
                  colours: c.plot.series.slice(1).map((s, k) => (typeof s.stroke === "function" ? s.stroke(c.plot, k + 1) : s.stroke)),
                  dashes: c.plot.series.slice(1).map((s) => s.dash || null),
                  // Where the marks are drawn, in CSS pixels of the plot area.
                  marks: (c.plot.nonFinite || []).map((m) => [c.plot.valToPos(m.from - 0.5, "x"), c.plot.valToPos(m.to + 0.5, "x")]),
                  width: c.plot.bbox.width / devicePixelRatio,
                  // The axes as drawn: each tick label with where it is centred (x axis) and the
                  // room the axis has (y axis), for the chart-craft test to measure.
                  // (uPlot's own fields of an axis: `_size`, `_values`, `_splits`.)
                  axes: c.plot.axes.map((axis) => ({ side: axis.side, size: axis._size, font: axis.font && axis.font[0],
                    labels: (axis._values || []).map(String),
                    at: (axis._splits || []).map((v) => c.plot.valToPos(v, axis.scale)) })),
                  plot_left: c.plot.bbox.left / devicePixelRatio, canvas_width: c.plot.over.parentElement.clientWidth,
                  y_scale: [c.plot.scales.y.min, c.plot.scales.y.max],
                  // Each line's colour and dash.
                  strokes: c.plot.series.slice(1).map((s, k) => [typeof s.stroke === "function" ? s.stroke(c.plot, k + 1) : s.stroke, s.dash || []]),
                  title: c.title.textContent };
  };
  window.SMD.chartKeys = () => Array.from(charts.keys());
  function dropCharts(container, which) {
    for (const [k, c] of charts) {
      if (c.container === container && (!which || which(k))) { c.plot.destroy(); c.box.remove(); charts.delete(k); }
    }
    status.charts = charts.size;
  }

  // ---- state --------------------------------------------------------------------------------
  let runs = [];
  let current = 0;
  // The `changed` counters each panel was drawn at (it is fetched again when they move).
  const drawnAt = new Map();

  const PHASE_TEXT = { waiting: "waiting", live: "live", stalled: "stalled", crashed: "crashed", ended: "ended",
                       stopped_by_rule: "stopped by a rule", stopped_by_person: "stopped by a person" };
  // Whole seconds for an age ("4 s", "1 min 05 s"), and a wall-clock time as the server's
  // messages write it ("14:02:11 UTC").
  const ago = (s) => (s < 120 ? Math.max(0, Math.round(s)) + " s" : dur(s));
  const clock = (t) => new Date(t * 1000).toISOString().slice(11, 19) + " UTC";
  // The event stream: `connecting`, `up` or `down`; when its last push arrived (ms since
  // navigation) and the server's heartbeat (a push at least this often while it is up).
  const stream = { state: "connecting", at: null, heartbeat: 2, connectedAt: 0 };
  const sincePush = () => (stream.at === null ? 0 : (performance.now() - stream.at) / 1000);
  // Seconds the server has seen a run's folder missing (its clock plus the time since the push).
  const missingFor = (r) => Math.max(0, (status.server_time || Date.now() / 1000) - r.missing_since + sincePush());
  function runState(r) {
    if (r.open_error) return ["cannot open: " + r.open_error, "waiting"];
    if (r.gone) return ["run gone: " + r.identity, "waiting"];
    if (r.missing_since !== null) return ["no run at " + r.location + ": the folder does not exist (waiting for it, " + ago(missingFor(r)) + " so far)", "missing"];
    if (!r.exists) return [r.identity ? "view reset: " + r.identity + "; waiting for the new run" : "waiting for the run to start", "waiting"];
    const text = PHASE_TEXT[r.phase] || r.phase;
    // The ages move on between pushes: the server's figure plus the time since it was sent.
    const idle = r.idle_s === null ? null : r.idle_s + sincePush();
    if (r.phase === "crashed") return ["crashed" + (r.last_advanced ? " · last advanced " + clock(r.last_advanced) + " (" + ago(idle) + " ago)" : ""), "crashed"];
    if (r.phase === "stalled") return ["stalled since " + (r.stalled_since ? clock(r.stalled_since) + " (" + ago(idle) + ")" : "it was opened"), "stalled"];
    // The stopping rule by name; the end marker's whole reason is the pill's title (and the
    // summary's full text), never its text.
    if (r.phase === "stopped_by_rule" && r.stop_rule) return ["stopped by " + r.stop_rule, r.phase];
    if (r.complete) return ["run " + text, r.phase];
    return [text, r.phase];
  }
  // The run's state as this page can vouch for it: with the stream down, the last state
  // heard, said to be that, not a live pill.
  function pageState(r) {
    const [text, cls] = runState(r);
    if (stream.state !== "down") return [text, cls];
    return ["last known: " + text, "disconnected"];
  }
  // How old the page's data is: "updated 2 s ago" while the stream is up, "disconnected"
  // when it drops (or is silent for three heartbeats).
  function showFreshness() {
    const f = $("freshness");
    const age = stream.at === null ? null : ago(sincePush());
    f.textContent = stream.state === "down" ? "disconnected" + (age === null ? "" : " · last update " + age + " ago") :
      age === null ? "connecting…" : "updated " + age + " ago";
    f.className = "freshness" + (stream.state === "down" ? " disconnected" : "");
    f.title = stream.state === "down" ? "the server's event stream is down: nothing shown changes until it is back (retrying)" : "";
    status.connection = stream.state;
    status.freshness = f.textContent;
  }
  // When this page asked the job to stop (ms since navigation), per run.
  const stopAsked = new Map();
  const STOP_LATE_S = 60;
  function updateHeader() {
    const sel = $("run-select");
    if (sel.options.length !== runs.length) {
      clear(sel);
      runs.forEach((r) => sel.append(el("option", { value: String(r.id), text: r.name })));
      sel.value = String(current);
    }
    // Each run's issue count beside its name, so that a run needing a look stands out.
    runs.forEach((r, i) => {
      const text = r.name + (r.issues ? " (" + r.issues + (r.issues === 1 ? " issue)" : " issues)") : "");
      if (sel.options[i].textContent !== text) sel.options[i].textContent = text;
    });
    const r = runs[current];
    if (!r) return;
    const [text, cls] = pageState(r);
    const s = $("run-state");
    s.textContent = !r.exists ? text : text + " · step " + (r.last_step === null ? "–" : r.last_step) + " · " +
      r.steps + " steps · " + r.samples + " samples";
    s.className = "state " + cls;
    s.title = s.textContent + (r.end_reason ? "\n" + r.end_reason : "") + (r.phase_note ? "\n" + r.phase_note : "");
    // A run replaced or written again from step 0: its view was reset; the notice has its own
    // line under the header (the pill keeps to one line).
    const notice = $("run-notice");
    const resetText = r.exists && r.identity ? "This run's view was reset: " + r.identity : "";
    notice.hidden = !resetText;
    if (notice.textContent !== resetText) notice.textContent = resetText;
    status.notice = resetText || null;
    // A first read of a big run: how far the index files are read.
    const indexing = $("indexing");
    const idx = r.index_pending > 0 && r.index_backlog > 0 ? "indexing " + (r.index_backlog - r.index_pending) + " of " + r.index_backlog + " files" : "";
    indexing.hidden = !idx;
    if (indexing.textContent !== idx) indexing.textContent = idx;
    status.indexing = idx || null;
    s.dataset.phase = r.phase;
    status.state_text = s.textContent;
    status.phase_note = r.phase_note;
    s.dataset.steps = String(r.steps);
    status.steps = r.steps;
    status.phase = r.phase;
    status.ended = !!r.complete;
    const issues = $("issue-count");
    issues.hidden = r.rules === null;
    if (r.rules !== null) {
      issues.textContent = r.issues === 0 ? "no issues" : r.issues + (r.issues === 1 ? " issue" : " issues");
      issues.title = "distinct issues: ProfilerReport is not counted beside the rules it sums up";
      issues.className = "issues" + (r.issues > 0 ? " found" : "");
    }
    // After a stop request: "stop requested" until the job ends, a warning when it has not
    // ended a minute later.
    const st = $("stop-state");
    const asked = r.stop_requested && !r.complete;
    st.hidden = !asked;
    if (asked) {
      const since = r.stop_requested_at ? Date.now() / 1000 - r.stop_requested_at : 0;
      const late = since > STOP_LATE_S;
      st.textContent = late ? "stop requested " + dur(since) + " ago: the job has not ended (does its loop honour stop requests?)" :
        "stop requested, waiting for the job to end";
      st.className = "stop-state" + (late ? " late" : "");
      st.title = r.stop_requested;
    }
    // A stop request the job cannot read (not JSON, wrong types, too large, a FIFO) is not
    // honoured: say so, with why.
    const unreadable = !asked && r.stop_request_error && !r.complete;
    if (unreadable) {
      st.hidden = false;
      st.textContent = "stop request unreadable, not honoured: " + r.stop_request_error;
      st.className = "stop-state late";
      st.title = r.stop_request_error;
    }
    status.stop_state = asked || unreadable ? st.textContent : null;
    const stop = $("stop");
    stop.disabled = !r.writable || r.complete || r.phase === "crashed" || !!r.stop_requested || stopAsked.has(r.id);
    stop.title = !r.writable ? "this server cannot write into the run" : r.phase === "crashed" ? "the job's process is gone: nothing would read a stop request" :
      r.stop_requested ? "stop requested: " + r.stop_requested : "";
    const download = $("download");
    download.setAttribute("href", api("runs/" + r.id + "/report"));
    // Nothing to report while nothing of the run is found (the server refuses it too).
    const nothing = !r.exists || r.missing_since !== null || !!r.open_error;
    download.classList.toggle("disabled", nothing);
    download.setAttribute("aria-disabled", String(nothing));
    download.title = nothing ? "nothing to report: " + runState(r)[0] : "";
    // While the server draws the report, its stage replaces the button's label.
    download.textContent = r.report ? "Building report: " + r.report + "…" : "Download report";
    download.classList.toggle("busy", !!r.report);
  }

  // ---- summary and rules ----------------------------------------------------------------------
  let lastOverview = null;
  const SEVERITY_TEXT = { stops_job: "stops the job", model_quality: "model quality", performance_hint: "performance hint",
                         not_applicable: "not applicable", none: "" };
  // A rule's finding: its severity and status, the short finding with the whole message on
  // demand, when it first and last fired, and its evidence at that last firing.
  function ruleBox(r, compact) {
    const noData = r.status === "NoData";
    const box = el("div", { className: "rule " + r.status + " sev-" + r.severity + (compact ? " compact" : ""), "data-rule": r.name,
      "data-severity": r.severity },
      el("strong", { text: r.name }), " ");
    if (r.stopped_job) box.append(el("span", { className: "badge stopped", text: "stopped the job" }), " ");
    else if (SEVERITY_TEXT[r.severity] && !noData) box.append(el("span", { className: "badge sev", text: SEVERITY_TEXT[r.severity] }), " ");
    box.append(el("span", { className: "status", text: noData ? "not applicable" : r.status }),
      noData ? " · nothing checked in this run (not a pass)" : " · fired " + (r.triggered === 1 ? "once" : r.triggered + " times") + " in " + r.datapoints + " checks" +
        (r.first_fired_step !== null ? " · first fired at " + (r.first_fired_mode ? r.first_fired_mode + " " : "") + "step " + r.first_fired_step : "") +
        (r.sums_up ? " · sums up the profiler rules listed (not counted again)" : ""));
    if (r.message) {
      if (noData) box.append(el("div", { className: "reason", text: "Why: " + r.message }));
      else if (r.short === r.message) box.append(el("div", { className: "finding", text: r.message }));
      else {
        // The finding in a few words; the whole message on demand.
        const more = el("details", { className: "finding" }, el("summary", { text: r.short }));
        more.append(el("div", { className: "full", text: r.message }));
        box.append(more);
      }
    }
    // A profiler rule's message and details cover this window (the report names it too).
    if (!noData && r.window) box.append(el("div", { className: "why window", text: "Over " + r.window }));
    // The measurements behind the latest firing: one heading, then a line per step measured
    // (a profiler rule's firing covers a window, so its evidence names several steps). Their
    // limits are those of that moment, which may differ from a whole-run figure in the finding.
    const shown = r.evidence.slice(0, compact ? 2 : 5);
    if (shown.length) box.append(el("div", { className: "why", text: "At its latest firing, against the limits of that moment, it measured:" }));
    for (const e of shown) {
      box.append(el("div", { className: "why evidence", text: (e.mode ? e.mode + " " : "") + "step " + e.step + ": " + evidenceText(e) }));
    }
    if (r.evidence.length > shown.length) box.append(el("div", { className: "why evidence", text: "and " + (r.evidence.length - shown.length) + " more at that firing" }));
    // What of its recorded status does not read (a summary written by another version): said,
    // never taken for "no result".
    for (const p of r.problems) box.append(el("div", { className: "why problem", text: p }));
    if (!compact && r.description) box.append(el("div", { className: "why", text: "Checks: " + r.description }));
    if (!compact && r.recommendation) box.append(el("div", { className: "why", text: "Recommendation: " + r.recommendation }));
    return box;
  }
  // In the server's order (`rank`): the rule that stopped the job, then by severity (stops the
  // job, model quality, performance hint), then the rest, those with nothing to check last.
  const ordered = (rules) => rules.slice().sort((a, b) => a.rank - b.rank);
  function drawRules(o, container, compact) {
    if (selectionIn(container)) return; // the user is reading (and selecting) a rule's text
    const key = JSON.stringify(o.rules) + compact;
    if (container.dataset.key === key) return;
    // A finding opened to its full text stays open when the list is drawn again.
    const open = new Set(Array.from(container.querySelectorAll("details[open]")).map((d) => d.closest("[data-rule]").dataset.rule));
    container.dataset.key = key;
    clear(container);
    if (!o.rules.length) {
      container.append(el("p", { className: "missing", text: o.rules_written ? "No rules ran." :
        "No rule statuses in the run yet (run `smdebug rules --follow --write-into-run` or a RuleRunner with the job)." }));
      return;
    }
    const list = ordered(o.rules);
    const firing = list.filter((r) => r.status === "IssuesFound" || r.status === "Error");
    for (const r of compact ? firing : list) container.append(ruleBox(r, compact));
    for (const d of container.querySelectorAll("details")) if (open.has(d.closest("[data-rule]").dataset.rule)) d.open = true;
    if (compact) {
      const rest = list.filter((r) => !firing.includes(r));
      const na = rest.filter((r) => r.status === "NoData");
      const checking = rest.filter((r) => r.status === "InProgress").length;
      const fine = rest.length - na.length - checking;
      if (!firing.length) container.append(el("p", { className: "hint", text: "No rule found an issue." }));
      container.append(el("p", { className: "hint", text: fine + " found nothing" + (checking ? "; " + checking + " still checking" : "") +
        (na.length ? "; " + na.length + " not applicable (nothing to check in this run):" : "") }));
      // Each reason once, with the rules it holds for.
      const byReason = new Map();
      for (const r of na) { const k = r.message || ""; if (!byReason.has(k)) byReason.set(k, []); byReason.get(k).push(r); }
      for (const [reason, rules] of byReason) {
        const group = el("p", { className: "hint na-group", title: reason });
        rules.forEach((r, i) => { group.append(el("span", { className: "na", "data-rule": r.name, text: r.name }), i + 1 < rules.length ? ", " : ""); });
        if (reason) group.append(": ", el("span", { className: "reason", text: reason }));
        container.append(group);
      }
    }
  }
  function tile(id, cls) { $(id).className = "tile " + cls; }
  // The issue tile and both rules lists, from the overview's rules (fetched, or patched).
  function drawRuleLists(o) {
    // Distinct issues: ProfilerReport is not counted beside the rules it sums up.
    const found = o.rules.filter((x) => x.status === "IssuesFound" && !x.sums_up);
    const issues = found.length;
    const na = o.rules.filter((x) => x.status === "NoData").length;
    const by = (sev) => found.filter((x) => x.severity === sev).length;
    // "1 stops the job · 2 model quality · 1 performance hint".
    const weights = [["stops_job", "stops the job", "stop the job"], ["model_quality", "model quality", "model quality"],
      ["performance_hint", "performance hint", "performance hints"]]
      .filter(([k]) => by(k)).map(([k, one, many]) => by(k) + " " + (by(k) === 1 ? one : many));
    $("summary-issues").textContent = o.rules_written ? String(issues) : "–";
    $("summary-issues-more").textContent = o.rules_written ? (weights.length ? weights.join(" · ") + " · " : "") + o.rules.length + " rules, " + na + " not applicable" : "no rule statuses in the run yet";
    tile("tile-issues", !o.rules_written ? "unknown" : by("stops_job") ? "bad" : issues ? "warn" : "good");
    drawRules(o, $("summary-rules"), true);
    drawRules(o, $("rules"), false);
    status.issues_shown = issues;
  }
  // The state and last-step tiles follow the pushed run state between overview fetches.
  function patchSummary() {
    const r = runs[current];
    if (!r || !lastOverview) return;
    const [text, cls] = pageState(r);
    $("summary-state").textContent = stateWord(r); tile("tile-state", cls);
    $("summary-step").textContent = window.SMD.stepCount(r);
    // Never an ETA the page cannot vouch for: not while the stream is down, not for a run that
    // does not advance (the overview, fetched again on the change, says why too).
    const noEta = stream.state === "down" ? "no ETA: disconnected from the server" :
      r.phase === "crashed" ? "no ETA: the run crashed" : r.phase === "stalled" ? "no ETA: the run is not advancing (stalled)" : null;
    if (noEta && !r.complete) $("summary-rate").textContent = noEta;
    if (lastOverview.id !== r.id || r.version < lastOverview.version) return;
    $("summary-state-more").textContent = r.phase_note && !r.complete ?
      (stream.state === "down" ? "last known: " + (PHASE_TEXT[r.phase] || r.phase) + " · " : "") + r.phase_note : dataSpan(text, r);
    // Not while the person has text selected in the card (the overview's redraw waits too).
    if (selectionIn($("overview-runs"))) return;
    for (const [k, v] of runCounts(r, r)) {
      const dd = document.querySelector('#overview-runs dd[data-count="' + k + '"]');
      if (dd && dd.textContent !== v) dd.textContent = v;
    }
  }
  // The run's health in one sentence (two lines at most, in its severity's colour), the full
  // text (the end marker's reason, the stop request, the findings' whole messages) on demand.
  function drawHealth(o) {
    const h = o.health;
    const line = $("summary-health");
    line.textContent = h.sentence;
    line.title = h.sentence;
    // A run not there yet is neither healthy nor not: grey, not green.
    $("health-box").className = "health-box " + (o.exists ? "sev-" + h.severity : "waiting");
    $("health-box").hidden = false;
    const more = $("summary-health-details");
    more.hidden = !h.details;
    if ($("summary-health-full").textContent !== h.details) $("summary-health-full").textContent = h.details;
    status.health = h.sentence;
  }
  // The state tile's word: the phase, "disconnected" while the stream is down.
  const stateWord = (r) => (stream.state === "down" ? "disconnected" : PHASE_TEXT[r.phase] || runState(r)[0]);
  const dataSpan = (text, x) => text + (x.start !== null ? " · " + dur(x.end - x.start) + " of data" : "");
  // The run card's counts, from the overview or from the pushed run summary (the header's),
  // whichever is newer: the card and the header agree between the overview's fetches (every
  // 10 s on a live run). `r` is the summary, for the state; `x` the newer of the two.
  function runCounts(r, x) {
    const c = [["state", runState(r)[0]], ["steps", x.steps + (x.last_step !== null ? " (last " + x.last_step + ")" : "")],
      ["samples / spans", x.samples + " / " + x.spans], ["tensors", String(x.tensors)]];
    if (x.start !== null) c.push(["duration", dur(x.end - x.start)]);
    return c;
  }
  // `zoomed`: the steps of the window drawn, when the person zoomed the chart.
  // The chart's mode (TRAIN) and the other (EVAL) on one step axis, each line across the other's
  // points; the steps where either was NaN or ±Inf marked.
  function headlineChart(h, key, field, zoomed) {
    const box = $("headline-charts");
    if (!h) { dropCharts(box, (k) => k === key); return; }
    const other = h.other && h.other.steps.length ? h.other : null;
    const marks = window.SMD.mergeMarks(h.non_finite.concat(other ? other.non_finite : []));
    const title = h.name + " · " + (zoomed ? "steps " + zoomed[0] + "–" + zoomed[1] + " (double-click: all steps)" :
      "last " + h.mode + " " + window.SMD.sig(h.last_value) + " at step " + h.last_step +
      (other ? ", " + other.mode + " " + window.SMD.lastText(other.steps, other.values, other.non_finite) + " at step " + other.steps[other.steps.length - 1] : "")) +
      (marks.length ? " · " + nonFiniteText(marks) : "");
    const xs = other ? Array.from(new Set(h.steps.concat(other.steps))).sort((a, b) => a - b) : h.steps;
    const at = new Map(xs.map((x, i) => [x, i]));
    const line = (steps, values) => { const y = new Array(xs.length).fill(null); steps.forEach((x, j) => { y[at.get(x)] = values[j]; }); return y; };
    const data = other ? [xs, line(h.steps, h.values), line(other.steps, other.values)] : [xs, h.values];
    // In the run's colour (as in every tab), the other mode dashed, as the Scalars tab draws them.
    const colour = runColour(runs[current] ? runs[current].id : 0);
    const series = [{ label: h.mode, color: colour, spanGaps: true, width: 2 }].concat(other ? [{ label: other.mode, color: colour, dash: [6, 4], spanGaps: true, width: 2, points: other.steps.length < 40 }] : []);
    chart(box, key, title, data, series, { height: 170, xRange: zoomed, windowed: !!zoomed, nonFinite: marks,
      onZoom: (range) => {
        if (range) headlineZooms.set(field, { name: h.name, mode: h.mode, steps: window.SMD.stepWindow(range) });
        else headlineZooms.delete(field);
        guarded("headlines", drawHeadlines).then(publish);
      } });
  }
  // Zoomed loss and accuracy charts: field -> {name, mode, steps: [first, last]}. A zoomed chart
  // draws its window as the server answers for it (every value of a narrow one, from the files).
  const headlineZooms = new Map();
  async function headlineWindow(r, c, points) {
    const z = headlineZooms.get(c.field);
    if (!z || z.name !== c.name || z.mode !== c.mode) return null;
    const res = await get("runs/" + r.id + "/scalars?points=" + points + "&regex=" + encodeURIComponent(window.SMD.exactName(c.name)) +
      "&from=" + z.steps[0] + "&to=" + z.steps[1]);
    const s = res.scalars.find((x) => x.name === c.name);
    const m = s && s.modes.find((x) => x.mode === c.mode);
    const o = s && c.other && s.modes.find((x) => x.mode === c.other.mode);
    const other = o ? { mode: o.mode, total: o.total, steps: o.steps, values: o.values, non_finite: o.non_finite } : null;
    return m ? { steps: m.steps, values: m.values, non_finite: m.non_finite, other, range: z.steps } :
      { steps: [], values: [], non_finite: [], other, range: z.steps };
  }
  // The loss and accuracy charts, downsampled by the server as the Scalars tab's (each
  // bucket's lowest and highest value, buckets aligned on multiples of their width), fetched
  // again within a second of new scalar values: only from the start of the last bucket held
  // while the buckets' width holds (the buckets before are unchanged), else whole.
  const HEADLINES = ["loss", "accuracy"];
  const heldHeadlines = new Map(); // field -> {run, points, name, mode, width, steps, values}
  let headlineTails = 0, headlineGen = 0;
  // The run was reset or the page reconnected: the charts are fetched whole next time.
  function forgetHeadlines() { heldHeadlines.clear(); headlineGen++; }
  async function drawHeadlines() {
    const r = runs[current];
    const points = budget();
    const whole = "runs/" + r.id + "/headlines?points=" + points;
    const held = new Map(heldHeadlines), gen = headlineGen;
    let q = whole;
    for (const f of HEADLINES) {
      const was = held.get(f);
      if (!was || was.run !== r.id || was.points !== points || !was.steps.length) { held.delete(f); continue; }
      const last = was.steps[was.steps.length - 1];
      q += "&" + f + "_width=" + was.width + "&" + f + "_since=" + (was.width ? Math.floor(last / was.width) * was.width : last);
    }
    let h = await get(q);
    // The last buckets of another scalar than the one held (a shorter name appeared): whole.
    const other = (f) => { const c = h[f], was = held.get(f); return c && c.since !== null && (c.name !== was.name || c.mode !== was.mode); };
    if (gen !== headlineGen || HEADLINES.some(other)) { held.clear(); h = await get(whole); }
    for (const f of HEADLINES) {
      const c = h[f];
      if (!c) { heldHeadlines.delete(f); headlineChart(null, "headline:" + f, f, null); continue; }
      let steps = c.steps, values = c.values;
      if (c.since !== null) {
        const was = held.get(f);
        let n = was.steps.findIndex((x) => x >= c.since);
        if (n < 0) n = was.steps.length;
        steps = was.steps.slice(0, n).concat(c.steps);
        values = was.values.slice(0, n).concat(c.values);
        headlineTails++;
      }
      heldHeadlines.set(f, { run: r.id, points, name: c.name, mode: c.mode, width: c.width, steps, values });
      const win = await headlineWindow(r, Object.assign({ field: f }, c), points);
      // The page reconnected (or the run was reset) while this was fetched: fetched again,
      // whole (returning here left the panel undrawn until the scalars next changed: never,
      // for an ended run).
      if (gen !== headlineGen) return drawHeadlines();
      if (win) headlineChart(Object.assign({}, c, { steps: win.steps, values: win.values, non_finite: win.non_finite, other: win.other }), "headline:" + f, f, win.range);
      else headlineChart(Object.assign({}, c, { steps, values }), "headline:" + f, f, null);
    }
    const hc = $("headline-charts");
    const none = hc.querySelector("p.missing");
    if (!h.loss && !h.accuracy) { if (!none) hc.append(el("p", { className: "missing", text: "No loss or accuracy scalars yet." })); }
    else if (none) none.remove();
    // What the loss chart holds, for the tests: the same buckets however it was updated.
    const loss = heldHeadlines.get("loss");
    status.headline_zooms = Object.fromEntries(Array.from(headlineZooms, ([f, z]) => [f, z.steps]));
    status.headlines = { points, tails: headlineTails, loss: loss && { total: h.loss.total, last_step: h.loss.last_step, width: loss.width, steps: loss.steps } };
    status.panels.headlines = true;
  }
  async function drawOverview() {
    const r = runs[current];
    const o = await get("runs/" + r.id + "/overview");
    lastOverview = o;
    const [text, cls] = pageState(r);
    $("summary-state").textContent = stateWord(r);
    const newer = r.version > o.version ? r : o;
    $("summary-state-more").textContent = dataSpan(text, newer);
    tile("tile-state", cls);
    drawRuleLists(o);
    drawHealth(o);
    window.SMD.drawProgress(o, tile, r);
    status.eta_note = o.progress.eta_note;
    patchSummary();
    // The run card.
    const dl = el("dl");
    const add = (k, v) => { dl.append(el("dt", { text: k }), el("dd", { text: v })); };
    add("location", o.location);
    for (const [k, v] of runCounts(r, newer)) { add(k, v); dl.lastChild.dataset.count = k; }
    if (o.phases) {
      add("initialization", dur(o.phases.initialization));
      add("training loop", dur(o.phases.training_loop));
      add("finalization", dur(o.phases.finalization));
    }
    if (o.top_phases.length) add("most time", o.top_phases.slice(0, 3).map((t) => t.phase + " " + dur(t.total_s)).join(", "));
    if (o.warnings.length) add("warnings", o.warnings.join("; "));
    const cards = $("overview-runs");
    if (!selectionIn(cards)) { clear(cards); cards.append(el("div", { className: "card" }, el("h3", { text: o.name }), dl)); }
    const stats = $("node-stats");
    if (!selectionIn(stats)) {
      clear(stats);
      if (!o.nodes.length) stats.append(el("p", { className: "missing", text: "No system metrics yet." }));
      for (const n of o.nodes) {
        const table = el("table", null, el("tr", null, ...["node " + n.node, "unit", "min", "max", "p99", "p90", "p50", ""].map((h) => el("th", { text: h }))));
        for (const row of n.rows) {
          table.append(el("tr", null, el("td", { text: row.metric }), el("td", { text: row.unit }),
            ...["min", "max", "p99", "p90", "p50"].map((k) => el("td", { text: fmt(row[k]) })), el("td", { className: "hint", text: row.note || "" })));
        }
        stats.append(table);
      }
    }
    status.panels.overview = true;
  }

  // Points asked per series: a minimum and a maximum per pixel column of a chart.
  function budget() { return Math.round(2 * chartWidth()); }
  function pointsQuery() { return "points=" + budget(); }
  function windowQuery() { return pointsQuery() + (zoom ? "&from=" + zoom[0] + "&to=" + zoom[1] : ""); }

  // ---- system and steps ---------------------------------------------------------------------
  const SPAN_ROWS = 25;
  let spanPage = 0; // pages back from the window's last spans (in time order), else pages from the first
  // The span list's order: a column and its direction (the server sorts all the window's
  // spans), or null for time order, the latest last.
  let spanSort = null;
  const SPAN_COLUMNS = [["phase", "phase"], ["name", "name"], ["step", "step"], ["node", "node"], ["start", "start"], ["duration", "duration"]];
  // Phases as people say them; the trace's row name is the title.
  const PHASE_LABEL = { DataLoaderIter: "data loading", Forward: "forward", "Backward(post-forward)": "backward", Optimizer: "optimizer" };
  const phaseLabel = (p) => PHASE_LABEL[p] || (p.startsWith("Step:ModeKeys.") ? "step (" + p.slice(14) + ")" : p);
  // A table whose columns sort when their header is clicked: `columns` [[key, text, value(row)]],
  // `sort` {key, desc} or null, `onSort(key)` when a header is clicked.
  function sortableHead(columns, sort, onSort) {
    return el("tr", null, ...columns.map(([key, text]) => {
      const on = sort && sort.key === key;
      const th = el("th", { "data-sort": key, "aria-sort": on ? (sort.desc ? "descending" : "ascending") : "none" });
      const b = el("button", { type: "button", className: "sort" + (on ? " on" : ""), title: "sort by " + text, text: text + (on ? (sort.desc ? " ▼" : " ▲") : "") });
      b.addEventListener("click", () => onSort(key));
      th.append(b);
      return th;
    }));
  }
  // Sorting a column: a first click sorts durations largest first, steps, times and names
  // from the first; a second click turns the order round.
  function nextSort(sort, key, desc) {
    return sort && sort.key === key ? { key, desc: !sort.desc } : { key, desc };
  }
  let totalsSort = { key: "total", desc: true };
  function sortRows(rows, columns, sort) {
    const col = columns.find((c) => c[0] === sort.key);
    if (!col) return rows;
    const v = col[2];
    return rows.slice().sort((a, b) => {
      const x = v(a), y = v(b);
      const c = typeof x === "number" && typeof y === "number" ? x - y : naturalCompare(String(x), String(y));
      return sort.desc ? -c : c;
    });
  }
  function spansQuery() {
    const q = windowQuery() + "&limit=" + SPAN_ROWS + "&offset=" + spanPage * SPAN_ROWS;
    return spanSort ? q + "&sort=" + spanSort.key + "&order=" + (spanSort.desc ? "desc" : "asc") : q + "&last=true";
  }
  // The heatmap's time axis: five times under its columns.
  function heatAxis(box, canvas, hm, labelWidth) {
    clear(box);
    box.style.width = canvas.width + "px";
    if (hm.from === null || hm.to === null || !hm.rows.length) return;
    const span = hm.to - hm.from;
    const text = (t) => (span < 10 ? timeLabel(t).slice(0, 12) : timeLabel(t).slice(0, 8));
    for (let i = 0; i <= 4; i++) {
      const t = hm.from + (span * i) / 4;
      const x = labelWidth + ((canvas.width - labelWidth) * i) / 4;
      const label = el("span", { text: text(t), className: i === 0 ? "first" : i === 4 ? "last" : "" });
      label.style.left = x + "px";
      box.append(label);
    }
    box.append(el("span", { className: "axis-name", text: "UTC" }));
  }
  // A percentage's axis: 0–100 %, more only when a value is above (a process using several
  // cores).
  const PERCENT = (min, max) => [0, Math.max(100, Math.ceil((max || 0) / 10) * 10)];
  async function drawSystem() {
    const r = runs[current];
    const q = windowQuery();
    const [sys, spans] = await Promise.all([get("runs/" + r.id + "/system?" + q), get("runs/" + r.id + "/spans?" + spansQuery())]);
    drawGrid($("heatmap"), sys.heatmap.rows, 130);
    heatAxis($("heatmap-axis"), $("heatmap"), sys.heatmap, 130);
    colourScale($("heatmap-scale"), 0, 100, " %");
    status.heatmap_rows = sys.heatmap.rows.map((x) => x.label);
    // The window shown, and the step it was opened on from the slowest steps.
    const note = $("zoom-note");
    note.hidden = !zoom;
    note.textContent = zoom ? "Window " + timeLabel(zoom[0]) + " – " + timeLabel(zoom[1]) + " UTC (" + dur(zoom[1] - zoom[0]) + ")" +
      (shownStep !== null ? " around step " + shownStep + ", opened from the slowest steps" : "") + " · double-click a chart for the whole run" : "";
    const groups = new Map();
    for (const s of sys.series) {
      const k = window.SMD.systemGroup(s);
      if (!groups.has(k)) groups.set(k, []);
      groups.get(k).push(s);
    }
    const box = $("system-charts");
    const none = box.querySelector("p.missing");
    if (none && groups.size) none.remove();
    for (const [key, list] of groups) {
      list.sort((a, b) => naturalCompare(a.node, b.node) || naturalCompare(a.name, b.name));
      const xs = Array.from(new Set(list.flatMap((s) => s.data.t))).sort((a, b) => a - b);
      const index = new Map(xs.map((x, i) => [x, i]));
      const ys = list.map((s) => { const y = new Array(xs.length).fill(null); s.data.t.forEach((t, i) => { y[index.get(t)] = s.data.v[i]; }); return y; });
      const s0 = list[0];
      const title = metricTitle(s0.type, s0.type === "cpu" || s0.type === "gpu" ? s0.dimension : s0.name, s0.unit) +
        (s0.type === "network" ? ", all interfaces incl. loopback (this dashboard's traffic too)" : "");
      const nodes = new Set(list.map((x) => x.node)).size;
      const plot = chart(box, "sys:" + key, title, [xs, ...ys], list.map((s, i) => ({
        label: (nodes > 1 ? s.node + " " : "") + s.name + (s.dimension && s.type !== "cpu" && s.type !== "gpu" ? " " + s.dimension : ""),
        color: list.length > 1 ? CATEGORICAL[i % CATEGORICAL.length] : undefined })),
        { time: true, yRange: s0.unit.startsWith("%") ? PERCENT : null, yFormat: s0.unit === "B/s" || s0.unit === "B" ? (v) => axisLabel(v) + " " + s0.unit : null });
      plot.seriesKeys = list.map(window.SMD.systemKey); // where pushed samples go (live.js)
      if (key.startsWith("cpu CPUUtilization") && xs.length) status.last_point = xs[xs.length - 1];
    }
    if (!groups.size) { clear(box); dropCharts(box); box.append(el("p", { className: "missing", text: "No system metrics yet." })); }
    $("system-more").textContent = sys.series_total > sys.series.length ?
      "Showing " + sys.series.length + " of " + sys.series_total + " timelines" +
      (sys.heatmap.band > 1 ? "; heatmap rows are means of " + sys.heatmap.band + " neighbours" : "") : "";
    const sp = $("spans");
    if (!selectionIn(sp)) {
      clear(sp);
      const totalColumns = [["phase", "phase", (t) => phaseLabel(t.phase)], ["spans", "spans", (t) => t.count], ["total", "total", (t) => t.total_s]];
      const totals = el("table", { className: "span-totals" }, sortableHead(totalColumns, totalsSort, (key) => {
        totalsSort = nextSort(totalsSort, key, key !== "phase"); guarded("system", drawSystem).then(publish);
      }));
      for (const t of sortRows(spans.totals, totalColumns, totalsSort)) {
        totals.append(el("tr", null, el("td", { text: phaseLabel(t.phase), title: t.phase }), el("td", { text: t.count }), el("td", { text: dur(t.total_s), "data-s": String(t.total_s) })));
      }
      const shown = spans.spans.length;
      const first = spanSort ? spanPage * SPAN_ROWS : Math.max(0, spans.count - (spanPage + 1) * SPAN_ROWS);
      const order = spanSort ? "by " + spanSort.key + (spanSort.desc ? ", largest first" : "") + " (click a column's name to sort)" : "the latest last (click a column's name to sort)";
      sp.append(el("p", { text: spans.count + " spans in the window; " + (shown ? "rows " + (first + 1) + "–" + (first + shown) + ", " + order : "none listed") }), totals);
      const list = el("table", { className: "span-list" }, sortableHead(SPAN_COLUMNS, spanSort, (key) => {
        spanSort = nextSort(spanSort, key, key === "duration");
        spanPage = 0;
        guarded("system", drawSystem).then(publish);
      }));
      for (const s of spans.spans) {
        list.append(el("tr", null, el("td", { className: "name", text: phaseLabel(s.phase), title: s.phase }), el("td", { className: "name", text: s.name, title: s.name }),
          el("td", { text: s.step === null ? "" : s.step }), el("td", { text: s.node }), el("td", { text: timeLabel(s.start) }),
          el("td", { text: dur(s.end - s.start), "data-s": String(s.end - s.start) })));
      }
      sp.append(list);
    }
    status.window_spans = spans.count;
    status.span_sort = spanSort;
    const more = (spanPage + 1) * SPAN_ROWS < spans.count;
    $("spans-older").disabled = !more;
    $("spans-newer").disabled = spanPage === 0;
    $("spans-older").textContent = spanSort ? "Next" : "Older";
    $("spans-newer").textContent = spanSort ? "Previous" : "Newer";
    $("spans-page").textContent = spanPage ? spanPage * SPAN_ROWS + (spanSort ? " rows before these" : " newer rows not shown") : "";
    status.panels.system = true;
  }

  // Ticks of a log axis (values are log10 of seconds): round durations (1, 2, 5 × 10^k s)
  // within [lo, hi], or five evenly spaced where fewer than three round ones fall in it.
  function logSplits(lo, hi) {
    const out = [];
    for (let k = Math.floor(lo) - 1; k <= Math.ceil(hi); k++) {
      for (const m of [1, 2, 5]) { const v = k + Math.log10(m); if (v >= lo && v <= hi) out.push(v); }
    }
    if (out.length >= 3) return out.length > 8 ? out.filter((v) => Math.abs(v - Math.round(v)) < 1e-9) : out;
    return [0, 1, 2, 3, 4].map((i) => lo + ((hi - lo) * (i + 0.5)) / 5);
  }
  // Ticks of a bar chart of `n` bars at 0..n-1: whole bars, at most one per 60 px.
  function indexSplits(n, width) {
    const every = Math.max(1, Math.ceil(n / Math.max(1, Math.floor(width / 60))));
    const out = [];
    for (let i = 0; i < n; i += every) out.push(i);
    return out;
  }
  // A step's place in the tooltip and the tables: "step 1200 · TRAIN · algo-1 worker 0".
  const stepText = (row) => (row.step === null ? "a step" : "step " + row.step) + " · " + (row.mode || "") +
    " · " + row.node + (row.worker !== null && row.worker !== undefined ? " worker " + row.worker : "");
  // The timeline (the System tab: every time chart and the span list) zoomed on one step, with
  // half its duration on each side.
  function showStep(row) {
    const pad = Math.max(row.duration * 0.5, 0.001);
    zoom = [row.start - pad, row.start + row.duration + pad];
    spanPage = 0;
    spanSort = null;
    status.shown_step = row.step;
    shownStep = row.step;
    location.hash = "#/run/" + current + "/system";
  }
  let slowSort = { key: "duration", desc: true };
  let shownStep = null; // the step a click in the slowest steps zoomed on, until the zoom changes
  // The window's slowest steps: each with its time per phase (the share of the step in
  // brackets), a click through to the timeline zoomed on it.
  function drawSlowest(st) {
    const box = $("slowest-steps");
    if (selectionIn(box)) return;
    clear(box);
    if (!st.slowest.length) { box.append(el("p", { className: "missing", text: zoom ? "No step starts in the window." : "No step spans yet." })); return; }
    const phases = Array.from(new Set(st.slowest.flatMap((x) => Object.keys(x.phases))));
    phases.sort((a, b) => st.phases.phases.indexOf(a) - st.phases.phases.indexOf(b) || naturalCompare(a, b));
    const columns = [["step", "step", (x) => (x.step === null ? -1 : x.step)], ["mode", "mode", (x) => x.mode || ""],
      ["node", "node", (x) => x.node + " " + (x.worker === null ? "" : x.worker)], ["start", "start", (x) => x.start],
      ["duration", "duration", (x) => x.duration]]
      .concat(phases.map((p) => [p, phaseLabel(p), (x) => x.phases[p] || 0]), [["other", "other", (x) => x.other]]);
    const table = el("table", { className: "slowest" }, sortableHead(columns, slowSort, (key) => {
      slowSort = nextSort(slowSort, key, !["step", "mode", "node", "start"].includes(key)); drawSlowest(st); publish();
    }));
    const share = (v, d) => dur(v) + (d > 0 ? " (" + Math.round((100 * v) / d) + " %)" : "");
    for (const x of sortRows(st.slowest, columns, slowSort)) {
      const tr = el("tr", { className: "step-row", "data-step": x.step === null ? "" : String(x.step), title: "show " + stepText(x) + " on the timeline" },
        el("td", { text: x.step === null ? "–" : x.step }), el("td", { text: x.mode || "" }),
        el("td", { text: x.node + (x.worker !== null ? " worker " + x.worker : "") }), el("td", { text: timeLabel(x.start) }),
        el("td", { text: dur(x.duration), "data-s": String(x.duration) }),
        ...phases.map((p) => el("td", { text: x.phases[p] === undefined ? "–" : share(x.phases[p], x.duration), "data-s": String(x.phases[p] || 0) })),
        el("td", { text: share(x.other, x.duration), "data-s": String(x.other) }));
      tr.addEventListener("click", () => showStep(x));
      table.append(tr);
    }
    box.append(el("p", { className: "hint", text: "The " + st.slowest.length + " slowest of the " + st.window_steps + " steps " +
      (zoom ? "in the window" : "of the run") + "; a step's number is its mode's count (TRAIN 0, 1, 2…, as its spans carry it), not the run's global step of the Scalars tab; " +
      "time per phase is the spans of the step's node and worker within it. Click a step to see it on the timeline." }), table);
  }
  async function drawSteps() {
    const r = runs[current];
    const st = await get("runs/" + r.id + "/steps?last=" + ($("last-n").value || 30) + "&slowest=20&" + windowQuery());
    const box = $("step-charts");
    if (!st.series.length) {
      dropCharts(box); clear(box);
      box.append(el("p", { className: "missing", text: "No step spans yet (record steps with SpanRecorder)." }));
    } else {
      const p = box.querySelector("p.missing"); if (p) p.remove();
      // StepOutlier's findings recorded by another version: said once, above the charts.
      let unread = box.querySelector("p.problem.outliers");
      if (st.outliers_unread) {
        if (!unread) { unread = el("p", { className: "problem outliers" }); box.prepend(unread); }
        unread.textContent = st.outliers_unread + "; no outlier is marked.";
      } else if (unread) unread.remove();
      for (const s of st.series) {
        const label = window.SMD.stepLabel(s);
        const out = new Map(s.outliers.map((o) => [o.t, o.duration]));
        // The step of each point, for the tooltip (pushed steps add theirs: live.js).
        const stepOf = new Map(s.data.t.map((t, i) => [t, s.step[i]]));
        const plot = chart(box, "steps:" + label, "Step duration, " + label + " · p50 " + dur(s.p50) + (s.outlier_limit !== null ? " · StepOutlier limit " + dur(s.outlier_limit) : st.outliers_unread ? " · StepOutlier's findings do not read" : " · no StepOutlier verdict yet"),
          breakGaps([s.data.t, s.data.v, s.data.t.map((t) => out.has(t) ? out.get(t) : null)]),
          [{ label: "duration" }, { label: "outlier", color: "#d62728", points: true, paths: () => null }],
          { time: true, yFormat: dur, yRange: (min, max) => [0, max > 0 ? max * 1.05 : 1],
            tipExtra: (u, i) => { const n = u.stepOf && u.stepOf.get(u.data[0][i]); return n === null || n === undefined ? null : "step " + n; } });
        plot.stepOf = stepOf;
        if (s.data.t.length) status.last_step_time = s.data.t[s.data.t.length - 1];
      }
      if (st.histogram) {
        // Bins of equal width on a log axis (x is the log of a duration): a few slow steps do
        // not squeeze the rest into one bar.
        const h = st.histogram;
        const logs = h.edges.map(Math.log10);
        const xs = h.counts.map((_, i) => (logs[i] + logs[i + 1]) / 2);
        const half = (logs[logs.length - 1] - logs[0]) / h.counts.length / 2;
        chart(box, "steps:histogram", "Step durations" + (zoom ? " in the window" : "") + " (" + st.window_steps + " steps, log axis)", [xs, h.counts],
          [{ label: "steps", fill: "rgba(78,121,167,0.55)", color: "#4e79a7", paths: uPlot.paths.bars({ size: [0.9] }) }],
          { xLabel: "duration", xFormat: (x) => dur(Math.pow(10, x)), xTicks: (x) => dur(Math.pow(10, x)),
            xRangeOf: () => [logs[0] - half, logs[logs.length - 1] + half], xSplits: (u) => logSplits(u.scales.x.min, u.scales.x.max),
            yRange: (min, max) => [0, Math.max(1, max)], tipExtra: (u, i) => dur(h.edges[i]) + " – " + dur(h.edges[i + 1]) });
      } else dropCharts(box, (k) => k === "steps:histogram");
    }
    drawSlowest(st);
    status.slowest = st.slowest.map((x) => ({ step: x.step, mode: x.mode, duration: x.duration, phases: x.phases, other: x.other }));
    const pbox = $("phase-chart");
    const ph = st.phases;
    if (ph.steps.length) {
      // Stacked bars, one per step, in colours that tell apart: the running sums are drawn
      // from the top (other) down, each opaque over the last; the tooltip says each phase's own time.
      const xs = ph.steps.map((_, i) => i);
      const names = ph.phases.concat(["other"]);
      const own = names.map((n) => ph.steps.map((x) => (n === "other" ? x.other : x.phases[n] || 0)));
      const acc = new Array(xs.length).fill(0);
      const sums = own.map((col) => col.map((v, i) => (acc[i] += v)));
      const order = names.map((_, i) => i).reverse();
      const colour = (i) => (names[i] === "other" ? "#bab0ac" : CATEGORICAL[i % (CATEGORICAL.length - 1)]);
      const label = (i) => { const x = ph.steps[i]; return x ? (x.step === null ? "?" : String(x.step)) : ""; };
      chart(pbox, "phases", "Time per phase of the last " + ph.steps.length + " steps" + (zoom ? " in the window" : "") + " (stacked)", [xs, ...order.map((i) => sums[i])],
        order.map((i) => ({ label: phaseLabel(names[i]), color: colour(i), fill: colour(i), paths: uPlot.paths.bars({ size: [0.8] }) })),
        { xLabel: "step", xFormat: label, xTicks: (v) => (Number.isInteger(v) ? label(v) : ""), yFormat: dur,
          xRangeOf: () => [-0.5, xs.length - 0.5], xSplits: (u) => indexSplits(xs.length, u.bbox.width / devicePixelRatio),
          yRange: (min, max) => [0, max > 0 ? max * 1.05 : 1], ownValues: order.map((i) => own[i]),
          tipExtra: (u, i) => (ph.steps[i] ? stepText(ph.steps[i]) + " · " + dur(ph.steps[i].duration) : null) });
    } else {
      dropCharts(pbox); clear(pbox); pbox.append(el("p", { className: "missing", text: "No phases recorded within steps yet." }));
    }
    status.panels.steps = true;
  }

  // A line of steps over time is cut where the steps paused (an EVAL line between two
  // evaluations, a TRAIN line across one): a gap over ten times the median interval gets a
  // point of no value in its middle, so that no line is drawn across it as if the durations
  // between rose or fell. `data`: [times, ...values at those times].
  function breakGaps(data) {
    const t = data[0];
    if (t.length < 3) return data;
    const dts = [];
    for (let i = 1; i < t.length; i++) dts.push(t[i] - t[i - 1]);
    const median = dts.slice().sort((a, b) => a - b)[dts.length >> 1];
    if (!(median > 0)) return data;
    const out = data.map(() => []);
    for (let i = 0; i < t.length; i++) {
      if (i > 0 && t[i] - t[i - 1] > 10 * median) {
        out[0].push((t[i] + t[i - 1]) / 2);
        for (let k = 1; k < data.length; k++) out[k].push(null);
      }
      for (let k = 0; k < data.length; k++) out[k].push(data[k][i]);
    }
    return out;
  }

  // ---- tabs and refreshing ------------------------------------------------------------------
  const TABS = ["summary", "scalars", "rules", "system", "steps", "tensors", "code", "kineto", "compare", "all"];
  let tab = "summary";
  function route() {
    // #/run/<id>/<tab>, a query after it (the comparison's runs), or #/<tab> for the current run.
    const m = /^#\/(?:run\/(\d+)\/)?([a-z]+)(\?.*)?$/.exec(location.hash);
    const id = m && m[1] !== undefined ? parseInt(m[1], 10) : current;
    const t = m && TABS.includes(m[2]) ? m[2] : "summary";
    const runChanged = id !== current && runs.some((r) => r.id === id);
    if (runChanged) { current = id; zoom = null; shownStep = null; dropCharts($("system-charts")); dropCharts($("step-charts")); drawnAt.clear(); }
    tab = t;
    status.tab = t;
    for (const s of document.querySelectorAll("main > section")) s.hidden = !s.dataset.tabs.split(" ").includes(t);
    for (const a of document.querySelectorAll("#tabs a")) {
      a.setAttribute("href", "#/run/" + current + "/" + a.dataset.tab);
      a.classList.toggle("active", a.dataset.tab === t);
    }
    $("run-select").value = String(current);
  }
  // The panels of a tab: [name, area of the data it shows, draw].
  const extras = window.SMD.makeExtras({ get, api, status, chart, runState, runs: () => runs, current: () => current });
  const { drawTensor, drawTensor2d } = extras;
  const compare = window.SMD.makeCompare({ get, chart, dropCharts, status, runColour, pointsQuery, runState,
    runs: () => runs, current: () => current });
  const scalars = window.SMD.makeScalars({ get, chart, dropCharts, status, runColour, pointsQuery, api,
    runs: () => runs, current: () => current, redraw: () => guarded("scalars", scalars.draw).then(publish) });
  const PANELS = {
    overview: ["version", drawOverview], headlines: ["tensors", drawHeadlines], system: ["profile", drawSystem], steps: ["profile", drawSteps],
    scalars: ["tensors", scalars.draw], tensors: ["tensors", drawTensor], compare: ["version", compare.draw],
    code: ["time", () => extras.drawCode(false)], kineto: ["once", extras.drawKineto],
  };
  const TAB_PANELS = { summary: ["overview", "headlines"], rules: ["overview"], system: ["overview", "system"], steps: ["steps"],
    scalars: ["scalars"], tensors: ["tensors"], code: ["code"], kineto: ["kineto"], compare: ["compare"],
    all: ["overview", "headlines", "system", "steps", "scalars", "tensors", "compare", "code", "kineto"] };
  function stamp(area) {
    const r = runs[current];
    if (!r) return null;
    if (area === "version") return runs.map((x) => x.version).join(",");
    if (area === "once") return "once";
    if (area === "time") return null;
    return r.id + ":" + r.changed[area];
  }
  async function guarded(name, f) {
    try { await f(); } catch (e) { if (String(e.message) !== "token needed") { status.errors.push(name + ": " + e.message); } }
    status.panel_ms = status.panel_ms || {};
    status.panel_ms[name] = Math.round(performance.now());
  }
  async function refreshTimeViews() {
    if (TAB_PANELS[tab].includes("system")) await guarded("system", drawSystem);
    if (TAB_PANELS[tab].includes("steps")) await guarded("steps", drawSteps);
    publish();
  }
  // At most one refresh a second: pushes that come faster are folded into the next one.
  const MIN_GAP_MS = 1000;
  // Panels whose live parts are patched from pushed deltas (live.js): their aggregates are
  // fetched again at most this often, or sooner when a delta could not be applied.
  const AGGREGATE_GAP_MS = 10000;
  const PATCHED = new Set(["overview", "system", "steps", "compare"]);
  const fetchedAt = new Map(), stale = new Set();
  let laterTimer = null;
  const later = (at) => { if (!laterTimer) laterTimer = setTimeout(() => { laterTimer = null; refreshAll(); }, Math.max(0, at - performance.now())); };
  let busy = false, again = false, force = false, lastRefresh = -Infinity, timer = null;
  async function refreshAll(forced) {
    if (forced) force = true;
    if (busy) { again = true; return; }
    const wait = lastRefresh + MIN_GAP_MS - performance.now();
    if (!force && wait > 0) { if (!timer) timer = setTimeout(() => { timer = null; refreshAll(); }, wait); return; }
    busy = true;
    do {
      again = false;
      const forcing = force;
      force = false;
      lastRefresh = performance.now();
      updateHeader();
      for (const name of TAB_PANELS[tab]) {
        const [area, draw] = PANELS[name];
        const at = stamp(area);
        if (!forcing && at !== null && drawnAt.get(name) === at) continue;
        // Once the run has ended, what still arrives (the last trace files) is fetched as usual.
        const due = (fetchedAt.get(name) || 0) + (runs[current] && runs[current].complete ? 0 : AGGREGATE_GAP_MS);
        if (!forcing && PATCHED.has(name) && drawnAt.has(name) && !stale.has(name) && performance.now() < due) { later(due); continue; }
        stale.delete(name);
        fetchedAt.set(name, performance.now());
        await guarded(name, draw);
        drawnAt.set(name, at);
        publish();
      }
      status.updates++;
      publish();
    } while (again);
    busy = false;
  }

  const live = window.SMD.makeLive({ charts, status, drawRulesOf: drawRuleLists,
    overview: () => (lastOverview && runs[current] && lastOverview.id === runs[current].id ? lastOverview : null),
    zoomed: () => zoom !== null, budget, stale: (name) => stale.add(name) });
  let source = null, ticking = null;
  // The event stream, (re)opened: its first push sets this page's cursor; the patched panels
  // whose data changed in between are fetched again then, the headline charts whole.
  function connect() {
    if (source) source.close();
    stream.connectedAt = performance.now();
    if (stream.state !== "down") stream.state = "connecting";
    const es = new EventSource(api("events"));
    source = es;
    let opened = false;
    es.addEventListener("error", () => {
      if (source !== es) return;
      // The browser retries by itself while the state is CONNECTING; a stream it gave up on
      // is reopened by the watchdog below.
      stream.state = "down";
      updateHeader(); showFreshness(); patchSummary(); publish();
    });
    es.addEventListener("runs", (e) => {
      if (source !== es) return;
      const push = JSON.parse(e.data);
      stream.state = "up";
      stream.at = performance.now();
      stream.heartbeat = push.heartbeat_s || stream.heartbeat;
      status.server_time = push.server_time;
      const before = runs[current] && runs[current].phase;
      runs = push.runs;
      // The run started, ended, stalled or crashed: its aggregates are fetched now (the final
      // numbers, the ETA's note).
      if (runs[current] && runs[current].phase !== before) for (const p of PATCHED) stale.add(p);
      updateHeader();
      showFreshness();
      if (!opened) { for (const p of PATCHED) stale.add(p); forgetHeadlines(); }
      opened = true;
      for (const d of push.deltas) {
        // A delta not applied: the panels whose data changed are fetched, within the usual
        // once a second (a run read from a backlog asks for that on every push).
        if (d.id === (runs[current] && runs[current].id)) { if (!live.apply(d)) { for (const p of PATCHED) stale.add(p); forgetHeadlines(); } }
        // Another run's delta matters only to the comparison, which fetches its aggregates.
        else if (d.refetch && tab === "compare") stale.add("compare");
      }
      patchSummary();
      publish();
      refreshAll();
    });
  }
  // Every second: the ages move on; a stream silent for three heartbeats is down, and a
  // stream down is reopened every three heartbeats (a server back on the same address is
  // found again).
  function tick() {
    const silent = (stream.at === null ? (performance.now() - stream.connectedAt) / 1000 : sincePush()) > 3 * stream.heartbeat;
    if (stream.state === "up" && silent) stream.state = "down";
    if (stream.state === "down" && (performance.now() - stream.connectedAt) / 1000 > 3 * stream.heartbeat &&
        (!source || source.readyState !== EventSource.OPEN || silent)) connect();
    updateHeader();
    showFreshness();
    patchSummary();
    publish();
  }
  async function start() {
    try {
      runs = (await get("runs")).runs;
    } catch (e) { publish(); return; }
    route();
    updateHeader();
    // The panels at once (the first paint), and the event stream.
    refreshAll(true);
    connect();
    if (!ticking) ticking = setInterval(tick, 1000);
  }

  window.addEventListener("hashchange", () => { route(); refreshAll(true); });
  $("run-select").addEventListener("change", (e) => { location.hash = "#/run/" + (parseInt(e.target.value, 10) || 0) + "/" + tab; });
  $("refresh").addEventListener("click", () => refreshAll(true));
  $("last-n").addEventListener("change", () => guarded("steps", drawSteps));
  $("spans-older").addEventListener("click", () => { spanPage++; guarded("system", drawSystem); });
  $("spans-newer").addEventListener("click", () => { spanPage = Math.max(0, spanPage - 1); guarded("system", drawSystem); });
  for (const id of ["scalar-regex", "smoothing", "ignore-outliers", "scalar-axis"]) $(id).addEventListener("input", () => guarded("scalars", scalars.draw));
  $("tensor-select").addEventListener("change", () => guarded("tensors", drawTensor));
  $("tensor-step").addEventListener("change", () => guarded("tensors", drawTensor2d));
  $("stop").addEventListener("click", () => { $("stop-dialog").showModal(); });
  $("stop-cancel").addEventListener("click", () => { $("stop-dialog").close(); });
  $("stop-confirm").addEventListener("click", async () => {
    $("stop-dialog").close();
    const r = runs[current];
    $("stop").disabled = true;
    stopAsked.set(r.id, performance.now());
    const res = await fetch(api("runs/" + r.id + "/stop"), { method: "POST",
      headers: Object.assign({ "content-type": "application/json" }, token ? { "x-smdebug-token": token } : {}),
      body: JSON.stringify({ confirm: true, reason: $("stop-reason").value }) });
    const body = await res.json();
    if (!res.ok) { status.errors.push("stop: " + (body.error || res.statusText)); stopAsked.delete(r.id); }
    updateHeader();
    publish();
  });
  // Charts follow their container's width: the window resized, or a scroll bar come or gone
  // as the page grew (a chart drawn before would stick out of its card).
  const resized = new Set();
  const watch = new ResizeObserver((entries) => {
    for (const e of entries) resized.add(e.target);
    requestAnimationFrame(() => {
      for (const c of charts.values()) {
        if (!resized.has(c.container) || !c.container.clientWidth) continue; // a hidden tab's
        // A wide card (the Scalars tab's) spans its panel; the others share it in columns.
        const width = c.box.classList.contains("wide") ? Math.max(300, c.container.clientWidth - 12) : chartWidth(c.container);
        if (Math.abs(c.plot.width - width) >= 1) c.plot.setSize({ width, height: c.opts.height || 200 });
      }
      resized.clear();
    });
  });
  for (const box of document.querySelectorAll(".charts")) watch.observe(box);
  publish();
  start();
})();
