#!/usr/bin/env python3
"""Differential scenarios: runs written by Python smdebug 1.0.34's own writer classes
(``FileWriter``, ``CollectionManager``), read by ``smdebug.trials.create_trial`` and by
``smdebug_rs.trials.create_trial``, every answer compared.

A scenario is a script of writes (stages) and queries. Writes go through smdebug's
``FileWriter`` (one event file and one index file per step and worker, fixed wall times, so the
bytes are the same at every run), its ``CollectionManager`` and ``training_has_ended``, or are
raw files (a placeholder index entry). Queries are smdebug's Trial API: steps per mode, tensor
names, workers, step states, values, exceptions (compared by class name). Writes after the trial
is opened are a live run: the trial must see them without being reopened.

Usage:

    python scenarios.py --write OUT_DIR     # write every scenario's stages and answers
    python scenarios.py --list              # the scenarios, one line each
    python scenarios.py --check OUT_DIR     # rewrite into a temporary directory, compare

``--write`` reads with both readers (run it with a Python that has smdebug 1.0.34 and the
smdebug_rs wheel: ``target/interop-venv/bin/python`` once ``.ci/test-smdebug-py`` made it),
refuses to write when they disagree where no scenario says they may, and records the answers:
OUT_DIR/<name>.json (the ops, each with Python smdebug's answer, and ours where it differs on
purpose) and OUT_DIR/<name>/stage_<k>/ (the files each stage added). The Rust tests
(smdebug-io/tests/trial_scenarios.rs) replay them through the Rust ``Trial``. The differential
run (smdebug-py/tests/test_scenarios.py) runs each scenario against both readers in one
process and compares with the recorded copy.

Where smdebug_rs answers differently on purpose, the query says so (``differs=...``): the
recorded op then holds Python's answer (``answer``) and ours (``ours``), and the differential
run checks both. The reasons are the Rust ``Trial``'s documented differences.
"""

import hashlib
import json
import math
import os
import shutil
import sys
import tempfile

import numpy as np

WALL_TIME_BASE = 1_700_000_000.0


# ---- answers as JSON ------------------------------------------------------------------------


def _json_number(x):
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    if isinstance(x, (str, np.str_)):
        return str(x)
    f = float(x)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return f


def array_json(arr):
    """A value as the answers hold it: numpy's dtype string, shape, row-major values."""
    arr = np.asarray(arr)
    return {
        "dtype": str(arr.dtype),
        "shape": [int(d) for d in arr.shape],
        "values": [_json_number(v) for v in arr.reshape(-1).tolist()],
    }


def normalize(x):
    """Any answer of the Trial API as JSON."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return _json_number(x)
    if isinstance(x, np.ndarray):
        return array_json(x)
    if isinstance(x, dict):
        return {str(k): normalize(v) for k, v in x.items()}
    if hasattr(x, "name") and hasattr(x, "value") and not isinstance(x, (list, tuple)):
        return x.name  # an enum member: StepState, ModeKeys
    if isinstance(x, (list, tuple)):
        return [normalize(v) for v in x]
    raise TypeError(f"cannot record {x!r}")


# ---- the readers ------------------------------------------------------------------------------


class Reader:
    """One implementation of smdebug's trial API: Python smdebug, or smdebug_rs."""

    def __init__(self, label, trials, modes):
        self.label = label
        self.trials = trials
        self.modes = modes

    def mode(self, name):
        return None if name is None else getattr(self.modes, name)

    def open(self, path, options):
        kwargs = {}
        if "range_steps" in options:
            kwargs["range_steps"] = tuple(options["range_steps"])
        window = options.get("window")
        old = os.environ.get("SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW")
        if window is not None:
            os.environ["SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW"] = str(window)
        try:
            return self.trials.create_trial(path, **kwargs)
        finally:
            if window is not None:
                if old is None:
                    del os.environ["SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW"]
                else:
                    os.environ["SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW"] = old

    def ask(self, trial, q, args):
        """Asks one query; the answer as JSON, or {"error": <exception class name>}."""
        try:
            return normalize(self._ask(trial, q, dict(args)))
        except Exception as e:  # the class is the answer
            return {"error": type(e).__name__}

    def _ask(self, trial, q, a):
        mode = self.mode(a.pop("mode", None))
        m = {} if mode is None else {"mode": mode}
        if q == "steps":
            return trial.steps(show_incomplete_steps=a.get("incomplete", False), **m)
        if q == "tensor_names":
            kw = {k: a[k] for k in ("step", "regex", "collection") if k in a}
            return trial.tensor_names(**kw, **m)
        if q == "workers":
            return trial.workers()
        if q == "modes":
            return sorted(x.name for x in trial.modes())
        if q == "num_workers":
            return trial.num_workers
        if q == "last_complete_step":
            return trial.last_complete_step
        if q == "loaded_all_steps":
            return trial.loaded_all_steps
        if q == "has_passed_step":
            return trial.has_passed_step(a["step"], **m)
        if q == "wait_for_steps":
            trial.wait_for_steps(a["steps"], **m)
            # smdebug 1.0.34 turns its automatic refresh off after waiting (its `refresh`
            # context manager); smdebug_rs does not. Turned back on, so that the queries after
            # compare the same thing.
            if hasattr(trial, "dynamic_refresh"):
                trial.dynamic_refresh = True
            return None
        if q == "set_dynamic_refresh":
            # smdebug's attribute, which its no_refresh/refresh context managers set.
            trial.dynamic_refresh = a["on"]
            return None
        if q == "global_step":
            return trial.global_step(mode, a["step"])
        if q == "mode_modestep":
            found = trial.mode_modestep(a["step"])
            return [found[0].name if found[0] is not None else None, found[1]]
        if q == "has_tensor":
            return trial.has_tensor(a["tensor"])
        t = trial.tensor(a["tensor"])
        if q == "tensor":
            return t.name
        if q == "tensor_steps":
            return t.steps(show_incomplete_steps=a.get("incomplete", False), **m)
        if q == "value":
            return t.value(a["step"], worker=a.get("worker"), **m)
        if q == "values":
            return t.values(worker=a.get("worker"), **m)
        if q == "tensor_workers":
            return sorted(t.workers(a["step"], **m))
        if q == "reduction_value":
            return t.reduction_value(
                a["step"], a["reduction"], worker=a.get("worker"), abs=a.get("abs", False), **m
            )
        raise ValueError(f"unknown query {q}")


def python_reader():
    from smdebug import trials
    from smdebug.core.modes import ModeKeys

    return Reader("smdebug", trials, ModeKeys)


def rs_reader():
    from smdebug_rs import trials
    from smdebug_rs import ModeKeys

    return Reader("smdebug_rs", trials, ModeKeys)


# ---- the script -------------------------------------------------------------------------------


class Mismatch(AssertionError):
    pass


class Script:
    """Runs one scenario: writes into `path`, asks every reader, records what Python smdebug
    answered. `stage_out`: where to copy each stage's files (None: not kept)."""

    def __init__(self, name, path, readers, stage_out=None):
        self.name = name
        self.path = path
        self.readers = readers
        self.stage_out = stage_out
        self.ops = []
        self.trials = None
        self.options = {}
        self.snapshot = {}
        self.stages = 0
        self.mismatches = []
        os.makedirs(path, exist_ok=True)

    # -- writing --

    def collections(self, workers, num_workers=1, collections=None):
        """One collections file per worker, as smdebug's hooks export them (`CollectionManager`,
        `set_num_workers`, `export(run, "<worker>_collections.json")`). `collections`:
        {name: (tensor_names, include_regex)}."""
        from smdebug.core.collection_manager import CollectionManager

        for worker in workers:
            cm = CollectionManager()
            for cname, (tnames, regexes) in (collections or {}).items():
                coll = cm.get(cname)
                for r in regexes:
                    coll.include(r)
                for t in tnames:
                    coll.add_tensor_name(t)
            cm.set_num_workers(num_workers)
            cm.export(self.path, f"{worker}_collections.json")

    def step(self, worker, step, tensors, mode="GLOBAL", mode_step=None):
        """One step of one worker: `tensors` {name: value}, through smdebug's FileWriter."""
        from smdebug.core.modes import ModeKeys
        from smdebug.core.writer import FileWriter

        writer = FileWriter(trial_dir=self.path, worker=worker, step=step)
        for i, (tname, value) in enumerate(tensors.items()):
            writer.write_tensor(
                tdata=value,
                tname=tname,
                mode=getattr(ModeKeys, mode),
                mode_step=step if mode_step is None else mode_step,
                timestamp=WALL_TIME_BASE + step + i * 1e-3,
            )
        writer.close()

    def end(self):
        """The end-of-job marker (`training_has_ended`)."""
        from smdebug.core.access_layer.utils import training_has_ended

        training_has_ended(self.path)

    def edit_index(self, step, worker, edit):
        """Rewrites index file (step, worker) with `edit(dict)` applied (a hand-made entry)."""
        from smdebug.core.locations import IndexFileLocationUtils

        path = IndexFileLocationUtils.get_index_key_for_step(self.path, step, worker)
        with open(path) as f:
            doc = json.load(f)
        edit(doc)
        with open(path, "w") as f:
            f.write(json.dumps(doc))

    # -- stages and queries --

    def _files(self):
        out = {}
        for root, _, files in os.walk(self.path):
            for f in files:
                full = os.path.join(root, f)
                with open(full, "rb") as fh:
                    out[os.path.relpath(full, self.path)] = hashlib.sha256(fh.read()).hexdigest()
        return out

    def _stage(self):
        """The files written since the last stage become a stage (nothing when none were)."""
        now = self._files()
        changed = sorted(p for p, h in now.items() if self.snapshot.get(p) != h)
        self.snapshot = now
        if not changed:
            return
        k = self.stages
        self.stages += 1
        if self.stage_out is not None:
            for rel in changed:
                dst = os.path.join(self.stage_out, self.name, f"stage_{k}", rel)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copyfile(os.path.join(self.path, rel), dst)
        self.ops.append({"op": "stage", "stage": k, "files": changed})

    def open(self, expect_error=None, **options):
        """Opens a trial in every reader (`range_steps=(a, b)`, `window=n`)."""
        self._stage()
        self.options = options
        results = {}
        trials = {}
        for r in self.readers:
            try:
                trials[r.label] = r.open(self.path, options)
                results[r.label] = "ok"
            except Exception as e:
                results[r.label] = {"error": type(e).__name__}
        self._compare("open", options, results, None)
        op = {"op": "open", "options": options, "answer": results[self.readers[0].label]}
        self.ops.append(op)
        self.trials = trials

    def ask(self, q, differs=None, **args):
        """Asks every open reader `q(**args)` and compares. `differs`: why smdebug_rs answers
        differently here (on purpose); both answers are then recorded."""
        self._stage()
        results = {}
        for r in self.readers:
            if r.label in self.trials:
                results[r.label] = r.ask(self.trials[r.label], q, args)
        op = {"op": "ask", "q": q, "args": args}
        op.update(self._compare(q, args, results, differs))
        self.ops.append(op)

    def _compare(self, q, args, results, differs):
        labels = [r.label for r in self.readers]
        first = results.get(labels[0])
        out = {"answer": first}
        others = [results[l] for l in labels[1:] if l in results]
        if differs is not None:
            out["why"] = differs
            if others:
                out["ours"] = others[0]
                if others[0] == first:
                    self.mismatches.append(
                        f"{self.name}: {q}({args}): both answer {first!r}, but the scenario "
                        f"says smdebug_rs differs ({differs})"
                    )
        else:
            for l in labels[1:]:
                if l in results and results[l] != first:
                    self.mismatches.append(
                        f"{self.name}: {q}({args}): {labels[0]} {first!r} != {l} {results[l]!r}"
                    )
        return out

    def record(self, doc):
        return {"name": self.name, "doc": doc, "ops": self.ops}


# ---- values -----------------------------------------------------------------------------------


def f32(*v):
    return np.array(v, dtype=np.float32)


def scalar(x, dtype=np.float32):
    return np.array(x, dtype=dtype)


def loss_at(step, worker=0):
    return scalar(2.0 / (1 + step) + 0.125 * worker)


def weights_at(step, worker=0):
    return (np.arange(6, dtype=np.float32).reshape(2, 3) + step * 0.5 + worker).astype(np.float32)


def model(step, worker=0):
    return {"loss": loss_at(step, worker), "fc.weight": weights_at(step, worker)}


# ---- the scenarios ----------------------------------------------------------------------------

SCENARIOS = []


def scenario(fn):
    SCENARIOS.append(fn)
    return fn


@scenario
def issue_workers_from_the_collections_file(s):
    """Issue 24, case 1: `CollectionManager().export(dir, "worker_0_collections.json")` (num_workers
    1), then `FileWriter(..., worker="algo-1")` writes the steps. The worker named only by the
    collections file holds nothing back: every step is complete."""
    s.collections(["worker_0"], num_workers=1)
    for g in range(4):
        s.step("algo-1", g, model(g), mode="TRAIN", mode_step=g)
    s.open()
    s.ask("steps")
    s.ask("steps", mode="TRAIN")
    s.ask("workers")
    s.ask("num_workers")
    s.ask("last_complete_step")
    s.ask("tensor_steps", tensor="loss")
    s.ask("tensor_steps", tensor="loss", mode="TRAIN")
    s.ask("has_passed_step", step=3)
    s.ask("has_passed_step", step=4)
    s.ask("value", tensor="loss", step=2)
    s.ask("tensor_workers", tensor="loss", step=2)


@scenario
def issue_trial_opened_before_the_data(s):
    """Issue 24, case 2: the trial opens on a run holding only its collections file; step 0 is
    written and asked for at once: AVAILABLE, with its names and steps, no waiting."""
    s.collections(["worker_0"])
    s.open()
    s.ask("tensor_names")
    s.ask("steps")
    s.step("worker_0", 0, model(0), mode="TRAIN", mode_step=0)
    s.ask("has_passed_step", step=0, mode="TRAIN")
    s.ask("tensor_names")
    s.ask("steps")
    s.ask("steps", mode="TRAIN")
    s.step("worker_0", 1, model(1), mode="TRAIN", mode_step=1)
    s.ask("has_passed_step", step=1)
    s.ask("value", tensor="fc.weight", step=1, mode="TRAIN")


@scenario
def issue_range_steps(s):
    """Issue 24, case 3: `create_trial(path, range_steps=(0, 5))` on a 120-step run lists steps
    0-4."""
    s.collections(["worker_0"])
    for g in range(120):
        s.step("worker_0", g, {"loss": loss_at(g)}, mode="TRAIN", mode_step=g)
    s.end()
    s.open(range_steps=[0, 5])
    s.ask("steps")
    s.ask("steps", mode="TRAIN")
    s.ask("tensor_steps", tensor="loss")
    s.ask("last_complete_step")
    s.ask("has_passed_step", step=4)
    s.ask("has_passed_step", step=5)
    s.ask("value", tensor="loss", step=4)
    s.ask("value", tensor="loss", step=7)


@scenario
def issue_placeholder_index_entry(s):
    """Issue 24, case 4: one entry of an index file is 1 byte long (a placeholder). The run
    opens; only that tensor at that step fails, when its value is asked for."""
    s.collections(["worker_0"])
    for g in range(3):
        s.step("worker_0", g, model(g))
    s.edit_index(
        1,
        "worker_0",
        lambda d: d["tensor_payload"].append(
            {"tensorname": "gradients/dummy:0", "start_idx": 0, "length": 1}
        ),
    )
    s.end()
    s.open()
    s.ask("tensor_names")
    s.ask("steps")
    s.ask("tensor_steps", tensor="gradients/dummy:0")
    s.ask("value", tensor="loss", step=1)
    s.ask(
        "value",
        tensor="gradients/dummy:0",
        step=1,
        differs="smdebug fails in its record reader (struct.error); smdebug_rs raises "
        "IndexReaderException naming the index file and the entry",
    )


@scenario
def issue_string_tensors(s):
    """Issue 24, case 5: the XGBoost hook's `trees` collection holds string tensors
    (`trees/Feature`, `trees/Yes`, ...). Both readers return numpy string arrays."""
    s.collections(["worker_0"], collections={"trees": ([], ["^trees/"])})
    for g in range(2):
        s.step(
            "worker_0",
            g,
            {
                "trees/Node": np.array([0, 1, 2], dtype=np.int64),
                "trees/Feature": np.array(["f0", "Leaf", "Leaf"]),
                "trees/Yes": np.array([f"{g}-1", "", ""]),
                "trees/Split": np.array([0.5, np.nan, np.nan]),
            },
        )
    s.end()
    s.open()
    s.ask("tensor_names", collection="trees")
    s.ask("value", tensor="trees/Feature", step=0)
    s.ask("value", tensor="trees/Yes", step=1)
    s.ask("value", tensor="trees/Node", step=1)
    s.ask("values", tensor="trees/Yes")


@scenario
def two_workers_both_write_every_step(s):
    """Two workers declared and both write: every step complete, values per worker."""
    s.collections(["worker_0", "worker_1"], num_workers=2)
    for g in range(4):
        for w in range(2):
            s.step(f"worker_{w}", g, model(g, w))
    s.end()
    s.open()
    s.ask("steps")
    s.ask("workers")
    s.ask("num_workers")
    s.ask("tensor_workers", tensor="loss", step=2)
    s.ask("value", tensor="loss", step=2, worker="worker_0")
    s.ask("value", tensor="loss", step=2, worker="worker_1")
    s.ask("value", tensor="loss", step=2)
    s.ask("values", tensor="loss", worker="worker_1")


@scenario
def a_worker_behind_holds_its_steps_back(s):
    """Two workers, worker_1 three steps behind, while the run goes on: only the steps both
    wrote are complete; the others are NOT_YET_AVAILABLE; catching up completes them."""
    s.collections(["worker_0", "worker_1"], num_workers=2)
    for g in range(6):
        s.step("worker_0", g, model(g, 0))
    for g in range(3):
        s.step("worker_1", g, model(g, 1))
    s.open()
    s.ask("steps")
    s.ask("steps", incomplete=True)
    s.ask("last_complete_step")
    s.ask("has_passed_step", step=2)
    s.ask("has_passed_step", step=3)
    s.ask("has_passed_step", step=9)
    s.ask("tensor_steps", tensor="loss")
    s.ask("tensor_steps", tensor="loss", incomplete=True)
    s.ask("value", tensor="loss", step=4)
    s.ask("tensor_workers", tensor="loss", step=4)
    for g in range(3, 5):
        s.step("worker_1", g, model(g, 1))
    s.ask("steps")
    s.ask("has_passed_step", step=4)
    s.ask("has_passed_step", step=5)
    s.ask("last_complete_step")


@scenario
def a_missing_worker_holds_every_step_until_the_end(s):
    """num_workers 2 but only worker_0 writes: no step is complete until the job-end marker
    arrives; then every step is."""
    s.collections(["worker_0", "worker_1"], num_workers=2)
    for g in range(4):
        s.step("worker_0", g, model(g))
    s.open()
    s.ask("steps")
    s.ask("steps", incomplete=True)
    s.ask("last_complete_step")
    s.ask("has_passed_step", step=0)
    s.ask("workers")
    s.end()
    s.ask("steps")
    s.ask("loaded_all_steps")
    s.ask("last_complete_step")
    s.ask("has_passed_step", step=0)
    s.ask("has_passed_step", step=4)
    s.ask("wait_for_steps", steps=[1, 3])


@scenario
def a_late_job_end_marker(s):
    """One worker writes steps 0-3; the marker comes later. Before it, a step past the last is
    NOT_YET_AVAILABLE; after it UNAVAILABLE, and waiting for it is NoMoreData."""
    s.collections(["worker_0"])
    for g in range(4):
        s.step("worker_0", g, model(g))
    s.open()
    s.ask("has_passed_step", step=4)
    s.ask("loaded_all_steps")
    s.ask("wait_for_steps", steps=[0, 3])
    s.end()
    s.ask("has_passed_step", step=4)
    s.ask("loaded_all_steps")
    s.ask("wait_for_steps", steps=[4])
    s.ask("wait_for_steps", steps=[2])
    s.ask("value", tensor="loss", step=9)


@scenario
def two_modes_number_their_own_steps(s):
    """TRAIN steps 0-3, EVAL 4-5 (EVAL steps 0-1), TRAIN 6-7 (TRAIN 4-5): steps, names and
    lookups per mode."""
    s.collections(["worker_0"])
    for g in range(4):
        s.step("worker_0", g, model(g), mode="TRAIN", mode_step=g)
    for k, g in enumerate(range(4, 6)):
        s.step("worker_0", g, {"val_loss": loss_at(g)}, mode="EVAL", mode_step=k)
    for k, g in enumerate(range(6, 8)):
        s.step("worker_0", g, model(g), mode="TRAIN", mode_step=4 + k)
    s.end()
    s.open()
    s.ask("steps")
    s.ask("steps", mode="TRAIN")
    s.ask("steps", mode="EVAL")
    s.ask("steps", mode="PREDICT")
    s.ask("modes")
    s.ask("tensor_names", mode="EVAL")
    s.ask("tensor_names", step=1, mode="EVAL")
    s.ask("tensor_names", step=5, mode="TRAIN")
    s.ask("tensor_names", step=4)
    s.ask("global_step", mode="EVAL", step=1)
    s.ask("global_step", mode="TRAIN", step=4)
    s.ask("mode_modestep", step=5)
    s.ask("tensor_steps", tensor="loss", mode="TRAIN")
    s.ask("tensor_steps", tensor="val_loss")
    s.ask("value", tensor="val_loss", step=1, mode="EVAL")
    s.ask("value", tensor="loss", step=5, mode="TRAIN")
    s.ask("value", tensor="loss", step=5, mode="EVAL")
    s.ask("has_passed_step", step=1, mode="EVAL")
    s.ask("has_passed_step", step=2, mode="EVAL")


@scenario
def names_of_a_mode_or_step_the_run_lacks(s):
    """tensor_names for a mode without steps, or a mode step it lacks: KeyError, as smdebug's
    dictionaries raise; a global step it lacks: no names."""
    s.collections(["worker_0"])
    for g in range(3):
        s.step("worker_0", g, model(g), mode="TRAIN", mode_step=g)
    s.end()
    s.open()
    s.ask("tensor_names", mode="PREDICT")
    s.ask("tensor_names", step=7, mode="TRAIN")
    s.ask("tensor_names", step=7)
    s.ask("tensor_names", step=2, mode="TRAIN")


@scenario
def skipped_steps_are_unavailable_once_passed(s):
    """Steps saved every third step while the run goes on: a skipped step before the last
    complete one is UNAVAILABLE, one after every step NOT_YET_AVAILABLE."""
    s.collections(["worker_0"])
    for g in (0, 3, 6):
        s.step("worker_0", g, model(g))
    s.open()
    s.ask("has_passed_step", step=1)
    s.ask("has_passed_step", step=3)
    s.ask("has_passed_step", step=7)
    s.ask("wait_for_steps", steps=[1])
    s.ask("value", tensor="loss", step=4)
    s.ask("value", tensor="loss", step=8)
    s.step("worker_0", 9, model(9))
    s.ask("has_passed_step", step=8)
    s.ask("value", tensor="loss", step=9)


@scenario
def skipped_mode_steps(s):
    """The same for mode steps: EVAL steps 0 and 2 saved, EVAL step 1 skipped."""
    s.collections(["worker_0"])
    s.step("worker_0", 0, model(0), mode="TRAIN", mode_step=0)
    s.step("worker_0", 1, {"val_loss": loss_at(1)}, mode="EVAL", mode_step=0)
    s.step("worker_0", 2, {"val_loss": loss_at(2)}, mode="EVAL", mode_step=2)
    s.open()
    s.ask("has_passed_step", step=1, mode="EVAL")
    s.ask("has_passed_step", step=3, mode="EVAL")
    s.ask("has_passed_step", step=1, mode="TRAIN")
    s.ask("steps", mode="EVAL")
    s.ask("value", tensor="val_loss", step=1, mode="EVAL")


@scenario
def lookup_errors_say_where_the_step_stands(s):
    """A tensor not saved at a complete step, an unknown tensor, a step not yet written, a
    worker that did not save it: each with smdebug's exception."""
    s.collections(["worker_0"])
    s.step("worker_0", 0, model(0))
    s.step("worker_0", 1, {"loss": loss_at(1)})
    s.open()
    s.ask("value", tensor="fc.weight", step=1)
    s.ask("value", tensor="fc.weight", step=5)
    s.ask("value", tensor="no_such_tensor", step=0)
    s.ask("has_tensor", tensor="no_such_tensor")
    s.ask("tensor", tensor="no_such_tensor")
    s.ask("value", tensor="loss", step=0, worker="worker_9")
    s.ask("tensor_workers", tensor="fc.weight", step=1)


@scenario
def worker_lookups_follow_the_tensor(s):
    """Two workers where only worker_1 saves `extra`: asking worker_0 for it is InvalidWorker;
    the default worker is the first that saved it."""
    s.collections(["worker_0", "worker_1"], num_workers=2)
    for g in range(2):
        s.step("worker_0", g, model(g, 0))
        s.step("worker_1", g, {**model(g, 1), "extra": scalar(g + 10.0)})
    s.end()
    s.open()
    s.ask("value", tensor="extra", step=1, worker="worker_0")
    s.ask("value", tensor="extra", step=1)
    s.ask("tensor_workers", tensor="extra", step=1)
    s.ask("tensor_workers", tensor="loss", step=1)


@scenario
def reductions_only(s):
    """A tensor saved only as reductions: listed under its name; its value is
    TensorUnavailableForStep; the saved reductions read."""
    from smdebug.core.reductions import get_reduction_tensor_name

    s.collections(["worker_0"])
    for g in range(2):
        w = weights_at(g)
        s.step(
            "worker_0",
            g,
            {
                get_reduction_tensor_name("fc.weight", "mean", False): scalar(w.mean()),
                get_reduction_tensor_name("fc.weight", "l2", True): scalar(
                    np.linalg.norm(w.reshape(-1))
                ),
                "loss": loss_at(g),
            },
        )
    s.end()
    s.open()
    s.ask("tensor_names")
    s.ask("tensor_steps", tensor="fc.weight")
    s.ask("value", tensor="fc.weight", step=1)
    s.ask("reduction_value", tensor="fc.weight", step=1, reduction="mean")
    s.ask("reduction_value", tensor="fc.weight", step=0, reduction="l2", abs=True)
    s.ask("tensor_workers", tensor="fc.weight", step=0)


@scenario
def range_steps_with_an_open_end(s):
    """range_steps=(3, None): steps from 3 on."""
    s.collections(["worker_0"])
    for g in range(6):
        s.step("worker_0", g, model(g))
    s.end()
    s.open(range_steps=[3, None])
    s.ask("steps")
    s.ask("has_passed_step", step=1)
    s.ask("value", tensor="loss", step=1)
    s.ask("value", tensor="loss", step=4)


@scenario
def range_steps_with_an_open_start(s):
    """range_steps=(None, 2): steps before 2."""
    s.collections(["worker_0"])
    for g in range(5):
        s.step("worker_0", g, model(g), mode="TRAIN", mode_step=g)
    s.end()
    s.open(range_steps=[None, 2])
    s.ask("steps")
    s.ask("steps", mode="TRAIN")
    s.ask("tensor_names")
    s.ask("wait_for_steps", steps=[3])


@scenario
def range_steps_on_a_live_run(s):
    """range_steps=(2, 5) while the run is written: steps past the range never appear, and the
    range's steps appear as they are written."""
    s.collections(["worker_0"])
    for g in range(3):
        s.step("worker_0", g, model(g))
    s.open(range_steps=[2, 5])
    s.ask("steps")
    s.ask("has_passed_step", step=3)
    for g in range(3, 8):
        s.step("worker_0", g, model(g))
    s.ask("steps")
    s.ask("has_passed_step", step=4)
    s.ask("has_passed_step", step=6)
    s.ask("tensor_steps", tensor="loss")


@scenario
def range_steps_must_end_after_they_start(s):
    """range_steps=(5, 2): smdebug asserts."""
    s.collections(["worker_0"])
    s.step("worker_0", 0, model(0))
    s.end()
    s.open(range_steps=[5, 2])


@scenario
def the_incomplete_step_window_gives_up_on_a_lost_worker(s):
    """SMDEBUG_INCOMPLETE_STEP_WAIT_WINDOW=4, two workers declared, one lost: after more than
    4 incomplete steps the last complete step moves on by half the window."""
    s.collections(["worker_0", "worker_1"], num_workers=2)
    for g in range(10):
        s.step("worker_0", g, model(g))
    s.open(window=4)
    s.ask(
        "steps",
        differs="smdebug moves its last complete step half a window per refresh (two so far); "
        "smdebug_rs moves it until the window holds",
    )
    s.ask("steps")
    s.ask("steps")
    s.ask("last_complete_step")
    s.ask("has_passed_step", step=5)
    s.ask("has_passed_step", step=6)


@scenario
def collections_select_by_name_and_regex(s):
    """tensor_names(collection=...) with tensor names and include_regex; regex queries."""
    s.collections(
        ["worker_0"],
        collections={
            "weights": ([], ["weight$"]),
            "losses": (["loss"], []),
            "custom": (["fc.bias"], ["^gradient/"]),
        },
    )
    for g in range(2):
        s.step(
            "worker_0",
            g,
            {
                **model(g),
                "fc.bias": f32(0.5, -0.5, 0.25),
                "gradient/fc.weight": weights_at(g) * np.float32(0.001),
            },
        )
    s.end()
    s.open()
    s.ask("tensor_names", collection="weights")
    s.ask("tensor_names", collection="losses")
    s.ask("tensor_names", collection="custom")
    s.ask("tensor_names", regex="^fc")
    s.ask("tensor_names", regex=["loss", "bias"])
    s.ask("tensor_names", collection="nope")


@scenario
def a_tensor_that_appears_later(s):
    """A live run gains a tensor at step 2: asking for it looks for new files at once."""
    s.collections(["worker_0"])
    for g in range(2):
        s.step("worker_0", g, model(g))
    s.open()
    s.ask("has_tensor", tensor="late")
    s.step("worker_0", 2, {**model(2), "late": scalar(7.0)})
    s.ask("has_tensor", tensor="late")
    s.ask("tensor_steps", tensor="late")
    s.ask("value", tensor="late", step=2)


@scenario
def a_step_asked_for_as_soon_as_it_is_written(s):
    """Values, mode lookups and global steps of a step written after the trial opened."""
    s.collections(["worker_0"])
    s.step("worker_0", 0, model(0), mode="TRAIN", mode_step=0)
    s.open()
    s.ask("value", tensor="loss", step=1, mode="TRAIN")
    s.step("worker_0", 1, model(1), mode="TRAIN", mode_step=1)
    s.ask("value", tensor="loss", step=1, mode="TRAIN")
    s.step("worker_0", 2, {"val_loss": loss_at(2)}, mode="EVAL", mode_step=0)
    s.ask("mode_modestep", step=2)
    s.step("worker_0", 3, {"val_loss": loss_at(3)}, mode="EVAL", mode_step=1)
    s.ask("global_step", mode="EVAL", step=1)
    s.ask("steps", mode="EVAL")
    s.ask("modes")


@scenario
def tensor_steps_grow_while_the_run_goes_on(s):
    """A tensor's steps and values follow the run."""
    s.collections(["worker_0"])
    s.step("worker_0", 0, model(0))
    s.open()
    s.ask("tensor_steps", tensor="loss")
    s.step("worker_0", 1, model(1))
    s.ask("tensor_steps", tensor="loss")
    s.ask("values", tensor="loss")
    s.step("worker_0", 2, model(2))
    s.ask("values", tensor="fc.weight")


@scenario
def more_workers_write_than_declared(s):
    """num_workers 1 but two workers write: a step is complete once one wrote it."""
    s.collections(["worker_0"], num_workers=1)
    for g in range(3):
        s.step("worker_0", g, model(g, 0))
    s.step("worker_1", 0, model(0, 1))
    s.open()
    s.ask("steps")
    s.ask("workers")
    s.ask("num_workers")
    s.ask("tensor_workers", tensor="loss", step=0)
    s.ask("value", tensor="loss", step=0, worker="worker_1")


@scenario
def writers_named_otherwise_than_the_collections_files(s):
    """Collections files of worker_0 and worker_1 declaring 2 workers; the steps come from
    algo-1 and algo-2: a step is complete once both wrote it."""
    s.collections(["worker_0", "worker_1"], num_workers=2)
    for g in range(3):
        s.step("algo-1", g, model(g, 1))
    for g in range(2):
        s.step("algo-2", g, model(g, 2))
    s.open()
    s.ask("steps")
    s.ask("workers")
    s.ask("has_passed_step", step=1)
    s.ask("has_passed_step", step=2)
    s.ask("value", tensor="loss", step=1, worker="algo-2")


@scenario
def dtypes_smdebug_reads(s):
    """Every dtype smdebug 1.0.34's reader maps, in 0-d, 1-D and 3-D shapes."""
    s.collections(["worker_0"])
    tensors = {
        "f16": np.array([1.5, -0.0, np.inf], dtype=np.float16),
        "f32": np.array([[[1.0, np.nan], [3.0, -4.5]]], dtype=np.float32),
        "f64": np.array(np.pi, dtype=np.float64),
        "i32": np.array([-(2**31), 2**31 - 1], dtype=np.int32),
        "i64": np.array([-(2**63), 2**63 - 1, 0], dtype=np.int64),
        "u8": np.array([0, 255], dtype=np.uint8),
        "b": np.array([True, False, True]),
        "np_scalar": np.float32(2.5),
    }
    s.step("worker_0", 0, tensors)
    s.end()
    s.open()
    for name in tensors:
        s.ask("value", tensor=name, step=0)


@scenario
def a_step_with_no_tensors_is_no_step(s):
    """An index file listing no tensor (a FileWriter closed without writing): smdebug learns
    steps from tensors, so it is no step."""
    s.collections(["worker_0"])
    s.step("worker_0", 0, model(0))
    s.step("worker_0", 1, {})
    s.step("worker_0", 2, model(2))
    s.open()
    s.ask("steps")
    s.ask("has_passed_step", step=1)
    s.ask("tensor_names", step=1)


@scenario
def a_name_listed_twice_reads_the_later_entry(s):
    """An index file listing `acc` twice (smdebug's Keras hook does): the later entry is read."""
    s.collections(["worker_0"])
    s.step("worker_0", 0, {"acc": scalar(0.25), "loss": loss_at(0)})
    s.step("worker_0", 1, {"acc": scalar(0.5), "loss": loss_at(1)})

    def twice(doc):
        first = next(e for e in doc["tensor_payload"] if e["tensorname"] == "acc")
        other = next(e for e in doc["tensor_payload"] if e["tensorname"] == "loss")
        # The later `acc` entry points at the loss record's bytes: a record of another tag.
        doc["tensor_payload"].append(dict(first))
        doc["tensor_payload"][0] = {**other, "tensorname": "acc"}

    s.edit_index(1, "worker_0", twice)
    s.end()
    s.open()
    s.ask("value", tensor="acc", step=1)
    s.ask("value", tensor="acc", step=0)


@scenario
def entries_that_locate_no_record(s):
    """Index entries with a negative offset and an end past 2^64: errors of those tensors at
    that step only."""
    s.collections(["worker_0", "worker_1"], num_workers=2)
    for g in range(2):
        s.step("worker_0", g, model(g, 0))
        s.step("worker_1", g, model(g, 1))

    def bad(doc):
        for e in doc["tensor_payload"]:
            if e["tensorname"] == "loss":
                e["start_idx"] = -8
            if e["tensorname"] == "fc.weight":
                e["start_idx"] = 2**64 - 10

    s.edit_index(1, "worker_1", bad)
    s.end()
    s.open()
    s.ask("steps")
    s.ask("tensor_workers", tensor="loss", step=1)
    s.ask("value", tensor="loss", step=1, worker="worker_0")
    s.ask("value", tensor="loss", step=1)
    s.ask("value", tensor="loss", step=0, worker="worker_1")
    s.ask(
        "value",
        tensor="fc.weight",
        step=1,
        worker="worker_1",
        differs="smdebug seeks past the end of the file and fails parsing nothing "
        "(struct.error); smdebug_rs raises IndexReaderException naming the entry",
    )


@scenario
def string_tensors_of_every_shape_smdebug_writes(s):
    """1-D string tensors with empty strings and non-ASCII text; values per step."""
    s.collections(["worker_0"])
    s.step("worker_0", 0, {"words": np.array(["", "é", "naïve text", "∑"])})
    s.step("worker_0", 1, {"words": np.array(["a"]), "labels": np.array(["yes", "no"])})
    s.end()
    s.open()
    s.ask("value", tensor="words", step=0)
    s.ask("value", tensor="words", step=1)
    s.ask("values", tensor="words")
    s.ask("value", tensor="labels", step=1)
    s.ask("tensor_steps", tensor="labels")


@scenario
def an_ended_run_without_collections_files(s):
    """smdebug's create_trial needs the collections file: a run that ended without one is
    MissingCollectionFiles."""
    s.step("worker_0", 0, model(0))
    s.end()
    s.open()


@scenario
def an_ended_run_missing_a_workers_collections_file(s):
    """Two workers declared, one collections file, the run ended: MissingCollectionFiles."""
    s.collections(["worker_0"], num_workers=2)
    s.step("worker_0", 0, model(0))
    s.end()
    s.open()


@scenario
def an_ended_run_is_complete_from_the_first_query(s):
    """The end marker is read when smdebug_rs opens the trial; smdebug notices it at its first
    query. From then on both say every step is complete."""
    s.collections(["worker_0", "worker_1"], num_workers=2)
    for g in range(3):
        s.step("worker_0", g, model(g))
    s.end()
    s.open()
    s.ask(
        "loaded_all_steps",
        differs="smdebug notices the end marker at its first query; smdebug_rs when it opens",
    )
    s.ask("steps")
    s.ask("loaded_all_steps")
    s.ask("last_complete_step")
    s.ask("has_passed_step", step=1)


@scenario
def past_the_end_of_an_ended_run(s):
    """A finished run: steps past the last are UNAVAILABLE, waiting for them is NoMoreData
    (StepUnavailable for a skipped step before the last)."""
    s.collections(["worker_0"])
    for g in (0, 2, 4):
        s.step("worker_0", g, model(g), mode="TRAIN", mode_step=g // 2)
    s.end()
    s.open()
    s.ask("steps")
    s.ask("has_passed_step", step=99)
    s.ask("wait_for_steps", steps=[99])
    s.ask("wait_for_steps", steps=[1])
    s.ask("wait_for_steps", steps=[5], mode="TRAIN")
    s.ask("wait_for_steps", steps=[0, 1, 2], mode="TRAIN")
    s.ask("value", tensor="loss", step=99)
    s.ask("value", tensor="loss", step=1, mode="TRAIN")


@scenario
def global_mode_steps_are_not_a_mode(s):
    """Steps written in GLOBAL mode: modes() leaves GLOBAL out; global numbering reads them."""
    s.collections(["worker_0"])
    for g in range(3):
        s.step("worker_0", g, model(g))
    s.step("worker_0", 3, model(3), mode="TRAIN", mode_step=0)
    s.end()
    s.open()
    s.ask("modes")
    s.ask("steps")
    s.ask("steps", mode="TRAIN")
    s.ask("steps", mode="GLOBAL")
    s.ask("mode_modestep", step=1)
    s.ask("mode_modestep", step=3)
    s.ask("value", tensor="loss", step=0, mode="TRAIN")
    s.ask("value", tensor="loss", step=3)


@scenario
def mode_steps_of_an_incomplete_live_run(s):
    """Two workers, two modes, worker_1 behind: a mode's steps are those whose global step
    both wrote."""
    s.collections(["worker_0", "worker_1"], num_workers=2)
    for g in range(4):
        s.step("worker_0", g, model(g), mode="TRAIN", mode_step=g)
    for k, g in enumerate(range(4, 6)):
        s.step("worker_0", g, {"val_loss": loss_at(g)}, mode="EVAL", mode_step=k)
    for g in range(4):
        s.step("worker_1", g, model(g, 1), mode="TRAIN", mode_step=g)
    s.open()
    s.ask("steps", mode="EVAL")
    s.ask("steps", mode="TRAIN")
    s.ask("has_passed_step", step=0, mode="EVAL")
    s.ask(
        "tensor_steps",
        tensor="val_loss",
        mode="EVAL",
        differs="smdebug's Tensor.steps compares the EVAL step with the last complete global "
        "step (3) and lists EVAL steps 0 and 1; smdebug_rs keeps the steps whose global step "
        "is complete, as Trial.steps does",
    )
    s.ask("tensor_steps", tensor="val_loss", mode="EVAL", incomplete=True)
    s.step("worker_1", 4, {"val_loss": loss_at(4, 1)}, mode="EVAL", mode_step=0)
    s.ask("steps", mode="EVAL")
    s.ask("has_passed_step", step=0, mode="EVAL")


@scenario
def wait_for_steps_in_a_mode(s):
    """wait_for_steps of EVAL steps that are there: returns at once."""
    s.collections(["worker_0"])
    s.step("worker_0", 0, model(0), mode="TRAIN", mode_step=0)
    s.step("worker_0", 1, {"val_loss": loss_at(1)}, mode="EVAL", mode_step=0)
    s.step("worker_0", 2, model(2), mode="TRAIN", mode_step=1)
    s.open()
    s.ask("wait_for_steps", steps=[0], mode="EVAL")
    s.ask("wait_for_steps", steps=[0, 1], mode="TRAIN")
    s.ask("has_passed_step", step=1, mode="EVAL")


@scenario
def a_worker_catches_up_after_the_trial_opened(s):
    """Live, two workers: a step completes when the second worker's index file arrives, and a
    value that was not there appears."""
    s.collections(["worker_0", "worker_1"], num_workers=2)
    s.step("worker_0", 0, model(0, 0))
    s.open()
    s.ask("has_passed_step", step=0)
    s.ask("value", tensor="loss", step=0, worker="worker_1")
    s.step("worker_1", 0, model(0, 1))
    s.ask("has_passed_step", step=0)
    s.ask("value", tensor="loss", step=0, worker="worker_1")
    s.ask("steps")


@scenario
def a_run_that_ends_while_a_worker_is_behind(s):
    """The end marker completes the steps a worker never wrote."""
    s.collections(["worker_0", "worker_1"], num_workers=2)
    for g in range(3):
        s.step("worker_0", g, model(g, 0))
    s.step("worker_1", 0, model(0, 1))
    s.open()
    s.ask("steps")
    s.ask("value", tensor="loss", step=2, worker="worker_1")
    s.end()
    s.ask("steps")
    s.ask("has_passed_step", step=2)
    s.ask("value", tensor="loss", step=2, worker="worker_1")
    s.ask("tensor_workers", tensor="loss", step=2)


@scenario
def many_steps_many_index_directories(s):
    """Steps on both sides of a thousand (two index directories)."""
    s.collections(["worker_0"])
    for g in (0, 999, 1000, 1001, 2500):
        s.step("worker_0", g, {"loss": loss_at(g)})
    s.open()
    s.ask("steps")
    s.ask("has_passed_step", step=1500)
    s.ask("value", tensor="loss", step=1000)
    s.step("worker_0", 3000, {"loss": loss_at(3000)})
    s.ask("steps")
    s.ask("has_passed_step", step=2999)


@scenario
def values_of_a_tensor_in_a_mode(s):
    """Tensor.values per mode and per worker."""
    s.collections(["worker_0", "worker_1"], num_workers=2)
    for g in range(3):
        for w in range(2):
            s.step(f"worker_{w}", g, model(g, w), mode="TRAIN", mode_step=g)
    for w in range(2):
        s.step(f"worker_{w}", 3, model(3, w), mode="EVAL", mode_step=0)
    s.end()
    s.open()
    s.ask("values", tensor="loss", mode="TRAIN")
    s.ask("values", tensor="loss", mode="EVAL", worker="worker_1")
    s.ask("values", tensor="loss")


@scenario
def a_step_whose_workers_disagree_on_values_reads_the_first_worker(s):
    """Without a worker, a value is the first worker's (in name order)."""
    s.collections(["worker_1", "worker_0"], num_workers=2)
    s.step("worker_1", 0, {"loss": scalar(1.0)})
    s.step("worker_0", 0, {"loss": scalar(2.0)})
    s.end()
    s.open()
    s.ask("value", tensor="loss", step=0)
    s.ask("tensor_workers", tensor="loss", step=0)
    s.ask("workers")


@scenario
def string_tensors_beside_numbers_in_a_live_run(s):
    """String tensors arriving step by step, read as they come."""
    s.collections(["worker_0"], collections={"trees": ([], ["^trees/"])})
    s.open()
    s.ask("tensor_names")
    s.step("worker_0", 0, {"trees/Feature": np.array(["f1", "Leaf"]), "trees/Gain": f32(2.5, 0)})
    s.ask("value", tensor="trees/Feature", step=0)
    s.ask("tensor_names", collection="trees")
    s.step("worker_0", 1, {"trees/Feature": np.array(["f2", "f0", "Leaf"])})
    s.ask("values", tensor="trees/Feature")


@scenario
def a_placeholder_in_a_live_run(s):
    """A placeholder entry in step 1 of a live run: step 1's other tensors read, later steps
    arrive."""
    s.collections(["worker_0"])
    for g in range(2):
        s.step("worker_0", g, model(g))
    s.edit_index(
        1, "worker_0", lambda d: d["tensor_payload"].insert(0, {"tensorname": "ph", "start_idx": 0, "length": 1})
    )
    s.open()
    s.ask("steps")
    s.ask("value", tensor="fc.weight", step=1)
    s.step("worker_0", 2, model(2))
    s.ask("steps")
    s.ask("tensor_steps", tensor="ph")


@scenario
def refresh_turned_off_hides_steps_written_after(s):
    """dynamic_refresh = False (what smdebug's no_refresh sets): steps, tensors and step states
    stay what the trial had read while more steps are written; turned on again, queries see
    them."""
    s.collections(["worker_0"])
    for g in range(4):
        s.step("worker_0", g, model(g), mode="TRAIN", mode_step=g)
    s.open()
    s.ask("steps")
    s.ask("set_dynamic_refresh", on=False)
    for g in range(4, 8):
        s.step("worker_0", g, model(g), mode="TRAIN", mode_step=g)
    s.step("worker_0", 8, {"val_loss": loss_at(8)}, mode="EVAL", mode_step=0)
    s.ask("steps")
    s.ask("steps", mode="TRAIN")
    s.ask("modes")
    s.ask("tensor_names")
    s.ask("has_tensor", tensor="val_loss")
    s.ask("tensor_steps", tensor="loss")
    s.ask("has_passed_step", step=5)
    s.ask("value", tensor="loss", step=5)
    s.ask("value", tensor="loss", step=2)
    s.ask("set_dynamic_refresh", on=True)
    s.ask("steps")
    s.ask("tensor_steps", tensor="loss")
    s.ask("has_passed_step", step=5)
    s.ask("value", tensor="loss", step=5)
    s.ask("tensor_names")


@scenario
def an_index_file_naming_no_event_file(s):
    """Step 1's index file has an empty event_file_name (hand-made and placeholder runs write
    one): the run opens on both readers, step 1 and its tensors are listed, and only the reads
    of step 1 fail."""
    s.collections(["worker_0"])
    for g in range(3):
        s.step("worker_0", g, model(g))
    s.edit_index(1, "worker_0", lambda d: d["meta"].update(event_file_name=""))
    s.end()
    s.open()
    s.ask("tensor_names")
    s.ask("steps")
    s.ask("tensor_steps", tensor="loss")
    s.ask("tensor_workers", tensor="loss", step=1)
    s.ask("value", tensor="loss", step=0)
    s.ask(
        "value",
        tensor="loss",
        step=1,
        differs="smdebug reads the run's directory as the event file (IsADirectoryError); "
        "smdebug_rs raises IndexReaderException naming the index file and the entry",
    )
    s.ask("value", tensor="loss", step=2)
    s.ask("values", tensor="fc.weight", differs="smdebug's values() fails at step 1 as value() does; "
          "smdebug_rs's raises IndexReaderException")


def run_scenario(fn, readers, workdir, stage_out=None):
    """Runs scenario `fn` in `workdir`; returns the Script (its ops and mismatches)."""
    s = Script(fn.__name__, os.path.join(workdir, fn.__name__), readers, stage_out)
    fn(s)
    return s


def write_all(out_dir, only=None):
    """Writes every scenario's stages and answers into `out_dir`; the mismatches (none when
    the readers agree wherever the scenarios say they do)."""
    readers = [python_reader(), rs_reader()]
    os.makedirs(out_dir, exist_ok=True)
    mismatches = []
    with tempfile.TemporaryDirectory() as work:
        for fn in SCENARIOS:
            if only and fn.__name__ not in only:
                continue
            shutil.rmtree(os.path.join(out_dir, fn.__name__), ignore_errors=True)
            s = run_scenario(fn, readers, work, stage_out=out_dir)
            mismatches += s.mismatches
            with open(os.path.join(out_dir, f"{fn.__name__}.json"), "w") as f:
                json.dump(s.record((fn.__doc__ or "").strip()), f, indent=1, sort_keys=True)
                f.write("\n")
    return mismatches


def quiet():
    os.environ.setdefault("SMDEBUG_TRAINING_END_DELAY_REFRESH", "0")
    os.environ.setdefault("SMDEBUG_LOG_LEVEL", "error")


def main(argv):
    quiet()
    if argv[:1] == ["--list"]:
        for fn in SCENARIOS:
            print(f"{fn.__name__}: {(fn.__doc__ or '').strip().splitlines()[0]}")
        return 0
    if len(argv) >= 2 and argv[0] == "--write":
        mismatches = write_all(argv[1], set(argv[2:]))
        for m in mismatches:
            print(f"FAIL: {m}")
        return 1 if mismatches else 0
    if len(argv) == 2 and argv[0] == "--check":
        with tempfile.TemporaryDirectory() as tmp:
            mismatches = write_all(tmp)
            for m in mismatches:
                print(f"FAIL: {m}")
            diff = os.system(f"diff -r {tmp} {argv[1]} >/dev/null")
            if diff != 0 or mismatches:
                print(f"FAIL: {argv[1]} differs from what the scenarios write now")
                return 1
        print(f"OK: {len(SCENARIOS)} scenarios, {argv[1]} is what they write")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
