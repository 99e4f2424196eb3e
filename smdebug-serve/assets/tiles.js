// smdebug serve: the summary's progress tiles, from the overview's `progress` (the job's
// progress files): the step of the planned ones with the ETA and the step rate, and what the
// job's writers dropped. `tile(id, class)` colours a tile (app.js's).
"use strict";
(function () {
  const { fmt, dur, rateText } = window.SMD;
  const $ = (id) => document.getElementById(id);
  // The step and writer-drops tiles: the step of the planned ones with the ETA, and what the
  // job's writers dropped (from its progress files).
  const share = (x) => (x === null ? "" : " (" + (x > 0 && x < 0.001 ? "<0.1" : fmt(100 * x, 1)) + " %)");
  // The step tile's count, from the run list (pushed): the steps done of the planned ones
  // ("5500 of 5500" once all are done, never the last step's number against a count), else
  // the last saved step.
  window.SMD.stepCount = function (r) {
    if (r.planned_steps !== null && r.steps_done !== null) return r.steps_done + " of " + r.planned_steps;
    return r.last_step === null ? "–" : "step " + r.last_step;
  };
  window.SMD.drawProgress = function (o, tile, r) {
    const p = o.progress;
    $("summary-step").textContent = window.SMD.stepCount(r);
    $("summary-step").title = (p.steps_done !== null ? p.steps_done + " steps done (every mode)" : "") +
      (o.last_step !== null ? "; last saved step " + o.last_step : "");
    // A running job's rate is over the last two minutes after the warm-up (every mode's steps,
    // as the plan counts them), an ETA only from a steady one; an ended run's is its average.
    $("summary-rate").textContent = (p.eta_s !== null ? "ETA " + dur(p.eta_s) : p.eta_note) + " · " +
      (p.step_rate !== null ? (p.rate_over_run ? "average " : "") + rateText(p.step_rate) + " steps/s" +
        (p.rate_steady || p.rate_over_run ? "" : ", unsteady") +
        (p.rate_source === "step spans" ? "" : " (" + p.rate_source + ")") : "no step rate yet");
    $("summary-rate").title = p.step_rate === null ? "" : p.rate_over_run ? p.rate_steps + " steps in " + dur(p.rate_window_s) + " after the first five (every mode)" :
      p.rate_steps + " steps in the last " + dur(p.rate_window_s) + ", after the first five (every mode)";
    tile("tile-progress", "unknown");
    const d = p.drops;
    if (!d) {
      $("summary-drops").textContent = "not recorded";
      $("summary-drops-more").textContent = p.drops_note;
      tile("tile-drops", "unknown");
      return;
    }
    $("summary-drops").textContent = d.records_dropped + " records" + share(d.records_share);
    $("summary-drops-more").textContent = "at " + d.steps_with_drops + " steps" + share(d.steps_share) +
      " · " + d.spans_dropped + " spans dropped" + (d.spans_dropped ? share(d.spans_dropped / (d.spans_dropped + d.spans_written)) : "") +
      (d.workers > 1 ? " · " + d.workers + " workers" : "");
    tile("tile-drops", d.records_dropped || d.spans_dropped ? "bad" : "good");
  };
})();
