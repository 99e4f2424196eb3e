"""smdebug_rs reads what Python smdebug 1.0.34 reads: for every run under
smdebug-io/tests/data (and the demo run), the same names, steps, modes, workers and
collections, bit-identical values for every tensor, mode, step and worker (NaN = NaN, the sign
of zero included), the same reductions, and the same exceptions for what is not there.

Where smdebug 1.0.34 cannot read a value (its reader maps no dtype for int16/uint16/uint32/
uint64, reads int8 as uint8, fails on empty tensors and on real payload CRCs; see
DEVELOPERS.md), the value is compared with the run's expected.json written with the run, and
the test counts those separately."""

import json
import math

import numpy as np
import pytest

from conftest import need, smdebug_runs
from smdebug_rs import exceptions as rs_exceptions
from smdebug_rs.trials import create_trial as rs_create_trial


def _open_ours(run):
    return rs_create_trial(str(run))


def _modes(sm_modes):
    return sorted(m.name for m in sm_modes)


def _expected_values(run):
    """{(name, global step, worker): (dtype, shape, values)} from <run>.expected.json."""
    path = run.parent / f"{run.name}.expected.json"
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    return {
        (t["name"], t["step"], t["worker"]): (t["dtype"], t["shape"], t["values"])
        for t in doc.get("tensors", [])
    }


def _as_expected_array(dtype, shape, values):
    special = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
    flat = [special.get(v, v) if isinstance(v, str) else v for v in values]
    return np.array(flat, dtype=dtype).reshape(shape)


def _same_bits(ours, theirs):
    return ours.dtype == theirs.dtype and ours.shape == theirs.shape and ours.tobytes() == theirs.tobytes()


class Tally:
    def __init__(self):
        self.equal = 0
        self.int8_as_uint8 = 0
        self.via_expected = 0
        self.strings_refused = 0


def _compare_value(tally, ours, read_theirs, expected, key):
    """Compares one value; `read_theirs` reads smdebug's."""
    try:
        theirs = read_theirs()
    except (KeyError, NameError, ValueError) as gap:
        theirs = gap
    if isinstance(theirs, np.ndarray) and ours.dtype == np.int8 and theirs.dtype == np.uint8:
        # smdebug 1.0.34 maps DT_INT8 to uint8: the same bytes, read unsigned.
        assert ours.view(np.uint8).tobytes() == theirs.tobytes() and ours.shape == theirs.shape, key
        tally.int8_as_uint8 += 1
        return
    if isinstance(theirs, np.ndarray):
        assert _same_bits(ours, np.asarray(theirs)), (key, ours, theirs)
        tally.equal += 1
        return
    # smdebug cannot read this value (None for empty int tensors, or an exception): compare with
    # the value the run's generator recorded.
    assert key in expected, f"smdebug could not read {key} ({theirs!r}) and no expected.json has it"
    dtype, shape, values = expected[key]
    want = _as_expected_array(dtype, shape, values)
    assert _same_bits(ours, want), (key, ours, want)
    tally.via_expected += 1


def _runs_and_demo():
    return [pytest.param(r, id=r.name) for r in smdebug_runs()] + [pytest.param("demo", id="demo")]


@pytest.mark.parametrize("run", _runs_and_demo())
def test_every_value_equals_smdebug(run, request):
    need("smdebug.trials")
    from smdebug.trials import create_trial as sm_create_trial

    if run == "demo":
        run = request.getfixturevalue("demo_run")
    sm = sm_create_trial(str(run))
    rs = _open_ours(run)

    assert rs.tensor_names() == sm.tensor_names()
    assert rs.workers() == sm.workers()
    assert _modes(rs.modes()) == _modes(sm.modes())
    assert rs.loaded_all_steps == sm.loaded_all_steps
    sm_colls, rs_colls = sm.collections(), rs.collections()
    assert sorted(rs_colls) == sorted(sm_colls)
    for name, coll in sm_colls.items():
        assert rs_colls[name].tensor_names == set(coll.tensor_names), name
        assert rs_colls[name].include_regex == list(coll.include_regex), name
        assert rs.tensor_names(collection=name) == sm.tensor_names(collection=name), name

    from smdebug import modes as sm_modes

    all_modes = [sm_modes.GLOBAL] + list(sm.modes())
    for mode in all_modes:
        assert rs.steps(mode=mode) == sm.steps(mode=mode), mode
        assert rs.tensor_names(mode=mode) == sm.tensor_names(mode=mode), mode
    for g in sm.steps():
        assert rs.tensor_names(step=g) == sm.tensor_names(step=g), g
        mode, mode_step = sm.mode_modestep(g)
        assert rs.mode_modestep(g)[0].name == mode.name and rs.mode_modestep(g)[1] == mode_step

    expected = _expected_values(run)
    tally = Tally()
    reductions = 0
    for name in sm.tensor_names():
        sm_t, rs_t = sm.tensor(name), rs.tensor(name)
        for mode in all_modes:
            steps = sm_t.steps(mode=mode)
            assert rs_t.steps(mode=mode) == steps, (name, mode)
            for step in steps:
                workers = sorted(sm_t.workers(step, mode=mode))
                assert sorted(rs_t.workers(step, mode=mode)) == workers, (name, mode, step)
                global_step = step if mode == sm_modes.GLOBAL else sm.global_step(mode, step)
                for worker in workers:
                    try:
                        ours = rs_t.value(step, mode=mode, worker=worker)
                    except rs_exceptions.TensorUnavailableForStep as e:
                        # Only reductions were saved: smdebug says the same.
                        with pytest.raises(Exception) as theirs:
                            sm_t.value(step, mode=mode, worker=worker)
                        assert type(theirs.value).__name__ == "TensorUnavailableForStep"
                        assert str(theirs.value) == str(e)
                    except rs_exceptions.SMDebugRuntimeError as e:
                        # The Rust reader has no string dtype yet (XGBoost's `trees/*` text
                        # columns): it must say so clearly, and only for what smdebug reads as
                        # strings.
                        assert "string tensors are not supported" in str(e), str(e)
                        theirs = np.asarray(sm_t.value(step, mode=mode, worker=worker))
                        assert theirs.dtype.kind in "OSU", (name, theirs.dtype)
                        tally.strings_refused += 1
                    else:
                        _compare_value(
                            tally,
                            ours,
                            lambda: sm_t.value(step, mode=mode, worker=worker),
                            expected,
                            (name, global_step, worker),
                        )
                    for (red, abs_), ours_red in rs_t.reduction_values(step, mode=mode, worker=worker).items():
                        theirs_red = sm_t.reduction_value(step, red, mode=mode, worker=worker, abs=abs_)
                        assert _same_bits(np.asarray(ours_red), np.asarray(theirs_red)), (name, red, abs_, step)
                        reductions += 1
    assert tally.equal + tally.int8_as_uint8 + tally.via_expected > 0, "no value compared"
    print(
        f"{run.name}: {tally.equal} values bit-identical to smdebug's, {tally.int8_as_uint8} int8 "
        f"(smdebug reads uint8), {tally.via_expected} compared with expected.json where smdebug "
        f"1.0.34 cannot read; {reductions} saved reductions identical; {tally.strings_refused} "
        f"string values refused (no string dtype in the Rust reader yet)"
    )


def _raised(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the point is which exception
        return type(e).__name__, str(e)
    return None


@pytest.mark.parametrize("run", [pytest.param(r, id=r.name) for r in smdebug_runs()])
def test_missing_data_raises_what_smdebug_raises(run):
    need("smdebug.trials")
    from smdebug import modes as sm_modes
    from smdebug.trials import create_trial as sm_create_trial

    from smdebug_rs import modes as rs_modes

    sm = sm_create_trial(str(run))
    rs = _open_ours(run)
    cases = 0
    assert _raised(lambda: rs.tensor("no/such/tensor")) == _raised(lambda: sm.tensor("no/such/tensor"))
    steps = sm.steps()
    beyond = steps[-1] + 5
    for name in sm.tensor_names():
        sm_t, rs_t = sm.tensor(name), rs.tensor(name)
        saved = set(sm_t.steps())
        probes = [s for s in steps if s not in saved][:2] + [beyond]
        for step in probes:
            theirs = _raised(lambda: sm_t.value(step))
            assert theirs is not None
            assert _raised(lambda: rs_t.value(step)) == theirs, (name, step)
            cases += 1
        for m_sm, m_rs in [(sm_modes.TRAIN, rs_modes.TRAIN), (sm_modes.EVAL, rs_modes.EVAL)]:
            if m_sm not in sm.modes():
                continue
            last = sm.steps(mode=m_sm)[-1]
            assert _raised(lambda: rs_t.value(last + 3, mode=m_rs)) == _raised(
                lambda: sm_t.value(last + 3, mode=m_sm)
            ), (name, m_sm)
            cases += 1
        if saved:
            s = min(saved)
            assert _raised(lambda: rs_t.value(s, worker="worker_99")) == _raised(
                lambda: sm_t.value(s, worker="worker_99")
            ), name
            cases += 1
    assert cases > 0
