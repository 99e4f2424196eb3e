"""Runs that try to crash or starve the interpreter: records that claim huge tensors, shapes
numpy refuses, event files cut short while open, and rules that raise KeyboardInterrupt or
SystemExit. Each case is a crafted run (tests/crafted.py); the interpreter must survive with a
typed Python exception (or the correct data), never an abort, a signal or a PanicException."""

import os
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import crafted
from conftest import RUN_DATA
from smdebug_rs import exceptions, rules
from smdebug_rs.trials import create_trial

MULTI = RUN_DATA / "golden" / "pysmdebug_multi"
EVENT_FILE = "events/000000000000/000000000000_worker_0.tfevents"


def _in_child(code: str, *args: str):
    """Runs ``code`` in a fresh interpreter (a crash there cannot take pytest down); returns the
    completed process. The child prints ``PEAK <bytes>``, its peak RSS, when asked."""
    prelude = textwrap.dedent(
        """
        import resource, sys
        def peak():
            # ru_maxrss is in KiB on Linux.
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        """
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


# ---- the allocation budget ----


@pytest.mark.parametrize(
    "dtype,fill,itemsize,n",
    [
        (crafted.DT_UINT8, 7, 1, 3 << 28),
        (crafted.DT_BOOL, 1, 1, 1 << 29),
        (crafted.DT_HALF, 0x3C00, 2, 1 << 29),
    ],
)
def test_a_fill_record_whose_numpy_copy_is_over_the_budget_is_a_memory_error(tmp_path, dtype, fill, itemsize, n):
    # 768 MiB of uint8, 512 MiB of bool, 1 GiB of half as stored: inside the default 1 GiB
    # budget; the numpy copy doubles that (bool and half go through a copy of their own, 2 bytes
    # an element more).
    run = crafted.one_record_run(tmp_path, "mask", crafted.tensor_proto(dtype, [n], fill=fill))
    assert (run / EVENT_FILE).stat().st_size < 100
    child = _in_child(
        """
        from smdebug_rs.trials import create_trial
        from smdebug_rs.exceptions import TensorTooLarge, SMDebugError
        trial = create_trial(sys.argv[1], wait_for_collections=False)
        before = peak()
        for read in (lambda: trial.tensor("mask").value(0), lambda: trial.tensor("mask").values()):
            try:
                read()
                print("READ")
            except TensorTooLarge as e:
                assert isinstance(e, MemoryError) and isinstance(e, SMDebugError)
                print("ERROR", e)
        print("PEAK", before, peak())
        """,
        str(run),
    )
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    errors = [line for line in lines if line.startswith("ERROR")]
    assert len(errors) == 2, child.stdout
    claimed = n * (itemsize + (2 if dtype in (crafted.DT_BOOL, crafted.DT_HALF) else itemsize))
    for part in (EVENT_FILE, "`mask`", str(claimed), "max_tensor_bytes"):
        assert part in errors[0], (part, errors[0])
    before, after = (int(x) for x in lines[-1].split()[1:])
    # Generous: a decode of the stored size alone would be 512 MiB.
    assert after - before < 64 << 20, (before, after)


def test_max_tensor_bytes_is_where_the_line_is(tmp_path):
    run = crafted.one_record_run(tmp_path, "mask", crafted.tensor_proto(crafted.DT_UINT8, [1000], fill=7))
    # 1000 bytes decoded + 1000 bytes of numpy array.
    value = create_trial(str(run), wait_for_collections=False, max_tensor_bytes=2000).tensor("mask").value(0)
    assert value.dtype == np.uint8 and value.shape == (1000,) and (value == 7).all()
    with pytest.raises(MemoryError) as err:
        create_trial(str(run), wait_for_collections=False, max_tensor_bytes=1999).tensor("mask").value(0)
    assert isinstance(err.value, exceptions.TensorTooLarge)
    assert "limit of 1999 bytes" in str(err.value)
    with pytest.raises(exceptions.SMDebugValueError):
        create_trial(str(run), wait_for_collections=False, max_tensor_bytes=-1)


def test_rules_count_the_budget_too(tmp_path):
    run = crafted.one_record_run(tmp_path, "mask", crafted.tensor_proto(crafted.DT_UINT8, [1000], fill=0))
    ok = rules.run(str(run), ["AllZero:tensor_regex=mask"]).rule("AllZero")
    assert ok.status == "IssuesFound", ok.message
    # As f64: 1000 * (1 + 8) bytes.
    over = rules.run(str(run), ["AllZero:tensor_regex=mask"], max_tensor_bytes=8999).rule("AllZero")
    assert over.status == "Error" and "`mask`" in over.message and "f64" in over.message, over.message


# ---- shapes numpy refuses ----


@pytest.mark.parametrize(
    "dims",
    [[2**62, 0], [2**31, 2**31, 0], [1] * 69 + [0], [1] * 70],
    ids=["2^62x0", "2^31x2^31x0", "70-dims-empty", "70-dims"],
)
def test_shapes_numpy_refuses_are_typed_errors(tmp_path, dims):
    n = 0 if 0 in dims else 1
    run = crafted.one_record_run(tmp_path, "odd", crafted.tensor_proto(crafted.DT_FLOAT, dims, content=b"\0" * 4 * n))
    trial = create_trial(str(run), wait_for_collections=False)
    for read in (lambda: trial.tensor("odd").value(0), lambda: trial.tensor("odd").values()):
        with pytest.raises(exceptions.SMDebugError) as err:
            read()
        assert "`odd`" in str(err.value), err.value
        assert isinstance(err.value, Exception)


def test_a_shape_error_needs_no_except_baseexception():
    """``PanicException`` derives from BaseException: ``except Exception`` would not catch it.
    The same crafted shapes in a child interpreter: no panic message, no backtrace."""
    child = _in_child(
        """
        import tempfile, pathlib
        sys.path.insert(0, sys.argv[1])
        import crafted
        from smdebug_rs.trials import create_trial
        for dims in ([2**62, 0], [2**31, 2**31, 0], [1] * 70):
            with tempfile.TemporaryDirectory() as d:
                run = crafted.one_record_run(pathlib.Path(d), "odd", crafted.tensor_proto(crafted.DT_FLOAT, dims, content=b"\\0" * 4 * (0 not in dims)))
                try:
                    create_trial(str(run), wait_for_collections=False).tensor("odd").value(0)
                except Exception as e:
                    print(type(e).__name__)
        """,
        str(Path(__file__).parent),
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["SMDebugValueError"] * 3, child.stdout
    assert "panicked" not in child.stderr and "PanicException" not in child.stderr, child.stderr


# ---- event files cut short in place ----


def test_an_event_file_truncated_in_place_after_open_is_an_exception_not_sigbus(tmp_path):
    """What ``cp`` over a run does: the file is cut short in place while the trial has it open.
    The interpreter survives; each value read after is its correct data or an exception. (With
    ``map_files=True`` the same child dies of SIGBUS: reading is the default for that reason.)"""
    run = tmp_path / "run"
    shutil.copytree(MULTI, run)
    child = _in_child(
        """
        import pathlib
        from smdebug_rs.trials import create_trial
        run = pathlib.Path(sys.argv[1])
        trial = create_trial(str(run))
        names = trial.tensor_names()
        before = {}
        for name in names:
            t = trial.tensor(name)
            for step in t.steps():
                try:
                    before[(name, step)] = t.value(step).copy()
                except Exception:  # only reductions saved there
                    pass
        trial = create_trial(str(run))
        trial.tensor_names()
        # Read one value (its file may now be kept), then empty every event file in place.
        first = next(iter(before))
        trial.tensor(first[0]).value(first[1])
        for f in (run / "events").rglob("*.tfevents"):
            with open(f, "r+b") as fh:
                fh.truncate(0)
        same = errors = 0
        for (name, step), want in before.items():
            try:
                got = trial.tensor(name).value(step)
            except Exception as e:
                errors += 1
                continue
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (name, step)
            same += 1
        print("SURVIVED", same, errors)
        """,
        str(run),
    )
    assert child.returncode == 0, (child.returncode, child.stderr)
    survived = [line for line in child.stdout.splitlines() if line.startswith("SURVIVED")]
    assert survived, child.stdout
    same, errors = (int(x) for x in survived[0].split()[1:])
    assert errors > 0, "some record past the cut was read"


def test_mapping_stays_available_when_asked_for():
    trial = create_trial(str(MULTI), map_files=True)
    name = trial.tensor_names()[0]
    mapped = trial.tensor(name).value(trial.tensor(name).steps()[0])
    read = create_trial(str(MULTI)).tensor(name).value(trial.tensor(name).steps()[0])
    assert mapped.tobytes() == read.tobytes()


# ---- KeyboardInterrupt and SystemExit in a rule ----


class _Raises:
    def __init__(self, exc, at_step=None):
        self.exc = exc
        self.at_step = at_step
        self.steps = []

    def invoke_at_step(self, trial, step):
        self.steps.append(step)
        if self.at_step is None or step == self.at_step:
            raise self.exc
        return False


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3)], ids=["KeyboardInterrupt", "SystemExit"])
def test_keyboard_interrupt_and_system_exit_in_a_rule_propagate_out_of_run(tmp_path, exc):
    run = tmp_path / "run"
    shutil.copytree(MULTI, run)
    steps = create_trial(str(run)).steps()
    assert len(steps) > 2
    rule = _Raises(exc, at_step=steps[1])
    other = _Raises(ZeroDivisionError("never reached"), at_step=-1)
    with pytest.raises(type(exc)) as raised:
        rules.run(str(run), [rule, other, "LossNotDecreasing:num_steps=2"])
    if isinstance(exc, SystemExit):
        assert raised.value.code == 3
    # Nothing was evaluated after the interrupt.
    assert rule.steps == steps[:2], rule.steps
    assert other.steps == steps[:1], other.steps


def test_an_ordinary_exception_in_a_rule_is_still_its_error(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(MULTI, run)
    status = rules.run(str(run), [_Raises(ValueError("bad"))]).rule("_Raises")
    assert status.status == "Error" and "ValueError: bad" in status.message
