#!/usr/bin/env python3
"""Write the golden run directories with Python smdebug's own writer.

Usage:
    python make_golden.py [OUT_DIR]

OUT_DIR defaults to smdebug-io/tests/data/golden (next to this script's parent).
Every run is written from scratch (an existing run directory of the same name is
removed first).  The output is deterministic: values come from seeded generators
and every event gets a fixed wall_time, so regenerating produces identical bytes.

Runs written (each with a sibling ``<run>.expected.json``):

* ``pysmdebug_multi``      2 workers, TRAIN/EVAL interleaved, every numpy dtype smdebug
                           can write, scalar/1-D/3-D/empty shapes, NaN/Inf, reduction
                           tensors named like smdebug's hooks name them, a loss scalar,
                           collections weights/gradients/losses/custom; training ended.
* ``pysmdebug_checksum``   1 worker, ``write_checksum=True`` (real CRC-32C on payloads).
* ``pysmdebug_incomplete`` 1 worker, a few TRAIN steps, NO training_job_end.ts.
* ``pysmdebug_tensorboard`` TensorBoard event files as smdebug's hook writes them
                           (FileWriter wtype="tensorboard", write_checksum=True; scalar and
                           histogram summaries; runs TRAIN and EVAL) with
                           ``pysmdebug_tensorboard.expected.json`` in check_with_tensorboard.py's
                           schema.

expected.json schema (shared with check_with_smdebug.py and the Rust tests):

    {
      "run": {
        "workers": ["worker_0", ...],          # sorted
        "num_workers": 2,
        "complete": true,                        # training_job_end.ts present
        "write_checksum": false,                 # payload CRC real (true) or legacy constant
        "modes": ["TRAIN", "EVAL"],              # modes present
        "steps": {"GLOBAL": [...], "TRAIN": [...mode steps...], "EVAL": [...]},
        "collections": {"weights": {"tensor_names": [...], "include_regex": [...]}, ...}
      },
      "tensors": [
        {"name": ..., "step": <global step>, "mode": "TRAIN", "mode_step": k,
         "worker": "worker_0", "dtype": "float32", "shape": [4, 3],
         "values": [... row-major; floats as JSON numbers, NaN/Inf as "nan"/"inf"/"-inf",
                    bool as true/false ...]}
      ]
    }

Names starting with ``smdebug/reductions/`` are reductions: ``smdebug/reductions/<red>/<base>``
or ``smdebug/reductions/abs_<red>/<base>`` (smdebug.core.reductions.get_reduction_tensor_name).
"""

import json
import math
import os
import shutil
import sys
import zlib

import numpy as np

from smdebug.core.access_layer.utils import training_has_ended
from smdebug.core.collection_manager import CollectionManager
from smdebug.core.modes import ModeKeys
from smdebug.core.reductions import get_reduction_tensor_name
from smdebug.core.tfevent.summary import histogram_summary
from smdebug.core.writer import FileWriter

# Fixed wall time so the files are byte-identical on every regeneration.
WALL_TIME_BASE = 1_700_000_000.0

# Every numpy dtype smdebug 1.0.34's writer maps to a TensorProto dtype (core/tfevent/util.py),
# except complex, quantized and string types.
ALL_DTYPES = [
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
]

# Shapes cycled over the dtype tensors: scalar, 1-D, 3-D.
DTYPE_SHAPES = [(), (5,), (2, 3, 2)]


def _seed(*parts):
    return zlib.crc32("|".join(str(p) for p in parts).encode())


def make_values(dtype, shape, *seed_parts):
    """Deterministic values that differ per (name, step, worker) through seed_parts."""
    rng = np.random.default_rng(_seed(dtype, shape, *seed_parts))
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    dt = np.dtype(dtype)
    if dt.kind == "f":
        flat = rng.normal(0.0, 3.0, size=n).astype(dt)
    elif dt.kind == "b":
        flat = rng.random(size=n) < 0.5
    else:
        info = np.iinfo(dt)
        # Full range of the type; the first and last element are the type's extremes
        # so that sign handling and the top bit of uint64 are exercised.
        flat = rng.integers(info.min, info.max, size=n, dtype=dt, endpoint=True)
        if n >= 2:
            flat[0] = info.min
            flat[-1] = info.max
    return flat.reshape(shape)


def json_value(x):
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    f = float(x)
    if math.isnan(f):
        return "nan"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return f


def write_expected(path, expected):
    """JSON with one tensor record per line (small, diff-friendly)."""
    lines = ['{"run": ' + json.dumps(expected["run"], allow_nan=False) + ",", ' "tensors": [']
    recs = [json.dumps(r, allow_nan=False) for r in expected["tensors"]]
    lines += ["  " + r + ("," if i + 1 < len(recs) else "") for i, r in enumerate(recs)]
    lines += [" ]", "}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def record(name, step, mode, mode_step, worker, arr):
    arr = np.asarray(arr)
    return {
        "name": name,
        "step": int(step),
        "mode": mode.name,
        "mode_step": int(mode_step),
        "worker": worker,
        "dtype": arr.dtype.name,
        "shape": [int(d) for d in arr.shape],
        "values": [json_value(v) for v in arr.reshape(-1)],
    }


class RunBuilder:
    """Writes one run with smdebug's FileWriter and records what was written."""

    def __init__(self, out_dir, name, workers, write_checksum=False):
        self.path = os.path.join(out_dir, name)
        self.name = name
        if os.path.exists(self.path):
            shutil.rmtree(self.path)
        os.makedirs(self.path)
        self.workers = workers
        self.write_checksum = write_checksum
        self.records = []
        self.steps = {}  # mode name -> set of mode steps
        self.global_steps = set()

    def write_step(self, worker, step, mode, mode_step, tensors):
        """tensors: list of (name, ndarray). One event file + one index file per call."""
        writer = FileWriter(
            trial_dir=self.path, worker=worker, step=step, write_checksum=self.write_checksum
        )
        for i, (tname, arr) in enumerate(tensors):
            writer.write_tensor(
                tdata=arr,
                tname=tname,
                mode=mode,
                mode_step=mode_step,
                timestamp=WALL_TIME_BASE + step + i * 1e-3,
            )
            self.records.append(record(tname, step, mode, mode_step, worker, arr))
        writer.close()
        self.steps.setdefault(mode.name, set()).add(mode_step)
        self.global_steps.add(step)

    def write_collections(self, collections, num_workers):
        """collections: dict name -> (tensor_names, include_regex)."""
        for worker in self.workers:
            cm = CollectionManager(create_default=False)
            for cname, (tnames, regexes) in collections.items():
                coll = cm.get(cname)  # creates it
                for r in regexes:
                    coll.include(r)
                for t in tnames:
                    coll.add_tensor_name(t)
            cm.set_num_workers(num_workers)
            cm.export(self.path, f"{worker}_collections.json")
        self.collections = {
            cname: {"tensor_names": sorted(tnames), "include_regex": list(regexes)}
            for cname, (tnames, regexes) in collections.items()
        }
        self.num_workers = num_workers

    def finish(self, complete):
        if complete:
            training_has_ended(self.path)
        modes = [m for m in ("TRAIN", "EVAL", "PREDICT", "GLOBAL") if m in self.steps]
        steps = {"GLOBAL": sorted(self.global_steps)}
        for m in modes:
            steps[m] = sorted(self.steps[m])
        expected = {
            "run": {
                "workers": sorted(self.workers),
                "num_workers": self.num_workers,
                "complete": complete,
                "write_checksum": self.write_checksum,
                "modes": modes,
                "steps": steps,
                "collections": self.collections,
            },
            "tensors": self.records,
        }
        write_expected(self.path + ".expected.json", expected)


def model_tensors(step, worker):
    """Weights, gradients, reductions and loss of a tiny 2-layer model at a step."""
    w1 = make_values("float32", (4, 3), "fc1.weight", step, worker)
    b1 = make_values("float32", (3,), "fc1.bias", step, worker)
    g1 = make_values("float32", (4, 3), "gradient/fc1.weight", step, worker) * np.float32(1e-3)
    gb1 = make_values("float32", (3,), "gradient/fc1.bias", step, worker) * np.float32(1e-3)
    # fc2.weight is saved only as reductions (as smdebug's hook does for a collection with a
    # reduction_config): mean, max, l2 norm, abs_mean, abs_l2 norm.
    w2 = make_values("float32", (3, 2), "fc2.weight", step, worker)
    reductions = []
    for red, absolute in (("mean", False), ("max", False), ("l2", False), ("mean", True), ("l2", True)):
        data = np.abs(w2) if absolute else w2
        if red == "mean":
            v = np.mean(data)
        elif red == "max":
            v = np.max(data)
        else:
            v = np.linalg.norm(data.reshape(-1), ord=2)
        # PyTorch's hook writes reductions as 0-d float32 arrays (torch scalar .numpy()).
        reductions.append(
            (get_reduction_tensor_name("fc2.weight", red, absolute), np.array(v, dtype=np.float32))
        )
    # Loss: a 0-d float32 array, decreasing over steps, different per worker.
    loss = np.array(2.5 / (1.0 + step) + 0.01 * int(worker.split("_")[-1]), dtype=np.float32)
    out = [
        ("fc1.weight", w1),
        ("fc1.bias", b1),
        ("gradient/fc1.weight", g1),
        ("gradient/fc1.bias", gb1),
    ]
    out += reductions
    out.append(("loss", loss))
    return out


def dtype_tensors(step, worker):
    out = []
    for i, dt in enumerate(ALL_DTYPES):
        shape = DTYPE_SHAPES[i % len(DTYPE_SHAPES)]
        out.append((f"dtype/{dt}", make_values(dt, shape, "dtype", step, worker)))
    return out


def special_tensors(step, worker):
    k = step + 10 * int(worker.split("_")[-1])
    nan_inf = np.array(
        [np.nan, np.inf, -np.inf, -0.0, np.finfo(np.float32).max, np.finfo(np.float32).tiny, float(k)],
        dtype=np.float32,
    )
    f16 = np.array([np.inf, -np.inf, np.nan, 65504.0, 6.1035156e-05, float(k)], dtype=np.float16)
    return [
        ("special/nan_inf_f32", nan_inf),
        ("special/nan_inf_f16", f16),
        ("empty/float32", np.zeros((0,), dtype=np.float32)),
        ("empty/int64", np.zeros((2, 0, 3), dtype=np.int64)),
    ]


MULTI_COLLECTIONS = {
    "weights": (["fc1.weight", "fc1.bias", "fc2.weight"], []),
    "gradients": (["gradient/fc1.weight", "gradient/fc1.bias"], ["^gradient/"]),
    "losses": (["loss"], []),
    "dtypes": ([f"dtype/{d}" for d in ALL_DTYPES], ["^dtype/.*"]),
    "special": (
        ["special/nan_inf_f32", "special/nan_inf_f16", "empty/float32", "empty/int64"],
        ["^special/", "^empty/"],
    ),
}


def make_multi(out_dir):
    run = RunBuilder(out_dir, "pysmdebug_multi", ["worker_0", "worker_1"])
    # Global steps 0-5 TRAIN (mode steps 0-5), 6-7 EVAL (0-1), 8-11 TRAIN (6-9).
    schedule = []
    train_k = eval_k = 0
    for g in range(12):
        if 6 <= g <= 7:
            schedule.append((g, ModeKeys.EVAL, eval_k))
            eval_k += 1
        else:
            schedule.append((g, ModeKeys.TRAIN, train_k))
            train_k += 1
    for g, mode, k in schedule:
        for worker in run.workers:
            tensors = model_tensors(g, worker)
            if mode == ModeKeys.TRAIN and k % 3 == 0:
                # dtype/special tensors saved on a save_interval of 3 TRAIN steps
                # (keeps the committed data small) and at every EVAL step.
                tensors += dtype_tensors(g, worker) + special_tensors(g, worker)
            elif mode == ModeKeys.EVAL:
                tensors = [t for t in tensors if t[0] == "loss"]
                tensors += dtype_tensors(g, worker) + special_tensors(g, worker)
            run.write_step(worker, g, mode, k, tensors)
    run.write_collections(MULTI_COLLECTIONS, num_workers=2)
    run.finish(complete=True)
    return run


def make_checksum(out_dir):
    run = RunBuilder(out_dir, "pysmdebug_checksum", ["worker_0"], write_checksum=True)
    for g in range(4):
        tensors = model_tensors(g, "worker_0")[:2] + [
            ("dtype/float64", make_values("float64", (2, 3), "ck", g)),
            ("dtype/int32", make_values("int32", (4,), "ck", g)),
            ("loss", model_tensors(g, "worker_0")[-1][1]),
        ]
        run.write_step("worker_0", g, ModeKeys.TRAIN, g, tensors)
    run.write_collections(
        {
            "weights": (["fc1.weight", "fc1.bias"], []),
            "losses": (["loss"], []),
            "dtypes": (["dtype/float64", "dtype/int32"], ["^dtype/"]),
        },
        num_workers=1,
    )
    run.finish(complete=True)
    return run


def make_incomplete(out_dir):
    run = RunBuilder(out_dir, "pysmdebug_incomplete", ["worker_0"])
    for g in range(3):
        tensors = [t for t in model_tensors(g, "worker_0") if t[0] in ("fc1.weight", "loss")]
        run.write_step("worker_0", g, ModeKeys.TRAIN, g, tensors)
    run.write_collections(
        {"weights": (["fc1.weight"], []), "losses": (["loss"], [])}, num_workers=1
    )
    run.finish(complete=False)
    return run


def make_tensorboard(out_dir):
    """TensorBoard files as smdebug's hook writes them (core/hook.py _maybe_get_tb_writer):
    one FileWriter(wtype="tensorboard", write_checksum=True) per mode, created at the mode's
    first step, <dir>/<MODE>/<first step:012>_<worker>.tfevents, holding simple_value scalars
    and histograms of later steps too.  (The hook names the worker <pid>_<hostname>.)"""
    path = os.path.join(out_dir, "pysmdebug_tensorboard")
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(path)
    scalars, histograms = [], []
    worker = "4242_goldenhost"
    train = FileWriter(
        trial_dir=path, worker=worker, step=0, wtype="tensorboard", mode=ModeKeys.TRAIN,
        write_checksum=True,
    )
    for g in range(3):
        loss = float(np.float32(2.5 / (1.0 + g)))
        train.write_scalar_summary("loss", loss, g, timestamp=WALL_TIME_BASE + g)
        scalars.append({"run": "TRAIN", "tag": "loss", "step": g, "value": loss})
        vals = make_values("float32", (50,), "hist", g).astype(np.float64)
        # What FileWriter.write_histogram_summary(vals, tag, g, bins=20) does, but with a fixed
        # wall_time (that method stamps time.time()). 20 equal-width bins: smdebug's "default"
        # TF bucket list makes ~10 KB per histogram.
        train.write_summary(histogram_summary("fc1.weight", vals, 20), g, timestamp=WALL_TIME_BASE + g)
        histograms.append(
            {
                "run": "TRAIN",
                "tag": "fc1.weight",
                "step": g,
                "num": int(vals.size),
                "min": float(vals.min()),
                "max": float(vals.max()),
                "sum": float(vals.sum()),
            }
        )
    train.close()
    ev = FileWriter(
        trial_dir=path, worker=worker, step=3, wtype="tensorboard", mode=ModeKeys.EVAL,
        write_checksum=True,
    )
    loss = float(np.float32(0.75))
    ev.write_scalar_summary("loss", loss, 3, timestamp=WALL_TIME_BASE + 3)
    scalars.append({"run": "EVAL", "tag": "loss", "step": 3, "value": loss})
    ev.close()
    with open(path + ".expected.json", "w") as f:
        json.dump({"scalars": scalars, "histograms": histograms, "tensors": []}, f, indent=1)
        f.write("\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "data", "golden")
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    make_multi(out_dir)
    make_checksum(out_dir)
    make_incomplete(out_dir)
    make_tensorboard(out_dir)
    print(out_dir)


if __name__ == "__main__":
    main()
