// smdebug serve: what the dashboard's panels share: DOM building (text only, never markup),
// number and duration formats, colour scales, the heatmap grid, the crosshair tooltip and file
// downloads. Everything is put on window.SMD for app.js.
"use strict";
(function () {
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

  // The API writes non-finite numbers as the strings "NaN", "Infinity", "-Infinity".
  function fmt(x, digits) {
    if (x === null || x === undefined) return "–";
    if (x === "NaN" || (typeof x === "number" && Number.isNaN(x))) return "NaN";
    if (x === "Infinity" || x === Infinity) return "+Inf";
    if (x === "-Infinity" || x === -Infinity) return "-Inf";
    if (typeof x !== "number") return String(x);
    const a = Math.abs(x);
    if (a >= 1e9) return (x / 1e9).toFixed(2) + "G";
    if (a >= 1e6) return (x / 1e6).toFixed(2) + "M";
    if (a >= 1e4) return (x / 1e3).toFixed(1) + "k";
    if (a !== 0 && a < 1e-3) return x.toExponential(2);
    return x.toFixed(digits === undefined ? 2 : digits);
  }
  // A value with its significant digits (a legend's, a tooltip's, a scalar's last value): five
  // at most, trailing zeros dropped, in exponent form below 1e-3 and from 1e6 ("2.59e-4", never
  // "0"; "0.61234", "1234.6", "1.2346e+7"); NaN and ±Inf as such.
  function sig(x) {
    if (typeof x !== "number" || !Number.isFinite(x)) return fmt(x);
    const a = Math.abs(x);
    if (a === 0) return "0";
    if (a < 1e-3 || a >= 1e6) return x.toExponential(4).replace(/\.?0+e/, "e");
    return String(Number(x.toPrecision(5)));
  }
  // A rate as people write it: three significant digits, whole numbers from 100 on ("2321",
  // "30.9"); "–" for none.
  const rateText = (x) => (typeof x !== "number" || !Number.isFinite(x) ? "–" : x >= 100 ? String(Math.round(x)) : String(Number(x.toPrecision(3))));
  // An axis label: three significant digits, k/M/G above ten thousand.
  function axisLabel(v) {
    if (v === null || v === undefined) return "";
    const a = Math.abs(v);
    const three = (x) => String(Number(x.toPrecision(3)));
    if (a >= 1e9) return three(v / 1e9) + "G";
    if (a >= 1e6) return three(v / 1e6) + "M";
    if (a >= 1e4) return three(v / 1e3) + "k";
    if (a !== 0 && a < 1e-3) return v.toExponential(1);
    return three(v);
  }
  // The font the charts' axes are drawn in, and their ticks' length and gap to the labels
  // (uPlot's defaults): an axis is as wide as its widest label measured in that font plus
  // these (no "7500" cut to "'500" at the left edge).
  const AXIS_FONT = "12px system-ui, sans-serif";
  const AXIS_TICK = 10, AXIS_GAP = 5;
  let measureCtx = null;
  function textWidth(text, font) {
    if (!measureCtx) measureCtx = document.createElement("canvas").getContext("2d");
    measureCtx.font = font || AXIS_FONT;
    return measureCtx.measureText(String(text)).width;
  }
  function axisSize(u, values) {
    if (!values) return 40;
    const widest = values.reduce((m, v) => Math.max(m, textWidth(v)), 0);
    return Math.max(32, Math.ceil(widest + AXIS_TICK + AXIS_GAP + 4));
  }
  // Ten colours that tell apart when stacked or side by side (Tableau 10), for categories:
  // phases, GPUs.
  const CATEGORICAL = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
                       "#ff9da7", "#9c755f", "#bab0ac"];
  // Names as people count them: cpu2 before cpu10.
  const naturalCompare = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" }).compare;
  // A system metric's title as people write it: "CPU I/O wait (%)", not
  // "cpu I/OWaitPercentage (%)".
  const METRIC_TITLES = {
    "cpu CPUUtilization": "CPU utilization", "cpu I/OWaitPercentage": "CPU I/O wait",
    "gpu GPUUtilization": "GPU utilization", "gpu GPUMemoryUtilization": "GPU memory utilization",
    "gpu GPUMemoryUsedBytes": "GPU memory used", "gpu GPUPowerWatts": "GPU power", "gpu GPUTemperatureCelsius": "GPU temperature",
    "memory MemoryUsedPercent": "Memory used", "memory MemoryUsedBytes": "Memory used",
    "network ReceiveBytesPerSecond": "Network received", "network TransmitBytesPerSecond": "Network sent",
    "i/o ReadThroughputInBytesPerSecond": "Disk read", "i/o WriteThroughputInBytesPerSecond": "Disk written", "i/o IOPS": "Disk operations",
    "process ProcessCPUUtilization": "Process CPU", "process ProcessRSSBytes": "Process memory (RSS)", "process ProcessCount": "Processes",
  };
  // Words of a metric id we have no title for: "ReadLatencyMs" -> "read latency ms".
  function metricWords(id) {
    const words = String(id).replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2").replace(/_/g, " ").toLowerCase();
    return words.charAt(0).toUpperCase() + words.slice(1);
  }
  function metricTitle(type, id, unit) {
    const known = METRIC_TITLES[type + " " + id];
    const name = known || (type === "cpu" || type === "gpu" ? type.toUpperCase() + " " : "") + metricWords(id).replace(/^(cpu|gpu) /i, "");
    return name + (unit ? " (" + unit + ")" : "");
  }

  // A duration in seconds as people write it: "640 µs", "12.5 ms", "4.2 s", "37 s",
  // "2 min 05 s", "1 h 05 min" (never "0.00 s" for a sub-millisecond step, never "59 min 60 s"
  // or "37.39 s"). Each unit's figure is rounded once and carried into the next unit up.
  function dur(seconds) {
    if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "–";
    if (!Number.isFinite(seconds)) return seconds > 0 ? "+Inf s" : "-Inf s";
    const a = Math.abs(seconds);
    const sign = seconds < 0 ? "-" : "";
    if (a === 0) return "0 s";
    // Three significant digits, trailing zeros after the point dropped ("640", "12.5", "1.2").
    const three = (x) => { const t = x.toPrecision(3); return t.includes(".") ? t.replace(/0+$/, "").replace(/\.$/, "") : t; };
    // A value that rounds up to 1000 of a unit is shown in the next one ("1 ms", not "1.00e+3 µs").
    const fits = (x) => Math.abs(Number(x.toPrecision(3))) < 1000;
    if (a < 1e-3 && fits(seconds * 1e6)) return three(seconds * 1e6) + " µs";
    if (a < 1 && fits(seconds * 1e3)) return three(seconds * 1e3) + " ms";
    // Under ten seconds one decimal ("4.2 s", "3 s"), then whole seconds.
    if (a < 9.95) return sign + String(Number(a.toFixed(1))) + " s";
    const whole = Math.round(a);
    if (whole < 60) return sign + whole + " s";
    if (whole < 3600) {
      const m = Math.floor(whole / 60), rest = whole % 60;
      return sign + m + " min" + (rest ? " " + String(rest).padStart(2, "0") + " s" : "");
    }
    const minutes = Math.round(a / 60);
    const h = Math.floor(minutes / 60), m = minutes % 60;
    return sign + h + " h" + (m ? " " + String(m).padStart(2, "0") + " min" : "");
  }

  // A rule's evidence as a person reads it: what was measured, its value and the limit
  // ("fc1.bias nan_count = 32", "vm TRAIN step duration = 4.41 ms (limit 2.75 ms)",
  // "algo-1 gpu7 GPUUtilization p95 = 92 % (limit 70 %)"). The measure is left out where the
  // subject already names it ("loss (TRAIN) = NaN", not "loss (TRAIN) loss = NaN") or where the value's unit
  // says it (a duration's "seconds"); a duration in the unit that fits it, a percentage with
  // its sign, anything else with its significant digits (a count of 1 is "1", not "1.00"); NaN
  // and ±Inf as such.
  const DURATION = /^(seconds?|.*_s|.*_seconds|.*duration.*|.*time_s)$/i;
  function evidenceText(e) {
    const measure = String(e.measure || ""), subject = String(e.tensor || "");
    const duration = DURATION.test(measure);
    const percent = !duration && /percent|utili[sz]ation|%/i.test(subject + " " + measure);
    const value = (v) => (typeof v === "number" && Number.isFinite(v) ? (duration ? dur(v) : sig(v) + (percent ? " %" : "")) : fmt(v));
    const words = subject.toLowerCase().replace(/\([^)]*\)/g, " ").split(/\s+/);
    const said = duration && /^seconds?$/i.test(measure) || words.includes(measure.toLowerCase());
    return subject + (said ? "" : " " + measure) + " = " + value(e.value) +
      (e.limit !== null && e.limit !== undefined ? " (limit " + value(e.limit) + ")" : "");
  }

  // The last value of a line as text: its figure, or what it was where it is no number (a
  // value at a step the marks `marks` cover as NaN or ±Inf is drawn as a gap, and read here as
  // "NaN", never as the last finite value or "–").
  function lastText(steps, values, marks) {
    const j = values.length - 1;
    if (j < 0) return "–";
    const v = values[j];
    if (v !== null && v !== undefined) return sig(v);
    const m = (marks || []).find((k) => k.from <= steps[j] && steps[j] <= k.to);
    return m ? m.kind : "–";
  }

  function heat(v) { // 0..100 -> a blue-to-yellow colour
    if (v === null || v === undefined) return "#eef0f3";
    const t = Math.max(0, Math.min(1, v / 100));
    const r = Math.round(40 + 215 * t), g = Math.round(60 + 160 * t), b = Math.round(140 - 110 * t);
    return "rgb(" + r + "," + g + "," + b + ")";
  }
  // A colour scale: the gradient with its low and high labels, in `box` (drawn again each time).
  function colourScale(box, lo, hi, unit, vertical) {
    clear(box);
    const c = el("canvas");
    c.width = vertical ? 16 : 200; c.height = vertical ? 200 : 12;
    const ctx = c.getContext("2d");
    const n = vertical ? c.height : c.width;
    for (let i = 0; i < n; i++) {
      ctx.fillStyle = heat(vertical ? 100 * (1 - i / (n - 1)) : 100 * i / (n - 1));
      if (vertical) ctx.fillRect(0, i, c.width, 1); else ctx.fillRect(i, 0, 1, c.height);
    }
    const label = (v) => sig(v) + (unit || ""); // "0 %", "100 %", not "0.00 %"
    if (vertical) box.append(el("span", { text: label(hi) }), c, el("span", { text: label(lo) }));
    else box.append(el("span", { text: label(lo) }), c, el("span", { text: label(hi) }));
  }
  function drawGrid(canvas, rows, labelWidth, scaleMax) {
    const ctx = canvas.getContext("2d");
    const nrows = rows.length;
    const ncols = nrows ? rows[0].values.length : 0;
    const rowH = nrows ? Math.max(3, Math.min(18, 300 / nrows)) : 0;
    canvas.height = Math.max(40, nrows * rowH + 4);
    canvas.width = Math.max(300, canvas.parentElement.clientWidth - 34);
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

  // A crosshair tooltip: every series' value at the cursor, next to it (the legend says which
  // line is which). `extra(u, i)`: a line under the x value (a step's number); a series'
  // `values` (its own values where the chart draws others, as stacked phases) are shown
  // instead of the drawn ones.
  function tooltipPlugin(xFormat, yFormat, extra) {
    let tip = null;
    return {
      hooks: {
        init: (u) => { tip = el("div", { className: "tooltip" }); tip.hidden = true; u.over.append(tip); },
        setCursor: (u) => {
          const i = u.cursor.idx;
          if (i === null || i === undefined || u.cursor.left < 0) { tip.hidden = true; return; }
          clear(tip);
          tip.append(el("div", { text: (u.series[0].label || "x") + " " + xFormat(u.data[0][i]) }));
          const more = extra && extra(u, i);
          if (more) tip.append(el("div", { className: "tip-extra", text: more }));
          let shown = 0;
          u.series.forEach((s, k) => {
            if (k === 0 || !s.show || s.tooltip === false) return;
            const own = u.ownValues && u.ownValues[k - 1];
            const v = own ? own[i] : u.data[k][i];
            if (v === null || v === undefined) return;
            const sw = el("span", { className: "sw" });
            sw.style.background = typeof s.stroke === "function" ? s.stroke(u, k) : s.stroke;
            tip.append(el("div", null, sw, s.label + ": " + (yFormat ? yFormat(v) : fmt(v, 4))));
            shown++;
          });
          tip.hidden = shown === 0;
          const left = u.cursor.left + 12, w = u.over.clientWidth;
          tip.style.left = (left > w - 180 ? u.cursor.left - 180 : left) + "px";
          tip.style.top = Math.max(0, u.cursor.top - 10) + "px";
        },
      },
    };
  }

  // Saves `text` as a file named `name` (a blob URL: nothing leaves the page).
  function download(name, type, text) {
    const url = URL.createObjectURL(new Blob([text], { type }));
    const a = el("a", { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  }
  function csvField(v) {
    const s = v === null || v === undefined ? "" : String(v);
    return /[",\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }

  // Text the user has selected inside `node`: an update does not redraw it meanwhile.
  function selectionIn(node) {
    const sel = window.getSelection();
    return !!(sel && !sel.isCollapsed && sel.anchorNode && node.contains(sel.anchorNode));
  }

  // A regex matching `name` alone (the scalars view's filter, for one scalar).
  const exactName = (name) => "^" + name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$";

  // The steps a drag across a step axis spans (`range`: its x values): the whole steps within
  // it, or the two around it when it fell between them.
  function stepWindow(range) {
    const lo = Math.ceil(range[0]), hi = Math.floor(range[1]);
    return lo <= hi ? [lo, hi] : [Math.floor(range[0]), Math.ceil(range[1])];
  }

  // Steps where a chart's values were NaN or ±Inf (`u.nonFinite`: [{from, to, count, kind}] in
  // the x axis' steps): a red band over them with the kind written at its top, drawn under
  // the lines (a line breaks there: without the band it would just end).
  // `initial`: the marks of the chart's first draw (later ones are set on `u.nonFinite`).
  function nonFinitePlugin(initial) {
    return {
      hooks: {
        drawClear: (u) => {
          const marks = u.nonFinite || initial || [];
          if (!marks.length) return;
          const ctx = u.ctx, top = u.bbox.top, height = u.bbox.height;
          ctx.save();
          ctx.font = Math.round(11 * devicePixelRatio) + "px sans-serif";
          for (const m of marks) {
            let x0 = u.valToPos(m.from - 0.5, "x", true), x1 = u.valToPos(m.to + 0.5, "x", true);
            x0 = Math.max(x0, u.bbox.left); x1 = Math.min(x1, u.bbox.left + u.bbox.width);
            if (x1 < u.bbox.left || x0 > u.bbox.left + u.bbox.width) continue;
            const w = Math.max(2 * devicePixelRatio, x1 - x0);
            ctx.fillStyle = "rgba(214, 39, 40, 0.16)";
            ctx.fillRect(x0, top, w, height);
            ctx.fillStyle = "#b03a2e";
            ctx.fillRect(x0, top, Math.max(devicePixelRatio, Math.min(w, 2 * devicePixelRatio)), height);
            ctx.fillText(m.kind, x0 + 3 * devicePixelRatio, top + 12 * devicePixelRatio);
          }
          ctx.restore();
        },
      },
    };
  }
  // Several lines' marks as one: runs that overlap or touch merged (their counts added, their
  // kinds joined), in step order.
  function mergeMarks(marks) {
    const out = [];
    for (const m of marks.slice().sort((a, b) => a.from - b.from)) {
      const last = out[out.length - 1];
      if (last && m.from <= last.to + 1) {
        last.to = Math.max(last.to, m.to);
        last.count += m.count;
        if (last.kind !== m.kind) last.kind = Array.from(new Set((last.kind + " and " + m.kind).split(" and "))).join(" and ");
      } else out.push(Object.assign({}, m));
    }
    return out;
  }
  // What the marks say, for a chart's title or tooltip: "NaN at steps 5–30 (26 values)".
  function nonFiniteText(marks) {
    return marks.map((m) => m.kind + " at step" + (m.from === m.to ? " " + m.from : "s " + m.from + "–" + m.to) +
      (m.count > 1 ? " (" + m.count + " values)" : "")).join(", ");
  }

  window.SMD = { el, clear, fmt, sig, dur, rateText, evidenceText, lastText, axisLabel, axisSize, textWidth, AXIS_FONT, CATEGORICAL, naturalCompare,
                 metricTitle, heat, colourScale, drawGrid, tooltipPlugin,
                 nonFinitePlugin, nonFiniteText, mergeMarks, download, csvField, selectionIn, exactName, stepWindow };
})();
