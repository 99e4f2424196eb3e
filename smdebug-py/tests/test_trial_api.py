"""The smdebug.trials API on the golden runs, without Python smdebug: runs in every venv (numpy
1.x with protobuf 3, numpy 2 with protobuf 5). Expected values come from the runs'
expected.json, written by the generator that wrote the runs with Python smdebug 1.0.34."""

import json
import math
import os
import subprocess
import sys

import numpy as np

import pytest

from conftest import RUN_DATA
import smdebug_rs
from smdebug_rs import exceptions, modes
from smdebug_rs.trials import create_trial

GOLDEN = RUN_DATA / "golden"
MULTI = GOLDEN / "pysmdebug_multi"


@pytest.fixture(scope="module")
def multi():
    return create_trial(str(MULTI))


@pytest.fixture(scope="module")
def expected():
    return json.loads((GOLDEN / "pysmdebug_multi.expected.json").read_text())


def test_needs_no_protobuf_and_no_smdebug():
    # A fresh interpreter: other tests of this session import smdebug. With smdebug installed,
    # smdebug_rs shares its classes (test_identity.py) unless SMDEBUG_RS_STANDALONE is set;
    # either way it imports no protobuf of its own.
    code = (
        "import sys; from smdebug_rs.trials import create_trial; "
        f"t = create_trial({str(MULTI)!r}); t.tensor('loss').value(0); "
        "assert not [m for m in sys.modules if m == 'smdebug' or m.startswith(('google.protobuf', 'smdebug.'))]"
    )
    env = {**os.environ, "SMDEBUG_RS_STANDALONE": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr


def test_run_summary_matches_expected(multi, expected):
    run = expected["run"]
    assert multi.workers() == run["workers"]
    assert multi.num_workers == run["num_workers"]
    assert multi.loaded_all_steps is run["complete"]
    assert sorted(m.name for m in multi.modes()) == sorted(run["modes"])
    assert multi.steps() == run["steps"]["GLOBAL"]
    assert multi.steps(mode=modes.TRAIN) == run["steps"]["TRAIN"]
    assert multi.steps(modes.EVAL) == run["steps"]["EVAL"]
    assert sorted(multi.collections()) == sorted(run["collections"])


def test_values_have_their_dtype_shape_and_bits(multi, expected):
    special = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
    checked = 0
    for rec in expected["tensors"]:
        if rec["name"].startswith("smdebug/reductions/"):
            continue
        got = multi.tensor(rec["name"]).value(rec["step"], worker=rec["worker"])
        want = np.array(
            [special.get(v, v) if isinstance(v, str) else v for v in rec["values"]], dtype=rec["dtype"]
        ).reshape(rec["shape"])
        assert got.dtype == want.dtype and got.shape == want.shape, rec["name"]
        assert got.tobytes() == want.tobytes(), rec["name"]
        checked += 1
    assert checked > 100


def test_mode_steps_and_global_steps_read_the_same_value(multi):
    loss = multi.tensor("loss")
    for mode_step in loss.steps(mode=modes.TRAIN):
        g = multi.global_step(modes.TRAIN, mode_step)
        assert multi.mode_modestep(g) == (modes.TRAIN, mode_step)
        assert loss.value(mode_step, mode=modes.TRAIN).tobytes() == loss.value(g).tobytes()
    # Python smdebug's own ModeKeys and plain names work too.
    assert loss.steps(mode="train") == loss.steps(mode=modes.TRAIN)


def test_values_returns_every_step(multi):
    loss = multi.tensor("loss")
    values = loss.values(mode=modes.TRAIN)
    assert list(values) == loss.steps(mode=modes.TRAIN)
    assert all(v.dtype == np.float32 and v.shape == () for v in values.values())


def test_regex_and_collection_filters(multi):
    assert multi.tensor_names(regex="^gradient/") == ["gradient/fc1.bias", "gradient/fc1.weight"]
    assert multi.tensor_names(regex=["^loss$", r"fc1\.bias$"]) == ["fc1.bias", "gradient/fc1.bias", "loss"]
    assert multi.tensor_names(collection="losses") == ["loss"]
    assert multi.tensor_names(collection=multi.collection("gradients")) == [
        "gradient/fc1.bias",
        "gradient/fc1.weight",
    ]
    with pytest.raises(ValueError):
        multi.tensor_names(regex="x", collection="losses")
    # smdebug's CollectionManager makes an unknown collection, empty: no names.
    assert multi.tensor_names(collection="no_such_collection") == []
    assert multi.collection("no_such_collection").tensor_names == set()


def test_saved_and_computed_reductions(multi):
    w = multi.tensor("fc2.weight")
    # Only reductions of fc2.weight were saved: its value is unavailable, with smdebug's hint.
    with pytest.raises(exceptions.TensorUnavailableForStep) as e:
        w.value(0)
    assert e.value.has_reductions and "reductions saved" in str(e.value)
    l2 = w.reduction_value(0, "l2", abs=True)
    assert l2.dtype == np.float32 and l2.shape == ()
    assert set(w.reduction_values(0)) == {
        ("mean", False),
        ("max", False),
        ("l2", False),
        ("mean", True),
        ("l2", True),
    }
    # A reduction that was not saved is computed from the value, as smdebug does.
    fc1 = multi.tensor("fc1.weight")
    assert fc1.reduction_value(0, "max") == np.amax(fc1.value(0))
    assert fc1.reduction_value(0, "mean", abs=True) == np.mean(np.abs(fc1.value(0)))


def test_errors_are_smdebugs(multi):
    with pytest.raises(exceptions.TensorUnavailable):
        multi.tensor("no/such/tensor")
    # Global step 6 is an EVAL step, where only the loss of the model tensors was saved.
    with pytest.raises(exceptions.TensorUnavailableForStep):
        multi.tensor("fc1.weight").value(6)
    loss = multi.tensor("loss")
    assert multi.has_passed_step(11) == smdebug_rs.StepState.AVAILABLE
    assert multi.has_passed_step(500) == smdebug_rs.StepState.UNAVAILABLE
    with pytest.raises(exceptions.StepUnavailable):
        loss.value(500)
    with pytest.raises(exceptions.InvalidWorker):
        loss.value(0, worker="worker_9")
    with pytest.raises(exceptions.NoMoreData):
        multi.wait_for_steps([500])
    multi.wait_for_steps([0, 11])
    assert issubclass(exceptions.SMDebugRuntimeError, RuntimeError)


def test_incomplete_run_waits_with_a_timeout():
    trial = create_trial(str(GOLDEN / "pysmdebug_incomplete"))
    assert not trial.is_complete() and not trial.loaded_all_steps
    assert trial.has_passed_step(10) == smdebug_rs.StepState.NOT_YET_AVAILABLE
    with pytest.raises(exceptions.StepNotYetAvailable):
        trial.tensor(trial.tensor_names()[0]).value(10)
    with pytest.raises(exceptions.StepNotYetAvailable):
        trial.wait_for_steps([10], timeout=0.3)


def test_missing_run_is_a_clear_error_when_not_waiting(tmp_path):
    with pytest.raises(exceptions.SMDebugRuntimeError, match="no smdebug run"):
        create_trial(str(tmp_path / "nothing-here"), wait_for_collections=False)


def test_create_trial_waits_for_the_collections_file_as_smdebug_does(tmp_path):
    """Like smdebug's create_trial, ours waits for the run's collections file (the trial may
    be made before the training job writes anything), and opens once it is there."""
    import threading

    run = tmp_path / "run"
    opened = {}

    def open_it():
        try:
            opened["trial"] = create_trial(str(run))
        except Exception as e:  # reported below
            opened["error"] = e

    waiter = threading.Thread(target=open_it, daemon=True)
    waiter.start()
    folder = run / "collections" / "000000000"
    folder.mkdir(parents=True)
    doc = '{"collections": {}, "_meta": {"num_workers": 1}}'
    # Written aside and renamed, as smdebug's writers publish files.
    (folder / ".partial").write_text(doc)
    os.replace(folder / ".partial", folder / "worker_0_collections.json")
    waiter.join(timeout=60)
    assert not waiter.is_alive(), "create_trial did not return once the collections file was there"
    assert "error" not in opened, opened
    assert opened["trial"].steps() == []
    assert opened["trial"].workers() == ["worker_0"]


def test_a_run_that_ended_without_its_collections_file_is_missing_collection_files(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "training_job_end.ts").write_text("")
    with pytest.raises(exceptions.MissingCollectionFiles):
        create_trial(str(run))


def _assert_own_writable(arr):
    # Aligned, C-ordered and writable, as smdebug's arrays are. Like smdebug's (a reshaped
    # copy), an array may have a base: the memory it was decoded into, which it alone uses.
    assert arr.flags.writeable and arr.flags.c_contiguous and arr.flags.aligned
    if arr.base is not None:
        assert not isinstance(arr.base, np.ndarray), type(arr.base)


def test_values_are_writable_arrays_of_their_own(multi):
    t = multi.tensor("fc1.weight")
    steps = t.steps()
    v = t.value(steps[0])
    _assert_own_writable(v)
    again = t.value(steps[0])
    assert not np.shares_memory(v, again)
    v[...] = 0
    assert np.array_equal(t.value(steps[0]), again) and again.any()
    # Read value by value in order, the values are decoded ahead and handed over without a
    # copy: each still shares its memory with nothing, and writing one changes no other read.
    first = [t.value(s) for s in steps]
    second = [t.value(s) for s in steps]
    for a, b in zip(first, second):
        _assert_own_writable(a)
        assert not np.shares_memory(a, b)
        assert np.array_equal(a, b)
    for a in first:
        a[...] = -1
    assert all(np.array_equal(b, t.value(s)) for b, s in zip(second, steps))
    for arr in t.values().values():
        _assert_own_writable(arr)


def _hook_run_with_weights_pattern(tmp_path, pattern):
    # A run of the real PyTorch hook (default collections), its `weights` pattern replaced.
    import shutil

    run = tmp_path / "pt_healthy"
    shutil.copytree(RUN_DATA / "hooks" / "pt_healthy", run)
    coll = run / "collections" / "000000000" / "worker_0_collections.json"
    doc = json.loads(coll.read_text())
    doc["collections"]["weights"]["include_regex"] = [pattern]
    coll.write_text(json.dumps(doc))
    return str(run)


WEIGHTS = ["Net_fc1.weight", "Net_fc2.weight", "Net_fc3.weight"]


def test_collection_patterns_are_pythons_own(tmp_path, caplog):
    # The ASCII flag: Python's `re` takes it, the Rust engines do not. Here it is applied as
    # Python smdebug applies it (a search anywhere in the name), and nothing is logged.
    import logging

    run = _hook_run_with_weights_pattern(tmp_path, "(?a)weight")
    with caplog.at_level(logging.WARNING, logger="smdebug_rs"):
        trial = create_trial(run)
        names = trial.tensor_names(collection="weights")
    assert names == sorted(WEIGHTS + ["gradient/" + w for w in WEIGHTS])
    assert trial.warnings() == []
    assert [r for r in caplog.records if r.name == "smdebug_rs"] == []


def test_a_pattern_no_engine_takes_is_one_logged_warning(tmp_path, caplog):
    # A pattern Python rejects too: smdebug would raise; here the collection keeps the names
    # its file lists, and the pattern is one warning, logged once however often it is asked.
    import logging

    run = _hook_run_with_weights_pattern(tmp_path, "(?<!fc")
    with caplog.at_level(logging.WARNING, logger="smdebug_rs"):
        trial = create_trial(run)
        assert trial.tensor_names(collection="weights") == WEIGHTS
        trial.refresh()
        warnings = trial.warnings()
        assert trial.warnings() == warnings
    assert len(warnings) == 1 and "(?<!fc" in warnings[0], warnings
    logged = [r.getMessage() for r in caplog.records if r.name == "smdebug_rs"]
    assert len(logged) == 1 and "(?<!fc" in logged[0], logged
    assert create_trial(str(RUN_DATA / "hooks" / "pt_healthy")).warnings() == []


def test_a_name_repeated_in_many_index_files_is_one_warning(caplog):
    # smdebug's Keras hook lists an epoch's metrics twice in the epoch's last step (steps 4 and
    # 9 here): one warning per name, counting the other files, logged once however often asked.
    import logging

    with caplog.at_level(logging.WARNING, logger="smdebug_rs"):
        trial = create_trial(str(RUN_DATA / "hooks" / "tf_keras"))
        trial.refresh()
        warnings = trial.warnings()
        assert trial.warnings() == warnings
    assert len(warnings) == 3, warnings
    for name, line in zip(["accuracy", "batch", "loss"], warnings):
        assert line.startswith("index/000000000/000000000004_worker_0.json: tensor `%s`" % name), line
        assert line.endswith("(1 more index file lists `%s` twice; its later entry is read too)" % name), line
    logged = [r.getMessage() for r in caplog.records if r.name == "smdebug_rs"]
    assert len(logged) == 3 and all("000000000004_worker_0.json" in m for m in logged), logged


# ---- reading event files ahead of a value(step) loop ----


def _every_value(trial, order):
    """Each value of ``order`` (name, step) as (dtype, shape, bytes), or its exception's type
    and text."""
    out = []
    for name, step in order:
        try:
            v = trial.tensor(name).value(step)
            out.append((str(v.dtype), v.shape, v.tobytes()))
        except Exception as e:  # noqa: BLE001 - the exception is what is compared
            out.append((type(e).__name__, str(e)))
    return out


def test_reading_ahead_gives_the_values_and_errors_reading_without_it_gives(tmp_path):
    """``read_ahead`` (on by default) reads the next event files on other threads while a loop
    asks for values step after step; it changes nothing a read gives, in the orders notebooks
    use, also for event files deleted or cut short after the trial was opened (the same
    exception, naming the file)."""
    import crafted

    names = ["a", "b", "gradient/c"]
    # Longer than a window of files read ahead (256), so the window moves on.
    run = crafted.long_run(tmp_path, 600, names)
    ahead = create_trial(str(run), wait_for_collections=False)
    plain = create_trial(str(run), wait_for_collections=False, read_ahead=False)
    steps = ahead.steps()
    assert steps == list(range(600))
    # After both opened: one step's event file deleted, another's cut to half.
    gone, cut = 100, 200
    event = lambda s: run / f"events/{s:012}/{s:012}_worker_0.tfevents"  # noqa: E731
    event(gone).unlink()
    with open(event(cut), "r+b") as f:
        f.truncate(event(cut).stat().st_size // 2)
    by_tensor = [(n, s) for n in names for s in steps]
    by_step = [(n, s) for s in steps for n in names]
    for order in (by_tensor, by_tensor, by_step, by_tensor[::-1], by_tensor[::7]):
        assert _every_value(ahead, order) == _every_value(plain, order)
    got = _every_value(ahead, by_tensor)
    failed = [(ask, r) for ask, r in zip(by_tensor, got) if len(r) == 2]
    # Every tensor of the deleted step; of the cut step, those past the cut.
    assert {s for (_, s), _ in failed} == {gone, cut}, failed
    assert all(event(s).name in text for (_, s), (_, text) in failed), failed
    ok = [r for r in got if len(r) == 3]
    assert len(ok) + len(failed) == len(by_tensor) and len(ok) >= len(by_tensor) - 2 * len(names)
    a_50 = np.frombuffer(dict(zip(by_tensor, got))[("a", 50)][2], dtype=np.float32)
    assert a_50.tolist() == [50.0, 50.25, 50.5, 50.75]


def test_value_takes_modes_as_before(multi):
    """Tensor.value is the native class's: modes as ModeKeys members (ours or smdebug's), names
    in any case, None; anything else is the TypeError it was."""
    loss = multi.tensor("loss")
    step = loss.steps(mode=modes.TRAIN)[0]
    want = loss.value(step, mode=modes.TRAIN).tobytes()
    for mode in (modes.TRAIN, "train", "TRAIN"):
        assert loss.value(step, mode=mode).tobytes() == want
        assert loss.value(step, mode).tobytes() == want
    g = multi.global_step(modes.TRAIN, step)
    assert loss.value(g, mode=None).tobytes() == loss.value(g, modes.GLOBAL).tobytes() == want
    with pytest.raises(TypeError):
        loss.value(step, mode=3)
    with pytest.raises(ValueError):
        loss.value(step, mode="nonsense")
    with pytest.raises(exceptions.TensorUnavailableForStep):
        multi.tensor("fc1.weight").value(6, mode=None)
