// smdebug serve: the Scalars panel. One card per scalar name, grouped by the name's prefix (before
// its first "/" or "."), each group collapsible, pinned cards first; in a card one line per run
// and mode, each drawn along its own steps (TRAIN and EVAL do not break each other into dashes),
// one colour per run (its place in the run list, as everywhere in the page), the mode by its
// dash: the smoothed line (TensorBoard's debiased exponential moving average, computed by the
// server over every value, then downsampled) over the faint raw line (each bucket's lowest and
// highest value). The y range leaves outliers out unless told not to; each card has its own log
// scale, can be widened to the panel's width and downloads every value of its scalar (read
// from the run's files by the server, not the points drawn). Step, relative and wall-time x
// axes, regex filter, run toggles, a crosshair tooltip.
"use strict";
(function () {
  const { el, clear, sig, dur, lastText, download, csvField, exactName, stepWindow } = window.SMD;

  // The x axes: a point's step, its wall time less the run's first (relative), or its wall time.
  const AXES = {
    step: { label: "step", x: (m, j) => m.steps[j] },
    relative: { label: "relative", x: (m, j, origin) => (m.wall_times[j] === null || origin === null ? null : m.wall_times[j] - origin),
                opts: { xFormat: dur, xTicks: dur } },
    wall: { label: "wall time", x: (m, j) => m.wall_times[j],
            opts: { wallAxis: true, xFormat: (t) => new Date(t * 1000).toLocaleString() } },
  };
  // A mode's dash (a run's lines share its colour): TRAIN solid.
  const DASH = { EVAL: [6, 4], PREDICT: [2, 3], GLOBAL: [10, 3, 2, 3] };

  const weight = (w) => String(Number(w.toFixed(3))); // 0.6, 0.99, 0.999

  function faint(hex) { // "#1f77b4" -> the same colour, a quarter opaque
    const n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + ",0.25)";
  }

  // A scalar's group: its name's prefix before the first "/" or "." ("" for none).
  const groupOf = (name) => { const m = /^([^/.]+)[/.]/.exec(name); return m ? m[1] : ""; };

  // The y extent that leaves outliers out: the values within twice the width of their 5th to
  // 95th percentile band beyond it (TensorBoard's "ignore outliers" takes the band itself,
  // which cuts the start of every falling loss); `null` when none is left out. On a log axis
  // the band is taken over the logarithms.
  function robustExtent(ys, log) {
    const v = [];
    for (const y of ys) for (const x of y) if (typeof x === "number" && Number.isFinite(x) && (!log || x > 0)) v.push(log ? Math.log10(x) : x);
    if (v.length < 10) return null;
    v.sort((a, b) => a - b);
    const q = (p) => { const i = (v.length - 1) * p, lo = Math.floor(i); return v[lo] + (v[Math.ceil(i)] - v[lo]) * (i - lo); };
    const q5 = q(0.05), q95 = q(0.95), w = q95 - q5;
    const inside = v.filter((x) => x >= q5 - 2 * w && x <= q95 + 2 * w);
    if (inside.length === v.length) return null;
    const lo = inside[0], hi = inside[inside.length - 1];
    return log ? [10 ** lo, 10 ** hi] : [lo, hi];
  }

  // What the person chose, kept in the browser across reloads: pinned cards (in pin order),
  // collapsed groups, cards on a log scale and widened cards, by scalar name.
  const STORE = "smdebug.scalars";
  function loadPrefs() {
    let kept = {};
    try { kept = JSON.parse(localStorage.getItem(STORE) || "{}") || {}; } catch (e) { kept = {}; }
    const list = (k) => (Array.isArray(kept[k]) ? kept[k].filter((x) => typeof x === "string") : []);
    return { pinned: list("pinned"), collapsed: list("collapsed"), log: list("log"), wide: list("wide") };
  }

  window.SMD.makeScalars = function (env) {
    const hiddenRuns = new Set();
    const prefs = loadPrefs();
    const has = (list, x) => prefs[list].includes(x);
    function flip(list, x) {
      prefs[list] = has(list, x) ? prefs[list].filter((y) => y !== x) : prefs[list].concat([x]);
      try { localStorage.setItem(STORE, JSON.stringify(prefs)); } catch (e) { /* private mode: this page only */ }
      env.redraw();
    }
    // Zoomed charts: scalar name -> [first, last] step of the window the person dragged across.
    // Each is fetched from the server (`from`/`to`): every value of a window narrow enough, as
    // the run's files hold them, not the whole run's downsampled points cut to the window.
    const zooms = new Map();
    let shownNames = []; // [{run, names}] of the latest draw: what the downloads read again
    let drawing = 0; // the latest draw: an older one's answers (the slider moved on) are dropped

    function drawToggles() {
      const box = document.getElementById("run-toggles");
      const runs = env.runs();
      if (runs.length < 2) { clear(box); return; }
      if (box.querySelectorAll("input").length === runs.length) return;
      clear(box);
      box.append("Runs: ");
      runs.forEach((r) => {
        const input = el("input", { type: "checkbox", "data-run": String(r.id) });
        input.checked = !hiddenRuns.has(r.id);
        input.addEventListener("change", () => {
          if (input.checked) hiddenRuns.delete(r.id); else hiddenRuns.add(r.id);
          env.redraw();
        });
        const sw = el("span", { className: "sw" });
        sw.style.background = env.runColour(r.id);
        box.append(el("label", { className: "run-toggle" }, input, " ", sw, " " + r.name));
      });
    }

    // The section of group `id` ("pinned", or "group:<prefix>"), made when missing (appended:
    // `draw` puts the sections in order), its heading saying how many cards it holds.
    function section(box, id, label, count, collapsible) {
      let sec = box.querySelector(":scope > section[data-group=\"" + CSS.escape(id) + "\"]");
      if (!sec) {
        const head = el("h3", { className: "group-head" });
        sec = el("section", { className: "scalar-group", "data-group": id }, head, el("div", { className: "charts" }));
        if (collapsible) {
          head.tabIndex = 0;
          head.setAttribute("role", "button");
          head.addEventListener("click", () => flip("collapsed", id));
          head.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); flip("collapsed", id); } });
        }
      }
      const collapsed = collapsible && has("collapsed", id);
      const head = sec.querySelector("h3");
      head.textContent = (collapsible ? (collapsed ? "▸ " : "▾ ") : "") + label + " (" + count + ")";
      head.title = collapsible ? (collapsed ? "show" : "hide") + " this group's charts" : "";
      if (collapsible) head.setAttribute("aria-expanded", String(!collapsed));
      sec.classList.toggle("collapsed", collapsed);
      if (!sec.parentNode) box.append(sec);
      return { sec, cards: sec.querySelector(".charts"), collapsed };
    }

    // Puts `nodes` (children of `parent`) last in `parent` in this order, unless they are so.
    function inOrder(parent, nodes) {
      const now = Array.from(parent.children).filter((c) => nodes.includes(c));
      if (now.length === nodes.length && now.every((c, i) => c === nodes[i])) return;
      for (const n of nodes) parent.append(n);
    }

    // A card's buttons: pin, log scale, wide, every value as CSV.
    function tools(box, name) {
      if (!box || box.querySelector(".card-tools")) return;
      const button = (act, text, on, title, f) => {
        const b = el("button", { type: "button", "data-act": act, title, text, className: on ? "on" : "" });
        b.setAttribute("aria-pressed", String(on));
        b.addEventListener("click", f);
        return b;
      };
      box.prepend(el("div", { className: "card-tools" },
        button("pin", has("pinned", name) ? "unpin" : "pin", has("pinned", name), "keep this chart at the top", () => flip("pinned", name)),
        button("log", "log", has("log", name), "this chart's y axis on a log scale (values ≤ 0 left out)", () => flip("log", name)),
        button("wide", has("wide", name) ? "narrow" : "wide", has("wide", name), "this chart across the panel's width", () => flip("wide", name)),
        button("csv", "CSV", false, "every value of " + name + " at every step, as the run's files hold it (not the points drawn)",
          () => saveValues([name], name.replace(/[^\w.-]+/g, "_"), "csv"))));
    }

    async function draw() {
      const regex = document.getElementById("scalar-regex").value;
      const w = parseFloat(document.getElementById("smoothing").value) || 0;
      const robust = document.getElementById("ignore-outliers").checked;
      const axisName = document.getElementById("scalar-axis").value;
      const axis = AXES[axisName] || AXES.step;
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
      shownNames = shownRuns.map((r, i) => ({ run: r, names: results[i].scalars.map((s) => s.name) }));
      const byName = new Map();
      results.forEach((res, ri) => {
        for (const s of res.scalars) {
          if (!byName.has(s.name)) byName.set(s.name, []);
          for (const m of s.modes) byName.get(s.name).push({ run: shownRuns[ri], mode: m, origin: res.first_wall_time, smoothing: res.smoothing });
        }
      });
      const keyOf = (name) => "scalar:" + name + (has("log", name) ? ":log" : "") + (axisName === "step" ? "" : ":" + axisName) + (has("wide", name) ? ":wide" : "");
      const ci = shownRuns.findIndex((r) => r.id === env.current());
      const shown = results[ci] || { scalars: [], series_total: 0 };
      document.getElementById("scalar-more").textContent = shown.series_total > shown.scalars.length ?
        "Showing " + shown.scalars.length + " of " + shown.series_total + " scalars: narrow the filter to see the others" : "";
      const missing = box.querySelector(":scope > p.missing");
      if (!byName.size) { if (!missing) box.prepend(el("p", { className: "missing", text: "No scalars" + (regex ? " match" : " yet") + "." })); }
      else if (missing) missing.remove();

      // The layout: pinned cards first (in pin order), then a group per prefix (names without
      // one first), each card in one place only.
      const pinned = prefs.pinned.filter((n) => byName.has(n));
      const groups = new Map();
      for (const name of byName.keys()) {
        if (pinned.includes(name)) continue;
        const g = groupOf(name);
        if (!groups.has(g)) groups.set(g, []);
        groups.get(g).push(name);
      }
      const order = Array.from(groups.keys()).sort((a, b) => (a === "" ? -1 : b === "" ? 1 : a.localeCompare(b)));
      const layout = [];
      if (pinned.length) layout.push(["pinned", "Pinned", pinned, false]);
      for (const g of order) layout.push(["group:" + g, g === "" ? "Without a prefix" : g, groups.get(g), true]);
      const drawn = new Set(); // chart keys drawn now
      const keep = new Set(layout.map((l) => l[0]));
      for (const sec of box.querySelectorAll(":scope > section.scalar-group")) {
        if (!keep.has(sec.dataset.group)) { env.dropCharts(sec.querySelector(".charts")); sec.remove(); }
      }
      for (const [id, label, names, collapsible] of layout) {
        const { cards, collapsed } = section(box, id, label, names.length, collapsible);
        if (!collapsed) for (const name of names) { drawCard(cards, name, byName.get(name), { w, robust, axisName, axis, shownRuns, key: keyOf(name) }); drawn.add(keyOf(name)); }
        env.dropCharts(cards, (k) => !drawn.has(k));
        // Cards in the order of their names (a chart drawn anew was appended); moved only when
        // out of order (a move would lose a selection in them).
        inOrder(cards, names.map((n) => cards.querySelector(":scope > [data-chart=\"" + CSS.escape(keyOf(n)) + "\"]")).filter((c) => c));
      }
      inOrder(box, layout.map(([id]) => box.querySelector(":scope > section[data-group=\"" + CSS.escape(id) + "\"]")));
      env.status.panels.scalars = true;
      return results;
    }

    function drawCard(cards, name, list, { w, robust, axisName, axis, shownRuns, key }) {
      const log = has("log", name), wide = has("wide", name);
      // The union of every line's x values (steps or times) is the x axis; each line has
      // values at its own only and is drawn across the others (spanGaps), so it is never cut.
      for (const l of list) {
        l.x = l.mode.steps.map((_, j) => axis.x(l.mode, j, l.origin));
        l.sx = l.mode.smoothed ? l.mode.smoothed.steps.map((_, j) => axis.x(l.mode.smoothed, j, l.origin)) : [];
      }
      const xs = Array.from(new Set(list.flatMap((l) => l.x.concat(l.sx).filter((x) => x !== null)))).sort((a, b) => a - b);
      const index = new Map(xs.map((x, i) => [x, i]));
      const ys = [], series = [];
      const value = (u, v) => (v === null || v === undefined ? "–" : sig(v));
      for (const l of list) {
        const colour = env.runColour(l.run.id);
        const dash = DASH[l.mode.mode];
        const label = (shownRuns.length > 1 ? l.run.name + " " : "") + l.mode.mode;
        const keep = (v) => (v === null || (log && v <= 0) ? null : v);
        const line = (x, values) => {
          const y = new Array(xs.length).fill(null);
          x.forEach((at, j) => { if (at !== null) y[index.get(at)] = keep(values[j]); });
          return y;
        };
        const sparse = l.mode.steps.length < 40;
        const sm = l.mode.smoothed;
        // With the cursor off the chart the legend gives the line's last value as the title
        // does (TensorBoard's "Value"), NaN where it was NaN, not the smoothed line's.
        const last = lastText(l.mode.steps, l.mode.values, l.mode.non_finite);
        if (sm) {
          ys.push(line(l.x, l.mode.values), line(l.sx, sm.values));
          series.push({ label: label + " raw", color: faint(colour), spanGaps: true, points: sparse, width: 1, dash, value, legend: false },
                      { label, color: colour, spanGaps: true, points: sparse, width: 2, dash, value, last });
        } else {
          ys.push(line(l.x, l.mode.values));
          series.push({ label, color: colour, spanGaps: true, points: sparse, width: 2, dash, value, last });
        }
      }
      const zoomed = zooms.get(name);
      // One run's last values in the title (several runs' would not fit: the legend has them).
      const lastValues = shownRuns.length > 1 ? "" : " · last " + list.map((l) => l.mode.mode + " " + lastText(l.mode.steps, l.mode.values, l.mode.non_finite)).join(", ");
      // Steps where a value was NaN or ±Inf are marked (on the step axis).
      const marks = axisName === "step" ? window.SMD.mergeMarks(list.flatMap((l) => l.mode.non_finite)) : [];
      const yRange = robust ? robustExtent(ys, log) : null;
      const title = name + (zoomed ? " · steps " + zoomed[0] + "–" + zoomed[1] + " (double-click: all steps)" : lastValues) +
        (marks.length ? " · " + window.SMD.nonFiniteText(marks) : "") + (yRange ? " · outliers outside the y range" : "");
      const plot = env.chart(cards, key, title, [xs, ...ys], series,
        Object.assign({ log, xLabel: axis.label, nonFinite: marks, onZoom: (range) => zoomTo(name, range, list, axisName === "step"),
                        xRange: zoomed && axisName === "step" ? zoomed : null, windowed: !!zoomed, yRange, tipFormat: sig, liveLegend: true,
                        width: wide ? Math.max(300, cards.clientWidth - 12) : undefined }, axis.opts || {}));
      const card = plot.root.parentElement;
      card.classList.toggle("wide", wide);
      tools(card, name);
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

    // A regex matching the names `names` alone.
    const anyOf = (names) => "^(" + names.map((n) => exactName(n).slice(1, -1)).join("|") + ")$";

    // Every value of the scalars `names` of run `run` at the steps `from..=to` (all from `from`
    // when `to` is null), read again from the run's files by the server (`/scalars/values`):
    // each step's value as written, not the points the charts hold. An answer would hold more
    // than the server gives at once: the names are asked for in halves, one name's steps in
    // halves. Answers in step order of each name.
    async function valuesOf(run, names, from, to) {
      const q = "runs/" + run.id + "/scalars/values?regex=" + encodeURIComponent(anyOf(names)) +
        (from === null ? "" : "&from=" + from) + (to === null ? "" : "&to=" + to);
      try { return [await env.get(q)]; } catch (e) {
        if (!/in one answer/.test(e.message)) throw e;
        if (names.length > 1) {
          const h = Math.ceil(names.length / 2);
          return (await valuesOf(run, names.slice(0, h), from, to)).concat(await valuesOf(run, names.slice(h), from, to));
        }
        const lo = from === null ? 0 : from, hi = to === null ? Math.max(lo, run.last_step || 0) : to;
        if (lo >= hi) throw e;
        const mid = Math.floor((lo + hi) / 2);
        return (await valuesOf(run, names, lo, mid)).concat(await valuesOf(run, names, mid + 1, to));
      }
    }

    // Every value of the scalars `names` (those of the runs shown that have them) saved as CSV
    // (run, scalar, mode, step, value, wall_time) or JSON, as `file`.
    async function saveValues(names, file, kind) {
      const note = document.getElementById("scalar-error");
      const parts = [];
      try {
        for (const { run, names: own } of shownNames) {
          const mine = names.filter((n) => own.includes(n));
          if (!mine.length) continue; // a run without them
          note.textContent = "reading every value of " + run.name + "…";
          // The answers' scalars merged: one per name, each mode's values in step order.
          const byName = new Map();
          for (const got of await valuesOf(run, mine, null, null)) {
            for (const sc of got.scalars) {
              if (!byName.has(sc.name)) byName.set(sc.name, new Map());
              const modes = byName.get(sc.name);
              for (const m of sc.modes) {
                const into = modes.get(m.mode);
                if (!into) modes.set(m.mode, { mode: m.mode, steps: m.steps.slice(), values: m.values.slice(), wall_times: m.wall_times.slice() });
                else m.steps.forEach((step, i) => { into.steps.push(step); into.values.push(m.values[i]); into.wall_times.push(m.wall_times[i]); });
              }
            }
          }
          const scalars = Array.from(byName.keys()).sort().map((name) => ({ name, modes: Array.from(byName.get(name).values()).sort((a, b) => a.mode.localeCompare(b.mode)) }));
          parts.push({ run: run.name, scalars });
        }
        note.textContent = "";
      } catch (e) { note.textContent = "download: " + e.message; return; }
      if (kind === "json") {
        download(file + ".json", "application/json", JSON.stringify(parts, null, 1));
        return;
      }
      const rows = [["run", "scalar", "mode", "step", "value", "wall_time"].join(",")];
      for (const { run, scalars } of parts) {
        for (const sc of scalars) {
          for (const m of sc.modes) {
            m.steps.forEach((step, i) => rows.push([run, sc.name, m.mode, step, m.values[i], m.wall_times[i]].map(csvField).join(",")));
          }
        }
      }
      download(file + ".csv", "text/csv", rows.join("\n") + "\n");
    }
    const every = (kind) => () => saveValues(Array.from(new Set(shownNames.flatMap((s) => s.names))), "scalars", kind);
    document.getElementById("download-csv").addEventListener("click", every("csv"));
    document.getElementById("download-json").addEventListener("click", every("json"));
    return { draw };
  };
})();
