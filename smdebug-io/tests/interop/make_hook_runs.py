#!/usr/bin/env python3
"""Make the hook corpus: small runs written by Python smdebug 1.0.34's REAL framework hooks.

Usage:
    python make_hook_runs.py [OUT_DIR]         (default: smdebug-io/tests/data/hooks)
    python make_hook_runs.py --only NAME [OUT_DIR]

Needs smdebug==1.0.34, 'numpy<2', protobuf==3.20.3, torch (CPU; 2.2.2 was used), xgboost 1.7.x
and pandas, psutil, requests (smdebug's imports) in the interpreter that runs it, and for
tf_keras a second interpreter in $HOOKS_TF_PYTHON with smdebug 1.0.34 and a TensorFlow it
supports (below 2.12); DEVELOPERS.md ("The hook corpus") has the pip lines. CI never runs this:
it reads the committed output.

Every run is made in a fresh Python process (the hooks are per-process singletons with atexit
cleanup; the two-worker run is two processes joined through torch.distributed's gloo backend),
then `<run>.expected.json` is written from what `smdebug.trials.create_trial` reads back from
the run (names, steps, modes, workers, collections and every value, reductions included) — not
from what the script meant to write — and the run is checked with check_with_smdebug.py.

Seeds, thread counts and data are fixed, so values are reproducible; the event files' wall
times are the hooks' own (time.time()), so a rerun is not byte-identical.

The runs (DEVELOPERS.md has the table):
  pt_healthy       PyTorch MLP (fc1-relu1-fc2-tanh1-fc3, CrossEntropyLoss), TRAIN and EVAL,
                   weights, biases, gradients, losses, ReLU and tanh inputs/outputs
  pt_bugs          the same net and loop with a zero learning rate, a large negative fc1 bias
                   (dead ReLUs, zero fc1 gradients) and large fc2 biases (saturated tanh)
  pt_exploding     a learning rate that drives the weights to Inf/NaN
  pt_overfit       the hook's default collections only (losses), memorising random labels
  pt_two_workers   two gloo workers, gradients saved as reductions (a ReductionConfig)
  tf_keras         TF2 Keras (KerasHook, model.fit with validation data), TRAIN and EVAL;
                   made with $HOOKS_TF_PYTHON (Python 3.10, tensorflow-cpu 2.11.1)
  xgb_healthy      XGBoost, every collection (trees included), balanced separable classes
  xgb_bugs         imbalanced classes, one leaking feature, max_depth 3, learning rate 0
"""

import json
import math
import os
import shutil
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.normpath(os.path.join(HERE, "..", "data", "hooks"))

os.environ.setdefault("SMDEBUG_LOG_LEVEL", "error")

# ----------------------------------------------------------------------------- PyTorch runs

IN_FEATURES, HIDDEN, CLASSES, BATCH = 8, 8, 3, 8


def blobs(rng, n, classes=CLASSES, spread=0.6):
    """n samples of `classes` Gaussian blobs in IN_FEATURES dimensions, classes balanced."""
    import numpy as np

    centers = rng.normal(scale=2.0, size=(classes, IN_FEATURES))
    y = np.arange(n) % classes
    rng.shuffle(y)
    x = centers[y] + rng.normal(scale=spread, size=(n, IN_FEATURES))
    return x.astype("float32"), y.astype("int64")


def torch_net():
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(IN_FEATURES, HIDDEN)
            self.relu1 = nn.ReLU()
            self.fc2 = nn.Linear(HIDDEN, HIDDEN)
            self.tanh1 = nn.Tanh()
            self.fc3 = nn.Linear(HIDDEN, CLASSES)

        def forward(self, x):
            return self.fc3(self.tanh1(self.fc2(self.relu1(self.fc1(x)))))

    return Net()


def torch_setup():
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def activation_collections(hook):
    """ReLU and tanh inputs and outputs, the names the hook gives module tensors."""
    hook.get_collection("relu_activations").include(r"relu\d+_(input|output)_0")
    hook.get_collection("tanh_activations").include(r"tanh\d+_(input|output)_0")


def train_eval_loop(out, lr, epochs, setup_net=None, collections=None, train_save=4):
    """The loop pt_healthy and pt_bugs share: epochs of 12 TRAIN steps then 3 EVAL steps.

    Losses every step in both modes; the other collections every `train_save`-th TRAIN step and
    at EVAL step 0 only.
    """
    import numpy as np
    import torch
    import torch.nn as nn

    import smdebug.pytorch as smd
    from smdebug.core.modes import ModeKeys

    torch_setup()
    rng = np.random.default_rng(1)
    x, y = blobs(rng, 12 * BATCH + 3 * BATCH)
    xt, yt = torch.tensor(x[: 12 * BATCH]), torch.tensor(y[: 12 * BATCH])
    xe, ye = torch.tensor(x[12 * BATCH :]), torch.tensor(y[12 * BATCH :])
    net = torch_net()
    if setup_net is not None:
        with torch.no_grad():
            setup_net(net)
    loss_fn = nn.CrossEntropyLoss()
    save = smd.SaveConfig(
        mode_save_configs={
            ModeKeys.TRAIN: smd.SaveConfigMode(save_interval=train_save),
            ModeKeys.EVAL: smd.SaveConfigMode(save_steps=[0]),
        }
    )
    hook = smd.Hook(
        out_dir=out,
        save_config=save,
        include_collections=collections
        or ["weights", "biases", "gradients", "losses", "relu_activations", "tanh_activations"],
    )
    activation_collections(hook)
    hook.get_collection("losses").save_config = smd.SaveConfig(save_interval=1)
    hook.register_module(net)
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    for _ in range(epochs):
        hook.set_mode(smd.modes.TRAIN)
        net.train()
        for b in range(12):
            sl = slice(b * BATCH, (b + 1) * BATCH)
            opt.zero_grad()
            loss = loss_fn(net(xt[sl]), yt[sl])
            loss.backward()
            opt.step()
        hook.set_mode(smd.modes.EVAL)
        net.eval()
        with torch.no_grad():
            for b in range(3):
                sl = slice(b * BATCH, (b + 1) * BATCH)
                loss_fn(net(xe[sl]), ye[sl])
    hook.close()


def pt_healthy(out):
    train_eval_loop(out, lr=0.1, epochs=3)


def pt_bugs(out):
    def break_net(net):
        # Every fc1 unit far below zero: relu1 outputs 0 for every sample (dead ReLUs), so fc1's
        # gradients are 0 too; fc2 sees only zeros and its bias puts tanh1's input at +-30.
        net.fc1.bias.fill_(-10.0)
        net.fc2.bias.copy_(
            (30.0 * (-1.0) ** __import__("torch").arange(HIDDEN)).to(net.fc2.bias.dtype)
        )

    # lr 0: the loss never moves and neither do the weights.
    train_eval_loop(out, lr=0.0, epochs=3, setup_net=break_net)


def pt_exploding(out):
    import numpy as np
    import torch
    import torch.nn as nn

    import smdebug.pytorch as smd

    torch_setup()
    rng = np.random.default_rng(2)
    x, y = blobs(rng, 8 * BATCH)
    x, y = torch.tensor(x), torch.tensor(y)
    net = torch_net()
    loss_fn = nn.MSELoss()
    hook = smd.Hook(
        out_dir=out,
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=["weights", "gradients", "losses"],
    )
    hook.register_module(net)
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    opt = torch.optim.SGD(net.parameters(), lr=1e4)
    target = torch.nn.functional.one_hot(y, CLASSES).float() * 100.0
    for b in range(8):
        sl = slice(b * BATCH, (b + 1) * BATCH)
        opt.zero_grad()
        loss = loss_fn(net(x[sl]), target[sl])
        loss.backward()
        opt.step()
    hook.close()


def pt_overfit(out):
    """The hook's default collections (losses only): a net that memorises 16 random labels
    while the held-out loss grows."""
    import numpy as np
    import torch
    import torch.nn as nn

    import smdebug.pytorch as smd

    torch_setup()
    rng = np.random.default_rng(3)
    xt = torch.tensor(rng.normal(size=(16, IN_FEATURES)).astype("float32"))
    yt = torch.tensor(rng.integers(0, CLASSES, size=16))
    xe = torch.tensor(rng.normal(size=(16, IN_FEATURES)).astype("float32"))
    ye = torch.tensor(rng.integers(0, CLASSES, size=16))
    net = nn.Sequential(nn.Linear(IN_FEATURES, 64), nn.ReLU(), nn.Linear(64, CLASSES))
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook(out_dir=out, save_config=smd.SaveConfig(save_interval=1))
    hook.register_module(net)
    hook.register_loss(loss_fn)
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    for _ in range(30):
        hook.set_mode(smd.modes.TRAIN)
        opt.zero_grad()
        loss_fn(net(xt), yt).backward()
        opt.step()
        hook.set_mode(smd.modes.EVAL)
        with torch.no_grad():
            loss_fn(net(xe), ye)
    hook.close()


def pt_two_workers_rank(out, rank, port):
    import numpy as np
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    import smdebug.pytorch as smd

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch_setup()
    rng = np.random.default_rng(4)
    x, y = blobs(rng, 2 * 4 * BATCH)
    x, y = torch.tensor(x[rank::2]), torch.tensor(y[rank::2])  # this worker's shard
    net = torch_net()
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook(
        out_dir=out,
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=["weights", "gradients", "losses"],
        include_workers="all",
    )
    hook.get_collection("gradients").reduction_config = smd.ReductionConfig(
        reductions=["mean", "max"], abs_reductions=["mean"], norms=["l2"]
    )
    hook.register_module(net)
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for b in range(4):
        sl = slice(b * BATCH, (b + 1) * BATCH)
        opt.zero_grad()
        loss_fn(net(x[sl]), y[sl]).backward()
        for p in net.parameters():  # data parallel: average the gradients over the workers
            dist.all_reduce(p.grad)
            p.grad /= 2
        opt.step()
    hook.close()
    dist.barrier()
    dist.destroy_process_group()


def pt_two_workers(out):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--rank", "pt_two_workers", out, str(r), str(port)]
        )
        for r in range(2)
    ]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise SystemExit(f"pt_two_workers: worker exit codes {codes}")


# ----------------------------------------------------------------------------- TensorFlow run


def tf_keras(out):
    """Runs under $HOOKS_TF_PYTHON: smdebug 1.0.34 supports TensorFlow below 2.12, which has no
    wheels for Python 3.11."""
    import numpy as np
    import tensorflow as tf

    import smdebug.tensorflow as smd

    tf.random.set_seed(0)
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    rng = np.random.default_rng(7)
    x, y = blobs(rng, 5 * 16)
    hook = smd.KerasHook(
        out_dir=out,
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=["weights", "biases", "gradients", "losses", "metrics"],
    )
    model = tf.keras.Sequential(
        [
            tf.keras.layers.Dense(HIDDEN, activation="relu", input_shape=(IN_FEATURES,)),
            tf.keras.layers.Dense(CLASSES),
        ]
    )
    model.compile(
        optimizer=hook.wrap_optimizer(tf.keras.optimizers.SGD(0.1)),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(
        x[:64],
        y[:64],
        batch_size=16,
        epochs=2,
        shuffle=False,
        validation_data=(x[64:], y[64:]),
        callbacks=[hook],
        verbose=0,
    )
    hook.close()


# ----------------------------------------------------------------------------- XGBoost runs

XGB_FEATURES = 6


def xgb_run(out, y, x, params, rounds, shap_rows):
    import xgboost as xgb

    import smdebug.xgboost as smdx

    split = len(y) * 3 // 4
    dtrain = xgb.DMatrix(x[:split], label=y[:split])
    dval = xgb.DMatrix(x[split:], label=y[split:])
    hook = smdx.Hook(
        out_dir=out,
        save_config=smdx.SaveConfig(save_interval=1),
        include_collections=[
            "hyperparameters",
            "metrics",
            "losses",
            "predictions",
            "labels",
            "feature_importance",
            "average_shap",
            "full_shap",
            "trees",
        ],
        hyperparameters={k: v for k, v in params.items() if isinstance(v, (int, float))},
        train_data=xgb.DMatrix(x[:shap_rows], label=y[:shap_rows]),
        validation_data=dval,
    )
    # SHAP values are large (rows x features x classes for each feature name): every 8th round.
    for c in ("full_shap", "average_shap"):
        hook.get_collection(c).save_config = smdx.SaveConfig(save_interval=8)
    xgb.train(
        dict(params, nthread=1, seed=0),
        dtrain,
        num_boost_round=rounds,
        evals=[(dtrain, "train"), (dval, "validation")],
        callbacks=[hook],
        verbose_eval=False,
    )
    hook._cleanup()  # what atexit would do: export collections, training_job_end.ts


def xgb_healthy(out):
    import numpy as np

    # Seed and spread chosen so that each of the first 24 trees grows to max_depth (TreeDepth's
    # default 4) and every predicted class stays over 90 % correct (Confusion's min_diag).
    rng = np.random.default_rng(1)
    n = 480
    y = np.arange(n) % 3
    rng.shuffle(y)
    # every feature carries the class a little: importance spreads over all of them
    centers = rng.normal(scale=1.8, size=(3, XGB_FEATURES))
    x = centers[y] + rng.normal(scale=1.0, size=(n, XGB_FEATURES))
    params = {
        "objective": "multi:softmax",
        "num_class": 3,
        "max_depth": 4,
        "eta": 0.15,
        "eval_metric": ["mlogloss", "merror"],
    }
    xgb_run(out, y.astype("float32"), x.astype("float32"), params, rounds=24, shap_rows=4)


def xgb_bugs(out):
    import numpy as np

    rng = np.random.default_rng(6)
    # class 0 dominates, class 2 is rare (training 211/20/9, validation 70/7/3)
    y_train = np.repeat([0, 1, 2], [211, 20, 9])
    y_val = np.repeat([0, 1, 2], [70, 7, 3])
    rng.shuffle(y_train)
    rng.shuffle(y_val)
    y = np.concatenate([y_train, y_val])
    x = rng.normal(size=(len(y), XGB_FEATURES))
    x[:, 0] = y + rng.normal(scale=0.6, size=len(y))  # the label leaks into feature 0
    params = {
        "objective": "multi:softmax",
        "num_class": 3,
        "max_depth": 3,
        "eta": 0.0,  # nothing is learned: predictions stay at the base score
        "eval_metric": ["mlogloss", "merror"],
    }
    xgb_run(out, y.astype("float32"), x.astype("float32"), params, rounds=24, shap_rows=4)


RUNS = {
    "pt_healthy": pt_healthy,
    "pt_bugs": pt_bugs,
    "pt_exploding": pt_exploding,
    "pt_overfit": pt_overfit,
    "pt_two_workers": pt_two_workers,
    "tf_keras": tf_keras,
    "xgb_healthy": xgb_healthy,
    "xgb_bugs": xgb_bugs,
}

# ----------------------------------------------------------------------------- expected.json


def json_value(v):
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return v


def record(name, g, mode, ms, worker, arr):
    import numpy as np

    arr = np.asarray(arr)
    flat = arr.reshape(-1)
    dtype = arr.dtype.name
    if arr.dtype.kind == "U":  # XGBoost's trees/ID, trees/Feature, ...: DT_STRING
        values, dtype = [str(v) for v in flat], "str"
    elif arr.dtype.kind == "f":
        values = [json_value(float(v)) for v in flat]
    elif arr.dtype.kind == "b":
        values = [bool(v) for v in flat]
    else:
        values = [int(v) for v in flat]
    return {
        "name": name,
        "step": int(g),
        "mode": mode.name,
        "mode_step": int(ms),
        "worker": worker,
        "dtype": dtype,
        "shape": list(arr.shape),
        "values": values,
    }


def dump_expected(run):
    """The expected.json of `run`, as smdebug's own Trial reads it."""
    from smdebug.core.access_layer.utils import has_training_ended
    from smdebug.core.modes import ModeKeys
    from smdebug.core.reductions import get_reduction_tensor_name
    from smdebug.trials import create_trial

    trial = create_trial(os.path.abspath(run))
    # Trial.modes() leaves out GLOBAL, the mode of every XGBoost step (its hook never sets one).
    modes = sorted({trial.mode_modestep(g)[0].name for g in trial.steps()})
    steps = {"GLOBAL": [int(s) for s in trial.steps()]}
    for m in modes:
        steps[m] = [int(s) for s in trial.steps(mode=ModeKeys[m])]
    collections = {
        name: {"tensor_names": sorted(c.tensor_names), "include_regex": list(c.include_regex)}
        for name, c in sorted(trial.collections().items())
    }
    tensors = []
    for name in sorted(trial.tensor_names()):
        t = trial.tensor(name)
        for m in modes:
            mode = ModeKeys[m]
            for ms in t.steps(mode=mode):
                g = trial.global_step(mode, ms)
                for w in sorted(t.workers(ms, mode=mode)):
                    s = t._step(ms, mode=mode, worker=w)
                    if s.location is not None:
                        tensors.append(record(name, g, mode, ms, w, t.value(ms, mode=mode, worker=w)))
                    for red, absolute in sorted(s.reduction_locations()):
                        v = t.reduction_value(ms, red, mode=mode, worker=w, abs=absolute)
                        red_name = get_reduction_tensor_name(name, red, absolute)
                        tensors.append(record(red_name, g, mode, ms, w, v))
    tensors.sort(key=lambda r: (r["step"], r["worker"], r["name"]))
    return {
        "run": {
            "workers": sorted(trial.workers()),
            "num_workers": trial.num_workers,
            "complete": bool(has_training_ended(os.path.abspath(run))),
            "write_checksum": False,
            "modes": modes,
            "steps": steps,
            "collections": collections,
        },
        "tensors": tensors,
    }


def make(name, out_dir):
    run = os.path.join(out_dir, name)
    shutil.rmtree(run, ignore_errors=True)
    python = sys.executable
    if name.startswith("tf_"):
        python = os.environ.get("HOOKS_TF_PYTHON")
        if not python:
            raise SystemExit(f"{name}: set HOOKS_TF_PYTHON to a Python with TensorFlow < 2.12")
    subprocess.run([python, __file__, "--make", name, run], check=True)
    expected = dump_expected(run)
    path = os.path.join(out_dir, f"{name}.expected.json")
    with open(path, "w") as f:
        json.dump(expected, f, separators=(",", ":"))
        f.write("\n")
    subprocess.run(
        [sys.executable, os.path.join(HERE, "check_with_smdebug.py"), run, path], check=True
    )


def main(argv):
    if len(argv) >= 2 and argv[1] == "--make":  # internal: one run, fresh process
        RUNS[argv[2]](argv[3])
        return 0
    if len(argv) >= 2 and argv[1] == "--rank":  # internal: one worker of pt_two_workers
        pt_two_workers_rank(argv[3], int(argv[4]), int(argv[5]))
        return 0
    args = argv[1:]
    names = list(RUNS)
    if args[:1] == ["--only"]:
        if len(args) < 2 or args[1] not in RUNS:
            print(f"--only needs one of {', '.join(RUNS)}", file=sys.stderr)
            return 2
        names, args = [args[1]], args[2:]
    if len(args) > 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out_dir = args[0] if args else DEFAULT_OUT
    os.makedirs(out_dir, exist_ok=True)
    for name in names:
        make(name, out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
