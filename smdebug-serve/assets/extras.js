// smdebug serve: the Tensors panel (reductions, distribution, histograms over steps, one step as a
// 2-D grid with its colour scale) and the Kineto and Code-profile panels (tables of a
// PyTorch profiler trace's kernels and operators; the sampled CPU stacks of code-profiling
// windows).
"use strict";
(function () {
  const { el, clear, fmt, sig, axisLabel, dur, heat, colourScale } = window.SMD;
  window.SMD.makeExtras = function (env) {
  // ---- tensors ------------------------------------------------------------------------------
  // Until the person picks a tensor, the panel opens on the first that is not a scalar (as
  // TensorBoard's distributions and histograms list only those): a scalar's distribution is its
  // one value, and it is the Scalars tab's. `scalarNames`: the names found to be scalars.
  let picked = false;
  const scalarNames = new Set();
  document.getElementById("tensor-select").addEventListener("change", () => { picked = true; });
  async function loadTensorNames() {
    const r = env.runs()[env.current()];
    const res = await env.get("runs/" + r.id + "/scalars?limit=1&regex=" + encodeURIComponent("^$"));
    const names = res.tensors;
    const sel = document.getElementById("tensor-select");
    if (sel.options.length !== names.length) {
      const keep = sel.value;
      clear(sel);
      names.forEach((n) => sel.append(el("option", { value: n, text: n })));
      if (keep && names.includes(keep)) sel.value = keep;
    }
  }
  async function drawTensor() {
    await loadTensorNames();
    const name = document.getElementById("tensor-select").value;
    const box = document.getElementById("tensor-charts");
    if (!name) { env.status.panels.tensors = true; return; }
    const r = env.runs()[env.current()];
    const t = await env.get("runs/" + r.id + "/tensor?name=" + encodeURIComponent(name) + "&steps=100");
    if (t.shape.length === 0 && !picked) {
      scalarNames.add(name);
      const sel = document.getElementById("tensor-select");
      const next = Array.from(sel.options).map((o) => o.value).find((n) => !scalarNames.has(n));
      if (next) { sel.value = next; return drawTensor(); }
    }
    const xs = t.steps.map((s) => s.step);
    env.chart(box, "tensor:reductions", "Reductions of " + name, [xs, t.steps.map((s) => s.mean), t.steps.map((s) => s.std), t.steps.map((s) => s.l2), t.steps.map((s) => s.min), t.steps.map((s) => s.max)],
      [{ label: "mean" }, { label: "std" }, { label: "L2 norm" }, { label: "min" }, { label: "max" }], {});
    // TensorBoard's bands: the percentiles at a normal's ±0.5σ, ±1σ and ±1.5σ (p30.85, p15.87,
    // p6.68 and their mirrors) around the median, and min to max; named so in the legend.
    const SIGMA = { 6.68: "−1.5σ", 15.87: "−1σ", 30.85: "−0.5σ", 69.15: "+0.5σ", 84.13: "+1σ", 93.32: "+1.5σ" };
    const bandName = (p) => (p === 0 ? "min" : p === 100 ? "max" : p === 50 ? "median" : "p" + p + (SIGMA[p] ? " (" + SIGMA[p] + ")" : ""));
    const bandSeries = t.band_percentiles.map((p) => ({ label: bandName(p), color: "rgba(31,119,180," + (p === 50 ? 1 : 0.35) + ")" }));
    const bands = [[1, 9], [2, 8], [3, 7], [4, 6]].map(([a, b], i) => ({ series: [b, a], fill: "rgba(31,119,180," + (0.08 + i * 0.08) + ")" }));
    env.chart(box, "tensor:distribution", "Distribution of " + name + " over steps", [xs, ...t.band_percentiles.map((_, i) => t.steps.map((s) => s.bands[i]))], bandSeries, { bands });
    // Histograms over steps (TensorBoard's offset view): not for a scalar, one value a step.
    if (t.shape.length === 0) {
      document.getElementById("tensor-hist-info").textContent = name + " is a scalar: one value a step, no histogram.";
      document.getElementById("tensor-hist").hidden = true;
    } else await drawHistograms(name, r);
    const stepSel = document.getElementById("tensor-step");
    const keep = stepSel.value;
    clear(stepSel);
    xs.forEach((s) => stepSel.append(el("option", { value: String(s), text: String(s) })));
    if (keep && xs.map(String).includes(keep)) stepSel.value = keep; else if (xs.length) stepSel.value = String(xs[xs.length - 1]);
    // A scalar (0-d) has no 2-D view: its value over steps is the chart above.
    const scalar = t.shape.length === 0;
    document.getElementById("tensor2d").hidden = scalar;
    document.getElementById("tensor2d-scale").hidden = scalar;
    if (scalar) document.getElementById("tensor2d-info").textContent = name + " is a scalar: its values are the charts above (no 2-D view).";
    else await drawTensor2d();
    env.status.panels.tensors = true;
  }
  // The tensor's values at up to 40 steps, each step's counted into the same 30 bins by the
  // server (`/tensor_histograms`), drawn as ridges: the first step at the top, the last in front
  // at the bottom, each ridge's height its count over the highest count of any bin and step.
  async function drawHistograms(name, r) {
    const h = await env.get("runs/" + r.id + "/tensor_histograms?name=" + encodeURIComponent(name) + "&steps=40&bins=30");
    const canvas = document.getElementById("tensor-hist");
    const info = document.getElementById("tensor-hist-info");
    canvas.hidden = !h.edges || !h.steps.length;
    if (canvas.hidden) { info.textContent = "No finite value of " + name + " at the steps read."; return; }
    const edges = h.edges, bins = edges.length - 1, rows = h.steps;
    const peak = Math.max(1, ...rows.flatMap((s) => s.counts));
    const nonFinite = rows.reduce((a, s) => a + s.non_finite, 0);
    info.textContent = name + ": " + rows.length + " of its " + h.total_steps + " steps, each counted into " + bins + " bins from " +
      sig(edges[0]) + " to " + sig(edges[bins]) + ", the first step at the top" + (nonFinite ? " · " + nonFinite + " NaN or ±Inf values in no bin" : "");
    const dpr = window.devicePixelRatio || 1;
    const cssW = Math.max(400, Math.min(960, canvas.parentElement.clientWidth - 40));
    const left = 70, right = 16, top = 8, ridge = 60, gap = Math.max(4, Math.min(14, 360 / rows.length)), axis = 24;
    const cssH = top + ridge + gap * (rows.length - 1) + axis;
    canvas.style.width = cssW + "px"; canvas.style.height = cssH + "px";
    canvas.width = Math.round(cssW * dpr); canvas.height = Math.round(cssH * dpr);
    canvas.dataset.steps = String(rows.length); canvas.dataset.bins = String(bins);
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, cssH);
    const plotW = cssW - left - right;
    const x = (v) => left + ((v - edges[0]) / (edges[bins] - edges[0])) * plotW;
    ctx.font = "11px sans-serif";
    const labelEvery = Math.max(1, Math.ceil(12 / gap));
    rows.forEach((s, i) => {
      const base = top + ridge + i * gap;
      const t = rows.length > 1 ? i / (rows.length - 1) : 1; // later steps darker
      ctx.beginPath();
      ctx.moveTo(x(edges[0]), base);
      s.counts.forEach((c, b) => ctx.lineTo(x((edges[b] + edges[b + 1]) / 2), base - (c / peak) * ridge));
      ctx.lineTo(x(edges[bins]), base);
      ctx.closePath();
      ctx.fillStyle = "rgba(" + Math.round(150 - 120 * t) + "," + Math.round(180 - 60 * t) + "," + Math.round(220 - 40 * t) + ",0.85)";
      ctx.fill();
      ctx.strokeStyle = "#ffffff"; ctx.lineWidth = 1; ctx.stroke();
      if ((rows.length - 1 - i) % labelEvery === 0) { ctx.fillStyle = "#5b6678"; ctx.fillText("step " + s.step, 4, base); }
    });
    const yAxis = top + ridge + gap * (rows.length - 1) + 4;
    ctx.fillStyle = "#5b6678";
    ctx.fillRect(left, yAxis, plotW, 1);
    for (const f of [0, 0.25, 0.5, 0.75, 1]) {
      const v = edges[0] + f * (edges[bins] - edges[0]);
      const label = axisLabel(v), w = ctx.measureText(label).width;
      ctx.fillRect(x(v), yAxis, 1, 4);
      ctx.fillText(label, Math.min(cssW - w - 2, Math.max(left, x(v) - w / 2)), yAxis + 16);
    }
  }
  async function drawTensor2d() {
    const name = document.getElementById("tensor-select").value;
    const step = document.getElementById("tensor-step").value;
    if (!name || step === "") return;
    const r = env.runs()[env.current()];
    const t = await env.get("runs/" + r.id + "/tensor2d?name=" + encodeURIComponent(name) + "&step=" + step);
    const vals = t.cells.flat().filter((v) => typeof v === "number");
    const lo = vals.length ? Math.min(...vals) : 0, hi = vals.length ? Math.max(...vals) : 0;
    document.getElementById("tensor2d-info").textContent = name + " at step " + t.step + ", shape [" + t.shape.join(", ") + "], " + fmt(lo) + " … " + fmt(hi);
    const canvas = document.getElementById("tensor2d");
    const ctx = canvas.getContext("2d");
    const rows = t.cells.length, cols = rows ? t.cells[0].length : 0;
    canvas.width = 400; canvas.height = rows && cols ? Math.max(20, Math.min(400, 400 * rows / cols)) : 40;
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    const cw = canvas.width / Math.max(1, cols), rh = canvas.height / Math.max(1, rows);
    t.cells.forEach((row, i) => row.forEach((v, j) => {
      ctx.fillStyle = heat(typeof v !== "number" ? null : hi > lo ? ((v - lo) / (hi - lo)) * 100 : 50);
      ctx.fillRect(j * cw, i * rh, Math.ceil(cw), Math.ceil(rh));
    }));
    colourScale(document.getElementById("tensor2d-scale"), lo, hi, "", true);
  }

  async function drawKineto() {
    const k = await env.get("kineto");
    const box = document.getElementById("kineto-tables");
    clear(box);
    if (!k.ranks.length) box.append(el("p", { className: "missing", text: "No Kineto traces: start with `smdebug serve RUN --trace FILE…` (PyTorch profiler traces, .json or .json.gz)." }));
    for (const r of k.ranks) {
      box.append(el("h3", { text: "Rank " + r.rank + " · " + r.file }),
        el("p", { text: "span " + dur(r.span_us / 1e6) + " · GPU busy " + dur(r.gpu_busy_us / 1e6) + " · idle " + dur(r.gpu_idle_us / 1e6) }));
      for (const [title, rows] of [["GPU kernels", r.gpu_kernels], ["CPU operators", r.cpu_operators]]) {
        const table = el("table", null, el("tr", null, ...[title, "count", "total", "share", ""].map((h) => el("th", { text: h }))));
        for (const op of rows) {
          const bar = el("span", { className: "bar" });
          bar.style.width = Math.round(op.share * 200) + "px";
          // A long kernel name on one line, cut with an ellipsis; the whole name on hover.
          table.append(el("tr", null, el("td", { className: "name", text: op.name, title: op.name }), el("td", { text: op.count }), el("td", { text: dur(op.total_us / 1e6) }), el("td", { text: fmt(op.share * 100, 1) + "%" }), el("td", null, bar)));
        }
        box.append(table);
      }
    }
    env.status.panels.kineto = true;
  }

  // Code-profile windows: listed again at most every 10 s (each listing reads the summaries).
  let codeDrawn = { run: null, at: 0 };
  async function drawCode(force) {
    const r = env.runs()[env.current()];
    if (!r) return;
    if (!force && codeDrawn.run === r.id && performance.now() - codeDrawn.at < 10000) return;
    codeDrawn = { run: r.id, at: performance.now() };
    const c = await env.get("runs/" + r.id + "/code");
    const box = document.getElementById("code-windows");
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
        box.append(el("img", { className: "flamegraph", src: env.api(base + "/flamegraph.svg"), alt: "flame graph of " + (w.steps || w.id) }));
        links.append(el("a", { href: env.api(base + "/flamegraph.svg"), target: "_blank", rel: "noopener", text: "open the flame graph" }), " · ");
      }
      if (w.pprof) links.append(el("a", { href: env.api(base + "/profile.pb.gz"), download: w.id + ".pb.gz", text: "download the pprof profile" }));
      box.append(links);
    }
    env.status.panels.code = true;
    env.status.code_windows = c.windows.length;
  }

    return { drawKineto, drawCode, drawTensor, drawTensor2d };
  };
})();
