#!/usr/bin/env python3
"""Check a run directory with Python smdebug 1.0.34's reader against an expected.json.

Usage:
    python check_with_smdebug.py RUN EXPECTED_JSON [--quiet]

Exit status: 0 when everything matches, 1 with a list of differences otherwise,
2 on usage errors.  The expected.json schema is documented in make_golden.py.

What is checked:

* run level, through ``smdebug.trials.create_trial(RUN)`` (index mode, the only mode
  that loads anything in 1.0.34: with ``index_mode=False`` ``refresh_data`` loads nothing):
  tensor names (reduction names fold into their base tensor, as smdebug does), global
  steps, steps per mode, modes, workers, num_workers, collections (names, tensor_names,
  include_regex), training_job_end.ts present or not; per tensor: the mode steps and the
  workers at each step.
* every record of every event file listed in the index, read with smdebug's own
  ``TensorReader``: the length CRC always, the payload CRC either as the legacy
  constant (``run.write_checksum == false``, smdebug's default) or as the real masked
  CRC-32C of the payload (``run.write_checksum == true``).
* every expected value, first through the Trial API (``tensor.value`` /
  ``tensor.reduction_value``).  smdebug 1.0.34's reader has known gaps; only for those
  the value is instead decoded from the record at the index's location (still parsed
  and CRC-checked by smdebug's ``TensorReader``, bytes decoded with numpy):
    - dtypes missing from ``event_file_reader.as_dtype`` (int16, uint16, uint32, uint64)
      raise KeyError;
    - DT_INT8 is mapped to np.uint8 (values come back reinterpreted; compared after
      ``.view(np.int8)``);
    - empty tensors: tensor_content is empty, so float32 raises
      "float tensor should have non-zero length" and int32/int64 return None;
    - real payload CRC (write_checksum=True): ``Tensor.value`` reads with
      check="minimal", which expects the legacy constant, and the mismatch path itself
      fails with NameError (SMDebugRuntimeError is not imported in tensor_reader.py).
  Any other exception on the Trial path is a failure.  The summary line says how many
  values came through each path.
"""

import glob
import json
import math
import os
import struct
import sys

import numpy as np

# smdebug logs INFO lines on import and trial creation; keep the report readable.
os.environ.setdefault("SMDEBUG_LOG_LEVEL", "error")

from smdebug.core.access_layer.utils import has_training_ended
from smdebug.core.modes import ModeKeys
from smdebug.core.reductions import REDUCTIONS_PREFIX, reverse_reduction_tensor_name
from smdebug.core.tfevent.proto.types_pb2 import DataType
from smdebug.core.tfrecord.record_reader import masked_crc32c
from smdebug.core.tfrecord.record_writer import CHECKSUM_MAGIC_BYTES
from smdebug.core.tfrecord.tensor_reader import TensorReader
from smdebug.trials import create_trial

# TensorProto dtype -> numpy dtype for the fallback decoder (TensorFlow's types.proto numbering).
PROTO_TO_NUMPY = {
    DataType.Value("DT_HALF"): np.float16,
    DataType.Value("DT_FLOAT"): np.float32,
    DataType.Value("DT_DOUBLE"): np.float64,
    DataType.Value("DT_INT8"): np.int8,
    DataType.Value("DT_INT16"): np.int16,
    DataType.Value("DT_INT32"): np.int32,
    DataType.Value("DT_INT64"): np.int64,
    DataType.Value("DT_UINT8"): np.uint8,
    DataType.Value("DT_UINT16"): np.uint16,
    DataType.Value("DT_UINT32"): np.uint32,
    DataType.Value("DT_UINT64"): np.uint64,
    DataType.Value("DT_BOOL"): np.bool_,
}
# dtypes smdebug's as_dtype cannot map (KeyError on read).
UNREADABLE_DTYPES = {"int16", "uint16", "uint32", "uint64"}
LEGACY_PAYLOAD_CRC = masked_crc32c(CHECKSUM_MAGIC_BYTES)


class Checker:
    def __init__(self, run, expected):
        self.run = os.path.abspath(run)
        self.expected = expected
        self.errors = []
        self.paths = {}  # value path -> count

    def err(self, msg):
        self.errors.append(msg)

    def eq(self, what, got, want):
        if got != want:
            self.err(f"{what}: got {got!r}, expected {want!r}")

    # ---------------------------------------------------------------- run level
    def check_run(self, trial):
        run = self.expected["run"]
        recs = self.expected["tensors"]
        base_names = set()
        for r in recs:
            base_names.add(split_name(r["name"])[0])
        self.eq("tensor names", sorted(trial.tensor_names()), sorted(base_names))
        self.eq("global steps", list(trial.steps()), run["steps"]["GLOBAL"])
        want_modes = sorted(run["modes"])
        # Trial.modes() never lists GLOBAL (steps saved in GLOBAL mode have no mode steps).
        self.eq(
            "modes (without GLOBAL)",
            sorted(m.name for m in trial.modes()),
            [m for m in want_modes if m != "GLOBAL"],
        )
        for m in want_modes:
            self.eq(f"steps({m})", list(trial.steps(mode=ModeKeys[m])), run["steps"].get(m, []))
        self.eq("workers", sorted(trial.workers()), sorted(run["workers"]))
        self.eq("num_workers", trial.num_workers, run["num_workers"])
        self.eq("complete (training_job_end.ts)", bool(has_training_ended(self.run)), run["complete"])
        got_colls = {
            name: {"tensor_names": sorted(c.tensor_names), "include_regex": list(c.include_regex)}
            for name, c in trial.collections().items()
        }
        want_colls = {
            name: {"tensor_names": sorted(c["tensor_names"]), "include_regex": list(c["include_regex"])}
            for name, c in run["collections"].items()
        }
        self.eq("collection names", sorted(got_colls), sorted(want_colls))
        for name in sorted(set(got_colls) & set(want_colls)):
            self.eq(f"collection {name}", got_colls[name], want_colls[name])

        # global step <-> (mode, mode step), and the tensor names saved at each global step
        mapping = {}
        names_at = {}
        for r in recs:
            mapping.setdefault(r["step"], set()).add((r["mode"], r["mode_step"]))
            names_at.setdefault(r["step"], set()).add(split_name(r["name"])[0])
        for g, pairs in sorted(mapping.items()):
            if len(pairs) != 1:
                self.err(f"expected.json: global step {g} has several (mode, mode_step): {sorted(pairs)}")
                continue
            mode, ms = next(iter(pairs))
            try:
                got_mode, got_ms = trial.mode_modestep(g)
                self.eq(f"mode_modestep({g})", (got_mode.name, got_ms), (mode, ms))
                self.eq(f"global_step({mode}, {ms})", trial.global_step(ModeKeys[mode], ms), g)
                self.eq(f"tensor_names(step={g})", sorted(trial.tensor_names(step=g)), sorted(names_at[g]))
            except Exception as e:  # noqa: BLE001
                self.err(f"step mapping for global step {g} raised {type(e).__name__}: {e}")

        # per tensor: mode steps and workers per step (raw tensors only; a reduction-only
        # tensor has steps too, which smdebug lists the same way).
        per = {}
        for r in recs:
            base = split_name(r["name"])[0]
            per.setdefault((base, r["mode"]), {}).setdefault(r["mode_step"], set()).add(r["worker"])
        for (base, mode), steps in sorted(per.items()):
            if base not in trial.tensor_names():
                continue
            t = trial.tensor(base)
            self.eq(f"{base}: steps({mode})", list(t.steps(mode=ModeKeys[mode])), sorted(steps))
            for ms, workers in sorted(steps.items()):
                try:
                    got = sorted(t.workers(ms, mode=ModeKeys[mode]))
                except Exception as e:  # noqa: BLE001
                    self.err(f"{base}: workers({ms}, {mode}) raised {type(e).__name__}: {e}")
                    continue
                self.eq(f"{base}: workers({ms}, {mode})", got, sorted(workers))

    # ---------------------------------------------------------------- records / CRC
    def check_event_files(self, trial):
        real_crc = bool(self.expected["run"].get("write_checksum", False))
        # every event file of the run: those the index points at and any others on disk
        files = {
            os.path.abspath(p)
            for p in glob.glob(os.path.join(self.run, "events", "**", "*.tfevents"), recursive=True)
        }
        for base in trial.tensor_names():
            t = trial.tensor(base)
            for mode in list(trial.modes()) + [ModeKeys.GLOBAL]:
                for ms in t.steps(mode=mode):
                    for w in t.workers(ms, mode=mode):
                        s = t._step(ms, mode=mode, worker=w)
                        if s.location is not None:
                            files.add(self.event_path(s.location))
                        for loc in s.reduction_locations().values():
                            files.add(self.event_path(loc))
        n = 0
        for path in sorted(files):
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as e:
                self.err(f"event file listed in the index cannot be read: {e}")
                continue
            pos = 0
            while pos < len(data):
                if len(data) - pos < 12:
                    self.err(f"{path}@{pos}: truncated record header")
                    break
                (length,) = struct.unpack("<Q", data[pos : pos + 8])
                end = pos + 12 + length + 4
                if end > len(data):
                    self.err(f"{path}@{pos}: truncated record (length {length})")
                    break
                (len_crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
                payload = data[pos + 12 : pos + 12 + length]
                (payload_crc,) = struct.unpack("<I", data[end - 4 : end])
                if len_crc != masked_crc32c(data[pos : pos + 8]):
                    self.err(f"{path}@{pos}: bad length CRC")
                want = masked_crc32c(payload) if real_crc else LEGACY_PAYLOAD_CRC
                if payload_crc != want:
                    kind = "real CRC-32C" if real_crc else "legacy constant"
                    self.err(f"{path}@{pos}: payload CRC {payload_crc:#010x} is not the {kind} {want:#010x}")
                # and smdebug's own record parser agrees (framing, CRCs, Event proto)
                try:
                    list(TensorReader(data[pos:end]).read_events(check="full" if real_crc else "minimal"))
                except Exception as e:  # noqa: BLE001
                    self.err(f"{path}@{pos}: smdebug TensorReader failed: {type(e).__name__}: {e}")
                pos = end
                n += 1
        self.records_checked = n
        self.files_checked = len(files)

    def event_path(self, loc):
        p = loc.event_file_name
        return p if os.path.isabs(p) else os.path.join(self.run, p)

    # ---------------------------------------------------------------- values
    def check_values(self, trial):
        real_crc = bool(self.expected["run"].get("write_checksum", False))
        for r in self.expected["tensors"]:
            what = f"{r['name']} step {r['step']} ({r['mode']} {r['mode_step']}) {r['worker']}"
            base, red = split_name(r["name"])
            mode = ModeKeys[r["mode"]]
            try:
                t = trial.tensor(base)
            except Exception as e:  # noqa: BLE001
                self.err(f"{what}: trial.tensor raised {type(e).__name__}: {e}")
                continue
            known_gap = None
            if real_crc:
                known_gap = "real payload CRC"
            elif r["dtype"] in UNREADABLE_DTYPES:
                known_gap = f"{r['dtype']} not in smdebug as_dtype"
            elif 0 in r["shape"]:
                known_gap = "empty tensor"
            got = None
            try:
                if red is None:
                    got = t.value(r["mode_step"], mode=mode, worker=r["worker"])
                else:
                    got = t.reduction_value(
                        r["mode_step"], red[0], mode=mode, worker=r["worker"], abs=red[1]
                    )
                if got is None:
                    raise ValueError("value is None")
                got = np.asarray(got)
                if r["dtype"] == "int8" and got.dtype == np.uint8:
                    got = got.view(np.int8)
                    self.count("trial (int8 read as uint8, reinterpreted)")
                else:
                    self.count("trial")
                if known_gap == "real payload CRC":
                    self.err(f"{what}: smdebug read a real-CRC record through the Trial (unexpected)")
            except Exception as e:  # noqa: BLE001
                if known_gap is None:
                    self.err(f"{what}: Trial read failed: {type(e).__name__}: {e}")
                    continue
                got = self.read_at_location(t, r, red, what, real_crc)
                if got is None:
                    continue
                self.count(f"record at index location ({known_gap})")
            self.compare(what, got, r)

    def read_at_location(self, t, r, red, what, real_crc):
        mode = ModeKeys[r["mode"]]
        s = t._step(r["mode_step"], mode=mode, worker=r["worker"])
        loc = s.location if red is None else s.reduction_location(red[0], red[1])
        if loc is None:
            self.err(f"{what}: no index location")
            return None
        try:
            with open(self.event_path(loc), "rb") as f:
                f.seek(int(loc.start_idx))
                data = f.read(int(loc.length))
        except OSError as e:
            self.err(f"{what}: {e}")
            return None
        try:
            recs = list(TensorReader(data).read_events(check="full" if real_crc else "minimal"))
        except Exception as e:  # noqa: BLE001
            self.err(f"{what}: record at {loc.event_file_name}@{loc.start_idx}: {type(e).__name__}: {e}")
            return None
        if len(recs) != 1 or len(recs[0].summary.value) != 1:
            self.err(f"{what}: record at index location does not hold exactly one summary value")
            return None
        ev = recs[0]
        v = ev.summary.value[0]
        self.eq(f"{what}: record tag", v.tag, r["name"])
        self.eq(f"{what}: record step", ev.step, r["step"])
        plugin = {p.plugin_name: p.content for p in v.metadata.plugin_data}
        got_mode = plugin.get("mode")
        got_ms = plugin.get("mode_step")
        self.eq(f"{what}: record mode", got_mode, str(mode.value) if got_mode is not None else None)
        self.eq(f"{what}: record mode_step", got_ms, str(r["mode_step"]))
        tp = v.tensor
        if tp.dtype not in PROTO_TO_NUMPY:
            self.err(f"{what}: record dtype {tp.dtype} not supported")
            return None
        shape = [d.size for d in tp.tensor_shape.dim]
        return np.frombuffer(tp.tensor_content, dtype=PROTO_TO_NUMPY[tp.dtype]).reshape(shape)

    def count(self, path):
        self.paths[path] = self.paths.get(path, 0) + 1

    def compare(self, what, got, r):
        if r["dtype"] == "str":
            # DT_STRING (XGBoost's trees/ID, trees/Feature, ...): smdebug returns a numpy
            # unicode array.
            if got.dtype.kind != "U":
                self.err(f"{what}: dtype {got.dtype} is not a string dtype")
                return
            self.eq(f"{what}: shape", list(got.shape), list(r["shape"]))
            self.eq(f"{what}: values", [str(v) for v in got.reshape(-1)], r["values"])
            return
        want_dtype = np.dtype(r["dtype"])
        if got.dtype != want_dtype:
            self.err(f"{what}: dtype {got.dtype} != {want_dtype}")
            return
        want_shape = list(r["shape"])
        got_shape = list(got.shape)
        if got_shape != want_shape:
            self.err(f"{what}: shape {got_shape} != {want_shape}")
            return
        want = parse_values(r["values"], want_dtype)
        flat = got.reshape(-1)
        if flat.size != want.size:
            self.err(f"{what}: {flat.size} values, expected {want.size}")
            return
        if want_dtype.kind == "f":
            nan = np.isnan(flat) & np.isnan(want)
            # -0.0 == 0.0 compares equal; check the sign bit too (not a NaN's: the schema's
            # "nan" has none, and 0/0 on x86 gives a NaN with the sign bit set).
            same = nan | ((flat == want) & (np.signbit(flat) == np.signbit(want)))
        else:
            same = flat == want
        if not np.all(same):
            bad = np.flatnonzero(~same)
            i = int(bad[0])
            self.err(
                f"{what}: {bad.size} value(s) differ, first at flat index {i}: "
                f"got {flat[i]!r}, expected {want[i]!r}"
            )


def split_name(name):
    """-> (base tensor name, (reduction, abs) or None)"""
    if REDUCTIONS_PREFIX in name:
        base, red, absolute = reverse_reduction_tensor_name(name)
        return base, (red, absolute)
    return name, None


def parse_values(values, dtype):
    def conv(v):
        if isinstance(v, str):
            return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v]
        return v

    if dtype.kind in "iu":
        return np.array([int(v) for v in values], dtype=dtype)
    if dtype.kind == "b":
        return np.array([bool(v) for v in values], dtype=dtype)
    return np.array([conv(v) for v in values], dtype=np.float64).astype(dtype)


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    quiet = "--quiet" in argv
    if len(args) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    run, expected_path = args
    with open(expected_path) as f:
        expected = json.load(f)
    if not os.path.isdir(run):
        print(f"FAIL: {run} is not a directory", file=sys.stderr)
        return 1
    checker = Checker(run, expected)
    try:
        # absolute path: smdebug joins it into every TensorLocation.event_file_name
        trial = create_trial(checker.run)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL: create_trial({run}) raised {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    checker.check_run(trial)
    checker.check_event_files(trial)
    checker.check_values(trial)
    if checker.errors:
        print(f"FAIL: {run} does not match {expected_path}: {len(checker.errors)} difference(s)")
        for e in checker.errors[:200]:
            print("  - " + e)
        if len(checker.errors) > 200:
            print(f"  ... and {len(checker.errors) - 200} more")
        return 1
    if not quiet:
        paths = ", ".join(f"{n} via {p}" for p, n in sorted(checker.paths.items()))
        print(
            f"OK: {run}: {len(expected['tensors'])} values match ({paths}); "
            f"{checker.records_checked} records in {checker.files_checked} event files CRC-checked"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
