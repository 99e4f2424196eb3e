#!/usr/bin/env python3
"""Check event files with TensorBoard's own event loading.

Usage:
    python check_with_tensorboard.py LOGDIR EXPECTED_JSON
        TensorBoard summaries (scalars, histograms, tensors) under LOGDIR.
        EXPECTED_JSON: {"scalars":    [{"run"?, "tag", "step", "value"}],
                        "histograms": [{"run"?, "tag", "step", "num", "min", "max", "sum"?}],
                        "tensors":    [{"run"?, "tag", "step", "dtype", "shape", "values",
                                        "plugin"?}]}
        "run" is the sub-directory of LOGDIR holding the file (TensorBoard's run name,
        "." for LOGDIR itself); without it any run may hold the value.  Tensor values use
        the expected.json encoding of make_golden.py (row-major, "nan"/"inf"/"-inf"; a
        string tensor has dtype "str" and its strings as values: TensorBoard's text plugin
        stores them as tensors). "plugin": the plugin TensorBoard files the tag under
        (its summary metadata's plugin_name: "text" for the text dashboard).

    python check_with_tensorboard.py --raw PATH [EXPECTED_JSON]
        PATH is one .tfevents file, or a directory whose **/*.tfevents files are all read
        (e.g. an smdebug run: events/<step>/<step>_<worker>.tfevents).  Every record must
        pass TensorBoard's record reader (length CRC and payload CRC) and parse as an
        Event proto; tensor summaries must decode with tensorboard.util.tensor_util
        (smdebug's string tensors, dtype unset, are decoded as DT_STRING: see decode_tensor).
        With EXPECTED_JSON (the smdebug expected.json schema of make_golden.py), every
        expected record must be found in events/<step:012>/<step:012>_<worker>.tfevents
        with the same tag, step, dtype, shape and values, and there must be no others.

Exit status 0 when everything matches, 1 with the differences otherwise, 2 on usage errors.

Which TensorBoard loader checks CRCs: TensorBoard reads records through
event_file_loader._make_tf_record_iterator: without TensorFlow installed that is
tensorboard.compat.tensorflow_stub.pywrap_tensorflow.PyRecordReader_New, which checks the
masked CRC-32C of the length header and of the payload and raises DataLossError on a
mismatch (with TensorFlow, tf_record_iterator's C++ reader does the same).  But
RawEventFileLoader.Load() -- and so EventFileLoader, EventAccumulator, EventMultiplexer
and the TensorBoard server -- catches DataLossError, treats it as a truncated record and
silently stops reading that file.  A file with bad CRCs (for instance smdebug's default
legacy constant payload checksum) therefore loads as EMPTY in TensorBoard, without any
error.  This script reads every file through _make_tf_record_iterator itself first, so a
CRC failure is an error here, before the EventAccumulator comparison.
"""

import glob
import json
import math
import os
import struct
import sys

import numpy as np
from tensorboard.backend.event_processing import event_accumulator, event_file_loader
from tensorboard.compat import tf
from tensorboard.compat.proto import event_pb2
from tensorboard.util import tensor_util


class Errors:
    def __init__(self):
        self.items = []

    def add(self, msg):
        self.items.append(msg)


def read_records(path, errors):
    """All records of one file through TensorBoard's record iterator; CRC failures are errors.
    Returns a list of (byte offset, Event)."""
    out = []
    offset = 0
    try:
        it = event_file_loader._make_tf_record_iterator(path)
    except Exception as e:  # noqa: BLE001
        errors.add(f"{path}: TensorBoard cannot open it: {type(e).__name__}: {e}")
        return out
    index = 0
    failed = False
    while True:
        try:
            rec = next(it)
        except StopIteration:
            break
        except tf.errors.DataLossError as e:
            # the stub's message is "<filename as bytes repr> failed event crc32 check" etc.
            reason = str(e.message).rsplit("' ", 1)[-1]
            errors.add(f"{path}: record {index} at byte {offset}: {reason}")
            failed = True
            break
        try:
            ev = event_pb2.Event.FromString(rec)
        except Exception as e:  # noqa: BLE001
            errors.add(f"{path}: record {index} at byte {offset}: not an Event proto: {e}")
            failed = True
            ev = None
        if ev is not None:
            out.append((offset, ev))
        offset += 8 + 4 + len(rec) + 4
        index += 1
    size = os.path.getsize(path)
    if not failed and offset != size:
        errors.add(f"{path}: records end at byte {offset}, file has {size} bytes")
    return out


def event_files(path):
    if os.path.isfile(path):
        return [path]
    return sorted(
        p for p in glob.glob(os.path.join(path, "**", "*"), recursive=True)
        if os.path.isfile(p) and "tfevents" in os.path.basename(p)
    )


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


def decode_tensor(t):
    """TensorBoard's make_ndarray of a TensorProto. smdebug writes a string tensor with its dtype
    unset (0) and the strings in string_val (smdebug's reader takes only that form); TensorFlow's
    form is DT_STRING (7), the only one make_ndarray takes: such a tensor is read as DT_STRING."""
    if t.dtype == 0 and len(t.string_val) > 0:
        t2 = type(t)()
        t2.CopyFrom(t)
        t2.dtype = 7  # DT_STRING
        t = t2
    return tensor_util.make_ndarray(t)


def compare_array(what, got, want_rec, errors):
    if want_rec["dtype"] == "str":
        # Strings: make_ndarray gives an object array of bytes.
        if list(got.shape) != list(want_rec["shape"]):
            errors.add(f"{what}: shape {list(got.shape)} != {want_rec['shape']}")
            return
        texts = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in got.reshape(-1)]
        if texts != want_rec["values"]:
            errors.add(f"{what}: strings {texts!r} != {want_rec['values']!r}")
        return
    want_dtype = np.dtype(want_rec["dtype"])
    if got.dtype != want_dtype:
        errors.add(f"{what}: dtype {got.dtype} != {want_dtype}")
        return
    if list(got.shape) != list(want_rec["shape"]):
        errors.add(f"{what}: shape {list(got.shape)} != {want_rec['shape']}")
        return
    want = parse_values(want_rec["values"], want_dtype)
    flat = got.reshape(-1)
    if flat.size != want.size:
        errors.add(f"{what}: {flat.size} values, expected {want.size}")
        return
    if want_dtype.kind == "f":
        same = ((flat == want) | (np.isnan(flat) & np.isnan(want))) & (np.signbit(flat) == np.signbit(want))
    else:
        same = flat == want
    if not np.all(same):
        i = int(np.flatnonzero(~same)[0])
        errors.add(f"{what}: {int((~same).sum())} value(s) differ, first at {i}: got {flat[i]!r}, expected {want[i]!r}")


def close(a, b, rel=1e-6, abs_=1e-12):
    return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=abs_) or (
        math.isnan(float(a)) and math.isnan(float(b))
    )


# ------------------------------------------------------------------------- raw mode
def check_raw(path, expected_path):
    errors = Errors()
    files = event_files(path)
    if not files:
        errors.add(f"{path}: no tfevents files")
    by_file = {}
    n_records = n_tensors = 0
    for f in files:
        recs = read_records(f, errors)
        by_file[os.path.abspath(f)] = recs
        n_records += len(recs)
        for off, ev in recs:
            for v in ev.summary.value:
                if v.WhichOneof("value") == "tensor":
                    n_tensors += 1
                    try:
                        decode_tensor(v.tensor)
                    except Exception as e:  # noqa: BLE001
                        errors.add(f"{f}@{off}: tensor {v.tag!r} does not decode: {type(e).__name__}: {e}")
    if expected_path:
        with open(expected_path) as fh:
            expected = json.load(fh)
        root = path if os.path.isdir(path) else os.path.dirname(path)
        found = 0
        for r in expected["tensors"]:
            what = f"{r['name']} step {r['step']} {r['worker']}"
            f = os.path.abspath(
                os.path.join(root, "events", f"{r['step']:012d}", f"{r['step']:012d}_{r['worker']}.tfevents")
            )
            if f not in by_file:
                errors.add(f"{what}: file {f} not read")
                continue
            hits = [
                (off, ev, v)
                for off, ev in by_file[f]
                for v in ev.summary.value
                if v.tag == r["name"] and v.WhichOneof("value") == "tensor"
            ]
            if len(hits) != 1:
                errors.add(f"{what}: {len(hits)} records with this tag in {f}, expected 1")
                continue
            off, ev, v = hits[0]
            found += 1
            if ev.step != r["step"]:
                errors.add(f"{what}: event step {ev.step}")
            try:
                arr = decode_tensor(v.tensor)
            except Exception:  # noqa: BLE001  (already reported above)
                continue
            compare_array(what, arr, r, errors)
        if found == len(expected["tensors"]) and n_tensors != found:
            errors.add(f"{n_tensors} tensor records in the files, {found} expected")
    return errors, f"{n_records} records ({n_tensors} tensors) in {len(files)} files, all CRCs valid"


# ------------------------------------------------------------------- summary mode
def check_logdir(logdir, expected_path):
    errors = Errors()
    files = event_files(logdir)
    if not files:
        errors.add(f"{logdir}: no tfevents files")
    n_records = 0
    for f in files:
        n_records += len(read_records(f, errors))
    with open(expected_path) as fh:
        expected = json.load(fh)

    guidance = {
        event_accumulator.SCALARS: 0,
        event_accumulator.HISTOGRAMS: 0,
        event_accumulator.TENSORS: 0,
        event_accumulator.COMPRESSED_HISTOGRAMS: 0,
    }
    runs = sorted({os.path.relpath(os.path.dirname(f), logdir) for f in files})
    accs = {}
    for run in runs:
        acc = event_accumulator.EventAccumulator(os.path.join(logdir, run), size_guidance=guidance)
        acc.Reload()
        accs[run] = acc

    def lookup(kind, item):
        run_names = [item["run"]] if "run" in item else runs
        hits = []
        for rn in run_names:
            acc = accs.get(rn)
            if acc is None or item["tag"] not in acc.Tags().get(kind, []):
                continue
            getter = {"scalars": acc.Scalars, "histograms": acc.Histograms, "tensors": acc.Tensors}[kind]
            found = [e for e in getter(item["tag"]) if e.step == item["step"]]
            if found and "plugin" in item:
                plugin = acc.SummaryMetadata(item["tag"]).plugin_data.plugin_name
                if plugin != item["plugin"]:
                    errors.add(f"{rn}/{item['tag']}: plugin {plugin!r}, expected {item['plugin']!r}")
            hits += found
        return hits

    counts = {}
    for kind in ("scalars", "histograms", "tensors"):
        for item in expected.get(kind, []):
            what = f"{kind[:-1]} {item.get('run', '*')}/{item['tag']} step {item['step']}"
            hits = lookup(kind, item)
            if len(hits) != 1:
                errors.add(f"{what}: found {len(hits)} events, expected 1")
                continue
            e = hits[0]
            counts[kind] = counts.get(kind, 0) + 1
            if kind == "scalars":
                if not close(e.value, item["value"]):
                    errors.add(f"{what}: value {e.value!r}, expected {item['value']!r}")
            elif kind == "histograms":
                h = e.histogram_value
                if int(h.num) != int(item["num"]):
                    errors.add(f"{what}: num {h.num}, expected {item['num']}")
                if int(round(sum(h.bucket))) != int(item["num"]):
                    errors.add(f"{what}: bucket counts sum to {sum(h.bucket)}, expected {item['num']}")
                if len(h.bucket) != len(h.bucket_limit):
                    errors.add(f"{what}: {len(h.bucket)} buckets but {len(h.bucket_limit)} limits")
                for key in ("min", "max", "sum"):
                    if key in item and not close(getattr(h, key), item[key]):
                        errors.add(f"{what}: {key} {getattr(h, key)!r}, expected {item[key]!r}")
            else:
                compare_array(what, decode_tensor(e.tensor_proto), item, errors)
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing"
    return errors, f"{summary} found in runs {runs}; {n_records} records in {len(files)} files, all CRCs valid"


def main(argv):
    args = argv[1:]
    if args and args[0] == "--raw":
        if len(args) not in (2, 3):
            print(__doc__.split("\n\n")[1], file=sys.stderr)
            return 2
        target = args[1]
        errors, summary = check_raw(target, args[2] if len(args) == 3 else None)
    elif len(args) == 2:
        target = args[0]
        errors, summary = check_logdir(args[0], args[1])
    else:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    if errors.items:
        print(f"FAIL: {target}: {len(errors.items)} problem(s)")
        for e in errors.items[:200]:
            print("  - " + e)
        if len(errors.items) > 200:
            print(f"  ... and {len(errors.items) - 200} more")
        return 1
    print(f"OK: {target}: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
