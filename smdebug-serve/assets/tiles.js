// smdebug serve: the summary's progress tiles, from the overview's `progress` (the job's
// progress files): the step of the planned ones with the ETA and the step rate, and what the
// job's writers dropped. `tile(id, class)` colours a tile (app.js's).
"use strict";
(function () {
  const { fmt, dur } = window.SMD;
  const $ = (id) => document.getElementById(id);
  // The step and writer-drops tiles: the step of the planned ones with the ETA, and what the
  // job's writers dropped (from its progress files).
  const share = (x) => (x === null ? "" : " (" + (x > 0 && x < 0.001 ? "<0.1" : fmt(100 * x, 1)) + " %)");
  window.SMD.drawProgress = function (o, tile) {
    const p = o.progress;
    $("summary-step").textContent = (o.last_step === null ? "–" : String(o.last_step)) +
      (p.planned_steps !== null ? " of " + p.planned_steps : "");
    $("summary-step").title = p.steps_done !== null ? p.steps_done + " steps done" : "";
    // The rate is over the last two minutes after the warm-up; an ETA only from a steady one.
    $("summary-rate").textContent = (p.eta_s !== null ? "ETA " + dur(p.eta_s) : p.eta_note) + " · " +
      (p.step_rate !== null ? fmt(p.step_rate, 1) + " steps/s" + (p.rate_steady ? "" : ", unsteady") +
        (p.rate_source === "step spans" ? "" : " (" + p.rate_source + ")") : "no step rate yet");
    $("summary-rate").title = p.step_rate !== null ? p.rate_steps + " steps in the last " + dur(p.rate_window_s) + ", after the first five" : "";
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
