#!/usr/bin/env python3
"""Write a benchmark run with Python smdebug 1.0.34's real PyTorch hook.

Usage:
    python make_pytorch_hook_run.py OUT_DIR [STEPS]      (STEPS defaults to 10000)

Needs smdebug==1.0.34, torch (CPU is enough; 2.2.2 was used) and 'numpy<2' in the interpreter
that runs it (see DEVELOPERS.md, "The hook corpus", for the venv). OUT_DIR must not exist.

The run: one worker, TRAIN mode, every step saved (SaveConfig(save_interval=1)), 7 tensors a
step: the weights of three bias-free Linear layers (`Net_fc1.weight`, ...), their gradients
(`gradient/Net_fc1.weight`, ...) and the loss (`CrossEntropyLoss_output_0`). It is what the
Trial benchmarks read when they compare our reader with Python's on a run the real hook wrote
(BENCHMARKS.md), rather than one our own writer made.
"""

import os
import sys

import numpy as np
import torch
import torch.nn as nn

os.environ.setdefault("SMDEBUG_LOG_LEVEL", "error")

import smdebug.pytorch as smd  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32, bias=False)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(32, 32, bias=False)
        self.relu2 = nn.ReLU()
        self.fc3 = nn.Linear(32, 4, bias=False)

    def forward(self, x):
        return self.fc3(self.relu2(self.fc2(self.relu1(self.fc1(x)))))


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out = argv[1]
    steps = int(argv[2]) if len(argv) == 3 else 10_000
    if os.path.exists(out):
        print(f"FAIL: {out} exists", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x_all = torch.tensor(rng.normal(size=(1024, 16)), dtype=torch.float32)
    y_all = torch.tensor(rng.integers(0, 4, size=1024), dtype=torch.int64)

    net = Net()
    loss_fn = nn.CrossEntropyLoss()
    hook = smd.Hook(
        out_dir=out,
        save_config=smd.SaveConfig(save_interval=1),
        include_collections=["weights", "gradients", "losses"],
    )
    hook.register_module(net)
    hook.register_loss(loss_fn)
    hook.set_mode(smd.modes.TRAIN)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    batch = 32
    for step in range(steps):
        i = (step * batch) % len(x_all)
        x, y = x_all[i : i + batch], y_all[i : i + batch]
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
    hook.close()
    print(f"OK: {out}: {steps} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
