// smdebug serve: applying the server's pushed deltas to what the page already holds, without a
// fetch. Each push carries, per run, the step spans, system samples and changed rule verdicts
// that are new since the previous push to this page.
//
// Patched from deltas (no fetch):
//   - the rules lists (summary and rules tabs): a changed verdict replaces the rule, whole;
//   - the system timelines: new samples appended (not while zoomed: a window is fetched);
//   - the step-duration charts: new steps appended (not while zoomed).
// Fetched again (app.js's refresh, when their area's counter moved):
//   - when a delta says `refetch`: the page connected or reconnected, the run was reset, or
//     more was new than one push carries;
//   - aggregates a delta cannot update: percentiles (the node table, a series' p50), the step
//     rate, the heatmap, the span list, the histogram and phase stacks, the comparison; these
//     are fetched at most every AGGREGATE_GAP_MS while their live parts are patched (as usual
//     once the run has ended);
//   - a zoomed window, and a patched chart grown past twice its point budget (downsampled
//     again by the server);
//   - scalars (the summary's loss and accuracy charts, the Scalars tab): within a second of new
//     values (app.js's "tensors" area), whole, smoothed and downsampled by the server, so that
//     their newest part is bucketed as the rest.
"use strict";
(function () {
  // The group (and chart title) of a system series: one chart per type and quantity.
  function systemGroup(s) {
    return s.type + " " + (s.type === "cpu" || s.type === "gpu" ? s.dimension : s.name) + " (" + s.unit + ")" +
      (s.type === "network" ? ", all interfaces incl. loopback (this dashboard's traffic too)" : "");
  }
  const systemKey = (s) => s.node + "|" + s.type + "|" + s.name + "|" + s.dimension;
  function stepLabel(s) {
    return s.mode + " · " + s.node + (s.worker !== null && s.worker !== undefined ? " worker " + s.worker : "");
  }

  window.SMD.makeLive = function (env) {
    // Appends rows to a chart's data: `rows` are [x, values by series index] with x beyond the
    // chart's last x (what the chart already holds is never drawn twice). False when the
    // chart must be fetched again instead.
    function append(key, rows, seriesCount) {
      const c = env.charts.get(key);
      if (!c) return false;
      const data = c.plot.data;
      const xs = data[0];
      const last = xs.length ? xs[xs.length - 1] : -Infinity;
      const fresh = rows.filter((r) => r[0] > last).sort((a, b) => a[0] - b[0]);
      if (!fresh.length) return true;
      if (xs.length + fresh.length > 2 * env.budget()) return false;
      const next = data.map((col) => col.slice());
      for (const [x, values] of fresh) {
        next[0].push(x);
        for (let k = 1; k < next.length; k++) next[k].push(k - 1 < seriesCount && values[k - 1] !== undefined ? values[k - 1] : null);
      }
      c.plot.setData(next, true);
      return true;
    }

    // The system timelines: one row per time of each chart, values at their series' index.
    function patchSystem(samples) {
      const byChart = new Map();
      for (const s of samples) {
        const key = "sys:" + systemGroup(s);
        const c = env.charts.get(key);
        if (!c) { if (s.t.length) env.stale("system"); continue; }
        const index = (c.plot.seriesKeys || []).indexOf(systemKey(s));
        if (index < 0) { env.stale("system"); continue; }
        if (!byChart.has(key)) byChart.set(key, { rows: new Map(), n: c.plot.seriesKeys.length });
        const rows = byChart.get(key).rows;
        s.t.forEach((t, i) => {
          if (!rows.has(t)) rows.set(t, []);
          rows.get(t)[index] = s.v[i];
        });
      }
      for (const [key, { rows, n }] of byChart) {
        if (!append(key, Array.from(rows.entries()), n)) { env.stale("system"); continue; }
        env.status.patched.system++;
        const xs = env.charts.get(key).plot.data[0];
        if (key.startsWith("sys:cpu CPUUtilization") && xs.length) env.status.last_point = xs[xs.length - 1];
      }
    }

    function patchSteps(steps) {
      const byChart = new Map();
      for (const s of steps) {
        const key = "steps:" + stepLabel(s);
        if (!env.charts.has(key)) { env.stale("steps"); continue; }
        if (!byChart.has(key)) byChart.set(key, []);
        s.start.forEach((t, i) => byChart.get(key).push([t, [s.duration[i], null]]));
        // The tooltip's step numbers.
        const stepOf = env.charts.get(key).plot.stepOf;
        if (stepOf) s.start.forEach((t, i) => stepOf.set(t, s.step[i]));
      }
      for (const [key, rows] of byChart) {
        if (!append(key, rows, 2)) env.stale("steps");
        else env.status.patched.steps++;
      }
      for (const s of steps) env.status.last_step_time = Math.max(env.status.last_step_time || 0, ...s.start);
    }

    // The overview's rules.
    function patchOverview(o, delta) {
      if (!o) return;
      // The first samples or steps: the node table and the step rate have something to show.
      if ((!o.nodes.length && delta.new_samples.length) || (o.progress.step_rate === null && delta.new_steps.some((s) => s.step.length > 1))) env.stale("overview");
      if (delta.changed_rules.length) {
        for (const r of delta.changed_rules) {
          const i = o.rules.findIndex((x) => x.name === r.name);
          if (i >= 0) o.rules[i] = r; else o.rules.push(r);
        }
        o.rules_written = true;
        env.drawRulesOf(o);
        env.status.patched.rules++;
      }
    }

    // One pushed delta of the shown run: true when it was applied, false when the page must
    // fetch the run's panels again.
    function apply(delta) {
      if (delta.refetch) { env.status.refetches.push(delta.refetch_reason); return false; }
      for (const s of delta.new_steps) env.status.delta_steps += s.step.length;
      env.status.delta_rules += delta.changed_rules.length;
      patchOverview(env.overview(), delta);
      if (env.zoomed()) return true; // a window is fetched with its panels, not patched
      patchSystem(delta.new_samples);
      patchSteps(delta.new_steps);
      return true;
    }

    return { apply };
  };
  window.SMD.systemGroup = systemGroup;
  window.SMD.systemKey = systemKey;
  window.SMD.stepLabel = stepLabel;
})();
