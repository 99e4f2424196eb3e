// smdebug serve: the Compare tab. A toggle per run (its colour and issue count), a table of
// every run, and for the runs toggled on: step durations overlaid (one series per run, x =
// step), system timelines overlaid (CPU, memory, GPU where present; x = seconds since each
// run's start) and a rules matrix (rule × run, the status in its colour, the firing rule's
// evidence on hover). The selection is in the URL: #/run/<id>/compare?runs=0,2. The charts
// are app.js's (uPlot through env.chart).
"use strict";
(function () {
  const { el, clear, fmt, sig, rateText, evidenceText, CATEGORICAL, naturalCompare } = window.SMD;

  // The system panels compared: [key, title, does a timeline belong to it].
  const SYSTEM = [
    ["cpu", "CPU utilization (%)", (s) => s.type === "cpu" && s.name === "total" && s.dimension === "CPUUtilization"],
    ["memory", "Memory used (%)", (s) => s.type === "memory" && s.name === "MemoryUsedPercent"],
    ["gpu", "GPU utilization (%)", (s) => s.type === "gpu" && s.dimension === "GPUUtilization"],
  ];

  const CELL = { NoData: "not applicable", NoIssuesFound: "no issues", InProgress: "checking", Error: "error" };

  window.SMD.makeCompare = function (env) {
    // The runs toggled on, from the URL's `runs=` (every run when it says none).
    function selected() {
      const q = /\?(.*)$/.exec(location.hash);
      const v = q ? new URLSearchParams(q[1]).get("runs") : null;
      const all = env.runs().map((r) => r.id);
      if (v === null) return all;
      return v.split(",").filter((x) => x !== "").map(Number).filter((id) => all.includes(id));
    }
    function select(ids) {
      location.hash = "#/run/" + env.current() + "/compare?runs=" + ids.join(",");
    }

    function drawToggles(on) {
      const box = document.getElementById("compare-toggles");
      clear(box);
      box.append("Runs: ");
      env.runs().forEach((r) => {
        const input = el("input", { type: "checkbox", "data-run": String(r.id) });
        input.checked = on.includes(r.id);
        input.addEventListener("change", () => {
          const now = selected().filter((id) => id !== r.id);
          if (input.checked) now.push(r.id);
          select(env.runs().map((x) => x.id).filter((id) => now.includes(id)));
        });
        const sw = el("span", { className: "sw" });
        sw.style.background = env.runColour(r.id);
        const issues = r.issues === null ? "no rule statuses" : r.issues + (r.issues === 1 ? " issue" : " issues");
        box.append(el("label", { className: "run-toggle" + (r.issues ? " found" : ""), "data-run": String(r.id) }, input, " ", sw, " " + r.name + " · " + issues), " ");
      });
    }

    function drawTable(all) {
      const box = document.getElementById("compare-table");
      clear(box);
      const table = el("table", { className: "compare" }, el("tr", null, ...["run", "state", "last step", "steps/s", "issues", "rules that found issues", "not applicable", "last loss", "last accuracy", "CPU p50 %"].map((h) => el("th", { text: h }))));
      all.forEach((o, i) => {
        // Distinct issues: ProfilerReport is not counted beside the rules it sums up.
        const firing = o.rules.filter((x) => x.status === "IssuesFound" && !x.sums_up).map((x) => x.name);
        const cpu = o.nodes.flatMap((n) => n.rows).find((row) => row.metric === "CPU utilization");
        table.append(el("tr", { "data-run": String(env.runs()[i].id) }, el("td", { text: o.name }), el("td", { className: "name", text: env.runState(env.runs()[i])[0], title: o.health.sentence + (o.health.details ? "\n" + o.health.details : "") }),
          el("td", { text: o.last_step === null ? "–" : o.last_step }), el("td", { text: rateText(o.progress.step_rate) }),
          el("td", { text: o.rules_written ? o.issues : "–" }), el("td", { className: "name", text: firing.join(", "), title: firing.join(", ") }),
          el("td", { text: o.rules.filter((x) => x.status === "NoData").length }),
          el("td", { text: o.loss ? sig(o.loss.last_value) : "–" }), el("td", { text: o.accuracy ? sig(o.accuracy.last_value) : "–" }),
          el("td", { text: cpu ? fmt(cpu.p50, 1) : "–" })));
      });
      box.append(table);
    }

    // Lines of several runs on one chart: `lines` [{label, color, xs, ys}], drawn over the
    // union of their x values (each line across the others' points).
    function overlay(box, key, title, lines, xLabel, extra) {
      const runs = Array.from(new Set(lines.map((l) => l.run))).join(",");
      const old = box.querySelector('[data-chart="' + key + '"]');
      // Other runs toggled on: the chart is drawn anew (its series' labels and colours).
      if (!lines.length || (old && old.dataset.runs !== runs)) env.dropCharts(box, (k) => k === key);
      if (!lines.length) return 0;
      const xs = Array.from(new Set(lines.flatMap((l) => l.xs))).sort((a, b) => a - b);
      const index = new Map(xs.map((x, i) => [x, i]));
      const ys = lines.map((l) => { const y = new Array(xs.length).fill(null); l.xs.forEach((x, i) => { y[index.get(x)] = l.ys[i]; }); return y; });
      env.chart(box, key, title, [xs, ...ys], lines.map((l) => ({ label: l.label, color: l.color, dash: l.dash, spanGaps: true })), Object.assign({ xLabel }, extra || {}));
      const node = box.querySelector('[data-chart="' + key + '"]');
      node.dataset.series = String(lines.length);
      node.dataset.runs = runs;
      return lines.length;
    }

    function drawCharts(on, steps, systems) {
      const box = document.getElementById("compare-charts");
      const runs = env.runs();
      const shown = runs.filter((r) => on.includes(r.id));
      // Step durations: per run its mode and worker with the most steps (TRAIN first).
      const stepLines = [];
      shown.forEach((r, k) => {
        const list = (steps[k] || { series: [] }).series;
        const best = list.slice().sort((a, b) => (b.mode === "TRAIN") - (a.mode === "TRAIN") || b.count - a.count)[0];
        if (!best) return;
        const xs = [], ys = [];
        best.step.forEach((s, j) => { if (s !== null && best.data.v[j] !== null) { xs.push(s); ys.push(best.data.v[j]); } });
        stepLines.push({ run: r.id, label: r.name + " " + best.mode, color: env.runColour(r.id), xs, ys });
      });
      const counts = { steps: overlay(box, "compare:steps", "Step duration by step of its mode", stepLines, "step",
        { yFormat: window.SMD.dur, yRange: (min, max) => [0, max > 0 ? max * 1.05 : 1] }) };
      // System timelines: x = seconds since the run's start. A run's several lines (its GPUs)
      // each in a colour of their own when it is the only run on the chart; with several runs
      // on it, each run in its colour and its lines told apart by their dashes.
      const DASHES = [[], [6, 3], [2, 3], [8, 3, 2, 3], [12, 4], [3, 6], [6, 2, 2, 2, 2, 2], [1, 2]];
      for (const [key, title, belongs] of SYSTEM) {
        const lines = [];
        const of = shown.map((r, k) => (systems[k] || { series: [] }).series.filter(belongs)
          .sort((a, b) => naturalCompare(a.node, b.node) || naturalCompare(a.name, b.name)));
        const runsOn = of.filter((m) => m.length).length;
        shown.forEach((r, k) => {
          const start = r.start;
          const matching = of[k];
          const nodes = new Set(matching.map((s) => s.node)).size;
          const several = matching.length > 1;
          matching.forEach((s, j) => {
            const xs = [], ys = [];
            s.data.t.forEach((t, n) => { if (t !== null && start !== null) { xs.push(Math.round((t - start) * 10) / 10); ys.push(s.data.v[n]); } });
            lines.push({ run: r.id, label: r.name + (several ? " " + (nodes > 1 ? s.node + " " : "") + s.name : ""),
              color: several && runsOn === 1 ? CATEGORICAL[j % CATEGORICAL.length] : env.runColour(r.id),
              dash: several && runsOn > 1 ? DASHES[j % DASHES.length] : undefined, xs, ys });
          });
        });
        counts[key] = overlay(box, "compare:" + key, title + " over seconds since each run's start", lines, "s since start",
          { yRange: (min, max) => [0, Math.max(100, Math.ceil((max || 0) / 10) * 10)] });
      }
      env.status.compare = { runs: on, series: counts };
    }

    function drawMatrix(on, all) {
      const box = document.getElementById("compare-rules");
      if (window.SMD.selectionIn(box)) return;
      clear(box);
      const runs = env.runs().map((r, i) => [r, i]).filter(([r]) => on.includes(r.id));
      const names = Array.from(new Set(runs.flatMap(([, i]) => all[i].rules.map((x) => x.name)))).sort();
      if (!names.length) { box.append(el("p", { className: "missing", text: "No rule statuses in the runs compared." })); return; }
      const table = el("table", { className: "rules-matrix" }, el("tr", null, el("th", { text: "rule" }), ...runs.map(([r]) => el("th", { text: r.name }))));
      for (const name of names) {
        const row = el("tr", { "data-rule": name }, el("td", { className: "name", text: name }));
        for (const [r, i] of runs) {
          const rule = all[i].rules.find((x) => x.name === name);
          const status = rule ? rule.status : "absent";
          const text = !rule ? "–" : status === "IssuesFound" ? "issues (" + rule.triggered + ")" : CELL[status] || status;
          const hover = !rule ? "not run on " + r.name : [rule.message].concat(rule.evidence.slice(0, 5).map((e) =>
            "at step " + e.step + ": " + evidenceText(e))).filter((x) => x).join("\n");
          row.append(el("td", { className: "cell " + status, "data-run": String(r.id), "data-status": status, title: hover, text }));
        }
        table.append(row);
      }
      box.append(table);
    }

    async function draw() {
      const runs = env.runs();
      const on = selected();
      drawToggles(on);
      const q = env.pointsQuery();
      const shown = runs.filter((r) => on.includes(r.id));
      const [all, steps, systems] = await Promise.all([
        Promise.all(runs.map((r) => env.get("runs/" + r.id + "/overview"))),
        Promise.all(shown.map((r) => env.get("runs/" + r.id + "/steps?last=1&" + q))),
        Promise.all(shown.map((r) => env.get("runs/" + r.id + "/system?" + q))),
      ]);
      if (!window.SMD.selectionIn(document.getElementById("compare-table"))) drawTable(all);
      drawCharts(on, steps, systems);
      drawMatrix(on, all);
      env.status.panels.compare = true;
    }
    return { draw, selected };
  };
})();
